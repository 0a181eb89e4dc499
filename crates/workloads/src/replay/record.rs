//! `iolab record`: runs a command under strace (`-f -ttt -T -y -s 0`) and turns strace's
//! output into an iolab trace (`iolab_spec::trace`). strace rather than ptrace of our own:
//! it is a packaged, maintained decoder of every architecture's syscall ABI (openat2,
//! statx, clone3, the 32-bit compat calls), its `-y` prints the path behind every
//! descriptor and the cwd behind AT_FDCWD (so relative paths and dirfds resolve without a
//! model of the kernel), and `-s 0` keeps file contents out of its output altogether.
//! What is recorded: calls on paths beneath the `--root` directories, and calls on
//! descriptors opened from such paths; everything else is counted as skipped.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::fmt;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use iolab_spec::trace::{Event, Initial, Op, OpenFlags, Outcome, Trace, TracePath, Whence};

/// The calls strace is asked to trace (each given with `?`: no error where the
/// architecture lacks one).
const SYSCALLS: &str = "open openat openat2 creat close read pread64 readv preadv preadv2 \
    write pwrite64 writev pwritev pwritev2 lseek fsync fdatasync sync_file_range ftruncate \
    truncate fallocate rename renameat renameat2 link linkat symlink symlinkat unlink \
    unlinkat mkdir mkdirat rmdir stat lstat fstat newfstatat statx dup dup2 dup3 fcntl \
    chdir fchdir clone clone3 fork vfork";

/// The most entries the walk of the roots before the run keeps.
const MAX_ENTRIES: usize = 1_000_000;

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    pub output: PathBuf,
    pub roots: Vec<PathBuf>,
    pub command: Vec<OsString>,
}

/// What a recording did.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub trace: Trace,
    /// The command's exit status (None: killed by a signal).
    pub exit: Option<i32>,
    /// Wall time of the command under strace, seconds.
    pub seconds: f64,
}

#[derive(Debug)]
pub enum RecordError {
    /// Bad arguments: exit 2.
    Usage(String),
    Failed(String),
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Usage(m) | RecordError::Failed(m) => f.write_str(m),
        }
    }
}

/// Runs the command under strace in the current directory and writes the trace to
/// `cfg.output` (gzip when it ends in `.gz`).
pub fn record(cfg: &RecordConfig) -> Result<Recorded, RecordError> {
    if cfg.command.is_empty() {
        return Err(RecordError::Usage(
            "record: no command (iolab record -o TRACE [--root DIR]... -- COMMAND ARGS...)".into(),
        ));
    }
    let program = Path::new(&cfg.command[0]);
    let found = if program.as_os_str().as_bytes().contains(&b'/') {
        program.is_file()
    } else {
        program.to_str().and_then(iolab_sys::find_tool).is_some()
    };
    if !found {
        return Err(RecordError::Usage(format!(
            "record: command {} not found",
            program.display()
        )));
    }
    let mut roots = Vec::new();
    for r in &cfg.roots {
        let c = std::fs::canonicalize(r)
            .map_err(|e| RecordError::Usage(format!("--root {}: {e}", r.display())))?;
        if !c.is_dir() {
            return Err(RecordError::Usage(format!(
                "--root {}: not a directory",
                r.display()
            )));
        }
        roots.push(c);
    }
    if roots.is_empty() {
        let c = std::env::current_dir()
            .and_then(std::fs::canonicalize)
            .map_err(|e| RecordError::Failed(format!("the current directory: {e}")))?;
        roots.push(c);
    }
    if let Some(parent) = cfg.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(RecordError::Usage(format!(
                "-o {}: {} is not a directory",
                cfg.output.display(),
                parent.display()
            )));
        }
    }
    let strace = iolab_sys::find_tool("strace").ok_or_else(|| {
        RecordError::Failed("record needs strace (Debian: apt-get install strace)".into())
    })?;
    let before = walk(&roots)?;
    let tmp = tempdir()?;
    let raw = tmp.join("strace.out");
    let filter: Vec<String> = SYSCALLS
        .split_whitespace()
        .map(|s| format!("?{s}"))
        .collect();
    let t0 = std::time::Instant::now();
    let status = Command::new(&strace)
        .args(["-f", "-ttt", "-T", "-y", "-s", "0", "-qq", "-o"])
        .arg(&raw)
        .arg(format!("-etrace={}", filter.join(",")))
        .arg("--")
        .args(&cfg.command)
        .status();
    let seconds = t0.elapsed().as_secs_f64();
    let result = status
        .map_err(|e| RecordError::Failed(format!("cannot run {}: {e}", strace.display())))
        .and_then(|status| {
            let text = std::fs::read(&raw).map_err(|e| {
                RecordError::Failed(format!("strace wrote no output ({}): {e}", raw.display()))
            })?;
            let cwd = std::env::current_dir().unwrap_or_default();
            let mut trace = convert(&String::from_utf8_lossy(&text), &roots, &cwd, &before);
            trace.command = Some(
                cfg.command
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            Ok(Recorded {
                trace,
                exit: status.code(),
                seconds,
            })
        });
    let _ = std::fs::remove_dir_all(&tmp);
    let rec = result?;
    write_trace(&cfg.output, &rec.trace)
        .map_err(|e| RecordError::Failed(format!("{}: {e}", cfg.output.display())))?;
    Ok(rec)
}

fn tempdir() -> Result<PathBuf, RecordError> {
    let base = std::env::temp_dir();
    for _ in 0..100 {
        let p = base.join(format!("iolab-record-{:016x}", fastrand::u64(..)));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(RecordError::Failed(format!("{}: {e}", p.display()))),
        }
    }
    Err(RecordError::Failed("no free temporary directory".into()))
}

/// Writes `trace`, gzipped when `path` ends in `.gz`; through a temporary name, so a
/// failed write leaves no half trace.
pub fn write_trace(path: &Path, trace: &Trace) -> io::Result<()> {
    let text = trace.to_text();
    let tmp = PathBuf::from(format!("{}.partial", path.display()));
    let res = (|| {
        let f = std::fs::File::create(&tmp)?;
        if path.extension().is_some_and(|e| e == "gz") {
            let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
            gz.write_all(text.as_bytes())?;
            gz.finish()?.sync_all()?;
        } else {
            let mut f = f;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// What existed in the roots before the run: directories, and files with their sizes
/// (nothing else: links and devices are not recreated).
fn walk(roots: &[PathBuf]) -> Result<HashMap<PathBuf, Option<u64>>, RecordError> {
    let mut out = HashMap::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(d) = stack.pop() {
        let cannot = |e: io::Error| {
            RecordError::Failed(format!(
                "cannot list {} (the trace needs what the roots hold): {e}",
                d.display()
            ))
        };
        for e in std::fs::read_dir(&d).map_err(cannot)? {
            let e = e.map_err(cannot)?;
            let m = match e.path().symlink_metadata() {
                Ok(m) => m,
                // Gone since it was listed: it is not there when the command starts.
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => return Err(cannot(err)),
            };
            if m.is_dir() {
                out.insert(e.path(), None);
                stack.push(e.path());
            } else if m.is_file() {
                out.insert(e.path(), Some(m.len()));
            }
            if out.len() > MAX_ENTRIES {
                return Err(RecordError::Usage(format!(
                    "--root: more than {MAX_ENTRIES} entries beneath the roots; name a \
                     smaller directory"
                )));
            }
        }
    }
    Ok(out)
}

/// One syscall line of strace, unfinished and resumed halves joined.
#[derive(Debug, Clone)]
struct Call {
    tid: u32,
    time_us: u64,
    name: String,
    args: Vec<String>,
    /// The return: a number (None for `?`), the errno name, the `<path>` of a returned fd.
    ret: Option<i64>,
    errno: Option<String>,
    /// The `<path>` strace printed after a returned descriptor.
    ret_path: Option<Vec<u8>>,
    dur_us: u64,
}

/// Splits `a, b, {c, d}, "e, f"` at top-level commas.
fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut in_fd = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            cur.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        if in_fd {
            cur.push(c);
            if c == '>' && matches!(chars.peek(), None | Some(',') | Some(')') | Some(' ')) {
                in_fd = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                cur.push(c);
            }
            '<' if cur.ends_with(|p: char| p.is_ascii_digit()) || cur.ends_with("AT_FDCWD") => {
                in_fd = true;
                cur.push(c);
            }
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// A C string as strace prints it, unescaped; None when the argument is not one.
fn cstring(s: &str) -> Option<Vec<u8>> {
    let s = s.strip_prefix('"')?;
    let end = s.rfind('"')?;
    let b = &s.as_bytes()[..end];
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 >= b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        match b[i] {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'v' => out.push(0x0b),
            b'f' => out.push(0x0c),
            b'x' => {
                let h = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(h, 16).ok()?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut v = 0u32;
                let mut n = 0;
                while n < 3 && i < b.len() && (b'0'..=b'7').contains(&b[i]) {
                    v = v * 8 + u32::from(b[i] - b'0');
                    i += 1;
                    n += 1;
                }
                out.push(v as u8);
                continue;
            }
            c => out.push(c),
        }
        i += 1;
    }
    Some(out)
}

/// `3</a/b>` → (3, Some("/a/b")); `AT_FDCWD</x>` → (-100, Some("/x")); `7` → (7, None).
fn fd_arg(s: &str) -> Option<(i32, Option<Vec<u8>>)> {
    let (num, path) = match s.find('<') {
        Some(i) if s.ends_with('>') => (&s[..i], Some(s.as_bytes()[i + 1..s.len() - 1].to_vec())),
        _ => (s, None),
    };
    let fd = if num == "AT_FDCWD" {
        -100
    } else {
        num.parse().ok()?
    };
    Some((fd, path))
}

fn stamp_us(s: &str) -> Option<u64> {
    let (w, f) = s.split_once('.')?;
    let w: u64 = w.parse().ok()?;
    let f: u64 = format!("{f:0<6}").get(..6)?.parse().ok()?;
    Some(w * 1_000_000 + f)
}

/// Parses strace's output into calls, joining `<unfinished ...>` with `<... resumed>`.
fn calls(text: &str) -> Vec<Call> {
    let mut pending: HashMap<u32, (u64, String)> = HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        // `TID TIME REST`; strace pads the thread id with spaces.
        let Some((tid, r)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Some((time, rest)) = r.trim_start().split_once(' ') else {
            continue;
        };
        let (Ok(tid), Some(time)) = (tid.parse::<u32>(), stamp_us(time)) else {
            continue;
        };
        let (start, full) = if let Some(r) = rest.strip_prefix("<... ") {
            let Some((name, tail)) = r.split_once(" resumed>") else {
                continue;
            };
            match pending.remove(&tid) {
                Some((t, head)) if head.starts_with(name) => (t, format!("{head}{tail}")),
                _ => continue,
            }
        } else if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(tid, (time, head.to_string()));
            continue;
        } else {
            (time, rest.to_string())
        };
        if let Some(c) = parse_call(tid, start, &full) {
            out.push(c);
        }
    }
    // strace writes each thread's lines in order; across threads by when the call began.
    out.sort_by_key(|c| c.time_us);
    out
}

fn parse_call(tid: u32, time_us: u64, s: &str) -> Option<Call> {
    let open = s.find('(')?;
    let name = &s[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let eq = s.rfind(") = ")?;
    let args = split_args(&s[open + 1..eq]);
    let mut tail = &s[eq + 4..];
    let mut dur_us = 0;
    if let Some(i) = tail.rfind(" <") {
        if let Some(d) = tail[i + 2..].strip_suffix('>').and_then(stamp_us) {
            dur_us = d;
            tail = &tail[..i];
        }
    }
    let mut words = tail.split(' ');
    let first = words.next().unwrap_or("?");
    let num = first.split('<').next().unwrap_or("");
    let ret = if let Some(h) = num.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else {
        num.parse::<i64>().ok()
    };
    let errno = if ret == Some(-1) {
        words.next().map(str::to_string)
    } else {
        None
    };
    let ret_path = match tail.find('<') {
        Some(i) if tail.ends_with('>') && ret.is_some() => {
            Some(tail.as_bytes()[i + 1..tail.len() - 1].to_vec())
        }
        _ => None,
    };
    Some(Call {
        tid,
        time_us,
        name: name.to_string(),
        args,
        ret,
        errno,
        ret_path,
        dur_us,
    })
}

/// Lexically normalised absolute path (`.` and `..` folded; no link is read).
fn normalise(p: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in p.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::new();
    for c in parts {
        out.push(b'/');
        out.extend_from_slice(c);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

struct Converter {
    roots: Vec<Vec<u8>>,
    /// Per thread: its descriptor table's index.
    table_of: HashMap<u32, usize>,
    tables: Vec<HashMap<i32, u32>>,
    cwd: HashMap<u32, Vec<u8>>,
    start_cwd: Vec<u8>,
    /// Handle → (references, still open).
    refs: HashMap<u32, u32>,
    next_handle: u32,
    events: Vec<Event>,
    skipped: std::collections::BTreeMap<&'static str, u64>,
    used: BTreeSet<TracePath>,
}

/// Turns strace's output into a trace: `roots` canonical, `cwd` the command's start
/// directory, `before` what the roots held before the run.
fn convert(
    text: &str,
    roots: &[PathBuf],
    cwd: &Path,
    before: &HashMap<PathBuf, Option<u64>>,
) -> Trace {
    let mut c = Converter {
        roots: roots
            .iter()
            .map(|r| r.as_os_str().as_bytes().to_vec())
            .collect(),
        table_of: HashMap::new(),
        tables: Vec::new(),
        cwd: HashMap::new(),
        start_cwd: cwd.as_os_str().as_bytes().to_vec(),
        refs: HashMap::new(),
        next_handle: 1,
        events: Vec::new(),
        skipped: Default::default(),
        used: BTreeSet::new(),
    };
    for call in calls(text) {
        c.call(&call);
    }
    let t0 = c.events.first().map_or(0, |e| e.start_us);
    for e in &mut c.events {
        e.start_us -= t0;
    }
    // The initial state the replay needs: what existed of every used path and its parents.
    let mut needed: BTreeSet<TracePath> = BTreeSet::new();
    for p in &c.used {
        let mut x = Some(p.clone());
        while let Some(q) = x.filter(|q| !q.rel.is_empty()) {
            x = q.parent();
            needed.insert(q);
        }
    }
    let mut initial: Vec<Initial> = Vec::new();
    for p in needed {
        let mut abs = c.roots[p.root as usize].clone();
        abs.push(b'/');
        abs.extend_from_slice(&p.rel);
        match before.get(Path::new(std::ffi::OsStr::from_bytes(&abs))) {
            Some(None) => initial.push(Initial::Dir(p)),
            Some(Some(size)) => initial.push(Initial::File(p, *size)),
            None => {}
        }
    }
    // Parents before children.
    initial.sort_by_key(|i| {
        (
            i.path().rel.iter().filter(|&&b| b == b'/').count(),
            i.path().clone(),
        )
    });
    Trace {
        roots: roots
            .iter()
            .map(|r| r.to_string_lossy().into_owned())
            .collect(),
        command: None,
        skipped: c.skipped.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        initial,
        events: c.events,
        format: iolab_spec::trace::MAGIC.into(),
    }
}

/// O_* flags as strace prints them.
fn open_flags(s: &str) -> OpenFlags {
    let mut f = OpenFlags::default();
    for w in s.split('|') {
        match w {
            "O_RDONLY" => f.read = true,
            "O_WRONLY" => f.write = true,
            "O_RDWR" => (f.read, f.write) = (true, true),
            "O_CREAT" => f.create = true,
            "O_EXCL" => f.excl = true,
            "O_TRUNC" => f.trunc = true,
            "O_APPEND" => f.append = true,
            "O_SYNC" => f.sync = true,
            "O_DSYNC" => f.dsync = true,
            "O_DIRECT" => f.direct = true,
            "O_DIRECTORY" => f.directory = true,
            _ => {}
        }
    }
    if !f.write {
        f.read = true;
    }
    f
}

fn fallocate_mode(s: &str) -> u32 {
    s.split('|')
        .map(|w| match w {
            "FALLOC_FL_KEEP_SIZE" => 1,
            "FALLOC_FL_PUNCH_HOLE" => 2,
            "FALLOC_FL_NO_HIDE_STALE" => 4,
            "FALLOC_FL_COLLAPSE_RANGE" => 8,
            "FALLOC_FL_ZERO_RANGE" => 0x10,
            "FALLOC_FL_INSERT_RANGE" => 0x20,
            "FALLOC_FL_UNSHARE_RANGE" => 0x40,
            n => n.parse().unwrap_or(0),
        })
        .fold(0, |a, b| a | b)
}

/// `{iov_base=..., iov_len=N}, ...`: the sum of the lengths.
fn iov_total(s: &str) -> u64 {
    s.split("iov_len=")
        .skip(1)
        .filter_map(|t| {
            t.split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse::<u64>().ok())
        })
        .sum()
}

impl Converter {
    fn table(&mut self, tid: u32) -> usize {
        if let Some(t) = self.table_of.get(&tid) {
            return *t;
        }
        self.tables.push(HashMap::new());
        let t = self.tables.len() - 1;
        self.table_of.insert(tid, t);
        t
    }

    fn skip(&mut self, why: &'static str) {
        *self.skipped.entry(why).or_default() += 1;
    }

    /// An absolute path → beneath which root (the longest that holds it).
    fn beneath(&self, abs: &[u8]) -> Option<TracePath> {
        let abs = normalise(abs);
        let mut best: Option<(usize, TracePath)> = None;
        for (i, r) in self.roots.iter().enumerate() {
            let rest = if abs == *r {
                Some(&[][..])
            } else {
                abs.strip_prefix(r.as_slice())
                    .and_then(|x| x.strip_prefix(b"/"))
            };
            if let Some(rest) = rest {
                if best.as_ref().is_none_or(|(l, _)| r.len() > *l) {
                    best = Some((
                        r.len(),
                        TracePath {
                            root: i as u32,
                            rel: rest.to_vec(),
                        },
                    ));
                }
            }
        }
        best.map(|(_, p)| p)
    }

    /// A path argument resolved against its dirfd argument (or the thread's cwd).
    fn resolve(&mut self, tid: u32, dirfd: Option<&str>, path: &str) -> Option<Vec<u8>> {
        let p = cstring(path)?;
        if p.starts_with(b"/") {
            return Some(p);
        }
        let base = match dirfd.and_then(fd_arg) {
            Some((-100, Some(cwd))) => {
                self.cwd.insert(tid, cwd.clone());
                cwd
            }
            Some((_, Some(dir))) => dir,
            Some((_, None)) => return None,
            None => self.cwd.get(&tid).unwrap_or(&self.start_cwd).clone(),
        };
        let mut out = base;
        if !p.is_empty() {
            out.push(b'/');
            out.extend_from_slice(&p);
        }
        Some(out)
    }

    /// The handle a descriptor argument stands for, or the reason the call is skipped.
    fn handle(&mut self, tid: u32, arg: Option<&String>) -> Result<u32, &'static str> {
        let (fd, path) = arg.and_then(|a| fd_arg(a)).ok_or("undecoded")?;
        let t = self.table(tid);
        if let Some(h) = self.tables[t].get(&fd) {
            return Ok(*h);
        }
        match path.and_then(|p| self.beneath(&p)) {
            Some(_) => Err("untracked"),
            None => Err("outside"),
        }
    }

    fn emit(&mut self, c: &Call, op: Op) {
        for p in op.paths() {
            self.used.insert(p.clone());
        }
        let result = match (&c.errno, c.ret) {
            (Some(e), _) => Outcome::Err(e.clone()),
            // An open's descriptor number means nothing elsewhere: success is 0.
            (None, Some(_)) if matches!(op, Op::Open { .. }) => Outcome::Ok(0),
            (None, Some(n)) if n >= 0 => Outcome::Ok(n as u64),
            _ => Outcome::Ok(0),
        };
        self.events.push(Event {
            tid: c.tid,
            start_us: c.time_us,
            dur_us: c.dur_us,
            op,
            result,
            line: 0,
        });
    }

    fn path_op(
        &mut self,
        c: &Call,
        dirfd: Option<usize>,
        path: usize,
    ) -> Result<TracePath, &'static str> {
        let d = dirfd.and_then(|i| c.args.get(i).cloned());
        let p = c.args.get(path).ok_or("undecoded")?;
        let abs = self.resolve(c.tid, d.as_deref(), p).ok_or("undecoded")?;
        self.beneath(&abs).ok_or("outside")
    }

    fn call(&mut self, c: &Call) {
        if let Err(why) = self.try_call(c) {
            if !why.is_empty() {
                self.skip(why);
            }
        }
    }

    /// Records `c`; Err(reason) when it is left out ("" when it is not counted at all:
    /// process and descriptor bookkeeping).
    fn try_call(&mut self, c: &Call) -> Result<(), &'static str> {
        let a = |i: usize| c.args.get(i).map(String::as_str).unwrap_or("");
        let ok = c.errno.is_none() && c.ret.is_some_and(|r| r >= 0);
        let num = |i: usize| -> u64 { a(i).parse().unwrap_or(0) };
        match c.name.as_str() {
            "clone" | "clone3" | "fork" | "vfork" => {
                let Some(child) = c.ret.filter(|_| ok).map(|r| r as u32) else {
                    return Err("");
                };
                let parent = self.table(c.tid);
                let shared = c.args.iter().any(|x| x.contains("CLONE_FILES"));
                let t = if shared {
                    parent
                } else {
                    let copy = self.tables[parent].clone();
                    for h in copy.values() {
                        *self.refs.entry(*h).or_default() += 1;
                    }
                    self.tables.push(copy);
                    self.tables.len() - 1
                };
                self.table_of.insert(child, t);
                if let Some(cwd) = self.cwd.get(&c.tid).cloned() {
                    self.cwd.insert(child, cwd);
                }
                Err("")
            }
            "chdir" | "fchdir" => {
                if ok {
                    let to = if c.name == "chdir" {
                        self.resolve(c.tid, None, a(0))
                    } else {
                        fd_arg(a(0)).and_then(|(_, p)| p)
                    };
                    if let Some(to) = to {
                        self.cwd.insert(c.tid, normalise(&to));
                    }
                }
                Err("")
            }
            "dup" | "dup2" | "dup3" | "fcntl" => {
                if c.name == "fcntl" && !a(1).starts_with("F_DUPFD") {
                    return Err("");
                }
                let Some(newfd) = c.ret.filter(|_| ok) else {
                    return Err("");
                };
                let t = self.table(c.tid);
                if let Some((fd, _)) = fd_arg(a(0)) {
                    if let Some(h) = self.tables[t].get(&fd).copied() {
                        self.tables[t].insert(newfd as i32, h);
                        *self.refs.entry(h).or_default() += 1;
                    } else {
                        self.tables[t].remove(&(newfd as i32));
                    }
                }
                Err("")
            }
            "open" | "openat" | "openat2" | "creat" => {
                let (dirfd, path, flags, mode) = match c.name.as_str() {
                    "open" => (None, 0, a(1).to_string(), a(2).to_string()),
                    "creat" => (
                        None,
                        0,
                        "O_WRONLY|O_CREAT|O_TRUNC".to_string(),
                        a(1).to_string(),
                    ),
                    "openat" => (Some(0), 1, a(2).to_string(), a(3).to_string()),
                    _ => {
                        let how = a(2);
                        let field = |k: &str| {
                            how.split(k)
                                .nth(1)
                                .map(|r| r.split([',', '}']).next().unwrap_or("").to_string())
                                .unwrap_or_default()
                        };
                        (Some(0), 1, field("flags="), field("mode="))
                    }
                };
                // An unnamed temporary file has no path to replay.
                let unsupported = flags.contains("O_TMPFILE");
                // A successful open's path is the kernel's (links resolved).
                let target = if unsupported {
                    Err("unsupported")
                } else if ok {
                    match c.ret_path.as_deref().and_then(|p| self.beneath(p)) {
                        Some(p) => Ok(p),
                        None => self.path_op(c, dirfd, path),
                    }
                } else {
                    self.path_op(c, dirfd, path)
                };
                let t = self.table(c.tid);
                if ok {
                    // The descriptor number is taken now, whatever it was before.
                    if let Some(old) = self.tables[t].remove(&(c.ret.unwrap_or(0) as i32)) {
                        self.release(old);
                    }
                }
                let target = target?;
                let handle = ok.then(|| {
                    let h = self.next_handle;
                    self.next_handle += 1;
                    self.tables[t].insert(c.ret.unwrap_or(0) as i32, h);
                    self.refs.insert(h, 1);
                    h
                });
                let flags = open_flags(&flags);
                let mode = if flags.create {
                    u32::from_str_radix(mode.trim_start_matches("0o"), 8).unwrap_or(0o644) & 0o7777
                } else {
                    0
                };
                self.emit(
                    c,
                    Op::Open {
                        handle,
                        path: target,
                        flags,
                        mode,
                    },
                );
                Ok(())
            }
            "close" => {
                let h = self.handle(c.tid, c.args.first())?;
                let t = self.table(c.tid);
                if let Some((fd, _)) = fd_arg(a(0)) {
                    self.tables[t].remove(&fd);
                }
                if self.release(h) {
                    self.emit(c, Op::Close { handle: h });
                    Ok(())
                } else {
                    Err("")
                }
            }
            "read" | "write" | "readv" | "writev" | "pread64" | "pwrite64" | "preadv"
            | "pwritev" | "preadv2" | "pwritev2" => {
                let handle = self.handle(c.tid, c.args.first())?;
                let vector = c.name.contains('v');
                let size = if vector { iov_total(a(1)) } else { num(2) };
                let offset = c.name.starts_with('p').then(|| num(3));
                let write = c.name.contains("write");
                self.emit(c, Op::io(write, handle, size, offset, vector));
                Ok(())
            }
            "lseek" => {
                let handle = self.handle(c.tid, c.args.first())?;
                let whence = match a(2) {
                    "SEEK_SET" => Whence::Set,
                    "SEEK_CUR" => Whence::Cur,
                    "SEEK_END" => Whence::End,
                    _ => return Err("unsupported"),
                };
                self.emit(
                    c,
                    Op::Lseek {
                        handle,
                        offset: a(1).parse().unwrap_or(0),
                        whence,
                    },
                );
                Ok(())
            }
            "fsync" | "fdatasync" | "fstat" => {
                let handle = self.handle(c.tid, c.args.first())?;
                let op = match c.name.as_str() {
                    "fsync" => Op::Fsync { handle },
                    "fdatasync" => Op::Fdatasync { handle },
                    _ => Op::Fstat { handle },
                };
                self.emit(c, op);
                Ok(())
            }
            "sync_file_range" => {
                let handle = self.handle(c.tid, c.args.first())?;
                self.emit(
                    c,
                    Op::SyncFileRange {
                        handle,
                        offset: num(1),
                        len: num(2),
                    },
                );
                Ok(())
            }
            "ftruncate" => {
                let handle = self.handle(c.tid, c.args.first())?;
                self.emit(
                    c,
                    Op::Ftruncate {
                        handle,
                        len: num(1),
                    },
                );
                Ok(())
            }
            "truncate" => {
                let path = self.path_op(c, None, 0)?;
                self.emit(c, Op::Truncate { path, len: num(1) });
                Ok(())
            }
            "fallocate" => {
                let handle = self.handle(c.tid, c.args.first())?;
                self.emit(
                    c,
                    Op::Fallocate {
                        handle,
                        mode: fallocate_mode(a(1)),
                        offset: num(2),
                        len: num(3),
                    },
                );
                Ok(())
            }
            "rename" | "renameat" | "renameat2" => {
                let (from, to) = if c.name == "rename" {
                    (self.path_op(c, None, 0)?, self.path_op(c, None, 1)?)
                } else {
                    (self.path_op(c, Some(0), 1)?, self.path_op(c, Some(2), 3)?)
                };
                let noreplace = match (c.name.as_str(), a(4)) {
                    ("renameat2", "RENAME_NOREPLACE") => true,
                    ("renameat2", "0") | ("rename" | "renameat", _) => false,
                    _ => return Err("unsupported"),
                };
                self.emit(
                    c,
                    Op::Rename {
                        from,
                        to,
                        noreplace,
                    },
                );
                Ok(())
            }
            "link" | "linkat" => {
                let (from, to) = if c.name == "link" {
                    (self.path_op(c, None, 0)?, self.path_op(c, None, 1)?)
                } else {
                    (self.path_op(c, Some(0), 1)?, self.path_op(c, Some(2), 3)?)
                };
                self.emit(c, Op::Link { from, to });
                Ok(())
            }
            "symlink" | "symlinkat" => {
                let target = cstring(a(0)).filter(|t| !t.is_empty()).ok_or("undecoded")?;
                let path = if c.name == "symlink" {
                    self.path_op(c, None, 1)?
                } else {
                    self.path_op(c, Some(1), 2)?
                };
                self.emit(c, Op::Symlink { target, path });
                Ok(())
            }
            "unlink" | "rmdir" => {
                let path = self.path_op(c, None, 0)?;
                let op = if c.name == "unlink" {
                    Op::Unlink { path }
                } else {
                    Op::Rmdir { path }
                };
                self.emit(c, op);
                Ok(())
            }
            "unlinkat" => {
                let path = self.path_op(c, Some(0), 1)?;
                let op = if a(2).contains("AT_REMOVEDIR") {
                    Op::Rmdir { path }
                } else {
                    Op::Unlink { path }
                };
                self.emit(c, op);
                Ok(())
            }
            "mkdir" | "mkdirat" => {
                let (path, mode) = if c.name == "mkdir" {
                    (self.path_op(c, None, 0)?, a(1))
                } else {
                    (self.path_op(c, Some(0), 1)?, a(2))
                };
                let mode = u32::from_str_radix(mode.trim_start_matches("0o"), 8).unwrap_or(0o755);
                self.emit(
                    c,
                    Op::Mkdir {
                        path,
                        mode: mode & 0o7777,
                    },
                );
                Ok(())
            }
            "stat" | "lstat" => {
                let path = self.path_op(c, None, 0)?;
                self.emit(
                    c,
                    Op::Stat {
                        path,
                        nofollow: c.name == "lstat",
                    },
                );
                Ok(())
            }
            "newfstatat" | "statx" => {
                let flags = if c.name == "statx" { a(2) } else { a(3) };
                if a(1) == "\"\"" && flags.contains("AT_EMPTY_PATH") {
                    let handle = self.handle(c.tid, c.args.first())?;
                    self.emit(c, Op::Fstat { handle });
                    return Ok(());
                }
                let path = self.path_op(c, Some(0), 1)?;
                self.emit(
                    c,
                    Op::Stat {
                        path,
                        nofollow: flags.contains("AT_SYMLINK_NOFOLLOW"),
                    },
                );
                Ok(())
            }
            _ => Err("unsupported"),
        }
    }

    /// Drops one reference to `h`; true when it was the last.
    fn release(&mut self, h: u32) -> bool {
        let r = self.refs.entry(h).or_insert(1);
        *r = r.saturating_sub(1);
        *r == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_lines() {
        let text = "\
10 100.000000 openat(AT_FDCWD</r>, \"a b\", O_RDWR|O_CREAT, 0644) = 3</r/a b> <0.000010>
10 100.000100 clone(child_stack=NULL, flags=CLONE_VM|CLONE_FILES|CLONE_THREAD) = 11 <0.000010>
11 100.000200 pwrite64(3</r/a b>, \"\"..., 4096, 8192 <unfinished ...>
10 100.000250 newfstatat(AT_FDCWD</r>, \"x\", 0x7ff, AT_SYMLINK_NOFOLLOW) = -1 ENOENT (No such file or directory) <0.000005>
11 100.000300 <... pwrite64 resumed>) = 4096 <0.000100>
10 100.000400 read(0</dev/pts/0>, \"\"..., 10) = 1 <0.000010>
10 100.000500 unlink(\"/r/d/../gone\") = 0 <0.000010>
10 100.000600 close(3</r/a b>) = 0 <0.000010>
10 100.000700 +++ exited with 0 +++
";
        let before = HashMap::new();
        let t = convert(text, &[PathBuf::from("/r")], Path::new("/r"), &before);
        let got = t.to_text();
        assert!(
            got.contains("10 0.000000 0.000010 open h1 0:a%20b rw+creat 644 = 0"),
            "{got}"
        );
        assert!(
            got.contains("11 0.000200 0.000100 pwrite h1 4096 8192 = 4096"),
            "{got}"
        );
        assert!(got.contains("lstat 0:x = ENOENT"), "{got}");
        assert!(got.contains("unlink 0:gone = 0"), "{got}");
        assert!(got.contains("close h1 = 0"), "{got}");
        assert_eq!(t.skipped, vec![("outside".to_string(), 1)]);
        iolab_spec::trace::parse("t", &got).unwrap();
    }
}
