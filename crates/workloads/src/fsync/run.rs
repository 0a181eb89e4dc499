//! `iolab run fsync`: its options and how the probe runs as a stored run.

use clap::Args;
use iolab_measure::Warning;
use iolab_runner::options::{list, DurationArg, RunsArg, SizeArg, VerifyArg};
use iolab_runner::space::{self, Need};
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, Job, RunContext, RunError, RunStart, UsageError,
};
use iolab_spec::parse_size;

use super::{FlushPath, FsyncConfig, SyncMethod};

/// The probe's entry in the registry.
pub static WORKLOAD: Def<FsyncOptions> = Def::new(
    &["fsync"],
    "sync-method probe (pg_test_fsync-style): write sizes x none, write+fdatasync, \
     write+fsync, O_DSYNC, O_SYNC, O_DIRECT+O_DSYNC; ops/s, latency, and per method a \
     durability verdict with its evidence",
    plan,
    &super::info::INFO,
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

/// What the run's environment says about the path of a flush: what drops it, and whether
/// the device claims to be rotational (the facts the warnings use too).
fn flush_path(ctx: &mut RunContext) -> FlushPath {
    let fs_type = ctx.run().target.fs_type.clone();
    let Some(env) = ctx.env() else {
        return FlushPath::default();
    };
    let f = iolab_runner::facts::facts(env, None, false);
    let mut dropped_by = Vec::new();
    if let Some(opts) = &f.mount_options {
        if opts
            .split(',')
            .any(|o| o == "nobarrier" || o == "barrier=0")
        {
            dropped_by.push("the filesystem is mounted without barriers".to_string());
        }
    }
    if f.zfs_sync_disabled {
        dropped_by.push("the zfs dataset has sync=disabled".into());
    }
    for d in &f.write_through {
        dropped_by.push(format!(
            "{d}'s queue says \"write through\", so the block layer drops flushes although its \
             medium, the host's page cache, is volatile"
        ));
    }
    if matches!(fs_type.as_str(), "tmpfs" | "ramfs") {
        dropped_by.push(format!("{fs_type} keeps files in memory only"));
    }
    // A loop device's flush ends in its backing file: on a memory filesystem, in memory.
    for d in env.target.iter().flat_map(|t| &t.devices) {
        let Some(file) = &d.loop_backing_file else {
            continue;
        };
        if let Some(m) = iolab_env::mount_of(std::path::Path::new(file)) {
            if matches!(m.fs_type.as_str(), "tmpfs" | "ramfs") {
                dropped_by.push(format!(
                    "{}'s backing file {file} is on {}, in memory only",
                    d.name, m.fs_type
                ));
            }
        }
    }
    FlushPath {
        dropped_by,
        rotational: f.rotational,
        device: f.top_device,
    }
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
        // Everything it creates there has iolab's unique name for this process.
        let recorded = ctx.will_create_target(&cfg.dir);
        // The run state names the probe file exactly (device and inode) once it exists.
        let mut adopt = ctx.adopter(recorded);
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
            super::run_with(
                &cfg,
                &ctx.stop,
                &mut |label| {
                    let _ = progress.pass(label.to_string(), step, per_test);
                    step += per_test;
                },
                &mut adopt,
            )
            .map_err(RunError::from_error)?
        };
        let mut tests = report.tests;
        let path = flush_path(ctx);
        let free = super::judge(&mut tests, &path);
        ctx.add_tests(tests)?;
        for s in &report.skipped {
            ctx.note(format!("skipped {s}"));
        }
        if !free.is_empty() {
            ctx.warn(Warning {
                code: iolab_measure::WarningCode::FlushNoEffect,
                message: format!(
                    "flushed writes ran at half or more of the rate of plain writes of the same \
                     size, so their flushes did nothing measurable and cannot have reached \
                     stable storage: {}",
                    free.join(", ")
                ),
                fix: "remount with barriers and let the device's write cache honour flushes \
                      (\"write back\" in queue/write_cache, not \"write through\" over a \
                      volatile cache); on a memory filesystem nothing is durable"
                    .into(),
                test: None,
            });
        }
        Ok(())
    }
}
