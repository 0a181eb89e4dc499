//! O_DIRECT runs start each test on a region with no cached pages (fio's invalidate=1): a
//! file (and, as root, a loop device) made resident by a buffered read, then a direct run;
//! the first pass's `cache_resident_before` is ~0 and the run's notes say what was done.
//! A buffered run leaves the cache alone.

use std::path::Path;

use iolab_testkit::*;
use serde_json::Value;

const NOTE: &str = "O_DIRECT: the test region's cached pages were dropped";

/// `iolab run custom --rw randread` on `target`, two short passes, the JSON document.
fn randread(sb: &Sandbox, target: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<&str> = "run custom --rw randread --bs 4k --size 8MiB --duration 100ms \
                                --runs 2 --warmup 0 --no-store --quiet --json -"
        .split_whitespace()
        .collect();
    args.extend(["--target", target.to_str().unwrap()]);
    args.extend_from_slice(extra);
    sb.iolab(&args).ok().json()
}

/// The residency before each pass of the run's one test.
fn resident_before(doc: &Value) -> Vec<Option<f64>> {
    arr(&arr(doc, "tests")[0], "passes")
        .iter()
        .map(|p| get(p, "context")["cache_resident_before"].as_f64())
        .collect()
}

fn notes(doc: &Value) -> Vec<&str> {
    arr(doc, "notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect()
}

/// Reads `path` through the page cache and checks the direct run that follows starts with
/// none of it cached, saying so.
fn direct_run_starts_uncached(sb: &Sandbox, path: &Path) {
    // Buffered read: the region is in the page cache (clean).
    let bytes = std::fs::read(path).unwrap().len();
    assert!(bytes >= 8 << 20, "{} holds {bytes} bytes", path.display());
    let doc = randread(sb, path, &[]);
    let before = resident_before(&doc);
    assert_eq!(before.len(), 2, "{doc:#}");
    let first = before[0].expect("residency is measured before an O_DIRECT read pass");
    assert!(
        first < 0.01,
        "{first} of the region cached before the first direct pass: {doc:#}"
    );
    let note = notes(&doc)
        .into_iter()
        .find(|n| n.starts_with(NOTE))
        .unwrap_or_else(|| panic!("no note on dropping the cache: {doc:#}"));
    assert!(note.contains("was cached before the first test"), "{note}");
}

#[test]
fn a_direct_run_drops_a_cached_file_first() {
    let sb = Sandbox::new();
    let file = sb.path("cached.dat");
    std::fs::write(&file, random_bytes(8 << 20, 7)).unwrap();
    direct_run_starts_uncached(&sb, &file);
}

#[test]
fn a_buffered_run_keeps_the_cache_and_says_nothing() {
    let sb = Sandbox::new();
    let file = sb.path("cached.dat");
    std::fs::write(&file, random_bytes(8 << 20, 8)).unwrap();
    let _ = std::fs::read(&file).unwrap();
    let doc = randread(&sb, &file, &["--buffered"]);
    assert!(!notes(&doc).iter().any(|n| n.starts_with(NOTE)), "{doc:#}");
    // Nothing of iolab's drops the pages, but the kernel may: this VM runs a DAMON
    // pageout scheme (the run's `env.page_cache_reclaim`) that has taken all 8 MiB of the
    // file within one 100 ms pass on a loaded machine. So one pass or the other starts with
    // some of it cached: the first, from the read above, or the second, from the first
    // pass's reads. A run that dropped the cache before every pass has neither.
    let before = resident_before(&doc);
    let first = before[0].expect("residency of a buffered pass");
    let second = before[1].expect("residency of a buffered pass");
    assert!(
        first > 0.0 || second > 0.0,
        "no pass started with any of the file cached: {doc:#}"
    );
}

#[test]
fn a_direct_run_drops_a_cached_device_first() {
    let Some(_lock) = require_devices(&["losetup"]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = Loop::with_options(16 << 20, &["--direct-io=on"]);
    direct_run_starts_uncached(&sb, &lo.dev);
}
