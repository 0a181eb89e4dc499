//! The check a writer makes before it writes anything: a database whose file or structure
//! is damaged is refused untouched ([`StoreError::Damaged`]), so a run never stores into a
//! file that `iolab results` reports as malformed, and SQLite never reuses a page that a
//! damaged free list or b-tree still points to.
//!
//! The check is bounded so that it stays cheap on a large database (docs/store.md has the
//! measured cost at 10,000 runs):
//! - the 100-byte header: the SQLite magic, a valid page size, and a file at least as long
//!   as the page count the header records (a truncated copy fails here);
//! - up to [`FULL_CHECK_MAX`] bytes, `PRAGMA quick_check` of the whole file (every b-tree,
//!   overflow chain and the free list);
//! - beyond that, `quick_check` of the `runs` table with its indexes (everything `iolab
//!   results` lists), a count through the `tests` index, and the right-hand path of the
//!   `tests` and `passes` tables, which is where new rows go. The passes themselves (nine tenths of the
//!   file) are not read: a damaged one shows when its run is loaded, and `history` skips it.

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension};

use crate::dbfile::DbFile;
use crate::error::StoreError;

/// Files up to this size get a full `PRAGMA quick_check` before every write session.
pub const FULL_CHECK_MAX: u64 = 16 << 20;

fn damaged(path: &Path, detail: impl Into<String>) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// What the 100-byte header of an SQLite file says, or why it is not one. `file` is the
/// database file as `dbfile::check` found it (a regular file).
pub(crate) fn check_header(path: &Path, file: &DbFile) -> Result<(), StoreError> {
    let len = file.len;
    if len == 0 {
        return Ok(()); // created, nothing written yet
    }
    let mut f = match crate::dbfile::reopen(file) {
        Ok(f) => f,
        Err(_) => return Ok(()), // SQLite reports it on itself
    };
    let mut h = [0u8; 100];
    if len < 100 || f.read_exact(&mut h).is_err() {
        return Err(damaged(
            path,
            format!("{len} bytes, shorter than an SQLite header"),
        ));
    }
    if &h[..16] != b"SQLite format 3\0" {
        return Err(damaged(
            path,
            "the file does not start with the SQLite header",
        ));
    }
    let page_size = match u16::from_be_bytes([h[16], h[17]]) {
        1 => 65536,
        n if n >= 512 && n.is_power_of_two() => n as u64,
        n => {
            return Err(damaged(
                path,
                format!("the header's page size {n} is invalid"),
            ))
        }
    };
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    // The page count is valid when the change counter matches "version-valid-for".
    let (pages, counter, valid_for) = (be32(28), be32(24), be32(92));
    if counter == valid_for && pages > 0 && (pages as u64) * page_size > len {
        return Err(damaged(
            path,
            format!(
                "the header records {pages} pages of {page_size} bytes but the file holds {len} \
                 bytes: it was truncated"
            ),
        ));
    }
    Ok(())
}

/// The structural check (see the module docs). `len` is the file's size.
pub(crate) fn check_structure(conn: &Connection, path: &Path, len: u64) -> Result<(), StoreError> {
    let sql_err = |e: rusqlite::Error| damaged(path, e.to_string());
    let quick = |what: &str| -> Result<(), StoreError> {
        let mut stmt = conn.prepare(&format!("PRAGMA {what}")).map_err(sql_err)?;
        let mut rows = stmt.query([]).map_err(sql_err)?;
        let mut problems = Vec::new();
        while let Some(row) = rows.next().map_err(sql_err)? {
            let text: String = row.get(0).map_err(sql_err)?;
            // One row may hold several lines, headed by "*** in database main ***".
            problems.extend(
                text.lines()
                    .filter(|l| *l != "ok" && !l.starts_with("***") && !l.trim().is_empty())
                    .map(str::to_string),
            );
        }
        if problems.is_empty() {
            return Ok(());
        }
        let more = problems.len() - 1;
        Err(damaged(
            path,
            format!(
                "PRAGMA {what}: {}{}",
                problems[0],
                if more > 0 {
                    format!(" (and {more} more)")
                } else {
                    String::new()
                }
            ),
        ))
    };
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN ('runs', 'tests', 'passes')",
            [],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    if len <= FULL_CHECK_MAX || tables < 3 {
        return quick("quick_check");
    }
    quick("quick_check(runs)")?;
    // The right-hand path of each table (where the next rows go) and the tests index
    // `results` counts through.
    for sql in [
        "SELECT max(id) FROM tests",
        "SELECT max(id) FROM passes",
        "SELECT count(*) FROM tests INDEXED BY tests_run_id WHERE run_id > -1",
    ] {
        conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))
            .optional()
            .map_err(sql_err)?;
    }
    Ok(())
}
