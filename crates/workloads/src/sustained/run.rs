//! `iolab run sustained`: its options and its plan, a `custom` block plan of 1 s rounds
//! (no ramp, no warm-up) per write shape, each shape a pair of tests: the writes until
//! steady, and the writes after `--idle`.

use std::time::Duration;

use clap::{Args, Command, FromArgMatches};
use iolab_engine::engines::EngineArgs;
use iolab_runner::block::BlockPlan;
use iolab_runner::options::{bounded, opt_duration, opt_size, BufferedArg, SafetyArgs, SizeArg};
use iolab_runner::sustained::{SustainedPlan, AFTER_IDLE};
use iolab_runner::{CommonArgs, Def, Job, RunContext, RunError, UsageError};
use iolab_spec::Rw;

use crate::block::{BlockArgs, Given, IometerArgs, ShapeArgs};

/// `run sustained`'s entry in the registry.
pub static WORKLOAD: Def<SustainedOptions> = Def::new(
    &["sustained"],
    "writes until the rate is steady after any cliff (a cache filling), then again after an \
     --idle pause: burst rate and bytes, sustained rate, the cache's recovery time; \
     sequential 128K and random 4K at QD32 (--rw)",
    plan,
    &crate::block::info::INFO,
);

/// Default rounds of the steady-state window (the SNIA PTS's five).
pub const DEFAULT_WINDOW: usize = 5;
/// Default most round time of one test.
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(60);
/// Default pause before writing again.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(5);

/// Options of `iolab run sustained`.
#[derive(Args, Debug, Clone)]
pub struct SustainedOptions {
    #[command(flatten)]
    pub size: SizeArg,
    /// What is written: write (sequential), randwrite, or both (default).
    #[arg(long)]
    pub rw: Option<Shapes>,
    /// Block size (default 128k sequential, 4k random).
    #[arg(long)]
    pub bs: Option<String>,
    /// I/Os in flight (default 32).
    #[arg(long)]
    pub iodepth: Option<u32>,
    /// Rounds (of 1 s) in the steady-state window (default 5, the SNIA PTS's).
    #[arg(long, value_name = "N")]
    pub window: Option<usize>,
    /// Most time one test writes, e.g. 60s (default), 10m.
    #[arg(long, value_name = "TIME")]
    pub max_time: Option<String>,
    /// Pause before writing again to see the burst come back (default 5s; 0: none).
    #[arg(long, value_name = "TIME")]
    pub idle: Option<String>,
    /// Write at least this much before steady state may end a test (a cache larger than
    /// the window's writes would otherwise pass for the device), e.g. 2GiB (default 0).
    #[arg(long, value_name = "SIZE")]
    pub min_write: Option<String>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten, next_help_heading = "I/O options")]
    pub buffered: BufferedArg,
    /// Write data: random (incompressible, default) or zeros.
    #[arg(long, default_value = "random")]
    pub data: iolab_spec::DataPattern,
    #[command(flatten, next_help_heading = "Safety and integrity")]
    pub safety: SafetyArgs,
}

/// `--rw`: the write shapes measured.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "lower")]
pub enum Shapes {
    Write,
    RandWrite,
    Both,
}

/// The block options `custom` would take with none given.
fn block_defaults() -> Result<BlockArgs, UsageError> {
    let cmd = BlockArgs::augment_args(Command::new("sustained"));
    let m = cmd
        .try_get_matches_from(["sustained"])
        .map_err(|e| UsageError::general(e.to_string()))?;
    BlockArgs::from_arg_matches(&m).map_err(|e| UsageError::general(e.to_string()))
}

fn plan(_name: &str, a: SustainedOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let shapes: &[(Rw, &str)] = match a.rw.unwrap_or(Shapes::Both) {
        Shapes::Write => &[(Rw::Write, "128k")],
        Shapes::RandWrite => &[(Rw::RandWrite, "4k")],
        Shapes::Both => &[(Rw::Write, "128k"), (Rw::RandWrite, "4k")],
    };
    let window = bounded("window", a.window.unwrap_or(DEFAULT_WINDOW), 2, 100)?;
    let max_time = opt_duration("max-time", &a.max_time)?.unwrap_or(DEFAULT_MAX_TIME);
    if max_time < Duration::from_secs(window as u64) {
        return Err(UsageError::option(
            "max-time",
            format!("--max-time must leave room for the {window}-round window ({window}s)"),
        ));
    }
    let idle = opt_duration("idle", &a.idle)?.unwrap_or(DEFAULT_IDLE);
    let min_write = opt_size("min-write", &a.min_write)?.unwrap_or(0);
    let mut block = block_defaults()?;
    block.job_opts = block
        .job_opts
        .with(&iolab_spec::IODEPTH, u64::from(a.iodepth.unwrap_or(32)));
    block.size = a.size.clone();
    block.engine = a.engine.clone();
    block.buffered = a.buffered.clone();
    block.data = a.data;
    block.safety = a.safety.clone();
    block.runs.runs = Some(1);
    // One pass a test, as long as --max-time at most: the rule ends it (one pass, so the
    // device never idles between rounds and its cache never recovers mid-test).
    block.duration.duration = Some(format!("{}ms", max_time.as_millis()));
    block.ramp = Some("0".into());
    block.warmup = Some("0".into());
    let mut out: Option<BlockPlan> = None;
    for (rw, bs) in shapes {
        let given = Given {
            block: block.clone(),
            shape: ShapeArgs {
                rw: Some(*rw),
                bs: iolab_runner::options::BsArg {
                    bs: Some(a.bs.clone().unwrap_or_else(|| bs.to_string())),
                },
                io_size: None,
            },
            iometer: IometerArgs::default(),
            mix: false,
        };
        let p = crate::block::plan("custom", &given)?;
        match &mut out {
            None => out = Some(p),
            Some(o) => o.tests.extend(p.tests),
        }
    }
    let mut p = out.expect("at least one shape");
    p.preset = "sustained".into();
    // Its refusals of a test larger than the region name --size, not the shapes' --bs.
    p.bs_given = false;
    let firsts = std::mem::take(&mut p.tests);
    for t in firsts {
        let mut again = t.clone();
        again.name = format!("{} {AFTER_IDLE}", t.name);
        p.tests.push(t);
        if !idle.is_zero() {
            p.tests.push(again);
        }
    }
    p.sustained = Some(SustainedPlan {
        window,
        max_time,
        idle,
        min_write,
    });
    Ok(Box::new(SustainedJob(p)))
}

/// A planned sustained run.
struct SustainedJob(BlockPlan);

impl Job for SustainedJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        iolab_runner::block::run(self.0, ctx)
    }

    fn block(&self) -> Option<&BlockPlan> {
        Some(&self.0)
    }
}
