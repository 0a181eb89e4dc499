//! What the copy, streams and metadata workloads (and the verify and scrub-test workloads) share: their
//! error type, the 100 ms throughput series, CPU and activity sampling around a pass,
//! page-cache residency and dropping, random test files, and the removal of everything a
//! workload created.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_engine::buffers::{fill_random, stamp};
use iolab_measure::{
    Activity, ActivitySample, CpuSample, CpuUsage, PassRecord, TestRecord, TimeSeries,
};
use iolab_spec::JobSpec;
use iolab_stats::{summarize, Score};

/// Length of one interval of the throughput series.
pub const SERIES_INTERVAL: Duration = Duration::from_millis(100);

/// How often a waiting thread looks at the stop flag, and how often progress is reported.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// Why a workload could not run or finish. Everything it had created is removed before
/// the error reaches the caller.
#[derive(Debug)]
pub enum WorkloadError {
    /// A system call on `path` failed.
    Io {
        path: PathBuf,
        /// What was being done, as in "cannot {action}".
        action: String,
        err: io::Error,
    },
    /// The configuration cannot run: the option, and why.
    Invalid { option: String, reason: String },
    /// Something the workload wrote did not read back as it should (a copy that differs
    /// from its source, a file with the wrong size, a count that does not add up).
    Mismatch { path: PathBuf, detail: String },
    /// The other ranks of an MPI run: one of them failed (which, and why), or a stop came
    /// while waiting for them.
    Ranks(iolab_runner::RunError),
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadError::Io { path, action, err } => {
                write!(f, "cannot {action} {}: {err}", path.display())
            }
            WorkloadError::Invalid { option, reason } => write!(f, "{option}: {reason}"),
            WorkloadError::Mismatch { path, detail } => {
                write!(f, "{}: verification failed: {detail}", path.display())
            }
            WorkloadError::Ranks(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WorkloadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkloadError::Io { err, .. } => Some(err),
            _ => None,
        }
    }
}

impl WorkloadError {
    pub(crate) fn invalid(option: &str, reason: impl Into<String>) -> Self {
        WorkloadError::Invalid {
            option: option.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn mismatch(path: &Path, detail: impl Into<String>) -> Self {
        WorkloadError::Mismatch {
            path: path.to_path_buf(),
            detail: detail.into(),
        }
    }

    pub(crate) fn io(path: &Path, action: impl Into<String>, err: io::Error) -> Self {
        WorkloadError::Io {
            path: path.to_path_buf(),
            action: action.into(),
            err,
        }
    }
}

/// `map_err` helper: an I/O error on `path` while doing `action`.
pub(crate) fn io_err<'a>(
    path: &'a Path,
    action: &'a str,
) -> impl FnOnce(io::Error) -> WorkloadError + 'a {
    move |err| WorkloadError::io(path, action, err)
}

/// A name no other run uses: `iolab-<what>-<pid>-<random>`.
pub fn unique_name(what: &str) -> String {
    format!(
        "iolab-{what}-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    )
}

/// Writes dirty data back (sync) and drops the page cache, dentries and inodes
/// (`echo 3 > /proc/sys/vm/drop_caches`). Needs root.
pub fn drop_caches() -> Result<(), WorkloadError> {
    if !iolab_sys::is_root() {
        return Err(WorkloadError::invalid(
            "drop-caches",
            "dropping the page cache needs root (run as root or leave the option out)",
        ));
    }
    let p = Path::new("/proc/sys/vm/drop_caches");
    iolab_sys::drop_caches().map_err(io_err(p, "write 3 to"))
}

/// Asks the kernel to forget the cached pages of one file iolab wrote (clean pages only,
/// so the file is flushed first). Needs no privileges and touches no other file.
pub(crate) fn evict_file(path: &Path) -> Result<(), WorkloadError> {
    let f = File::open(path).map_err(io_err(path, "open"))?;
    f.sync_all().map_err(io_err(path, "flush"))?;
    // No length: to the end.
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| WorkloadError::io(path, "evict from the page cache", io::Error::from(e)))?;
    Ok(())
}

/// Fraction (0..1) of the bytes of `paths` in the page cache; None if unknown or empty.
pub(crate) fn resident_fraction<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Option<f64> {
    let (mut res, mut total) = (0u64, 0u64);
    for p in paths {
        let (r, t) = iolab_engine::target::page_cache_residency(p, None)?;
        res += r;
        total += t;
    }
    (total > 0).then(|| res as f64 / total as f64)
}

/// The block device holding `path`, named as /proc/diskstats names it ("vda", "sda1",
/// "dm-0"); None for filesystems without one (tmpfs, overlay, network).
pub fn device_of(path: &Path) -> Option<String> {
    device_name(std::fs::metadata(path).ok()?.dev())
}

/// The /proc/diskstats name of the block device numbered `dev`.
pub fn device_name(dev: u64) -> Option<String> {
    let link = std::fs::read_link(format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ))
    .ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// CPU and machine activity sampled at the start of a pass.
pub struct Watch {
    cpu: CpuSample,
    activity: ActivitySample,
    devices: Vec<String>,
}

impl Watch {
    /// Starts watching; `devices` are the block devices whose traffic is reported.
    pub fn start(devices: &[String]) -> Self {
        Watch {
            activity: ActivitySample::now(),
            devices: devices.to_vec(),
            cpu: CpuSample::now(),
        }
    }

    /// Starts the device window again, after the other ranks' barrier (see
    /// [`ActivitySample::devices_from_now`]).
    pub fn devices_from_now(&mut self) {
        self.activity.devices_from_now();
    }

    /// CPU use for a pass of `ios` operations, and what else the machine did meanwhile.
    pub fn finish(&self, ios: u64) -> (CpuUsage, Activity) {
        let cpu = self.cpu.usage_until(&CpuSample::now(), ios);
        let activity = self.activity.until(&ActivitySample::now(), &self.devices);
        (cpu, activity)
    }
}

/// Bytes (or operations) per 100 ms interval since `start`.
#[derive(Debug, Clone)]
pub struct Series {
    start: Instant,
    buckets: Vec<u64>,
}

impl Series {
    pub fn new(start: Instant) -> Self {
        Series {
            start,
            buckets: Vec::new(),
        }
    }

    #[inline]
    pub fn add(&mut self, at: Instant, amount: u64) {
        let i = (at.saturating_duration_since(self.start).as_nanos() / SERIES_INTERVAL.as_nanos())
            as usize;
        if self.buckets.len() <= i {
            self.buckets.resize(i + 1, 0);
        }
        self.buckets[i] += amount;
    }

    /// Makes the series cover the pass up to `end` (a final flush adds empty intervals).
    pub fn extend_to(&mut self, end: Instant) {
        let n =
            end.saturating_duration_since(self.start).as_nanos() / SERIES_INTERVAL.as_nanos() + 1;
        if self.buckets.len() < n as usize {
            self.buckets.resize(n as usize, 0);
        }
    }

    pub fn buckets(&self) -> &[u64] {
        &self.buckets
    }

    /// Adds `other` into `self`, aligned on the intervals of `self`'s start.
    pub fn merge(&mut self, other: &Series) {
        let shift = (other.start.saturating_duration_since(self.start).as_nanos()
            / SERIES_INTERVAL.as_nanos()) as usize;
        if self.buckets.len() < other.buckets.len() + shift {
            self.buckets.resize(other.buckets.len() + shift, 0);
        }
        for (i, b) in other.buckets.iter().enumerate() {
            self.buckets[i + shift] += b;
        }
    }

    pub fn into_timeseries(self) -> TimeSeries {
        TimeSeries {
            interval_ms: SERIES_INTERVAL.as_millis() as u32,
            bytes: self.buckets,
            ..Default::default()
        }
    }
}

/// A test record with the median summary of its passes.
pub fn test_record(
    name: String,
    group: String,
    job: JobSpec,
    passes: Vec<PassRecord>,
    extra: serde_json::Value,
) -> TestRecord {
    let summary = summarize(&passes, Score::Median);
    TestRecord {
        name,
        group,
        job,
        passes,
        summary,
        extra,
    }
}

/// Rounds to 6 significant decimals for the JSON extras (seconds, MB/s, fractions).
pub fn round6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        0.0
    }
}

/// `serialize_with` for an `f64` field of an extra: [`round6`]ed.
pub(crate) fn ser_round6<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round6(*x))
}

/// `serialize_with` for an `Option<f64>` field of an extra: [`round6`]ed, None as null.
pub(crate) fn ser_round6_opt<S: serde::Serializer>(
    x: &Option<f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => s.serialize_some(&round6(*x)),
        None => s.serialize_none(),
    }
}

/// `serialize_with` for a list of `f64`s in an extra: each [`round6`]ed.
pub(crate) fn ser_round6_vec<S: serde::Serializer>(xs: &[f64], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(xs.iter().map(|x| round6(*x)))
}

/// Test helper: the keys of a serialised extra (an object) equal `expected`.
#[cfg(test)]
pub(crate) fn assert_keys(v: &serde_json::Value, expected: &[&str]) {
    let got: std::collections::BTreeSet<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    let want: std::collections::BTreeSet<&str> = expected.iter().copied().collect();
    assert_eq!(got, want, "keys of {v}");
    assert_eq!(expected.len(), want.len(), "duplicate expected keys");
}

/// Creates `path` (which must not exist) and fills it with `size` bytes of incompressible
/// random data, 1 MiB per write, then flushes it. Returns false when `stop` was raised
/// first; the caller removes the partial file.
pub(crate) fn write_random_file(
    path: &Path,
    size: u64,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<bool, WorkloadError> {
    const CHUNK: usize = 1 << 20;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err(path, "create"))?;
    let mut rng = fastrand::Rng::new();
    let mut buf = vec![0u8; CHUNK];
    fill_random(&mut buf, &mut rng);
    let mut done = 0u64;
    let mut last = Instant::now();
    while done < size {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        stamp(&mut buf, &mut rng);
        let n = (size - done).min(CHUNK as u64) as usize;
        f.write_all(&buf[..n])
            .map_err(io_err(path, "write test data to"))?;
        done += n as u64;
        if last.elapsed() >= POLL {
            progress(done);
            last = Instant::now();
        }
    }
    f.sync_all().map_err(io_err(path, "flush"))?;
    progress(done);
    Ok(true)
}

/// Flushes a directory's entries (fsync on the directory itself).
pub(crate) fn fsync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// statvfs(3) of the filesystem holding `path`.
pub(crate) fn statvfs(path: &Path) -> Result<iolab_sys::FsStats, WorkloadError> {
    iolab_sys::statvfs(path).map_err(io_err(path, "statvfs"))
}

/// Writes back the whole filesystem holding `path` (syncfs(2)), so block counts settle.
pub(crate) fn syncfs(path: &Path) -> Result<(), WorkloadError> {
    let f = File::open(path).map_err(io_err(path, "open"))?;
    if let Err(e) = rustix::fs::syncfs(&f) {
        return Err(WorkloadError::io(path, "syncfs", io::Error::from(e)));
    }
    Ok(())
}

/// Sleeps until `at`, waking every 100 ms to look at `stop`. Returns false if stopped.
pub(crate) fn sleep_until(at: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= at {
            return true;
        }
        std::thread::sleep((at - now).min(POLL));
    }
}

/// Paths iolab created, removed in reverse order of creation: files and symlinks with
/// unlink, directories with rmdir (so a directory that holds anything iolab did not put
/// there stays, and the removal reports it), each only while its path still holds what was
/// made (device and inode, known once it exists): one moved away and replaced during the
/// run is left alone, with a warning, and nothing under a replaced directory is touched.
/// Dropping it removes what is left.
#[derive(Debug, Default)]
pub(crate) struct Created {
    entries: Vec<Made>,
}

#[derive(Debug)]
struct Made {
    path: PathBuf,
    dir: bool,
    id: Option<iolab_sys::loopdev::FileId>,
}

/// What `p` is now, not following a link.
pub(crate) fn identity(p: &Path) -> Option<iolab_sys::loopdev::FileId> {
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| iolab_sys::loopdev::FileId::from_meta(&m))
}

impl Created {
    /// A file (or link) the run is about to create or just created; [`Self::identify`]
    /// once it exists if it did not yet.
    pub(crate) fn file(&mut self, p: PathBuf) {
        let id = identity(&p);
        self.entries.push(Made {
            path: p,
            dir: false,
            id,
        });
    }

    /// A directory the run just created.
    pub(crate) fn dir(&mut self, p: PathBuf) {
        let id = identity(&p);
        self.entries.push(Made {
            path: p,
            dir: true,
            id,
        });
    }

    /// Records what `p`, registered before it existed, is now that the run made it.
    pub(crate) fn identify(&mut self, p: &Path) {
        if let Some(e) = self.entries.iter_mut().rev().find(|e| e.path == p) {
            e.id = e.id.or_else(|| identity(p));
        }
    }

    /// Removes everything registered. Entries already gone are fine, and so are ones
    /// replaced by someone else's (left alone, with a warning); the first failure is
    /// returned after trying all the others.
    pub(crate) fn remove_all(&mut self) -> Result<(), WorkloadError> {
        let mut first: Option<WorkloadError> = None;
        // Directories that are something else now: nothing under them is the run's.
        let replaced: Vec<PathBuf> = self
            .entries
            .iter()
            .filter(|e| {
                e.dir && e.id.is_some() && identity(&e.path).is_some_and(|i| Some(i) != e.id)
            })
            .map(|e| e.path.clone())
            .collect();
        while let Some(e) = self.entries.pop() {
            let p = &e.path;
            if replaced.iter().any(|d| p.starts_with(d) && p != d) {
                continue;
            }
            let r = match e.id {
                Some(id) => iolab_sys::files::remove_one_if_same(p, id).map(|gone| {
                    if !gone && identity(p).is_some() {
                        eprintln!(
                            "iolab: warning: {} is not what this run created (it was replaced \
                             during the run): left alone",
                            p.display()
                        );
                    }
                }),
                None if e.dir => std::fs::remove_dir(p),
                None => std::fs::remove_file(p),
            };
            match r {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => {
                    if first.is_none() {
                        first = Some(WorkloadError::io(p, "remove", err));
                    }
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for Created {
    fn drop(&mut self) {
        if let Err(e) = self.remove_all() {
            eprintln!("iolab: could not remove what it created: {e}");
        }
    }
}

/// Runs `work(i)` for every `i` in `0..n` on scoped threads and returns their results in
/// order. A worker that fails raises `abort`, which the others poll so they stop early;
/// while they run, `tick` is called every half `POLL` (progress, watching a stop flag).
pub(crate) fn run_workers<T: Send, E: Send>(
    n: usize,
    abort: &AtomicBool,
    work: impl Fn(usize) -> Result<T, E> + Sync,
    mut tick: impl FnMut(),
) -> Vec<Result<T, E>> {
    std::thread::scope(|s| {
        let work = &work;
        let handles: Vec<_> = (0..n)
            .map(|i| {
                s.spawn(move || {
                    let r = work(i);
                    if r.is_err() {
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(POLL / 2);
            tick();
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("a worker thread panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_names_the_action_then_the_path() {
        let e = WorkloadError::io(
            Path::new("/mnt/x.dat"),
            "write test data to",
            io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(
            e.to_string(),
            "cannot write test data to /mnt/x.dat: No space left on device (os error 28)"
        );
    }

    #[test]
    fn series_merge_aligns_on_intervals() {
        let t0 = Instant::now();
        let mut a = Series::new(t0);
        a.add(t0, 10);
        a.add(t0 + Duration::from_millis(150), 5);
        let mut b = Series::new(t0 + Duration::from_millis(210));
        b.add(t0 + Duration::from_millis(220), 7);
        a.merge(&b);
        assert_eq!(a.buckets(), &[10, 5, 7]);
        a.extend_to(t0 + Duration::from_millis(450));
        assert_eq!(a.buckets(), &[10, 5, 7, 0, 0]);
    }

    #[test]
    fn created_removes_in_reverse_and_keeps_foreign_files() {
        let base = std::env::temp_dir().join(unique_name("common-test"));
        let mut c = Created::default();
        std::fs::create_dir(&base).unwrap();
        c.dir(base.clone());
        let f = base.join("ours");
        std::fs::write(&f, b"x").unwrap();
        c.file(f.clone());
        c.remove_all().unwrap();
        assert!(!base.exists());

        std::fs::create_dir(&base).unwrap();
        c.dir(base.clone());
        std::fs::write(base.join("foreign"), b"x").unwrap();
        assert!(c.remove_all().is_err());
        assert!(base.join("foreign").exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
