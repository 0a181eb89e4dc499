//! The sync-method probe with `verify` on a small file of the normal filesystem: every
//! written block reads back as written, and damage done to the file between a pass and its
//! read-back is found at its offset with its class.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iolab_testkit::scratch_dir;
use iolab_workloads::fsync::{self, AfterPass, FsyncConfig, FsyncReport, SyncMethod};
use serde_json::Value;

const BS: u64 = 4096;
/// 16 blocks of 4 KiB: every test rewrites each of them many times per pass.
const FILE: u64 = 16 * BS;

fn config(dir: &Path, methods: &[SyncMethod], sizes: &[u64], runs: u32) -> FsyncConfig {
    let mut cfg = FsyncConfig::new(dir.to_path_buf());
    cfg.methods = methods.to_vec();
    cfg.sizes = sizes.to_vec();
    cfg.runs = runs;
    // Short: unoptimized test builds stamp slowly, and stamping is not counted in a pass.
    cfg.duration = Duration::from_millis(40);
    cfg.file_size = FILE;
    // Every pass writes each block at least once, however busy the machine: the tests
    // check given blocks (a pass of 40 ms under a loaded build wrote only 5).
    cfg.min_writes = FILE / sizes.iter().min().unwrap();
    cfg.verify = Some(0x5EED_F5C0);
    cfg
}

fn probe(cfg: &FsyncConfig) -> FsyncReport {
    let report = fsync::run(cfg, &AtomicBool::new(false), &mut |_| {}).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    report
}

/// `hook` runs after every pass with the probe file and the number of earlier calls.
fn after_pass(hook: impl Fn(&Path, u32) + Send + Sync + 'static) -> Option<AfterPass> {
    let calls = AtomicU32::new(0);
    Some(AfterPass(Arc::new(move |p: &Path| {
        hook(p, calls.fetch_add(1, Ordering::SeqCst))
    })))
}

fn read(path: &Path, offset: u64, len: u64) -> Vec<u8> {
    let mut b = vec![0u8; len as usize];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut b, offset)
        .unwrap();
    b
}

fn write(path: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

fn uint(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer {key} in {v}"))
}

fn verify_of<'a>(report: &'a FsyncReport, name: &str) -> &'a Value {
    let t = report.tests.iter().find(|t| t.name == name).unwrap();
    &t.extra["verify"]
}

#[test]
fn every_written_block_reads_back_as_written() {
    let t = scratch_dir();
    let cfg = config(
        t.path(),
        &[SyncMethod::None, SyncMethod::Fdatasync],
        &[512, BS],
        2,
    );
    let report = probe(&cfg);
    assert_eq!(report.tests.len(), 4);
    assert_eq!(report.checks.len(), 4);
    for (test, (name, tally)) in report.tests.iter().zip(&report.checks) {
        assert_eq!(&test.name, name);
        let v = &test.extra["verify"];
        assert_eq!(uint(v, "checked"), tally.checked);
        assert_eq!(uint(v, "read_backs"), 2, "{name}: {v}");
        assert!(tally.checked > 0, "{name}: {v}");
        assert_eq!(
            (tally.ok, tally.failures),
            (tally.checked, 0),
            "{name}: {v}"
        );
        assert_eq!(uint(&v["classes"], "ok"), tally.checked);
        assert_eq!(uint(v, "block_size"), test.job.bs);
        assert!(v["stamp_seconds"].as_f64().unwrap() > 0.0, "{name}: {v}");
    }
    // Plain 4 KiB writes cover the 16 blocks many times in a pass: both read-backs check
    // all of them.
    assert_eq!(uint(verify_of(&report, "none 4K"), "checked"), 2 * 16);
    assert!(std::fs::read_dir(t.path()).unwrap().next().is_none());
}

#[test]
fn damage_between_the_pass_and_its_read_back_is_found_with_offset_and_class() {
    let t = scratch_dir();
    let mut cfg = config(t.path(), &[SyncMethod::None], &[BS], 1);
    // A flipped bit in block 3, and block 2's content written over block 7.
    cfg.after_pass = after_pass(|p, _| {
        let mut b = read(p, 3 * BS + 100, 1);
        b[0] ^= 0x04;
        write(p, 3 * BS + 100, &b);
        write(p, 7 * BS, &read(p, 2 * BS, BS));
    });
    let report = probe(&cfg);
    let v = verify_of(&report, "none 4K");
    assert_eq!(
        (uint(v, "checked"), uint(v, "ok"), uint(v, "failures")),
        (16, 14, 2),
        "{v}"
    );
    let samples = v["failure_samples"].as_array().unwrap();
    let found: Vec<(u64, &str)> = samples
        .iter()
        .map(|m| (uint(m, "offset"), m["class"].as_str().unwrap()))
        .collect();
    assert_eq!(
        found,
        [(3 * BS, "bit-corruption"), (7 * BS, "misdirected")],
        "{v}"
    );
    let detail = samples[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("1 bit(s)") && detail.contains("first at byte 100 "),
        "{detail}"
    );
    assert!(samples[1]["detail"]
        .as_str()
        .unwrap()
        .contains(&format!("offset {}", 2 * BS)));
}

#[test]
fn a_block_left_by_an_earlier_test_is_a_lost_write_not_a_match() {
    let t = scratch_dir();
    let mut cfg = config(
        t.path(),
        &[SyncMethod::None, SyncMethod::Fdatasync],
        &[BS],
        1,
    );
    // After the first test, keep block 5; after the second, put it back, as if the second
    // test's last write there never reached the file. The two tests write the same offsets
    // in the same order, so only generations that go on across tests tell the blocks apart.
    let saved = Mutex::new(Vec::new());
    cfg.after_pass = after_pass(move |p, call| {
        let mut saved = saved.lock().unwrap();
        match call {
            0 => *saved = read(p, 5 * BS, BS),
            _ => write(p, 5 * BS, &saved),
        }
    });
    let report = probe(&cfg);
    let first = verify_of(&report, "none 4K");
    assert_eq!(uint(first, "failures"), 0, "{first}");
    let second = verify_of(&report, "write+fdatasync 4K");
    assert_eq!(uint(second, "failures"), 1, "{second}");
    let m = &second["failure_samples"][0];
    assert_eq!(
        (uint(m, "offset"), m["class"].as_str()),
        (5 * BS, Some("stale"))
    );
    assert!(
        m["detail"].as_str().unwrap().contains("a lost write"),
        "{m}"
    );
}

#[test]
fn sizes_that_are_not_whole_sectors_are_refused() {
    let t = scratch_dir();
    let cfg = config(t.path(), &[SyncMethod::None], &[BS, 1000], 1);
    let e = fsync::run(&cfg, &AtomicBool::new(false), &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("1000"), "{e}");
    assert!(std::fs::read_dir(t.path()).unwrap().next().is_none());
}
