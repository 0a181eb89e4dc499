//! `iolab results`: the stored runs as a table, JSON or CSV.

use iolab_runner::RunError;
use iolab_store::{RunFilter, RunListing};

use crate::args::ResultsArgs;
use crate::error::open_store;

/// A run of the listing as the terminal table shows it.
pub fn list_row(r: &RunListing) -> iolab_report::ListRow {
    iolab_report::ListRow {
        id: r.id,
        started_at: r.started_at.clone(),
        preset: r.preset.clone(),
        target: r.target.clone(),
        fs_type: r.fs_type.clone(),
        label: r.label.clone(),
        config: r.config_label.clone(),
        complete: r.complete,
        tests: r.tests,
    }
}

/// The filter of `results` and `prune`; a target path is made absolute, as runs record it.
pub fn filter(
    preset: Option<String>,
    target: Option<String>,
    label: Option<String>,
    study: Option<String>,
    limit: Option<usize>,
) -> RunFilter {
    RunFilter {
        preset,
        target: target.map(|t| {
            std::path::absolute(&t)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or(t)
        }),
        label,
        study,
        host: None,
        limit,
    }
}

pub fn results(args: ResultsArgs) -> Result<(), RunError> {
    let store = open_store(&args.db)?;
    let filter = RunFilter {
        host: args.host,
        ..filter(args.preset, args.target, args.label, args.study, args.limit)
    };
    let runs = store.list_runs_skipping(&filter, &mut crate::error::skipped_warning)?;
    if args.json {
        let doc = serde_json::to_string_pretty(&runs).expect("a listing always serialises");
        println!("{doc}");
    } else if args.csv {
        print!("{}", csv(&runs));
    } else if runs.is_empty() {
        match store.count_runs()? {
            0 => println!("No runs stored in {}.", store.path().display()),
            n => println!(
                "No runs match ({n} run{} stored in {}).",
                if n == 1 { "" } else { "s" },
                store.path().display()
            ),
        }
    } else {
        let rows: Vec<_> = runs.iter().map(list_row).collect();
        print!("{}", iolab_report::render_list(&rows));
    }
    Ok(())
}

/// The CSV columns of `results --csv`, in order (the JSON keys are the same).
const COLUMNS: [&str; 12] = [
    "id",
    "started_at",
    "preset",
    "workload",
    "target",
    "fs_type",
    "label",
    "complete",
    "tests",
    "study",
    "config_label",
    "host",
];

fn csv(runs: &[RunListing]) -> String {
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    let rows = runs.iter().map(|r| {
        vec![
            r.id.to_string(),
            r.started_at.clone(),
            r.preset.clone(),
            r.workload.clone(),
            r.target.clone(),
            r.fs_type.clone(),
            opt(&r.label),
            r.complete.to_string(),
            r.tests.to_string(),
            opt(&r.study),
            opt(&r.config_label),
            opt(&r.host),
        ]
    });
    iolab_report::csv::table(&COLUMNS, rows)
}
