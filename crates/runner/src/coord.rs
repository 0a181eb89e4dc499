//! The hooks a multi-process run (one rank of an MPI job) plugs into the run lifecycle:
//! the plan every rank runs, a barrier before every pass, the aggregate of a pass, and how
//! the run ended on every rank. An ordinary run has no coordinator and none of this runs.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use iolab_measure::{PassRecord, RunRecord};

use crate::status::RunError;

/// How the ranks of a multi-process run share their target and end their passes
/// (`--shared-file`, `--stonewall`; docs/mpi.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MpiMode {
    /// One file in the target directory, each rank its own region of it.
    pub shared_file: bool,
    /// The first rank to finish a pass ends the others' pass.
    pub stonewall: bool,
}

/// One rank's view of the other ranks of its run. Every call but [`Coordinator::rank`]
/// and [`Coordinator::host`] is collective: every rank makes the same calls in the same
/// order, and a call returns an error on every rank when one of them failed (it says
/// which). A call gives up (`RunError::Interrupted`) once `stop` is raised.
pub trait Coordinator: Send {
    /// This rank's number (0 stores the run).
    fn rank(&self) -> u32;
    /// How many ranks the run has.
    fn ranks(&self) -> u32;
    /// Rank 0's mode, once agreed (the shared file's path when there is one), recorded
    /// with the run.
    fn set_mode(&mut self, mode: MpiMode, shared_file: Option<&str>);
    /// During a `--stonewall` pass, on the thread that runs it (polled, never waits):
    /// whether another rank finished its pass first, so this one should stop.
    fn stonewalled(&mut self) -> bool;
    /// After this rank's `--stonewall` pass, before [`Coordinator::after_pass`]:
    /// `first` when it ended by itself (not stonewalled), so the others stop.
    fn pass_ended(&mut self, first: bool);
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
    /// Every rank's `what` (a workload's own tally, such as dbench's operation table), in
    /// rank order, on rank 0; the other ranks get an empty list.
    fn gather(
        &mut self,
        what: serde_json::Value,
        stop: &AtomicBool,
    ) -> Result<Vec<serde_json::Value>, RunError>;
    /// The end of this rank's job: tells the others how it ended and learns how theirs
    /// did (not collective when `stopped`: a signal may mean a rank is gone). Rank 0 adds
    /// what the ranks measured to `run`. An error: the run failed on some rank.
    fn end(
        &mut self,
        outcome: &Result<(), RunError>,
        run: Option<&mut RunRecord>,
        stopped: bool,
    ) -> Result<(), RunError>;
    /// The last call, after rank 0 stored and printed the run ([`crate::Finished::part`]):
    /// returns once every rank is here, so no rank exits (which ends an MPI job) before
    /// then. Not collective when `stopped`.
    fn after_store(&mut self, stopped: bool);
}

/// A host name as part of a file name: anything but ASCII letters, digits and '-' as '_'.
pub fn file_host(host: &str) -> String {
    host.chars()
        .map(|ch| match ch.is_ascii_alphanumeric() || ch == '-' {
            true => ch,
            false => '_',
        })
        .collect()
}

/// What a rank names its own file or directory in a shared target directory:
/// `iolab-mpi-rank<R>-<host>-<pid>`.
pub fn rank_name(c: &dyn Coordinator) -> String {
    format!(
        "iolab-mpi-rank{}-{}-{}",
        c.rank(),
        file_host(c.host()),
        std::process::id()
    )
}

/// Where a workload that runs in phases (metadata's create, stat, ...; dbench's replays)
/// meets the other ranks: the barrier before each phase and the phase's aggregate after it,
/// through the same [`Coordinator::before_pass`] and [`Coordinator::after_pass`] as a
/// block pass. Without a coordinator (an ordinary run) both return at once and a phase is
/// its own aggregate.
pub struct Phases<'a> {
    coord: Option<&'a mut (dyn Coordinator + 'static)>,
    stop: &'a AtomicBool,
}

impl<'a> Phases<'a> {
    pub fn new(coord: Option<&'a mut (dyn Coordinator + 'static)>, stop: &'a AtomicBool) -> Self {
        Phases { coord, stop }
    }

    /// The run's stop flag.
    pub fn stop(&self) -> &'a AtomicBool {
        self.stop
    }

    /// How many ranks run the phases (1 without a coordinator).
    pub fn ranks(&self) -> u32 {
        self.coord.as_ref().map_or(1, |c| c.ranks())
    }

    /// Before a phase: returns once every rank is here (an error when one failed, or on a
    /// stop).
    pub fn before(&mut self) -> Result<(), RunError> {
        match self.coord.as_deref_mut() {
            Some(c) => c.before_pass(self.stop),
            None => Ok(()),
        }
    }

    /// What a workload adds up itself, from every rank (see [`Coordinator::gather`]):
    /// every rank's `what` on rank 0, nothing on the others, and `what` alone without other
    /// ranks, so one merge serves both.
    pub fn gather(&mut self, what: serde_json::Value) -> Result<Vec<serde_json::Value>, RunError> {
        match self.coord.as_deref_mut() {
            Some(c) => c.gather(what, self.stop),
            None => Ok(vec![what]),
        }
    }

    /// After this rank's phase `test` (begun at `started`, timed in `pass.seconds`): the
    /// aggregate of every rank's phase, or `pass` itself without other ranks. A warm-up's
    /// aggregate is not kept in `env.mpi`.
    pub fn after(
        &mut self,
        test: &str,
        warm: bool,
        pass: PassRecord,
        started: Instant,
    ) -> Result<PassRecord, RunError> {
        match self.coord.as_deref_mut() {
            Some(c) => c.after_pass(test, warm, pass, started, Duration::ZERO, self.stop),
            None => Ok(pass),
        }
    }
}
