//! `iolab study` and `iolab cleanup`: the study file is read and checked by iolab-study,
//! its workloads' options by `iolab run`'s own registry; iolab-study then builds, runs
//! and compares.

use iolab_runner::RunError;
use std::path::Path;

use iolab_study::{parse, Study, Workload, WorkloadProblem};
use iolab_testbed::{Kind, StateFile};

use crate::args::{CleanupArgs, StudyArgs};

/// Checks a workload's options with `iolab run`'s own registry.
fn check_workload(w: &Workload) -> Result<(), WorkloadProblem> {
    iolab_study::check_workload(&crate::run_cmd::registry(), w)
}

/// The most bytes a study file may have.
pub const MAX_STUDY_BYTES: u64 = 1 << 20;

fn load(file: &Path) -> Result<Study, RunError> {
    let bytes = iolab_sys::input::read_input(file, MAX_STUDY_BYTES)
        .map_err(|e| RunError::usage(format!("{}: {e}", file.display())))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        RunError::usage(format!(
            "{}: not UTF-8 text (a study file is TOML)",
            file.display()
        ))
    })?;
    parse(&file.display().to_string(), &text, &mut check_workload)
        .map_err(|e| RunError::usage(e.to_string()))
}

pub fn study(args: StudyArgs) -> Result<(), RunError> {
    if args.list_testbeds {
        print!("{}", iolab_study::plan::catalogue());
        return Ok(());
    }
    let file = args.file.clone().expect("clap requires FILE");
    let mut study = load(&file)?;
    if let Some(b) = &args.baseline {
        study.baseline = study
            .configs
            .iter()
            .position(|c| &c.label == b)
            .ok_or_else(|| {
                RunError::usage(format!(
                    "--baseline '{b}': no configuration of {} has that label",
                    file.display()
                ))
            })?;
    }
    if args.interleave {
        study.order = iolab_study::Order::Rotated;
    }
    let consent = iolab_testbed::DeviceConsent {
        allowed: args.allow_destroy_device.clone(),
        wipe: args.wipe,
    };
    study
        .use_devices(&args.device, &consent, !args.dry_run)
        .map_err(|e| RunError::usage(e.to_string()))?;
    if args.dry_run {
        print!("{}", iolab_study::plan::dry_run_text(&study));
        print!(
            "{}",
            iolab_study::plan::estimate_text(&study, &crate::run_cmd::registry())
        );
        return Ok(());
    }
    let needs_root = study.configs.iter().any(|c| c.testbed.kind != Kind::Dir) || study.drop_caches;
    if needs_root && !iolab_sys::is_root() {
        return Err(RunError::usage(format!(
            "{}: this study builds loop or device testbeds{}, which needs root; run it with sudo \
             (or check it with --dry-run)",
            file.display(),
            if study.drop_caches {
                " or drops the page cache"
            } else {
                ""
            }
        )));
    }
    // The user's devices are checked before anything is written (exit 2 when refused).
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let used: Vec<_> = study
        .configs
        .iter()
        .flat_map(|c| c.testbed.device_paths())
        .map(|p| canon(p))
        .collect();
    for a in &args.allow_destroy_device {
        if !used.contains(&canon(a)) {
            return Err(RunError::usage(format!(
                "--allow-destroy-device {}: not a device of {} (a typo would leave the device \
                 you meant unnamed)",
                a.display(),
                file.display()
            )));
        }
    }
    for c in study
        .configs
        .iter()
        .filter(|c| c.testbed.kind == Kind::Device)
    {
        iolab_testbed::check_devices(&c.testbed)
            .map_err(|e| RunError::usage(format!("{}: {}: {e}", file.display(), c.label)))?;
    }
    // What is about to be formatted, once per device, for the record of the terminal.
    let mut shown: Vec<std::path::PathBuf> = Vec::new();
    for p in &used {
        if !shown.contains(p) {
            eprintln!(
                "iolab: this study formats {}",
                iolab_testbed::describe_device(p)
            );
            shown.push(p.clone());
        }
    }
    let opts = iolab_study::run::RunOptions {
        db: args
            .db
            .db
            .clone()
            .unwrap_or_else(iolab_store::default_db_path),
        db_given: args.db.db.is_some(),
        reports: args
            .html
            .iter()
            .map(|p| {
                (
                    &iolab_report::html::Html as &dyn iolab_report::formats::Format,
                    p.clone(),
                )
            })
            .collect(),
        until_decided: args.until_decided.then(|| iolab_study::run::UntilDecided {
            budget: args.budget,
            margin_pct: args.margin.unwrap_or(iolab_report::set::DEFAULT_MARGIN_PCT),
            max_rounds: iolab_study::run::MAX_ROUNDS,
        }),
    };
    iolab_study::run::execute(&study, &opts)
}

pub fn cleanup(args: CleanupArgs) -> Result<(), RunError> {
    let dir = match args.state_dir {
        Some(d) => d,
        None => StateFile::default_dir().map_err(RunError::from_error)?,
    };
    if !dir.exists() {
        println!("nothing to clean up: {} does not exist", dir.display());
        return Ok(());
    }
    let report = iolab_testbed::cleanup_all(&dir);
    print!("{report}");
    for (path, pid) in &report.live {
        println!(
            "  left alone: {} (its study, pid {}, is still running)",
            path.display(),
            pid.map_or("?".into(), |p| p.to_string())
        );
    }
    let runs = iolab_testbed::runstate::cleanup_runs(&dir);
    print_run_cleanup(&runs);
    let failures = report.failures.len() + runs.failures.len();
    if !report.untrusted.is_empty() {
        Err(RunError::Failed(format!(
            "{} state file(s) or directories not trusted and left alone (listed above)",
            report.untrusted.len()
        )))
    } else if failures == 0 {
        Ok(())
    } else {
        Err(RunError::Failed(format!(
            "{failures} resource(s) could not be removed (listed above); they stay recorded \
             in {}",
            dir.display()
        )))
    }
}

/// What `iolab cleanup` did about killed runs (`iolab run`) besides the testbeds.
fn print_run_cleanup(r: &iolab_testbed::runstate::RunCleanup) {
    println!(
        "{} run state file(s): {} cleaned, {} of running runs, {} skipped",
        r.examined.len(),
        r.cleaned.len(),
        r.live.len(),
        r.skipped.len()
    );
    for p in &r.removed {
        println!("  removed {p}");
    }
    for (path, pid) in &r.live {
        println!(
            "  left alone: {} (its run, pid {}, is still going)",
            path.display(),
            pid.map_or("?".into(), |p| p.to_string())
        );
    }
    for (path, why) in &r.skipped {
        println!("  skipped {}: {why}", path.display());
    }
    for f in &r.failures {
        println!("  FAILED: {f}");
    }
}
