//! The store against real SQLite files in temporary directories.

mod common;

use std::path::Path;
use std::sync::{Arc, Barrier};

use iolab_store::{RunFilter, Store, StoreError, SCHEMA_VERSION};
use rusqlite::Connection;
use tempfile::TempDir;

fn db(dir: &TempDir) -> std::path::PathBuf {
    dir.path().join("results.db")
}

/// Runs `test` on a new SQLite file, then on a new database of the test binary's PostgreSQL
/// server: the store behaves the same on both backends.
fn on_both(test: impl Fn(&Path)) {
    let dir = TempDir::new().unwrap();
    test(&db(&dir));
    if let Some(server) = iolab_testkit::require_postgres() {
        test(Path::new(&server.database()));
    }
}

fn with_id(mut run: iolab_measure::RunRecord, id: i64) -> iolab_measure::RunRecord {
    run.id = Some(id);
    run
}

#[test]
fn round_trip_is_exact() {
    on_both(|path| {
        let run = common::run("0b6f1c2e-round-trip");
        assert!(
            run.tests[1].passes[0]
                .read
                .as_ref()
                .unwrap()
                .histogram
                .count()
                >= 3000
        );
        assert!(run.tests[1].passes[0].write.is_some());
        assert!(run.tests[1].passes[0].sync.is_some());
        assert_eq!(run.tests[1].passes[0].errors.len(), 1);

        let id = {
            let mut store = Store::open(path).unwrap();
            let id = store.save_run(&run).unwrap();
            assert_eq!(store.load_run(id).unwrap(), with_id(run.clone(), id));
            id
        };
        // And from a fresh connection, as another iolab would read it.
        let store = Store::open(path).unwrap();
        let back = store.load_run(id).unwrap();
        assert_eq!(back, with_id(run, id));
        assert_eq!(back.tests.len(), 2);
        assert!(back.tests.iter().all(|t| t.passes.len() == 3));
    });
}

#[test]
fn queried_metrics_are_real_columns() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let run = common::run("columns");
    Store::open(&path).unwrap().save_run(&run).unwrap();

    let conn = Connection::open(&path).unwrap();
    let (mb_s, iops, seconds, ty): (f64, f64, f64, String) = conn
        .query_row(
            "SELECT mb_s, iops, seconds, typeof(mb_s) FROM passes ORDER BY id LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    let first = &run.tests[0].passes[0];
    assert_eq!(
        (mb_s, iops, seconds),
        (first.mb_s, first.iops, first.seconds)
    );
    assert_eq!(ty, "real");
    let (fs, preset, label, study): (String, String, String, String) = conn
        .query_row("SELECT fs_type, preset, label, study FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap();
    assert_eq!(
        (fs.as_str(), preset.as_str(), Some(label), Some(study)),
        ("ext4", "cdm", run.label, run.study)
    );
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn incremental_writes_rebuild_the_same_record() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let run = common::run("incremental");

        let mut started = run.clone();
        started.finished_at = None;
        started.complete = false;
        started.notes.clear();
        started.warnings.clear();
        started.env = serde_json::Value::Null;
        let run_id = store.begin_run(&started).unwrap();
        for (idx, test) in run.tests.iter().enumerate() {
            let mut bare = test.clone();
            bare.passes.clear();
            bare.summary = Default::default();
            let test_id = store.add_test(run_id, idx as u32, &bare).unwrap();
            for pass in &test.passes {
                store.add_pass(test_id, pass).unwrap();
            }
            store
                .update_test_summary(test_id, &test.summary, &test.extra)
                .unwrap();
        }
        store.finish_run(run_id, &run).unwrap();

        assert_eq!(store.load_run(run_id).unwrap(), with_id(run, run_id));
        let listed = store.list_runs(&RunFilter::default()).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].complete);
        assert_eq!(listed[0].tests, 2);
    });
}

#[test]
fn finishing_a_run_records_each_tests_final_extra() {
    // An MPI run learns the other ranks' --verify counts only at its end.
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let mut run = common::run("extra-at-the-end");
        let run_id = store.save_run(&run).unwrap();
        run.tests[1].extra = serde_json::json!({"verify": {"failures": 3}});
        store.finish_run(run_id, &run).unwrap();
        let loaded = store.load_run(run_id).unwrap();
        assert_eq!(loaded.tests[1].extra, run.tests[1].extra);
        assert_eq!(loaded.tests[0].extra, run.tests[0].extra);
    });
}

#[test]
fn interrupted_run_keeps_its_finished_passes() {
    on_both(|path| {
        let run = common::run("interrupted");
        let (run_id, test_id) = {
            let mut store = Store::open(path).unwrap();
            let run_id = store.begin_run(&run).unwrap();
            let mut bare = run.tests[0].clone();
            bare.passes.clear();
            let test_id = store.add_test(run_id, 0, &bare).unwrap();
            store.add_pass(test_id, &run.tests[0].passes[0]).unwrap();
            store.add_pass(test_id, &run.tests[0].passes[1]).unwrap();
            (run_id, test_id)
            // Dropped without finish_run, as when iolab is killed.
        };

        let store = Store::open(path).unwrap();
        let listed = store.list_runs(&RunFilter::default()).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, run_id);
        assert!(!listed[0].complete);
        assert_eq!(listed[0].tests, 1);
        assert_eq!(store.latest_run_id().unwrap(), Some(run_id));

        let back = store.load_run(run_id).unwrap();
        assert!(!back.complete);
        assert_eq!(back.finished_at, None);
        assert_eq!(back.tests.len(), 1);
        assert_eq!(back.tests[0].passes, run.tests[0].passes[..2]);
        assert!(test_id > 0);
    });
}

#[test]
fn concurrent_writers_share_one_store() {
    on_both(|path| {
        // A file's writers take turns; a server's run side by side (fewer runs each: a
        // round trip per write).
        let (writers, runs) = match iolab_store::is_postgres_url(path) {
            false => (2, 40),
            true => (4, 6),
        };
        let start = Arc::new(Barrier::new(writers));
        let writers: Vec<_> = (0..writers)
            .map(|w| {
                let path = path.to_path_buf();
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    // Both open (and migrate) the brand-new file at the same moment.
                    let mut store = Store::open(&path).unwrap();
                    (0..runs)
                        .map(|i| {
                            let mut run = common::run(&format!("writer{w}-run{i}"));
                            run.started_at = format!("2025-03-01T10:{i:02}:0{w}Z");
                            let id = store.save_run(&run).unwrap();
                            (id, run)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let n = writers.len() * runs;
        let saved: Vec<_> = writers
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        assert_eq!(saved.len(), n);

        let store = Store::open(path).unwrap();
        let listed = store.list_runs(&RunFilter::default()).unwrap();
        assert_eq!(listed.len(), saved.len());
        let mut ids: Vec<i64> = listed.iter().map(|l| l.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), saved.len());
        for (id, run) in saved {
            assert_eq!(store.load_run(id).unwrap(), with_id(run, id));
        }
    });
}

#[test]
fn many_openers_race_on_a_new_file() {
    // Regression: converting a new file to WAL does not wait on the busy timeout, so
    // simultaneous first opens used to fail with "database is locked".
    const OPENERS: usize = 8;
    for round in 0..5 {
        let dir = TempDir::new().unwrap();
        let path = db(&dir);
        let start = Arc::new(Barrier::new(OPENERS));
        let handles: Vec<_> = (0..OPENERS)
            .map(|i| {
                let path = path.clone();
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    let mut store = Store::open(&path).unwrap();
                    let mut run = common::run(&format!("opener{round}-{i}"));
                    run.tests.truncate(1);
                    store.save_run(&run).unwrap()
                })
            })
            .collect();
        let mut ids: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), OPENERS);
        let store = Store::open(&path).unwrap();
        assert_eq!(
            store.list_runs(&RunFilter::default()).unwrap().len(),
            OPENERS
        );
    }
}

#[test]
fn newer_database_is_refused_untouched() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();

    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found: 99, supported, .. } if supported == SCHEMA_VERSION),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("99"), "{msg}");
    assert_eq!(err.path(), path);

    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!Path::new(&format!("{}-wal", path.display())).exists());
}

#[test]
fn foreign_sqlite_file_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE contacts (name TEXT)")
        .unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotIolab { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()));
}

#[test]
fn open_creates_directories_and_is_idempotent() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("a/b/iolab/results.db");
    let id = Store::open(&path)
        .unwrap()
        .save_run(&common::run("x"))
        .unwrap();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.path(), path);
    assert_eq!(store.latest_run_id().unwrap(), Some(id));
}

#[test]
fn missing_rows_have_their_own_errors() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let run = common::run("missing");

        let err = store.load_run(42).unwrap_err();
        assert!(
            matches!(err, StoreError::RunNotFound { id: 42, .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("run 42 not found in result database {}", path.display())
        );
        assert!(matches!(
            store.add_test(42, 0, &run.tests[0]).unwrap_err(),
            StoreError::RunNotFound { id: 42, .. }
        ));
        assert!(matches!(
            store.finish_run(42, &run).unwrap_err(),
            StoreError::RunNotFound { id: 42, .. }
        ));
        assert!(matches!(
            store.add_pass(7, &run.tests[0].passes[0]).unwrap_err(),
            StoreError::TestNotFound { id: 7, .. }
        ));
        assert!(matches!(
            store
                .update_test_summary(7, &run.tests[0].summary, &run.tests[0].extra)
                .unwrap_err(),
            StoreError::TestNotFound { id: 7, .. }
        ));
        assert_eq!(store.latest_run_id().unwrap(), None);
    });
}

#[test]
fn duplicate_run_is_refused_whole() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let run = common::run("same-uuid");
        store.save_run(&run).unwrap();
        let err = store.save_run(&run).unwrap_err();
        assert!(matches!(&err, StoreError::DuplicateRun { uuid, .. } if uuid == "same-uuid"));
        assert_eq!(store.list_runs(&RunFilter::default()).unwrap().len(), 1);
    });
}

#[test]
fn list_runs_filters_and_orders() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let mut ids = Vec::new();
        // Saved out of time order: listing goes by start time.
        for (i, (preset, target, label, study, started)) in [
            (
                "cdm",
                "/mnt/a",
                Some("l1"),
                Some("s1"),
                "2025-01-03T00:00:00Z",
            ),
            ("atto", "/mnt/a", None, Some("s1"), "2025-01-01T00:00:00Z"),
            ("cdm", "/mnt/b", Some("l1"), None, "2025-01-02T00:00:00Z"),
            (
                "cdm",
                "/mnt/b",
                Some("l2"),
                Some("s2"),
                "2025-01-04T00:00:00Z",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            let mut run = common::run(&format!("filter-{i}"));
            run.preset = preset.into();
            run.target.path = target.into();
            run.label = label.map(Into::into);
            run.study = study.map(Into::into);
            run.started_at = started.into();
            ids.push(store.save_run(&run).unwrap());
        }
        let list = |f: RunFilter| -> Vec<i64> {
            store.list_runs(&f).unwrap().iter().map(|l| l.id).collect()
        };
        assert_eq!(list(RunFilter::default()), [ids[1], ids[2], ids[0], ids[3]]);
        assert_eq!(
            list(RunFilter {
                preset: Some("cdm".into()),
                ..Default::default()
            }),
            [ids[2], ids[0], ids[3]]
        );
        assert_eq!(
            list(RunFilter {
                target: Some("/mnt/b".into()),
                ..Default::default()
            }),
            [ids[2], ids[3]]
        );
        assert_eq!(
            list(RunFilter {
                label: Some("l1".into()),
                ..Default::default()
            }),
            [ids[2], ids[0]]
        );
        assert_eq!(
            list(RunFilter {
                study: Some("s1".into()),
                preset: Some("cdm".into()),
                ..Default::default()
            }),
            [ids[0]]
        );
        assert_eq!(
            list(RunFilter {
                limit: Some(2),
                ..Default::default()
            }),
            [ids[0], ids[3]]
        );
        assert_eq!(
            list(RunFilter {
                preset: Some("fio".into()),
                ..Default::default()
            }),
            Vec::<i64>::new()
        );
        assert_eq!(store.latest_run_id().unwrap(), Some(ids[3]));

        let l = &store.list_runs(&RunFilter::default()).unwrap()[0];
        assert_eq!(
            (l.preset.as_str(), l.workload.as_str(), l.target.as_str()),
            ("atto", "block", "/mnt/a")
        );
        assert_eq!((l.fs_type.as_str(), l.tests, l.complete), ("ext4", 2, true));
        assert_eq!(l.started_at, "2025-01-01T00:00:00Z");
        assert_eq!(l.label, None);
        assert_eq!(l.study.as_deref(), Some("s1"));
        assert_eq!(l.config_label.as_deref(), Some("discard=async"));
    });
}

#[test]
fn corrupt_json_names_the_column_and_row() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let id = Store::open(&path)
        .unwrap()
        .save_run(&common::run("corrupt"))
        .unwrap();
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE runs SET settings_json = '{' WHERE id = ?1", [id])
        .unwrap();
    let err = Store::open(&path).unwrap().load_run(id).unwrap_err();
    assert!(matches!(err, StoreError::Json { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&format!("settings_json of run {id}")),
        "{err}"
    );
}

/// `RunRecord::engine` is stored as text: "" for a run that used none (loaded back as
/// `None`), and a name this version does not know is an error naming the column and row.
#[test]
fn a_run_without_an_engine_loads_as_none_and_an_unknown_engine_is_named() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let mut run = common::run("no-engine");
    run.engine = None;
    let mut store = Store::open(&path).unwrap();
    let id = store.save_run(&run).unwrap();
    assert_eq!(store.load_run(id).unwrap().engine, None);
    drop(store);
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE runs SET engine = 'warp' WHERE id = ?1", [id])
        .unwrap();
    let err = Store::open(&path).unwrap().load_run(id).unwrap_err();
    assert!(matches!(err, StoreError::Json { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains(&format!("engine of run {id}")), "{text}");
    assert!(text.contains("warp"), "{text}");
}

#[test]
fn version_1_database_is_migrated_and_old_passes_load() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("r.db");
    let original = common::run("5d1f3a52-0000-4000-8000-000000000001");
    let id = Store::open(&path).unwrap().save_run(&original).unwrap();
    {
        // Turn the file back into what iolab 0.1 with schema v1 wrote.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE passes DROP COLUMN context_json; ALTER TABLE passes DROP COLUMN trim_json; \
             ALTER TABLE runs DROP COLUMN study_json; DROP INDEX runs_fingerprint; \
             ALTER TABLE runs DROP COLUMN fingerprint; ALTER TABLE runs DROP COLUMN writer_pid; \
             ALTER TABLE runs DROP COLUMN writer_start; ALTER TABLE runs DROP COLUMN writer_boot; \
             DROP INDEX runs_host; DROP INDEX runs_machine_id; \
             ALTER TABLE runs DROP COLUMN host; ALTER TABLE runs DROP COLUMN machine_id; \
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let loaded = store.load_run(id).unwrap();
    assert!(loaded.study_meta.is_null(), "{:?}", loaded.study_meta);
    for (t, o) in loaded.tests.iter().zip(&original.tests) {
        assert_eq!(t.passes.len(), o.passes.len());
        for (p, q) in t.passes.iter().zip(&o.passes) {
            assert_eq!(p.context, Default::default());
            assert_eq!(p.mb_s, q.mb_s);
        }
    }
}

#[test]
fn codes_and_kinds_are_stored_as_their_strings_and_unknown_ones_load() {
    use iolab_measure::{TargetKind, WarningCode};
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let mut run = common::run("typed-codes-and-kinds");
    run.target.kind = TargetKind::Device;
    run.warnings[0].code = WarningCode::PageCache;
    let id = Store::open(&path).unwrap().save_run(&run).unwrap();
    let conn = Connection::open(&path).unwrap();
    let (kind, warnings): (String, String) = conn
        .query_row(
            "SELECT target_kind, warnings_json FROM runs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(kind, "device");
    let ws: serde_json::Value = serde_json::from_str(&warnings).unwrap();
    assert_eq!(ws[0]["code"], "PAGE_CACHE");
    assert_eq!(ws[1]["code"], "high-cv");

    // What another version of iolab may have written: a kind and a code this one does not
    // know load as they were.
    conn.execute(
        "UPDATE runs SET target_kind = 'pipe', warnings_json = \
         '[{\"code\":\"SOME_NEWER_CODE\",\"message\":\"m\",\"fix\":\"f\",\"test\":null}]' \
         WHERE id = ?1",
        [id],
    )
    .unwrap();
    let back = Store::open(&path).unwrap().load_run(id).unwrap();
    assert_eq!(back.target.kind, TargetKind::Other("pipe".into()));
    assert_eq!(back.target.kind.as_str(), "pipe");
    assert_eq!(back.warnings[0].code.as_str(), "SOME_NEWER_CODE");
    assert_eq!(back.warnings[0].code.caveat(), None);
}

/// A `skipped` callback for runs none of which is damaged.
fn no_skip(id: i64, e: StoreError) {
    panic!("run {id} skipped: {e}");
}

#[test]
fn runs_of_one_command_share_a_fingerprint() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let mut same = Vec::new();
        for i in 0..5 {
            let mut run = common::run(&format!("same-{i}"));
            run.started_at = format!("2025-01-0{}T00:00:00Z", i + 1);
            // Where the results went is not part of the command.
            run.command_line.push("--db".into());
            run.command_line.push(format!("/tmp/{i}.db"));
            same.push(store.save_run(&run).unwrap());
        }
        let mut labelled = common::run("labelled");
        labelled.label = Some("other".into());
        let other = store.save_run(&labelled).unwrap();
        let mut cut = common::run("interrupted");
        cut.complete = false;
        let interrupted = store.save_run(&cut).unwrap();

        let fp = store.fingerprint(same[0]).unwrap();
        assert!(fp.starts_with("fp1-"), "{fp}");
        for id in &same[1..] {
            assert_eq!(store.fingerprint(*id).unwrap(), fp);
        }
        assert_eq!(store.fingerprint(interrupted).unwrap(), fp);
        assert_ne!(store.fingerprint(other).unwrap(), fp);
        assert!(matches!(
            store.fingerprint(9999),
            Err(StoreError::RunNotFound { id: 9999, .. })
        ));

        // The newest three complete runs, oldest first; the interrupted one is not noise.
        let like = store.runs_like(&fp, 3, &mut no_skip).unwrap();
        let ids: Vec<i64> = like.iter().map(|r| r.id.unwrap()).collect();
        assert_eq!(ids, same[2..]);
        let all = store.runs_like(&fp, 100, &mut no_skip).unwrap();
        assert_eq!(all.len(), 5);
        // Summaries without passes.
        let full = store.load_run(same[2]).unwrap();
        for (t, f) in like[0].tests.iter().zip(&full.tests) {
            assert!(t.passes.is_empty());
            assert_eq!(t.summary, f.summary);
            assert_eq!((&t.name, &t.job), (&f.name, &f.job));
        }
        assert!(store
            .runs_like("fp1-0000000000000000", 10, &mut no_skip)
            .unwrap()
            .is_empty());
    });
}

#[test]
fn version_3_database_gets_fingerprints_on_open() {
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    let (a, b, c) = {
        let mut store = Store::open(&path).unwrap();
        let a = store.save_run(&common::run("v3-a")).unwrap();
        let b = store.save_run(&common::run("v3-b")).unwrap();
        let mut other = common::run("v3-c");
        other.config_label = Some("another configuration".into());
        let c = store.save_run(&other).unwrap();
        (a, b, c)
    };
    let before = Store::open(&path).unwrap().fingerprint(a).unwrap();
    {
        // What iolab with schema v3 wrote: no fingerprint column.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP INDEX runs_fingerprint; ALTER TABLE runs DROP COLUMN fingerprint; \
             ALTER TABLE runs DROP COLUMN writer_pid; ALTER TABLE runs DROP COLUMN writer_start; \
             ALTER TABLE runs DROP COLUMN writer_boot; \
             DROP INDEX runs_host; DROP INDEX runs_machine_id; \
             ALTER TABLE runs DROP COLUMN host; ALTER TABLE runs DROP COLUMN machine_id; \
             ALTER TABLE passes DROP COLUMN trim_json; \
             PRAGMA user_version = 3;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    // Filled from the stored columns: the same fingerprint the run got when it began.
    assert_eq!(store.fingerprint(a).unwrap(), before);
    assert_eq!(store.fingerprint(b).unwrap(), before);
    assert_ne!(store.fingerprint(c).unwrap(), before);
    assert_eq!(store.runs_like(&before, 10, &mut no_skip).unwrap().len(), 2);
    let conn = Connection::open(&path).unwrap();
    let missing: i64 = conn
        .query_row(
            "SELECT count(*) FROM runs WHERE fingerprint IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(missing, 0);
}

#[test]
fn the_noise_query_uses_its_index() {
    // However many runs are stored, finding one command's runs is an index lookup (no
    // scan of the runs table): SQLite's plan says so.
    let dir = TempDir::new().unwrap();
    let path = db(&dir);
    Store::open(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE fingerprint = ?1 AND complete = TRUE
             ORDER BY started_at DESC, id DESC LIMIT ?2",
        )
        .unwrap();
    let plan: Vec<String> = stmt
        .query_map(rusqlite::params!["fp1-0", 10], |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let text = plan.join("\n");
    assert!(text.contains("USING INDEX runs_fingerprint"), "{text}");
    assert!(!text.contains("SCAN runs"), "{text}");
}

/// Rows of `table` in the store at `path`.
fn rows(path: &Path, table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table}");
    if iolab_store::is_postgres_url(path) {
        return pg(path).query_one(&sql, &[]).unwrap().get(0);
    }
    Connection::open(path)
        .unwrap()
        .query_row(&sql, [], |r| r.get(0))
        .unwrap()
}

/// Runs the statement `sql` on the store at `path`, outside iolab.
fn exec(path: &Path, sql: &str) {
    if iolab_store::is_postgres_url(path) {
        pg(path).batch_execute(sql).unwrap();
    } else {
        Connection::open(path).unwrap().execute_batch(sql).unwrap();
    }
}

/// The one value of the query `sql` on the PostgreSQL store at `url`.
fn pg_one<T: for<'a> postgres::types::FromSql<'a>>(url: &Path, sql: &str) -> T {
    pg(url).query_one(sql, &[]).unwrap().get(0)
}

fn pg(url: &Path) -> postgres::Client {
    postgres::Client::connect(url.to_str().unwrap(), postgres::NoTls).unwrap()
}

#[test]
fn delete_removes_the_runs_with_their_tests_and_passes_and_nothing_else() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let ids: Vec<i64> = (0..3)
            .map(|i| {
                store
                    .save_run(&common::run(&format!("delete-{i}")))
                    .unwrap()
            })
            .collect();
        let kept = store.load_run(ids[2]).unwrap();
        let (tests, passes) = (rows(path, "tests"), rows(path, "passes"));
        assert_eq!(tests, 6);
        assert_eq!(passes, 18);

        // Given twice, deleted once.
        assert_eq!(store.delete_runs(&[ids[0], ids[1], ids[0]]).unwrap(), 2);
        assert_eq!(store.count_runs().unwrap(), 1);
        assert_eq!(rows(path, "tests"), 2);
        assert_eq!(rows(path, "passes"), 6);
        assert_eq!(store.load_run(ids[2]).unwrap(), kept);
        assert!(matches!(
            store.load_run(ids[0]),
            Err(StoreError::RunNotFound { .. })
        ));

        // An unknown id among known ones: nothing is deleted.
        let err = store.delete_runs(&[ids[2], 999]).unwrap_err();
        assert!(
            matches!(err, StoreError::RunNotFound { id: 999, .. }),
            "{err}"
        );
        assert_eq!(store.count_runs().unwrap(), 1);
        assert_eq!(store.load_run(ids[2]).unwrap(), kept);
        assert_eq!(store.delete_runs(&[]).unwrap(), 0);
    });
}

#[test]
fn a_run_whose_writer_is_alive_is_not_deleted_and_one_whose_writer_died_is() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let done = store.save_run(&common::run("writer-done")).unwrap();
        // Begun by this process and not finished: being written.
        let running = store.begin_run(&common::run("writer-running")).unwrap();
        let me = std::process::id();
        assert_eq!(store.writer(running).unwrap(), Some(me));
        assert_eq!(store.writer(done).unwrap(), None);

        let err = store.delete_runs(&[done, running]).unwrap_err();
        assert!(
            matches!(err, StoreError::RunBeingWritten { id, pid, .. } if id == running && pid == me),
            "{err}"
        );
        assert!(err.is_refusal());
        assert!(err.to_string().contains(&format!("process {me}")), "{err}");
        assert_eq!(store.count_runs().unwrap(), 2, "nothing deleted");

        // prune's way: the finished run goes, the running one is said and kept.
        let (deleted, kept) = store.delete_runs_but_running(&[done, running]).unwrap();
        assert_eq!((deleted, kept), (1, vec![(running, me)]));
        assert_eq!(store.count_runs().unwrap(), 1);

        // Its writer gone (as after kill -9: a later process got the pid, or another boot):
        // deletable.
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        for (set, restore) in [
            (
                "writer_start = writer_start + 1",
                "writer_start = writer_start - 1".to_string(),
            ),
            (
                "writer_boot = 'x'",
                format!("writer_boot = '{}'", boot.trim()),
            ),
        ] {
            exec(path, &format!("UPDATE runs SET {set} WHERE id = {running}"));
            assert_eq!(store.writer(running).unwrap(), None, "{set}");
            exec(
                path,
                &format!("UPDATE runs SET {restore} WHERE id = {running}"),
            );
        }
        assert_eq!(store.writer(running).unwrap(), Some(me));
        if iolab_store::is_postgres_url(path) {
            // Written from another machine of a shared store: its process cannot be looked at,
            // so the run counts as being written, whatever this machine's processes are.
            exec(
            path,
            &format!("UPDATE runs SET machine_id = 'elsewhere', writer_boot = 'x' WHERE id = {running}"),
        );
            assert_eq!(store.writer(running).unwrap(), Some(me));
            assert!(matches!(
                store.delete_runs(&[running]),
                Err(StoreError::RunBeingWritten { .. })
            ));
        }
        // Finished: no writer any more.
        let mut run = common::run("writer-running");
        run.complete = true;
        store.finish_run(running, &run).unwrap();
        assert_eq!(store.writer(running).unwrap(), None);
        assert_eq!(store.delete_runs(&[running]).unwrap(), 1);
    });
}

#[test]
fn runs_are_listed_by_host_name_or_machine_id() {
    on_both(|path| {
        let mut store = Store::open(path).unwrap();
        let mut ids = Vec::new();
        for (i, (host, machine)) in [("nas1", "m-1"), ("nas2", "m-2"), ("nas1", "m-3")]
            .into_iter()
            .enumerate()
        {
            let mut run = common::run(&format!("host-{i}"));
            run.env = serde_json::json!({"hostname": host, "machine_id": machine});
            run.started_at = format!("2025-01-0{}T00:00:00Z", i + 1);
            ids.push(store.save_run(&run).unwrap());
        }
        let list = |host: &str| -> Vec<i64> {
            let f = RunFilter {
                host: Some(host.into()),
                ..Default::default()
            };
            store.list_runs(&f).unwrap().iter().map(|l| l.id).collect()
        };
        assert_eq!(list("nas1"), [ids[0], ids[2]]);
        assert_eq!(list("m-2"), [ids[1]]);
        assert_eq!(list("m-3"), [ids[2]]);
        assert_eq!(list("nas3"), Vec::<i64>::new());
        let all = store.list_runs(&RunFilter::default()).unwrap();
        assert_eq!(all[1].host.as_deref(), Some("nas2"));
        // The same command on two hosts is two commands (two noises).
        assert_ne!(
            store.fingerprint(ids[0]).unwrap(),
            store.fingerprint(ids[1]).unwrap()
        );
    });
}

#[test]
fn a_reader_of_a_postgresql_store_creates_and_upgrades_nothing() {
    let Some(server) = iolab_testkit::require_postgres() else {
        return;
    };
    let url = server.database();
    let path = Path::new(&url);
    let has_schema = || -> bool { pg_one(path, "SELECT to_regclass('iolab_schema') IS NOT NULL") };
    // An empty database: refused, with the commands that create the store; no table made.
    let err = Store::open_read_only(path).unwrap_err();
    assert!(err.is_refusal(), "{err}");
    let text = err.to_string();
    assert!(text.contains("no iolab result store yet"), "{text}");
    assert!(text.contains(&format!("iolab push --to {url}")), "{text}");
    assert!(!has_schema(), "a reader created the schema");
    // A store of schema 5 (before the host columns): refused, left at version 5.
    Store::open(path)
        .unwrap()
        .save_run(&common::run("5d1f3a52-0000-4000-8000-0000000000c1"))
        .unwrap();
    exec(
        path,
        "DROP INDEX runs_host; DROP INDEX runs_machine_id;
         ALTER TABLE runs DROP COLUMN host, DROP COLUMN machine_id;
         ALTER TABLE passes DROP COLUMN trim_json;
         UPDATE iolab_schema SET version = 5;",
    );
    let version = || -> i64 { pg_one(path, "SELECT version FROM iolab_schema") };
    let err = Store::open_read_only(path).unwrap_err();
    assert!(err.is_refusal(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "schema is version 5, older than this iolab's {SCHEMA_VERSION}"
        )),
        "{text}"
    );
    assert!(text.contains("a command that writes upgrades it"), "{text}");
    assert_eq!(version(), 5, "a reader upgraded the store");
    // A writer upgrades it; then it reads.
    Store::open(path).unwrap();
    assert_eq!(version(), SCHEMA_VERSION);
    let store = Store::open_read_only(path).unwrap();
    assert_eq!(store.count_runs().unwrap(), 1);
}
