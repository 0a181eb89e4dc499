//! The block presets as one workload family: CrystalDiskMark's profiles (`cdm`,
//! `cdm-nvme`, `cdm-peak`, `cdm-real`), ATTO's sweep (`atto`), Iometer access
//! specifications (`iometer`) and one fio-style job (`custom`). They share the engine's
//! options and the runner's block pass loop; each preset takes only the options that mean
//! something for it (`--rw/--bs` only `custom`, `--mix` only the cdm profiles, `--pattern`
//! only `iometer`).

pub mod info;

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, Args, Command, FromArgMatches};
use iolab_engine::engines::EngineArgs;
use iolab_runner::block::{self as pass_loop, BlockPlan, UntilStable};
use iolab_runner::options::{
    bounded, opt_duration, BsArg, BufferedArg, DurationArg, EndFsyncArg, MpiArgs, RunsArg,
    SafetyArgs, SizeArg, StableArgs, VerifyArg, MAX_PASSES,
};
use iolab_runner::{CommonArgs, Job, RunContext, RunError, UsageError, Workload};
use iolab_spec::{
    expand_preset, preset_info, DataPattern, JobSpec, RunSettings, Rw, SyncMode, TestSpec,
};
use iolab_stats::Score;

/// The names of the family, as `iolab run` takes them.
pub const NAMES: &[&str] = &[
    "cdm", "cdm-nvme", "cdm-peak", "cdm-real", "atto", "iometer", "custom",
];

/// The family's entry in the registry.
pub static WORKLOAD: Block = Block;

/// The options every block preset takes.
#[derive(Args, Debug, Clone)]
pub struct BlockArgs {
    #[command(flatten)]
    pub size: SizeArg,
    #[command(flatten)]
    pub runs: RunsArg,
    #[command(flatten)]
    pub duration: DurationArg,
    /// Unscored warm-up passes before the measured ones.
    #[arg(long, value_name = "N")]
    pub warmup: Option<String>,
    /// Length of each warm-up pass (default: --duration).
    #[arg(long, value_name = "TIME")]
    pub warmup_time: Option<String>,
    /// Unmeasured time at the start of every pass, e.g. 500ms (fio's ramp_time): lets a
    /// device, cache or throttle settle before counting (default: a tenth of --duration,
    /// at most 1s; 0 for passes that end after a fixed amount of I/O).
    #[arg(long, value_name = "TIME")]
    pub ramp: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten, next_help_heading = "I/O options")]
    pub buffered: BufferedArg,
    /// Write data: random (incompressible, default) or zeros.
    #[arg(long, default_value = "random")]
    pub data: DataPattern,
    #[command(flatten)]
    pub job_opts: iolab_spec::JobOptionArgs,
    /// fsync after every N writes of each job.
    #[arg(long, value_name = "N", alias = "fsync-every")]
    pub fsync: Option<u32>,
    /// fdatasync after every N writes of each job.
    #[arg(long, value_name = "N", conflicts_with = "fsync")]
    pub fdatasync: Option<u32>,
    #[command(flatten)]
    pub end_fsync: EndFsyncArg,
    #[command(flatten, next_help_heading = "Passes and headline")]
    pub stable: StableArgs,
    /// One pass per test, cut into rounds of --duration, until the last --ss-window of them
    /// are steady: the SNIA PTS rule
    /// (default: range within 20%, best-fit excursion within 10% of their mean MB/s), or
    /// fio's iops:P%, bw:P%, lat:P%, iops_slope:P%, bw_slope:P%, lat_slope:P%
    /// (see docs/workloads.md).
    #[arg(
        long,
        value_name = "RULE",
        num_args = 0..=1,
        default_missing_value = "snia",
        conflicts_with_all = ["runs", "until_stable"]
    )]
    pub steady_state: Option<String>,
    /// Before the first test, write the region with 128 KiB sequential writes of random
    /// data: none (default), a size, or 2x (twice the region; SNIA's preconditioning).
    #[arg(long, value_name = "none|SIZE|2x")]
    pub precondition: Option<String>,
    /// --steady-state: rounds in the window (default 5).
    #[arg(long, value_name = "N", requires = "steady_state")]
    pub ss_window: Option<u32>,
    /// --steady-state: most rounds before giving up (default 25).
    #[arg(long, value_name = "N", requires = "steady_state")]
    pub ss_max_rounds: Option<u32>,
    /// Headline value: median of passes (default) or best (CrystalDiskMark's best of N).
    #[arg(long, value_name = "median|best")]
    pub score: Option<Score>,
    /// cdm presets: CrystalDiskMark's own schedule and statistic: 5 passes of 5 s per test,
    /// every second measured (no ramp), no warm-up pass, headline = the best pass, 1 GiB
    /// unless --size says otherwise (CrystalDiskMark's 5 s pause between tests is not made).
    #[arg(
        long,
        conflicts_with_all = ["runs", "duration", "until_stable", "warmup", "ramp", "warmup_time"]
    )]
    pub like_crystaldiskmark: bool,
    #[command(flatten, next_help_heading = "Safety and integrity")]
    pub safety: SafetyArgs,
    #[command(flatten)]
    pub verify: VerifyArg,
    #[command(flatten, next_help_heading = "MPI options (under mpirun)")]
    pub mpi: MpiArgs,
}

/// The job shape of `custom`.
#[derive(Args, Debug, Clone, Default)]
pub struct ShapeArgs {
    /// Access pattern: read, write, randread, randwrite, rw, randrw.
    #[arg(long)]
    pub rw: Option<Rw>,
    #[command(flatten)]
    pub bs: BsArg,
    /// End each pass after SIZE bytes (all jobs together), or at --duration if that comes
    /// first (fio's io_size): a pass of known work instead of known time.
    #[arg(long, value_name = "SIZE")]
    pub io_size: Option<String>,
}

/// `--pattern`'s values: the built-in access specifications' names.
fn pattern_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(iolab_spec::iometer::PATTERNS.iter().map(|(n, _)| *n))
}

/// `iometer`'s access specification.
#[derive(Args, Debug, Clone, Default)]
pub struct IometerArgs {
    /// Built-in access specification: file-server (default), database, workstation.
    #[arg(long, value_name = "NAME", conflicts_with = "spec", value_parser = pattern_names())]
    pub pattern: Option<String>,
    /// Access specification from a TOML file (see docs/iometer.md).
    #[arg(long, value_name = "FILE")]
    pub spec: Option<PathBuf>,
    /// Run the queue-depth ladder 1, 2, 4, ... 64 outstanding I/Os per worker.
    #[arg(long)]
    pub qd_ladder: bool,
    /// An Iometer configuration file (.icf): every assigned access specification as a
    /// test named as the file names it, with the file's workers, outstanding I/Os, run
    /// time, ramp and cycling (see docs/iometer.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["spec", "pattern", "qd_ladder"])]
    pub icf: Option<PathBuf>,
}

/// `--mix` of the cdm profiles.
#[derive(Args, Debug, Clone, Default)]
pub struct MixArg {
    /// Add CrystalDiskMark's 70/30 read/write mix test to each row.
    #[arg(long)]
    pub mix: bool,
}

/// The block presets.
pub struct Block;

fn is_cdm(name: &str) -> bool {
    name.starts_with("cdm")
}

impl Workload for Block {
    fn names(&self) -> &'static [&'static str] {
        NAMES
    }

    fn summary(&self, name: &str) -> &'static str {
        preset_info(name).map_or("", |p| p.summary)
    }

    fn info(&self) -> &'static dyn iolab_measure::workload::WorkloadInfo {
        &info::INFO
    }

    fn args(&self, name: &str, cmd: Command) -> Command {
        // Each group below BlockArgs's last (MPI) heading gets its own.
        let mut cmd = BlockArgs::augment_args(cmd).next_help_heading(format!("{name} options"));
        if name == "custom" {
            cmd = ShapeArgs::augment_args(cmd);
        }
        if matches!(name, "custom" | "iometer") {
            // The options of a job's shape (`iolab_spec::Scope::Shape`: --iodepth, --numjobs).
            cmd = iolab_spec::JobOptionArgs::augment_shape(cmd);
        }
        if name == "iometer" {
            cmd = IometerArgs::augment_args(cmd);
        }
        if is_cdm(name) {
            cmd = MixArg::augment_args(cmd);
        }
        cmd
    }

    fn plan(
        &self,
        name: &str,
        m: &ArgMatches,
        _common: &CommonArgs,
    ) -> Result<Box<dyn Job>, UsageError> {
        let parse = |e: clap::Error| UsageError::general(e.to_string());
        let given = Given {
            block: BlockArgs::from_arg_matches(m).map_err(parse)?,
            shape: if name == "custom" {
                ShapeArgs::from_arg_matches(m).map_err(parse)?
            } else {
                ShapeArgs::default()
            },
            iometer: if name == "iometer" {
                IometerArgs::from_arg_matches(m).map_err(parse)?
            } else {
                IometerArgs::default()
            },
            mix: is_cdm(name) && MixArg::from_arg_matches(m).map_err(parse)?.mix,
        };
        Ok(Box::new(BlockJob(plan(name, &given)?)))
    }
}

/// Everything a block preset was given.
#[derive(Debug, Clone)]
pub struct Given {
    pub block: BlockArgs,
    pub shape: ShapeArgs,
    pub iometer: IometerArgs,
    pub mix: bool,
}

/// The queue depth and jobs given (`--iodepth`, `--numjobs`: rows of the job's shape in
/// `iolab_spec::JOB_OPTIONS`), which `iometer` builds its tests from.
struct Queue {
    iodepth: Option<u32>,
    numjobs: Option<u32>,
}

impl Given {
    fn queue(&self) -> Queue {
        let v = |o| {
            self.block
                .job_opts
                .value(o)
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
        };
        Queue {
            iodepth: v(&iolab_spec::IODEPTH),
            numjobs: v(&iolab_spec::NUMJOBS),
        }
    }
}

/// A planned block run.
pub struct BlockJob(pub BlockPlan);

impl Job for BlockJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        iolab_runner::block::run(self.0, ctx)
    }

    fn block(&self) -> Option<&BlockPlan> {
        Some(&self.0)
    }
}

/// Reads `--icf FILE` (bounded; text that is not UTF-8 read as Latin-1, as Iometer on
/// Windows writes its code page).
fn read_icf(path: &std::path::Path) -> Result<iolab_spec::icf::Icf, UsageError> {
    use iolab_spec::icf;
    let bytes = iolab_sys::input::read_input(path, icf::MAX_ICF_BYTES)
        .map_err(|e| UsageError::option("icf", format!("--icf {}: {e}", path.display())))?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => e.into_bytes().iter().map(|&b| b as char).collect(),
    };
    icf::parse(&path.display().to_string(), &text)
        .map_err(|e| UsageError::option("icf", e.to_string()))
}

/// The tests, notes and defaults of `--icf`: the file's workers and outstanding I/Os
/// unless --numjobs/--iodepth replace them.
fn icf_tests(
    icf: &iolab_spec::icf::Icf,
    q: &Queue,
) -> Result<(Vec<TestSpec>, Vec<String>), UsageError> {
    let mut notes = icf.notes.clone();
    let workers = q.numjobs.unwrap_or(icf.workers);
    let iodepth = q.iodepth.unwrap_or(icf.iodepth);
    if q.numjobs.is_some_and(|n| n != icf.workers) {
        notes.push(format!(
            "--numjobs {workers} replaced the file's {} worker(s)",
            icf.workers
        ));
    }
    if q.iodepth.is_some_and(|n| n != icf.iodepth) {
        notes.push(format!(
            "--iodepth {iodepth} replaced the file's {} outstanding I/O(s)",
            icf.iodepth
        ));
    }
    let tests = iolab_spec::icf::tests(icf, workers, iodepth);
    for t in &tests {
        t.job.validate()?;
    }
    Ok((tests, notes))
}

/// The tests of `iolab run iometer`: a built-in pattern or a TOML spec, at --iodepth
/// outstanding I/Os (default 1) per worker (--numjobs, default 1), or over the ladder.
fn iometer_tests(g: &Given) -> Result<Vec<TestSpec>, UsageError> {
    use iolab_spec::iometer;
    let a = &g.iometer;
    let (name, lines) = match (&a.spec, &a.pattern) {
        (Some(path), _) => {
            let bytes =
                iolab_sys::input::read_input(path, iometer::MAX_SPEC_BYTES).map_err(|e| {
                    UsageError::option("spec", format!("--spec {}: {e}", path.display()))
                })?;
            let text = String::from_utf8(bytes).map_err(|_| {
                UsageError::option(
                    "spec",
                    format!("--spec {}: not UTF-8 text (a spec is TOML)", path.display()),
                )
            })?;
            let file = path.display().to_string();
            let (name, lines) = iometer::parse_spec(&file, &text).map_err(|e| {
                UsageError::option("spec", format!("{}: {}: {}", e.value, e.field, e.reason))
            })?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "spec".into());
            (name.unwrap_or(stem), lines)
        }
        (None, p) => {
            let name = p.as_deref().unwrap_or("file-server");
            let lines = iometer::pattern(name).expect("--pattern takes only the built-in names");
            (name.to_string(), lines)
        }
    };
    let q = g.queue();
    let tests = iometer::tests(
        &name,
        &lines,
        q.numjobs.unwrap_or(1),
        q.iodepth.unwrap_or(1),
        a.qd_ladder,
    );
    for t in &tests {
        t.job.validate()?;
    }
    Ok(tests)
}

fn custom_job(g: &Given) -> Result<JobSpec, UsageError> {
    let rw = g.shape.rw.unwrap_or(Rw::Read);
    let bs = g.shape.bs.get()?.unwrap_or(4096);
    let mut job = JobSpec::new(rw, bs, 1, 1);
    for (o, v) in g.block.job_opts.given() {
        (o.set)(&mut job, v);
    }
    if let Some(n) = iolab_runner::options::opt_size("io-size", &g.shape.io_size)? {
        if n < bs {
            return Err(UsageError::option(
                "io-size",
                format!("--io-size {n}: less than one block of --bs ({bs} bytes)"),
            ));
        }
        job.io_limit = Some(n);
    }
    Ok(job)
}

/// CrystalDiskMark's measured passes per test (`--like-crystaldiskmark`).
const CDM_PASSES: u32 = 5;
/// CrystalDiskMark's pass length.
const CDM_PASS: Duration = Duration::from_secs(5);

/// Resolves a block preset's options into a plan; touches nothing.
pub fn plan(preset: &str, g: &Given) -> Result<BlockPlan, UsageError> {
    let a = &g.block;
    let info = preset_info(preset)
        .ok_or_else(|| UsageError::general(format!("unknown preset '{preset}'")))?;
    let mut d = info.defaults;
    let cdm_like = a.like_crystaldiskmark;
    if cdm_like {
        if !is_cdm(preset) {
            return Err(UsageError::option(
                "like-crystaldiskmark",
                format!(
                    "--like-crystaldiskmark runs CrystalDiskMark's schedule, which only the cdm \
                     presets follow, not {preset}"
                ),
            ));
        }
        if a.score.is_some_and(|s| s != Score::Best) {
            return Err(UsageError::option(
                "score",
                "--like-crystaldiskmark scores the best pass, as CrystalDiskMark does: \
                 leave --score out",
            ));
        }
        d.runs = CDM_PASSES;
        d.duration = CDM_PASS;
        d.warmup_passes = 0;
        d.adaptive = false;
    }
    let icf = match &g.iometer.icf {
        Some(path) => Some(read_icf(path)?),
        None => None,
    };
    if let Some(icf) = &icf {
        // Iometer runs each test once, for its run time after its ramp.
        d.runs = 1;
        d.duration = icf.run_time.unwrap_or(d.duration);
        d.size = icf.max_size.unwrap_or(d.size);
    }
    let size_given = a.size.size.is_some();
    let size = a.size.get()?.unwrap_or(d.size);
    let duration = a.duration.get()?.unwrap_or(d.duration);
    if duration < Duration::from_millis(100) {
        return Err(UsageError::option(
            "duration",
            "--duration must be at least 100ms",
        ));
    }
    let warmup_duration = opt_duration("warmup-time", &a.warmup_time)?.unwrap_or(duration);
    let runs = a.runs.get(d.runs)?;
    let choice = a
        .engine
        .resolve()
        .map_err(|(o, m)| UsageError::option(&o, m))?;
    let data = a.data;
    let score = a
        .score
        .unwrap_or(if cdm_like { Score::Best } else { Score::Median });
    let mut notes = Vec::new();
    let mut tests = match (preset, &icf) {
        ("iometer", Some(icf)) => {
            let (tests, n) = icf_tests(icf, &g.queue())?;
            notes = n;
            tests
        }
        ("iometer", None) => iometer_tests(g)?,
        ("custom", _) => expand_preset(preset, Some(&custom_job(g)?), g.mix, size)?,
        _ => expand_preset(preset, None, g.mix, size)?,
    };
    // The options of a job's shape were built into the tests above; the others apply to
    // every test that has them.
    for (o, v) in a
        .job_opts
        .given()
        .filter(|(o, _)| o.scope == iolab_spec::Scope::Tests)
    {
        if !tests.iter().any(|t| (o.get)(&t.job).is_some()) {
            return Err(UsageError::option(
                &o.flag(),
                format!(
                    "--{} {}, and {preset} has none{}",
                    o.flag(),
                    o.does,
                    if is_cdm(preset) { " (add --mix)" } else { "" }
                ),
            ));
        }
        for t in tests.iter_mut().filter(|t| (o.get)(&t.job).is_some()) {
            (o.set)(&mut t.job, v);
        }
    }
    let sync_given = a.fsync.is_some() || a.fdatasync.is_some() || a.end_fsync.end_fsync;
    if sync_given && !tests.iter().any(|t| t.job.rw.writes()) {
        let o = if a.fsync.is_some() {
            "fsync"
        } else if a.fdatasync.is_some() {
            "fdatasync"
        } else {
            "end-fsync"
        };
        return Err(UsageError::option(
            o,
            format!("--{o} flushes writes, and every test of {preset} only reads"),
        ));
    }
    for (o, n) in [("fsync", a.fsync), ("fdatasync", a.fdatasync)] {
        if n == Some(0) {
            return Err(UsageError::option(
                o,
                format!("--{o} 0: flushes after every N writes, N at least 1"),
            ));
        }
    }
    for t in &mut tests {
        if let Some(n) = a.fsync {
            t.job.fsync_every = n;
            t.job.sync_mode = SyncMode::Fsync;
        }
        if let Some(n) = a.fdatasync {
            t.job.fsync_every = n;
            t.job.sync_mode = SyncMode::Fdatasync;
        }
        if a.end_fsync.end_fsync {
            t.job.end_fsync = true;
        }
        t.job.validate()?;
    }
    let warmup_passes = match &a.warmup {
        None => d.warmup_passes,
        Some(w) => bounded(
            "warmup",
            w.parse().map_err(|_| {
                UsageError::option(
                    "warmup",
                    format!("--warmup '{w}': for preset {preset} this is a number of passes"),
                )
            })?,
            0,
            MAX_PASSES,
        )?,
    };
    let (engine, engine_notes) = iolab_engine::engines::usable(
        choice.kind,
        choice.named,
        tests.iter().map(|t| t.job.iodepth),
    )
    .map_err(|m| UsageError::option("engine", m))?;
    notes.extend(engine_notes);
    let byte_limited = tests.iter().any(|t| t.job.io_limit.is_some());
    let ramp = match opt_duration("ramp", &a.ramp)? {
        Some(r) => r,
        None if cdm_like => Duration::ZERO,
        None if icf.as_ref().is_some_and(|i| i.ramp.is_some()) => {
            icf.as_ref().and_then(|i| i.ramp).unwrap_or_default()
        }
        None => pass_loop::default_ramp(duration, byte_limited),
    };
    // Adaptive passes: asked for, or the preset's default when --runs does not fix them.
    let steady = match &a.steady_state {
        None => iolab_runner::steady::Steady::Off,
        Some(rule) => {
            let rule = iolab_stats::series::SteadyRule::parse(rule)
                .map_err(|m| UsageError::option("steady-state", format!("--steady-state {m}")))?;
            let window = bounded(
                "ss-window",
                a.ss_window.unwrap_or(pass_loop::STEADY_WINDOW),
                2,
                MAX_PASSES,
            )?;
            let max_rounds = bounded(
                "ss-max-rounds",
                a.ss_max_rounds.unwrap_or(pass_loop::STEADY_MAX_ROUNDS),
                window,
                MAX_PASSES,
            )?;
            if !iolab_runner::steady::whole_intervals(duration, false) {
                return Err(UsageError::option(
                    "duration",
                    format!(
                        "--steady-state cuts the pass's 100 ms series into rounds of --duration: \
                         give a multiple of 100ms (not {} ms)",
                        duration.as_secs_f64() * 1000.0
                    ),
                ));
            }
            iolab_runner::steady::Steady::All(pass_loop::SteadyPlan::rounds(
                rule, window, duration, max_rounds,
            ))
        }
    };
    let stable = a
        .stable
        .get(d.adaptive && a.runs.runs.is_none() && !steady.any())?;
    let mut plan = BlockPlan {
        preset: preset.to_string(),
        until_stable: stable.map(|c| UntilStable {
            pct: c.pct,
            max_runs: c.max_runs.unwrap_or(pass_loop::DEFAULT_MAX_RUNS),
            max_time: c.max_time.unwrap_or(pass_loop::DEFAULT_MAX_TIME),
            budget: c.budget,
        }),
        settings: RunSettings {
            size,
            duration,
            runs,
            warmup_passes,
            warmup_duration,
            ramp,
            engine: Some(engine),
            direct: !a.buffered.buffered,
            data,
            engine_opts: choice.opts,
        },
        tests,
        score,
        notes,
        verify: a.verify.verify,
        size_given,
        size_at: None,
        allow_destroy_device: a.safety.allow_destroy_device,
        allow_overwrite_file: a.safety.allow_overwrite_file,
        mpi: a.mpi.mode(),
        sustained: None,
        steady,
        skip_unfit: preset == "atto",
        bs_given: preset == "custom",
        precondition: match &a.precondition {
            Some(t) => iolab_runner::precondition::Precondition::parse(t)?,
            None => None,
        },
        preconditioned: None,
    };
    if let iolab_runner::steady::Steady::All(sp) = &plan.steady {
        // One pass a test, of at most its rounds' time (the run's settings say so).
        plan.settings.duration = sp.limit;
        plan.settings.runs = 1;
    }
    let default_budget = plan.default_budget();
    if let Some(u) = &mut plan.until_stable {
        u.budget.get_or_insert(default_budget);
    }
    plan.check_stable()?;
    if plan.verify {
        plan.check_verify()?;
    }
    Ok(plan)
}

/// The workload `iolab run` runs when none is named: `custom` when a job shape is given,
/// else `cdm`.
pub fn default_name(args: &[String]) -> &'static str {
    let shape: Vec<String> = ["--rw", "--bs"]
        .into_iter()
        .map(String::from)
        .chain(iolab_spec::JobOptionArgs::shape_flags())
        .collect();
    if args.iter().any(|a| {
        shape
            .iter()
            .any(|s| a == s || a.starts_with(&format!("{s}=")))
    }) {
        "custom"
    } else {
        "cdm"
    }
}
