//! Every warning code of docs/warnings.md, on run records built the way the engine builds
//! them (real latency histograms, `PassRecord::new`, `summarize`) and facts filled by hand:
//! each code fires when its condition holds, with the test it concerns and its key number
//! in the message, and stays quiet just on the other side of its threshold.

use std::time::Duration;

use iolab_measure::{
    Activity, CpuUsage, DeviceIo, DirResult, LatencyHistogram, PassRecord, ProcessCpu, RunRecord,
    SyncStats, TargetInfo, TargetKind, TestRecord, TimeSeries, Warning, WarningCode,
};
use iolab_spec::{DataPattern, EngineKind, JobSpec, RunSettings, Rw};
use iolab_stats::warnings::{analyze, TargetFacts, ThrottleFact};
use iolab_stats::{summarize, Score};

const MIB: u64 = 1 << 20;
/// Size of the test region of every run built here.
const REGION: u64 = 64 * MIB;
/// I/Os per pass unless a case says otherwise.
const IOS: u64 = 1000;

// --- building records ---------------------------------------------------------------------

/// `ios` I/Os moving `bytes` in `seconds`, latencies spread evenly over 50..150 µs.
fn dir(bytes: u64, ios: u64, seconds: f64) -> DirResult {
    let mut h = LatencyHistogram::new();
    for i in 0..ios {
        h.record(50_000 + 100_000 * i / (ios - 1).max(1));
    }
    DirResult::from_histogram(bytes, seconds, h)
}

/// A one-second pass of `rw` at `mb_s` MB/s (10^6 bytes) in `ios` I/Os.
fn pass_with(index: u32, rw: Rw, mb_s: f64, ios: u64) -> PassRecord {
    let bytes = (mb_s * 1e6).round() as u64;
    let (read, write) = match rw {
        Rw::Read | Rw::RandRead => (Some(dir(bytes, ios, 1.0)), None),
        Rw::Write | Rw::RandWrite => (None, Some(dir(bytes, ios, 1.0))),
        _ => (
            Some(dir(bytes / 2, ios / 2, 1.0)),
            Some(dir(bytes - bytes / 2, ios - ios / 2, 1.0)),
        ),
    };
    let p = PassRecord::new(
        index,
        1.0,
        read,
        write,
        None,
        CpuUsage::default(),
        TimeSeries {
            interval_ms: 100,
            bytes: vec![bytes / 10; 10],
            ..Default::default()
        },
    );
    assert!((p.mb_s - mb_s).abs() < 1e-6, "{} vs {mb_s}", p.mb_s);
    p
}

/// A test of `rw` whose passes ran at the given MB/s, `IOS` I/Os each.
fn test_of(name: &str, rw: Rw, mb_s: &[f64]) -> TestRecord {
    let passes = mb_s
        .iter()
        .enumerate()
        .map(|(i, &m)| pass_with(i as u32 + 1, rw, m, IOS))
        .collect();
    record(name, rw, passes)
}

fn record(name: &str, rw: Rw, passes: Vec<PassRecord>) -> TestRecord {
    TestRecord {
        name: name.to_string(),
        group: name.to_string(),
        job: JobSpec::new(rw, 4096, 1, 1),
        summary: summarize(&passes, Score::Median),
        passes,
        extra: Default::default(),
    }
}

/// A direct-I/O run on ext4 in a directory with three steady passes per test.
fn run_of(tests: Vec<TestRecord>) -> RunRecord {
    iolab_workloads::install();
    RunRecord {
        id: None,
        uuid: "7d3f2c1a-0000-4000-8000-000000000001".into(),
        iolab_version: "0.1.0".into(),
        preset: "custom".into(),
        workload: "block".into(),
        target: TargetInfo {
            path: "/mnt/t".into(),
            kind: TargetKind::Dir,
            io_path: "/mnt/t/iolab-1-00000001.dat".into(),
            fs_type: "ext4".into(),
            size: REGION,
        },
        settings: RunSettings {
            size: REGION,
            duration: Duration::from_secs(1),
            runs: 3,
            warmup_passes: 0,
            warmup_duration: Duration::from_secs(1),
            ramp: Duration::ZERO,
            engine: Some(engine("io_uring")),
            direct: true,
            data: DataPattern::Random,
            engine_opts: iolab_spec::engopt::EngineOpts::of([
                ("fixedbufs", iolab_spec::engopt::Val::Flag(true)),
                ("registerfiles", iolab_spec::engopt::Val::Flag(true)),
            ]),
        },
        engine: Some(engine("io_uring")),
        command_line: vec!["iolab".into(), "run".into()],
        label: None,
        started_at: "2025-01-01T00:00:00Z".into(),
        finished_at: Some("2025-01-01T00:00:10Z".into()),
        complete: true,
        notes: Vec::new(),
        warnings: Vec::new(),
        env: Default::default(),
        study: None,
        config_label: None,
        study_meta: serde_json::Value::Null,
        tests,
    }
}

const STEADY: [f64; 3] = [100.0, 101.0, 99.0];

fn read_run() -> RunRecord {
    run_of(vec![test_of("RR", Rw::RandRead, &STEADY)])
}

fn write_run() -> RunRecord {
    run_of(vec![test_of("RW", Rw::RandWrite, &STEADY)])
}

fn buffered(mut run: RunRecord) -> RunRecord {
    run.settings.direct = false;
    run
}

// --- checking warnings --------------------------------------------------------------------

fn codes(ws: &[Warning]) -> Vec<&str> {
    ws.iter().map(|w| w.code.as_str()).collect()
}

/// The one warning with `code`, which must concern `test` and carry every one of `needles`.
#[track_caller]
fn fired<'a>(ws: &'a [Warning], code: &str, test: Option<&str>, needles: &[&str]) -> &'a Warning {
    let hits: Vec<&Warning> = ws.iter().filter(|w| w.code.as_str() == code).collect();
    assert_eq!(hits.len(), 1, "expected one {code}: {ws:#?}");
    let w = hits[0];
    assert_eq!(
        w.test.as_deref(),
        test,
        "{code} concerns the wrong test: {w:#?}"
    );
    for n in needles {
        assert!(
            w.message.contains(n),
            "{code} message lacks {n:?}: {:?}",
            w.message
        );
    }
    assert!(!w.fix.is_empty(), "{code} has no fix");
    w
}

#[track_caller]
fn quiet(ws: &[Warning], code: &str) {
    assert!(!codes(ws).contains(&code), "unexpected {code}: {ws:#?}");
}

/// Nothing at all: the baseline every "quiet" case starts from raises no warning.
#[track_caller]
fn none(ws: &[Warning]) {
    assert!(ws.is_empty(), "expected no warnings: {ws:#?}");
}

#[test]
fn a_clean_run_raises_nothing() {
    none(&analyze(&read_run(), &TargetFacts::default()));
    none(&analyze(&write_run(), &TargetFacts::default()));
    let mixed = run_of(vec![test_of("MIX", Rw::RandRw, &STEADY)]);
    none(&analyze(&mixed, &TargetFacts::default()));
}

// --- page cache ---------------------------------------------------------------------------

fn with_residency(mut run: RunRecord, before: Option<f64>, after: Option<f64>) -> RunRecord {
    for t in &mut run.tests {
        for p in &mut t.passes {
            p.context.cache_resident_before = before;
            p.context.cache_resident_after = after;
        }
    }
    run
}

#[test]
fn page_cache_at_half_residency() {
    let f = TargetFacts::default();
    let run = buffered(with_residency(read_run(), Some(0.49), Some(0.49)));
    none(&analyze(&run, &f));

    let run = buffered(with_residency(read_run(), Some(0.5), Some(0.3)));
    let ws = analyze(&run, &f);
    fired(&ws, "PAGE_CACHE", Some("RR"), &["50%"]);
    assert_eq!(codes(&ws), ["PAGE_CACHE"]);

    // Residency found only after the pass counts too, and the message says how much.
    let run = buffered(with_residency(read_run(), Some(0.0), Some(0.97)));
    fired(&analyze(&run, &f), "PAGE_CACHE", Some("RR"), &["97%"]);

    // A sequential reader that filled the cache itself (resident only after) read from
    // the device.
    let seq = run_of(vec![test_of("SEQ", Rw::Read, &STEADY)]);
    let run = buffered(with_residency(seq.clone(), Some(0.02), Some(1.0)));
    none(&analyze(&run, &f));
    let run = buffered(with_residency(seq, Some(0.9), Some(1.0)));
    fired(&analyze(&run, &f), "PAGE_CACHE", Some("SEQ"), &["100%"]);

    // One resident pass is enough.
    let mut run = buffered(read_run());
    run.tests[0].passes[2].context.cache_resident_before = Some(1.0);
    fired(&analyze(&run, &f), "PAGE_CACHE", Some("RR"), &["100%"]);
}

#[test]
fn page_cache_only_for_buffered_reads() {
    let f = TargetFacts::default();
    // O_DIRECT: residency is irrelevant.
    none(&analyze(
        &with_residency(read_run(), Some(1.0), Some(1.0)),
        &f,
    ));
    // Writes are not served from the cache.
    let run = buffered(with_residency(write_run(), Some(1.0), Some(1.0)));
    none(&analyze(&run, &f));
    // Of two tests, only the read one is named.
    let run = buffered(with_residency(
        run_of(vec![
            test_of("W", Rw::Write, &STEADY),
            test_of("R", Rw::Read, &STEADY),
        ]),
        Some(0.8),
        Some(0.8),
    ));
    fired(&analyze(&run, &f), "PAGE_CACHE", Some("R"), &["80%"]);
}

#[test]
fn page_cache_possible_when_the_file_fits_in_memory() {
    let fits = TargetFacts {
        mem_available: Some(REGION + 1),
        ..TargetFacts::default()
    };
    let ws = analyze(&buffered(read_run()), &fits);
    fired(&ws, "PAGE_CACHE_POSSIBLE", None, &["64 MiB"]);
    assert_eq!(codes(&ws), ["PAGE_CACHE_POSSIBLE"]);

    let larger = TargetFacts {
        mem_available: Some(REGION),
        ..TargetFacts::default()
    };
    none(&analyze(&buffered(read_run()), &larger));
    // Direct I/O, or write-only tests: not a concern.
    none(&analyze(&read_run(), &fits));
    none(&analyze(&buffered(write_run()), &fits));
    // When a pass was found resident, PAGE_CACHE says it and the "possible" is dropped.
    let run = buffered(with_residency(read_run(), Some(0.9), None));
    let ws = analyze(&run, &fits);
    assert_eq!(codes(&ws), ["PAGE_CACHE"]);
}

#[test]
fn idle_reclaim_for_buffered_reads_only() {
    let damon = TargetFacts {
        idle_reclaim: vec!["pageout of memory idle for 30 s (DAMON kdamond 0)".into()],
        ..TargetFacts::default()
    };
    let ws = analyze(&buffered(read_run()), &damon);
    fired(
        &ws,
        "IDLE_RECLAIM",
        None,
        &["idle for 30 s", "DAMON kdamond 0"],
    );
    assert_eq!(codes(&ws), ["IDLE_RECLAIM"]);
    // Direct reads, buffered writes, or no such mechanism: nothing.
    none(&analyze(&read_run(), &damon));
    none(&analyze(&buffered(write_run()), &damon));
    none(&analyze(&buffered(read_run()), &TargetFacts::default()));
}

// --- direct I/O that is not ---------------------------------------------------------------

#[test]
fn direct_io_ignored_on_tmpfs_or_when_the_probe_succeeds() {
    let honoured = TargetFacts {
        direct_honoured: Some(true),
        ..TargetFacts::default()
    };
    none(&analyze(&read_run(), &honoured));

    let ignored = TargetFacts {
        direct_honoured: Some(false),
        ..TargetFacts::default()
    };
    let ws = analyze(&read_run(), &ignored);
    fired(
        &ws,
        "DIRECT_IO_IGNORED",
        None,
        &["ext4", "probe was served from the page cache"],
    );
    assert_eq!(codes(&ws), ["DIRECT_IO_IGNORED"]);

    for fs in ["tmpfs", "ramfs"] {
        let mut run = read_run();
        run.target.fs_type = fs.into();
        // Even when the probe could not tell.
        fired(
            &analyze(&run, &TargetFacts::default()),
            "DIRECT_IO_IGNORED",
            None,
            &[fs, "memory filesystem"],
        );
        // Buffered I/O did not ask for O_DIRECT.
        none(&analyze(&buffered(run), &ignored));
    }
}

#[test]
fn direct_io_below_the_btrfs_sector_is_flagged_per_test() {
    let f = TargetFacts {
        direct_honoured: Some(true),
        direct_io_sector: Some(4096),
        ..TargetFacts::default()
    };
    let mut small = test_of("512", Rw::Read, &STEADY);
    small.job.bs = 512;
    let mut run = run_of(vec![small, test_of("4K", Rw::Read, &STEADY)]);
    run.tests[1].job.bs = 4096;
    run.target.fs_type = "btrfs".into();
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "DIRECT_IO_IGNORED",
        Some("512"),
        &["btrfs", "4096-byte sector"],
    );
    assert_eq!(codes(&ws), ["DIRECT_IO_IGNORED"], "only the 512-byte test");
    // Buffered runs asked for the page cache.
    none(&analyze(&buffered(run), &f));
}

#[test]
fn loop_without_dio_only_with_direct_io() {
    let f = TargetFacts {
        loop_without_dio: vec!["loop3".into()],
        ..TargetFacts::default()
    };
    let ws = analyze(&read_run(), &f);
    fired(&ws, "LOOP_WITHOUT_DIO", None, &["loop3"]);
    assert_eq!(codes(&ws), ["LOOP_WITHOUT_DIO"]);
    none(&analyze(&buffered(read_run()), &f));
    none(&analyze(&read_run(), &TargetFacts::default()));
}

// --- data the medium never sees -------------------------------------------------------------

#[test]
fn compressible_data_only_zeros_written_to_a_compressing_fs() {
    let zstd = TargetFacts {
        compression: Some("zstd".into()),
        ..TargetFacts::default()
    };
    let mut zeros = write_run();
    zeros.settings.data = DataPattern::Zeros;
    let ws = analyze(&zeros, &zstd);
    fired(&ws, "COMPRESSIBLE_DATA", None, &["zstd"]);
    assert_eq!(codes(&ws), ["COMPRESSIBLE_DATA"]);

    // Random data, no compression, or nothing written: quiet.
    none(&analyze(&write_run(), &zstd));
    none(&analyze(&zeros, &TargetFacts::default()));
    let mut zero_reads = read_run();
    zero_reads.settings.data = DataPattern::Zeros;
    none(&analyze(&zero_reads, &zstd));
}

#[test]
fn sparse_read_only_for_pre_existing_files() {
    let alloc = |bytes: u64| TargetFacts {
        allocated_bytes: Some(bytes),
        ..TargetFacts::default()
    };
    let file = |mut run: RunRecord| {
        run.target.kind = TargetKind::File;
        run.target.io_path = "/mnt/t/data".into();
        run
    };
    // 90% of the region allocated is enough; less is sparse.
    none(&analyze(&file(read_run()), &alloc(REGION * 9 / 10 + 1)));
    let sparse = REGION * 89 / 100 / 4096 * 4096;
    let ws = analyze(&file(read_run()), &alloc(sparse));
    let w = fired(&ws, "SPARSE_READ", None, &["64 MiB"]);
    assert!(
        w.message.contains(&iolab_spec::format_bytes(sparse)),
        "{w:?}"
    );
    assert_eq!(codes(&ws), ["SPARSE_READ"]);
    fired(
        &analyze(&file(read_run()), &alloc(0)),
        "SPARSE_READ",
        None,
        &["0 B"],
    );

    // Not for directories or devices (iolab's own file, or no file), nor without reads.
    for kind in [TargetKind::Dir, TargetKind::Device] {
        let mut run = read_run();
        run.target.kind = kind;
        none(&analyze(&run, &alloc(0)));
    }
    none(&analyze(&file(write_run()), &alloc(0)));
    // Unknown allocation: nothing to say.
    none(&analyze(&file(read_run()), &TargetFacts::default()));
}

// --- flushes that do not reach stable storage ---------------------------------------------

#[test]
fn no_barrier_for_nobarrier_and_barrier_0() {
    let opts = |o: &str| TargetFacts {
        mount_options: Some(o.into()),
        ..TargetFacts::default()
    };
    for o in [
        "rw,relatime,nobarrier",
        "rw,barrier=0,data=ordered",
        "barrier=0",
    ] {
        let ws = analyze(&write_run(), &opts(o));
        fired(&ws, "NO_BARRIER", None, &["barrier"]);
        assert_eq!(codes(&ws), ["NO_BARRIER"], "{o}");
        // A read-only run flushes nothing.
        none(&analyze(&read_run(), &opts(o)));
    }
    for o in ["rw,relatime,barrier=1", "rw,barrier", "rw,barrier=01"] {
        none(&analyze(&write_run(), &opts(o)));
    }
    // Mixed tests write too.
    let mixed = run_of(vec![test_of("MIX", Rw::RandRw, &STEADY)]);
    fired(
        &analyze(&mixed, &opts("nobarrier")),
        "NO_BARRIER",
        None,
        &[],
    );
}

#[test]
fn zfs_sync_disabled_with_writes() {
    let f = TargetFacts {
        zfs_sync_disabled: true,
        ..TargetFacts::default()
    };
    let ws = analyze(&write_run(), &f);
    fired(&ws, "ZFS_SYNC_DISABLED", None, &["sync=disabled"]);
    assert_eq!(codes(&ws), ["ZFS_SYNC_DISABLED"]);
    none(&analyze(&read_run(), &f));
    none(&analyze(&write_run(), &TargetFacts::default()));
}

#[test]
fn write_through_drops_flush_only_with_write_tests() {
    let f = TargetFacts {
        write_through: vec!["loop5".into()],
        ..TargetFacts::default()
    };
    let ws = analyze(&write_run(), &f);
    fired(
        &ws,
        "WRITE_THROUGH_DROPS_FLUSH",
        None,
        &["loop5", "write through"],
    );
    assert_eq!(codes(&ws), ["WRITE_THROUGH_DROPS_FLUSH"]);
    none(&analyze(&read_run(), &f));
    // Buffered writes are flushed as well: still raised.
    fired(
        &analyze(&buffered(write_run()), &f),
        "WRITE_THROUGH_DROPS_FLUSH",
        None,
        &[],
    );
}

/// A write run whose passes each flushed three times, `mean_us` on average.
fn fsync_run(mean_us: u64) -> RunRecord {
    let mut run = write_run();
    for p in &mut run.tests[0].passes {
        let mut h = LatencyHistogram::new();
        for d in [-100i64, 0, 100] {
            h.record(((mean_us as i64 + d) * 1000) as u64);
        }
        p.sync = Some(SyncStats {
            count: 3,
            lat_us: h.summary_us(),
        });
    }
    run
}

/// `run fsync` on a starved host: the fdatasync calls' median took 7.2 ms, while an
/// O_DIRECT+O_DSYNC write took 913 µs beyond a plain one, which its durability verdict
/// judged a volatile cache. The warning rests on the verdicts' figure, so it names that
/// method and not fdatasync: the warning and the verdicts agree.
#[test]
fn fsync_too_fast_judges_the_figure_the_durability_verdict_judged() {
    let judged = |us: f64| {
        serde_json::json!({
            "workload": "fsync",
            "durability": {"verdict": "as_far_as_timing_shows", "flush_us": us, "evidence": ""}
        })
    };
    let mut run = fsync_run(7225);
    run.workload = "fsync".into();
    run.tests[0].extra = judged(7225.0);
    let mut dsync = run.tests[0].clone();
    dsync.name = "O_DIRECT+O_DSYNC 4K".into();
    for p in &mut dsync.passes {
        p.sync = None;
    }
    dsync.extra = judged(913.0);
    run.tests.push(dsync);
    let rot = TargetFacts {
        rotational: Some(true),
        ..TargetFacts::default()
    };
    let ws = analyze(&run, &rot);
    fired(
        &ws,
        "FSYNC_TOO_FAST",
        Some("O_DIRECT+O_DSYNC 4K"),
        &["913 µs"],
    );
    // Its flush calls alone would not have fired: without the verdict's figure, none.
    run.tests.truncate(1);
    none(&analyze(&run, &rot));
}

#[test]
fn fsync_too_fast_only_on_rotational_devices() {
    let rot = |r: Option<bool>| TargetFacts {
        rotational: r,
        ..TargetFacts::default()
    };
    let ws = analyze(&fsync_run(500), &rot(Some(true)));
    fired(&ws, "FSYNC_TOO_FAST", Some("RW"), &["500 µs"]);
    assert_eq!(codes(&ws), ["FSYNC_TOO_FAST"]);
    // An SSD, or an unknown device, flushes that fast legitimately.
    none(&analyze(&fsync_run(500), &rot(Some(false))));
    none(&analyze(&fsync_run(500), &rot(None)));
    // A disk that takes a few ms per flush is real.
    none(&analyze(&fsync_run(4000), &rot(Some(true))));
    // No flushes measured: nothing to judge.
    none(&analyze(&write_run(), &rot(Some(true))));
}

/// A busy machine stretches a few flush calls by its scheduling delay: a cache that answers
/// in 50 µs still shows (the median is the cache's), though those calls raise the mean past
/// the 1 ms floor.
#[test]
fn fsync_too_fast_judges_the_median_flush_not_a_mean_stretched_by_scheduling() {
    let mut run = write_run();
    for p in &mut run.tests[0].passes {
        let mut h = LatencyHistogram::new();
        for i in 0..100u64 {
            h.record(if i % 5 == 0 { 20_000_000 } else { 50_000 });
        }
        p.sync = Some(SyncStats {
            count: 100,
            lat_us: h.summary_us(),
        });
        assert!(p.sync.as_ref().unwrap().lat_us.mean > 1000.0);
    }
    let facts = TargetFacts {
        rotational: Some(true),
        ..TargetFacts::default()
    };
    fired(
        &analyze(&run, &facts),
        "FSYNC_TOO_FAST",
        Some("RW"),
        &["50 µs"],
    );
}

#[test]
fn blkio_throttle_names_the_limit() {
    let th = "loop0 write_bps = 20 MiB/s on 7:0 (cgroup /sys/fs/cgroup/blkio/x)";
    let f = throttled(th, "/sys/fs/cgroup/blkio/x", "write_bps", 20 * MIB);
    for run in [read_run(), write_run(), buffered(read_run())] {
        let ws = analyze(&run, &f);
        fired(&ws, "BLKIO_THROTTLE", None, &[th]);
    }
    none(&analyze(&read_run(), &TargetFacts::default()));
}

/// Target facts with one throttle and nothing else.
fn throttled(text: &str, cgroup: &str, kind: &str, limit: u64) -> TargetFacts {
    TargetFacts {
        throttles: vec![throttle(text, cgroup, kind, limit)],
        ..TargetFacts::default()
    }
}

fn throttle(text: &str, cgroup: &str, kind: &str, limit: u64) -> ThrottleFact {
    ThrottleFact {
        text: text.into(),
        cgroup: cgroup.into(),
        kind: kind.into(),
        limit,
        device: "loop0".into(),
    }
}

/// Half of a 20 MiB/s cap, in MB/s: what a throttle that charges every I/O twice lets by.
const HALF_CAP: [f64; 3] = [10.49, 10.48, 10.5];

/// A direct 1 MiB sequential read run at `mb_s` whose device loop0 completed `per_io`
/// requests per I/O, with iolab's own uncounted bytes (ramp, drain) at `own` of each
/// pass's bytes: the device's requests cover those too.
fn split_run(mb_s: &[f64], per_io: f64, own: f64) -> RunRecord {
    let mut t = test_of("SR", Rw::Read, mb_s);
    t.job.bs = MIB;
    for p in &mut t.passes {
        let own_bytes = (p.bytes as f64 * own) as u64;
        // Whole MiB on the device (what it moved for iolab, its own uncounted bytes included).
        let ios = (p.bytes + own_bytes) / MIB;
        p.context.activity.own_uncounted_bytes = own_bytes;
        p.context.activity.devices = vec![DeviceIo {
            device: "loop0".into(),
            read_bytes: ios * MIB - own_bytes,
            write_bytes: 0,
            read_requests: (ios as f64 * per_io).round() as u64,
            write_requests: 0,
        }];
    }
    run_of(vec![t])
}

#[test]
fn throttle_split_when_the_throttled_device_took_each_io_in_parts() {
    let th = "loop0 read_bps = 20 MiB/s on 7:0 (cgroup /sys/fs/cgroup/blkio/x)";
    let read_cap = throttled(th, "/sys/fs/cgroup/blkio/x", "read_bps", 20 * MIB);
    let ws = analyze(&split_run(&HALF_CAP, 2.0, 0.0), &read_cap);
    fired(
        &ws,
        "THROTTLE_SPLIT",
        Some("SR"),
        &[
            "loop0",
            "1 MiB I/O as 2.0 requests of 512 KiB",
            th,
            "measured 10.49 MB/s against a cap of 20.97 MB/s (50%)",
        ],
    );
    fired(&ws, "BLKIO_THROTTLE", None, &[th]);
    // Four parts each, counting the ramp's requests and bytes alike.
    fired(
        &analyze(&split_run(&HALF_CAP, 4.0, 0.5), &read_cap),
        "THROTTLE_SPLIT",
        Some("SR"),
        &["4.0 requests of 256 KiB"],
    );
    let not_split = |run: RunRecord, f: &TargetFacts| {
        let ws = analyze(&run, f);
        assert!(
            ws.iter().all(|w| w.code.as_str() != "THROTTLE_SPLIT"),
            "{ws:#?}"
        );
    };
    // Whole I/Os (the ramp's bytes are iolab's, so its requests do not count against it),
    // merged ones, buffered I/O (the page cache decides the requests), a throttle on the
    // other direction, and records that have no request counts.
    not_split(split_run(&HALF_CAP, 1.0, 0.5), &read_cap);
    not_split(split_run(&HALF_CAP, 0.5, 0.0), &read_cap);
    not_split(buffered(split_run(&HALF_CAP, 2.0, 0.0)), &read_cap);
    let write_cap = throttled(th, "/sys/fs/cgroup/blkio/x", "write_bps", 20 * MIB);
    not_split(split_run(&HALF_CAP, 2.0, 0.0), &write_cap);
    not_split(split_run(&HALF_CAP, 0.0, 0.0), &read_cap);
    // Split, but at the cap all the same: the parts were charged once (bios a filesystem
    // built at the device's size, say).
    not_split(split_run(&[20.97, 20.96, 20.98], 4.0, 0.0), &read_cap);
    // An IOPS cap is set against the test's IOPS: 1000 per pass of 1 s here.
    let iops_cap = |limit| throttled(th, "/sys/fs/cgroup/blkio/x", "read_iops", limit);
    let ws = analyze(&split_run(&HALF_CAP, 2.0, 0.0), &iops_cap(2000));
    fired(
        &ws,
        "THROTTLE_SPLIT",
        Some("SR"),
        &[
            "2.0 requests",
            "measured 1000 IOPS against a cap of 2000 IOPS (50%)",
        ],
    );
    not_split(split_run(&HALF_CAP, 2.0, 0.0), &iops_cap(1000));
}

// --- other activity -----------------------------------------------------------------------

/// A direct read run whose device `loop7` moved iolab's bytes plus `foreign` in pass 2.
fn shared_device(iolab_mb_s: f64, foreign: u64) -> RunRecord {
    let mut run = run_of(vec![test_of("RR", Rw::RandRead, &[iolab_mb_s; 3])]);
    for p in &mut run.tests[0].passes {
        let extra = if p.index == 2 { foreign } else { 0 };
        p.context.activity.devices = vec![
            DeviceIo {
                device: "loop7".into(),
                read_bytes: p.bytes + extra,
                write_bytes: 0,
                read_requests: 0,
                write_requests: 0,
            },
            // Another device's traffic never counts.
            DeviceIo {
                device: "vda".into(),
                read_bytes: 0,
                write_bytes: 1 << 30,
                read_requests: 0,
                write_requests: 0,
            },
        ];
    }
    run
}

#[test]
fn busy_device_beyond_1_mib_and_10_percent() {
    let f = TargetFacts {
        top_device: Some("loop7".into()),
        ..TargetFacts::default()
    };
    // iolab moved 4 MB per pass: 1 MiB more is 26%, but not more than 1 MiB.
    none(&analyze(&shared_device(4.0, MIB), &f));
    let ws = analyze(&shared_device(4.0, MIB + 4096), &f);
    fired(&ws, "BUSY_DEVICE", Some("RR"), &["loop7", "1 MiB", "26%"]);
    assert_eq!(codes(&ws), ["BUSY_DEVICE"]);

    // iolab moved 100 MB: exactly 10% more is not shared, a little more is.
    none(&analyze(&shared_device(100.0, 10_000_000), &f));
    fired(
        &analyze(&shared_device(100.0, 10_000_000 + 100_000), &f),
        "BUSY_DEVICE",
        Some("RR"),
        &["loop7", "10%"],
    );
    // Writes by others count as well as reads.
    let mut run = shared_device(4.0, 0);
    run.tests[0].passes[0].context.activity.devices[0].write_bytes = 64 * MIB;
    fired(&analyze(&run, &f), "BUSY_DEVICE", Some("RR"), &["64 MiB"]);

    // Buffered I/O: the device sees readahead and writeback, not iolab's bytes.
    none(&analyze(&buffered(shared_device(4.0, 64 * MIB)), &f));
    // The busy device is not the target's.
    let other = TargetFacts {
        top_device: Some("loop8".into()),
        ..TargetFacts::default()
    };
    none(&analyze(&shared_device(4.0, 64 * MIB), &other));
    none(&analyze(
        &shared_device(4.0, 64 * MIB),
        &TargetFacts::default(),
    ));
}

/// The share of a device's other traffic is a number people can read: a percentage up to
/// ten times iolab's I/O, then a multiple, and no ratio of nothing (a pass of 0 bytes read
/// "19296256000% on top of iolab's I/O").
#[test]
fn busy_device_says_a_share_that_can_be() {
    let f = TargetFacts {
        top_device: Some("loop7".into()),
        ..TargetFacts::default()
    };
    let mut run = shared_device(4.0, 0);
    let p = &mut run.tests[0].passes[1];
    p.bytes = 0;
    p.context.activity.devices[0].read_bytes = 192_962_560;
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "BUSY_DEVICE",
        Some("RR"),
        &["loop7", "while iolab's I/O moved nothing"],
    );
    assert!(!ws[0].message.contains('%'), "{}", ws[0].message);
    let mut run = shared_device(4.0, 0);
    let p = &mut run.tests[0].passes[1];
    p.bytes = 4096;
    p.context.activity.devices[0].read_bytes = 4096 + (1 << 30);
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "BUSY_DEVICE",
        Some("RR"),
        &["1 GiB", "262144 times iolab's I/O"],
    );
    assert!(!ws[0].message.contains('%'), "{}", ws[0].message);
}

fn busy_cpu(pct: f64) -> RunRecord {
    let mut run = read_run();
    run.tests[0].passes[1].context.activity = Activity {
        devices: Vec::new(),
        other_cpu_pct: pct,
        top_processes: vec![ProcessCpu {
            pid: 4242,
            name: "burner".into(),
            cpu_pct: pct - 1.0,
        }],
        ..Activity::default()
    };
    run
}

#[test]
fn busy_cpu_above_25_percent_names_the_process() {
    let f = TargetFacts::default();
    none(&analyze(&busy_cpu(24.0), &f));
    none(&analyze(&busy_cpu(25.0), &f));
    let ws = analyze(&busy_cpu(26.0), &f);
    fired(
        &ws,
        "BUSY_CPU",
        Some("RR"),
        &["26%", "pass 2", "burner (pid 4242) 25%"],
    );
    assert_eq!(codes(&ws), ["BUSY_CPU"]);
    // Many small processes: no names, still busy.
    let mut run = busy_cpu(80.0);
    run.tests[0].passes[1]
        .context
        .activity
        .top_processes
        .clear();
    fired(
        &analyze(&run, &f),
        "BUSY_CPU",
        Some("RR"),
        &["80%", "many small ones"],
    );
    // Buffered runs too.
    fired(
        &analyze(&buffered(busy_cpu(26.0)), &f),
        "BUSY_CPU",
        Some("RR"),
        &["26%"],
    );
}

// --- the passes themselves ----------------------------------------------------------------

#[test]
fn high_variation_above_10_percent() {
    let f = TargetFacts::default();
    // Sample standard deviation of (100 - x, 100, 100 + x) is x: CV x%.
    none(&analyze(
        &run_of(vec![test_of("T", Rw::Read, &[91.0, 100.0, 109.0])]),
        &f,
    ));
    none(&analyze(
        &run_of(vec![test_of("T", Rw::Read, &[90.5, 100.0, 109.5])]),
        &f,
    ));
    let run = run_of(vec![
        test_of("Steady", Rw::Read, &STEADY),
        test_of("Noisy", Rw::Read, &[89.0, 100.0, 111.0]),
    ]);
    let ws = analyze(&run, &f);
    fired(&ws, "HIGH_VARIATION", Some("Noisy"), &["11%", "3 passes"]);
    assert_eq!(codes(&ws), ["HIGH_VARIATION"]);
    // One pass has no spread.
    none(&analyze(
        &run_of(vec![test_of("T", Rw::Read, &[100.0])]),
        &f,
    ));
}

#[test]
fn outlier_pass_is_named_with_its_speed() {
    let f = TargetFacts::default();
    let run = run_of(vec![test_of(
        "T",
        Rw::Read,
        &[100.0, 101.0, 99.0, 100.0, 150.0],
    )]);
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "OUTLIER_PASS",
        Some("T"),
        &["pass 5", "150.0 MB/s", "100.0 MB/s"],
    );
    // 103 is 2 MADs away (z 2.0), 104.5 is far in MADs but within 5% of the median.
    none(&analyze(
        &run_of(vec![test_of(
            "T",
            Rw::Read,
            &[100.0, 101.0, 99.0, 100.0, 103.0],
        )]),
        &f,
    ));
    none(&analyze(
        &run_of(vec![test_of(
            "T",
            Rw::Read,
            &[100.0, 100.1, 99.9, 100.0, 104.5],
        )]),
        &f,
    ));
}

#[test]
fn slow_first_pass_below_80_percent() {
    let f = TargetFacts::default();
    let ws = analyze(
        &run_of(vec![test_of("T", Rw::Read, &[79.0, 100.0, 100.0])]),
        &f,
    );
    fired(
        &ws,
        "SLOW_FIRST_PASS",
        Some("T"),
        &["79.0 MB/s", "median 100.0"],
    );
    // The slow pass also spreads the passes.
    assert_eq!(codes(&ws), ["HIGH_VARIATION", "SLOW_FIRST_PASS"]);
    quiet(
        &analyze(
            &run_of(vec![test_of("T", Rw::Read, &[81.0, 100.0, 100.0])]),
            &f,
        ),
        "SLOW_FIRST_PASS",
    );
    // Two passes are not enough to call the first one slow.
    quiet(
        &analyze(&run_of(vec![test_of("T", Rw::Read, &[50.0, 100.0])]), &f),
        "SLOW_FIRST_PASS",
    );
    // A slow last pass is not a warm-up.
    quiet(
        &analyze(
            &run_of(vec![test_of("T", Rw::Read, &[100.0, 100.0, 79.0])]),
            &f,
        ),
        "SLOW_FIRST_PASS",
    );
}

#[test]
fn not_converged_when_until_stable_gave_up() {
    let f = TargetFacts::default();
    let mut run = run_of(vec![test_of("T", Rw::Read, &[100.0, 101.0, 99.0, 100.0])]);
    run.tests[0].summary.converged = Some(false);
    fired(
        &analyze(&run, &f),
        "NOT_CONVERGED",
        Some("T"),
        &["4 passes"],
    );
    assert_eq!(codes(&analyze(&run, &f)), ["NOT_CONVERGED"]);
    run.tests[0].summary.converged = Some(true);
    none(&analyze(&run, &f));
    run.tests[0].summary.converged = None;
    none(&analyze(&run, &f));
}

#[test]
fn few_ios_below_100_in_any_pass() {
    let f = TargetFacts::default();
    let with_ios = |ios: u64| {
        let passes = vec![
            pass_with(1, Rw::Read, 100.0, 5000),
            pass_with(2, Rw::Read, 101.0, ios),
            pass_with(3, Rw::Read, 99.0, 5000),
        ];
        run_of(vec![record("SEQ", Rw::Read, passes)])
    };
    none(&analyze(&with_ios(100), &f));
    // A pass with no per-I/O latencies at all (timed as a whole) has no p99 to doubt.
    none(&analyze(&with_ios(0), &f));
    let ws = analyze(&with_ios(99), &f);
    fired(&ws, "FEW_IOS", Some("SEQ"), &["only 99 I/Os"]);
    assert_eq!(codes(&ws), ["FEW_IOS"]);
}

#[test]
fn status_mismatch_when_a_replay_disagrees_with_its_loadfile() {
    let f = TargetFacts::default();
    let mut run = run_of(vec![test_of(
        "dbench 2 clients",
        Rw::Rw,
        &[100.0, 101.0, 99.0],
    )]);
    run.tests[0].extra = serde_json::json!({ "status_mismatches": 0 });
    none(&analyze(&run, &f));
    run.tests[0].extra = serde_json::json!({ "status_mismatches": 7 });
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "STATUS_MISMATCH",
        Some("dbench 2 clients"),
        &["7 operations"],
    );
    assert_eq!(codes(&ws), ["STATUS_MISMATCH"]);
}

#[test]
fn data_mismatch_when_verified_blocks_read_back_wrong() {
    let f = TargetFacts::default();
    let mut run = run_of(vec![test_of(
        "verify randwrite 4K",
        Rw::RandWrite,
        &[100.0, 101.0, 99.0],
    )]);
    let extra = |failures: u64| {
        serde_json::json!({
            "workload": "verify",
            "checked": 2048,
            "failures": failures,
            "classes": { "ok": 2048 - failures, "stale": failures },
        })
    };
    run.tests[0].extra = extra(0);
    none(&analyze(&run, &f));
    // The same count from another workload is not a verification result.
    run.tests[0].extra = serde_json::json!({ "workload": "copy", "failures": 3 });
    none(&analyze(&run, &f));
    run.tests[0].extra = extra(3);
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "DATA_MISMATCH",
        Some("verify randwrite 4K"),
        &["3 of 2048 blocks", "stale 3"],
    );
    assert_eq!(codes(&ws), ["DATA_MISMATCH"]);
    // A streams test written with --verify carries the same counts under `verify`.
    run.tests[0].extra = serde_json::json!({ "workload": "streams", "verify": extra(0) });
    none(&analyze(&run, &f));
    run.tests[0].extra = serde_json::json!({ "workload": "streams", "verify": extra(2) });
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "DATA_MISMATCH",
        Some("verify randwrite 4K"),
        &["2 of 2048 blocks"],
    );
    // Metadata checks whole files and says so.
    let mut files = extra(1);
    files["unit"] = "files".into();
    run.tests[0].extra = serde_json::json!({ "workload": "metadata", "verify": files });
    fired(
        &analyze(&run, &f),
        "DATA_MISMATCH",
        Some("verify randwrite 4K"),
        &["1 of 2048 files"],
    );
}

#[test]
fn scrub_not_repaired_and_miscounted_from_the_scrub_test() {
    let f = TargetFacts::default();
    let mut run = run_of(vec![test_of("scrub", Rw::Read, &[800.0])]);
    let extra = |problems: &[&str], miscounts: &[&str]| {
        serde_json::json!({
            "workload": "scrub-test",
            "passed": problems.is_empty() && miscounts.is_empty(),
            "problems": problems,
            "miscounts": miscounts,
        })
    };
    run.tests[0].extra = extra(&[], &[]);
    none(&analyze(&run, &f));
    // The same lists from another workload are not a scrub verdict.
    run.tests[0].extra = serde_json::json!({ "problems": ["x"], "miscounts": ["y"] });
    none(&analyze(&run, &f));
    run.tests[0].extra = extra(&[], &["detected: expected 32, the filesystem reported 20"]);
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "SCRUB_MISCOUNTED",
        Some("scrub"),
        &["expected 32, the filesystem reported 20"],
    );
    assert_eq!(codes(&ws), ["SCRUB_MISCOUNTED"]);
    // A data problem outranks a miscount: one warning, about the data.
    run.tests[0].extra = extra(
        &[
            "4 of 8 corrupted copies read back intact",
            "iolab's verify found 4 bad block(s)",
        ],
        &["detected: expected 8, the filesystem reported 6"],
    );
    let ws = analyze(&run, &f);
    fired(
        &ws,
        "SCRUB_NOT_REPAIRED",
        Some("scrub"),
        &["2 problem(s)", "4 of 8 corrupted copies"],
    );
    assert_eq!(codes(&ws), ["SCRUB_NOT_REPAIRED"]);
}

#[test]
fn every_code_analyze_raises_is_documented_and_covered_here() {
    // docs/warnings.md is rendered from the enum (iolab-measure's warning_docs test), so a
    // documented code is a known variant with its text.
    let documented: Vec<&str> = WarningCode::ALL
        .iter()
        .filter(|c| {
            c.doc()
                .is_some_and(|d| !d.when.is_empty() && !d.fix.is_empty())
        })
        .map(|c| c.as_str())
        .collect();
    assert_eq!(documented.len(), WarningCode::ALL.len());
    // The codes `analyze` can raise: every variant its source names (`WarningCode::Name`
    // not followed by more of an identifier).
    let source = include_str!("../src/warnings.rs");
    let names = |c: &WarningCode| {
        let variant = format!("WarningCode::{c:?}");
        source.match_indices(&variant).any(|(i, m)| {
            !source[i + m.len()..].starts_with(|ch: char| ch.is_ascii_alphanumeric() || ch == '_')
        })
    };
    let raised: Vec<&str> = WarningCode::ALL
        .iter()
        .filter(|c| names(c))
        .map(|c| c.as_str())
        .collect();
    assert!(raised.len() >= 18, "{raised:?}");
    let here = include_str!("warnings.rs");
    for code in &raised {
        assert!(
            documented.contains(code),
            "{code} is raised but not documented"
        );
        // Each is checked by `fired` in a case of this file.
        assert!(
            here.contains(&format!("\"{code}\",")),
            "{code} is raised but no case here checks it"
        );
    }
    // Codes raised elsewhere (workloads) are documented too, but tested with them.
    let elsewhere: Vec<&&str> = documented.iter().filter(|c| !raised.contains(c)).collect();
    println!("documented codes raised outside analyze: {elsewhere:?}");
}

// --- right or silent, with a fix that changes the result (issue 12) -----------------------

/// `run` as a run of `workload` (copy, streams, metadata, dbench, fsync) with `extra` on
/// every test.
fn as_workload(mut run: RunRecord, workload: &str, extra: serde_json::Value) -> RunRecord {
    run.workload = workload.into();
    run.preset = workload.into();
    run.settings.direct = false;
    for t in &mut run.tests {
        t.extra = extra.clone();
    }
    run
}

#[test]
fn slow_first_pass_only_when_the_first_is_the_slowest() {
    let f = TargetFacts::default();
    // Below 80% of the others' median, but pass 2 was slower still: spread, not a warm-up.
    let ws = analyze(
        &run_of(vec![test_of("T", Rw::Read, &[100.0, 70.0, 140.0, 140.0])]),
        &f,
    );
    quiet(&ws, "SLOW_FIRST_PASS");
    // A run that warmed up already is told to warm up more, not to add what it had.
    let mut run = run_of(vec![test_of("T", Rw::Read, &[70.0, 100.0, 100.0])]);
    run.settings.warmup_passes = 1;
    run.settings.warmup_duration = Duration::from_secs(2);
    let ws = analyze(&run, &f);
    let w = fired(&ws, "SLOW_FIRST_PASS", Some("T"), &["70.0 MB/s"]);
    assert!(w.fix.contains("--warmup 2"), "{}", w.fix);
    assert!(w.fix.contains("--warmup-time above 2s"), "{}", w.fix);
    assert!(!w.fix.contains("--warmup 1"), "{}", w.fix);
    run.settings.warmup_passes = 0;
    let ws = analyze(&run, &f);
    assert!(fired(&ws, "SLOW_FIRST_PASS", Some("T"), &[])
        .fix
        .contains("--warmup 1"));
    // A copy has no warm-up: reading its source cold every pass is what changes it.
    let copy = as_workload(run.clone(), "copy", serde_json::json!({"workload": "copy"}));
    let ws = analyze(&copy, &f);
    let fix = &fired(&ws, "SLOW_FIRST_PASS", Some("T"), &[]).fix;
    assert!(
        fix.contains("--drop-caches") && !fix.contains("--warmup"),
        "{fix}"
    );
    // dbench warms up for a time.
    let dbench = as_workload(
        run,
        "dbench",
        serde_json::json!({"workload": "dbench", "warmup_seconds": 12.0}),
    );
    let ws = analyze(&dbench, &f);
    let fix = &fired(&ws, "SLOW_FIRST_PASS", Some("T"), &[]).fix;
    assert!(
        fix.contains("a longer --warmup (this run warmed up for 12s)"),
        "{fix}"
    );
}

#[test]
fn idle_reclaim_only_where_data_can_sit_idle_and_never_about_an_unused_option() {
    let damon = TargetFacts {
        idle_reclaim: vec!["pageout of memory idle for 30 s (DAMON kdamond 0)".into()],
        idle_reclaim_after: Some(Duration::from_secs(30)),
        ..TargetFacts::default()
    };
    // Buffered block reads: the user gave --buffered, so dropping it is a fix.
    let ws = analyze(&buffered(read_run()), &damon);
    assert!(fired(&ws, "IDLE_RECLAIM", None, &[])
        .fix
        .contains("drop --buffered"));
    // metadata and dbench read what they wrote moments before: nothing sits idle.
    for w in ["metadata", "dbench", "fsync"] {
        let run = as_workload(read_run(), w, serde_json::json!({"workload": w}));
        none(&analyze(&run, &damon));
    }
    // Streams read evicted files cold; a shared file's later readers only after a stagger.
    let streams = |stagger: f64| {
        as_workload(
            read_run(),
            "streams",
            serde_json::json!({"workload": "streams", "same_file": true, "streams": 3,
                               "stagger_s": stagger}),
        )
    };
    none(&analyze(
        &as_workload(
            read_run(),
            "streams",
            serde_json::json!({"workload": "streams", "same_file": false}),
        ),
        &damon,
    ));
    quiet(&analyze(&streams(10.0), &damon), "IDLE_RECLAIM");
    let ws = analyze(&streams(20.0), &damon);
    let fix = &fired(&ws, "IDLE_RECLAIM", None, &[]).fix;
    assert!(
        fix.contains("--stagger") && !fix.contains("--buffered"),
        "{fix}"
    );
}

#[test]
fn page_cache_fix_names_what_the_workload_takes() {
    let f = TargetFacts::default();
    let streams = as_workload(
        with_residency(read_run(), Some(1.0), None),
        "streams",
        serde_json::json!({"workload": "streams", "same_file": true}),
    );
    let ws = analyze(&streams, &f);
    let fix = &fired(&ws, "PAGE_CACHE", Some("RR"), &[]).fix;
    assert!(
        fix.contains("--same-file") && !fix.contains("--buffered"),
        "{fix}"
    );
}

#[test]
fn few_ios_once_per_run_with_what_ends_the_pass() {
    let f = TargetFacts::default();
    // ATTO: every pass moves the 256 MiB region once, so 64 MiB blocks make 4 I/Os; a
    // longer --duration cannot change that.
    let mut tests = Vec::new();
    for mib in [4u64, 16, 64] {
        let bs = mib * MIB;
        let ios = 256 / mib;
        for rw in [Rw::Write, Rw::Read] {
            let p = pass_with(1, rw, (256 * MIB) as f64 / 1e6, ios);
            let mut t = record(&format!("{mib}M {rw}"), rw, vec![p]);
            t.job.bs = bs;
            t.job.io_limit = Some(256 * MIB);
            tests.push(t);
        }
    }
    let mut atto = run_of(tests);
    atto.preset = "atto".into();
    let ws = analyze(&atto, &f);
    let w = fired(&ws, "FEW_IOS", None, &["6 tests", "fewest: 4", "64M write"]);
    assert!(w.fix.contains("--size 6.25 GiB"), "{}", w.fix);
    assert!(!w.fix.contains("--duration)"), "{}", w.fix);
    assert_eq!(codes(&ws), ["FEW_IOS"]);
    // A pass that ran out of time is longer with --duration.
    let passes = vec![pass_with(1, Rw::Read, 1.0, 40)];
    let ws = analyze(&run_of(vec![record("SEQ", Rw::Read, passes)]), &f);
    assert_eq!(
        fired(&ws, "FEW_IOS", Some("SEQ"), &["only 40 I/Os"]).fix,
        "longer passes (--duration)"
    );
}

#[test]
fn a_studys_own_throttle_is_its_configuration() {
    let cg = "/sys/fs/cgroup/blkio/iolab-testbed-42-0";
    let f = throttled("loop7 read_bps = 20 MiB/s", cg, "read_bps", 20 * MIB);
    let mut run = read_run();
    fired(&analyze(&run, &f), "BLKIO_THROTTLE", None, &["loop7"]);
    run.study = Some("s".into());
    run.study_meta = serde_json::json!({"built": {"cgroup": format!("{cg}/")}});
    none(&analyze(&run, &f));
    // Another cgroup's throttle on the same run is still a problem.
    let f = throttled("loop7 read_bps", "/sys/fs/cgroup/blkio/x", "read_bps", 1);
    fired(&analyze(&run, &f), "BLKIO_THROTTLE", None, &["loop7"]);
}

/// A direct run with a sequential read and write pair and a random pair of one shape.
fn pairs(seq: (f64, f64), rnd: (f64, f64)) -> RunRecord {
    let mut tests = vec![
        test_of("SEQ1M Q8T1 Read", Rw::Read, &[seq.0; 3]),
        test_of("SEQ1M Q8T1 Write", Rw::Write, &[seq.1; 3]),
        test_of("RND4K Q1T1 Read", Rw::RandRead, &[rnd.0; 3]),
        test_of("RND4K Q1T1 Write", Rw::RandWrite, &[rnd.1; 3]),
    ];
    for t in &mut tests[..2] {
        t.group = "SEQ1M Q8T1".into();
        t.job.bs = MIB;
        t.job.iodepth = 8;
    }
    for t in &mut tests[2..] {
        t.group = "RND4K Q1T1".into();
    }
    run_of(tests)
}

#[test]
fn direct_writes_far_faster_than_reads_were_answered_by_a_cache() {
    let f = TargetFacts::default();
    let ws = analyze(&pairs((500.0, 2000.0), (40.0, 50.0)), &f);
    let w = fired(
        &ws,
        "WRITES_FASTER_THAN_READS",
        Some("SEQ1M Q8T1 Write"),
        &["SEQ1M Q8T1: writes 2000.0 MB/s, reads 500.0 MB/s (4.0×)"],
    );
    assert!(w.fix.contains("--fsync 1"), "{}", w.fix);
    assert_eq!(codes(&ws), ["WRITES_FASTER_THAN_READS"]);
    // Both pairs: one warning for the run, naming both.
    let ws = analyze(&pairs((500.0, 2000.0), (40.0, 100.0)), &f);
    fired(
        &ws,
        "WRITES_FASTER_THAN_READS",
        None,
        &[
            "SEQ1M Q8T1: writes",
            "RND4K Q1T1: writes 100.0 MB/s, reads 40.0 MB/s (2.5×)",
        ],
    );
    // Just under twice: quiet; writes slower than reads (flash, a disk): quiet.
    none(&analyze(&pairs((500.0, 990.0), (40.0, 79.0)), &f));
    none(&analyze(&pairs((3000.0, 1500.0), (50.0, 20.0)), &f));
    // Buffered writes land in the page cache by design: not this warning.
    none(&analyze(
        &buffered(pairs((500.0, 2000.0), (40.0, 50.0))),
        &f,
    ));
    // A throttle that holds reads lower than writes explains the gap.
    let th = throttled("read cap", "/x", "read_bps", 10 * MIB);
    quiet(
        &analyze(&pairs((10.0, 2000.0), (40.0, 50.0)), &th),
        "WRITES_FASTER_THAN_READS",
    );
    // Equal caps both ways do not: the writes went around them.
    let both = TargetFacts {
        throttles: vec![
            throttle("read cap", "/x", "read_bps", 10 * MIB),
            throttle("write cap", "/x", "write_bps", 10 * MIB),
        ],
        ..TargetFacts::default()
    };
    fired(
        &analyze(&pairs((10.0, 2000.0), (40.0, 50.0)), &both),
        "WRITES_FASTER_THAN_READS",
        Some("SEQ1M Q8T1 Write"),
        &["(200.0×)"],
    );
    // Writes that flushed every time and still outran the reads: the cache ignored the
    // flushes, so --fsync is not the fix.
    let mut run = pairs((500.0, 2000.0), (40.0, 50.0));
    run.tests[1].job.fsync_every = 1;
    let ws = analyze(&run, &f);
    let w = fired(
        &ws,
        "WRITES_FASTER_THAN_READS",
        Some("SEQ1M Q8T1 Write"),
        &[],
    );
    assert!(!w.fix.contains("--fsync 1"), "{}", w.fix);
    // Reads that ran beside busy processes may have been held off the CPU: that is named
    // as the other explanation, and the fix asks for a quiet rerun first.
    let mut run = pairs((500.0, 2000.0), (40.0, 50.0));
    run.tests[0].passes[1].context.activity.other_cpu_pct = 180.0;
    let ws = analyze(&run, &f);
    let w = fired(
        &ws,
        "WRITES_FASTER_THAN_READS",
        Some("SEQ1M Q8T1 Write"),
        &[
            "SEQ1M Q8T1: writes 2000.0 MB/s, reads 500.0 MB/s (4.0×)",
            "either a write cache",
            "held off the CPU",
            "180% during SEQ1M Q8T1 Read",
        ],
    );
    assert!(
        w.fix.starts_with("rerun on a quiet machine") && w.fix.contains("--fsync 1"),
        "{}",
        w.fix
    );
    fired(&ws, "BUSY_CPU", Some("SEQ1M Q8T1 Read"), &["180%"]);
    // A busy write test is no excuse for slow reads; the threshold is BUSY_CPU's own.
    for (i, pct) in [(1, 180.0), (0, 25.0)] {
        let mut run = pairs((500.0, 2000.0), (40.0, 50.0));
        run.tests[i].passes[1].context.activity.other_cpu_pct = pct;
        let ws = analyze(&run, &f);
        let w = fired(
            &ws,
            "WRITES_FASTER_THAN_READS",
            Some("SEQ1M Q8T1 Write"),
            &["acknowledged the writes"],
        );
        assert!(!w.message.contains("held off"), "{}", w.message);
    }
}

// --- rates within a test (issue 27) ---------------------------------------------------------

/// A write test of one pass whose 100 ms intervals ran at `rates` MB/s (1,000 I/Os a
/// pass, so a pass is busy enough for a stall to count).
fn series_run(rates: &[f64]) -> RunRecord {
    let bytes: Vec<u64> = rates.iter().map(|r| (r * 1e5) as u64).collect();
    let total: u64 = bytes.iter().sum();
    let secs = rates.len() as f64 / 10.0;
    let mut p = PassRecord::new(
        1,
        secs,
        None,
        Some(dir(total, IOS * rates.len() as u64 / 10, secs)),
        None,
        CpuUsage::default(),
        TimeSeries {
            interval_ms: 100,
            bytes,
            ..Default::default()
        },
    );
    p.index = 1;
    run_of(vec![record("SEQ", Rw::Write, vec![p])])
}

/// `run sustained` measures the cliff itself (its tests' `extra.sustained` or
/// `extra.recovery`, which its workload's descriptor reads): no RATE_CLIFF repeats it.
#[test]
fn no_rate_cliff_where_the_workload_reports_its_own() {
    let f = TargetFacts::default();
    let mut r = vec![1204.0; 24];
    r.extend([212.0; 30]);
    for key in ["sustained", "recovery"] {
        let mut run = series_run(&r);
        run.preset = "sustained".into();
        run.tests[0].extra = serde_json::json!({ key: { "stopped": "max_time" } });
        let ws = analyze(&run, &f);
        assert!(
            !codes(&ws).contains(&"RATE_CLIFF"),
            "{key}: {:?}",
            codes(&ws)
        );
    }
}

#[test]
fn rate_cliff_when_the_rate_drops_and_stays_down() {
    let f = TargetFacts::default();
    // 1,204 MB/s for 2.4 s (2.89 GB), then 212 MB/s for 3 s.
    let mut r = vec![1204.0; 24];
    r.extend([212.0; 30]);
    let ws = analyze(&series_run(&r), &f);
    fired(
        &ws,
        "RATE_CLIFF",
        Some("SEQ"),
        &[
            "writes ran at 1,204 MB/s",
            "for the first 2.69 GiB (2.4 s)",
            "then 212 MB/s for 3.0 s",
            "the sustained rate is 212 MB/s",
        ],
    );
    assert_eq!(codes(&ws), ["RATE_CLIFF"]);
    // A drop to 55% is within what a busy machine does; a rise is no cliff; a dip that
    // comes back up is no cliff.
    let mut small = vec![100.0; 20];
    small.extend([55.0; 20]);
    none(&analyze(&series_run(&small), &f));
    let mut up = vec![100.0; 20];
    up.extend([300.0; 20]);
    none(&analyze(&series_run(&up), &f));
    let mut dip = vec![100.0; 40];
    for x in &mut dip[10..14] {
        *x = 10.0;
    }
    none(&analyze(&series_run(&dip), &f));
    // Across passes: the cache filled in pass 2, the later pass stays slow.
    let mut run = run_of(vec![test_of("T", Rw::Write, &[400.0, 190.0, 100.0])]);
    run.tests[0].passes[1].timeseries.bytes = [vec![40_000_000; 3], vec![10_000_000; 7]].concat();
    fired(
        &analyze(&run, &f),
        "RATE_CLIFF",
        Some("T"),
        &["400 MB/s", "then 100 MB/s", "(the drop in pass 2)"],
    );
    // A slow pass between fast ones did not stay down; a drop between two passes is a
    // slower pass (HIGH_VARIATION), not a cliff.
    let mut back = run.clone();
    back.tests[0].passes[2].timeseries.bytes = vec![40_000_000; 10];
    quiet(&analyze(&back, &f), "RATE_CLIFF");
    let between = run_of(vec![test_of("T", Rw::Write, &[400.0, 100.0, 100.0])]);
    quiet(&analyze(&between, &f), "RATE_CLIFF");
}

/// RATE_DECLINE: a steady fall over the test (not a step, which is RATE_CLIFF's).
#[test]
fn rate_decline_when_the_rate_falls_steadily() {
    let f = TargetFacts::default();
    // 300 MB/s falling to 150 over 5 s.
    let r: Vec<f64> = (0..50).map(|i| 300.0 - 150.0 * i as f64 / 49.0).collect();
    let ws = analyze(&series_run(&r), &f);
    fired(
        &ws,
        "RATE_DECLINE",
        Some("SEQ"),
        &["writes fell steadily from 29", "MB/s to 15", "over 5.0 s"],
    );
    assert_eq!(codes(&ws), ["RATE_DECLINE"]);
    // A step is a cliff only; a level is nothing.
    let mut step = vec![1204.0; 24];
    step.extend([212.0; 30]);
    assert_eq!(codes(&analyze(&series_run(&step), &f)), ["RATE_CLIFF"]);
    none(&analyze(&series_run(&[100.0; 50]), &f));
}

#[test]
fn stalled_intervals_counted_in_busy_passes_only() {
    let f = TargetFacts::default();
    let mut r = vec![100.0; 20];
    r[5] = 0.0;
    r[6] = 0.0;
    r[12] = 0.0;
    let ws = analyze(&series_run(&r), &f);
    fired(
        &ws,
        "STALLED_INTERVALS",
        Some("SEQ"),
        &["3 intervals of 100 ms", "the longest stall 0.2 s"],
    );
    assert_eq!(codes(&ws), ["STALLED_INTERVALS"]);
    // Empty intervals at the start of a pass (first I/Os in flight) or its end.
    let mut end = vec![100.0; 20];
    end[19] = 0.0;
    end[0] = 0.0;
    none(&analyze(&series_run(&end), &f));
    // A pass of few I/Os per interval: an empty interval is the gap between two I/Os.
    let mut run = series_run(&r);
    let p = &mut run.tests[0].passes[0];
    p.ios = 19;
    quiet(&analyze(&run, &f), "STALLED_INTERVALS");
}

/// The installed engine of this name (the registry's, through `iolab_workloads::install`).
fn engine(name: &str) -> EngineKind {
    iolab_workloads::install();
    EngineKind::named(name).expect("a registered engine")
}
