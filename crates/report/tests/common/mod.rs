//! Run records built the way the engine builds them: real histograms, `PassRecord::new`,
//! and `iolab_stats::summarize` for the headline.

#![allow(dead_code)]

use std::time::Duration;

use iolab_measure::{
    CpuUsage, DirResult, IoErrorRecord, LatencyHistogram, PassRecord, RunRecord, SyncStats,
    TargetInfo, TargetKind, TestRecord, TimeSeries, Warning, WarningCode,
};
use iolab_spec::{expand_preset, DataPattern, EngineKind, IoDir, JobSpec, RunSettings, Rw};
use iolab_stats::{summarize, Score};

pub const MAX: usize = 100;

/// `ios` I/Os of `bs` bytes over `seconds`, latencies spread evenly from `lo_us` to `hi_us`
/// (so the mean is exactly their midpoint).
pub fn dir(bs: u64, ios: u64, seconds: f64, lo_us: f64, hi_us: f64) -> DirResult {
    let mut h = LatencyHistogram::new();
    let lo = (lo_us * 1000.0) as u64;
    let hi = (hi_us * 1000.0) as u64;
    for i in 0..ios {
        h.record(lo + (hi - lo) * i / (ios - 1).max(1));
    }
    DirResult::from_histogram(ios * bs, seconds, h)
}

pub fn cpu(usr: f64, sys: f64) -> CpuUsage {
    CpuUsage {
        usr_pct: usr,
        sys_pct: sys,
        system_usr_pct: usr / 8.0,
        system_sys_pct: sys / 8.0,
        iowait_pct: 1.5,
        cpu_us_per_io: 2.25,
    }
}

pub fn pass(
    index: u32,
    seconds: f64,
    read: Option<DirResult>,
    write: Option<DirResult>,
) -> PassRecord {
    let total: u64 = read.iter().chain(write.iter()).map(|d| d.bytes).sum();
    let ticks = (seconds / 0.5).ceil() as u64;
    let timeseries = TimeSeries {
        interval_ms: 500,
        bytes: (0..ticks).map(|_| total / ticks).collect(),
        ..Default::default()
    };
    PassRecord::new(
        index,
        seconds,
        read,
        write,
        None,
        cpu(10.0 + index as f64, 20.0 + index as f64),
        timeseries,
    )
}

/// Three passes whose I/O counts are `ios`, `ios * 1.003`, `ios * 0.997` (median `ios`).
pub fn spread(ios: u64) -> [u64; 3] {
    [ios, ios + ios * 3 / 1000, ios - ios * 3 / 1000]
}

pub fn test_record(
    name: &str,
    group: &str,
    job: JobSpec,
    passes: Vec<PassRecord>,
    score: Score,
) -> TestRecord {
    let summary = summarize(&passes, score);
    TestRecord {
        name: name.to_string(),
        group: group.to_string(),
        job,
        passes,
        summary,
        extra: serde_json::Value::Null,
    }
}

pub fn settings(runs: u32, warmups: u32, size: u64) -> RunSettings {
    RunSettings {
        size,
        duration: Duration::from_secs(5),
        runs,
        warmup_passes: warmups,
        warmup_duration: Duration::from_secs(5),
        ramp: Duration::ZERO,
        engine: Some(engine("io_uring")),
        direct: true,
        data: DataPattern::Random,
        engine_opts: iolab_spec::engopt::EngineOpts::of([
            ("fixedbufs", iolab_spec::engopt::Val::Flag(false)),
            ("registerfiles", iolab_spec::engopt::Val::Flag(false)),
        ]),
    }
}

pub fn run_record(preset: &str, settings: RunSettings, tests: Vec<TestRecord>) -> RunRecord {
    iolab_workloads::install();
    RunRecord {
        id: Some(42),
        uuid: "0b6c1f7e-5d2a-4c1e-9a77-3f1d2e4b5c6d".to_string(),
        iolab_version: "0.1.0".to_string(),
        preset: preset.to_string(),
        workload: "block".to_string(),
        target: TargetInfo {
            path: "/mnt/nvme0".to_string(),
            kind: TargetKind::Dir,
            io_path: "/mnt/nvme0/iolab-test.dat".to_string(),
            fs_type: "ext4".to_string(),
            size: settings.size,
        },
        settings,
        engine: Some(engine("io_uring")),
        command_line: vec!["iolab".into(), "run".into(), preset.into()],
        label: Some("nightly".to_string()),
        started_at: "2025-03-01T10:00:00Z".to_string(),
        finished_at: Some("2025-03-01T10:04:10Z".to_string()),
        complete: true,
        notes: Vec::new(),
        warnings: Vec::new(),
        env: serde_json::json!({"kernel": "6.8.0", "cpu": "test cpu"}),
        study: None,
        config_label: None,
        study_meta: serde_json::Value::Null,
        tests,
    }
}

/// CrystalDiskMark's default profile with one mixed test (`RND4K Q32T1 Mix`, 70/30).
///
/// Medians per group (seconds = 1, so IOPS = I/O count):
/// - SEQ1M Q8T1: read 3000 IOPS (3146 MB/s), mean 2500 µs; write 2500 IOPS (2621 MB/s), mean 3000 µs
/// - SEQ1M Q1T1: read 2000 IOPS (2097 MB/s), mean 500 µs; write 1500 IOPS (1573 MB/s), mean 650 µs
/// - RND4K Q32T1: read 100000 IOPS (409.6 MB/s), mean 320 µs; write 80000 (327.7), mean 400 µs
/// - RND4K Q1T1: read 12000 IOPS (49.2 MB/s), mean 80 µs; write 30000 (122.9), mean 33 µs
/// - Mix: read 70000 IOPS (286.7 MB/s), mean 450 µs; write 30000 IOPS (122.9 MB/s), mean 600 µs
pub fn cdm_run() -> RunRecord {
    cdm_run_with(&|_| 1.0)
}

/// [`cdm_run`] with every test's I/O counts multiplied by `scale(test name)`: MB/s and
/// IOPS scale by exactly that factor (the medians are the unscaled counts times it), the
/// latencies stay.
pub fn cdm_run_with(scale: &dyn Fn(&str) -> f64) -> RunRecord {
    let specs = expand_preset("cdm", None, true, 1 << 30).unwrap();
    // (read ios, read lat lo/hi, write ios, write lat lo/hi) per group.
    let shape = |group: &str| -> (u64, f64, f64, u64, f64, f64) {
        match group {
            "SEQ1M Q8T1" => (3000, 2000.0, 3000.0, 2500, 2000.0, 4000.0),
            "SEQ1M Q1T1" => (2000, 400.0, 600.0, 1500, 500.0, 800.0),
            "RND4K Q32T1" => (100_000, 40.0, 600.0, 80_000, 100.0, 700.0),
            "RND4K Q1T1" => (12_000, 60.0, 100.0, 30_000, 16.0, 50.0),
            other => panic!("unexpected group {other}"),
        }
    };
    let mut tests = Vec::new();
    for spec in specs {
        let rw = spec.job.rw;
        if rw.is_mixed() && spec.group != "RND4K Q32T1" {
            continue;
        }
        let (ri, rlo, rhi, wi, wlo, whi) = shape(&spec.group);
        let f = scale(&spec.name);
        let sc = |ios: u64| (ios as f64 * f).round() as u64;
        let (ri, wi) = (sc(ri), sc(wi));
        let bs = spec.job.bs;
        let passes: Vec<PassRecord> = (0..3)
            .map(|k| {
                let idx = k as u32 + 1;
                if rw.is_mixed() {
                    pass(
                        idx,
                        1.0,
                        Some(dir(bs, spread(sc(70_000))[k], 1.0, 100.0, 800.0)),
                        Some(dir(bs, spread(sc(30_000))[k], 1.0, 200.0, 1000.0)),
                    )
                } else if rw.reads() {
                    pass(idx, 1.0, Some(dir(bs, spread(ri)[k], 1.0, rlo, rhi)), None)
                } else {
                    pass(idx, 1.0, None, Some(dir(bs, spread(wi)[k], 1.0, wlo, whi)))
                }
            })
            .collect();
        tests.push(test_record(
            &spec.name,
            &spec.group,
            spec.job,
            passes,
            Score::Median,
        ));
    }
    let mut run = run_record("cdm", settings(3, 1, 1 << 30), tests);
    run.notes
        .push("io_uring: registered buffers unavailable, using plain buffers".into());
    run.warnings.push(Warning {
        // Not a code of this build: reports print codes they do not know as they are.
        code: WarningCode::Other("CACHE_SMALL_REGION".into()),
        message: "the 1 GiB region fits in the drive's SLC cache".into(),
        fix: "use --size 64g to measure sustained writes".into(),
        test: Some("SEQ1M Q8T1 Write".into()),
    });
    run
}

/// ATTO sweep at a few sizes, one pass each. Write and read I/O counts per size give
/// round MB/s at seconds = 1: 512 B: 100000 ios; 4 KiB: 50000; 64 KiB: 20000; 1 MiB: 3000;
/// 64 MiB: 40 (write) and 50 (read).
pub fn atto_run() -> RunRecord {
    let sizes: [(u64, u64, u64, f64); 5] = [
        (512, 100_000, 110_000, 30.0),
        (4 << 10, 50_000, 60_000, 60.0),
        (64 << 10, 20_000, 25_000, 150.0),
        (1 << 20, 3_000, 3_200, 1200.0),
        (64 << 20, 40, 50, 75_000.0),
    ];
    let mut tests = Vec::new();
    for (bs, w_ios, r_ios, lat) in sizes {
        let group = iolab_spec::format_size_short(bs);
        for (rw, name, ios) in [(Rw::Write, "Write", w_ios), (Rw::Read, "Read", r_ios)] {
            let mut job = JobSpec::new(rw, bs, 4, 1);
            job.io_limit = Some(256 << 20);
            let d = dir(bs, ios, 1.0, lat * 0.5, lat * 1.5);
            let p = if rw.reads() {
                pass(1, 1.0, Some(d), None)
            } else {
                pass(1, 1.0, None, Some(d))
            };
            tests.push(test_record(
                &format!("{group} {name}"),
                &group,
                job,
                vec![p],
                Score::Median,
            ));
        }
    }
    let mut s = settings(1, 0, 256 << 20);
    s.data = DataPattern::Zeros;
    run_record("atto", s, tests)
}

/// A custom randrw 70/30 job, best of 3, interrupted during its second test, with I/O
/// errors, a sync record, notes and long warnings, on a very long target path.
pub fn custom_run() -> RunRecord {
    let mut job = JobSpec::new(Rw::RandRw, 4096, 32, 4);
    job.rwmixread = 70;
    job.fsync_every = 16;
    let mut passes: Vec<PassRecord> = (0..3)
        .map(|k| {
            pass(
                k as u32 + 1,
                2.0,
                Some(dir(4096, spread(140_000)[k], 2.0, 50.0, 25_000.0)),
                Some(dir(4096, spread(60_000)[k], 2.0, 80.0, 90_000.0)),
            )
        })
        .collect();
    let mut sync_hist = LatencyHistogram::new();
    for v in [1_000_000u64, 2_000_000, 3_000_000] {
        sync_hist.record(v);
    }
    passes[1].sync = Some(SyncStats {
        count: 3,
        lat_us: sync_hist.summary_us(),
    });
    passes[1].errors.push(IoErrorRecord {
        errno: 5,
        message: "Input/output error".into(),
        dir: IoDir::Write,
        offset: 1 << 20,
        len: 4096,
    });
    let name = "RND4K Q32T4 70/30 randrw";
    let mixed = test_record(name, "RND4K Q32T4 70/30", job, passes, Score::Best);
    let read_job = JobSpec::new(Rw::RandRead, 4096, 1, 1);
    let reads = test_record(
        "RND4K Q1T1 randread",
        "RND4K Q1T1",
        read_job,
        vec![pass(1, 2.0, Some(dir(4096, 20_000, 2.0, 0.5, 1.5)), None)],
        Score::Best,
    );
    let mut s = settings(3, 0, 8 << 30);
    s.engine = Some(engine("io_uring"));
    s.direct = false;
    let mut run = run_record("custom", s, vec![mixed, reads]);
    run.engine = Some(engine("psync"));
    run.id = None;
    run.complete = false;
    run.finished_at = None;
    run.label = None;
    run.target.path = format!("/srv/{}/data", "very-long-directory-name".repeat(6));
    run.target.io_path = format!("{}/iolab-test.dat", run.target.path);
    run.target.kind = TargetKind::Dir;
    run.target.fs_type = "xfs".into();
    run.notes
        .push("io_uring is not available (EPERM from io_uring_setup); fell back to psync".into());
    run.notes
        .push(format!("a deliberately long note: {}", "word ".repeat(40)));
    run.warnings.push(Warning {
        code: WarningCode::Other("BUFFERED_IO".into()),
        message: "buffered I/O measures the page cache as much as the device".into(),
        fix: "drop --buffered to use O_DIRECT".into(),
        test: None,
    });
    run.warnings.push(Warning {
        code: WarningCode::Other("HIGH_VARIANCE".into()),
        message: format!("passes differ by more than 10%: {}", "x".repeat(150)),
        fix: "run longer passes (--duration 30s) or more of them (--runs 5)".into(),
        test: Some(name.into()),
    });
    run
}

/// A run of a workload other than block I/O: one test per (name, group, rw), two passes
/// of 1 s whose MB/s and IOPS come from `ios` I/Os of `bs` bytes, and `extra` as given.
pub fn workload_run(
    workload: &str,
    tests: &[(&str, &str, Rw, u64, u64, serde_json::Value)],
) -> RunRecord {
    let records = tests
        .iter()
        .map(|(name, group, rw, bs, ios, extra)| {
            let passes = (0..2)
                .map(|k| {
                    let d = dir(*bs, spread(*ios)[k], 1.0, 5.0, 500.0);
                    if rw.reads() {
                        pass(k as u32 + 1, 1.0, Some(d), None)
                    } else {
                        pass(k as u32 + 1, 1.0, None, Some(d))
                    }
                })
                .collect();
            let mut t = test_record(
                name,
                group,
                JobSpec::new(*rw, *bs, 1, 1),
                passes,
                Score::Median,
            );
            t.extra = extra.clone();
            t
        })
        .collect();
    let mut run = run_record(workload, settings(2, 0, 64 << 20), records);
    run.workload = workload.to_string();
    run
}

/// A dbench run with the operation table in `extra.ops`, as `iolab run dbench` stores it.
pub fn dbench_run() -> RunRecord {
    let ops = serde_json::json!([
        {"op": "NTCreateX", "count": 21590, "avg_ms": 0.0097, "max_ms": 4.128, "p99_ms": 0.059, "status_mismatches": 0},
        {"op": "WriteX", "count": 11032, "avg_ms": 0.0087, "max_ms": 0.653, "p99_ms": 0.032, "status_mismatches": 0},
        {"op": "ReadX", "count": 33760, "avg_ms": 0.0022, "max_ms": 0.460, "p99_ms": 0.012, "status_mismatches": 0},
        {"op": "Flush", "count": 1523, "avg_ms": 0.644, "max_ms": 7.899, "p99_ms": 4.016, "status_mismatches": 0}
    ]);
    let mut run = workload_run(
        "dbench",
        &[(
            "dbench 2 clients",
            "dbench",
            Rw::Rw,
            4096,
            20_000,
            serde_json::json!({"clients": 2, "ops": ops, "throughput_mb_s": 81.9}),
        )],
    );
    // A mixed test carries both directions.
    for p in &mut run.tests[0].passes {
        *p = pass(
            p.index,
            1.0,
            Some(dir(4096, 12_000 + p.index as u64, 1.0, 2.0, 50.0)),
            Some(dir(4096, 8_000 + p.index as u64, 1.0, 4.0, 90.0)),
        );
    }
    run.tests[0].summary = summarize(&run.tests[0].passes, Score::Median);
    run
}

/// One run of every workload family besides the block presets.
pub fn workload_runs() -> Vec<RunRecord> {
    use serde_json::json;
    vec![
        workload_run(
            "fsync",
            &[
                (
                    "none 4K",
                    "none",
                    Rw::Write,
                    4096,
                    500_000,
                    json!({"method": "none", "open_flags": ""}),
                ),
                (
                    "write+fsync 4K",
                    "write+fsync",
                    Rw::Write,
                    4096,
                    1_800,
                    json!({"method": "fsync", "open_flags": ""}),
                ),
                (
                    "O_DIRECT+O_DSYNC 4K",
                    "O_DIRECT+O_DSYNC",
                    Rw::Write,
                    4096,
                    2_000,
                    json!({"method": "direct_dsync", "open_flags": "O_DIRECT|O_DSYNC"}),
                ),
            ],
        ),
        workload_run(
            "copy",
            &[(
                "copy generated 64 MiB",
                "COPY 1M",
                Rw::Write,
                1 << 20,
                300,
                json!({"workload": "copy", "verified": true, "fsync_seconds": 0.01}),
            )],
        ),
        workload_run(
            "streams",
            &[
                (
                    "stream 1",
                    "dd 1M read x2",
                    Rw::Read,
                    1 << 20,
                    400,
                    json!({"workload": "streams", "stream": 1}),
                ),
                (
                    "stream 2",
                    "dd 1M read x2",
                    Rw::Read,
                    1 << 20,
                    380,
                    json!({"workload": "streams", "stream": 2}),
                ),
                (
                    "aggregate",
                    "dd 1M read x2",
                    Rw::Read,
                    1 << 20,
                    780,
                    json!({"workload": "streams", "streams": 2}),
                ),
            ],
        ),
        workload_run(
            "metadata",
            &[
                (
                    "create",
                    "metadata 1000 files",
                    Rw::Write,
                    100,
                    20_000,
                    json!({"workload": "metadata", "phase": "create", "ops": 1000}),
                ),
                (
                    "stat",
                    "metadata 1000 files",
                    Rw::Read,
                    0,
                    400_000,
                    json!({"workload": "metadata", "phase": "stat", "ops": 1000}),
                ),
            ],
        ),
        dbench_run(),
    ]
}

/// The three configurations of [`study_runs`]: label, random and sequential scale.
const STUDY_CONFIGS: [(&str, f64, f64); 3] = [
    ("16KB", 0.90, 1.00),
    ("32KB", 1.00, 0.98),
    ("64KB", 0.96, 0.95),
];

/// A run of configuration `c` of [`STUDY_CONFIGS`], every test also scaled by `w`.
fn study_run(id: i64, c: usize, w: f64) -> RunRecord {
    let (label, random, seq) = STUDY_CONFIGS[c];
    let mut run =
        cdm_run_with(&|name: &str| w * if name.starts_with("RND") { random } else { seq });
    run.id = Some(id);
    run.uuid = format!("00000000-0000-4000-8000-{id:012}");
    run.study = Some("strip size".into());
    run.config_label = Some(label.to_string());
    run.label = None;
    run
}

/// Three configurations of a study of `cdm_run`s: random tests scaled 0.90 / 1.00 / 0.96
/// and sequential ones 1.00 / 0.98 / 0.95, labelled 16KB, 32KB and 64KB.
pub fn study_runs() -> Vec<RunRecord> {
    (0..3).map(|c| study_run(100 + c as i64, c, 1.0)).collect()
}

/// [`study_runs`] repeated in three rounds of one invocation, each run also scaled by a
/// run-to-run wobble of ±1% (1.00, 1.01, 0.99, rotated per configuration).
pub fn study_runs_repeated() -> Vec<RunRecord> {
    let wobble = [1.0, 1.01, 0.99];
    let mut out = Vec::new();
    for round in 0..3 {
        for c in 0..3 {
            let mut run = study_run(100 + (round * 3 + c) as i64, c, wobble[(round + c) % 3]);
            run.study_meta = serde_json::json!({"invocation": "inv-1", "round": round + 1});
            out.push(run);
        }
    }
    out
}

/// Two configurations of a study whose scrub test found 32 corruptions each; the second
/// repaired only 11 (as btrfs raid5 counts here) and failed.
pub fn scrub_study_runs() -> Vec<RunRecord> {
    use serde_json::json;
    [("raid1", 32, true), ("raid5", 11, false)]
        .iter()
        .map(|(config, repaired, passed)| {
            let mut r = workload_run(
                "scrub-test",
                &[(
                    "scrub",
                    "scrub",
                    Rw::Read,
                    4096,
                    1000,
                    json!({"injected": 32, "passed": passed,
                           "expected": {"detected": 32, "repaired": 32, "uncorrectable": 0},
                           "reported": {"detected": 32, "repaired": repaired,
                                        "uncorrectable": 0}}),
                )],
            );
            r.study = Some("s".into());
            r.config_label = Some(config.to_string());
            r
        })
        .collect()
}

/// The installed engine of this name (the registry's, through `iolab_workloads::install`).
pub fn engine(name: &str) -> EngineKind {
    iolab_workloads::install();
    EngineKind::named(name).expect("a registered engine")
}
