//! `iolab serve` (a module of the reports test binary): the real binary on a free port
//! over a small store of real runs (one real run and copies of it stored through the
//! store's API: labels, one holding HTML, two hosts, dates, a study), asked over HTTP —
//! tokens, escaping, filters, pages, bounds, 400s — and opened in headless Chromium
//! driven through WebDriver (`chromedriver`), a screenshot of each page at 1280 px checked.
//!
//! The HTTP client and the WebDriver calls are a few lines over `std::net` here: one
//! request per connection (`Connection: close`, read to the end), JSON bodies; the
//! WebDriver client crates (fantoccini, thirtyfour) bring an async runtime for five calls.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use iolab_store::Store;
use iolab_testkit::{skip, tool, Sandbox};
use serde_json::{json, Value};

/// The label holding HTML: it must show as text, never as markup.
const HTML_LABEL: &str = "<script>alert(1)</script><b>bold</b>";
const TOKEN: &str = "sv30-test-token-0123456789";

/// An HTTP reply.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request to `addr` (`host:port`), the reply read to the end of the
/// connection (chunked bodies decoded).
fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    // The head, then the body by its length (chromedriver keeps a connection open whatever
    // the request says), chunked, or to the end of the connection.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let split = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => panic!("no reply head: {}", String::from_utf8_lossy(&raw)),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse::<usize>().unwrap());
    loop {
        let have = raw.len() - split - 4;
        if length.is_some_and(|l| have >= l) || raw.ends_with(b"\r\n0\r\n\r\n") {
            break;
        }
        // A server may reset a connection it refused before reading it all: keep what came.
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let n =
                usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[eol + 2..eol + 2 + n]);
            rest = &rest[eol + 2 + n + 2..];
        }
        body = out;
    }
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A child process killed (and reaped) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `iolab serve --listen LISTEN ARGS...` on the sandbox's store: the process, the
/// address it printed and everything it printed before serving.
fn serve(sb: &Sandbox, listen: &str, args: &[&str]) -> (Proc, String, String) {
    let mut v = vec!["serve", "--listen", listen];
    v.extend_from_slice(args);
    let mut child = sb
        .cmd(&v)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let addr = loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("iolab serve ended before listening: {printed}");
        }
        printed.push_str(&line);
        if let Some(rest) = line.strip_prefix("open http://") {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Reached through loopback whatever the listening address.
    let port = addr.rsplit(':').next().unwrap();
    (Proc(child), format!("127.0.0.1:{port}"), printed)
}

/// The sandbox's store: one real run, copies with other labels, hosts and dates, and a
/// study of two configurations. Returns (the real run's id, the HTML-labelled runs' ids).
fn store(sb: &Sandbox) -> (i64, Vec<i64>) {
    let out = sb
        .run(&[
            "custom",
            "--rw",
            "read",
            "--bs",
            "1M",
            "--size",
            "4MiB",
            "--runs",
            "2",
            "--duration",
            "100ms",
            "--warmup",
            "0",
            "--label",
            "base",
        ])
        .ok();
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("stored as run "))
        .unwrap_or_else(|| panic!("no run id: {out}"));
    let base_id: i64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    let mut store = Store::open(&sb.db).unwrap();
    let base = store.load_run(base_id).unwrap();
    let mut n = 0;
    let mut copy = |label: Option<&str>, host: &str, day: &str, f: f64| {
        n += 1;
        let mut r = crate::derived(&base, &|_, _| f);
        r.uuid = uuid::Uuid::new_v4().to_string();
        r.label = label.map(str::to_string);
        r.env["hostname"] = json!(host);
        r.started_at = format!("{day}T10:{n:02}:00Z");
        r
    };
    let mut html_ids = Vec::new();
    for (k, f) in [1.0, 1.02, 0.98].into_iter().enumerate() {
        let r = copy(Some("base"), "nas-1", &format!("2026-01-0{}", k + 1), f);
        store.save_run(&r).unwrap();
        let r = copy(
            Some(HTML_LABEL),
            "nas-2",
            &format!("2026-02-0{}", k + 1),
            1.5 * f,
        );
        html_ids.push(store.save_run(&r).unwrap());
    }
    for (config, f) in [("stripe <i>16k</i>", 1.0), ("stripe 64k", 1.3)] {
        for k in 0..2 {
            let mut r = copy(None, "nas-1", "2026-03-01", f * [1.0, 1.01][k]);
            r.study = Some("stripes".into());
            r.config_label = Some(config.into());
            store.save_run(&r).unwrap();
        }
    }
    (base_id, html_ids)
}

/// The same browser over a PostgreSQL store: the sandbox's runs pushed into a throwaway
/// server's database, served from there, every page answered and nothing written.
#[test]
fn serve_reads_a_postgresql_store_over_http() {
    let Some(server) = iolab_testkit::require_postgres() else {
        return;
    };
    let sb = Sandbox::new();
    store(&sb);
    let url = server.database();
    sb.iolab(&["push", "--to", &url, "--all", "--quiet"]).ok();
    let mut pg = Sandbox::new();
    pg.db = std::path::PathBuf::from(&url);
    let snapshot = "select count(*), sum(id), max(finished_at) from runs";
    let before = server.psql(&url, snapshot);
    let (_p, addr, printed) = serve(&pg, "127.0.0.1:0", &[]);
    assert!(printed.contains("postgresql://"), "{printed}");
    let get = |path: &str| {
        let r = http(&addr, "GET", path, &[], "");
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        r
    };
    let runs = get("/runs");
    assert!(runs.body.contains("data-total=\"11\""), "{}", runs.body);
    let first = runs.body.split("href=\"/run/").nth(1).expect("a run link");
    let id = first.split('"').next().unwrap();
    let run = get(&format!("/run/{id}"));
    assert!(run.body.contains("base"), "{}", run.body);
    let label_q = "%3Cscript%3Ealert(1)%3C%2Fscript%3E%3Cb%3Ebold%3C%2Fb%3E";
    let cmp = get(&format!("/compare?label=base&label={label_q}"));
    assert!(cmp.body.contains("different, better"), "{}", cmp.body);
    assert!(!cmp.body.contains("<script"), "a script element");
    let study = get("/study?name=stripes");
    assert!(study.body.contains("stripe &lt;i&gt;16k&lt;/i&gt;"));
    get("/history?preset=custom");
    assert_eq!(
        server.psql(&url, snapshot),
        before,
        "the store changed while served"
    );
}

fn db_bytes(sb: &Sandbox) -> Vec<u8> {
    std::fs::read(&sb.db).unwrap()
}

#[test]
fn serve_answers_over_http_with_tokens_escaping_filters_and_bounds() {
    let sb = Sandbox::new();
    let (base_id, html_ids) = store(&sb);
    let before = db_bytes(&sb);

    // Loopback without a token: every page, the HTML label escaped everywhere.
    let (_p, addr, printed) = serve(&sb, "127.0.0.1:0", &[]);
    assert!(printed.contains("(loopback only)"), "{printed}");
    let get = |path: &str| http(&addr, "GET", path, &[], "");
    let esc_label = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;";
    let label_q = "%3Cscript%3Ealert(1)%3C%2Fscript%3E%3Cb%3Ebold%3C%2Fb%3E";
    let pages = [
        "/runs".to_string(),
        format!("/run/{}", html_ids[0]),
        format!("/compare?label=base&label={label_q}"),
        format!("/compare?run={base_id}&run={}", html_ids[0]),
        format!("/history?run={}", html_ids[0]),
        "/history?preset=custom".to_string(),
        "/studies".to_string(),
        "/study?name=stripes".to_string(),
    ];
    for p in &pages {
        let r = get(p);
        assert_eq!(r.status, 200, "{p}: {}", r.body);
        assert!(!r.body.contains("<script"), "{p}: a script element");
        assert!(!r.body.contains("<b>bold"), "{p}: the label's markup");
        let offline = r.body.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!offline.contains("http://"), "{p}: a link off the page");
        let csp = r.header("Content-Security-Policy").unwrap();
        assert!(csp.contains("default-src 'none'"), "{p}: {csp}");
        if !p.starts_with("/stud") && !p.starts_with("/history?preset") {
            assert!(r.body.contains(esc_label), "{p}: the label, escaped");
        }
    }
    // The study page ranks its configurations (the HTML report's score).
    let study = get("/study?name=stripes");
    assert!(study.body.contains("stripe &lt;i&gt;16k&lt;/i&gt;"));
    assert!(
        study.body.contains("data-chart=\"study-bars\""),
        "the ranking's chart"
    );
    // The compare names the faster side better, beyond noise (3 runs a side).
    let cmp = get(&format!("/compare?label=base&label={label_q}"));
    assert!(cmp.body.contains("different, better"), "{}", cmp.body);

    // Filters: label, host, dates, pages.
    let count = |r: &Reply| -> usize {
        let i = r.body.find("data-total=\"").map(|i| i + 12).unwrap_or(0);
        r.body[i..].split('"').next().unwrap().parse().unwrap_or(0)
    };
    assert_eq!(count(&get("/runs")), 11);
    assert_eq!(count(&get(&format!("/runs?label={label_q}"))), 3);
    assert_eq!(count(&get("/runs?host=nas-2")), 3);
    assert_eq!(
        count(&get("/runs?host=nas-1&from=2026-01-02&to=2026-01-31")),
        2
    );
    assert_eq!(count(&get("/runs?study=stripes")), 4);
    let p1 = get("/runs?per=4");
    assert!(p1.body.contains("runs 1–4 of 11") && p1.body.contains("rel=\"next\""));
    let p3 = get("/runs?per=4&page=3");
    assert!(p3.body.contains("runs 9–11 of 11") && !p3.body.contains("rel=\"next\""));
    // Newest first: the real run (started today) opens the first page.
    assert!(p1.body.contains(&format!("href=\"/run/{base_id}\"")));

    // Bad values: 400 with the message; unknown pages and runs 404.
    for (path, says) in [
        ("/runs?page=0", "'page' must be a whole number"),
        ("/runs?page=99", "past the last page"),
        ("/runs?from=2026-13-01", "'from' must be a date"),
        ("/runs?from=2026-02-01&to=2026-01-01", "is after"),
        ("/runs?colour=red", "unknown parameter"),
        ("/runs?label=%zz", "percent-encoding"),
        ("/compare?run=1", "at least two sides"),
        ("/compare?run=x&run=2", "must be run ids"),
        ("/history?limit=0", "'limit' must be"),
        ("/run/abc", "not a run id"),
    ] {
        let r = get(path);
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(
            r.body.contains(&says.replace('\'', "&#39;")),
            "{path}: {}",
            r.body
        );
    }
    assert_eq!(get("/run/999999").status, 404);
    assert_eq!(get("/nowhere").status, 404);
    // Bounds: a long URL, a huge head, a body, another method.
    assert_eq!(
        get(&format!("/runs?label={}", "a".repeat(3000))).status,
        414
    );
    let big = "x".repeat(9000);
    assert_eq!(
        http(&addr, "GET", "/runs", &[("X-Big", &big)], "").status,
        431
    );
    assert_eq!(http(&addr, "POST", "/runs", &[], "{}").status, 413);
    assert_eq!(http(&addr, "DELETE", "/run/1", &[], "").status, 405);
    // Another site's name for this address (DNS rebinding) is refused.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /runs HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");

    // A token: missing 401, wrong 403, right (URL, then its cookie; or a bearer) 200.
    let (_t, taddr, printed) = serve(&sb, "127.0.0.1:0", &["--token", TOKEN]);
    assert!(printed.contains(&format!("?token={TOKEN}")), "{printed}");
    let tget = |path: &str, h: &[(&str, &str)]| http(&taddr, "GET", path, h, "");
    assert_eq!(tget("/runs", &[]).status, 401);
    assert_eq!(
        tget("/runs?token=sv30-test-token-WRONG-6789", &[]).status,
        403
    );
    assert_eq!(
        tget("/runs", &[("Authorization", "Bearer nope-nope-nope-nope")]).status,
        403
    );
    let ok = tget(&format!("/runs?token={TOKEN}"), &[]);
    assert_eq!(ok.status, 200);
    let cookie = ok
        .header("Set-Cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(tget("/studies", &[("Cookie", &cookie)]).status, 200);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(tget("/studies", &[("Authorization", &bearer)]).status, 200);
    assert_eq!(
        tget("/studies", &[("Cookie", "iolab_token=wrong")]).status,
        403
    );
    // A bad token is refused before listening.
    sb.iolab(&["serve", "--listen", "127.0.0.1:0", "--token", "short"])
        .code(2)
        .stderr_has(&["--token must be 16 to 256"]);

    // Beyond loopback without --token: a generated one, required (asked over loopback).
    let (_g, gaddr, printed) = serve(&sb, "0.0.0.0:0", &[]);
    let token = printed
        .lines()
        .find_map(|l| l.strip_prefix("token (generated"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no generated token: {printed}"))
        .to_string();
    assert!(token.len() >= 32, "{token}");
    assert_eq!(http(&gaddr, "GET", "/runs", &[], "").status, 401);
    let with = format!("/runs?token={token}");
    assert_eq!(http(&gaddr, "GET", &with, &[], "").status, 200);

    // Nothing was written to the store.
    assert!(db_bytes(&sb) == before, "the database changed while served");
}

// --- in a browser, through WebDriver ----------------------------------------------------

/// A WebDriver session on a chromedriver of our own.
struct Driver {
    addr: String,
    session: String,
    _proc: Proc,
    _profile: tempfile::TempDir,
}

impl Driver {
    fn start(chromedriver: &Path, chromium: &Path) -> Driver {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let proc = Proc(
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(&addr).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000",
                     "--disable-background-networking", "--disable-component-update",
                     "--no-first-run", "--disable-extensions",
                     format!("--user-data-dir={}", profile.path().display())]
        }}}});
        let r = http(&addr, "POST", "/session", &[], &caps.to_string());
        let v: Value = serde_json::from_str(&r.body).unwrap();
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {}", r.body))
            .to_string();
        Driver {
            addr,
            session,
            _proc: proc,
            _profile: profile,
        }
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let body = if method == "POST" {
            body.to_string()
        } else {
            String::new()
        };
        let r = http(
            &self.addr,
            method,
            &format!("/session/{}{path}", self.session),
            &[],
            &body,
        );
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(r.status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn open(&self, url: &str) {
        self.call("POST", "/url", json!({ "url": url }));
    }

    fn title(&self) -> String {
        self.call("GET", "/title", Value::Null)
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The visible text of every element matching `css`.
    fn texts(&self, css: &str) -> Vec<String> {
        let els = self.call(
            "POST",
            "/elements",
            json!({"using": "css selector", "value": css}),
        );
        els.as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let id = e
                    .as_object()
                    .unwrap()
                    .values()
                    .next()
                    .unwrap()
                    .as_str()
                    .unwrap();
                self.call("GET", &format!("/element/{id}/text"), Value::Null)
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    /// A screenshot of the window, checked: a PNG 1280 px wide (at least 600 tall) that is
    /// not blank (3% of its rows drawn at least). Kept in target/test-artifacts/.
    fn screenshot(&self, name: &str) {
        let (h, drawn) = self.shot(name);
        assert!(
            drawn * 100 >= h * 3,
            "{name}: blank ({drawn} of {h} rows drawn)"
        );
    }

    /// A screenshot checked for its format and width: its height and how many of its rows
    /// have something drawn.
    fn shot(&self, name: &str) -> (usize, usize) {
        let b64 = self.call("GET", "/screenshot", Value::Null);
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap())
            .unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .unwrap()
            .join("test-artifacts");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("serve-{name}.png")), &png).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}: not a PNG");
        let be = |i: usize| u32::from_be_bytes(png[i..i + 4].try_into().unwrap());
        let (w, h) = (be(16), be(20));
        assert_eq!(w, 1280, "{name}: {w}x{h}");
        assert!(h >= 600, "{name}: {w}x{h}");
        // Not blank: rows that are not one colour. PNG filters a uniform row to zeros (but
        // for its first pixel), so a row with more than 8 bytes set has something drawn.
        let bpp = match png[25] {
            6 => 4,
            2 => 3,
            t => panic!("{name}: PNG colour type {t}"),
        };
        let mut idat = Vec::new();
        let mut i = 8;
        while i + 8 <= png.len() {
            let len = be(i) as usize;
            if &png[i + 4..i + 8] == b"IDAT" {
                idat.extend_from_slice(&png[i + 8..i + 8 + len]);
            }
            i += 12 + len;
        }
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&idat[..])
            .read_to_end(&mut raw)
            .unwrap();
        let stride = 1 + w as usize * bpp;
        assert_eq!(raw.len(), stride * h as usize, "{name}: image data");
        let drawn = raw
            .chunks(stride)
            .filter(|row| row[1..].iter().filter(|&&b| b != 0).count() > 8)
            .count();
        (h as usize, drawn)
    }
}

#[test]
fn serve_pages_in_chromium_through_webdriver() {
    let (Some(driver), Some(chromium)) = (
        tool("chromedriver"),
        tool("chromium").or_else(|| tool("chromium-browser")),
    ) else {
        skip!("chromedriver or chromium is not installed (test.sh installs chromium-driver)");
    };
    let sb = Sandbox::new();
    let (_, html_ids) = store(&sb);
    let (_p, addr, _) = serve(&sb, "127.0.0.1:0", &["--token", TOKEN]);
    let d = Driver::start(&driver, &chromium);
    // The blank check itself: an empty page has next to no row drawn.
    d.open("about:blank");
    let (h, drawn) = d.shot("blank");
    assert!(drawn * 100 < h, "a blank page: {drawn} of {h} rows drawn");

    // A wrong token: the refusal page, no runs.
    d.open(&format!(
        "http://{addr}/runs?token=sv30-test-token-WRONG-6789"
    ));
    assert!(d.title().starts_with("Wrong token"), "{}", d.title());
    assert!(d.texts("table[data-table=runs]").is_empty());
    d.screenshot("wrong-token");

    // The right token once; the cookie carries it to every other page.
    d.open(&format!("http://{addr}/runs?token={TOKEN}"));
    assert!(d.title().starts_with("Runs"), "{}", d.title());
    let labels = d.texts("table[data-table=runs] td:nth-child(7)");
    assert!(
        labels.iter().any(|l| l == HTML_LABEL),
        "the HTML label shown as its text: {labels:?}"
    );
    assert!(
        d.texts("main script, main b").is_empty(),
        "the label's markup made elements"
    );
    d.screenshot("runs");
    let label_q = "%3Cscript%3Ealert(1)%3C%2Fscript%3E%3Cb%3Ebold%3C%2Fb%3E";
    for (name, path, title) in [
        ("run", format!("/run/{}", html_ids[0]), "iolab: "),
        (
            "compare",
            format!("/compare?label=base&label={label_q}"),
            "Compare",
        ),
        (
            "history",
            format!("/history?run={}", html_ids[0]),
            "History",
        ),
        ("studies", "/studies".to_string(), "Studies"),
        (
            "study",
            "/study?name=stripes".to_string(),
            "iolab study: stripes",
        ),
    ] {
        d.open(&format!("http://{addr}{path}"));
        assert!(d.title().starts_with(title), "{name}: {}", d.title());
        assert!(d.texts("main script").is_empty(), "{name}");
        d.screenshot(name);
    }
    // The compare's sides name the HTML label as text.
    d.open(&format!("http://{addr}/compare?label=base&label={label_q}"));
    let sides = d.texts("table[data-table=sides] td:nth-child(2)");
    assert!(sides.iter().any(|s| s.contains(HTML_LABEL)), "{sides:?}");
}
