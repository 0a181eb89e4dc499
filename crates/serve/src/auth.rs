//! Who may read: the token every request must carry when one is set (always when the
//! server listens beyond loopback), compared in constant time, and the `Host` check that
//! keeps another web site from reading a loopback server through DNS rebinding.

use std::net::SocketAddr;

use crate::http::{Request, Response};
use crate::query;

/// The cookie a browser keeps the token in once it has opened a `?token=` link.
pub const COOKIE: &str = "iolab_token";

/// Whether `a` equals `b`, in a time that depends only on their lengths (the token's
/// length is not a secret; its bytes are).
pub fn equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A new token: 244 random bits from the operating system (two version-4 UUIDs), as hex.
pub fn generate() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// A `--token` that may not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("--token must be 16 to 256 characters (it is {0})")]
    Length(usize),
    #[error("--token may not contain {0:?}: use letters, digits and -._~")]
    Character(char),
}

/// Whether a token may be used: printable ASCII without spaces, quotes, `;` or `,` (it
/// goes in a cookie and a URL), 16 to 256 characters.
pub fn check_token(t: &str) -> Result<(), TokenError> {
    if t.len() < 16 || t.len() > 256 {
        return Err(TokenError::Length(t.len()));
    }
    if let Some(c) = t
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '"' | ';' | ',' | '\\' | '%' | '&' | '+'))
    {
        return Err(TokenError::Character(c));
    }
    Ok(())
}

/// The token a request carries: a `token=` query parameter (a link just opened), else
/// `Authorization: Bearer T`, else the `iolab_token` cookie.
fn presented(req: &Request) -> Option<String> {
    if let Some(t) = query::raw_values(req.query(), "token").into_iter().next() {
        return Some(t);
    }
    if let Some(v) = req.header("authorization") {
        if let Some(t) = v.strip_prefix("Bearer ") {
            return Some(t.trim().to_string());
        }
    }
    req.header("cookie")?.split(';').find_map(|part| {
        let (k, v) = part.trim().split_once('=')?;
        (k == COOKIE).then(|| v.to_string())
    })
}

/// Ok (with whether the token came in the URL, so the response sets the cookie), or the
/// refusal: 401 without a token, 403 with a wrong one.
pub fn check(req: &Request, token: &str) -> Result<bool, Response> {
    let from_url = !query::raw_values(req.query(), "token").is_empty();
    match presented(req) {
        None => Err(Response::html(
            401,
            crate::layout::message_page(
                "Token needed",
                "This iolab serve needs its token: open the link it printed (…?token=…), \
                 or send <code>Authorization: Bearer TOKEN</code>.",
            ),
        )
        .with_header("WWW-Authenticate", "Bearer realm=\"iolab\"")),
        Some(t) if equal(t.as_bytes(), token.as_bytes()) => Ok(from_url),
        Some(_) => Err(Response::html(
            403,
            crate::layout::message_page(
                "Wrong token",
                "The token this request carries is not this server's.",
            ),
        )),
    }
}

/// The `Set-Cookie` value that keeps `token` for the pages' links.
pub fn cookie(token: &str) -> String {
    format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict")
}

/// Without a token only loopback names may reach the server: `Host` must be `localhost`,
/// a loopback address or the address it listens on (with any port), so a page of another
/// site whose name was pointed at 127.0.0.1 cannot read it.
pub fn check_host(req: &Request, listen: SocketAddr) -> Result<(), Response> {
    let Some(host) = req.header("host") else {
        return Err(Response::text(400, "the request has no Host header"));
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    let loopback = name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == listen.ip());
    if loopback {
        Ok(())
    } else {
        Err(Response::text(
            403,
            format!(
                "Host '{}' is not this server's: without --token it answers only to \
                 localhost and loopback addresses",
                host.chars().filter(|c| !c.is_control()).collect::<String>()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(target: &str, headers: &[(&str, &str)]) -> Request {
        Request {
            method: "GET".into(),
            target: target.into(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn equal_compares_whole_strings() {
        assert!(equal(b"abcdef", b"abcdef"));
        assert!(!equal(b"abcdef", b"abcdeg"));
        assert!(!equal(b"abcdef", b"abcde"));
        assert!(!equal(b"", b"a"));
    }

    #[test]
    fn tokens_from_header_cookie_or_url() {
        let t = "0123456789abcdef";
        assert_eq!(check(&req("/runs", &[]), t).unwrap_err().status, 401);
        let wrong = req("/runs?token=0123456789abcdeX", &[]);
        assert_eq!(check(&wrong, t).unwrap_err().status, 403);
        assert_eq!(
            check(&req("/runs?token=0123456789abcdef", &[]), t),
            Ok(true)
        );
        let bearer = req("/runs", &[("authorization", "Bearer 0123456789abcdef")]);
        assert_eq!(check(&bearer, t), Ok(false));
        let stale = req(
            "/runs?token=0123456789abcdef",
            &[("cookie", "iolab_token=old")],
        );
        assert_eq!(
            check(&stale, t),
            Ok(true),
            "a link just opened wins over a stale cookie"
        );
        let cookie = req("/runs", &[("cookie", "a=b; iolab_token=0123456789abcdef")]);
        assert_eq!(check(&cookie, t), Ok(false));
        let bad_cookie = req("/runs", &[("cookie", "iolab_token=nope")]);
        assert_eq!(check(&bad_cookie, t).unwrap_err().status, 403);
    }

    #[test]
    fn generated_tokens_are_valid_and_differ() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        check_token(&a).unwrap();
        assert!(check_token("short").is_err());
        assert!(check_token("0123456789abcdef;x").is_err());
    }

    #[test]
    fn without_a_token_only_loopback_hosts() {
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        for ok in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "LOCALHOST",
        ] {
            check_host(&req("/", &[("host", ok)]), listen).unwrap();
        }
        for bad in ["evil.example:8080", "10.0.0.1:8080"] {
            assert_eq!(
                check_host(&req("/", &[("host", bad)]), listen)
                    .unwrap_err()
                    .status,
                403
            );
        }
        assert_eq!(check_host(&req("/", &[]), listen).unwrap_err().status, 400);
    }
}
