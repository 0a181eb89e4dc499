//! `iolab run WORKLOAD` for the workloads shaped like real jobs (iolab-workloads): each is
//! configured from the run options, run with the same stop flag, store, warnings and
//! report as the block presets.

use std::path::PathBuf;
use std::time::Duration;

use iolab_measure::TargetInfo;
use iolab_spec::{parse_duration, parse_size, DataPattern, EngineKind, RunSettings};
use iolab_workloads::fsync::{self, FsyncConfig, SyncMethod};

use crate::args::RunArgs;
use crate::commands::CliError;
use crate::progress::Progress;
use crate::run::{conclude, new_run, recorder, store_tests};
use crate::signals;

/// Workload names `iolab run` accepts besides the block presets.
pub const WORKLOADS: &[(&str, &str)] = &[
    (
        "fsync",
        "sync-method probe (pg_test_fsync-style): write sizes x none, write+fdatasync, \
         write+fsync, O_DSYNC, O_SYNC, O_DIRECT+O_DSYNC; ops/s, latency, and a verdict on \
         whether flushes reach stable storage",
    ),
    (
        "dbench",
        "replay of a dbench loadfile (default Debian's client.txt): --clients N --time T \
         [--warmup T] [--sync] [--fsync-every-write] [--verify]; dbench's throughput and its \
         operation table with p99, expected statuses checked; --verify checks every read and \
         the files against what was written (exit 3 on a mismatch)",
    ),
    (
        "copy",
        "copy a file or tree (--source, or a generated random file of --size) the way a \
         user's copy does; MB/s before and including the final fsync, verified identical",
    ),
    (
        "streams",
        "dd-shaped sequential streams: --streams N --bs --rw read|write, one file with \
         --same-file --stagger TIME, or one file each; per-stream and aggregate MB/s",
    ),
    (
        "metadata",
        "mdtest-shaped: create, stat, read, rename, delete of --files N in --dirs M with \
         --threads T; ops/s per phase and the space each small file really uses; --verify \
         compares every file read with what was written (exit 3 on a mismatch)",
    ),
    (
        "verify",
        "verified writes: self-describing blocks (offset, run id, generation, crc32c) over \
         --size in --bs blocks, --rw write|randwrite, --runs passes, read back --verify-mode \
         inline|after|both|none; --journal PATH for `iolab verify` after a crash; exit 3 on \
         any mismatch",
    ),
    (
        "scrub-test",
        "corrupt known blocks on one member of a btrfs raid1/raid5 or zfs mirror/raidz \
         (--testbed LAYOUT, or --target DIR with --allow-corrupt-members), run the \
         filesystem's scrub, compare detected/repaired/uncorrectable with what was injected, \
         verify every block; --corrupt N --corrupt-size --all-copies --foreground; exit 3 if \
         data was not repaired, 4 if only the counts are wrong",
    ),
];

pub fn is_workload(name: &str) -> bool {
    WORKLOADS.iter().any(|(n, _)| *n == name)
}

/// The directory a workload works in: --target must be an existing directory.
fn target_dir(a: &RunArgs) -> Result<PathBuf, CliError> {
    let p = std::path::absolute(&a.target).unwrap_or_else(|_| a.target.clone());
    if !p.is_dir() {
        return Err(CliError::Usage(format!(
            "--target {}: workload {} needs an existing directory",
            p.display(),
            a.preset()
        )));
    }
    Ok(p)
}

fn dir_info(dir: &std::path::Path, size: u64) -> TargetInfo {
    let env_fs = iolab_env::capture(Some(dir))
        .target
        .and_then(|t| t.fs_type)
        .unwrap_or_else(|| "unknown".into());
    TargetInfo {
        path: dir.to_string_lossy().into_owned(),
        kind: "dir".into(),
        io_path: dir.to_string_lossy().into_owned(),
        fs_type: env_fs,
        size,
    }
}

pub(crate) fn settings(
    size: u64,
    duration: Duration,
    runs: u32,
    engine: EngineKind,
    direct: bool,
) -> RunSettings {
    RunSettings {
        size,
        duration,
        runs,
        warmup_passes: 0,
        warmup_duration: Duration::ZERO,
        ramp: Duration::ZERO,
        engine,
        direct,
        data: DataPattern::Random,
        fixedbufs: false,
        registerfiles: false,
    }
}

fn list<T>(
    field: &str,
    text: &str,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
) -> Result<Vec<T>, CliError> {
    text.split(',')
        .map(|item| {
            parse(item.trim())
                .ok_or_else(|| CliError::Usage(format!("--{field} '{item}': expected {expected}")))
        })
        .collect()
}

pub fn run(a: RunArgs) -> Result<i32, CliError> {
    match a.preset() {
        "fsync" => run_fsync(a),
        "copy" => run_copy(a),
        "streams" => run_streams(a),
        "metadata" => run_metadata(a),
        "dbench" => run_dbench(a),
        "verify" => crate::verify_cmd::run_verify(a),
        "scrub-test" => crate::scrub_cmd::run(a),
        other => Err(CliError::Usage(format!("unknown workload '{other}'"))),
    }
}

fn run_fsync(a: RunArgs) -> Result<i32, CliError> {
    let dir = target_dir(&a)?;
    let mut cfg = FsyncConfig::new(dir.clone());
    if let Some(s) = &a.sizes {
        cfg.sizes = list(
            "sizes",
            s,
            |x| parse_size("sizes", x).ok(),
            "sizes such as 512,4k,8k",
        )?;
        if let Some(bad) = cfg.sizes.iter().find(|&&s| s == 0 || s > 64 << 20) {
            return Err(CliError::Usage(format!(
                "--sizes: {bad} is outside 1 B .. 64 MiB"
            )));
        }
    }
    if let Some(m) = &a.methods {
        cfg.methods = list(
            "methods",
            m,
            SyncMethod::parse,
            "none, fdatasync, fsync, O_DSYNC, O_SYNC or O_DIRECT+O_DSYNC",
        )?;
    }
    if let Some(d) = &a.duration {
        cfg.duration = parse_duration("duration", d)?;
    }
    if let Some(r) = a.runs {
        cfg.runs = r.max(1);
    }
    if let Some(s) = &a.size {
        cfg.file_size = parse_size("size", s)?;
    }
    if let Some(max) = cfg.sizes.iter().max() {
        cfg.file_size = cfg.file_size.max(*max);
    }
    if a.verify {
        let sector = iolab_integrity::block::SECTOR as u64;
        if let Some(bad) = cfg.sizes.iter().find(|s| !s.is_multiple_of(sector)) {
            return Err(CliError::Usage(format!(
                "--verify writes every write as a self-describing block of whole {sector}-byte \
                 sectors: --sizes must be multiples of {sector}, and {bad} is not"
            )));
        }
        cfg.verify = Some(fastrand::u64(1..));
    }
    let stop = signals::install().map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    let mut rec = recorder(&a)?;
    let planned = cfg.duration * cfg.runs * (cfg.sizes.len() * cfg.methods.len()) as u32;
    let progress = Progress::new(planned, a.quiet);
    let mut run = new_run(
        &a,
        "fsync",
        "fsync",
        dir_info(&dir, cfg.file_size),
        settings(
            cfg.file_size,
            cfg.duration,
            cfg.runs,
            EngineKind::Psync,
            false,
        ),
        Vec::new(),
    );
    rec.begin(&mut run)?;
    let env = iolab_env::capture(Some(&dir));
    run.env = serde_json::to_value(&env).unwrap_or(serde_json::Value::Null);
    let mut step = Duration::ZERO;
    let per_test = cfg.duration * cfg.runs;
    let result = fsync::run(&cfg, &stop, &mut |label| {
        let _ = progress.pass(label.to_string(), step, per_test);
        step += per_test;
    });
    if let Ok(report) = &result {
        for (name, tally) in &report.checks {
            let line = tally.summary_line(name);
            progress.println(&line);
            run.notes.push(line);
        }
    }
    progress.finish();
    let outcome = match result {
        Ok(report) => {
            store_tests(&mut rec, 0, &report.tests)?;
            run.tests = report.tests;
            run.notes
                .extend(report.skipped.iter().map(|s| format!("skipped {s}")));
            run.notes
                .push(format!("verdict: {}", report.verdict.reason));
            if report.verdict.flushes_reach_storage == Some(false) {
                run.warnings.push(iolab_measure::Warning {
                    code: "FLUSH_NO_EFFECT".into(),
                    message: report.verdict.reason.clone(),
                    fix: "check the mount's barriers and the device's write cache mode; only a \
                          non-volatile cache makes this safe"
                        .into(),
                    test: None,
                });
            }
            Ok(())
        }
        Err(e) => Err(CliError::Failed(e.to_string())),
    };
    let facts = crate::environment::facts(&env, None, false);
    let mut warnings = iolab_stats::warnings::analyze(&run, &facts);
    run.warnings.append(&mut warnings);
    let code = conclude(&mut run, &mut rec, &a, &stop, outcome)?;
    Ok(crate::run::integrity_exit(&run, code))
}

/// A workload that returns whole tests at the end.
type Work<'a> = dyn FnOnce(
        &std::sync::atomic::AtomicBool,
        &Progress,
    ) -> Result<Vec<iolab_measure::TestRecord>, String>
    + 'a;

/// Runs a workload that returns whole tests at the end: store, warnings, report.
fn drive(
    a: &RunArgs,
    dir: &std::path::Path,
    size: u64,
    settings: RunSettings,
    work: impl FnOnce(
        &std::sync::atomic::AtomicBool,
        &Progress,
    ) -> Result<Vec<iolab_measure::TestRecord>, String>,
) -> Result<i32, CliError> {
    drive_target(a, dir_info(dir, size), dir, settings, Box::new(work))
}

/// `drive` for a target described by `info`, whose environment is read at `env_path`.
pub(crate) fn drive_target(
    a: &RunArgs,
    info: TargetInfo,
    env_path: &std::path::Path,
    settings: RunSettings,
    work: Box<Work<'_>>,
) -> Result<i32, CliError> {
    let stop = signals::install().map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    let mut rec = recorder(a)?;
    let progress = Progress::new(Duration::ZERO, a.quiet);
    let direct = settings.direct;
    let mut run = new_run(a, a.preset(), a.preset(), info, settings, Vec::new());
    rec.begin(&mut run)?;
    let env = iolab_env::capture(Some(env_path));
    run.env = serde_json::to_value(&env).unwrap_or(serde_json::Value::Null);
    let result = work(&stop, &progress);
    progress.finish();
    let outcome = match result {
        Ok(tests) => {
            store_tests(&mut rec, 0, &tests)?;
            run.notes.extend(tests.iter().filter_map(verify_note));
            run.tests = tests;
            Ok(())
        }
        Err(e) => Err(CliError::Failed(e)),
    };
    let facts = crate::environment::facts(&env, None, direct);
    run.warnings = iolab_stats::warnings::analyze(&run, &facts);
    conclude(&mut run, &mut rec, a, &stop, outcome)
}

/// The run's note about a test whose `extra.verify` holds the counts of a `--verify`
/// check (`unit`: what was checked, blocks unless it says otherwise).
fn verify_note(t: &iolab_measure::TestRecord) -> Option<String> {
    let v = t.extra.get("verify").filter(|v| v.is_object())?;
    let tally: iolab_integrity::Tally = serde_json::from_value(v.clone()).ok()?;
    Some(tally.summary_line(&t.name))
}

fn opt_size(field: &str, v: &Option<String>, default: u64) -> Result<u64, CliError> {
    Ok(match v {
        Some(s) => parse_size(field, s)?,
        None => default,
    })
}

fn opt_duration(field: &str, v: &Option<String>) -> Result<Option<Duration>, CliError> {
    Ok(match v {
        Some(s) => Some(parse_duration(field, s)?),
        None => None,
    })
}

fn run_copy(a: RunArgs) -> Result<i32, CliError> {
    use iolab_workloads::copy::{self, CopyConfig};
    let dir = target_dir(&a)?;
    let mut cfg = CopyConfig::new(dir.clone());
    if let Some(src) = &a.source {
        if !src.exists() {
            return Err(CliError::Usage(format!(
                "--source {} does not exist",
                src.display()
            )));
        }
        cfg.source = Some(std::path::absolute(src).unwrap_or_else(|_| src.clone()));
    }
    cfg.generate_size = opt_size("size", &a.size, cfg.generate_size)?;
    cfg.buffer_size = opt_size("bs", &a.bs, cfg.buffer_size as u64)? as usize;
    cfg.runs = a.runs.unwrap_or(cfg.runs).max(1);
    cfg.drop_caches = a.drop_caches;
    let s = settings(
        cfg.generate_size,
        Duration::ZERO,
        cfg.runs,
        EngineKind::Psync,
        false,
    );
    drive(&a, &dir, cfg.generate_size, s, |stop, progress| {
        copy::run(&cfg, stop, &mut |label, n| {
            progress.phase(label, iolab_spec::format_bytes(n))
        })
        .map_err(|e| e.to_string())
    })
}

fn run_streams(a: RunArgs) -> Result<i32, CliError> {
    use iolab_workloads::streams::{self, StreamsConfig};
    let dir = target_dir(&a)?;
    let mut cfg = StreamsConfig::new(dir.clone());
    cfg.streams = a.streams.unwrap_or(cfg.streams).max(1);
    cfg.bs = opt_size("bs", &a.bs, cfg.bs as u64)? as usize;
    cfg.rw = match a.rw.as_deref() {
        None | Some("read") => iolab_spec::Rw::Read,
        Some("write") => iolab_spec::Rw::Write,
        Some(other) => {
            return Err(CliError::Usage(format!(
                "--rw '{other}': streams are sequential: read or write"
            )))
        }
    };
    cfg.same_file = a.same_file;
    if let Some(st) = opt_duration("stagger", &a.stagger)? {
        if !a.same_file {
            return Err(CliError::Usage("--stagger applies with --same-file".into()));
        }
        cfg.stagger = st;
    }
    cfg.file_size = opt_size("size", &a.size, cfg.file_size)?;
    cfg.duration = opt_duration("duration", &a.duration)?;
    cfg.drop_caches = a.drop_caches;
    cfg.end_fsync = a.end_fsync;
    let check = crate::verify_cmd::StreamsCheck::new(&a, &mut cfg)?;
    let s = settings(
        cfg.file_size,
        cfg.duration.unwrap_or(Duration::ZERO),
        1,
        EngineKind::Psync,
        false,
    );
    let code = drive(&a, &dir, cfg.file_size, s, |stop, progress| {
        streams::run(&cfg, stop, &mut |label, n| {
            progress.phase(label, iolab_spec::format_bytes(n))
        })
        .map_err(|e| e.to_string())
    })?;
    Ok(check.exit_code(code))
}

fn run_metadata(a: RunArgs) -> Result<i32, CliError> {
    use iolab_workloads::metadata::{self, MetadataConfig};
    let dir = target_dir(&a)?;
    let mut cfg = MetadataConfig::new(dir.clone());
    cfg.files = a.files.unwrap_or(cfg.files).max(1);
    if let Some(d) = a.dirs {
        cfg.dirs = u32::try_from(d.max(1))
            .map_err(|_| CliError::Usage(format!("--dirs {d}: too many")))?;
    }
    cfg.threads = a.threads.unwrap_or(cfg.threads).max(1);
    cfg.file_size = opt_size("file-size", &a.file_size, cfg.file_size)?;
    cfg.fsync = a.fsync.is_some() || a.fsync_every_write;
    cfg.verify = a.verify.then(|| fastrand::u64(1..));
    let s = settings(cfg.file_size, Duration::ZERO, 1, EngineKind::Psync, false);
    let mut failures = 0u64;
    let code = drive(&a, &dir, cfg.file_size * cfg.files, s, |stop, progress| {
        let tests = metadata::run(&cfg, stop, &mut |label, n| {
            progress.phase(label, format!("{n} ops"))
        })
        .map_err(|e| e.to_string())?;
        failures = tests
            .iter()
            .filter_map(|t| t.extra["verify"]["failures"].as_u64())
            .sum();
        Ok(tests)
    })?;
    if failures > 0 && code == 0 {
        eprintln!(
            "iolab: integrity: {failures} file(s) did not read back as written (files and \
             offsets in the read test's extra.verify.failure_samples)"
        );
        return Ok(crate::verify_cmd::EXIT_INTEGRITY);
    }
    Ok(code)
}

/// Debian's dbench package installs its client loadfile here.
pub const DEFAULT_LOADFILE: &str = "/usr/share/dbench/client.txt";

fn run_dbench(a: RunArgs) -> Result<i32, CliError> {
    use iolab_measure::{
        DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord, TimeSeries,
    };
    use iolab_workloads::dbench::{self, DbenchConfig, OpKind};
    let dir = target_dir(&a)?;
    let loadfile = a
        .loadfile
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_LOADFILE));
    if !loadfile.exists() {
        return Err(CliError::Usage(format!(
            "loadfile {} not found (Debian: apt-get install dbench, or give --loadfile)",
            loadfile.display()
        )));
    }
    let parsed = dbench::parse_loadfile(&loadfile).map_err(|e| CliError::Usage(e.to_string()))?;
    let time = opt_duration("time", &a.time)?.unwrap_or(Duration::from_secs(60));
    let mut cfg = DbenchConfig::new(dir.clone(), loadfile.clone(), a.clients.unwrap_or(1), time);
    if let Some(w) = &a.warmup {
        cfg.warmup = parse_duration("warmup", w)?;
    }
    cfg.sync_open = a.sync;
    cfg.fsync_every_write = a.fsync_every_write;
    let runs = a.runs.unwrap_or(1).max(1);
    let clients = cfg.clients;
    let s = settings(0, time, runs, EngineKind::Psync, false);
    let mut verified: Option<iolab_integrity::Tally> = None;
    let code = drive(&a, &dir, 0, s, |stop, progress| {
        let mut passes = Vec::new();
        let mut extra = serde_json::Value::Null;
        for index in 1..=runs {
            // `--verify`: a new run id for every run, so no run's data passes for another's.
            let cfg = DbenchConfig {
                verify: a.verify.then(|| fastrand::u64(1..)),
                ..cfg.clone()
            };
            let cpu0 = iolab_measure::CpuSample::now();
            let r = dbench::run(&cfg, &parsed, stop, &mut |p| {
                progress.phase(
                    &format!("dbench {index}/{runs} {:?}", p.phase).to_lowercase(),
                    format!("{:.1} MB/s", p.mb_s),
                )
            })
            .map_err(|e| e.to_string())?;
            if r.interrupted {
                break;
            }
            if let Some(v) = &r.verify {
                verified
                    .get_or_insert_with(Default::default)
                    .merge(v.clone());
            }
            let hist = |k: OpKind| -> LatencyHistogram {
                r.ops
                    .iter()
                    .find(|o| o.op == k)
                    .map(|o| o.histogram.clone())
                    .unwrap_or_default()
            };
            let secs = r.measured_seconds;
            let read = (r.bytes_read > 0)
                .then(|| DirResult::from_histogram(r.bytes_read, secs, hist(OpKind::ReadX)));
            let write = (r.bytes_written > 0)
                .then(|| DirResult::from_histogram(r.bytes_written, secs, hist(OpKind::WriteX)));
            let flush = hist(OpKind::Flush);
            let sync = (!flush.is_empty()).then(|| SyncStats {
                count: flush.count(),
                lat_us: flush.summary_us(),
            });
            let series = TimeSeries {
                interval_ms: 1000,
                bytes: r.per_second_mb_s.iter().map(|m| (m * 1e6) as u64).collect(),
            };
            let cpu = cpu0.usage_until(&iolab_measure::CpuSample::now(), 0);
            passes.push(PassRecord::new(index, secs, read, write, sync, cpu, series));
            extra = serde_json::json!({
                "loadfile": loadfile,
                "clients": clients,
                "throughput_mb_s": r.mb_s,
                "warmup_seconds": r.warmup_seconds,
                "loops_completed": r.loops_completed,
                "status_mismatches": r.status_mismatches,
                "mismatch_samples": r.mismatches,
                "short_reads": r.short_reads,
                "notes": r.notes,
                "ops": r.ops.iter().map(|o| serde_json::json!({
                    "op": o.op.name(),
                    "count": o.count,
                    "avg_ms": o.avg_ms,
                    "max_ms": o.max_ms,
                    "p99_ms": o.p99_ms,
                    "status_mismatches": o.status_mismatches,
                })).collect::<Vec<_>>(),
            });
        }
        if passes.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(v) = &verified {
            extra["verify"] = serde_json::to_value(v).unwrap_or_default();
        }
        let mut job = iolab_spec::JobSpec::new(iolab_spec::Rw::Rw, 4096, 1, clients);
        // The share of ReadX bytes, so the mixed-test rows read like dbench's traffic.
        let (rb, wb) = passes.iter().fold((0u64, 0u64), |(r, w), p| {
            (
                r + p.read.as_ref().map_or(0, |d| d.bytes),
                w + p.write.as_ref().map_or(0, |d| d.bytes),
            )
        });
        job.rwmixread = (100 * rb / (rb + wb).max(1)) as u8;
        job.fsync_every = u32::from(cfg.fsync_every_write);
        let summary = iolab_stats::summarize(&passes, iolab_stats::Score::Median);
        Ok(vec![TestRecord {
            name: format!(
                "dbench {clients} client{}",
                if clients == 1 { "" } else { "s" }
            ),
            group: "dbench".into(),
            job,
            passes,
            summary,
            extra,
        }])
    })?;
    let Some(v) = verified else {
        return Ok(code);
    };
    let text = dbench_verify_text(clients, &v);
    if a.json.as_deref() == Some("-") {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if v.failures > 0 && code == 0 {
        eprintln!(
            "iolab: integrity: {} block(s) of the dbench clients' files did not read back as \
             written (files and offsets in the test's extra.verify.failure_samples)",
            v.failures
        );
        return Ok(crate::verify_cmd::EXIT_INTEGRITY);
    }
    Ok(code)
}

/// The lines `run dbench --verify` prints after the report: what was checked and, on a
/// mismatch, the first failures.
fn dbench_verify_text(clients: u32, v: &iolab_integrity::Tally) -> String {
    let name = format!(
        "dbench {clients} client{}",
        if clients == 1 { "" } else { "s" }
    );
    let mut out = v.summary_line(&name);
    out.push('\n');
    for f in v.failure_samples.iter().take(5) {
        out.push_str(&format!(
            "  {} offset {} [{}] {} ({})\n",
            f.file.as_deref().unwrap_or(""),
            f.offset,
            f.class,
            f.detail,
            f.phase
        ));
    }
    if v.replay.as_ref().is_some_and(|r| r.read_back_skipped > 0) {
        out.push_str("  (stopped: the files were not read back)\n");
    }
    out
}
