//! A file copy as a user makes one: a real file or directory tree (or a generated random
//! file) read and written with a plain buffer, every written file and directory flushed at
//! the end, and the flush counted. Reports MB/s over time, the total time, and the rate
//! before and after the final flush, so a copy that only filled the page cache shows it.
//! Every pass is verified (contents hashed with XXH3-128) and its copy removed.

pub mod info;
pub mod run;

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use iolab_measure::{
    DirResult, LatSummary, LatencyHistogram, PassRecord, SyncStats, TestRecord, MB,
};
use iolab_spec::{format_bytes, format_size_short, JobSpec, Rw};
use serde::Serialize;
use xxhash_rust::xxh3::Xxh3;

pub use crate::common::WorkloadError;
use crate::common::{
    device_of, drop_caches, evict_file, fsync_dir, identity, io_err, resident_fraction, ser_round6,
    ser_round6_opt, test_record, unique_name, write_random_file, Created, Series, Watch, POLL,
};

/// Source size generated when no `source` is given.
pub const DEFAULT_GENERATE_SIZE: u64 = 1 << 30;
/// Read/write buffer of the copy loop.
pub const DEFAULT_BUFFER_SIZE: usize = 1 << 20;
/// Largest accepted buffer.
pub const MAX_BUFFER_SIZE: usize = 256 << 20;

/// What to copy, where, and how.
#[derive(Debug, Clone)]
pub struct CopyConfig {
    /// A file or directory tree to copy (directories recursively: regular files,
    /// directories, and symlinks copied as links). None: a random file of `generate_size`
    /// is generated in `target` first and removed at the end.
    pub source: Option<PathBuf>,
    /// Size of the generated source when `source` is None.
    pub generate_size: u64,
    /// Directory that receives the copies (one fresh directory per pass, removed after).
    pub target: PathBuf,
    /// Bytes per read() and write().
    pub buffer_size: usize,
    /// Passes (each a full copy to a fresh destination).
    pub runs: u32,
    /// Write back and drop the page cache before every pass (root only).
    pub drop_caches: bool,
}

impl CopyConfig {
    /// Defaults: generated 1 GiB source, 1 MiB buffer, one pass, caches kept.
    pub fn new(target: PathBuf) -> Self {
        CopyConfig {
            source: None,
            generate_size: DEFAULT_GENERATE_SIZE,
            target,
            buffer_size: DEFAULT_BUFFER_SIZE,
            runs: 1,
            drop_caches: false,
        }
    }
}

/// One thing to recreate at the destination, relative to the destination root.
#[derive(Debug, Clone)]
enum Kind {
    Dir,
    File { size: u64, mode: u32 },
    Symlink(PathBuf),
}

#[derive(Debug, Clone)]
struct Entry {
    /// Path in the source.
    src: PathBuf,
    /// Path relative to the destination root (starts with the source's own name).
    rel: PathBuf,
    kind: Kind,
}

/// The source tree, listed once in copy order (every directory before its contents).
#[derive(Debug, Default)]
struct Plan {
    entries: Vec<Entry>,
    files: u64,
    dirs: u64,
    symlinks: u64,
    bytes: u64,
    /// Sockets, FIFOs and devices: not copied.
    skipped: Vec<PathBuf>,
}

fn plan(source: &Path) -> Result<Plan, WorkloadError> {
    let mut p = Plan::default();
    let meta = std::fs::metadata(source).map_err(io_err(source, "inspect the copy source"))?;
    let name = source
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("source"));
    if meta.is_file() {
        p.files = 1;
        p.bytes = meta.len();
        p.entries.push(Entry {
            src: source.to_path_buf(),
            rel: name,
            kind: Kind::File {
                size: meta.len(),
                mode: meta.mode(),
            },
        });
        return Ok(p);
    }
    if !meta.is_dir() {
        return Err(WorkloadError::invalid(
            "source",
            format!(
                "{} is neither a regular file nor a directory",
                source.display()
            ),
        ));
    }
    // Depth-first, children sorted by name, directories before what they hold.
    let mut stack = vec![(source.to_path_buf(), name, true)];
    while let Some((src, rel, is_dir)) = stack.pop() {
        if !is_dir {
            let m = std::fs::symlink_metadata(&src).map_err(io_err(&src, "inspect"))?;
            let ft = m.file_type();
            if ft.is_symlink() {
                let to = std::fs::read_link(&src).map_err(io_err(&src, "read the link"))?;
                p.symlinks += 1;
                p.entries.push(Entry {
                    src,
                    rel,
                    kind: Kind::Symlink(to),
                });
            } else if ft.is_file() {
                p.files += 1;
                p.bytes += m.len();
                p.entries.push(Entry {
                    src,
                    rel,
                    kind: Kind::File {
                        size: m.len(),
                        mode: m.mode(),
                    },
                });
            } else {
                p.skipped.push(src);
            }
            continue;
        }
        p.dirs += 1;
        let mut children: Vec<(PathBuf, PathBuf, bool)> = Vec::new();
        for e in std::fs::read_dir(&src).map_err(io_err(&src, "list"))? {
            let e = e.map_err(io_err(&src, "list"))?;
            let ft = e.file_type().map_err(io_err(&e.path(), "inspect"))?;
            children.push((e.path(), rel.join(e.file_name()), ft.is_dir()));
        }
        children.sort_by(|a, b| b.1.cmp(&a.1));
        p.entries.push(Entry {
            src,
            rel,
            kind: Kind::Dir,
        });
        stack.extend(children);
    }
    Ok(p)
}

/// What one copy of `source` puts on the target: (bytes of its files, entries).
pub fn source_footprint(source: &Path) -> Result<(u64, u64), WorkloadError> {
    let p = plan(source)?;
    Ok((p.bytes, p.entries.len() as u64))
}

/// XXH3-128 of a file's contents.
fn hash_file(path: &Path, buf: &mut [u8]) -> Result<u128, WorkloadError> {
    let mut f = File::open(path).map_err(io_err(path, "open for verification"))?;
    let mut h = Xxh3::new();
    loop {
        match f.read(buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WorkloadError::io(path, "read for verification", e)),
        }
    }
    Ok(h.digest128())
}

/// What one pass measured besides its PassRecord.
struct PassFacts {
    bytes: u64,
    seconds: f64,
    seconds_before_fsync: f64,
    fsync_seconds: f64,
    fsyncs: u64,
    read_lat: LatSummary,
    dest_resident_after: Option<f64>,
}

impl PassFacts {
    /// This pass's times and rates.
    fn times(&self) -> CopyTimes {
        let mb = self.bytes as f64 / MB;
        CopyTimes {
            seconds_before_fsync: self.seconds_before_fsync,
            mb_s_before_fsync: mb / self.seconds_before_fsync.max(1e-9),
            fsync_seconds: self.fsync_seconds,
            mb_s_including_fsync: mb / self.seconds.max(1e-9),
            seconds: self.seconds,
        }
    }

    /// This pass's entry in the test's `extra.passes`.
    fn to_extra(&self, index: u32) -> CopyPassExtra {
        CopyPassExtra {
            index,
            bytes: self.bytes,
            times: self.times(),
            fsyncs: self.fsyncs,
            read_lat_us: self.read_lat,
            dest_resident_after: self.dest_resident_after,
            verified: true,
        }
    }
}

/// What a copy test carries in `extra` (docs/copy.md): the source, the tree copied, and
/// the medians over the passes of the times before and including the final fsyncs.
#[derive(Debug, Serialize)]
struct CopyExtra {
    workload: &'static str,
    /// The source given; null when generated.
    source: Option<String>,
    source_generated: bool,
    /// Bytes of the generated source; null when a source was given.
    generated_size: Option<u64>,
    source_evicted_before_each_pass: bool,
    target: String,
    buffer_size: usize,
    drop_caches: bool,
    files: u64,
    dirs: u64,
    symlinks: u64,
    /// Sockets, FIFOs and devices in the source: not copied.
    skipped_special_files: Vec<String>,
    bytes: u64,
    /// The medians over the passes.
    #[serde(flatten)]
    times: CopyTimes,
    /// Every pass's copy was compared with the source (a mismatch is an error).
    verified: bool,
    hash: &'static str,
    passes: Vec<CopyPassExtra>,
}

/// How long a copy took before and including its final fsyncs, and the rates: of one pass,
/// or the medians over the passes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
struct CopyTimes {
    #[serde(serialize_with = "ser_round6")]
    seconds_before_fsync: f64,
    #[serde(serialize_with = "ser_round6")]
    mb_s_before_fsync: f64,
    #[serde(serialize_with = "ser_round6")]
    fsync_seconds: f64,
    #[serde(serialize_with = "ser_round6")]
    mb_s_including_fsync: f64,
    #[serde(serialize_with = "ser_round6")]
    seconds: f64,
}

impl CopyTimes {
    /// Each field's median over `all`.
    fn median(all: &[CopyTimes]) -> CopyTimes {
        let med = |f: fn(&CopyTimes) -> f64| {
            iolab_stats::median(&all.iter().map(f).collect::<Vec<f64>>())
        };
        CopyTimes {
            seconds_before_fsync: med(|t| t.seconds_before_fsync),
            mb_s_before_fsync: med(|t| t.mb_s_before_fsync),
            fsync_seconds: med(|t| t.fsync_seconds),
            mb_s_including_fsync: med(|t| t.mb_s_including_fsync),
            seconds: med(|t| t.seconds),
        }
    }
}

/// One pass of a copy test, in its `extra.passes`.
#[derive(Debug, Serialize)]
struct CopyPassExtra {
    index: u32,
    bytes: u64,
    #[serde(flatten)]
    times: CopyTimes,
    fsyncs: u64,
    read_lat_us: LatSummary,
    /// The share of the copies' pages in the page cache after the pass.
    #[serde(serialize_with = "ser_round6_opt")]
    dest_resident_after: Option<f64>,
    verified: bool,
}

/// Progress label helper: "copy 2/3".
fn label(what: &str, index: u32, runs: u32) -> String {
    format!("{what} {index}/{runs}")
}

/// Copies one regular file with `buf`, timing every read() and write().
#[allow(clippy::too_many_arguments)]
fn copy_file(
    src: &Path,
    dst: &Path,
    mode: u32,
    buf: &mut [u8],
    write_hist: &mut LatencyHistogram,
    read_hist: &mut LatencyHistogram,
    series: &mut Series,
    copied: &mut u64,
    stop: &AtomicBool,
    tick: &mut dyn FnMut(u64),
) -> Result<bool, WorkloadError> {
    let mut input = File::open(src).map_err(io_err(src, "open the source"))?;
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode((mode & 0o7777) | 0o600)
        .open(dst)
        .map_err(io_err(dst, "create"))?;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let t0 = Instant::now();
        let n = match input.read(buf) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(WorkloadError::io(src, "read", e)),
        };
        read_hist.record((Instant::now() - t0).as_nanos() as u64);
        let mut done = 0;
        while done < n {
            let t0 = Instant::now();
            match out.write(&buf[done..n]) {
                Ok(0) => {
                    return Err(WorkloadError::io(
                        dst,
                        "write",
                        io::Error::from(io::ErrorKind::WriteZero),
                    ))
                }
                Ok(w) => {
                    let t1 = Instant::now();
                    write_hist.record((t1 - t0).as_nanos() as u64);
                    series.add(t1, w as u64);
                    done += w;
                    *copied += w as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(WorkloadError::io(dst, "write", e)),
            }
        }
        tick(*copied);
    }
}

/// Checks the copy under `root` against the plan: same tree, same link targets, same
/// contents (XXH3-128). Source hashes are computed on first use and kept.
fn verify(
    plan: &Plan,
    root: &Path,
    src_hashes: &mut [Option<u128>],
    buf: &mut [u8],
) -> Result<(), WorkloadError> {
    // Every planned entry is listed by exactly one directory: the root or a planned one.
    let mut listed = std::fs::read_dir(root)
        .map_err(io_err(root, "list"))?
        .count() as u64;
    for (i, e) in plan.entries.iter().enumerate() {
        let dst = root.join(&e.rel);
        let m = std::fs::symlink_metadata(&dst)
            .map_err(|_| WorkloadError::mismatch(&dst, "missing from the copy"))?;
        match &e.kind {
            Kind::Dir => {
                if !m.is_dir() {
                    return Err(WorkloadError::mismatch(&dst, "should be a directory"));
                }
                listed += std::fs::read_dir(&dst)
                    .map_err(io_err(&dst, "list"))?
                    .count() as u64;
            }
            Kind::Symlink(to) => {
                let got = std::fs::read_link(&dst).map_err(io_err(&dst, "read the link"))?;
                if !m.file_type().is_symlink() || &got != to {
                    return Err(WorkloadError::mismatch(
                        &dst,
                        format!("should link to {}", to.display()),
                    ));
                }
            }
            Kind::File { size, .. } => {
                if !m.is_file() || m.len() != *size {
                    return Err(WorkloadError::mismatch(
                        &dst,
                        format!(
                            "has {} bytes, the source {} has {size}",
                            m.len(),
                            e.src.display()
                        ),
                    ));
                }
                let want = match src_hashes[i] {
                    Some(h) => h,
                    None => {
                        let h = hash_file(&e.src, buf)?;
                        src_hashes[i] = Some(h);
                        h
                    }
                };
                let got = hash_file(&dst, buf)?;
                if got != want {
                    return Err(WorkloadError::mismatch(
                        &dst,
                        format!(
                            "contents differ from {} (XXH3-128 {got:032x} vs {want:032x})",
                            e.src.display()
                        ),
                    ));
                }
            }
        }
    }
    let expected = plan.entries.len() as u64;
    if listed != expected {
        return Err(WorkloadError::mismatch(
            root,
            format!("the copy holds {listed} entries, the source {expected}"),
        ));
    }
    Ok(())
}

/// Runs the copy workload: `cfg.runs` passes, each a verified full copy into a fresh
/// directory under `cfg.target`. `progress` gets a phase label ("generate", "copy 1/3",
/// "fsync 1/3", "verify 1/3") and the bytes done in it. A stop request ends the current
/// pass unrecorded, removes what was created, and returns the passes that finished.
pub fn run(
    cfg: &CopyConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<Vec<TestRecord>, WorkloadError> {
    run_with(cfg, stop, progress, &mut |_, _| {})
}

/// [`run`], telling `created` the path and identity (device, inode) of the generated
/// source and of every pass's destination directory as soon as they are made (for a record
/// that must never take another file at their path for them).
pub fn run_with(
    cfg: &CopyConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, u64),
    created_at: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<Vec<TestRecord>, WorkloadError> {
    if cfg.runs == 0 {
        return Err(WorkloadError::invalid(
            "runs",
            "at least one pass is needed",
        ));
    }
    if cfg.buffer_size == 0 || cfg.buffer_size > MAX_BUFFER_SIZE {
        return Err(WorkloadError::invalid(
            "buffer",
            format!(
                "the copy buffer must be between 1 byte and {}",
                format_bytes(MAX_BUFFER_SIZE as u64)
            ),
        ));
    }
    if cfg.drop_caches && !iolab_sys::is_root() {
        return Err(WorkloadError::invalid(
            "drop-caches",
            "dropping the page cache needs root",
        ));
    }
    let target = std::path::absolute(&cfg.target).unwrap_or_else(|_| cfg.target.clone());
    let tmeta = std::fs::metadata(&target).map_err(io_err(&target, "inspect the target"))?;
    if !tmeta.is_dir() {
        return Err(WorkloadError::invalid(
            "target",
            format!("{} is not a directory", target.display()),
        ));
    }
    // A tree copied into itself would list its own copies.
    if let Some(src) = &cfg.source {
        let s = std::fs::canonicalize(src).map_err(io_err(src, "find the copy source"))?;
        let t = std::fs::canonicalize(&target).map_err(io_err(&target, "resolve"))?;
        if s.is_dir() && t.starts_with(&s) {
            return Err(WorkloadError::invalid(
                "source",
                format!(
                    "the target {} lies inside the source tree {}; copy to another directory",
                    target.display(),
                    s.display()
                ),
            ));
        }
    }

    // Everything created, removed on every way out (rmdir of our own dirs, unlink of our
    // own files: nothing else is touched).
    let mut created = Created::default();

    let (source, generated) = match &cfg.source {
        Some(s) => (s.clone(), false),
        None => {
            if cfg.generate_size == 0 {
                return Err(WorkloadError::invalid(
                    "size",
                    "the generated source must be at least 1 byte",
                ));
            }
            let p = target.join(format!("{}.src", unique_name("copy")));
            created.file(p.clone());
            progress("generate", 0);
            let generated = write_random_file(&p, cfg.generate_size, stop, &mut |b| {
                progress("generate", b)
            });
            created.identify(&p);
            if let Some(id) = identity(&p) {
                created_at(&p, (id.dev, id.ino));
            }
            if !generated? {
                return Ok(Vec::new());
            }
            (p, true)
        }
    };
    let plan = plan(&source)?;
    let mut devices: Vec<String> = Vec::new();
    for p in [&target, &source] {
        if let Some(d) = device_of(p) {
            if !devices.contains(&d) {
                devices.push(d);
            }
        }
    }
    let src_files: Vec<&Path> = plan
        .entries
        .iter()
        .filter(|e| matches!(e.kind, Kind::File { .. }))
        .map(|e| e.src.as_path())
        .collect();

    let mut buf = vec![0u8; cfg.buffer_size];
    let mut vbuf = vec![0u8; 1 << 20];
    let mut src_hashes: Vec<Option<u128>> = vec![None; plan.entries.len()];
    let mut passes: Vec<PassRecord> = Vec::new();
    let mut facts: Vec<PassFacts> = Vec::new();

    for index in 1..=cfg.runs {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let root = target.join(unique_name("copy"));
        // 0700: nothing in it is anyone else's; what it is, recorded at once.
        let id =
            iolab_sys::files::create_dir(&root).map_err(io_err(&root, "create the destination"))?;
        let mut pass_created = Created::default();
        pass_created.dir(root.clone());
        created_at(&root, (id.dev, id.ino));
        if cfg.drop_caches {
            progress(&label("drop caches", index, cfg.runs), 0);
            drop_caches()?;
        }
        if generated {
            // The generated source was just written (or read by the last pass): forget its
            // cached pages, as a file the user copies is usually not in memory. Only
            // iolab's own file is evicted; a user's source is left as it is.
            evict_file(&source)?;
        }
        let resident_before = resident_fraction(src_files.iter().copied());

        let copy_label = label("copy", index, cfg.runs);
        progress(&copy_label, 0);
        let mut write_hist = LatencyHistogram::new();
        let mut read_hist = LatencyHistogram::new();
        let mut sync_hist = LatencyHistogram::new();
        let mut copied = 0u64;
        let mut last_tick = Instant::now();
        let mut written_files: Vec<PathBuf> = Vec::new();
        let mut written_dirs: Vec<PathBuf> = vec![target.clone()];
        let mut interrupted = false;

        let watch = Watch::start(&devices);
        let start = Instant::now();
        let mut series = Series::new(start);
        for e in &plan.entries {
            let dst = root.join(&e.rel);
            match &e.kind {
                Kind::Dir => {
                    std::fs::create_dir(&dst).map_err(io_err(&dst, "create"))?;
                    pass_created.dir(dst.clone());
                    written_dirs.push(dst);
                }
                Kind::Symlink(to) => {
                    std::os::unix::fs::symlink(to, &dst)
                        .map_err(io_err(&dst, "create the symlink"))?;
                    pass_created.file(dst);
                }
                Kind::File { mode, .. } => {
                    pass_created.file(dst.clone());
                    let mut tick = |b: u64| {
                        if last_tick.elapsed() >= POLL {
                            progress(&copy_label, b);
                            last_tick = Instant::now();
                        }
                    };
                    let done = copy_file(
                        &e.src,
                        &dst,
                        *mode,
                        &mut buf,
                        &mut write_hist,
                        &mut read_hist,
                        &mut series,
                        &mut copied,
                        stop,
                        &mut tick,
                    );
                    pass_created.identify(&dst);
                    let done = done?;
                    written_files.push(dst);
                    if !done {
                        interrupted = true;
                        break;
                    }
                }
            }
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
        }
        if interrupted {
            break;
        }
        written_dirs.push(root.clone());
        let written_at = Instant::now();
        progress(&label("fsync", index, cfg.runs), copied);
        for p in &written_files {
            let t0 = Instant::now();
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(p)
                .and_then(|f| f.sync_all())
                .map_err(io_err(p, "fsync"))?;
            sync_hist.record((Instant::now() - t0).as_nanos() as u64);
        }
        for p in written_dirs.iter().rev() {
            let t0 = Instant::now();
            fsync_dir(p).map_err(io_err(p, "fsync"))?;
            sync_hist.record((Instant::now() - t0).as_nanos() as u64);
        }
        let end = Instant::now();
        series.extend_to(end);
        let ios = write_hist.count();
        let (cpu, activity) = watch.finish(ios);
        let seconds = (end - start).as_secs_f64();
        let dest_files: Vec<&Path> = written_files.iter().map(|p| p.as_path()).collect();
        let dest_resident_after = resident_fraction(dest_files.iter().copied());
        let resident_after = resident_fraction(src_files.iter().copied());

        progress(&label("verify", index, cfg.runs), copied);
        verify(&plan, &root, &mut src_hashes, &mut vbuf)?;
        pass_created.remove_all()?;

        let write = (ios > 0).then(|| DirResult::from_histogram(copied, seconds, write_hist));
        let sync = Some(SyncStats {
            count: sync_hist.count(),
            lat_us: sync_hist.summary_us(),
        });
        let mut rec = PassRecord::new(
            index,
            seconds,
            None,
            write,
            sync,
            cpu,
            series.into_timeseries(),
        );
        rec.context.cache_resident_before = resident_before;
        rec.context.cache_resident_after = resident_after;
        rec.context.activity = activity;
        passes.push(rec);
        facts.push(PassFacts {
            bytes: copied,
            seconds,
            seconds_before_fsync: (written_at - start).as_secs_f64(),
            fsync_seconds: (end - written_at).as_secs_f64(),
            fsyncs: sync_hist.count(),
            read_lat: read_hist.summary_us(),
            dest_resident_after,
        });
    }
    progress("cleanup", 0);
    created.remove_all()?;
    if passes.is_empty() {
        return Ok(Vec::new());
    }

    let times: Vec<CopyTimes> = facts.iter().map(PassFacts::times).collect();
    let extra = CopyExtra {
        workload: "copy",
        source: (!generated).then(|| source.to_string_lossy().into_owned()),
        source_generated: generated,
        generated_size: generated.then_some(cfg.generate_size),
        source_evicted_before_each_pass: generated,
        target: target.to_string_lossy().into_owned(),
        buffer_size: cfg.buffer_size,
        drop_caches: cfg.drop_caches,
        files: plan.files,
        dirs: plan.dirs,
        symlinks: plan.symlinks,
        skipped_special_files: plan
            .skipped
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect(),
        bytes: plan.bytes,
        times: CopyTimes::median(&times),
        verified: true,
        hash: "xxh3-128",
        passes: facts
            .iter()
            .zip(passes.iter())
            .map(|(f, p)| f.to_extra(p.index))
            .collect(),
    };
    let mut job = JobSpec::new(Rw::Write, cfg.buffer_size as u64, 1, 1);
    job.end_fsync = true;
    job.io_limit = Some(plan.bytes);
    let what = if generated {
        format!("generated {}", format_bytes(plan.bytes))
    } else {
        source
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| source.to_string_lossy().into_owned())
    };
    Ok(vec![test_record(
        format!("copy {what}"),
        format!("COPY {}", format_size_short(cfg.buffer_size as u64)),
        job,
        passes,
        serde_json::to_value(&extra).unwrap_or_default(),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> PathBuf {
        let p = std::env::temp_dir().join(unique_name("copy-unit"));
        std::fs::create_dir(&p).unwrap();
        p
    }

    #[test]
    fn extra_keeps_the_keys_and_rounding_of_the_json_document() {
        let facts = PassFacts {
            bytes: 3_000_000,
            seconds: 1.5,
            seconds_before_fsync: 1.000_000_4,
            fsync_seconds: 0.499_999_6,
            fsyncs: 4,
            read_lat: LatSummary::default(),
            dest_resident_after: Some(0.123_456_789),
        };
        let extra = CopyExtra {
            workload: "copy",
            source: None,
            source_generated: true,
            generated_size: Some(3_000_000),
            source_evicted_before_each_pass: true,
            target: "/mnt/t".into(),
            buffer_size: 1 << 20,
            drop_caches: false,
            files: 1,
            dirs: 0,
            symlinks: 0,
            skipped_special_files: vec!["/src/fifo".into()],
            bytes: 3_000_000,
            times: CopyTimes::median(&[facts.times()]),
            verified: true,
            hash: "xxh3-128",
            passes: vec![facts.to_extra(1)],
        };
        let v = serde_json::to_value(&extra).unwrap();
        crate::common::assert_keys(
            &v,
            &[
                "workload",
                "source",
                "source_generated",
                "generated_size",
                "source_evicted_before_each_pass",
                "target",
                "buffer_size",
                "drop_caches",
                "files",
                "dirs",
                "symlinks",
                "skipped_special_files",
                "bytes",
                "seconds_before_fsync",
                "mb_s_before_fsync",
                "fsync_seconds",
                "mb_s_including_fsync",
                "seconds",
                "verified",
                "hash",
                "passes",
            ],
        );
        assert!(v["source"].is_null());
        assert_eq!(v["generated_size"], 3_000_000);
        assert_eq!(v["seconds_before_fsync"], 1.0);
        assert_eq!(v["skipped_special_files"][0], "/src/fifo");
        let p = &v["passes"][0];
        crate::common::assert_keys(
            p,
            &[
                "index",
                "bytes",
                "seconds",
                "seconds_before_fsync",
                "mb_s_before_fsync",
                "fsync_seconds",
                "mb_s_including_fsync",
                "fsyncs",
                "read_lat_us",
                "dest_resident_after",
                "verified",
            ],
        );
        assert_eq!(p["index"], 1);
        assert_eq!(p["mb_s_including_fsync"], 2.0);
        assert_eq!(p["fsync_seconds"], 0.5);
        assert_eq!(p["dest_resident_after"], 0.123457);
        assert_eq!(p["verified"], true);
        assert!(p["read_lat_us"].is_object());
        // A source that was given: its path, and no generated size.
        let given = CopyExtra {
            source: Some("/data/tree".into()),
            generated_size: None,
            ..extra
        };
        let v = serde_json::to_value(&given).unwrap();
        assert_eq!(v["source"], "/data/tree");
        assert!(v["generated_size"].is_null());
    }

    #[test]
    fn verify_catches_a_changed_byte_and_a_stray_file() {
        let base = tmp();
        let src = base.join("src");
        std::fs::create_dir_all(src.join("d")).unwrap();
        std::fs::write(src.join("d/f"), vec![1u8; 10_000]).unwrap();
        std::os::unix::fs::symlink("d/f", src.join("l")).unwrap();
        let p = plan(&src).unwrap();
        assert_eq!((p.files, p.dirs, p.symlinks, p.bytes), (1, 2, 1, 10_000));
        // Directories come before what they hold.
        let rels: Vec<String> = p
            .entries
            .iter()
            .map(|e| e.rel.to_string_lossy().into_owned())
            .collect();
        assert_eq!(rels, ["src", "src/d", "src/d/f", "src/l"]);

        let root = base.join("dst");
        std::fs::create_dir_all(root.join("src/d")).unwrap();
        let mut bad = vec![1u8; 10_000];
        bad[5_000] = 2;
        std::fs::write(root.join("src/d/f"), &bad).unwrap();
        std::os::unix::fs::symlink("d/f", root.join("src/l")).unwrap();
        let mut hashes = vec![None; p.entries.len()];
        let mut buf = vec![0u8; 4096];
        let e = verify(&p, &root, &mut hashes, &mut buf).unwrap_err();
        assert!(matches!(e, WorkloadError::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains("contents differ"), "{e}");

        std::fs::write(root.join("src/d/f"), vec![1u8; 10_000]).unwrap();
        verify(&p, &root, &mut hashes, &mut buf).unwrap();
        std::fs::write(root.join("src/d/extra"), b"x").unwrap();
        let e = verify(&p, &root, &mut hashes, &mut buf).unwrap_err();
        assert!(e.to_string().contains("entries"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
