//! Warnings: when each condition that can make a number misleading is raised (the codes,
//! their caveats and their documentation are `iolab_measure::WarningCode`), with one line
//! of explanation and the fix. Computed from the run's passes and the facts known
//! about its target (mount options, device settings, throttles), which the caller gathers.

use iolab_measure::{RunRecord, TargetKind, TestRecord, Warning, WarningCode};
use iolab_spec::{format_bytes, DataPattern};

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
/// Mean flush latency below which a rotational device cannot have flushed (µs).
pub const FSYNC_FLOOR_ROTATIONAL_US: f64 = 1000.0;

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
    /// blkio throttles that apply to iolab and the target's devices, described.
    pub throttles: Vec<String>,
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

/// All warnings for a run.
pub fn analyze(run: &RunRecord, f: &TargetFacts) -> Vec<Warning> {
    let mut out = Vec::new();
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
                "drop --buffered (O_DIRECT), or use a test file larger than RAM",
                Some(t),
            ));
        }
        for r in &f.idle_reclaim {
            out.push(w(
                WarningCode::IdleReclaim,
                format!(
                    "the kernel runs {r}: cached pages are dropped without memory pressure, \
                     so whether a buffered read hits the cache depends on when its data was \
                     last touched, and repeats taken minutes apart may not compare"
                ),
                "drop --buffered (O_DIRECT) to measure the device, or drop caches before \
                 every run so each starts cold",
                None,
            ));
        }
        // Workloads that manage their own files (streams, copy, metadata) report residency
        // per pass instead; the size rule only fits a block test's single test file.
        if cached.is_empty() && run.workload == "block" {
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
            let mut fast: Vec<(String, f64)> = Vec::new();
            for t in &run.tests {
                let syncs: Vec<f64> = t
                    .passes
                    .iter()
                    .filter_map(|p| p.sync.as_ref())
                    .map(|s| s.lat_us.mean)
                    .collect();
                if !syncs.is_empty() {
                    let m = crate::median(&syncs);
                    if m < FSYNC_FLOOR_ROTATIONAL_US {
                        fast.push((t.name.clone(), m));
                    }
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
                        "flushes took {range} on average on a device that reports itself \
                         rotational; a disk cannot reach its platter that fast, so a volatile \
                         cache answered (tests: {})",
                        names.join(", ")
                    ),
                    fix: "check the device's write cache setting and the mount's barriers".into(),
                    test: if fast.len() == 1 {
                        Some(fast[0].0.clone())
                    } else {
                        None
                    },
                });
            }
        }
    }

    for th in &f.throttles {
        out.push(w(
            WarningCode::BlkioThrottle,
            format!("a blkio throttle applies to this run: {th}"),
            "expected for an emulated device; otherwise remove the cgroup limit",
            None,
        ));
    }

    for t in &run.tests {
        per_test(&mut out, run, t, f);
    }
    out
}

fn per_test(out: &mut Vec<Warning>, run: &RunRecord, t: &TestRecord, f: &TargetFacts) {
    // A replay (dbench) whose operations did not end with the status the loadfile expects
    // is not the workload it claims to be.
    if let Some(n) = t.extra.get("status_mismatches").and_then(|v| v.as_u64()) {
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
    let counts = if t.extra.get("workload").and_then(|v| v.as_str()) == Some("verify") {
        Some(&t.extra)
    } else {
        t.extra.get("verify").filter(|v| v.is_object())
    };
    if let Some(c) = counts {
        let n = c.get("failures").and_then(|v| v.as_u64()).unwrap_or(0);
        if n > 0 {
            let classes = c
                .get("classes")
                .and_then(|c| c.as_object())
                .map(|c| {
                    c.iter()
                        .filter(|(k, _)| k.as_str() != "ok")
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let checked = c.get("checked").and_then(|v| v.as_u64()).unwrap_or(0);
            // What was counted: blocks unless the check says otherwise (metadata: files).
            let unit = c.get("unit").and_then(|v| v.as_str()).unwrap_or("blocks");
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
    // The scrub test (the scrub-test workload): the filesystem left data unrepaired or wrong, or
    // repaired it but counted something else.
    if t.extra.get("workload").and_then(|v| v.as_str()) == Some("scrub-test") {
        let list = |key: &str| -> Vec<String> {
            t.extra
                .get(key)
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (problems, miscounts) = (list("problems"), list("miscounts"));
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
            "run more or longer passes (--runs, --duration, --until-stable) on a quiet machine",
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
            "add a warm-up pass (--warmup 1)",
            Some(t),
        ));
    }
    if t.summary.converged == Some(false) {
        // The block pass loop says in `extra.adaptive` what it aimed for and what stopped it.
        let adaptive = t.extra.get("adaptive");
        let target = adaptive
            .and_then(|a| a.get("target_pct"))
            .and_then(|v| v.as_f64())
            .map_or(String::new(), |p| format!(", above the ±{p}% aimed for"));
        let why = match adaptive
            .and_then(|a| a.get("stopped"))
            .and_then(|v| v.as_str())
        {
            Some("max-runs") => "--max-runs passes ran first",
            Some("max-time") => "--max-time of passes went by first",
            Some("budget") => "the run's --budget was used first",
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
    // A pass timed as a whole, without per-I/O latencies (a filesystem's scrub), has no
    // percentiles to doubt.
    if let Some(min_ios) = t.passes.iter().map(|p| p.ios).filter(|&n| n > 0).min() {
        if min_ios < MIN_IOS_FOR_P99 {
            out.push(w(
                WarningCode::FewIos,
                format!(
                    "a pass completed only {min_ios} I/Os: its p99 latency is the slowest \
                     few I/Os, not a percentile"
                ),
                "lengthen the passes (--duration) or enlarge the region (--size)",
                Some(t),
            ));
        }
    }
    // Someone else's I/O on the device (only meaningful when iolab's I/O goes straight
    // to it: direct I/O).
    if run.settings.direct {
        if let Some(dev) = &f.top_device {
            let mut worst: Option<(f64, u64)> = None;
            for p in &t.passes {
                if let Some(d) = p.context.activity.devices.iter().find(|d| &d.device == dev) {
                    let dev_bytes = d.read_bytes + d.write_bytes;
                    let foreign = dev_bytes.saturating_sub(p.bytes);
                    let share = foreign as f64 / p.bytes.max(1) as f64;
                    if foreign > 1 << 20
                        && share > FOREIGN_IO_SHARE
                        && worst.is_none_or(|(s, _)| share > s)
                    {
                        worst = Some((share, foreign));
                    }
                }
            }
            if let Some((share, foreign)) = worst {
                out.push(w(
                    WarningCode::BusyDevice,
                    format!(
                        "{dev} moved {} more than iolab did during a pass ({:.0}% on top of \
                         iolab's I/O): the device was shared",
                        format_bytes(foreign),
                        share * 100.0
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
                .map(|p| format!("{} {:.0}%", p.name, p.cpu_pct))
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
