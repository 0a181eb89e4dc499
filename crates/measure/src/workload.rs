//! What a workload says about itself to the crates below `iolab-workloads` (statistics,
//! reports, the runner): what it counts, whether and how it runs under MPI, the facts its
//! header shows, the fix each warning gets for it, and how its tests' `extra` reads back.
//!
//! Each workload fills in a [`WorkloadInfo`] next to its code; the binary installs the
//! registry's catalogue once ([`install`]) and the lower crates ask it about a stored run
//! ([`of_run`]) or test ([`of_test`]). Nothing below `iolab-workloads` names a workload:
//! a run whose workload the catalogue does not know (or a process that installed none)
//! gets the generic answers (bytes, block-shaped facts, generic fixes).

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::{RunRecord, TestRecord, WarningCode};

/// What a workload's rate counts: bytes (MB/s is the headline) or operations (ops/s is;
/// its MB/s is a by-product).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    Bytes,
    Operations,
}

/// What one rank of an MPI run times, and so how the ranks' passes add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiPass {
    /// A timed pass of bytes (the block presets): MB/s.
    Pass,
    /// A phase of operations (metadata): ops/s.
    Phase,
    /// A replay whose measured part moves bytes (dbench): MB/s.
    Replay,
}

/// The picture a report draws of a run beside its tables, in the layout of the tool the
/// preset imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// CrystalDiskMark's tiles: read and write of each test side by side.
    CrystalDiskMark,
    /// ATTO's bars: write and read rates over the block sizes.
    Atto,
}

/// What a report's header has worked out already, for a workload's own facts.
#[derive(Debug, Clone)]
pub struct HeaderParts {
    /// The passes as counted: `3 × 5s measured (+1 warm-up × 5s)`.
    pub passes: String,
    /// The most passes any test measured (what was asked when none measured any).
    pub most_passes: usize,
}

/// What a warning's fix may depend on beyond the run.
#[derive(Debug, Clone, Default)]
pub struct FixContext {
    /// `IDLE_RECLAIM`: the shortest idle time after which memory is paged out.
    pub idle_reclaim_after: Option<Duration>,
    /// `FEW_IOS`: the largest block size of the tests concerned, as text.
    pub block: String,
    /// `FEW_IOS`: the bytes 100 I/Os of that block size need, as text.
    pub need: String,
    /// `FEW_IOS`: a pass ended at its byte limit, not at its duration.
    pub byte_limited: bool,
}

/// What every workload must say of itself (a struct, so that none is left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct About {
    /// The family name runs store in `RunRecord::workload` (`block` for the presets).
    pub name: &'static str,
    /// What its rate counts.
    pub counts: Counts,
    /// How it runs under MPI; `None`: it refuses to.
    pub mpi: Option<MpiPass>,
}

/// A workload, as the crates below `iolab-workloads` see it. Every method but `about` has
/// the generic answer as its default.
pub trait WorkloadInfo: Sync {
    /// Its name, what it counts and how it runs under MPI.
    fn about(&self) -> About;

    /// The family name runs store in `RunRecord::workload` (`block` for the presets).
    fn name(&self) -> &'static str {
        self.about().name
    }

    /// What its rate counts.
    fn counts(&self) -> Counts {
        self.about().counts
    }

    /// How it runs under MPI; `None`: it refuses to.
    fn mpi(&self) -> Option<MpiPass> {
        self.about().mpi
    }

    /// Whether a run stored with `workload` is one of this workload's (runs of older
    /// versions may have stored another name, or none).
    fn stored_as(&self, workload: &str) -> bool {
        workload == self.name()
    }

    /// Whether a test's `extra` is this workload's: it names the workload (or, for tests
    /// stored before their `extra` did, has the workload's keys).
    fn owns_extra(&self, extra: &Value) -> bool {
        extra.get("workload").and_then(Value::as_str) == Some(self.name())
    }

    /// The header's lines of what the run measured, in order; `None`: the block-shaped
    /// facts (region, passes, engine).
    fn facts(&self, _run: &RunRecord, _parts: &HeaderParts) -> Option<Vec<(&'static str, String)>> {
        None
    }

    /// What one test did, for a results table's "What" column; `None`: its job's shape
    /// (`randread 4K Q32T1`).
    fn test_what(&self, _run: &RunRecord, _t: &TestRecord) -> Option<String> {
        None
    }

    /// The view a report draws of a run of `preset`; `None`: tables only.
    fn view(&self, _preset: &str) -> Option<View> {
        None
    }

    /// Whether its tests are described by their I/O pattern (rw, block size, queue depth
    /// × threads) rather than by what they did ([`WorkloadInfo::test_what`]).
    fn tests_are_io_patterns(&self) -> bool {
        false
    }

    /// Whether its runs go by their preset's name alone (the block presets: `cdm`); a
    /// header names any other run's workload beside it (`fsync (fsync)`).
    fn named_by_preset(&self) -> bool {
        false
    }

    /// Whether its reads go to one test file of the target's size, which fits in memory
    /// or not (the block presets); workloads that manage their own files report their
    /// page-cache residency per pass instead.
    fn reads_one_test_file(&self) -> bool {
        false
    }

    /// Whether a pass of its tests also ends at a byte limit (`--io-size`), which the
    /// header then says.
    fn io_limit_ends_passes(&self) -> bool {
        false
    }

    /// The fix warning `code` gets for a run of this workload, naming only options it
    /// takes. `None`: the generic fix, except for `IDLE_RECLAIM`, where `None` means the
    /// workload reads nothing that can sit idle (the warning does not apply).
    fn fix(&self, _code: WarningCode, _run: &RunRecord, _ctx: &FixContext) -> Option<String> {
        None
    }

    /// The verification counts a test of this workload carries at the top of its `extra`
    /// (rather than in `extra.verify`, as a workload run with `--verify` does).
    fn verify_counts<'a>(&self, _t: &'a TestRecord) -> Option<&'a Value> {
        None
    }

    /// Whether a test of this workload measured its own rate cliff and reports it (`run
    /// sustained`: its burst and sustained rates, its recovery), so that the generic
    /// `RATE_CLIFF` warning would only repeat it.
    fn reports_own_cliff(&self, _t: &TestRecord) -> bool {
        false
    }

    /// Whether a test's `extra` holds a scrub test's verdict (its `problems` and
    /// `miscounts` lists).
    fn scrub_verdict(&self, _t: &TestRecord) -> bool {
        false
    }
}

static CATALOGUE: OnceLock<Vec<&'static dyn WorkloadInfo>> = OnceLock::new();

/// Installs the catalogue of every workload (the binary does, from the registry, before
/// anything else). The first call wins; later ones are ignored, so every test may call it.
pub fn install(all: impl IntoIterator<Item = &'static dyn WorkloadInfo>) {
    CATALOGUE.get_or_init(|| all.into_iter().collect());
}

/// Every workload installed, in the registry's order.
pub fn catalogue() -> &'static [&'static dyn WorkloadInfo] {
    CATALOGUE.get().map_or(&[], Vec::as_slice)
}

/// The workload a run stored as `workload` is a run of.
pub fn named(workload: &str) -> Option<&'static dyn WorkloadInfo> {
    catalogue().iter().copied().find(|w| w.stored_as(workload))
}

/// The workload of a stored run.
pub fn of_run(run: &RunRecord) -> Option<&'static dyn WorkloadInfo> {
    named(&run.workload)
}

/// The workload whose `extra` a test carries.
pub fn of_test(t: &TestRecord) -> Option<&'static dyn WorkloadInfo> {
    catalogue().iter().copied().find(|w| w.owns_extra(&t.extra))
}

/// Whether a test's rate counts operations (see [`Counts`]).
pub fn test_counts_operations(t: &TestRecord) -> bool {
    of_test(t).is_some_and(|w| w.counts() == Counts::Operations)
}

/// Whether a run's rates count operations: its workload's do, or every test's does.
pub fn run_counts_operations(run: &RunRecord) -> bool {
    of_run(run).is_some_and(|w| w.counts() == Counts::Operations)
        || (!run.tests.is_empty() && run.tests.iter().all(test_counts_operations))
}

/// The view a report draws of a stored run (see [`WorkloadInfo::view`]).
pub fn view_of(run: &RunRecord) -> Option<View> {
    of_run(run).and_then(|w| w.view(&run.preset))
}
