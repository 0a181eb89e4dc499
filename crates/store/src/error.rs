//! What can go wrong with the result database; every error names the database file.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// An error of the result store. Every variant carries the path of the database it concerns.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The directory that should hold the database could not be created.
    CreateDir {
        path: PathBuf,
        dir: PathBuf,
        source: io::Error,
    },
    /// SQLite refused an operation (I/O error, a locked database after the busy timeout,
    /// a file that is not a database, a constraint...).
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// The database was written by a newer iolab; it is left untouched.
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// The file is an SQLite database, but not one of iolab's.
    NotIolab { path: PathBuf },
    /// The schema version is not one any iolab writes (negative); the file is left untouched.
    BadVersion { path: PathBuf, found: i64 },
    /// The database failed the check made before writing: it was left untouched.
    Damaged { path: PathBuf, detail: String },
    /// A database of an older schema that cannot be upgraded (it is read-only) and so
    /// cannot be read by this iolab.
    OldReadOnly {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// No run has this id.
    RunNotFound { path: PathBuf, id: i64 },
    /// No test has this id.
    TestNotFound { path: PathBuf, id: i64 },
    /// A run with this uuid is already stored.
    DuplicateRun { path: PathBuf, uuid: String },
    /// The path is not a database iolab may open: not a regular file (a device, a FIFO, a
    /// socket, a directory, a symlink to one of those or to nothing), a file SQLite keeps
    /// next to it that is not its own, a file on a read-only filesystem or one that cannot
    /// be written (for a writer), or a file that changed while it was being opened. Nothing
    /// was opened for writing.
    Refused { path: PathBuf, detail: String },
    /// A PostgreSQL URL whose TLS parameters cannot be used (`sslmode`, `sslrootcert`,
    /// `sslcert`, `sslkey`): refused as `Refused` is, with the error underneath.
    Tls {
        path: PathBuf,
        source: crate::TlsError,
    },
    /// A run that is still being written: the process writing it (`pid`) is alive.
    RunBeingWritten { path: PathBuf, id: i64, pid: u32 },
    /// The PostgreSQL server refused an operation or could not be reached (the path is the
    /// store's URL, without any password).
    Postgres {
        path: PathBuf,
        source: postgres::Error,
    },
    /// A structured column could not be encoded, or decoded when read back.
    Json {
        path: PathBuf,
        /// The column and row, e.g. `passes.read_json of pass 12`.
        what: String,
        source: serde_json::Error,
    },
}

impl StoreError {
    /// The database file the error concerns.
    pub fn path(&self) -> &Path {
        match self {
            StoreError::CreateDir { path, .. }
            | StoreError::Sqlite { path, .. }
            | StoreError::TooNew { path, .. }
            | StoreError::NotIolab { path }
            | StoreError::BadVersion { path, .. }
            | StoreError::Damaged { path, .. }
            | StoreError::OldReadOnly { path, .. }
            | StoreError::RunNotFound { path, .. }
            | StoreError::TestNotFound { path, .. }
            | StoreError::DuplicateRun { path, .. }
            | StoreError::Refused { path, .. }
            | StoreError::Tls { path, .. }
            | StoreError::RunBeingWritten { path, .. }
            | StoreError::Postgres { path, .. }
            | StoreError::Json { path, .. } => path,
        }
    }
}

impl StoreError {
    /// Whether the error is the caller's to fix with another argument: a database refused
    /// before anything was written to it (newer, foreign, damaged, or an old one that cannot
    /// be upgraded: another `--db`; not a regular file, read-only: `Refused`), or a run or
    /// test id it does not hold, or a run still being written; a PostgreSQL server that
    /// refuses the role (authentication) or has no such database. Exit 2.
    pub fn is_refusal(&self) -> bool {
        // A PostgreSQL store that refuses this role or has no such database: another --db.
        if let StoreError::Postgres { source, .. } = self {
            return source.code().is_some_and(|c| {
                c.code().starts_with("28") || *c == postgres::error::SqlState::INVALID_CATALOG_NAME
            });
        }
        matches!(
            self,
            StoreError::TooNew { .. }
                | StoreError::NotIolab { .. }
                | StoreError::BadVersion { .. }
                | StoreError::Damaged { .. }
                | StoreError::OldReadOnly { .. }
                | StoreError::Refused { .. }
                | StoreError::Tls { .. }
                | StoreError::RunBeingWritten { .. }
                | StoreError::RunNotFound { .. }
                | StoreError::TestNotFound { .. }
        )
    }

    /// Whether the error comes from the content of one stored row (JSON that does not
    /// decode, a value of the wrong type, a page SQLite finds malformed) rather than from the
    /// database as a whole: a reader can skip that run and go on.
    pub fn is_damaged_row(&self) -> bool {
        match self {
            StoreError::Json { .. } => true,
            StoreError::Sqlite { source, .. } => {
                matches!(
                    source,
                    rusqlite::Error::FromSqlConversionFailure(..)
                        | rusqlite::Error::InvalidColumnType(..)
                        | rusqlite::Error::IntegralValueOutOfRange(..)
                        | rusqlite::Error::Utf8Error(..)
                ) || source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt)
            }
            // A column of a type the row's field cannot take.
            StoreError::Postgres { source, .. } => {
                source.as_db_error().is_none()
                    && std::error::Error::source(source)
                        .is_some_and(|s| s.is::<postgres::types::WrongType>())
            }
            _ => false,
        }
    }
}

impl StoreError {
    /// The constraint a write broke, if that is what the database said.
    pub(crate) fn violation(&self) -> Option<crate::sql::Violation> {
        use crate::sql::Violation;
        match self {
            StoreError::Sqlite { source, .. } => {
                let f = source
                    .sqlite_error()
                    .filter(|f| f.code == rusqlite::ErrorCode::ConstraintViolation)?;
                match f.extended_code {
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE => Some(Violation::Unique),
                    rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => Some(Violation::ForeignKey),
                    _ => None,
                }
            }
            StoreError::Postgres { source, .. } => {
                let code = source.code()?;
                if *code == postgres::error::SqlState::UNIQUE_VIOLATION {
                    Some(Violation::Unique)
                } else if *code == postgres::error::SqlState::FOREIGN_KEY_VIOLATION {
                    Some(Violation::ForeignKey)
                } else {
                    None
                }
            }
            _ => None,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::CreateDir { path, dir, source } => write!(
                f,
                "cannot create {} for the result database {}: {source}",
                dir.display(),
                path.display()
            ),
            StoreError::Sqlite { path, source } => {
                write!(f, "result database {}: {source}", path.display())?;
                if let Some(hint) = full_filesystem(path, source) {
                    write!(f, "; {hint}")?;
                }
                Ok(())
            }
            StoreError::TooNew {
                path,
                found,
                supported,
            } => write!(
                f,
                "result database {} has schema version {found}, written by a newer iolab \
                 (this one knows versions up to {supported}); it was left untouched: \
                 upgrade iolab or use another database",
                path.display()
            ),
            StoreError::NotIolab { path } => write!(
                f,
                "{} is an SQLite database but not an iolab result database; it was left untouched",
                path.display()
            ),
            StoreError::BadVersion { path, found } => write!(
                f,
                "{} has schema version {found}, which no iolab writes: it is damaged or not \
                 an iolab result database; it was left untouched",
                path.display()
            ),
            StoreError::Damaged { path, detail } => write!(
                f,
                "result database {} is damaged ({detail}); iolab writes nothing to a damaged \
                 database and left it untouched. Reading it may still work for what is intact \
                 (`iolab results --db {}`). Keep a copy, then recover what SQLite can \
                 (`sqlite3 {} .recover | sqlite3 recovered.db`), or give --db another file",
                path.display(),
                path.display(),
                path.display()
            ),
            StoreError::OldReadOnly {
                path,
                found,
                supported,
            } => write!(
                f,
                "result database {} has schema version {found}, older than this iolab's \
                 {supported}, and it cannot be upgraded where it is (read-only); copy it to a \
                 writable place and give --db the copy",
                path.display()
            ),
            StoreError::RunNotFound { path, id } => {
                write!(
                    f,
                    "run {id} not found in result database {}",
                    path.display()
                )
            }
            StoreError::TestNotFound { path, id } => {
                write!(
                    f,
                    "test {id} not found in result database {}",
                    path.display()
                )
            }
            StoreError::DuplicateRun { path, uuid } => write!(
                f,
                "run {uuid} is already stored in result database {}",
                path.display()
            ),
            StoreError::Json { path, what, source } => {
                write!(f, "result database {}: {what}: {source}", path.display())
            }
            StoreError::Postgres { path, source } => {
                write!(f, "result database {}: ", path.display())?;
                match source.as_db_error() {
                    // The server's own words ("db error" alone says nothing).
                    Some(db) => write!(f, "the server says: {}", db.message())?,
                    // "error connecting to server" alone does not say why.
                    None => {
                        write!(f, "{source}")?;
                        if let Some(inner) = std::error::Error::source(source) {
                            write!(f, ": {inner}")?;
                            if let Some(hint) = tls_hint(&inner.to_string()) {
                                write!(f, "; {hint}")?;
                            }
                        }
                    }
                }
                // The server's own message and its hint say what to do.
                if let Some(db) = source.as_db_error() {
                    if let Some(detail) = db.detail() {
                        write!(f, " ({detail})")?;
                    }
                    if let Some(hint) = db.hint() {
                        write!(f, "; {hint}")?;
                    }
                }
                Ok(())
            }
            StoreError::Refused { path, detail } => write!(
                f,
                "result database {} refused: {detail} (nothing was written to it)",
                path.display()
            ),
            StoreError::Tls { path, source } => write!(
                f,
                "result database {} refused: {source} (nothing was written to it)",
                path.display()
            ),
            StoreError::RunBeingWritten { path, id, pid } => write!(
                f,
                "run {id} in result database {} is still being written by process {pid}; \
                 it can be deleted once that run has ended (or the process is gone)",
                path.display()
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::CreateDir { source, .. } => Some(source),
            StoreError::Sqlite { source, .. } => Some(source),
            StoreError::Json { source, .. } => Some(source),
            StoreError::Postgres { source, .. } => Some(source),
            StoreError::Tls { source, .. } => Some(source),
            StoreError::TooNew { .. }
            | StoreError::NotIolab { .. }
            | StoreError::BadVersion { .. }
            | StoreError::Damaged { .. }
            | StoreError::OldReadOnly { .. }
            | StoreError::RunNotFound { .. }
            | StoreError::TestNotFound { .. }
            | StoreError::DuplicateRun { .. }
            | StoreError::Refused { .. }
            | StoreError::RunBeingWritten { .. } => None,
        }
    }
}

/// What to do about a TLS connection that failed (OpenSSL's words alone name no remedy).
fn tls_hint(error: &str) -> Option<&'static str> {
    if error.contains("hostname mismatch") {
        Some("the server's certificate does not name the URL's host: connect by a name it holds")
    } else if error.contains("certificate verify failed") {
        Some(
            "the server's certificate is not signed by a root certificate iolab was given: \
             name its CA's certificate (PEM) with sslrootcert=FILE",
        )
    } else if error.contains("server does not support TLS") {
        Some("the server has no TLS (ssl=off); sslmode=require never connects in the clear")
    } else {
        None
    }
}

/// For a write SQLite could not do (SQLITE_FULL, or SQLITE_IOERR when the WAL or its index
/// cannot grow), whether the filesystem holding the database is full, said so the user
/// knows what to do ("disk I/O error" alone points at the device).
fn full_filesystem(path: &std::path::Path, e: &rusqlite::Error) -> Option<String> {
    let rusqlite::Error::SqliteFailure(f, _) = e else {
        return None;
    };
    if !matches!(
        f.code,
        rusqlite::ErrorCode::DiskFull | rusqlite::ErrorCode::SystemIoFailure
    ) {
        return None;
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let st = iolab_sys::statvfs(dir).ok()?;
    // Less than what one run's rows and the WAL need: full for SQLite's purposes.
    (st.available_bytes < 1 << 20).then(|| {
        format!(
            "the filesystem holding it is full ({} bytes available): make room there, or \
             give --db a database on another filesystem",
            st.available_bytes
        )
    })
}

/// Attaches the database path to a rusqlite result.
pub(crate) trait AtPath<T> {
    fn at(self, path: &Path) -> Result<T, StoreError>;
}

impl<T> AtPath<T> for Result<T, rusqlite::Error> {
    fn at(self, path: &Path) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        })
    }
}

impl<T> AtPath<T> for Result<T, postgres::Error> {
    fn at(self, path: &Path) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Postgres {
            path: path.to_path_buf(),
            source,
        })
    }
}
