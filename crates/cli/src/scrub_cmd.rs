//! `iolab run scrub-test`: the scrub test (iolab-workloads' `scrub`) on a loop testbed it builds
//! (`--testbed`) or on an existing redundant filesystem (`--target DIR`, members corrupted
//! only with `--allow-corrupt-members`). Stored like the other workloads; exits 3 when the
//! filesystem did not detect, repair or report what it should have (docs/scrub.md).

use std::path::Path;
use std::time::Duration;

use iolab_measure::TargetInfo;
use iolab_spec::{parse_size, EngineKind};
use iolab_workloads::scrub::{self, Layout, ScrubConfig, ScrubError, ScrubTarget};

use crate::args::RunArgs;
use crate::commands::CliError;
use crate::signals;
use crate::verify_cmd::EXIT_INTEGRITY;
use crate::workloads::{drive_target, settings};

/// The data is intact, but the filesystem's scrub report disagrees with what was injected.
pub const EXIT_MISCOUNTED: i32 = 4;

fn config(a: &RunArgs) -> Result<ScrubConfig, CliError> {
    let mut cfg = ScrubConfig::default();
    if let Some(s) = &a.dataset_size {
        cfg.dataset_size = parse_size("dataset-size", s)?;
    }
    if let Some(p) = a.small_files {
        cfg.small_files_pct = p;
    }
    if let Some(n) = a.corrupt {
        cfg.corrupt = n;
    }
    if let Some(s) = &a.corrupt_size {
        cfg.corrupt_size = parse_size("corrupt-size", s)?;
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

fn scrub_error(e: ScrubError) -> CliError {
    match e {
        ScrubError::Invalid(_) => CliError::Usage(e.to_string()),
        ScrubError::Interrupted => CliError::Interrupted,
        other => CliError::Failed(other.to_string()),
    }
}

pub fn run(a: RunArgs) -> Result<i32, CliError> {
    let cfg = config(&a)?;
    scrub::check_config(&cfg).map_err(scrub_error)?;
    let device_size = a
        .device_size
        .clone()
        .unwrap_or_else(|| scrub::DEFAULT_DEVICE_SIZE.to_string());
    if a.device_size.is_some() && a.testbed.is_none() {
        return Err(CliError::Usage(
            "--device-size applies with --testbed".into(),
        ));
    }
    // The testbed must exist before the run is stored (its mount is the target), so the
    // signal handlers are installed before the build: a Ctrl-C then stops the build, which
    // removes what it made.
    let stop = signals::install().map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    let (testbed, target) = match &a.testbed {
        Some(name) => {
            if a.target != Path::new(".") {
                return Err(CliError::Usage(
                    "give --testbed or --target, not both".into(),
                ));
            }
            let layout = Layout::parse(name).ok_or_else(|| {
                CliError::Usage(format!(
                    "--testbed '{name}': expected {}",
                    Layout::ALL.map(Layout::name).join(", ")
                ))
            })?;
            if !a.quiet {
                eprintln!(
                    "building testbed {} ({device_size} per device)",
                    layout.name()
                );
            }
            let (tb, target) =
                scrub::build_testbed(layout, &device_size, &cfg, &stop).map_err(scrub_error)?;
            (Some(tb), target)
        }
        None => {
            let dir = std::path::absolute(&a.target).unwrap_or_else(|_| a.target.clone());
            (None, ScrubTarget::discover(&dir).map_err(scrub_error)?)
        }
    };
    // Refusals (consent, root, sizes, tools) come before a run is started and stored.
    scrub::preflight(&target, &cfg).map_err(scrub_error)?;
    let info = TargetInfo {
        path: target.work_dir.to_string_lossy().into_owned(),
        kind: "dir".into(),
        io_path: target.work_dir.to_string_lossy().into_owned(),
        fs_type: target.fs_name().into(),
        size: cfg.dataset_size,
    };
    let s = settings(
        cfg.dataset_size,
        Duration::ZERO,
        1,
        EngineKind::Psync,
        false,
    );
    let mut verdict = None;
    let json_to_stdout = a.json.as_deref() == Some("-");
    let work_dir = target.work_dir.clone();
    let code = drive_target(
        &a,
        info,
        &work_dir,
        s,
        Box::new(|stop, progress| {
            let report = match scrub::run(&target, &cfg, stop, &mut |label, detail| {
                progress.phase(label, detail)
            }) {
                Ok(r) => r,
                // Stored as an incomplete run; drive_target's conclusion exits 130.
                Err(ScrubError::Interrupted) => return Ok(Vec::new()),
                Err(e) => return Err(e.to_string()),
            };
            let table = report.render();
            if json_to_stdout {
                eprint!("{table}");
            } else {
                print!("{table}");
            }
            verdict = Some(report.exit_code());
            Ok(report.tests())
        }),
    );
    if let Some(tb) = testbed {
        if let Err(e) = tb.teardown() {
            eprintln!("iolab: {e}");
        }
    }
    let code = code?;
    match verdict {
        Some(c) if c == EXIT_INTEGRITY || c == EXIT_MISCOUNTED => Ok(c),
        _ => Ok(code),
    }
}
