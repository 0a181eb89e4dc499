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

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::extra::Tally;
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
        crate::extra::workload_name(extra) == Some(self.name())
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
    fn verify_counts(&self, _t: &TestRecord) -> Option<Tally> {
        None
    }

    /// How many of a test's operations ended with another status than the workload
    /// expected of them (a replayed loadfile's), which `STATUS_MISMATCH` reports.
    fn status_mismatches(&self, _t: &TestRecord) -> Option<u64> {
        None
    }

    /// A test's table of operations, one row per kind (dbench's, a replay's).
    fn op_table(&self, _t: &TestRecord) -> Option<OpTable> {
        None
    }

    /// A test's operations per interval, for a test that counts operations and keeps its
    /// own series rather than the pass's bytes.
    fn op_series(&self, _t: &TestRecord) -> Option<OpSeries> {
        None
    }

    /// A test's durability verdict with its evidence (the sync-method probe's).
    fn durability(&self, _t: &TestRecord) -> Option<Judgement> {
        None
    }

    /// The space each small file a test created takes.
    fn space_per_file(&self, _t: &TestRecord) -> Option<SpacePerFile> {
        None
    }

    /// What a test injected into a redundant filesystem and what its scrub reported.
    fn injection(&self, _t: &TestRecord) -> Option<Injection> {
        None
    }

    /// Whether a test of this workload measured its own rate cliff and reports it (`run
    /// sustained`: its burst and sustained rates, its recovery), so that the generic
    /// `RATE_CLIFF` warning would only repeat it.
    fn reports_own_cliff(&self, _t: &TestRecord) -> bool {
        false
    }

    /// A scrub test's verdict (its `problems` and `miscounts` lists), when a test's
    /// `extra` holds one.
    fn scrub_verdict(&self, _t: &TestRecord) -> Option<ScrubVerdict> {
        None
    }
}

/// A test's operations by kind ([`WorkloadInfo::op_table`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OpTable {
    /// The mismatch column's key, as the workload's JSON names it (`status_mismatches`).
    pub mismatch_key: &'static str,
    pub rows: Vec<OpRow>,
}

/// One kind of operation of an [`OpTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct OpRow {
    pub op: String,
    pub count: u64,
    /// Operations of this kind recorded (a replay's trace); `None`: nothing was recorded.
    pub recorded: Option<u64>,
    pub avg_ms: f64,
    pub max_ms: f64,
    pub p99_ms: f64,
    /// Operations that ended otherwise than expected.
    pub mismatches: u64,
}

/// A test's operations per interval ([`WorkloadInfo::op_series`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OpSeries {
    pub interval_ms: u64,
    pub ops: Vec<f64>,
}

/// How far a sync method's writes can be trusted to be on stable storage, weakest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Never flushed, flushes dropped on the way, or flushes that cost nothing.
    NotDurable,
    /// Flushes answered faster than the device's medium can take them: a volatile cache.
    CacheAnswered,
    /// Each write waited for a flush that costs what reaching a medium costs, and nothing
    /// known on the path drops flushes. Timing cannot prove more.
    AsFarAsTimingShows,
}

impl Durability {
    /// Words for people: "not durable", ...
    pub fn text(self) -> &'static str {
        match self {
            Durability::NotDurable => "not durable",
            Durability::CacheAnswered => "not shown durable (a volatile cache answered)",
            Durability::AsFarAsTimingShows => "durable as far as timing shows",
        }
    }
}

/// The verdict on one test (a sync method at one write size) with its evidence
/// ([`WorkloadInfo::durability`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub verdict: Durability,
    /// What a flush added to a write (µs): the flush call's median time for fdatasync/fsync
    /// (a typical flush: a busy machine's scheduling delays stretch a few calls, which would
    /// move a mean, not this), else the write's time beyond a plain write of the same size (or the
    /// whole write's without one); none for plain writes.
    #[serde(default)]
    pub flush_us: Option<f64>,
    /// The evidence, one sentence with its numbers (empty: none recorded).
    #[serde(default)]
    pub evidence: String,
}

/// The space each small file takes ([`WorkloadInfo::space_per_file`]), bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpacePerFile {
    /// Filesystem space used (statvfs before and after creating them) per file.
    pub used: f64,
    /// Blocks allocated to each (st_blocks), when known.
    pub allocated: Option<f64>,
}

/// What a scrub test injected and what the scrub reported ([`WorkloadInfo::injection`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    pub injected: u64,
    pub passed: bool,
    pub expected: ScrubCounts,
    pub reported: ScrubCounts,
}

/// A scrub's counts, as reported or expected; `None`: not reported.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScrubCounts {
    pub detected: Option<u64>,
    pub repaired: Option<u64>,
    pub repaired_bytes: Option<u64>,
    pub uncorrectable: Option<u64>,
    pub restored_on_member: Option<u64>,
}

/// A scrub test's verdict ([`WorkloadInfo::scrub_verdict`]): what it left unrepaired or
/// wrong, and what it repaired but counted otherwise.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScrubVerdict {
    pub problems: Vec<String>,
    pub miscounts: Vec<String>,
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

/// The workload of a test of `run`: the one its `extra` names, else the run's.
pub fn of_test_in(run: &RunRecord, t: &TestRecord) -> Option<&'static dyn WorkloadInfo> {
    of_test(t).or_else(|| of_run(run))
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
