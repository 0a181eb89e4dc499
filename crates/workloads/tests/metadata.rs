//! The metadata workload end to end on a small directory of the normal filesystem.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use iolab_spec::Rw;
use iolab_workloads::metadata::{self, MetadataConfig, WorkloadError};

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// The space figure compares the filesystem's usage before and after the create phase:
/// the tests run one at a time so they do not create and delete files under each other.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn is_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

#[test]
fn every_phase_counts_exactly_and_space_is_measured() {
    let _serial = serial();
    let t = scratch();
    let mut cfg = MetadataConfig::new(t.path().to_path_buf());
    cfg.files = 2000;
    cfg.dirs = 7;
    cfg.threads = 3;
    let stop = AtomicBool::new(false);
    let mut last: Vec<(String, u64)> = Vec::new();
    let tests = metadata::run(&cfg, &stop, &mut |l, n| match last.last_mut() {
        Some((p, m)) if p == l => *m = n,
        _ => last.push((l.to_string(), n)),
    })
    .unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["create", "stat", "read", "rename", "delete"]);
    for t in &tests {
        let p = &t.passes[0];
        assert_eq!(p.ios, 2000, "{}", t.name);
        assert_eq!(t.extra["ops"], 2000, "{}", t.name);
        assert_eq!(t.extra["phase"], t.name.as_str());
        assert!(p.iops > 0.0 && t.summary.iops > 0.0, "{}", t.name);
        assert_eq!(t.job.numjobs, 3);
        assert_eq!(t.job.bs, 100);
        let series: u64 = t.extra["ops_series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(series, 2000, "{}", t.name);
        let dir = if t.job.rw == Rw::Read {
            p.read.as_ref()
        } else {
            p.write.as_ref()
        };
        assert_eq!(dir.unwrap().ios, 2000);
    }
    // Bytes only where data moves.
    assert_eq!(tests[0].passes[0].bytes, 200_000);
    assert_eq!(tests[2].passes[0].bytes, 200_000);
    assert!(tests[0].passes[0].mb_s > 0.0);
    for i in [1, 3, 4] {
        assert_eq!(tests[i].passes[0].bytes, 0);
        assert_eq!(tests[i].passes[0].mb_s, 0.0);
    }
    assert_eq!(tests[1].job.rw, Rw::Read);
    assert_eq!(tests[3].job.rw, Rw::Write);
    assert!(tests[0].passes[0].sync.is_none());

    let space = &tests[0].extra["space"];
    let per_file = space["bytes_per_file"].as_f64().unwrap();
    assert!(per_file > 0.0, "{space}");
    assert!(
        space["allocated_bytes_per_file"].as_f64().unwrap() > 0.0,
        "{space}"
    );
    assert!(space["f_frsize"].as_u64().unwrap() >= 512);
    assert!(space["inodes_per_file"].as_f64().unwrap() > 0.5, "{space}");

    // Progress saw every phase reach the full count.
    for phase in ["create", "stat", "read", "rename", "delete"] {
        let n = last.iter().rfind(|(p, _)| p == phase).map(|x| x.1);
        assert_eq!(n, Some(2000), "{phase}: {last:?}");
    }
    assert!(is_empty(t.path()), "the work directory is gone");
}

#[test]
fn fsync_counts_every_file() {
    let _serial = serial();
    let t = scratch();
    let mut cfg = MetadataConfig::new(t.path().to_path_buf());
    cfg.files = 60;
    cfg.dirs = 2;
    cfg.threads = 2;
    cfg.file_size = 4096;
    cfg.fsync = true;
    let stop = AtomicBool::new(false);
    let tests = metadata::run(&cfg, &stop, &mut |_, _| {}).unwrap();
    let create = &tests[0];
    assert_eq!(create.passes[0].sync.as_ref().unwrap().count, 60);
    assert_eq!(create.job.fsync_every, 1);
    assert_eq!(create.passes[0].bytes, 60 * 4096);
    assert!(is_empty(t.path()));
}

#[test]
fn more_threads_than_files_and_stop() {
    let _serial = serial();
    let t = scratch();
    let stop = AtomicBool::new(false);
    let mut cfg = MetadataConfig::new(t.path().to_path_buf());
    cfg.files = 3;
    cfg.dirs = 5;
    cfg.threads = 8;
    let tests = metadata::run(&cfg, &stop, &mut |_, _| {}).unwrap();
    assert_eq!(tests.len(), 5);
    assert!(tests.iter().all(|t| t.passes[0].ios == 3));
    assert_eq!(tests[0].job.numjobs, 3);
    assert!(is_empty(t.path()));

    // Stop when the read phase starts: create and stat are kept, everything is removed.
    cfg.files = 500;
    cfg.threads = 2;
    let tests = metadata::run(&cfg, &stop, &mut |l, _| {
        if l == "read" {
            stop.store(true, Ordering::Relaxed);
        }
    })
    .unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["create", "stat"]);
    assert!(is_empty(t.path()));
}

#[test]
fn bad_options_and_missing_dir() {
    let _serial = serial();
    let t = scratch();
    let stop = AtomicBool::new(false);
    let mut cfg = MetadataConfig::new(t.path().to_path_buf());
    cfg.files = 0;
    let e = metadata::run(&cfg, &stop, &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, WorkloadError::Invalid { .. }), "{e}");
    cfg.files = 10;
    cfg.threads = 0;
    assert!(metadata::run(&cfg, &stop, &mut |_, _| {}).is_err());
    let missing = MetadataConfig::new(t.path().join("nope"));
    let e = metadata::run(&missing, &stop, &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    assert!(is_empty(t.path()));
}
