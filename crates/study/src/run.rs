//! Running a study: for each step of the schedule, build the configuration's testbed
//! (iolab-testbed), run every workload on it as a child `iolab run` inside the testbed's
//! throttle cgroup (reading the child's run document from its standard output), tear it
//! down, and print the comparison of the stored runs (iolab-report). Teardown happens on
//! success, on error, on Ctrl-C and on SIGTERM; what a kill -9 leaves, `iolab cleanup`
//! removes.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iolab_report::set::RunSet;
use iolab_report::{html, markdown};
use iolab_runner::RunError;
use iolab_store::Store;
use iolab_testbed::{StateFile, Testbed, TestbedError};

use crate::{schedule, Study, Workload};

/// Where and how a study is run.
pub struct RunOptions {
    /// The result database the runs are stored in.
    pub db: PathBuf,
    /// Whether `--db` was given (repeated in the "again later" hint).
    pub db_given: bool,
    /// Also write the HTML report here.
    pub html: Option<PathBuf>,
}

/// Ctrl-C, SIGTERM and SIGHUP (a closed terminal) only raise the flag: a study always tears
/// down what it built, so a second signal does not cut that short (a kill -9 does; then
/// `iolab cleanup`).
fn install_signals() -> Result<Arc<AtomicBool>, RunError> {
    let stop = Arc::new(AtomicBool::new(false));
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| RunError::Failed(format!("signals: {e}")))?;
    }
    Ok(stop)
}

/// What happened to one visit's runs.
struct Outcome {
    run_ids: Vec<i64>,
    failures: Vec<String>,
    interrupted: bool,
}

/// Runs every step of `study`; exit status 0 when every run was stored.
pub fn execute(study: &Study, opts: &RunOptions) -> Result<i32, RunError> {
    let stop = install_signals()?;
    // Open (and migrate) the database before building anything.
    let store = Store::open(&opts.db)?;
    // What the child runs are given (a URL with its password, if it has one); the store
    // names itself without it.
    let db_path = opts.db.clone();
    let db_shown = store.path().display().to_string();
    let state_dir = StateFile::default_dir().map_err(|e| RunError::Failed(e.to_string()))?;
    let exe = std::env::current_exe()
        .map_err(|e| RunError::Failed(format!("cannot find the iolab binary: {e}")))?;
    let invocation = uuid::Uuid::new_v4().to_string();
    let steps = schedule(study);
    let total = study.run_count();
    println!(
        "Study {} ({}): {} configuration(s), {} workload(s), {} repeat(s): {total} runs, \
         {} order",
        study.name,
        study.file,
        study.configs.len(),
        study.workloads.len(),
        study.repeats,
        study.order.as_str()
    );
    let started = Instant::now();
    let mut out = Outcome {
        run_ids: Vec::new(),
        failures: Vec::new(),
        interrupted: false,
    };
    let mut done = 0usize;
    for step in &steps {
        if stop.load(Ordering::Relaxed) {
            out.interrupted = true;
            break;
        }
        let cfg = &study.configs[step.config];
        println!(
            "round {}/{} · {}: building",
            step.round + 1,
            study.repeats,
            cfg.label
        );
        let state = StateFile::create(&state_dir).map_err(|e| RunError::Failed(e.to_string()))?;
        let tb = match iolab_testbed::build(&cfg.testbed, &state, &stop) {
            Ok(tb) => tb,
            Err(TestbedError::Interrupted) => {
                out.interrupted = true;
                break;
            }
            Err(e) => {
                let msg = format!("{}: building the testbed failed: {e}", cfg.label);
                eprintln!("iolab: {msg}");
                out.failures.push(msg);
                done += study
                    .workloads
                    .iter()
                    .filter(|w| w.applies_to(&cfg.label))
                    .count();
                continue;
            }
        };
        let visit = Visit {
            study,
            step_round: step.round,
            config: step.config,
            invocation: &invocation,
            exe: &exe,
            db: &db_path,
            stop: &stop,
        };
        for w in study.workloads.iter().filter(|w| w.applies_to(&cfg.label)) {
            if stop.load(Ordering::Relaxed) {
                out.interrupted = true;
                break;
            }
            done += 1;
            match visit.run_workload(&tb, w, done, total) {
                Ok(Some(r)) => {
                    let run = store.load_run(r.id)?;
                    println!(
                        "  [{done}/{total}] {} · {}: run #{} ({:.1} s){}{}",
                        cfg.label,
                        w.label,
                        r.id,
                        r.secs,
                        run_summary(&run),
                        eta(started.elapsed(), done, total)
                    );
                    out.run_ids.push(r.id);
                    if let Some(msg) = r.integrity {
                        eprintln!("iolab: {msg}");
                        out.failures.push(msg);
                    }
                }
                Ok(None) => out.interrupted = true,
                Err(msg) => {
                    eprintln!("iolab: {msg}");
                    out.failures.push(msg);
                }
            }
        }
        if let Err(e) = tb.teardown() {
            let msg = format!(
                "{}: teardown left something behind ({e}); run `iolab cleanup`",
                cfg.label
            );
            eprintln!("iolab: {msg}");
            out.failures.push(msg);
        }
        if out.interrupted {
            break;
        }
    }
    if out.interrupted {
        eprintln!("iolab: study interrupted; everything it built has been torn down");
    }
    println!(
        "{} run(s) stored in {} in {:.0} s",
        out.run_ids.len(),
        db_shown,
        started.elapsed().as_secs_f64()
    );
    if !out.run_ids.is_empty() {
        let mut runs = Vec::new();
        for id in &out.run_ids {
            runs.push(store.load_run(*id)?);
        }
        let mut set = RunSet::study(&study.name, runs);
        // Earlier runs of the same configurations measure the noise of a single repeat.
        let noise = iolab_report::set::Noise::load(
            &set.run_ids(),
            |id| store.fingerprint(id),
            |fp, n| {
                store.runs_like(fp, n, &mut |id, e| {
                    eprintln!("iolab: warning: run {id} left out of the noise: {e}")
                })
            },
        )?;
        set.set_noise(noise);
        let base = &study.configs[study.baseline].label;
        if set.set_baseline(base).is_err() {
            println!("(the baseline '{base}' has no runs; comparing with the first configuration)");
        }
        println!();
        // Coloured on a terminal (unsafe caveats, significant changes), as the binary set.
        print!("{}", iolab_report::style::paint(&markdown::render(&set)));
        if let Some(path) = &opts.html {
            std::fs::write(path, html::render(&set))
                .map_err(|e| RunError::Failed(format!("cannot write {}: {e}", path.display())))?;
            println!("HTML report written to {}", path.display());
        }
        println!(
            "Again later: iolab report --study '{}'{} [--html FILE]",
            study.name,
            if opts.db_given {
                format!(" --db {db_shown}")
            } else {
                String::new()
            }
        );
    }
    for f in &out.failures {
        eprintln!("iolab: failed: {f}");
    }
    if out.interrupted {
        Err(RunError::Interrupted)
    } else if !out.failures.is_empty() {
        Err(RunError::Failed(format!(
            "{} of the study's steps failed (see above)",
            out.failures.len()
        )))
    } else {
        Ok(0)
    }
}

/// A run that finished and was stored; `integrity` says what failed when it exited 3 or 4.
struct Stored {
    id: i64,
    secs: f64,
    integrity: Option<String>,
}

/// ` · ETA 12m 30s`: the time left if the remaining runs take as long as the finished ones
/// did on average (builds included); empty when all are done.
fn eta(elapsed: std::time::Duration, done: usize, total: usize) -> String {
    if done == 0 || done >= total {
        return String::new();
    }
    let left = elapsed.mul_f64((total - done) as f64 / done as f64);
    format!(" · ETA {}", iolab_runner::progress::short_duration(left))
}

/// One configuration built for one round.
struct Visit<'a> {
    study: &'a Study,
    step_round: u32,
    config: usize,
    invocation: &'a str,
    exe: &'a Path,
    db: &'a Path,
    stop: &'a AtomicBool,
}

impl Visit<'_> {
    /// What is stored with the run: which invocation, round and configuration, the matrix
    /// values, the testbed as written and as built.
    fn meta(&self, tb: &Testbed, w: &Workload) -> serde_json::Value {
        let cfg = &self.study.configs[self.config];
        let matrix: serde_json::Map<String, serde_json::Value> = cfg
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        serde_json::json!({
            "invocation": self.invocation,
            "file": self.study.file,
            "round": self.step_round + 1,
            "repeats": self.study.repeats,
            "order": self.study.order.as_str(),
            "baseline": self.study.configs[self.study.baseline].label,
            "workload": {"kind": w.kind, "label": w.label, "options": w.options},
            "matrix": matrix,
            "testbed": serde_json::to_value(&cfg.testbed_table).unwrap_or_default(),
            "built": serde_json::to_value(tb.describe()).unwrap_or_default(),
        })
    }

    /// Runs workload `w` on `tb` as a child `iolab run`: `Ok(Some(run id))`, `Ok(None)` when
    /// interrupted, `Err` with what went wrong.
    fn run_workload(
        &self,
        tb: &Testbed,
        w: &Workload,
        n: usize,
        total: usize,
    ) -> Result<Option<Stored>, String> {
        let cfg = &self.study.configs[self.config];
        let who = format!("{} · {}", cfg.label, w.label);
        let (target, extra): (PathBuf, Vec<&str>) = match tb.work_dir() {
            Some(d) => (d.to_path_buf(), vec![]),
            None => match tb.devices().first() {
                Some(d) => (d.path.clone(), vec!["--allow-destroy-device"]),
                None => return Err(format!("{who}: the testbed has no directory or device")),
            },
        };
        if self.study.drop_caches {
            iolab_sys::drop_caches()
                .map_err(|e| format!("{who}: cannot drop the page cache: {e}"))?;
        }
        // The description goes through the child's standard input: no file to leave behind
        // if the study is killed.
        let meta = self.meta(tb, w).to_string();
        let mut cmd = Command::new(self.exe);
        // Every value the study sets is joined to its option (`--label=VALUE`): a label,
        // name or path can never be read as an option of its own.
        let joined = |opt: &str, v: &std::ffi::OsStr| {
            let mut s = std::ffi::OsString::from(format!("{opt}="));
            s.push(v);
            s
        };
        cmd.arg("run")
            .arg(&w.kind)
            .args(&w.args)
            .arg(joined("--target", target.as_os_str()))
            .args(extra)
            .arg(joined("--db", self.db.as_os_str()))
            .arg(joined("--label", w.label.as_ref()))
            .arg(joined("--study", self.study.name.as_ref()))
            .arg(joined("--config", cfg.label.as_ref()))
            .arg("--study-meta")
            .arg("-")
            .arg("--json")
            .arg("-")
            .arg("--quiet")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C reaches the study, which stops the run once.
            .process_group(0);
        let procs = match tb.cgroup() {
            Some(dir) => Some(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
                    .map_err(|e| format!("{who}: cannot open the throttle cgroup: {e}"))?,
            ),
            None => None,
        };
        let procs_fd = procs.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        // SAFETY: between fork and exec only prctl(2) and write(2) are called, both
        // async-signal-safe. PR_SET_PDEATHSIG: if the study is killed (even with SIGKILL),
        // the run gets SIGTERM, stores what it finished and leaves the testbed, so
        // `iolab cleanup` finds nothing busy. Writing "0" to cgroup.procs moves the calling
        // process (the child) into the throttle cgroup before it opens anything.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(fd) = procs_fd {
                    if libc::write(fd, b"0\n".as_ptr().cast(), 2) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let t0 = Instant::now();
        let child = cmd
            .spawn()
            .map_err(|e| format!("{who}: cannot start {}: {e}", self.exe.display()));
        drop(procs);
        let result = child.and_then(|mut c| {
            // From a thread, so a description larger than the pipe never blocks the study;
            // a child that exits before reading it makes the write fail harmlessly.
            if let Some(mut stdin) = c.stdin.take() {
                std::thread::spawn(move || {
                    use std::io::Write;
                    let _ = stdin.write_all(meta.as_bytes());
                });
            }
            wait_forwarding(c, self.stop, &who)
        });
        let (status, stdout, stderr) = result?;
        let secs = t0.elapsed().as_secs_f64();
        // With `--json -` the child's standard output is its run document alone.
        let run_id = serde_json::from_str::<serde_json::Value>(stdout.trim())
            .ok()
            .and_then(|doc| doc["run_id"].as_i64());
        match status.code() {
            Some(0) => run_id
                .map(|id| {
                    Some(Stored {
                        id,
                        secs,
                        integrity: None,
                    })
                })
                .ok_or_else(|| {
                    format!("{who}: the run finished but did not say where it was stored")
                }),
            // An integrity failure is a result: the run is stored and compared, and the
            // study reports the failure.
            Some(code @ (3 | 4)) if run_id.is_some() => Ok(Some(Stored {
                id: run_id.expect("checked"),
                secs,
                integrity: Some(format!(
                    "{who}: `iolab run {}` found an integrity failure (exit {code}; see its \
                     warnings)",
                    w.kind
                )),
            })),
            Some(130) => {
                println!("  [{n}/{total}] {who}: interrupted");
                Ok(None)
            }
            _ => Err(format!(
                "{who}: `iolab run {}` {}",
                w.kind,
                child_failure(status, &stderr)
            )),
        }
    }
}

/// The first tests' headlines and the run's warning codes, for the progress line.
fn run_summary(run: &iolab_measure::RunRecord) -> String {
    let mut parts: Vec<String> = run
        .tests
        .iter()
        .take(2)
        .map(|t| {
            if t.summary.mb_s > 0.0 {
                format!("{} {:.1} MB/s", t.name, t.summary.mb_s)
            } else {
                format!("{} {:.0} IOPS", t.name, t.summary.iops)
            }
        })
        .collect();
    if run.tests.len() > 2 {
        parts.push("...".into());
    }
    let mut codes: Vec<&str> = Vec::new();
    for w in &run.warnings {
        if !codes.contains(&w.code.as_str()) {
            codes.push(w.code.as_str());
        }
    }
    let mut s = format!(": {}", parts.join(", "));
    if !codes.is_empty() {
        s.push_str(&format!(" — ⚠ {}", codes.join(", ")));
    }
    s
}

type ChildOutput = (ExitStatus, String, String);

/// Waits for the child, collecting its output; when the stop flag rises, sends it one
/// SIGTERM (it then stores what it finished and exits 130).
fn wait_forwarding(mut child: Child, stop: &AtomicBool, who: &str) -> Result<ChildOutput, String> {
    let collect = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = collect(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = collect(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let mut forwarded = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(format!("{who}: waiting for the run: {e}")),
        }
        if stop.load(Ordering::Relaxed) && !forwarded {
            forwarded = true;
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

/// How a child run ended badly, and the end of what it said on stderr.
fn child_failure(status: std::process::ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by {}", signal_name(sig)),
        (None, None) => format!("ended without an exit status ({status})"),
    };
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    if tail.is_empty() {
        format!("{how}; it printed nothing on stderr")
    } else {
        format!("{how}: {}", tail.join(" / "))
    }
}

/// A signal's name and number, as `kill -l` would name it ("SIGKILL (9)").
fn signal_name(sig: i32) -> String {
    match signal_hook::low_level::signal_name(sig) {
        Some(name) => format!("{name} ({sig})"),
        None => format!("signal {sig}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_killed_by_a_signal_is_named_with_it() {
        // A raw wait status of 9: killed by signal 9.
        let m = child_failure(std::process::ExitStatus::from_raw(9), "");
        assert_eq!(m, "was killed by SIGKILL (9); it printed nothing on stderr");
        let m = child_failure(std::process::ExitStatus::from_raw(1 << 8), "a\nb\n");
        assert_eq!(m, "exited with status 1: a / b");
        let m = child_failure(std::process::ExitStatus::from_raw(64), "");
        assert!(m.starts_with("was killed by signal 64"), "{m}");
    }
}
