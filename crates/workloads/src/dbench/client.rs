//! One dbench client: replays the loadfile in a loop inside `clients/clientN`, mapping each
//! operation to the POSIX calls dbench's fileio backend makes, timing it, and checking the
//! outcome against the status the loadfile expects.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, OFlags};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use iolab_measure::LatencyHistogram;

use super::loadfile::{Action, Base, Loadfile, OpKind, Status, NO_TIME};
use super::{IoFailure, MismatchSample, Seam};
use crate::beneath::Beneath;
use iolab_integrity::dbench::{Model, Stamp, Tamper};
use iolab_integrity::Tally;

/// NTCreateX create_disposition values (SMB).
const FILE_SUPERSEDE: u32 = 0;
const FILE_CREATE: u32 = 2;
const FILE_OPEN_IF: u32 = 3;
const FILE_OVERWRITE: u32 = 4;
const FILE_OVERWRITE_IF: u32 = 5;
/// NTCreateX create_options bit: the object is a directory.
const FILE_DIRECTORY_FILE: u32 = 0x1;

/// Mismatch samples each client keeps (the run keeps the earliest of all of them).
pub(crate) const SAMPLES_PER_CLIENT: usize = 16;

/// Live counters of one client, read by the progress loop.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Live {
    pub bytes: AtomicU64,
    pub ops: AtomicU64,
}

/// The start line: clients report ready and wait; the run opens the gate with the start
/// time, or with None to send them home (a client thread could not be started).
#[derive(Default)]
pub(crate) struct Gate {
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    ready: u32,
    opened: bool,
    start: Option<Instant>,
}

impl Gate {
    /// A client is set up; waits for the start time (None: do not run).
    fn arrive(&self) -> Option<Instant> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.ready += 1;
        self.cv.notify_all();
        while !st.opened {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.start
    }

    /// Waits until `n` clients are ready.
    pub fn wait_ready(&self, n: u32) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while st.ready < n {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    pub fn open(&self, start: Option<Instant>) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.opened = true;
        st.start = start;
        self.cv.notify_all();
    }

    pub fn start(&self) -> Option<Instant> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).start
    }
}

/// What every client shares.
pub(crate) struct Shared<'a> {
    pub lf: &'a Loadfile,
    pub clients_dir: PathBuf,
    /// `clients/` as the run found or made it, held: what is in it is removed at the end
    /// only while `clients_dir` still is it (not one put there during the run). None when
    /// it could not be made (the replay fails making it too).
    pub clients: Option<iolab_sys::files::Made>,
    /// The run directory (absolute, for messages).
    pub run_dir: PathBuf,
    /// The run directory: every loadfile path is resolved beneath it, never through a link.
    pub beneath: Beneath,
    /// Where Qfsinfo's statvfs looks (the run directory, as dbench's `-D`).
    pub fs_dir: CString,
    pub sync_open: bool,
    pub fsync_every_write: bool,
    pub max_loops: Option<u64>,
    pub time: Duration,
    /// When the measured part starts, in nanoseconds after the start; [`NOT_YET`] while an
    /// MPI rank waits at the end of its warm-up for the other ranks (its clients go on,
    /// still warming up).
    pub measure_at: AtomicU64,
    pub stop: &'a AtomicBool,
    /// Raised by the first client whose I/O fails in a way the loadfile does not expect
    /// (a full, read-only or failing filesystem): every client stops.
    pub abort: AtomicBool,
    pub gate: Gate,
    pub live: Vec<Live>,
    pub finished: AtomicU32,
    /// Zeros that WriteX writes (dbench writes calloc'ed buffers).
    pub zeros: Vec<u8>,
    /// `--verify`: the run id that WriteX content is generated from.
    pub verify: Option<u64>,
    /// The test seam (verify runs only): called before every operation and before the
    /// final read-back.
    pub seam: Option<&'a Seam<'a>>,
}

/// [`Shared::measure_at`] before the measured part's start is known.
pub(crate) const NOT_YET: u64 = u64::MAX;

impl Shared<'_> {
    /// When the measured part starts (None: not known yet).
    pub fn measure_start(&self, start: Instant) -> Option<Instant> {
        match self.measure_at.load(Ordering::Acquire) {
            NOT_YET => None,
            ns => Some(start + Duration::from_nanos(ns)),
        }
    }

    /// Whether the measured part is over at `t`.
    fn over(&self, start: Instant, t: Instant) -> bool {
        self.measure_start(start)
            .is_some_and(|m| t >= m + self.time)
    }

    /// Whether `clients_dir` is still the `clients/` the run found or made.
    pub fn clients_here(&self) -> bool {
        self.clients
            .as_ref()
            .is_none_or(|c| matches!(c.check(), Ok(iolab_sys::files::Found::Same)))
    }

    /// Stopped by the user or by a client's I/O failure.
    pub fn halted(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.abort.load(Ordering::Relaxed)
    }
}

/// Latencies and mismatches of one operation kind.
pub(crate) struct OpAcc {
    pub hist: LatencyHistogram,
    pub max_ns: u64,
    pub mismatches: u64,
}

/// What a client hands back when it is done.
pub(crate) struct Outcome {
    /// Indexed by `OpKind::index()`; None for kinds the loadfile does not use.
    pub ops: Vec<Option<OpAcc>>,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Measured bytes per whole second after the warm-up.
    pub buckets: Vec<u64>,
    pub loops: u64,
    /// (time since start, sample) of the first mismatches.
    pub samples: Vec<(Duration, MismatchSample)>,
    pub short_reads: u64,
    pub cleanup_error: Option<String>,
    /// The I/O failure that ended this client's replay (time since start, what failed).
    pub failure: Option<(Duration, IoFailure)>,
    /// When the client stopped replaying (before its cleanup).
    pub finished_at: Instant,
    /// What `--verify` found.
    pub verify: Option<Tally>,
}

/// Why an operation did not succeed.
enum Fail {
    Os(i32),
    NoHandle(u32),
    ShortWrite {
        wrote: usize,
        want: u32,
    },
    /// Find: the directory holds nothing matching the pattern.
    NoMatch,
    /// Qpathinfo / Find without wildcards: the name does not resolve.
    NotFound,
}

impl From<io::Error> for Fail {
    fn from(e: io::Error) -> Fail {
        Fail::Os(e.raw_os_error().unwrap_or(libc::EIO))
    }
}

impl Fail {
    fn describe(&self, kind: OpKind) -> String {
        match self {
            Fail::Os(errno) => {
                let nt = if matches!(kind, OpKind::LockX | OpKind::UnlockX)
                    && (*errno == libc::EAGAIN || *errno == libc::EACCES)
                {
                    "NT_STATUS_LOCK_NOT_GRANTED"
                } else {
                    nt_status(*errno)
                };
                format!("{nt} ({})", io::Error::from_raw_os_error(*errno))
            }
            Fail::NoHandle(f) => format!("no open file for fnum {f}"),
            Fail::ShortWrite { wrote, want } => format!("wrote {wrote} of {want} bytes"),
            Fail::NoMatch => "NT_STATUS_NO_SUCH_FILE (nothing matches)".into(),
            Fail::NotFound => "NT_STATUS_OBJECT_NAME_NOT_FOUND".into(),
        }
    }
}

/// Errors that say the storage itself failed, not that the replay diverged from the
/// recorded session.
const FATAL_ERRNOS: [i32; 5] = [
    libc::EIO,
    libc::EROFS,
    libc::ENOSPC,
    libc::EDQUOT,
    libc::EFBIG,
];

/// The symbolic name of an errno of [`FATAL_ERRNOS`] (others: `errno N`).
pub(crate) fn errno_name(errno: i32) -> String {
    match errno {
        libc::EIO => "EIO".into(),
        libc::EROFS => "EROFS".into(),
        libc::ENOSPC => "ENOSPC".into(),
        libc::EDQUOT => "EDQUOT".into(),
        libc::EFBIG => "EFBIG".into(),
        n => format!("errno {n}"),
    }
}

/// The system's text for an errno, without Rust's "(os error N)".
fn strerror(errno: i32) -> String {
    let s = io::Error::from_raw_os_error(errno).to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The NT status a Windows server would answer for an errno.
fn nt_status(errno: i32) -> &'static str {
    match errno {
        libc::ENOENT => "NT_STATUS_OBJECT_NAME_NOT_FOUND",
        libc::ENOTDIR => "NT_STATUS_OBJECT_PATH_NOT_FOUND",
        libc::EEXIST => "NT_STATUS_OBJECT_NAME_COLLISION",
        libc::EACCES | libc::EPERM | libc::EROFS => "NT_STATUS_ACCESS_DENIED",
        libc::EISDIR => "NT_STATUS_FILE_IS_A_DIRECTORY",
        libc::ENOTEMPTY => "NT_STATUS_DIRECTORY_NOT_EMPTY",
        libc::ENOSPC | libc::EDQUOT => "NT_STATUS_DISK_FULL",
        libc::EBADF => "NT_STATUS_INVALID_HANDLE",
        libc::ENAMETOOLONG => "NT_STATUS_OBJECT_NAME_INVALID",
        libc::EMFILE | libc::ENFILE => "NT_STATUS_TOO_MANY_OPENED_FILES",
        libc::EIO => "NT_STATUS_UNEXPECTED_IO_ERROR",
        _ => "NT_STATUS_UNSUCCESSFUL",
    }
}

/// Bytes an operation moved.
#[derive(Default)]
struct Moved {
    read: u64,
    written: u64,
}

struct Client<'s, 'a> {
    sh: &'s Shared<'a>,
    id: u32,
    /// The client's directory, absolute (for the verify model) and relative to the run
    /// directory (for every operation).
    root: PathBuf,
    rel_root: PathBuf,
    handles: HashMap<u32, File>,
    /// The loadfile path each open fnum was opened with (for error messages).
    handle_paths: HashMap<u32, u32>,
    read_buf: Vec<u8>,
    short_reads: u64,
    /// `--verify`: what the client's files must hold.
    model: Option<Model>,
    /// `--verify`: the generated content of the next WriteX, and what it is.
    write_buf: Vec<u8>,
    stamp: Option<Stamp>,
    /// What the last operation did, for the model: an open (is a file, its size, whether
    /// the open truncated), the bytes a pwrite wrote, the bytes a pread returned.
    opened: Option<(bool, u64, bool)>,
    wrote: Option<usize>,
    read_len: usize,
}

/// Counts a client as finished when it returns or unwinds, so the progress loop never waits
/// for a client that panicked.
struct Finished<'a>(&'a AtomicU32);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs client `id` until the measured phase is over or `stop` is set, then removes its
/// directory.
pub(crate) fn run_client(sh: &Shared<'_>, id: u32) -> Outcome {
    let _finished = Finished(&sh.finished);
    // At the start line before anything that could fail, so the run never waits for a
    // client that will not come; the setup below takes microseconds.
    let start = sh.gate.arrive();
    let max_read = sh
        .lf
        .entries
        .iter()
        .filter_map(|e| match e.action {
            Action::Read { size, .. } => Some(size as usize),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let mut c = Client {
        sh,
        id,
        root: sh.clients_dir.join(format!("client{id}")),
        rel_root: client_dir(id),
        handles: HashMap::new(),
        handle_paths: HashMap::new(),
        read_buf: vec![0u8; max_read],
        short_reads: 0,
        model: sh.verify.map(|run_id| Model::new(run_id, id)),
        write_buf: if sh.verify.is_some() {
            vec![0u8; sh.zeros.len()]
        } else {
            Vec::new()
        },
        stamp: None,
        opened: None,
        wrote: None,
        read_len: 0,
    };
    let mut ops: Vec<Option<OpAcc>> = (0..OpKind::ALL.len()).map(|_| None).collect();
    for (k, _) in sh.lf.op_counts() {
        if k.is_timed() {
            ops[k.index()] = Some(OpAcc {
                hist: LatencyHistogram::new(),
                max_ns: 0,
                mismatches: 0,
            });
        }
    }
    let mut out = Outcome {
        ops,
        bytes_read: 0,
        bytes_written: 0,
        buckets: Vec::new(),
        loops: 0,
        samples: Vec::new(),
        short_reads: 0,
        cleanup_error: None,
        failure: None,
        finished_at: Instant::now(),
        verify: None,
    };

    let Some(start) = start else {
        return out;
    };
    let live = &sh.live[id as usize];

    'run: loop {
        let loop_start = Instant::now();
        for e in &sh.lf.entries {
            if sh.halted() {
                break 'run;
            }
            if e.at_us != NO_TIME
                && !pause_until(sh, loop_start + Duration::from_micros(e.at_us), start)
            {
                break 'run;
            }
            if let Action::Sleep { micros } = e.action {
                if !pause_until(
                    sh,
                    Instant::now() + Duration::from_micros(micros as u64),
                    start,
                ) {
                    break 'run;
                }
                continue;
            }
            let kind = e.action.kind();
            let status = &sh.lf.statuses[e.status as usize];
            let before = c.model.is_some().then(|| {
                c.tamper(Some(e.line));
                let b = Instant::now();
                c.prepare(&e.action);
                b
            });
            let t0 = Instant::now();
            let result = c.exec(&e.action, status.ok);
            let t1 = Instant::now();
            if let Some(b) = before {
                // Outside the operation's latency, inside the run.
                c.settle(&e.action, status.ok, &result, e.line);
                c.inline_time((t0 - b) + t1.elapsed());
            }
            if sh.over(start, t1) {
                break 'run;
            }
            if let Err(f) = &result {
                if let Some(failure) = c.fatal(e, f, status) {
                    out.failure = Some((t1 - start, failure));
                    sh.abort.store(true, Ordering::SeqCst);
                    break 'run;
                }
            }
            let acc = out.ops[kind.index()]
                .as_mut()
                .expect("every kind of the loadfile has an accumulator");
            let moved = match result {
                Ok(m) => {
                    if !status.ok {
                        acc.mismatches += 1;
                        c.sample(&mut out.samples, t1 - start, e, "NT_STATUS_OK".into());
                    }
                    m
                }
                Err(f) => {
                    if status.ok {
                        acc.mismatches += 1;
                        c.sample(&mut out.samples, t1 - start, e, f.describe(kind));
                    }
                    Moved::default()
                }
            };
            let bytes = moved.read + moved.written;
            if bytes > 0 {
                live.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            live.ops.fetch_add(1, Ordering::Relaxed);
            if let Some(measure_start) = sh.measure_start(start).filter(|m| t1 >= *m) {
                let ns = (t1 - t0).as_nanos().min(u64::MAX as u128) as u64;
                acc.hist.record(ns);
                acc.max_ns = acc.max_ns.max(ns);
                if bytes > 0 {
                    out.bytes_read += moved.read;
                    out.bytes_written += moved.written;
                    let sec = (t1 - measure_start).as_secs() as usize;
                    if out.buckets.len() <= sec {
                        out.buckets.resize(sec + 1, 0);
                    }
                    out.buckets[sec] += bytes;
                }
            }
        }
        // fnums are reused by the next pass: whatever the file left open is closed here.
        c.handles.clear();
        c.handle_paths.clear();
        if let Some(m) = &mut c.model {
            m.release_all();
        }
        out.loops += 1;
        if sh.max_loops.is_some_and(|m| out.loops >= m) {
            break;
        }
    }
    out.finished_at = Instant::now();
    c.handles.clear();
    if let Some(m) = &mut c.model {
        m.release_all();
        // Untimed: after the replay, before the files go; not after a stop (Ctrl-C), which
        // should end the run at once, nor after an I/O failure.
        if sh.halted() {
            m.tally.replay_mut().read_back_skipped = 1;
        } else {
            c.tamper(None);
            if let Some(m) = &mut c.model {
                m.read_back(&c.root);
            }
        }
        out.verify = c.model.take().map(|m| m.tally);
    }
    out.short_reads = c.short_reads;
    // Not in a `clients/` put in place of the run's (the run's end says so).
    out.cleanup_error = sh
        .clients_here()
        .then(|| sh.beneath.remove_tree(&c.rel_root).err())
        .flatten()
        .map(|e| format!("could not remove {}: {e}", c.root.display()));
    out
}

/// Client `id`'s directory, relative to the run directory.
pub(crate) fn client_dir(id: u32) -> PathBuf {
    Path::new(CLIENTS).join(format!("client{id}"))
}

/// The directory all clients work in, relative to the run directory.
pub(crate) const CLIENTS: &str = "clients";

/// Sleeps until `when`, in slices so that the stop flag and the end of the run (started at
/// `start`) are noticed;
/// false when the client should stop instead.
fn pause_until(sh: &Shared<'_>, when: Instant, start: Instant) -> bool {
    loop {
        let now = Instant::now();
        if sh.halted() || sh.over(start, now) {
            return false;
        }
        if now >= when {
            return true;
        }
        std::thread::sleep((when - now).min(Duration::from_millis(50)));
    }
}

impl Client<'_, '_> {
    fn sample(
        &self,
        samples: &mut Vec<(Duration, MismatchSample)>,
        at: Duration,
        e: &super::loadfile::Entry,
        got: String,
    ) {
        if samples.len() >= SAMPLES_PER_CLIENT {
            return;
        }
        let lf = self.sh.lf;
        let path = e.action.path().map(|p| lf.paths[p as usize].display());
        samples.push((
            at,
            MismatchSample {
                client: self.id,
                line: e.line,
                op: e.action.kind(),
                path,
                fnum: e.action.fnum(),
                expected: lf.statuses[e.status as usize].text.to_string(),
                got,
            },
        ));
    }

    /// Loadfile path `id` for this client, relative to the run directory.
    fn path(&self, id: u32) -> PathBuf {
        let lp = &self.sh.lf.paths[id as usize];
        let base = match lp.base {
            Base::Clients => Path::new(CLIENTS),
            Base::Client => &self.rel_root,
        };
        if lp.rel.is_empty() {
            base.to_path_buf()
        } else {
            base.join(&*lp.rel)
        }
    }

    /// An outcome no loadfile can expect, which ends the run: EIO, a read-only, full or
    /// over-quota filesystem (unless the loadfile expects exactly that status), or a write
    /// that wrote less than it was asked to.
    fn fatal(&self, e: &super::loadfile::Entry, f: &Fail, status: &Status) -> Option<IoFailure> {
        let errno = match *f {
            Fail::Os(errno) if FATAL_ERRNOS.contains(&errno) => {
                if !status.ok && *status.text == *nt_status(errno) && errno != libc::EIO {
                    return None;
                }
                Some(errno)
            }
            Fail::ShortWrite { .. } if status.ok => None,
            _ => return None,
        };
        let lf = self.sh.lf;
        let (path_id, fnum) = match e.action.path() {
            Some(p) => (Some(p), None),
            None => {
                let fnum = e.action.fnum();
                (fnum.and_then(|n| self.handle_paths.get(&n).copied()), fnum)
            }
        };
        let kind = e.action.kind();
        Some(IoFailure {
            client: self.id,
            loadfile: lf.source().to_path_buf(),
            line: e.line,
            op: kind,
            loadfile_path: path_id.map(|p| lf.paths[p as usize].display()),
            file: path_id.map(|p| self.sh.run_dir.join(self.path(p))),
            fnum,
            errno,
            error: match (errno, f) {
                (Some(n), _) => format!("{} ({})", errno_name(n), strerror(n)),
                (None, f) => f.describe(kind),
            },
            expected: lf.statuses[e.status as usize].text.to_string(),
        })
    }

    /// Hands the test seam its view (verify runs with a seam only).
    fn tamper(&self, line: Option<u32>) {
        if let (Some(seam), Some(model)) = (self.sh.seam, &self.model) {
            seam(&Tamper::new(self.id, &self.root, line, model));
        }
    }

    /// `--verify`, before an operation is timed: a WriteX gets its generated content.
    fn prepare(&mut self, action: &Action) {
        self.stamp = None;
        self.opened = None;
        self.wrote = None;
        if let (
            Action::Write {
                fnum, offset, size, ..
            },
            Some(m),
        ) = (*action, &mut self.model)
        {
            self.stamp = m.stamp(fnum, offset, &mut self.write_buf[..size as usize]);
        }
    }

    /// `--verify`, after an operation: the model follows what it did, a ReadX is checked.
    fn settle(
        &mut self,
        action: &Action,
        expect_ok: bool,
        result: &Result<Moved, Fail>,
        line: u32,
    ) {
        let Some(m) = self.model.as_mut() else {
            return;
        };
        let lf = self.sh.lf;
        let rel = |id: u32| {
            let lp = &lf.paths[id as usize];
            (lp.base == Base::Client).then_some(&*lp.rel)
        };
        match *action {
            Action::Create { path, fnum, .. } => {
                if let (Ok(_), Some((is_file, size, truncated))) = (result, self.opened) {
                    m.opened(
                        rel(path),
                        expect_ok.then_some(fnum),
                        is_file,
                        size,
                        truncated,
                    );
                }
            }
            Action::Close { fnum } => m.release(fnum),
            Action::Unlink { path } if result.is_ok() => {
                if let Some(r) = rel(path) {
                    m.unlinked(r);
                }
            }
            Action::Deltree { path } => {
                if let Some(r) = rel(path) {
                    m.removed_tree(r);
                }
            }
            Action::Rename { from, to } if result.is_ok() => {
                if let (Some(a), Some(b)) = (rel(from), rel(to)) {
                    m.renamed(a, b);
                }
            }
            Action::Write { offset, .. } => {
                if let Some(s) = self.stamp.take() {
                    m.wrote(s, offset, self.wrote);
                }
            }
            Action::Read {
                fnum, offset, size, ..
            } if result.is_ok() => {
                m.check_read(
                    fnum,
                    offset,
                    size as u64,
                    &self.read_buf[..self.read_len],
                    line,
                );
            }
            _ => {}
        }
    }

    fn inline_time(&mut self, d: Duration) {
        if let Some(m) = &mut self.model {
            *m.tally.inline_seconds.get_or_insert(0.0) += d.as_secs_f64();
        }
    }

    fn handle(&self, fnum: u32) -> Result<&File, Fail> {
        self.handles.get(&fnum).ok_or(Fail::NoHandle(fnum))
    }

    fn exec(&mut self, action: &Action, expect_ok: bool) -> Result<Moved, Fail> {
        match *action {
            Action::Create {
                path,
                options,
                disposition,
                fnum,
            } => {
                let p = self.path(path);
                let file = self.create(&p, options, disposition)?;
                // dbench fstat()s every handle it opens (to tell files from directories).
                let m = file.metadata()?;
                let truncating = matches!(
                    disposition,
                    FILE_SUPERSEDE | FILE_OVERWRITE | FILE_OVERWRITE_IF
                );
                self.opened = Some((m.is_file(), m.len(), truncating));
                if expect_ok {
                    self.handles.insert(fnum, file);
                    self.handle_paths.insert(fnum, path);
                }
                // Opened against expectation: closed again (dropped) and reported.
                Ok(Moved::default())
            }
            Action::Close { fnum } => {
                let file = self.handles.remove(&fnum).ok_or(Fail::NoHandle(fnum))?;
                self.handle_paths.remove(&fnum);
                // SAFETY: the descriptor was just taken out of its File and is closed once.
                // Not rustix: its close is unsafe too and drops the error, which counts here.
                if unsafe { libc::close(file.into_raw_fd()) } != 0 {
                    return Err(io::Error::last_os_error().into());
                }
                Ok(Moved::default())
            }
            Action::Rename { from, to } => {
                let (a, b) = (self.path(from), self.path(to));
                let fs = &self.sh.beneath;
                resolve_name(fs, &a);
                resolve_name(fs, &b);
                fs.rename(&a, &b)?;
                Ok(Moved::default())
            }
            Action::Unlink { path } => {
                let p = self.path(path);
                resolve_name(&self.sh.beneath, &p);
                self.sh.beneath.unlink(&p)?;
                Ok(Moved::default())
            }
            Action::Deltree { path } => {
                self.sh.beneath.remove_tree(&self.path(path))?;
                Ok(Moved::default())
            }
            Action::Rmdir { path } => {
                let p = self.path(path);
                resolve_name(&self.sh.beneath, &p);
                self.sh.beneath.rmdir(&p)?;
                Ok(Moved::default())
            }
            Action::Mkdir { path } => {
                let p = self.path(path);
                let fs = &self.sh.beneath;
                resolve_name(fs, &p);
                match fs.mkdir(&p, 0o777) {
                    Ok(()) => Ok(Moved::default()),
                    Err(e)
                        if e.kind() == io::ErrorKind::AlreadyExists
                            && fs.file_type(&p).ok() == Some(FileType::Directory) =>
                    {
                        Ok(Moved::default())
                    }
                    Err(e) => Err(e.into()),
                }
            }
            Action::Qpathinfo { path } => {
                if resolve_name(&self.sh.beneath, &self.path(path)) {
                    Ok(Moved::default())
                } else {
                    Err(Fail::NotFound)
                }
            }
            Action::Qfileinfo { fnum } => {
                self.handle(fnum)?.metadata()?;
                Ok(Moved::default())
            }
            Action::Qfsinfo => {
                iolab_sys::statvfs_cstr(&self.sh.fs_dir)?;
                Ok(Moved::default())
            }
            Action::Sfileinfo { fnum } => {
                let f = self.handle(fnum)?;
                set_times_back(f)?;
                Ok(Moved::default())
            }
            Action::Find { path, max_count } => {
                find(&self.sh.beneath, &self.path(path), max_count)?;
                Ok(Moved::default())
            }
            Action::Write {
                fnum,
                offset,
                size,
                ret,
            } => {
                let f = self.handles.get(&fnum).ok_or(Fail::NoHandle(fnum))?;
                let data = match self.stamp {
                    Some(_) => &self.write_buf[..size as usize],
                    None => &self.sh.zeros[..size as usize],
                };
                // A write cut short (the filesystem filled up in the middle of it) goes on
                // for the rest, so a full filesystem shows as the ENOSPC it is.
                let mut n = f.write_at(data, offset)?;
                while n < data.len() {
                    match f.write_at(&data[n..], offset + n as u64) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) => {
                            self.wrote = Some(n);
                            return Err(e.into());
                        }
                    }
                }
                self.wrote = Some(n);
                if n != ret as usize {
                    return Err(Fail::ShortWrite {
                        wrote: n,
                        want: ret,
                    });
                }
                if self.sh.fsync_every_write {
                    f.sync_all()?;
                }
                Ok(Moved {
                    read: 0,
                    written: size as u64,
                })
            }
            Action::Read {
                fnum,
                offset,
                size,
                ret,
            } => {
                let f = self.handles.get(&fnum).ok_or(Fail::NoHandle(fnum))?;
                let n = f.read_at(&mut self.read_buf[..size as usize], offset)?;
                self.read_len = n;
                if n != ret as usize {
                    self.short_reads += 1;
                }
                Ok(Moved {
                    read: size as u64,
                    written: 0,
                })
            }
            Action::Lock { fnum, offset, size } => {
                byte_lock(self.handle(fnum)?, libc::F_WRLCK, offset, size)?;
                Ok(Moved::default())
            }
            Action::Unlock { fnum, offset, size } => {
                byte_lock(self.handle(fnum)?, libc::F_UNLCK, offset, size)?;
                Ok(Moved::default())
            }
            Action::Flush { fnum } => {
                self.handle(fnum)?.sync_all()?;
                Ok(Moved::default())
            }
            Action::Sleep { .. } => Ok(Moved::default()),
        }
    }

    /// NTCreateX as dbench's fileio maps it: O_RDWR (+O_SYNC with --sync); create for
    /// FILE_CREATE / FILE_OPEN_IF, create+truncate for the overwrite and supersede
    /// dispositions; a directory request mkdirs first and opens O_RDONLY|O_DIRECTORY; a
    /// plain open that hits a directory is retried as a directory open.
    fn create(&self, p: &Path, options: u32, disposition: u32) -> Result<File, Fail> {
        let fs = &self.sh.beneath;
        resolve_name(fs, p);
        let dir_only = || fs.open_file(p, OFlags::RDONLY | OFlags::DIRECTORY, 0);
        if options & FILE_DIRECTORY_FILE != 0 {
            // Not strictly SMB (an existing directory is fine whatever the disposition), but
            // what dbench does.
            let _ = fs.mkdir(p, 0o700);
            return Ok(dir_only()?);
        }
        let mut flags = OFlags::RDWR;
        if self.sh.sync_open {
            flags |= OFlags::SYNC;
        }
        match disposition {
            FILE_CREATE | FILE_OPEN_IF => flags |= OFlags::CREATE,
            FILE_SUPERSEDE | FILE_OVERWRITE | FILE_OVERWRITE_IF => {
                flags |= OFlags::CREATE | OFlags::TRUNC
            }
            _ => {}
        }
        match fs.open_file(p, flags, 0o600) {
            Ok(f) => Ok(f),
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => Ok(dir_only()?),
            Err(e) => Err(e.into()),
        }
    }
}

/// dbench's simulation of a case-insensitive server's name lookup: stat the name, and when
/// that fails scan the parent directory for a case-insensitive match. True when found.
fn resolve_name(fs: &Beneath, p: &Path) -> bool {
    if fs.file_type(p).is_ok() {
        return true;
    }
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return false;
    };
    let Ok(names) = fs.list(parent) else {
        return false;
    };
    let name = name.as_bytes();
    names.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// FIND_FIRST: with wildcards, list the directory (up to max_count entries, as dbench reads
/// them) and succeed when an entry (`.` and `..` included, as SMB lists them) matches the
/// pattern; without wildcards the name itself must resolve.
fn find(fs: &Beneath, p: &Path, max_count: u32) -> Result<(), Fail> {
    let found = resolve_name(fs, p);
    let (Some(dir), Some(pattern)) = (p.parent(), p.file_name()) else {
        return Err(Fail::NotFound);
    };
    let pattern = pattern.as_bytes();
    if !pattern.iter().any(|b| b"<>*?\"".contains(b)) {
        return if found { Ok(()) } else { Err(Fail::NotFound) };
    }
    let names = fs.list(dir)?;
    let mut matched = dos_match(pattern, b".") || dos_match(pattern, b"..");
    let budget = max_count.saturating_sub(2) as usize;
    for n in names.iter().take(budget) {
        if !matched && dos_match(pattern, n) {
            matched = true;
        }
    }
    if matched {
        Ok(())
    } else {
        Err(Fail::NoMatch)
    }
}

/// Case-insensitive DOS wildcard match: `*` any run, `?` one character, and the DOS forms
/// `<` (any run), `>` (one character, or none before a dot or at the end) and `"` (a dot,
/// or nothing at the end).
pub(crate) fn dos_match(pat: &[u8], name: &[u8]) -> bool {
    match pat.split_first() {
        None => name.is_empty(),
        Some((&c, rest)) => match c {
            b'*' | b'<' => (0..=name.len()).any(|i| dos_match(rest, &name[i..])),
            b'?' => !name.is_empty() && dos_match(rest, &name[1..]),
            b'>' => {
                (!name.is_empty() && dos_match(rest, &name[1..]))
                    || ((name.is_empty() || name[0] == b'.') && dos_match(rest, name))
            }
            b'"' => {
                (name.first() == Some(&b'.') && dos_match(rest, &name[1..]))
                    || (name.is_empty() && dos_match(rest, name))
            }
            _ => name
                .split_first()
                .is_some_and(|(&n, nrest)| n.eq_ignore_ascii_case(&c) && dos_match(rest, nrest)),
        },
    }
}

/// SET_FILE_INFORMATION as dbench does it: read the times and set them back a little
/// (access 10 s, modification 12 s earlier).
fn set_times_back(f: &File) -> io::Result<()> {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    let m = f.metadata()?;
    let earlier =
        |t: SystemTime, s: u64| t.checked_sub(Duration::from_secs(s)).unwrap_or(UNIX_EPOCH);
    // futimens(2) through std: both times set on the open file.
    f.set_times(
        std::fs::FileTimes::new()
            .set_accessed(earlier(m.accessed()?, 10))
            .set_modified(earlier(m.modified()?, 12)),
    )
}

/// A POSIX byte-range lock or unlock (fcntl F_SETLK; not the waiting F_SETLKW, so a lock
/// held elsewhere shows as a failure instead of hanging the client).
fn byte_lock(f: &File, kind: i32, offset: u64, size: u64) -> io::Result<()> {
    // SAFETY: flock is plain old data; zero is a valid starting value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = offset as libc::off_t;
    fl.l_len = size as libc::off_t;
    // SAFETY: fd is open and fl is a valid flock that outlives the call. Not rustix: its
    // fcntl_lock locks whole files, dbench locks byte ranges.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Why a client directory (or `clients/`) is in the way: what it holds, or the I/O error
/// that kept it from being looked at (kept as the source).
#[derive(Debug, thiserror::Error)]
pub enum Occupation {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} exists and is not a directory", .0.display())]
    NotDir(PathBuf),
    /// `clients/` itself.
    #[error("it is not a directory")]
    ClientsNotDir,
    #[error("{} holds {}, which iolab did not create", dir.display(), name.display())]
    Foreign { dir: PathBuf, name: PathBuf },
}

/// Checks that an existing client directory holds nothing but directories (what dbench 4.0
/// leaves behind), so replacing it destroys nothing of anyone's.
pub(crate) fn only_directories(p: &Path) -> Result<(), Occupation> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Occupation::Io { path, source }
    };
    let m = match fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(p)(e)),
    };
    if !m.is_dir() {
        return Err(Occupation::NotDir(p.to_path_buf()));
    }
    let rd = fs::read_dir(p).map_err(io(p))?;
    for d in rd {
        let d = d.map_err(io(p))?;
        let child = d.path();
        let ft = d.file_type().map_err(io(&child))?;
        if ft.is_dir() {
            only_directories(&child)?;
        } else {
            return Err(Occupation::Foreign {
                dir: p.to_path_buf(),
                name: Path::new(OsStr::from_bytes(d.file_name().as_bytes())).to_path_buf(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::dos_match;

    #[test]
    fn wildcards() {
        assert!(dos_match(b"*", b"anything"));
        assert!(dos_match(b"*", b"."));
        assert!(dos_match(b"FILLER.*", b"filler.000"));
        assert!(!dos_match(b"FILLER.*", b"fill.000"));
        assert!(dos_match(b"<.JNK", b"x.jnk"));
        assert!(!dos_match(b"<.JNK", b"x.doc"));
        assert!(dos_match(b"a?c", b"abc"));
        assert!(!dos_match(b"a?c", b"ac"));
        assert!(dos_match(b"a>>", b"a"));
        assert!(dos_match(b"a\"", b"a"));
        assert!(dos_match(b"a\"b", b"a.b"));
    }
}
