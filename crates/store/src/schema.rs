//! The schema and its migrations, for both backends; SQLite's version is `PRAGMA
//! user_version` (PostgreSQL's the table `iolab_schema`, see `pg.rs`).
//!
//! `MIGRATIONS[i]` takes a database from version `i` to version `i + 1`. The list only ever
//! grows: a step that has shipped is never edited, a change is a new step appended at the end.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{AtPath, StoreError};
use crate::lite::LiteDb;
use crate::sql::Db;

/// `PRAGMA application_id` of an iolab database: "iolb" in ASCII.
pub(crate) const APPLICATION_ID: i32 = 0x696f_6c62;

/// Ordered migration steps; the schema version is the number of steps applied. Each is
/// written once for both backends, with `{NAME}`s where their DDL differs (the column
/// types, SQLite's fill-in of the hosts of v6), which [`Dialect::ddl`] replaces.
const MIGRATIONS: &[&str] = &[
    // v1: runs > tests > passes.
    "
    CREATE TABLE runs (
        id            {ID},
        uuid          TEXT    NOT NULL UNIQUE,
        started_at    TEXT    NOT NULL,
        finished_at   TEXT,
        complete      {FLAG} NOT NULL{FLAG_CHECK},
        preset        TEXT    NOT NULL,
        workload      TEXT    NOT NULL,
        target_path   TEXT    NOT NULL,
        target_kind   TEXT    NOT NULL,
        io_path       TEXT    NOT NULL,
        fs_type       TEXT    NOT NULL,
        size          {INT} NOT NULL,
        label         TEXT,
        command_line  TEXT    NOT NULL,
        iolab_version TEXT    NOT NULL,
        engine        TEXT    NOT NULL,
        settings_json TEXT    NOT NULL,
        notes_json    TEXT    NOT NULL,
        warnings_json TEXT    NOT NULL,
        env_json      TEXT,
        study         TEXT,
        config_label  TEXT
    );
    CREATE INDEX runs_started_at ON runs (started_at);
    CREATE INDEX runs_study ON runs (study);

    CREATE TABLE tests (
        id           {ID},
        run_id       {INT} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        idx          {INT} NOT NULL,
        name         TEXT    NOT NULL,
        grp          TEXT    NOT NULL,
        job_json     TEXT    NOT NULL,
        summary_json TEXT    NOT NULL,
        extra_json   TEXT
    );
    CREATE UNIQUE INDEX tests_run_id ON tests (run_id, idx);

    CREATE TABLE passes (
        id              {ID},
        test_id         {INT} NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
        idx             {INT} NOT NULL,
        bytes           {INT} NOT NULL,
        ios             {INT} NOT NULL,
        seconds         {REAL}    NOT NULL,
        mb_s            {REAL}    NOT NULL,
        iops            {REAL}    NOT NULL,
        lat_json        TEXT    NOT NULL,
        read_json       TEXT,
        write_json      TEXT,
        sync_json       TEXT,
        cpu_json        TEXT    NOT NULL,
        timeseries_json TEXT    NOT NULL,
        errors_json     TEXT    NOT NULL
    );
    CREATE INDEX passes_test_id ON passes (test_id);
    ",
    // v2: what surrounded each pass (page-cache residency, device and CPU activity).
    "
    ALTER TABLE passes ADD COLUMN context_json TEXT;
    ",
    // v3: a study run's invocation, matrix values and testbed description.
    "
    ALTER TABLE runs ADD COLUMN study_json TEXT;
    ",
    // v4: which runs repeat one measurement (see fingerprint.rs); the runs stored before
    // get theirs in the same transaction (`FINGERPRINTS`).
    "
    ALTER TABLE runs ADD COLUMN fingerprint TEXT;
    CREATE INDEX runs_fingerprint ON runs (fingerprint, started_at);
    ",
    // v5: the process writing a run, from `begin_run` until `finish_run` (NULL once it
    // ended): `delete` and `prune` leave a run alone while that process is alive.
    "
    ALTER TABLE runs ADD COLUMN writer_pid {INT};
    ALTER TABLE runs ADD COLUMN writer_start {INT};
    ALTER TABLE runs ADD COLUMN writer_boot TEXT;
    ",
    // v6: the host that measured each run (`env.hostname`, and `env.machine_id`: a hash of
    // /etc/machine-id, see iolab_sys::host), for `--host` on a store many hosts share. The
    // runs stored before get their host name from their environment; they have no
    // machine id.
    "
    ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE runs ADD COLUMN machine_id TEXT;
    {HOST_FROM_ENV}
    CREATE INDEX runs_host ON runs (host, started_at);
    CREATE INDEX runs_machine_id ON runs (machine_id, started_at);
    ",
    // v7: a pass's trims (fio's third direction: a job file's `rw=trim`, `randtrim`).
    "
    ALTER TABLE passes ADD COLUMN trim_json TEXT;
    ",
];

/// The version whose step adds `runs.fingerprint`; the step also fills it in for the runs
/// already stored (computed in Rust, see `store::backfill_fingerprints`).
const FINGERPRINTS: i64 = 4;

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// Refuses a version this build cannot use: a newer one, or a negative one (no iolab writes
/// it; `user_version` is any 32-bit number another program or a damaged header may hold).
pub(crate) fn check_version(version: i64, path: &Path) -> Result<(), StoreError> {
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version < 0 {
        return Err(StoreError::BadVersion {
            path: path.to_path_buf(),
            found: version,
        });
    }
    Ok(())
}

/// Refuses, without writing anything, a database this build must not touch: one from a
/// newer iolab, or another program's SQLite file.
pub(crate) fn check_compatible(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    // One read transaction, so the reads below see one state even if another iolab is
    // migrating the file right now.
    let tx = conn.unchecked_transaction().at(path)?;
    let version = user_version(&tx).at(path)?;
    check_version(version, path)?;
    let app: i32 = tx
        .pragma_query_value(None, "application_id", |r| r.get(0))
        .at(path)?;
    let foreign = if version == 0 {
        // A fresh database is empty; tables without our version mean someone else's file.
        let objects: i64 = tx
            .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
            .at(path)?;
        objects > 0 || app != 0
    } else {
        app != APPLICATION_ID
    };
    if foreign {
        return Err(StoreError::NotIolab {
            path: path.to_path_buf(),
        });
    }
    tx.commit().at(path)
}

/// Applies the missing migration steps, each in its own `BEGIN IMMEDIATE` transaction. The
/// version is read again inside each transaction, so concurrent openers apply a step once.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .at(path)?;
        let version = user_version(&tx).at(path)?;
        check_version(version, path)?;
        if version == SCHEMA_VERSION {
            return tx.commit().at(path);
        }
        if version == 0 {
            tx.pragma_update(None, "application_id", APPLICATION_ID)
                .at(path)?;
        }
        step(&mut LiteDb::new(&tx, path), version)?;
        tx.pragma_update(None, "user_version", version + 1)
            .at(path)?;
        tx.commit().at(path)?;
    }
}

/// Takes the database of `db` from `version` to `version + 1`, inside the caller's
/// transaction (which records the new version): the same step on either backend.
pub(crate) fn step(db: &mut dyn Db, version: i64) -> Result<(), StoreError> {
    let sql = db.dialect().ddl(MIGRATIONS[version as usize]);
    db.batch(&sql)?;
    if version + 1 == FINGERPRINTS {
        // In the same transaction: at version 4 every run has its fingerprint.
        crate::store::backfill_fingerprints(db)?;
    }
    Ok(())
}
