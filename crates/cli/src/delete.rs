//! `iolab delete RUN...` and `iolab prune --older-than AGE [filters]`: removing stored runs,
//! after a confirmation on a terminal or `--yes`; never any run that was not selected, and
//! never a run another iolab is still writing (`delete` refuses it, `prune` leaves it).

use iolab_runner::RunError;
use std::io::{BufRead, IsTerminal, Write};

use iolab_store::{RunFilter, RunListing, Store};

use crate::args::DbArgs;
use crate::args::{DeleteArgs, PruneArgs};

/// The result database, opened for writing; a missing file is an error (deleting from
/// nothing must not create a database).
fn open_for_writing(db: &DbArgs) -> Result<Store, RunError> {
    let path = db.db.clone().unwrap_or_else(iolab_store::default_db_path);
    if !iolab_store::is_postgres_url(&path) && !path.exists() {
        return Err(RunError::usage(format!(
            "no result database at {} (nothing deleted)",
            path.display()
        )));
    }
    Ok(Store::open(&path)?)
}

pub fn delete(args: DeleteArgs) -> Result<(), RunError> {
    let mut store = open_for_writing(&args.db)?;
    let all =
        store.list_runs_skipping(&RunFilter::default(), &mut crate::error::skipped_warning)?;
    let mut chosen = Vec::new();
    for given in &args.run_ids {
        let id = given.resolve(&store)?;
        let Some(run) = all.iter().find(|r| r.id == id) else {
            return Err(RunError::usage(format!(
                "run {id} is not stored in {} (nothing deleted)",
                store.path().display()
            )));
        };
        if let Some(pid) = store.writer(id)? {
            return Err(iolab_store::StoreError::RunBeingWritten {
                path: store.path().to_path_buf(),
                id,
                pid,
            }
            .into());
        }
        if !chosen.iter().any(|r: &RunListing| r.id == id) {
            chosen.push(run.clone());
        }
    }
    remove(&mut store, &chosen, args.yes, false)
}

pub fn prune(args: PruneArgs) -> Result<(), RunError> {
    let age = iolab_spec::parse_age("older-than", &args.older_than)?;
    let age = chrono::TimeDelta::from_std(age).expect("at most 100 years");
    let cutoff = chrono::Utc::now() - age;
    let mut store = open_for_writing(&args.db)?;
    let filter = crate::listing::filter(args.preset, args.target, args.label, args.study, None);
    let (mut chosen, mut left) = (Vec::new(), 0);
    for run in store.list_runs_skipping(&filter, &mut crate::error::skipped_warning)? {
        let started = chrono::DateTime::parse_from_rfc3339(&run.started_at).map_err(|e| {
            RunError::Failed(format!(
                "run {}: start time '{}' cannot be read ({e}); nothing deleted",
                run.id, run.started_at
            ))
        })?;
        if started < cutoff {
            match store.writer(run.id)? {
                Some(pid) => {
                    println!(
                        "Run {} is still being written by process {pid}: left alone.",
                        run.id
                    );
                    left += 1;
                }
                None => chosen.push(run),
            }
        }
    }
    if chosen.is_empty() && left > 0 {
        println!("Nothing deleted.");
        return Ok(());
    }
    if chosen.is_empty() {
        println!(
            "No runs match (started before {}).",
            cutoff.format("%Y-%m-%d %H:%M:%S UTC")
        );
        return Ok(());
    }
    remove(&mut store, &chosen, args.yes, true)
}

/// Lists `runs`, asks (or takes `--yes`), deletes exactly them; a run that another iolab
/// began writing meanwhile refuses the whole (`delete`) or is left out and said (`prune`).
fn remove(
    store: &mut Store,
    runs: &[RunListing],
    yes: bool,
    leave_running: bool,
) -> Result<(), RunError> {
    let rows: Vec<iolab_report::ListRow> = runs.iter().map(crate::listing::list_row).collect();
    let n = runs.len();
    let what = format!("{n} run{}", if n == 1 { "" } else { "s" });
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(RunError::usage(format!(
                "refusing to delete {what} without --yes: standard input is not a terminal \
                 to ask on (nothing deleted)"
            )));
        }
        print!("{}", iolab_report::render_list(&rows));
        eprint!(
            "Delete these {what} from {}? [y/N] ",
            store.path().display()
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| RunError::caused("cannot read the answer", e))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            println!("Nothing deleted.");
            return Ok(());
        }
    }
    let mut ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    let deleted = if leave_running {
        let (deleted, running) = store.delete_runs_but_running(&ids)?;
        for (id, pid) in &running {
            println!("Run {id} is still being written by process {pid}: left alone.");
        }
        ids.retain(|id| !running.iter().any(|(r, _)| r == id));
        deleted
    } else {
        store.delete_runs(&ids)?
    };
    if ids.is_empty() {
        println!("Nothing deleted.");
        return Ok(());
    }
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    println!(
        "Deleted {deleted} run{} ({}) from {}.",
        if deleted == 1 { "" } else { "s" },
        list.join(", "),
        store.path().display()
    );
    Ok(())
}
