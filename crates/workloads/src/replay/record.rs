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
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use iolab_sys::files::{create_dir, create_new, unique_name, NewFile};
use iolab_sys::loopdev::FileId;
use iolab_testbed::runstate::{RunResource, RunState};

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
    /// What was left out and why, one line per reason other than "outside" (see
    /// [`left_out_lines`]).
    pub left_out: Vec<String>,
}

#[derive(Debug)]
pub enum RecordError {
    /// Bad arguments: exit 2.
    Usage(String),
    Failed(String),
    /// A system call or a read failed: what was being done (`FILE`, `cannot run strace`),
    /// and the error, kept: exit 1.
    Io {
        context: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Stopped by SIGINT, SIGTERM or SIGHUP: the command and strace are stopped, nothing
    /// is written (exit 130).
    Interrupted,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Usage(m) | RecordError::Failed(m) => f.write_str(m),
            RecordError::Io { context, source } => write!(f, "{context}: {source}"),
            RecordError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordError::Io { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl RecordError {
    fn io(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        RecordError::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

/// The largest strace output a recording reads (checked on the open file).
const MAX_STRACE_OUTPUT: u64 = 1 << 30;

/// Runs the command under strace in the current directory and writes the trace to
/// `cfg.output` (gzip when it ends in `.gz`). What it creates (a private temporary
/// directory for strace's output, the trace's temporary file) is recorded in a run state
/// first, so that `iolab cleanup` removes what a kill -9 leaves; SIGINT, SIGTERM or SIGHUP
/// stop strace and everything it traces, remove both and write no trace.
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
            .map_err(|e| RecordError::io("the current directory", e))?;
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
    // The output's directory is held from now on, and what is at its name checked: a
    // regular file is replaced at the end, anything else refused before the command runs.
    let out = NewFile::plan(&cfg.output, "record")
        .map_err(|e| RecordError::Usage(format!("-o {}: {e}", cfg.output.display())))?;
    let strace = iolab_sys::find_tool("strace").ok_or_else(|| {
        RecordError::Failed("record needs strace (Debian: apt-get install strace)".into())
    })?;
    let stop = iolab_runner::signals::install()
        .map_err(|e| RecordError::io("cannot install signal handlers", e))?;
    let state = Made::open();
    let r = record_with(cfg, &roots, out, &strace, &stop, &state);
    state.finish();
    r
}

/// [`record`] once its arguments are checked, what it makes recorded in `state`.
fn record_with(
    cfg: &RecordConfig,
    roots: &[PathBuf],
    out: NewFile,
    strace: &Path,
    stop: &AtomicBool,
    state: &Made,
) -> Result<Recorded, RecordError> {
    let before = walk(roots)?;
    if stop.load(Ordering::SeqCst) {
        return Err(RecordError::Interrupted);
    }
    let tmp_base = std::path::absolute(std::env::temp_dir())
        .map_err(|e| RecordError::io("the temporary directory", e))?;
    let tmp = state.dir(&tmp_base.join(unique_name("record")))?;
    let result = trace_command(cfg, strace, &tmp, stop).map(|(status, seconds, text)| {
        let cwd = std::env::current_dir().unwrap_or_default();
        let (mut trace, left) = convert_with(&String::from_utf8_lossy(&text), roots, &cwd, &before);
        trace.command = Some(shell_words(&cfg.command));
        Recorded {
            trace,
            exit: status.code(),
            seconds,
            left_out: left_out_lines(&left),
        }
    });
    state.remove(tmp);
    let rec = result?;
    let gzip = cfg.output.extension().is_some_and(|e| e == "gz");
    match write_trace(out, gzip, &rec.trace, state, stop) {
        Ok(()) => Ok(rec),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(RecordError::Interrupted),
        Err(e) => Err(RecordError::Failed(format!(
            "{}: {e}",
            cfg.output.display()
        ))),
    }
}

/// The command line as a shell would take it back: an argument with anything but letters,
/// digits and `_@%+=:,./-` in single quotes (so `sh -c 'a b'` is not `sh -c a b`).
fn shell_words(args: &[OsString]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| {
            let a = a.to_string_lossy();
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
            if plain {
                a.into_owned()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect();
    words.join(" ")
}

/// What a recording creates, in a run state (`iolab_testbed::runstate`, as `iolab run`
/// records its files) when one can be kept.
struct Made {
    state: Option<RunState>,
}

/// A directory or file made, with its record.
struct Resource {
    path: PathBuf,
    id: Option<u64>,
    made: Option<FileId>,
}

impl Made {
    fn open() -> Made {
        let state = iolab_testbed::StateFile::default_dir()
            .map_err(|e| e.to_string())
            .and_then(|d| RunState::create(&d).map_err(|e| format!("{}: {e}", d.display())));
        match state {
            Ok(s) => {
                // A second signal removes what is recorded at once.
                iolab_runner::signals::set_teardown(s.clone());
                Made { state: Some(s) }
            }
            Err(e) => {
                eprintln!(
                    "iolab: warning: what record creates is not recorded for `iolab cleanup` \
                     ({e}): a kill -9 leaves its temporary files in place"
                );
                Made { state: None }
            }
        }
    }

    fn intent(&self, resource: RunResource) -> Option<u64> {
        let st = self.state.as_ref()?;
        match st.intent(resource) {
            Ok(id) => Some(id),
            Err(e) => {
                eprintln!(
                    "iolab: warning: could not record a temporary file in {} ({e}): a kill \
                     -9 leaves it in place",
                    st.path().display()
                );
                None
            }
        }
    }

    fn created(&self, id: Option<u64>) {
        if let (Some(st), Some(id)) = (&self.state, id) {
            let _ = st.created(id);
        }
    }

    /// Creates the private directory `path` (0700), recorded first.
    fn dir(&self, path: &Path) -> Result<Resource, RecordError> {
        let id = self.intent(RunResource::Tree {
            path: path.to_path_buf(),
        });
        let made = create_dir(path).map_err(|e| RecordError::io(path.display().to_string(), e))?;
        self.created(id);
        Ok(Resource {
            path: path.to_path_buf(),
            id,
            made: Some(made),
        })
    }

    /// Removes `r` while it is still what was made, and marks it removed.
    fn remove(&self, r: Resource) {
        if let Some(made) = r.made {
            match iolab_sys::files::remove_if_same(&r.path, made) {
                Ok(true) => {}
                // Something else by that name now: the run state's end decides.
                Ok(false) if std::fs::symlink_metadata(&r.path).is_ok() => return,
                Ok(false) => {}
                Err(e) => {
                    eprintln!("iolab: warning: {}: {e}", r.path.display());
                    return;
                }
            }
        }
        if let (Some(st), Some(id)) = (&self.state, r.id) {
            let _ = st.removed(id);
        }
    }

    /// The run state's end: deleted when nothing recorded is left.
    fn finish(&self) {
        if let Some(st) = &self.state {
            let end = st.finish();
            for left in end.left {
                eprintln!(
                    "iolab: warning: left behind: {left} (recorded in {}; `iolab cleanup` \
                     removes it)",
                    st.path().display()
                );
            }
            for p in end.replaced {
                eprintln!(
                    "iolab: warning: {}",
                    iolab_testbed::runstate::replaced_note(&p)
                );
            }
        }
    }
}

/// Runs the command under strace (output in `tmp`); (its status, seconds, strace's output).
/// A signal to iolab stops strace and everything it traces: Interrupted.
fn trace_command(
    cfg: &RecordConfig,
    strace: &Path,
    tmp: &Resource,
    stop: &AtomicBool,
) -> Result<(std::process::ExitStatus, f64, Vec<u8>), RecordError> {
    let raw = tmp.path.join("strace.out");
    create_new(&raw).map_err(|e| RecordError::io(raw.display().to_string(), e))?;
    let filter: Vec<String> = SYSCALLS
        .split_whitespace()
        .map(|s| format!("?{s}"))
        .collect();
    // Orphans of the traced command come back to iolab, to be found and stopped with the
    // rest; strace itself dies with iolab (a kill -9 included).
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::Pid::INIT));
    let parent = std::process::id() as i32;
    let mut cmd = Command::new(strace);
    cmd.args(["-f", "-ttt", "-T", "-y", "-s", "0", "-qq", "-o"])
        .arg(&raw)
        .arg(format!("-etrace={}", filter.join(",")))
        .arg("--")
        .args(&cfg.command);
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid); pre_exec itself is unsafe, so rustix's
    // wrappers would not remove the block.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // iolab died before the flag was set: nobody would stop strace.
            if libc::getppid() != parent {
                return Err(io::Error::other("iolab is gone"));
            }
            Ok(())
        })
    };
    let t0 = std::time::Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| RecordError::io(format!("cannot run {}", strace.display()), e))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) => {}
            Err(e) => {
                stop_descendants();
                return Err(RecordError::Failed(format!(
                    "waiting for {}: {e}",
                    strace.display()
                )));
            }
        }
        if stop.load(Ordering::SeqCst) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let seconds = t0.elapsed().as_secs_f64();
    // Whatever is still running under iolab (the command's orphans) is stopped too.
    stop_descendants();
    let Some(status) = status else {
        return Err(RecordError::Interrupted);
    };
    let f = std::fs::File::open(&raw).map_err(|e| {
        RecordError::Failed(format!("strace wrote no output ({}): {e}", raw.display()))
    })?;
    let len = f
        .metadata()
        .map_err(|e| RecordError::io(raw.display().to_string(), e))?
        .len();
    if len > MAX_STRACE_OUTPUT {
        return Err(RecordError::Failed(format!(
            "strace's output is {len} bytes, more than the {MAX_STRACE_OUTPUT} record reads: \
             record a shorter run"
        )));
    }
    let mut text = Vec::new();
    f.take(MAX_STRACE_OUTPUT + 1)
        .read_to_end(&mut text)
        .map_err(|e| RecordError::io(raw.display().to_string(), e))?;
    if stop.load(Ordering::SeqCst) {
        return Err(RecordError::Interrupted);
    }
    Ok((status, seconds, text))
}

/// The processes beneath this one (its children, theirs, and orphans reparented to it as
/// subreaper), zombies left out.
fn descendants() -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut parent: HashMap<i32, i32> = HashMap::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `PID (COMM) STATE PPID ...`: COMM may hold anything, so after its last `)`.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut w = rest.split_whitespace();
        let (Some(state), Some(ppid)) = (w.next(), w.next().and_then(|p| p.parse().ok())) else {
            continue;
        };
        if state != "Z" && state != "X" {
            parent.insert(pid, ppid);
        }
    }
    parent
        .keys()
        .copied()
        .filter(|&p| {
            let mut cur = p;
            for _ in 0..parent.len() {
                match parent.get(&cur) {
                    Some(&pp) if pp == me => return true,
                    Some(&pp) => cur = pp,
                    None => return false,
                }
            }
            false
        })
        .collect()
}

/// Kills every process beneath this one (strace and what it traces, SIGKILL: strace blocks
/// the others while it runs a command) and reaps them, until none is left.
fn stop_descendants() {
    for _ in 0..500 {
        let left = descendants();
        for pid in left
            .iter()
            .filter_map(|&p| rustix::process::Pid::from_raw(p))
        {
            // A pid gone since is ESRCH.
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
        // Reaps this process's ended children; their status is not needed.
        while let Ok(Some(_)) = rustix::process::wait(rustix::process::WaitOptions::NOHANG) {}
        if left.is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Writes `trace` to `out` (gzipped when its name ends in `.gz`): into a new private file
/// in its directory (recorded in `state` first), renamed into place once synced. A signal
/// before the rename leaves nothing.
fn write_trace(
    mut out: NewFile,
    gzip: bool,
    trace: &Trace,
    state: &Made,
    stop: &AtomicBool,
) -> io::Result<()> {
    let id = state.intent(RunResource::File {
        path: std::path::absolute(out.temp_path())?,
    });
    let res = (|| {
        let f = out.create()?;
        state.created(id);
        let text = trace.to_text();
        if gzip {
            let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::default());
            gz.write_all(text.as_bytes())?;
            gz.finish()?.sync_all()?;
        } else {
            let mut f = f;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
        }
        if stop.load(Ordering::SeqCst) {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        out.commit()
    })();
    // Renamed, or removed by the NewFile dropped uncommitted: the run state's end marks it
    // gone (or keeps it for `iolab cleanup` if it is still there).
    res
}

/// What the roots held before the run.
#[derive(Debug, Default)]
struct Before {
    /// Directories (None) and files with their sizes: what the replay recreates (links and
    /// devices are not).
    entries: HashMap<PathBuf, Option<u64>>,
    /// Symbolic links, path → target as stored: a path through one is resolved.
    links: HashMap<Vec<u8>, Vec<u8>>,
}

/// What existed in the roots before the run.
fn walk(roots: &[PathBuf]) -> Result<Before, RecordError> {
    let mut out = Before::default();
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
                out.entries.insert(e.path(), None);
                stack.push(e.path());
            } else if m.is_file() {
                out.entries.insert(e.path(), Some(m.len()));
            } else if m.is_symlink() {
                match std::fs::read_link(e.path()) {
                    Ok(t) => {
                        let p = e.path().into_os_string().into_vec();
                        out.links.insert(p, t.into_os_string().into_vec());
                    }
                    Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                    Err(err) => return Err(cannot(err)),
                }
            }
            if out.entries.len() + out.links.len() > MAX_ENTRIES {
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
    unescape(&s.as_bytes()[..end])
}

/// strace's escapes undone: the one decoding of every name in its output, the quoted
/// arguments and the `<path>` it prints after a descriptor (where it escapes `<`, `>` and
/// `"` too), so a name reaches the trace as the same bytes whichever way strace showed it.
/// None for a malformed escape.
fn unescape(b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        match *b.get(i)? {
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
                out.push(u8::try_from(v).ok()?);
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
        Some(i) if s.ends_with('>') => {
            (&s[..i], Some(unescape(&s.as_bytes()[i + 1..s.len() - 1])?))
        }
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

/// Where the argument list that starts at `from` closes: the first `)` outside quotes,
/// brackets and a descriptor's `<path>` (a name may hold `) = `; strace escapes `<`, `>`
/// and `"` in names, so those delimit).
fn args_end(s: &str, from: usize) -> Option<usize> {
    let b = s.as_bytes();
    let (mut depth, mut in_str, mut in_fd) = (0u32, false, false);
    let mut i = from;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if c == b'\\' {
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
        } else if in_fd {
            in_fd = c != b'>';
        } else {
            match c {
                b'"' => in_str = true,
                b'<' => in_fd = true,
                b'(' | b'[' | b'{' => depth += 1,
                b')' if depth == 0 => return Some(i),
                b')' | b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

fn parse_call(tid: u32, time_us: u64, s: &str) -> Option<Call> {
    let open = s.find('(')?;
    let name = &s[..open];
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    // strace pads a short call to a column before ` = ` (`vfork()         = 21`).
    let eq = args_end(s, open + 1)?;
    let mut tail = s[eq + 1..].trim_start_matches(' ').strip_prefix("= ")?;
    let args = split_args(&s[open + 1..eq]);
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
            unescape(&tail.as_bytes()[i + 1..tail.len() - 1])
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
    /// The calls left out for a reason other than "outside": (reason, call, path) → count.
    left: std::collections::BTreeMap<(&'static str, String, String), u64>,
    used: BTreeSet<TracePath>,
    /// The symbolic links beneath the roots: those there before the run, and those the
    /// command made (path → target).
    links: HashMap<Vec<u8>, Vec<u8>>,
}

/// Turns strace's output into a trace: `roots` canonical, `cwd` the command's start
/// directory, `before` what the roots held before the run.
#[cfg(test)]
fn convert(text: &str, roots: &[PathBuf], cwd: &Path, before: &Before) -> Trace {
    convert_with(text, roots, cwd, before).0
}

/// Calls left out, by (reason, call, path), for [`left_out_lines`].
type LeftOut = std::collections::BTreeMap<(&'static str, String, String), u64>;

/// [`convert`], with what was left out for a reason other than "outside".
fn convert_with(text: &str, roots: &[PathBuf], cwd: &Path, before: &Before) -> (Trace, LeftOut) {
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
        left: Default::default(),
        used: BTreeSet::new(),
        links: before.links.clone(),
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
        match before
            .entries
            .get(Path::new(std::ffi::OsStr::from_bytes(&abs)))
        {
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
    let trace = Trace {
        roots: roots
            .iter()
            .map(|r| r.to_string_lossy().into_owned())
            .collect(),
        command: None,
        skipped: c.skipped.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        initial,
        events: c.events,
        format: iolab_spec::trace::MAGIC.into(),
    };
    (trace, c.left)
}

/// One line per reason a call beneath the roots was left out (not "outside": those are
/// not the application's files), naming the calls and paths (the three most frequent) and
/// why: `untracked: 316 write on /r/n.txt: descriptors ...`.
pub fn left_out_lines(left: &LeftOut) -> Vec<String> {
    let mut out = Vec::new();
    for why in ["untracked", "unsupported", "undecoded"] {
        let mut calls: Vec<(&String, &String, u64)> = left
            .iter()
            .filter(|((w, _, _), _)| *w == why)
            .map(|((_, name, path), n)| (name, path, *n))
            .collect();
        if calls.is_empty() {
            continue;
        }
        let total: u64 = calls.iter().map(|c| c.2).sum();
        calls.sort_by_key(|c| std::cmp::Reverse(c.2));
        let mut named: Vec<String> = calls
            .iter()
            .take(3)
            .map(|(name, path, n)| {
                if path.is_empty() {
                    format!("{n} {name}")
                } else {
                    format!("{n} {name} on {path}")
                }
            })
            .collect();
        if calls.len() > 3 {
            named.push(format!("{} more", calls.len() - 3));
        }
        let reason = match why {
            "untracked" => {
                "on descriptors beneath the roots that the recording did not see opened \
                 (opened before the command started, or passed in by a process strace \
                 could not follow): the replay cannot tell which file they use"
            }
            "unsupported" => "calls or flags the trace format has no event for",
            _ => "strace printed arguments the recording could not read",
        };
        out.push(format!(
            "{why}: {total} calls ({}): {reason}",
            named.join(", ")
        ));
    }
    out
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

    /// The path argument `path` (against the dirfd argument `dirfd`), through the links
    /// beneath the roots (the last component's too when `follow`): where the call went.
    fn path_op(
        &mut self,
        c: &Call,
        dirfd: Option<usize>,
        path: usize,
        follow: bool,
    ) -> Result<TracePath, &'static str> {
        let d = dirfd.and_then(|i| c.args.get(i).cloned());
        let p = c.args.get(path).ok_or("undecoded")?;
        let abs = self.resolve(c.tid, d.as_deref(), p).ok_or("undecoded")?;
        let real = self.follow(&abs, follow).ok_or("undecoded")?;
        self.beneath(&real).ok_or("outside")
    }

    /// `abs` with `.`, `..` and the known links resolved component by component, in the
    /// kernel's order (a `..` after a link is the parent of where the link led); the last
    /// component followed only when `last`. None after 40 links (a loop: ELOOP).
    fn follow(&self, abs: &[u8], last: bool) -> Option<Vec<u8>> {
        let mut todo: Vec<Vec<u8>> = abs
            .split(|&b| b == b'/')
            .rev()
            .filter(|c| !c.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        let mut cur: Vec<u8> = Vec::new();
        let mut hops = 0;
        while let Some(comp) = todo.pop() {
            match comp.as_slice() {
                b"." => continue,
                b".." => {
                    let cut = cur.iter().rposition(|&b| b == b'/').unwrap_or(0);
                    cur.truncate(cut);
                    continue;
                }
                _ => {}
            }
            let mut next = cur.clone();
            next.push(b'/');
            next.extend_from_slice(&comp);
            let is_last = todo.is_empty();
            if let Some(target) = self.links.get(&next).filter(|_| last || !is_last) {
                hops += 1;
                if hops > 40 {
                    return None;
                }
                if target.starts_with(b"/") {
                    cur.clear();
                }
                todo.extend(
                    target
                        .split(|&b| b == b'/')
                        .rev()
                        .filter(|c| !c.is_empty())
                        .map(<[u8]>::to_vec),
                );
                continue;
            }
            cur = next;
        }
        if cur.is_empty() {
            cur.push(b'/');
        }
        Some(cur)
    }

    /// The absolute path of a trace path.
    fn abs(&self, p: &TracePath) -> Vec<u8> {
        let mut a = self.roots[p.root as usize].clone();
        if !p.rel.is_empty() {
            a.push(b'/');
            a.extend_from_slice(&p.rel);
        }
        a
    }

    fn call(&mut self, c: &Call) {
        if let Err(why) = self.try_call(c) {
            if !why.is_empty() {
                self.skip(why);
            }
            if !why.is_empty() && why != "outside" {
                // The descriptor's or the path's name, as strace printed it.
                let a0 = c.args.first().map(String::as_str).unwrap_or("");
                let path = fd_arg(a0)
                    .and_then(|(_, p)| p)
                    .or_else(|| cstring(a0))
                    .map(|p| String::from_utf8_lossy(&p).into_owned())
                    .unwrap_or_default();
                *self.left.entry((why, c.name.clone(), path)).or_default() += 1;
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
                            .and_then(|p| self.follow(&p, true))
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
                // A successful open's path is the kernel's (links resolved): one that
                // ends outside the roots is outside, whatever name led there.
                let excl = flags.contains("O_CREAT") && flags.contains("O_EXCL");
                let follow = !flags.contains("O_NOFOLLOW") && !excl;
                let target = if unsupported {
                    Err("unsupported")
                } else if let (true, Some(real)) = (ok, c.ret_path.as_deref()) {
                    self.beneath(real).ok_or("outside")
                } else {
                    self.path_op(c, dirfd, path, follow)
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
                let path = self.path_op(c, None, 0, true)?;
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
                    (
                        self.path_op(c, None, 0, false)?,
                        self.path_op(c, None, 1, false)?,
                    )
                } else {
                    (
                        self.path_op(c, Some(0), 1, false)?,
                        self.path_op(c, Some(2), 3, false)?,
                    )
                };
                let noreplace = match (c.name.as_str(), a(4)) {
                    ("renameat2", "RENAME_NOREPLACE") => true,
                    ("renameat2", "0") | ("rename" | "renameat", _) => false,
                    _ => return Err("unsupported"),
                };
                if ok {
                    let (f, t) = (self.abs(&from), self.abs(&to));
                    self.links.remove(&t);
                    if let Some(target) = self.links.remove(&f) {
                        self.links.insert(t, target);
                    }
                }
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
                    (
                        self.path_op(c, None, 0, false)?,
                        self.path_op(c, None, 1, false)?,
                    )
                } else {
                    let follow = a(4).contains("AT_SYMLINK_FOLLOW");
                    (
                        self.path_op(c, Some(0), 1, follow)?,
                        self.path_op(c, Some(2), 3, false)?,
                    )
                };
                self.emit(c, Op::Link { from, to });
                Ok(())
            }
            "symlink" | "symlinkat" => {
                let target = cstring(a(0)).filter(|t| !t.is_empty()).ok_or("undecoded")?;
                let path = if c.name == "symlink" {
                    self.path_op(c, None, 1, false)?
                } else {
                    self.path_op(c, Some(1), 2, false)?
                };
                if ok {
                    let abs = self.abs(&path);
                    self.links.insert(abs, target.clone());
                }
                self.emit(c, Op::Symlink { target, path });
                Ok(())
            }
            "unlink" | "rmdir" => {
                let path = self.path_op(c, None, 0, false)?;
                if ok {
                    let abs = self.abs(&path);
                    self.links.remove(&abs);
                }
                let op = if c.name == "unlink" {
                    Op::Unlink { path }
                } else {
                    Op::Rmdir { path }
                };
                self.emit(c, op);
                Ok(())
            }
            "unlinkat" => {
                let path = self.path_op(c, Some(0), 1, false)?;
                if ok {
                    let abs = self.abs(&path);
                    self.links.remove(&abs);
                }
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
                    (self.path_op(c, None, 0, false)?, a(1))
                } else {
                    (self.path_op(c, Some(0), 1, false)?, a(2))
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
                let path = self.path_op(c, None, 0, c.name == "stat")?;
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
                let nofollow = flags.contains("AT_SYMLINK_NOFOLLOW");
                let path = self.path_op(c, Some(0), 1, !nofollow)?;
                self.emit(c, Op::Stat { path, nofollow });
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
        let before = Before::default();
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

    #[test]
    fn a_shell_redirection_is_followed_into_the_command() {
        // dash running `seq 3 > /r/n.txt`: opens, saves fd 1, dup2s the file onto it,
        // vforks (strace pads the short call before ` = `); the child (seq) writes fd 1.
        let text = "\
20 100.000000 openat(AT_FDCWD</r>, \"/r/n.txt\", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3</r/n.txt> <0.000010>
20 100.000100 fcntl(1</tmp/out>, F_DUPFD, 10) = 11</tmp/out> <0.000010>
20 100.000110 close(1</tmp/out>) = 0 <0.000010>
20 100.000120 fcntl(11</tmp/out>, F_SETFD, FD_CLOEXEC) = 0 <0.000010>
20 100.000130 dup2(3</r/n.txt>, 1) = 1</r/n.txt> <0.000010>
20 100.000140 close(3</r/n.txt>) = 0 <0.000010>
20 100.000200 vfork()         = 21 <0.000235>
21 100.000400 write(1</r/n.txt>, \"\"..., 6) = 6 <0.000010>
21 100.000500 close(1</r/n.txt>) = 0 <0.000010>
";
        let t = convert(
            text,
            &[PathBuf::from("/r")],
            Path::new("/r"),
            &Before::default(),
        );
        let got = t.to_text();
        assert!(got.contains("21 0.000400 0.000010 write h1 6 = 6"), "{got}");
        // Only the shell's own stdout (outside the root) is left out.
        assert_eq!(t.skipped, vec![("outside".to_string(), 1)], "{got}");
    }

    #[test]
    fn what_is_left_out_beneath_the_roots_is_named() {
        // A descriptor the recording never saw opened (inherited from before the command).
        let text = "\
30 100.000000 write(5</r/old.log>, \"\"..., 10) = 10 <0.000010>
30 100.000100 write(5</r/old.log>, \"\"..., 10) = 10 <0.000010>
30 100.000200 write(1</dev/pts/0>, \"\"..., 10) = 10 <0.000010>
";
        let (t, left) = convert_with(
            text,
            &[PathBuf::from("/r")],
            Path::new("/r"),
            &Before::default(),
        );
        assert_eq!(
            t.skipped,
            vec![("outside".to_string(), 1), ("untracked".to_string(), 2)]
        );
        let lines = left_out_lines(&left);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("untracked: 2 calls (2 write on /r/old.log): on descriptors"),
            "{lines:?}"
        );
    }

    #[test]
    fn names_decode_one_way_and_links_resolve() {
        let text = "\
10 100.000000 openat(AT_FDCWD</r>, \"d\\\\x\", O_RDONLY) = 3</r/d\\\\x> <0.000010>
10 100.000100 close(3</r/d\\\\x>) = 0 <0.000010>
10 100.000200 unlink(\"d\\\\x\") = 0 <0.000010>
10 100.000300 openat(AT_FDCWD</r>, \"x\\76\", O_RDONLY) = 3</r/x\\76> <0.000010>
10 100.000400 openat(AT_FDCWD</r>, \"leak\", O_RDONLY) = 4</etc/passwd> <0.000010>
10 100.000500 read(4</etc/passwd>, \"\"..., 10) = 10 <0.000010>
10 100.000600 newfstatat(AT_FDCWD</r>, \"up/passwd\", 0x7ff, 0) = 0 <0.000010>
10 100.000700 newfstatat(AT_FDCWD</r>, \"in\", 0x7ff, 0) = 0 <0.000010>
10 100.000800 newfstatat(AT_FDCWD</r>, \"in\", 0x7ff, AT_SYMLINK_NOFOLLOW) = 0 <0.000010>
10 100.000900 stat(\"/r/sub/up2/r/f\", 0x7ff) = 0 <0.000010>
";
        let mut before = Before::default();
        before.links.insert(b"/r/up".to_vec(), b"/etc".to_vec());
        before.links.insert(b"/r/in".to_vec(), b"sub/f".to_vec());
        before
            .links
            .insert(b"/r/sub/up2".to_vec(), b"../..".to_vec());
        let t = convert(text, &[PathBuf::from("/r")], Path::new("/r"), &before);
        let got = t.to_text();
        assert!(got.contains(" open h1 0:d\\x r 0 = 0\n"), "{got}");
        assert!(got.contains(" unlink 0:d\\x = 0\n"), "{got}");
        assert!(got.contains(" open h2 0:x> r 0 = 0\n"), "{got}");
        assert!(got.contains(" stat 0:sub/f = 0\n"), "{got}");
        assert!(got.contains(" lstat 0:in = 0\n"), "{got}");
        assert!(got.contains(" stat 0:f = 0\n"), "{got}");
        assert!(!got.contains("leak") && !got.contains("passwd"), "{got}");
        assert_eq!(t.skipped, vec![("outside".to_string(), 3)]);
    }
}
