//! Passes with the `null` engine and a step clock: every I/O completes at once and every
//! reading of the clock advances it by exactly one step, so the counts of a pass follow
//! from the job loop alone and are asserted exactly (no wall-clock windows).
//!
//! The job loop reads the clock once when it starts, then twice per round: once before
//! queuing (the I/Os' start) and once after reaping (their completion). A round with queue
//! depth `q` completes `q` I/Os, each with a latency of exactly one step. A time-based pass
//! counts completions up to and including the deadline, and ends at the deadline.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iolab_engine::clock::StepClock;
use iolab_engine::engines::{null::Null, Engine};
use iolab_engine::{prepare, run_pass_with_clock, Target, TargetRequest};
use iolab_measure::PassRecord;
use iolab_spec::{DataPattern, JobSpec, RunSettings, Rw, TestSpec};
use iolab_testkit::{scratch_dir, KIB, MIB};
use tempfile::TempDir;

/// A target file of 4 MiB; the null engine never touches it.
fn target() -> (TempDir, Target) {
    let dir = scratch_dir();
    let req = TargetRequest {
        path: dir.path().to_path_buf(),
        size: Some(4 * MIB),
        default_size: 4 * MIB,
        writes: true,
        direct: false,
        data: DataPattern::Zeros,
        layout_pattern: None,
        allow_destroy_device: false,
        allow_overwrite_file: false,
    };
    let stop = AtomicBool::new(false);
    let t = prepare(&req, &stop, &mut |_, _| {}).unwrap();
    (dir, t)
}

fn settings() -> RunSettings {
    RunSettings {
        size: 4 * MIB,
        duration: Duration::from_secs(1),
        runs: 1,
        warmup_passes: 0,
        warmup_duration: Duration::ZERO,
        ramp: Duration::ZERO,
        engine: Some(Null::DESC.kind),
        direct: false,
        data: DataPattern::Zeros,
        engine_opts: iolab_spec::engopt::EngineOpts::of([
            ("fixedbufs", iolab_spec::engopt::Val::Flag(false)),
            ("registerfiles", iolab_spec::engopt::Val::Flag(false)),
        ]),
    }
}

fn test(rw: Rw, bs: u64, iodepth: u32, io_limit: Option<u64>) -> TestSpec {
    let mut job = JobSpec::new(rw, bs, iodepth, 1);
    job.io_limit = io_limit;
    job.validate().unwrap();
    TestSpec {
        name: job.cdm_name(),
        group: job.cdm_name(),
        job,
    }
}

/// One pass of `t` lasting `duration` on the step clock; the record and the clock's
/// readings.
fn pass(t: &TestSpec, duration: Duration, step: Duration) -> (PassRecord, u64) {
    let (_dir, target) = target();
    let clock = StepClock::new(step);
    let stop = AtomicBool::new(false);
    let out = run_pass_with_clock(
        &target,
        t,
        &settings(),
        1,
        duration,
        &stop,
        &(),
        None,
        &clock,
    )
    .unwrap();
    assert!(!out.interrupted && out.record.errors.is_empty());
    (out.record, clock.readings())
}

const MS: Duration = Duration::from_millis(1);
const US: Duration = Duration::from_micros(1);

#[test]
fn a_timed_pass_performs_exactly_the_rounds_that_fit_before_the_deadline() {
    // 1 s at 1 ms a reading: rounds complete at 2, 4, ..., 1000 ms; 500 rounds of 32.
    let (r, readings) = pass(&test(Rw::RandRead, 4 * KIB, 32, None), 1000 * MS, MS);
    assert_eq!(readings, 1 + 2 * 500);
    assert_eq!(r.ios, 500 * 32);
    assert_eq!(r.bytes, 500 * 32 * 4 * KIB);
    assert_eq!(r.seconds, 1.0);
    assert_eq!(r.iops, 16_000.0);
    let read = r.read.as_ref().unwrap();
    assert_eq!((read.ios, read.bytes), (r.ios, r.bytes));
    assert!(r.write.is_none() && r.sync.is_none());

    // 999 ms: the round completing at 1000 ms is past the deadline and not counted.
    let (r, _) = pass(&test(Rw::RandRead, 4 * KIB, 32, None), 999 * MS, MS);
    assert_eq!(r.ios, 499 * 32);
    assert_eq!(r.seconds, 0.999);

    // Queue depth 1 (what psync would run), sequential writes: one I/O a round.
    let (r, _) = pass(&test(Rw::Write, 128 * KIB, 1, None), 1000 * MS, MS);
    assert_eq!(r.ios, 500);
    assert_eq!(r.write.as_ref().unwrap().bytes, 500 * 128 * KIB);
    assert!(r.read.is_none());
}

#[test]
fn the_100ms_buckets_hold_exactly_the_bytes_completed_in_them() {
    let (r, _) = pass(&test(Rw::RandRead, 4 * KIB, 8, None), 1000 * MS, MS);
    assert_eq!(r.timeseries.interval_ms, 100);
    let round = 8 * 4 * KIB;
    // Bucket 0 holds the rounds completing at 2..98 ms (49), each later one 50 (100..198
    // ms, ...). The round completing exactly at the deadline (1000 ms) is counted and
    // starts an eleventh bucket of its own.
    let mut want = vec![49 * round];
    want.extend([50 * round; 9]);
    want.push(round);
    assert_eq!(r.timeseries.bytes, want);
    assert_eq!(r.timeseries.bytes.iter().sum::<u64>(), r.bytes);

    // 3 ms a reading: rounds complete every 6 ms, at 6k ms for k = 1..=166 (996 ms).
    let (r, _) = pass(&test(Rw::RandRead, 4 * KIB, 8, None), 1000 * MS, 3 * MS);
    let want: Vec<u64> = (0..10u64)
        .map(|b| {
            let rounds = (1..=166u64)
                .filter(|k| 6 * k >= 100 * b && 6 * k < 100 * (b + 1))
                .count() as u64;
            rounds * round
        })
        .collect();
    assert_eq!(want[..3], [16 * round, 17 * round, 16 * round]);
    assert_eq!(r.timeseries.bytes, want);
    assert_eq!(r.ios, 166 * 8);
}

#[test]
fn a_byte_limit_stops_at_exactly_that_many_bytes() {
    // 100 KiB at 4 KiB: 25 I/Os in rounds of 8, 8, 8 and 1, on a pass long enough that
    // only the limit ends it.
    let (r, readings) = pass(
        &test(Rw::RandWrite, 4 * KIB, 8, Some(100 * KIB)),
        Duration::from_secs(3600),
        US,
    );
    assert_eq!(r.bytes, 100 * KIB);
    assert_eq!(r.ios, 25);
    // The start, two readings for each of the 4 rounds, and the end.
    assert_eq!(readings, 1 + 4 * 2 + 1);
    assert_eq!(r.seconds, Duration::from_micros(9).as_secs_f64());
    // All of it lands in the first bucket.
    assert_eq!(r.timeseries.bytes, vec![100 * KIB]);

    // A limit that is not a multiple of the block size rounds up to whole blocks.
    let (r, _) = pass(
        &test(Rw::Read, 64 * KIB, 4, Some(MIB + 1)),
        Duration::from_secs(3600),
        US,
    );
    assert_eq!(r.bytes, MIB + 64 * KIB);
    assert_eq!(r.ios, 17);
}

#[test]
fn every_latency_is_exactly_one_step() {
    // 1 µs is below 2048 ns, where the histogram is exact to the nanosecond.
    let (r, _) = pass(&test(Rw::RandRead, 4 * KIB, 16, None), 10 * MS, US);
    assert_eq!(r.ios, 5000 * 16);
    let lat = &r.read.as_ref().unwrap().lat_us;
    for (what, v) in [
        ("min", lat.min),
        ("mean", lat.mean),
        ("p50", lat.p50),
        ("p99", lat.p99),
        ("max", lat.max),
    ] {
        assert_eq!(v, 1.0, "{what}");
    }
    // 1 ms: the mean is kept exactly; the histogram's buckets are 3 significant digits.
    let (r, _) = pass(&test(Rw::RandRead, 4 * KIB, 16, None), 1000 * MS, MS);
    let lat = &r.read.as_ref().unwrap().lat_us;
    assert_eq!(lat.mean, 1000.0);
    assert!((lat.min - 1000.0).abs() < 1.0 && (lat.max - 1000.0).abs() < 1.0);
}

#[test]
fn an_access_specification_draws_each_line_at_its_share() {
    // Iometer's file-server mix on the null engine: 1 s at 50 µs a reading is exactly
    // 10,000 rounds of 8 I/Os, so the share check rests on a known 80,000 draws whatever
    // the machine's load (a wall-clock pass counted as few as it managed).
    let mut t = test(Rw::RandRead, 4 * KIB, 8, None);
    t.job.access = iolab_spec::iometer::pattern("file-server").unwrap();
    let (_dir, target) = target();
    let clock = StepClock::new(50 * US);
    let stop = AtomicBool::new(false);
    let out = run_pass_with_clock(
        &target,
        &t,
        &settings(),
        1,
        1000 * MS,
        &stop,
        &(),
        None,
        &clock,
    )
    .unwrap();
    assert_eq!(out.record.ios, 80_000);
    let counts = &out.access_ios;
    assert_eq!(counts.iter().sum::<u64>(), 80_000);
    let n = 80_000.0;
    for (i, (line, c)) in t.job.access.iter().zip(counts).enumerate() {
        let s = f64::from(line.share);
        let got = 100.0 * *c as f64 / n;
        // Five binomial standard deviations of a share over n draws.
        let tol = 5.0 * (s * (100.0 - s) / n).sqrt();
        assert!(
            (got - s).abs() <= tol,
            "line {i}: {got:.3}% vs {s}% (±{tol:.3})"
        );
    }
}
