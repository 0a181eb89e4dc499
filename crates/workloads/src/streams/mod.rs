//! dd-shaped sequential streams: N threads each doing plain read() or write() calls of
//! `bs` bytes from the start of a file to its end, either all on one file (optionally
//! started `stagger` apart, the way several people open the same large file) or each on
//! its own file, all at once. Reports each stream's MB/s and the aggregate over the wall
//! time from the first start to the last end.

pub mod info;
pub mod run;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iolab_engine::buffers::{stamp, BufferPool};
use iolab_measure::{
    Activity, CpuUsage, DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord, MB,
};
use iolab_spec::{format_bytes, format_size_short, JobSpec, Rw};
use serde::Serialize;

pub use crate::common::WorkloadError;
use crate::common::{
    device_of, drop_caches, evict_file, io_err, resident_fraction, run_workers, ser_round6,
    ser_round6_opt, ser_round6_vec, sleep_until, test_record, unique_name, write_random_file,
    Created, Series, Watch,
};

/// Size of each stream's file (or the shared file) unless given.
pub const DEFAULT_FILE_SIZE: u64 = 1 << 30;
/// Most streams at once (iolab's numjobs limit).
pub const MAX_STREAMS: u32 = 64;
/// Largest block per call.
pub const MAX_BS: usize = 64 << 20;

/// The streams to run.
#[derive(Debug, Clone)]
pub struct StreamsConfig {
    /// Directory for the stream files (created, then removed).
    pub dir: PathBuf,
    /// Number of concurrent streams.
    pub streams: u32,
    /// Bytes per read() or write() call, like dd's `bs=`.
    pub bs: usize,
    /// `Rw::Read` or `Rw::Write` (sequential only).
    pub rw: Rw,
    /// All streams use one file; otherwise each has its own.
    pub same_file: bool,
    /// Delay between the starts of consecutive streams (stream k starts at k x stagger).
    pub stagger: Duration,
    /// Size of each file; every stream reads or writes it once from offset 0.
    pub file_size: u64,
    /// Stop each stream after this long even if its file is not done.
    pub duration: Option<Duration>,
    /// O_DIRECT (false: through the page cache, as dd does by default).
    pub direct: bool,
    /// Write back and drop the whole page cache after preparing the files (root only).
    pub drop_caches: bool,
    /// Evict the prepared files' own pages from the page cache (posix_fadvise DONTNEED;
    /// needs no privileges and affects only iolab's files). Without it a freshly prepared
    /// file is read from memory.
    pub evict_prepared: bool,
    /// Write streams: fsync the file at the end, counted in the stream's time (dd's
    /// `conv=fsync`).
    pub end_fsync: bool,
    /// Write streams: write verifiable data and check every file before it is removed.
    pub verify: Option<VerifyHook>,
}

/// Fills the buffer of the write that goes to the given file offset.
pub type FillFn = dyn Fn(&mut [u8], u64) + Send + Sync;
/// Checks a file after the streams ended: its tally, or why it could not be read.
pub type CheckFn =
    dyn Fn(&Path) -> Result<iolab_integrity::Tally, iolab_integrity::IntegrityError> + Send + Sync;

/// How write streams write verifiable data and check it (supplied by the caller, e.g.
/// iolab-integrity's self-describing blocks, `verified::Stamper`).
#[derive(Clone)]
pub struct VerifyHook {
    pub fill: Arc<FillFn>,
    /// The result goes into the `extra` of the first stream that wrote the file, as
    /// `verify`.
    pub check: Arc<CheckFn>,
}

impl std::fmt::Debug for VerifyHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("VerifyHook")
    }
}

impl StreamsConfig {
    /// Defaults: one reading stream of 1 MiB calls over its own 1 GiB file, no stagger, no
    /// time limit, buffered, prepared pages evicted, caches otherwise kept.
    pub fn new(dir: PathBuf) -> Self {
        StreamsConfig {
            dir,
            streams: 1,
            bs: 1 << 20,
            rw: Rw::Read,
            same_file: false,
            stagger: Duration::ZERO,
            file_size: DEFAULT_FILE_SIZE,
            duration: None,
            direct: false,
            drop_caches: false,
            evict_prepared: true,
            end_fsync: false,
            verify: None,
        }
    }

    fn validate(&self) -> Result<(), WorkloadError> {
        if !(1..=MAX_STREAMS).contains(&self.streams) {
            return Err(WorkloadError::invalid(
                "streams",
                format!("must be between 1 and {MAX_STREAMS}"),
            ));
        }
        if self.bs == 0 || self.bs > MAX_BS {
            return Err(WorkloadError::invalid(
                "bs",
                format!("must be between 1 byte and {}", format_bytes(MAX_BS as u64)),
            ));
        }
        if !matches!(self.rw, Rw::Read | Rw::Write) {
            return Err(WorkloadError::invalid(
                "rw",
                "streams are sequential: read or write",
            ));
        }
        if self.file_size == 0 {
            return Err(WorkloadError::invalid(
                "size",
                "files must hold at least 1 byte",
            ));
        }
        if self.direct && (!self.bs.is_multiple_of(512) || !self.file_size.is_multiple_of(4096)) {
            return Err(WorkloadError::invalid(
                "direct",
                "O_DIRECT needs a bs that is a multiple of 512 and a file size that is a \
                 multiple of 4 KiB",
            ));
        }
        if self.drop_caches && !iolab_sys::is_root() {
            return Err(WorkloadError::invalid(
                "drop-caches",
                "dropping the page cache needs root",
            ));
        }
        Ok(())
    }
}

/// What each stream's test carries in `extra` (docs/streams.md). Times are seconds from
/// the common start.
#[derive(Debug, Serialize)]
struct StreamExtra {
    workload: &'static str,
    /// 1-based.
    stream: usize,
    file: String,
    inode: u64,
    st_dev: u64,
    same_file: bool,
    start_offset: u64,
    #[serde(serialize_with = "ser_round6")]
    planned_start_s: f64,
    #[serde(serialize_with = "ser_round6")]
    start_s: f64,
    #[serde(serialize_with = "ser_round6")]
    end_s: f64,
    bytes: u64,
    #[serde(serialize_with = "ser_round6")]
    seconds: f64,
    #[serde(serialize_with = "ser_round6")]
    mb_s: f64,
    /// "end of file" or "duration".
    ended_by: &'static str,
    direct: bool,
    /// `--verify`: the check of the file, on the first stream that wrote it; else null.
    verify: Option<iolab_integrity::Tally>,
}

/// What the aggregate test of all streams carries in `extra`: the configuration and the
/// streams' inodes, times and rates, in stream order.
#[derive(Debug, Serialize)]
struct StreamsExtra {
    workload: &'static str,
    streams: usize,
    rw: Rw,
    bs: usize,
    same_file: bool,
    #[serde(serialize_with = "ser_round6")]
    stagger_s: f64,
    file_size: u64,
    #[serde(serialize_with = "ser_round6_opt")]
    duration_limit_s: Option<f64>,
    direct: bool,
    drop_caches: bool,
    evicted_after_prepare: bool,
    end_fsync: bool,
    files: Vec<String>,
    inodes: Vec<u64>,
    start_offsets: Vec<u64>,
    #[serde(serialize_with = "ser_round6_vec")]
    start_s: Vec<f64>,
    #[serde(serialize_with = "ser_round6_vec")]
    end_s: Vec<f64>,
    #[serde(serialize_with = "ser_round6_vec")]
    stream_mb_s: Vec<f64>,
    bytes: u64,
    #[serde(serialize_with = "ser_round6")]
    wall_seconds: f64,
}

/// A counter on its own cache line, so streams do not slow each other down by updating it.
#[repr(align(128))]
#[derive(Default)]
struct Counter(AtomicU64);

/// What one stream did.
struct StreamOutcome {
    path: PathBuf,
    ino: u64,
    dev: u64,
    /// When it was meant to start, and when it did and ended.
    planned: Instant,
    start: Instant,
    end: Instant,
    bytes: u64,
    hist: LatencyHistogram,
    sync_hist: LatencyHistogram,
    series: Series,
    cpu: CpuUsage,
    activity: Activity,
    resident_before: Option<f64>,
    resident_after: Option<f64>,
    /// "end of file", "duration" or "stop".
    ended_by: &'static str,
}

struct StreamArgs<'a> {
    cfg: &'a StreamsConfig,
    path: &'a Path,
    planned: Instant,
    devices: &'a [String],
    stop: &'a AtomicBool,
    abort: &'a AtomicBool,
    counter: &'a Counter,
}

/// One stream: waits for its start, then reads or writes its file sequentially.
/// None when stopped before it started.
fn stream(a: StreamArgs<'_>) -> Result<Option<StreamOutcome>, WorkloadError> {
    let cfg = a.cfg;
    let halted = || a.stop.load(Ordering::Relaxed) || a.abort.load(Ordering::Relaxed);
    if !sleep_until(a.planned, a.abort) || a.stop.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let reading = cfg.rw == Rw::Read;
    let resident_before = if reading {
        resident_fraction([a.path])
    } else {
        None
    };
    let mut o = OpenOptions::new();
    o.read(reading).write(!reading);
    if cfg.direct {
        o.custom_flags(libc::O_DIRECT);
    }
    let file: File = o.open(a.path).map_err(io_err(
        a.path,
        if cfg.direct {
            "open with O_DIRECT"
        } else {
            "open"
        },
    ))?;
    let meta = file.metadata().map_err(io_err(a.path, "fstat"))?;
    let fd = file.as_raw_fd();
    let bs = cfg.bs;
    let mut pool = BufferPool::new(1, bs);
    let mut rng = fastrand::Rng::new();
    if !reading {
        pool.fill_random(&mut rng);
    }
    let ptr = pool.slot_ptr(0);
    let mut hist = LatencyHistogram::new();
    let mut sync_hist = LatencyHistogram::new();
    let mut bytes = 0u64;
    let watch = Watch::start(a.devices);
    let start = Instant::now();
    let deadline = cfg.duration.map(|d| start + d);
    let mut series = Series::new(start);
    let ended_by;
    loop {
        if halted() {
            ended_by = "stop";
            break;
        }
        let len = if reading {
            bs
        } else {
            if bytes >= cfg.file_size {
                ended_by = "end of file";
                break;
            }
            match &cfg.verify {
                Some(v) => (v.fill)(&mut pool.slot_mut(0)[..bs], bytes),
                None => stamp(&mut pool.slot_mut(0)[..bs], &mut rng),
            }
            (cfg.file_size - bytes).min(bs as u64) as usize
        };
        let t0 = Instant::now();
        // SAFETY: the pool's slot holds at least `bs` >= `len` bytes, page-aligned; the fd
        // is open for the direction used.
        let rc = unsafe {
            if reading {
                libc::read(fd, ptr as *mut libc::c_void, len)
            } else {
                libc::write(fd, ptr as *const libc::c_void, len)
            }
        };
        let t1 = Instant::now();
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            let action = match (cfg.direct, err.raw_os_error() == Some(libc::EINVAL)) {
                (true, true) if reading => {
                    "read with O_DIRECT (bs must be a multiple of the device's logical block size)"
                }
                (true, true) => {
                    "write with O_DIRECT (bs must be a multiple of the device's logical block size)"
                }
                _ if reading => "read",
                _ => "write",
            };
            return Err(WorkloadError::io(a.path, action, err));
        }
        if rc == 0 {
            if reading {
                ended_by = "end of file";
                break;
            }
            return Err(WorkloadError::io(
                a.path,
                "write",
                io::Error::from(io::ErrorKind::WriteZero),
            ));
        }
        hist.record((t1 - t0).as_nanos() as u64);
        series.add(t1, rc as u64);
        bytes += rc as u64;
        a.counter.0.store(bytes, Ordering::Relaxed);
        if deadline.is_some_and(|d| t1 >= d) {
            ended_by = "duration";
            break;
        }
    }
    if !reading && cfg.end_fsync && ended_by != "stop" {
        let t0 = Instant::now();
        file.sync_all().map_err(io_err(a.path, "fsync"))?;
        sync_hist.record((Instant::now() - t0).as_nanos() as u64);
    }
    let end = Instant::now();
    series.extend_to(end);
    let (cpu, activity) = watch.finish(hist.count());
    drop(file);
    let resident_after = if reading {
        resident_fraction([a.path])
    } else {
        None
    };
    Ok(Some(StreamOutcome {
        path: a.path.to_path_buf(),
        ino: meta.ino(),
        dev: meta.dev(),
        planned: a.planned,
        start,
        end,
        bytes,
        hist,
        sync_hist,
        series,
        cpu,
        activity,
        resident_before,
        resident_after,
        ended_by,
    }))
}

fn dir_result(rw: Rw, bytes: u64, seconds: f64, hist: LatencyHistogram) -> [Option<DirResult>; 2] {
    let d = (!hist.is_empty()).then(|| DirResult::from_histogram(bytes, seconds, hist));
    match rw {
        Rw::Read => [d, None],
        _ => [None, d],
    }
}

fn sync_stats(h: &LatencyHistogram) -> Option<SyncStats> {
    (!h.is_empty()).then(|| SyncStats {
        count: h.count(),
        lat_us: h.summary_us(),
    })
}

/// Runs the streams. `progress` gets "prepare" (bytes of test files written), "drop
/// caches", then "streams" with the bytes all streams moved so far. A stop request ends
/// every stream; the records of streams that had already finished are returned (the
/// aggregate only when all finished), and the files are removed.
pub fn run(
    cfg: &StreamsConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<Vec<TestRecord>, WorkloadError> {
    cfg.validate()?;
    let dir = std::path::absolute(&cfg.dir).unwrap_or_else(|_| cfg.dir.clone());
    let meta = std::fs::metadata(&dir).map_err(io_err(&dir, "inspect"))?;
    if !meta.is_dir() {
        return Err(WorkloadError::invalid(
            "dir",
            format!("{} is not a directory", dir.display()),
        ));
    }
    let n = cfg.streams as usize;
    let reading = cfg.rw == Rw::Read;
    let base = unique_name("stream");
    let files: Vec<PathBuf> = if cfg.same_file {
        vec![dir.join(format!("{base}.dat"))]
    } else {
        (1..=n)
            .map(|i| dir.join(format!("{base}-{i}.dat")))
            .collect()
    };

    // Prepare: random data to read, or empty files to write into.
    let mut created = Created::default();
    let mut prepared = 0u64;
    progress("prepare", 0);
    for f in &files {
        created.file(f.clone());
        if reading {
            let before = prepared;
            let done = write_random_file(f, cfg.file_size, stop, &mut |b| {
                progress("prepare", before + b)
            })?;
            if !done {
                return Ok(Vec::new());
            }
            prepared += cfg.file_size;
            if cfg.evict_prepared {
                evict_file(f)?;
            }
        } else {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(f)
                .map_err(io_err(f, "create"))?;
        }
    }
    if cfg.drop_caches {
        progress("drop caches", 0);
        drop_caches()?;
    }
    let devices: Vec<String> = device_of(&dir).into_iter().collect();
    let resident_before = if reading {
        resident_fraction(files.iter().map(|p| p.as_path()))
    } else {
        None
    };

    let abort = AtomicBool::new(false);
    let counters: Vec<Counter> = (0..n).map(|_| Counter::default()).collect();
    progress("streams", 0);
    let watch = Watch::start(&devices);
    // A short lead so every thread exists before the first start.
    let t0 = Instant::now() + Duration::from_millis(20);
    let results: Vec<Result<Option<StreamOutcome>, WorkloadError>> = run_workers(
        n,
        &abort,
        |i| {
            stream(StreamArgs {
                cfg,
                path: if cfg.same_file { &files[0] } else { &files[i] },
                planned: t0 + cfg.stagger * i as u32,
                devices: &devices,
                stop,
                abort: &abort,
                counter: &counters[i],
            })
        },
        || {
            if stop.load(Ordering::Relaxed) {
                abort.store(true, Ordering::Relaxed);
            }
            progress(
                "streams",
                counters.iter().map(|c| c.0.load(Ordering::Relaxed)).sum(),
            )
        },
    );
    let mut outcomes: Vec<Option<StreamOutcome>> = Vec::with_capacity(n);
    for r in results {
        outcomes.push(r?);
    }
    let ios: u64 = outcomes.iter().flatten().map(|o| o.hist.count()).sum();
    let (cpu, activity) = watch.finish(ios);
    let resident_after = if reading {
        resident_fraction(files.iter().map(|p| p.as_path()))
    } else {
        None
    };
    // Each file's check, for the first stream that wrote it.
    let mut checks: Vec<Option<iolab_integrity::Tally>> = vec![None; n];
    if let (Some(v), false) = (&cfg.verify, reading) {
        for (i, f) in files.iter().enumerate() {
            checks[i] = Some((v.check)(f).map_err(|e| WorkloadError::mismatch(f, e.to_string()))?);
        }
    }
    created.remove_all()?;

    let group = format!(
        "dd {} {} x{} {}",
        format_size_short(cfg.bs as u64),
        cfg.rw,
        n,
        if cfg.same_file {
            "same file"
        } else {
            "own files"
        }
    );
    let mut job = JobSpec::new(cfg.rw, cfg.bs as u64, 1, 1);
    job.end_fsync = !reading && cfg.end_fsync;
    if cfg.duration.is_none() {
        job.io_limit = Some(cfg.file_size);
    }
    let secs = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
    let mut tests = Vec::new();
    for (i, o) in outcomes.iter().enumerate() {
        let Some(o) = o else { continue };
        if o.ended_by == "stop" {
            continue;
        }
        let seconds = (o.end - o.start).as_secs_f64();
        let [read, write] = dir_result(cfg.rw, o.bytes, seconds, o.hist.clone());
        let mut p = PassRecord::new(
            1,
            seconds,
            read,
            write,
            sync_stats(&o.sync_hist),
            o.cpu,
            o.series.clone().into_timeseries(),
        );
        p.context.cache_resident_before = o.resident_before;
        p.context.cache_resident_after = o.resident_after;
        p.context.activity = o.activity.clone();
        tests.push(test_record(
            format!("stream {}", i + 1),
            group.clone(),
            job.clone(),
            vec![p],
            serde_json::to_value(StreamExtra {
                workload: "streams",
                stream: i + 1,
                file: o.path.to_string_lossy().into_owned(),
                inode: o.ino,
                st_dev: o.dev,
                same_file: cfg.same_file,
                start_offset: 0,
                planned_start_s: secs(t0, o.planned),
                start_s: secs(t0, o.start),
                end_s: secs(t0, o.end),
                bytes: o.bytes,
                seconds,
                mb_s: o.bytes as f64 / MB / seconds.max(1e-9),
                ended_by: o.ended_by,
                direct: cfg.direct,
                verify: checks[i].take(),
            })
            .unwrap_or_default(),
        ));
    }
    let finished: Vec<&StreamOutcome> = outcomes
        .iter()
        .flatten()
        .filter(|o| o.ended_by != "stop")
        .collect();
    if finished.len() == n {
        let first = finished.iter().map(|o| o.start).min().expect("n >= 1");
        let last = finished.iter().map(|o| o.end).max().expect("n >= 1");
        let seconds = (last - first).as_secs_f64();
        let mut hist = LatencyHistogram::new();
        let mut sync_hist = LatencyHistogram::new();
        let mut series = Series::new(first);
        let mut bytes = 0;
        for o in &finished {
            hist.merge(&o.hist);
            sync_hist.merge(&o.sync_hist);
            series.merge(&o.series);
            bytes += o.bytes;
        }
        let [read, write] = dir_result(cfg.rw, bytes, seconds, hist);
        let mut p = PassRecord::new(
            1,
            seconds,
            read,
            write,
            sync_stats(&sync_hist),
            cpu,
            series.into_timeseries(),
        );
        p.context.cache_resident_before = resident_before;
        p.context.cache_resident_after = resident_after;
        p.context.activity = activity;
        let mut agg_job = job.clone();
        agg_job.numjobs = cfg.streams;
        if let Some(l) = agg_job.io_limit.as_mut() {
            *l *= cfg.streams as u64;
        }
        tests.push(test_record(
            "aggregate".into(),
            group,
            agg_job,
            vec![p],
            serde_json::to_value(StreamsExtra {
                workload: "streams",
                streams: n,
                rw: cfg.rw,
                bs: cfg.bs,
                same_file: cfg.same_file,
                stagger_s: cfg.stagger.as_secs_f64(),
                file_size: cfg.file_size,
                duration_limit_s: cfg.duration.map(|d| d.as_secs_f64()),
                direct: cfg.direct,
                drop_caches: cfg.drop_caches,
                evicted_after_prepare: reading && cfg.evict_prepared,
                end_fsync: job.end_fsync,
                files: files
                    .iter()
                    .map(|p| p.to_string_lossy().into_owned())
                    .collect(),
                inodes: finished.iter().map(|o| o.ino).collect(),
                start_offsets: finished.iter().map(|_| 0).collect(),
                start_s: finished.iter().map(|o| secs(t0, o.start)).collect(),
                end_s: finished.iter().map(|o| secs(t0, o.end)).collect(),
                stream_mb_s: finished
                    .iter()
                    .map(|o| o.bytes as f64 / MB / (o.end - o.start).as_secs_f64().max(1e-9))
                    .collect(),
                bytes,
                wall_seconds: seconds,
            })
            .unwrap_or_default(),
        ));
    }
    Ok(tests)
}

/// When some streams ran alone: the run's note saying which and for how long, and what to
/// change so that they overlap (a larger --size, a smaller --stagger). `spans` are the
/// streams' (start, end) in seconds from the common start and `mb_s` their rates, in stream
/// order; `stagger` the planned distance between starts. None when every stream overlapped
/// another for most of its time, or there is only one stream.
pub fn overlap_note(spans: &[(f64, f64)], mb_s: &[f64], stagger: f64) -> Option<String> {
    if spans.len() < 2 {
        return None;
    }
    // Each stream's time alongside at least one other.
    let shared: Vec<f64> = spans
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| {
            let mut cuts: Vec<(f64, f64)> = spans
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, &(c, d))| (a.max(c), b.min(d)))
                .filter(|(x, y)| y > x)
                .collect();
            cuts.sort_by(|x, y| x.0.total_cmp(&y.0));
            let (mut sum, mut reach) = (0.0, f64::MIN);
            for (x, y) in cuts {
                let from = x.max(reach);
                if y > from {
                    sum += y - from;
                }
                reach = reach.max(y);
            }
            sum
        })
        .collect();
    let alone: Vec<usize> = (0..spans.len())
        .filter(|&i| {
            let len = (spans[i].1 - spans[i].0).max(1e-9);
            shared[i] < 0.5 * len
        })
        .collect();
    if alone.is_empty() {
        return None;
    }
    let names: Vec<String> = alone.iter().map(|i| (i + 1).to_string()).collect();
    let what = if shared.iter().all(|&t| t <= 0.0) {
        "the streams never overlapped: each ran alone, so the aggregate is one stream at a \
         time, not streams competing"
            .to_string()
    } else {
        let shares: Vec<String> = alone
            .iter()
            .map(|&i| {
                let len = (spans[i].1 - spans[i].0).max(1e-9);
                format!("{:.0}%", 100.0 * shared[i] / len)
            })
            .collect();
        format!(
            "stream{} {} ran alone for most of {} time (alongside another for {} of it)",
            if alone.len() == 1 { "" } else { "s" },
            names.join(", "),
            if alone.len() == 1 { "its" } else { "their" },
            shares.join(", ")
        )
    };
    let longest = alone
        .iter()
        .map(|&i| spans[i].1 - spans[i].0)
        .fold(0.0, f64::max);
    let mut fix = format!("{what} (the longest lasted {longest:.1} s");
    if stagger > 0.0 {
        // A stream must last about twice the stagger to share half its time with the next.
        let rate = {
            let mut r: Vec<f64> = mb_s.iter().copied().filter(|r| *r > 0.0).collect();
            r.sort_by(f64::total_cmp);
            r.get(r.len() / 2).copied().unwrap_or(0.0)
        };
        fix.push_str(&format!(
            ", the next started {stagger:.1} s after the one before)"
        ));
        if rate > 0.0 {
            let gb = 2.0 * stagger * rate / 1000.0;
            fix.push_str(&format!(
                ": at {rate:.0} MB/s a stream lasts twice the stagger with --size of about \
                 {gb:.1} GB or more; give that, or a smaller --stagger"
            ));
        } else {
            fix.push_str(": give a larger --size or a smaller --stagger");
        }
    } else {
        fix.push_str("): give a larger --size so that each stream lasts longer");
    }
    Some(fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_that_ran_one_after_another_are_named() {
        // Report 004's experiment: 1.3 s reads started 10 s apart.
        let spans = [(0.0, 1.3), (10.0, 11.3), (20.0, 21.3)];
        let n = overlap_note(&spans, &[820.0, 830.0, 810.0], 10.0).unwrap();
        assert!(n.starts_with("the streams never overlapped"), "{n}");
        assert!(n.contains("about 16.4 GB"), "{n}");
        // Overlapping for most of their time: nothing to say.
        let spans = [(0.0, 30.0), (10.0, 40.0), (20.0, 50.0)];
        assert_eq!(overlap_note(&spans, &[800.0; 3], 10.0), None);
        // Only the last one alone; together at the start: nothing.
        let spans = [(0.0, 30.0), (10.0, 40.0), (50.0, 60.0)];
        let n = overlap_note(&spans, &[800.0; 3], 10.0).unwrap();
        assert!(n.starts_with("stream 3 ran alone"), "{n}");
        // Together a little: named with their share.
        let spans = [(0.0, 12.0), (10.0, 22.0)];
        let n = overlap_note(&spans, &[800.0; 2], 10.0).unwrap();
        assert!(
            n.contains("streams 1, 2 ran alone") && n.contains("17%, 17%"),
            "{n}"
        );
        assert_eq!(
            overlap_note(&[(0.0, 1.0), (0.0, 1.0)], &[1.0; 2], 0.0),
            None
        );
        assert_eq!(overlap_note(&[(0.0, 1.0)], &[1.0], 5.0), None);
    }
    use crate::common::assert_keys;

    #[test]
    fn stream_extra_keeps_the_keys_of_the_json_document() {
        let tally = iolab_integrity::Tally {
            checked: 8,
            ok: 8,
            ..Default::default()
        };
        let mut extra = StreamExtra {
            workload: "streams",
            stream: 2,
            file: "/mnt/t/stream-2.dat".into(),
            inode: 12,
            st_dev: 2049,
            same_file: false,
            start_offset: 0,
            planned_start_s: 0.5,
            start_s: 0.500_000_7,
            end_s: 2.25,
            bytes: 4_000_000,
            seconds: 1.749_999_3,
            mb_s: 2.285_715_2,
            ended_by: "end of file",
            direct: false,
            verify: Some(tally),
        };
        let v = serde_json::to_value(&extra).unwrap();
        assert_keys(
            &v,
            &[
                "workload",
                "stream",
                "file",
                "inode",
                "st_dev",
                "same_file",
                "start_offset",
                "planned_start_s",
                "start_s",
                "end_s",
                "bytes",
                "seconds",
                "mb_s",
                "ended_by",
                "direct",
                "verify",
            ],
        );
        assert_eq!(v["stream"], 2);
        assert_eq!(v["start_offset"], 0);
        assert_eq!(v["start_s"], 0.500001);
        assert_eq!(v["seconds"], 1.749999);
        assert_eq!(v["ended_by"], "end of file");
        assert_eq!(v["verify"]["checked"], 8);
        // Without --verify the key stays, as null.
        extra.verify = None;
        let v = serde_json::to_value(&extra).unwrap();
        assert!(v.as_object().unwrap().contains_key("verify"));
        assert!(v["verify"].is_null());
    }

    #[test]
    fn aggregate_extra_keeps_the_keys_of_the_json_document() {
        let extra = StreamsExtra {
            workload: "streams",
            streams: 2,
            rw: Rw::Write,
            bs: 1 << 20,
            same_file: true,
            stagger_s: 0.25,
            file_size: 1 << 30,
            duration_limit_s: None,
            direct: true,
            drop_caches: false,
            evicted_after_prepare: false,
            end_fsync: true,
            files: vec!["/mnt/t/stream.dat".into()],
            inodes: vec![12, 12],
            start_offsets: vec![0, 0],
            start_s: vec![0.0, 0.250_000_4],
            end_s: vec![1.0, 1.333_333_333],
            stream_mb_s: vec![100.0, 99.999_999_9],
            bytes: 2 << 30,
            wall_seconds: 1.333_333_333,
        };
        let v = serde_json::to_value(&extra).unwrap();
        assert_keys(
            &v,
            &[
                "workload",
                "streams",
                "rw",
                "bs",
                "same_file",
                "stagger_s",
                "file_size",
                "duration_limit_s",
                "direct",
                "drop_caches",
                "evicted_after_prepare",
                "end_fsync",
                "files",
                "inodes",
                "start_offsets",
                "start_s",
                "end_s",
                "stream_mb_s",
                "bytes",
                "wall_seconds",
            ],
        );
        assert_eq!(v["rw"], "write");
        assert!(v["duration_limit_s"].is_null());
        assert_eq!(v["start_s"], serde_json::json!([0.0, 0.25]));
        assert_eq!(v["end_s"][1], 1.333333);
        assert_eq!(v["stream_mb_s"][1], 100.0);
        assert_eq!(v["wall_seconds"], 1.333333);
        let limited = StreamsExtra {
            duration_limit_s: Some(60.000_000_1),
            ..extra
        };
        assert_eq!(
            serde_json::to_value(&limited).unwrap()["duration_limit_s"],
            60.0
        );
    }
}
