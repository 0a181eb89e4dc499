//! The engine against real files: byte and I/O accounting of a pass, data read back through
//! each engine, where writes land and what they contain, random offsets, the read/write mix,
//! and removal of the test file. Files live under CARGO_TARGET_TMPDIR (the build
//! directory's filesystem, not a tmpfs), so O_DIRECT behaves as on a real disk.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iolab_engine::buffers::BufferPool;
use iolab_engine::engines::io_uring::Uring;
use iolab_engine::engines::psync::Psync;
use iolab_engine::engines::{Completion, Engine};
use iolab_engine::{io_uring_available, prepare, run_pass, Target, TargetRequest};
use iolab_measure::PassRecord;
use iolab_spec::{DataPattern, EngineKind, IoDir, JobSpec, RunSettings, Rw, TestSpec};
use iolab_testkit::{random_bytes, scratch_dir, skip, KIB, MIB};

/// A pass long enough that only `io_limit` ends it.
const LONG: Duration = Duration::from_secs(20);

/// The engines to test: psync always, io_uring when this kernel allows it.
fn engines() -> Vec<EngineKind> {
    match io_uring_available() {
        Ok(()) => vec![Uring::DESC.kind, Psync::DESC.kind],
        Err(e) => {
            skip(format!(
                "the io_uring part: io_uring is not available ({e})"
            ));
            vec![Psync::DESC.kind]
        }
    }
}

fn settings(engine: EngineKind, direct: bool, data: DataPattern) -> RunSettings {
    RunSettings {
        size: 4 * MIB,
        duration: LONG,
        runs: 1,
        warmup_passes: 0,
        warmup_duration: LONG,
        ramp: Duration::ZERO,
        engine: Some(engine),
        direct,
        data,
        engine_opts: iolab_spec::engopt::EngineOpts::of([
            ("fixedbufs", iolab_spec::engopt::Val::Flag(true)),
            ("registerfiles", iolab_spec::engopt::Val::Flag(true)),
        ]),
    }
}

fn test_spec(rw: Rw, bs: u64, iodepth: u32, numjobs: u32, io_limit: u64) -> TestSpec {
    let mut job = JobSpec::new(rw, bs, iodepth, numjobs);
    job.io_limit = Some(io_limit);
    job.validate().unwrap();
    TestSpec {
        name: format!("{} {rw}", job.cdm_name()),
        group: job.cdm_name(),
        job,
    }
}

fn request(path: &Path, size: u64, writes: bool, direct: bool, data: DataPattern) -> TargetRequest {
    TargetRequest {
        path: path.to_path_buf(),
        size: Some(size),
        default_size: size,
        writes,
        direct,
        data,
        layout_pattern: None,
        allow_destroy_device: false,
        allow_overwrite_file: false,
    }
}

fn prep(req: &TargetRequest) -> Target {
    let stop = AtomicBool::new(false);
    prepare(req, &stop, &mut |_, _| {}).unwrap_or_else(|e| panic!("prepare: {e}"))
}

/// Runs one pass and checks it had no errors and was not interrupted.
fn pass(target: &Target, test: &TestSpec, s: &RunSettings) -> PassRecord {
    let stop = AtomicBool::new(false);
    let out = run_pass(target, test, s, 1, s.duration, &stop, &(), None)
        .unwrap_or_else(|e| panic!("{} on {:?}: {e}", test.name, s.engine));
    assert!(!out.interrupted);
    assert!(
        out.record.errors.is_empty(),
        "{} on {:?}: {:?}",
        test.name,
        s.engine,
        out.record.errors
    );
    out.record
}

fn write_file(path: &Path, data: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

/// Checks the accounting of one pass: totals, per-direction numbers, histogram, series.
#[track_caller]
fn check_accounting(r: &PassRecord, dir: IoDir, bytes: u64, ios: u64) {
    assert_eq!(r.bytes, bytes, "pass bytes");
    assert_eq!(r.ios, ios, "pass I/Os");
    let (d, other) = match dir {
        IoDir::Read => (r.read.as_ref(), r.write.as_ref()),
        IoDir::Write => (r.write.as_ref(), r.read.as_ref()),
    };
    let d = d.expect("the direction of the job has a result");
    assert!(other.is_none(), "no I/O in the other direction");
    assert_eq!(d.bytes, bytes);
    assert_eq!(d.ios, ios);
    assert_eq!(d.histogram.count(), ios, "one latency sample per I/O");
    let series: u64 = r.timeseries.bytes.iter().sum();
    assert_eq!(series, bytes, "time series adds up to the pass bytes");
    assert!(r.seconds > 0.0 && r.seconds < LONG.as_secs_f64());
    assert!(r.mb_s > 0.0 && r.iops > 0.0);
    assert!(r.lat_us.mean > 0.0 && r.lat_us.max >= r.lat_us.p50);
}

// --- 1. bytes and I/O counting ---------------------------------------------------------

#[test]
fn io_limit_moves_exactly_the_region_on_every_engine() {
    let dir = scratch_dir();
    let region = 4 * MIB;
    let bs = 64 * KIB;
    let target = prep(&request(
        dir.path(),
        region,
        true,
        true,
        DataPattern::Random,
    ));
    let mut seen = Vec::new();
    for engine in engines() {
        let s = settings(engine, true, DataPattern::Random);
        for (rw, d) in [(Rw::Write, IoDir::Write), (Rw::Read, IoDir::Read)] {
            let r = pass(&target, &test_spec(rw, bs, 4, 1, region), &s);
            check_accounting(&r, d, region, region / bs);
            seen.push((engine, rw, r.bytes));
            // Two jobs share the limit and still move the region exactly once in total.
            let r = pass(&target, &test_spec(rw, bs, 4, 2, region), &s);
            check_accounting(&r, d, region, region / bs);
        }
    }
    // Same job, same bytes, whatever the engine.
    for (_, rw, bytes) in &seen {
        assert_eq!(*bytes, 4 * MIB, "{rw}");
    }
    // The file was written in place, never extended.
    assert_eq!(fs::metadata(&target.io_path).unwrap().len(), region);
}

#[test]
fn limit_not_a_multiple_of_bs_rounds_up_to_whole_blocks() {
    let dir = scratch_dir();
    let target = prep(&request(dir.path(), MIB, true, true, DataPattern::Random));
    for engine in engines() {
        let s = settings(engine, true, DataPattern::Random);
        // 100 KiB at 64 KiB blocks: two whole blocks.
        let r = pass(
            &target,
            &test_spec(Rw::RandRead, 64 * KIB, 4, 1, 100 * KIB),
            &s,
        );
        check_accounting(&r, IoDir::Read, 128 * KIB, 2);
    }
}

// --- 2. data read back through each engine ---------------------------------------------

/// Reads `(offset, len)` pieces of the file through `eng` into consecutive slots of `bufs`,
/// all queued before one submit, and returns the pieces.
fn read_pieces<E: Engine>(eng: &mut E, bufs: &BufferPool, pieces: &[(u64, u32)]) -> Vec<Vec<u8>> {
    for (slot, &(off, len)) in pieces.iter().enumerate() {
        eng.queue(bufs, slot as u32, IoDir::Read, off, len);
    }
    let mut done: Vec<Completion> = Vec::new();
    let mut rounds = 0;
    while done.len() < pieces.len() {
        eng.submit_and_reap(1, &mut done).unwrap();
        rounds += 1;
        assert!(rounds < 10_000, "completions never arrived");
    }
    assert_eq!(done.len(), pieces.len(), "one completion per I/O");
    let mut slots: Vec<u32> = done.iter().map(|c| c.slot).collect();
    slots.sort_unstable();
    assert_eq!(slots, (0..pieces.len() as u32).collect::<Vec<_>>());
    for c in &done {
        let want = pieces[c.slot as usize].1 as i32;
        assert_eq!(c.result, want, "slot {}: result", c.slot);
    }
    pieces
        .iter()
        .enumerate()
        .map(|(slot, &(_, len))| bufs.slot(slot)[..len as usize].to_vec())
        .collect()
}

fn open_read(path: &Path, direct: bool) -> File {
    let mut o = OpenOptions::new();
    o.read(true);
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path).unwrap()
}

#[test]
fn engines_read_back_exactly_what_the_file_holds() {
    let dir = scratch_dir();
    let path = dir.path().join("known.bin");
    let content = random_bytes(4 * MIB as usize, 7);
    write_file(&path, &content);

    // Aligned pieces work with and without O_DIRECT; unaligned ones only buffered.
    let aligned: Vec<(u64, u32)> = vec![
        (0, 4096),
        (4096, 4096),
        (MIB, 65536),
        (3 * MIB + 512 * 3, 512),
        (4 * MIB - 8192, 8192),
        (123 * 4096, 16384),
    ];
    let unaligned: Vec<(u64, u32)> = vec![(1, 100), (4095, 2), (MIB + 17, 5000), (4 * MIB - 3, 3)];
    let max_len = 65536;

    let check = |what: &str, pieces: &[(u64, u32)], got: Vec<Vec<u8>>| {
        for (&(off, len), data) in pieces.iter().zip(got) {
            let want = &content[off as usize..off as usize + len as usize];
            assert!(
                data == want,
                "{what}: {len} bytes at offset {off} differ from the file"
            );
        }
    };

    for direct in [true, false] {
        let mut sets = vec![aligned.clone()];
        if !direct {
            sets.push(unaligned.clone());
        }
        for pieces in &sets {
            let file = open_read(&path, direct);
            let fd = file.as_raw_fd();

            let bufs = BufferPool::new(pieces.len(), max_len);
            let mut eng = Psync::new(fd);
            let got = read_pieces(&mut eng, &bufs, pieces);
            check(&format!("psync direct={direct}"), pieces, got);

            if io_uring_available().is_ok() {
                for (reg_file, reg_bufs) in [(false, false), (true, true), (true, false)] {
                    let bufs = BufferPool::new(pieces.len(), max_len);
                    let mut ring =
                        Uring::new(fd, pieces.len() as u32, &bufs, reg_file, reg_bufs).unwrap();
                    let got = read_pieces(&mut ring, &bufs, pieces);
                    drop(ring);
                    check(
                        &format!("io_uring direct={direct} file={reg_file} bufs={reg_bufs}"),
                        pieces,
                        got,
                    );
                }
            }
        }
    }
}

#[test]
fn engines_report_end_of_file_and_errors_as_results() {
    let dir = scratch_dir();
    let path = dir.path().join("short.bin");
    write_file(&path, &random_bytes(8192, 3));
    let file = open_read(&path, false);
    let bufs = BufferPool::new(2, 4096);
    let mut eng = Psync::new(file.as_raw_fd());
    // At the end of the file a read returns 0 bytes; on a read-only fd a write fails.
    eng.queue(&bufs, 0, IoDir::Read, 8192, 4096);
    eng.queue(&bufs, 1, IoDir::Write, 0, 4096);
    let mut done = Vec::new();
    eng.submit_and_reap(2, &mut done).unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!(done[0].result, 0);
    assert_eq!(done[1].result, -libc::EBADF);
    if io_uring_available().is_ok() {
        let mut ring = Uring::new(file.as_raw_fd(), 2, &bufs, false, false).unwrap();
        ring.queue(&bufs, 0, IoDir::Read, 8192, 4096);
        ring.queue(&bufs, 1, IoDir::Write, 0, 4096);
        let mut done = Vec::new();
        while done.len() < 2 {
            ring.submit_and_reap(1, &mut done).unwrap();
        }
        done.sort_by_key(|c| c.slot);
        assert_eq!(done[0].result, 0);
        assert_eq!(done[1].result, -libc::EBADF);
    }
    // Nothing was written.
    assert_eq!(fs::read(&path).unwrap(), random_bytes(8192, 3));
}

// --- 3. writes land where they claim, with unique data ---------------------------------

fn blocks(data: &[u8], size: usize) -> Vec<&[u8]> {
    data.chunks(size).collect()
}

#[track_caller]
fn assert_all_blocks_unique(data: &[u8], what: &str) {
    let mut seen: Vec<&[u8]> = blocks(data, 4096);
    let n = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), n, "{what}: some 4 KiB blocks are identical");
}

#[test]
fn sequential_writes_cover_the_region_with_the_chosen_data() {
    let dir = scratch_dir();
    let region = 4 * MIB;
    let target = prep(&request(
        dir.path(),
        region,
        true,
        true,
        DataPattern::Random,
    ));
    let mut before = fs::read(&target.io_path).unwrap();
    assert_eq!(before.len() as u64, region);
    assert_all_blocks_unique(&before, "prefilled test file");

    for engine in engines() {
        // Random data covering the region once: every 4 KiB block is new and unique.
        let s = settings(engine, true, DataPattern::Random);
        let r = pass(&target, &test_spec(Rw::Write, 64 * KIB, 4, 1, region), &s);
        check_accounting(&r, IoDir::Write, region, region / (64 * KIB));
        let after = fs::read(&target.io_path).unwrap();
        assert_eq!(after.len() as u64, region, "{engine:?}: file size changed");
        for (i, (a, b)) in blocks(&after, 4096)
            .into_iter()
            .zip(blocks(&before, 4096))
            .enumerate()
        {
            assert!(
                a != b,
                "{engine:?}: 4 KiB block {i} (offset {}) was not rewritten",
                i * 4096
            );
        }
        assert_all_blocks_unique(&after, &format!("{engine:?} random write"));
        assert!(
            after.iter().filter(|&&b| b == 0).count() < after.len() / 100,
            "random data is mostly non-zero"
        );
        before = after;
    }

    for engine in engines() {
        // Refill with random data through a pass, then cover once with zeros.
        let s = settings(engine, true, DataPattern::Random);
        pass(&target, &test_spec(Rw::Write, MIB, 2, 1, region), &s);
        assert!(fs::read(&target.io_path).unwrap().iter().any(|&b| b != 0));
        let s = settings(engine, true, DataPattern::Zeros);
        let r = pass(&target, &test_spec(Rw::Write, 128 * KIB, 4, 1, region), &s);
        check_accounting(&r, IoDir::Write, region, region / (128 * KIB));
        let after = fs::read(&target.io_path).unwrap();
        assert_eq!(after.len() as u64, region);
        if let Some(pos) = after.iter().position(|&b| b != 0) {
            panic!("{engine:?}: non-zero byte at offset {pos} after a zeros pass");
        }
    }
}

#[test]
fn buffered_writes_land_too() {
    let dir = scratch_dir();
    let region = 2 * MIB;
    let target = prep(&request(
        dir.path(),
        region,
        true,
        false,
        DataPattern::Random,
    ));
    for engine in engines() {
        let s = settings(engine, false, DataPattern::Zeros);
        let r = pass(&target, &test_spec(Rw::Write, 16 * KIB, 8, 1, region), &s);
        check_accounting(&r, IoDir::Write, region, region / (16 * KIB));
        assert!(fs::read(&target.io_path).unwrap().iter().all(|&b| b == 0));
        let s = settings(engine, false, DataPattern::Random);
        pass(&target, &test_spec(Rw::Write, 16 * KIB, 8, 1, region), &s);
        let after = fs::read(&target.io_path).unwrap();
        assert_all_blocks_unique(&after, &format!("{engine:?} buffered random write"));
    }
}

// --- 4. random offsets stay in the region, aligned to bs -------------------------------

#[test]
fn random_writes_stay_inside_the_region_and_aligned() {
    let dir = scratch_dir();
    let path = dir.path().join("existing.bin");
    let file_len = 8 * MIB as usize;
    let region = 2 * MIB as usize;
    let bs = 8 * KIB as usize;
    let original = random_bytes(file_len, 11);
    write_file(&path, &original);

    for engine in engines() {
        write_file(&path, &original);
        let mut req = request(&path, region as u64, true, true, DataPattern::Zeros);
        req.allow_overwrite_file = true;
        let target = prep(&req);
        assert!(!target.created());
        assert_eq!(target.info.size, region as u64);
        let ios = 1000u64;
        let s = settings(engine, true, DataPattern::Zeros);
        let r = pass(
            &target,
            &test_spec(Rw::RandWrite, bs as u64, 8, 1, ios * bs as u64),
            &s,
        );
        check_accounting(&r, IoDir::Write, ios * bs as u64, ios);
        drop(target);

        let after = fs::read(&path).unwrap();
        assert_eq!(after.len(), file_len, "{engine:?}: file length changed");
        assert!(
            after[region..] == original[region..],
            "{engine:?}: bytes beyond the region changed"
        );
        let mut zeroed = 0;
        for (i, (a, o)) in after[..region]
            .chunks(bs)
            .zip(original[..region].chunks(bs))
            .enumerate()
        {
            if a.iter().all(|&b| b == 0) {
                zeroed += 1;
            } else {
                assert!(
                    a == o,
                    "{engine:?}: {bs}-byte chunk {i} is neither all zero nor unchanged"
                );
            }
        }
        // 1000 random writes over 256 blocks leave few untouched (expected about 5).
        assert!(
            zeroed > 200 && zeroed <= region / bs,
            "{engine:?}: {zeroed} chunks zeroed"
        );
        // Zeroed runs, at sector granularity, start and end on bs boundaries.
        let sector = 512;
        let zero_sector: Vec<bool> = after[..region]
            .chunks(sector)
            .zip(original[..region].chunks(sector))
            .map(|(a, o)| a != o && a.iter().all(|&b| b == 0))
            .collect();
        let mut i = 0;
        while i < zero_sector.len() {
            if zero_sector[i] {
                let start = i;
                while i < zero_sector.len() && zero_sector[i] {
                    i += 1;
                }
                assert_eq!(
                    start * sector % bs,
                    0,
                    "{engine:?}: zeroed run starts at {}",
                    start * sector
                );
                assert_eq!(
                    (i - start) * sector % bs,
                    0,
                    "{engine:?}: zeroed run length"
                );
            } else {
                i += 1;
            }
        }
    }
}

// --- 5. read/write mix -----------------------------------------------------------------

#[test]
fn rwmixread_70_gives_a_70_percent_read_share() {
    let dir = scratch_dir();
    let region = 4 * MIB;
    let target = prep(&request(
        dir.path(),
        region,
        true,
        false,
        DataPattern::Random,
    ));
    // Warm the page cache so the pass runs from memory.
    let _ = fs::read(&target.io_path).unwrap();
    let ios = 20_000u64;
    for engine in engines() {
        let s = settings(engine, false, DataPattern::Random);
        for rw in [Rw::RandRw, Rw::Rw] {
            let mut t = test_spec(rw, 4 * KIB, 8, 1, ios * 4 * KIB);
            t.job.rwmixread = 70;
            let r = pass(&target, &t, &s);
            assert_eq!(r.ios, ios);
            assert_eq!(r.bytes, ios * 4 * KIB);
            let reads = r.read.as_ref().map_or(0, |d| d.ios);
            let writes = r.write.as_ref().map_or(0, |d| d.ios);
            assert_eq!(reads + writes, ios);
            let share = reads as f64 / ios as f64;
            assert!(
                (0.67..=0.73).contains(&share),
                "{engine:?} {rw}: read share {share:.3}"
            );
            let series: u64 = r.timeseries.bytes.iter().sum();
            assert_eq!(series, r.bytes);
        }
    }
}

// --- 6. cleanup of the test file -------------------------------------------------------

fn dir_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn created_test_file_is_removed_on_drop_and_existing_files_never_are() {
    let dir = scratch_dir();

    // Directory target: iolab's own file, removed on drop.
    let target = prep(&request(dir.path(), MIB, true, true, DataPattern::Random));
    assert!(target.created());
    let io_path = target.io_path.clone();
    assert_eq!(
        io_path.parent().unwrap(),
        fs::canonicalize(dir.path()).unwrap()
    );
    assert_eq!(fs::metadata(&io_path).unwrap().len(), MIB);
    assert_eq!(dir_entries(dir.path()), vec![io_path.clone()]);
    drop(target);
    assert!(!io_path.exists(), "test file left behind");
    assert!(dir_entries(dir.path()).is_empty());

    // Also after a pass ran on it (the files it opened are closed by then).
    let target = prep(&request(dir.path(), MIB, true, true, DataPattern::Random));
    let io_path = target.io_path.clone();
    let s = settings(Psync::DESC.kind, true, DataPattern::Random);
    pass(&target, &test_spec(Rw::Write, 64 * KIB, 1, 1, MIB), &s);
    drop(target);
    assert!(!io_path.exists());

    // A new file path: created, then removed.
    let new_path = dir.path().join("new.dat");
    let target = prep(&request(&new_path, MIB, true, true, DataPattern::Zeros));
    assert!(target.created());
    assert!(new_path.exists());
    drop(target);
    assert!(!new_path.exists());

    // An existing file, read or (with permission) written: never removed.
    let existing = dir.path().join("mine.bin");
    let content = random_bytes(MIB as usize, 5);
    write_file(&existing, &content);
    let target = prep(&request(&existing, MIB, false, true, DataPattern::Random));
    assert!(!target.created());
    let s = settings(Psync::DESC.kind, true, DataPattern::Random);
    pass(&target, &test_spec(Rw::Read, 64 * KIB, 1, 1, MIB), &s);
    drop(target);
    assert_eq!(fs::read(&existing).unwrap(), content);

    let mut req = request(&existing, MIB, true, true, DataPattern::Random);
    // Without permission a write target is refused and the file untouched.
    let stop = AtomicBool::new(false);
    let err = prepare(&req, &stop, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("--allow-overwrite-file"), "{err}");
    req.allow_overwrite_file = true;
    let mut target = prep(&req);
    assert!(!target.created());
    assert_eq!(target.cleanup(), None);
    drop(target);
    assert_eq!(fs::read(&existing).unwrap(), content);
    assert_eq!(dir_entries(dir.path()), vec![existing.clone()]);
}

#[test]
fn explicit_cleanup_removes_once() {
    let dir = scratch_dir();
    let mut target = prep(&request(dir.path(), MIB, false, false, DataPattern::Random));
    let io_path = target.io_path.clone();
    assert_eq!(target.cleanup(), Some(io_path.clone()));
    assert!(!io_path.exists());
    // A file of the same name made afterwards by someone else is not removed on drop.
    fs::write(&io_path, b"someone else's").unwrap();
    assert_eq!(target.cleanup(), None);
    drop(target);
    assert_eq!(fs::read(&io_path).unwrap(), b"someone else's");
}

#[test]
fn interrupted_prefill_leaves_nothing() {
    let dir = scratch_dir();
    let stop = AtomicBool::new(true);
    let req = request(dir.path(), 4 * MIB, true, true, DataPattern::Random);
    let err = prepare(&req, &stop, &mut |_, _| {}).unwrap_err();
    assert!(
        matches!(err, iolab_engine::TargetError::Interrupted),
        "{err}"
    );
    assert!(dir_entries(dir.path()).is_empty());
}

/// A sequential job that moves more than its region wraps around inside it.
#[test]
fn sequential_writes_wrap_inside_the_region() {
    let dir = scratch_dir();
    let path = dir.path().join("data.bin");
    let original = random_bytes(2 * MIB as usize, 9);
    for engine in engines() {
        write_file(&path, &original);
        let mut req = request(&path, MIB, true, true, DataPattern::Zeros);
        req.allow_overwrite_file = true;
        let target = prep(&req);
        let s = settings(engine, true, DataPattern::Zeros);
        // Three times the region: the job wraps around twice and never writes past it.
        let r = pass(&target, &test_spec(Rw::Write, 64 * KIB, 4, 1, 3 * MIB), &s);
        check_accounting(&r, IoDir::Write, 3 * MIB, 48);
        drop(target);
        let after = fs::read(&path).unwrap();
        assert_eq!(after.len(), original.len());
        assert!(after[..MIB as usize].iter().all(|&b| b == 0), "{engine:?}");
        assert!(
            after[MIB as usize..] == original[MIB as usize..],
            "{engine:?}"
        );
    }
}

/// The engines iolab-spec's tests install (`engopt::testing`: those crates cannot install
/// this registry) are the engines as their files declare them, options aside; and an engine
/// is found by its name once the registry is installed.
#[test]
fn spec_test_catalogue_agrees_with_the_engines() {
    use iolab_engine::engines::ENGINES;
    for t in iolab_spec::engopt::testing::ENGINES {
        let d = ENGINES
            .iter()
            .find(|d| d.kind == t.kind)
            .unwrap_or_else(|| panic!("{} is not in the registry", t.kind));
        assert_eq!(
            iolab_spec::engopt::EngineDesc { options: &[], ..*d },
            *t,
            "engopt::testing's {} differs from its engine's DESC",
            t.kind
        );
    }
    iolab_engine::engines::install();
    for d in ENGINES {
        assert_eq!(EngineKind::named(d.kind.as_str()), Some(d.kind));
    }
    assert_eq!(
        EngineKind::named("libaio"),
        None,
        "a fio name is not an engine's name"
    );
    let e = serde_json::from_str::<EngineKind>("\"nosuch\"").expect_err("unknown");
    assert!(e.to_string().contains("unknown engine 'nosuch'"), "{e}");
    assert_eq!(
        serde_json::to_string(&Psync::DESC.kind).expect("serialises"),
        "\"psync\""
    );
}
