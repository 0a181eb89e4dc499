//! `iolab run fio`: its options, the plan (job file to block plan, refusing what cannot be
//! run) and the job.

use std::path::PathBuf;

use clap::Args;
use iolab_engine::pass::MAX_BUFFER_BYTES;
use iolab_runner::block::BlockPlan;
use iolab_runner::options::{DurationArg, RunsArg, SafetyArgs, SizeArg};
use iolab_runner::{CommonArgs, Def, Job, RunContext, RunError, UsageError};
use iolab_spec::engopt::Trims;
use iolab_spec::fiojob::{self, FioError, Overrides};
use iolab_spec::{format_bytes, JobSpec, RunSettings, TestSpec};

/// The workload's entry in the registry.
pub static WORKLOAD: Def<FioOptions> = Def::new(
    &["fio"],
    "run an fio job file on iolab's engine: one test per job, --size and --duration \
     replacing the jobs' size and runtime (docs/fio.md)",
    plan,
    &crate::block::info::INFO,
);

/// Options of `iolab run fio`.
#[derive(Args, Debug, Clone)]
pub struct FioOptions {
    /// The fio job file.
    #[arg(value_name = "JOBFILE")]
    pub jobfile: PathBuf,
    /// The region every job works in, in place of the jobs' size/filesize.
    #[command(flatten)]
    pub size: SizeArg,
    /// How long each job runs at most, in place of the jobs' runtime.
    #[command(flatten)]
    pub duration: DurationArg,
    #[command(flatten)]
    pub runs: RunsArg,
    #[command(flatten)]
    pub safety: SafetyArgs,
}

/// The start of the run note that keeps a job file's text.
pub const JOB_FILE_NOTE: &str = "fio job file ";

fn usage(e: FioError) -> UsageError {
    UsageError::general(e.to_string())
}

/// Reads `path` and resolves it into a block plan with `ov`, and the fio logs its jobs ask
/// for; touches nothing but the job file and its includes.
pub fn plan_file(
    path: &std::path::Path,
    ov: Overrides,
    target_is_dir: bool,
) -> Result<(BlockPlan, fiojob::logs::LogPlan), UsageError> {
    let file = fiojob::parse_file(path).map_err(usage)?;
    let fp = fiojob::map_jobs(&file, ov).map_err(usage)?;
    let log_plan = fiojob::logs::plan(&file, &fp).map_err(usage)?;
    let first = &fp.jobs[0];
    if fp.size.is_none() && target_is_dir {
        return Err(usage(FioError::new(
            &first.file,
            first.line,
            "size",
            "the job file sets no size, and the target is a directory; give size or --size",
        )));
    }
    let engine_of = |j: &fiojob::FioJob| j.job.io.as_ref().map_or(fp.engine, |io| io.engine);
    for j in &fp.jobs {
        let depth = iolab_engine::effective_iodepth(engine_of(j), j.job.iodepth) as u64;
        let pinned = j.job.bs * depth * j.job.numjobs as u64;
        if pinned > MAX_BUFFER_BYTES {
            return Err(usage(FioError::new(
                &j.file,
                j.line,
                format!("[{}]", j.name),
                format!(
                    "bs x iodepth x numjobs = {} of buffers, above the {} iolab pins for one \
                     job",
                    format_bytes(pinned),
                    format_bytes(MAX_BUFFER_BYTES)
                ),
            )));
        }
    }
    let mut notes = fp.notes.clone();
    notes.extend(log_plan.notes.iter().cloned());
    let (engine, engine_notes) = iolab_engine::engines::usable(
        fp.engine,
        false,
        fp.jobs
            .iter()
            .filter(|j| engine_of(j) == fp.engine)
            .map(|j| j.job.iodepth),
    )
    .map_err(UsageError::general)?;
    notes.extend(engine_notes);
    // Jobs on engines of their own: each one usable here (io_uring may fall back to psync).
    let mut jobs = fp.jobs.clone();
    for j in &mut jobs {
        if let Some(io) = &mut j.job.io {
            let (k, n) =
                iolab_engine::engines::usable(io.engine, false, []).map_err(UsageError::general)?;
            io.engine = k;
            for n in n {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
            if iolab_engine::effective_iodepth(k, j.job.iodepth) < j.job.iodepth {
                notes.push(format!(
                    "job {}: {} is synchronous: it ran at queue depth 1 (iodepth={})",
                    j.name,
                    k.as_str(),
                    j.job.iodepth
                ));
            }
        }
    }
    if !fp.timed {
        notes.push("no runtime: each job's pass ends when it has done its bytes".into());
    }
    for (name, text) in &file.sources {
        notes.push(format!("{JOB_FILE_NOTE}{name}:\n{text}"));
    }
    let tests = jobs
        .iter()
        .map(|j| TestSpec {
            name: j.name.clone(),
            group: j.name.clone(),
            job: JobSpec {
                // fio's per-job logs of a numjobs job: each thread's series kept.
                thread_series: log_plan
                    .jobs
                    .iter()
                    .any(|l| l.test == j.name && l.files.iter().any(|f| f.thread.is_some())),
                ..j.job.clone()
            },
        })
        .collect();
    let settings = RunSettings {
        size: fp.size.unwrap_or(0),
        duration: fp.duration,
        runs: 1,
        warmup_passes: 0,
        warmup_duration: fp.duration,
        ramp: fp.ramp,
        // Tests on engines of their own: the run names none, and is direct only if all are.
        engine: (!fp.per_test).then_some(engine),
        direct: match fp.per_test {
            false => fp.direct,
            true => jobs
                .iter()
                .all(|j| j.job.io.as_ref().is_some_and(|io| io.direct)),
        },
        data: fp.data,
        engine_opts: match fp.per_test {
            false => fp.engine_opts.clone(),
            true => Default::default(),
        },
    };
    let mut plan = BlockPlan::new("fio", settings, tests);
    plan.notes = notes;
    plan.verify = fp.verify;
    plan.size_given = fp.size.is_some();
    plan.size_at = fp.size_at.clone();
    if fp.jobs.iter().any(|j| j.steady.is_some()) {
        // fio's steadystate: each such job's one pass is judged in rounds of ss_interval,
        // by its own rule (docs/fio.md).
        let mut each = Vec::with_capacity(fp.jobs.len());
        for j in &fp.jobs {
            let Some(ss) = &j.steady else {
                each.push(None);
                continue;
            };
            let rule = iolab_stats::series::SteadyRule::parse(&ss.rule)
                .map_err(|e| UsageError::general(e.to_string()))?;
            each.push(Some(iolab_runner::block::SteadyPlan {
                rule,
                window: ss.window,
                round: ss.round,
                skip: ss.skip,
                limit: fp.duration,
            }));
            plan.notes.push(format!(
                "steadystate={} (job {}): its pass is judged in rounds of {}s (fio's \
                 ss_interval) after its first {}s (ss_ramp), until the last {} (ss_dur) hold \
                 it, at most {} (the runtime); fio judges a rolling window of per-interval \
                 samples the same way",
                ss.rule,
                j.name,
                ss.round.as_secs_f64(),
                ss.skip.as_secs_f64(),
                ss.window,
                ss.max_rounds
            ));
        }
        plan.steady = iolab_runner::steady::Steady::Each(each);
    }
    if plan.verify {
        plan.check_verify()?;
    }
    Ok((plan, log_plan))
}

fn plan(_name: &str, a: FioOptions, common: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let ov = Overrides {
        size: a.size.get()?,
        duration: a.duration.get()?,
    };
    if let Some(d) = ov.duration {
        if d < std::time::Duration::from_millis(100) {
            return Err(UsageError::option(
                "duration",
                "--duration must be at least 100ms",
            ));
        }
    }
    let (mut plan, log_plan) = plan_file(&a.jobfile, ov, common.target.is_dir())?;
    refuse_file_trims(&a.jobfile, ov, &plan, &common.target)?;
    if plan.steady.any() && a.runs.runs.is_some() {
        return Err(UsageError::option(
            "runs",
            "the job file's steadystate makes a job one pass judged in rounds; leave --runs \
             out",
        ));
    }
    let logs = super::logs::from_plan(&log_plan);
    let at = |w: &super::logs::Wanted| {
        log_plan
            .jobs
            .iter()
            .flat_map(|j| &j.files)
            .find(|f| f.path == w.path)
            .map_or(String::new(), |f| f.at.clone())
    };
    if let Some((w, why)) = super::logs::unfit(&logs) {
        return Err(UsageError::general(format!(
            "{}: {}: {why}",
            at(w),
            w.path.display()
        )));
    }
    if let Some(w) = super::logs::taken(&logs) {
        return Err(UsageError::general(format!(
            "{}: {} exists; iolab does not overwrite a log (remove it or give another name)",
            at(w),
            w.path.display()
        )));
    }
    plan.settings.runs = a.runs.get(1)?;
    plan.allow_destroy_device = a.safety.allow_destroy_device;
    plan.allow_overwrite_file = a.safety.allow_overwrite_file;
    Ok(Box::new(FioJob(plan, logs)))
}

/// fio's trims on its sync, libaio and io_uring engines are `BLKDISCARD` (its `os_trim` on
/// Linux), which only a block device takes: on a regular file fio fails the job (ENOTTY).
/// Such a job is refused at its `rw` unless the target is a block device; falloc's trims
/// punch holes and null's do nothing, on any target.
fn refuse_file_trims(
    jobfile: &std::path::Path,
    ov: Overrides,
    plan: &BlockPlan,
    target: &std::path::Path,
) -> Result<(), UsageError> {
    use std::os::unix::fs::FileTypeExt;
    let device = std::fs::metadata(target).is_ok_and(|m| m.file_type().is_block_device());
    if device {
        return Ok(());
    }
    let file = fiojob::parse_file(jobfile).map_err(usage)?;
    let fp = fiojob::map_jobs(&file, ov).map_err(usage)?;
    for (t, j) in plan.tests.iter().zip(&fp.jobs) {
        let engine = plan.settings.for_job(&t.job).engine;
        let Some((f, line)) = j.trim_at.as_ref().filter(|_| t.job.trim) else {
            continue;
        };
        let discards = |k: iolab_spec::EngineKind| k.desc().trims == Trims::Discard;
        if engine.is_some_and(discards) {
            return Err(usage(FioError::new(
                f,
                *line,
                "rw",
                format!(
                    "job {}: fio trims with BLKDISCARD (its os_trim), which only a block device \
                     takes: on a file or directory target fio fails the job (ENOTTY); give a \
                     block device as --target, or ioengine=falloc, whose trims punch holes in \
                     a file",
                    j.name,
                ),
            )));
        }
    }
    Ok(())
}

/// A planned job-file run and the fio logs to write after it.
pub struct FioJob(pub BlockPlan, pub Vec<super::logs::Wanted>);

impl Job for FioJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let FioJob(plan, logs) = *self;
        let result = iolab_runner::block::run(plan, ctx);
        if !logs.is_empty() && ctx.has_run() {
            match super::logs::write(ctx.run(), &logs) {
                Ok(w) => {
                    if !w.files.is_empty() {
                        let names: Vec<String> =
                            w.files.iter().map(|p| p.display().to_string()).collect();
                        ctx.note(format!("fio logs written: {}", names.join(", ")));
                    }
                    for s in w.skipped {
                        eprintln!("iolab: warning: fio log not written: {s}");
                        ctx.note(format!("fio log not written: {s}"));
                    }
                }
                Err(e) => {
                    eprintln!("iolab: warning: fio logs: {e}");
                    ctx.note(format!("fio logs: {e}"));
                }
            }
        }
        result
    }

    fn block(&self) -> Option<&BlockPlan> {
        Some(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use iolab_engine::engines::ENGINES;
    use iolab_spec::fiojob::{self, parse::Sources, Overrides};

    /// The engine a one-job file with `ioengine=NAME` (and `extra`) runs on, or the refusal.
    fn engine_of(name: &str, extra: &str) -> Result<iolab_spec::EngineKind, fiojob::FioError> {
        let src = Sources {
            read: &|_, _| {
                Err(iolab_sys::input::InputError::Io(
                    std::io::ErrorKind::NotFound.into(),
                ))
            },
            var: &|_| None,
        };
        let text = format!(
            "[j]\nrw=write\nsize=1m\nioengine={name}\n{extra}{}",
            files_of(name)
        );
        let file = fiojob::parse("j.fio", text.as_bytes(), &src)?;
        fiojob::map_jobs(&file, Overrides::default()).map(|p| p.engine)
    }

    /// What a job of 1 MiB on `engine` needs besides: a file engine's 256 files of 4 KiB,
    /// e4defrag's donor.
    fn files_of(engine: &str) -> &'static str {
        if fiojob::filejobs::is_file_engine(engine) {
            "nrfiles=256\n"
        } else if iolab_spec::engopt::by_fio(engine).is_some_and(|d| d.donor) {
            "donorname=d\n"
        } else {
            ""
        }
    }

    /// Each engine declares the fio names it runs (its `Desc`); the job-file mapping in
    /// iolab-spec must run each of them on that engine, so one side cannot be changed
    /// without the other.
    #[test]
    fn every_engines_fio_names_run_on_it() {
        crate::install();
        for d in ENGINES {
            for name in d.fio {
                // libaio is asynchronous only with O_DIRECT (buffered it runs on psync).
                assert_eq!(
                    engine_of(name, "direct=1\n"),
                    Ok(d.kind),
                    "ioengine={name} should run on {}",
                    d.kind.as_str()
                );
            }
            assert!(d.synchronous == (iolab_engine::effective_iodepth(d.kind, 8) == 1));
        }
        // And no other fio name reaches an engine.
        assert!(engine_of("posixaio", "").is_err());
    }

    /// Each engine option a job file may name (the engine's `Desc.options`) is read onto
    /// the run's settings on its engine, and refused on any other.
    #[test]
    fn every_engine_option_maps_on_its_engine_only() {
        crate::install();
        let plan = |text: &str| {
            let src = Sources {
                read: &|_, _| {
                    Err(iolab_sys::input::InputError::Io(
                        std::io::ErrorKind::NotFound.into(),
                    ))
                },
                var: &|_| None,
            };
            let file = fiojob::parse("j.fio", text.as_bytes(), &src).map_err(|e| e.to_string())?;
            fiojob::map_jobs(&file, Overrides::default()).map_err(|e| e.to_string())
        };
        use iolab_spec::engopt::Val;
        for d in ENGINES {
            for o in d.options {
                let Some((name, default)) = o.fio else {
                    continue;
                };
                assert!(
                    fiojob::options::row(name).is_none(),
                    "{name} is {}'s: delete its row in fio's option table (iolab-spec's \
                     fiojob/options.rs), which says what iolab does with the options no \
                     engine declares",
                    d.kind.as_str()
                );
                let (text, v) = match default {
                    Val::Flag(f) => (u8::from(!f).to_string(), Val::Flag(!f)),
                    Val::Count(n) => {
                        let m = if n < o.max { n + 1 } else { n - 1 };
                        (m.to_string(), Val::Count(m))
                    }
                };
                let job = format!("[j]\nrw=write\nsize=1m\ndirect=1\n{name}={text}\n");
                let p = plan(&format!(
                    "{job}ioengine={}\n{}",
                    d.fio[0],
                    files_of(d.fio[0])
                ))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(p.engine_opts.get(o.key), Some(v), "{name}");
                for other in ENGINES
                    .iter()
                    .filter(|e| e.kind != d.kind && !e.fio.is_empty())
                {
                    let e = plan(&format!(
                        "{job}ioengine={}\n{}",
                        other.fio[0],
                        files_of(other.fio[0])
                    ))
                    .unwrap_err();
                    assert!(
                        e.contains(&format!("{name}: an {}", d.kind.as_str())),
                        "{e}"
                    );
                }
            }
        }
    }
}
