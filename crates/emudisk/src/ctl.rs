//! The control socket (`DIR/ctl.sock`): one request line, one answer line (`ok [JSON]` or
//! `err MESSAGE`). Requests:
//!
//! | line | does |
//! |---|---|
//! | `stats` | answers the [`crate::Stats`] JSON (and rewrites `stats.json`) |
//! | `fault OP sectors START-END [prob P]` / `fault OP prob P` | adds an EIO rule; OP is read, write, flush or any; 512-byte sectors, END exclusive |
//! | `clear-faults` | removes every rule |
//! | `ignore-flush on\|off` | the device lies about flushes, or stops lying |
//! | `power-loss [tear]` | drops the volatile cache; answers the [`crate::PowerLoss`] JSON; every request fails until `power-on` |
//! | `power-on` | power back |
//! | `stop` | unmounts and exits (as SIGTERM does) |

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::device::Device;
use crate::error::EmudiskError;
use crate::spec::{parse_sectors, Fault, FaultOp};

/// Sends one request and returns the answer after `ok ` (an `err` answer is an error).
pub fn request(sock: &Path, line: &str) -> Result<String, EmudiskError> {
    let at = |e| EmudiskError::file(sock.display().to_string(), e);
    let mut s = UnixStream::connect(sock).map_err(at)?;
    s.set_read_timeout(Some(Duration::from_secs(60))).ok();
    writeln!(s, "{line}").map_err(at)?;
    let mut answer = String::new();
    BufReader::new(s).read_line(&mut answer).map_err(at)?;
    let answer = answer.trim_end();
    if let Some(rest) = answer.strip_prefix("ok") {
        Ok(rest.trim_start().to_string())
    } else if let Some(msg) = answer.strip_prefix("err ") {
        Err(EmudiskError::Refused(msg.to_string()))
    } else {
        Err(EmudiskError::NoAnswer {
            sock: sock.to_path_buf(),
            answer: answer.to_string(),
        })
    }
}

/// What the server does after answering.
pub enum After {
    Continue,
    Stop,
}

/// Answers one request line.
pub fn handle(dev: &Device, line: &str) -> (String, After) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let ok = |s: String| {
        (
            if s.is_empty() {
                "ok".into()
            } else {
                format!("ok {s}")
            },
            After::Continue,
        )
    };
    let err = |s: String| (format!("err {s}"), After::Continue);
    match words.as_slice() {
        ["stats"] => ok(serde_json::to_string(&dev.stats()).unwrap_or_default()),
        ["power-loss"] | ["power-loss", "tear"] => {
            let pl = dev.power_loss(words.len() == 2);
            ok(serde_json::to_string(&pl).unwrap_or_default())
        }
        ["power-on"] => {
            dev.power_on();
            ok(String::new())
        }
        ["ignore-flush", v @ ("on" | "off")] => {
            dev.set_ignore_flush(*v == "on");
            ok(String::new())
        }
        ["reset-served"] => {
            dev.reset_served();
            ok(String::new())
        }
        ["clear-faults"] => {
            dev.clear_faults();
            ok(String::new())
        }
        ["fault", op, rest @ ..] => match parse_fault(op, rest) {
            Ok(f) => {
                dev.add_fault(f);
                ok(String::new())
            }
            Err(e) => err(e.to_string()),
        },
        ["stop"] => ("ok".into(), After::Stop),
        _ => err(format!(
            "unknown request {line:?}: stats, reset-served, fault, clear-faults, ignore-flush, \
             power-loss, power-on, stop"
        )),
    }
}

fn parse_fault(op: &str, rest: &[&str]) -> Result<Fault, EmudiskError> {
    let bad = |m: String| EmudiskError::Refused(m);
    let op =
        FaultOp::parse(op).ok_or_else(|| bad(format!("op {op:?}: read, write, flush or any")))?;
    let mut range = None;
    let mut probability = None;
    let mut it = rest.iter();
    while let Some(k) = it.next() {
        let v = it
            .next()
            .ok_or_else(|| bad(format!("{k}: missing value")))?;
        match *k {
            "sectors" => {
                range =
                    Some(parse_sectors(v).ok_or_else(|| bad(format!("sectors {v:?}: START-END")))?)
            }
            "prob" => {
                let p: f64 = v
                    .parse()
                    .map_err(|_| bad(format!("prob {v:?}: a number")))?;
                if !(p > 0.0 && p <= 1.0) {
                    return Err(bad(format!("prob {p}: above 0, at most 1")));
                }
                probability = Some(p);
            }
            other => return Err(bad(format!("{other}: sectors or prob"))),
        }
    }
    if range.is_none() && probability.is_none() {
        return Err(bad("give sectors START-END, prob P or both".into()));
    }
    Ok(Fault {
        op,
        range,
        probability,
    })
}
