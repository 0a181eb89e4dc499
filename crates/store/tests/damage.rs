//! Damaged, foreign and read-only databases: refused untouched before any write, read where
//! they can be, one damaged run skipped rather than hiding the others.

mod common;

use std::path::{Path, PathBuf};

use iolab_store::{RunFilter, Store, StoreError};
use rusqlite::Connection;
use tempfile::TempDir;

fn db_with_runs(dir: &TempDir, n: usize) -> PathBuf {
    let path = dir.path().join("results.db");
    let mut store = Store::open(&path).unwrap();
    for i in 0..n {
        store.save_run(&common::run(&format!("run-{i}"))).unwrap();
    }
    drop(store);
    // Everything into the main file, so a byte offset means what it says.
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    path
}

fn wal(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", path.display()))
}

/// Overwrites `len` bytes at `at` with bytes of a fixed pseudo-random sequence.
fn scribble(path: &Path, at: u64, len: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let bytes: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&bytes).unwrap();
}

#[test]
fn a_damaged_database_is_refused_before_writing_and_left_as_it_was() {
    let dir = TempDir::new().unwrap();
    let path = db_with_runs(&dir, 3);
    // Page 2 is the root of the runs table.
    scribble(&path, 4096, 2000);
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    assert!(err.is_refusal());
    assert!(err.to_string().contains("left it untouched"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!wal(&path).exists() || std::fs::metadata(wal(&path)).unwrap().len() == 0);
}

#[test]
fn a_truncated_or_overwritten_header_is_damage() {
    let dir = TempDir::new().unwrap();
    let path = db_with_runs(&dir, 2);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 4096)
        .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    scribble(&path, 0, 16);
    let err = Store::open(&path).unwrap_err();
    assert!(err.to_string().contains("SQLite header"), "{err}");
}

#[test]
fn a_negative_schema_version_is_refused_not_a_panic() {
    let dir = TempDir::new().unwrap();
    let path = db_with_runs(&dir, 1);
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = -5")
        .unwrap();
    for err in [
        Store::open(&path).unwrap_err(),
        Store::open_read_only(&path).unwrap_err(),
    ] {
        assert!(
            matches!(err, StoreError::BadVersion { found: -5, .. }),
            "{err:?}"
        );
    }
}

#[test]
fn reading_creates_nothing_and_a_missing_file_reads_empty() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("no/such/results.db");
    let store = Store::open_read_only(&path).unwrap();
    assert!(store.list_runs(&RunFilter::default()).unwrap().is_empty());
    assert_eq!(store.latest_run_id().unwrap(), None);
    assert!(!dir.path().join("no").exists());
}

#[test]
fn reading_does_not_change_the_file() {
    let dir = TempDir::new().unwrap();
    let path = db_with_runs(&dir, 2);
    let before = std::fs::read(&path).unwrap();
    let store = Store::open_read_only(&path).unwrap();
    assert_eq!(store.list_runs(&RunFilter::default()).unwrap().len(), 2);
    store.load_run(1).unwrap();
    drop(store);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn one_damaged_run_is_skipped_and_named() {
    let dir = TempDir::new().unwrap();
    let path = db_with_runs(&dir, 4);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "UPDATE tests SET summary_json = '{broken' WHERE run_id = 2;
         UPDATE runs SET started_at = x'00ff' WHERE id = 3;",
    )
    .unwrap();
    let store = Store::open_read_only(&path).unwrap();
    assert!(store.list_runs(&RunFilter::default()).is_err());
    let mut skipped = Vec::new();
    let runs = store
        .load_runs_skipping(&RunFilter::default(), &mut |id, e| skipped.push((id, e)))
        .unwrap();
    let ids: Vec<i64> = runs.iter().filter_map(|r| r.id).collect();
    assert_eq!(ids, [1, 4]);
    let skipped_ids: Vec<i64> = skipped.iter().map(|(id, _)| *id).collect();
    assert_eq!(skipped_ids, [2, 3]);
    assert!(skipped[0].1.to_string().contains("summary_json of test"));
    let mut listed_skips = 0;
    let listed = store
        .list_runs_skipping(&RunFilter::default(), &mut |_, _| listed_skips += 1)
        .unwrap();
    assert_eq!((listed.len(), listed_skips), (3, 1));
}
