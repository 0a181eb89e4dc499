//! `iolab push --to URL [RUN...|--label L|--all]`: copies stored runs into another store
//! (a PostgreSQL database many hosts share, or a file). Each run goes in one transaction
//! and only if no run of its uuid is there already, so pushing twice stores once and an
//! interrupted push leaves no half run. A run still being written is not pushed: named by
//! id it is refused (nothing is pushed), found by --label or --all it is left for the next
//! push and said.

use std::io::{IsTerminal, Write};

use iolab_runner::RunError;
use iolab_store::{RunFilter, Store};

use crate::args::PushArgs;
use crate::error::open_store;

pub fn push(a: PushArgs) -> Result<(), RunError> {
    let src = open_store(&a.db)?;
    let explicit = !a.all && a.label.is_none();
    let ids: Vec<i64> = if explicit {
        let mut ids = Vec::new();
        for given in &a.run_ids {
            let id = given.resolve(&src)?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    } else {
        let filter = RunFilter {
            label: a.label.clone(),
            ..RunFilter::default()
        };
        let listed = src.list_runs_skipping(&filter, &mut crate::error::skipped_warning)?;
        if listed.is_empty() {
            let what = match &a.label {
                Some(l) => format!("no stored run carries label '{l}'"),
                None => "no runs are stored".to_string(),
            };
            return Err(RunError::usage(format!(
                "{what} in {} (nothing pushed)",
                src.path().display()
            )));
        }
        listed.iter().map(|l| l.id).collect()
    };
    // Which runs go: a run being written is refused (named) or left (found).
    let mut chosen = Vec::new();
    let mut running = Vec::new();
    for &id in &ids {
        if explicit {
            // An id that is not stored is the caller's mistake: said before anything goes.
            src.load_run_summaries(id).map_err(|e| match e {
                iolab_store::StoreError::RunNotFound { .. } => RunError::usage(format!(
                    "run {id} is not stored in {} (nothing pushed)",
                    src.path().display()
                )),
                e => e.into(),
            })?;
        }
        match src.writer(id)? {
            Some(pid) if explicit => {
                return Err(RunError::usage(format!(
                    "run {id} is still being written by process {pid}: push it once it has \
                     ended (nothing pushed)"
                )))
            }
            Some(pid) => running.push((id, pid)),
            None => chosen.push(id),
        }
    }
    if explicit && chosen.is_empty() {
        return Err(RunError::usage(format!(
            "no runs are stored in {} (nothing pushed)",
            src.path().display()
        )));
    }
    let mut dst = Store::open(&a.to)?;
    let dest = dst.path().display().to_string();
    let progress = !a.quiet && std::io::stderr().is_terminal();
    let (mut new, mut there) = (0usize, 0usize);
    for (i, &id) in chosen.iter().enumerate() {
        // A run already there is not loaded whole (its passes are most of its bytes).
        let uuid = src.load_run_summaries(id)?.uuid;
        let stored = match dst.run_by_uuid(&uuid)? {
            Some(_) => None,
            None => dst.import_run(&src.load_run(id)?)?,
        };
        match stored {
            Some(_) => new += 1,
            None => there += 1,
        }
        if progress {
            eprint!("\riolab: pushing to {dest}: {}/{}", i + 1, chosen.len());
            let _ = std::io::stderr().flush();
        }
    }
    if progress {
        eprintln!();
    }
    if !a.quiet {
        let runs = |n: usize| format!("{n} run{}", if n == 1 { "" } else { "s" });
        println!(
            "Pushed {} to {dest}; {} already there.",
            runs(new),
            runs(there)
        );
        for (id, pid) in &running {
            println!(
                "Run {id} is still being written by process {pid}: not pushed (push again \
                 once it has ended)."
            );
        }
    }
    Ok(())
}
