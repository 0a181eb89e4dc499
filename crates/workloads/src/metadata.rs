//! mdtest-shaped metadata rates: create, stat, read, rename and delete N small files spread
//! over M directories by T threads, one phase after the other, with operations per second
//! and per-operation latency for each phase, and the space each small file really takes
//! (statvfs before and after creating them): the visible effect of the allocation unit.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use iolab_engine::buffers::fill_random;
use iolab_measure::{DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord};
use iolab_spec::{format_bytes, JobSpec, Rw};
use serde_json::json;

pub use crate::common::WorkloadError;
use crate::common::{
    device_of, io_err, round6, run_workers, statvfs, syncfs, test_record, unique_name, Series,
    Watch, SERIES_INTERVAL,
};

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
        }
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
    dirs: u32,
    files: u64,
    /// Subdirectories created so far.
    made: u32,
    /// Dismantled already (after a complete run).
    gone: bool,
}

impl Tree {
    fn subdir(&self, d: u32) -> PathBuf {
        self.base.join(format!("d{d:04}"))
    }

    fn path(&self, i: u64, renamed: bool) -> PathBuf {
        let d = (i % self.dirs as u64) as u32;
        let p = if renamed { 'r' } else { 'f' };
        self.subdir(d).join(format!("{p}{i:09}"))
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
    /// Anything else found in them stays, and the directory with it.
    fn sweep(&mut self) -> Result<(), WorkloadError> {
        if self.gone {
            return Ok(());
        }
        let mut first: Option<WorkloadError> = None;
        let mut keep = |e: WorkloadError| {
            if first.is_none() {
                first = Some(e);
            }
        };
        for d in 0..self.made {
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
}

/// One operation of `phase` on file `i`. Returns (bytes moved, bytes allocated, fsync ns).
fn op(a: &PhaseArgs<'_>, i: u64, buf: &mut [u8]) -> Result<(u64, u64, Option<u64>), WorkloadError> {
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
            f.write_all(a.data).map_err(io_err(&p, "write"))?;
            let mut sync_ns = None;
            if a.cfg.fsync {
                let t = Instant::now();
                f.sync_all().map_err(io_err(&p, "fsync"))?;
                sync_ns = Some(t.elapsed().as_nanos() as u64);
            }
            Ok((size, 0, sync_ns))
        }
        Phase::Stat => {
            let p = a.tree.path(i, false);
            let m = std::fs::symlink_metadata(&p).map_err(io_err(&p, "stat"))?;
            if !m.is_file() || m.len() != size {
                return Err(WorkloadError::mismatch(
                    &p,
                    format!("expected a {size}-byte file, found {} bytes", m.len()),
                ));
            }
            Ok((0, m.blocks() * 512, None))
        }
        Phase::Read => {
            let p = a.tree.path(i, false);
            let mut f = File::open(&p).map_err(io_err(&p, "open"))?;
            let mut got = 0u64;
            loop {
                match f.read(buf) {
                    Ok(0) => break,
                    Ok(n) => got += n as u64,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(WorkloadError::io(&p, "read", e)),
                }
            }
            if got != size {
                return Err(WorkloadError::mismatch(
                    &p,
                    format!("read {got} bytes from a {size}-byte file"),
                ));
            }
            Ok((got, 0, None))
        }
        Phase::Rename => {
            let from = a.tree.path(i, false);
            let to = a.tree.path(i, true);
            std::fs::rename(&from, &to).map_err(io_err(&from, "rename"))?;
            Ok((0, 0, None))
        }
        Phase::Delete => {
            let p = a.tree.path(i, true);
            std::fs::remove_file(&p).map_err(io_err(&p, "delete"))?;
            Ok((0, 0, None))
        }
    }
}

fn phase_thread(a: PhaseArgs<'_>) -> Result<ThreadResult, WorkloadError> {
    let mut buf = vec![0u8; (a.cfg.file_size as usize).clamp(4096, 1 << 20)];
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
        let t0 = Instant::now();
        let (b, alloc, sync_ns) = op(&a, i, &mut buf)?;
        let t1 = Instant::now();
        hist.record((t1 - t0).as_nanos() as u64);
        if let Some(ns) = sync_ns {
            sync_hist.record(ns);
        }
        bytes_series.add(t1, b);
        ops_series.add(t1, 1);
        ops += 1;
        bytes += b;
        allocated += alloc;
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
    })
}

/// One finished phase.
struct PhaseResult {
    phase: Phase,
    pass: PassRecord,
    ops: u64,
    seconds: f64,
    allocated: u64,
    ops_series: Vec<u64>,
}

fn run_phase(
    phase: Phase,
    tree: &Tree,
    cfg: &MetadataConfig,
    threads: u64,
    devices: &[String],
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<Option<PhaseResult>, WorkloadError> {
    let data = {
        let mut d = vec![0u8; cfg.file_size as usize];
        fill_random(&mut d, &mut fastrand::Rng::new());
        d
    };
    let barrier = Barrier::new(threads as usize);
    let abort = AtomicBool::new(false);
    let counters: Vec<Counter> = (0..threads).map(|_| Counter::default()).collect();
    progress(phase.name(), 0);
    let watch = Watch::start(devices);
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
    for r in &done {
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
        pass,
        ops,
        seconds,
        allocated,
        ops_series: ops_series.buckets().to_vec(),
    }))
}

/// Blocks in use and free inodes of the filesystem, after writing it back.
fn usage(path: &Path) -> Result<(u64, u64, libc::statvfs), WorkloadError> {
    syncfs(path)?;
    let st = statvfs(path)?;
    let used = st.f_blocks.saturating_sub(st.f_bfree) * st.f_frsize;
    Ok((used, st.f_ffree, st))
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
    std::fs::create_dir(&base).map_err(io_err(&base, "create"))?;
    let mut tree = Tree {
        base,
        dirs: cfg.dirs,
        files: cfg.files,
        made: 0,
        gone: false,
    };
    progress("mkdir", 0);
    for d in 0..cfg.dirs {
        let p = tree.subdir(d);
        std::fs::create_dir(&p).map_err(io_err(&p, "create"))?;
        tree.made += 1;
    }
    let devices: Vec<String> = device_of(&dir).into_iter().collect();
    let (used_before, ffree_before, st) = usage(&tree.base)?;
    let mut space_after: Option<(u64, u64)> = None;
    let mut results: Vec<PhaseResult> = Vec::new();
    for phase in Phase::ALL {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match run_phase(phase, &tree, cfg, threads, &devices, stop, progress)? {
            Some(r) => results.push(r),
            None => break,
        }
        if phase == Phase::Create {
            let (used, ffree, _) = usage(&tree.base)?;
            space_after = Some((used, ffree));
        }
    }
    let complete = results.len() == Phase::ALL.len();
    if complete {
        // Every file was deleted: the directories must be empty now.
        for d in 0..tree.made {
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
    let dirs_removed = tree.made;
    tree.sweep()?;

    let allocated_per_file = results
        .iter()
        .find(|r| r.phase == Phase::Stat)
        .map(|r| r.allocated as f64 / cfg.files as f64);
    let space = space_after.map(|(used_after, ffree_after)| {
        let per_file = (used_after as f64 - used_before as f64) / cfg.files as f64;
        json!({
            "statvfs_used_before": used_before,
            "statvfs_used_after": used_after,
            "bytes_per_file": round6(per_file),
            "overhead_ratio": if cfg.file_size > 0 {
                json!(round6(per_file / cfg.file_size as f64))
            } else {
                serde_json::Value::Null
            },
            "inodes_per_file": round6((ffree_before as f64 - ffree_after as f64) / cfg.files as f64),
            "allocated_bytes_per_file": allocated_per_file.map(round6),
            "f_bsize": st.f_bsize,
            "f_frsize": st.f_frsize,
        })
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
            let mut extra = json!({
                "workload": "metadata",
                "phase": r.phase.name(),
                "ops": r.ops,
                "ops_per_s": round6(r.ops as f64 / r.seconds.max(1e-9)),
                "seconds": round6(r.seconds),
                "files": cfg.files,
                "dirs": cfg.dirs,
                "threads": threads,
                "file_size": cfg.file_size,
                "fsync": cfg.fsync,
                "dirs_created": cfg.dirs,
                "dirs_removed": dirs_removed,
                "ops_interval_ms": SERIES_INTERVAL.as_millis() as u64,
                "ops_series": r.ops_series,
            });
            if r.phase == Phase::Create {
                if let Some(s) = &space {
                    extra["space"] = s.clone();
                }
            }
            test_record(
                r.phase.name().to_string(),
                group.clone(),
                job,
                vec![r.pass],
                extra,
            )
        })
        .collect();
    Ok(tests)
}
