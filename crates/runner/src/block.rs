//! The block pass loop every block preset runs: target preparation, warm-ups, measured
//! passes with ramp (a default one when none is given), adaptive passes (`--until-stable`,
//! the cdm profiles' default: stop a test once stable, spend the run's budget on those that
//! are not), the `--verify` read-back after each pass, page-cache and device-activity
//! sampling around the counted part of each pass, and each pass stored as it finishes.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use iolab_engine::{prepare_with, run_pass, PassObserver, Target, TargetError, TargetRequest};
use iolab_integrity::written::{granule_of, Written};
use iolab_integrity::Tally;
use iolab_measure::extra::{Adaptive, RunnerExtra, Stopped};
use iolab_measure::{Activity, ActivitySample, PassContext, TestRecord, TestSummary};
use iolab_spec::{RunSettings, TestSpec};
use iolab_stats::{summarize, Score};

use crate::context::{RunContext, RunStart};
use crate::progress::Progress;
use crate::status::{RunError, UsageError};

/// Adaptive passes (`--until-stable`): a test stops once the 95% CI half-width of its MB/s
/// is within `pct`% of the mean (after at least `max(--runs, 3)` passes), or at its limits:
/// `max_runs` passes, `max_time` of measured pass time, or its share of the run's `budget`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UntilStable {
    pub pct: f64,
    pub max_runs: u32,
    pub max_time: Duration,
    /// Most pass time (ramp and duration of every pass, warm-ups included) the run spends;
    /// `None`: only the per-test limits. Setup, storing and read-backs come on top.
    pub budget: Option<Duration>,
}

/// Adaptive passes: most measured passes per test unless `--max-runs` says otherwise.
pub const DEFAULT_MAX_RUNS: u32 = 20;
/// Adaptive passes: most time of one test's measured passes unless `--max-time` says.
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(120);
/// Adaptive passes: the default budget is this many passes' time (ramp included) per test.
pub const BUDGET_PASSES_PER_TEST: u32 = 8;
/// Adaptive passes: the fewest measured passes a test's interval is judged on.
pub const MIN_ADAPTIVE_RUNS: u32 = 3;

/// The ramp of every pass when `--ramp` is not given: a tenth of the pass, at most 1 s, so a
/// start-up transient (a throttle's first slice, a device waking up, queues filling) is not
/// counted; none for passes that end after a fixed amount of I/O (ATTO, `--io-size`), which
/// count all of it.
pub fn default_ramp(duration: Duration, byte_limited: bool) -> Duration {
    if byte_limited {
        Duration::ZERO
    } else {
        (duration / 10).min(Duration::from_secs(1))
    }
}

/// A block run, resolved and checked before anything is touched.
#[derive(Debug, Clone)]
pub struct BlockPlan {
    pub preset: String,
    pub until_stable: Option<UntilStable>,
    pub settings: RunSettings,
    pub tests: Vec<TestSpec>,
    pub score: Score,
    pub notes: Vec<String>,
    /// `--verify`: stamp every write and read the region back after every pass.
    pub verify: bool,
    /// `--size` was given (a file or device target is then used up to it).
    pub size_given: bool,
    /// Where an input file set the size when `--size` did not (`FILE:LINE: size`), for
    /// refusals of it.
    pub size_at: Option<String>,
    pub allow_destroy_device: bool,
    pub allow_overwrite_file: bool,
    /// `--shared-file`, `--stonewall`: for the ranks of an MPI run only.
    pub mpi: crate::coord::MpiMode,
    /// `run sustained`: rounds until steady after a cliff, and the recovery after a pause.
    pub sustained: Option<crate::sustained::SustainedPlan>,
    /// `--steady-state`: each such test is one pass, judged in rounds until a window of
    /// them holds its rule.
    pub steady: crate::steady::Steady,
    /// A sweep of block sizes (ATTO): tests that do not fit the region or the device's
    /// logical block are skipped with a note rather than refused.
    pub skip_unfit: bool,
    /// The block size is the user's `--bs` (custom): a test larger than the region is
    /// refused naming `--bs`, not `--size`.
    pub bs_given: bool,
    /// `--precondition`: the region written before the first test.
    pub precondition: Option<crate::precondition::Precondition>,
    /// What preconditioning did (`extra.precondition` of every test), once it has.
    pub preconditioned: Option<iolab_measure::extra::Precondition>,
}

pub use crate::steady::{SteadyPlan, STEADY_MAX_ROUNDS, STEADY_WINDOW};

impl BlockPlan {
    /// A plan of `tests` with fixed passes, the median score, no notes, no `--verify`, the
    /// region size given and no permission to overwrite anything (fields to change later).
    pub fn new(preset: &str, settings: RunSettings, tests: Vec<TestSpec>) -> BlockPlan {
        BlockPlan {
            preset: preset.to_string(),
            until_stable: None,
            settings,
            tests,
            score: Score::Median,
            notes: Vec::new(),
            verify: false,
            size_given: true,
            size_at: None,
            allow_destroy_device: false,
            allow_overwrite_file: false,
            mpi: crate::coord::MpiMode::default(),
            sustained: None,
            steady: crate::steady::Steady::Off,
            skip_unfit: false,
            bs_given: false,
            precondition: None,
            preconditioned: None,
        }
    }

    /// Planned time of one measured pass, its ramp included.
    pub fn pass_time(&self) -> Duration {
        self.settings.duration + self.settings.ramp
    }

    /// Planned time of one test's warm-ups, their ramps included.
    fn warmup_time(&self) -> Duration {
        let s = &self.settings;
        (s.warmup_duration + s.ramp) * s.warmup_passes
    }

    /// The measured passes every test gets at least (adaptive: `max(--runs, 3)`).
    pub fn min_runs(&self) -> u32 {
        match self.until_stable {
            Some(_) => self.settings.runs.max(MIN_ADAPTIVE_RUNS),
            None => self.settings.runs,
        }
    }

    /// The least time the passes take: every test's warm-ups and minimum measured passes.
    pub fn minimum(&self) -> Duration {
        (self.warmup_time() + self.pass_time() * self.min_runs()) * self.tests.len() as u32
    }

    /// The planned time of every pass: fixed passes all of them, adaptive ones the budget
    /// (or, without one, the minimum).
    pub fn planned(&self) -> Duration {
        match self.until_stable.and_then(|u| u.budget) {
            Some(b) => b.max(self.minimum()),
            None => self.minimum(),
        }
    }

    /// The default budget of adaptive passes: [`BUDGET_PASSES_PER_TEST`] passes' time per
    /// test, and never less than the minimum.
    pub fn default_budget(&self) -> Duration {
        (self.pass_time() * BUDGET_PASSES_PER_TEST * self.tests.len() as u32).max(self.minimum())
    }

    /// Adaptive passes: refuses limits the minimum passes cannot live with.
    pub fn check_stable(&self) -> Result<(), UsageError> {
        let Some(u) = self.until_stable else {
            return Ok(());
        };
        if u.max_runs < self.min_runs() {
            return Err(UsageError::option(
                "max-runs",
                format!(
                    "--max-runs {} is below the {} measured passes every test gets first \
                     (--runs, at least {MIN_ADAPTIVE_RUNS})",
                    u.max_runs,
                    self.min_runs()
                ),
            ));
        }
        if let Some(b) = u.budget {
            if b < self.minimum() {
                return Err(UsageError::option(
                    "budget",
                    format!(
                        "--budget {} is less than the passes every test needs first: {} \
                         test(s) x ({} warm-up(s) + {} passes) of {} = {}",
                        fmt_secs(b),
                        self.tests.len(),
                        self.settings.warmup_passes,
                        self.min_runs(),
                        fmt_secs(self.pass_time()),
                        fmt_secs(self.minimum())
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The run note that states the adaptive rule and its budget.
    pub fn stable_note(&self) -> Option<String> {
        let u = self.until_stable?;
        let budget = match u.budget {
            Some(b) => format!("a budget of {} of pass time for the run", fmt_secs(b)),
            None => "no budget for the run".into(),
        };
        Some(format!(
            "adaptive passes: each test stops once the 95% CI half-width of its MB/s is at \
             most {}% of the mean (after at least {} passes), else at {} passes, {} of \
             measured pass time or its share of {budget}; tests still above it get the time \
             others left",
            u.pct,
            self.min_runs(),
            u.max_runs,
            fmt_secs(u.max_time),
        ))
    }

    /// `--verify` on block tests: something must write, in blocks of whole sectors.
    pub fn check_verify(&self) -> Result<(), UsageError> {
        let writers: Vec<&TestSpec> = self.tests.iter().filter(|t| t.job.rw.writes()).collect();
        if writers.is_empty() {
            return Err(UsageError::option(
                "verify",
                format!(
                    "--verify checks what the tests write, and every test of {} only reads; \
                     give a write or mixed --rw",
                    self.preset
                ),
            ));
        }
        for t in writers {
            let g = granule_of(&t.job);
            if g == 0 || !g.is_multiple_of(iolab_integrity::block::SECTOR as u64) {
                return Err(UsageError::option(
                    "verify",
                    format!(
                        "--verify writes self-describing blocks of whole 512-byte sectors: --bs \
                         (and every write size and alignment of an access specification) must \
                         be a multiple of 512, and test {} writes in blocks of {g} bytes",
                        t.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Seconds as the notes print them: "88 s", "1.5 s".
fn fmt_secs(d: Duration) -> String {
    let text = format!("{:.3}", d.as_secs_f64());
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text} s")
}

/// What a block test carries in `extra`: an Iometer access specification's lines and the
/// I/Os each one got, and the runner's keys (the `--verify` counts, how adaptive passes
/// ended, preconditioning, steady state, `run sustained`'s burst or recovery).
#[derive(Debug, serde::Serialize)]
struct BlockExtra {
    #[serde(skip_serializing_if = "Option::is_none")]
    access: Option<Vec<iolab_spec::AccessLine>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    access_ios: Option<Vec<u64>>,
    #[serde(flatten)]
    runner: RunnerExtra,
}

impl BlockExtra {
    fn new(test: &TestSpec, access_ios: Vec<u64>, runner: RunnerExtra) -> BlockExtra {
        let counted = !access_ios.is_empty();
        BlockExtra {
            access: counted.then(|| test.job.access.clone()),
            access_ios: counted.then_some(access_ios),
            runner,
        }
    }

    /// The JSON of `extra`: null when there is nothing to carry.
    fn to_value(&self) -> serde_json::Value {
        if self.access.is_none() && self.runner.is_empty() {
            return serde_json::Value::Null;
        }
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// A target error as the run reports it: refusals are usage errors.
pub fn target_error(e: TargetError) -> RunError {
    match e {
        TargetError::Interrupted => RunError::Interrupted,
        TargetError::Safety(_)
        | TargetError::NotFound(_)
        | TargetError::Unsupported(..)
        | TargetError::TooSmall { .. } => {
            RunError::Usage(UsageError::option("target", e.to_string()))
        }
        other => RunError::from_error(other),
    }
}

/// The pattern a created test file is laid out with: that of the tests that check their
/// reads against fio's `verify_pattern`, in blocks of their block size, when they all
/// agree on both and the block divides the layout's 1 MiB writes (each block then starts
/// the pattern afresh, as a read of it expects); else the usual layout, and a byte no
/// writer reached fails such a read.
fn layout_pattern(tests: &[TestSpec]) -> Option<(iolab_spec::Pattern, u64)> {
    let mut readers = tests.iter().filter_map(|t| {
        let p = t.job.pattern.as_ref().filter(|p| p.check_reads)?;
        Some((p, t.job.bs))
    });
    let (first, bs) = readers.next()?;
    if !iolab_engine::target::layout_block_fits(bs) {
        return None;
    }
    if readers.all(|(p, b)| p.bytes == first.bytes && p.offsets == first.offsets && b == bs) {
        Some((first.clone(), bs))
    } else {
        None
    }
}

/// Prepares the target for a plan and drops the tests it cannot run (ATTO sizes that do
/// not fit the region or the device's logical block), or refuses the plan.
pub fn prepare_target(
    plan: &mut BlockPlan,
    path: PathBuf,
    stop: &AtomicBool,
    progress: &Progress,
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<Target, RunError> {
    // Preconditioning writes: the target is one the run may write.
    let writes = plan.tests.iter().any(|t| t.job.rw.writes()) || plan.precondition.is_some();
    let req = TargetRequest {
        path,
        size: plan.size_given.then_some(plan.settings.size),
        default_size: plan.settings.size,
        writes,
        direct: plan.settings.direct,
        data: plan.settings.data,
        layout_pattern: layout_pattern(&plan.tests),
        allow_destroy_device: plan.allow_destroy_device,
        allow_overwrite_file: plan.allow_overwrite_file,
    };
    crate::space::check_target(
        &req.path,
        req.size,
        req.default_size,
        writes,
        plan.size_at.as_deref(),
    )?;
    if plan.verify {
        crate::options::check_verify_map(&plan.tests, &req.path, req.size, req.default_size)?;
    }
    let only_pre = plan.precondition.is_some() && !plan.tests.iter().any(|t| t.job.rw.writes());
    let target = prepare_with(&req, stop, &mut |d, t| progress.preparing(d, t), created).map_err(
        |e| match (target_error(e), only_pre) {
            (RunError::Usage(u), true) => RunError::Usage(UsageError::option(
                "precondition",
                format!("--precondition writes the target, which this run may not: {u}"),
            )),
            (e, _) => e,
        },
    )?;
    if let (Some((p, bs)), true) = (&req.layout_pattern, target.created()) {
        plan.notes.push(format!(
            "the test file was laid out with verify_pattern {} in blocks of {}, not random \
             data: bytes no writing job reached (one cut short by its runtime) hold what this \
             run wrote there, and the reads that verify check them against it",
            p.text,
            iolab_spec::format_bytes(*bs)
        ));
    }
    fit_region(plan, target)
}

/// Fits the plan to its prepared target's region: drops the tests it cannot run (ATTO
/// sizes that do not fit the region or the device's logical block), or refuses the plan.
fn fit_region(plan: &mut BlockPlan, target: Target) -> Result<Target, RunError> {
    plan.settings.size = target.info.size;

    // A sweep (ATTO's, up to 64 MiB) skips block sizes larger than the region.
    if plan.skip_unfit {
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

    // Any other test needs at least one block inside the region.
    let region = target.info.size;
    if let Some(t) = plan.tests.iter().find(|t| t.job.bs > region) {
        let custom = plan.bs_given;
        return Err(RunError::Usage(UsageError::option(
            if custom { "bs" } else { "size" },
            format!(
                "test {} uses {} blocks, larger than the {} test region{}: give {}",
                t.name,
                iolab_spec::format_bytes(t.job.bs),
                iolab_spec::format_bytes(region),
                if plan.size_given {
                    " (--size)"
                } else {
                    " (the size of the target)"
                },
                if custom {
                    "a smaller --bs or a larger --size"
                } else {
                    "a larger --size"
                }
            ),
        )));
    }
    if target.created() && target.info.kind == iolab_measure::TargetKind::File {
        plan.notes.push(format!(
            "{} did not exist: iolab created it as a new {} file on the {} filesystem and \
             removes it after the run (if you meant an existing directory or device, check \
             the path)",
            target.io_path.display(),
            iolab_spec::format_bytes(region),
            target.info.fs_type
        ));
    }

    // O_DIRECT needs block-aligned I/O: skip (ATTO) or refuse (others) what cannot work.
    {
        let lb = target.logical_block;
        let direct = |t: &TestSpec| plan.settings.for_job(&t.job).direct;
        let too_small: Vec<String> = plan
            .tests
            .iter()
            .filter(|t| direct(t))
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
            if plan.skip_unfit {
                plan.tests.retain(|t| t.job.bs % lb == 0);
                plan.notes.push(format!(
                    "skipped block sizes below the device's {lb}-byte logical block (O_DIRECT \
                     cannot do them): {}",
                    too_small.join(", ")
                ));
            } else {
                return Err(RunError::Usage(UsageError::option(
                    "bs",
                    format!(
                        "O_DIRECT needs I/O aligned to the device's logical block size ({lb} \
                         bytes) under {}; test(s) {} use a block size that is not a multiple of \
                         it. Use a larger --bs or --buffered.",
                        target.info.io_path,
                        too_small.join(", ")
                    ),
                )));
            }
        }
    }
    Ok(target)
}

/// Runs a block plan in `ctx`: prepares the target, starts the run, runs every test's
/// passes and gathers the facts for the warnings before the target is removed.
pub fn run(mut plan: BlockPlan, ctx: &mut RunContext) -> Result<(), RunError> {
    ctx.progress.set_total(plan.planned());
    if plan.precondition.is_some() {
        crate::precondition::refuse(plan.verify, ctx.coordinator().is_some())?;
    }
    if ctx.coordinator().is_some() && plan.tests.iter().any(|t| t.job.trim) {
        // The ranks' aggregate pass adds up reads and writes only.
        return Err(RunError::Usage(UsageError::option(
            "rw",
            "trims (a job file's rw=trim, randtrim) are not added up across the ranks of an \
             MPI run; run the job file without mpirun",
        )));
    }
    if plan.steady.any() && ctx.coordinator().is_some() {
        // Each rank's pass would end at its own round, judged on its own share.
        return Err(RunError::Usage(UsageError::option(
            "steady-state",
            "--steady-state is not judged in an MPI run (each rank would end its pass on its \
             own rounds)",
        )));
    }
    let (path, shared) = match ctx.coordinator().is_some() {
        true => agree_with_ranks(&mut plan, ctx)?,
        false => {
            refuse_mpi_options(plan.mpi)?;
            (ctx.common.target.clone(), None)
        }
    };
    let target = match shared {
        Some(rank) => prepare_shared(&mut plan, path, rank, ctx)?,
        None => {
            let recorded = ctx.will_create_target(&path);
            // The run state names the exact file as soon as it exists (a file put at its
            // path while it is filled is never taken for it, even after a kill -9).
            let mut adopt = ctx.adopter(recorded);
            prepare_target(&mut plan, path, &ctx.stop, &ctx.progress, &mut adopt)?
        }
    };
    let mut notes = plan.notes.clone();
    notes.extend(plan.stable_note());
    let env = ctx.start(RunStart {
        preset: plan.preset.clone(),
        workload: "block".into(),
        target: target.info.clone(),
        settings: plan.settings.clone(),
        notes,
        env_path: PathBuf::from(&target.io_path),
    })?;
    let watch = crate::facts::top_devices(env);
    ctx.progress
        .println(&plan_line(&plan, &target.io_path.display().to_string()));
    if let Some(pc) = plan.precondition {
        let done = crate::precondition::run(pc, &target, &plan.settings, ctx);
        match done {
            Ok(d) => plan.preconditioned = d,
            Err(e) => {
                remove_target(target, ctx);
                return Err(e);
            }
        }
    }
    let mut passes = OnTarget {
        plan: &plan,
        target: &target,
        watch: &watch,
        verify: plan.verify.then(|| fastrand::u64(1..)),
        elapsed_plan: Duration::ZERO,
        dropped: false,
    };
    let outcome = execute(&plan, &mut passes, ctx);
    let facts = crate::facts::facts(
        ctx.env().expect("started"),
        Some(&target),
        plan.settings.direct,
    );
    ctx.set_facts(facts);
    remove_target(target, ctx);
    outcome
}

/// Removes the run's test file if it is still the one the run created; one replaced during
/// the run is left alone (the run's end says so), and where iolab's own went is noted.
fn remove_target(mut target: Target, ctx: &mut RunContext) {
    if let iolab_engine::target::Removal::NotOurs {
        moved_to: Some(m), ..
    } = target.remove()
    {
        let note = format!(
            "the test file this run created was moved to {} during the run: left there",
            m.display()
        );
        eprintln!("iolab: warning: {note}");
        ctx.note(note);
    }
}

/// `--shared-file` and `--stonewall` outside an MPI run: refused, naming the option.
fn refuse_mpi_options(mode: crate::coord::MpiMode) -> Result<(), RunError> {
    let given = [
        ("shared-file", mode.shared_file),
        ("stonewall", mode.stonewall),
    ];
    match given.iter().find(|(_, on)| *on) {
        Some((name, _)) => Err(RunError::Usage(UsageError::option(
            name,
            format!(
                "--{name} applies to the ranks of an MPI run only (mpirun -np N iolab run \
                 ..., docs/mpi.md)"
            ),
        ))),
        None => Ok(()),
    }
}

/// A rank of a multi-process run: runs rank 0's tests and settings, and in a target
/// directory its own file, named with its rank, host and process, or with
/// `--shared-file` rank 0's one file; the path it uses, and with `--shared-file` this
/// rank's number and the number of ranks.
fn agree_with_ranks(
    plan: &mut BlockPlan,
    ctx: &mut RunContext,
) -> Result<(PathBuf, Option<[u32; 2]>), RunError> {
    let stop = std::sync::Arc::clone(&ctx.stop);
    let dir = ctx.common.target_abs();
    let Some(c) = ctx.coordinator() else {
        return Ok((dir, None));
    };
    let host = crate::coord::file_host(c.host());
    let shared_name = format!("iolab-mpi-shared-{host}-{}.dat", std::process::id());
    let mine = serde_json::json!({
        "settings": &plan.settings,
        "tests": &plan.tests,
        "mpi": plan.mpi,
        "shared": shared_name,
    });
    let agreed = c.agree(mine, &stop)?;
    let bad = |e: serde_json::Error| RunError::caused("rank 0's plan", e);
    plan.settings = serde_json::from_value(agreed["settings"].clone()).map_err(bad)?;
    plan.tests = serde_json::from_value(agreed["tests"].clone()).map_err(bad)?;
    plan.mpi = serde_json::from_value(agreed["mpi"].clone()).map_err(bad)?;
    if plan.mpi.shared_file {
        if !dir.is_dir() {
            return Err(RunError::Usage(UsageError::option(
                "shared-file",
                format!(
                    "--shared-file makes one file in the target directory, and {} is not a \
                     directory",
                    dir.display()
                ),
            )));
        }
        let name = agreed["shared"].as_str().unwrap_or_default();
        let path = dir.join(name);
        c.set_mode(plan.mpi, Some(&path.to_string_lossy()));
        return Ok((path, Some([c.rank(), c.ranks()])));
    }
    c.set_mode(plan.mpi, None);
    if !dir.is_dir() {
        return Ok((dir, None));
    }
    Ok((
        dir.join(format!("{}.dat", crate::coord::rank_name(&*c))),
        None,
    ))
}

/// `--shared-file`: rank 0 makes one file of every rank's region at `path` (it removes it
/// at the end), then every rank meets the others, and the others open it; each rank uses
/// its region, `rank × size` onwards.
fn prepare_shared(
    plan: &mut BlockPlan,
    path: PathBuf,
    [rank, ranks]: [u32; 2],
    ctx: &mut RunContext,
) -> Result<Target, RunError> {
    let dir = ctx.common.target_abs();
    let len = plan.settings.size;
    let full = len.checked_mul(u64::from(ranks)).ok_or_else(|| {
        RunError::Usage(UsageError::option(
            "size",
            format!("--size {len} for each of {ranks} ranks is more than a file can hold"),
        ))
    })?;
    let target = if rank == 0 {
        let recorded = ctx.will_create_target(&path);
        // The whole file, every rank's region; its checks are repeated on this region.
        let mut settings = plan.settings.clone();
        settings.size = full;
        let mut whole = BlockPlan::new(&plan.preset, settings, plan.tests.clone());
        whole.verify = plan.verify;
        whole.allow_overwrite_file = plan.allow_overwrite_file;
        whole.skip_unfit = plan.skip_unfit;
        whole.bs_given = plan.bs_given;
        let mut adopt = ctx.adopter(recorded);
        let target = prepare_target(
            &mut whole,
            path.clone(),
            &ctx.stop,
            &ctx.progress,
            &mut adopt,
        )?;
        Some(target.into_region(&dir, 0, len))
    } else {
        None
    };
    let stop = std::sync::Arc::clone(&ctx.stop);
    if let Some(c) = ctx.coordinator() {
        // Rank 0 has made and filled the file (or failed: the others learn it here).
        c.before_pass(&stop)?;
    }
    let target = match target {
        Some(t) => t,
        None => Target::shared_region(&dir, path.clone(), u64::from(rank) * len, len)
            .map_err(target_error)?,
    };
    plan.notes.push(format!(
        "mpi: one shared file {} of {} ({} ranks), rank R in bytes [R × {len}, (R + 1) × \
         {len})",
        path.display(),
        iolab_spec::format_bytes(full),
        ranks
    ));
    fit_region(plan, target)
}

/// A `--stonewall` pass's observer: ends the pass (`pass_stop`) when another rank
/// finished its pass first or a signal came (`signal`), polled at every tick on the
/// thread that runs the pass.
struct Stonewall<'a> {
    inner: &'a dyn PassObserver,
    coord: std::sync::Mutex<&'a mut (dyn crate::coord::Coordinator + 'static)>,
    signal: &'a AtomicBool,
    pass_stop: &'a AtomicBool,
}

impl PassObserver for Stonewall<'_> {
    fn tick(&self, bytes: u64, elapsed: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.inner.tick(bytes, elapsed);
        let walled = match self.coord.lock() {
            Ok(mut c) => c.stonewalled(),
            Err(_) => false,
        };
        if walled || self.signal.load(Relaxed) {
            self.pass_stop.store(true, Relaxed);
        }
    }
}

/// What the progress bar shows before the first pass: target, region and plan.
/// `cdm on /mnt/x/iolab-1.dat · region 1 GiB · 8 tests × (1 warm-up + 3 × 5s) · about 2m 40s`.
pub fn plan_line(plan: &BlockPlan, io_path: &str) -> String {
    let s = &plan.settings;
    let n = plan.tests.len();
    let measured = match plan.until_stable {
        Some(u) => format!(
            "{}+ × {} until ±{}%",
            plan.min_runs(),
            crate::progress::short_duration(s.duration),
            u.pct
        ),
        None => format!(
            "{} × {}",
            s.runs,
            crate::progress::short_duration(s.duration)
        ),
    };
    let warm = if s.warmup_passes > 0 {
        format!("{} warm-up + ", s.warmup_passes)
    } else {
        String::new()
    };
    let budget = if plan.until_stable.is_some_and(|u| u.budget.is_some()) {
        "at most"
    } else {
        "about"
    };
    format!(
        "{} on {io_path} · region {} · {n} test{} × ({warm}{measured}) · {budget} {}",
        plan.preset,
        iolab_spec::format_bytes(s.size),
        if n == 1 { "" } else { "s" },
        crate::progress::short_duration(plan.planned())
    )
}

/// The activity around a pass with iolab's own uncounted I/O (its ramp, and what drained
/// after the deadline: `[read, write]` bytes) taken off each watched device, so that what
/// remains beyond the pass's bytes is someone else's.
fn own_io_apart(mut a: Activity, uncounted: [u64; 2]) -> Activity {
    for d in &mut a.devices {
        d.read_bytes = d.read_bytes.saturating_sub(uncounted[0]);
        d.write_bytes = d.write_bytes.saturating_sub(uncounted[1]);
    }
    a.own_uncounted_bytes = uncounted[0] + uncounted[1];
    a
}

/// Reads the region back after a pass of a `--verify` test and adds the counts to `tally`.
fn verify_pass(
    target: &Target,
    written: &Written,
    direct: bool,
    stop: &AtomicBool,
    tally: &mut Tally,
) -> Result<(), RunError> {
    let t = target
        .read_back(written, direct, stop)
        .map_err(target_error)?;
    tally.merge(t);
    Ok(())
}

/// One test of a running plan: its record, its `--verify` state and counts, and the time its
/// passes took.
struct TestRun<'p> {
    spec: &'p TestSpec,
    id: Option<i64>,
    record: TestRecord,
    written: Option<Written>,
    tally: Tally,
    access_ios: Vec<u64>,
    /// Planned time of its measured passes (for `--max-time`).
    measured: Duration,
    /// Planned time of all its passes, warm-ups included (for its share of the budget).
    spent: Duration,
    /// Wall time of all its passes, warm-ups and read-backs included.
    wall: Duration,
    visits: u32,
    stopped: Option<Stopped>,
    /// `--steady-state`: its rule and rounds.
    steady: Option<SteadyPlan>,
    /// `run sustained`: why its writes ended, and the first burst of its pair.
    sustained_end: Option<crate::sustained::End>,
    sustained_state: crate::sustained::State,
    /// Its place in the run record's tests, once it is there.
    published: Option<usize>,
    /// Its `--verify` note's place in the run's notes, once it is there.
    noted: Option<usize>,
}

impl<'p> TestRun<'p> {
    fn new(spec: &'p TestSpec, id: Option<i64>, written: Option<Written>) -> TestRun<'p> {
        TestRun {
            spec,
            id,
            record: TestRecord {
                name: spec.name.clone(),
                group: spec.group.clone(),
                job: spec.job.clone(),
                passes: Vec::new(),
                summary: TestSummary::default(),
                extra: serde_json::Value::Null,
            },
            written,
            tally: Tally::default(),
            access_ios: Vec::new(),
            measured: Duration::ZERO,
            spent: Duration::ZERO,
            wall: Duration::ZERO,
            visits: 0,
            stopped: None,
            steady: None,
            sustained_end: None,
            sustained_state: Default::default(),
            published: None,
            noted: None,
        }
    }
}

/// What one pass came to.
enum PassEnd {
    Done,
    /// Cut short by a stop request: not a measurement.
    Interrupted,
}

/// Where passes come from: the target (or, in the schedule's own tests, a script).
trait Passes {
    /// Runs one pass of `t`, a warm-up or a measured one; a measured one (or a warm-up
    /// with errors) is added to its record and stored.
    fn pass(
        &mut self,
        t: &mut TestRun,
        warm: bool,
        ctx: &mut RunContext,
    ) -> Result<PassEnd, RunError>;

    /// The `--verify` write state of a visit to `spec`; after `before` (an earlier
    /// visit's), generations continue where it ended.
    fn written(&self, _spec: &TestSpec, _before: Option<&Written>) -> Option<Written> {
        None
    }
}

/// Passes on the prepared target.
struct OnTarget<'a> {
    plan: &'a BlockPlan,
    target: &'a Target,
    watch: &'a [String],
    verify: Option<u64>,
    /// Planned time of the passes run so far, for the progress bar.
    elapsed_plan: Duration,
    /// O_DIRECT: the cached pages were dropped before an earlier test (and noted).
    dropped: bool,
}

impl Passes for OnTarget<'_> {
    fn pass(
        &mut self,
        t: &mut TestRun,
        warm: bool,
        ctx: &mut RunContext,
    ) -> Result<PassEnd, RunError> {
        let test = t.spec;
        // The test's own engine and direct where it has them (a fio job file's jobs).
        let s = &self.plan.settings.for_job(&test.job);
        let measured = t.record.passes.len() as u32;
        let steady = t.steady.filter(|_| !warm);
        let dur = match steady {
            _ if warm => s.warmup_duration,
            Some(sp) => sp.limit,
            None => s.duration,
        };
        let k = self
            .plan
            .tests
            .iter()
            .position(|x| std::ptr::eq(x, test))
            .map_or(0, |i| i + 1);
        ctx.progress
            .set_step(format!("test {k} of {} ", self.plan.tests.len()));
        let label = if warm {
            format!("{} warm-up", test.name)
        } else if let Some(u) = self.plan.until_stable {
            let m =
                iolab_stats::metric(&t.record.passes.iter().map(|p| p.mb_s).collect::<Vec<_>>());
            if m.n >= 2 {
                format!(
                    "{} {} ±{:.1}%>{}%",
                    test.name,
                    measured + 1,
                    iolab_stats::ci_pct(&m),
                    u.pct
                )
            } else {
                format!("{} {}", test.name, measured + 1)
            }
        } else if let Some(sp) = steady {
            format!("{} steady state ({})", test.name, sp.rule.text())
        } else {
            format!("{} {}/{}", test.name, measured + 1, s.runs)
        };
        let index = if warm { 0 } else { measured + 1 };
        if s.direct && t.wall.is_zero() {
            // The test's first pass: O_DIRECT starts on a region with no cached pages.
            drop_cached(self.target, !self.dropped, ctx)?;
            self.dropped = true;
        }
        let check_cache = test.job.rw.reads();
        let cache_before = if check_cache {
            self.target.resident_fraction()
        } else {
            None
        };
        let stop = std::sync::Arc::clone(&ctx.stop);
        let t0 = Instant::now();
        let mut before = ActivitySample::now();
        if let Some(c) = ctx.coordinator() {
            // As late as can be: what each rank does between the barrier and its pass
            // (sampling /proc takes milliseconds on a busy host) delays its start.
            c.before_pass(&stop)?;
            // Every rank is done with its layout and last pass: their bytes before now are
            // in no pass's count, and must not read as another process's.
            before.devices_from_now();
        }
        let started = Instant::now();
        let stonewall = self.plan.mpi.stonewall;
        let walled = AtomicBool::new(false);
        let is_recovery = crate::sustained::is_recovery(&test.name);
        let mut out = {
            let (progress, coord) = ctx.progress_and_coordinator();
            let obs = progress.pass(label, self.elapsed_plan, dur);
            let run = |flag: &AtomicBool, obs: &dyn PassObserver| {
                run_pass(
                    self.target,
                    test,
                    s,
                    index,
                    dur,
                    flag,
                    obs,
                    t.written.as_ref(),
                )
            };
            match coord.filter(|_| stonewall) {
                None if self.plan.sustained.is_some() => {
                    let st = &mut t.sustained_state;
                    if let Some(ended) = st.ended.filter(|_| is_recovery) {
                        // The device's idle time: from the last write of the pair's first
                        // test to the first of this one.
                        st.idled = Some(ended.elapsed());
                    }
                    let watch = crate::sustained::Watch {
                        inner: &obs,
                        plan: self.plan.sustained.expect("sustained"),
                        recovery: is_recovery,
                        state: t.sustained_state.clone(),
                        signal: &stop,
                        pass_stop: &walled,
                        ticks: Default::default(),
                    };
                    let out = run(&walled, &watch);
                    t.sustained_state.ended = Some(Instant::now());
                    t.sustained_end = Some(watch.ended().unwrap_or(crate::sustained::End::MaxTime));
                    t.sustained_state.ended_on = watch.ended_on();
                    out.map(|mut o| {
                        o.interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
                        o
                    })
                }
                None if steady.is_some() => {
                    let plan = steady.expect("steady");
                    let out = run(
                        &walled,
                        &crate::steady::Watch::new(&obs, plan, &stop, &walled),
                    );
                    out.map(|mut o| {
                        o.interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
                        o
                    })
                }
                Some(c) => run(
                    &walled,
                    &Stonewall {
                        inner: &obs,
                        coord: std::sync::Mutex::new(c),
                        signal: &stop,
                        pass_stop: &walled,
                    },
                ),
                None => run(&stop, &obs),
            }
            .map_err(target_error)?
        };
        if stonewall {
            out.interrupted = stop.load(std::sync::atomic::Ordering::Relaxed);
            if let (false, Some(c)) = (out.interrupted, ctx.coordinator()) {
                // Ended by itself: the first, unless another rank's end stopped it.
                c.pass_ended(!walled.load(std::sync::atomic::Ordering::Relaxed));
            }
        }
        let activity = own_io_apart(
            before.until(&ActivitySample::now(), self.watch),
            out.uncounted_bytes,
        );
        if let Some(w) = &t.written {
            // After the pass's clock stopped: read-back time is not part of the pass.
            verify_pass(self.target, w, s.direct, &ctx.stop, &mut t.tally)?;
        }
        t.wall += t0.elapsed();
        self.elapsed_plan += dur + s.ramp;
        for n in out.notes {
            ctx.note(n);
        }
        if out.interrupted {
            return Ok(PassEnd::Interrupted);
        }
        if !warm && !out.access_ios.is_empty() {
            t.access_ios.resize(out.access_ios.len(), 0);
            for (sum, n) in t.access_ios.iter_mut().zip(&out.access_ios) {
                *sum += n;
            }
        }
        let mut pass = out.record;
        pass.context = PassContext {
            cache_resident_before: cache_before,
            cache_resident_after: if check_cache {
                self.target.resident_fraction()
            } else {
                None
            },
            activity,
        };
        let errors = pass.errors.clone();
        if errors.is_empty() {
            if let Some(c) = ctx.coordinator() {
                // Every rank records the aggregate of the ranks' passes (a rank whose pass
                // failed does not come here: the others learn it from this call).
                pass = c.after_pass(&test.name, warm, pass, started, s.ramp, &stop)?;
            }
        }
        if !warm || !errors.is_empty() {
            ctx.store_pass(t.id, &pass)?;
            t.record.passes.push(pass);
        }
        if let Some(e) = errors.first() {
            let mut msg = format!(
                "{}: I/O error during {}: {} (errno {}) at offset {} length {}",
                self.target.info.io_path, test.name, e.message, e.errno, e.offset, e.len
            );
            if e.errno == libc::EINVAL && s.direct {
                msg.push_str(
                    "; O_DIRECT refused this I/O: the block size or offset is not aligned \
                     to what the device or filesystem needs, or direct I/O is not \
                     supported here. Use a larger --bs or --buffered.",
                );
            }
            return Err(RunError::Failed(msg));
        }
        Ok(PassEnd::Done)
    }

    fn written(&self, spec: &TestSpec, before: Option<&Written>) -> Option<Written> {
        let id = self
            .verify
            .filter(|_| spec.job.rw.writes() && !spec.job.unverified)?;
        let w = Written::new(
            id,
            granule_of(&spec.job),
            self.target.region_offset,
            self.target.info.size,
        )?
        .with_pattern(spec.job.pattern.clone());
        Some(match before {
            // Later tests overwrote what the last visit wrote: a fresh map, and
            // generations that cannot be mistaken for the last visit's.
            Some(b) => w.starting_at(b.next_generation()),
            None => w,
        })
    }
}

/// O_DIRECT runs drop the region's cached pages before each test's first pass, as fio's
/// `invalidate=1` does: a direct read of a range with cached pages is slower (the kernel
/// checks and may write back the pages), and the file's fill or an earlier buffered reader
/// may have left them. Said once in the run's notes (`first`), with how much was cached.
fn drop_cached(target: &Target, first: bool, ctx: &mut RunContext) -> Result<(), RunError> {
    let before = target.drop_cached_pages().map_err(target_error)?;
    if !first {
        return Ok(());
    }
    let was = match before {
        Some(b) => format!(
            "{} of it was cached before the first test",
            iolab_spec::format_bytes(b)
        ),
        None => "how much was cached before could not be read".into(),
    };
    ctx.note(format!(
        "O_DIRECT: the test region's cached pages were dropped (posix_fadvise DONTNEED, \
         as fio's invalidate=1) before each test's first pass; {was}"
    ));
    Ok(())
}

/// Which test gets the next pass. Time here is planned time (each pass's ramp and
/// duration), so the schedule is the same on a fast and a slow machine; the wall time
/// is reported beside it.
struct Schedule<'a> {
    plan: &'a BlockPlan,
    /// Planned time of every pass so far.
    used: Duration,
    /// `run sustained`: the first test's burst, for the second of its pair.
    sustained: std::cell::RefCell<crate::sustained::State>,
}

impl Schedule<'_> {
    fn cost(&self, warm: bool) -> Duration {
        let s = &self.plan.settings;
        s.ramp + if warm { s.warmup_duration } else { s.duration }
    }

    /// Budget left, if there is one.
    fn left(&self) -> Option<Duration> {
        let b = self.plan.until_stable.and_then(|u| u.budget)?;
        Some(b.saturating_sub(self.used))
    }

    /// One pass, its planned time counted.
    fn pass(
        &mut self,
        src: &mut impl Passes,
        t: &mut TestRun,
        warm: bool,
        ctx: &mut RunContext,
    ) -> Result<PassEnd, RunError> {
        let cost = self.cost(warm);
        self.used += cost;
        t.spent += cost;
        if !warm {
            t.measured += cost;
        }
        let end = src.pass(t, warm, ctx);
        if end.is_err() {
            self.publish(t, ctx, false)?;
        }
        end
    }

    /// One visit to a test: its warm-ups, then measured passes until its fixed number, or
    /// (adaptive) until it is stable or a limit ends it. `allowed`: the planned time this
    /// visit may take once the test has its minimum passes.
    fn visit(
        &mut self,
        src: &mut impl Passes,
        t: &mut TestRun,
        allowed: Option<Duration>,
        ctx: &mut RunContext,
    ) -> Result<(), RunError> {
        let s = &self.plan.settings;
        t.visits += 1;
        t.stopped = None;
        let visit_start = t.spent;
        if self.plan.sustained.is_some() && crate::sustained::is_recovery(&t.record.name) {
            let idle = self.plan.sustained.map_or(Duration::ZERO, |p| p.idle);
            ctx.progress.println(&format!(
                "{}: idle for {} before writing again",
                t.record.name,
                fmt_secs(idle)
            ));
            crate::sustained::idle(idle, &ctx.stop);
        }
        t.sustained_state = self.sustained.borrow().clone();
        for _ in 0..s.warmup_passes {
            if ctx.stopped() {
                t.stopped = Some(Stopped::Interrupted);
                return Ok(());
            }
            if let PassEnd::Interrupted = self.pass(src, t, true, ctx)? {
                t.stopped = Some(Stopped::Interrupted);
                return Ok(());
            }
        }
        let min = self.plan.min_runs();
        let next = self.cost(false);
        loop {
            if ctx.stopped() {
                t.stopped = Some(Stopped::Interrupted);
                return Ok(());
            }
            let measured = t.record.passes.len() as u32;
            let stop = match self.plan.until_stable {
                // Steady state: one pass, which its rounds end (or its limit).
                None if t.steady.is_some() => (measured >= 1).then_some(Stopped::Runs),
                None => (measured >= s.runs).then_some(Stopped::Runs),
                Some(u) => {
                    let mbs: Vec<f64> = t.record.passes.iter().map(|p| p.mb_s).collect();
                    if measured >= min && iolab_stats::is_stable(&mbs, u.pct) {
                        Some(Stopped::Stable)
                    } else if measured >= u.max_runs {
                        Some(Stopped::MaxRuns)
                    } else if measured >= min && t.measured + next > u.max_time {
                        Some(Stopped::MaxTime)
                    } else if measured >= min
                        && allowed.is_some_and(|a| t.spent - visit_start + next > a)
                    {
                        Some(Stopped::Budget)
                    } else {
                        None
                    }
                }
            };
            if stop.is_some() {
                t.stopped = stop;
                return Ok(());
            }
            if let PassEnd::Interrupted = self.pass(src, t, false, ctx)? {
                t.stopped = Some(Stopped::Interrupted);
                return Ok(());
            }
        }
    }

    /// Puts the test's summary (and `extra`) in the run record and, with `store`, the
    /// store: when a visit ends (again after a later visit), or on an I/O error.
    fn publish(&self, t: &mut TestRun, ctx: &mut RunContext, store: bool) -> Result<(), RunError> {
        let checked = t.written.is_some().then_some(t.tally.clone());
        let mut runner = RunnerExtra {
            verify: checked,
            adaptive: self.plan.until_stable.map(|u| Adaptive {
                target_pct: u.pct,
                stopped: t.stopped.unwrap_or(Stopped::Interrupted),
                visits: t.visits,
                seconds: t.wall.as_secs_f64(),
            }),
            precondition: self.plan.preconditioned.clone(),
            steady_state: t.steady.map(|sp| sp.extra(t.record.passes.last())),
            ..Default::default()
        };
        if let Some(sp) = self.plan.sustained {
            sp.extra(
                &t.record,
                t.sustained_end,
                &mut t.sustained_state,
                &mut runner,
            );
            if !crate::sustained::is_recovery(&t.record.name) {
                // What the second test of the pair measures against.
                *self.sustained.borrow_mut() = t.sustained_state.clone();
            }
        }
        t.record.extra = BlockExtra::new(t.spec, t.access_ios.clone(), runner).to_value();
        t.record.summary = summarize(&t.record.passes, self.plan.score);
        t.record.summary.converged = match (self.plan.until_stable, t.stopped) {
            (Some(_), Some(stopped)) if stopped != Stopped::Interrupted => {
                Some(stopped == Stopped::Stable)
            }
            _ => None,
        };
        if store {
            ctx.store_summary(t.id, &t.record)?;
        }
        match t.published {
            Some(i) => ctx.run().tests[i] = t.record.clone(),
            None if !t.record.passes.is_empty() || !store => {
                let tests = &mut ctx.run().tests;
                tests.push(t.record.clone());
                t.published = Some(tests.len() - 1);
            }
            None => {}
        }
        Ok(())
    }

    /// Ends a visit: the test's summary in the run, its `--verify` note (replaced with the
    /// new totals after a later visit) and its line on the terminal.
    fn close(&self, t: &mut TestRun, ctx: &mut RunContext) -> Result<(), RunError> {
        self.publish(t, ctx, true)?;
        if t.written.is_some() {
            let line = t.tally.summary_line(&t.record.name);
            ctx.progress.println(&line);
            let notes = &mut ctx.run().notes;
            match t.noted {
                Some(i) => notes[i] = line,
                None => {
                    notes.push(line);
                    t.noted = Some(notes.len() - 1);
                }
            }
        }
        if t.record.passes.is_empty() {
            return Ok(());
        }
        let runner = t.record.runner_extra();
        if let Some(ss) = &runner.steady_state {
            let line = SteadyPlan::note(&t.record.name, ss);
            ctx.progress.println(&line);
            ctx.note(line);
        }
        if self.plan.sustained.is_some() {
            if let Some(line) = crate::sustained::SustainedPlan::note(&t.record.name, &runner) {
                ctx.progress.println(&line);
                ctx.note(line);
            }
        }
        let m = &t.record.summary.stats_mb_s;
        let ci = format!("±{:.1}% after {} passes", iolab_stats::ci_pct(m), m.n);
        let stable = match (t.record.summary.converged, t.stopped) {
            (Some(true), _) => format!("  {ci}"),
            (Some(false), Some(Stopped::MaxRuns)) => format!("  {ci}: not stable (--max-runs)"),
            (Some(false), Some(Stopped::MaxTime)) => format!("  {ci}: not stable (--max-time)"),
            (Some(false), _) if t.visits == 1 => {
                format!("  {ci}: not stable yet (its share of the budget is used)")
            }
            (Some(false), _) => format!("  {ci}: not stable (the budget is used)"),
            (None, _) => String::new(),
        };
        ctx.progress.println(&format!(
            "{:<28} {:>10.2} MB/s {:>12.0} IOPS{stable}",
            t.record.name, t.record.summary.mb_s, t.record.summary.iops
        ));
        Ok(())
    }
}

/// Runs every test; stores each pass as soon as it is measured. Fixed passes: each test
/// in turn. Adaptive passes: each test in turn gets its minimum passes and, while not
/// stable, up to a fair share of the budget left (what is left divided among the tests
/// not yet run); then the tests whose share ran out come back, in order, each for a fair
/// share of what the others left.
fn execute(plan: &BlockPlan, src: &mut impl Passes, ctx: &mut RunContext) -> Result<(), RunError> {
    let began = Instant::now();
    let mut sched = Schedule {
        plan,
        used: Duration::ZERO,
        sustained: Default::default(),
    };
    let mut tests: Vec<TestRun> = Vec::with_capacity(plan.tests.len());
    let n = plan.tests.len();
    for (ti, spec) in plan.tests.iter().enumerate() {
        if ctx.stopped() {
            return Ok(());
        }
        let mut t = TestRun::new(spec, None, src.written(spec, None));
        t.steady = plan.steady.of(ti);
        t.id = ctx.begin_test(ti as u32, &t.record)?;
        let allowed = sched.left().map(|left| left / (n - ti) as u32);
        sched.visit(src, &mut t, allowed, ctx)?;
        sched.close(&mut t, ctx)?;
        tests.push(t);
    }
    let waiting: Vec<usize> = (0..tests.len())
        .filter(|&i| tests[i].stopped == Some(Stopped::Budget))
        .collect();
    for (k, &i) in waiting.iter().enumerate() {
        let Some(left) = sched.left() else { break };
        let allowed = left / (waiting.len() - k) as u32;
        // Worth a visit only when its warm-ups and at least one more pass fit.
        if ctx.stopped() || allowed < plan.warmup_time() + sched.cost(false) {
            continue;
        }
        let t = &mut tests[i];
        t.written = src.written(t.spec, t.written.as_ref());
        sched.visit(src, t, Some(allowed), ctx)?;
        sched.close(t, ctx)?;
    }
    nothing_measured(&tests, ctx)?;
    if let Some(b) = plan.until_stable.and_then(|u| u.budget) {
        let unstable: Vec<&str> = tests
            .iter()
            .filter(|t| t.record.summary.converged == Some(false))
            .map(|t| t.record.name.as_str())
            .collect();
        ctx.note(format!(
            "adaptive passes used {} of the {} budget (planned pass time; {} of wall time \
             with setup, storing and read-backs); {}",
            fmt_secs(sched.used),
            fmt_secs(b),
            fmt_secs(began.elapsed()),
            if unstable.is_empty() {
                "every test reached its target".to_string()
            } else {
                format!("not stable: {}", unstable.join(", "))
            }
        ));
    }
    Ok(())
}

/// Tests whose every measured pass completed no I/O measured nothing: their 0 MB/s is not
/// a result. A run in which no test completed an I/O fails rather than store 0 MB/s as
/// one; a test among others that did is named in a note. (One such pass among others of
/// a test is a window shorter than the I/Os' latency, and stays, with FEW_IOS.)
fn nothing_measured(tests: &[TestRun], ctx: &mut RunContext) -> Result<(), RunError> {
    if ctx.stopped() {
        return Ok(());
    }
    let measured: Vec<&TestRun> = tests
        .iter()
        .filter(|t| !t.record.passes.is_empty())
        .collect();
    let empty: Vec<&TestRun> = measured
        .iter()
        .copied()
        .filter(|t| t.record.passes.iter().all(|p| p.ios == 0))
        .collect();
    let longest = |t: &TestRun| {
        t.record
            .passes
            .iter()
            .map(|p| p.seconds)
            .fold(0.0, f64::max)
    };
    if !empty.is_empty() && empty.len() == measured.len() {
        let t = empty[0];
        return Err(RunError::Failed(format!(
            "no I/O completed in any measured pass of {} ({} pass(es), {:.3} s the longest){}: \
             there is nothing to measure; give passes longer than an I/O takes (--duration)",
            t.record.name,
            t.record.passes.len(),
            longest(t),
            if empty.len() > 1 {
                format!(" nor of the {} other tests", empty.len() - 1)
            } else {
                String::new()
            }
        )));
    }
    for t in empty {
        ctx.note(format!(
            "{}: no I/O completed in any of its {} measured pass(es) ({:.3} s the longest): \
             its 0 MB/s measures nothing; give passes longer than an I/O takes (--duration)",
            t.record.name,
            t.record.passes.len(),
            longest(t)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The schedule of adaptive passes on scripted passes: which test gets how many passes,
    //! in which order, whatever the machine's speed (time here is planned time).

    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    use iolab_measure::{CpuUsage, PassRecord, RunRecord, TimeSeries};
    use iolab_spec::{JobSpec, Rw};

    use super::*;
    use crate::options::CommonArgs;

    /// Passes whose MB/s come from a function of (test name, pass number from 0); a
    /// test named in `stop_after` raises the stop flag once it has that many passes.
    struct Script {
        mb_s: fn(&str, usize) -> f64,
        log: Vec<String>,
        stop_after: Option<(&'static str, usize)>,
    }

    impl Passes for Script {
        fn pass(
            &mut self,
            t: &mut TestRun,
            warm: bool,
            ctx: &mut RunContext,
        ) -> Result<PassEnd, RunError> {
            let name = t.spec.name.clone();
            self.log.push(if warm {
                format!("{name} warm")
            } else {
                name.clone()
            });
            if warm {
                return Ok(PassEnd::Done);
            }
            let n = t.record.passes.len();
            let mut p = PassRecord::new(
                n as u32 + 1,
                1.0,
                None,
                None,
                None,
                CpuUsage::default(),
                TimeSeries::default(),
            );
            p.mb_s = (self.mb_s)(&name, n);
            // A script's 0 MB/s is a pass in which no I/O completed.
            p.ios = u64::from(p.mb_s > 0.0);
            p.bytes = (p.mb_s * 1e6) as u64;
            t.record.passes.push(p);
            if self.stop_after == Some((name.as_str(), n + 1)) {
                ctx.stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(PassEnd::Done)
        }
    }

    fn plan(names: &[&str], warmups: u32, stable: Option<UntilStable>) -> BlockPlan {
        // 1 s passes without a ramp: every pass costs exactly 1 s of planned time.
        let mut settings =
            crate::context::plain_settings(1 << 20, Duration::from_secs(1), 3, false);
        settings.warmup_passes = warmups;
        settings.warmup_duration = Duration::from_secs(1);
        let test = |n: &&str| TestSpec {
            name: n.to_string(),
            group: n.to_string(),
            job: JobSpec::new(Rw::Read, 4096, 1, 1),
        };
        let mut p = BlockPlan::new("cdm", settings, names.iter().map(test).collect());
        p.until_stable = stable;
        p
    }

    fn adaptive(budget_s: u64, max_runs: u32) -> Option<UntilStable> {
        Some(UntilStable {
            pct: 3.0,
            max_runs,
            max_time: Duration::from_secs(3600),
            budget: Some(Duration::from_secs(budget_s)),
        })
    }

    /// "B" alternates 50/150 MB/s (never stable); every other test is a steady 100.
    fn b_is_noisy(name: &str, n: usize) -> f64 {
        match name {
            "B" if n.is_multiple_of(2) => 50.0,
            "B" => 150.0,
            _ => 100.0,
        }
    }

    fn run(plan: &BlockPlan, script: &mut Script) -> RunRecord {
        try_run(plan, script).unwrap()
    }

    fn try_run(plan: &BlockPlan, script: &mut Script) -> Result<RunRecord, RunError> {
        let dir = tempfile::tempdir().unwrap();
        // A detached context stores nothing and shows no progress.
        let common = CommonArgs {
            target: dir.path().to_path_buf(),
            ..CommonArgs::default()
        };
        let mut ctx = RunContext::detached(common, Arc::new(AtomicBool::new(false)));
        ctx.start(RunStart::in_dir(
            "cdm",
            dir.path(),
            0,
            plan.settings.clone(),
        ))
        .unwrap();
        execute(plan, script, &mut ctx)?;
        Ok(ctx.run().clone())
    }

    #[test]
    fn a_run_that_completed_no_io_fails_and_a_test_that_did_not_is_named() {
        // No test completes an I/O (a byte limit that wrapped to 0 did this): the run fails.
        let p = plan(&["A", "B", "C"], 0, None);
        let mut s = script(|_, _| 0.0);
        let e = try_run(&p, &mut s).unwrap_err();
        let RunError::Failed(m) = e else {
            panic!("not a failure: {e:?}")
        };
        assert!(
            m.starts_with("no I/O completed in any measured pass of A (3 pass(es)"),
            "{m}"
        );
        assert!(m.contains("nor of the 2 other tests"), "{m}");
        // B alone never completes an I/O: the run stands, with a note naming B.
        let mut s = script(|name, _| if name == "B" { 0.0 } else { 100.0 });
        let r = try_run(&p, &mut s).unwrap();
        assert_eq!(r.tests.len(), 3);
        let notes: Vec<&String> = r.notes.iter().filter(|n| n.contains("no I/O")).collect();
        assert_eq!(notes.len(), 1, "{:?}", r.notes);
        assert!(notes[0].starts_with("B: no I/O completed"), "{notes:?}");
        // One pass without I/O among others is a window shorter than the I/Os: kept.
        let mut s = script(|name, n| if name == "B" && n == 0 { 0.0 } else { 100.0 });
        let r = try_run(&p, &mut s).unwrap();
        assert_eq!(r.tests[1].passes[0].ios, 0);
        assert!(
            !r.notes.iter().any(|n| n.contains("no I/O")),
            "{:?}",
            r.notes
        );
    }

    fn script(mb_s: fn(&str, usize) -> f64) -> Script {
        Script {
            mb_s,
            log: Vec::new(),
            stop_after: None,
        }
    }

    fn counts(log: &[String]) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for name in log {
            match out.last_mut() {
                Some((n, c)) if n == name => *c += 1,
                _ => out.push((name.clone(), 1)),
            }
        }
        out
    }

    fn adaptive_extra(t: &TestRecord) -> (&str, u64) {
        let a = &t.extra["adaptive"];
        (
            a["stopped"].as_str().unwrap(),
            a["visits"].as_u64().unwrap(),
        )
    }

    #[test]
    fn stable_tests_stop_at_three_and_the_noisy_one_gets_what_they_leave() {
        // Budget 24 s of 1 s passes. A: share 8, stable at 3. B: share (24-3)/2 = 10.5,
        // never stable: 10 passes. C: share 11, stable at 3. Then B comes back for the 8 s
        // left: 8 more passes, 18 in all, and the budget is used exactly.
        let p = plan(&["A", "B", "C"], 0, adaptive(24, 20));
        let mut s = script(b_is_noisy);
        let r = run(&p, &mut s);
        let want: Vec<(String, usize)> = [("A", 3), ("B", 10), ("C", 3), ("B", 8)]
            .iter()
            .map(|(n, c)| (n.to_string(), *c))
            .collect();
        assert_eq!(counts(&s.log), want);
        let by = |n: &str| r.tests.iter().find(|t| t.name == n).unwrap();
        for (name, passes, converged, stopped, visits) in [
            ("A", 3, true, "stable", 1),
            ("B", 18, false, "budget", 2),
            ("C", 3, true, "stable", 1),
        ] {
            let t = by(name);
            assert_eq!(t.passes.len(), passes, "{name}");
            assert_eq!(t.summary.passes, passes as u32, "{name}");
            assert_eq!(t.summary.converged, Some(converged), "{name}");
            assert_eq!(adaptive_extra(t), (stopped, visits), "{name}");
        }
        // Test order in the record is the plan's, whatever the visits.
        let names: Vec<&str> = r.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["A", "B", "C"]);
        let last = r.notes.last().unwrap();
        assert!(last.contains("used 24 s of the 24 s budget"), "{last}");
        assert!(last.contains("not stable: B"), "{last}");
    }

    #[test]
    fn warm_ups_count_against_the_budget_and_come_again_on_a_revisit() {
        // Each visit starts with its warm-up. Budget 24: A 1+3 (stable), B share 10:
        // 1 warm-up + 9, C share 10: 1+3, then B gets the 6 left: 1 warm-up + 5.
        let p = plan(&["A", "B", "C"], 1, adaptive(24, 20));
        let mut s = script(b_is_noisy);
        let r = run(&p, &mut s);
        let want: Vec<(String, usize)> = [
            ("A warm", 1),
            ("A", 3),
            ("B warm", 1),
            ("B", 9),
            ("C warm", 1),
            ("C", 3),
            ("B warm", 1),
            ("B", 5),
        ]
        .iter()
        .map(|(n, c)| (n.to_string(), *c))
        .collect();
        assert_eq!(counts(&s.log), want);
        assert_eq!(r.tests[1].passes.len(), 14);
        // Pass indices go on from the first visit's.
        let idx: Vec<u32> = r.tests[1].passes.iter().map(|p| p.index).collect();
        assert_eq!(idx, (1..=14).collect::<Vec<u32>>());
    }

    #[test]
    fn a_test_stopped_by_its_own_limit_is_not_visited_again() {
        // max-runs 6 ends B before its share; the time it leaves is not given back to it.
        let p = plan(&["A", "B", "C"], 0, adaptive(24, 6));
        let mut s = script(b_is_noisy);
        let r = run(&p, &mut s);
        assert_eq!(s.log.len(), 3 + 6 + 3);
        assert_eq!(adaptive_extra(&r.tests[1]), ("max-runs", 1));
        assert_eq!(r.tests[1].summary.converged, Some(false));
    }

    #[test]
    fn the_minimum_passes_run_even_past_the_budget() {
        // Every test gets its 3 passes (the plan refuses a budget below that; a run whose
        // passes overran still measures each test): no more, and no revisit.
        let p = plan(&["A", "B", "C"], 0, adaptive(9, 20));
        let mut s = script(|_, n| if n.is_multiple_of(2) { 50.0 } else { 150.0 });
        let r = run(&p, &mut s);
        assert_eq!(s.log.len(), 9);
        for t in &r.tests {
            assert_eq!(adaptive_extra(t), ("budget", 1), "{}", t.name);
        }
    }

    #[test]
    fn fixed_passes_are_exactly_runs_and_make_no_claim() {
        let p = plan(&["A", "B"], 1, None);
        let mut s = script(b_is_noisy);
        let r = run(&p, &mut s);
        assert_eq!(s.log.len(), 2 * (1 + 3));
        for t in &r.tests {
            assert_eq!(t.passes.len(), 3);
            assert_eq!(t.summary.converged, None);
            assert!(t.extra.is_null());
        }
    }

    #[test]
    fn a_stop_request_ends_the_test_unjudged_and_runs_nothing_more() {
        let p = plan(&["A", "B", "C"], 0, adaptive(24, 20));
        let mut s = script(b_is_noisy);
        s.stop_after = Some(("B", 4));
        let r = run(&p, &mut s);
        assert_eq!(s.log.len(), 3 + 4);
        assert_eq!(r.tests.len(), 2);
        assert_eq!(r.tests[1].summary.converged, None);
        assert_eq!(adaptive_extra(&r.tests[1]).0, "interrupted");
    }

    #[test]
    fn limits_the_minimum_passes_cannot_live_with_are_refused() {
        let mut p = plan(&["A", "B"], 1, adaptive(8, 20));
        // 2 tests x (1 warm-up + 3 passes) of 1 s = 8 s: enough.
        assert!(p.check_stable().is_ok());
        p.until_stable = adaptive(7, 20);
        let e = p.check_stable().unwrap_err();
        assert_eq!(e.option.as_deref(), Some("budget"));
        assert!(e.message.contains("= 8 s"), "{e}");
        p.until_stable = adaptive(100, 2);
        assert_eq!(
            p.check_stable().unwrap_err().option.as_deref(),
            Some("max-runs")
        );
        assert_eq!(p.default_budget(), Duration::from_secs(16));
    }

    #[test]
    fn the_default_ramp_is_a_tenth_of_the_pass_at_most_a_second() {
        assert_eq!(
            default_ramp(Duration::from_secs(3), false),
            Duration::from_millis(300)
        );
        assert_eq!(
            default_ramp(Duration::from_secs(60), false),
            Duration::from_secs(1)
        );
        assert_eq!(default_ramp(Duration::from_secs(3), true), Duration::ZERO);
    }
}
