//! `iolab export-fio` and `iolab crosscheck`: the same tests as fio job files, and run by
//! iolab and fio alternately on the same file with both results side by side.

use std::process::Command;
use std::time::Duration;

use iolab_engine::run_pass;
use iolab_runner::block::{prepare_target, target_error, BlockPlan};
use iolab_runner::progress::Progress;
use iolab_runner::{CommonArgs, ExitStatus, Registry, RunError, UsageError};
use iolab_spec::{fio, fiojob, TestSpec};
use iolab_stats::median;

/// The block presets only: what fio can run.
static BLOCK_ONLY: &[&dyn iolab_runner::Workload] = &[&iolab_workloads::block::WORKLOAD];

fn block_registry() -> Registry {
    Registry {
        workloads: BLOCK_ONLY,
        default: iolab_workloads::block::default_name,
    }
}

/// `iolab run fio` only: what `crosscheck --job` plans with.
static FIO_ONLY: &[&dyn iolab_runner::Workload] = &[&iolab_workloads::fio::run::WORKLOAD];

fn fio_registry() -> Registry {
    Registry {
        workloads: FIO_ONLY,
        default: |_| "fio",
    }
}

/// A block preset's plan from `args`, refusing `refused` options (what the command cannot
/// honour) by name.
fn block_plan(
    bin: &str,
    args: &[String],
    refused: &[(&str, &str)],
) -> Result<(BlockPlan, CommonArgs), ExitStatus> {
    plan_with(bin, &block_registry(), args, refused)
}

/// A plan from `args` parsed by `registry`, refusing `refused` options by name.
fn plan_with(
    bin: &str,
    registry: &Registry,
    args: &[String],
    refused: &[(&str, &str)],
) -> Result<(BlockPlan, CommonArgs), ExitStatus> {
    for (flag, why) in refused {
        if let Some(given) = args
            .iter()
            .find(|a| *a == flag || a.starts_with(&format!("{flag}=")))
        {
            let e = UsageError::option(flag, format!("{given} does not apply to `{bin}`: {why}"));
            return Err(crate::run_cmd::report_parse_error(
                iolab_runner::ParseError::Usage(e),
            ));
        }
    }
    let parsed = crate::run_cmd::parse(bin, registry, args)?;
    let plan = parsed
        .job
        .block()
        .expect("the block registry plans block jobs")
        .clone();
    Ok((plan, parsed.common))
}

/// What a fio job file cannot say, and why.
const NOT_IN_A_JOB_FILE: &[(&str, &str)] = &[
    (
        "--runs",
        "a fio job runs once; run fio several times (or use `iolab crosscheck`)",
    ),
    (
        "--passes",
        "a fio job runs once; run fio several times (or use `iolab crosscheck`)",
    ),
    (
        "--warmup",
        "fio has no warm-up passes (ramp_time is --ramp)",
    ),
    (
        "--warmup-time",
        "fio has no warm-up passes (ramp_time is --ramp)",
    ),
    (
        "--until-stable",
        "fio cannot repeat a job until it is stable",
    ),
    ("--max-runs", "fio cannot repeat a job until it is stable"),
    ("--max-time", "fio cannot repeat a job until it is stable"),
    ("--budget", "fio cannot repeat a job until it is stable"),
    (
        "--repeat",
        "a job file describes one run; run fio several times",
    ),
    ("--score", "fio reports one result per job"),
    (
        "--verify",
        "iolab's verified blocks are not fio's verify formats",
    ),
    ("--label", "nothing is stored"),
    ("--no-store", "nothing is stored"),
    ("--db", "nothing is stored"),
    ("--json", "the job file is the output (see --output)"),
    ("--quiet", "nothing runs"),
    ("-q", "nothing runs"),
];

/// `iolab export-fio`: prints (or writes) the fio job file of a preset.
pub fn export_fio(args: &[String]) -> ExitStatus {
    let mut args = args.to_vec();
    let mut output = None;
    if let Some(i) = args.iter().position(|a| a == "--output" || a == "-o") {
        if i + 1 >= args.len() {
            eprintln!("iolab: error: --output needs a FILE");
            return ExitStatus::Usage;
        }
        output = Some(args.remove(i + 1));
        args.remove(i);
    }
    let (plan, common) = match block_plan("iolab export-fio", &args, NOT_IN_A_JOB_FILE) {
        Ok(p) => p,
        Err(s) => return s,
    };
    let filename = export_filename(&common);
    let text = fio::job_file(&plan.tests, &plan.settings, &filename);
    match &output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("iolab: error: cannot write {path}: {e}");
                return ExitStatus::Failed;
            }
        }
        None => print!("{text}"),
    }
    ExitStatus::Ok
}

/// The file fio should use: the target itself, or a file in the target directory.
fn export_filename(c: &CommonArgs) -> String {
    let p = c.target_abs();
    if p.is_dir() {
        p.join("iolab-fio.dat").to_string_lossy().into_owned()
    } else {
        p.to_string_lossy().into_owned()
    }
}

/// One measurement of one tool.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    mb_s: f64,
    iops: f64,
    lat_mean_us: f64,
}

/// Runs fio on one test and reads its JSON: read and write summed (mixed tests). IOPS are
/// derived from fio's bandwidth and the block size: fio's own `iops` field is computed over
/// a different interval when `ramp_time` is set and then disagrees with its bandwidth.
fn run_fio(job_file: &str, bs: u64) -> Result<Sample, RunError> {
    let dir = std::env::temp_dir().join(format!("iolab-crosscheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| RunError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join("job.fio");
    std::fs::write(&path, job_file)
        .map_err(|e| RunError::Failed(format!("cannot write {}: {e}", path.display())))?;
    let out = Command::new("fio")
        .arg("--output-format=json")
        .arg(&path)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| RunError::Failed(format!("cannot run fio: {e}")))?;
    if !out.status.success() {
        return Err(RunError::Failed(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let start = text.find('{').unwrap_or(0);
    let doc: serde_json::Value = serde_json::from_str(&text[start..])
        .map_err(|e| RunError::Failed(format!("cannot parse fio's JSON: {e}")))?;
    let job = &doc["jobs"][0];
    let mut s = Sample::default();
    let mut lat_sum = 0.0;
    let mut ios = 0.0;
    for dir in ["read", "write"] {
        let d = &job[dir];
        let bw = d["bw_bytes"].as_f64().unwrap_or(0.0);
        s.mb_s += bw / 1e6;
        s.iops += if bs > 0 {
            bw / bs as f64
        } else {
            d["iops"].as_f64().unwrap_or(0.0)
        };
        let n = d["total_ios"].as_f64().unwrap_or(0.0);
        lat_sum += d["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0 * n;
        ios += n;
    }
    s.lat_mean_us = if ios > 0.0 { lat_sum / ios } else { 0.0 };
    Ok(s)
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// What crosscheck does not do.
const NOT_IN_CROSSCHECK: &[(&str, &str)] = &[
    (
        "--until-stable",
        "both tools run the same fixed number of passes",
    ),
    (
        "--max-runs",
        "both tools run the same fixed number of passes",
    ),
    (
        "--max-time",
        "both tools run the same fixed number of passes",
    ),
    ("--budget", "both tools run the same fixed number of passes"),
    ("--repeat", "nothing is stored; give more --runs"),
    ("--score", "the comparison is of medians"),
    (
        "--verify",
        "iolab's verified blocks are not fio's verify formats",
    ),
    ("--label", "nothing is stored"),
    ("--no-store", "nothing is stored"),
    ("--db", "nothing is stored"),
];

/// How crosscheck writes fio's job for one test and pass length (seconds) on a file.
type FioJobText<'a> = dyn Fn(&TestSpec, f64, &str, u64) -> String + 'a;

/// `iolab crosscheck`: every test of the preset (or, with `--job FILE`, every job of an
/// fio job file), iolab and fio alternately.
pub fn crosscheck(args: &[String]) -> ExitStatus {
    if let Some(i) = args
        .iter()
        .position(|a| a == "--job" || a.starts_with("--job="))
    {
        return crosscheck_job(args, i);
    }
    let (plan, common) = match block_plan("iolab crosscheck", args, NOT_IN_CROSSCHECK) {
        Ok(p) => p,
        Err(s) => return s,
    };
    match crosscheck_plan(plan, &common, None) {
        Ok(()) => ExitStatus::Ok,
        Err(e) => {
            eprintln!("iolab: error: {e}");
            e.status()
        }
    }
}

/// `iolab crosscheck --job FILE [options]`: every job of the file, iolab and fio (on the
/// file's own text, with the file, region and pass length iolab used) alternately.
fn crosscheck_job(args: &[String], at: usize) -> ExitStatus {
    let mut rest = args.to_vec();
    let file = match rest[at].strip_prefix("--job=") {
        Some(f) => {
            let f = f.to_string();
            rest.remove(at);
            f
        }
        None => {
            if at + 1 >= rest.len() {
                eprintln!("iolab: error: --job needs a JOBFILE");
                return ExitStatus::Usage;
            }
            rest.remove(at);
            rest.remove(at)
        }
    };
    let mut fio_args = vec!["fio".to_string(), file.clone()];
    fio_args.extend(rest);
    let (plan, common) = match plan_with(
        "iolab crosscheck --job",
        &fio_registry(),
        &fio_args,
        NOT_IN_CROSSCHECK,
    ) {
        Ok(p) => p,
        Err(s) => return s,
    };
    let parsed = match fiojob::parse_file(std::path::Path::new(&file)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("iolab: error: {e}");
            return ExitStatus::Usage;
        }
    };
    let timed = plan.settings.duration < iolab_spec::MAX_DURATION;
    let text = |test: &TestSpec, secs: f64, io_path: &str, region: u64| {
        let mut extra = vec![
            format!("filename={}", io_path.replace(':', "\\:")),
            format!("size={region}"),
        ];
        if timed {
            extra.push(format!("runtime={}ms", (secs * 1000.0).round() as u64));
        }
        fiojob::map::single_job_file(&parsed, &test.name, &extra)
            .expect("the plan's tests are the file's jobs")
    };
    match crosscheck_plan(plan, &common, Some(&text)) {
        Ok(()) => ExitStatus::Ok,
        Err(e) => {
            eprintln!("iolab: error: {e}");
            e.status()
        }
    }
}

fn crosscheck_plan(
    mut plan: BlockPlan,
    a: &CommonArgs,
    fio_text: Option<&FioJobText>,
) -> Result<(), RunError> {
    // Both tools run the same fixed passes (a cdm profile's adaptive default included).
    plan.until_stable = None;
    if Command::new("fio").arg("--version").output().is_err() {
        return Err(RunError::Failed(
            "fio is not installed (Debian: apt-get install fio)".into(),
        ));
    }
    let stop =
        iolab_runner::signals::install().map_err(|e| RunError::Failed(format!("signals: {e}")))?;
    let progress = Progress::new(plan.planned() * 2, a.quiet);
    let target = prepare_target(&mut plan, a.target.clone(), &stop, &progress)?;
    let s = plan.settings.clone();
    let io_path = target.info.io_path.clone();

    let mut rows = Vec::new();
    let mut elapsed = Duration::ZERO;
    for test in &plan.tests {
        let job_text = |secs: f64| match fio_text {
            Some(f) => f(test, secs, &io_path, s.size),
            None => format!(
                "{}\n{}",
                fio::global_section(&s, &io_path),
                fio::job_section(test, secs)
            ),
        };
        let job = job_text(s.duration.as_secs_f64());
        let warm_job = job_text(s.warmup_duration.as_secs_f64());
        // IOPS from fio's bandwidth over one block size, or fio's own with mixed sizes.
        let bs = if test.job.access.is_empty() {
            test.job.bs
        } else {
            0
        };
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for p in 0..s.warmup_passes + s.runs {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(RunError::Interrupted);
            }
            let warm = p < s.warmup_passes;
            let dur = if warm { s.warmup_duration } else { s.duration };
            let obs = progress.pass(format!("{} iolab", test.name), elapsed, dur);
            let out =
                run_pass(&target, test, &s, p + 1, dur, &stop, &obs, None).map_err(target_error)?;
            elapsed += dur;
            if let Some(e) = out.record.errors.first() {
                return Err(RunError::Failed(format!(
                    "{}: {} (errno {}) at offset {}",
                    test.name, e.message, e.errno, e.offset
                )));
            }
            let _ = progress.pass(format!("{} fio", test.name), elapsed, dur);
            let f = run_fio(if warm { &warm_job } else { &job }, bs)?;
            elapsed += dur;
            if !warm {
                let r = &out.record;
                ours.push(Sample {
                    mb_s: r.mb_s,
                    iops: r.iops,
                    lat_mean_us: r.lat_us.mean,
                });
                theirs.push(f);
            }
        }
        let med =
            |v: &[Sample], f: fn(&Sample) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        rows.push((
            test.name.clone(),
            [
                med(&ours, |x| x.mb_s),
                med(&theirs, |x| x.mb_s),
                med(&ours, |x| x.iops),
                med(&theirs, |x| x.iops),
                med(&ours, |x| x.lat_mean_us),
                med(&theirs, |x| x.lat_mean_us),
            ],
        ));
    }
    progress.finish();
    drop(target);

    let mut out = format!(
        "iolab vs fio on {io_path} · {} · {} · median of {} pass(es) of {:.1} s each, \
         alternating\nMB/s = 10^6 bytes/s; ratio = iolab / fio\n\n",
        s.engine.as_str(),
        if s.direct { "O_DIRECT" } else { "buffered" },
        s.runs,
        s.duration.as_secs_f64()
    );
    out.push_str(&format!(
        "{:<22} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6} {:>9} {:>9}\n",
        "Test",
        "iolab MB/s",
        "fio MB/s",
        "ratio",
        "iolab IOPS",
        "fio IOPS",
        "ratio",
        "iolab µs",
        "fio µs"
    ));
    let mut doc = Vec::new();
    for (name, v) in &rows {
        let r1 = if v[1] > 0.0 { v[0] / v[1] } else { f64::NAN };
        let r2 = if v[3] > 0.0 { v[2] / v[3] } else { f64::NAN };
        out.push_str(&format!(
            "{:<22} {:>9} {:>9} {:>6.3} {:>9} {:>9} {:>6.3} {:>9} {:>9}\n",
            name,
            fmt(v[0]),
            fmt(v[1]),
            r1,
            fmt(v[2]),
            fmt(v[3]),
            r2,
            fmt(v[4]),
            fmt(v[5])
        ));
        doc.push(serde_json::json!({
            "test": name,
            "iolab": {"mb_s": v[0], "iops": v[2], "lat_mean_us": v[4]},
            "fio": {"mb_s": v[1], "iops": v[3], "lat_mean_us": v[5]},
            "ratio_mb_s": r1,
            "ratio_iops": r2,
        }));
    }
    match a.json.as_deref() {
        Some("-") => println!("{}", serde_json::Value::Array(doc)),
        Some(path) => {
            print!("{out}");
            std::fs::write(path, serde_json::Value::Array(doc).to_string())
                .map_err(|e| RunError::Failed(format!("cannot write {path}: {e}")))?;
        }
        None => print!("{out}"),
    }
    Ok(())
}
