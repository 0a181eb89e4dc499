//! Helpers for driving the real `iolab` binary: a sandbox directory holding the result
//! database and the target, command runners, and loop devices that detach themselves.

#![allow(dead_code)]

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

pub const MIB: u64 = 1 << 20;

/// A temporary directory on the build directory's filesystem (not a tmpfs) with the result
/// database `r.db` and an empty target directory `t/`.
pub struct Sandbox {
    pub dir: TempDir,
    pub db: PathBuf,
    pub target: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let db = dir.path().join("r.db");
        let target = dir.path().join("t");
        fs::create_dir(&target).unwrap();
        Sandbox { dir, db, target }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `iolab <args> --db r.db` (the database is always the sandbox's).
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_iolab"));
        c.args(args);
        // Only the commands that read or write the result database take --db.
        let stores = !matches!(
            args.first().copied(),
            Some("env" | "verify" | "cleanup" | "presets" | "export-fio" | "crosscheck")
        );
        if stores {
            c.arg("--db").arg(&self.db);
        }
        c
            // Keep anything that would go to a default location inside the sandbox.
            .env("XDG_DATA_HOME", self.dir.path())
            .env("HOME", self.dir.path())
            .stdin(Stdio::null());
        c
    }

    /// Runs `iolab <args> --db r.db` (`--db` only for the commands that take it).
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
        let col = |name: &str| {
            header
                .find(name)
                .unwrap_or_else(|| panic!("no {name} column in {header:?}"))
        };
        let (preset_at, status_at) = (col("Preset"), col("Status"));
        let word_at = |l: &str, at: usize| -> String {
            l.get(at..)
                .unwrap_or("")
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

/// The table part of a run's terminal output: everything before the "stored as run" line.
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

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// Field access that names the missing key.
#[track_caller]
pub fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key)
        .unwrap_or_else(|| panic!("key {key:?} missing in {v}"))
}

#[track_caller]
pub fn num(v: &Value, key: &str) -> f64 {
    get(v, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

#[track_caller]
pub fn uint(v: &Value, key: &str) -> u64 {
    get(v, key)
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer: {v}"))
}

#[track_caller]
pub fn arr<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    get(v, key)
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array: {v}"))
}

#[track_caller]
pub fn string<'a>(v: &'a Value, key: &str) -> &'a str {
    get(v, key)
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string: {v}"))
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    // xorshift64*: enough to make content nobody would write by accident.
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(len);
    v
}

// --- root-only helpers -----------------------------------------------------------------

/// The path of an external tool, looking in PATH and the sbin directories.
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs a tool and returns its trimmed stdout; panics on failure.
#[track_caller]
pub fn sh(name: &str, args: &[&str]) -> String {
    let prog = tool(name).unwrap_or_else(|| panic!("{name} not found"));
    let out = Command::new(&prog).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Device tests run one at a time, and only as root with the tools they need. Prints
/// "skipped: <reason>" and returns None otherwise.
pub fn device_test(tools: &[&str]) -> Option<MutexGuard<'static, ()>> {
    static LOCK: Mutex<()> = Mutex::new(());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root for loop devices");
        return None;
    }
    for t in ["losetup"].iter().chain(tools) {
        if tool(t).is_none() {
            println!("skipped: {t} is not installed");
            return None;
        }
    }
    if !Path::new("/dev/loop-control").exists() {
        println!("skipped: no /dev/loop-control (loop driver missing)");
        return None;
    }
    Some(LOCK.lock().unwrap_or_else(PoisonError::into_inner))
}

/// A loop device over a sparse image file, detached on drop (also when a test panics).
pub struct Loop {
    pub dev: PathBuf,
    _dir: TempDir,
}

impl Loop {
    /// A blank (all-zero) device of `size` bytes, optionally with a 4096-byte logical block.
    pub fn new(size: u64, sector_size: Option<u32>) -> Loop {
        let ss = sector_size.map(|s| s.to_string());
        match &ss {
            Some(s) => Loop::with_options(size, &["--sector-size", s]),
            None => Loop::with_options(size, &[]),
        }
    }

    /// A blank device with extra `losetup` options (e.g. `--direct-io=on`).
    pub fn with_options(size: u64, options: &[&str]) -> Loop {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let img = dir.path().join("disk.img");
        File::create(&img).unwrap().set_len(size).unwrap();
        let mut args = vec!["-f", "--show"];
        args.extend_from_slice(options);
        args.push(img.to_str().unwrap());
        let dev = PathBuf::from(sh("losetup", &args));
        Loop { dev, _dir: dir }
    }

    pub fn s(&self) -> &str {
        self.dev.to_str().unwrap()
    }

    /// The whole device, read through the page cache.
    pub fn contents(&self) -> Vec<u8> {
        let mut v = Vec::new();
        File::open(&self.dev).unwrap().read_to_end(&mut v).unwrap();
        v
    }

    /// "major:minor" of the device.
    pub fn majmin(&self) -> String {
        let name = self.dev.file_name().unwrap().to_str().unwrap();
        fs::read_to_string(format!("/sys/block/{name}/dev"))
            .unwrap()
            .trim()
            .to_string()
    }

    fn backing_file(&self) -> PathBuf {
        let name = self.dev.file_name().unwrap().to_str().unwrap();
        PathBuf::from(format!("/sys/block/{name}/loop/backing_file"))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Some(losetup) = tool("losetup") {
            let _ = Command::new(losetup).arg("-d").arg(&self.dev).status();
        }
        // Detaching completes asynchronously once the last opener is gone; wait for it so
        // the image (removed with the temporary directory next) is not still in use.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.backing_file().exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
