//! [`Store`]: opening the database, writing runs (incrementally or at once) and reading them
//! back.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iolab_measure::{PassRecord, RunRecord, TargetInfo, TargetKind, TestRecord, TestSummary};
use iolab_sys::process::Identity;
use rusqlite::{
    ffi, named_params, params, Connection, ErrorCode, OpenFlags, OptionalExtension, Row,
    Transaction, TransactionBehavior,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::dbfile::{self, DbFile};
use crate::error::{AtPath, StoreError};
use crate::{fingerprint, health, schema};

/// How long a write waits for another connection (another iolab) to finish its transaction
/// before giving up with "database is locked".
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Which runs [`Store::list_runs`] returns. Every field left `None` matches all runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub preset: Option<String>,
    /// The target path exactly as recorded (absolute).
    pub target: Option<String>,
    pub label: Option<String>,
    pub study: Option<String>,
    /// Only the newest N matching runs (still listed oldest first).
    pub limit: Option<usize>,
}

/// One line of a run listing: what identifies a run without loading its passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunListing {
    pub id: i64,
    pub started_at: String,
    pub preset: String,
    pub workload: String,
    /// The target path as the user gave it.
    pub target: String,
    pub fs_type: String,
    pub label: Option<String>,
    pub complete: bool,
    /// Number of tests stored for the run.
    pub tests: usize,
    pub study: Option<String>,
    pub config_label: Option<String>,
}

/// An open result database. Writes take `&mut self`; each is one short `BEGIN IMMEDIATE`
/// transaction, so several processes (or threads, each with its own `Store`) can write to
/// one file: they take turns, waiting up to [`BUSY_TIMEOUT`].
#[derive(Debug)]
pub struct Store {
    // Dropped in this order: SQLite closes its descriptors before the checked file's.
    conn: Connection,
    path: PathBuf,
    _file: Option<DbFile>,
}

impl Store {
    /// Opens (creating it and its directory if needed) the database at `path` for writing
    /// and brings its schema up to date. Anything but a regular file (a device, a FIFO, a
    /// symlink to one: `dbfile.rs`), a file on a read-only filesystem or one that cannot be
    /// written, a database written by a newer iolab, an SQLite file that is not iolab's, or
    /// a damaged one (the check of `health.rs`) is refused before anything is written to it.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let file = match dbfile::check(path)? {
            Some(f) => f,
            None => {
                dbfile::create(path)?;
                dbfile::check(path)?.ok_or_else(|| StoreError::Refused {
                    path: path.to_path_buf(),
                    detail: "it disappeared as it was being created".into(),
                })?
            }
        };
        if dbfile::on_read_only_fs(&file) {
            return Err(dbfile::read_only(path, &file.real));
        }
        health::check_header(path, &file)?;
        // Not CREATE: the file is there (checked above); NOFOLLOW: its resolved path is
        // opened, not whatever a symlink put there since.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut conn = Connection::open_with_flags(&file.real, flags).at(path)?;
        dbfile::verify_opened(&conn, path, &file)?;
        if conn.is_readonly("main").at(path)? {
            return Err(StoreError::Refused {
                path: path.to_path_buf(),
                detail: "it cannot be written (permission denied): give --db a database you \
                         may write"
                    .into(),
            });
        }
        conn.busy_timeout(BUSY_TIMEOUT).at(path)?;
        schema::check_compatible(&conn, path)?;
        health::check_structure(&conn, path, file.len)?;
        enable_wal(&conn, path)?;
        conn.pragma_update(None, "foreign_keys", true).at(path)?;
        schema::migrate(&mut conn, path)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            _file: Some(file),
        })
    }

    /// Opens the database at `path` for reading only: nothing is created or written, so
    /// listing and reports work on a read-only mount or a copy one may not change. A file
    /// that does not exist (or is empty) reads as an empty database; anything but a regular
    /// file is refused as [`Store::open`] refuses it. On a read-only
    /// filesystem, where SQLite cannot make the `-shm` file a WAL database needs, the file
    /// is read as immutable. A database of an older schema is upgraded when it can be
    /// written (as [`Store::open`] would) and refused otherwise.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let Some(file) = dbfile::check(path)?.filter(|f| f.len > 0) else {
            let mut conn = Connection::open_in_memory().at(path)?;
            schema::migrate(&mut conn, path)?;
            return Ok(Store {
                conn,
                path: path.to_path_buf(),
                _file: None,
            });
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let uri = file_uri(&file.real);
        let mut conn = Connection::open_with_flags(format!("{uri}?mode=ro"), flags).at(path)?;
        dbfile::verify_opened(&conn, path, &file)?;
        let probe = |c: &Connection| {
            c.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
                r.get::<_, i64>(0)
            })
        };
        if let Err(e) = probe(&conn) {
            // A reader of a WAL database needs its `-shm` index: where it cannot be made (a
            // read-only filesystem: CANTOPEN; a directory this user may not write, beside
            // another user's database: READONLY_CANTINIT; a full filesystem: IOERR) the file
            // is read as immutable, which is exact only while no write-ahead log holds rows
            // the main file lacks.
            let wal =
                std::fs::metadata(format!("{}-wal", file.real.display())).map_or(0, |m| m.len());
            if !matches!(
                e.sqlite_error_code(),
                Some(ErrorCode::CannotOpen | ErrorCode::SystemIoFailure | ErrorCode::ReadOnly)
            ) || wal > 0
            {
                return Err(e).at(path);
            }
            conn = Connection::open_with_flags(format!("{uri}?immutable=1"), flags).at(path)?;
            dbfile::verify_opened(&conn, path, &file)?;
        }
        conn.busy_timeout(BUSY_TIMEOUT).at(path)?;
        schema::check_compatible(&conn, path)?;
        let version = schema::user_version(&conn).at(path)?;
        if version < schema::SCHEMA_VERSION {
            drop(conn);
            return Store::open(path).map_err(|e| match &e {
                StoreError::Sqlite { source, .. }
                    if matches!(
                        source.sqlite_error_code(),
                        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
                    ) =>
                {
                    StoreError::OldReadOnly {
                        path: path.to_path_buf(),
                        found: version,
                        supported: schema::SCHEMA_VERSION,
                    }
                }
                StoreError::Refused { .. } => StoreError::OldReadOnly {
                    path: path.to_path_buf(),
                    found: version,
                    supported: schema::SCHEMA_VERSION,
                },
                _ => e,
            });
        }
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            _file: Some(file),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction and commits it; any error rolls back.
    fn write<T>(
        &mut self,
        f: impl FnOnce(&Transaction<'_>, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let path = &self.path;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(path)?;
        let out = f(&tx, path)?;
        tx.commit().at(path)?;
        Ok(out)
    }

    /// Stores the start of a run: its row, marked incomplete, without finish time or tests.
    /// Returns the run's id for [`Store::add_test`] and [`Store::finish_run`].
    pub fn begin_run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        self.write(|tx, path| insert_run(tx, path, run))
    }

    /// Stores a test of run `run_id` at position `idx` (0-based; tests load in this order).
    /// Only the test's own fields are stored: its passes go in with [`Store::add_pass`], and
    /// its summary and `extra` can be replaced with [`Store::update_test_summary`]. Returns the test's id.
    pub fn add_test(
        &mut self,
        run_id: i64,
        idx: u32,
        test: &TestRecord,
    ) -> Result<i64, StoreError> {
        self.write(|tx, path| insert_test(tx, path, run_id, idx, test))
    }

    /// Stores one finished pass of test `test_id`; passes load in the order they were added.
    /// Returns the pass's id.
    pub fn add_pass(&mut self, test_id: i64, pass: &PassRecord) -> Result<i64, StoreError> {
        self.write(|tx, path| insert_pass(tx, path, test_id, pass))
    }

    /// Replaces the summary and the workload's `extra` of test `test_id` (once its passes
    /// are in: a block test's verify counts and adaptive stop are known only then).
    pub fn update_test_summary(
        &mut self,
        test_id: i64,
        summary: &TestSummary,
        extra: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.write(|tx, path| {
            let summary = encode(path, "tests.summary_json", summary)?;
            let extra = encode_value(path, "tests.extra_json", extra)?;
            let n = tx
                .prepare_cached("UPDATE tests SET summary_json = ?1, extra_json = ?2 WHERE id = ?3")
                .and_then(|mut s| s.execute(params![summary, extra, test_id]))
                .at(path)?;
            if n == 0 {
                return Err(StoreError::TestNotFound {
                    path: path.to_path_buf(),
                    id: test_id,
                });
            }
            Ok(())
        })
    }

    /// Records how run `run_id` ended: `finished_at`, `complete`, `notes`, `warnings` and
    /// `env` are taken from `run`, and each stored test's `extra` from the test at its
    /// position in `run.tests` (an MPI run adds the other ranks' `--verify` counts at the
    /// end); everything else stored for the run stays as it is.
    pub fn finish_run(&mut self, run_id: i64, run: &RunRecord) -> Result<(), StoreError> {
        self.write(|tx, path| {
            let notes = encode(path, "runs.notes_json", &run.notes)?;
            let warnings = encode(path, "runs.warnings_json", &run.warnings)?;
            let env = encode_value(path, "runs.env_json", &run.env)?;
            let n = tx
                .prepare_cached(
                    "UPDATE runs SET finished_at = :finished_at, complete = :complete,
                            notes_json = :notes, warnings_json = :warnings, env_json = :env,
                            writer_pid = NULL, writer_start = NULL, writer_boot = NULL
                     WHERE id = :id",
                )
                .and_then(|mut s| {
                    s.execute(named_params! {
                        ":finished_at": run.finished_at,
                        ":complete": run.complete,
                        ":notes": notes,
                        ":warnings": warnings,
                        ":env": env,
                        ":id": run_id,
                    })
                })
                .at(path)?;
            if n == 0 {
                return Err(StoreError::RunNotFound {
                    path: path.to_path_buf(),
                    id: run_id,
                });
            }
            for (idx, t) in run.tests.iter().enumerate() {
                let extra = encode_value(path, "tests.extra_json", &t.extra)?;
                tx.prepare_cached(
                    "UPDATE tests SET extra_json = ?1 WHERE run_id = ?2 AND idx = ?3",
                )
                .and_then(|mut s| s.execute(params![extra, run_id, idx as i64]))
                .at(path)?;
            }
            Ok(())
        })
    }

    /// Stores a whole, finished run (an import, or a test's fixture) through the same
    /// writes a running `iolab run` makes: [`Store::begin_run`], [`Store::add_test`] and
    /// [`Store::add_pass`] for each test, [`Store::finish_run`]. `run.id` is ignored; the
    /// new id is returned.
    pub fn save_run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        let run_id = self.begin_run(run)?;
        for (idx, test) in run.tests.iter().enumerate() {
            let idx = u32::try_from(idx).expect("fewer than 2^32 tests");
            let test_id = self.add_test(run_id, idx, test)?;
            for pass in &test.passes {
                self.add_pass(test_id, pass)?;
            }
        }
        self.finish_run(run_id, run)?;
        Ok(run_id)
    }

    /// Reads run `id` back as it was stored, with `id` set, its tests in order and each
    /// test's passes in order. The reads share one snapshot, so a run another iolab is
    /// still writing loads consistently.
    pub fn load_run(&self, id: i64) -> Result<RunRecord, StoreError> {
        self.load(id, true)
    }

    /// Run `id` with its tests and their summaries but without passes (each test's
    /// `passes` is empty; `summary.passes` still counts them).
    pub fn load_run_summaries(&self, id: i64) -> Result<RunRecord, StoreError> {
        self.load(id, false)
    }

    fn load(&self, id: i64, passes: bool) -> Result<RunRecord, StoreError> {
        let path = &self.path;
        let tx = self.conn.unchecked_transaction().at(path)?;
        let mut run = tx
            .query_row(
                "SELECT id, uuid, started_at, finished_at, complete, preset, workload,
                        target_path, target_kind, io_path, fs_type, size, label, command_line,
                        iolab_version, engine, settings_json, notes_json, warnings_json,
                        env_json, study, config_label, study_json
                 FROM runs WHERE id = ?1",
                [id],
                |row| Ok(decode_run(path, row, id)),
            )
            .optional()
            .at(path)?
            .ok_or_else(|| StoreError::RunNotFound {
                path: path.to_path_buf(),
                id,
            })??;

        let mut tests = Vec::new();
        {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT id, name, grp, job_json, summary_json, extra_json
                     FROM tests WHERE run_id = ?1 ORDER BY idx",
                )
                .at(path)?;
            let mut rows = stmt.query([id]).at(path)?;
            while let Some(row) = rows.next().at(path)? {
                tests.push(decode_test(path, row)?);
            }
        }
        if passes {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT id, idx, bytes, ios, seconds, mb_s, iops, lat_json, read_json,
                            write_json, sync_json, cpu_json, timeseries_json, errors_json,
                            context_json
                     FROM passes WHERE test_id = ?1 ORDER BY id",
                )
                .at(path)?;
            for (test_id, test) in &mut tests {
                let mut rows = stmt.query([*test_id]).at(path)?;
                while let Some(row) = rows.next().at(path)? {
                    test.passes.push(decode_pass(path, row)?);
                }
            }
        }
        tx.commit().at(path)?;
        run.tests = tests.into_iter().map(|(_, t)| t).collect();
        Ok(run)
    }

    /// The fingerprint of run `id` (see [`fingerprint`]): the stored one, or, for a row
    /// that has none, computed from its columns.
    pub fn fingerprint(&self, id: i64) -> Result<String, StoreError> {
        let path = &self.path;
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT fingerprint, {FINGERPRINT_COLUMNS} FROM runs WHERE id = ?1"
            ))
            .at(path)?;
        let mut rows = stmt.query([id]).at(path)?;
        let Some(r) = rows.next().at(path)? else {
            return Err(StoreError::RunNotFound {
                path: path.to_path_buf(),
                id,
            });
        };
        match r.get::<_, Option<String>>("fingerprint").at(path)? {
            Some(fp) => Ok(fp),
            None => fingerprint_of_row(r, path),
        }
    }

    /// The newest `limit` complete runs with fingerprint `fp`, oldest first, each with its
    /// tests' summaries but no passes ([`Store::load_run_summaries`]): the other runs of one
    /// command, whose spread is its run-to-run noise. One indexed lookup, however many runs
    /// the database holds.
    /// A run whose stored record is damaged is left out and handed to `skipped`.
    pub fn runs_like(
        &self,
        fp: &str,
        limit: usize,
        skipped: &mut dyn FnMut(i64, StoreError),
    ) -> Result<Vec<RunRecord>, StoreError> {
        let path = &self.path;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut ids: Vec<i64> = self
            .conn
            .prepare_cached(RUNS_LIKE)
            .and_then(|mut s| {
                s.query_map(params![fp, limit], |r| r.get(0))?
                    .collect::<Result<Vec<i64>, _>>()
            })
            .at(path)?;
        ids.reverse();
        skip_damaged(
            ids.into_iter().map(|id| (id, self.load(id, false))),
            skipped,
        )
    }

    /// Runs matching `filter`, oldest first (by start time); with a limit, the newest N.
    pub fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunListing>, StoreError> {
        self.listing(filter)?.into_iter().map(|(_, l)| l).collect()
    }

    /// [`Store::list_runs`], except that a run whose listed columns cannot be read (a
    /// value of the wrong type) is left out and handed to `skipped` with its id.
    pub fn list_runs_skipping(
        &self,
        filter: &RunFilter,
        skipped: &mut dyn FnMut(i64, StoreError),
    ) -> Result<Vec<RunListing>, StoreError> {
        skip_damaged(self.listing(filter)?, skipped)
    }

    /// The runs matching `filter`, loaded, oldest first (as [`Store::list_runs`] orders
    /// them). A run whose stored rows cannot be read back ([`StoreError::is_damaged_row`]:
    /// JSON that does not decode, a value of the wrong type) is left out and handed to
    /// `skipped` with its id, so one damaged run does not hide all the others.
    pub fn load_runs_skipping(
        &self,
        filter: &RunFilter,
        skipped: &mut dyn FnMut(i64, StoreError),
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.load_listed(filter, true, skipped)
    }

    /// [`Store::load_runs_skipping`] with each run's tests' summaries but no passes
    /// ([`Store::load_run_summaries`]): what a history of thousands of runs needs, without
    /// decoding every pass's histograms.
    pub fn load_run_summaries_skipping(
        &self,
        filter: &RunFilter,
        skipped: &mut dyn FnMut(i64, StoreError),
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.load_listed(filter, false, skipped)
    }

    fn load_listed(
        &self,
        filter: &RunFilter,
        passes: bool,
        skipped: &mut dyn FnMut(i64, StoreError),
    ) -> Result<Vec<RunRecord>, StoreError> {
        let loaded = self
            .listing(filter)?
            .into_iter()
            .map(|(id, listed)| (id, listed.and_then(|_| self.load(id, passes))));
        skip_damaged(loaded, skipped)
    }

    /// The listing rows of [`Store::list_runs`], each decoded on its own (with its id).
    #[allow(clippy::type_complexity)]
    fn listing(
        &self,
        filter: &RunFilter,
    ) -> Result<Vec<(i64, Result<RunListing, StoreError>)>, StoreError> {
        let path = &self.path;
        let limit = filter
            .limit
            .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT * FROM (
                     SELECT r.id, r.started_at, r.preset, r.workload, r.target_path, r.fs_type,
                            r.label, r.complete, r.study, r.config_label,
                            (SELECT count(*) FROM tests t WHERE t.run_id = r.id) AS n_tests
                     FROM runs r
                     WHERE (:preset IS NULL OR r.preset = :preset)
                       AND (:target IS NULL OR r.target_path = :target)
                       AND (:label IS NULL OR r.label = :label)
                       AND (:study IS NULL OR r.study = :study)
                     ORDER BY r.started_at DESC, r.id DESC
                     LIMIT :limit)
                 ORDER BY started_at, id",
            )
            .at(path)?;
        let rows = stmt
            .query_map(
                named_params! {
                    ":preset": filter.preset,
                    ":target": filter.target,
                    ":label": filter.label,
                    ":study": filter.study,
                    ":limit": limit,
                },
                |r| {
                    let id: i64 = r.get("id")?;
                    let listed = (|| {
                        Ok(RunListing {
                            id,
                            started_at: r.get("started_at")?,
                            preset: r.get("preset")?,
                            workload: r.get("workload")?,
                            target: r.get("target_path")?,
                            fs_type: r.get("fs_type")?,
                            label: r.get("label")?,
                            complete: r.get("complete")?,
                            tests: r.get("n_tests")?,
                            study: r.get("study")?,
                            config_label: r.get("config_label")?,
                        })
                    })();
                    Ok((id, listed.at(path)))
                },
            )
            .at(path)?;
        rows.collect::<Result<_, _>>().at(path)
    }

    /// Deletes the runs `ids` with their tests and passes (the schema's `ON DELETE
    /// CASCADE`), in one transaction: if any id is not stored, or is a run still being
    /// written (its writer, recorded by [`Store::begin_run`], is alive:
    /// [`StoreError::RunBeingWritten`] names it and the process), nothing is deleted and the
    /// error names it. Every other run is untouched. Returns how many runs were deleted
    /// (an id given twice counts once).
    pub fn delete_runs(&mut self, ids: &[i64]) -> Result<usize, StoreError> {
        self.delete(ids, false).map(|(deleted, _)| deleted)
    }

    /// [`Store::delete_runs`] for `prune`: a run still being written is left out and
    /// returned with its writer's pid instead of refusing the whole. Returns how many runs
    /// were deleted and the runs left out.
    pub fn delete_runs_but_running(
        &mut self,
        ids: &[i64],
    ) -> Result<(usize, Vec<(i64, u32)>), StoreError> {
        self.delete(ids, true)
    }

    /// The process still writing run `id` (its pid), or `None` when the run has ended or
    /// the process that wrote it is gone (killed: the run stays incomplete).
    pub fn writer(&self, id: i64) -> Result<Option<u32>, StoreError> {
        live_writer(&self.conn, &self.path, id)
    }

    fn delete(
        &mut self,
        ids: &[i64],
        skip_live: bool,
    ) -> Result<(usize, Vec<(i64, u32)>), StoreError> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        // Inside the write transaction: no run can begin or end between the check of its
        // writer and its deletion.
        self.write(|tx, path| {
            let mut deleted = 0;
            let mut running = Vec::new();
            for &id in &ids {
                if let Some(pid) = live_writer(tx, path, id)? {
                    if !skip_live {
                        return Err(StoreError::RunBeingWritten {
                            path: path.to_path_buf(),
                            id,
                            pid,
                        });
                    }
                    running.push((id, pid));
                    continue;
                }
                let n = tx
                    .execute("DELETE FROM runs WHERE id = ?1", [id])
                    .at(path)?;
                if n == 0 {
                    // Dropping `tx` without commit rolls back the deletes before this one.
                    return Err(StoreError::RunNotFound {
                        path: path.to_path_buf(),
                        id,
                    });
                }
                deleted += n;
            }
            Ok((deleted, running))
        })
    }

    /// The host each of runs `ids` ran on, as its environment recorded it (runs without
    /// one, or not stored, are absent): what `iolab serve` shows and filters runs by.
    pub fn run_hosts(&self, ids: &[i64]) -> Result<HashMap<i64, String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT CASE WHEN json_valid(env_json)
                        THEN json_extract(env_json, '$.hostname') END
                 FROM runs WHERE id = ?1",
            )
            .at(&self.path)?;
        let mut out = HashMap::with_capacity(ids.len());
        for &id in ids {
            let host: Option<Option<String>> = stmt
                .query_row([id], |r| r.get(0))
                .optional()
                .at(&self.path)?;
            if let Some(Some(h)) = host {
                out.insert(id, h);
            }
        }
        Ok(out)
    }

    /// How many runs are stored (whatever their state).
    pub fn count_runs(&self) -> Result<usize, StoreError> {
        self.conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .at(&self.path)
    }

    /// The id of the most recently started run, if any.
    pub fn latest_run_id(&self) -> Result<Option<i64>, StoreError> {
        self.conn
            .query_row(
                "SELECT id FROM runs ORDER BY started_at DESC, id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .optional()
            .at(&self.path)
    }
}

/// The pid of the live process writing run `id`, if its row records one (see
/// [`Store::writer`]).
fn live_writer(conn: &Connection, path: &Path, id: i64) -> Result<Option<u32>, StoreError> {
    let row: Option<(Option<i64>, Option<i64>, Option<String>)> = conn
        .query_row(
            "SELECT writer_pid, writer_start, writer_boot FROM runs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .at(path)?;
    let Some((Some(pid), Some(start), Some(boot_id))) = row else {
        return Ok(None);
    };
    let (Ok(pid), Ok(start_ticks)) = (u32::try_from(pid), u64::try_from(start)) else {
        return Ok(None);
    };
    let writer = Identity {
        pid,
        start_ticks,
        boot_id,
    };
    Ok(writer.alive().then_some(pid))
}

/// The query behind [`Store::runs_like`] (its plan is checked in the tests: it must use
/// the `runs_fingerprint` index).
pub(crate) const RUNS_LIKE: &str = "SELECT id FROM runs WHERE fingerprint = ?1 AND complete = 1
     ORDER BY started_at DESC, id DESC LIMIT ?2";

/// The columns a fingerprint is computed from, for [`fingerprint_of_row`].
const FINGERPRINT_COLUMNS: &str = "id, workload, preset, target_kind, target_path, label,
     config_label, study, engine, settings_json, command_line,
     CASE WHEN json_valid(env_json) THEN json_extract(env_json, '$.hostname') END AS host";

/// The fingerprint of a run from a row of [`FINGERPRINT_COLUMNS`].
fn fingerprint_of_row(r: &Row<'_>, path: &Path) -> Result<String, StoreError> {
    let get = |c: &str| -> Result<String, StoreError> { r.get(c).at(path) };
    let opt = |c: &str| -> Result<Option<String>, StoreError> { r.get(c).at(path) };
    // A command line that does not parse counts as empty: the fingerprint then rests on
    // the other parts.
    let command_line: Vec<String> = serde_json::from_str(&get("command_line")?).unwrap_or_default();
    let host: Option<String> = r.get::<_, Option<String>>("host").unwrap_or(None);
    let (workload, preset, kind, target) = (
        get("workload")?,
        get("preset")?,
        get("target_kind")?,
        get("target_path")?,
    );
    let (label, config_label, study) = (opt("label")?, opt("config_label")?, opt("study")?);
    let (engine, settings) = (get("engine")?, get("settings_json")?);
    Ok(fingerprint::of_parts(&fingerprint::Parts {
        workload: &workload,
        preset: &preset,
        target_kind: &kind,
        target_path: &target,
        label: label.as_deref(),
        config_label: config_label.as_deref(),
        study: study.as_deref(),
        host: host.as_deref(),
        engine: &engine,
        settings_json: &settings,
        command_line: &command_line,
    }))
}

/// Fills in the fingerprint of every run stored without one, inside the migration to
/// schema v4 (`tx`). A row too damaged to compute one from keeps none (it is then no
/// other run's noise).
pub(crate) fn backfill_fingerprints(tx: &Transaction<'_>, path: &Path) -> Result<(), StoreError> {
    let rows: Vec<(i64, String)> = {
        let mut stmt = tx
            .prepare(&format!(
                "SELECT {FINGERPRINT_COLUMNS} FROM runs WHERE fingerprint IS NULL"
            ))
            .at(path)?;
        let mut rows = stmt.query([]).at(path)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().at(path)? {
            let id: i64 = r.get("id").at(path)?;
            if let Ok(fp) = fingerprint_of_row(r, path) {
                out.push((id, fp));
            }
        }
        out
    };
    let mut update = tx
        .prepare("UPDATE runs SET fingerprint = ?1 WHERE id = ?2")
        .at(path)?;
    for (id, fp) in &rows {
        update.execute(params![fp, id]).at(path)?;
    }
    Ok(())
}

/// The `Ok` items, in order; an item whose error is a damaged row goes to `skipped` with its
/// run id, any other error ends the whole.
fn skip_damaged<T>(
    items: impl IntoIterator<Item = (i64, Result<T, StoreError>)>,
    skipped: &mut dyn FnMut(i64, StoreError),
) -> Result<Vec<T>, StoreError> {
    let mut out = Vec::new();
    for (id, item) in items {
        match item {
            Ok(x) => out.push(x),
            Err(e) if e.is_damaged_row() => skipped(id, e),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// `path` as an SQLite `file:` URI (bytes other than unreserved ones and `/` escaped).
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file:");
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Puts the database in WAL mode, so readers go on while another iolab writes.
///
/// The conversion needs the file to itself and SQLite does not call the busy handler for it,
/// so two iolabs opening a new database at once would see "database is locked" whatever the
/// busy timeout. WAL mode is a property of the file: once it is set there is nothing to do,
/// and until then the conversion is retried, with backoff, for up to [`BUSY_TIMEOUT`].
/// Where the filesystem cannot do WAL, SQLite keeps its rollback journal: slower to share,
/// equally safe.
fn enable_wal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .at(path)?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        match conn.pragma_update_and_check(None, "journal_mode", "wal", |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            Err(e) => return Err(e).at(path),
        }
    }
}

/// The extended result code of a constraint violation, if `e` is one.
fn constraint(e: &rusqlite::Error) -> Option<i32> {
    e.sqlite_error()
        .filter(|f| f.code == ErrorCode::ConstraintViolation)
        .map(|f| f.extended_code)
}

fn encode<T: Serialize + ?Sized>(path: &Path, what: &str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Json {
        path: path.to_path_buf(),
        what: what.to_string(),
        source,
    })
}

fn encode_opt<T: Serialize>(
    path: &Path,
    what: &str,
    value: Option<&T>,
) -> Result<Option<String>, StoreError> {
    value.map(|v| encode(path, what, v)).transpose()
}

/// A JSON value column: SQL NULL for JSON null.
fn encode_value(
    path: &Path,
    what: &str,
    value: &serde_json::Value,
) -> Result<Option<String>, StoreError> {
    encode_opt(path, what, Some(value).filter(|v| !v.is_null()))
}

fn insert_run(tx: &Transaction<'_>, path: &Path, run: &RunRecord) -> Result<i64, StoreError> {
    let command_line = encode(path, "runs.command_line", &run.command_line)?;
    let settings = encode(path, "runs.settings_json", &run.settings)?;
    let notes = encode(path, "runs.notes_json", &run.notes)?;
    let warnings = encode(path, "runs.warnings_json", &run.warnings)?;
    let env = encode_value(path, "runs.env_json", &run.env)?;
    let study_meta = encode_value(path, "runs.study_json", &run.study_meta)?;
    let fingerprint = fingerprint::of_run(run, &settings);
    // This process writes the run until `finish_run`; without /proc it cannot be named,
    // and the run is then not protected from `delete` while it is written.
    let writer = Identity::current();
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO runs (uuid, started_at, finished_at, complete, preset, workload,
                 target_path, target_kind, io_path, fs_type, size, label, command_line,
                 iolab_version, engine, settings_json, notes_json, warnings_json, env_json,
                 study, config_label, study_json, fingerprint, writer_pid, writer_start,
                 writer_boot)
             VALUES (:uuid, :started_at, :finished_at, :complete, :preset, :workload,
                 :target_path, :target_kind, :io_path, :fs_type, :size, :label, :command_line,
                 :iolab_version, :engine, :settings, :notes, :warnings, :env,
                 :study, :config_label, :study_json, :fingerprint, :writer_pid, :writer_start,
                 :writer_boot)",
        )
        .at(path)?;
    let t = &run.target;
    stmt.insert(named_params! {
        ":uuid": run.uuid,
        ":started_at": run.started_at,
        ":finished_at": None::<&str>,
        ":complete": false,
        ":preset": run.preset,
        ":workload": run.workload,
        ":target_path": t.path,
        ":target_kind": t.kind.as_str(),
        ":io_path": t.io_path,
        ":fs_type": t.fs_type,
        ":size": t.size,
        ":label": run.label,
        ":command_line": command_line,
        ":iolab_version": run.iolab_version,
        ":engine": run.engine,
        ":settings": settings,
        ":notes": notes,
        ":warnings": warnings,
        ":env": env,
        ":study": run.study,
        ":config_label": run.config_label,
        ":study_json": study_meta,
        ":fingerprint": fingerprint,
        ":writer_pid": writer.as_ref().map(|w| w.pid),
        ":writer_start": writer.as_ref().map(|w| w.start_ticks as i64),
        ":writer_boot": writer.as_ref().map(|w| w.boot_id.as_str()),
    })
    .map_err(|e| match constraint(&e) {
        Some(ffi::SQLITE_CONSTRAINT_UNIQUE) => StoreError::DuplicateRun {
            path: path.to_path_buf(),
            uuid: run.uuid.clone(),
        },
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    })
}

fn insert_test(
    tx: &Transaction<'_>,
    path: &Path,
    run_id: i64,
    idx: u32,
    test: &TestRecord,
) -> Result<i64, StoreError> {
    let job = encode(path, "tests.job_json", &test.job)?;
    let summary = encode(path, "tests.summary_json", &test.summary)?;
    let extra = encode_value(path, "tests.extra_json", &test.extra)?;
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO tests (run_id, idx, name, grp, job_json, summary_json, extra_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .at(path)?;
    stmt.insert(params![
        run_id, idx, test.name, test.group, job, summary, extra
    ])
    .map_err(|e| match constraint(&e) {
        Some(ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => StoreError::RunNotFound {
            path: path.to_path_buf(),
            id: run_id,
        },
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    })
}

fn insert_pass(
    tx: &Transaction<'_>,
    path: &Path,
    test_id: i64,
    pass: &PassRecord,
) -> Result<i64, StoreError> {
    let lat = encode(path, "passes.lat_json", &pass.lat_us)?;
    let read = encode_opt(path, "passes.read_json", pass.read.as_ref())?;
    let write = encode_opt(path, "passes.write_json", pass.write.as_ref())?;
    let sync = encode_opt(path, "passes.sync_json", pass.sync.as_ref())?;
    let cpu = encode(path, "passes.cpu_json", &pass.cpu)?;
    let timeseries = encode(path, "passes.timeseries_json", &pass.timeseries)?;
    let errors = encode(path, "passes.errors_json", &pass.errors)?;
    let context = encode(path, "passes.context_json", &pass.context)?;
    let mut stmt = tx
        .prepare_cached(
            "INSERT INTO passes (test_id, idx, bytes, ios, seconds, mb_s, iops, lat_json,
                 read_json, write_json, sync_json, cpu_json, timeseries_json, errors_json,
                 context_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        )
        .at(path)?;
    stmt.insert(params![
        test_id,
        pass.index,
        pass.bytes,
        pass.ios,
        pass.seconds,
        pass.mb_s,
        pass.iops,
        lat,
        read,
        write,
        sync,
        cpu,
        timeseries,
        errors,
        context,
    ])
    .map_err(|e| match constraint(&e) {
        Some(ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => StoreError::TestNotFound {
            path: path.to_path_buf(),
            id: test_id,
        },
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            source: e,
        },
    })
}

/// Reads the columns of one row, naming the row in errors (`read_json of pass 12`).
struct Decoder<'a, 'r> {
    path: &'a Path,
    row: &'a Row<'r>,
    noun: &'static str,
    id: i64,
}

impl Decoder<'_, '_> {
    fn get<T: rusqlite::types::FromSql>(&self, col: &str) -> Result<T, StoreError> {
        self.row.get(col).at(self.path)
    }

    fn parse<T: DeserializeOwned>(&self, col: &str, text: &str) -> Result<T, StoreError> {
        serde_json::from_str(text).map_err(|source| StoreError::Json {
            path: self.path.to_path_buf(),
            what: format!("{col} of {} {}", self.noun, self.id),
            source,
        })
    }

    fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        let text: String = self.get(col)?;
        self.parse(col, &text)
    }

    /// A nullable JSON column: `None` for SQL NULL.
    fn json_opt<T: DeserializeOwned>(&self, col: &str) -> Result<Option<T>, StoreError> {
        let text: Option<String> = self.get(col)?;
        text.map(|t| self.parse(col, &t)).transpose()
    }

    fn json_value(&self, col: &str) -> Result<serde_json::Value, StoreError> {
        Ok(self.json_opt(col)?.unwrap_or(serde_json::Value::Null))
    }
}

/// The run row, without its tests.
fn decode_run(path: &Path, row: &Row<'_>, id: i64) -> Result<RunRecord, StoreError> {
    let d = Decoder {
        path,
        row,
        noun: "run",
        id,
    };
    Ok(RunRecord {
        id: Some(d.get("id")?),
        uuid: d.get("uuid")?,
        iolab_version: d.get("iolab_version")?,
        preset: d.get("preset")?,
        workload: d.get("workload")?,
        target: TargetInfo {
            path: d.get("target_path")?,
            kind: TargetKind::from(d.get::<String>("target_kind")?),
            io_path: d.get("io_path")?,
            fs_type: d.get("fs_type")?,
            size: d.get("size")?,
        },
        settings: d.json("settings_json")?,
        engine: d.get("engine")?,
        command_line: d.json("command_line")?,
        label: d.get("label")?,
        started_at: d.get("started_at")?,
        finished_at: d.get("finished_at")?,
        complete: d.get("complete")?,
        notes: d.json("notes_json")?,
        warnings: d.json("warnings_json")?,
        env: d.json_value("env_json")?,
        study: d.get("study")?,
        config_label: d.get("config_label")?,
        study_meta: d.json_value("study_json")?,
        tests: Vec::new(),
    })
}

/// A test row (without passes) and its id.
fn decode_test(path: &Path, row: &Row<'_>) -> Result<(i64, TestRecord), StoreError> {
    let id: i64 = row.get("id").at(path)?;
    let d = Decoder {
        path,
        row,
        noun: "test",
        id,
    };
    let test = TestRecord {
        name: d.get("name")?,
        group: d.get("grp")?,
        job: d.json("job_json")?,
        passes: Vec::new(),
        summary: d.json("summary_json")?,
        extra: d.json_value("extra_json")?,
    };
    Ok((id, test))
}

fn decode_pass(path: &Path, row: &Row<'_>) -> Result<PassRecord, StoreError> {
    let id: i64 = row.get("id").at(path)?;
    let d = Decoder {
        path,
        row,
        noun: "pass",
        id,
    };
    Ok(PassRecord {
        index: d.get("idx")?,
        bytes: d.get("bytes")?,
        ios: d.get("ios")?,
        seconds: d.get("seconds")?,
        mb_s: d.get("mb_s")?,
        iops: d.get("iops")?,
        lat_us: d.json("lat_json")?,
        read: d.json_opt("read_json")?,
        write: d.json_opt("write_json")?,
        sync: d.json_opt("sync_json")?,
        cpu: d.json("cpu_json")?,
        timeseries: d.json("timeseries_json")?,
        errors: d.json("errors_json")?,
        // Passes stored before schema v2 have no context.
        context: d.json_opt("context_json")?.unwrap_or_default(),
    })
}
