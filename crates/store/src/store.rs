//! [`Store`]: opening the database, writing runs (incrementally or at once) and reading them
//! back.

use std::path::Path;
use std::time::Duration;

use iolab_measure::{PassRecord, RunRecord, TargetInfo, TargetKind, TestRecord, TestSummary};
use iolab_sys::process::Identity;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::fingerprint;
use crate::lite::Lite;
use crate::pg::{self, Pg};
use crate::sql::{int, vals, Cells, Db, Dialect, Tx, Violation, Work};

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
    /// Only runs measured on this host: its name, or its machine id (`iolab results`
    /// shows both).
    pub host: Option<String>,
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
    /// The host that measured the run (its name), when known.
    #[serde(default)]
    pub host: Option<String>,
}

/// An open result store: an SQLite file (the default) or a PostgreSQL database (`--db
/// postgresql://...`, see `pg.rs`), behind the same methods. Writes take `&mut self`.
#[derive(Debug)]
pub struct Store {
    backend: Backend,
}

#[derive(Debug)]
enum Backend {
    Sqlite(Lite),
    Pg(Pg),
}

/// Calls `$method` on whichever backend `$store` has.
macro_rules! each {
    ($store:expr, $b:ident => $e:expr) => {
        match $store {
            Backend::Sqlite($b) => $e,
            Backend::Pg($b) => $e,
        }
    };
}

impl Store {
    /// Opens the store at `path` for writing and brings its schema up to date: a
    /// `postgresql://` (or `postgres://`) URL connects to that database (creating iolab's
    /// tables in it if it has none); anything else is a file ([`Store::open`]'s refusals
    /// are those of the SQLite file: anything but a regular file, a file on a read-only
    /// filesystem or one that cannot be written, a database written by a newer iolab, an
    /// SQLite file that is not iolab's, or a damaged one: `dbfile.rs`, `health.rs`). A URL
    /// of another scheme is refused.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let backend = match Self::kind(path)? {
            true => Backend::Pg(Pg::open(path, true)?),
            false => Backend::Sqlite(Lite::open(path)?),
        };
        Ok(Store { backend })
    }

    /// Opens the store at `path` for reading only. For a file nothing is created or
    /// written, so listing and reports work on a read-only mount or a copy one may not
    /// change (a missing or empty file reads as an empty database). A database of an
    /// older schema is not upgraded by a reader: a file is upgraded only where it could be
    /// written anyway (see `lite.rs`), and a PostgreSQL store of an older schema, or one
    /// without iolab's tables, is refused with the command that upgrades or creates it.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let backend = match Self::kind(path)? {
            true => Backend::Pg(Pg::open(path, false)?),
            false => Backend::Sqlite(Lite::open_read_only(path)?),
        };
        Ok(Store { backend })
    }

    /// Whether `path` names a PostgreSQL store; a URL of another scheme is refused.
    fn kind(path: &Path) -> Result<bool, StoreError> {
        if let Some(scheme) = pg::other_url(path) {
            return Err(StoreError::Refused {
                path: path.to_path_buf(),
                detail: format!(
                    "{scheme}:// is not a store iolab knows: give --db a file or a \
                     postgresql:// URL"
                ),
            });
        }
        Ok(pg::is_url(path))
    }

    /// The database file, or the PostgreSQL URL without its password.
    pub fn path(&self) -> &Path {
        each!(&self.backend, b => b.path())
    }

    /// Whether the store is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Pg(_))
    }

    /// Stores the start of a run: its row, marked incomplete (visible to readers as a
    /// running run), without finish time or tests. Returns the run's id for
    /// [`Store::add_test`] and [`Store::finish_run`].
    pub fn begin_run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        self.write_one(|db| insert_run(db, run))
    }

    /// Stores a test of run `run_id` at position `idx` (0-based; tests load in this order).
    /// Only the test's own fields are stored: its passes go in with [`Store::add_pass`],
    /// and its summary and `extra` can be replaced with [`Store::update_test_summary`].
    /// Returns the test's id.
    pub fn add_test(
        &mut self,
        run_id: i64,
        idx: u32,
        test: &TestRecord,
    ) -> Result<i64, StoreError> {
        self.write_one(|db| insert_test(db, run_id, idx, test))
    }

    /// Stores one finished pass of test `test_id`; passes load in the order they were
    /// added. Returns the pass's id.
    pub fn add_pass(&mut self, test_id: i64, pass: &PassRecord) -> Result<i64, StoreError> {
        self.write_one(|db| insert_pass(db, test_id, pass))
    }

    /// Replaces the summary and the workload's `extra` of test `test_id` (once its passes
    /// are in: a block test's verify counts and adaptive stop are known only then).
    pub fn update_test_summary(
        &mut self,
        test_id: i64,
        summary: &TestSummary,
        extra: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.write_one(|db| update_summary(db, test_id, summary, extra))
    }

    /// Records how run `run_id` ended: `finished_at`, `complete`, `notes`, `warnings` and
    /// `env` are taken from `run`, and each stored test's `extra` from the test at its
    /// position in `run.tests` (an MPI run adds the other ranks' `--verify` counts at the
    /// end); everything else stored for the run stays as it is.
    pub fn finish_run(&mut self, run_id: i64, run: &RunRecord) -> Result<(), StoreError> {
        self.write(|db| finish(db, run_id, run))
    }

    /// Stores a whole, finished run (an import, or a test's fixture) through the same
    /// writes a running `iolab run` makes: [`Store::begin_run`], [`Store::add_test`] and
    /// [`Store::add_pass`] for each test, [`Store::finish_run`]. `run.id` is ignored; the
    /// new id is returned.
    pub fn save_run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        Writes::whole(self, run)
    }

    /// Stores a whole run copied from another store (`iolab push`) in one transaction, so
    /// that no reader sees part of it and an interrupted copy leaves nothing, unless a run
    /// of its uuid is stored already: then nothing is written and `None` is returned (two
    /// pushes of a run store it once, even at the same time).
    pub fn import_run(&mut self, run: &RunRecord) -> Result<Option<i64>, StoreError> {
        match self.write(|db| Writes::whole(db, run)) {
            Ok(id) => Ok(Some(id)),
            Err(StoreError::DuplicateRun { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The id of the run of `uuid`, if one is stored.
    pub fn run_by_uuid(&self, uuid: &str) -> Result<Option<i64>, StoreError> {
        self.read(|db| {
            db.row("SELECT id FROM runs WHERE uuid = ?1", vals![uuid], |r| {
                r.int("id")
            })
        })
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
        self.snapshot(|db| load(db, id, passes))
    }

    /// The fingerprint of run `id` (see [`fingerprint`]): the stored one, or, for a row
    /// that has none, computed from its columns.
    pub fn fingerprint(&self, id: i64) -> Result<String, StoreError> {
        self.read(|db| fingerprint_of(db, id))
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut ids = self.read(|db| db.rows(RUNS_LIKE, vals![fp, limit], |r| r.int("id")))?;
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

    #[allow(clippy::type_complexity)]
    fn listing(
        &self,
        filter: &RunFilter,
    ) -> Result<Vec<(i64, Result<RunListing, StoreError>)>, StoreError> {
        self.read(|db| listing(db, filter))
    }

    /// Deletes the runs `ids` with their tests and passes, in one transaction: if any id
    /// is not stored, or is a run still being written (its writer, recorded by
    /// [`Store::begin_run`], is alive, or, in a PostgreSQL store, runs on another machine:
    /// [`StoreError::RunBeingWritten`] names it and the process), nothing is deleted and
    /// the error names it. Every other run is untouched. Returns how many runs were deleted
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

    fn delete(
        &mut self,
        ids: &[i64],
        skip_live: bool,
    ) -> Result<(usize, Vec<(i64, u32)>), StoreError> {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        self.write(|db| delete(db, &ids, skip_live))
    }

    /// The process still writing run `id` (its pid), or `None` when the run has ended or
    /// the process that wrote it is gone (killed: the run stays incomplete).
    pub fn writer(&self, id: i64) -> Result<Option<u32>, StoreError> {
        self.read(|db| Ok(live_writer(db, id, false)?.flatten()))
    }

    /// How many runs are stored (whatever their state).
    pub fn count_runs(&self) -> Result<usize, StoreError> {
        self.read(|db| db.row("SELECT count(*) AS n FROM runs", &[], |r| r.unsigned("n")))
            .map(|n| n.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)))
    }

    /// The id of the most recently started run, if any.
    pub fn latest_run_id(&self) -> Result<Option<i64>, StoreError> {
        self.read(|db| {
            db.row(
                "SELECT id FROM runs ORDER BY started_at DESC, id DESC LIMIT 1",
                &[],
                |r| r.int("id"),
            )
        })
    }

    /// `f` in one write transaction, committed; any error rolls back.
    fn write<T>(&mut self, f: impl Work<T>) -> Result<T, StoreError> {
        each!(&self.backend, b => b.transaction(Tx::Write, f))
    }

    /// `f`, one statement that writes: in SQLite's `BEGIN IMMEDIATE` transaction (which
    /// waits its turn), on PostgreSQL's connection as it is (one round trip).
    fn write_one<T>(&mut self, f: impl Work<T>) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite(b) => b.transaction(Tx::Write, f),
            Backend::Pg(b) => b.autocommit(f),
        }
    }

    /// `f`, reads outside any transaction.
    fn read<T>(&self, f: impl Work<T>) -> Result<T, StoreError> {
        match &self.backend {
            Backend::Sqlite(b) => f(&mut b.db()),
            Backend::Pg(b) => b.autocommit(f),
        }
    }

    /// `f`, reads that see one state of the store.
    fn snapshot<T>(&self, f: impl Work<T>) -> Result<T, StoreError> {
        each!(&self.backend, b => b.transaction(Tx::Snapshot, f))
    }
}

/// The store's statements, written once for both backends (see `sql.rs`): `?N`
/// placeholders, `TRUE`/`FALSE` for flags, `RETURNING id` for a new row's id.
const RUN_COLUMNS: &str = "SELECT id, uuid, started_at, finished_at, complete, preset, workload,
        target_path, target_kind, io_path, fs_type, size, label, command_line,
        iolab_version, engine, settings_json, notes_json, warnings_json,
        env_json, study, config_label, study_json
     FROM runs WHERE id = ?1";

const TEST_COLUMNS: &str = "SELECT id, name, grp, job_json, summary_json, extra_json
     FROM tests WHERE run_id = ?1 ORDER BY idx";

const PASS_COLUMNS: &str = "SELECT id, idx, bytes, ios, seconds, mb_s, iops, lat_json, read_json,
        write_json, sync_json, cpu_json, timeseries_json, errors_json, context_json, trim_json
     FROM passes WHERE test_id = ?1 ORDER BY id";

/// The query behind [`Store::runs_like`] (its plan is checked in the tests: it must use
/// the `runs_fingerprint` index).
const RUNS_LIKE: &str = "SELECT id FROM runs WHERE fingerprint = ?1 AND complete = TRUE
     ORDER BY started_at DESC, id DESC LIMIT ?2";

/// The newest runs matching a [`RunFilter`] (`?6`: how many; `i64::MAX` for all), listed
/// oldest first.
const LISTING: &str = "SELECT * FROM (
         SELECT r.id, r.started_at, r.preset, r.workload, r.target_path, r.fs_type,
                r.label, r.complete, r.study, r.config_label, r.host,
                (SELECT count(*) FROM tests t WHERE t.run_id = r.id) AS n_tests
         FROM runs r
         WHERE (CAST(?1 AS TEXT) IS NULL OR r.preset = ?1)
           AND (CAST(?2 AS TEXT) IS NULL OR r.target_path = ?2)
           AND (CAST(?3 AS TEXT) IS NULL OR r.label = ?3)
           AND (CAST(?4 AS TEXT) IS NULL OR r.study = ?4)
           AND (CAST(?5 AS TEXT) IS NULL OR r.host = ?5 OR r.machine_id = ?5)
         ORDER BY r.started_at DESC, r.id DESC
         LIMIT ?6) AS newest
     ORDER BY started_at, id";

/// The columns a fingerprint is computed from, for [`fingerprint_of_row`].
const FINGERPRINT_COLUMNS: &str = "id, workload, preset, target_kind, target_path, label,
     config_label, study, engine, settings_json, command_line, env_json";

fn run_not_found(path: &Path, id: i64) -> StoreError {
    StoreError::RunNotFound {
        path: path.to_path_buf(),
        id,
    }
}

fn test_not_found(path: &Path, id: i64) -> StoreError {
    StoreError::TestNotFound {
        path: path.to_path_buf(),
        id,
    }
}

fn insert_run(db: &mut dyn Db, run: &RunRecord) -> Result<i64, StoreError> {
    let path = db.path().to_path_buf();
    let path = path.as_path();
    let command_line = encode(path, "runs.command_line", &stored_args(&run.command_line))?;
    let settings = encode(path, "runs.settings_json", &run.settings)?;
    let notes = encode(path, "runs.notes_json", &run.notes)?;
    let warnings = encode(path, "runs.warnings_json", &run.warnings)?;
    let env = encode_value(path, "runs.env_json", &run.env)?;
    let study_meta = encode_value(path, "runs.study_json", &run.study_meta)?;
    let fingerprint = fingerprint::of_run(run, &settings);
    // This process writes the run until `finish_run`; without /proc it cannot be named,
    // and the run is then not protected from `delete` while it is written.
    let writer = Identity::current();
    let (host, machine_id) = host_of(run);
    let t = &run.target;
    let size = int(path, "target size", t.size)?;
    db.insert(
        "INSERT INTO runs (uuid, started_at, finished_at, complete, preset, workload,
             target_path, target_kind, io_path, fs_type, size, label, command_line,
             iolab_version, engine, settings_json, notes_json, warnings_json, env_json,
             study, config_label, study_json, fingerprint, writer_pid, writer_start,
             writer_boot, host, machine_id)
         VALUES (?1, ?2, NULL, FALSE, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,
             ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)
         RETURNING id",
        vals![
            &run.uuid,
            &run.started_at,
            &run.preset,
            &run.workload,
            &t.path,
            t.kind.as_str(),
            &t.io_path,
            &t.fs_type,
            size,
            &run.label,
            &command_line,
            &run.iolab_version,
            run.engine_text(),
            &settings,
            &notes,
            &warnings,
            &env,
            &run.study,
            &run.config_label,
            &study_meta,
            &fingerprint,
            writer.as_ref().map(|w| i64::from(w.pid)),
            writer.as_ref().map(|w| w.start_ticks as i64),
            writer.as_ref().map(|w| w.boot_id.as_str()),
            host,
            machine_id,
        ],
        |v| {
            (v == Violation::Unique).then(|| StoreError::DuplicateRun {
                path: path.to_path_buf(),
                uuid: run.uuid.clone(),
            })
        },
    )
}

fn insert_test(
    db: &mut dyn Db,
    run_id: i64,
    idx: u32,
    test: &TestRecord,
) -> Result<i64, StoreError> {
    let path = db.path().to_path_buf();
    let job = encode(&path, "tests.job_json", &test.job)?;
    let summary = encode(&path, "tests.summary_json", &test.summary)?;
    let extra = encode_value(&path, "tests.extra_json", &test.extra)?;
    db.insert(
        "INSERT INTO tests (run_id, idx, name, grp, job_json, summary_json, extra_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
        vals![
            run_id,
            i64::from(idx),
            &test.name,
            &test.group,
            &job,
            &summary,
            &extra
        ],
        |v| (v == Violation::ForeignKey).then(|| run_not_found(&path, run_id)),
    )
}

fn insert_pass(db: &mut dyn Db, test_id: i64, pass: &PassRecord) -> Result<i64, StoreError> {
    let path = db.path().to_path_buf();
    let path = path.as_path();
    let lat = encode(path, "passes.lat_json", &pass.lat_us)?;
    let read = encode_opt(path, "passes.read_json", pass.read.as_ref())?;
    let write = encode_opt(path, "passes.write_json", pass.write.as_ref())?;
    let trim = encode_opt(path, "passes.trim_json", pass.trim.as_ref())?;
    let sync = encode_opt(path, "passes.sync_json", pass.sync.as_ref())?;
    let cpu = encode(path, "passes.cpu_json", &pass.cpu)?;
    let timeseries = encode(path, "passes.timeseries_json", &pass.timeseries)?;
    let errors = encode(path, "passes.errors_json", &pass.errors)?;
    let context = encode(path, "passes.context_json", &pass.context)?;
    let (bytes, ios) = (
        int(path, "pass bytes", pass.bytes)?,
        int(path, "pass I/O count", pass.ios)?,
    );
    db.insert(
        "INSERT INTO passes (test_id, idx, bytes, ios, seconds, mb_s, iops, lat_json,
             read_json, write_json, sync_json, cpu_json, timeseries_json, errors_json,
             context_json, trim_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         RETURNING id",
        vals![
            test_id,
            i64::from(pass.index),
            bytes,
            ios,
            pass.seconds,
            pass.mb_s,
            pass.iops,
            &lat,
            &read,
            &write,
            &sync,
            &cpu,
            &timeseries,
            &errors,
            &context,
            &trim,
        ],
        |v| (v == Violation::ForeignKey).then(|| test_not_found(path, test_id)),
    )
}

/// [`Store::update_test_summary`].
fn update_summary(
    db: &mut dyn Db,
    test_id: i64,
    summary: &TestSummary,
    extra: &serde_json::Value,
) -> Result<(), StoreError> {
    let path = db.path().to_path_buf();
    let summary = encode(&path, "tests.summary_json", summary)?;
    let extra = encode_value(&path, "tests.extra_json", extra)?;
    let n = db.execute(
        "UPDATE tests SET summary_json = ?1, extra_json = ?2 WHERE id = ?3",
        vals![&summary, &extra, test_id],
    )?;
    match n {
        0 => Err(test_not_found(&path, test_id)),
        _ => Ok(()),
    }
}

/// Records how run `run_id` ended (see [`Store::finish_run`]).
fn finish(db: &mut dyn Db, run_id: i64, run: &RunRecord) -> Result<(), StoreError> {
    let path = db.path().to_path_buf();
    let notes = encode(&path, "runs.notes_json", &run.notes)?;
    let warnings = encode(&path, "runs.warnings_json", &run.warnings)?;
    let env = encode_value(&path, "runs.env_json", &run.env)?;
    let n = db.execute(
        "UPDATE runs SET finished_at = ?1, complete = ?2, notes_json = ?3,
                warnings_json = ?4, env_json = ?5,
                writer_pid = NULL, writer_start = NULL, writer_boot = NULL
         WHERE id = ?6",
        vals![
            &run.finished_at,
            run.complete,
            &notes,
            &warnings,
            &env,
            run_id
        ],
    )?;
    if n == 0 {
        return Err(run_not_found(&path, run_id));
    }
    for (idx, t) in run.tests.iter().enumerate() {
        let extra = encode_value(&path, "tests.extra_json", &t.extra)?;
        db.execute(
            "UPDATE tests SET extra_json = ?1 WHERE run_id = ?2 AND idx = ?3",
            vals![&extra, run_id, idx as i64],
        )?;
    }
    Ok(())
}

/// Run `id`, with its tests and (with `passes`) their passes, read inside one snapshot.
fn load(db: &mut dyn Db, id: i64, passes: bool) -> Result<RunRecord, StoreError> {
    let path = db.path().to_path_buf();
    let path = path.as_path();
    let mut run = db
        .row(RUN_COLUMNS, vals![id], |r| decode_run(path, r, id))?
        .ok_or_else(|| run_not_found(path, id))?;
    let mut tests = db.rows(TEST_COLUMNS, vals![id], |r| decode_test(path, r))?;
    if passes {
        for (test_id, test) in &mut tests {
            test.passes = db.rows(PASS_COLUMNS, vals![*test_id], |r| decode_pass(path, r))?;
        }
    }
    run.tests = tests.into_iter().map(|(_, t)| t).collect();
    Ok(run)
}

/// The listing rows of [`Store::list_runs`], each decoded on its own (with its id).
#[allow(clippy::type_complexity)]
fn listing(
    db: &mut dyn Db,
    filter: &RunFilter,
) -> Result<Vec<(i64, Result<RunListing, StoreError>)>, StoreError> {
    let limit = filter
        .limit
        .map_or(i64::MAX, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let params = vals![
        &filter.preset,
        &filter.target,
        &filter.label,
        &filter.study,
        &filter.host,
        limit
    ];
    db.rows(LISTING, params, |r| {
        let id = r.int("id")?;
        let listed = (|| {
            Ok(RunListing {
                id,
                started_at: r.text("started_at")?,
                preset: r.text("preset")?,
                workload: r.text("workload")?,
                target: r.text("target_path")?,
                fs_type: r.text("fs_type")?,
                label: r.opt_text("label")?,
                complete: r.flag("complete")?,
                tests: usize::try_from(r.unsigned("n_tests")?).unwrap_or(usize::MAX),
                study: r.opt_text("study")?,
                config_label: r.opt_text("config_label")?,
                host: r.opt_text("host")?,
            })
        })();
        Ok((id, listed))
    })
}

/// [`Store::delete_runs`] inside the write transaction: no run can begin or end between
/// the check of its writer and its deletion.
fn delete(
    db: &mut dyn Db,
    ids: &[i64],
    skip_live: bool,
) -> Result<(usize, Vec<(i64, u32)>), StoreError> {
    let path = db.path().to_path_buf();
    let mut deleted = 0;
    let mut running = Vec::new();
    for &id in ids {
        // Dropping the transaction without commit rolls back the deletes before this one.
        let writer = live_writer(db, id, true)?.ok_or_else(|| run_not_found(&path, id))?;
        if let Some(pid) = writer {
            if !skip_live {
                return Err(StoreError::RunBeingWritten { path, id, pid });
            }
            running.push((id, pid));
            continue;
        }
        deleted += db.execute("DELETE FROM runs WHERE id = ?1", vals![id])? as usize;
    }
    Ok((deleted, running))
}

/// A run's command line as it is stored: a PostgreSQL URL's password (`--db
/// postgresql://u:PASSWORD@h/db`) is replaced by `***`; nothing else changes (the fingerprint
/// leaves `--db` out anyway).
pub(crate) fn stored_args(command_line: &[String]) -> Vec<String> {
    command_line
        .iter()
        .map(|a| match a.contains("postgres") && a.contains("://") {
            true => pg::redacted(a),
            false => a.clone(),
        })
        .collect()
}

/// The host name and machine id a run's captured environment names (`env.hostname`,
/// `env.machine_id`): what `--host` selects by.
pub(crate) fn host_of(run: &RunRecord) -> (Option<&str>, Option<&str>) {
    let field = |k: &str| run.env.get(k).and_then(|v| v.as_str());
    (field("hostname"), field("machine_id"))
}

/// Whether run `id` is stored (`None` if not) and the pid of the live process writing it,
/// if its row records one (see [`Store::writer`]); with `lock`, the row is locked until the
/// end of the transaction (PostgreSQL: its writer cannot finish, or a push replace it,
/// before the caller deletes it).
///
/// In a PostgreSQL store a writer on another machine cannot be looked at: while its row
/// names one, the run counts as being written (delete it from that machine, or once it has
/// ended there). An SQLite file is written from one machine: its writer is looked at here.
fn live_writer(db: &mut dyn Db, id: i64, lock: bool) -> Result<Option<Option<u32>>, StoreError> {
    let dialect = db.dialect();
    let sql = format!(
        "SELECT writer_pid, writer_start, writer_boot, machine_id FROM runs WHERE id = ?1{}",
        if lock { dialect.lock_row() } else { "" }
    );
    db.row(&sql, vals![id], |r| {
        let (pid, start, boot) = (
            r.opt_int("writer_pid")?,
            r.opt_int("writer_start")?,
            r.opt_text("writer_boot")?,
        );
        let (Some(pid), Some(start), Some(boot_id)) = (pid, start, boot) else {
            return Ok(None);
        };
        let (Ok(pid), Ok(start_ticks)) = (u32::try_from(pid), u64::try_from(start)) else {
            return Ok(None);
        };
        if dialect == Dialect::Postgres {
            let machine = r.opt_text("machine_id")?;
            if machine.is_some() && machine != iolab_sys::host::machine_id() {
                return Ok(Some(pid));
            }
        }
        let writer = Identity {
            pid,
            start_ticks,
            boot_id,
        };
        Ok(writer.alive().then_some(pid))
    })
}

/// The fingerprint of run `id`: the stored one, or, for a row that has none, computed from
/// its columns.
fn fingerprint_of(db: &mut dyn Db, id: i64) -> Result<String, StoreError> {
    let path = db.path().to_path_buf();
    let sql = format!("SELECT fingerprint, {FINGERPRINT_COLUMNS} FROM runs WHERE id = ?1");
    db.row(&sql, vals![id], |r| match r.opt_text("fingerprint")? {
        Some(fp) => Ok(fp),
        None => fingerprint_of_row(r),
    })?
    .ok_or_else(|| run_not_found(&path, id))
}

/// The fingerprint of a run from a row of [`FINGERPRINT_COLUMNS`].
fn fingerprint_of_row(r: &dyn Cells) -> Result<String, StoreError> {
    // A command line that does not parse counts as empty: the fingerprint then rests on
    // the other parts; likewise an environment without a host name (or not JSON).
    let command_line: Vec<String> =
        serde_json::from_str(&r.text("command_line")?).unwrap_or_default();
    let env: Option<serde_json::Value> = r
        .opt_text("env_json")
        .ok()
        .flatten()
        .and_then(|e| serde_json::from_str(&e).ok());
    let host = env.as_ref().and_then(|e| e.get("hostname")?.as_str());
    let (label, config_label, study) = (
        r.opt_text("label")?,
        r.opt_text("config_label")?,
        r.opt_text("study")?,
    );
    Ok(fingerprint::of_parts(&fingerprint::Parts {
        workload: &r.text("workload")?,
        preset: &r.text("preset")?,
        target_kind: &r.text("target_kind")?,
        target_path: &r.text("target_path")?,
        label: label.as_deref(),
        config_label: config_label.as_deref(),
        study: study.as_deref(),
        host,
        engine: &r.text("engine")?,
        settings_json: &r.text("settings_json")?,
        command_line: &command_line,
    }))
}

/// Fills in the fingerprint of every run stored without one, inside the migration to
/// schema v4 (on `db`, its transaction). A row too damaged to compute one from keeps none
/// (it is then no other run's noise).
pub(crate) fn backfill_fingerprints(db: &mut dyn Db) -> Result<(), StoreError> {
    let sql = format!("SELECT {FINGERPRINT_COLUMNS} FROM runs WHERE fingerprint IS NULL");
    let rows = db.rows(&sql, &[], |r| {
        Ok((r.int("id")?, fingerprint_of_row(r).ok()))
    })?;
    for (id, fp) in rows {
        if let Some(fp) = fp {
            db.execute(
                "UPDATE runs SET fingerprint = ?1 WHERE id = ?2",
                vals![&fp, id],
            )?;
        }
    }
    Ok(())
}

/// The writes that store a run, as [`Store`] makes them one by one (an `iolab run`) or a
/// backend inside one transaction (`import_run`); [`Writes::whole`] stores a whole run
/// through them.
pub(crate) trait Writes {
    fn run(&mut self, run: &RunRecord) -> Result<i64, StoreError>;
    fn test(&mut self, run_id: i64, idx: u32, test: &TestRecord) -> Result<i64, StoreError>;
    fn pass(&mut self, test_id: i64, pass: &PassRecord) -> Result<i64, StoreError>;
    fn finish(&mut self, run_id: i64, run: &RunRecord) -> Result<(), StoreError>;

    /// `run` with its tests and passes, ended as `run` says; its new id.
    fn whole(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        let run_id = self.run(run)?;
        for (idx, test) in run.tests.iter().enumerate() {
            let idx = u32::try_from(idx).expect("fewer than 2^32 tests");
            let test_id = self.test(run_id, idx, test)?;
            for pass in &test.passes {
                self.pass(test_id, pass)?;
            }
        }
        self.finish(run_id, run)?;
        Ok(run_id)
    }
}

impl Writes for Store {
    fn run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        self.begin_run(run)
    }
    fn test(&mut self, run_id: i64, idx: u32, test: &TestRecord) -> Result<i64, StoreError> {
        self.add_test(run_id, idx, test)
    }
    fn pass(&mut self, test_id: i64, pass: &PassRecord) -> Result<i64, StoreError> {
        self.add_pass(test_id, pass)
    }
    fn finish(&mut self, run_id: i64, run: &RunRecord) -> Result<(), StoreError> {
        self.finish_run(run_id, run)
    }
}

impl Writes for dyn Db + '_ {
    fn run(&mut self, run: &RunRecord) -> Result<i64, StoreError> {
        insert_run(self, run)
    }
    fn test(&mut self, run_id: i64, idx: u32, test: &TestRecord) -> Result<i64, StoreError> {
        insert_test(self, run_id, idx, test)
    }
    fn pass(&mut self, test_id: i64, pass: &PassRecord) -> Result<i64, StoreError> {
        insert_pass(self, test_id, pass)
    }
    fn finish(&mut self, run_id: i64, run: &RunRecord) -> Result<(), StoreError> {
        finish(self, run_id, run)
    }
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

pub(crate) fn encode<T: Serialize + ?Sized>(
    path: &Path,
    what: &str,
    value: &T,
) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Json {
        path: path.to_path_buf(),
        what: what.to_string(),
        source,
    })
}

pub(crate) fn encode_opt<T: Serialize>(
    path: &Path,
    what: &str,
    value: Option<&T>,
) -> Result<Option<String>, StoreError> {
    value.map(|v| encode(path, what, v)).transpose()
}

/// A JSON value column: SQL NULL for JSON null.
pub(crate) fn encode_value(
    path: &Path,
    what: &str,
    value: &serde_json::Value,
) -> Result<Option<String>, StoreError> {
    encode_opt(path, what, Some(value).filter(|v| !v.is_null()))
}

/// Reads the columns of one row, naming the row in errors (`read_json of pass 12`).
struct Decoder<'a, C: Cells + ?Sized> {
    path: &'a Path,
    row: &'a C,
    noun: &'static str,
    id: i64,
}

impl<C: Cells + ?Sized> Decoder<'_, C> {
    fn parse<T: DeserializeOwned>(&self, col: &str, text: &str) -> Result<T, StoreError> {
        serde_json::from_str(text).map_err(|source| StoreError::Json {
            path: self.path.to_path_buf(),
            what: format!("{col} of {} {}", self.noun, self.id),
            source,
        })
    }

    fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        let text = self.row.text(col)?;
        self.parse(col, &text)
    }

    /// A nullable JSON column: `None` for SQL NULL.
    fn json_opt<T: DeserializeOwned>(&self, col: &str) -> Result<Option<T>, StoreError> {
        let text = self.row.opt_text(col)?;
        text.map(|t| self.parse(col, &t)).transpose()
    }

    fn json_value(&self, col: &str) -> Result<serde_json::Value, StoreError> {
        Ok(self.json_opt(col)?.unwrap_or(serde_json::Value::Null))
    }
}

/// The run row, without its tests.
pub(crate) fn decode_run(path: &Path, row: &dyn Cells, id: i64) -> Result<RunRecord, StoreError> {
    let d = Decoder {
        path,
        row,
        noun: "run",
        id,
    };
    Ok(RunRecord {
        id: Some(row.int("id")?),
        uuid: row.text("uuid")?,
        iolab_version: row.text("iolab_version")?,
        preset: row.text("preset")?,
        workload: row.text("workload")?,
        target: TargetInfo {
            path: row.text("target_path")?,
            kind: TargetKind::from(row.text("target_kind")?),
            io_path: row.text("io_path")?,
            fs_type: row.text("fs_type")?,
            size: row.unsigned("size")?,
        },
        settings: d.json("settings_json")?,
        engine: iolab_measure::engine_of_text(&row.text("engine")?).map_err(|source| {
            StoreError::Json {
                path: path.to_path_buf(),
                what: format!("engine of run {id}"),
                source,
            }
        })?,
        command_line: d.json("command_line")?,
        label: row.opt_text("label")?,
        started_at: row.text("started_at")?,
        finished_at: row.opt_text("finished_at")?,
        complete: row.flag("complete")?,
        notes: d.json("notes_json")?,
        warnings: d.json("warnings_json")?,
        env: d.json_value("env_json")?,
        study: row.opt_text("study")?,
        config_label: row.opt_text("config_label")?,
        study_meta: d.json_value("study_json")?,
        tests: Vec::new(),
    })
}

/// A test row (without passes) and its id.
pub(crate) fn decode_test(path: &Path, row: &dyn Cells) -> Result<(i64, TestRecord), StoreError> {
    let id = row.int("id")?;
    let d = Decoder {
        path,
        row,
        noun: "test",
        id,
    };
    let test = TestRecord {
        name: row.text("name")?,
        group: row.text("grp")?,
        job: d.json("job_json")?,
        passes: Vec::new(),
        summary: d.json("summary_json")?,
        extra: d.json_value("extra_json")?,
    };
    Ok((id, test))
}

pub(crate) fn decode_pass(path: &Path, row: &dyn Cells) -> Result<PassRecord, StoreError> {
    let id = row.int("id")?;
    let d = Decoder {
        path,
        row,
        noun: "pass",
        id,
    };
    let index = row.unsigned("idx")?;
    Ok(PassRecord {
        index: u32::try_from(index).map_err(|_| StoreError::Json {
            path: path.to_path_buf(),
            what: format!("idx of pass {id}"),
            source: serde::de::Error::custom(format!("{index} is out of range")),
        })?,
        bytes: row.unsigned("bytes")?,
        ios: row.unsigned("ios")?,
        seconds: row.real("seconds")?,
        mb_s: row.real("mb_s")?,
        iops: row.real("iops")?,
        lat_us: d.json("lat_json")?,
        read: d.json_opt("read_json")?,
        write: d.json_opt("write_json")?,
        // Passes stored before schema v7 have no trims.
        trim: d.json_opt("trim_json")?,
        sync: d.json_opt("sync_json")?,
        cpu: d.json("cpu_json")?,
        timeseries: d.json("timeseries_json")?,
        errors: d.json("errors_json")?,
        // Passes stored before schema v2 have no context.
        context: d.json_opt("context_json")?.unwrap_or_default(),
    })
}
