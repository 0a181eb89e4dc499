//! `iolab run fsync`: its options and how the probe runs as a stored run.

use clap::Args;
use iolab_measure::Warning;
use iolab_runner::options::{list, DurationArg, RunsArg, SizeArg, VerifyArg};
use iolab_runner::space::{self, Need};
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, Job, RunContext, RunError, RunStart, UsageError,
};
use iolab_spec::parse_size;

use super::{FsyncConfig, SyncMethod};

/// The probe's entry in the registry.
pub static WORKLOAD: Def<FsyncOptions> = Def::new(
    &["fsync"],
    "sync-method probe (pg_test_fsync-style): write sizes x none, write+fdatasync, \
     write+fsync, O_DSYNC, O_SYNC, O_DIRECT+O_DSYNC; ops/s, latency, and a verdict on whether \
     flushes reach stable storage",
    plan,
);

/// Options of `iolab run fsync`.
#[derive(Args, Debug, Clone)]
pub struct FsyncOptions {
    #[command(flatten)]
    pub size: SizeArg,
    #[command(flatten)]
    pub runs: RunsArg,
    #[command(flatten)]
    pub duration: DurationArg,
    /// Write sizes, comma-separated (default 512,4k,8k,16k).
    #[arg(long, value_name = "LIST")]
    pub sizes: Option<String>,
    /// Methods, comma-separated, from none, fdatasync, fsync, O_DSYNC, O_SYNC,
    /// O_DIRECT+O_DSYNC (default all).
    #[arg(long, value_name = "LIST")]
    pub methods: Option<String>,
    #[command(flatten)]
    pub verify: VerifyArg,
}

struct FsyncJob {
    cfg: FsyncConfig,
}

fn plan(_name: &str, a: FsyncOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let mut cfg = FsyncConfig::new(Default::default());
    if let Some(s) = &a.sizes {
        cfg.sizes = list(
            "sizes",
            s,
            |x| parse_size("sizes", x).ok(),
            "sizes such as 512,4k,8k",
        )?;
        if let Some(bad) = cfg.sizes.iter().find(|&&s| s == 0 || s > 64 << 20) {
            return Err(UsageError::option(
                "sizes",
                format!("--sizes: {bad} is outside 1 B .. 64 MiB"),
            ));
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
    if let Some(d) = a.duration.get()? {
        cfg.duration = d;
    }
    cfg.runs = a.runs.get(cfg.runs)?;
    if let Some(s) = a.size.get()? {
        cfg.file_size = s;
    }
    if let Some(max) = cfg.sizes.iter().max() {
        cfg.file_size = cfg.file_size.max(*max);
    }
    if a.verify.verify {
        let sector = iolab_integrity::block::SECTOR as u64;
        if let Some(bad) = cfg.sizes.iter().find(|s| !s.is_multiple_of(sector)) {
            return Err(UsageError::option(
                "sizes",
                format!(
                    "--verify writes every write as a self-describing block of whole \
                     {sector}-byte sectors: --sizes must be multiples of {sector}, and {bad} is \
                     not"
                ),
            ));
        }
        cfg.verify = Some(fastrand::u64(1..));
    }
    Ok(Box::new(FsyncJob { cfg }))
}

impl Job for FsyncJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let mut cfg = self.cfg;
        cfg.dir = target_dir(&ctx.common, "fsync")?;
        space::check(&cfg.dir, Need::new("size", cfg.file_size, 1))?;
        let per_test = cfg.duration * cfg.runs;
        ctx.progress
            .set_total(per_test * (cfg.sizes.len() * cfg.methods.len()) as u32);
        ctx.start(RunStart::in_dir(
            "fsync",
            &cfg.dir,
            cfg.file_size,
            plain_settings(cfg.file_size, cfg.duration, cfg.runs, false),
        ))?;
        let mut step = std::time::Duration::ZERO;
        let report = {
            let progress = &ctx.progress;
            super::run(&cfg, &ctx.stop, &mut |label| {
                let _ = progress.pass(label.to_string(), step, per_test);
                step += per_test;
            })
            .map_err(|e| RunError::Failed(e.to_string()))?
        };
        ctx.add_tests(report.tests)?;
        for s in &report.skipped {
            ctx.note(format!("skipped {s}"));
        }
        ctx.note(format!("verdict: {}", report.verdict.reason));
        if report.verdict.flushes_reach_storage == Some(false) {
            ctx.warn(Warning {
                code: iolab_measure::WarningCode::FlushNoEffect,
                message: report.verdict.reason.clone(),
                fix: "check the mount's barriers and the device's write cache mode; only a \
                      non-volatile cache makes this safe"
                    .into(),
                test: None,
            });
        }
        Ok(())
    }
}
