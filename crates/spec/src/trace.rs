//! The I/O trace format of `iolab record` and `iolab run replay` (docs/workloads.md,
//! "Record and replay"): a versioned, line-oriented text file, plus a reader of fio's
//! `write_iolog` output (versions 2 and 3) into the same model. Parsing only: reading the
//! file (and gunzipping it) is the caller's business.
//!
//! ```text
//! iolab-trace 1
//! root 0 /home/me/project
//! command git commit -m x
//! skipped outside 12
//! dir 0:.git
//! file 0:.git/index 1240
//! 4711 0.000000 0.000012 open h1 0:.git/index r 0 = 0
//! 4711 0.000020 0.000004 pread h1 4096 0 = 1240
//! 4711 0.000031 0.000002 close h1 = 0
//! ```
//!
//! An operation line is `TID START DUR OP ARGS... = RESULT`: the recorded thread, seconds
//! since the first operation and the call's duration (microseconds), the operation and its
//! arguments, and what the call returned (a number or an errno name). Files are named
//! `ROOT:RELATIVE` (bytes outside printable ASCII, space and `%` as `%XX`); open files by
//! handles `hN` (one per open file description: the recorder folds dup and fork into them).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::num::ParseIntError;
use std::string::FromUtf8Error;

use iolab_sys::input::InputError;

/// The first line of a trace of this version.
pub const MAGIC: &str = "iolab-trace 1";

/// The largest single transfer a trace may ask for (the replay allocates a buffer of it).
pub const MAX_IO: u64 = 256 << 20;
/// The largest file a trace may ask the replay to create.
pub const MAX_FILE: u64 = 1 << 40;
/// The most roots a trace names.
pub const MAX_ROOTS: u32 = 64;
/// The most bytes of a trace file, and of its text once gunzipped.
pub const MAX_TEXT: u64 = 256 << 20;
/// The most calls a trace may hold (the replay keeps them all in memory).
pub const MAX_EVENTS: usize = 4_000_000;

/// Refuses one more event than [`MAX_EVENTS`].
fn room_for_one_more(t: &Trace) -> Result<(), TraceReason> {
    if t.events.len() >= MAX_EVENTS {
        return Err(TraceReason::TooManyCalls);
    }
    Ok(())
}

/// Why a relative path is refused ([`check_rel`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelError {
    #[error("an empty path or one with a NUL byte")]
    Empty,
    #[error("an absolute path or an empty component")]
    EmptyComponent,
    #[error("a `{0}` component (paths stay beneath their root)")]
    Dots(String),
}

/// Why a trace (or one of its lines) cannot be read: the reason of a [`TraceError`], with
/// the error underneath kept as its source where there is one.
#[derive(Debug, thiserror::Error)]
pub enum TraceReason {
    /// Said in words (no error underneath).
    #[error("{0}")]
    Said(String),
    #[error("{what} {text:?} is not a number in range")]
    Number {
        what: &'static str,
        text: String,
        #[source]
        source: ParseIntError,
    },
    #[error("{what} {text:?} is not seconds with up to 6 decimals")]
    Seconds { what: &'static str, text: String },
    #[error("{what} {text:?} is too large")]
    SecondsTooLarge { what: &'static str, text: String },
    #[error("{what} {value} is more than {MAX_IO} bytes")]
    IoSize { what: &'static str, value: u64 },
    #[error("{what} {value} is beyond {MAX_FILE} bytes")]
    Offset { what: &'static str, value: i128 },
    #[error("handle {0:?} (expected hN)")]
    Handle(String),
    #[error("mode {0:?} (octal, at most 7777)")]
    Mode(String),
    #[error("open mode {0:?} (r, w or rw)")]
    OpenMode(String),
    #[error("open flag {0:?}")]
    OpenFlag(String),
    #[error("bad %XX escape in {0:?}")]
    Escape(String),
    #[error("path {0:?} (expected ROOT:RELATIVE)")]
    PathForm(String),
    #[error("path {path:?} names root {root}, not declared")]
    Undeclared { path: String, root: u32 },
    #[error("path {path:?}: {source}")]
    Path {
        path: String,
        #[source]
        source: RelError,
    },
    /// A file name of fio's iolog.
    #[error("file {name:?}: {source}")]
    File {
        name: String,
        #[source]
        source: RelError,
    },
    #[error("more than {MAX_EVENTS} calls: a replay holds at most {MAX_EVENTS}")]
    TooManyCalls,
    /// The file could not be read (the caller's reading, [`TraceError`] names it).
    #[error("{0}")]
    Input(#[source] InputError),
    #[error("more than {MAX_TEXT} bytes of text once gunzipped")]
    GunzippedTooLarge,
    #[error("cannot gunzip: {0}")]
    Gunzip(#[source] InputError),
    #[error("not UTF-8 text (a trace is text: paths are %XX-escaped)")]
    NotUtf8(#[source] FromUtf8Error),
}

impl From<String> for TraceReason {
    fn from(s: String) -> Self {
        TraceReason::Said(s)
    }
}

impl From<&str> for TraceReason {
    fn from(s: &str) -> Self {
        TraceReason::Said(s.to_string())
    }
}

/// A path beneath one of the recorded roots: the root's index and the path below it
/// (components without `.`, `..` or empty names; empty is the root itself).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TracePath {
    pub root: u32,
    pub rel: Vec<u8>,
}

impl TracePath {
    /// The path as the trace writes it: `0:dir/file`, `0:.` for the root.
    pub fn encoded(&self) -> String {
        let mut s = format!("{}:", self.root);
        if self.rel.is_empty() {
            s.push('.');
        } else {
            s.push_str(&escape(&self.rel));
        }
        s
    }

    /// The parent directory (None for the root itself).
    pub fn parent(&self) -> Option<TracePath> {
        if self.rel.is_empty() {
            return None;
        }
        let cut = self.rel.iter().rposition(|&b| b == b'/').unwrap_or(0);
        Some(TracePath {
            root: self.root,
            rel: self.rel[..cut].to_vec(),
        })
    }
}

/// `%XX` for every byte that is not printable ASCII, for space and for `%`.
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'%' {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

fn unescape(s: &str) -> Result<Vec<u8>, TraceReason> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| TraceReason::Escape(s.to_string()))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Checks a relative path: no leading `/`, no `.`/`..`/empty component, no NUL. `.` alone
/// is the root.
pub fn check_rel(rel: &[u8]) -> Result<Vec<u8>, RelError> {
    if rel == b"." {
        return Ok(Vec::new());
    }
    if rel.is_empty() || rel.contains(&0) {
        return Err(RelError::Empty);
    }
    for c in rel.split(|&b| b == b'/') {
        match c {
            b"" => return Err(RelError::EmptyComponent),
            b"." | b".." => return Err(RelError::Dots(String::from_utf8_lossy(c).into_owned())),
            _ => {}
        }
    }
    Ok(rel.to_vec())
}

/// How a file is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenFlags {
    pub read: bool,
    pub write: bool,
    pub create: bool,
    pub excl: bool,
    pub trunc: bool,
    pub append: bool,
    pub sync: bool,
    pub dsync: bool,
    pub direct: bool,
    pub directory: bool,
}

impl OpenFlags {
    const NAMES: [&'static str; 7] = [
        "creat",
        "excl",
        "trunc",
        "append",
        "sync",
        "dsync",
        "directory",
    ];

    fn bits(&self) -> [bool; 7] {
        [
            self.create,
            self.excl,
            self.trunc,
            self.append,
            self.sync,
            self.dsync,
            self.directory,
        ]
    }

    fn parse(s: &str) -> Result<OpenFlags, TraceReason> {
        let mut parts = s.split('+');
        let mut f = OpenFlags::default();
        match parts.next().unwrap_or("") {
            "r" => f.read = true,
            "w" => f.write = true,
            "rw" => (f.read, f.write) = (true, true),
            other => return Err(TraceReason::OpenMode(other.to_string())),
        }
        for p in parts {
            match p {
                "creat" => f.create = true,
                "excl" => f.excl = true,
                "trunc" => f.trunc = true,
                "append" => f.append = true,
                "sync" => f.sync = true,
                "dsync" => f.dsync = true,
                "direct" => f.direct = true,
                "directory" => f.directory = true,
                other => return Err(TraceReason::OpenFlag(other.to_string())),
            }
        }
        Ok(f)
    }
}

impl fmt::Display for OpenFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.read, self.write) {
            (true, true) => "rw",
            (false, true) => "w",
            _ => "r",
        })?;
        for (n, on) in Self::NAMES.iter().zip(self.bits()) {
            if on {
                write!(f, "+{n}")?;
            }
        }
        if self.direct {
            f.write_str("+direct")?;
        }
        Ok(())
    }
}

/// `lseek`'s whence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whence {
    Set,
    Cur,
    End,
}

/// What one recorded call did. `Option<u32>` handles are `None` for an open that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Open {
        handle: Option<u32>,
        path: TracePath,
        flags: OpenFlags,
        mode: u32,
    },
    Close {
        handle: u32,
    },
    /// read/readv (`vector`), at the file position.
    Read {
        handle: u32,
        size: u64,
        vector: bool,
    },
    /// pread/preadv.
    Pread {
        handle: u32,
        size: u64,
        offset: u64,
        vector: bool,
    },
    Write {
        handle: u32,
        size: u64,
        vector: bool,
    },
    Pwrite {
        handle: u32,
        size: u64,
        offset: u64,
        vector: bool,
    },
    Lseek {
        handle: u32,
        offset: i64,
        whence: Whence,
    },
    Fsync {
        handle: u32,
    },
    Fdatasync {
        handle: u32,
    },
    SyncFileRange {
        handle: u32,
        offset: u64,
        len: u64,
    },
    Ftruncate {
        handle: u32,
        len: u64,
    },
    Truncate {
        path: TracePath,
        len: u64,
    },
    Fallocate {
        handle: u32,
        mode: u32,
        offset: u64,
        len: u64,
    },
    /// rename (`noreplace`: renameat2's RENAME_NOREPLACE, EEXIST over an existing name).
    Rename {
        from: TracePath,
        to: TracePath,
        noreplace: bool,
    },
    Unlink {
        path: TracePath,
    },
    Mkdir {
        path: TracePath,
        mode: u32,
    },
    Rmdir {
        path: TracePath,
    },
    /// A hard link `to` of `from`.
    Link {
        from: TracePath,
        to: TracePath,
    },
    /// A symbolic link at `path` holding `target` (never followed by the replay).
    Symlink {
        target: Vec<u8>,
        path: TracePath,
    },
    /// stat (`nofollow`: lstat).
    Stat {
        path: TracePath,
        nofollow: bool,
    },
    Fstat {
        handle: u32,
    },
}

/// Operation kinds, in the order of the replay's table.
pub const OP_NAMES: &[&str] = &[
    "open",
    "close",
    "read",
    "readv",
    "pread",
    "preadv",
    "write",
    "writev",
    "pwrite",
    "pwritev",
    "lseek",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "ftruncate",
    "truncate",
    "fallocate",
    "rename",
    "unlink",
    "mkdir",
    "rmdir",
    "link",
    "symlink",
    "stat",
    "lstat",
    "fstat",
];

impl Op {
    /// The name the trace writes (one of [`OP_NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Open { .. } => "open",
            Op::Close { .. } => "close",
            Op::Read { vector: false, .. } => "read",
            Op::Read { vector: true, .. } => "readv",
            Op::Pread { vector: false, .. } => "pread",
            Op::Pread { vector: true, .. } => "preadv",
            Op::Write { vector: false, .. } => "write",
            Op::Write { vector: true, .. } => "writev",
            Op::Pwrite { vector: false, .. } => "pwrite",
            Op::Pwrite { vector: true, .. } => "pwritev",
            Op::Lseek { .. } => "lseek",
            Op::Fsync { .. } => "fsync",
            Op::Fdatasync { .. } => "fdatasync",
            Op::SyncFileRange { .. } => "sync_file_range",
            Op::Ftruncate { .. } => "ftruncate",
            Op::Truncate { .. } => "truncate",
            Op::Fallocate { .. } => "fallocate",
            Op::Rename { .. } => "rename",
            Op::Unlink { .. } => "unlink",
            Op::Mkdir { .. } => "mkdir",
            Op::Rmdir { .. } => "rmdir",
            Op::Link { .. } => "link",
            Op::Symlink { .. } => "symlink",
            Op::Stat {
                nofollow: false, ..
            } => "stat",
            Op::Stat { nofollow: true, .. } => "lstat",
            Op::Fstat { .. } => "fstat",
        }
    }

    /// A read or write: read/write (readv/writev with `vector`), pread/pwrite with an
    /// `offset`.
    pub fn io(write: bool, handle: u32, size: u64, offset: Option<u64>, vector: bool) -> Op {
        match (write, offset) {
            (false, None) => Op::Read {
                handle,
                size,
                vector,
            },
            (true, None) => Op::Write {
                handle,
                size,
                vector,
            },
            (false, Some(offset)) => Op::Pread {
                handle,
                size,
                offset,
                vector,
            },
            (true, Some(offset)) => Op::Pwrite {
                handle,
                size,
                offset,
                vector,
            },
        }
    }

    /// Index of the kind in [`OP_NAMES`].
    pub fn kind(&self) -> usize {
        let n = self.name();
        OP_NAMES.iter().position(|k| *k == n).unwrap_or(0)
    }

    /// The handle the call works on (an open's is the one it creates).
    pub fn handle(&self) -> Option<u32> {
        match self {
            Op::Open { handle, .. } => *handle,
            Op::Close { handle }
            | Op::Read { handle, .. }
            | Op::Pread { handle, .. }
            | Op::Write { handle, .. }
            | Op::Pwrite { handle, .. }
            | Op::Lseek { handle, .. }
            | Op::Fsync { handle }
            | Op::Fdatasync { handle }
            | Op::SyncFileRange { handle, .. }
            | Op::Ftruncate { handle, .. }
            | Op::Fallocate { handle, .. }
            | Op::Fstat { handle } => Some(*handle),
            _ => None,
        }
    }

    /// The paths the call names.
    pub fn paths(&self) -> Vec<&TracePath> {
        match self {
            Op::Open { path, .. }
            | Op::Truncate { path, .. }
            | Op::Unlink { path }
            | Op::Mkdir { path, .. }
            | Op::Rmdir { path }
            | Op::Stat { path, .. }
            | Op::Symlink { path, .. } => vec![path],
            Op::Rename { from, to, .. } | Op::Link { from, to } => vec![from, to],
            _ => Vec::new(),
        }
    }

    /// Whether the call moves data (its result is a byte count), and which way.
    pub fn transfer(&self) -> Option<Dir> {
        match self {
            Op::Read { .. } | Op::Pread { .. } => Some(Dir::Read),
            Op::Write { .. } | Op::Pwrite { .. } => Some(Dir::Write),
            _ => None,
        }
    }

    fn args(&self) -> String {
        let h = |h: &u32| format!("h{h}");
        match self {
            Op::Open {
                handle,
                path,
                flags,
                mode,
            } => format!(
                "{} {} {flags} {mode:o}",
                handle.as_ref().map_or("-".into(), h),
                path.encoded()
            ),
            Op::Close { handle }
            | Op::Fsync { handle }
            | Op::Fdatasync { handle }
            | Op::Fstat { handle } => h(handle),
            Op::Read { handle, size, .. } | Op::Write { handle, size, .. } => {
                format!("{} {size}", h(handle))
            }
            Op::Pread {
                handle,
                size,
                offset,
                ..
            }
            | Op::Pwrite {
                handle,
                size,
                offset,
                ..
            } => format!("{} {size} {offset}", h(handle)),
            Op::Lseek {
                handle,
                offset,
                whence,
            } => format!(
                "{} {offset} {}",
                h(handle),
                match whence {
                    Whence::Set => "set",
                    Whence::Cur => "cur",
                    Whence::End => "end",
                }
            ),
            Op::SyncFileRange {
                handle,
                offset,
                len,
            } => format!("{} {offset} {len}", h(handle)),
            Op::Ftruncate { handle, len } => format!("{} {len}", h(handle)),
            Op::Truncate { path, len } => format!("{} {len}", path.encoded()),
            Op::Fallocate {
                handle,
                mode,
                offset,
                len,
            } => format!("{} {mode} {offset} {len}", h(handle)),
            Op::Rename {
                from,
                to,
                noreplace,
            } => format!(
                "{} {}{}",
                from.encoded(),
                to.encoded(),
                if *noreplace { " noreplace" } else { "" }
            ),
            Op::Link { from, to } => format!("{} {}", from.encoded(), to.encoded()),
            Op::Symlink { target, path } => format!("{} {}", escape(target), path.encoded()),
            Op::Unlink { path } | Op::Rmdir { path } | Op::Stat { path, .. } => path.encoded(),
            Op::Mkdir { path, mode } => format!("{} {mode:o}", path.encoded()),
        }
    }
}

/// Which way a transfer goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

/// What a call returned: a count or offset, or an errno (by name, so traces move between
/// architectures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok(u64),
    Err(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Ok(n) => write!(f, "{n}"),
            Outcome::Err(e) => f.write_str(e),
        }
    }
}

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The recorded thread (its Linux thread id).
    pub tid: u32,
    /// Microseconds since the trace's first call.
    pub start_us: u64,
    pub dur_us: u64,
    pub op: Op,
    pub result: Outcome,
    /// 1-based line of the trace (0 for events not read from a file).
    pub line: u32,
}

/// A file or directory that existed before the recorded command ran and that the trace
/// uses: the replay creates it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initial {
    Dir(TracePath),
    File(TracePath, u64),
}

impl Initial {
    pub fn path(&self) -> &TracePath {
        match self {
            Initial::Dir(p) | Initial::File(p, _) => p,
        }
    }
}

/// A whole trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Trace {
    /// The recorded roots, by index (informational: the replay maps root N to a directory
    /// of its own).
    pub roots: Vec<String>,
    pub command: Option<String>,
    /// Calls left out of the trace, by reason (`outside`: on files outside the roots).
    pub skipped: Vec<(String, u64)>,
    pub initial: Vec<Initial>,
    /// In start order.
    pub events: Vec<Event>,
    /// Where it came from: `iolab-trace 1`, `fio iolog v2` or `fio iolog v3`.
    pub format: String,
}

/// A trace that cannot be read: FILE:LINE: reason.
#[derive(Debug)]
pub struct TraceError {
    pub file: String,
    /// 1-based; None when the file as a whole is at fault.
    pub line: Option<u32>,
    pub reason: TraceReason,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.reason),
            None => write!(f, "{}: {}", self.file, self.reason),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.reason)
    }
}

impl Trace {
    /// The trace as text (the format [`parse`] reads).
    pub fn to_text(&self) -> String {
        let mut s = String::from(MAGIC);
        s.push('\n');
        for (i, r) in self.roots.iter().enumerate() {
            s.push_str(&format!("root {i} {}\n", escape(r.as_bytes())));
        }
        if let Some(c) = &self.command {
            s.push_str(&format!("command {}\n", escape_command(c)));
        }
        for (why, n) in &self.skipped {
            s.push_str(&format!("skipped {why} {n}\n"));
        }
        for i in &self.initial {
            match i {
                Initial::Dir(p) => s.push_str(&format!("dir {}\n", p.encoded())),
                Initial::File(p, size) => s.push_str(&format!("file {} {size}\n", p.encoded())),
            }
        }
        for e in &self.events {
            s.push_str(&format!(
                "{} {}.{:06} {}.{:06} {} {} = {}\n",
                e.tid,
                e.start_us / 1_000_000,
                e.start_us % 1_000_000,
                e.dur_us / 1_000_000,
                e.dur_us % 1_000_000,
                e.op.name(),
                e.op.args(),
                e.result
            ));
        }
        s
    }

    /// Distinct recorded threads, in order of their first call.
    pub fn threads(&self) -> Vec<u32> {
        let mut seen = HashSet::new();
        self.events
            .iter()
            .filter(|e| seen.insert(e.tid))
            .map(|e| e.tid)
            .collect()
    }
}

/// The command line as the trace writes it: [`escape`]'s `%XX`, but the spaces between
/// its words kept (only a leading or trailing one escaped, so the line reads back whole).
fn escape_command(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(b.len());
    for (i, &c) in b.iter().enumerate() {
        if c == b' ' && i > 0 && i + 1 < b.len() {
            out.push(' ');
        } else {
            out.push_str(&escape(&[c]));
        }
    }
    out
}

/// Reads a trace: iolab's own format, or fio's iolog (v2 or v3), told apart by the first
/// line. `file` names the input in errors.
pub fn parse(file: &str, text: &str) -> Result<Trace, TraceError> {
    let first = text.lines().next().unwrap_or("").trim_end();
    if first == "fio version 2 iolog" || first == "fio version 3 iolog" {
        return parse_iolog(file, text, first.as_bytes()[12] == b'3');
    }
    Parser::new(file).parse(text)
}

struct Parser<'f> {
    file: &'f str,
    line: u32,
}

fn num<T: std::str::FromStr<Err = ParseIntError>>(
    s: &str,
    what: &'static str,
) -> Result<T, TraceReason> {
    s.parse().map_err(|source| TraceReason::Number {
        what,
        text: s.to_string(),
        source,
    })
}

fn micros(s: &str, what: &'static str) -> Result<u64, TraceReason> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if frac.len() > 6 || !frac.bytes().all(|b| b.is_ascii_digit()) || whole.starts_with('+') {
        return Err(TraceReason::Seconds {
            what,
            text: s.to_string(),
        });
    }
    let w: u64 = num(whole, what)?;
    let f: u64 = if frac.is_empty() {
        0
    } else {
        num::<u64>(frac, what)? * 10u64.pow(6 - frac.len() as u32)
    };
    w.checked_mul(1_000_000)
        .and_then(|x| x.checked_add(f))
        .ok_or_else(|| TraceReason::SecondsTooLarge {
            what,
            text: s.to_string(),
        })
}

fn size(s: &str, what: &'static str) -> Result<u64, TraceReason> {
    let v: u64 = num(s, what)?;
    if v > MAX_IO {
        return Err(TraceReason::IoSize { what, value: v });
    }
    Ok(v)
}

fn offset(s: &str, what: &'static str) -> Result<u64, TraceReason> {
    let v: u64 = num(s, what)?;
    if v > MAX_FILE {
        return Err(TraceReason::Offset {
            what,
            value: v.into(),
        });
    }
    Ok(v)
}

fn handle(s: &str) -> Result<u32, TraceReason> {
    s.strip_prefix('h')
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| TraceReason::Handle(s.to_string()))
}

fn mode(s: &str) -> Result<u32, TraceReason> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| TraceReason::Mode(s.to_string()))
}

impl<'f> Parser<'f> {
    fn new(file: &'f str) -> Self {
        Parser { file, line: 0 }
    }

    fn err(&self, reason: impl Into<TraceReason>) -> TraceError {
        TraceError {
            file: self.file.to_string(),
            line: Some(self.line.max(1)),
            reason: reason.into(),
        }
    }

    fn path(&self, s: &str, roots: usize) -> Result<TracePath, TraceReason> {
        let (r, rel) = s
            .split_once(':')
            .ok_or_else(|| TraceReason::PathForm(s.to_string()))?;
        let root: u32 = num(r, "root")?;
        if root as usize >= roots {
            return Err(TraceReason::Undeclared {
                path: s.to_string(),
                root,
            });
        }
        let rel = check_rel(&unescape(rel)?).map_err(|source| TraceReason::Path {
            path: s.to_string(),
            source,
        })?;
        Ok(TracePath { root, rel })
    }

    fn parse(mut self, text: &str) -> Result<Trace, TraceError> {
        let mut t = Trace {
            format: MAGIC.into(),
            ..Trace::default()
        };
        let mut lines = text.split('\n');
        self.line = 1;
        match lines.next() {
            Some(l) if l.trim_end() == MAGIC => {}
            Some(l) if l.starts_with("iolab-trace ") => {
                return Err(self.err(format!(
                    "trace version {:?}: this iolab reads `{MAGIC}`",
                    l.trim_end()
                )))
            }
            _ => {
                return Err(self.err(format!(
                    "not a trace: the first line must be `{MAGIC}` (or fio's `fio version 2|3 \
                     iolog`)"
                )))
            }
        }
        // Handles: open (line), closed.
        let mut open: HashMap<u32, bool> = HashMap::new();
        let mut seen_paths: HashSet<TracePath> = HashSet::new();
        let mut dirs: HashSet<TracePath> = HashSet::new();
        let mut last_start = 0u64;
        for l in lines {
            self.line += 1;
            let l = l.strip_suffix('\r').unwrap_or(l);
            if l.trim().is_empty() || l.starts_with('#') {
                continue;
            }
            let w: Vec<&str> = l.split(' ').collect();
            let header = |s: &Self| -> Result<(), TraceError> {
                if !t.events.is_empty() {
                    return Err(s.err(format!("`{}` after the first operation", w[0])));
                }
                Ok(())
            };
            match w[0] {
                "root" => {
                    header(&self)?;
                    if w.len() != 3 {
                        return Err(self.err("root: expected `root N PATH`"));
                    }
                    let n: u32 = num(w[1], "root").map_err(|e| self.err(e))?;
                    if n as usize != t.roots.len() || n >= MAX_ROOTS {
                        return Err(self.err(format!(
                            "root {n}: roots are numbered 0, 1, ... in order (at most \
                             {MAX_ROOTS})"
                        )));
                    }
                    let p = unescape(w[2]).map_err(|e| self.err(e))?;
                    t.roots.push(String::from_utf8_lossy(&p).into_owned());
                }
                "command" => {
                    header(&self)?;
                    // %XX-escaped as names are (an older trace's line with no valid escape
                    // is kept as it is: the line is informational).
                    let c = l["command".len()..].trim();
                    let c = unescape(c).map_or_else(
                        |_| c.to_string(),
                        |b| String::from_utf8_lossy(&b).into_owned(),
                    );
                    t.command = Some(c);
                }
                "skipped" => {
                    header(&self)?;
                    if w.len() != 3 {
                        return Err(self.err("skipped: expected `skipped REASON COUNT`"));
                    }
                    let n: u64 = num(w[2], "count").map_err(|e| self.err(e))?;
                    t.skipped.push((w[1].to_string(), n));
                }
                "dir" | "file" => {
                    header(&self)?;
                    let want = if w[0] == "dir" { 2 } else { 3 };
                    if w.len() != want {
                        return Err(self.err(format!(
                            "{}: expected `{}`",
                            w[0],
                            if want == 2 {
                                "dir PATH"
                            } else {
                                "file PATH SIZE"
                            }
                        )));
                    }
                    let p = self.path(w[1], t.roots.len()).map_err(|e| self.err(e))?;
                    if let Some(parent) = p.parent().filter(|d| !d.rel.is_empty()) {
                        if !dirs.contains(&parent) {
                            return Err(self.err(format!(
                                "{}: its directory {} is not listed (as `dir`) before it",
                                w[1],
                                parent.encoded()
                            )));
                        }
                    }
                    if p.rel.is_empty() {
                        return Err(self.err(format!("{}: the root itself", w[1])));
                    }
                    if want == 2 {
                        dirs.insert(p.clone());
                    }
                    if !seen_paths.insert(p.clone()) {
                        return Err(self.err(format!("{} listed twice", w[1])));
                    }
                    t.initial.push(if want == 2 {
                        Initial::Dir(p)
                    } else {
                        let s = offset(w[2], "file size").map_err(|e| self.err(e))?;
                        Initial::File(p, s)
                    });
                }
                _ => {
                    let e = self.event(&w, t.roots.len()).map_err(|e| self.err(e))?;
                    if e.start_us < last_start {
                        return Err(self.err(format!(
                            "start {} s is before the previous line's (operations are in \
                             start order)",
                            e.start_us as f64 / 1e6
                        )));
                    }
                    last_start = e.start_us;
                    if let Some(h) = e.op.handle() {
                        let ok = matches!(e.result, Outcome::Ok(_));
                        match (&e.op, open.get(&h)) {
                            (Op::Open { .. }, Some(_)) => {
                                return Err(self.err(format!("handle h{h} opened twice")))
                            }
                            (Op::Open { .. }, None) if !ok => {
                                return Err(self.err(format!(
                                    "an open that failed ({}) has handle h{h} (write -)",
                                    e.result
                                )))
                            }
                            (Op::Open { .. }, None) => {
                                open.insert(h, true);
                            }
                            (_, None) => {
                                return Err(self.err(format!("handle h{h} used before its open")))
                            }
                            (_, Some(false)) => {
                                return Err(self.err(format!("handle h{h} used after its close")))
                            }
                            (Op::Close { .. }, Some(true)) => {
                                open.insert(h, false);
                            }
                            _ => {}
                        }
                    } else if let (Op::Open { .. }, Outcome::Ok(_)) = (&e.op, &e.result) {
                        return Err(self.err("a successful open without a handle"));
                    }
                    let mut e = e;
                    e.line = self.line;
                    room_for_one_more(&t).map_err(|m| self.err(m))?;
                    t.events.push(e);
                }
            }
        }
        if t.roots.is_empty() {
            return Err(TraceError {
                file: self.file.into(),
                line: None,
                reason: "no `root` line".into(),
            });
        }
        Ok(t)
    }

    fn event(&self, w: &[&str], roots: usize) -> Result<Event, TraceReason> {
        if w.len() < 6 || w[w.len() - 2] != "=" {
            return Err(format!(
                "{:?}: expected `TID START DUR OP ARGS... = RESULT` or a header line",
                w[0]
            )
            .into());
        }
        let tid: u32 = num(w[0], "thread id")?;
        let start_us = micros(w[1], "start")?;
        let dur_us = micros(w[2], "duration")?;
        let r = w[w.len() - 1];
        let result = if r.bytes().all(|b| b.is_ascii_digit()) {
            Outcome::Ok(num(r, "result")?)
        } else if r.len() > 1
            && r.starts_with('E')
            && r.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        {
            Outcome::Err(r.to_string())
        } else {
            return Err(format!("result {r:?} (a number or an errno name)").into());
        };
        let a = &w[4..w.len() - 2];
        let name = w[3];
        let want = |n: usize| -> Result<(), TraceReason> {
            if a.len() == n {
                Ok(())
            } else {
                Err(format!(
                    "{name} takes {n} argument{}, not {}",
                    if n == 1 { "" } else { "s" },
                    a.len()
                )
                .into())
            }
        };
        let p = |s: &str| self.path(s, roots);
        let vector = name.ends_with('v');
        let op = match name {
            "open" => {
                want(4)?;
                Op::Open {
                    handle: if a[0] == "-" {
                        None
                    } else {
                        Some(handle(a[0])?)
                    },
                    path: p(a[1])?,
                    flags: OpenFlags::parse(a[2])?,
                    mode: mode(a[3])?,
                }
            }
            "close" | "fsync" | "fdatasync" | "fstat" => {
                want(1)?;
                let handle = handle(a[0])?;
                match name {
                    "close" => Op::Close { handle },
                    "fsync" => Op::Fsync { handle },
                    "fdatasync" => Op::Fdatasync { handle },
                    _ => Op::Fstat { handle },
                }
            }
            "read" | "readv" | "write" | "writev" | "pread" | "preadv" | "pwrite" | "pwritev" => {
                let positioned = name.starts_with('p');
                want(if positioned { 3 } else { 2 })?;
                let offset = match positioned {
                    true => Some(offset(a[2], "offset")?),
                    false => None,
                };
                let write = name.contains("write");
                Op::io(write, handle(a[0])?, size(a[1], "size")?, offset, vector)
            }
            "lseek" => {
                want(3)?;
                let offset: i64 = num(a[1], "offset")?;
                if offset.unsigned_abs() > MAX_FILE {
                    return Err(TraceReason::Offset {
                        what: "offset",
                        value: offset.into(),
                    });
                }
                Op::Lseek {
                    handle: handle(a[0])?,
                    offset,
                    whence: match a[2] {
                        "set" => Whence::Set,
                        "cur" => Whence::Cur,
                        "end" => Whence::End,
                        o => return Err(format!("whence {o:?} (set, cur or end)").into()),
                    },
                }
            }
            "sync_file_range" => {
                want(3)?;
                Op::SyncFileRange {
                    handle: handle(a[0])?,
                    offset: offset(a[1], "offset")?,
                    len: offset(a[2], "length")?,
                }
            }
            "ftruncate" => {
                want(2)?;
                Op::Ftruncate {
                    handle: handle(a[0])?,
                    len: offset(a[1], "length")?,
                }
            }
            "truncate" => {
                want(2)?;
                Op::Truncate {
                    path: p(a[0])?,
                    len: offset(a[1], "length")?,
                }
            }
            "fallocate" => {
                want(4)?;
                Op::Fallocate {
                    handle: handle(a[0])?,
                    mode: num(a[1], "fallocate mode")?,
                    offset: offset(a[2], "offset")?,
                    len: offset(a[3], "length")?,
                }
            }
            "rename" if a.len() == 3 && a[2] != "noreplace" => {
                return Err(format!("rename flag {:?} (only noreplace)", a[2]).into())
            }
            "rename" | "link" => {
                let noreplace = name == "rename" && a.len() == 3;
                want(if noreplace { 3 } else { 2 })?;
                let (from, to) = (p(a[0])?, p(a[1])?);
                if name == "rename" {
                    Op::Rename {
                        from,
                        to,
                        noreplace,
                    }
                } else {
                    Op::Link { from, to }
                }
            }
            "symlink" => {
                want(2)?;
                let target = unescape(a[0])?;
                if target.is_empty() || target.contains(&0) || target.len() > 4096 {
                    return Err("symlink target: empty, with a NUL byte or too long".into());
                }
                Op::Symlink {
                    target,
                    path: p(a[1])?,
                }
            }
            "unlink" | "rmdir" | "stat" | "lstat" => {
                want(1)?;
                let path = p(a[0])?;
                match name {
                    "unlink" => Op::Unlink { path },
                    "rmdir" => Op::Rmdir { path },
                    "stat" => Op::Stat {
                        path,
                        nofollow: false,
                    },
                    _ => Op::Stat {
                        path,
                        nofollow: true,
                    },
                }
            }
            "mkdir" => {
                want(2)?;
                Op::Mkdir {
                    path: p(a[0])?,
                    mode: mode(a[1])?,
                }
            }
            other => {
                return Err(format!(
                    "unknown operation {other:?} (one of: {})",
                    OP_NAMES.join(", ")
                )
                .into())
            }
        };
        if let (Some(_), Outcome::Ok(n)) = (op.transfer(), &result) {
            let asked = match &op {
                Op::Read { size, .. }
                | Op::Pread { size, .. }
                | Op::Write { size, .. }
                | Op::Pwrite { size, .. } => *size,
                _ => 0,
            };
            if *n > asked {
                return Err(format!("result {n} is more than the {asked} bytes asked").into());
            }
        }
        Ok(Event {
            tid,
            start_us,
            dur_us,
            op,
            result,
            line: 0,
        })
    }
}

/// fio's iolog: `FILE add|open|close` and `FILE read|write|sync|datasync OFFSET LENGTH`
/// (v3: each line led by microseconds since the start). One thread; each file name
/// becomes a path beneath root 0 (a leading `/` dropped; `..` refused), created at the size
/// its highest transfer reaches.
fn parse_iolog(file: &str, text: &str, v3: bool) -> Result<Trace, TraceError> {
    let err = |line: u32, reason: TraceReason| TraceError {
        file: file.into(),
        line: Some(line),
        reason,
    };
    use TraceReason::Said;
    let mut t = Trace {
        roots: vec!["(fio iolog)".into()],
        format: format!("fio iolog v{}", if v3 { 3 } else { 2 }),
        ..Trace::default()
    };
    // Per file: its handle while open, and the size its transfers reach.
    let mut files: HashMap<TracePath, (Option<u32>, u64)> = HashMap::new();
    let mut order: Vec<TracePath> = Vec::new();
    let mut next_handle = 1u32;
    let mut last = 0u64;
    for (i, l) in text.split('\n').enumerate().skip(1) {
        let line = i as u32 + 1;
        let l = l.strip_suffix('\r').unwrap_or(l);
        if l.trim().is_empty() {
            continue;
        }
        // An open and a call at most per line.
        if t.events.len() + 2 > MAX_EVENTS {
            return Err(err(line, TraceReason::TooManyCalls));
        }
        let mut w: Vec<&str> = l.split_whitespace().collect();
        let mut at = last;
        if v3 {
            let ts: u64 = num(w[0], "timestamp").map_err(|e| err(line, e))?;
            at = ts;
            w.remove(0);
        }
        if at < last {
            return Err(err(line, Said(format!("timestamp {at} goes back"))));
        }
        if w.len() != 2 && w.len() != 4 {
            return Err(err(
                line,
                "expected `FILE add|open|close` or `FILE read|write|sync|datasync OFFSET \
                 LENGTH`"
                    .into(),
            ));
        }
        last = at;
        let name = w[0].trim_start_matches('/');
        let rel = check_rel(name.as_bytes()).map_err(|source| {
            err(
                line,
                TraceReason::File {
                    name: name.to_string(),
                    source,
                },
            )
        })?;
        if rel.is_empty() {
            return Err(err(line, Said(format!("file {:?} names no file", w[0]))));
        }
        let path = TracePath { root: 0, rel };
        if !files.contains_key(&path) {
            order.push(path.clone());
            files.insert(path.clone(), (None, 0));
        }
        let entry = files.get_mut(&path).expect("just inserted");
        let ev = |op: Op| Event {
            tid: 1,
            start_us: at,
            dur_us: 0,
            op,
            result: Outcome::Ok(0),
            line,
        };
        match (w[1], w.len()) {
            ("add", 2) => {}
            ("open", 2) => {
                if entry.0.is_some() {
                    return Err(err(line, Said(format!("{} opened twice", w[0]))));
                }
                entry.0 = Some(next_handle);
                t.events.push(ev(Op::Open {
                    handle: Some(next_handle),
                    path: path.clone(),
                    flags: OpenFlags {
                        read: true,
                        write: true,
                        ..Default::default()
                    },
                    mode: 0o644,
                }));
                next_handle += 1;
            }
            ("close", 2) => {
                let h = entry
                    .0
                    .take()
                    .ok_or_else(|| err(line, Said(format!("{} closed but not open", w[0]))))?;
                t.events.push(ev(Op::Close { handle: h }));
            }
            (act @ ("read" | "write" | "sync" | "datasync"), 4) => {
                let h = entry
                    .0
                    .ok_or_else(|| err(line, Said(format!("{} {act} before its open", w[0]))))?;
                let off = offset(w[2], "offset").map_err(|e| err(line, e))?;
                let len = size(w[3], "length").map_err(|e| err(line, e))?;
                entry.1 = entry.1.max(off + len);
                let mut e = ev(match act {
                    "read" | "write" => Op::io(act == "write", h, len, Some(off), false),
                    "sync" => Op::Fsync { handle: h },
                    _ => Op::Fdatasync { handle: h },
                });
                if len > 0 && matches!(act, "read" | "write") {
                    e.result = Outcome::Ok(len);
                }
                t.events.push(e);
            }
            (act, _) => {
                return Err(err(
                    line,
                    Said(format!(
                        "action {act:?} with {} fields (iolab replays add, open, close, read, \
                         write, sync, datasync; trim and wait are not replayed)",
                        w.len()
                    )),
                ))
            }
        }
    }
    if t.events.is_empty() {
        return Err(TraceError {
            file: file.into(),
            line: None,
            reason: "the iolog holds no I/O".into(),
        });
    }
    // The replay makes each file, at the size its I/O reaches, in the directories its name
    // needs.
    let mut dirs: Vec<TracePath> = Vec::new();
    for p in &order {
        let mut d = p.parent();
        while let Some(x) = d.filter(|x| !x.rel.is_empty()) {
            if !dirs.contains(&x) {
                dirs.push(x.clone());
            }
            d = x.parent();
        }
    }
    dirs.sort_by_key(|d| d.rel.len());
    t.initial.extend(dirs.into_iter().map(Initial::Dir));
    for p in order {
        let size = files[&p].1;
        t.initial.push(Initial::File(p, size));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "iolab-trace 1\nroot 0 /x%20y\ncommand t\nskipped outside 2\n\
        dir 0:d\nfile 0:d/f 100\n\
        7 0.000000 0.000010 open h1 0:d/f rw+creat 644 = 0\n\
        7 0.000020 0.000001 pread h1 4096 0 = 100\n\
        8 0.000030 0.000001 write h1 10 = 10\n\
        7 0.000040 0.000001 open - 0:nope r 0 = ENOENT\n\
        7 0.000050 0.000001 close h1 = 0\n";

    #[test]
    fn round_trip() {
        let t = parse("t", SAMPLE).unwrap();
        assert_eq!(t.roots, vec!["/x y".to_string()]);
        assert_eq!(t.events.len(), 5);
        assert_eq!(t.threads(), vec![7, 8]);
        assert_eq!(parse("t", &t.to_text()).unwrap().events.len(), 5);
        let mut again = parse("t", &t.to_text()).unwrap();
        for e in &mut again.events {
            e.line = 0;
        }
        let mut t0 = t.clone();
        for e in &mut t0.events {
            e.line = 0;
        }
        assert_eq!(again, t0);
    }

    #[test]
    fn the_command_line_round_trips() {
        let mut t = parse("t", SAMPLE).unwrap();
        for c in [" sh -c 'a\nb' 100% d\\x \"q\" \u{fc}\t ", "git commit -m x"] {
            t.command = Some(c.to_string());
            let text = t.to_text();
            assert_eq!(
                text.lines().filter(|l| l.starts_with("command ")).count(),
                1
            );
            assert_eq!(
                parse("t", &text).unwrap().command.as_deref(),
                Some(c),
                "{text}"
            );
        }
    }

    #[test]
    fn refusals_name_the_line() {
        let cases = [
            (SAMPLE.replace("0:d/f rw", "0:../f rw"), 7),
            (SAMPLE.replace("dir 0:d", "dir 1:d"), 5),
            (SAMPLE.replace("pread h1", "pread h2"), 8),
            (SAMPLE.replace("= 100", "= 5000"), 8),
            (SAMPLE.replace("0.000030", "0.000001"), 9),
            (SAMPLE.replace("close h1 = 0", "close h1 ="), 11),
            (SAMPLE.replace("iolab-trace 1", "iolab-trace 9"), 1),
            (SAMPLE.replace("dir 0:d\n", ""), 5),
        ];
        for (text, line) in cases {
            let e = parse("t", &text).unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert!(e.to_string().starts_with(&format!("t:{line}: ")), "{e}");
        }
    }

    #[test]
    fn fio_iologs() {
        let v2 = "fio version 2 iolog\n/tmp/a add\n/tmp/a open\n/tmp/a write 0 4096\n\
                  /tmp/a read 4096 4096\n/tmp/a close\n";
        let t = parse("l", v2).unwrap();
        assert_eq!(t.events.len(), 4);
        assert!(t.initial.contains(&Initial::File(
            TracePath {
                root: 0,
                rel: b"tmp/a".to_vec()
            },
            8192
        )));
        let v3 = "fio version 3 iolog\n0 f add\n5 f open\n9 f read 0 512\n3 f close\n";
        assert_eq!(parse("l", v3).unwrap_err().line, Some(5));
        let bad = "fio version 2 iolog\n../x open\n";
        assert_eq!(parse("l", bad).unwrap_err().line, Some(2));
        let trim = "fio version 2 iolog\nf open\nf trim 0 4096\n";
        assert!(parse("l", trim)
            .unwrap_err()
            .reason
            .to_string()
            .contains("trim"));
    }

    /// A reason keeps the error it came from: a number's parse error, beneath the same text.
    #[test]
    fn a_reason_keeps_the_error_it_came_from() {
        let e = parse("t", "iolab-trace 1\nroot 0 /x\nx 0.0 0.0 fsync h1 = 0\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "t:3: thread id \"x\" is not a number in range"
        );
        let reason = std::error::Error::source(&e).expect("the reason");
        let number = reason.source().expect("the number's error");
        assert!(number.is::<std::num::ParseIntError>(), "{number:?}");
        // A path's refusal keeps why the path is refused.
        let e = parse("t", "iolab-trace 1\nroot 0 /x\nfile 0:a/../b 1\n").unwrap_err();
        let rel = std::error::Error::source(&e).and_then(|r| r.source());
        assert_eq!(
            rel.and_then(|r| r.downcast_ref::<RelError>()),
            Some(&RelError::Dots("..".into())),
            "{e}"
        );
    }
}
