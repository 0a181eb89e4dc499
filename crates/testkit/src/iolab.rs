//! Running the built `iolab` binary: a sandbox directory holding the result database and
//! the target, command runners, and the finished process with its output.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::scratch::scratch_dir;

/// The `iolab` binary of the build running this test: `IOLAB_BIN` when set, else the
/// `iolab` next to the test executable's `deps/` directory (where cargo puts the binary
/// that `CARGO_BIN_EXE_iolab` names for the cli crate's tests).
pub fn iolab_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("IOLAB_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().and_then(|d| d.parent()).unwrap().join("iolab");
    assert!(
        bin.is_file(),
        "no iolab binary at {} (set IOLAB_BIN)",
        bin.display()
    );
    bin
}

/// A temporary directory on the build directory's filesystem (not a tmpfs) with the result
/// database `r.db` and an empty target directory `t/`.
pub struct Sandbox {
    pub dir: TempDir,
    pub db: PathBuf,
    pub target: PathBuf,
    /// The state directory (`IOLAB_STATE_DIR`) of every command: apart from `dir`, whose
    /// listing tests compare.
    state: TempDir,
}

/// A test that fails (panics) halfway leaves what its commands recorded in the sandbox's
/// state directory (a study's mounts and loop devices, a killed run's files): the drop
/// runs `iolab cleanup` on it, as a user would, so that one failure does not leave devices
/// behind for the tests after it.
impl Drop for Sandbox {
    fn drop(&mut self) {
        let dir = self.state_dir();
        if fs::read_dir(&dir).map_or(true, |mut d| d.next().is_none()) {
            return;
        }
        match Command::new(iolab_bin())
            .arg("cleanup")
            .arg("--state-dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "sandbox: iolab cleanup --state-dir {} exited {}: {}",
                dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("sandbox: iolab cleanup: {e}"),
        }
    }
}

impl Default for Sandbox {
    fn default() -> Sandbox {
        Sandbox::new()
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = scratch_dir();
        let db = dir.path().join("r.db");
        let target = dir.path().join("t");
        fs::create_dir(&target).unwrap();
        Sandbox {
            dir,
            db,
            target,
            state: scratch_dir(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `iolab <args> --db r.db` (the database is always the sandbox's; `iolab ab --db r.db
    /// <args>`).
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(iolab_bin());
        // `ab`'s own options come before its two commands: --db goes right after it.
        if args.first() == Some(&"ab") {
            c.arg("ab").arg("--db").arg(&self.db).args(&args[1..]);
        } else {
            c.args(args);
        }
        // Only the commands that read or write the result database take --db.
        let stores = !matches!(
            args.first().copied(),
            Some(
                "env"
                    | "verify"
                    | "cleanup"
                    | "presets"
                    | "export-fio"
                    | "crosscheck"
                    | "record"
                    | "ab"
            )
        );
        if stores {
            c.arg("--db").arg(&self.db);
        }
        c
            // Keep anything that would go to a default location inside the sandbox; its own
            // state directory, so that `iolab cleanup` in one test (or one of two suites on
            // a machine) never meets what another left running.
            .env("XDG_DATA_HOME", self.dir.path())
            .env("HOME", self.dir.path())
            .env("IOLAB_STATE_DIR", self.state_dir())
            .stdin(Stdio::null());
        c
    }

    /// The state directory every command of this sandbox uses (`IOLAB_STATE_DIR`): its run
    /// state and testbed state files.
    pub fn state_dir(&self) -> PathBuf {
        self.state.path().to_path_buf()
    }

    /// Runs `iolab <args> --db r.db`.
    pub fn iolab(&self, args: &[&str]) -> Out {
        let start = Instant::now();
        let out = self.cmd(args).output().unwrap();
        Out::new(args, out, start.elapsed())
    }

    /// Runs `iolab run <args> --target t/ --db r.db --quiet`.
    pub fn run(&self, args: &[&str]) -> Out {
        let mut v = vec!["run"];
        v.extend_from_slice(args);
        v.extend_from_slice(&["--target", self.target.to_str().unwrap(), "--quiet"]);
        self.iolab(&v)
    }

    /// Starts `iolab run <args> --target t/ --db r.db --quiet` in the background.
    pub fn spawn_run(&self, args: &[&str]) -> Child {
        let mut v = vec!["run"];
        v.extend_from_slice(args);
        v.extend_from_slice(&["--target", self.target.to_str().unwrap(), "--quiet"]);
        self.cmd(&v)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Entries of the target directory.
    pub fn target_entries(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(&self.target)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    /// `iolab results` output.
    pub fn results(&self) -> String {
        self.iolab(&["results"]).ok().stdout
    }

    /// The rows of `iolab results` as (id, preset, status), read from the columns the
    /// header line names.
    pub fn result_rows(&self) -> Vec<(i64, String, String)> {
        let text = self.results();
        let Some(header) = text.lines().find(|l| l.trim_start().starts_with("ID ")) else {
            return Vec::new();
        };
        // Columns are found by character, not byte: a shortened target starts with `…`
        // (three bytes, one column), which moved every later byte offset (the rows of a
        // sandbox under a long build path were misread: status "1").
        let col = |name: &str| {
            let at = header
                .find(name)
                .unwrap_or_else(|| panic!("no {name} column in {header:?}"));
            header[..at].chars().count()
        };
        let (preset_at, status_at) = (col("Preset"), col("Status"));
        let word_at = |l: &str, at: usize| -> String {
            l.chars()
                .skip(at)
                .collect::<String>()
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_string()
        };
        // Rows come after the header's dashed underline; the count line ("2 runs") is not one.
        text.lines()
            .skip_while(|l| !l.starts_with("---"))
            .skip(1)
            .filter(|l| l.split_whitespace().count() >= 5)
            .filter_map(|l| {
                let id = l.split_whitespace().next()?.parse().ok()?;
                Some((id, word_at(l, preset_at), word_at(l, status_at)))
            })
            .collect()
    }
}

/// A finished `iolab` process.
pub struct Out {
    pub args: Vec<String>,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Out {
    pub fn new(args: &[&str], out: Output, elapsed: Duration) -> Out {
        Out {
            args: args.iter().map(|s| s.to_string()).collect(),
            code: out.status.code(),
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
            elapsed,
        }
    }

    /// Panics unless the exit code is 0.
    #[track_caller]
    pub fn ok(self) -> Out {
        assert_eq!(self.code, Some(0), "{self}");
        self
    }

    /// Panics unless the exit code is `code`.
    #[track_caller]
    pub fn code(self, code: i32) -> Out {
        assert_eq!(self.code, Some(code), "{self}");
        self
    }

    /// Panics unless stderr contains every one of `needles`.
    #[track_caller]
    pub fn stderr_has(&self, needles: &[&str]) -> &Out {
        for n in needles {
            assert!(self.stderr.contains(n), "stderr lacks {n:?}: {self}");
        }
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self}"))
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "iolab {:?} exited with {:?} after {:?}\n--- stdout:\n{}\n--- stderr:\n{}",
            self.args, self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// The run's report: what `run` prints before "stored as run", and what `show` prints
/// before the environment section it adds.
pub fn table_part(stdout: &str) -> String {
    let lines: Vec<&str> = stdout
        .lines()
        .take_while(|l| !l.starts_with("stored as run") && !l.starts_with("Environment captured"))
        .collect();
    let end = lines
        .iter()
        .rposition(|l| !l.trim().is_empty())
        .map_or(0, |i| i + 1);
    lines[..end].iter().map(|l| format!("{l}\n")).collect()
}
