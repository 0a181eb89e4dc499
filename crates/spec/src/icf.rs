//! Iometer configuration files (`.icf`, `iolab run iometer --icf FILE`): the test setup
//! (run time, ramp, cycling), the access specifications (`size,% of size,% reads,% random,
//! delay,burst,align,reply` lines) and the manager list (workers, their outstanding I/Os,
//! assigned specifications and targets), read into iolab tests. Every refusal is an
//! [`IcfError`] naming `FILE:LINE: FIELD`.

use std::fmt;
use std::time::Duration;

use crate::job::{AccessLine, JobSpec, Pace, Rw, TestSpec};

/// The most bytes an `.icf` file may have.
pub const MAX_ICF_BYTES: u64 = 1 << 20;

/// The most access specifications, lines of one, workers and cycling steps a file may give
/// (Iometer's own limits are lower or of the same order).
const MAX_SPECS: usize = 1000;
const MAX_LINES: usize = 100;
const MAX_WORKERS: u32 = 64;
const MAX_DEPTH: u32 = 256;
const MAX_STEPS: usize = 64;

/// A refusal of an `.icf` file: `FILE:LINE: FIELD: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcfError {
    pub file: String,
    pub line: usize,
    pub field: String,
    pub message: String,
}

impl fmt::Display for IcfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.field, self.message
        )
    }
}

impl std::error::Error for IcfError {}

/// One access specification as the file names it.
#[derive(Debug, Clone, PartialEq)]
pub struct IcfSpec {
    pub name: String,
    /// The line of its name.
    pub line: usize,
    pub lines: Vec<AccessLine>,
    /// Iometer's delay (ms) between bursts of `burst` I/Os, as fio's thinktime.
    pub pace: Pace,
}

/// Iometer's cycling, as a sweep of tests per access specification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cycle {
    None,
    /// Outstanding I/Os per worker, one test each.
    QueueDepth(Vec<u32>),
    /// Workers, one test each.
    Workers(Vec<u32>),
}

/// What an `.icf` file asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Icf {
    /// The test setup's run time (None: absent, or 0 = until stopped).
    pub run_time: Option<Duration>,
    pub ramp: Option<Duration>,
    /// The specifications to run, in order: those assigned to the workers, or every one
    /// of the file when it has no manager list.
    pub specs: Vec<IcfSpec>,
    /// Disk workers (jobs).
    pub workers: u32,
    /// Outstanding I/Os per worker.
    pub iodepth: u32,
    /// The workers' `Disk maximum size` in bytes (None: 0, the whole target).
    pub max_size: Option<u64>,
    pub cycle: Cycle,
    /// The targets the file names (replaced by `--target`).
    pub targets: Vec<String>,
    /// What was mapped or not applied, for the run's notes.
    pub notes: Vec<String>,
}

struct Reader<'a> {
    file: &'a str,
    lines: Vec<&'a str>,
    at: usize,
}

fn is_comment(l: &str) -> bool {
    l.starts_with('\'')
}

/// A column header under a key: `'` followed by white space (`'\thours  minutes`).
fn is_header(l: &str) -> bool {
    l.strip_prefix('\'')
        .is_some_and(|r| r.starts_with([' ', '\t']))
}

impl<'a> Reader<'a> {
    fn err(&self, line: usize, field: &str, message: impl Into<String>) -> IcfError {
        IcfError {
            file: self.file.to_string(),
            line,
            // A bare "'" names no field: name the comment mark itself.
            field: if field.is_empty() { "'" } else { field }.to_string(),
            message: message.into(),
        }
    }

    /// The next line that is not blank, with its number (1-based).
    fn next_key(&mut self) -> Option<(usize, &'a str)> {
        while self.at < self.lines.len() {
            let l = self.lines[self.at];
            self.at += 1;
            if !l.is_empty() {
                return Some((self.at, l));
            }
        }
        None
    }

    fn peek(&self) -> Option<&'a str> {
        self.lines.get(self.at).copied()
    }

    /// The value under key `key` (given at `line`): column headers skipped, then the next
    /// line, which must not be a comment.
    fn value(&mut self, line: usize, key: &str) -> Result<(usize, &'a str), IcfError> {
        while self.peek().is_some_and(is_header) {
            self.at += 1;
        }
        match self.peek() {
            Some(v) if !is_comment(v) => {
                self.at += 1;
                Ok((self.at, v))
            }
            _ => Err(self.err(line, key, "expected a value on the next line")),
        }
    }
}

fn field_name(key: &str) -> &str {
    key.trim_start_matches('\'').trim()
}

/// `key` names this Iometer field (case-insensitive, as Iometer compares).
fn is(key: &str, name: &str) -> bool {
    field_name(key).eq_ignore_ascii_case(name)
}

fn starts(key: &str, name: &str) -> bool {
    let k = field_name(key);
    k.len() >= name.len()
        && k.is_char_boundary(name.len())
        && k[..name.len()].eq_ignore_ascii_case(name)
}

/// Whitespace- or comma-separated fields of a value line.
fn fields(v: &str) -> Vec<&str> {
    v.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect()
}

fn int(r: &Reader, line: usize, field: &str, s: &str, max: u64) -> Result<u64, IcfError> {
    let n: u64 = s
        .parse()
        .map_err(|_| r.err(line, field, format!("'{s}': expected a whole number")))?;
    if n > max {
        return Err(r.err(line, field, format!("{n} is above {max}")));
    }
    Ok(n)
}

/// Steps of a cycle from `start` by `step` (added, or multiplied when exponential) up to
/// `end`, at most MAX_STEPS.
fn steps(
    r: &Reader,
    line: usize,
    field: &str,
    start: u32,
    end: u32,
    step: u32,
    exponential: bool,
) -> Result<Vec<u32>, IcfError> {
    if start == 0 || start > end {
        return Err(r.err(
            line,
            field,
            format!("a cycle from {start} to {end}: start at least 1 and at most the end"),
        ));
    }
    if step == 0 || (exponential && step < 2) {
        return Err(r.err(
            line,
            field,
            format!(
                "step {step}: {} never reaches the end",
                if exponential {
                    "an exponential step below 2"
                } else {
                    "a step of 0"
                }
            ),
        ));
    }
    let mut out = vec![start];
    let mut v = start as u64;
    loop {
        v = if exponential {
            v * step as u64
        } else {
            v + step as u64
        };
        if v > end as u64 {
            break;
        }
        if out.len() == MAX_STEPS {
            return Err(r.err(
                line,
                field,
                format!("more than {MAX_STEPS} steps; a sweep that long is not run"),
            ));
        }
        out.push(v as u32);
    }
    Ok(out)
}

fn exponential(r: &Reader, line: usize, field: &str, s: &str) -> Result<bool, IcfError> {
    match s.to_ascii_uppercase().as_str() {
        "LINEAR" => Ok(false),
        "EXPONENTIAL" => Ok(true),
        _ => Err(r.err(
            line,
            field,
            format!("step type '{s}': expected LINEAR or EXPONENTIAL"),
        )),
    }
}

#[derive(Default)]
struct Setup {
    run_time: Option<Duration>,
    ramp: Option<Duration>,
    default_workers: Option<u32>,
    /// (line, start, step, exponential)
    worker_cycle: Option<(usize, u32, u32, bool)>,
    /// (line, start, end, step, exponential)
    queue_cycle: Option<(usize, u32, u32, u32, bool)>,
    /// (line, test type)
    test_type: Option<(usize, u32)>,
}

const TEST_TYPES: &[&str] = &[
    "NORMAL",
    "CYCLE_TARGETS",
    "CYCLE_WORKERS",
    "INCREMENT_TARGETS_PARALLEL",
    "INCREMENT_TARGETS_SERIAL",
    "CYCLE_WORKERS_AND_TARGETS",
    "CYCLE_OUTSTANDING_IOS",
    "CYCLE_OUTSTANDING_IOS_AND_TARGETS",
];

fn test_setup(r: &mut Reader, s: &mut Setup, notes: &mut Vec<String>) -> Result<(), IcfError> {
    loop {
        let Some((line, key)) = r.next_key() else {
            return Err(r.err(r.lines.len().max(1), "TEST SETUP", "no 'END test setup"));
        };
        if !is_comment(key) {
            return Err(r.err(line, "TEST SETUP", format!("'{key}': expected a field")));
        }
        if is(key, "END test setup") {
            return Ok(());
        }
        let name = field_name(key);
        if is(key, "Test Description") {
            let (_, v) = r.value(line, name)?;
            if !v.is_empty() {
                notes.push(format!("Iometer test description: {v}"));
            }
        } else if is(key, "Run Time") {
            let (vl, v) = r.value(line, name)?;
            let f = fields(v);
            if f.len() != 3 {
                return Err(r.err(vl, name, "expected hours, minutes and seconds"));
            }
            let h = int(r, vl, name, f[0], 10_000)?;
            let m = int(r, vl, name, f[1], 100_000)?;
            let sec = int(r, vl, name, f[2], 10_000_000)?;
            let total = h * 3600 + m * 60 + sec;
            s.run_time = (total > 0).then(|| Duration::from_secs(total));
            if total == 0 {
                notes.push(
                    "the file's run time is 0 (Iometer: until stopped); each test ran for \
                     --duration"
                        .into(),
                );
            }
        } else if starts(key, "Ramp Up Time") {
            let (vl, v) = r.value(line, name)?;
            s.ramp = Some(Duration::from_secs(int(r, vl, name, v, 100_000)?));
        } else if is(key, "Default Disk Workers to Spawn") {
            let (vl, v) = r.value(line, name)?;
            s.default_workers = Some(if v.eq_ignore_ascii_case("NUMBER_OF_CPUS") {
                std::thread::available_parallelism()
                    .map_or(1, |n| (n.get() as u32).min(MAX_WORKERS))
            } else {
                int(r, vl, name, v, MAX_WORKERS as u64)? as u32
            });
        } else if is(key, "Default Network Workers to Spawn") || is(key, "Record Results") {
            // Network workers talk to another manager; the record switch shapes
            // Iometer's CSV only.
            r.value(line, name)?;
        } else if is(key, "Worker Cycling") {
            let (vl, v) = r.value(line, name)?;
            let f = fields(v);
            if f.len() != 3 {
                return Err(r.err(vl, name, "expected start, step and step type"));
            }
            s.worker_cycle = Some((
                vl,
                int(r, vl, name, f[0], MAX_WORKERS as u64)? as u32,
                int(r, vl, name, f[1], MAX_WORKERS as u64)? as u32,
                exponential(r, vl, name, f[2])?,
            ));
        } else if is(key, "Disk Cycling") || is(key, "Target Cycling") {
            // One target (--target): cycling targets is one step.
            r.value(line, name)?;
        } else if is(key, "Queue Depth Cycling") {
            let (vl, v) = r.value(line, name)?;
            let f = fields(v);
            if f.len() != 4 {
                return Err(r.err(vl, name, "expected start, end, step and step type"));
            }
            let d = MAX_DEPTH as u64;
            s.queue_cycle = Some((
                vl,
                int(r, vl, name, f[0], d)? as u32,
                int(r, vl, name, f[1], d)? as u32,
                int(r, vl, name, f[2], d)? as u32,
                exponential(r, vl, name, f[3])?,
            ));
        } else if is(key, "Test Type") {
            let (vl, v) = r.value(line, name)?;
            let t = match TEST_TYPES
                .iter()
                .position(|t| t.eq_ignore_ascii_case(v.trim()))
            {
                Some(i) => i as u32,
                None => match v.trim().parse::<u32>() {
                    Ok(n) if (n as usize) < TEST_TYPES.len() => n,
                    _ => {
                        return Err(r.err(
                            vl,
                            name,
                            format!("'{v}': expected one of {}", TEST_TYPES.join(", ")),
                        ))
                    }
                },
            };
            s.test_type = Some((vl, t));
        } else {
            return Err(r.err(line, name, "not a TEST SETUP field iolab knows"));
        }
    }
}

const LINE_FIELDS: [&str; 8] = [
    "size",
    "% of size",
    "% reads",
    "% random",
    "delay",
    "burst",
    "align",
    "reply",
];

fn access_specs(
    r: &mut Reader,
    specs: &mut Vec<IcfSpec>,
    notes: &mut Vec<String>,
) -> Result<(), IcfError> {
    loop {
        let Some((line, key)) = r.next_key() else {
            return Err(r.err(
                r.lines.len().max(1),
                "ACCESS SPECIFICATIONS",
                "no 'END access specifications",
            ));
        };
        if is(key, "END access specifications") {
            return Ok(());
        }
        if !is(key, "Access specification name,default assignment") {
            return Err(r.err(
                line,
                field_name(key),
                "expected 'Access specification name,default assignment or 'END access \
                 specifications",
            ));
        }
        let (nl, v) = r.value(line, "Access specification name")?;
        let name = v.split(',').next().unwrap_or("").trim().to_string();
        if name.is_empty() {
            return Err(r.err(nl, "Access specification name", "an empty name"));
        }
        if let Some(first) = specs.iter().find(|s| s.name == name) {
            return Err(r.err(
                nl,
                "Access specification name",
                format!(
                    "a second specification named '{name}' (the first is at line {})",
                    first.line
                ),
            ));
        }
        if specs.len() == MAX_SPECS {
            return Err(r.err(
                nl,
                "Access specification name",
                format!("more than {MAX_SPECS} specifications"),
            ));
        }
        match r.next_key() {
            Some((_, h)) if is_comment(h) => {}
            _ => {
                return Err(r.err(
                    nl,
                    "Access specification name",
                    "expected the line 'size,% of size,% reads,% random,delay,burst,align,reply",
                ))
            }
        }
        let mut lines = Vec::new();
        let mut pace: Option<(usize, Pace)> = None;
        let mut total = 0u32;
        while let Some(l) = r.peek().filter(|l| !is_comment(l)) {
            r.at += 1;
            let ll = r.at;
            if l.is_empty() {
                continue;
            }
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if f.len() != LINE_FIELDS.len() {
                return Err(r.err(
                    ll,
                    "access line",
                    format!("{} fields; expected 8: {}", f.len(), LINE_FIELDS.join(",")),
                ));
            }
            let mut n = [0u64; 8];
            for (i, s) in f.iter().enumerate() {
                let max = if i == 0 || i == 6 || i == 7 {
                    1 << 40
                } else if i == 4 {
                    3_600_000
                } else if i == 5 {
                    1 << 20
                } else {
                    100
                };
                n[i] = int(r, ll, LINE_FIELDS[i], s, max)?;
            }
            let [size, share, reads, random, delay, burst, align, reply] = n;
            if reply != 0 {
                return Err(r.err(
                    ll,
                    "reply",
                    format!(
                        "{reply}: a reply size is a network worker's (the answer to each \
                         transfer); iolab drives disk targets only"
                    ),
                ));
            }
            if size == 0 || !size.is_multiple_of(512) || size > 64 << 20 {
                return Err(r.err(
                    ll,
                    "size",
                    format!(
                        "{size} bytes: iolab transfers multiples of 512 B up to 64 MiB \
                         (O_DIRECT needs whole sectors)"
                    ),
                ));
            }
            if !align.is_multiple_of(512) {
                return Err(r.err(
                    ll,
                    "align",
                    format!(
                        "{align} bytes: alignment is 0 (sector boundaries) or a multiple of 512"
                    ),
                ));
            }
            if burst == 0 {
                return Err(r.err(ll, "burst", "0: a burst is at least one I/O"));
            }
            let p = if delay == 0 {
                Pace::default()
            } else {
                Pace {
                    think_us: delay * 1000,
                    think_blocks: burst as u32,
                    ..Pace::default()
                }
            };
            match pace {
                None => pace = Some((ll, p)),
                Some((first, q)) if q != p => {
                    return Err(r.err(
                        ll,
                        if q.think_us != p.think_us {
                            "delay"
                        } else {
                            "burst"
                        },
                        format!(
                            "differs from line {first}: iolab paces a whole job (one delay \
                             after each burst), not each line of a specification"
                        ),
                    ))
                }
                _ => {}
            }
            if share == 0 {
                // Iometer discards a line of 0%.
                continue;
            }
            if lines.len() == MAX_LINES {
                return Err(r.err(ll, "access line", format!("more than {MAX_LINES} lines")));
            }
            total += share as u32;
            lines.push(AccessLine {
                share: share as u8,
                size,
                read_pct: reads as u8,
                random_pct: random as u8,
                // Iometer's 0: sector boundaries.
                align: if align == 0 { 512 } else { align },
            });
        }
        if total != 100 {
            return Err(r.err(
                nl,
                "% of size",
                format!("the lines of '{name}' add up to {total}%, not 100%"),
            ));
        }
        let pace = pace.map(|(_, p)| p).unwrap_or_default();
        if pace.think_us > 0 {
            notes.push(format!(
                "'{name}': Iometer's delay of {} ms after each burst of {} I/O(s) ran as \
                 fio's thinktime: each worker idles that long after every burst completes",
                pace.think_us / 1000,
                pace.think_blocks
            ));
        }
        specs.push(IcfSpec {
            name,
            line: nl,
            lines,
            pace,
        });
    }
}

struct Worker {
    line: usize,
    name: String,
    /// (line, outstanding I/Os)
    depth: Option<(usize, u32)>,
    max_size: u64,
    /// (line, spec name)
    assigned: Vec<(usize, String)>,
    targets: Vec<String>,
}

fn worker(r: &mut Reader, line: usize, notes: &mut Vec<String>) -> Result<Worker, IcfError> {
    let (_, name) = r.value(line, "Worker")?;
    let mut w = Worker {
        line,
        name: name.to_string(),
        depth: None,
        max_size: 0,
        assigned: Vec::new(),
        targets: Vec::new(),
    };
    loop {
        let Some((line, key)) = r.next_key() else {
            return Err(r.err(w.line, "Worker", "no 'End worker"));
        };
        let name = field_name(key);
        if !is_comment(key) {
            return Err(r.err(line, "Worker", format!("'{key}': expected a field")));
        }
        if is(key, "End worker") {
            return Ok(w);
        } else if is(key, "Worker type") {
            let (vl, v) = r.value(line, name)?;
            if !v.eq_ignore_ascii_case("DISK") {
                return Err(r.err(
                    vl,
                    name,
                    format!("{v}: iolab runs disk workers only (network and VI workers need another machine)"),
                ));
            }
        } else if is(key, "Default target settings for worker")
            || is(key, "End default target settings for worker")
            || is(key, "Target assignments")
            || is(key, "End target assignments")
            || is(key, "End target")
        {
        } else if starts(key, "Number of outstanding IOs") {
            let (vl, v) = r.value(line, name)?;
            let f = fields(v);
            let d = f
                .first()
                .ok_or_else(|| r.err(vl, name, "expected the number of outstanding I/Os"))?;
            let d = int(r, vl, "Number of outstanding IOs", d, MAX_DEPTH as u64)? as u32;
            if d == 0 {
                return Err(r.err(vl, "Number of outstanding IOs", "0: at least 1"));
            }
            w.depth = Some((vl, d));
        } else if starts(key, "Disk maximum size") {
            let (vl, v) = r.value(line, name)?;
            let f = fields(v);
            if f.len() < 2 {
                return Err(r.err(vl, name, "expected maximum size and starting sector"));
            }
            w.max_size = int(r, vl, "Disk maximum size", f[0], 1 << 40)? * 512;
            let start = int(r, vl, "starting sector", f[1], 1 << 40)?;
            if start != 0 {
                return Err(r.err(
                    vl,
                    "starting sector",
                    format!("{start}: iolab's region starts at the target's first byte"),
                ));
            }
            if let Some(p) = f.get(2) {
                let p = int(r, vl, "Data pattern", p, 2)?;
                if p != 2 {
                    notes.push(format!(
                        "Data pattern {p} ({}) of worker '{}': iolab writes incompressible \
                         random data (Iometer's 2, full random)",
                        if p == 0 {
                            "repeating bytes"
                        } else {
                            "pseudo random"
                        },
                        w.name
                    ));
                }
            }
        } else if is(key, "Assigned access specs") {
            while let Some(l) = r.peek().filter(|l| !is_comment(l)) {
                r.at += 1;
                if !l.is_empty() {
                    w.assigned.push((r.at, l.to_string()));
                }
            }
        } else if is(key, "End assigned access specs") {
        } else if is(key, "Target") {
            let (_, v) = r.value(line, name)?;
            w.targets.push(v.to_string());
        } else if is(key, "Target type") {
            let (vl, v) = r.value(line, name)?;
            if !v.to_ascii_uppercase().contains("DISK") {
                return Err(r.err(vl, name, format!("{v}: iolab drives disk targets only")));
            }
        } else {
            return Err(r.err(line, name, "not a worker field iolab knows"));
        }
    }
}

fn manager_list(
    r: &mut Reader,
    workers: &mut Vec<Worker>,
    notes: &mut Vec<String>,
) -> Result<(), IcfError> {
    let mut managers = 0;
    loop {
        let Some((line, key)) = r.next_key() else {
            return Err(r.err(r.lines.len().max(1), "MANAGER LIST", "no 'END manager list"));
        };
        let name = field_name(key);
        if is(key, "END manager list") {
            return Ok(());
        } else if starts(key, "Manager ID") {
            let (vl, _) = r.value(line, name)?;
            managers += 1;
            if managers > 1 {
                return Err(r.err(
                    vl,
                    "Manager ID, manager name",
                    "a second manager: iolab runs on one machine",
                ));
            }
        } else if is(key, "Manager network address") {
            r.value(line, name)?;
        } else if is(key, "Worker") {
            if workers.len() == MAX_WORKERS as usize {
                return Err(r.err(line, "Worker", format!("more than {MAX_WORKERS} workers")));
            }
            workers.push(worker(r, line, notes)?);
        } else if is(key, "End manager") {
        } else {
            return Err(r.err(line, name, "not a MANAGER LIST field iolab knows"));
        }
    }
}

/// Parses an `.icf` file: a whole configuration, or its access specifications section
/// alone.
pub fn parse(file: &str, text: &str) -> Result<Icf, IcfError> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.trim_matches(|c: char| c.is_whitespace()))
        .collect();
    let mut r = Reader { file, lines, at: 0 };
    let mut setup = Setup::default();
    let mut notes = Vec::new();
    let mut specs = Vec::new();
    let mut workers = Vec::new();
    let mut seen = [false; 4];
    let mut section = |r: &Reader, i: usize, line: usize, name: &str| {
        if std::mem::replace(&mut seen[i], true) {
            Err(r.err(line, name, "a second section of this name"))
        } else {
            Ok(())
        }
    };
    while let Some((line, key)) = r.next_key() {
        if starts(key, "Version") || key.to_ascii_lowercase().starts_with("version") {
            continue;
        }
        if starts(key, "TEST SETUP") {
            section(&r, 0, line, "TEST SETUP")?;
            test_setup(&mut r, &mut setup, &mut notes)?;
        } else if starts(key, "RESULTS DISPLAY") {
            section(&r, 1, line, "RESULTS DISPLAY")?;
            // What Iometer's window shows; nothing to run.
            loop {
                match r.next_key() {
                    Some((_, k)) if is(k, "END results display") => break,
                    Some(_) => {}
                    None => return Err(r.err(line, "RESULTS DISPLAY", "no 'END results display")),
                }
            }
        } else if starts(key, "ACCESS SPECIFICATIONS") {
            section(&r, 2, line, "ACCESS SPECIFICATIONS")?;
            access_specs(&mut r, &mut specs, &mut notes)?;
        } else if starts(key, "MANAGER LIST") {
            section(&r, 3, line, "MANAGER LIST")?;
            manager_list(&mut r, &mut workers, &mut notes)?;
        } else {
            // The line itself is not shown: the file may be anything but an .icf.
            return Err(r.err(
                line,
                "section",
                "expected a Version line or a section: 'TEST SETUP, 'RESULTS DISPLAY, \
                 'ACCESS SPECIFICATIONS or 'MANAGER LIST",
            ));
        }
    }
    let end = r.lines.len().max(1);
    if specs.is_empty() {
        return Err(r.err(
            end,
            "ACCESS SPECIFICATIONS",
            "the file defines no access specification",
        ));
    }
    // Which specifications run: the workers' (all the same list), else all of them.
    let mut run = specs.clone();
    let mut iodepth = 1;
    let mut max_size = None;
    let mut targets = Vec::new();
    let mut nworkers = setup.default_workers.unwrap_or(1).max(1);
    if !workers.is_empty() {
        let with_targets: Vec<&Worker> = workers.iter().filter(|w| !w.targets.is_empty()).collect();
        let active = if with_targets.is_empty() {
            workers.iter().collect()
        } else {
            if with_targets.len() < workers.len() {
                notes.push(format!(
                    "{} of the file's workers have no target and idle in Iometer; they are \
                     not run",
                    workers.len() - with_targets.len()
                ));
            }
            with_targets
        };
        let first = active[0];
        for w in &active[1..] {
            let names = |w: &Worker| w.assigned.iter().map(|a| a.1.clone()).collect::<Vec<_>>();
            if names(w) != names(first) {
                return Err(r.err(
                    w.line,
                    "Assigned access specs",
                    format!(
                        "worker '{}' runs other specifications than '{}' (line {}); iolab's \
                         workers all run one specification at a time",
                        w.name, first.name, first.line
                    ),
                ));
            }
            if w.depth.map(|d| d.1) != first.depth.map(|d| d.1) || w.max_size != first.max_size {
                return Err(r.err(
                    w.depth.map_or(w.line, |d| d.0),
                    "Number of outstanding IOs",
                    format!(
                        "worker '{}' differs from '{}' (line {}) in outstanding I/Os or \
                         maximum size; iolab's workers share one setting",
                        w.name, first.name, first.line
                    ),
                ));
            }
        }
        run = Vec::new();
        for (line, name) in &first.assigned {
            if name.eq_ignore_ascii_case("Idle") {
                notes.push("the Idle specification is not run".into());
                continue;
            }
            match specs.iter().find(|s| &s.name == name) {
                Some(s) => run.push(s.clone()),
                None => {
                    return Err(r.err(
                        *line,
                        "Assigned access specs",
                        format!("'{name}' is not an access specification of the file"),
                    ))
                }
            }
        }
        if run.is_empty() {
            return Err(r.err(
                first.line,
                "Assigned access specs",
                "no access specification is assigned to the workers",
            ));
        }
        nworkers = active.len() as u32;
        iodepth = first.depth.map_or(1, |d| d.1);
        max_size = (first.max_size > 0).then_some(first.max_size);
        for w in &workers {
            for t in &w.targets {
                if !targets.contains(t) {
                    targets.push(t.clone());
                }
            }
        }
    }
    let t = setup.test_type.map_or(0, |t| t.1);
    let cycle = match t {
        0 | 1 | 3 | 4 => Cycle::None,
        2 | 5 => {
            let (l, start, step, exp) = setup.worker_cycle.unwrap_or((0, 1, 1, false));
            Cycle::Workers(steps(
                &r,
                l.max(1),
                "Worker Cycling",
                start,
                nworkers,
                step,
                exp,
            )?)
        }
        _ => {
            let Some((l, start, end, step, exp)) = setup.queue_cycle else {
                return Err(r.err(
                    setup.test_type.map_or(1, |t| t.0),
                    "Test Type",
                    "cycles outstanding I/Os, and the file has no 'Queue Depth Cycling",
                ));
            };
            Cycle::QueueDepth(steps(&r, l, "Queue Depth Cycling", start, end, step, exp)?)
        }
    };
    if matches!(t, 1 | 3 | 4 | 5 | 7) {
        notes.push(format!(
            "Test Type {}: iolab runs one target (--target), so cycling targets is one step",
            TEST_TYPES[t as usize]
        ));
    }
    if !targets.is_empty() {
        notes.push(format!(
            "the file's targets ({}) are replaced by --target",
            targets.join(", ")
        ));
    }
    Ok(Icf {
        run_time: setup.run_time,
        ramp: setup.ramp,
        specs: run,
        workers: nworkers,
        iodepth,
        max_size,
        cycle,
        targets,
        notes,
    })
}

/// The tests of an `.icf`: each specification (named as the file names it) at the file's
/// workers and outstanding I/Os, or once per step of its cycling (`NAME Q4`, `NAME W2`).
pub fn tests(icf: &Icf, workers: u32, iodepth: u32) -> Vec<TestSpec> {
    let mut out = Vec::new();
    for s in &icf.specs {
        let runs: Vec<(String, u32, u32)> = match &icf.cycle {
            Cycle::None => vec![(s.name.clone(), workers, iodepth)],
            Cycle::QueueDepth(d) => d
                .iter()
                .map(|&q| (format!("{} Q{q}", s.name), workers, q))
                .collect(),
            Cycle::Workers(w) => w
                .iter()
                .map(|&n| (format!("{} W{n}", s.name), n, iodepth))
                .collect(),
        };
        let max = s.lines.iter().map(|l| l.size).max().unwrap_or(512);
        let reads: u32 = s
            .lines
            .iter()
            .map(|l| l.share as u32 * l.read_pct as u32)
            .sum::<u32>()
            / 100;
        for (name, n, q) in runs {
            let mut job = JobSpec::new(Rw::RandRw, max, q, n);
            job.rwmixread = reads.min(100) as u8;
            job.access = s.lines.clone();
            job.pace = s.pace;
            out.push(TestSpec {
                group: name.clone(),
                name,
                job,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHOLE: &str = "Version 2006.07.27 \r
'TEST SETUP ====================================================================\r
'Test Description\r
\tmixed\r
'Run Time\r
'\thours      minutes    seconds\r
\t0          1          30\r
'Ramp Up Time (s)\r
\t5\r
'Default Disk Workers to Spawn\r
\tNUMBER_OF_CPUS\r
'Default Network Workers to Spawn\r
\t0\r
'Record Results\r
\tALL\r
'Worker Cycling\r
'\tstart      step       step type\r
\t1          1          LINEAR\r
'Disk Cycling\r
'\tstart      step       step type\r
\t1          1          LINEAR\r
'Queue Depth Cycling\r
'\tstart      end        step       step type\r
\t1          32         2          EXPONENTIAL\r
'Test Type\r
\tNORMAL\r
'END test setup\r
'RESULTS DISPLAY ===============================================================\r
'Update Frequency,Update Type\r
\t0,WHOLE_TEST\r
'END results display\r
'ACCESS SPECIFICATIONS =========================================================\r
'Access specification name,default assignment\r
\tMix,NONE\r
'size,% of size,% reads,% random,delay,burst,align,reply\r
\t4096,60,100,100,0,1,4096,0\r
\t65536,40,0,0,0,1,0,0\r
'Access specification name,default assignment\r
\tPaced,NONE\r
'size,% of size,% reads,% random,delay,burst,align,reply\r
\t8192,100,67,100,2,4,0,0\r
'END access specifications\r
'MANAGER LIST ==================================================================\r
'Manager ID, manager name\r
\t1,HOST\r
'Manager network address\r
\t127.0.0.1\r
'Worker\r
\tWorker 1\r
'Worker type\r
\tDISK\r
'Default target settings for worker\r
'Number of outstanding IOs,test connection rate,transactions per connection\r
\t8,DISABLED,1\r
'Disk maximum size,starting sector\r
\t8192,0\r
'End default target settings for worker\r
'Assigned access specs\r
\tPaced\r
\tMix\r
'End assigned access specs\r
'Target assignments\r
'Target\r
\tD:\r
'Target type\r
\tDISK\r
'End target\r
'End target assignments\r
'End worker\r
'End manager\r
'END manager list\r
Version 2006.07.27 \r
";

    #[test]
    fn a_whole_file() {
        let icf = parse("a.icf", WHOLE).unwrap();
        assert_eq!(icf.run_time, Some(Duration::from_secs(90)));
        assert_eq!(icf.ramp, Some(Duration::from_secs(5)));
        assert_eq!((icf.workers, icf.iodepth), (1, 8));
        assert_eq!(icf.max_size, Some(8192 * 512));
        let names: Vec<&str> = icf.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Paced", "Mix"]);
        assert_eq!(icf.specs[1].lines[1].align, 512);
        assert_eq!(icf.specs[1].lines[0].align, 4096);
        assert_eq!(icf.specs[0].pace.think_us, 2000);
        assert_eq!(icf.specs[0].pace.think_blocks, 4);
        assert_eq!(icf.targets, ["D:"]);
        assert!(
            icf.notes.iter().any(|n| n.contains("(D:)")),
            "{:?}",
            icf.notes
        );
        let t = tests(&icf, icf.workers, icf.iodepth);
        assert_eq!(t[1].name, "Mix");
        assert_eq!(t[1].job.bs, 65536);
        assert_eq!(t[1].job.rwmixread, 60);
        for x in &t {
            x.job.validate().unwrap();
        }
    }

    #[test]
    fn cycling_is_a_sweep() {
        let q = WHOLE.replace("\tNORMAL", "\tCYCLE_OUTSTANDING_IOS");
        let icf = parse("a.icf", &q).unwrap();
        assert_eq!(icf.cycle, Cycle::QueueDepth(vec![1, 2, 4, 8, 16, 32]));
        let t = tests(&icf, 1, 8);
        assert_eq!(t.len(), 12);
        assert_eq!(t[3].name, "Paced Q8");
        let w = WHOLE.replace("\tNORMAL", "\t2");
        assert_eq!(parse("a.icf", &w).unwrap().cycle, Cycle::Workers(vec![1]));
    }

    #[test]
    fn refusals_name_line_and_field() {
        for (from, to, line, field) in [
            (
                "\t4096,60,100,100,0,1,4096,0",
                "\t4096,60,100,100,0,1,4096,512",
                36,
                "reply",
            ),
            ("\t4096,60,100", "\t1000,60,100", 36, "size"),
            (
                "\t4096,60,100,100,0,1,4096,0",
                "\t4096,50,100,100,0,1,4096,0",
                34,
                "% of size",
            ),
            (
                "\t65536,40,0,0,0,1,0,0",
                "\t65536,40,0,0,5,1,0,0",
                37,
                "delay",
            ),
            (
                "\t4096,60,100,100,0,1,4096,0",
                "\t4096,60,1o0,100,0,1,4096,0",
                36,
                "% reads",
            ),
            (
                "\tPaced\r\n\tMix",
                "\tPaced\r\n\tMax",
                60,
                "Assigned access specs",
            ),
            ("\t8192,0\r", "\t8192,7\r", 56, "starting sector"),
            ("\tNORMAL", "\tSOMETIMES", 26, "Test Type"),
            ("'Record Results", "'Record Resolts", 14, "Record Resolts"),
            (
                "\tDISK\r\n'Default",
                "\tNETWORK\r\n'Default",
                51,
                "Worker type",
            ),
        ] {
            assert!(WHOLE.contains(from), "{from}");
            let e = parse("a.icf", &WHOLE.replace(from, to)).unwrap_err();
            assert_eq!((e.line, e.field.as_str()), (line, field), "{to}: {e}");
            assert!(e
                .to_string()
                .starts_with(&format!("a.icf:{line}: {field}: ")));
        }
    }

    #[test]
    fn the_access_section_alone_runs_every_spec() {
        let start = WHOLE.find("'ACCESS").unwrap();
        let end = WHOLE.find("'MANAGER").unwrap();
        let icf = parse("s.icf", &WHOLE[start..end]).unwrap();
        let names: Vec<&str> = icf.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Mix", "Paced"]);
        assert_eq!((icf.workers, icf.iodepth, icf.run_time), (1, 1, None));
    }
}
