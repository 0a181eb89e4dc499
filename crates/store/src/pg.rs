//! The PostgreSQL backend of [`crate::Store`]: the same tables, migrations and operations as
//! the SQLite file, in a database on a server that many hosts write to at once.
//!
//! `--db postgresql://USER@HOST/DB` (or `postgres://`) selects it. The URL is read by the
//! `postgres` crate (its parameters: `host`, `port`, `user`, `password`, `dbname`,
//! `sslmode`, `connect_timeout`...); a password can also come from `PGPASSWORD`, and is never
//! shown (errors name the URL without it). TLS follows libpq's `sslmode`, `sslrootcert`,
//! `sslcert` and `sslkey` ([`tls`]): `require` never falls back to a plain connection,
//! `verify-full` checks the certificate and the host name.
//!
//! The schema version lives in the table `iolab_schema` (one row: the application id and
//! the version); migrations run inside one transaction each, behind a transaction-scoped
//! advisory lock, so concurrent openers apply a step once. Every write is one short
//! transaction; readers of a run take one snapshot (`REPEATABLE READ`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use postgres::{Client, Config, GenericClient, IsolationLevel, Statement};

use crate::error::{AtPath, StoreError};
use crate::schema;
use crate::sql::{Cells, Db, Dialect, Tx, Val, Work};

pub(crate) mod tls;

/// Whether `path` is a PostgreSQL URL rather than a file.
pub fn is_url(path: &Path) -> bool {
    let s = path.as_os_str().to_string_lossy();
    s.starts_with("postgresql://") || s.starts_with("postgres://")
}

/// The scheme of `path` if it looks like a URL of something other than PostgreSQL
/// (`mysql://...`, `http://...`): refused rather than taken as a relative file path.
pub(crate) fn other_url(path: &Path) -> Option<String> {
    let s = path.as_os_str().to_string_lossy();
    let (scheme, _) = s.split_once("://")?;
    let ok = !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    (ok && !is_url(path)).then(|| scheme.to_string())
}

/// The URL as errors show it: any password replaced by `***`.
pub fn redacted(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(start) = out.find("://").map(|i| i + 3) {
        let end = out[start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@').map(|i| start + i) {
            if let Some(colon) = out[start..at].find(':').map(|i| start + i) {
                out.replace_range(colon + 1..at, "***");
            }
        }
    }
    // `?password=...` among the parameters.
    if let Some(q) = out.find('?') {
        let params: Vec<String> = out[q + 1..]
            .split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _)) if k == "password" => format!("{k}=***"),
                _ => p.to_string(),
            })
            .collect();
        out = format!("{}?{}", &out[..q], params.join("&"));
    }
    out
}

/// A result store in a PostgreSQL database.
pub(crate) struct Pg {
    conn: Mutex<PgConn>,
    /// The URL without its password: what errors name.
    path: PathBuf,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg").field("url", &self.path).finish()
    }
}

fn refused_tls(path: &Path, source: tls::TlsError) -> StoreError {
    StoreError::Tls {
        path: path.to_path_buf(),
        source,
    }
}

fn refused(path: &Path, detail: impl Into<String>) -> StoreError {
    StoreError::Refused {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

impl Pg {
    /// Connects to the database at `url`. A writer (`write`) brings its schema up to date
    /// (creating it in an empty database); a reader changes nothing, and refuses a database
    /// without iolab's tables or of an older schema, naming the commands that create or
    /// upgrade it.
    pub(crate) fn open(url: &Path, write: bool) -> Result<Pg, StoreError> {
        let text = url
            .to_str()
            .ok_or_else(|| refused(url, "the URL is not UTF-8"))?;
        let path = PathBuf::from(redacted(text));
        // sslmode and sslrootcert as libpq reads them; the rest as the `postgres` crate does.
        let (rest, tls) = tls::split(text).map_err(|e| refused_tls(&path, e))?;
        let mut config = Config::from_str(&rest).map_err(|e| {
            // "invalid connection string" alone does not say which part.
            let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
            refused(
                &path,
                format!("it is not a PostgreSQL connection URL iolab can read: {e}{why}"),
            )
        })?;
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            return Err(refused(
                &path,
                "the URL names no host (postgresql://USER@HOST/DB, or a socket directory as \
                 postgresql://USER@%2Frun%2Fpostgresql/DB)",
            ));
        }
        let (ssl_mode, connector) =
            tls::connector(&tls, config.get_hosts()).map_err(|e| refused_tls(&path, e))?;
        config.ssl_mode(ssl_mode);
        if config.get_password().is_none() {
            if let Some(pw) = std::env::var_os("PGPASSWORD") {
                config.password(pw.into_encoded_bytes());
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(30));
        }
        if config.get_application_name().is_none() {
            config.application_name("iolab");
        }
        let mut client = config.connect(connector).at(&path)?;
        let version = check_compatible(&mut client, &path)?;
        let mut statements = HashMap::new();
        if write {
            migrate(&mut client, &mut statements, &path)?;
            // Prepared against the tables as they were before the last step.
            statements.clear();
        } else {
            readable(version, &path)?;
        }
        Ok(Pg {
            conn: Mutex::new(PgConn { client, statements }),
            path,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> MutexGuard<'_, PgConn> {
        // A panic while holding the lock left no transaction open (the client's drop of a
        // transaction rolls it back): the connection is still usable.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `f` on the connection, outside any transaction (each statement commits alone).
    pub(crate) fn autocommit<T>(&self, f: impl Work<T>) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let PgConn { client, statements } = &mut *conn;
        f(&mut PgDb::new(client, statements, &self.path))
    }

    /// `f` in one transaction, committed; any error rolls back. A snapshot is a read-only
    /// `REPEATABLE READ` transaction: its reads share one snapshot.
    pub(crate) fn transaction<T>(&self, kind: Tx, f: impl Work<T>) -> Result<T, StoreError> {
        let path = &self.path;
        let mut conn = self.conn();
        let PgConn { client, statements } = &mut *conn;
        let mut tx = match kind {
            Tx::Snapshot => client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true),
            Tx::Write => client.build_transaction(),
        }
        .start()
        .at(path)?;
        let out = f(&mut PgDb::new(&mut tx, statements, path))?;
        tx.commit().at(path)?;
        Ok(out)
    }
}

/// The connection and the statements prepared on it.
struct PgConn {
    client: Client,
    /// By their text as `store.rs` writes it: each is prepared once a connection (a
    /// prepared statement lasts as long as the session, whatever became of the transaction
    /// it was prepared in).
    statements: HashMap<String, Statement>,
}

/// A PostgreSQL connection, or a transaction on one, running the store's statements.
pub(crate) struct PgDb<'a, C: GenericClient> {
    client: &'a mut C,
    statements: &'a mut HashMap<String, Statement>,
    path: &'a Path,
}

impl<'a, C: GenericClient> PgDb<'a, C> {
    fn new(
        client: &'a mut C,
        statements: &'a mut HashMap<String, Statement>,
        path: &'a Path,
    ) -> Self {
        PgDb {
            client,
            statements,
            path,
        }
    }

    fn prepared(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let stmt = self
            .client
            .prepare(&Dialect::Postgres.statement(sql))
            .at(self.path)?;
        self.statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }
}

impl<C: GenericClient> Db for PgDb<'_, C> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn path(&self) -> &Path {
        self.path
    }

    fn execute(&mut self, sql: &str, params: &[Val<'_>]) -> Result<u64, StoreError> {
        let stmt = self.prepared(sql)?;
        let params: Vec<_> = params.iter().map(Val::pg).collect();
        self.client.execute(&stmt, &params).at(self.path)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[Val<'_>],
        each: &mut dyn FnMut(&dyn Cells) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let stmt = self.prepared(sql)?;
        let params: Vec<_> = params.iter().map(Val::pg).collect();
        for row in self.client.query(&stmt, &params).at(self.path)? {
            each(&(self.path, &row))?;
        }
        Ok(())
    }

    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        self.client.batch_execute(sql).at(self.path)
    }
}

/// Refuses, without writing anything, a database holding another program's `runs` table or
/// an iolab schema newer than this build's. The schema version, if the database has one.
fn check_compatible(client: &mut Client, path: &Path) -> Result<Option<i64>, StoreError> {
    let row = client
        .query_one(
            "SELECT to_regclass('iolab_schema') IS NOT NULL, to_regclass('runs') IS NOT NULL",
            &[],
        )
        .at(path)?;
    let (ours, runs): (bool, bool) = (row.get(0), row.get(1));
    if !ours {
        if runs {
            return Err(refused(
                path,
                "the database has a table `runs` but no `iolab_schema`: it is not an iolab \
                 result store; give --db another database",
            ));
        }
        return Ok(None);
    }
    let row = client
        .query_opt("SELECT application_id, version FROM iolab_schema", &[])
        .at(path)?;
    let Some(row) = row else {
        return Ok(None);
    };
    let (app, version): (i64, i64) = (row.get(0), row.get(1));
    if app != i64::from(schema::APPLICATION_ID) {
        return Err(refused(
            path,
            "its `iolab_schema` table names another application: it is not an iolab result \
             store",
        ));
    }
    schema::check_version(version, path)?;
    Ok(Some(version))
}

/// Whether a reader can read a store of schema `version` (`None`: no iolab tables): only
/// this build's; the others are refused with what a writer would do to them.
fn readable(version: Option<i64>, path: &Path) -> Result<(), StoreError> {
    let url = path.display();
    match version {
        Some(v) if v == schema::SCHEMA_VERSION => Ok(()),
        None => Err(refused(
            path,
            format!(
                "the database holds no iolab result store yet (no `iolab_schema` table), and \
                 a reader creates nothing: a command that writes creates it (`iolab push --to \
                 {url} RUN...`, or `iolab run ... --db {url}`)"
            ),
        )),
        Some(v) => Err(refused(
            path,
            format!(
                "its schema is version {v}, older than this iolab's {}, and a reader does not \
                 upgrade it: a command that writes upgrades it (`iolab push --to {url} \
                 RUN...`, or `iolab run ... --db {url}`); older iolabs writing to it then \
                 refuse it",
                schema::SCHEMA_VERSION
            ),
        )),
    }
}

/// Applies the missing migration steps, each in its own transaction behind an advisory lock
/// (so concurrent openers apply each step once).
fn migrate(
    client: &mut Client,
    statements: &mut HashMap<String, Statement>,
    path: &Path,
) -> Result<(), StoreError> {
    loop {
        let mut tx = client.transaction().at(path)?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&i64::from(schema::APPLICATION_ID)],
        )
        .at(path)?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS iolab_schema (
                 application_id BIGINT NOT NULL,
                 version        BIGINT NOT NULL
             )",
        )
        .at(path)?;
        let version: i64 = match tx
            .query_opt("SELECT version FROM iolab_schema", &[])
            .at(path)?
        {
            Some(r) => r.try_get(0).at(path)?,
            None => {
                tx.execute(
                    "INSERT INTO iolab_schema (application_id, version) VALUES ($1, 0)",
                    &[&i64::from(schema::APPLICATION_ID)],
                )
                .at(path)?;
                0
            }
        };
        schema::check_version(version, path)?;
        if version == schema::SCHEMA_VERSION {
            return tx.commit().at(path);
        }
        schema::step(&mut PgDb::new(&mut tx, statements, path), version)?;
        tx.execute("UPDATE iolab_schema SET version = $1", &[&(version + 1)])
            .at(path)?;
        tx.commit().at(path)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_files_and_passwords_hidden() {
        assert!(is_url(Path::new("postgresql://u@h/db")));
        assert!(is_url(Path::new("postgres://u@h/db")));
        assert!(!is_url(Path::new("postgresql:/x")));
        assert!(!is_url(Path::new("results.db")));
        assert_eq!(
            other_url(Path::new("mysql://u@h/db")).as_deref(),
            Some("mysql")
        );
        assert_eq!(other_url(Path::new("postgres://u@h/db")), None);
        assert_eq!(other_url(Path::new("dir/a://b")), None);
        assert_eq!(
            redacted("postgresql://u:secret@h:5432/db"),
            "postgresql://u:***@h:5432/db"
        );
        assert_eq!(redacted("postgresql://u@h/db"), "postgresql://u@h/db");
        assert_eq!(
            redacted("--db=postgres://u:pw@h/db"),
            "--db=postgres://u:***@h/db"
        );
        let args = ["iolab", "--db", "postgresql://u:pw@h/db", "a://b:c@d"].map(String::from);
        assert_eq!(
            crate::store::stored_args(&args),
            ["iolab", "--db", "postgresql://u:***@h/db", "a://b:c@d"]
        );
        assert_eq!(
            redacted("postgresql:///db?host=/run/pg&password=secret"),
            "postgresql:///db?host=/run/pg&password=***"
        );
    }
}
