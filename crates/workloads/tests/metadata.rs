//! The metadata workload end to end on a small directory of the normal filesystem.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use iolab_spec::Rw;
use iolab_testkit::{scratch_dir, QuietDir};
use iolab_workloads::metadata::{self, MetadataConfig, WorkloadError};

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
    let t = QuietDir::new();
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
    if t.shared() && space.is_null() {
        let why = &tests[0].extra["space_unmeasured"];
        assert!(
            why.as_str().is_some_and(|w| w.contains("other processes")),
            "{why}"
        );
        eprintln!("space not checked: {} is shared: {why}", t.path().display());
    } else {
        let per_file = space["bytes_per_file"]
            .as_f64()
            .unwrap_or_else(|| panic!("{:#}", tests[0].extra));
        assert!(per_file > 0.0, "{space}");
        assert!(
            space["allocated_bytes_per_file"].as_f64().unwrap() > 0.0,
            "{space}"
        );
        assert!(space["f_frsize"].as_u64().unwrap() >= 512);
        assert!(space["inodes_per_file"].as_f64().unwrap() > 0.5, "{space}");
    }

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
    let t = scratch_dir();
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
    let t = scratch_dir();
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
    let t = scratch_dir();
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

/// The read test of a `verify` run: its `extra.verify`.
fn verify_of(tests: &[iolab_measure::TestRecord]) -> &serde_json::Value {
    let read = tests
        .iter()
        .find(|t| t.name == "read")
        .expect("a read test");
    &read.extra["verify"]
}

/// A `verify` run of `files` files of `file_size` bytes in `dirs` directories by `threads`
/// threads, with `damage` applied to the work directory after the stat phase; returns its
/// tests, after checking that every phase ran and the work directory is gone.
fn verified_run(
    (files, dirs, threads, file_size): (u64, u32, u32, u64),
    damage: impl Fn(&Path) + Send + Sync + 'static,
) -> Vec<iolab_measure::TestRecord> {
    let _serial = serial();
    let t = scratch_dir();
    let mut cfg = MetadataConfig::new(t.path().to_path_buf());
    (cfg.files, cfg.dirs, cfg.threads, cfg.file_size) = (files, dirs, threads, file_size);
    cfg.verify = Some(0x5eed);
    cfg.before_read = Some(metadata::BeforeRead(std::sync::Arc::new(damage)));
    let stop = AtomicBool::new(false);
    let tests = metadata::run(&cfg, &stop, &mut |_, _| {}).unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["create", "stat", "read", "rename", "delete"]);
    assert!(is_empty(t.path()), "the work directory is gone");
    tests
}

/// The read test's `extra.verify` of [`verified_run`].
fn damaged_run(
    shape: (u64, u32, u32, u64),
    damage: impl Fn(&Path) + Send + Sync + 'static,
) -> serde_json::Value {
    verify_of(&verified_run(shape, damage)).clone()
}

/// File `i` of a work directory of `dirs` directories.
fn file(work: &Path, dirs: u64, i: u64) -> std::path::PathBuf {
    work.join(format!("d{:04}/f{i:09}", i % dirs))
}

fn flip_bit(path: &Path, offset: u64, mask: u8) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, offset).unwrap();
    f.write_all_at(&[b[0] ^ mask], offset).unwrap();
}

/// (file, class, offset) of every failure sample.
fn samples(v: &serde_json::Value) -> Vec<(String, String, u64)> {
    v["failure_samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["file"].as_str().unwrap().to_string(),
                s["class"].as_str().unwrap().to_string(),
                s["offset"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn verify_checks_every_file_in_the_read_phase() {
    let tests = verified_run((300, 7, 3, 100), |_| {});
    let v = verify_of(&tests);
    assert_eq!(v["checked"], 300, "{v}");
    assert_eq!(
        (v["ok"].as_u64(), v["failures"].as_u64()),
        (Some(300), Some(0))
    );
    assert_eq!(v["classes"]["ok"], 300);
    assert_eq!(v["run_id"], "0000000000005eed");
    assert_eq!(v["header"], true);
    assert!(v["failure_samples"].as_array().unwrap().is_empty());
    assert_eq!(tests[0].extra["content"], "verifiable");
    assert_eq!(tests[0].passes[0].bytes, 300 * 100);
    for t in tests.iter().filter(|t| t.name != "read") {
        assert!(t.extra.get("verify").is_none(), "{}", t.name);
    }
}

#[test]
fn verify_names_the_file_offset_and_class_of_each_damage() {
    let v = damaged_run((40, 4, 2, 100), |work| {
        // File 3 gets file 11's content, file 5 zeros, file 8 loses its last 40 bytes,
        // file 13 one bit at byte 70, file 21 ten bytes more.
        std::fs::copy(file(work, 4, 11), file(work, 4, 3)).unwrap();
        std::fs::write(file(work, 4, 5), [0u8; 100]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(file(work, 4, 8))
            .unwrap()
            .set_len(60)
            .unwrap();
        flip_bit(&file(work, 4, 13), 70, 0x04);
        let mut f = std::fs::File::options()
            .append(true)
            .open(file(work, 4, 21))
            .unwrap();
        std::io::Write::write_all(&mut f, &[7u8; 10]).unwrap();
    });
    assert_eq!(v["checked"], 40, "{v}");
    assert_eq!(
        (v["ok"].as_u64(), v["failures"].as_u64()),
        (Some(35), Some(5))
    );
    for class in ["misdirected", "zeroed", "short", "corrupt", "long"] {
        assert_eq!(v["classes"][class], 1, "{class}: {v}");
    }
    assert_eq!(
        samples(&v),
        [
            ("d0003/f000000003".to_string(), "misdirected".to_string(), 0),
            ("d0001/f000000005".into(), "zeroed".into(), 0),
            ("d0000/f000000008".into(), "short".into(), 60),
            ("d0001/f000000013".into(), "corrupt".into(), 70),
            ("d0001/f000000021".into(), "long".into(), 100),
        ]
    );
    let s = &v["failure_samples"];
    assert!(
        s[0]["found"]
            .as_str()
            .unwrap()
            .starts_with("file 11 of run"),
        "{s}"
    );
    assert_eq!(
        (&s[2]["expected"], &s[2]["found"]),
        (&"100 bytes".into(), &"60 bytes".into())
    );
    let detail = s[3]["detail"].as_str().unwrap();
    assert!(detail.contains("1 bit(s) in 1 byte(s)"), "{detail}");
    assert_eq!(s[4]["found"], "110 bytes");
}

#[test]
fn verify_without_room_for_a_header_compares_bytes() {
    let v = damaged_run((10, 1, 1, 20), |work| {
        std::fs::copy(file(work, 1, 2), file(work, 1, 1)).unwrap();
        flip_bit(&file(work, 1, 4), 19, 0x80);
    });
    assert_eq!(v["header"], false);
    assert_eq!(
        (v["checked"].as_u64(), v["failures"].as_u64()),
        (Some(10), Some(2))
    );
    let got = samples(&v);
    assert_eq!(got[0].0, "d0000/f000000001");
    // No header names file 2, so its bytes are only "not this file's".
    assert_eq!(got[0].1, "foreign");
    assert_eq!(got[1], ("d0000/f000000004".into(), "corrupt".into(), 19));
}

#[test]
fn verify_of_files_larger_than_the_read_buffer() {
    let at = (5 << 20) / 2;
    let v = damaged_run((4, 2, 1, 3 << 20), move |work| {
        flip_bit(&file(work, 2, 2), at, 0x01)
    });
    assert_eq!(
        (v["checked"].as_u64(), v["failures"].as_u64()),
        (Some(4), Some(1))
    );
    assert_eq!(
        samples(&v),
        [("d0000/f000000002".into(), "corrupt".into(), at)]
    );
}
