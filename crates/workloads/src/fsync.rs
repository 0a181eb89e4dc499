//! The sync-method probe, in the spirit of PostgreSQL's pg_test_fsync: for each write size
//! and each way of making a write durable (none, write+fdatasync, write+fsync, O_DSYNC,
//! O_SYNC, O_DIRECT+O_DSYNC), how many durable writes per second the target sustains, with
//! latency percentiles, and a verdict on whether flushes reach stable storage.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_engine::buffers::{fill_random, stamp, BufferPool};
use iolab_measure::{
    CpuSample, DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord, TimeSeries,
};
use iolab_spec::{format_size_short, JobSpec, Rw, SyncMode};
use iolab_stats::{summarize, Score};
use serde::{Deserialize, Serialize};

/// How a write is made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMethod {
    /// Plain write, never flushed: the ceiling the others are compared with.
    None,
    Fdatasync,
    Fsync,
    /// open(O_DSYNC): every write returns once its data is durable.
    ODsync,
    /// open(O_SYNC): data and metadata.
    OSync,
    /// open(O_DIRECT | O_DSYNC): bypasses the page cache as well (what databases use).
    DirectDsync,
}

impl SyncMethod {
    pub const ALL: [SyncMethod; 6] = [
        SyncMethod::None,
        SyncMethod::Fdatasync,
        SyncMethod::Fsync,
        SyncMethod::ODsync,
        SyncMethod::OSync,
        SyncMethod::DirectDsync,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SyncMethod::None => "none",
            SyncMethod::Fdatasync => "write+fdatasync",
            SyncMethod::Fsync => "write+fsync",
            SyncMethod::ODsync => "O_DSYNC",
            SyncMethod::OSync => "O_SYNC",
            SyncMethod::DirectDsync => "O_DIRECT+O_DSYNC",
        }
    }

    pub fn parse(s: &str) -> Option<SyncMethod> {
        SyncMethod::ALL.into_iter().find(|m| {
            m.name().eq_ignore_ascii_case(s)
                || m.name().replace("write+", "").eq_ignore_ascii_case(s)
                || (s.eq_ignore_ascii_case("odirect") && *m == SyncMethod::DirectDsync)
                || (s.eq_ignore_ascii_case("direct") && *m == SyncMethod::DirectDsync)
        })
    }

    fn open_flags(self) -> i32 {
        match self {
            SyncMethod::ODsync => libc::O_DSYNC,
            SyncMethod::OSync => libc::O_SYNC,
            SyncMethod::DirectDsync => libc::O_DIRECT | libc::O_DSYNC,
            _ => 0,
        }
    }

    fn flushes(self) -> bool {
        self != SyncMethod::None
    }
}

/// What to probe.
#[derive(Debug, Clone)]
pub struct FsyncConfig {
    /// Directory for the probe's file (created, then removed).
    pub dir: PathBuf,
    pub sizes: Vec<u64>,
    pub methods: Vec<SyncMethod>,
    /// Length of each measured pass.
    pub duration: Duration,
    /// Passes per (method, size).
    pub runs: u32,
    /// Size of the preallocated file; writes cycle through it.
    pub file_size: u64,
}

impl FsyncConfig {
    pub fn new(dir: PathBuf) -> Self {
        FsyncConfig {
            dir,
            sizes: vec![512, 4096, 8192, 16384],
            methods: SyncMethod::ALL.to_vec(),
            duration: Duration::from_secs(2),
            runs: 1,
            file_size: 16 << 20,
        }
    }
}

/// The probe's tests and what they say about durability.
#[derive(Debug, Clone)]
pub struct FsyncReport {
    pub tests: Vec<TestRecord>,
    /// Method/size combinations that could not run, and why.
    pub skipped: Vec<String>,
    pub verdict: Verdict,
}

/// Whether flushes reach stable storage, judged from the numbers alone (the caller adds
/// what the environment says: barriers, write-cache mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// true: flushes cost what a real flush costs; false: they are (nearly) free.
    pub flushes_reach_storage: Option<bool>,
    pub reason: String,
}

/// Error of the probe: the file and what failed.
#[derive(Debug)]
pub struct FsyncError {
    pub path: PathBuf,
    pub action: String,
    pub err: io::Error,
}

impl std::fmt::Display for FsyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: cannot {}: {}",
            self.path.display(),
            self.action,
            self.err
        )
    }
}

impl std::error::Error for FsyncError {}

/// Removes the probe file on drop.
struct ProbeFile(PathBuf);

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn err<'a>(path: &'a Path, action: &str) -> impl FnOnce(io::Error) -> FsyncError + 'a {
    let action = action.to_string();
    move |err| FsyncError {
        path: path.to_path_buf(),
        action,
        err,
    }
}

/// Runs the probe. `progress` gets the label of the test being measured.
pub fn run(
    cfg: &FsyncConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
) -> Result<FsyncReport, FsyncError> {
    let path = cfg.dir.join(format!(
        "iolab-fsync-{}-{:08x}.dat",
        std::process::id(),
        fastrand::u32(..)
    ));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(err(&path, "create the probe file"))?;
    let _guard = ProbeFile(path.clone());
    // Preallocate with real data so no write extends the file or fills a hole.
    let mut rng = fastrand::Rng::new();
    let mut chunk = vec![0u8; 1 << 20];
    fill_random(&mut chunk, &mut rng);
    let mut written = 0u64;
    while written < cfg.file_size {
        let n = (cfg.file_size - written).min(chunk.len() as u64) as usize;
        std::os::unix::fs::FileExt::write_all_at(&file, &chunk[..n], written)
            .map_err(err(&path, "write the probe file"))?;
        written += n as u64;
    }
    file.sync_all()
        .map_err(err(&path, "flush the probe file"))?;
    drop(file);

    let mut tests = Vec::new();
    let mut skipped = Vec::new();
    for &method in &cfg.methods {
        for &size in &cfg.sizes {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let name = format!("{} {}", method.name(), format_size_short(size));
            progress(&name);
            match measure(cfg, &path, method, size, stop) {
                Ok(passes) if !passes.is_empty() => {
                    let mut job = JobSpec::new(Rw::Write, size, 1, 1);
                    if matches!(method, SyncMethod::Fdatasync | SyncMethod::Fsync) {
                        job.fsync_every = 1;
                        job.sync_mode = if method == SyncMethod::Fsync {
                            SyncMode::Fsync
                        } else {
                            SyncMode::Fdatasync
                        };
                    }
                    let summary = summarize(&passes, Score::Median);
                    tests.push(TestRecord {
                        name,
                        group: method.name().to_string(),
                        job,
                        passes,
                        summary,
                        extra: serde_json::json!({
                            "method": method,
                            "open_flags": method_flags_text(method),
                        }),
                    });
                }
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => skipped.push(format!(
                    "{name}: refused with EINVAL (O_DIRECT needs writes aligned to the \
                     device's logical block, or the filesystem has no direct I/O)"
                )),
                Err(e) => {
                    return Err(FsyncError {
                        path: path.clone(),
                        action: format!("run {name}"),
                        err: e,
                    })
                }
            }
        }
    }
    let verdict = verdict(&tests);
    Ok(FsyncReport {
        tests,
        skipped,
        verdict,
    })
}

fn method_flags_text(m: SyncMethod) -> &'static str {
    match m {
        SyncMethod::ODsync => "O_DSYNC",
        SyncMethod::OSync => "O_SYNC",
        SyncMethod::DirectDsync => "O_DIRECT|O_DSYNC",
        _ => "",
    }
}

/// Measures `cfg.runs` passes of one method and size.
fn measure(
    cfg: &FsyncConfig,
    path: &Path,
    method: SyncMethod,
    size: u64,
    stop: &AtomicBool,
) -> io::Result<Vec<PassRecord>> {
    let file: File = OpenOptions::new()
        .write(true)
        .custom_flags(method.open_flags())
        .open(path)?;
    let fd = file.as_raw_fd();
    let mut pool = BufferPool::new(1, size as usize);
    let mut rng = fastrand::Rng::new();
    pool.fill_random(&mut rng);
    let slots = (cfg.file_size / size).max(1);
    let mut passes = Vec::new();
    let mut slot = 0u64;
    for index in 1..=cfg.runs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut op_hist = LatencyHistogram::new();
        let mut sync_hist = LatencyHistogram::new();
        let mut series: Vec<u64> = Vec::new();
        let cpu0 = CpuSample::now();
        let start = Instant::now();
        let deadline = start + cfg.duration;
        let mut bytes = 0u64;
        loop {
            stamp(&mut pool.slot_mut(0)[..size as usize], &mut rng);
            let off = slot * size;
            slot = (slot + 1) % slots;
            let t0 = Instant::now();
            // SAFETY: the slot holds `size` aligned bytes.
            let rc = unsafe {
                libc::pwrite64(
                    fd,
                    pool.slot_ptr(0) as *const libc::c_void,
                    size as usize,
                    off as i64,
                )
            };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            if rc as u64 != size {
                return Err(io::Error::other(format!(
                    "short write: {rc} of {size} bytes"
                )));
            }
            let t1 = Instant::now();
            let rc = match method {
                // SAFETY: plain syscalls on our descriptor.
                SyncMethod::Fdatasync => unsafe { libc::fdatasync(fd) },
                SyncMethod::Fsync => unsafe { libc::fsync(fd) },
                _ => 0,
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            let t2 = Instant::now();
            op_hist.record((t2 - t0).as_nanos() as u64);
            if matches!(method, SyncMethod::Fdatasync | SyncMethod::Fsync) {
                sync_hist.record((t2 - t1).as_nanos() as u64);
            }
            bytes += size;
            let bucket = ((t2 - start).as_millis() / 100) as usize;
            if series.len() <= bucket {
                series.resize(bucket + 1, 0);
            }
            series[bucket] += size;
            if t2 >= deadline || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let seconds = start.elapsed().as_secs_f64();
        let ops = op_hist.count();
        let cpu = cpu0.usage_until(&CpuSample::now(), ops);
        let sync = (!sync_hist.is_empty()).then(|| SyncStats {
            count: sync_hist.count(),
            lat_us: sync_hist.summary_us(),
        });
        passes.push(PassRecord::new(
            index,
            seconds,
            None,
            Some(DirResult::from_histogram(bytes, seconds, op_hist)),
            sync,
            cpu,
            TimeSeries {
                interval_ms: 100,
                bytes: series,
            },
        ));
    }
    // A plain write is flushed at the end so the next method starts from a clean state.
    if !method.flushes() {
        file.sync_all()?;
    }
    Ok(passes)
}

/// Flushes that cost less than this per operation cannot have reached a medium (a fast
/// NVMe flush with power-loss protection is tens of microseconds; a disk's is milliseconds).
pub const FREE_FLUSH_RATIO: f64 = 0.5;

/// Judges from the numbers: if write+fdatasync sustains at least half the rate of plain
/// writes of the same size, the flush did nothing measurable.
pub fn verdict(tests: &[TestRecord]) -> Verdict {
    let rate = |m: SyncMethod| -> Option<(f64, u64)> {
        tests
            .iter()
            .filter(|t| t.group == m.name())
            .map(|t| (t.summary.iops, t.job.bs))
            .min_by_key(|&(_, bs)| bs.abs_diff(4096))
    };
    let Some((none, bs)) = rate(SyncMethod::None) else {
        return Verdict {
            flushes_reach_storage: None,
            reason: "no plain-write baseline was measured".into(),
        };
    };
    let flushed = tests
        .iter()
        .filter(|t| t.group == SyncMethod::Fdatasync.name() && t.job.bs == bs)
        .map(|t| t.summary.iops)
        .next()
        .or_else(|| rate(SyncMethod::Fsync).map(|r| r.0));
    let Some(flushed) = flushed else {
        return Verdict {
            flushes_reach_storage: None,
            reason: "no flushing method was measured".into(),
        };
    };
    let ratio = flushed / none.max(1e-9);
    if ratio >= FREE_FLUSH_RATIO {
        Verdict {
            flushes_reach_storage: Some(false),
            reason: format!(
                "a write+flush of {} ran at {:.0}% of the rate of a plain write ({:.0} vs \
                 {:.0} ops/s): the flushes are not reaching stable storage (barriers off, a \
                 \"write through\" queue dropping flushes, or a cache that ignores them)",
                format_size_short(bs),
                ratio * 100.0,
                flushed,
                none
            ),
        }
    } else {
        Verdict {
            flushes_reach_storage: Some(true),
            reason: format!(
                "a write+flush of {} costs {:.0}x a plain write ({:.0} vs {:.0} ops/s): \
                 flushes do real work",
                format_size_short(bs),
                none / flushed.max(1e-9),
                flushed,
                none
            ),
        }
    }
}
