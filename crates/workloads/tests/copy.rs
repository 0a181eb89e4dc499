//! The copy workload end to end on a small directory of the normal filesystem.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use iolab_spec::Rw;
use iolab_testkit::{is_root, scratch_dir, skip};
use iolab_workloads::copy::{self, CopyConfig, WorkloadError};

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every file, dir and link below `dir` with its contents or link target, sorted.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                let to = std::fs::read_link(&p).unwrap();
                out.push((rel, to.to_string_lossy().as_bytes().to_vec()));
            } else if ft.is_dir() {
                out.push((rel, b"<dir>".to_vec()));
                stack.push(p);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn generated_source_is_copied_verified_and_removed() {
    let t = scratch_dir();
    let mut cfg = CopyConfig::new(t.path().to_path_buf());
    cfg.generate_size = 6 << 20;
    cfg.buffer_size = 256 << 10;
    cfg.runs = 2;
    let stop = AtomicBool::new(false);
    let mut labels: Vec<String> = Vec::new();
    let tests = copy::run(&cfg, &stop, &mut |l, _| {
        if labels.last().map(String::as_str) != Some(l) {
            labels.push(l.to_string());
        }
    })
    .unwrap();
    assert_eq!(tests.len(), 1);
    let t0 = &tests[0];
    assert_eq!(t0.job.rw, Rw::Write);
    assert_eq!(t0.job.bs, 256 << 10);
    assert!(t0.job.end_fsync);
    assert_eq!(t0.passes.len(), 2);
    assert_eq!(t0.summary.passes, 2);
    let x = &t0.extra;
    assert_eq!(x["source_generated"], true);
    assert_eq!(x["verified"], true);
    assert_eq!(x["files"], 1);
    assert_eq!(x["bytes"], 6 << 20);
    for (p, px) in t0.passes.iter().zip(x["passes"].as_array().unwrap()) {
        assert_eq!(p.bytes, 6 << 20);
        let w = p.write.as_ref().unwrap();
        assert!(
            w.ios >= 24,
            "one histogram entry per write() call: {}",
            w.ios
        );
        assert_eq!(p.timeseries.interval_ms, 100);
        assert_eq!(p.timeseries.bytes.iter().sum::<u64>(), 6 << 20);
        // One fsync for the file, one per directory (destination and target).
        assert_eq!(p.sync.as_ref().unwrap().count, 3);
        let before = px["mb_s_before_fsync"].as_f64().unwrap();
        let incl = px["mb_s_including_fsync"].as_f64().unwrap();
        assert!(before >= incl, "{before} < {incl}");
        assert!(
            (incl - p.mb_s).abs() / p.mb_s < 1e-3,
            "{incl} vs {}",
            p.mb_s
        );
        let secs =
            px["seconds_before_fsync"].as_f64().unwrap() + px["fsync_seconds"].as_f64().unwrap();
        assert!((secs - p.seconds).abs() < 1e-3);
        assert_eq!(px["verified"], true);
        // The generated source is evicted before each pass: not read from memory.
        assert!(
            p.context.cache_resident_before.unwrap() < 0.5,
            "{:?}",
            p.context
        );
    }
    assert!(labels.starts_with(&["generate".to_string()]), "{labels:?}");
    assert!(labels.contains(&"copy 2/2".to_string()), "{labels:?}");
    assert!(labels.contains(&"verify 1/2".to_string()), "{labels:?}");
    assert!(
        entries(t.path()).is_empty(),
        "left behind: {:?}",
        entries(t.path())
    );
}

#[test]
fn tree_with_links_is_copied_and_source_untouched() {
    let src_parent = scratch_dir();
    let src = src_parent.path().join("tree");
    std::fs::create_dir_all(src.join("a/b/c")).unwrap();
    std::fs::create_dir(src.join("empty")).unwrap();
    std::fs::write(src.join("zero"), b"").unwrap();
    std::fs::write(src.join("a/one"), b"x").unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(src.join("a/b/big"), &big).unwrap();
    std::fs::write(src.join("a/b/c/mid"), vec![9u8; 100_000]).unwrap();
    std::os::unix::fs::symlink("b/big", src.join("a/link")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/dangling", src.join("dangling")).unwrap();
    let before = snapshot(&src);

    let t = scratch_dir();
    let mut cfg = CopyConfig::new(t.path().to_path_buf());
    cfg.source = Some(src.clone());
    cfg.buffer_size = 64 << 10;
    let stop = AtomicBool::new(false);
    let tests = copy::run(&cfg, &stop, &mut |_, _| {}).unwrap();
    let x = &tests[0].extra;
    assert_eq!(x["source_generated"], false);
    assert_eq!(x["files"], 4);
    assert_eq!(x["dirs"], 5); // tree, a, a/b, a/b/c, empty
    assert_eq!(x["symlinks"], 2);
    assert_eq!(x["bytes"], 3_100_001);
    assert_eq!(x["verified"], true);
    assert_eq!(tests[0].passes[0].bytes, 3_100_001);
    assert_eq!(tests[0].name, "copy tree");
    // Files + every directory: destination root, the tree's five and the target.
    assert_eq!(tests[0].passes[0].sync.as_ref().unwrap().count, 4 + 5 + 2);
    assert_eq!(snapshot(&src), before, "the source changed");
    assert!(
        entries(t.path()).is_empty(),
        "left behind: {:?}",
        entries(t.path())
    );
}

#[test]
fn single_file_source_and_refusals() {
    let d = scratch_dir();
    let f = d.path().join("file.bin");
    std::fs::write(&f, vec![5u8; 1_000_001]).unwrap();
    let t = scratch_dir();
    let stop = AtomicBool::new(false);
    let mut cfg = CopyConfig::new(t.path().to_path_buf());
    cfg.source = Some(f.clone());
    let tests = copy::run(&cfg, &stop, &mut |_, _| {}).unwrap();
    assert_eq!(tests[0].extra["files"], 1);
    assert_eq!(tests[0].extra["dirs"], 0);
    assert_eq!(std::fs::metadata(&f).unwrap().len(), 1_000_001);
    assert!(entries(t.path()).is_empty());

    // A target inside the source tree would copy the copy.
    let mut inside = CopyConfig::new(d.path().join("sub"));
    std::fs::create_dir(d.path().join("sub")).unwrap();
    inside.source = Some(d.path().to_path_buf());
    let e = copy::run(&inside, &stop, &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, WorkloadError::Invalid { .. }), "{e}");
    assert_eq!(entries(&d.path().join("sub")), Vec::<String>::new());

    // A missing source names the path.
    let mut missing = CopyConfig::new(t.path().to_path_buf());
    missing.source = Some(d.path().join("nope"));
    let e = copy::run(&missing, &stop, &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn stop_ends_early_and_cleans_up() {
    let t = scratch_dir();
    let mut cfg = CopyConfig::new(t.path().to_path_buf());
    cfg.generate_size = 4 << 20;
    cfg.runs = 3;
    let stop = AtomicBool::new(false);
    // Let the first pass finish, stop at the start of the second.
    let tests = copy::run(&cfg, &stop, &mut |l, _| {
        if l == "copy 2/3" {
            stop.store(true, Ordering::Relaxed);
        }
    })
    .unwrap();
    assert_eq!(tests.len(), 1);
    assert_eq!(tests[0].passes.len(), 1);
    assert!(
        entries(t.path()).is_empty(),
        "left behind: {:?}",
        entries(t.path())
    );

    // Stopped while generating: nothing measured, nothing left.
    let stop = AtomicBool::new(true);
    let tests = copy::run(&cfg, &stop, &mut |_, _| {}).unwrap();
    assert!(tests.is_empty());
    assert!(entries(t.path()).is_empty());
}

#[test]
fn drop_caches_before_each_pass() {
    let t = scratch_dir();
    let mut cfg = CopyConfig::new(t.path().to_path_buf());
    cfg.generate_size = 2 << 20;
    cfg.drop_caches = true;
    let stop = AtomicBool::new(false);
    if !is_root() {
        let e = copy::run(&cfg, &stop, &mut |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("root"), "{e}");
        skip!("dropping the page cache needs root");
    }
    let mut dropped = false;
    let tests = copy::run(&cfg, &stop, &mut |l, _| dropped |= l == "drop caches 1/1").unwrap();
    assert!(dropped);
    assert_eq!(tests[0].extra["drop_caches"], true);
    assert_eq!(tests[0].extra["verified"], true);
    assert!(entries(t.path()).is_empty());
}
