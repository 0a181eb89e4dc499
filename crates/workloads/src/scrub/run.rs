//! `iolab run scrub-test`: the scrub test on a loop testbed it builds
//! (`--testbed`) or on an existing redundant filesystem (`--target DIR`, members corrupted
//! only with `--allow-corrupt-members`). Stored like the other workloads; exits 3 when the
//! filesystem did not detect, repair or report what it should have (docs/scrub.md), 4 when
//! only its counts are wrong.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::scrub::{self, Layout, ScrubConfig, ScrubError, ScrubTarget};
use clap::Args;
use iolab_measure::TargetInfo;
use iolab_runner::options::opt_size;
use iolab_runner::{
    plain_settings, CommonArgs, Def, ExitStatus, Job, RunContext, RunError, RunStart, UsageError,
};

/// The scrub test's entry in the registry.
/// What the scrub test says of itself to the crates below iolab-workloads
/// (`iolab_measure::workload`): bytes, no MPI, the generic header and fixes, and tests whose
/// `extra` holds its verdict (`problems`, `miscounts`), which warnings report.
pub struct Info;

/// The scrub test's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl iolab_measure::workload::WorkloadInfo for Info {
    fn about(&self) -> iolab_measure::workload::About {
        iolab_measure::workload::About {
            name: "scrub-test",
            counts: iolab_measure::workload::Counts::Bytes,
            mpi: None,
        }
    }

    fn scrub_verdict(
        &self,
        t: &iolab_measure::TestRecord,
    ) -> Option<iolab_measure::workload::ScrubVerdict> {
        let x = super::report::ScrubRead::of(t)?;
        Some(iolab_measure::workload::ScrubVerdict {
            problems: x.problems,
            miscounts: x.miscounts,
        })
    }

    fn injection(
        &self,
        t: &iolab_measure::TestRecord,
    ) -> Option<iolab_measure::workload::Injection> {
        let x = super::report::ScrubRead::of(t)?;
        Some(iolab_measure::workload::Injection {
            injected: x.injected?,
            passed: x.passed,
            expected: x.expected.into(),
            reported: x.reported.into(),
        })
    }
}

pub static WORKLOAD: Def<ScrubOptions> = Def::new(
    &["scrub-test"],
    "corrupt known blocks on one member of a btrfs raid1/raid5 or zfs mirror/raidz (--testbed \
     LAYOUT, or --target DIR with --allow-corrupt-members), run the filesystem's scrub, compare \
     detected/repaired/uncorrectable with what was injected, verify every block; --corrupt N \
     --corrupt-size --all-copies --foreground; exit 3 if data was not repaired, 4 if only the \
     counts are wrong",
    plan,
    &INFO,
);

/// Options of `iolab run scrub-test`.
#[derive(Args, Debug, Clone)]
pub struct ScrubOptions {
    /// Build this loop testbed, run on it and remove it (root): btrfs-raid1, btrfs-raid5,
    /// zfs-mirror, zfs-raidz. Without it, --target must be a directory on a redundant btrfs
    /// or zfs.
    #[arg(long, value_name = "LAYOUT")]
    pub testbed: Option<Layout>,
    /// Size of each loop device; requires --testbed (default 512MiB).
    #[arg(long, value_name = "SIZE")]
    pub device_size: Option<String>,
    /// Bytes of verified blocks to write (default 128MiB).
    #[arg(long, value_name = "SIZE")]
    pub dataset_size: Option<String>,
    /// Percent of the dataset in small files of 4-64 KiB (default 25; 0 or 100 for one
    /// class only, e.g. to compare their scrub rates).
    #[arg(long, value_name = "PCT")]
    pub small_files: Option<u8>,
    /// Corruptions to inject on one member (default 32).
    #[arg(long, value_name = "N")]
    pub corrupt: Option<u32>,
    /// Bytes per corruption, a multiple of 4KiB up to 64KiB (default 4KiB).
    #[arg(long, value_name = "SIZE")]
    pub corrupt_size: Option<String>,
    /// Corrupt the same data on every member holding it (must be uncorrectable).
    #[arg(long)]
    pub all_copies: bool,
    /// Measure a sequential reader on other data during the scrub against the same reader
    /// without one.
    #[arg(long)]
    pub foreground: bool,
    /// With --target on an existing filesystem, allow overwriting blocks of iolab's own
    /// files directly on its member devices.
    #[arg(long)]
    pub allow_corrupt_members: bool,
    /// Seed for file sizes and the blocks chosen (printed in the results).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

struct ScrubJob {
    cfg: ScrubConfig,
    layout: Option<Layout>,
    device_size: String,
}

fn plan(_name: &str, a: ScrubOptions, c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let cfg = config(&a)?;
    scrub::check_config(&cfg).map_err(|e| UsageError::general(e.to_string()))?;
    if a.device_size.is_some() && a.testbed.is_none() {
        return Err(UsageError::option(
            "device-size",
            "--device-size applies with --testbed",
        ));
    }
    let layout = match &a.testbed {
        Some(layout) => {
            if c.target != Path::new(".") {
                return Err(UsageError::option(
                    "testbed",
                    "give --testbed or --target, not both",
                ));
            }
            Some(*layout)
        }
        None => None,
    };
    Ok(Box::new(ScrubJob {
        cfg,
        layout,
        device_size: a
            .device_size
            .clone()
            .unwrap_or_else(|| scrub::DEFAULT_DEVICE_SIZE.to_string()),
    }))
}

fn config(a: &ScrubOptions) -> Result<ScrubConfig, UsageError> {
    let mut cfg = ScrubConfig::default();
    if let Some(s) = opt_size("dataset-size", &a.dataset_size)? {
        cfg.dataset_size = s;
    }
    if let Some(p) = a.small_files {
        cfg.small_files_pct = p;
    }
    if let Some(n) = a.corrupt {
        cfg.corrupt = n;
    }
    if let Some(s) = opt_size("corrupt-size", &a.corrupt_size)? {
        cfg.corrupt_size = s;
    }
    cfg.all_copies = a.all_copies;
    cfg.allow_corrupt_members = a.allow_corrupt_members;
    cfg.seed = a.seed;
    if a.foreground {
        // Large enough to keep reading while a small dataset is scrubbed.
        cfg.foreground = Some((cfg.dataset_size / 2).max(32 << 20));
    }
    Ok(cfg)
}

fn scrub_error(e: ScrubError) -> RunError {
    match e {
        ScrubError::Invalid(_) => RunError::usage(e.to_string()),
        ScrubError::Interrupted => RunError::Interrupted,
        other => RunError::from_error(other),
    }
}

impl Job for ScrubJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let ScrubJob {
            cfg,
            layout,
            device_size,
        } = *self;
        // The testbed must exist before the run is started (its mount is the target); a
        // Ctrl-C during the build stops it, and the build removes what it made.
        let (testbed, target) = match layout {
            Some(layout) => {
                if !ctx.common.quiet {
                    eprintln!(
                        "building testbed {} ({device_size} per device)",
                        layout.name()
                    );
                }
                let (tb, target) = scrub::build_testbed(layout, &device_size, &cfg, &ctx.stop)
                    .map_err(scrub_error)?;
                (Some(tb), target)
            }
            None => (
                None,
                ScrubTarget::discover(&ctx.common.target_abs()).map_err(scrub_error)?,
            ),
        };
        let outcome = run_on(&cfg, &target, ctx);
        if let Some(tb) = testbed {
            if let Err(e) = tb.teardown() {
                eprintln!("iolab: {e}");
            }
        }
        outcome
    }
}

fn run_on(cfg: &ScrubConfig, target: &ScrubTarget, ctx: &mut RunContext) -> Result<(), RunError> {
    // Refusals (consent, root, sizes, tools) come before a run is started and stored.
    scrub::preflight(target, cfg).map_err(scrub_error)?;
    let work_dir: PathBuf = target.work_dir.clone();
    let data = cfg.dataset_size.saturating_add(cfg.foreground.unwrap_or(0));
    iolab_runner::space::check(
        &work_dir,
        iolab_runner::space::Need::new("dataset-size", data, 0),
    )?;
    ctx.start(RunStart {
        preset: "scrub-test".into(),
        workload: "scrub-test".into(),
        target: TargetInfo {
            path: work_dir.to_string_lossy().into_owned(),
            kind: iolab_measure::TargetKind::Dir,
            io_path: work_dir.to_string_lossy().into_owned(),
            fs_type: target.fs_name().into(),
            size: cfg.dataset_size,
        },
        settings: plain_settings(cfg.dataset_size, Duration::ZERO, 1, false),
        notes: Vec::new(),
        env_path: work_dir,
    })?;
    let report = {
        let progress = &ctx.progress;
        match scrub::run(target, cfg, &ctx.stop, &mut |label, detail| {
            progress.phase(label, detail)
        }) {
            Ok(r) => r,
            // Stored as an incomplete run: the conclusion exits 130.
            Err(ScrubError::Interrupted) => return Ok(()),
            Err(e) => return Err(RunError::from_error(e)),
        }
    };
    let table = report.render();
    if ctx.common.json_to_stdout() {
        eprint!("{table}");
    } else {
        print!("{table}");
    }
    match report.exit_code() {
        3 => ctx.raise(ExitStatus::Integrity),
        4 => ctx.raise(ExitStatus::Miscounted),
        _ => {}
    }
    ctx.add_tests(report.tests())
}
