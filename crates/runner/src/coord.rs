//! The hooks a multi-process run (one rank of an MPI job) plugs into the run lifecycle:
//! the plan every rank runs, a barrier before every pass, the aggregate of a pass, and how
//! the run ended on every rank. An ordinary run has no coordinator and none of this runs.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use iolab_measure::{PassRecord, RunRecord};

use crate::status::RunError;

/// One rank's view of the other ranks of its run. Every call but [`Coordinator::rank`]
/// and [`Coordinator::host`] is collective: every rank makes the same calls in the same
/// order, and a call returns an error on every rank when one of them failed (it says
/// which). A call gives up (`RunError::Interrupted`) once `stop` is raised.
pub trait Coordinator {
    /// This rank's number (0 stores the run).
    fn rank(&self) -> u32;
    /// The host name this rank runs on.
    fn host(&self) -> &str;
    /// The plan every rank runs: rank 0's `plan` (JSON) in place of this rank's.
    fn agree(
        &mut self,
        plan: serde_json::Value,
        stop: &AtomicBool,
    ) -> Result<serde_json::Value, RunError>;
    /// Before every pass (warm-ups too): returns once every rank is here.
    fn before_pass(&mut self, stop: &AtomicBool) -> Result<(), RunError>;
    /// After a pass that [`Coordinator::before_pass`] released: `pass` is this rank's,
    /// `started` when it began (before its `ramp`). Returns the aggregate of every rank's
    /// pass, which every rank records in its place.
    fn after_pass(
        &mut self,
        test: &str,
        warm: bool,
        pass: PassRecord,
        started: Instant,
        ramp: Duration,
        stop: &AtomicBool,
    ) -> Result<PassRecord, RunError>;
    /// The end of this rank's job: tells the others how it ended and learns how theirs
    /// did (not collective when `stopped`: a signal may mean a rank is gone). Rank 0 adds
    /// what the ranks measured to `run`. An error: the run failed on some rank.
    fn end(
        &mut self,
        outcome: &Result<(), RunError>,
        run: Option<&mut RunRecord>,
        stopped: bool,
    ) -> Result<(), RunError>;
    /// The last call, after rank 0 stored the run: returns once every rank is here, so
    /// no rank exits (which ends an MPI job) before the run is stored. Not collective when
    /// `stopped`.
    fn after_store(&mut self, stopped: bool);
}
