//! The result store: every run iolab measures, kept with its tests and passes in one SQLite
//! database, written as the run goes and read back exactly.
//!
//! The database lives at [`default_db_path`] unless the caller chooses another file. Its
//! schema is versioned (`PRAGMA user_version`) and migrated forward on [`Store::open`]; a
//! database from a newer iolab, or a damaged one (`health`), is refused untouched. Readers
//! use [`Store::open_read_only`], which creates and writes nothing, and can skip a run whose
//! record is damaged ([`Store::load_runs_skipping`]). Several iolab processes may share one
//! database: it runs in WAL mode, every write is a short `BEGIN IMMEDIATE` transaction, and a
//! writer waits up to [`BUSY_TIMEOUT`] for another to finish. See `docs/store.md`.
//!
//! A run is written incrementally so that an interrupted run keeps what it finished:
//! [`Store::begin_run`], then [`Store::add_test`] and [`Store::add_pass`] as tests and passes
//! complete, [`Store::update_test_summary`], and [`Store::finish_run`]. [`Store::save_run`]
//! stores a finished record in one transaction.
//!
//! The same store can live in a PostgreSQL database instead (`--db postgresql://...`,
//! `pg.rs`): the same tables and migrations, for many hosts writing at once; `iolab push`
//! copies runs into it ([`Store::import_run`], idempotent by run uuid).
//!
//! Every run carries a [`fingerprint`] of its command; [`Store::runs_like`] finds the other
//! runs of a command (their spread is the run-to-run noise reports test against).

mod dbfile;
mod error;
pub mod fingerprint;
mod health;
mod lite;
mod pg;
mod schema;
mod sql;
mod store;

use std::ffi::OsString;
use std::path::PathBuf;

pub use error::StoreError;
pub use health::FULL_CHECK_MAX;
pub use pg::tls::TlsError;
pub use schema::SCHEMA_VERSION;
pub use store::{RunFilter, RunListing, Store, BUSY_TIMEOUT};

/// Where the result database lives by default: `$IOLAB_DB` when it is set and not empty (a
/// file, or a `postgresql://` URL: every command's `--db` default), else
/// `$XDG_DATA_HOME/iolab/results.db`, or `$HOME/.local/share/iolab/results.db` when
/// `XDG_DATA_HOME` is unset, empty or relative (which the XDG base directory specification
/// says to ignore).
pub fn default_db_path() -> PathBuf {
    if let Some(db) = std::env::var_os("IOLAB_DB").filter(|v| !v.is_empty()) {
        return PathBuf::from(db);
    }
    db_path_from(std::env::var_os("XDG_DATA_HOME"), std::env::home_dir())
}

/// Whether `db` names a PostgreSQL store (`postgresql://...` or `postgres://...`) rather
/// than a file.
pub fn is_postgres_url(db: &std::path::Path) -> bool {
    pg::is_url(db)
}

fn db_path_from(xdg_data_home: Option<OsString>, home: Option<PathBuf>) -> PathBuf {
    let data_home = xdg_data_home
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            // Without any home directory, fall back to the current directory.
            home.unwrap_or_default().join(".local/share")
        });
    data_home.join("iolab").join("results.db")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_path_follows_xdg() {
        let home = Some(PathBuf::from("/home/u"));
        assert_eq!(
            db_path_from(Some("/data".into()), home.clone()),
            PathBuf::from("/data/iolab/results.db")
        );
        assert_eq!(
            db_path_from(None, home.clone()),
            PathBuf::from("/home/u/.local/share/iolab/results.db")
        );
        for ignored in ["", "relative/dir"] {
            assert_eq!(
                db_path_from(Some(ignored.into()), home.clone()),
                PathBuf::from("/home/u/.local/share/iolab/results.db")
            );
        }
        assert_eq!(
            db_path_from(None, None),
            PathBuf::from(".local/share/iolab/results.db")
        );
    }
}
