//! mdtest-shaped metadata rates: create, stat, read, rename and delete N small files spread
//! over M directories by T threads, one phase after the other, with operations per second
//! and per-operation latency for each phase, and the space each small file really takes
//! (statvfs before and after creating them): the visible effect of the allocation unit.
//! With `verify`, create writes content derived from the run id and each file's index
//! ([`iolab_integrity::filecheck`]) and the read phase compares every file with it.

pub mod info;
pub mod run;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

use iolab_engine::buffers::fill_random;
use iolab_measure::{DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord};
use iolab_spec::{format_bytes, JobSpec, Rw};
use serde::{Deserialize, Serialize};

pub use crate::common::WorkloadError;
use crate::common::{
    device_of, io_err, run_workers, ser_round6, ser_round6_opt, statvfs, syncfs, test_record,
    unique_name, Series, Watch, SERIES_INTERVAL,
};
use iolab_integrity::filecheck::{self, Comparison, Content};
use iolab_integrity::{Tally, Unit};
use iolab_runner::coord::Phases;
use iolab_runner::RunError;

/// Default size of each file: smaller than any allocation unit.
pub const DEFAULT_FILE_SIZE: u64 = 100;
/// Largest file size accepted (these are small-file tests).
pub const MAX_FILE_SIZE: u64 = 64 << 20;
/// Most threads.
pub const MAX_THREADS: u32 = 256;

/// The metadata test to run.
#[derive(Debug, Clone)]
pub struct MetadataConfig {
    /// Directory in which a fresh work directory is created (and removed at the end).
    pub dir: PathBuf,
    /// Files in total (file i lives in directory i mod `dirs`).
    pub files: u64,
    /// Directories the files are spread over.
    pub dirs: u32,
    /// Threads; thread t handles files t, t+T, t+2T, ... (so threads share directories).
    pub threads: u32,
    /// Bytes written to each file at creation.
    pub file_size: u64,
    /// fsync every file after writing it (the fsync counts in the create operation).
    pub fsync: bool,
    /// `--verify` with this run id: create writes content derived from it and each file's
    /// index, and the read phase compares every file with it (its test gets `extra.verify`).
    pub verify: Option<u64>,
    /// Test seam: called with the work directory after the stat phase, before the read
    /// phase (file i is `d<i mod dirs, 4 digits>/f<i, 9 digits>` in it).
    #[doc(hidden)]
    pub before_read: Option<BeforeRead>,
}

/// The callback of [`MetadataConfig::before_read`].
#[doc(hidden)]
#[derive(Clone)]
pub struct BeforeRead(pub Arc<dyn Fn(&Path) + Send + Sync>);

impl std::fmt::Debug for BeforeRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeRead")
    }
}

impl MetadataConfig {
    /// Defaults: 10,000 files of 100 bytes in 10 directories, one thread, no fsync.
    pub fn new(dir: PathBuf) -> Self {
        MetadataConfig {
            dir,
            files: 10_000,
            dirs: 10,
            threads: 1,
            file_size: DEFAULT_FILE_SIZE,
            fsync: false,
            verify: None,
            before_read: None,
        }
    }

    /// The content `verify` writes and checks.
    fn content(&self) -> Option<Content> {
        self.verify.map(|id| Content::new(id, self.file_size))
    }
}

/// The phases, run in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// open(O_CREAT | O_EXCL) + write `file_size` bytes (+ fsync) + close.
    Create,
    /// stat() and a check of the size.
    Stat,
    /// open + read to end of file + close, and a check of the length.
    Read,
    /// rename() within the same directory.
    Rename,
    /// unlink().
    Delete,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::Create,
        Phase::Stat,
        Phase::Read,
        Phase::Rename,
        Phase::Delete,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Stat => "stat",
            Phase::Read => "read",
            Phase::Rename => "rename",
            Phase::Delete => "delete",
        }
    }

    /// The direction a phase is recorded under: reads of data or metadata, or changes.
    fn rw(self) -> Rw {
        match self {
            Phase::Stat | Phase::Read => Rw::Read,
            _ => Rw::Write,
        }
    }
}

/// The work directory: `base/dNNNN/fNNNNNNNNN`, renamed to `rNNNNNNNNN`.
struct Tree {
    base: PathBuf,
    /// The work directory as it was made (device and inode): swept only while `base`
    /// still is it.
    made: iolab_sys::files::Made,
    dirs: u32,
    files: u64,
    /// Subdirectories created so far.
    subdirs: u32,
    /// Dismantled already (after a complete run).
    gone: bool,
}

impl Tree {
    fn subdir(&self, d: u32) -> PathBuf {
        self.base.join(format!("d{d:04}"))
    }

    fn path(&self, i: u64, renamed: bool) -> PathBuf {
        self.base.join(self.relative(i, renamed))
    }

    /// The path of file `i` in the work directory.
    fn relative(&self, i: u64, renamed: bool) -> String {
        let d = i % self.dirs as u64;
        let p = if renamed { 'r' } else { 'f' };
        format!("d{d:04}/{p}{i:09}")
    }

    /// Whether `name` in directory `d` is one of iolab's files.
    fn ours(&self, d: u32, name: &str) -> bool {
        let Some(num) = name.strip_prefix('f').or_else(|| name.strip_prefix('r')) else {
            return false;
        };
        num.len() == 9
            && num.bytes().all(|b| b.is_ascii_digit())
            && num
                .parse::<u64>()
                .is_ok_and(|i| i < self.files && i % self.dirs as u64 == d as u64)
    }

    /// Removes iolab's files (whatever phase they reached), then the directories.
    /// Anything else found in them stays, and the directory with it. A work directory
    /// moved away and replaced during the run is not swept: what is at its path now is
    /// someone else's (the run state tells: `RunState::finish`).
    fn sweep(&mut self) -> Result<(), WorkloadError> {
        if self.gone {
            return Ok(());
        }
        match self.made.check() {
            Ok(iolab_sys::files::Found::Same) => {}
            Ok(iolab_sys::files::Found::Gone) => {
                self.gone = true;
                return Ok(());
            }
            Ok(iolab_sys::files::Found::Replaced { moved_to }) => {
                self.gone = true;
                let mut what = format!(
                    "{} is not the directory this run created (it was replaced during the \
                     run): left alone",
                    self.base.display()
                );
                if let Some(m) = moved_to {
                    what.push_str(&format!("; the run's own was moved to {}", m.display()));
                }
                eprintln!("iolab: warning: {what}");
                return Ok(());
            }
            Err(err) => return Err(WorkloadError::io(&self.base, "inspect", err)),
        }
        let mut first: Option<WorkloadError> = None;
        let mut keep = |e: WorkloadError| {
            if first.is_none() {
                first = Some(e);
            }
        };
        for d in 0..self.subdirs {
            let dir = self.subdir(d);
            match std::fs::read_dir(&dir) {
                Ok(rd) => {
                    for e in rd.flatten() {
                        let name = e.file_name();
                        if self.ours(d, &name.to_string_lossy()) {
                            if let Err(err) = std::fs::remove_file(e.path()) {
                                keep(WorkloadError::io(&e.path(), "remove", err));
                            }
                        }
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => continue,
                Err(err) => keep(WorkloadError::io(&dir, "list", err)),
            }
            if let Err(err) = std::fs::remove_dir(&dir) {
                keep(WorkloadError::io(&dir, "remove", err));
            }
        }
        if let Err(err) = std::fs::remove_dir(&self.base) {
            if err.kind() != io::ErrorKind::NotFound {
                keep(WorkloadError::io(&self.base, "remove", err));
            }
        }
        self.gone = true;
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let Err(e) = self.sweep() {
            eprintln!("iolab: could not remove what it created: {e}");
        }
    }
}

/// What one thread did in one phase.
struct ThreadResult {
    start: Instant,
    end: Instant,
    ops: u64,
    bytes: u64,
    /// Bytes allocated to the files seen (stat: st_blocks x 512).
    allocated: u64,
    hist: LatencyHistogram,
    sync_hist: LatencyHistogram,
    bytes_series: Series,
    ops_series: Series,
    stopped: bool,
    /// Read phase with `verify`: the files compared.
    tally: Option<Tally>,
}

/// A counter on its own cache line.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

struct PhaseArgs<'a> {
    phase: Phase,
    tree: &'a Tree,
    cfg: &'a MetadataConfig,
    thread: u64,
    threads: u64,
    barrier: &'a Barrier,
    stop: &'a AtomicBool,
    abort: &'a AtomicBool,
    counter: &'a Counter,
    data: &'a [u8],
    /// `verify`: what every file holds.
    content: Option<Content>,
}

/// What one operation did.
#[derive(Default)]
struct OpDone {
    /// Bytes moved.
    bytes: u64,
    /// Bytes allocated to the file (stat).
    allocated: u64,
    /// Time of the fsync, if one was done.
    sync_ns: Option<u64>,
    /// Read with `verify`: bytes at the start of the buffer still to be compared.
    pending: usize,
}

/// One operation of `phase` on file `i`. With `verify`, create writes `buf[..file_size]`,
/// filled before the operation, when the file fits in `buf` (else it generates the content
/// chunk by chunk, inside the operation), and read leaves what it read last in `buf` for
/// `cmp` (feeding `cmp` itself, inside the operation, only when the file overflows `buf`).
fn op(
    a: &PhaseArgs<'_>,
    i: u64,
    buf: &mut [u8],
    mut cmp: Option<&mut Comparison>,
) -> Result<OpDone, WorkloadError> {
    let size = a.cfg.file_size;
    match a.phase {
        Phase::Create => {
            let p = a.tree.path(i, false);
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&p)
                .map_err(io_err(&p, "create"))?;
            match a.content {
                None => f.write_all(a.data),
                Some(_) if size <= buf.len() as u64 => f.write_all(&buf[..size as usize]),
                Some(c) => (0..size).step_by(buf.len()).try_for_each(|off| {
                    let n = (size - off).min(buf.len() as u64) as usize;
                    c.fill(i, &mut buf[..n], off);
                    f.write_all(&buf[..n])
                }),
            }
            .map_err(io_err(&p, "write"))?;
            let mut sync_ns = None;
            if a.cfg.fsync {
                let t = Instant::now();
                f.sync_all().map_err(io_err(&p, "fsync"))?;
                sync_ns = Some(t.elapsed().as_nanos() as u64);
            }
            Ok(OpDone {
                bytes: size,
                sync_ns,
                ..OpDone::default()
            })
        }
        Phase::Stat => {
            let p = a.tree.path(i, false);
            let m = std::fs::symlink_metadata(&p).map_err(io_err(&p, "stat"))?;
            // With `verify` a wrong size is left to the read phase, which classifies it.
            if !m.is_file() || (m.len() != size && a.content.is_none()) {
                return Err(WorkloadError::mismatch(
                    &p,
                    format!("expected a {size}-byte file, found {} bytes", m.len()),
                ));
            }
            Ok(OpDone {
                allocated: m.blocks() * 512,
                ..OpDone::default()
            })
        }
        Phase::Read => {
            let p = a.tree.path(i, false);
            let mut f = File::open(&p).map_err(io_err(&p, "open"))?;
            let (mut got, mut fill) = (0u64, 0usize);
            loop {
                if fill == buf.len() {
                    if let Some(c) = cmp.as_deref_mut() {
                        c.feed(buf);
                    }
                    fill = 0;
                }
                match f.read(&mut buf[fill..]) {
                    Ok(0) => break,
                    Ok(n) => {
                        got += n as u64;
                        fill += n;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(WorkloadError::io(&p, "read", e)),
                }
            }
            // With `verify` a wrong length is a verdict of the comparison, not an error.
            if got != size && cmp.is_none() {
                return Err(WorkloadError::mismatch(
                    &p,
                    format!("read {got} bytes from a {size}-byte file"),
                ));
            }
            Ok(OpDone {
                bytes: got,
                pending: fill,
                ..OpDone::default()
            })
        }
        Phase::Rename => {
            let from = a.tree.path(i, false);
            let to = a.tree.path(i, true);
            std::fs::rename(&from, &to).map_err(io_err(&from, "rename"))?;
            Ok(OpDone::default())
        }
        Phase::Delete => {
            let p = a.tree.path(i, true);
            std::fs::remove_file(&p).map_err(io_err(&p, "delete"))?;
            Ok(OpDone::default())
        }
    }
}

fn phase_thread(a: PhaseArgs<'_>) -> Result<ThreadResult, WorkloadError> {
    let size = a.cfg.file_size;
    // With `verify`, one byte more than a file, so that a file of the right length that
    // fits is compared after its read, never during it.
    let mut buf =
        vec![0u8; (size as usize).clamp(4096, 1 << 20) + usize::from(a.content.is_some())];
    let prefill = a
        .content
        .filter(|_| a.phase == Phase::Create && size <= buf.len() as u64);
    let mut cmp = a
        .content
        .filter(|_| a.phase == Phase::Read)
        .map(Comparison::new);
    let mut tally = cmp.as_ref().map(|_| Tally::new(Unit::Files));
    let mut hist = LatencyHistogram::new();
    let mut sync_hist = LatencyHistogram::new();
    let (mut ops, mut bytes, mut allocated) = (0u64, 0u64, 0u64);
    a.barrier.wait();
    let start = Instant::now();
    let mut bytes_series = Series::new(start);
    let mut ops_series = Series::new(start);
    let mut stopped = false;
    let mut i = a.thread;
    while i < a.cfg.files {
        if a.stop.load(Ordering::Relaxed) || a.abort.load(Ordering::Relaxed) {
            stopped = true;
            break;
        }
        // Generating the content to write is not part of the operation's latency.
        if let Some(c) = prefill {
            c.fill(i, &mut buf[..size as usize], 0);
        }
        if let Some(c) = cmp.as_mut() {
            c.begin(i);
        }
        let t0 = Instant::now();
        let done = op(&a, i, &mut buf, cmp.as_mut())?;
        let t1 = Instant::now();
        hist.record((t1 - t0).as_nanos() as u64);
        if let Some(ns) = done.sync_ns {
            sync_hist.record(ns);
        }
        // Nor is comparing what was read (but both are in the phase's time).
        if let (Some(c), Some(t), Some(content)) = (cmp.as_mut(), tally.as_mut(), a.content) {
            let t2 = Instant::now();
            c.feed(&buf[..done.pending]);
            let v = c.finish();
            filecheck::record(t, &content, i, || a.tree.relative(i, false), &v);
            *t.seconds.get_or_insert(0.0) += t2.elapsed().as_secs_f64();
        }
        bytes_series.add(t1, done.bytes);
        ops_series.add(t1, 1);
        ops += 1;
        bytes += done.bytes;
        allocated += done.allocated;
        a.counter.0.store(ops, Ordering::Relaxed);
        i += a.threads;
    }
    let end = Instant::now();
    bytes_series.extend_to(end);
    ops_series.extend_to(end);
    Ok(ThreadResult {
        start,
        end,
        ops,
        bytes,
        allocated,
        hist,
        sync_hist,
        bytes_series,
        ops_series,
        stopped,
        tally,
    })
}

/// What each phase's test carries in `extra` (docs/metadata.md).
#[derive(Debug, Serialize)]
struct PhaseExtra {
    workload: &'static str,
    /// "create", "stat", "read", "rename" or "delete".
    phase: &'static str,
    ops: u64,
    #[serde(serialize_with = "ser_round6")]
    ops_per_s: f64,
    #[serde(serialize_with = "ser_round6")]
    seconds: f64,
    files: u64,
    dirs: u32,
    threads: u64,
    file_size: u64,
    fsync: bool,
    dirs_created: u32,
    dirs_removed: u32,
    /// The length of one interval of `ops_series`.
    ops_interval_ms: u64,
    /// Operations done per interval.
    ops_series: Vec<u64>,
    /// "verifiable" with `verify`, else "random".
    content: &'static str,
    /// The create phase: what the files cost in space (absent elsewhere, and when the
    /// create phase did not finish).
    #[serde(skip_serializing_if = "Option::is_none")]
    space: Option<SpaceExtra>,
    /// The create phase, when `space` is left out because other writers moved the
    /// filesystem's use during the run: why, with the figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    space_unmeasured: Option<String>,
    /// The read phase with `verify`: the comparison of every file (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<Tally>,
}

/// The keys of [`PhaseExtra`] its descriptor reads back (`info.rs`): the operation series
/// and the create phase's space.
#[derive(Debug, Deserialize)]
pub(crate) struct PhaseRead {
    pub ops_interval_ms: Option<u64>,
    pub ops_series: Option<Vec<f64>>,
    pub space: Option<SpaceExtra>,
}

impl PhaseRead {
    /// A test's `extra`, when it reads as a phase's.
    pub(crate) fn of(t: &TestRecord) -> Option<PhaseRead> {
        PhaseRead::deserialize(&t.extra).ok()
    }
}

/// The create phase's `extra.space`: statvfs before and after creating the files, per
/// file (the reports' space table, through the descriptor); a key left out reads back as
/// its default.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct SpaceExtra {
    statvfs_used_before: u64,
    statvfs_used_after: u64,
    #[serde(serialize_with = "ser_round6")]
    pub bytes_per_file: f64,
    /// `bytes_per_file` over the file size; null for empty files.
    #[serde(serialize_with = "ser_round6_opt")]
    overhead_ratio: Option<f64>,
    #[serde(serialize_with = "ser_round6")]
    inodes_per_file: f64,
    /// st_blocks over the files, from the stat phase; null when it did not finish.
    #[serde(serialize_with = "ser_round6_opt")]
    pub allocated_bytes_per_file: Option<f64>,
    f_bsize: u64,
    f_frsize: u64,
}

/// One finished phase.
struct PhaseResult {
    phase: Phase,
    /// When its first thread started.
    started: Instant,
    pass: PassRecord,
    ops: u64,
    seconds: f64,
    allocated: u64,
    ops_series: Vec<u64>,
    /// Read phase with `verify`.
    verify: Option<Tally>,
}

fn run_phase(
    phase: Phase,
    tree: &Tree,
    cfg: &MetadataConfig,
    threads: u64,
    devices: &[String],
    progress: &mut dyn FnMut(&str, u64),
    phases: &mut Phases<'_>,
) -> Result<Option<PhaseResult>, WorkloadError> {
    let stop = phases.stop();
    let content = cfg.content();
    // Random bytes shared by every create, unless `verify` writes each file's own content.
    let data = {
        let len = if content.is_some() { 0 } else { cfg.file_size };
        let mut d = vec![0u8; len as usize];
        fill_random(&mut d, &mut fastrand::Rng::new());
        d
    };
    let barrier = Barrier::new(threads as usize);
    let abort = AtomicBool::new(false);
    let counters: Vec<Counter> = (0..threads).map(|_| Counter::default()).collect();
    progress(phase.name(), 0);
    let mut watch = Watch::start(devices);
    // The other ranks' barrier as late as can be: what a rank does between it and its
    // threads' start delays its start.
    match phases.before() {
        Err(RunError::Interrupted) => return Ok(None),
        r => r.map_err(WorkloadError::Ranks)?,
    }
    if phases.ranks() > 1 {
        watch.devices_from_now();
    }
    let results: Vec<Result<ThreadResult, WorkloadError>> = run_workers(
        threads as usize,
        &abort,
        |t| {
            phase_thread(PhaseArgs {
                phase,
                tree,
                cfg,
                thread: t as u64,
                threads,
                barrier: &barrier,
                stop,
                abort: &abort,
                counter: &counters[t],
                data: &data,
                content,
            })
        },
        || {
            progress(
                phase.name(),
                counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum(),
            )
        },
    );
    let mut done = Vec::with_capacity(results.len());
    for r in results {
        done.push(r?);
    }
    if done.iter().any(|r| r.stopped) {
        return Ok(None);
    }
    let first = done.iter().map(|r| r.start).min().expect("threads >= 1");
    let last = done.iter().map(|r| r.end).max().expect("threads >= 1");
    let seconds = (last - first).as_secs_f64();
    let mut hist = LatencyHistogram::new();
    let mut sync_hist = LatencyHistogram::new();
    let mut bytes_series = Series::new(first);
    let mut ops_series = Series::new(first);
    let (mut ops, mut bytes, mut allocated) = (0u64, 0u64, 0u64);
    let mut verify: Option<Tally> = None;
    for r in &mut done {
        if let Some(t) = r.tally.take() {
            verify
                .get_or_insert_with(|| Tally::new(Unit::Files))
                .merge(t);
        }
        hist.merge(&r.hist);
        sync_hist.merge(&r.sync_hist);
        bytes_series.merge(&r.bytes_series);
        ops_series.merge(&r.ops_series);
        ops += r.ops;
        bytes += r.bytes;
        allocated += r.allocated;
    }
    let (cpu, activity) = watch.finish(ops);
    progress(phase.name(), ops);
    if ops != cfg.files {
        return Err(WorkloadError::mismatch(
            &tree.base,
            format!(
                "{}: {ops} operations completed for {} files",
                phase.name(),
                cfg.files
            ),
        ));
    }
    let d = DirResult::from_histogram(bytes, seconds, hist);
    let (read, write) = match phase.rw() {
        Rw::Read => (Some(d), None),
        _ => (None, Some(d)),
    };
    let sync = (!sync_hist.is_empty()).then(|| SyncStats {
        count: sync_hist.count(),
        lat_us: sync_hist.summary_us(),
    });
    let mut pass = PassRecord::new(
        1,
        seconds,
        read,
        write,
        sync,
        cpu,
        bytes_series.into_timeseries(),
    );
    pass.context.activity = activity;
    Ok(Some(PhaseResult {
        phase,
        started: first,
        pass,
        ops,
        seconds,
        allocated,
        ops_series: ops_series.buckets().to_vec(),
        verify,
    }))
}

/// Why the statvfs space figure cannot be the run's, or None when it can: used space
/// before the create phase, after it, and at the end once the run's files and directories
/// were removed. Used space that shrank while files were created, or that did not come
/// back to within a tenth of the growth (and 64 blocks) of where it was, was moved by
/// other writers on the filesystem.
fn space_drift(before: u64, after: u64, end: u64, block: u64) -> Option<String> {
    let growth = after as i128 - before as i128;
    let drift = end as i128 - before as i128;
    let slack = (growth.abs() / 10).max(64 * block.max(512) as i128);
    let fmt = |v: i128| {
        let s = iolab_spec::format_bytes(v.unsigned_abs() as u64);
        if v < 0 {
            format!("-{s}")
        } else {
            s
        }
    };
    if growth < 0 || drift.abs() > slack {
        Some(format!(
            "not measured: the filesystem's used space changed by {} while the files were              created and was {} off its start once they were all removed: other processes              wrote or freed space on it during the run (measure on a filesystem nothing else              writes to)",
            fmt(growth),
            fmt(drift)
        ))
    } else {
        None
    }
}

/// Blocks in use and free inodes of the filesystem, after writing it back.
fn usage(path: &Path) -> Result<(u64, u64, iolab_sys::FsStats), WorkloadError> {
    syncfs(path)?;
    let st = statvfs(path)?;
    Ok((st.used_bytes(), st.files_free, st))
}

/// Refuses counts and sizes out of range (checked when the run is planned, before
/// anything is touched, and again by [`run`]).
pub fn check_config(cfg: &MetadataConfig) -> Result<(), WorkloadError> {
    if cfg.files == 0 || cfg.files >= 1_000_000_000 {
        return Err(WorkloadError::invalid(
            "files",
            "must be between 1 and 999,999,999",
        ));
    }
    if cfg.dirs == 0 || cfg.dirs > 10_000 {
        return Err(WorkloadError::invalid(
            "dirs",
            "must be between 1 and 10,000",
        ));
    }
    if cfg.threads == 0 || cfg.threads > MAX_THREADS {
        return Err(WorkloadError::invalid(
            "threads",
            format!("must be between 1 and {MAX_THREADS}"),
        ));
    }
    if cfg.file_size > MAX_FILE_SIZE {
        return Err(WorkloadError::invalid(
            "file-size",
            format!("at most {}", format_bytes(MAX_FILE_SIZE)),
        ));
    }
    Ok(())
}

/// Runs the phases in order. `progress` gets the phase name and the operations done in
/// it. Every phase must complete exactly `files` operations (else a Mismatch error). A
/// stop request ends the current phase unrecorded and returns the finished ones. The work
/// directory and every file in it are removed on every way out.
pub fn run(
    cfg: &MetadataConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<Vec<TestRecord>, WorkloadError> {
    run_with(cfg, progress, &mut Phases::new(None, stop), &mut |_, _| {})
}

/// [`run`] as one rank of an MPI run: every phase starts at a barrier with the other
/// ranks, and its test holds the aggregate of every rank's phase (operations summed over
/// last end − first start). With other ranks the create phase has no `space` (their
/// files land on the filesystem too) and the phases no `ops_series`.
/// `created` is told the work directory's path and identity (device, inode) as soon as it
/// is made (for a record that must never take another directory at its path for it).
pub fn run_with(
    cfg: &MetadataConfig,
    progress: &mut dyn FnMut(&str, u64),
    phases: &mut Phases<'_>,
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<Vec<TestRecord>, WorkloadError> {
    check_config(cfg)?;
    let stop = phases.stop();
    let alone = phases.ranks() == 1;
    let dir = std::path::absolute(&cfg.dir).unwrap_or_else(|_| cfg.dir.clone());
    let meta = std::fs::metadata(&dir).map_err(io_err(&dir, "inspect"))?;
    if !meta.is_dir() {
        return Err(WorkloadError::invalid(
            "dir",
            format!("{} is not a directory", dir.display()),
        ));
    }
    let threads = (cfg.threads as u64).min(cfg.files);
    let base = dir.join(unique_name("md"));
    let made = iolab_sys::files::Made::private_dir(&base).map_err(io_err(&base, "create"))?;
    created(&base, (made.id().dev, made.id().ino));
    let mut tree = Tree {
        base,
        made,
        dirs: cfg.dirs,
        files: cfg.files,
        subdirs: 0,
        gone: false,
    };
    progress("mkdir", 0);
    for d in 0..cfg.dirs {
        let p = tree.subdir(d);
        std::fs::create_dir(&p).map_err(io_err(&p, "create"))?;
        tree.subdirs += 1;
    }
    let devices: Vec<String> = device_of(&dir).into_iter().collect();
    let (used_before, ffree_before, st) = usage(&tree.base)?;
    let mut space_after: Option<(u64, u64)> = None;
    let mut results: Vec<PhaseResult> = Vec::new();
    for phase in Phase::ALL {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Some(mut r) = run_phase(phase, &tree, cfg, threads, &devices, progress, phases)? else {
            break;
        };
        match phases.after(phase.name(), false, r.pass, r.started) {
            Ok(all) => {
                r.ops = all.ios;
                r.seconds = all.seconds;
                r.pass = all;
            }
            Err(RunError::Interrupted) => break,
            Err(e) => return Err(WorkloadError::Ranks(e)),
        }
        if !alone {
            r.ops_series.clear();
        }
        results.push(r);
        if phase == Phase::Create && alone {
            let (used, ffree, _) = usage(&tree.base)?;
            space_after = Some((used, ffree));
        }
        if phase == Phase::Stat {
            if let Some(hook) = &cfg.before_read {
                (hook.0)(&tree.base);
            }
        }
    }
    let complete = results.len() == Phase::ALL.len();
    if complete {
        // Every file was deleted: the directories must be empty now.
        for d in 0..tree.subdirs {
            let p = tree.subdir(d);
            let left = std::fs::read_dir(&p).map_err(io_err(&p, "list"))?.count();
            if left != 0 {
                return Err(WorkloadError::mismatch(
                    &p,
                    format!("{left} entries left after deleting every file"),
                ));
            }
        }
    }
    progress("rmdir", 0);
    let dirs_removed = tree.subdirs;
    tree.sweep()?;

    let allocated_per_file = results
        .iter()
        .find(|r| r.phase == Phase::Stat)
        .map(|r| r.allocated as f64 / cfg.files as f64);
    // The space figure is statvfs's, which counts every writer on the filesystem: it is
    // kept only when the filesystem's use came back to where it was once the run's files
    // and directories were gone (else others wrote or freed space meanwhile).
    let used_end = match space_after {
        Some(_) if complete => Some(usage(&cfg.dir)?.0),
        _ => None,
    };
    let mut space_unmeasured = None;
    let space_after = match (space_after, used_end) {
        (Some((used_after, ffree_after)), Some(end)) => {
            match space_drift(used_before, used_after, end, st.fragment_size) {
                None => Some((used_after, ffree_after)),
                Some(why) => {
                    space_unmeasured = Some(why);
                    None
                }
            }
        }
        (after, _) => after,
    };
    let mut space = space_after.map(|(used_after, ffree_after)| {
        let per_file = (used_after as f64 - used_before as f64) / cfg.files as f64;
        SpaceExtra {
            statvfs_used_before: used_before,
            statvfs_used_after: used_after,
            bytes_per_file: per_file,
            overhead_ratio: (cfg.file_size > 0).then(|| per_file / cfg.file_size as f64),
            inodes_per_file: (ffree_before as f64 - ffree_after as f64) / cfg.files as f64,
            allocated_bytes_per_file: allocated_per_file,
            f_bsize: st.block_size,
            f_frsize: st.fragment_size,
        }
    });
    let group = format!(
        "metadata {} files {} dirs T{}",
        cfg.files, cfg.dirs, threads
    );
    let tests = results
        .into_iter()
        .map(|r| {
            let mut job = JobSpec::new(r.phase.rw(), cfg.file_size.max(1), 1, threads as u32);
            if r.phase == Phase::Create && cfg.fsync {
                job.fsync_every = 1;
            }
            let extra = PhaseExtra {
                workload: "metadata",
                phase: r.phase.name(),
                ops: r.ops,
                ops_per_s: r.ops as f64 / r.seconds.max(1e-9),
                seconds: r.seconds,
                files: cfg.files,
                dirs: cfg.dirs,
                threads,
                file_size: cfg.file_size,
                fsync: cfg.fsync,
                dirs_created: cfg.dirs,
                dirs_removed,
                ops_interval_ms: SERIES_INTERVAL.as_millis() as u64,
                ops_series: r.ops_series,
                content: if cfg.verify.is_some() {
                    "verifiable"
                } else {
                    "random"
                },
                space: if r.phase == Phase::Create {
                    space.take()
                } else {
                    None
                },
                space_unmeasured: if r.phase == Phase::Create {
                    space_unmeasured.take()
                } else {
                    None
                },
                verify: match (r.verify, cfg.content()) {
                    (Some(t), Some(c)) => Some(filecheck::describe(t, &c, &tree.base)),
                    _ => None,
                },
            };
            test_record(
                r.phase.name().to_string(),
                group.clone(),
                job,
                vec![r.pass],
                serde_json::to_value(&extra).unwrap_or_default(),
            )
        })
        .collect();
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::assert_keys;

    fn phase_extra(phase: Phase) -> PhaseExtra {
        PhaseExtra {
            workload: "metadata",
            phase: phase.name(),
            ops: 1000,
            ops_per_s: 1000.0 / 0.333_333_333,
            seconds: 0.333_333_333,
            files: 1000,
            dirs: 10,
            threads: 4,
            file_size: 4096,
            fsync: false,
            dirs_created: 10,
            dirs_removed: 10,
            ops_interval_ms: 100,
            ops_series: vec![300, 400, 300],
            content: "random",
            space: None,
            space_unmeasured: None,
            verify: None,
        }
    }

    #[test]
    fn the_descriptor_reads_back_what_a_phase_writes() {
        use iolab_measure::workload::{OpSeries, SpacePerFile, WorkloadInfo};
        let mut create = phase_extra(Phase::Create);
        create.space = Some(SpaceExtra {
            bytes_per_file: 4096.5,
            allocated_bytes_per_file: Some(8192.0),
            ..Default::default()
        });
        let t = TestRecord {
            name: "create".into(),
            group: "create".into(),
            job: JobSpec::new(Rw::Write, 4096, 1, 4),
            passes: Vec::new(),
            summary: Default::default(),
            extra: serde_json::to_value(create).unwrap(),
        };
        let info = &super::info::INFO;
        assert!(info.owns_extra(&t.extra));
        assert_eq!(
            info.op_series(&t),
            Some(OpSeries {
                interval_ms: 100,
                ops: vec![300.0, 400.0, 300.0]
            })
        );
        assert_eq!(
            info.space_per_file(&t),
            Some(SpacePerFile {
                used: 4096.5,
                allocated: Some(8192.0)
            })
        );
        // A phase without space has none.
        let stat = TestRecord {
            extra: serde_json::to_value(phase_extra(Phase::Stat)).unwrap(),
            ..t
        };
        assert_eq!(info.space_per_file(&stat), None);
    }

    #[test]
    fn space_is_kept_only_when_the_filesystem_comes_back_to_its_start() {
        let mib = 1u64 << 20;
        // Quiet: grew by the files, back to the start (within a few blocks) at the end.
        assert_eq!(space_drift(100 * mib, 108 * mib, 100 * mib, 4096), None);
        assert_eq!(
            space_drift(100 * mib, 108 * mib, 100 * mib + 8192, 4096),
            None
        );
        // Another writer freed space during the create phase: the growth is negative.
        let why = space_drift(100 * mib, 90 * mib, 80 * mib, 4096).unwrap();
        assert!(why.contains("changed by -10 MiB"), "{why}");
        // Another writer added space during the run: not back at its start.
        let why = space_drift(100 * mib, 140 * mib, 132 * mib, 4096).unwrap();
        assert!(why.contains("32 MiB off its start"), "{why}");
    }

    const PHASE_KEYS: [&str; 15] = [
        "workload",
        "phase",
        "ops",
        "ops_per_s",
        "seconds",
        "files",
        "dirs",
        "threads",
        "file_size",
        "fsync",
        "dirs_created",
        "dirs_removed",
        "ops_interval_ms",
        "ops_series",
        "content",
    ];

    #[test]
    fn phase_extra_keeps_the_keys_of_the_json_document() {
        // A phase without space or verify: neither key is there (not even as null).
        let v = serde_json::to_value(phase_extra(Phase::Stat)).unwrap();
        assert_keys(&v, &PHASE_KEYS);
        assert_eq!(v["phase"], "stat");
        assert_eq!(v["seconds"], 0.333333);
        assert_eq!(v["ops_per_s"], 3000.000003);
        assert_eq!(v["ops_series"], serde_json::json!([300, 400, 300]));

        // The create phase carries the space object.
        let mut create = phase_extra(Phase::Create);
        create.space = Some(SpaceExtra {
            statvfs_used_before: 1 << 20,
            statvfs_used_after: (1 << 20) + 4096 * 1000,
            bytes_per_file: 4_096.000_000_4,
            overhead_ratio: Some(1.000_000_000_1),
            inodes_per_file: 1.0,
            allocated_bytes_per_file: Some(4096.0),
            f_bsize: 4096,
            f_frsize: 4096,
        });
        let v = serde_json::to_value(&create).unwrap();
        let mut keys = PHASE_KEYS.to_vec();
        keys.push("space");
        assert_keys(&v, &keys);
        assert_keys(
            &v["space"],
            &[
                "statvfs_used_before",
                "statvfs_used_after",
                "bytes_per_file",
                "overhead_ratio",
                "inodes_per_file",
                "allocated_bytes_per_file",
                "f_bsize",
                "f_frsize",
            ],
        );
        // What crates/report reads.
        assert_eq!(v["space"]["bytes_per_file"].as_f64(), Some(4096.0));
        assert_eq!(
            v["space"]["allocated_bytes_per_file"].as_f64(),
            Some(4096.0)
        );
        assert_eq!(v["space"]["overhead_ratio"], 1.0);

        // Empty files: no ratio, as null; no stat phase: no allocation, as null.
        create.space = create.space.map(|s| SpaceExtra {
            overhead_ratio: None,
            allocated_bytes_per_file: None,
            ..s
        });
        let v = serde_json::to_value(&create).unwrap();
        assert!(v["space"]["overhead_ratio"].is_null());
        assert!(v["space"]["allocated_bytes_per_file"].is_null());
        assert_eq!(v["space"].as_object().unwrap().len(), 8);

        // The read phase with verify carries the tally.
        let mut read = phase_extra(Phase::Read);
        read.content = "verifiable";
        read.verify = Some(Tally {
            checked: 1000,
            ok: 1000,
            ..Tally::new(Unit::Files)
        });
        let v = serde_json::to_value(&read).unwrap();
        let mut keys = PHASE_KEYS.to_vec();
        keys.push("verify");
        assert_keys(&v, &keys);
        assert_eq!(v["verify"]["checked"], 1000);
        assert_eq!(v["content"], "verifiable");
    }
}
