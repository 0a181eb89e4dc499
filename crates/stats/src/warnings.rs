//! Warnings: when each condition that can make a number misleading is raised (the codes,
//! their caveats and their documentation are `iolab_measure::WarningCode`), with one line
//! of explanation and the fix. Computed from the run's passes and the facts known
//! about its target (mount options, device settings, throttles), which the caller gathers.
//!
//! A warning is right or silent, and its fix changes the result: it names only options the
//! run's workload takes ([`Knobs`]), and never one the run already used to no avail.

use std::time::Duration;

use iolab_measure::extra::Stopped;
use iolab_measure::workload::{self, FixContext, WorkloadInfo};
use iolab_measure::{RunRecord, TargetKind, TestRecord, Warning, WarningCode};
use iolab_spec::{format_bytes, DataPattern, Rw};

use crate::{metric, outliers, slow_first};

/// Coefficient of variation of MB/s above which a test is flagged as noisy.
pub const HIGH_CV: f64 = 0.10;
/// Fewest I/Os per pass for a p99 latency worth printing.
pub const MIN_IOS_FOR_P99: u64 = 100;
/// Share of the page-cache residency above which a buffered read is a cache read.
pub const CACHE_RESIDENT: f64 = 0.5;
/// Other processes' CPU use (percent of one CPU) above which the machine was busy.
pub const BUSY_CPU_PCT: f64 = 25.0;
/// Device traffic beyond iolab's own, as a share of iolab's, above which it was shared.
pub const FOREIGN_IO_SHARE: f64 = 0.10;
/// How much device traffic beyond `ours` bytes the `foreign` bytes were, for BUSY_DEVICE's
/// message ("{whose}": "iolab's", "their"): a percentage on top of it up to ten times it,
/// then a multiple, and when `ours` is 0 no ratio at all (a share of nothing is not a
/// number).
pub fn foreign_share(foreign: u64, ours: u64, whose: &str) -> String {
    if ours == 0 {
        return format!("while {whose} I/O moved nothing");
    }
    let share = foreign as f64 / ours as f64;
    if share >= 10.0 {
        format!("{share:.0} times {whose} I/O")
    } else {
        format!("{:.0}% on top of {whose} I/O", share * 100.0)
    }
}

/// Mean flush latency below which a rotational device cannot have flushed (µs).
pub const FSYNC_FLOOR_ROTATIONAL_US: f64 = 1000.0;
/// Direct-I/O writes this many times faster than direct reads of the same shape (block
/// size, queue depth, threads, sequential or random) on the same target in the same run
/// were acknowledged by a write cache below the OS: no medium writes twice as fast as it
/// reads (flash programs slower than it reads; a disk seeks alike both ways).
pub const WRITE_READ_RATIO: f64 = 2.0;

/// A blkio throttle that applies to iolab and a device under the target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThrottleFact {
    /// One line for people: `loop0 write_bps = 20 MiB/s on 7:0 (cgroup /sys/fs/...)`.
    pub text: String,
    /// The cgroup directory it was read from.
    pub cgroup: String,
    /// `read_bps`, `write_bps`, `read_iops` or `write_iops`.
    pub kind: String,
    /// Bytes or I/Os per second.
    pub limit: u64,
    /// The throttled device's kernel name (`loop0`; its `maj:min` when it has none), as
    /// pass activity names devices.
    pub device: String,
}

/// What is known about the target; `None`/empty means unknown or not applicable.
#[derive(Debug, Clone, Default)]
pub struct TargetFacts {
    /// Mount options of the filesystem holding the target.
    pub mount_options: Option<String>,
    /// The filesystem compresses data: the algorithm or property value (btrfs, zfs).
    pub compression: Option<String>,
    /// zfs `sync=disabled` on the dataset.
    pub zfs_sync_disabled: bool,
    /// Devices of the chain whose write cache reads "write through" in sysfs.
    pub write_through: Vec<String>,
    /// The device under the target is rotational.
    pub rotational: Option<bool>,
    /// Loop devices in the chain without direct I/O.
    pub loop_without_dio: Vec<String>,
    /// blkio throttles that apply to iolab and the target's devices.
    pub throttles: Vec<ThrottleFact>,
    /// Result of the misaligned O_DIRECT probe.
    pub direct_honoured: Option<bool>,
    /// O_DIRECT I/O whose size is not a multiple of this goes through the page cache
    /// (btrfs: its sector size, the `f_bsize` of statvfs).
    pub direct_io_sector: Option<u64>,
    /// Memory available for the page cache (the lower of MemAvailable and the room left
    /// under iolab's memory-cgroup limit).
    pub mem_available: Option<u64>,
    /// Mechanisms that page out idle memory, page cache included, described.
    pub idle_reclaim: Vec<String>,
    /// The shortest idle time after which one of them pages memory out, when known.
    pub idle_reclaim_after: Option<Duration>,
    /// Bytes actually allocated to the test file, when it is a pre-existing file.
    pub allocated_bytes: Option<u64>,
    /// The device whose traffic is compared with iolab's (the top of the chain).
    pub top_device: Option<String>,
}

fn w(code: WarningCode, message: String, fix: &str, test: Option<&TestRecord>) -> Warning {
    Warning {
        code,
        message,
        fix: fix.to_string(),
        test: test.map(|t| t.name.clone()),
    }
}

/// What a run's workload lets its user change, so that a fix names only options the
/// workload takes (`iolab run NAME --help`) and only what would change the result. The
/// texts are the workload's own ([`WorkloadInfo::fix`]); a workload without one for a code
/// gets the generic fix.
pub struct Knobs<'a> {
    run: &'a RunRecord,
    info: Option<&'static dyn WorkloadInfo>,
}

impl<'a> Knobs<'a> {
    pub fn new(run: &'a RunRecord) -> Knobs<'a> {
        Knobs {
            run,
            info: workload::of_run(run),
        }
    }

    /// The workload's fix for `code`, if it has its own.
    fn ask(&self, code: WarningCode, ctx: &FixContext) -> Option<String> {
        self.info.and_then(|w| w.fix(code, self.run, ctx))
    }

    /// `PAGE_CACHE`: reads were served from memory.
    pub fn page_cache_fix(&self) -> String {
        self.ask(WarningCode::PageCache, &FixContext::default())
            .unwrap_or_else(|| {
                "drop the page cache before every run (as root: sync; echo 3 > \
                 /proc/sys/vm/drop_caches)"
                    .into()
            })
    }

    /// `IDLE_RECLAIM`: whether the run read data that may have sat idle long enough to be
    /// paged out (`idle`: the reclaimer's idle time), and the fix.
    pub fn idle_reclaim_fix(&self, idle: Option<Duration>) -> Option<String> {
        let ctx = FixContext {
            idle_reclaim_after: idle,
            ..FixContext::default()
        };
        self.ask(WarningCode::IdleReclaim, &ctx)
    }

    /// `SLOW_FIRST_PASS`: something that takes the start-up out of the measured passes.
    pub fn slow_first_fix(&self) -> String {
        self.ask(WarningCode::SlowFirstPass, &FixContext::default())
            .unwrap_or_else(|| "rerun on a quiet machine".into())
    }

    /// `HIGH_VARIATION`: more or longer passes.
    pub fn more_passes_fix(&self) -> String {
        self.ask(WarningCode::HighVariation, &FixContext::default())
            .unwrap_or_else(|| "rerun on a quiet machine".into())
    }

    /// `FEW_IOS`: more I/Os per pass for `tests`, each of which had a pass of fewer than
    /// [`MIN_IOS_FOR_P99`].
    pub fn few_ios_fix(&self, tests: &[&TestRecord]) -> String {
        let bs = tests.iter().map(|t| t.job.bs).max().unwrap_or(0);
        // A pass that moved its whole byte limit ended there, not at --duration.
        let byte_limited = tests.iter().any(|t| {
            t.job.io_limit.is_some_and(|limit| {
                t.passes
                    .iter()
                    .any(|p| p.ios > 0 && p.ios < MIN_IOS_FOR_P99 && p.bytes >= limit)
            })
        });
        let ctx = FixContext {
            block: format_bytes(bs),
            need: format_bytes(bs.saturating_mul(MIN_IOS_FOR_P99)),
            byte_limited,
            ..FixContext::default()
        };
        self.ask(WarningCode::FewIos, &ctx)
            .unwrap_or_else(|| "more I/Os per pass".into())
    }
}

/// All warnings for a run.
pub fn analyze(run: &RunRecord, f: &TargetFacts) -> Vec<Warning> {
    let mut out = Vec::new();
    let knobs = Knobs::new(run);
    let s = &run.settings;
    let any_reads = run.tests.iter().any(|t| t.job.rw.reads());
    let any_writes = run.tests.iter().any(|t| t.job.rw.writes());

    if s.direct {
        if f.direct_honoured == Some(false)
            || matches!(run.target.fs_type.as_str(), "tmpfs" | "ramfs")
        {
            out.push(w(
                WarningCode::DirectIoIgnored,
                format!(
                    "{} accepts O_DIRECT but does not bypass its cache ({}): every number is \
                     a memory speed",
                    run.target.fs_type,
                    if f.direct_honoured == Some(false) {
                        "the direct-I/O probe was served from the page cache"
                    } else {
                        "a memory filesystem has no device to go to"
                    }
                ),
                "test a filesystem on a real device",
                None,
            ));
        }
        if let Some(sector) = f.direct_io_sector.filter(|&s| s > 0) {
            for t in run.tests.iter().filter(|t| {
                t.job.bs % sector != 0 || t.job.access.iter().any(|l| l.size % sector != 0)
            }) {
                out.push(w(
                    WarningCode::DirectIoIgnored,
                    format!(
                        "{} serves O_DIRECT I/O that is not a multiple of its {sector}-byte \
                         sector through the page cache: this test's I/Os were buffered, and \
                         its reads can be memory speeds",
                        run.target.fs_type
                    ),
                    "compare block sizes from the sector size up, or use another filesystem",
                    Some(t),
                ));
            }
        }
        for l in &f.loop_without_dio {
            out.push(w(
                WarningCode::LoopWithoutDio,
                format!("{l} has direct I/O off: O_DIRECT stops at the host's page cache"),
                "attach the loop device with `losetup --direct-io=on`",
                None,
            ));
        }
    } else if any_reads {
        let cached: Vec<&TestRecord> = run
            .tests
            .iter()
            .filter(|t| {
                // A random reader revisits blocks, so a pass that fills the cache serves
                // itself; a sequential reader reads each block once, so a file resident
                // only after its pass was filled by the reading (readahead), not read
                // from memory.
                let revisits = t.job.rw.is_random();
                t.job.rw.reads()
                    && t.passes.iter().any(|p| {
                        p.context.cache_resident_before.unwrap_or(0.0) >= CACHE_RESIDENT
                            || (revisits
                                && p.context.cache_resident_after.unwrap_or(0.0) >= CACHE_RESIDENT)
                    })
            })
            .collect();
        for t in &cached {
            // The highest residency seen before or after any pass (a pass can fill the
            // cache from nothing, so "after" alone can be what made the test a cache read).
            let pct = t
                .passes
                .iter()
                .flat_map(|p| {
                    [
                        p.context.cache_resident_before,
                        p.context.cache_resident_after,
                    ]
                })
                .flatten()
                .fold(0.0f64, f64::max)
                * 100.0;
            out.push(w(
                WarningCode::PageCache,
                format!(
                    "buffered reads served from memory: up to {pct:.0}% of the test file was \
                     in the page cache during the passes"
                ),
                &knobs.page_cache_fix(),
                Some(t),
            ));
        }
        let idle_fix = knobs.idle_reclaim_fix(f.idle_reclaim_after);
        for r in f.idle_reclaim.iter().filter(|_| idle_fix.is_some()) {
            out.push(w(
                WarningCode::IdleReclaim,
                format!(
                    "the kernel runs {r}: cached pages are dropped without memory pressure, \
                     so whether a buffered read hits the cache depends on when its data was \
                     last touched, and repeats taken minutes apart may not compare"
                ),
                idle_fix.as_deref().unwrap_or_default(),
                None,
            ));
        }
        // Workloads that manage their own files report residency per pass instead; the
        // size rule only fits a run that reads one test file.
        if cached.is_empty() && knobs.info.is_some_and(|w| w.reads_one_test_file()) {
            if let Some(avail) = f.mem_available {
                if run.target.size < avail {
                    out.push(w(
                        WarningCode::PageCachePossible,
                        format!(
                            "the buffered test file ({}) fits in available memory ({}); \
                             reads may come from the page cache",
                            format_bytes(run.target.size),
                            format_bytes(avail)
                        ),
                        "drop --buffered, or use a --size larger than available memory",
                        None,
                    ));
                }
            }
        }
    }

    if any_writes && s.data == DataPattern::Zeros {
        if let Some(c) = &f.compression {
            out.push(w(
                WarningCode::CompressibleData,
                format!(
                    "zeros written to a filesystem that compresses ({c}): it stores almost \
                     nothing"
                ),
                "use --data random (the default)",
                None,
            ));
        }
    }
    if any_reads && run.target.kind == TargetKind::File {
        if let Some(alloc) = f.allocated_bytes {
            if (alloc as f64) < 0.9 * run.target.size as f64 {
                out.push(w(
                    WarningCode::SparseRead,
                    format!(
                        "only {} of the {} test region is allocated: reads of holes return \
                         zeros without touching the medium",
                        format_bytes(alloc),
                        format_bytes(run.target.size)
                    ),
                    "fill the file first, or let iolab create its own test file in a directory",
                    None,
                ));
            }
        }
    }

    // Flushes that do not reach stable storage.
    if any_writes {
        if let Some(opts) = &f.mount_options {
            if opts
                .split(',')
                .any(|o| o == "nobarrier" || o == "barrier=0")
            {
                out.push(w(
                    WarningCode::NoBarrier,
                    "the filesystem is mounted without write barriers (nobarrier/barrier=0): \
                     fsync does not flush the device cache, data can be lost on power failure"
                        .into(),
                    "remount with barriers (the default) to measure safe writes",
                    None,
                ));
            }
        }
        if f.zfs_sync_disabled {
            out.push(w(
                WarningCode::ZfsSyncDisabled,
                "the zfs dataset has sync=disabled: fsync returns before data is stored".into(),
                "zfs set sync=standard",
                None,
            ));
        }
        for d in &f.write_through {
            out.push(w(
                WarningCode::WriteThroughDropsFlush,
                format!(
                    "{d}'s write_cache reads \"write through\": the block layer drops flush \
                     requests, which is only safe if the device truly has no volatile cache"
                ),
                "echo \"write back\" > /sys/block/DEV/queue/write_cache unless the cache is \
                 non-volatile",
                None,
            ));
        }
        if f.rotational == Some(true) {
            // One warning for the run, naming every test whose flushes were too fast.
            // A test's flush: what its workload's durability verdict judged (`run fsync`:
            // the call's median, or a synchronous write's time beyond a plain one), so
            // that the warning and the verdicts rest on one figure; else the median over
            // passes of its flush calls' median.
            let mut fast: Vec<(String, f64)> = Vec::new();
            for t in &run.tests {
                let judged = workload::of_test_in(run, t)
                    .and_then(|w| w.durability(t))
                    .map(|j| j.flush_us);
                let flush = judged.unwrap_or_else(|| {
                    let syncs: Vec<f64> = t
                        .passes
                        .iter()
                        .filter_map(|p| p.sync.as_ref())
                        .map(|s| s.lat_us.p50)
                        .collect();
                    (!syncs.is_empty()).then(|| crate::median(&syncs))
                });
                if let Some(m) = flush.filter(|&m| m < FSYNC_FLOOR_ROTATIONAL_US) {
                    fast.push((t.name.clone(), m));
                }
            }
            if !fast.is_empty() {
                let lo = fast.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
                let hi = fast.iter().map(|x| x.1).fold(0.0, f64::max);
                let range = if (hi - lo) < 1.0 {
                    format!("{lo:.0} µs")
                } else {
                    format!("{lo:.0}-{hi:.0} µs")
                };
                let names: Vec<&str> = fast.iter().map(|x| x.0.as_str()).collect();
                out.push(Warning {
                    code: WarningCode::FsyncTooFast,
                    message: format!(
                        "a flush took {range} (the median call, or a synchronous write's time \
                         beyond a plain one) on a device that reports itself rotational; a \
                         disk cannot reach its platter that fast, so a volatile cache answered \
                         (tests: {})",
                        names.join(", ")
                    ),
                    fix: "turn the volatile write cache off (hdparm -W 0 on a disk; on a VM a \
                          host disk cache mode that honours flushes, such as cache=none), and \
                          check that the mount has barriers"
                        .into(),
                    test: if fast.len() == 1 {
                        Some(fast[0].0.clone())
                    } else {
                        None
                    },
                });
            }
        }
    }

    // A study's own throttle is the configuration it measures (its testbed put the run in
    // that cgroup, and the run's study_meta says so), not a problem of the run.
    let study_cgroup = run
        .study_meta
        .get("built")
        .and_then(|b| b.get("cgroup"))
        .and_then(|c| c.as_str())
        .map(|c| c.trim_end_matches('/'));
    for th in &f.throttles {
        if study_cgroup.is_some_and(|c| c == th.cgroup.trim_end_matches('/')) {
            continue;
        }
        out.push(w(
            WarningCode::BlkioThrottle,
            format!("a blkio throttle applies to this run: {}", th.text),
            "expected for an emulated device; otherwise remove the cgroup limit",
            None,
        ));
    }

    for t in &run.tests {
        per_test(&mut out, run, t, f, &knobs);
    }
    throttle_split(&mut out, run, f);
    few_ios(&mut out, run, &knobs);
    writes_faster_than_reads(&mut out, run, f);
    out
}

/// Requests per I/O from which a throttled device is taken to have split the I/Os.
pub const SPLIT_REQUESTS_PER_IO: f64 = 1.5;
/// Share of a throttle's cap below which split I/Os are taken to have cost the test.
pub const SPLIT_BELOW_CAP: f64 = 0.9;

/// `THROTTLE_SPLIT`, once per test: direct I/O under a blkio throttle that reached the
/// throttled device in parts. The device's requests over the passes (iolab's ramp and drain
/// included, so its bytes are added back) against the I/Os those bytes make at the test's
/// block size.
fn throttle_split(out: &mut Vec<Warning>, run: &RunRecord, f: &TargetFacts) {
    if !run.settings.direct {
        return;
    }
    for t in &run.tests {
        let bs = t.job.bs;
        if bs == 0 || t.passes.is_empty() {
            continue;
        }
        for th in &f.throttles {
            let reads = th.kind.starts_with("read");
            if (reads && !t.job.rw.reads()) || (!reads && !t.job.rw.writes()) {
                continue;
            }
            let (mut bytes, mut requests) = (0u64, 0u64);
            for p in &t.passes {
                let a = &p.context.activity;
                if let Some(d) = a.devices.iter().find(|d| d.device == th.device) {
                    bytes += d.read_bytes + d.write_bytes + a.own_uncounted_bytes;
                    requests += d.read_requests + d.write_requests;
                }
            }
            let ios = bytes as f64 / bs as f64;
            // Too few requests to tell (or a record from before requests were kept).
            if requests < 8 || ios < 1.0 {
                continue;
            }
            let per_io = requests as f64 / ios;
            if per_io < SPLIT_REQUESTS_PER_IO {
                continue;
            }
            // The rate in the throttle's unit, in the throttled direction: median of passes.
            let bps = th.kind.ends_with("bps");
            let mut rates: Vec<f64> = t
                .passes
                .iter()
                .filter_map(|p| {
                    if reads {
                        p.read.as_ref()
                    } else {
                        p.write.as_ref()
                    }
                })
                .map(|d| if bps { d.mb_s * 1e6 } else { d.iops })
                .collect();
            if rates.is_empty() || th.limit == 0 {
                continue;
            }
            rates.sort_by(f64::total_cmp);
            let rate = rates[rates.len() / 2];
            // At the cap: the split cost nothing here (a filesystem's own bios of the
            // device's size, say, are whole when they reach the throttle).
            if rate >= SPLIT_BELOW_CAP * th.limit as f64 {
                continue;
            }
            let (got, cap) = if bps {
                (
                    format!("{:.2} MB/s", rate / 1e6),
                    format!("{:.2} MB/s", th.limit as f64 / 1e6),
                )
            } else {
                (format!("{rate:.0} IOPS"), format!("{} IOPS", th.limit))
            };
            out.push(w(
                WarningCode::ThrottleSplit,
                format!(
                    "{} took each {} I/O as {per_io:.1} requests of {} on average during the \
                     passes (the block layer split them), and the test measured {got} against \
                     a cap of {cap} ({:.0}%): blk-throttle on Linux 6.18 charges a split I/O \
                     twice, so under {} the rate can be half the cap",
                    th.device,
                    format_bytes(bs),
                    // Whole KiB: requests are sectors, their mean is not.
                    format_bytes((bytes as f64 / requests as f64 / 1024.0).round() as u64 * 1024),
                    100.0 * rate / th.limit as f64,
                    th.text
                ),
                "measure a throttled device with I/Os no larger than the requests it takes \
                 (128 KiB is whole on loop devices); for larger ones keep transparent huge \
                 pages on (madvise or always), so that iolab's buffers are contiguous and a \
                 1 MiB I/O stays whole",
                Some(t),
            ));
            break;
        }
    }
}

/// `FEW_IOS`, once for the run: the tests with a pass of fewer than [`MIN_IOS_FOR_P99`]
/// I/Os. A pass timed as a whole, without per-I/O latencies (a filesystem's scrub), has no
/// percentiles to doubt.
fn few_ios(out: &mut Vec<Warning>, run: &RunRecord, knobs: &Knobs) {
    let few: Vec<(&TestRecord, u64)> = run
        .tests
        .iter()
        .filter_map(|t| {
            let n = t.passes.iter().map(|p| p.ios).filter(|&n| n > 0).min()?;
            (n < MIN_IOS_FOR_P99).then_some((t, n))
        })
        .collect();
    let Some(&(fewest, n)) = few.iter().min_by_key(|(_, n)| *n) else {
        return;
    };
    let tests: Vec<&TestRecord> = few.iter().map(|(t, _)| *t).collect();
    let message = if tests.len() == 1 {
        format!(
            "a pass completed only {n} I/Os: its p99 latency is the slowest few I/Os, not a \
             percentile"
        )
    } else {
        let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
        format!(
            "{} tests had a pass of fewer than {MIN_IOS_FOR_P99} I/Os (fewest: {n}, in {}): \
             their p99 latencies are the slowest few I/Os, not percentiles (tests: {})",
            tests.len(),
            fewest.name,
            names.join(", ")
        )
    };
    out.push(Warning {
        code: WarningCode::FewIos,
        message,
        fix: knobs.few_ios_fix(&tests),
        test: (tests.len() == 1).then(|| tests[0].name.clone()),
    });
}

/// Throttles that hold reads below writes explain writes that outrun reads.
fn reads_throttled_harder(f: &TargetFacts) -> bool {
    let lowest = |kind: &str| {
        f.throttles
            .iter()
            .filter(|t| t.kind == kind)
            .map(|t| t.limit)
            .min()
    };
    [("read_bps", "write_bps"), ("read_iops", "write_iops")]
        .into_iter()
        .any(|(r, w)| match (lowest(r), lowest(w)) {
            (Some(r), Some(w)) => r < w,
            (Some(_), None) => true,
            _ => false,
        })
}

/// `WRITES_FASTER_THAN_READS`, once for the run: direct writes at least
/// [`WRITE_READ_RATIO`] times faster than direct reads of the same shape. A read test that
/// ran beside busy processes ([`BUSY_CPU_PCT`]) is named as the other explanation.
fn writes_faster_than_reads(out: &mut Vec<Warning>, run: &RunRecord, f: &TargetFacts) {
    if !run.settings.direct || reads_throttled_harder(f) {
        return;
    }
    let shape = |t: &TestRecord| (t.job.bs, t.job.iodepth, t.job.numjobs, t.job.rw.is_random());
    // A trim test (rw=trim: its writes are trims) is no write to compare.
    let plain = |t: &TestRecord, rws: [Rw; 2]| {
        rws.contains(&t.job.rw) && t.job.access.is_empty() && !t.passes.is_empty() && !t.job.trim
    };
    let mut hits: Vec<(&TestRecord, &TestRecord, f64)> = Vec::new();
    for wt in run
        .tests
        .iter()
        .filter(|t| plain(t, [Rw::Write, Rw::RandWrite]))
    {
        let read = run
            .tests
            .iter()
            .find(|r| plain(r, [Rw::Read, Rw::RandRead]) && shape(r) == shape(wt));
        if let Some(rt) = read {
            let (wm, rm) = (wt.summary.mb_s, rt.summary.mb_s);
            if rm > 0.0 && wm >= WRITE_READ_RATIO * rm {
                hits.push((wt, rt, wm / rm));
            }
        }
    }
    if hits.is_empty() {
        return;
    }
    let evidence: Vec<String> = hits
        .iter()
        .map(|(wt, rt, ratio)| {
            let what = if wt.group == rt.group && !wt.group.is_empty() {
                wt.group.clone()
            } else {
                format!("{} vs {}", wt.name, rt.name)
            };
            format!(
                "{what}: writes {:.1} MB/s, reads {:.1} MB/s ({ratio:.1}×)",
                wt.summary.mb_s, rt.summary.mb_s
            )
        })
        .collect();
    // A reader held off the CPU is slow without any cache: a read test that ran beside
    // busy processes (BUSY_CPU's rule) is named as the other explanation.
    let starved: Vec<String> = hits
        .iter()
        .filter_map(|(_, rt, _)| {
            let busiest = rt
                .passes
                .iter()
                .map(|p| p.context.activity.other_cpu_pct)
                .fold(0.0, f64::max);
            (busiest > BUSY_CPU_PCT).then(|| format!("{busiest:.0}% during {}", rt.name))
        })
        .collect();
    let flushed = hits.iter().any(|(wt, _, _)| wt.job.fsync_every > 0);
    let fix = if flushed {
        "turn the volatile write cache off (hdparm -W 0 on a disk; on a VM a host disk cache \
         mode such as cache=none): the flushes of --fsync did not slow these writes"
    } else {
        "make every write wait for the medium with --fsync 1 (a flush after each write), or \
         turn the volatile write cache off (hdparm -W 0 on a disk; on a VM a host disk cache \
         mode such as cache=none)"
    };
    let (message, fix) = if starved.is_empty() {
        (
            format!(
                "direct writes ran at least {WRITE_READ_RATIO}× as fast as direct reads of \
                 the same block size, queue depth and pattern ({}): no medium writes that \
                 much faster than it reads, so a write cache below the OS (the device's own, \
                 or the host's under a VM) acknowledged the writes before they reached the \
                 medium, and unless it survives a power loss the write numbers are its speed",
                evidence.join("; ")
            ),
            fix.to_string(),
        )
    } else {
        (
            format!(
                "direct writes ran at least {WRITE_READ_RATIO}× as fast as direct reads of \
                 the same block size, queue depth and pattern ({}): either a write cache \
                 below the OS (the device's own, or the host's under a VM) acknowledged the \
                 writes before they reached the medium, or the reads were held off the CPU: \
                 other processes used {} of a CPU (BUSY_CPU)",
                evidence.join("; "),
                starved.join(", ")
            ),
            format!("rerun on a quiet machine to tell the two apart; if the gap stays, {fix}"),
        )
    };
    out.push(Warning {
        code: WarningCode::WritesFasterThanReads,
        message,
        fix,
        test: (hits.len() == 1).then(|| hits[0].0.name.clone()),
    });
}

fn per_test(
    out: &mut Vec<Warning>,
    run: &RunRecord,
    t: &TestRecord,
    f: &TargetFacts,
    knobs: &Knobs,
) {
    // A replay (dbench) whose operations did not end with the status the loadfile expects
    // is not the workload it claims to be.
    let info = workload::of_test_in(run, t);
    if let Some(n) = info.and_then(|w| w.status_mismatches(t)) {
        if n > 0 {
            out.push(w(
                WarningCode::StatusMismatch,
                format!(
                    "{n} operations ended with a different status than the loadfile expects \
                     (see mismatch_samples in the JSON)"
                ),
                "check the loadfile and that the target directory was empty",
                Some(t),
            ));
        }
    }
    // Verified writes (iolab-integrity: `run verify`, or `extra.verify` of a workload run with
    // --verify) that read back as something else: the speed is that of a target that does
    // not keep data.
    let counts = info
        .and_then(|w| w.verify_counts(t))
        .or_else(|| t.runner_extra().verify);
    if let Some(c) = counts {
        let n = c.failures;
        if n > 0 {
            let classes = c
                .classes
                .iter()
                .filter(|(k, _)| k.as_str() != "ok")
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let checked = c.checked;
            // What was counted: blocks unless the check says otherwise (metadata: files).
            let unit = c.unit.as_str();
            out.push(w(
                WarningCode::DataMismatch,
                format!(
                    "{n} of {checked} {unit} read back did not hold what was written ({classes}; \
                     offsets in failure_samples of the JSON)"
                ),
                "do not trust this target with data: check the device (SMART, dmesg), cables, \
                 RAM and the write cache before measuring speed",
                Some(t),
            ));
        }
    }
    // The scrub test (a workload whose tests carry a scrub verdict): the filesystem left data unrepaired or wrong, or
    // repaired it but counted something else.
    if let Some(v) = workload::of_test(t).and_then(|w| w.scrub_verdict(t)) {
        let (problems, miscounts) = (v.problems, v.miscounts);
        if let Some(first) = problems.first() {
            out.push(w(
                WarningCode::ScrubNotRepaired,
                format!(
                    "{} problem(s) with the data after the scrub; first: {first}",
                    problems.len()
                ),
                "do not count on this configuration's scrub to keep the copies good: check \
                 the kernel's known issues for the RAID profile (btrfs raid5/6) and the devices",
                Some(t),
            ));
        } else if let Some(first) = miscounts.first() {
            out.push(w(
                WarningCode::ScrubMiscounted,
                format!(
                    "the data was repaired, but the scrub's counts differ from what was \
                     injected: {first}"
                ),
                "do not monitor this configuration by the scrub's error counts alone",
                Some(t),
            ));
        }
    }
    let mbs: Vec<f64> = t.passes.iter().map(|p| p.mb_s).collect();
    let m = metric(&mbs);
    if m.n >= 2 && m.cv > HIGH_CV {
        out.push(w(
            WarningCode::HighVariation,
            format!(
                "MB/s varied by {:.0}% (coefficient of variation) across {} passes",
                m.cv * 100.0,
                m.n
            ),
            &knobs.more_passes_fix(),
            Some(t),
        ));
    }
    for i in outliers(&mbs) {
        out.push(w(
            WarningCode::OutlierPass,
            format!(
                "pass {} ({:.1} MB/s) is an outlier against the median {:.1} MB/s \
                 (modified z-score > 3.5)",
                t.passes[i].index, mbs[i], m.median
            ),
            "look for other activity during that pass; rerun",
            Some(t),
        ));
    }
    if slow_first(&mbs) {
        out.push(w(
            WarningCode::SlowFirstPass,
            format!(
                "the first pass ({:.1} MB/s) was much slower than the rest (median {:.1}): \
                 a cache or device was still warming up",
                mbs[0],
                crate::median(&mbs[1..])
            ),
            &knobs.slow_first_fix(),
            Some(t),
        ));
    }
    rate_cliff_and_stalls(out, run, t);
    if t.summary.converged == Some(false) {
        // The block pass loop says in `extra.adaptive` what it aimed for and what stopped it.
        let adaptive = t.runner_extra().adaptive;
        let target = adaptive
            .map(|a| a.target_pct)
            .map_or(String::new(), |p| format!(", above the ±{p}% aimed for"));
        let why = match adaptive.map(|a| a.stopped) {
            Some(Stopped::MaxRuns) => "--max-runs passes ran first",
            Some(Stopped::MaxTime) => "--max-time of passes went by first",
            Some(Stopped::Budget) => "the run's --budget was used first",
            _ => "its limits came first",
        };
        out.push(w(
            WarningCode::NotConverged,
            format!(
                "adaptive passes stopped with the 95% CI at ±{:.1}% after {} passes{target}: \
                 {why}; MB/s varied by {:.1}% (coefficient of variation), {:.1} to {:.1}",
                crate::ci_pct(&m),
                m.n,
                m.cv * 100.0,
                m.min,
                m.max
            ),
            "give the test more passes (--budget, --max-runs, --max-time), or stop what \
             disturbs the device (BUSY_DEVICE, BUSY_CPU on this test name it)",
            Some(t),
        ));
    }
    // Someone else's I/O on the device (only meaningful when iolab's I/O goes straight
    // to it: direct I/O).
    if run.settings.direct {
        if let Some(dev) = &f.top_device {
            let mut worst: Option<(f64, u64, u64)> = None;
            for p in &t.passes {
                if let Some(d) = p.context.activity.devices.iter().find(|d| &d.device == dev) {
                    let dev_bytes = d.read_bytes + d.write_bytes;
                    let foreign = dev_bytes.saturating_sub(p.bytes);
                    let share = foreign as f64 / p.bytes.max(1) as f64;
                    if foreign > 1 << 20
                        && share > FOREIGN_IO_SHARE
                        && worst.is_none_or(|(s, _, _)| share > s)
                    {
                        worst = Some((share, foreign, p.bytes));
                    }
                }
            }
            if let Some((_, foreign, ours)) = worst {
                out.push(w(
                    WarningCode::BusyDevice,
                    format!(
                        "{dev} moved {} more than iolab did during a pass ({}): the device \
                         was shared",
                        format_bytes(foreign),
                        foreign_share(foreign, ours, "iolab's")
                    ),
                    "stop other I/O on the device and rerun",
                    Some(t),
                ));
            }
        }
    }
    let busiest = t.passes.iter().max_by(|a, b| {
        a.context
            .activity
            .other_cpu_pct
            .total_cmp(&b.context.activity.other_cpu_pct)
    });
    if let Some(p) = busiest {
        let a = &p.context.activity;
        if a.other_cpu_pct > BUSY_CPU_PCT {
            let who: Vec<String> = a
                .top_processes
                .iter()
                .map(|p| format!("{} (pid {}) {:.0}%", p.name, p.pid, p.cpu_pct))
                .collect();
            out.push(w(
                WarningCode::BusyCpu,
                format!(
                    "other processes used {:.0}% of a CPU during pass {} ({})",
                    a.other_cpu_pct,
                    p.index,
                    if who.is_empty() {
                        "many small ones".into()
                    } else {
                        who.join(", ")
                    }
                ),
                "close other programs, or accept the number as measured under load",
                Some(t),
            ));
        }
    }
}

/// `RATE_CLIFF` and `STALLED_INTERVALS` from a test's per-interval series.
fn rate_cliff_and_stalls(out: &mut Vec<Warning>, run: &RunRecord, t: &TestRecord) {
    let what = match (t.job.rw.reads(), t.job.rw.writes()) {
        _ if t.job.trim => "trims",
        (true, false) => "reads",
        (false, true) => "writes",
        _ => "I/O",
    };
    // A workload that measures the cliff itself (`run sustained`) reports it.
    let measured_here =
        iolab_measure::workload::of_run(run).is_some_and(|w| w.reports_own_cliff(t));
    if let Some(c) = crate::series::test_cliff(t).filter(|_| !measured_here) {
        let cause = if what == "reads" {
            "a cache ran out"
        } else {
            "a cache filled"
        };
        let place = if c.within_pass && t.passes.len() > 1 {
            format!(" of pass {}", c.pass)
        } else if t.passes.len() > 1 {
            format!(" of the measured passes (the drop in pass {})", c.pass)
        } else {
            String::new()
        };
        out.push(w(
            WarningCode::RateCliff,
            format!(
                "{what} ran at {} MB/s for the first {} ({:.1} s){place}, then {} MB/s for \
                 {:.1} s: {cause}; the sustained rate is {} MB/s",
                mb_s_text(c.before_mb_s),
                format_bytes(c.bytes_before),
                c.seconds_before,
                mb_s_text(c.after_mb_s),
                c.seconds_after,
                mb_s_text(c.after_mb_s),
            ),
            "measure the sustained rate on its own (iolab run sustained), or make the passes \
             long enough that the burst is a small part of them",
            Some(t),
        ));
    }
    if let Some(d) = crate::series::test_decline(t).filter(|_| !measured_here) {
        out.push(w(
            WarningCode::RateDecline,
            format!(
                "{what} fell steadily from {} MB/s to {} MB/s over {:.1} s (a fitted line, \
                 R² {:.2}): the number depends on how long the test ran",
                mb_s_text(d.from_mb_s),
                mb_s_text(d.to_mb_s),
                d.seconds,
                d.r2
            ),
            "measure until the rate is steady (--steady-state, or iolab run sustained), and \
             give the test's length with its number",
            Some(t),
        ));
    }
    let s = crate::series::stalls(t);
    if s.intervals > 0 {
        let passes: Vec<String> = s.passes.iter().map(|p| p.to_string()).collect();
        out.push(w(
            WarningCode::StalledIntervals,
            format!(
                "{} interval{} of 100 ms with no completed I/O (pass {}), the longest stall \
                 {:.1} s",
                s.intervals,
                if s.intervals == 1 { "" } else { "s" },
                passes.join(", "),
                s.longest_s
            ),
            "look for what paused the device or the machine (BUSY_CPU, a cache write-out, a \
             throttle) and rerun",
            Some(t),
        ));
    }
}

/// MB/s with thousands separated (`1,204`), one decimal below 100.
fn mb_s_text(v: f64) -> String {
    if v < 99.95 {
        return format!("{v:.1}");
    }
    let s = format!("{:.0}", v);
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// A duration as people type it: `5s`, `1.5s`, `250ms`.
pub fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 || s == 0.0 {
        let t = format!("{s:.1}");
        format!("{}s", t.trim_end_matches(".0"))
    } else {
        format!("{}ms", d.as_millis())
    }
}
