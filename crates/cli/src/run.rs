//! `iolab run`: resolves options against the preset, prepares the target, runs every test's
//! warm-up and measured passes, stores each pass as it finishes, and prints the result.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_engine::{prepare, run_pass, Target, TargetError, TargetRequest};
use iolab_measure::{ActivitySample, PassContext, RunRecord, TestRecord, TestSummary};
use iolab_spec::{
    expand_preset, parse_duration, parse_size, preset_info, DataPattern, EngineKind, JobSpec,
    RunSettings, Rw, SpecError, SyncMode, TestSpec,
};
use iolab_stats::{summarize, Score};
use iolab_store::Store;

use crate::args::RunArgs;
use crate::commands::{open_store, CliError};
use crate::progress::Progress;
use crate::signals;

/// Everything `run` needs, resolved and validated before anything is touched.
pub(crate) struct Plan {
    pub preset: String,
    /// `--until-stable`: target CI half-width (% of the median), most passes, most time.
    pub until_stable: Option<(f64, u32, Duration)>,
    pub settings: RunSettings,
    pub tests: Vec<TestSpec>,
    pub score: Score,
    pub notes: Vec<String>,
}

/// The tests of `iolab run iometer`: a built-in pattern or a TOML spec, at --iodepth
/// outstanding I/Os (default 1) per worker (--numjobs, default 1), or over the ladder.
fn iometer_tests(a: &RunArgs) -> Result<Vec<TestSpec>, CliError> {
    use iolab_spec::iometer;
    let (name, lines) = match (&a.spec, &a.pattern) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage("give --pattern or --spec, not both".into()))
        }
        (Some(path), None) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::Usage(format!("--spec {}: {e}", path.display())))?;
            let file = path.display().to_string();
            let (name, lines) = iometer::parse_spec(&file, &text)
                .map_err(|e| CliError::Usage(format!("{}: {}: {}", e.value, e.field, e.reason)))?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "spec".into());
            (name.unwrap_or(stem), lines)
        }
        (None, p) => {
            let name = p.as_deref().unwrap_or("file-server");
            let lines = iometer::pattern(name).ok_or_else(|| {
                CliError::Usage(format!(
                    "--pattern '{name}': expected file-server, database or workstation"
                ))
            })?;
            (name.to_string(), lines)
        }
    };
    let tests = iometer::tests(
        &name,
        &lines,
        a.numjobs.unwrap_or(1),
        a.iodepth.unwrap_or(1),
        a.qd_ladder,
    );
    for t in &tests {
        t.job.validate()?;
    }
    Ok(tests)
}

fn custom_job(a: &RunArgs) -> Result<JobSpec, SpecError> {
    let rw: Rw = a.rw.as_deref().unwrap_or("read").parse()?;
    let bs = match &a.bs {
        Some(b) => parse_size("bs", b)?,
        None => 4096,
    };
    let mut job = JobSpec::new(rw, bs, a.iodepth.unwrap_or(1), a.numjobs.unwrap_or(1));
    if let Some(m) = a.rwmixread {
        job.rwmixread = m;
    }
    Ok(job)
}

pub(crate) fn plan(a: &RunArgs) -> Result<Plan, CliError> {
    let custom_given =
        a.rw.is_some() || a.bs.is_some() || a.iodepth.is_some() || a.numjobs.is_some();
    let preset = a.preset().to_string();
    let info = preset_info(&preset).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown preset '{preset}' (known: {})",
            iolab_spec::preset_names().join(", ")
        ))
    })?;
    let job_shape_given = if preset == "iometer" {
        a.rw.is_some() || a.bs.is_some()
    } else {
        custom_given
    };
    if preset != "custom" && job_shape_given {
        return Err(CliError::Usage(format!(
            "--rw/--bs/--iodepth/--numjobs describe a custom job; use `iolab run custom ...` \
             instead of preset '{preset}'"
        )));
    }
    let d = info.defaults;
    let size = match &a.size {
        Some(s) => parse_size("size", s)?,
        None => d.size,
    };
    let duration = match &a.duration {
        Some(s) => parse_duration("duration", s)?,
        None => d.duration,
    };
    if duration < Duration::from_millis(100) {
        return Err(CliError::Usage("--duration must be at least 100ms".into()));
    }
    let warmup_duration = match &a.warmup_time {
        Some(s) => parse_duration("warmup-time", s)?,
        None => duration,
    };
    let runs = a.runs.unwrap_or(d.runs);
    if runs == 0 {
        return Err(CliError::Usage("--runs must be at least 1".into()));
    }
    let engine: EngineKind = a.engine.parse()?;
    let data: DataPattern = a.data.parse()?;
    let score = match a.score.as_str() {
        "median" => Score::Median,
        "best" => Score::Best,
        other => {
            return Err(CliError::Usage(format!(
                "--score '{other}': expected median or best"
            )))
        }
    };
    let custom = if preset == "custom" {
        Some(custom_job(a)?)
    } else {
        None
    };
    let mut tests = if preset == "iometer" {
        iometer_tests(a)?
    } else {
        if a.pattern.is_some() || a.spec.is_some() || a.qd_ladder {
            return Err(CliError::Usage(
                "--pattern, --spec and --qd-ladder belong to `iolab run iometer`".into(),
            ));
        }
        expand_preset(&preset, custom.as_ref(), a.mix, size)?
    };
    for t in &mut tests {
        if let Some(n) = a.fsync {
            t.job.fsync_every = n;
            t.job.sync_mode = SyncMode::Fsync;
        }
        if let Some(n) = a.fdatasync {
            t.job.fsync_every = n;
            t.job.sync_mode = SyncMode::Fdatasync;
        }
        if a.end_fsync {
            t.job.end_fsync = true;
        }
        if let Some(m) = a.rwmixread {
            if t.job.rw.is_mixed() {
                t.job.rwmixread = m;
            }
        }
        t.job.validate()?;
    }
    let until_stable = match a.until_stable {
        None => None,
        Some(pct) if pct > 0.0 && pct < 100.0 => Some((
            pct,
            a.max_runs.max(3),
            parse_duration("max-time", &a.max_time)?,
        )),
        Some(pct) => {
            return Err(CliError::Usage(format!(
                "--until-stable {pct}: expected a percentage between 0 and 100"
            )))
        }
    };
    let warmup_passes = match &a.warmup {
        None => d.warmup_passes,
        Some(w) => w.parse().map_err(|_| {
            CliError::Usage(format!(
                "--warmup '{w}': for preset {preset} this is a number of passes"
            ))
        })?,
    };
    let mut notes = Vec::new();
    let mut engine = engine;
    if engine == EngineKind::IoUring {
        if let Err(e) = iolab_engine::io_uring_available() {
            notes.push(format!(
                "io_uring is not available here ({e}); fell back to psync (queue depth 1)"
            ));
            engine = EngineKind::Psync;
        }
    }
    if engine == EngineKind::Psync && tests.iter().any(|t| t.job.iodepth > 1) {
        notes.push(
            "psync is synchronous: every test ran at queue depth 1 whatever its Q number says"
                .into(),
        );
    }
    Ok(Plan {
        preset,
        until_stable,
        settings: RunSettings {
            size,
            duration,
            runs,
            warmup_passes,
            warmup_duration,
            ramp: match &a.ramp {
                Some(r) => parse_duration("ramp", r)?,
                None => Duration::ZERO,
            },
            engine,
            direct: !a.buffered,
            data,
            fixedbufs: !a.no_fixedbufs,
            registerfiles: !a.no_registerfiles,
        },
        tests,
        score,
        notes,
    })
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Keeps the store in step with the run, or does nothing with --no-store.
pub(crate) struct Recorder {
    store: Option<Store>,
    run_id: Option<i64>,
    db_path: Option<PathBuf>,
}

impl Recorder {
    pub(crate) fn begin(&mut self, run: &mut RunRecord) -> Result<(), CliError> {
        if let Some(s) = &mut self.store {
            let id = s.begin_run(run)?;
            run.id = Some(id);
            self.run_id = Some(id);
        }
        Ok(())
    }
}

pub(crate) fn target_error(e: TargetError) -> CliError {
    match e {
        TargetError::Interrupted => CliError::Interrupted,
        TargetError::Safety(_) => CliError::Usage(e.to_string()),
        TargetError::NotFound(_) | TargetError::Unsupported(..) | TargetError::TooSmall { .. } => {
            CliError::Usage(e.to_string())
        }
        other => CliError::Failed(other.to_string()),
    }
}

/// Prepares the target for a plan and drops the tests it cannot run (ATTO sizes that do
/// not fit the region or the device's logical block), or refuses the plan.
pub(crate) fn prepare_target(
    plan: &mut Plan,
    a: &RunArgs,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<Target, CliError> {
    let writes = plan.tests.iter().any(|t| t.job.rw.writes());
    let req = TargetRequest {
        path: a.target.clone(),
        size: a.size.as_ref().map(|_| plan.settings.size),
        default_size: plan.settings.size,
        writes,
        direct: plan.settings.direct,
        data: plan.settings.data,
        allow_destroy_device: a.allow_destroy_device,
        allow_overwrite_file: a.allow_overwrite_file,
    };
    let target = prepare(&req, stop, &mut |d, t| progress.preparing(d, t)).map_err(target_error)?;
    plan.settings.size = target.info.size;

    // ATTO sweeps block sizes up to 64 MiB; one larger than the region cannot be placed in it.
    if plan.preset == "atto" {
        let region = target.info.size;
        let too_big: Vec<String> = plan
            .tests
            .iter()
            .filter(|t| t.job.bs > region)
            .map(|t| t.name.clone())
            .collect();
        if !too_big.is_empty() {
            plan.tests.retain(|t| t.job.bs <= region);
            plan.notes.push(format!(
                "skipped block sizes larger than the {} test region (give a larger --size to \
                 run them): {}",
                iolab_spec::format_bytes(region),
                too_big.join(", ")
            ));
        }
    }

    // O_DIRECT needs block-aligned I/O: skip (ATTO) or refuse (others) what cannot work.
    if plan.settings.direct {
        let lb = target.logical_block;
        let too_small: Vec<String> = plan
            .tests
            .iter()
            .filter(|t| {
                t.job.bs % lb != 0
                    || t.job
                        .access
                        .iter()
                        .any(|l| l.size % lb != 0 || l.align % lb != 0)
            })
            .map(|t| t.name.clone())
            .collect();
        if !too_small.is_empty() {
            if plan.preset == "atto" {
                plan.tests.retain(|t| t.job.bs % lb == 0);
                plan.notes.push(format!(
                    "skipped block sizes below the device's {lb}-byte logical block (O_DIRECT \
                     cannot do them): {}",
                    too_small.join(", ")
                ));
            } else {
                return Err(CliError::Usage(format!(
                    "O_DIRECT needs I/O aligned to the device's logical block size ({lb} bytes) \
                     under {}; test(s) {} use a block size that is not a multiple of it. \
                     Use a larger --bs or --buffered.",
                    target.info.io_path,
                    too_small.join(", ")
                )));
            }
        }
    }
    Ok(target)
}

/// Opens the store unless `--no-store`.
pub(crate) fn recorder(a: &RunArgs) -> Result<Recorder, CliError> {
    let mut rec = Recorder {
        store: None,
        run_id: None,
        db_path: None,
    };
    if !a.no_store {
        let path = a.db.db.clone().unwrap_or_else(iolab_store::default_db_path);
        rec.store = Some(open_store(&a.db)?);
        rec.db_path = Some(path);
    }
    Ok(rec)
}

/// The study fields of a run started by `iolab study` (hidden options), or none.
fn study_fields(a: &RunArgs) -> (Option<String>, Option<String>, serde_json::Value) {
    let meta = a
        .study_meta
        .as_ref()
        .and_then(|p| {
            if p.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).ok()
            } else {
                std::fs::read_to_string(p).ok()
            }
        })
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (a.study.clone(), a.config.clone(), meta)
}

/// A new, empty run record for `a`'s command line.
pub(crate) fn new_run(
    a: &RunArgs,
    preset: &str,
    workload: &str,
    target: iolab_measure::TargetInfo,
    settings: RunSettings,
    notes: Vec<String>,
) -> RunRecord {
    let (study, config_label, study_meta) = study_fields(a);
    RunRecord {
        id: None,
        uuid: uuid::Uuid::new_v4().to_string(),
        iolab_version: env!("CARGO_PKG_VERSION").to_string(),
        preset: preset.to_string(),
        workload: workload.to_string(),
        target,
        engine: settings.engine.as_str().to_string(),
        settings,
        command_line: std::env::args().collect(),
        label: a.label.clone(),
        started_at: now_rfc3339(),
        finished_at: None,
        complete: false,
        notes,
        warnings: Vec::new(),
        env: serde_json::Value::Null,
        study,
        config_label,
        study_meta,
        tests: Vec::new(),
    }
}

/// Stores whole tests of a workload that produces them at the end.
pub(crate) fn store_tests(
    rec: &mut Recorder,
    first_index: u32,
    tests: &[TestRecord],
) -> Result<(), CliError> {
    if let (Some(st), Some(id)) = (&mut rec.store, rec.run_id) {
        for (i, t) in tests.iter().enumerate() {
            let tid = st.add_test(id, first_index + i as u32, t)?;
            for p in &t.passes {
                st.add_pass(tid, p)?;
            }
            st.update_test_summary(tid, &t.summary)?;
        }
    }
    Ok(())
}

/// Finishes the stored run, prints the report (and JSON), and turns the outcome into the
/// exit status.
pub(crate) fn conclude(
    run: &mut RunRecord,
    rec: &mut Recorder,
    a: &RunArgs,
    stop: &AtomicBool,
    outcome: Result<(), CliError>,
) -> Result<i32, CliError> {
    run.finished_at = Some(now_rfc3339());
    run.complete = outcome.is_ok() && !stop.load(Ordering::Relaxed);
    if let Some(s) = &mut rec.store {
        if let Some(id) = rec.run_id {
            s.finish_run(id, run)?;
        }
    }
    let json_to_stdout = a.json.as_deref() == Some("-");
    let text = iolab_report::render_run(run);
    if json_to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if let (Some(id), Some(path)) = (rec.run_id, &rec.db_path) {
        let line = format!("stored as run {id} in {}", path.display());
        if json_to_stdout {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    if let Some(dest) = &a.json {
        let doc = iolab_report::to_json_string(run);
        if dest == "-" {
            println!("{doc}");
        } else {
            std::fs::write(dest, doc + "\n")
                .map_err(|e| CliError::Failed(format!("cannot write JSON to {dest}: {e}")))?;
        }
    }
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(()) if run.complete => Ok(0),
        Ok(()) => Err(CliError::Interrupted),
        Err(e) => Err(e),
    }
}

pub fn run(a: RunArgs) -> Result<i32, CliError> {
    if crate::workloads::is_workload(a.preset()) {
        if a.verify && !matches!(a.preset(), "streams" | "fsync" | "metadata" | "dbench") {
            return Err(CliError::Usage(format!(
                "--verify applies to the block presets, `run streams --rw write`, `run fsync`, \
                 `run metadata` and `run dbench`, not {}; `run copy` always verifies, `run \
                 verify` is the verified-write workload",
                a.preset()
            )));
        }
        return crate::workloads::run(a);
    }
    let mut plan = plan(&a)?;
    if a.verify {
        check_verify(&plan)?;
    }
    let stop = signals::install().map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    let mut rec = recorder(&a)?;

    let planned: Duration = plan
        .tests
        .iter()
        .map(|_| {
            plan.settings.warmup_duration * plan.settings.warmup_passes
                + plan.settings.duration * plan.settings.runs
        })
        .sum();
    let progress = Progress::new(planned, a.quiet);
    let target = prepare_target(&mut plan, &a, &stop, &progress)?;

    let mut run = new_run(
        &a,
        &plan.preset,
        "block",
        target.info.clone(),
        plan.settings.clone(),
        plan.notes.clone(),
    );
    rec.begin(&mut run)?;

    let env = iolab_env::capture(Some(&target.io_path));
    let watch = crate::environment::top_devices(&env);
    run.env = serde_json::to_value(&env).unwrap_or(serde_json::Value::Null);
    let ctx = Ctx {
        target: &target,
        stop: &stop,
        progress: &progress,
        watch: &watch,
        verify: a.verify.then(|| fastrand::u64(1..)),
    };
    let outcome = execute(&plan, &ctx, &mut run, &mut rec);
    progress.finish();
    let facts = crate::environment::facts(&env, Some(&target), plan.settings.direct);
    run.warnings = iolab_stats::warnings::analyze(&run, &facts);
    drop(target);
    let code = conclude(&mut run, &mut rec, &a, &stop, outcome)?;
    Ok(integrity_exit(&run, code))
}

/// `code`, or `EXIT_INTEGRITY` (with a message) when a stored run's tests counted
/// `--verify` failures in their `extra.verify`.
pub(crate) fn integrity_exit(run: &RunRecord, code: i32) -> i32 {
    let failures: u64 = run
        .tests
        .iter()
        .filter_map(|t| t.extra["verify"]["failures"].as_u64())
        .sum();
    if failures > 0 && code == 0 {
        eprintln!(
            "iolab: integrity: {failures} written block(s) did not read back as written \
             (offsets in the tests' extra.verify.failure_samples)"
        );
        return crate::verify_cmd::EXIT_INTEGRITY;
    }
    code
}

/// `--verify` on block tests: something must write, in blocks of whole sectors.
fn check_verify(plan: &Plan) -> Result<(), CliError> {
    let writers: Vec<&TestSpec> = plan.tests.iter().filter(|t| t.job.rw.writes()).collect();
    if writers.is_empty() {
        return Err(CliError::Usage(format!(
            "--verify checks what the tests write, and every test of {} only reads; \
             give a write or mixed --rw",
            plan.preset
        )));
    }
    for t in writers {
        let g = iolab_integrity::written::granule_of(&t.job);
        if g == 0 || !g.is_multiple_of(iolab_integrity::block::SECTOR as u64) {
            return Err(CliError::Usage(format!(
                "--verify writes self-describing blocks of whole 512-byte sectors: --bs (and \
                 every write size and alignment of an access specification) must be a multiple \
                 of 512, and test {} writes in blocks of {g} bytes",
                t.name
            )));
        }
    }
    Ok(())
}

/// What every test of a block run shares.
struct Ctx<'a> {
    target: &'a Target,
    stop: &'a AtomicBool,
    progress: &'a Progress,
    watch: &'a [String],
    /// `--verify`: the run id stamped into every block.
    verify: Option<u64>,
}

/// Reads the region back after a pass of a `--verify` test and adds the counts to `tally`.
fn verify_pass(
    ctx: &Ctx,
    written: &iolab_integrity::written::Written,
    direct: bool,
    tally: &mut iolab_integrity::Tally,
) -> Result<(), CliError> {
    let t = ctx
        .target
        .read_back(written, direct, ctx.stop)
        .map_err(target_error)?;
    tally.merge(t);
    Ok(())
}

/// Runs every test; stores each pass as soon as it is measured.
fn execute(
    plan: &Plan,
    ctx: &Ctx,
    run: &mut RunRecord,
    rec: &mut Recorder,
) -> Result<(), CliError> {
    let (target, stop, progress, watch) = (ctx.target, ctx.stop, ctx.progress, ctx.watch);
    let s = &plan.settings;
    let mut elapsed_plan = Duration::ZERO;
    for (ti, test) in plan.tests.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut record = TestRecord {
            name: test.name.clone(),
            group: test.group.clone(),
            job: test.job.clone(),
            passes: Vec::new(),
            summary: TestSummary::default(),
            extra: serde_json::Value::Null,
        };
        let test_id = match (&mut rec.store, rec.run_id) {
            (Some(st), Some(id)) => Some(st.add_test(id, ti as u32, &record)?),
            _ => None,
        };
        // `--verify`: one write state per test (its own block size), counts over its passes.
        let written = ctx.verify.filter(|_| test.job.rw.writes()).and_then(|id| {
            let g = iolab_integrity::written::granule_of(&test.job);
            iolab_integrity::written::Written::new(id, g, 0, target.info.size)
        });
        let mut tally = iolab_integrity::Tally::default();
        let mut p = 0u32;
        let mut converged = None;
        let mut measuring_since = Instant::now();
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let warm = p < s.warmup_passes;
            let measured = record.passes.len() as u32;
            if !warm {
                if measured == 0 {
                    measuring_since = Instant::now();
                }
                match plan.until_stable {
                    None if measured >= s.runs => break,
                    None => {}
                    Some((pct, max_runs, max_time)) => {
                        let mbs: Vec<f64> = record.passes.iter().map(|p| p.mb_s).collect();
                        if measured >= s.runs && iolab_stats::is_stable(&mbs, pct) {
                            converged = Some(true);
                            break;
                        }
                        if measured >= max_runs || measuring_since.elapsed() >= max_time {
                            converged = Some(false);
                            break;
                        }
                    }
                }
            }
            let dur = if warm { s.warmup_duration } else { s.duration };
            let label = if warm {
                format!("{} warm-up", test.name)
            } else if plan.until_stable.is_some() {
                format!("{} {}", test.name, measured + 1)
            } else {
                format!("{} {}/{}", test.name, measured + 1, s.runs)
            };
            let obs = progress.pass(label, elapsed_plan, dur);
            let index = if warm { 0 } else { measured + 1 };
            let check_cache = !s.direct && test.job.rw.reads();
            let cache_before = if check_cache {
                target.resident_fraction()
            } else {
                None
            };
            let activity = ActivitySample::now();
            let out = run_pass(target, test, s, index, dur, stop, &obs, written.as_ref())
                .map_err(target_error)?;
            let activity = activity.until(&ActivitySample::now(), watch);
            if let Some(w) = &written {
                // After the pass's clock stopped: read-back time is not part of the pass.
                verify_pass(ctx, w, s.direct, &mut tally)?;
            }
            elapsed_plan += dur;
            p += 1;
            for n in out.notes {
                if !run.notes.contains(&n) {
                    run.notes.push(n);
                }
            }
            if out.interrupted {
                // A pass cut short by Ctrl-C is not a measurement.
                break;
            }
            if !warm && !out.access_ios.is_empty() {
                let counts = record.extra["access_ios"]
                    .as_array()
                    .map(|v| v.iter().filter_map(|x| x.as_u64()).collect::<Vec<u64>>())
                    .unwrap_or_else(|| vec![0; out.access_ios.len()]);
                let sum: Vec<u64> = counts
                    .iter()
                    .zip(&out.access_ios)
                    .map(|(a, b)| a + b)
                    .collect();
                record.extra = serde_json::json!({
                    "access": test.job.access,
                    "access_ios": sum,
                });
            }
            let mut pass = out.record;
            pass.context = PassContext {
                cache_resident_before: cache_before,
                cache_resident_after: if check_cache {
                    target.resident_fraction()
                } else {
                    None
                },
                activity,
            };
            let errors = pass.errors.clone();
            if !warm || !errors.is_empty() {
                if let (Some(st), Some(tid)) = (&mut rec.store, test_id) {
                    st.add_pass(tid, &pass)?;
                }
                record.passes.push(pass);
            }
            if let Some(e) = errors.first() {
                let mut msg = format!(
                    "{}: I/O error during {}: {} (errno {}) at offset {} length {}",
                    target.info.io_path, test.name, e.message, e.errno, e.offset, e.len
                );
                if e.errno == libc::EINVAL && s.direct {
                    msg.push_str(
                        "; O_DIRECT refused this I/O: the block size or offset is not aligned \
                         to what the device or filesystem needs, or direct I/O is not \
                         supported here. Use a larger --bs or --buffered.",
                    );
                }
                record.summary = summarize(&record.passes, plan.score);
                run.tests.push(record);
                return Err(CliError::Failed(msg));
            }
        }
        if written.is_some() {
            let line = tally.summary_line(&record.name);
            progress.println(&line);
            run.notes.push(line);
            record.extra["verify"] = serde_json::to_value(&tally).unwrap_or_default();
        }
        record.summary = summarize(&record.passes, plan.score);
        record.summary.converged = converged;
        if let (Some(st), Some(tid)) = (&mut rec.store, test_id) {
            st.update_test_summary(tid, &record.summary)?;
        }
        if !record.passes.is_empty() {
            progress.println(&format!(
                "{:<28} {:>10.2} MB/s {:>12.0} IOPS",
                record.name, record.summary.mb_s, record.summary.iops
            ));
            run.tests.push(record);
        }
    }
    Ok(())
}
