//! `iolab study` and `iolab cleanup`: reads a study file (iolab-study), builds each
//! configuration (iolab-testbed), runs every workload on it as a child `iolab run` inside
//! the testbed's throttle cgroup, tears it down, and prints the comparison of the stored
//! runs (iolab-report). Teardown happens on success, on error, on Ctrl-C and on SIGTERM;
//! what a kill -9 leaves, `iolab cleanup` removes.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use iolab_report::set::RunSet;
use iolab_report::{html, markdown};
use iolab_study::{parse, schedule, Study, Workload, WorkloadProblem};
use iolab_testbed::{Kind, StateFile, Testbed, TestbedError};

use crate::args::{CleanupArgs, Cli, Command as CliCommand, StudyArgs};
use crate::commands::{open_store, CliError};

/// Ctrl-C and SIGTERM only raise the flag: a study always tears down what it built, so a
/// second signal does not cut that short (a kill -9 does; then `iolab cleanup`).
fn install_signals() -> Result<Arc<AtomicBool>, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    }
    Ok(stop)
}

/// Checks a workload's options with `iolab run`'s own grammar and option rules.
fn check_workload(w: &Workload) -> Result<(), WorkloadProblem> {
    let mut argv: Vec<String> = vec!["iolab".into(), "run".into(), w.kind.clone()];
    argv.extend(w.args.iter().cloned());
    let key_of = |flag: &str| flag.trim_start_matches('-').replace('-', "_");
    let cli = Cli::try_parse_from(&argv).map_err(|e| {
        let key = e
            .get(clap::error::ContextKind::InvalidArg)
            .map(|v| key_of(&v.to_string()))
            .map(|k| k.split_whitespace().next().unwrap_or("").to_string())
            .filter(|k| !k.is_empty());
        let text = e.to_string();
        let first = text
            .lines()
            .next()
            .unwrap_or("")
            .trim_start_matches("error: ");
        WorkloadProblem {
            key,
            message: format!("not an option of `iolab run {}`: {first}", w.kind),
        }
    })?;
    let CliCommand::Run(a) = cli.command else {
        unreachable!("argv starts with run")
    };
    let known =
        iolab_spec::preset_info(a.preset()).is_some() || crate::workloads::is_workload(a.preset());
    if !known {
        return Err(WorkloadProblem {
            key: Some("kind".into()),
            message: format!(
                "unknown workload '{}' (presets: {}; workloads: {})",
                w.kind,
                iolab_spec::preset_names().join(", "),
                crate::workloads::WORKLOADS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    if crate::workloads::is_workload(a.preset()) {
        return check_workload_values(w);
    }
    crate::run::plan(&a).map(|_| ()).map_err(|e| {
        let message = e.to_string();
        let key = message
            .strip_prefix("--")
            .and_then(|m| m.split([' ', ':', '\'']).next())
            .map(key_of);
        WorkloadProblem { key, message }
    })
}

/// The values a workload parses when it starts, checked now so a typo fails the dry run
/// rather than a run in the middle of a study.
fn check_workload_values(w: &Workload) -> Result<(), WorkloadProblem> {
    let problem = |key: &str, message: String| WorkloadProblem {
        key: Some(key.to_string()),
        message,
    };
    for (key, value) in &w.options {
        let flag = key.replace('_', "-");
        match key.as_str() {
            "size" | "bs" | "file_size" => {
                iolab_spec::parse_size(&flag, value).map_err(|e| problem(key, format!("--{e}")))?;
            }
            "duration" | "time" | "stagger" | "warmup" | "warmup_time" | "ramp" => {
                iolab_spec::parse_duration(&flag, value)
                    .map_err(|e| problem(key, format!("--{e}")))?;
            }
            "sizes" => {
                for item in value.split(',') {
                    iolab_spec::parse_size("sizes", item.trim())
                        .map_err(|e| problem(key, format!("--{e}")))?;
                }
            }
            "methods" => {
                for item in value.split(',') {
                    if iolab_workloads::fsync::SyncMethod::parse(item.trim()).is_none() {
                        return Err(problem(
                            key,
                            format!(
                                "'{item}': expected none, fdatasync, fsync, O_DSYNC, O_SYNC or \
                                 O_DIRECT+O_DSYNC"
                            ),
                        ));
                    }
                }
            }
            "rw" if w.kind == "streams" && value != "read" && value != "write" => {
                return Err(problem(key, format!("'{value}': streams read or write")));
            }
            _ => {}
        }
    }
    Ok(())
}

fn load(file: &Path) -> Result<Study, CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::Usage(format!("{}: {e}", file.display())))?;
    parse(&file.display().to_string(), &text, &mut check_workload)
        .map_err(|e| CliError::Usage(e.to_string()))
}

pub fn study(args: StudyArgs) -> Result<i32, CliError> {
    if args.list_testbeds {
        print!("{}", catalogue());
        return Ok(0);
    }
    let file = args.file.clone().expect("clap requires FILE");
    let mut study = load(&file)?;
    if let Some(b) = &args.baseline {
        study.baseline = study
            .configs
            .iter()
            .position(|c| &c.label == b)
            .ok_or_else(|| {
                CliError::Usage(format!(
                    "--baseline '{b}': no configuration of {} has that label",
                    file.display()
                ))
            })?;
    }
    if args.dry_run {
        print!("{}", dry_run_text(&study));
        return Ok(0);
    }
    let needs_root =
        study.configs.iter().any(|c| c.testbed.kind == Kind::Loop) || study.drop_caches;
    if needs_root && !iolab_sys::is_root() {
        return Err(CliError::Usage(format!(
            "{}: this study builds loop-device testbeds{}, which needs root; run it with sudo \
             (or check it with --dry-run)",
            file.display(),
            if study.drop_caches {
                " or drops the page cache"
            } else {
                ""
            }
        )));
    }
    execute(&study, &args)
}

/// What happened to one visit's runs.
struct Outcome {
    run_ids: Vec<i64>,
    failures: Vec<String>,
    interrupted: bool,
}

fn execute(study: &Study, args: &StudyArgs) -> Result<i32, CliError> {
    let stop = install_signals()?;
    // Open (and migrate) the database before building anything.
    let store = open_store(&args.db)?;
    let db_path = store.path().to_path_buf();
    let state_dir = StateFile::default_dir().map_err(|e| CliError::Failed(e.to_string()))?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Failed(format!("cannot find the iolab binary: {e}")))?;
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
        let state = StateFile::create(&state_dir).map_err(|e| CliError::Failed(e.to_string()))?;
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
                        "  [{done}/{total}] {} · {}: run #{} ({:.1} s){}",
                        cfg.label,
                        w.label,
                        r.id,
                        r.secs,
                        run_summary(&run)
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
        db_path.display(),
        started.elapsed().as_secs_f64()
    );
    if !out.run_ids.is_empty() {
        let mut runs = Vec::new();
        for id in &out.run_ids {
            runs.push(store.load_run(*id)?);
        }
        let mut set = RunSet::study(&study.name, runs);
        let base = &study.configs[study.baseline].label;
        if set.set_baseline(base).is_err() {
            println!("(the baseline '{base}' has no runs; comparing with the first configuration)");
        }
        println!();
        print!("{}", markdown::render(&set));
        if let Some(path) = &args.html {
            std::fs::write(path, html::render(&set))
                .map_err(|e| CliError::Failed(format!("cannot write {}: {e}", path.display())))?;
            println!("HTML report written to {}", path.display());
        }
        println!(
            "Again later: iolab report --study '{}'{} [--html FILE]",
            study.name,
            args.db
                .db
                .as_ref()
                .map(|d| format!(" --db {}", d.display()))
                .unwrap_or_default()
        );
    }
    for f in &out.failures {
        eprintln!("iolab: failed: {f}");
    }
    if out.interrupted {
        Err(CliError::Interrupted)
    } else if !out.failures.is_empty() {
        Err(CliError::Failed(format!(
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
        cmd.arg("run")
            .arg(&w.kind)
            .args(&w.args)
            .arg("--target")
            .arg(&target)
            .args(extra)
            .arg("--db")
            .arg(self.db)
            .arg("--label")
            .arg(&w.label)
            .arg("--study")
            .arg(&self.study.name)
            .arg("--config")
            .arg(&cfg.label)
            .arg("--study-meta")
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
        let run_id = stdout
            .lines()
            .find_map(|l| l.strip_prefix("stored as run "))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|id| id.parse::<i64>().ok());
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
            other => {
                let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Err(format!(
                    "{who}: `iolab run {}` exited with {}: {}",
                    w.kind,
                    other.map_or("a signal".to_string(), |c| format!("status {c}")),
                    tail.join(" / ")
                ))
            }
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
            codes.push(&w.code);
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

/// `--dry-run`: the expanded configurations, their build commands, the workloads' command
/// lines and the order of the runs.
fn dry_run_text(study: &Study) -> String {
    let mut s = String::new();
    let runs = study.run_count();
    s.push_str(&format!(
        "Study {} ({}): {} configuration(s), {} workload(s), {} repeat(s): {runs} runs, {} \
         order{}\n",
        study.name,
        study.file,
        study.configs.len(),
        study.workloads.len(),
        study.repeats,
        study.order.as_str(),
        if study.drop_caches {
            ", page cache dropped before every run"
        } else {
            ""
        }
    ));
    if let Some(d) = &study.description {
        s.push_str(&format!("  {}\n", d.trim()));
    }
    s.push_str(&format!(
        "Baseline: {}\n\nConfigurations (each built for every visit and torn down after it):\n",
        study.configs[study.baseline].label
    ));
    for (i, c) in study.configs.iter().enumerate() {
        s.push_str(&format!("{}. {} (line {})\n", i + 1, c.label, c.line));
        let table = iolab_study::value_text(&toml::Value::Table(c.testbed_table.clone()));
        s.push_str(&format!("   testbed: {table}\n"));
        for line in iolab_testbed::plan(&c.testbed) {
            s.push_str(&format!("     {line}\n"));
        }
    }
    s.push_str("\nWorkloads (run on every configuration, in this order):\n");
    for w in &study.workloads {
        s.push_str(&format!(
            "  {}: iolab run {} {}--target <testbed> --label '{}'{}\n",
            w.label,
            w.kind,
            w.args.iter().map(|a| format!("{a} ")).collect::<String>(),
            w.label,
            if w.only.is_empty() {
                String::new()
            } else {
                format!("  (only on: {})", w.only.join(", "))
            }
        ));
    }
    s.push_str("\nOrder:\n");
    let steps = schedule(study);
    let mut round_line = String::new();
    let mut last_round = None;
    for st in &steps {
        let label = &study.configs[st.config].label;
        match study.order {
            iolab_study::Order::Interleaved => {
                if last_round != Some(st.round) {
                    if !round_line.is_empty() {
                        s.push_str(&format!("{round_line}\n"));
                    }
                    round_line = format!("  round {}: {label}", st.round + 1);
                    last_round = Some(st.round);
                } else {
                    round_line.push_str(&format!(" | {label}"));
                }
            }
            iolab_study::Order::Grouped => {
                s.push_str(&format!("  {label} (repeat {})\n", st.round + 1));
            }
        }
    }
    if !round_line.is_empty() {
        s.push_str(&format!("{round_line}\n"));
    }
    let root = study.configs.iter().any(|c| c.testbed.kind == Kind::Loop) || study.drop_caches;
    if root {
        s.push_str("\nNeeds root (loop devices, mounts, sysfs knobs, cgroups).\n");
    }
    s
}

/// Whether `tool` is installed.
fn have(tool: &str) -> bool {
    iolab_sys::find_tool(tool).is_some()
}

/// `--list-testbeds`: the kinds and knobs, and what this machine has of them.
fn catalogue() -> String {
    let yes = |b: bool| if b { "yes" } else { "NO" };
    let root = iolab_sys::is_root();
    let blkio = Path::new("/sys/fs/cgroup/blkio").is_dir();
    let rows: Vec<(&str, &str, bool, &str)> = vec![
        (
            "dir",
            "an existing directory (created and removed if missing); nothing built",
            true,
            "-",
        ),
        (
            "loop",
            "N sparse images as loop devices: devices, size, direct_io, sector_size, image_dir",
            have("losetup") && root,
            "root, util-linux",
        ),
        (
            "loop + fs=ext4",
            "mkfs_options (-b 1024, -O bigalloc -C 65536), mount_options (barrier=0); one device",
            have("mkfs.ext4"),
            "e2fsprogs",
        ),
        (
            "loop + fs=xfs",
            "mkfs_options (-b size=65536); size >= 320MiB; one device",
            have("mkfs.xfs"),
            "xfsprogs",
        ),
        (
            "loop + fs=btrfs",
            "raid = single|raid0|raid1|raid10|raid5 over the devices; mount_options (compress=zstd)",
            have("mkfs.btrfs"),
            "btrfs-progs",
        ),
        (
            "loop + fs=zfs",
            "raid = mirror|raidz; vdevs = loop|files; pool_properties, dataset_properties \
             (recordsize, compression); zfs_daemon (prefetch, max_arc_size_mb, ...)",
            have("zfs-fuse") && have("zpool"),
            "zfs-fuse",
        ),
        (
            "knobs (loop)",
            "read_ahead_kb, scheduler, write_cache = \"write back\"|\"write through\" (restored after)",
            root,
            "root",
        ),
        (
            "throttle (loop)",
            "[throttle] read_bps, write_bps, read_iops, write_iops: cgroup-v1 blkio caps the \
             workload runs under (an HDD-like device: 150 IOPS + 50MiB)",
            blkio && root,
            "cgroup v1 blkio",
        ),
        (
            "hooks",
            "setup, teardown: sh -c in the work directory (your responsibility)",
            true,
            "-",
        ),
    ];
    let mut s = String::from("Testbeds a study can build (details: docs/testbeds.md)\n\n");
    s.push_str(&format!(
        "{:<17} {:<6} {:<17} {}\n",
        "kind / part", "here", "needs", "keys"
    ));
    for (k, keys, ok, needs) in rows {
        s.push_str(&format!("{k:<17} {:<6} {needs:<17} {keys}\n", yes(ok)));
    }
    s.push_str(
        "\nA [matrix] axis may be any of these keys (dotted for nested ones, e.g. \
         \"throttle.read_iops\" or \"dataset_properties.recordsize\").\n",
    );
    s
}

pub fn cleanup(args: CleanupArgs) -> Result<i32, CliError> {
    let dir = match args.state_dir {
        Some(d) => d,
        None => StateFile::default_dir().map_err(|e| CliError::Failed(e.to_string()))?,
    };
    if !dir.exists() {
        println!("nothing to clean up: {} does not exist", dir.display());
        return Ok(0);
    }
    let report = iolab_testbed::cleanup_all(&dir);
    print!("{report}");
    for (path, pid) in &report.live {
        println!(
            "  left alone: {} (its study, pid {}, is still running)",
            path.display(),
            pid.map_or("?".into(), |p| p.to_string())
        );
    }
    if report.is_clean() {
        Ok(0)
    } else {
        Err(CliError::Failed(format!(
            "{} resource(s) could not be removed (listed above); they stay recorded in {}",
            report.failures.len(),
            dir.display()
        )))
    }
}
