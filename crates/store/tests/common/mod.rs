//! Realistic records for the store tests.

#![allow(dead_code)]

use std::time::Duration;

use iolab_measure::{
    Activity, CpuUsage, DeviceIo, DirResult, IoErrorRecord, LatencyHistogram, MetricSummary,
    PassContext, PassRecord, ProcessCpu, RunRecord, SyncStats, TargetInfo, TestRecord, TestSummary,
    TimeSeries, Warning,
};
use iolab_spec::{DataPattern, IoDir, JobSpec, RunSettings, Rw, SyncMode};
use serde_json::json;

/// A histogram of `n` pseudo-random latencies around `base_ns`.
pub fn histogram(seed: u64, n: usize, base_ns: u64) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for _ in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        h.record(base_ns + (x >> 33) % (base_ns * 4));
    }
    h
}

fn summary(seed: f64) -> TestSummary {
    let m = |v: f64| MetricSummary {
        n: 3,
        median: v,
        mean: v * 1.01,
        min: v * 0.9,
        max: v * 1.1,
        stddev: v / 7.0,
        cv: 1.0 / 7.0,
        ci_low: v * 0.95,
        ci_high: v * 1.05,
    };
    TestSummary {
        passes: 3,
        mb_s: seed * 1.1,
        iops: seed * 3.3,
        lat_mean_us: 0.1 + 0.2,
        lat_p99_us: seed / 3.0,
        score: Some(iolab_measure::Score::Median),
        stats_mb_s: m(seed * 1.1),
        stats_iops: m(seed * 3.3),
        stats_lat_mean_us: m(0.1 + 0.2),
        stats_lat_p99_us: m(seed / 3.0),
        ci_method: "t-distribution".into(),
        converged: Some(seed > 2.0),
    }
}

/// Pass `index` of a test; `mixed` gives it both directions, a sync and an I/O error.
pub fn pass(seed: u64, index: u32, mixed: bool) -> PassRecord {
    let seconds = 5.0 + seed as f64 / 1000.0 + 1.0 / 3.0;
    let read =
        DirResult::from_histogram(4096 * 3000 + seed, seconds, histogram(seed, 3000, 80_000));
    let write = mixed.then(|| {
        DirResult::from_histogram(4096 * 2500, seconds, histogram(seed + 7, 2500, 120_000))
    });
    let sync = mixed.then(|| SyncStats {
        count: 12,
        lat_us: histogram(seed + 9, 12, 2_000_000).summary_us(),
    });
    let cpu = CpuUsage {
        usr_pct: 12.5 + seed as f64 / 17.0,
        sys_pct: 33.0 / 7.0,
        system_usr_pct: 0.1,
        system_sys_pct: 2.0f64.sqrt(),
        iowait_pct: 44.4,
        cpu_us_per_io: 1e-3 / 3.0,
    };
    let timeseries = TimeSeries {
        interval_ms: 500,
        bytes: (0..11).map(|i| 1_000_000 + i * 4096 + seed).collect(),
        ..Default::default()
    };
    let errors = if mixed {
        vec![IoErrorRecord {
            errno: 5,
            message: "Input/output error (os error 5)".into(),
            dir: IoDir::Write,
            offset: 1 << 33,
            len: 4096,
        }]
    } else {
        Vec::new()
    };
    let mut record = PassRecord::new(index, seconds, Some(read), write, sync, cpu, timeseries);
    record.errors = errors;
    record.context = PassContext {
        cache_resident_before: Some(0.25 + index as f64 / 8.0),
        cache_resident_after: if mixed { None } else { Some(1.0) },
        activity: Activity {
            devices: vec![DeviceIo {
                device: "loop3".into(),
                read_bytes: 4096 * seed,
                write_bytes: 512,
                read_requests: seed,
                write_requests: 1,
            }],
            other_cpu_pct: 3.5,
            top_processes: vec![ProcessCpu {
                pid: 42,
                name: "chromium".into(),
                cpu_pct: 2.25,
            }],
            cpu_resolution_pct: 1.25,
            own_uncounted_bytes: 1 << 20,
        },
    };
    record
}

pub fn test_record(seed: u64, name: &str, mixed: bool) -> TestRecord {
    let mut job = JobSpec::new(if mixed { Rw::RandRw } else { Rw::Read }, 4096, 32, 1);
    if mixed {
        job.rwmixread = 70;
        job.fsync_every = 64;
        job.sync_mode = SyncMode::Fdatasync;
        job.end_fsync = true;
        job.io_limit = Some(1 << 30);
    }
    TestRecord {
        name: name.into(),
        group: name.split(' ').take(2).collect::<Vec<_>>().join(" "),
        job,
        passes: (1..=3)
            .map(|i| pass(seed * 10 + i as u64, i, mixed))
            .collect(),
        summary: summary(seed as f64 + 100.25),
        extra: if mixed {
            json!({"ops": [{"name": "NTCreateX", "count": 1234, "avg_ms": 0.1}]})
        } else {
            serde_json::Value::Null
        },
    }
}

/// A complete run with two tests of three passes each.
pub fn run(uuid: &str) -> RunRecord {
    RunRecord {
        id: None,
        uuid: uuid.into(),
        iolab_version: "0.1.0".into(),
        preset: "cdm".into(),
        workload: "block".into(),
        target: TargetInfo {
            path: "/mnt/nvme".into(),
            kind: "dir".into(),
            io_path: "/mnt/nvme/iolab-test.bin".into(),
            fs_type: "ext4".into(),
            size: 1 << 30,
        },
        settings: RunSettings {
            size: 1 << 30,
            duration: Duration::from_millis(5250),
            runs: 3,
            warmup_passes: 1,
            warmup_duration: Duration::from_secs(2),
            ramp: Duration::from_millis(250),
            engine: Some(iolab_spec::engopt::testing::kind("io_uring")),
            direct: true,
            data: DataPattern::Random,
            engine_opts: iolab_spec::engopt::EngineOpts::of([
                ("fixedbufs", iolab_spec::engopt::Val::Flag(true)),
                ("registerfiles", iolab_spec::engopt::Val::Flag(false)),
            ]),
        },
        engine: Some(iolab_spec::engopt::testing::kind("io_uring")),
        command_line: vec![
            "iolab".into(),
            "run".into(),
            "--target".into(),
            "/mnt/nvme".into(),
            "--label".into(),
            "fresh \"trim\" ✓".into(),
        ],
        label: Some("fresh \"trim\" ✓".into()),
        started_at: "2025-03-01T10:00:00Z".into(),
        finished_at: Some("2025-03-01T10:05:31Z".into()),
        complete: true,
        notes: vec!["engine fell back from io_uring to psync".into()],
        warnings: vec![
            Warning {
                code: "cpu-governor".into(),
                message: "CPU frequency governor is powersave".into(),
                fix: "cpupower frequency-set -g performance".into(),
                test: None,
            },
            Warning {
                code: "high-cv".into(),
                message: "passes vary by 12%".into(),
                fix: "use --runs 5".into(),
                test: Some("RND4K Q32T1 Read".into()),
            },
        ],
        env: json!({
            "kernel": "6.8.0-45-generic",
            "cpu": {"model": "AMD Ryzen 9 7950X", "cores": 16, "mhz": 4500.123456789},
            "chain": ["nvme0n1", "dm-0"],
            "scheduler": null,
        }),
        study: Some("trim-study".into()),
        config_label: Some("discard=async".into()),
        study_meta: serde_json::json!({"invocation": "0f1e", "matrix": {"discard": "async"}}),
        tests: vec![
            test_record(1, "SEQ1M Q8T1 Read", false),
            test_record(2, "RND4K Q32T1 Mix", true),
        ],
    }
}
