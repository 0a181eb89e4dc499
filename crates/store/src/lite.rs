//! The SQLite backend of [`crate::Store`]: opening the file (`dbfile.rs`, `health.rs`,
//! `schema.rs`) for writing or reading, and [`LiteDb`], the [`Db`] the store's statements
//! run on.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{
    params_from_iter, Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior,
};

use crate::dbfile::{self, DbFile};
use crate::error::{AtPath, StoreError};
use crate::sql::{Cells, Db, Dialect, Tx, Val, Work};
use crate::store::BUSY_TIMEOUT;
use crate::{health, schema};

/// The SQLite backend of [`crate::Store`]. Writes take `&mut self`; each is one short `BEGIN
/// IMMEDIATE` transaction, so several processes (or threads, each with its own `Store`) can
/// write to one file: they take turns, waiting up to [`BUSY_TIMEOUT`].
#[derive(Debug)]
pub(crate) struct Lite {
    // Dropped in this order: SQLite closes its descriptors before the checked file's.
    conn: Connection,
    path: PathBuf,
    _file: Option<DbFile>,
}

impl Lite {
    /// Opens (creating it and its directory if needed) the database at `path` for writing
    /// and brings its schema up to date. Anything but a regular file (a device, a FIFO, a
    /// symlink to one: `dbfile.rs`), a file on a read-only filesystem or one that cannot be
    /// written, a database written by a newer iolab, an SQLite file that is not iolab's, or
    /// a damaged one (the check of `health.rs`) is refused before anything is written to it.
    pub(crate) fn open(path: &Path) -> Result<Lite, StoreError> {
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
        Ok(Lite {
            conn,
            path: path.to_path_buf(),
            _file: Some(file),
        })
    }

    /// Opens the database at `path` for reading only: nothing is created or written, so
    /// listing and reports work on a read-only mount or a copy one may not change. A file
    /// that does not exist (or is empty) reads as an empty database; anything but a regular
    /// file is refused as [`crate::Store::open`] refuses it. On a read-only
    /// filesystem, where SQLite cannot make the `-shm` file a WAL database needs, the file
    /// is read as immutable. A database of an older schema is upgraded when it can be
    /// written (as [`crate::Store::open`] would) and refused otherwise.
    pub(crate) fn open_read_only(path: &Path) -> Result<Lite, StoreError> {
        let Some(file) = dbfile::check(path)?.filter(|f| f.len > 0) else {
            let mut conn = Connection::open_in_memory().at(path)?;
            schema::migrate(&mut conn, path)?;
            return Ok(Lite {
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
            return Lite::open(path).map_err(|e| match &e {
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
        Ok(Lite {
            conn,
            path: path.to_path_buf(),
            _file: Some(file),
        })
    }

    /// The database file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The store's statements on the connection (outside any transaction).
    pub(crate) fn db(&self) -> LiteDb<'_> {
        LiteDb::new(&self.conn, &self.path)
    }

    /// `f` in one transaction, committed; any error rolls back. A write transaction is
    /// `BEGIN IMMEDIATE` (it waits its turn for the file, up to [`BUSY_TIMEOUT`]); a
    /// snapshot a deferred one, whose reads see one state of the file.
    pub(crate) fn transaction<T>(&self, kind: Tx, f: impl Work<T>) -> Result<T, StoreError> {
        let path = &self.path;
        let behavior = match kind {
            Tx::Write => TransactionBehavior::Immediate,
            Tx::Snapshot => TransactionBehavior::Deferred,
        };
        let tx = Transaction::new_unchecked(&self.conn, behavior).at(path)?;
        let out = f(&mut LiteDb::new(&tx, path))?;
        tx.commit().at(path)?;
        Ok(out)
    }
}

/// An SQLite connection (or a transaction: it derefs to one) running the store's
/// statements, each prepared once per connection (`prepare_cached`).
pub(crate) struct LiteDb<'a> {
    conn: &'a Connection,
    path: &'a Path,
}

impl<'a> LiteDb<'a> {
    pub(crate) fn new(conn: &'a Connection, path: &'a Path) -> LiteDb<'a> {
        LiteDb { conn, path }
    }
}

impl Db for LiteDb<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn path(&self) -> &Path {
        self.path
    }

    fn execute(&mut self, sql: &str, params: &[Val<'_>]) -> Result<u64, StoreError> {
        let n = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params_from_iter(params)))
            .at(self.path)?;
        Ok(n as u64)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[Val<'_>],
        each: &mut dyn FnMut(&dyn Cells) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let path = self.path;
        let mut stmt = self.conn.prepare_cached(sql).at(path)?;
        let mut rows = stmt.query(params_from_iter(params)).at(path)?;
        while let Some(row) = rows.next().at(path)? {
            each(&(path, row))?;
        }
        Ok(())
    }

    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.conn.execute_batch(sql).at(self.path)
    }
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
