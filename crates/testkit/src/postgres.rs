//! A throwaway PostgreSQL server for the tests of the PostgreSQL store: `initdb` and
//! `pg_ctl` (Debian's `postgresql` package) in a temporary directory, run as an unprivileged
//! user (uid 65534 through `setpriv` when the tests run as root), listening on a unix
//! socket in that directory only (no TCP port), trusting local connections.
//!
//! [`PgServer::shared`] starts one server per test binary on first use; each test takes its
//! own database from it ([`PgServer::database`]), so tests running at once never see each
//! other's runs. The server is stopped and its directory removed when the test binary
//! exits (a watcher process waits for it), or on drop for one from [`PgServer::start`].
//!
//! [`PgServer::start_tcp`] starts one that also listens on 127.0.0.1 (a free port), with
//! `ssl=on` and a self-signed certificate for `localhost` and `127.0.0.1` made by the
//! `openssl` command, or with `ssl=off`: PostgreSQL has TLS on TCP only.
//! [`PgServer::start_tcp_client_certs`] starts one that also demands a client certificate
//! on TCP (`hostssl ... clientcert=verify-full` in `pg_hba.conf`), signed by a CA of its own
//! ([`PgServer::client_cert`] makes one).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::sys::{is_root, CmdError};

/// Why a PostgreSQL server for the tests could not be had: the command or I/O error kept
/// as the source.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// Said in words (a program not installed, a server of the wrong kind).
    #[error("{0}")]
    Said(&'static str),
    #[error(transparent)]
    Command(#[from] CmdError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Os(std::io::Error),
    /// `pg_ctl start` failed: its error, then the server's log.
    #[error("{source}\n{log}")]
    Start {
        #[source]
        source: Box<PgError>,
        log: String,
    },
}

/// An I/O error while doing `what` (`chmod PATH`).
fn io(what: String) -> impl FnOnce(std::io::Error) -> PgError {
    move |source| PgError::Io { what, source }
}

/// The unprivileged user the server runs as when the tests run as root.
const PG_UID: u32 = 65534;

/// A running PostgreSQL server of a test.
#[derive(Debug)]
pub struct PgServer {
    /// The temporary directory: the socket, `data/` and `log`.
    dir: PathBuf,
    bin: PathBuf,
    next: AtomicUsize,
    /// Whether dropping this server stops it (not the shared one: its watcher does).
    owned: bool,
    /// The TCP port on 127.0.0.1 (`start_tcp`'s servers).
    port: Option<u16>,
    /// The self-signed certificate of a server with `ssl=on`.
    cert: Option<PathBuf>,
    /// The certificate and key of the CA that signs client certificates, for a server that
    /// demands them.
    client_ca: Option<(PathBuf, PathBuf)>,
}

/// How a server listens besides its unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listen {
    SocketOnly,
    /// 127.0.0.1 on a free port, with `ssl=on` or not.
    Tcp {
        ssl: bool,
        /// `hostssl` only, with a client certificate checked (`clientcert=verify-full`).
        client_certs: bool,
    },
}

/// The directory of PostgreSQL's server programs: Debian's newest
/// `/usr/lib/postgresql/N/bin`, else `initdb` on PATH.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, b)| b)
        .or_else(|| crate::tool("initdb").and_then(|p| Some(p.parent()?.to_path_buf())))
}

/// `prog args`, as the server's user; Err with its output when it fails.
fn run_as_server(prog: &Path, args: &[&str]) -> Result<(), PgError> {
    let mut cmd = if is_root() {
        let setpriv = crate::tool("setpriv").ok_or_else(|| CmdError::Missing("setpriv".into()))?;
        let mut c = Command::new(setpriv);
        c.args([
            format!("--reuid={PG_UID}"),
            format!("--regid={PG_UID}"),
            "--clear-groups".to_string(),
        ])
        .arg(prog);
        c
    } else {
        Command::new(prog)
    };
    let out = cmd
        .args(args)
        .current_dir("/")
        .stdin(Stdio::null())
        .output()
        .map_err(|source| CmdError::Spawn {
            name: prog.display().to_string(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(CmdError::Failed {
            command: format!("{} {}", prog.display(), args.join(" ")),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
        .into())
    }
}

impl PgServer {
    /// The server of this test binary, started on first use; `None` (with the reason) where
    /// PostgreSQL is not installed or does not start.
    pub fn shared() -> Result<&'static PgServer, &'static PgError> {
        static SHARED: OnceLock<Result<PgServer, PgError>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let mut s = PgServer::start()?;
                s.owned = false;
                s.watch()?;
                Ok(s)
            })
            .as_ref()
    }

    /// Starts a new server, stopped and removed on drop.
    pub fn start() -> Result<PgServer, PgError> {
        Self::start_with(Listen::SocketOnly)
    }

    /// Starts a new server that also listens on 127.0.0.1 ([`PgServer::port`]): with `ssl`,
    /// `ssl=on` and a self-signed certificate ([`PgServer::cert`]) whose names are
    /// `localhost` and `127.0.0.1`; without, `ssl=off`. Stopped and removed on drop.
    pub fn start_tcp(ssl: bool) -> Result<PgServer, PgError> {
        Self::start_tcp_with(Listen::Tcp {
            ssl,
            client_certs: false,
        })
    }

    /// [`PgServer::start_tcp`] with `ssl=on`, whose TCP connections must present a client
    /// certificate for their user signed by the server's client CA (`ssl_ca_file`;
    /// `hostssl all all 127.0.0.1/32 trust clientcert=verify-full`): see
    /// [`PgServer::client_cert`]. The unix socket still trusts everyone.
    pub fn start_tcp_client_certs() -> Result<PgServer, PgError> {
        Self::start_tcp_with(Listen::Tcp {
            ssl: true,
            client_certs: true,
        })
    }

    fn start_tcp_with(listen: Listen) -> Result<PgServer, PgError> {
        if crate::tool("openssl").is_none()
            && listen
                != (Listen::Tcp {
                    ssl: false,
                    client_certs: false,
                })
        {
            return Err(PgError::Said(
                "the openssl command is not installed (Debian: openssl)",
            ));
        }
        // A port free now may be taken before the server binds it: try a few.
        let mut tries = 1;
        loop {
            match Self::start_with(listen) {
                Ok(s) => return Ok(s),
                Err(e) if tries == 3 => return Err(e),
                Err(_) => tries += 1,
            }
        }
    }

    /// A client certificate for the database user `user`, signed by the client CA of a
    /// server from [`PgServer::start_tcp_client_certs`], and its key (PKCS#8 PEM, 0600),
    /// made in `dir` as `NAME.crt` and `NAME.key`.
    pub fn client_cert(
        &self,
        dir: &Path,
        name: &str,
        user: &str,
    ) -> Result<(PathBuf, PathBuf), PgError> {
        let (ca_cert, ca_key) = self
            .client_ca
            .as_ref()
            .ok_or(PgError::Said("not a server from start_tcp_client_certs"))?;
        let (cert, key, csr) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
            dir.join(format!("{name}.csr")),
        );
        openssl(&format!(
            "req {NEW_KEY} -subj /CN={user} -keyout {} -out {}",
            path(&key),
            path(&csr)
        ))?;
        openssl(&format!(
            "x509 -req -days 2 -in {} -CA {} -CAkey {} -set_serial 2 -out {}",
            path(&csr),
            path(ca_cert),
            path(ca_key),
            path(&cert)
        ))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("chmod {}", key.display())))?;
        Ok((cert, key))
    }

    fn start_with(listen: Listen) -> Result<PgServer, PgError> {
        let bin = bin_dir().ok_or(PgError::Said(
            "PostgreSQL's server programs (initdb, pg_ctl) are not installed (Debian: postgresql)",
        ))?;
        let dir = tempfile::Builder::new()
            .prefix("iolab-pg-")
            .tempdir_in("/tmp")
            .map_err(io("temporary directory".into()))?
            .keep();
        let mut server = PgServer {
            dir,
            bin,
            next: AtomicUsize::new(0),
            owned: true,
            port: None,
            cert: None,
            client_ca: None,
        };
        if is_root() {
            let c = std::ffi::CString::new(server.dir.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: `c` is a valid NUL-terminated path.
            if unsafe { libc::chown(c.as_ptr(), PG_UID, PG_UID) } != 0 {
                return Err(PgError::Io {
                    what: format!("chown {}", server.dir.display()),
                    source: std::io::Error::last_os_error(),
                });
            }
        }
        let data = server.dir.join("data");
        let (data_s, dir_s) = (data.to_str().unwrap(), server.dir.to_str().unwrap());
        run_as_server(
            &server.bin.join("initdb"),
            &[
                "-D",
                data_s,
                "-U",
                "iolab",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-N",
            ],
        )?;
        let mut opts = format!(
            "-k {dir_s} -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=60"
        );
        match listen {
            Listen::SocketOnly => opts.push_str(" -c listen_addresses=''"),
            Listen::Tcp { ssl, client_certs } => {
                let port = free_port()?;
                opts.push_str(&format!(
                    " -c listen_addresses=127.0.0.1 -p {port} -c log_connections=on"
                ));
                server.port = Some(port);
                if ssl {
                    let (cert, key) = server.make_certificate()?;
                    opts.push_str(&format!(
                        " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                        cert.display(),
                        key.display()
                    ));
                    server.cert = Some(cert);
                    if client_certs {
                        let ca = server.make_client_ca()?;
                        opts.push_str(&format!(" -c ssl_ca_file={}", ca.display()));
                        // Over TCP, TLS with a certificate for the user or nothing.
                        let hba = data.join("pg_hba.conf");
                        std::fs::write(
                            &hba,
                            "local all all trust\n\
                             hostssl all all 127.0.0.1/32 trust clientcert=verify-full\n",
                        )
                        .map_err(io(hba.display().to_string()))?;
                        if is_root() {
                            std::os::unix::fs::chown(&hba, Some(PG_UID), Some(PG_UID))
                                .map_err(io(format!("chown {}", hba.display())))?;
                        }
                    }
                } else {
                    opts.push_str(" -c ssl=off");
                }
            }
        }
        let log = server.dir.join("log");
        run_as_server(
            &server.bin.join("pg_ctl"),
            &[
                "-D",
                data_s,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-o",
                &opts,
                "start",
            ],
        )
        .map_err(|e| PgError::Start {
            source: Box::new(e),
            log: std::fs::read_to_string(&log).unwrap_or_default(),
        })?;
        Ok(server)
    }

    /// A watcher that stops the server and removes its directory once this process exits
    /// (a static is never dropped).
    fn watch(&self) -> Result<(), PgError> {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop}; rm -rf -- '{dir}'",
            pid = std::process::id(),
            stop = self.stop_command(),
            dir = self.dir.display()
        );
        Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(drop)
            .map_err(io("setsid".into()))
    }

    fn stop_command(&self) -> String {
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.dir.join("data");
        let prefix = if is_root() {
            format!("setpriv --reuid={PG_UID} --regid={PG_UID} --clear-groups ")
        } else {
            String::new()
        };
        format!(
            "{prefix}'{}' -D '{}' -m immediate stop >/dev/null 2>&1",
            pg_ctl.display(),
            data.display()
        )
    }

    /// A self-signed certificate for `localhost` and `127.0.0.1` and its key (0600, the
    /// server's user's: PostgreSQL refuses a key others may read), in the server's directory.
    fn make_certificate(&self) -> Result<(PathBuf, PathBuf), PgError> {
        let (cert, key) = (self.dir.join("server.crt"), self.dir.join("server.key"));
        openssl(&format!(
            "req -x509 {NEW_KEY} -days 2 -subj /CN=localhost \
             -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout {} -out {}",
            path(&key),
            path(&cert)
        ))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
            .map_err(io(format!("chmod {}", key.display())))?;
        if is_root() {
            for f in [&cert, &key] {
                std::os::unix::fs::chown(f, Some(PG_UID), Some(PG_UID))
                    .map_err(io(format!("chown {}", f.display())))?;
            }
        }
        Ok((cert, key))
    }

    /// The CA that signs the client certificates (`client_ca.crt`, readable by the server)
    /// and its key, in the server's directory: the CA's certificate.
    fn make_client_ca(&mut self) -> Result<PathBuf, PgError> {
        let (cert, key) = (
            self.dir.join("client_ca.crt"),
            self.dir.join("client_ca.key"),
        );
        openssl(&format!(
            "req -x509 {NEW_KEY} -days 2 -subj /CN=iolab-test-client-CA -keyout {} -out {}",
            path(&key),
            path(&cert)
        ))?;
        if is_root() {
            std::os::unix::fs::chown(&cert, Some(PG_UID), Some(PG_UID))
                .map_err(io(format!("chown {}", cert.display())))?;
        }
        self.client_ca = Some((cert.clone(), key));
        Ok(cert)
    }

    /// The server's log so far (a server from `start_tcp` logs each connection, with its
    /// TLS protocol where it has one).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// The TCP port on 127.0.0.1 of a server from [`PgServer::start_tcp`].
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The self-signed certificate of a server from `start_tcp(true)` (PEM): what
    /// `sslrootcert` names to verify it.
    pub fn cert(&self) -> Option<&Path> {
        self.cert.as_deref()
    }

    /// The URL of database `name` over TCP, as `host` (`127.0.0.1` or `localhost`), with
    /// the URL parameters `params` (`sslmode=require`, or empty).
    pub fn tcp_url(&self, host: &str, name: &str, params: &str) -> String {
        let port = self.port.expect("a server from start_tcp");
        let q = if params.is_empty() { "" } else { "?" };
        format!("postgresql://iolab@{host}:{port}/{name}{q}{params}")
    }

    /// The directory of the server's unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// The URL of database `name` on this server.
    pub fn url(&self, name: &str) -> String {
        let host: String = self
            .dir
            .to_str()
            .unwrap()
            .chars()
            .map(|c| {
                if c == '/' {
                    "%2F".to_string()
                } else {
                    c.to_string()
                }
            })
            .collect();
        // The socket's name carries the port (`.s.PGSQL.PORT`).
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        format!("postgresql://iolab@{host}{port}/{name}")
    }

    /// A new, empty database of its own, as a URL for `--db`.
    pub fn database(&self) -> String {
        let name = format!("t{}", self.next.fetch_add(1, Ordering::Relaxed));
        let port = self.port.unwrap_or(5432).to_string();
        let out = Command::new(self.bin.join("createdb"))
            .args([
                "-h",
                self.dir.to_str().unwrap(),
                "-p",
                &port,
                "-U",
                "iolab",
                &name,
            ])
            .output()
            .expect("createdb");
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }

    /// What `psql` prints for the SQL `sql` run on the database at `url` (one of this
    /// server's [`PgServer::database`] URLs): unaligned, without headers, trimmed. Panics
    /// with psql's error when the SQL fails.
    pub fn psql(&self, url: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                url,
                "-c",
                sql,
            ])
            .stdin(Stdio::null())
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(self.stop_command())
                .status();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The `openssl req` options of a new P-256 key, unencrypted.
const NEW_KEY: &str = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

/// A test path as an argument (test directories are UTF-8).
fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `openssl ARGS`; Err with its output when it fails.
fn openssl(args: &str) -> Result<(), PgError> {
    let args: Vec<&str> = args.split_whitespace().collect();
    let openssl = crate::tool("openssl").ok_or_else(|| CmdError::Missing("openssl".into()))?;
    let out = Command::new(openssl)
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| CmdError::Spawn {
            name: "openssl".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(CmdError::Failed {
            command: format!("openssl {}", args.first().unwrap_or(&"")),
            output: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
        .into());
    }
    Ok(())
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
fn free_port() -> Result<u16, PgError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("bind".into()))?;
    Ok(l.local_addr().map_err(PgError::Os)?.port())
}

/// The shared server of this test binary, or a skip (the reason printed and counted) and
/// `None` where PostgreSQL is not available.
pub fn require_postgres() -> Option<&'static PgServer> {
    match PgServer::shared() {
        Ok(s) => Some(s),
        Err(e) => {
            crate::skip(format!("no PostgreSQL server for the test: {e}"));
            None
        }
    }
}
