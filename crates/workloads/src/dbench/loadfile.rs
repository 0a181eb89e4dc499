//! dbench loadfiles: `[timestamp] Operation args... STATUS` lines, plain or gzipped, parsed
//! once into a compact operation list that every client replays.
//!
//! Paths are kept once each in a table (the same names recur thousands of times) and are
//! validated here, so a loadfile can only name `\clients` itself or something inside the
//! client's own directory `\clients\client1` (rebased onto `clients/clientN` at run time).

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use iolab_sys::input::{open_input, Bounded, InputError};
use serde::{Deserialize, Serialize};

/// An operation of the loadfile, named as dbench names it in its operation table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OpKind {
    NTCreateX,
    Close,
    Rename,
    Unlink,
    Deltree,
    Rmdir,
    Mkdir,
    Qpathinfo,
    Qfileinfo,
    Qfsinfo,
    Sfileinfo,
    Find,
    WriteX,
    ReadX,
    LockX,
    UnlockX,
    Flush,
    /// A pause of the client (`Sleep usec`); not timed, not in the operation table.
    Sleep,
}

impl OpKind {
    /// Every kind, in the order of dbench's operation table (Sleep last).
    pub const ALL: [OpKind; 18] = [
        OpKind::NTCreateX,
        OpKind::Close,
        OpKind::Rename,
        OpKind::Unlink,
        OpKind::Deltree,
        OpKind::Rmdir,
        OpKind::Mkdir,
        OpKind::Qpathinfo,
        OpKind::Qfileinfo,
        OpKind::Qfsinfo,
        OpKind::Sfileinfo,
        OpKind::Find,
        OpKind::WriteX,
        OpKind::ReadX,
        OpKind::LockX,
        OpKind::UnlockX,
        OpKind::Flush,
        OpKind::Sleep,
    ];

    /// The name in dbench's operation table.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::NTCreateX => "NTCreateX",
            OpKind::Close => "Close",
            OpKind::Rename => "Rename",
            OpKind::Unlink => "Unlink",
            OpKind::Deltree => "Deltree",
            OpKind::Rmdir => "Rmdir",
            OpKind::Mkdir => "Mkdir",
            OpKind::Qpathinfo => "Qpathinfo",
            OpKind::Qfileinfo => "Qfileinfo",
            OpKind::Qfsinfo => "Qfsinfo",
            OpKind::Sfileinfo => "Sfileinfo",
            OpKind::Find => "Find",
            OpKind::WriteX => "WriteX",
            OpKind::ReadX => "ReadX",
            OpKind::LockX => "LockX",
            OpKind::UnlockX => "UnlockX",
            OpKind::Flush => "Flush",
            OpKind::Sleep => "Sleep",
        }
    }

    /// Whether the operation appears in the operation table (all but Sleep).
    pub fn is_timed(self) -> bool {
        self != OpKind::Sleep
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The kind a loadfile word names: the table names, and the SMB names of the older
    /// loadfiles (dbench 3/4's client.txt) for the information and search calls.
    fn from_word(word: &str) -> Option<OpKind> {
        Some(match word {
            "NTCreateX" => OpKind::NTCreateX,
            "Close" => OpKind::Close,
            "Rename" => OpKind::Rename,
            "Unlink" => OpKind::Unlink,
            "Deltree" => OpKind::Deltree,
            "Rmdir" => OpKind::Rmdir,
            "Mkdir" => OpKind::Mkdir,
            "Qpathinfo" | "QUERY_PATH_INFORMATION" => OpKind::Qpathinfo,
            "Qfileinfo" | "QUERY_FILE_INFORMATION" => OpKind::Qfileinfo,
            "Qfsinfo" | "QUERY_FS_INFORMATION" => OpKind::Qfsinfo,
            "Sfileinfo" | "SET_FILE_INFORMATION" => OpKind::Sfileinfo,
            "Find" | "FIND_FIRST" => OpKind::Find,
            "WriteX" => OpKind::WriteX,
            "ReadX" => OpKind::ReadX,
            "LockX" => OpKind::LockX,
            "UnlockX" => OpKind::UnlockX,
            "Flush" => OpKind::Flush,
            "Sleep" => OpKind::Sleep,
            _ => return None,
        })
    }

    /// Argument names between the operation and the status; the first `required` of them
    /// must be present.
    fn args(self) -> (&'static [&'static str], usize) {
        match self {
            OpKind::NTCreateX => (&["path", "create_options", "create_disposition", "fnum"], 4),
            OpKind::Close | OpKind::Flush => (&["fnum"], 1),
            OpKind::Rename => (&["old_path", "new_path"], 2),
            OpKind::Unlink => (&["path", "attributes"], 1),
            OpKind::Deltree | OpKind::Rmdir | OpKind::Mkdir => (&["path"], 1),
            OpKind::Qpathinfo => (&["path", "level"], 1),
            OpKind::Qfileinfo | OpKind::Sfileinfo => (&["fnum", "level"], 1),
            OpKind::Qfsinfo => (&["level"], 0),
            OpKind::Find => (&["pattern", "level", "max_count", "count"], 4),
            OpKind::WriteX | OpKind::ReadX => (&["fnum", "offset", "size", "returned"], 4),
            OpKind::LockX | OpKind::UnlockX => (&["fnum", "offset", "size"], 3),
            OpKind::Sleep => (&["microseconds"], 1),
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which directory a loadfile path is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// `\clients`, shared by all clients (only created, queried or searched).
    Clients,
    /// `\clients\client1`, rebased to each client's own directory.
    Client,
}

/// A validated loadfile path: a base and a `/`-separated remainder (empty for the base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LPath {
    pub base: Base,
    pub rel: Box<str>,
}

impl LPath {
    /// As the loadfile wrote it (backslashes, `client1`).
    pub fn display(&self) -> String {
        let mut s = String::from(match self.base {
            Base::Clients => "\\clients",
            Base::Client => "\\clients\\client1",
        });
        if !self.rel.is_empty() {
            s.push('\\');
            s.push_str(&self.rel.replace('/', "\\"));
        }
        s
    }
}

/// One operation with its decoded arguments (paths are indexes into the path table).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Action {
    Create {
        path: u32,
        options: u32,
        disposition: u32,
        fnum: u32,
    },
    Close {
        fnum: u32,
    },
    Rename {
        from: u32,
        to: u32,
    },
    Unlink {
        path: u32,
    },
    Deltree {
        path: u32,
    },
    Rmdir {
        path: u32,
    },
    Mkdir {
        path: u32,
    },
    Qpathinfo {
        path: u32,
    },
    Qfileinfo {
        fnum: u32,
    },
    Qfsinfo,
    Sfileinfo {
        fnum: u32,
    },
    Find {
        path: u32,
        max_count: u32,
    },
    Write {
        fnum: u32,
        offset: u64,
        size: u32,
        ret: u32,
    },
    Read {
        fnum: u32,
        offset: u64,
        size: u32,
        ret: u32,
    },
    Lock {
        fnum: u32,
        offset: u64,
        size: u64,
    },
    Unlock {
        fnum: u32,
        offset: u64,
        size: u64,
    },
    Flush {
        fnum: u32,
    },
    Sleep {
        micros: u32,
    },
}

impl Action {
    pub fn kind(&self) -> OpKind {
        match self {
            Action::Create { .. } => OpKind::NTCreateX,
            Action::Close { .. } => OpKind::Close,
            Action::Rename { .. } => OpKind::Rename,
            Action::Unlink { .. } => OpKind::Unlink,
            Action::Deltree { .. } => OpKind::Deltree,
            Action::Rmdir { .. } => OpKind::Rmdir,
            Action::Mkdir { .. } => OpKind::Mkdir,
            Action::Qpathinfo { .. } => OpKind::Qpathinfo,
            Action::Qfileinfo { .. } => OpKind::Qfileinfo,
            Action::Qfsinfo => OpKind::Qfsinfo,
            Action::Sfileinfo { .. } => OpKind::Sfileinfo,
            Action::Find { .. } => OpKind::Find,
            Action::Write { .. } => OpKind::WriteX,
            Action::Read { .. } => OpKind::ReadX,
            Action::Lock { .. } => OpKind::LockX,
            Action::Unlock { .. } => OpKind::UnlockX,
            Action::Flush { .. } => OpKind::Flush,
            Action::Sleep { .. } => OpKind::Sleep,
        }
    }

    /// The first path the action names, if any.
    pub fn path(&self) -> Option<u32> {
        match *self {
            Action::Create { path, .. }
            | Action::Unlink { path }
            | Action::Deltree { path }
            | Action::Rmdir { path }
            | Action::Mkdir { path }
            | Action::Qpathinfo { path }
            | Action::Find { path, .. } => Some(path),
            Action::Rename { from, .. } => Some(from),
            _ => None,
        }
    }

    pub fn fnum(&self) -> Option<u32> {
        match *self {
            Action::Create { fnum, .. }
            | Action::Close { fnum }
            | Action::Qfileinfo { fnum }
            | Action::Sfileinfo { fnum }
            | Action::Write { fnum, .. }
            | Action::Read { fnum, .. }
            | Action::Lock { fnum, .. }
            | Action::Unlock { fnum, .. }
            | Action::Flush { fnum } => Some(fnum),
            _ => None,
        }
    }
}

/// The largest ReadX/WriteX a loadfile may ask for (buffers are sized from the loadfile).
pub(crate) const MAX_IO: u32 = 64 << 20;

/// No timestamp on the line.
pub(crate) const NO_TIME: u64 = u64::MAX;

/// One loadfile line: what to do, when (µs after the start of the loop, or NO_TIME), the
/// expected status (an index into the status table) and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Entry {
    pub action: Action,
    pub at_us: u64,
    pub line: u32,
    pub status: u16,
}

/// An expected status as written, and whether it means success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub text: Box<str>,
    pub ok: bool,
}

/// A parsed loadfile, shared read-only by all clients of a run.
#[derive(Debug, Clone)]
pub struct Loadfile {
    source: PathBuf,
    pub(crate) entries: Vec<Entry>,
    pub(crate) paths: Vec<LPath>,
    pub(crate) statuses: Vec<Status>,
}

impl Loadfile {
    /// The file it was read from (or the name given to [`Loadfile::parse_str`]).
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Number of operations (lines that are not blank or comments).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any line carries a timestamp (the replay then paces itself by them).
    pub fn has_timestamps(&self) -> bool {
        self.entries.iter().any(|e| e.at_us != NO_TIME)
    }

    /// How many operations of each kind one pass over the file makes, in table order,
    /// kinds that do not occur left out.
    pub fn op_counts(&self) -> Vec<(OpKind, u64)> {
        let mut n = [0u64; OpKind::ALL.len()];
        for e in &self.entries {
            n[e.action.kind().index()] += 1;
        }
        OpKind::ALL
            .iter()
            .filter(|k| n[k.index()] > 0)
            .map(|&k| (k, n[k.index()]))
            .collect()
    }

    /// Bytes that ReadX and WriteX lines ask for in one pass over the file.
    pub fn bytes_per_pass(&self) -> (u64, u64) {
        let (mut r, mut w) = (0, 0);
        for e in &self.entries {
            match e.action {
                Action::Read { size, .. } => r += size as u64,
                Action::Write { size, .. } => w += size as u64,
                _ => {}
            }
        }
        (r, w)
    }

    /// Whether two loadfiles make the same operations with the same expectations (wherever
    /// they were read from, plain or gzipped).
    pub fn same_operations(&self, other: &Loadfile) -> bool {
        self.entries.len() == other.entries.len()
            && self.entries.iter().zip(&other.entries).all(|(a, b)| {
                a.at_us == b.at_us
                    && a.line == b.line
                    && self.statuses[a.status as usize] == other.statuses[b.status as usize]
                    && a.action.kind() == b.action.kind()
                    && self.resolved(&a.action) == other.resolved(&b.action)
            })
    }

    /// An action with its paths spelled out, for comparisons across path tables.
    fn resolved(&self, a: &Action) -> (Action, Option<&LPath>, Option<&LPath>) {
        let p = |i: u32| Some(&self.paths[i as usize]);
        let mut norm = *a;
        let (first, second) = match &mut norm {
            Action::Rename { from, to } => {
                let r = (p(*from), p(*to));
                (*from, *to) = (0, 0);
                r
            }
            Action::Create { path, .. }
            | Action::Unlink { path }
            | Action::Deltree { path }
            | Action::Rmdir { path }
            | Action::Mkdir { path }
            | Action::Qpathinfo { path }
            | Action::Find { path, .. } => {
                let r = (p(*path), None);
                *path = 0;
                r
            }
            _ => (None, None),
        };
        (norm, first, second)
    }

    /// Parses loadfile text; `name` is what errors call the file.
    pub fn parse_str(name: impl Into<PathBuf>, text: &str) -> Result<Loadfile, LoadfileError> {
        let mut p = Parser::new(name.into());
        for (i, line) in text.lines().enumerate() {
            p.line(i as u32 + 1, line)?;
        }
        p.finish()
    }
}

/// A loadfile that could not be read or has a malformed line. Displays as
/// `FILE:LINE: reason: offending text` (or `FILE: reason` when no line is concerned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadfileError {
    pub file: PathBuf,
    /// 1-based line number; None when the file as a whole is at fault.
    pub line: Option<u32>,
    pub reason: String,
    /// The offending line as written.
    pub text: Option<String>,
}

impl fmt::Display for LoadfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": {}", self.reason)?;
        if let Some(t) = &self.text {
            // At most 80 characters of the line, control characters escaped.
            let shown: String = t
                .chars()
                .take(80)
                .flat_map(|c| {
                    let escaped: Vec<char> = if c.is_control() {
                        c.escape_default().collect()
                    } else {
                        vec![c]
                    };
                    escaped
                })
                .collect();
            let more = if t.chars().count() > 80 { "..." } else { "" };
            write!(f, ": {shown}{more}")?;
        }
        Ok(())
    }
}

impl std::error::Error for LoadfileError {}

/// The most bytes of a loadfile, and of its text once gunzipped.
pub const MAX_LOADFILE_BYTES: u64 = 256 << 20;
/// The longest line of a loadfile.
pub const MAX_LOADFILE_LINE: u64 = 64 << 10;

/// Reads and parses a loadfile (a regular file of at most [`MAX_LOADFILE_BYTES`], lines of
/// at most [`MAX_LOADFILE_LINE`]); gzip-compressed files (recognised by their magic bytes)
/// are decompressed on the fly, to at most [`MAX_LOADFILE_BYTES`] of text.
pub fn parse_loadfile(path: impl AsRef<Path>) -> Result<Loadfile, LoadfileError> {
    let path = path.as_ref();
    let whole = |reason: String| LoadfileError {
        file: path.to_path_buf(),
        line: None,
        reason,
        text: None,
    };
    let (file, _) = open_input(path, MAX_LOADFILE_BYTES).map_err(|e| whole(e.to_string()))?;
    let mut file = Bounded::new(file, MAX_LOADFILE_BYTES);
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(whole(InputError::from(e).to_string())),
        }
    }
    let head = std::io::Cursor::new(magic[..got].to_vec());
    let raw = head.chain(file);
    let gzipped = got == 2 && magic == [0x1f, 0x8b];
    let reader: Box<dyn Read> = if gzipped {
        Box::new(Bounded::new(
            flate2::read::MultiGzDecoder::new(raw),
            MAX_LOADFILE_BYTES,
        ))
    } else {
        Box::new(raw)
    };
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut p = Parser::new(path.to_path_buf());
    let mut buf = Vec::with_capacity(256);
    let mut lineno = 0u32;
    loop {
        buf.clear();
        let n = (&mut reader)
            .take(MAX_LOADFILE_LINE + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| {
                let e = InputError::from(e);
                whole(match e {
                    InputError::TooLarge { .. } if gzipped => format!(
                        "after line {lineno}: more than {MAX_LOADFILE_BYTES} bytes once gunzipped"
                    ),
                    e => format!("after line {lineno}: {e}"),
                })
            })?;
        if n == 0 {
            break;
        }
        lineno += 1;
        if buf.len() as u64 > MAX_LOADFILE_LINE {
            return Err(LoadfileError {
                file: path.to_path_buf(),
                line: Some(lineno),
                reason: format!("a line longer than {MAX_LOADFILE_LINE} bytes"),
                text: None,
            });
        }
        let text = std::str::from_utf8(&buf).map_err(|e| LoadfileError {
            file: path.to_path_buf(),
            line: Some(lineno),
            // The bytes themselves would garble the terminal: where they start is enough.
            reason: format!(
                "not UTF-8 text (first invalid byte in column {})",
                e.valid_up_to() + 1
            ),
            text: None,
        })?;
        p.line(lineno, text.trim_end_matches(['\n', '\r']))?;
    }
    p.finish()
}

struct Parser {
    file: PathBuf,
    entries: Vec<Entry>,
    paths: PathTable,
    statuses: Vec<Status>,
    tokens: Vec<String>,
}

/// Each distinct path once.
#[derive(Default)]
struct PathTable {
    paths: Vec<LPath>,
    index: std::collections::HashMap<(bool, Box<str>), u32>,
}

impl PathTable {
    fn intern(&mut self, p: LPath) -> u32 {
        let key = (p.base == Base::Clients, p.rel.clone());
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.paths.len() as u32;
        self.paths.push(p);
        self.index.insert(key, i);
        i
    }
}

fn intern_status(statuses: &mut Vec<Status>, text: &str, ok: bool) -> Option<u16> {
    if let Some(i) = statuses.iter().position(|s| &*s.text == text) {
        return Some(i as u16);
    }
    let i = u16::try_from(statuses.len()).ok()?;
    statuses.push(Status {
        text: text.into(),
        ok,
    });
    Some(i)
}

impl Parser {
    fn new(file: PathBuf) -> Parser {
        Parser {
            file,
            entries: Vec::new(),
            paths: PathTable::default(),
            statuses: Vec::new(),
            tokens: Vec::new(),
        }
    }

    fn finish(mut self) -> Result<Loadfile, LoadfileError> {
        if self.entries.is_empty() {
            // Reported at line 1, as every refusal names FILE:LINE.
            return Err(LoadfileError {
                file: self.file,
                line: Some(1),
                reason: "no operations in the loadfile (only blank lines and comments)".into(),
                text: None,
            });
        }
        self.entries.shrink_to_fit();
        let mut paths = self.paths.paths;
        paths.shrink_to_fit();
        Ok(Loadfile {
            source: self.file,
            entries: self.entries,
            paths,
            statuses: self.statuses,
        })
    }

    fn line(&mut self, lineno: u32, text: &str) -> Result<(), LoadfileError> {
        let err = |reason: String| LoadfileError {
            file: self.file.clone(),
            line: Some(lineno),
            reason,
            text: Some(text.trim().to_string()),
        };
        // Until the line is known to be an operation, a refusal shows none of it: a file
        // that is not a loadfile at all (a secret, say) is not printed.
        let blind = |reason: &str| LoadfileError {
            file: self.file.clone(),
            line: Some(lineno),
            reason: reason.to_string(),
            text: None,
        };
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return Ok(());
        }
        tokenize(trimmed, &mut self.tokens).map_err(&blind)?;
        let mut toks: &[String] = &self.tokens;

        let mut at_us = NO_TIME;
        if toks[0].starts_with(|c: char| c.is_ascii_digit()) {
            let secs: f64 = toks[0]
                .parse()
                .ok()
                .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| {
                    blind("bad timestamp: expected seconds (a number) before the operation")
                })?;
            at_us = (secs * 1e6).round().min((NO_TIME - 1) as f64) as u64;
            toks = &toks[1..];
        }
        let Some(word) = toks.first() else {
            return Err(blind("a timestamp without an operation"));
        };
        if word.starts_with("SMB") {
            return Err(blind(
                "this is a dbench 1 loadfile (SMB... operations); only the dbench 3/4 \
                 format is supported",
            ));
        }
        let kind = OpKind::from_word(word).ok_or_else(|| {
            blind(
                "not a loadfile line: expected an operation (NTCreateX, ReadX, WriteX, Close, \
                 ...) with its arguments and a status",
            )
        })?;
        let (names, required) = kind.args();
        if toks.len() < 2 {
            return Err(err(format!(
                "{kind} needs {} and a status (NT_STATUS_... or 0x...)",
                arg_list(names, required)
            )));
        }
        let status_tok = &toks[toks.len() - 1];
        let status_ok = parse_status(status_tok).ok_or_else(|| {
            err(format!(
                "missing status: the last field \"{status_tok}\" is not NT_STATUS_... or 0x..."
            ))
        })?;
        let args = &toks[1..toks.len() - 1];
        if args.len() < required {
            return Err(err(format!(
                "{kind} needs {}; missing {}",
                arg_list(names, required),
                names[args.len()..required].join(", ")
            )));
        }
        if args.len() > names.len() {
            return Err(err(format!(
                "{kind} takes {} before the status, found {} arguments",
                arg_list(names, required),
                args.len()
            )));
        }

        let num = |i: usize, max: u64| -> Result<u64, LoadfileError> {
            let t = &args[i];
            match parse_number(t) {
                Some(v) if v <= max => Ok(v),
                Some(_) => Err(err(format!(
                    "{} {t} is out of range (at most {max})",
                    names[i]
                ))),
                None => Err(err(format!("bad number \"{t}\" for {}", names[i]))),
            }
        };
        let u32n = |i: usize| num(i, u32::MAX as u64).map(|v| v as u32);
        let mut path = |i: usize, pattern: bool| -> Result<u32, LoadfileError> {
            let lp =
                parse_path(&args[i], pattern).map_err(|r| err(format!("{}: {r}", names[i])))?;
            Ok(self.paths.intern(lp))
        };

        let action = match kind {
            OpKind::NTCreateX => Action::Create {
                path: path(0, false)?,
                options: u32n(1)?,
                disposition: u32n(2)?,
                fnum: u32n(3)?,
            },
            OpKind::Close => Action::Close { fnum: u32n(0)? },
            OpKind::Rename => Action::Rename {
                from: path(0, false)?,
                to: path(1, false)?,
            },
            OpKind::Unlink => Action::Unlink {
                path: path(0, false)?,
            },
            OpKind::Deltree => Action::Deltree {
                path: path(0, false)?,
            },
            OpKind::Rmdir => Action::Rmdir {
                path: path(0, false)?,
            },
            OpKind::Mkdir => Action::Mkdir {
                path: path(0, false)?,
            },
            OpKind::Qpathinfo => Action::Qpathinfo {
                path: path(0, false)?,
            },
            OpKind::Qfileinfo => Action::Qfileinfo { fnum: u32n(0)? },
            OpKind::Qfsinfo => Action::Qfsinfo,
            OpKind::Sfileinfo => Action::Sfileinfo { fnum: u32n(0)? },
            OpKind::Find => Action::Find {
                path: path(0, true)?,
                max_count: u32n(2)?,
            },
            OpKind::WriteX | OpKind::ReadX => {
                let fnum = u32n(0)?;
                let offset = num(1, i64::MAX as u64)?;
                let size = num(2, MAX_IO as u64)? as u32;
                let ret = num(3, size as u64)? as u32;
                if kind == OpKind::WriteX {
                    Action::Write {
                        fnum,
                        offset,
                        size,
                        ret,
                    }
                } else {
                    Action::Read {
                        fnum,
                        offset,
                        size,
                        ret,
                    }
                }
            }
            OpKind::LockX | OpKind::UnlockX => {
                let fnum = u32n(0)?;
                let offset = num(1, i64::MAX as u64)?;
                let size = num(2, i64::MAX as u64)?;
                if kind == OpKind::LockX {
                    Action::Lock { fnum, offset, size }
                } else {
                    Action::Unlock { fnum, offset, size }
                }
            }
            OpKind::Flush => Action::Flush { fnum: u32n(0)? },
            OpKind::Sleep => Action::Sleep { micros: u32n(0)? },
        };
        // Informational arguments (levels, attributes, counts) are still checked to be numbers.
        let numeric_tail: &[usize] = match kind {
            OpKind::Unlink | OpKind::Qpathinfo | OpKind::Qfileinfo | OpKind::Sfileinfo => &[1],
            OpKind::Qfsinfo => &[0],
            OpKind::Find => &[1, 3],
            _ => &[],
        };
        for &i in numeric_tail {
            if i < args.len() {
                num(i, u64::MAX)?;
            }
        }
        // Shared \clients may only be created, opened, queried or searched, never changed.
        let touches_shared = |p: u32| self.paths.paths[p as usize].base == Base::Clients;
        let forbidden = match action {
            Action::Unlink { path } | Action::Deltree { path } | Action::Rmdir { path } => {
                touches_shared(path)
            }
            Action::Rename { from, to } => touches_shared(from) || touches_shared(to),
            _ => false,
        };
        if forbidden {
            return Err(err(format!(
                "{kind} would change \\clients, which all clients share; a loadfile may only \
                 change things inside \\clients\\client1"
            )));
        }
        let status = intern_status(&mut self.statuses, status_tok, status_ok)
            .ok_or_else(|| err("more than 65536 different status values in one loadfile".into()))?;
        self.entries.push(Entry {
            action,
            at_us,
            line: lineno,
            status,
        });
        Ok(())
    }
}

fn arg_list(names: &[&str], required: usize) -> String {
    let mut s = names[..required].join(" ");
    for n in &names[required..] {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push('[');
        s.push_str(n);
        s.push(']');
    }
    if s.is_empty() {
        s.push_str("no arguments");
    }
    s
}

/// Splits a line at blanks; double quotes group (and are removed), as dbench's tokenizer does.
fn tokenize(line: &str, out: &mut Vec<String>) -> Result<(), &'static str> {
    out.clear();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut have = false;
    for c in line.chars() {
        match c {
            '"' => {
                in_quote = !in_quote;
                have = true;
            }
            ' ' | '\t' if !in_quote => {
                if have {
                    out.push(std::mem::take(&mut cur));
                    have = false;
                }
            }
            _ => {
                cur.push(c);
                have = true;
            }
        }
    }
    if in_quote {
        return Err("unterminated quote");
    }
    if have {
        out.push(cur);
    }
    Ok(())
}

/// `NT_STATUS_OK` and `0x0` mean success; any other `NT_STATUS_*` or `0x<nonzero>` failure.
fn parse_status(tok: &str) -> Option<bool> {
    if let Some(name) = tok.strip_prefix("NT_STATUS_") {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return None;
        }
        return Some(name == "OK");
    }
    let hex = tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X"))?;
    let v = u64::from_str_radix(hex, 16).ok()?;
    Some(v == 0)
}

/// A number as C's strtol with base 0 reads it: decimal, `0x` hex or leading-0 octal.
fn parse_number(t: &str) -> Option<u64> {
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.is_empty() {
        return None;
    }
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok();
    }
    if t.len() > 1 && t.starts_with('0') {
        return u64::from_str_radix(&t[1..], 8).ok();
    }
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A loadfile path refused ([`parse_path`]), as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PathError {
    #[error("path \"{0}\" must start with \\ (\\clients\\client1\\...)")]
    Relative(String),
    #[error("path \"{0}\" contains . or ..")]
    Dots(String),
    #[error("path \"{0}\" is outside \\clients\\client1 (the client's own directory)")]
    Outside(String),
}

/// Validates a loadfile path: `\clients` or inside `\clients\client1`, no `.`/`..`. For a
/// Find pattern the last component is the pattern and may sit directly in `\clients`.
fn parse_path(tok: &str, pattern: bool) -> Result<LPath, PathError> {
    let norm = tok.replace('\\', "/");
    if !norm.starts_with('/') {
        return Err(PathError::Relative(tok.to_string()));
    }
    let comps: Vec<&str> = norm.split('/').filter(|c| !c.is_empty()).collect();
    if comps.iter().any(|c| *c == "." || *c == "..") {
        return Err(PathError::Dots(tok.to_string()));
    }
    let outside = || PathError::Outside(tok.to_string());
    if comps.first() != Some(&"clients") {
        return Err(outside());
    }
    match comps.get(1) {
        None => Ok(LPath {
            base: Base::Clients,
            rel: "".into(),
        }),
        Some(&"client1") => Ok(LPath {
            base: Base::Client,
            rel: comps[2..].join("/").into(),
        }),
        Some(last) if pattern && comps.len() == 2 => Ok(LPath {
            base: Base::Clients,
            rel: (*last).into(),
        }),
        Some(_) => Err(outside()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_stay_compact() {
        // Debian's client.txt has 458k lines: 40 bytes each keeps it under 20 MB.
        assert!(
            std::mem::size_of::<Entry>() <= 40,
            "{}",
            std::mem::size_of::<Entry>()
        );
    }

    #[test]
    fn numbers_like_strtol() {
        assert_eq!(parse_number("65536"), Some(65536));
        assert_eq!(parse_number("0x40"), Some(64));
        assert_eq!(parse_number("010"), Some(8));
        assert_eq!(parse_number("0"), Some(0));
        assert_eq!(parse_number("12a"), None);
        assert_eq!(parse_number("-1"), None);
        assert_eq!(parse_number(""), None);
    }

    #[test]
    fn statuses() {
        assert_eq!(parse_status("NT_STATUS_OK"), Some(true));
        assert_eq!(parse_status("0x00000000"), Some(true));
        assert_eq!(parse_status("NT_STATUS_NO_SUCH_FILE"), Some(false));
        assert_eq!(parse_status("0xc0000034"), Some(false));
        assert_eq!(parse_status("OK"), None);
        assert_eq!(parse_status("0xzz"), None);
    }

    #[test]
    fn tokens_and_quotes() {
        let mut t = Vec::new();
        tokenize(r#"Rename "\a b\c" "\d"  NT_STATUS_OK"#, &mut t).unwrap();
        assert_eq!(t, vec!["Rename", r"\a b\c", r"\d", "NT_STATUS_OK"]);
        assert!(tokenize(r#"Unlink "\x NT_STATUS_OK"#, &mut t).is_err());
    }

    #[test]
    fn paths() {
        let p = parse_path(r"\clients\client1\~dmtmp\WORD", false).unwrap();
        assert_eq!(p.base, Base::Client);
        assert_eq!(&*p.rel, "~dmtmp/WORD");
        assert_eq!(p.display(), r"\clients\client1\~dmtmp\WORD");
        assert_eq!(parse_path(r"\clients", false).unwrap().base, Base::Clients);
        assert_eq!(&*parse_path(r"\clients\client1", false).unwrap().rel, "");
        assert!(parse_path(r"\clients\client2\x", false).is_err());
        assert!(parse_path(r"\etc\passwd", false).is_err());
        assert!(parse_path(r"\clients\client1\..\..\x", false).is_err());
        assert!(parse_path(r"clients\client1\x", false).is_err());
        let f = parse_path(r"\clients\*", true).unwrap();
        assert_eq!((f.base, &*f.rel), (Base::Clients, "*"));
    }

    #[test]
    fn timestamps_and_old_names() {
        let lf = Loadfile::parse_str(
            "t",
            "0.500 QUERY_FS_INFORMATION 1 NT_STATUS_OK\nQfsinfo NT_STATUS_OK\n# c\n\n",
        )
        .unwrap();
        assert_eq!(lf.len(), 2);
        assert_eq!(lf.entries[0].at_us, 500_000);
        assert_eq!(lf.entries[1].at_us, NO_TIME);
        assert!(lf.has_timestamps());
        assert_eq!(lf.op_counts(), vec![(OpKind::Qfsinfo, 2)]);
    }

    #[test]
    fn shared_dir_is_protected() {
        let e = Loadfile::parse_str("t", "Deltree \"\\clients\" NT_STATUS_OK").unwrap_err();
        assert!(e.reason.contains("share"), "{e}");
        Loadfile::parse_str("t", "Mkdir \"\\clients\" NT_STATUS_OK").unwrap();
    }
}
