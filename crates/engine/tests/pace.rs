//! fio's pacing, sequential skips and Zipf offsets in the job loop (`iolab run fio`): a rate
//! limit or an IOPS limit caps what a pass issues (only upper bounds are asserted: a slow
//! machine does less, never more), think time idles between I/Os, `rw=write:N` skips
//! blocks, and `random_distribution=zipf` comes back to a few hot blocks.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iolab_engine::engines::{null::Null, psync::Psync, Engine};
use iolab_engine::{prepare, run_pass, Target, TargetRequest};
use iolab_spec::{DataPattern, EngineKind, JobSpec, Pace, RunSettings, Rw, TestSpec};
use iolab_testkit::{scratch_dir, KIB, MIB};
use tempfile::TempDir;

fn target(size: u64, fill: DataPattern) -> (TempDir, Target) {
    let dir = scratch_dir();
    let req = TargetRequest {
        path: dir.path().to_path_buf(),
        size: Some(size),
        default_size: size,
        writes: true,
        direct: false,
        data: fill,
        layout_pattern: None,
        allow_destroy_device: false,
        allow_overwrite_file: false,
    };
    let stop = AtomicBool::new(false);
    let t = prepare(&req, &stop, &mut |_, _| {}).unwrap();
    (dir, t)
}

fn settings(engine: EngineKind, duration: Duration) -> RunSettings {
    RunSettings {
        size: MIB,
        duration,
        runs: 1,
        warmup_passes: 0,
        warmup_duration: Duration::ZERO,
        ramp: Duration::ZERO,
        engine: Some(engine),
        direct: false,
        data: DataPattern::Zeros,
        engine_opts: iolab_spec::engopt::EngineOpts::of([
            ("fixedbufs", iolab_spec::engopt::Val::Flag(false)),
            ("registerfiles", iolab_spec::engopt::Val::Flag(false)),
        ]),
    }
}

fn spec(job: JobSpec) -> TestSpec {
    job.validate().unwrap();
    TestSpec {
        name: "t".into(),
        group: "t".into(),
        job,
    }
}

/// I/Os a paced null-engine pass of `d` completed.
fn paced_ios(pace: Pace, iodepth: u32, d: Duration) -> u64 {
    let (_dir, t) = target(MIB, DataPattern::Zeros);
    let mut job = JobSpec::new(Rw::RandRead, 4 * KIB, iodepth, 1);
    job.pace = pace;
    let stop = AtomicBool::new(false);
    let out = run_pass(
        &t,
        &spec(job),
        &settings(Null::DESC.kind, d),
        1,
        d,
        &stop,
        &(),
        None,
    )
    .unwrap();
    out.record.read.map_or(0, |r| r.ios)
}

#[test]
fn rate_limits_cap_what_a_pass_does() {
    let d = Duration::from_millis(300);
    // Unpaced, the null engine completes millions of I/Os in 300 ms.
    let iops = Pace {
        rate_iops: 100,
        ..Pace::default()
    };
    let n = paced_ios(iops, 8, d);
    assert!(n <= 31, "rate_iops=100 over 300 ms did {n} I/Os");
    let bytes = Pace {
        rate_bytes: 400 * KIB,
        ..Pace::default()
    };
    let n = paced_ios(bytes, 8, d);
    assert!(n <= 31, "rate=400k of 4k blocks over 300 ms did {n} I/Os");
    let think = Pace {
        think_us: 20_000,
        think_blocks: 2,
        ..Pace::default()
    };
    let n = paced_ios(think, 16, d);
    assert!(
        n <= 2 * 16,
        "2 I/Os per 20 ms of think time over 300 ms did {n} I/Os"
    );
    // rate_process=poisson: gaps drawn around the same mean; never unpaced.
    let poisson = Pace {
        rate_iops: 100,
        poisson: true,
        ..Pace::default()
    };
    let n = paced_ios(poisson, 8, d);
    assert!(
        (1..=100).contains(&n),
        "Poisson arrivals at 100 IOPS over 300 ms did {n} I/Os"
    );
}

/// The 4 KiB blocks of `t`'s file that hold zeros.
fn zeroed_blocks(t: &Target) -> Vec<usize> {
    let data = std::fs::read(&t.info.io_path).unwrap();
    data.chunks(4096)
        .enumerate()
        .filter(|(_, b)| b.iter().all(|&x| x == 0))
        .map(|(i, _)| i)
        .collect()
}

/// Writes zeros with `job` (psync, byte-limited) over a file of random data.
fn write_zeros(size: u64, job: JobSpec) -> (TempDir, Target) {
    let (dir, t) = target(size, DataPattern::Random);
    let stop = AtomicBool::new(false);
    let long = Duration::from_secs(60);
    let out = run_pass(
        &t,
        &spec(job),
        &settings(Psync::DESC.kind, long),
        1,
        long,
        &stop,
        &(),
        None,
    )
    .unwrap();
    assert!(out.record.errors.is_empty());
    (dir, t)
}

#[test]
fn zipf_offsets_come_back_to_a_few_blocks() {
    // 200 writes over 256 blocks: uniform offsets touch about 140 of them; Zipf with
    // exponent 3 puts 83% on its first rank and touches about 10.
    let mut job = JobSpec::new(Rw::RandWrite, 4 * KIB, 1, 1);
    job.zipf = Some(3.0);
    job.io_limit = Some(200 * 4 * KIB);
    let (_dir, t) = write_zeros(MIB, job);
    let zeroed = zeroed_blocks(&t);
    assert!(zeroed.contains(&0), "rank 1 is block 0: {zeroed:?}");
    assert!(
        zeroed.len() <= 60,
        "{} blocks written: {zeroed:?}",
        zeroed.len()
    );
}

#[test]
fn zoned_offsets_stay_in_their_zones() {
    // 256 blocks; every write goes to the first 10% (zone of 100% of the I/Os), none to
    // the zone of 0%, with and without an access specification (blockalign).
    for access in [false, true] {
        let mut job = JobSpec::new(Rw::RandWrite, 4 * KIB, 1, 1);
        job.zones = vec![
            iolab_spec::Zone {
                access: 100,
                size: 10,
            },
            iolab_spec::Zone {
                access: 0,
                size: 90,
            },
        ];
        if access {
            job.access = vec![iolab_spec::AccessLine {
                share: 100,
                size: 4 * KIB,
                read_pct: 0,
                random_pct: 100,
                align: 8 * KIB,
            }];
        }
        job.io_limit = Some(200 * 4 * KIB);
        let (_dir, t) = write_zeros(MIB, job);
        let zeroed = zeroed_blocks(&t);
        // 10% of 256 blocks is 25.6: blocks 0..25 (slots of 8 KiB: 0..12, even blocks).
        assert!(!zeroed.is_empty());
        assert!(zeroed.iter().all(|&b| b < 26), "{zeroed:?}");
        if access {
            assert!(zeroed.iter().all(|&b| b % 2 == 0), "{zeroed:?}");
        }
    }
}

#[test]
fn sequential_skip_leaves_the_skipped_blocks_alone() {
    // 16 blocks of 4 KiB filled with random data; write zeros to 4 of them with a skip.
    for (skip, expect) in [(1i64, [0usize, 2, 4, 6]), (-3, [0, 14, 12, 10])] {
        let mut job = JobSpec::new(Rw::Write, 4 * KIB, 1, 1);
        job.seq_skip = skip;
        job.io_limit = Some(16 * KIB);
        let (_dir, t) = write_zeros(64 * KIB, job);
        let zeroed = zeroed_blocks(&t);
        let mut want = expect.to_vec();
        want.sort();
        assert_eq!(zeroed, want, "skip {skip}");
    }
}

#[test]
fn invalidate_drops_the_cached_file_before_a_buffered_pass() {
    let (_dir, t) = target(4 * MIB, DataPattern::Random);
    let path = t.info.io_path.clone();
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    // Read it all: its pages are in the cache, clean.
    let _ = std::fs::read(&path).unwrap();
    let before = t
        .resident_fraction()
        .expect("mincore works on a regular file");
    assert!(
        before > 0.5,
        "the file was read but {before} of it is cached"
    );
    let mut job = JobSpec::new(Rw::Read, 4 * KIB, 1, 1);
    job.invalidate = true;
    job.io_limit = Some(4 * KIB);
    let stop = AtomicBool::new(false);
    let d = Duration::from_secs(10);
    // The null engine reads nothing back in: what is cached after is what the pass left.
    run_pass(
        &t,
        &spec(job),
        &settings(Null::DESC.kind, d),
        1,
        d,
        &stop,
        &(),
        None,
    )
    .unwrap();
    let after = t.resident_fraction().unwrap();
    assert!(
        after < 0.1,
        "{after} of the file still cached after invalidate"
    );
}
