//! `iolab run verify`: its options, their checks, and the verified-write run as a stored
//! run (the writer is this folder's `mod.rs`, the checks are iolab-integrity's).

use std::path::Path;
use std::time::Duration;

use clap::Args;
use iolab_integrity::journal::check_separate_filesystems;
use iolab_measure::TargetInfo;
use iolab_runner::options::{BsArg, BufferedArg, RunsArg, SafetyArgs, SizeArg};
use iolab_runner::{
    plain_settings, CommonArgs, Def, ExitStatus, Job, RunContext, RunError, RunStart, UsageError,
};
use iolab_spec::{format_bytes, parse_size};
use iolab_testbed::runstate::RunResource;

use super::{DataTarget, PrepareError, VerifyConfig, VerifyMode};

/// `run verify`'s entry in the registry.
pub static WORKLOAD: Def<VerifyOptions> = Def::new(
    &["verify"],
    "verified writes: self-describing blocks (offset, run id, generation, crc32c) over --size \
     in --bs blocks, --rw write|randwrite, --runs passes, read back --verify-mode \
     inline|after|both|none; --journal PATH for `iolab verify` after a crash; exit 3 on any \
     mismatch",
    plan,
    &super::info::INFO,
);

/// Options of `iolab run verify`.
/// `--rw`: the order the blocks are written in.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "lower")]
pub enum WriteOrder {
    Write,
    RandWrite,
}

#[derive(Args, Debug, Clone)]
pub struct VerifyOptions {
    #[command(flatten)]
    pub size: SizeArg,
    #[command(flatten)]
    pub bs: BsArg,
    /// How the blocks are written: write (sequential, default) or randwrite.
    #[arg(long)]
    pub rw: Option<WriteOrder>,
    #[command(flatten)]
    pub runs: RunsArg,
    /// When blocks are read back: inline (every --verify-every blocks as they are written),
    /// after (the whole region after each pass; default), both, none.
    #[arg(long, value_name = "MODE")]
    pub verify_mode: Option<VerifyMode>,
    /// Read back every Nth block written (inline mode; default 16).
    #[arg(long, value_name = "N")]
    pub verify_every: Option<u64>,
    /// fdatasync every N blocks (default 64 with --journal, else none).
    #[arg(long, value_name = "N", alias = "fsync")]
    pub fsync_every: Option<u64>,
    /// Keep the data file and its sidecar for a later `iolab verify`.
    #[arg(long)]
    pub keep: bool,
    /// Intent/ack journal, on another filesystem than the target, for `iolab verify
    /// --journal` after a crash (see docs/integrity.md).
    #[arg(long, value_name = "PATH")]
    pub journal: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub buffered: BufferedArg,
    #[command(flatten)]
    pub safety: SafetyArgs,
}

struct VerifyJob {
    cfg: VerifyConfig,
    keep: bool,
    size_given: bool,
    safety: SafetyArgs,
}

fn plan(_name: &str, a: VerifyOptions, c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    if a.journal.is_some() && c.repeat()? > 1 {
        return Err(UsageError::option(
            "repeat",
            "--repeat does not apply with --journal: a journal describes one run's data, \
             and the next run would find it already there",
        ));
    }
    let cfg = config(&a)?;
    Ok(Box::new(VerifyJob {
        cfg,
        keep: a.keep,
        size_given: a.size.size.is_some(),
        safety: a.safety,
    }))
}
/// Default region and block size of `iolab run verify`.
const DEFAULT_SIZE: u64 = 256 << 20;
const DEFAULT_BS: u64 = 4096;
/// Default blocks between fdatasyncs when a journal is kept.
const DEFAULT_JOURNAL_FSYNC_EVERY: u64 = 64;

pub fn block_size(field: &str, text: &str) -> Result<u64, UsageError> {
    let bs = parse_size(field, text)?;
    if bs < 512 || bs % 512 != 0 || bs > 64 << 20 {
        return Err(UsageError::option(
            field,
            format!(
                "--{field} {text}: verified blocks are a multiple of 512 bytes, 512 B .. 64 MiB"
            ),
        ));
    }
    Ok(bs)
}

/// The resolved configuration of `iolab run verify`, before anything is created.
fn config(a: &VerifyOptions) -> Result<VerifyConfig, UsageError> {
    let bs = match &a.bs.bs {
        Some(b) => block_size("bs", b)?,
        None => DEFAULT_BS,
    };
    let size = a.size.get()?.unwrap_or(DEFAULT_SIZE);
    if size < bs || size % bs != 0 {
        return Err(UsageError::option(
            "size",
            format!("--size {size}: must be a positive multiple of --bs ({bs} bytes)"),
        ));
    }
    let random = a.rw == Some(WriteOrder::RandWrite);
    let passes = a.runs.get(1)?;
    let mode = match (a.verify_mode, a.verify_every) {
        (Some(m), _) => m,
        // Asking for a read-back interval asks for inline checks.
        (None, Some(_)) => VerifyMode::Both,
        (None, None) => VerifyMode::After,
    };
    if a.verify_every == Some(0) {
        return Err(UsageError::option(
            "verify-every",
            "--verify-every must be at least 1",
        ));
    }
    if let Some(j) = &a.journal {
        if j.exists() {
            return Err(UsageError::option(
                "journal",
                format!(
                    "--journal {}: already exists; iolab creates a new journal for every run",
                    j.display()
                ),
            ));
        }
    }
    let fsync_every = match a.fsync_every {
        Some(n) => n,
        None if a.journal.is_some() => DEFAULT_JOURNAL_FSYNC_EVERY,
        None => 0,
    };
    if a.journal.is_some() && fsync_every == 0 {
        return Err(UsageError::option(
            "fsync-every",
            "--fsync-every 0 with --journal: acknowledgements need fsyncs",
        ));
    }
    Ok(VerifyConfig {
        size,
        bs: bs as usize,
        random,
        passes,
        mode,
        verify_every: a.verify_every.unwrap_or(16),
        fsync_every,
        journal: a
            .journal
            .as_ref()
            .map(|j| std::path::absolute(j).unwrap_or_else(|_| j.clone())),
        direct: !a.buffered.buffered,
        run_id: fastrand::u64(1..),
    })
}

impl Job for VerifyJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let VerifyJob {
            mut cfg,
            keep,
            size_given,
            safety,
        } = *self;
        let target_path = ctx.common.target.clone();
        if let Some(j) = &cfg.journal {
            check_separate_filesystems(j, &target_path)
                .map_err(|m| RunError::Usage(UsageError::option("journal", m.to_string())))?;
        }
        // Blocks are written sparse-file first: without this a --size beyond the free space
        // would fill the filesystem before failing with ENOSPC.
        iolab_runner::space::check_target(&target_path, Some(cfg.size), cfg.size, true, None)?;
        // Data that is not kept is recorded before it is created: in a directory, files with
        // iolab's unique name for this process; a new file and its sidecar by name.
        let mut recorded = None;
        if !(keep || cfg.journal.is_some()) {
            let p = ctx.common.target_abs();
            if p.is_dir() {
                recorded = ctx.will_create_target(&p);
            } else if std::fs::symlink_metadata(&p).is_err() {
                recorded = ctx.will_create_target(&p);
                ctx.will_create(RunResource::File {
                    path: iolab_integrity::verified::sidecar_path(&p),
                });
            }
        }
        let mut target = DataTarget::prepare(
            &target_path,
            cfg.size,
            size_given,
            safety.allow_overwrite_file,
            safety.allow_destroy_device,
        )
        .map_err(|e| match e {
            PrepareError::Refused(m) => RunError::Usage(UsageError::option("target", m)),
            PrepareError::Failed(e) => RunError::from_error(e),
        })?;
        // The run state names the data file exactly (device and inode): one put at its path
        // during the run is never taken for it.
        if recorded.is_some() && target.identity().is_some() {
            ctx.adopt(recorded, &target.path, target.identity());
            // Its sidecar and the sidecar's temporary file, which the directory-wide
            // record covered, by name (rewritten by rename during the run).
            if let Some(side) = target.sidecar() {
                let mut tmp = side.clone().into_os_string();
                tmp.push(super::SIDECAR_TMP_SUFFIX);
                ctx.will_create(RunResource::File { path: side });
                ctx.will_create(RunResource::File { path: tmp.into() });
            }
        }
        if cfg.direct {
            // Checked on the target itself (for a new file: the directory it goes in).
            let at = if target.path.exists() {
                target.path.clone()
            } else {
                target
                    .path
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default()
            };
            if let Err(m) = iolab_integrity::verified::check_direct_block_size(&at, cfg.bs as u64) {
                // Nothing was written; a file made for the run goes again.
                for what in target.cleanup() {
                    ctx.left_behind(what);
                }
                return Err(RunError::Usage(UsageError::option(
                    "bs",
                    format!("--bs {}: {m} (or --buffered)", cfg.bs),
                )));
            }
        }
        // A journal describes the data: both stay for `iolab verify --journal`.
        target.keep = keep || cfg.journal.is_some() || !target.created;
        cfg.size = target.size - target.size % cfg.bs as u64;
        let info = TargetInfo {
            path: ctx.common.target_abs().to_string_lossy().into_owned(),
            // As the engine names targets: what the user gave, not what iolab made in it.
            kind: if target_path.is_dir() {
                iolab_measure::TargetKind::Dir
            } else {
                target.kind.clone()
            },
            io_path: target.path.to_string_lossy().into_owned(),
            // Filled in from the environment the run captures.
            fs_type: String::new(),
            size: cfg.size,
        };
        let outcome = measure(ctx, &cfg, &target, info);
        // Removed here, not on drop, so what cannot be removed is said.
        for what in target.cleanup() {
            ctx.left_behind(what);
        }
        outcome
    }
}

/// The verified writes on a prepared target, as a stored run.
fn measure(
    ctx: &mut RunContext,
    cfg: &VerifyConfig,
    target: &DataTarget,
    info: TargetInfo,
) -> Result<(), RunError> {
    ctx.start(RunStart {
        preset: "verify".into(),
        workload: "verify".into(),
        target: info,
        settings: plain_settings(cfg.size, Duration::ZERO, cfg.passes, cfg.direct),
        notes: Vec::new(),
        env_path: target.path.clone(),
    })?;
    let out = {
        let progress = &ctx.progress;
        super::run(cfg, target, &ctx.stop, &mut |label, n| {
            progress.phase(label, format_bytes(n))
        })
        .map_err(RunError::from_error)?
    };
    let tally = out.tally;
    // Stopped before a pass finished: nothing was measured.
    if !out.test.passes.is_empty() {
        let verdict = verdict_line(&out.test.name, &tally);
        ctx.add_tests(vec![out.test])?;
        ctx.note(verdict);
    }
    let mut text = String::new();
    if target.created && target.keep {
        text.push_str(&format!(
            "data kept: {} (run id {:016x}); check it later with `iolab verify --target {}{}`\n",
            target.path.display(),
            cfg.run_id,
            target.path.display(),
            cfg.journal
                .as_ref()
                .map(|j| format!(" --journal {}", j.display()))
                .unwrap_or_default()
        ));
    }
    if tally.failures > 0 {
        text.push_str(&format!(
            "integrity: {} of {} checked blocks do not hold what was written:\n",
            tally.failures, tally.checked
        ));
        text.push_str(&tally.failure_lines());
        ctx.raise(ExitStatus::Integrity);
    }
    ctx.epilogue(&text);
    Ok(())
}

/// The verdict `run verify` prints (and stores as a note): how many blocks were read back
/// and whether every one held what was written.
fn verdict_line(test: &str, tally: &iolab_integrity::Tally) -> String {
    let what = format!("{test}: {} blocks read back and checked", tally.checked);
    if tally.checked == 0 {
        format!("{test}: no block read back (--verify-mode none): nothing verified")
    } else if tally.failures == 0 {
        format!("{what}: all held what was written")
    } else {
        format!(
            "{what}: {} did not hold what was written (exit 3)",
            tally.failures
        )
    }
}
