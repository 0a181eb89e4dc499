//! `iolab export-fio` and `iolab crosscheck`: a block preset (or an fio job file) as fio
//! job text, and the same tests run by iolab and by fio alternately on one prepared file.
//!
//! Both parse their options through the block workload's (or `run fio`'s) own option
//! structs, and refuse by name the options they cannot honour.

pub mod fio_tool;

use std::path::Path;
use std::time::Duration;

use iolab_engine::run_pass;
use iolab_measure::crosscheck::{CrossRow, ToolSample};
use iolab_runner::block::{prepare_target, target_error, BlockPlan};
use iolab_runner::progress::Progress;
use iolab_runner::{CommonArgs, ParseError, Registry, RunError, UsageError, Workload};
use iolab_spec::{fio, fiojob, TestSpec};

/// (requests completed, merges, sectors) of one /proc/diskstats row, both directions.
type Counters = (u64, u64, u64);

/// `name`'s counters now.
fn disk_counters(name: &str) -> Option<Counters> {
    let text = std::fs::read_to_string("/proc/diskstats").ok()?;
    parse_diskstats(&text, name)
}

fn parse_diskstats(text: &str, name: &str) -> Option<Counters> {
    text.lines().find_map(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .enumerate()
            .filter(|(i, _)| *i != 2)
            .map(|(_, w)| w.parse().unwrap_or(0))
            .collect();
        let n = l.split_whitespace().nth(2)?;
        // After dropping the name: reads 2, read merges 3, read sectors 4, writes 6,
        // write merges 7, write sectors 8.
        (n == name && f.len() >= 9).then(|| (f[2] + f[6], f[3] + f[7], f[4] + f[8]))
    })
}

/// (requests, merges) per I/O of `bs` bytes since `before`: the device's counts scaled by
/// the I/Os its bytes make (so a pass's ramp, counted on both sides, does not matter).
fn device_per_io(name: Option<&str>, before: Option<Counters>, bs: u64) -> Option<(f64, f64)> {
    let (b, a) = (before?, disk_counters(name?)?);
    let bytes = a.2.saturating_sub(b.2) * 512;
    if bs == 0 || bytes < bs {
        return None;
    }
    let ios = bytes as f64 / bs as f64;
    Some((
        a.0.saturating_sub(b.0) as f64 / ios,
        a.1.saturating_sub(b.1) as f64 / ios,
    ))
}

/// The block presets only: what fio can run.
static BLOCK_ONLY: &[&dyn Workload] = &[&crate::block::WORKLOAD];

/// `iolab run fio` only: what `crosscheck --job` plans with.
static FIO_ONLY: &[&dyn Workload] = &[&crate::fio::run::WORKLOAD];

/// What a fio job file cannot say, and why.
pub const NOT_IN_A_JOB_FILE: &[(&str, &str)] = &[
    ("--runs", ONE_JOB),
    ("--passes", ONE_JOB),
    ("--warmup", NO_WARMUP),
    ("--warmup-time", NO_WARMUP),
    ("--until-stable", NOT_ADAPTIVE),
    ("--max-runs", NOT_ADAPTIVE),
    ("--max-time", NOT_ADAPTIVE),
    ("--budget", NOT_ADAPTIVE),
    (
        "--repeat",
        "a job file describes one run; run fio several times",
    ),
    ("--score", "fio reports one result per job"),
    ("--verify", NOT_FIO_VERIFY),
    ("--label", NOTHING_STORED),
    ("--no-store", NOTHING_STORED),
    ("--db", NOTHING_STORED),
    ("--json", "the job file is the output (see --output)"),
    ("--quiet", "nothing runs"),
    ("-q", "nothing runs"),
];

/// What crosscheck does not do, and why.
pub const NOT_IN_CROSSCHECK: &[(&str, &str)] = &[
    ("--until-stable", FIXED_PASSES),
    ("--max-runs", FIXED_PASSES),
    ("--max-time", FIXED_PASSES),
    ("--budget", FIXED_PASSES),
    ("--repeat", "nothing is stored; give more --runs"),
    ("--score", "the comparison is of medians"),
    ("--verify", NOT_FIO_VERIFY),
    ("--label", NOTHING_STORED),
    ("--no-store", NOTHING_STORED),
    ("--db", NOTHING_STORED),
];

const ONE_JOB: &str = "a fio job runs once; run fio several times (or use `iolab crosscheck`)";
const NO_WARMUP: &str = "fio has no warm-up passes (ramp_time is --ramp)";
const NOT_ADAPTIVE: &str = "fio cannot repeat a job until it is stable";
const NOT_FIO_VERIFY: &str = "iolab's verified blocks are not fio's verify formats";
const NOTHING_STORED: &str = "nothing is stored";
const FIXED_PASSES: &str = "both tools run the same fixed number of passes";

/// A plan from `args` parsed by `workloads`, after refusing `refused` options by name.
fn plan_with(
    bin: &str,
    workloads: &'static [&'static dyn Workload],
    args: &[String],
    refused: &[(&str, &str)],
) -> Result<(BlockPlan, CommonArgs), ParseError> {
    for (flag, why) in refused {
        if let Some(given) = args
            .iter()
            .find(|a| *a == flag || a.starts_with(&format!("{flag}=")))
        {
            let e = UsageError::option(flag, format!("{given} does not apply to `{bin}`: {why}"));
            return Err(ParseError::Usage(e));
        }
    }
    let registry = Registry {
        workloads,
        default: crate::block::default_name,
    };
    let parsed = registry.parse(bin, args).map_err(|e| match e {
        // An option of another workload: say which (as `iolab run` does).
        ParseError::Clap(c) => {
            let Some(flag) = iolab_runner::unknown_flag(&c) else {
                return ParseError::Clap(c);
            };
            let takers = crate::registry().takers("iolab run", &flag);
            if takers.is_empty() {
                return ParseError::Clap(c);
            }
            ParseError::Usage(UsageError::option(
                &flag,
                format!(
                    "--{flag} does not apply to `{bin}`; it is an option of `iolab run` {}",
                    takers.join(", ")
                ),
            ))
        }
        other => other,
    })?;
    let plan = parsed
        .job
        .block()
        .expect("block presets and fio job files plan block jobs")
        .clone();
    Ok((plan, parsed.common))
}

/// `iolab export-fio ARGS`: the fio job file of a block preset.
pub fn export_fio(args: &[String]) -> Result<String, ParseError> {
    let (plan, common) = plan_with("iolab export-fio", BLOCK_ONLY, args, NOT_IN_A_JOB_FILE)?;
    Ok(fio::job_file(
        &plan.tests,
        &plan.settings,
        &export_filename(&common),
    ))
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

/// How fio's job is written for one test, pass length (seconds), file and region size.
type FioJobText = Box<dyn Fn(&TestSpec, f64, &str, u64) -> String>;

/// The directory fio's file engines work in during a crosscheck, removed (while it is still
/// the one made) when the crosscheck ends, however it ends.
struct FioDir(Option<iolab_sys::files::Made>);

impl Drop for FioDir {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            let path = d.path().to_path_buf();
            if let Err(e) = d.remove() {
                eprintln!("iolab: cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// A crosscheck ready to run: iolab's plan, the common options and, for a job file, how
/// fio's text is cut from the file (a preset's is written by `iolab_spec::fio`).
pub struct Crosscheck {
    pub plan: BlockPlan,
    pub common: CommonArgs,
    fio_text: Option<FioJobText>,
}

impl Crosscheck {
    /// `iolab crosscheck PRESET [options]`.
    pub fn preset(args: &[String]) -> Result<Self, ParseError> {
        let (plan, common) = plan_with("iolab crosscheck", BLOCK_ONLY, args, NOT_IN_CROSSCHECK)?;
        Ok(Crosscheck {
            plan,
            common,
            fio_text: None,
        })
    }

    /// `iolab crosscheck --job FILE [options]`: every job of the file, fio on the file's own
    /// text with the file, region and pass length iolab used.
    pub fn job_file(file: &str, args: &[String]) -> Result<Self, ParseError> {
        let mut fio_args = vec!["fio".to_string(), file.to_string()];
        fio_args.extend(args.iter().cloned());
        let (plan, common) = plan_with(
            "iolab crosscheck --job",
            FIO_ONLY,
            &fio_args,
            NOT_IN_CROSSCHECK,
        )?;
        let parsed = fiojob::parse_file(Path::new(file))
            .map_err(|e| ParseError::Usage(UsageError::general(e.to_string())))?;
        let timed = plan.settings.duration < iolab_spec::MAX_DURATION;
        let settings = plan.settings.clone();
        let text = move |test: &TestSpec, secs: f64, io_path: &str, region: u64| {
            let at = io_path.replace(':', "\\:");
            // The test's own engine where it has one.
            let files = settings
                .for_job(&test.job)
                .engine
                .is_some_and(|k| k.file_set());
            let mut extra = if files {
                // fio's file engines: the same number of one-block files as iolab's, in
                // their own directory, removed by fio after each pass (unlink=1).
                let bs = test.job.bs.max(1);
                vec![
                    format!("directory={at}"),
                    format!("nrfiles={}", region / bs),
                    format!("filesize={bs}"),
                    format!("size={}", region / bs * bs),
                    "unlink=1".to_string(),
                ]
            } else {
                vec![format!("filename={at}"), format!("size={region}")]
            };
            if timed {
                extra.push(format!("runtime={}ms", (secs * 1000.0).round() as u64));
            }
            // The clones' parts iolab used (offset_increment scaled into --size), so that
            // fio stays in the region too.
            if let Some(c) = test.job.clones {
                extra[1] = format!("size={}", c.len);
                extra.push(format!("offset={}", c.offset));
                extra.push(format!("offset_increment={}", c.increment));
            }
            // fio's verify=pattern writes the pattern alone, as iolab does, so that each
            // tool's reads check what the other wrote.
            if test.job.pattern.is_some() {
                extra.push("verify=pattern".into());
            }
            // fio saves a verifying job's state in the current directory when it ends: not
            // wanted from a crosscheck's passes.
            extra.push("verify_state_save=0".into());
            fiojob::map::single_job_file(&parsed, &test.name, &extra)
                .expect("the plan's tests are the file's jobs")
        };
        Ok(Crosscheck {
            plan,
            common,
            fio_text: Some(Box::new(text)),
        })
    }

    /// Prepares the target as `run` does, then for every test runs an iolab pass and an fio
    /// pass of the same job on the same file, alternately (`--warmup` + `--runs` times each);
    /// the measured passes of both, pair by pair. The target is removed at the end if iolab
    /// created it.
    pub fn run(mut self) -> Result<(Vec<CrossRow>, String), RunError> {
        // Both tools run the same fixed passes (a cdm profile's adaptive default included).
        self.plan.until_stable = None;
        if !fio_tool::installed() {
            return Err(RunError::Failed(
                "fio is not installed (Debian: apt-get install fio)".into(),
            ));
        }
        let stop = iolab_runner::signals::install().map_err(|e| RunError::caused("signals", e))?;
        let progress = Progress::new(self.plan.planned() * 2, self.common.quiet);
        let target = prepare_target(
            &mut self.plan,
            self.common.target.clone(),
            &stop,
            &progress,
            &mut |_, _| {},
        )?;
        let s = self.plan.settings.clone();
        let io_path = target.info.io_path.clone();
        // The block device under the file (its /proc/diskstats row), for requests and
        // merges per I/O on both sides.
        let device = {
            use std::os::unix::fs::{FileTypeExt, MetadataExt};
            match std::fs::metadata(&io_path) {
                Ok(m) if m.file_type().is_block_device() => crate::common::device_name(m.rdev()),
                _ => crate::common::device_of(Path::new(&io_path)),
            }
        };
        // fio's file engines make their files in a directory: a private one beside the test
        // file for the crosscheck, removed at its end.
        let file_set = self
            .plan
            .tests
            .iter()
            .any(|t| s.for_job(&t.job).engine.is_some_and(|k| k.file_set()));
        let fio_dir = match file_set {
            true => {
                let p = Path::new(&io_path).with_file_name(iolab_sys::files::unique_name("fio"));
                let made = iolab_sys::files::Made::private_dir(&p)
                    .map_err(|e| RunError::caused(format!("cannot make {}", p.display()), e))?;
                Some(FioDir(Some(made)))
            }
            false => None,
        };
        let fio_at = match &fio_dir {
            Some(FioDir(Some(d))) => d.path().display().to_string(),
            _ => io_path.clone(),
        };
        let mut rows = Vec::new();
        let mut elapsed = Duration::ZERO;
        for test in &self.plan.tests {
            let at = match s.for_job(&test.job).engine.is_some_and(|k| k.file_set()) {
                true => &fio_at,
                false => &io_path,
            };
            let job_text = |secs: f64| match &self.fio_text {
                Some(f) => f(test, secs, at, s.size),
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
            let mut row = CrossRow {
                test: test.name.clone(),
                ..CrossRow::default()
            };
            for p in 0..s.warmup_passes + s.runs {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return Err(RunError::Interrupted);
                }
                let warm = p < s.warmup_passes;
                let dur = if warm { s.warmup_duration } else { s.duration };
                let obs = progress.pass(format!("{} iolab", test.name), elapsed, dur);
                let before = device.as_deref().and_then(disk_counters);
                let out = run_pass(&target, test, &s, p + 1, dur, &stop, &obs, None)
                    .map_err(target_error)?;
                let iolab_dev = device_per_io(device.as_deref(), before, bs);
                elapsed += dur;
                if let Some(e) = out.record.errors.first() {
                    return Err(RunError::Failed(format!(
                        "{}: {} (errno {}) at offset {}",
                        test.name, e.message, e.errno, e.offset
                    )));
                }
                let _ = progress.pass(format!("{} fio", test.name), elapsed, dur);
                let cached = target.resident_fraction();
                let before = device.as_deref().and_then(disk_counters);
                let mut f = fio_tool::run(if warm { &warm_job } else { &job }, bs)?;
                let fio_dev = device_per_io(device.as_deref(), before, bs);
                elapsed += dur;
                if !warm {
                    let r = &out.record;
                    row.iolab.push(ToolSample {
                        mb_s: r.mb_s,
                        iops: r.iops,
                        lat_mean_us: r.lat_us.mean,
                        requests_per_io: iolab_dev.map(|d| d.0),
                        merges_per_io: iolab_dev.map(|d| d.1),
                        cpu_us_per_io: (r.ios > 0).then_some(r.cpu.cpu_us_per_io),
                        cached_before: r.context.cache_resident_before,
                    });
                    f.requests_per_io = fio_dev.map(|d| d.0);
                    f.merges_per_io = fio_dev.map(|d| d.1);
                    f.cached_before = cached;
                    row.fio.push(f);
                }
            }
            rows.push(row);
        }
        progress.finish();
        drop(target);
        let heading = format!(
            "iolab vs fio on {io_path} · {} · {} · {} pass(es) of {:.1} s each, alternating",
            match s.engine {
                Some(e) => e.as_str(),
                None if self.plan.tests.iter().any(|t| t.job.io.is_some()) => {
                    "engine per test"
                }
                None => "no engine",
            },
            match self.plan.tests.iter().any(|t| t.job.io.is_some()) {
                true => "O_DIRECT or buffered per test",
                false if s.direct => "O_DIRECT",
                false => "buffered",
            },
            s.runs,
            s.duration.as_secs_f64()
        );
        Ok((rows, heading))
    }
}
