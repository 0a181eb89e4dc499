//! The sync-method probe, in the spirit of PostgreSQL's pg_test_fsync: for each write size
//! and each way of making a write durable (none, write+fdatasync, write+fsync, O_DSYNC,
//! O_SYNC, O_DIRECT+O_DSYNC), how many durable writes per second the target sustains, with
//! latency percentiles, and a durability verdict per method with its evidence
//! ([`judge`]): what a flush cost against a plain write, and what the environment says
//! (barriers, write-cache mode, a rotational device answering faster than a platter can).
//!
//! With `verify`, every write is a self-describing block ([`iolab_integrity::block`]) and each
//! test's written blocks are read back and checked after every pass, outside its timing.

pub mod info;
pub mod run;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iolab_engine::buffers::{fill_random, stamp, BufferPool};
use iolab_integrity::block::SECTOR;
use iolab_integrity::written::Written;
use iolab_integrity::Tally;
use iolab_measure::{DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord, TimeSeries};
use iolab_spec::{format_size_short, JobSpec, Rw, SyncMode};
use iolab_stats::{summarize, Score};
use serde::{Deserialize, Serialize};

use crate::common::Watch;

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
    /// Stamp every write as a verified block of this run id and check each test's written
    /// blocks after every pass. Write sizes must then be multiples of 512 bytes.
    pub verify: Option<u64>,
    /// Test seam: called after every measured pass, before its read-back, with the probe
    /// file's path (tests damage the file there as a faulty device would).
    #[doc(hidden)]
    pub after_pass: Option<AfterPass>,
    /// Test seam: a pass ends no sooner than this many writes, however late its deadline
    /// (tests that check given blocks make every pass reach them on a busy machine).
    #[doc(hidden)]
    pub min_writes: u64,
}

/// What [`FsyncConfig::after_pass`] calls.
#[doc(hidden)]
#[derive(Clone)]
pub struct AfterPass(pub Arc<dyn Fn(&Path) + Send + Sync>);

impl std::fmt::Debug for AfterPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AfterPass")
    }
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
            verify: None,
            min_writes: 0,
            after_pass: None,
        }
    }
}

/// The probe's tests (their durability verdicts are added by [`judge`], which needs the
/// environment too).
#[derive(Debug, Clone)]
pub struct FsyncReport {
    pub tests: Vec<TestRecord>,
    /// Method/size combinations that could not run, and why.
    pub skipped: Vec<String>,
    /// With `verify`: each measured test's name and read-back counts over its passes (also
    /// in the test's `extra.verify`).
    pub checks: Vec<(String, Tally)>,
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

/// Removes the probe file on drop, only while its path still holds it (device and inode):
/// one moved away and replaced during the run is left alone, with a warning.
struct ProbeFile(Option<iolab_sys::files::Made>);

impl Drop for ProbeFile {
    fn drop(&mut self) {
        let Some(made) = self.0.take() else {
            return;
        };
        let path = made.path().to_path_buf();
        if let Ok(iolab_sys::files::Found::Replaced { moved_to }) = made.remove() {
            let mut what = format!(
                "{} is not what this run created (it was replaced during the run): left alone",
                path.display()
            );
            if let Some(m) = moved_to {
                what.push_str(&format!("; the run's own was moved to {}", m.display()));
            }
            eprintln!("iolab: warning: {what}");
        }
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
    run_with(cfg, stop, progress, &mut |_, _| {})
}

/// [`run`], telling `created` the probe file's path and identity (device, inode) as soon
/// as it is created (for a record that must never take another file at its path for it).
pub fn run_with(
    cfg: &FsyncConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str),
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<FsyncReport, FsyncError> {
    if let (Some(_), Some(bad)) = (cfg.verify, cfg.sizes.iter().find(|s| !is_block_size(**s))) {
        return Err(FsyncError {
            path: cfg.dir.clone(),
            action: "verify".into(),
            err: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("write size {bad} is not a multiple of {SECTOR} bytes"),
            ),
        });
    }
    let path = cfg.dir.join(format!(
        "iolab-fsync-{}-{:08x}.dat",
        std::process::id(),
        fastrand::u32(..)
    ));
    // Named only once `created` has recorded it (see `create_recorded`).
    let (file, made) = iolab_sys::files::create_recorded(&path, false, created)
        .map_err(err(&path, "create the probe file"))?;
    let _guard = ProbeFile(Some(made));
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
    let mut checks = Vec::new();
    // One generation counter for the whole run: a block an earlier test left behind never
    // holds the generation a later test expects at its offset.
    let mut next_generation = 1;
    for &method in &cfg.methods {
        for &size in &cfg.sizes {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let name = format!("{} {}", method.name(), format_size_short(size));
            progress(&name);
            let mut check = cfg
                .verify
                .and_then(|id| Check::new(id, size, cfg.file_size, next_generation));
            let result = measure(cfg, &path, method, size, stop, check.as_mut());
            if let Some(c) = &check {
                next_generation = c.written.next_generation();
            }
            match result {
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
                    let mut extra = FsyncExtra {
                        workload: "fsync",
                        method,
                        open_flags: method_flags_text(method),
                        durability: None,
                        verify: None,
                    };
                    if let Some(c) = check {
                        extra.verify = Some(c.to_extra());
                        checks.push((name.clone(), c.tally));
                    }
                    tests.push(TestRecord {
                        name,
                        group: method.name().to_string(),
                        job,
                        passes,
                        summary,
                        extra: serde_json::to_value(&extra).unwrap_or_default(),
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
    Ok(FsyncReport {
        tests,
        skipped,
        checks,
    })
}

fn is_block_size(size: u64) -> bool {
    size > 0 && size.is_multiple_of(SECTOR as u64)
}

/// `verify` state of one test: the generation last written to each block of the file, and
/// the counts of its read-backs.
struct Check {
    written: Written,
    tally: Tally,
    run_id: u64,
    /// Read back with O_DIRECT; false once the file or filesystem refused it.
    direct: bool,
    /// Time spent stamping the writes of the measured passes (left out of their time).
    stamp_seconds: f64,
}

impl Check {
    /// For writes of `size` bytes cycling through `file_size`; generations from `first`.
    fn new(run_id: u64, size: u64, file_size: u64, first: u64) -> Option<Check> {
        let slots = (file_size / size).max(1);
        Some(Check {
            written: Written::new(run_id, size, 0, slots * size)?.starting_at(first),
            tally: Tally::default(),
            run_id,
            direct: true,
            stamp_seconds: 0.0,
        })
    }

    /// Reads back every block written so far in this test and adds the counts to the tally:
    /// O_DIRECT (so what is read comes from the device, after the kernel writes back any
    /// dirty pages of the range), buffered when O_DIRECT is refused.
    fn read_back(&mut self, path: &Path, stop: &AtomicBool) -> io::Result<()> {
        let t0 = Instant::now();
        let mut result = self.read_with(path, self.direct, stop);
        if self.direct && matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
            self.direct = false;
            result = self.read_with(path, false, stop);
        }
        let mut tally =
            result.map_err(|e| io::Error::other(format!("read back for --verify: {e}")))?;
        tally.seconds = Some(t0.elapsed().as_secs_f64());
        self.tally.merge(tally);
        Ok(())
    }

    fn read_with(&self, path: &Path, direct: bool, stop: &AtomicBool) -> io::Result<Tally> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(if direct { libc::O_DIRECT } else { 0 })
            .open(path)?;
        self.written.check_file(&file, stop)
    }

    /// The test's `extra.verify`: the tally, plus how the blocks were stamped and read.
    fn to_extra(&self) -> FsyncVerifyExtra {
        let mut tally = self.tally.clone().with_run_id(self.run_id);
        tally.block_size = Some(self.written.granule());
        tally.direct = Some(self.direct);
        FsyncVerifyExtra {
            tally,
            stamp_seconds: self.stamp_seconds,
        }
    }
}

/// What a probe test carries in `extra` (docs/workloads.md).
#[derive(Debug, Serialize)]
struct FsyncExtra {
    workload: &'static str,
    method: SyncMethod,
    /// The open(2) flags of the method ("" for the fsync and fdatasync calls).
    open_flags: &'static str,
    /// The verdict on this method at this size, set by [`judge`] (absent before).
    #[serde(skip_serializing_if = "Option::is_none")]
    durability: Option<Judgement>,
    /// With `verify` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<FsyncVerifyExtra>,
}

/// A probe test's `extra.verify`: the read-back counts (with the run id, the block size
/// and whether read with O_DIRECT) and the time spent stamping.
#[derive(Debug, Serialize)]
struct FsyncVerifyExtra {
    #[serde(flatten)]
    tally: Tally,
    /// Left out of the measured passes' time.
    #[serde(serialize_with = "crate::common::ser_round6")]
    stamp_seconds: f64,
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
    mut check: Option<&mut Check>,
) -> io::Result<Vec<PassRecord>> {
    let file: File = OpenOptions::new()
        .write(true)
        .custom_flags(method.open_flags())
        .open(path)?;
    let fd = file.as_fd();
    let mut pool = BufferPool::new(1, size as usize);
    let mut rng = fastrand::Rng::new();
    pool.fill_random(&mut rng);
    let slots = (cfg.file_size / size).max(1);
    // The device under the probe file, whose traffic each pass records beside the other
    // processes' CPU: a flush timed on a busy machine says so (BUSY_CPU).
    let devices: Vec<String> = crate::common::device_of(path).into_iter().collect();
    let mut passes = Vec::new();
    let mut slot = 0u64;
    for index in 1..=cfg.runs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut op_hist = LatencyHistogram::new();
        let mut sync_hist = LatencyHistogram::new();
        let mut series: Vec<u64> = Vec::new();
        let watch = Watch::start(&devices);
        let start = Instant::now();
        let deadline = start + cfg.duration;
        let mut bytes = 0u64;
        // Time spent preparing write buffers: not part of the pass (its seconds, rate and
        // series), which runs `duration` of the rest.
        let mut untimed = Duration::ZERO;
        loop {
            let off = slot * size;
            slot = (slot + 1) % slots;
            let prepare = Instant::now();
            let buf = &mut pool.slot_mut(0)[..size as usize];
            let generation = match check.as_deref() {
                Some(c) => {
                    let g = c
                        .written
                        .claim(off, size)
                        .expect("one writer has no write in flight");
                    c.written.stamp(buf, off, g);
                    g
                }
                None => {
                    stamp(buf, &mut rng);
                    0
                }
            };
            let t0 = Instant::now();
            untimed += t0 - prepare;
            let wrote = write_at(fd, &pool.slot(0)[..size as usize], off);
            let t1 = Instant::now();
            let synced = wrote.and_then(|()| flush(fd, method));
            let t2 = Instant::now();
            if let Some(c) = check.as_deref() {
                c.written.complete(off, size, generation, synced.is_ok());
            }
            synced?;
            op_hist.record((t2 - t0).as_nanos() as u64);
            if matches!(method, SyncMethod::Fdatasync | SyncMethod::Fsync) {
                sync_hist.record((t2 - t1).as_nanos() as u64);
            }
            bytes += size;
            let bucket = ((t2 - start - untimed).as_millis() / 100) as usize;
            if series.len() <= bucket {
                series.resize(bucket + 1, 0);
            }
            series[bucket] += size;
            let due = t2 >= deadline + untimed && op_hist.count() >= cfg.min_writes;
            if due || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let seconds = (start.elapsed() - untimed).as_secs_f64();
        let ops = op_hist.count();
        let (cpu, activity) = watch.finish(ops);
        let sync = (!sync_hist.is_empty()).then(|| SyncStats {
            count: sync_hist.count(),
            lat_us: sync_hist.summary_us(),
        });
        let mut pass = PassRecord::new(
            index,
            seconds,
            None,
            Some(DirResult::from_histogram(bytes, seconds, op_hist)),
            sync,
            cpu,
            TimeSeries {
                interval_ms: 100,
                bytes: series,
                ..Default::default()
            },
        );
        pass.context.activity = activity;
        passes.push(pass);
        // After the pass's clock stopped: the read-back is not part of it.
        if let Some(hook) = &cfg.after_pass {
            (hook.0)(path);
        }
        if let Some(c) = check.as_deref_mut() {
            c.stamp_seconds += untimed.as_secs_f64();
            c.read_back(path, stop)?;
        }
    }
    // A plain write is flushed at the end so the next method starts from a clean state.
    if !method.flushes() {
        file.sync_all()?;
    }
    Ok(passes)
}

/// One `pwrite` of `buf` at `off`; a short write is an error.
fn write_at(fd: BorrowedFd<'_>, buf: &[u8], off: u64) -> io::Result<()> {
    let rc = rustix::io::pwrite(fd, buf, off)?;
    let size = buf.len();
    if rc != size {
        return Err(io::Error::other(format!(
            "short write: {rc} of {size} bytes"
        )));
    }
    Ok(())
}

/// The flush `method` makes after each write (none for the others).
fn flush(fd: BorrowedFd<'_>, method: SyncMethod) -> io::Result<()> {
    match method {
        SyncMethod::Fdatasync => rustix::fs::fdatasync(fd)?,
        SyncMethod::Fsync => rustix::fs::fsync(fd)?,
        _ => {}
    }
    Ok(())
}

/// A flushed write at this share of the rate of a plain write or more did nothing
/// measurable: its flush cannot have reached a medium.
pub const FREE_FLUSH_RATIO: f64 = 0.5;

/// How far a sync method's writes can be trusted ([`Durability`]) and the verdict on one
/// test with its evidence ([`Judgement`]): `extra.durability`, which the reports read
/// through the descriptor (`info.rs`).
pub use iolab_measure::workload::{Durability, Judgement};

/// The key of [`FsyncExtra`] its descriptor reads back.
#[derive(Debug, Deserialize)]
pub(crate) struct FsyncRead {
    pub durability: Option<Judgement>,
}

impl FsyncRead {
    /// A test's `extra`, when it reads as a probe test's.
    pub(crate) fn of(t: &TestRecord) -> Option<FsyncRead> {
        FsyncRead::deserialize(&t.extra).ok()
    }
}

/// What the environment says about flushes, for [`judge`] (from the run's warning facts).
#[derive(Debug, Clone, Default)]
pub struct FlushPath {
    /// Why no flush can reach stable storage (mounted without barriers, a write-through
    /// loop device, zfs `sync=disabled`, a memory filesystem or a loop device backed by
    /// one); empty when nothing known stops them.
    pub dropped_by: Vec<String>,
    /// The device under the target reports itself rotational.
    pub rotational: Option<bool>,
    /// That device's name, for the evidence.
    pub device: Option<String>,
}

/// The verdict on every test: each test's `extra.durability` is set, and the tests whose
/// flushes cost nothing (for `FLUSH_NO_EFFECT`) are returned as `NAME (P% of a plain
/// write)`.
///
/// Every method's flushes end at the same device, so the verdicts agree about it: once one
/// method's flushes came back faster than the device's medium allows (a volatile cache
/// answered them), no other method is called durable on timing alone.
pub fn judge(tests: &mut [TestRecord], path: &FlushPath) -> Vec<String> {
    let plain: Vec<(u64, f64, f64)> = tests
        .iter()
        .filter(|t| t.group == SyncMethod::None.name() && !t.passes.is_empty())
        .map(|t| (t.job.bs, t.summary.iops, t.summary.lat_mean_us))
        .collect();
    let mut free = Vec::new();
    let mut judged: Vec<Option<(SyncMethod, Judgement)>> = Vec::new();
    for t in tests.iter() {
        let Some(method) = SyncMethod::ALL.into_iter().find(|m| m.name() == t.group) else {
            judged.push(None);
            continue;
        };
        let base = plain.iter().find(|p| p.0 == t.job.bs).copied();
        if let Some((_, p, _)) = base.filter(|_| method.flushes()) {
            if p > 0.0 && t.summary.iops >= FREE_FLUSH_RATIO * p {
                free.push(format!(
                    "{} ({:.0}% of a plain write)",
                    t.name,
                    100.0 * t.summary.iops / p
                ));
            }
        }
        judged.push(Some((method, judge_one(t, method, base, path))));
    }
    // The fastest flushes a volatile cache was caught answering, if any.
    let caught = tests
        .iter()
        .zip(&judged)
        .filter_map(|(t, j)| match j {
            Some((_, j)) if j.verdict == Durability::CacheAnswered => {
                Some((t.name.clone(), j.flush_us.unwrap_or(0.0)))
            }
            _ => None,
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    for (t, j) in tests.iter_mut().zip(judged) {
        let Some((method, mut j)) = j else {
            continue;
        };
        if let Some((name, us)) = &caught {
            if method.flushes() && j.verdict == Durability::AsFarAsTimingShows {
                let own = j
                    .flush_us
                    .map_or(String::new(), |u| format!("{u:.0} µs a flush, "));
                j = Judgement {
                    verdict: Durability::CacheAnswered,
                    flush_us: j.flush_us,
                    evidence: format!(
                        "its flushes go to the same device as those of {name}, which a \
                         volatile cache answered in {us:.0} µs ({own}{:.0} ops/s): what \
                         makes this method slower is not shown to be the medium",
                        t.summary.iops
                    ),
                };
            }
        }
        if let Some(obj) = t.extra.as_object_mut() {
            obj.insert(
                "durability".into(),
                serde_json::to_value(&j).unwrap_or_default(),
            );
        }
    }
    free
}

/// The median over passes of a per-pass value.
fn pass_median(t: &TestRecord, f: impl Fn(&PassRecord) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = t.passes.iter().filter_map(f).collect();
    (!v.is_empty()).then(|| iolab_stats::median(&v))
}

fn judge_one(
    t: &TestRecord,
    method: SyncMethod,
    plain: Option<(u64, f64, f64)>,
    path: &FlushPath,
) -> Judgement {
    let size = format_size_short(t.job.bs);
    let rate = t.summary.iops;
    if !method.flushes() {
        return Judgement {
            verdict: Durability::NotDurable,
            flush_us: None,
            evidence: format!(
                "plain writes, never flushed: the ceiling the others are measured against \
                 ({size}: {rate:.0} ops/s)"
            ),
        };
    }
    let rates = match plain {
        Some((_, p, _)) => format!("{size}: {rate:.0} ops/s against {p:.0} plain"),
        None => format!("{size}: {rate:.0} ops/s, no plain write measured"),
    };
    // What the flush added: the flush call's median time where it is a call of its own (the
    // same figure FSYNC_TOO_FAST judges), else the write's time beyond a plain one.
    let flush_us = match method {
        SyncMethod::Fdatasync | SyncMethod::Fsync => {
            pass_median(t, |p| p.sync.as_ref().map(|s| s.lat_us.p50))
        }
        _ => Some(t.summary.lat_mean_us - plain.map_or(0.0, |p| p.2)),
    }
    .map(|us| us.max(0.0));
    let per_flush = flush_us.map_or(String::new(), |us| format!("{us:.0} µs a flush; "));
    if !path.dropped_by.is_empty() {
        return Judgement {
            verdict: Durability::NotDurable,
            flush_us,
            evidence: format!(
                "no flush can reach stable storage here ({}), whatever it costs ({per_flush}\
                 {rates})",
                path.dropped_by.join("; ")
            ),
        };
    }
    if let Some((_, p, _)) = plain {
        if p > 0.0 && rate >= FREE_FLUSH_RATIO * p {
            return Judgement {
                verdict: Durability::NotDurable,
                flush_us,
                evidence: format!(
                    "a flushed write ran at {:.0}% of the rate of a plain write ({per_flush}\
                     {rates}): the flush did nothing measurable, so it cannot have reached \
                     stable storage",
                    100.0 * rate / p
                ),
            };
        }
    }
    let floor = iolab_stats::warnings::FSYNC_FLOOR_ROTATIONAL_US;
    if let (Some(true), Some(us)) = (path.rotational, flush_us) {
        if us < floor {
            return Judgement {
                verdict: Durability::CacheAnswered,
                flush_us,
                evidence: format!(
                    "{} reports itself rotational, and no disk reaches its platter in under \
                     {:.0} ms, so a volatile cache answered the flushes ({per_flush}{rates})",
                    path.device.as_deref().unwrap_or("the device"),
                    floor / 1000.0
                ),
            };
        }
    }
    let medium = match path.rotational {
        Some(true) => ", as long as a platter needs,",
        _ => "",
    };
    Judgement {
        verdict: Durability::AsFarAsTimingShows,
        flush_us,
        evidence: format!(
            "every write waited for its flush{medium} and nothing known on the path drops \
             flushes ({per_flush}{rates}); timing cannot tell a medium from a cache with \
             power-loss protection"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::assert_keys;

    #[test]
    fn extra_keeps_the_keys_of_the_json_document() {
        // Without verify: the method and its flags only.
        let mut extra = FsyncExtra {
            workload: "fsync",
            method: SyncMethod::DirectDsync,
            open_flags: method_flags_text(SyncMethod::DirectDsync),
            durability: None,
            verify: None,
        };
        let v = serde_json::to_value(&extra).unwrap();
        assert_keys(&v, &["workload", "method", "open_flags"]);
        assert_eq!(v["open_flags"], "O_DIRECT|O_DSYNC");
        assert_eq!(
            v["method"],
            serde_json::to_value(SyncMethod::DirectDsync).unwrap()
        );

        // With verify: the tally's keys and stamp_seconds, side by side in one object.
        let mut c = Check::new(0xfeed, 4096, 1 << 20, 1).unwrap();
        c.tally.checked = 256;
        c.tally.ok = 256;
        c.tally.seconds = Some(0.012_345_678);
        c.stamp_seconds = 0.000_123_456_7;
        c.direct = false;
        extra.verify = Some(c.to_extra());
        let v = serde_json::to_value(&extra).unwrap();
        assert_keys(&v, &["workload", "method", "open_flags", "verify"]);
        assert_keys(
            &v["verify"],
            &[
                "unit",
                "run_id",
                "checked",
                "ok",
                "failures",
                "classes",
                "failure_samples",
                "seconds",
                "block_size",
                "direct",
                "stamp_seconds",
            ],
        );
        let t = &v["verify"];
        assert_eq!(t["run_id"], "000000000000feed");
        assert_eq!(t["block_size"], 4096);
        assert_eq!(t["direct"], false);
        assert_eq!(t["checked"], 256);
        assert_eq!(t["seconds"], 0.012346);
        assert_eq!(t["stamp_seconds"], 0.000123);
    }

    /// A one-second pass of `ops` writes of `bs` bytes taking `op_us` each, the flush call
    /// inside them taking `sync_us` (write+fdatasync/fsync only).
    fn probe(
        method: SyncMethod,
        bs: u64,
        ops: u64,
        op_us: u64,
        sync_us: Option<u64>,
    ) -> TestRecord {
        let mut hist = LatencyHistogram::new();
        let mut sync_hist = LatencyHistogram::new();
        for _ in 0..ops {
            hist.record(op_us * 1000);
            if let Some(s) = sync_us {
                sync_hist.record(s * 1000);
            }
        }
        let sync = sync_us.map(|_| SyncStats {
            count: ops,
            lat_us: sync_hist.summary_us(),
        });
        let pass = PassRecord::new(
            1,
            1.0,
            None,
            Some(DirResult::from_histogram(ops * bs, 1.0, hist)),
            sync,
            Default::default(),
            TimeSeries::default(),
        );
        let passes = vec![pass];
        TestRecord {
            name: format!("{} {}", method.name(), format_size_short(bs)),
            group: method.name().to_string(),
            job: JobSpec::new(Rw::Write, bs, 1, 1),
            summary: summarize(&passes, Score::Median),
            passes,
            extra: serde_json::json!({"workload": "fsync"}),
        }
    }

    fn verdict(t: &TestRecord) -> (String, String) {
        let d = &t.extra["durability"];
        (
            d["verdict"].as_str().unwrap().to_string(),
            d["evidence"].as_str().unwrap().to_string(),
        )
    }

    fn disk(rotational: Option<bool>) -> FlushPath {
        FlushPath {
            dropped_by: Vec::new(),
            rotational,
            device: Some("sdz".into()),
        }
    }

    #[test]
    fn a_flush_faster_than_a_platter_on_a_rotational_device_is_a_cache() {
        // 80000 plain writes/s; fdatasync 50 µs a flush, 15000/s.
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fdatasync, 4096, 15_000, 60, Some(50)),
        ];
        assert!(judge(&mut tests, &disk(Some(true))).is_empty());
        assert_eq!(verdict(&tests[0]).0, "not_durable");
        let (v, why) = verdict(&tests[1]);
        assert_eq!(v, "cache_answered");
        assert!(why.contains("sdz reports itself rotational"), "{why}");
        assert!(why.contains("50 µs a flush"), "{why}");
        assert!(why.contains("15000 ops/s against 80000 plain"), "{why}");
        // On a device that is not a disk 50 µs is a plausible flush (power-loss protection).
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fdatasync, 4096, 15_000, 60, Some(50)),
        ];
        judge(&mut tests, &disk(Some(false)));
        assert_eq!(verdict(&tests[1]).0, "as_far_as_timing_shows");
        // A disk that takes 4 ms a flush.
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fdatasync, 4096, 240, 4100, Some(4000)),
        ];
        judge(&mut tests, &disk(Some(true)));
        let (v, why) = verdict(&tests[1]);
        assert_eq!(v, "as_far_as_timing_shows");
        // The median flush, read from the latency histogram (3 significant digits).
        let us = tests[1].extra["durability"]["flush_us"].as_f64().unwrap();
        assert!((us - 4000.0).abs() <= 4.0, "{us}");
        assert!(why.contains(&format!("{us:.0} µs a flush")), "{why}");
    }

    #[test]
    fn one_method_caught_at_a_cache_clears_no_other() {
        // fdatasync's flushes came back in 50 µs on a "rotational" device; O_DSYNC's writes
        // took 3 ms, but they flush through the same device.
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fdatasync, 4096, 15_000, 60, Some(50)),
            probe(SyncMethod::ODsync, 4096, 330, 3000, None),
        ];
        judge(&mut tests, &disk(Some(true)));
        let (v, why) = verdict(&tests[2]);
        assert_eq!(v, "cache_answered", "{why}");
        assert!(why.contains("write+fdatasync 4K"), "{why}");
        assert_eq!(tests[2].extra["durability"]["flush_us"], 2990.0);
    }

    #[test]
    fn the_descriptor_reads_back_the_verdict_judge_writes() {
        use iolab_measure::workload::WorkloadInfo;
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fdatasync, 4096, 15_000, 60, Some(50)),
        ];
        judge(&mut tests, &disk(Some(true)));
        let j = super::info::INFO.durability(&tests[1]).unwrap();
        assert_eq!(j.verdict, Durability::CacheAnswered);
        assert_eq!(j.evidence, verdict(&tests[1]).1);
        assert_eq!(
            j.flush_us,
            tests[1].extra["durability"]["flush_us"].as_f64()
        );
    }

    #[test]
    fn a_free_flush_or_a_dropped_one_is_not_durable() {
        // fdatasync at 60% of the plain rate: the flush did nothing measurable.
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fdatasync, 4096, 48_000, 18, Some(5)),
        ];
        let free = judge(&mut tests, &disk(Some(false)));
        assert_eq!(free, ["write+fdatasync 4K (60% of a plain write)"]);
        let (v, why) = verdict(&tests[1]);
        assert_eq!(v, "not_durable");
        assert!(why.contains("60% of the rate of a plain write"), "{why}");
        // Whatever a flush costs, a mount without barriers drops it.
        let path = FlushPath {
            dropped_by: vec!["the filesystem is mounted without barriers".into()],
            ..disk(Some(false))
        };
        let mut tests = vec![
            probe(SyncMethod::None, 4096, 80_000, 10, None),
            probe(SyncMethod::Fsync, 4096, 240, 4100, Some(4000)),
        ];
        assert!(judge(&mut tests, &path).is_empty());
        let (v, why) = verdict(&tests[1]);
        assert_eq!(v, "not_durable");
        assert!(why.contains("mounted without barriers"), "{why}");
    }

    #[test]
    fn without_a_plain_write_the_whole_write_is_the_flush() {
        let mut tests = vec![probe(SyncMethod::DirectDsync, 4096, 330, 3000, None)];
        judge(&mut tests, &disk(Some(true)));
        let (v, why) = verdict(&tests[0]);
        assert_eq!(v, "as_far_as_timing_shows");
        assert!(why.contains("no plain write measured"), "{why}");
        assert_eq!(tests[0].extra["durability"]["flush_us"], 3000.0);
    }
}
