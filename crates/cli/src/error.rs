//! What the commands that are not runs share: the result database they open, the run they
//! name (`RunRef`: `last` or an id), damaged runs skipped in listings, how a command ends
//! (`Outcome`: its `ExitStatus`, its error printed), and a quiet end when stdout's reader
//! has gone away. Their errors are the runner's `RunError` (one exit status for every
//! command).

use std::io::Write;
use std::str::FromStr;

use iolab_runner::{ExitStatus, RunError};
use iolab_store::{default_db_path, Store};

use crate::args::DbArgs;

/// The result database of a command that reads it (results, show, report, compare,
/// history): opened read-only, so these work on a read-only mount and never change the file.
pub fn open_store(db: &DbArgs) -> Result<Store, RunError> {
    let path = db.db.clone().unwrap_or_else(default_db_path);
    Ok(Store::open_read_only(&path)?)
}

/// A stored run as a command names it: `last` (the newest) or its id as `iolab results`
/// lists it. Parsed with the command line (a RUN_ID that is neither is refused there, exit
/// 2); `last` in an empty database is refused when it is resolved (exit 2, like any run the
/// database does not hold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunRef {
    Last,
    Id(i64),
}

/// A RUN_ID that is neither `last` nor a number.
#[derive(Debug)]
pub struct BadRunId(String);

impl std::fmt::Display for BadRunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "run id '{}' is not a number (see `iolab results`)",
            self.0
        )
    }
}

impl std::error::Error for BadRunId {}

impl FromStr for RunRef {
    type Err = BadRunId;

    fn from_str(s: &str) -> Result<Self, BadRunId> {
        if s == "last" {
            return Ok(RunRef::Last);
        }
        s.parse()
            .map(RunRef::Id)
            .map_err(|_| BadRunId(s.to_string()))
    }
}

impl RunRef {
    /// The run's id in `store`.
    pub fn resolve(self, store: &Store) -> Result<i64, RunError> {
        match self {
            RunRef::Id(id) => Ok(id),
            RunRef::Last => store.latest_run_id()?.ok_or_else(|| {
                RunError::usage(format!(
                    "run 'last' not found: no runs are stored in {}",
                    store.path().display()
                ))
            }),
        }
    }
}

/// How a command ended, as the process's exit status; an error is printed on the way
/// (`iolab: error: ...`, its status from [`RunError::status`]).
pub trait Outcome {
    fn status(self) -> ExitStatus;
}

impl Outcome for Result<(), RunError> {
    fn status(self) -> ExitStatus {
        self.map(|()| ExitStatus::Ok).status()
    }
}

impl Outcome for Result<ExitStatus, RunError> {
    fn status(self) -> ExitStatus {
        match self {
            Ok(status) => status,
            Err(e) => {
                // A closed stderr must not turn the refusal into a panic.
                let _ = writeln!(std::io::stderr(), "iolab: error: {e}");
                e.status()
            }
        }
    }
}

/// The runs matching `filter`, with their tests' summaries but no passes (what `history`
/// shows); a run whose stored rows are damaged is left out with a warning naming it, so
/// one bad row does not break a listing of the whole database.
pub fn load_skipping_damaged(
    store: &Store,
    filter: &iolab_store::RunFilter,
) -> Result<Vec<iolab_measure::RunRecord>, RunError> {
    Ok(store.load_run_summaries_skipping(filter, &mut skipped_warning)?)
}

/// The warning for a run left out of a listing because its stored record is damaged.
pub fn skipped_warning(id: i64, e: iolab_store::StoreError) {
    eprintln!("iolab: warning: run {id} skipped, its stored record cannot be read: {e}");
}

// ---------------------------------------------------------------------------------------------
// A reader that went away: `iolab results | head -1`.

/// Whether a panic is the standard library's "failed printing to stdout" (or stderr) with
/// EPIPE: the reader has gone away (`iolab run ... 2>&1 | head -1`). Every `print!` and
/// `eprint!` in the binary ends this way, so this is the one place that handles it.
fn is_broken_pipe(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    (text.starts_with("failed printing to stdout") || text.starts_with("failed printing to stderr"))
        && text.ends_with(&format!("(os error {})", libc::EPIPE))
}

/// Installs a panic hook that says nothing about a broken stdout pipe (and defers to the
/// default hook for every other panic). Rust ignores SIGPIPE, so a write to a closed pipe
/// fails with EPIPE and `print!` panics; `main` catches that panic after it has unwound
/// (so files a run made are removed on the way) and ends quietly with [`end_after_panic`].
pub fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe(info.payload()) {
            default(info);
        }
    }));
}

/// The end of a command that panicked. A broken stdout pipe ends the process the way it
/// ends `cat` or `ls`: killed by SIGPIPE, with nothing printed (the shell's status is 141).
/// Any other panic goes on as a panic (exit 101, the hook has printed it).
pub fn end_after_panic(payload: Box<dyn std::any::Any + Send>) -> i32 {
    if !is_broken_pipe(payload.as_ref()) {
        std::panic::resume_unwind(payload);
    }
    // SAFETY: restoring the default disposition of SIGPIPE and raising it has no
    // memory-safety preconditions; the process ends here.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    128 + libc::SIGPIPE
}
