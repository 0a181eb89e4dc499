//! `iolab serve`: a read-only results browser over the result store — runs (filtered by
//! host, label, preset, study and date, in pages), a run (the HTML report), compare (runs
//! or labels, with the verdicts), the history of a command with its chart, and studies
//! with their ranking — served over HTTP with a token where it listens beyond loopback.
//!
//! Nothing here writes: every page reads through `Store`'s public read methods on a
//! handle the caller opens read-only (`Store::open_read_only`), one per worker thread.
//! Every page is self-contained HTML (inline CSS and SVG charts, no script, no CDN), and
//! every response carries a Content-Security-Policy that forbids loading or running
//! anything.
//!
//! HTTP: requests are parsed by `httparse` (the HTTP/1.x parser hyper uses), and the
//! connection loop around it is this crate's own few lines on `std::net`. That is the
//! choice over `tiny_http` (which reads request lines and headers with no bound on their
//! length and no read timeout, so one client could grow its memory without end before any
//! token is checked) and over hyper-based servers (an async runtime for a page server
//! that answers one request per connection): here a request head is at most
//! [`http::MAX_HEAD`] bytes read within [`http::IO_TIMEOUT`], a URL at most
//! [`http::MAX_URL`], requests with a body are refused, and a fixed pool of [`WORKERS`]
//! threads answers, with a bounded queue in front (503 past it).

pub mod auth;
pub mod http;
pub mod layout;
pub mod pages;
pub mod query;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use iolab_store::Store;

use crate::http::{HeadError, Response};

/// Threads answering requests, each with its own store handle.
pub const WORKERS: usize = 4;
/// Connections waiting for a worker before new ones get 503.
pub const QUEUE: usize = 64;

/// Opens a read-only handle on the store (called once per worker); Err is the message.
pub type Opener = dyn Fn() -> Result<Store, iolab_store::StoreError> + Send + Sync;

/// Whether `addr` is a loopback address (where no token is needed).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Serves on `listener` until the process ends: `token` (when set) is required of every
/// request; without one, only loopback `Host` names are answered. Returns only on an
/// accept error that is not a single connection's.
pub fn serve(listener: TcpListener, token: Option<String>, open: Arc<Opener>) -> std::io::Error {
    let listen = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
    let (tx, rx) = sync_channel::<TcpStream>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    let token: Arc<Option<String>> = Arc::new(token);
    for _ in 0..WORKERS {
        let (rx, open, token) = (Arc::clone(&rx), Arc::clone(&open), Arc::clone(&token));
        std::thread::spawn(move || worker(&rx, &*open, token.as_deref(), listen));
    }
    loop {
        match listener.accept() {
            Ok((conn, _)) => {
                if let Err(TrySendError::Full(mut conn)) = tx.try_send(conn) {
                    http::write_response(
                        &mut conn,
                        &Response::text(503, "busy: too many requests waiting; try again"),
                        false,
                    );
                }
            }
            // A connection that went away before it was accepted, or a short lack of
            // descriptors: the next accept goes on.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) if e.raw_os_error() == Some(24) || e.raw_os_error() == Some(23) => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => return e,
        }
    }
}

fn worker(rx: &Mutex<Receiver<TcpStream>>, open: &Opener, token: Option<&str>, listen: SocketAddr) {
    let store = open();
    loop {
        let conn = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(mut conn) = conn else { return };
        let start = Instant::now();
        let req = match http::read_request(&mut conn) {
            Ok(r) => r,
            Err(HeadError::Gone) => continue,
            Err(HeadError::Refuse(resp)) => {
                http::write_response(&mut conn, &resp, false);
                continue;
            }
        };
        let head_only = req.method == "HEAD";
        let resp = answer(&req, &store, token, listen);
        eprintln!(
            "{} {} {} {} ms",
            req.method,
            req.path().chars().take(200).collect::<String>(),
            resp.status,
            start.elapsed().as_millis()
        );
        http::write_response(&mut conn, &resp, head_only);
    }
}

/// The response to one request: method, token (or loopback host), then the page.
fn answer(
    req: &http::Request,
    store: &Result<Store, iolab_store::StoreError>,
    token: Option<&str>,
    listen: SocketAddr,
) -> Response {
    if req.method != "GET" && req.method != "HEAD" {
        return Response::text(405, "read-only: only GET and HEAD are served")
            .with_header("Allow", "GET, HEAD");
    }
    let set_cookie = match token {
        Some(t) => match auth::check(req, t) {
            Ok(from_url) => from_url.then(|| auth::cookie(t)),
            Err(resp) => return resp,
        },
        None => match auth::check_host(req, listen) {
            Ok(()) => None,
            Err(resp) => return resp,
        },
    };
    let store = match store {
        Ok(s) => s,
        Err(e) => {
            return Response::html(
                500,
                layout::message_page(
                    "The store could not be opened",
                    &iolab_report::html::esc(&e.to_string()),
                ),
            )
        }
    };
    let resp = catch_unwind(AssertUnwindSafe(|| pages::route(store, req))).unwrap_or_else(|_| {
        Response::text(
            500,
            "internal error drawing this page (see the server's log)",
        )
    });
    match set_cookie {
        Some(c) => resp.with_header("Set-Cookie", c),
        None => resp,
    }
}
