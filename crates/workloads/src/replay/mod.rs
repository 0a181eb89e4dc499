//! Replay of a recorded I/O trace (`iolab record`, or fio's iolog): the files the trace
//! needs are made in a directory of the run's own (`iolab-replay-PID-N/ROOT/...`, sizes
//! from the trace, contents random), then every recorded thread runs as a thread of its
//! own, issuing its calls in the recorded order with the recorded sizes and offsets. A call
//! waits for every call of another thread that had finished before it began in the
//! recording, so the order between threads is kept at any speed; `--speed recorded` (or
//! `xN`) also waits for the call's recorded start time (divided by N). Every path goes
//! through `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` from the run directory, so no
//! call reaches outside it. Outcomes are compared with the recorded ones; an outcome that
//! says the storage failed (EIO, ENOSPC, EROFS, EDQUOT, a short write) ends the replay.
//! See docs/workloads.md.

pub mod record;
pub mod run;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use iolab_measure::{LatencyHistogram, MB};
use iolab_spec::trace::{
    Initial, Op, Outcome, Trace, TraceError, TracePath, TraceReason, Whence, MAX_TEXT, OP_NAMES,
};
use iolab_sys::input::{read_bounded, read_input, InputError};
use rustix::fs::OFlags;
use serde::Serialize;

use crate::beneath::Beneath;

/// How fast to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// As fast as the order between threads allows.
    Max,
    /// The recorded gaps divided by this factor (1.0: as recorded).
    Scaled(f64),
}

/// Reads a trace file (plain or gzipped; iolab's format or fio's iolog): a regular file of
/// at most [`MAX_TEXT`] bytes, unpacking to at most as many.
pub fn read_trace(path: &Path) -> Result<Trace, TraceError> {
    let whole = |reason: TraceReason| TraceError {
        file: path.display().to_string(),
        line: None,
        reason,
    };
    let raw = read_input(path, MAX_TEXT).map_err(|e| whole(TraceReason::Input(e)))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        read_bounded(flate2::read::MultiGzDecoder::new(&raw[..]), MAX_TEXT).map_err(|e| {
            whole(match e {
                InputError::TooLarge { .. } => TraceReason::GunzippedTooLarge,
                e => TraceReason::Gunzip(e),
            })
        })?
    } else {
        raw
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        TraceError {
            file: path.display().to_string(),
            line: Some(line as u32),
            reason: TraceReason::NotUtf8(e),
        }
    })?;
    iolab_spec::trace::parse(&path.display().to_string(), &text)
}

/// What a replay needs on the filesystem before it runs: the initial files' bytes, the
/// most every write can add, and the number of names.
pub fn footprint(t: &Trace) -> (u64, u64) {
    let mut bytes: u64 = 0;
    for i in &t.initial {
        if let Initial::File(_, s) = i {
            bytes = bytes.saturating_add(*s);
        }
    }
    for e in &t.events {
        bytes = bytes.saturating_add(match &e.op {
            Op::Write { size, .. } | Op::Pwrite { size, .. } => *size,
            Op::Fallocate { len, .. } => *len,
            _ => 0,
        });
    }
    let names = t.initial.len() as u64
        + t.events
            .iter()
            .filter(|e| matches!(e.op, Op::Open { .. } | Op::Mkdir { .. }))
            .count() as u64;
    (bytes, names)
}

/// The most recorded threads a replay runs (each is a thread of its own).
pub const MAX_THREADS: usize = 4096;
/// The most memory the replay's read buffers may take together (each thread's is its
/// largest read).
pub const MAX_READ_BUFFERS: u64 = 2 << 30;

/// Why a replay cannot run a trace ([`check_bounds`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    #[error("the trace has {0} threads; a replay runs at most {MAX_THREADS}")]
    Threads(usize),
    #[error(
        "the trace's threads read up to {0} bytes at once in all (each its largest read); a \
         replay allocates at most {MAX_READ_BUFFERS}"
    )]
    ReadBuffers(u64),
}

/// Why a replay could not run: its directory or the trace's files could not be made (the
/// error kept as the source).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{}: {source}", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: preparing the trace's files: {source}", dir.display())]
    Prepare {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Whether the replay can run `t`: its thread count and its read buffers within bounds.
pub fn check_bounds(t: &Trace) -> Result<(), BoundsError> {
    let threads = t.threads().len();
    if threads > MAX_THREADS {
        return Err(BoundsError::Threads(threads));
    }
    let mut largest: HashMap<u32, u64> = HashMap::new();
    for e in &t.events {
        if let Op::Read { size, .. } | Op::Pread { size, .. } = e.op {
            let l = largest.entry(e.tid).or_default();
            *l = (*l).max(size);
        }
    }
    let total: u64 = largest.values().sum();
    if total > MAX_READ_BUFFERS {
        return Err(BoundsError::ReadBuffers(total));
    }
    Ok(())
}

/// One row of the operation table.
#[derive(Debug, Clone, Serialize)]
pub struct OpStats {
    pub op: &'static str,
    pub count: u64,
    /// Calls of this kind in the trace (equal to `count` unless the replay stopped early).
    pub recorded: u64,
    pub avg_ms: f64,
    pub max_ms: f64,
    pub p99_ms: f64,
    /// Replayed calls whose outcome differed from the recorded one.
    pub mismatches: u64,
    #[serde(skip)]
    pub histogram: LatencyHistogram,
}

/// One call whose outcome differed.
#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    /// Line of the trace.
    pub line: u32,
    pub op: &'static str,
    pub expected: String,
    pub got: String,
}

/// What a replay measured.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayResult {
    /// From the release of the threads to the end of the last call.
    pub seconds: f64,
    /// The trace's span: start of its first call to end of its last.
    pub recorded_seconds: f64,
    pub threads: usize,
    pub calls: u64,
    pub recorded_calls: u64,
    /// Bytes the replayed reads and writes returned.
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The same in the recording.
    pub recorded_bytes_read: u64,
    pub recorded_bytes_written: u64,
    pub ops: Vec<OpStats>,
    pub mismatches: u64,
    pub mismatch_samples: Vec<Mismatch>,
    /// Bytes moved in each second of the replay (a final partial second as it is).
    pub per_second_bytes: Vec<u64>,
    pub interrupted: bool,
    /// The outcome that ended the replay (then no figure of it is a result).
    pub failure: Option<String>,
    pub notes: Vec<String>,
}

/// errno names ↔ numbers for the outcomes traces hold.
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENODEV", libc::ENODEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("EMFILE", libc::EMFILE),
    ("ETXTBSY", libc::ETXTBSY),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("ESPIPE", libc::ESPIPE),
    ("EROFS", libc::EROFS),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("EDQUOT", libc::EDQUOT),
];

fn errno_name(e: &io::Error) -> String {
    let n = e.raw_os_error().unwrap_or(0);
    ERRNOS
        .iter()
        .find(|(_, v)| *v == n)
        .map_or_else(|| format!("E{n}"), |(k, _)| k.to_string())
}

/// Errors that mean the storage failed, not that the replay diverged.
fn is_storage_failure(e: &str) -> bool {
    matches!(e, "EIO" | "ENOSPC" | "EROFS" | "EDQUOT")
}

/// The order between threads: call `i` may start once every call that ended before it
/// started in the recording is done. Calls sorted by recorded end; `frontier` counts the
/// done prefix of that order.
struct Order {
    rank: Vec<usize>,
    deps: Vec<usize>,
    done: Vec<AtomicBool>,
    frontier: Mutex<usize>,
    moved: Condvar,
}

impl Order {
    fn new(t: &Trace) -> Order {
        let n = t.events.len();
        let end = |i: usize| t.events[i].start_us.saturating_add(t.events[i].dur_us);
        let mut by_end: Vec<usize> = (0..n).collect();
        by_end.sort_by_key(|&i| (end(i), i));
        let mut rank = vec![0; n];
        for (r, &i) in by_end.iter().enumerate() {
            rank[i] = r;
        }
        let ends: Vec<u64> = by_end.iter().map(|&i| end(i)).collect();
        let deps = t
            .events
            .iter()
            .map(|e| ends.partition_point(|&x| x < e.start_us))
            .collect();
        Order {
            rank,
            deps,
            done: (0..n).map(|_| AtomicBool::new(false)).collect(),
            frontier: Mutex::new(0),
            moved: Condvar::new(),
        }
    }

    /// Waits until call `i` may start; false when the replay is ending.
    fn wait(&self, i: usize, abort: &AtomicBool) -> bool {
        let mut f = self.frontier.lock().unwrap_or_else(|p| p.into_inner());
        while *f < self.deps[i] {
            if abort.load(Ordering::Relaxed) {
                return false;
            }
            f = self
                .moved
                .wait_timeout(f, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    fn finish(&self, i: usize) {
        self.done[self.rank[i]].store(true, Ordering::SeqCst);
        let mut f = self.frontier.lock().unwrap_or_else(|p| p.into_inner());
        let before = *f;
        while *f < self.done.len() && self.done[*f].load(Ordering::SeqCst) {
            *f += 1;
        }
        if *f != before {
            self.moved.notify_all();
        }
    }
}

/// Per-thread accumulators, merged at the end.
#[derive(Default)]
struct Acc {
    hist: Vec<LatencyHistogram>,
    max_ns: Vec<u64>,
    mism: Vec<u64>,
    samples: Vec<Mismatch>,
    read: u64,
    written: u64,
    calls: u64,
    buckets: Vec<u64>,
    last_end: Option<Instant>,
}

struct Shared<'a> {
    trace: &'a Trace,
    dir: Beneath,
    order: Order,
    handles: Mutex<HashMap<u32, Arc<File>>>,
    speed: Speed,
    stop: &'a AtomicBool,
    abort: AtomicBool,
    failure: Mutex<Option<(u64, String)>>,
    progress_bytes: AtomicU64,
    buf: Vec<u8>,
}

/// The path of `p` beneath the run directory: root N is `N/`.
fn local(p: &TracePath) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let s = PathBuf::from(p.root.to_string());
    if p.rel.is_empty() {
        s
    } else {
        s.join(std::ffi::OsStr::from_bytes(&p.rel))
    }
}

/// Makes the run directory's contents: a directory per root, then the trace's initial
/// directories and files (random contents of the recorded sizes).
fn prepare(b: &Beneath, t: &Trace) -> io::Result<()> {
    for r in 0..t.roots.len() {
        b.mkdir(Path::new(&r.to_string()), 0o755)?;
    }
    let mut chunk = vec![0u8; 1 << 20];
    for i in &t.initial {
        match i {
            Initial::Dir(p) => match b.mkdir(&local(p), 0o755) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                r => r?,
            },
            Initial::File(p, size) => {
                let mut f = b.open_file(
                    &local(p),
                    OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC,
                    0o644,
                )?;
                let mut left = *size;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    fastrand::fill(&mut chunk[..n]);
                    f.write_all(&chunk[..n])?;
                    left -= n as u64;
                }
            }
        }
    }
    Ok(())
}

/// Replays `trace` in a new directory `dir/iolab-replay-PID-N` (created and removed here;
/// `name` is that directory's name, chosen and recorded by the caller).
pub fn replay(
    trace: &Trace,
    dir: &Path,
    name: &str,
    speed: Speed,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64, u64),
) -> Result<ReplayResult, ReplayError> {
    let in_dir = |path: PathBuf| move |source| ReplayError::Dir { path, source };
    let top = Beneath::open(dir).map_err(in_dir(dir.to_path_buf()))?;
    top.mkdir(Path::new(name), 0o755)
        .map_err(in_dir(PathBuf::from(format!("{}/{name}", dir.display()))))?;
    let run_dir = dir.join(name);
    let res = (|| {
        let b = Beneath::open(&run_dir).map_err(in_dir(run_dir.clone()))?;
        prepare(&b, trace).map_err(|source| ReplayError::Prepare {
            dir: run_dir.clone(),
            source,
        })?;
        Ok::<_, ReplayError>(run_prepared(trace, b, speed, stop, progress))
    })();
    let cleanup = top.remove_tree(Path::new(name));
    let mut r = res?;
    if let Err(e) = cleanup {
        r.notes.push(format!(
            "cleanup: could not remove {}: {e}",
            run_dir.display()
        ));
    }
    Ok(r)
}

fn run_prepared(
    trace: &Trace,
    dir: Beneath,
    speed: Speed,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f64, u64),
) -> ReplayResult {
    let max_io = trace
        .events
        .iter()
        .map(|e| match e.op {
            Op::Read { size, .. }
            | Op::Pread { size, .. }
            | Op::Write { size, .. }
            | Op::Pwrite { size, .. } => size as usize,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    let mut buf = vec![0u8; max_io];
    fastrand::fill(&mut buf);
    let sh = Shared {
        trace,
        dir,
        order: Order::new(trace),
        handles: Mutex::new(HashMap::new()),
        speed,
        stop,
        abort: AtomicBool::new(false),
        failure: Mutex::new(None),
        progress_bytes: AtomicU64::new(0),
        buf,
    };
    let threads = trace.threads();
    let mut per_thread: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, e) in trace.events.iter().enumerate() {
        per_thread.entry(e.tid).or_default().push(i);
    }
    let start = Instant::now();
    let finished = AtomicU64::new(0);
    let mut spawn_error = None;
    let accs: Vec<Acc> = std::thread::scope(|s| {
        let mut hs = Vec::new();
        for tid in &threads {
            let list = &per_thread[tid];
            let sh = &sh;
            let finished = &finished;
            match std::thread::Builder::new()
                .name(format!("replay-{tid}"))
                .spawn_scoped(s, move || {
                    let a = run_thread(sh, list, start);
                    finished.fetch_add(1, Ordering::SeqCst);
                    a
                }) {
                Ok(h) => hs.push(h),
                Err(e) => {
                    spawn_error = Some(format!("could not start a replay thread: {e}"));
                    sh.abort.store(true, Ordering::SeqCst);
                    break;
                }
            }
        }
        let mut next = start + Duration::from_secs(1);
        while (finished.load(Ordering::SeqCst) as usize) < hs.len() {
            if stop.load(Ordering::Relaxed) {
                sh.abort.store(true, Ordering::SeqCst);
            }
            let now = Instant::now();
            if now >= next {
                progress(
                    (now - start).as_secs_f64(),
                    sh.progress_bytes.load(Ordering::Relaxed),
                );
                next += Duration::from_secs(1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        hs.into_iter()
            .map(|h| match h.join() {
                Ok(a) => a,
                Err(_) => {
                    spawn_error = Some("a replay thread panicked".into());
                    Acc::default()
                }
            })
            .collect()
    });
    sh.handles.lock().unwrap_or_else(|p| p.into_inner()).clear();
    merge(trace, &sh, accs, start, spawn_error)
}

fn merge(
    trace: &Trace,
    sh: &Shared<'_>,
    accs: Vec<Acc>,
    start: Instant,
    spawn_error: Option<String>,
) -> ReplayResult {
    let k = OP_NAMES.len();
    let mut hist: Vec<LatencyHistogram> = (0..k).map(|_| LatencyHistogram::new()).collect();
    let mut max_ns = vec![0u64; k];
    let mut mism = vec![0u64; k];
    let mut recorded = vec![0u64; k];
    let (mut rb, mut wb) = (0u64, 0u64);
    for e in &trace.events {
        recorded[e.op.kind()] += 1;
        if let (Some(d), Outcome::Ok(n)) = (e.op.transfer(), &e.result) {
            match d {
                iolab_spec::trace::Dir::Read => rb += n,
                iolab_spec::trace::Dir::Write => wb += n,
            }
        }
    }
    let mut samples = Vec::new();
    let (mut read, mut written, mut calls) = (0, 0, 0);
    let mut buckets: Vec<u64> = Vec::new();
    let mut end = start;
    for a in accs {
        for i in 0..a.hist.len() {
            hist[i].merge(&a.hist[i]);
            max_ns[i] = max_ns[i].max(a.max_ns[i]);
            mism[i] += a.mism[i];
        }
        samples.extend(a.samples);
        read += a.read;
        written += a.written;
        calls += a.calls;
        if buckets.len() < a.buckets.len() {
            buckets.resize(a.buckets.len(), 0);
        }
        for (b, v) in buckets.iter_mut().zip(&a.buckets) {
            *b += v;
        }
        if let Some(t) = a.last_end {
            end = end.max(t);
        }
    }
    samples.sort_by_key(|m| m.line);
    samples.truncate(20);
    let ms = |ns: f64| ns / 1e6;
    let ops: Vec<OpStats> = (0..k)
        .filter(|&i| recorded[i] > 0)
        .map(|i| OpStats {
            op: OP_NAMES[i],
            count: hist[i].count(),
            recorded: recorded[i],
            avg_ms: ms(hist[i].mean_ns()),
            max_ms: ms(max_ns[i] as f64),
            p99_ms: if hist[i].is_empty() {
                0.0
            } else {
                ms(hist[i].quantile_ns(0.99) as f64)
            },
            mismatches: mism[i],
            histogram: hist[i].clone(),
        })
        .collect();
    let span = trace
        .events
        .iter()
        .map(|e| e.start_us + e.dur_us)
        .max()
        .unwrap_or(0)
        .saturating_sub(trace.events.first().map_or(0, |e| e.start_us));
    let mut failure = sh
        .failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .map(|(_, f)| f);
    if failure.is_none() {
        failure = spawn_error;
    }
    ReplayResult {
        seconds: (end - start).as_secs_f64(),
        recorded_seconds: span as f64 / 1e6,
        threads: trace.threads().len(),
        calls,
        recorded_calls: trace.events.len() as u64,
        bytes_read: read,
        bytes_written: written,
        recorded_bytes_read: rb,
        recorded_bytes_written: wb,
        mismatches: mism.iter().sum(),
        ops,
        mismatch_samples: samples,
        per_second_bytes: buckets,
        interrupted: sh.stop.load(Ordering::Relaxed),
        failure,
        notes: Vec::new(),
    }
}

fn run_thread(sh: &Shared<'_>, list: &[usize], start: Instant) -> Acc {
    let k = OP_NAMES.len();
    let mut a = Acc {
        hist: (0..k).map(|_| LatencyHistogram::new()).collect(),
        max_ns: vec![0; k],
        mism: vec![0; k],
        ..Acc::default()
    };
    let mut rbuf = Vec::new();
    for &i in list {
        if sh.abort.load(Ordering::Relaxed) || !sh.order.wait(i, &sh.abort) {
            break;
        }
        let e = &sh.trace.events[i];
        if let Speed::Scaled(f) = sh.speed {
            let due = start + Duration::from_secs_f64(e.start_us as f64 / 1e6 / f);
            while Instant::now() < due {
                if sh.abort.load(Ordering::Relaxed) {
                    return a;
                }
                std::thread::sleep((due - Instant::now()).min(Duration::from_millis(50)));
            }
        }
        let t0 = Instant::now();
        let got = execute(sh, &e.op, &mut rbuf);
        let t1 = Instant::now();
        sh.order.finish(i);
        let ns = (t1 - t0).as_nanos() as u64;
        let kind = e.op.kind();
        a.hist[kind].record(ns);
        a.max_ns[kind] = a.max_ns[kind].max(ns);
        a.calls += 1;
        a.last_end = Some(t1);
        if let (Some(d), Ok(n)) = (e.op.transfer(), &got) {
            match d {
                iolab_spec::trace::Dir::Read => a.read += n,
                iolab_spec::trace::Dir::Write => a.written += n,
            }
            let sec = (t1 - start).as_secs() as usize;
            if a.buckets.len() <= sec {
                a.buckets.resize(sec + 1, 0);
            }
            a.buckets[sec] += n;
            sh.progress_bytes.fetch_add(*n, Ordering::Relaxed);
        }
        let got_s = match &got {
            Ok(n) => Outcome::Ok(*n),
            Err(e) => Outcome::Err(errno_name(e)),
        };
        let same = match (&e.result, &got_s) {
            // Offsets and counts must agree; open, close and friends succeed or not.
            (Outcome::Ok(x), Outcome::Ok(y)) => {
                x == y || !(e.op.transfer().is_some() || matches!(e.op, Op::Lseek { .. }))
            }
            (x, y) => x == y,
        };
        if !same {
            a.mism[kind] += 1;
            if a.samples.len() < 20 {
                a.samples.push(Mismatch {
                    line: e.line,
                    op: e.op.name(),
                    expected: e.result.to_string(),
                    got: got_s.to_string(),
                });
            }
            let fatal = match (&e.result, &got_s) {
                (Outcome::Ok(_), Outcome::Err(x)) => is_storage_failure(x),
                (Outcome::Ok(x), Outcome::Ok(y)) => {
                    matches!(e.op.transfer(), Some(iolab_spec::trace::Dir::Write)) && y < x
                }
                _ => false,
            };
            if fatal {
                let mut f = sh.failure.lock().unwrap_or_else(|p| p.into_inner());
                if f.as_ref().is_none_or(|(l, _)| u64::from(e.line) < *l) {
                    *f = Some((
                        u64::from(e.line),
                        format!(
                            "trace line {}: {} returned {got_s} where the recording had {}",
                            e.line,
                            e.op.name(),
                            e.result
                        ),
                    ));
                }
                sh.abort.store(true, Ordering::SeqCst);
                break;
            }
        }
    }
    a
}

fn flags_of(f: &iolab_spec::trace::OpenFlags) -> OFlags {
    let mut o = match (f.read, f.write) {
        (true, true) => OFlags::RDWR,
        (false, true) => OFlags::WRONLY,
        _ => OFlags::RDONLY,
    };
    for (on, flag) in [
        (f.create, OFlags::CREATE),
        (f.excl, OFlags::EXCL),
        (f.trunc, OFlags::TRUNC),
        (f.append, OFlags::APPEND),
        (f.sync, OFlags::SYNC),
        (f.dsync, OFlags::DSYNC),
        (f.direct, OFlags::DIRECT),
        (f.directory, OFlags::DIRECTORY),
    ] {
        if on {
            o |= flag;
        }
    }
    o
}

/// Issues one call; its count, offset or 0.
fn execute(sh: &Shared<'_>, op: &Op, rbuf: &mut Vec<u8>) -> io::Result<u64> {
    let file = |h: u32| -> io::Result<Arc<File>> {
        sh.handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&h)
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    };
    let d = &sh.dir;
    match op {
        Op::Open {
            handle,
            path,
            flags,
            mode,
        } => {
            let f = d.open_file(&local(path), flags_of(flags), *mode)?;
            if let Some(h) = handle {
                sh.handles
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(*h, Arc::new(f));
            }
            Ok(0)
        }
        Op::Close { handle } => {
            let f = sh
                .handles
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(handle)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
            // The last reference closes it (another thread may still be in a call on it).
            drop(f);
            Ok(0)
        }
        Op::Read { handle, size, .. } => {
            let f = file(*handle)?;
            rbuf.resize(*size as usize, 0);
            Ok((&*f).read(rbuf)? as u64)
        }
        Op::Pread {
            handle,
            size,
            offset,
            ..
        } => {
            let f = file(*handle)?;
            rbuf.resize(*size as usize, 0);
            Ok(f.read_at(rbuf, *offset)? as u64)
        }
        Op::Write { handle, size, .. } => {
            let f = file(*handle)?;
            Ok((&*f).write(&sh.buf[..*size as usize])? as u64)
        }
        Op::Pwrite {
            handle,
            size,
            offset,
            ..
        } => {
            let f = file(*handle)?;
            Ok(f.write_at(&sh.buf[..*size as usize], *offset)? as u64)
        }
        Op::Lseek {
            handle,
            offset,
            whence,
        } => {
            let f = file(*handle)?;
            let to = match whence {
                Whence::Set => SeekFrom::Start(*offset as u64),
                Whence::Cur => SeekFrom::Current(*offset),
                Whence::End => SeekFrom::End(*offset),
            };
            (&*f).seek(to)
        }
        Op::Fsync { handle } => file(*handle)?.sync_all().map(|_| 0),
        Op::Fdatasync { handle } => file(*handle)?.sync_data().map(|_| 0),
        Op::SyncFileRange {
            handle,
            offset,
            len,
        } => {
            let f = file(*handle)?;
            use std::os::fd::AsRawFd;
            // SAFETY: a plain syscall on a descriptor this function holds open (rustix has
            // no sync_file_range).
            let r = unsafe {
                libc::sync_file_range(
                    f.as_raw_fd(),
                    *offset as i64,
                    *len as i64,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            if r < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(0)
            }
        }
        Op::Ftruncate { handle, len } => file(*handle)?.set_len(*len).map(|_| 0),
        Op::Truncate { path, len } => d
            .open_file(&local(path), OFlags::WRONLY, 0)?
            .set_len(*len)
            .map(|_| 0),
        Op::Fallocate {
            handle,
            mode,
            offset,
            len,
        } => {
            let f = file(*handle)?;
            let mode = rustix::fs::FallocateFlags::from_bits_retain(*mode);
            rustix::fs::fallocate(f, mode, *offset, *len)
                .map(|()| 0)
                .map_err(io::Error::from)
        }
        Op::Rename {
            from,
            to,
            noreplace,
        } => d
            .rename_with(&local(from), &local(to), *noreplace)
            .map(|_| 0),
        Op::Unlink { path } => d.unlink(&local(path)).map(|_| 0),
        Op::Mkdir { path, mode } => d.mkdir(&local(path), *mode).map(|_| 0),
        Op::Rmdir { path } => d.rmdir(&local(path)).map(|_| 0),
        Op::Link { from, to } => d.link(&local(from), &local(to)).map(|_| 0),
        Op::Symlink { target, path } => d.symlink(target, &local(path)).map(|_| 0),
        Op::Stat { path, .. } => d.file_type(&local(path)).map(|_| 0),
        Op::Fstat { handle } => file(*handle)?.metadata().map(|_| 0),
    }
}

impl ReplayResult {
    /// MB/s of the bytes read and written over the replay's time.
    pub fn mb_s(&self) -> f64 {
        if self.seconds > 0.0 {
            (self.bytes_read + self.bytes_written) as f64 / MB / self.seconds
        } else {
            0.0
        }
    }

    /// The operation table (dbench's columns, plus the recorded count and mismatches).
    pub fn op_table(&self) -> String {
        let mut s = String::from(
            " Operation         Count  Recorded    AvgLat    MaxLat    P99Lat  Mismatch\n",
        );
        s.push_str(&format!(" {}\n", "-".repeat(73)));
        for o in &self.ops {
            s.push_str(&format!(
                " {:<15} {:>7} {:>9} {:>9.3} {:>9.3} {:>9.3} {:>9}\n",
                o.op, o.count, o.recorded, o.avg_ms, o.max_ms, o.p99_ms, o.mismatches
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trace that cannot be read keeps the I/O error beneath its message.
    #[test]
    fn a_trace_not_read_keeps_the_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.trace");
        let e = read_trace(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: cannot read: No such file or directory (os error 2)",
                path.display()
            )
        );
        let mut cause: Option<&dyn std::error::Error> = Some(&e);
        let mut io = None;
        while let Some(c) = cause {
            io = io.or(c.downcast_ref::<io::Error>());
            cause = c.source();
        }
        assert_eq!(io.map(io::Error::kind), Some(io::ErrorKind::NotFound));
    }
}
