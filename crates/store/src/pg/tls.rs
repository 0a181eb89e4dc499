//! TLS for the PostgreSQL store, with libpq's `sslmode` semantics.
//!
//! The `postgres` crate reads only `sslmode=disable|prefer|require` and knows no
//! `sslrootcert`, `sslcert` or `sslkey`, so these are taken out of the URL here ([`split`]) and the rest is handed to
//! it. The modes, as libpq has them:
//!
//! - `disable`: plain TCP.
//! - `prefer` (the default): TLS if the server offers it, else plain; the certificate is not
//!   checked. An `sslrootcert` with `prefer` or `disable` is refused: it would be ignored
//!   (libpq would check the chain but fall back to plain when it fails).
//! - `require`: TLS or no connection; the certificate is not checked, unless `sslrootcert`
//!   is given, which makes it `verify-ca` (as libpq does).
//! - `verify-ca`: TLS, the server's certificate chain checked against `sslrootcert=FILE`
//!   (PEM, one or more certificates), or the system's roots without it (or with
//!   `sslrootcert=system`).
//! - `verify-full`: `verify-ca`, and the certificate must name the host of the URL.
//!
//! `allow` (plain first, TLS only if the server insists) is refused: the client crate cannot
//! fall back that way round, and a mode silently read as another is what iolab never does.
//!
//! A client certificate (`sslcert=FILE&sslkey=FILE`, both or neither) is sent when the
//! server asks for one: the key checked as libpq checks it (a regular file only its owner
//! may read) and taken as unencrypted PKCS#8 PEM ([`client_identity`]).
//!
//! The connector is `postgres-native-tls` over `native-tls`: the `postgres` crate's own
//! companion for TLS, on the platform's TLS library (OpenSSL on Linux, so the system's roots
//! and its fixes come with the distribution), with the two switches the modes need (accept
//! any certificate; accept any host name) and PEM root certificates.

use std::path::{Path, PathBuf};

use native_tls::{Certificate, Identity, TlsConnector};
use postgres::config::{Host, SslMode};
use postgres_native_tls::MakeTlsConnector;

/// The largest `sslrootcert` file read (a system bundle of all roots is about 200 KiB).
const ROOTCERT_LIMIT: u64 = 4 << 20;

/// An `sslmode` of libpq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    Disable,
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// Where the root certificates of `verify-ca`/`verify-full` come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Roots {
    System,
    File(PathBuf),
}

/// The TLS parameters of a URL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Tls {
    pub(crate) mode: Mode,
    /// `sslrootcert`, when given.
    pub(crate) roots: Option<Roots>,
    /// `sslcert`: the client's certificate (PEM), sent when the server asks for one.
    pub(crate) cert: Option<PathBuf>,
    /// `sslkey`: its private key (PKCS#8 PEM, unencrypted, readable by its owner only).
    pub(crate) key: Option<PathBuf>,
}

/// `%XX` escapes of a URL parameter decoded (the `postgres` crate decodes the others).
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Why the URL's TLS parameters cannot be used (the store refuses the URL: exit 2).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A parameter, or a pair of them, that cannot be used as given.
    #[error("{0}")]
    Param(String),
    /// A file a parameter names could not be read (`sslrootcert=FILE: ...`).
    #[error("{name}: {source}")]
    Read {
        name: String,
        #[source]
        source: iolab_sys::input::InputError,
    },
    /// A file a parameter names could not be looked at.
    #[error("{name}: {source}")]
    Io {
        name: String,
        #[source]
        source: std::io::Error,
    },
    /// `native-tls` refused a certificate, a key or the connector.
    #[error("{context}: {source}")]
    Native {
        context: String,
        #[source]
        source: native_tls::Error,
    },
}

fn bad_param(message: impl Into<String>) -> TlsError {
    TlsError::Param(message.into())
}

/// Takes `sslmode` and `sslrootcert` out of `url`: the URL for the `postgres` crate and the
/// TLS parameters, or what is wrong with them (naming the parameter).
pub(crate) fn split(url: &str) -> Result<(String, Tls), TlsError> {
    let mut tls = Tls::default();
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), tls));
    };
    let mut rest = Vec::new();
    for param in query.split('&') {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        let decoded = || {
            percent_decode(value).ok_or_else(|| {
                bad_param(format!("{key}={value}: not a valid percent-encoded value"))
            })
        };
        match key {
            "sslmode" => {
                let v = decoded()?;
                tls.mode = Mode::parse(&v).ok_or_else(|| {
                    let why = if v == "allow" {
                        "iolab cannot connect in the clear first and fall back to TLS"
                    } else {
                        "not an sslmode"
                    };
                    bad_param(format!(
                        "sslmode={v}: {why} (disable, prefer, require, verify-ca or verify-full)"
                    ))
                })?;
            }
            "sslrootcert" => {
                let v = decoded()?;
                if v.is_empty() {
                    return Err(bad_param("sslrootcert= names no file"));
                }
                tls.roots = Some(if v == "system" {
                    Roots::System
                } else {
                    Roots::File(PathBuf::from(v))
                });
            }
            "sslcert" | "sslkey" => {
                let v = decoded()?;
                if v.is_empty() {
                    return Err(bad_param(format!("{key}= names no file")));
                }
                let slot = match key {
                    "sslcert" => &mut tls.cert,
                    _ => &mut tls.key,
                };
                *slot = Some(PathBuf::from(v));
            }
            "sslpassword" => {
                return Err(bad_param(
                    "sslpassword: iolab reads unencrypted client keys only; decrypt the key \
                     into a file only you may read (`openssl pkcs8 -topk8 -nocrypt -in KEY \
                     -out KEY.plain`, then chmod 600) and name that with sslkey=",
                ))
            }
            _ => rest.push(param),
        }
    }
    match (&tls.cert, &tls.key) {
        (Some(_), None) => {
            return Err(bad_param(
                "sslcert without sslkey: name the certificate's private key too (sslkey=FILE)",
            ))
        }
        (None, Some(_)) => {
            return Err(bad_param(
                "sslkey without sslcert: name the client certificate too (sslcert=FILE)",
            ))
        }
        _ => {}
    }
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, tls))
}

/// The `postgres` crate's mode for `tls`, the connector that does what the mode says, or
/// why not (exit 2: an argument to change).
pub(crate) fn connector(
    tls: &Tls,
    hosts: &[Host],
) -> Result<(SslMode, MakeTlsConnector), TlsError> {
    if tls.roots.is_some() && matches!(tls.mode, Mode::Disable | Mode::Prefer) {
        return Err(bad_param(format!(
            "sslrootcert with sslmode={}: this mode checks no certificate; give \
             sslmode=verify-full (or verify-ca) for the certificate to be checked",
            tls.mode.name()
        )));
    }
    if tls.cert.is_some() && tls.mode == Mode::Disable {
        return Err(bad_param(
            "sslcert with sslmode=disable: without TLS no client certificate is sent; drop \
             sslmode=disable (or give sslmode=verify-full)",
        ));
    }
    let mode = match tls.mode {
        // libpq: `require` with a root certificate checks the chain.
        Mode::Require if tls.roots.is_some() => Mode::VerifyCa,
        m => m,
    };
    if mode != Mode::Disable && mode != Mode::Prefer {
        if let Some(Host::Unix(dir)) = hosts.iter().find(|h| matches!(h, Host::Unix(_))) {
            return Err(bad_param(format!(
                "sslmode={}: PostgreSQL has no TLS on a unix socket ({}); connect over TCP \
                 (host=NAME) for TLS, or drop sslmode (a unix socket does not leave this machine)",
                tls.mode.name(),
                dir.display()
            )));
        }
    }
    let mut builder = TlsConnector::builder();
    match mode {
        Mode::Disable | Mode::Prefer | Mode::Require => {
            builder
                .danger_accept_invalid_certs(true)
                .danger_accept_invalid_hostnames(true);
        }
        Mode::VerifyCa | Mode::VerifyFull => {
            if let Some(Roots::File(file)) = &tls.roots {
                builder.disable_built_in_roots(true);
                for cert in root_certificates(file)? {
                    builder.add_root_certificate(cert);
                }
            }
            builder.danger_accept_invalid_hostnames(mode == Mode::VerifyCa);
        }
    }
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        builder.identity(client_identity(cert, key)?);
    }
    let connector = builder.build().map_err(|source| TlsError::Native {
        context: format!("sslmode={}: TLS cannot be set up", tls.mode.name()),
        source,
    })?;
    let ssl_mode = match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
    };
    Ok((ssl_mode, MakeTlsConnector::new(connector)))
}

/// The PEM certificates of an `sslrootcert` file (read bounded, a regular file only).
fn root_certificates(file: &Path) -> Result<Vec<Certificate>, TlsError> {
    let name = format!("sslrootcert={}", file.display());
    let pem =
        iolab_sys::input::read_input(file, ROOTCERT_LIMIT).map_err(|source| TlsError::Read {
            name: name.clone(),
            source,
        })?;
    let certs = Certificate::stack_from_pem(&pem).map_err(|source| TlsError::Native {
        context: format!("{name}: not PEM certificates"),
        source,
    })?;
    if certs.is_empty() {
        return Err(bad_param(format!("{name}: holds no PEM certificate")));
    }
    Ok(certs)
}

/// The largest `sslcert` or `sslkey` file read (a certificate chain is a few KiB).
const CLIENT_FILE_LIMIT: u64 = 1 << 20;

/// The client's certificate and key as `native-tls` takes them. The key is checked as libpq
/// checks it: a regular file (read bounded) that its owner alone may read (0600 or less),
/// or, owned by root, root and its group (0640 or less); an encrypted key or one not in
/// PKCS#8 PEM is refused with the command that converts it.
fn client_identity(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    use std::os::unix::fs::MetadataExt;
    let cert_name = format!("sslcert={}", cert.display());
    let key_name = format!("sslkey={}", key.display());
    let read = |name: &str| {
        let name = name.to_string();
        move |source| TlsError::Read { name, source }
    };
    let cert_pem =
        iolab_sys::input::read_input(cert, CLIENT_FILE_LIMIT).map_err(read(&cert_name))?;
    let (file, _) =
        iolab_sys::input::open_input(key, CLIENT_FILE_LIMIT).map_err(read(&key_name))?;
    let meta = file.metadata().map_err(|source| TlsError::Io {
        name: key_name.clone(),
        source,
    })?;
    let mode = meta.mode() & 0o777;
    let euid = rustix::process::geteuid().as_raw();
    let too_open = if meta.uid() == 0 && euid != 0 {
        mode & 0o037 != 0
    } else {
        mode & 0o077 != 0
    };
    if too_open {
        return Err(bad_param(format!(
            "{key_name}: the private key may be read or written by others (mode {mode:04o}); \
             it must be 0600 or less (0640 or less if root owns it): chmod 600 {}",
            key.display()
        )));
    }
    let key_pem =
        iolab_sys::input::read_bounded(file, CLIENT_FILE_LIMIT).map_err(read(&key_name))?;
    let text = String::from_utf8_lossy(&key_pem);
    if text.contains("ENCRYPTED") {
        return Err(bad_param(format!(
            "{key_name}: the private key is encrypted, and iolab reads unencrypted keys only: \
             `openssl pkcs8 -topk8 -nocrypt -in {} -out KEY.plain`, chmod 600, and name that",
            key.display()
        )));
    }
    if !text.trim_start().starts_with("-----BEGIN PRIVATE KEY-----") {
        return Err(bad_param(format!(
            "{key_name}: not a PKCS#8 PEM private key (-----BEGIN PRIVATE KEY-----): convert \
             it with `openssl pkcs8 -topk8 -nocrypt -in {} -out KEY.pk8`",
            key.display()
        )));
    }
    Identity::from_pkcs8(&cert_pem, &key_pem).map_err(|source| TlsError::Native {
        context: format!("{cert_name} with {key_name}: not a PEM certificate and its key"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_takes_out_the_tls_parameters_only() {
        let (url, tls) =
            split("postgresql://u@h/db?connect_timeout=5&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&application_name=x")
                .unwrap();
        assert_eq!(
            url,
            "postgresql://u@h/db?connect_timeout=5&application_name=x"
        );
        assert_eq!(tls.mode, Mode::VerifyFull);
        assert_eq!(tls.roots, Some(Roots::File("/tmp/ca.pem".into())));
        let (url, tls) = split("postgresql://u@h/db").unwrap();
        assert_eq!(
            (url.as_str(), tls.mode, tls.roots),
            ("postgresql://u@h/db", Mode::Prefer, None)
        );
        let (url, tls) = split("postgresql://u@h/db?sslmode=disable&sslrootcert=system").unwrap();
        assert_eq!(
            (url.as_str(), tls.mode),
            ("postgresql://u@h/db", Mode::Disable)
        );
        assert_eq!(tls.roots, Some(Roots::System));
    }

    #[test]
    fn client_certificates_and_keys_are_taken_out_and_checked() {
        let (url, tls) =
            split("postgresql://u@h/db?sslcert=%2Ftmp%2Fc.crt&sslkey=/tmp/c.key&port=5").unwrap();
        assert_eq!(url, "postgresql://u@h/db?port=5");
        assert_eq!(tls.cert, Some("/tmp/c.crt".into()));
        assert_eq!(tls.key, Some("/tmp/c.key".into()));
        for (url, want) in [
            ("postgresql://h/d?sslcert=/c", "sslcert without sslkey"),
            ("postgresql://h/d?sslkey=/k", "sslkey without sslcert"),
            ("postgresql://h/d?sslkey=", "sslkey= names no file"),
            (
                "postgresql://h/d?sslpassword=x",
                "sslpassword: iolab reads unencrypted",
            ),
        ] {
            let e = split(url).unwrap_err().to_string();
            assert!(e.starts_with(want), "{url}: {e}");
        }
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("c.crt"), dir.path().join("c.key"));
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\n").unwrap();
        let tls = Tls {
            mode: Mode::Require,
            cert: Some(cert.clone()),
            key: Some(key.clone()),
            ..Tls::default()
        };
        let tcp = [Host::Tcp("localhost".into())];
        let check = |text: &str, mode: u32| {
            std::fs::write(&key, text).unwrap();
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
            connector(&tls, &tcp).err().unwrap().to_string()
        };
        let name = format!("sslkey={}: ", key.display());
        let e = check("-----BEGIN PRIVATE KEY-----\n", 0o640);
        assert!(e.starts_with(&name) && e.contains("mode 0640"), "{e}");
        let e = check("-----BEGIN ENCRYPTED PRIVATE KEY-----\n", 0o600);
        assert!(e.starts_with(&name) && e.contains("encrypted"), "{e}");
        let e = check("-----BEGIN RSA PRIVATE KEY-----\n", 0o600);
        assert!(e.starts_with(&name) && e.contains("not a PKCS#8"), "{e}");
        let e = check("-----BEGIN PRIVATE KEY-----\n", 0o600);
        assert!(e.contains("not a PEM certificate and its key"), "{e}");
        let e = connector(
            &Tls {
                mode: Mode::Disable,
                ..tls.clone()
            },
            &tcp,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.starts_with("sslcert with sslmode=disable"), "{e}");
    }

    #[test]
    fn bad_tls_parameters_are_named() {
        for (url, want) in [
            (
                "postgresql://h/d?sslmode=verify",
                "sslmode=verify: not an sslmode",
            ),
            (
                "postgresql://h/d?sslmode=allow",
                "sslmode=allow: iolab cannot",
            ),
            (
                "postgresql://h/d?sslrootcert=",
                "sslrootcert= names no file",
            ),
            ("postgresql://h/d?sslmode=%zz", "sslmode=%zz: not a valid"),
        ] {
            let e = split(url).unwrap_err().to_string();
            assert!(e.starts_with(want), "{url}: {e}");
        }
    }

    #[test]
    fn unreadable_root_certificates_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let tcp = [Host::Tcp("localhost".into())];
        let tls = |f: &Path| Tls {
            mode: Mode::VerifyFull,
            roots: Some(Roots::File(f.to_path_buf())),
            ..Tls::default()
        };
        let missing = dir.path().join("missing.pem");
        let e = connector(&tls(&missing), &tcp).err().unwrap().to_string();
        assert!(
            e.starts_with(&format!("sslrootcert={}: ", missing.display())),
            "{e}"
        );
        let e = connector(&tls(dir.path()), &tcp).err().unwrap().to_string();
        assert!(e.contains("a directory"), "{e}");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let e = connector(&tls(&junk), &tcp).err().unwrap().to_string();
        assert!(
            e.starts_with(&format!("sslrootcert={}: ", junk.display())),
            "{e}"
        );
        // A unix socket has no TLS.
        let unix = [Host::Unix("/run/postgresql".into())];
        let t = Tls {
            mode: Mode::Require,
            ..Tls::default()
        };
        let e = connector(&t, &unix).err().unwrap().to_string();
        assert!(e.contains("no TLS on a unix socket"), "{e}");
        assert!(connector(&Tls::default(), &unix).is_ok());
        // A root certificate where nothing checks it.
        let t = Tls {
            roots: Some(Roots::System),
            ..Tls::default()
        };
        let e = connector(&t, &tcp).err().unwrap().to_string();
        assert!(e.starts_with("sslrootcert with sslmode=prefer"), "{e}");
    }
}
