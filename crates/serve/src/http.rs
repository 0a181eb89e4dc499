//! One HTTP/1.1 exchange on a connection: the request head read with a bound on its size
//! and time, parsed by `httparse`, and one response written with its length; the
//! connection is then closed (no keep-alive: a page is one request, and a worker is never
//! held by an idle client).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The most a request head (request line and headers) may take, in bytes.
pub const MAX_HEAD: usize = 8 * 1024;
/// The longest request target (path and query) accepted.
pub const MAX_URL: usize = 2048;
/// The most headers a request may have.
pub const MAX_HEADERS: usize = 48;
/// How long a client has to send its whole request head, and each write may wait.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A parsed request: what the pages need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The request target as sent: `/runs?label=x`.
    pub target: String,
    /// Header names lower-cased, values as sent (non-UTF-8 values are dropped).
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The first header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without its query.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    /// The query string (after `?`), empty without one.
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
}

/// A response: status, extra headers and an HTML or text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn html(status: u16, body: String) -> Response {
        Response {
            status,
            content_type: "text/html; charset=utf-8",
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    pub fn text(status: u16, body: impl Into<String>) -> Response {
        let mut body: String = body.into();
        if !body.ends_with('\n') {
            body.push('\n');
        }
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

/// Why a request head was not read: the response to send, if any.
#[derive(Debug)]
pub enum HeadError {
    /// The connection closed or timed out before a whole head: nothing to answer.
    Gone,
    /// A head the server refuses (too large, malformed): answer this and close.
    Refuse(Response),
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Reads and parses one request head from `conn`, at most [`MAX_HEAD`] bytes within
/// [`IO_TIMEOUT`] in all. A request with a body is refused (every page is a GET).
pub fn read_request(conn: &mut TcpStream) -> Result<Request, HeadError> {
    let deadline = Instant::now() + IO_TIMEOUT;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Refuse(Response::text(
                408,
                "the request head did not arrive in time",
            )));
        }
        if conn.set_read_timeout(Some(left)).is_err() {
            return Err(HeadError::Gone);
        }
        let n = match conn.read(&mut buf[len..]) {
            Ok(0) => return Err(HeadError::Gone),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Refuse(Response::text(
                    408,
                    "the request head did not arrive in time",
                )))
            }
            Err(_) => return Err(HeadError::Gone),
        };
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => return request_of(&req),
            Ok(httparse::Status::Partial) if len == MAX_HEAD => {
                return Err(HeadError::Refuse(Response::text(
                    431,
                    format!("the request head is over {MAX_HEAD} bytes"),
                )))
            }
            Ok(httparse::Status::Partial) => continue,
            Err(httparse::Error::TooManyHeaders) => {
                return Err(HeadError::Refuse(Response::text(
                    431,
                    format!("more than {MAX_HEADERS} request headers"),
                )))
            }
            Err(e) => {
                return Err(HeadError::Refuse(Response::text(
                    400,
                    format!("malformed request: {e}"),
                )))
            }
        }
    }
}

fn request_of(req: &httparse::Request<'_, '_>) -> Result<Request, HeadError> {
    let method = req.method.unwrap_or("").to_string();
    let target = req.path.unwrap_or("").to_string();
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .filter_map(|h| {
            let v = std::str::from_utf8(h.value).ok()?;
            Some((h.name.to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect();
    let body = headers
        .iter()
        .any(|(n, v)| (n == "content-length" && v != "0") || n == "transfer-encoding");
    if body {
        return Err(HeadError::Refuse(Response::text(
            413,
            "requests carry no body here: every page is a GET",
        )));
    }
    if target.len() > MAX_URL {
        return Err(HeadError::Refuse(Response::text(
            414,
            format!("the URL is over {MAX_URL} bytes"),
        )));
    }
    if !target.starts_with('/') {
        return Err(HeadError::Refuse(Response::text(
            400,
            "the request target must be a path (/runs)",
        )));
    }
    Ok(Request {
        method,
        target,
        headers,
    })
}

/// The headers every response carries: no caching of results, no framing, no referrer
/// (a URL may hold the token), and a policy that lets a page load nothing and run nothing.
const COMMON: &str = "Cache-Control: no-store\r\n\
     Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'\r\n\
     X-Content-Type-Options: nosniff\r\n\
     X-Frame-Options: DENY\r\n\
     Referrer-Policy: no-referrer\r\n\
     Connection: close\r\n";

/// Writes `resp` (its headers only for `HEAD`) and closes the writing side.
pub fn write_response(conn: &mut TcpStream, resp: &Response, head_only: bool) {
    let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{COMMON}",
        resp.status,
        reason(resp.status),
        resp.content_type,
        resp.body.len()
    );
    for (n, v) in &resp.headers {
        // Values are the server's own (a location, a cookie): never a line break.
        let v: String = v.chars().filter(|c| !c.is_control()).collect();
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if !head_only {
        out.extend_from_slice(&resp.body);
    }
    let _ = conn.write_all(&out);
    let _ = conn.flush();
    let _ = conn.shutdown(std::net::Shutdown::Write);
    // A lingering close: what the client still sends (the rest of a refused head) is read
    // and dropped, a bounded amount for a bounded time, so that closing with unread bytes
    // does not reset the connection before the client has read the answer.
    let _ = conn.set_read_timeout(Some(LINGER));
    let mut sink = [0u8; 4096];
    let mut left: usize = 64 * 1024;
    while left > 0 {
        match conn.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// How long a closing connection waits for the client to finish sending.
const LINGER: Duration = Duration::from_secs(1);
