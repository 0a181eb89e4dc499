//! The verified-write workload (`iolab run verify`) and the later checks (`iolab verify`):
//! every block written is stamped (`block::stamp`) with the pass number as its generation,
//! read back inline and/or after the pass, and classified; a sidecar file next to a kept
//! data file, or the journal, says later what every block must hold.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_engine::buffers::BufferPool;
use iolab_measure::{DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord};
use iolab_spec::{format_size_short, JobSpec, Rw, SyncMode};
use iolab_workloads::common::{device_of, round6, test_record, unique_name, Series, Watch};
use serde::{Deserialize, Serialize};

use crate::block::{self, Verdict};
use crate::journal::{Journal, JournalWriter, Kind};

/// Suffix of the sidecar that describes a kept data file.
pub const SIDECAR_SUFFIX: &str = ".iolab-verify.json";
/// Appended to the sidecar's name for the file that atomically replaces it.
const SIDECAR_TMP_SUFFIX: &str = ".new";
/// Failures described one by one; beyond this only the counts grow.
pub const MAX_DETAILS: usize = 100;
/// Bytes per read when a whole region is checked.
const SCAN_CHUNK: usize = 1 << 20;
/// How often progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// When blocks are read back during `iolab run verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifyMode {
    None,
    /// Every `verify_every`-th block right after it is written.
    Inline,
    /// The whole region after each pass.
    After,
    Both,
}

impl VerifyMode {
    pub fn parse(s: &str) -> Option<VerifyMode> {
        Some(match s {
            "none" => VerifyMode::None,
            "inline" => VerifyMode::Inline,
            "after" => VerifyMode::After,
            "both" | "inline,after" => VerifyMode::Both,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VerifyMode::None => "none",
            VerifyMode::Inline => "inline",
            VerifyMode::After => "after",
            VerifyMode::Both => "both",
        }
    }

    fn inline(self) -> bool {
        matches!(self, VerifyMode::Inline | VerifyMode::Both)
    }

    fn after(self) -> bool {
        matches!(self, VerifyMode::After | VerifyMode::Both)
    }
}

/// What `iolab run verify` does.
#[derive(Debug, Clone)]
pub struct VerifyConfig {
    /// Bytes of the region written (a multiple of `bs`).
    pub size: u64,
    pub bs: usize,
    /// Random order (each block still written exactly once per pass).
    pub random: bool,
    pub passes: u32,
    pub mode: VerifyMode,
    pub verify_every: u64,
    /// fdatasync the target after this many blocks (0: at the end of each pass only).
    pub fsync_every: u64,
    pub journal: Option<PathBuf>,
    pub direct: bool,
    pub run_id: u64,
}

/// Where the verified blocks go: a file iolab creates (or may overwrite), or a device.
#[derive(Debug)]
pub struct DataTarget {
    pub path: PathBuf,
    /// "file" or "device".
    pub kind: &'static str,
    pub size: u64,
    /// iolab created the file (and removes it unless `keep`).
    pub created: bool,
    pub keep: bool,
}

impl DataTarget {
    /// Resolves `--target`: in a directory a new uniquely named file; a path that does not
    /// exist becomes a new file; an existing regular file needs `allow_overwrite`, a block
    /// device `allow_destroy` and the engine's device checks.
    pub fn prepare(
        target: &Path,
        size: u64,
        size_given: bool,
        allow_overwrite: bool,
        allow_destroy: bool,
    ) -> Result<DataTarget, String> {
        use iolab_engine::safety;
        let path = std::path::absolute(target).unwrap_or_else(|_| target.to_path_buf());
        let meta = match std::fs::metadata(&path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("--target {}: {e}", path.display())),
        };
        let new_file = |p: PathBuf| -> Result<DataTarget, String> {
            let parent = p.parent().unwrap_or(Path::new("/"));
            if !parent.is_dir() {
                return Err(format!(
                    "--target {}: directory {} does not exist",
                    p.display(),
                    parent.display()
                ));
            }
            // The sidecar and its temporary file are replaced during the run and removed
            // with the data: refuse to start when either already exists, as iolab did not
            // make it for this file (also not a symlink to follow).
            let side = sidecar_path(&p);
            let mut tmp = side.clone().into_os_string();
            tmp.push(SIDECAR_TMP_SUFFIX);
            for q in [side, PathBuf::from(tmp)] {
                if std::fs::symlink_metadata(&q).is_ok() {
                    return Err(format!(
                        "--target {}: {} already exists; iolab writes the sidecar of a new data \
                         file there and removes it with the file: move it away or choose \
                         another --target",
                        p.display(),
                        q.display()
                    ));
                }
            }
            // Blocks are written sparse-file first: without this a --size beyond the free
            // space would fill the filesystem before failing with ENOSPC.
            if let Some(free) = iolab_sys::statvfs(parent).ok().map(|s| s.available_bytes) {
                if size > free {
                    return Err(format!(
                        "--size {size}: more than the {free} bytes free on the filesystem of \
                         {}",
                        parent.display()
                    ));
                }
            }
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
                .map_err(|e| format!("--target {}: cannot create: {e}", p.display()))?;
            Ok(DataTarget {
                path: p,
                kind: "file",
                size,
                created: true,
                keep: false,
            })
        };
        match meta {
            Some(m) if m.is_dir() => new_file(path.join(format!("{}.dat", unique_name("verify")))),
            None => new_file(path),
            Some(m) if m.file_type().is_block_device() => {
                safety::check_device_writable(&path, allow_destroy)
                    .map_err(|e| format!("--target {}: {e}", path.display()))?;
                let have = safety::device_size(&path)
                    .map_err(|e| format!("--target {}: cannot size: {e}", path.display()))?;
                let size = if size_given { size } else { have };
                if size > have {
                    return Err(format!(
                        "--size {size}: larger than the device {} ({have} bytes)",
                        path.display()
                    ));
                }
                Ok(DataTarget {
                    path,
                    kind: "device",
                    size,
                    created: false,
                    keep: true,
                })
            }
            Some(m) if m.is_file() => {
                safety::check_regular_file_overwrite(&path, allow_overwrite)
                    .map_err(|e| format!("--target {}: {e}", path.display()))?;
                Ok(DataTarget {
                    path,
                    kind: "file",
                    size,
                    created: false,
                    keep: true,
                })
            }
            Some(m) => {
                let t = m.file_type();
                let kind = if t.is_char_device() {
                    "a character device"
                } else if t.is_fifo() {
                    "a FIFO"
                } else if t.is_socket() {
                    "a socket"
                } else {
                    "a special file"
                };
                Err(format!(
                    "--target {}: {kind}, not a directory, regular file or block device",
                    path.display()
                ))
            }
        }
    }

    /// The sidecar describing the data (regular files only).
    pub fn sidecar(&self) -> Option<PathBuf> {
        (self.kind == "file").then(|| sidecar_path(&self.path))
    }
}

impl Drop for DataTarget {
    fn drop(&mut self) {
        if self.created && !self.keep {
            let _ = std::fs::remove_file(&self.path);
            if let Some(s) = self.sidecar() {
                let _ = std::fs::remove_file(s);
            }
        }
    }
}

/// `<data file>.iolab-verify.json`.
pub fn sidecar_path(data: &Path) -> PathBuf {
    let mut s = data.as_os_str().to_owned();
    s.push(SIDECAR_SUFFIX);
    PathBuf::from(s)
}

/// What a kept data file holds: blocks of `run_id`, generation `generation_done` (all
/// blocks, after that many passes) or `generation_writing` (a pass that did not finish).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sidecar {
    pub format: String,
    /// Written as 16 hex digits, as printed everywhere (a JSON number would lose bits).
    #[serde(with = "hex_id")]
    pub run_id: u64,
    pub block_size: u64,
    pub size: u64,
    pub rw: String,
    pub passes_planned: u32,
    pub generation_done: u64,
    pub generation_writing: u64,
    pub complete: bool,
    pub journal: Option<PathBuf>,
}

mod hex_id {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(id: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{id:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

impl Sidecar {
    pub fn read(path: &Path) -> Result<Sidecar, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: not a sidecar: {e}", path.display()))
    }

    /// Replaces the sidecar atomically (a new file, fsynced, renamed over the old one), so
    /// a crash leaves the old or the new one, never a torn one.
    fn write(&self, path: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).expect("sidecar serializes");
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(SIDECAR_TMP_SUFFIX);
        let tmp = PathBuf::from(tmp);
        let err = |e: io::Error| format!("{}: cannot write: {e}", path.display());
        // Never through a symlink someone put there.
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(err)?;
        f.write_all_at(text.as_bytes(), 0)
            .and_then(|_| f.sync_all())
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(err)?;
        match path.parent() {
            Some(dir) => File::open(dir).and_then(|d| d.sync_all()).map_err(err),
            None => Ok(()),
        }
    }
}

/// One block that did not verify.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Failure {
    pub offset: u64,
    pub class: &'static str,
    pub expected: String,
    pub found: String,
    /// When the check happened: "inline pass 2", "after pass 2", "verify".
    pub phase: String,
    /// Lost acknowledged writes: seconds between the ack and the journal's last record.
    pub acked_before_end_s: Option<f64>,
}

/// Counts of checked blocks by class, with the first failures described.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub checked: u64,
    pub ok: u64,
    pub classes: BTreeMap<&'static str, u64>,
    pub failure_count: u64,
    pub failures: Vec<Failure>,
}

impl Tally {
    fn ok(&mut self) {
        self.checked += 1;
        self.ok += 1;
        *self.classes.entry("ok").or_default() += 1;
    }

    fn fail(&mut self, f: Failure) {
        self.checked += 1;
        self.failure_count += 1;
        *self.classes.entry(f.class).or_default() += 1;
        if self.failures.len() < MAX_DETAILS {
            self.failures.push(f);
        }
    }

    fn merge(&mut self, other: Tally) {
        self.checked += other.checked;
        self.ok += other.ok;
        self.failure_count += other.failure_count;
        for (k, v) in other.classes {
            *self.classes.entry(k).or_default() += v;
        }
        let room = MAX_DETAILS.saturating_sub(self.failures.len());
        self.failures.extend(other.failures.into_iter().take(room));
    }

    /// Checks one block against the generation range `lo..=hi` and counts it.
    fn judge(&mut self, buf: &[u8], offset: u64, run_id: u64, lo: u64, hi: u64, phase: &str) {
        let v = judge(buf, offset, run_id, lo, hi);
        if v.is_ok() {
            self.ok();
        } else {
            self.fail(Failure {
                offset,
                class: v.class(),
                expected: expected_text(lo, hi),
                found: v.to_string(),
                phase: phase.to_string(),
                acked_before_end_s: None,
            });
        }
    }
}

/// How a generation range reads in reports.
pub fn expected_text(lo: u64, hi: u64) -> String {
    match (lo, hi) {
        // `check_file` without a known generation accepts any.
        (_, u64::MAX) => "any generation of the run".into(),
        (0, 0) => "unwritten (zeros)".into(),
        (0, 1) => "unwritten (zeros) or generation 1".into(),
        (0, h) => format!("unwritten (zeros) or generation 1..={h}"),
        (l, h) if l == h => format!("generation {l}"),
        (l, h) => format!("generation {l}..={h}"),
    }
}

/// Classifies a block that must hold a generation in `lo..=hi` (0 = never written, so
/// zeros are fine when `lo` is 0); an acceptable block is `Verdict::Ok`.
pub fn judge(buf: &[u8], offset: u64, run_id: u64, lo: u64, hi: u64) -> Verdict {
    match block::check(buf, offset, run_id, Some(hi)) {
        Verdict::Stale { found, .. } if found >= lo => Verdict::Ok { generation: found },
        Verdict::Zeroed if lo == 0 => Verdict::Ok { generation: 0 },
        Verdict::Stale { found, .. } => Verdict::Stale {
            found,
            expected: lo,
        },
        v => v,
    }
}

/// Opens `path` for reading (and writing), with O_DIRECT when asked; `direct` falls back
/// to buffered when `fallback` and the filesystem refuses O_DIRECT.
fn open(path: &Path, write: bool, direct: bool, fallback: bool) -> Result<(File, bool), String> {
    let attempt = |direct: bool| {
        let mut o = OpenOptions::new();
        o.read(true).write(write);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(path)
    };
    match attempt(direct) {
        Ok(f) => Ok((f, direct)),
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) && fallback => attempt(false)
            .map(|f| (f, false))
            .map_err(|e| format!("{}: cannot open: {e}", path.display())),
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => Err(format!(
            "{}: the filesystem refuses O_DIRECT ({e}); use --buffered",
            path.display()
        )),
        Err(e) => Err(format!("{}: cannot open: {e}", path.display())),
    }
}

/// Reads `size` bytes of `file` in large aligned chunks and hands over each block.
fn scan(
    file: &File,
    path: &Path,
    size: u64,
    bs: usize,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
    each: &mut dyn FnMut(u64, &[u8]),
) -> Result<bool, String> {
    let chunk = (SCAN_CHUNK / bs).max(1) * bs;
    let mut pool = BufferPool::new(1, chunk);
    let mut off = 0u64;
    let mut last = Instant::now();
    while off < size {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let n = (size - off).min(chunk as u64) as usize;
        let buf = &mut pool.slot_mut(0)[..n];
        if let Err(e) = file.read_exact_at(buf, off) {
            // Name the block that fails, not the start of the chunk: read it again block by
            // block up to the first one that does not read.
            let bad = buf
                .chunks_exact_mut(bs)
                .enumerate()
                .map(|(i, b)| (off + (i * bs) as u64, b))
                .find_map(|(at, b)| file.read_exact_at(b, at).err().map(|e| (at, e)));
            let (at, e) = bad.unwrap_or((off, e));
            return Err(format!(
                "{}: cannot read the block at offset {at}: {e}",
                path.display()
            ));
        }
        for (i, b) in buf.chunks_exact(bs).enumerate() {
            each(off + (i * bs) as u64, b);
        }
        off += n as u64;
        if last.elapsed() >= PROGRESS_EVERY {
            progress(off);
            last = Instant::now();
        }
    }
    progress(off);
    Ok(true)
}

/// What `run` returns: the test record (its `extra` holds the verification counts) and
/// the tally of every check.
#[derive(Debug)]
pub struct WorkloadOutput {
    pub test: TestRecord,
    pub tally: Tally,
    pub interrupted: bool,
}

/// Writes `cfg.passes` passes of stamped blocks over `target`, verifying as configured.
/// Verification failures are counted, not errors; errors are I/O that could not be done.
pub fn run(
    cfg: &VerifyConfig,
    target: &DataTarget,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<WorkloadOutput, String> {
    let bs = cfg.bs;
    let (file, _) = open(&target.path, true, cfg.direct, false)?;
    if target.created {
        file.set_len(cfg.size)
            .map_err(|e| format!("{}: cannot size: {e}", target.path.display()))?;
    }
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", target.path.display()))?;
    let blocks = cfg.size / bs as u64;
    let fsync_every = if cfg.fsync_every > 0 {
        cfg.fsync_every
    } else {
        blocks
    };
    let mut journal = match &cfg.journal {
        Some(p) => Some(
            JournalWriter::create(p, cfg.run_id, bs as u64, cfg.size, fsync_every, &meta)
                .map_err(|e| format!("--journal {}: cannot create: {e}", p.display()))?,
        ),
        None => None,
    };
    let rw = if cfg.random { Rw::RandWrite } else { Rw::Write };
    let sidecar = target.sidecar();
    let mut side = Sidecar {
        format: "iolab.verify/1".into(),
        run_id: cfg.run_id,
        block_size: bs as u64,
        size: cfg.size,
        rw: rw.as_str().into(),
        passes_planned: cfg.passes,
        generation_done: 0,
        generation_writing: 0,
        complete: false,
        journal: cfg.journal.clone(),
    };
    let devices: Vec<String> = device_of(&target.path).into_iter().collect();
    let mut pool = BufferPool::new(2, bs);
    let mut tally = Tally::default();
    let mut inline_tally = Tally::default();
    let mut passes = Vec::new();
    let mut after_seconds = Vec::new();
    let mut journal_seconds = 0.0;
    let mut interrupted = false;
    let io_err = |what: &str, off: u64, e: io::Error| {
        format!(
            "{}: cannot {what} at offset {off}: {e}",
            target.path.display()
        )
    };
    for pass in 1..=cfg.passes {
        let generation = u64::from(pass);
        side.generation_writing = generation;
        if let Some(s) = &sidecar {
            side.write(s)?;
        }
        let mut order: Vec<u64> = (0..blocks).collect();
        if cfg.random {
            fastrand::Rng::with_seed(cfg.run_id ^ generation).shuffle(&mut order);
        }
        let label = format!("write {pass}/{}", cfg.passes);
        let watch = Watch::start(&devices);
        let mut hist = LatencyHistogram::new();
        let mut sync_hist = LatencyHistogram::new();
        let journal_before = journal.as_ref().map_or(Duration::ZERO, |j| j.commit_time);
        let start = Instant::now();
        let mut series = Series::new(start);
        let mut written = 0u64;
        let mut last_progress = start;
        for batch in order.chunks(fsync_every as usize) {
            if stop.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            if let Some(j) = &mut journal {
                for &b in batch {
                    j.push(Kind::Intent, b * bs as u64, generation);
                }
                j.commit()
                    .map_err(|e| format!("--journal {}: {e}", j.path().display()))?;
            }
            for &b in batch {
                let off = b * bs as u64;
                let buf = &mut pool.slot_mut(0)[..bs];
                block::stamp(buf, off, cfg.run_id, generation);
                let t = Instant::now();
                file.write_all_at(buf, off)
                    .map_err(|e| io_err("write", off, e))?;
                let done = Instant::now();
                hist.record((done - t).as_nanos() as u64);
                series.add(done, bs as u64);
                written += 1;
                if cfg.mode.inline() && written.is_multiple_of(cfg.verify_every.max(1)) {
                    let rb = &mut pool.slot_mut(1)[..bs];
                    file.read_exact_at(rb, off)
                        .map_err(|e| io_err("read back", off, e))?;
                    let phase = format!("inline pass {pass}");
                    inline_tally.judge(rb, off, cfg.run_id, generation, generation, &phase);
                }
                if done - last_progress >= PROGRESS_EVERY {
                    progress(&label, written * bs as u64);
                    last_progress = done;
                }
            }
            let t = Instant::now();
            file.sync_data()
                .map_err(|e| format!("{}: cannot fdatasync: {e}", target.path.display()))?;
            sync_hist.record(t.elapsed().as_nanos() as u64);
            if let Some(j) = &mut journal {
                for &b in batch {
                    j.push(Kind::Ack, b * bs as u64, generation);
                }
                j.commit()
                    .map_err(|e| format!("--journal {}: {e}", j.path().display()))?;
            }
        }
        let end = Instant::now();
        series.extend_to(end);
        if interrupted {
            break;
        }
        let seconds = (end - start).as_secs_f64();
        progress(&label, written * bs as u64);
        let ios = hist.count();
        let (cpu, activity) = watch.finish(ios);
        let write = DirResult::from_histogram(written * bs as u64, seconds, hist);
        let sync = SyncStats {
            count: sync_hist.count(),
            lat_us: sync_hist.summary_us(),
        };
        let mut record = PassRecord::new(
            pass,
            seconds,
            None,
            Some(write),
            Some(sync),
            cpu,
            series.into_timeseries(),
        );
        record.context.activity = activity;
        passes.push(record);
        journal_seconds += journal
            .as_ref()
            .map_or(0.0, |j| (j.commit_time - journal_before).as_secs_f64());
        side.generation_done = generation;
        if let Some(s) = &sidecar {
            side.write(s)?;
        }
        if cfg.mode.after() {
            let t = Instant::now();
            let phase = format!("after pass {pass}");
            let label = format!("verify {pass}/{}", cfg.passes);
            let (rfile, _) = open(&target.path, false, cfg.direct, true)?;
            let mut after = Tally::default();
            let finished = scan(
                &rfile,
                &target.path,
                cfg.size,
                bs,
                stop,
                &mut |n| progress(&label, n),
                &mut |off, b| after.judge(b, off, cfg.run_id, generation, generation, &phase),
            )?;
            after_seconds.push(t.elapsed().as_secs_f64());
            tally.merge(after);
            if !finished {
                interrupted = true;
                break;
            }
        }
    }
    let inline_checked = inline_tally.checked;
    tally.merge(inline_tally);
    if let Some(j) = &mut journal {
        if !interrupted {
            j.push(Kind::End, passes.len() as u64, 0);
            j.commit()
                .map_err(|e| format!("--journal {}: {e}", j.path().display()))?;
        }
    }
    if !interrupted {
        side.complete = true;
        if let Some(s) = &sidecar {
            side.write(s)?;
        }
    }
    let mut job = JobSpec::new(rw, bs as u64, 1, 1);
    job.fsync_every = fsync_every.min(u64::from(u32::MAX)) as u32;
    job.sync_mode = SyncMode::Fdatasync;
    job.io_limit = Some(cfg.size);
    let median_after = median(&after_seconds);
    let extra = serde_json::json!({
        "workload": "verify",
        "run_id": format!("{:016x}", cfg.run_id),
        "data_file": target.path,
        "sidecar": sidecar,
        "kept": target.keep,
        "block_size": bs,
        "size": cfg.size,
        "blocks": blocks,
        "rw": rw.as_str(),
        "passes": passes.len(),
        "direct": cfg.direct,
        "verify_mode": cfg.mode.as_str(),
        "verify_every": cfg.verify_every,
        "fsync_every": fsync_every,
        "journal": cfg.journal,
        "journal_records": journal.as_ref().map(|j| j.records()),
        "journal_commits": journal.as_ref().map(|j| j.commits),
        "journal_sync_seconds": round6(journal_seconds),
        "inline_checked": inline_checked,
        "after_checked": tally.checked - inline_checked,
        "checked": tally.checked,
        "verified_ok": tally.ok,
        "failures": tally.failure_count,
        "classes": tally.classes,
        "failure_samples": tally.failures,
        "after_verify_seconds": median_after.map(round6),
        "after_verify_mb_s": median_after.map(|s| round6(cfg.size as f64 / 1e6 / s.max(1e-9))),
    });
    let name = format!("verify {} {}", rw.as_str(), format_size_short(bs as u64));
    let group = format!("VERIFY {}", cfg.mode.as_str());
    Ok(WorkloadOutput {
        test: test_record(name, group, job, passes, extra),
        tally,
        interrupted,
    })
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some(if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    })
}

/// What `iolab verify` checks a file against without a journal.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub run_id: u64,
    pub block_size: u64,
    pub size: u64,
    /// Acceptable generations; `None` accepts any intact block of the run.
    pub generations: Option<(u64, u64)>,
    /// Where this came from, for the report.
    pub source: String,
}

/// What the user said on `iolab verify`'s command line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Given {
    pub run_id: Option<u64>,
    pub bs: Option<u64>,
    pub generation: Option<u64>,
    pub size: Option<u64>,
}

/// Decides what `path` must hold: its sidecar, else the header of its first block (any
/// generation is then accepted), checked against and narrowed by what was `given`.
pub fn expectation(path: &Path, given: Given) -> Result<Expectation, String> {
    let Given {
        run_id,
        bs,
        generation,
        size: region,
    } = given;
    let size = data_size(path)?;
    let side = sidecar_path(path);
    let mut e = if side.exists() {
        let s = Sidecar::read(&side)?;
        Expectation {
            run_id: s.run_id,
            block_size: s.block_size,
            size: s.size,
            generations: Some((s.generation_done, s.generation_writing)),
            source: format!(
                "sidecar {}{}",
                side.display(),
                if s.complete {
                    ""
                } else {
                    ", whose run did not finish"
                }
            ),
        }
    } else {
        let (file, _) = open(path, false, false, true)?;
        let mut head = [0u8; block::HEADER_LEN];
        let found = file
            .read_exact_at(&mut head, 0)
            .ok()
            .and_then(|_| block::parse_header(&head));
        match (found, run_id, bs) {
            (Some(h), _, _) => Expectation {
                run_id: h.run_id,
                block_size: u64::from(h.len),
                size: size - size % u64::from(h.len),
                generations: None,
                source: "the header of the first block".into(),
            },
            (None, Some(r), Some(b)) => Expectation {
                run_id: r,
                block_size: b,
                size: size - size % b,
                generations: None,
                source: "--run-id and --bs".into(),
            },
            (None, _, _) => {
                return Err(format!(
                    "--target {}: no sidecar {} and the first block is not an iolab block; \
                     give --run-id and --bs, or --journal",
                    path.display(),
                    side.display()
                ))
            }
        }
    };
    if let Some(r) = run_id {
        if r != e.run_id {
            return Err(format!(
                "--run-id {r:016x}: {} says the data is run {:016x}",
                e.source, e.run_id
            ));
        }
    }
    if let Some(b) = bs {
        if b != e.block_size {
            return Err(format!(
                "--bs {b}: {} says blocks of {} bytes",
                e.source, e.block_size
            ));
        }
    }
    if let Some(g) = generation {
        e.generations = Some((g, g));
    }
    if let Some(r) = region {
        if r == 0 || !r.is_multiple_of(e.block_size) {
            return Err(format!(
                "--size {r}: not a positive multiple of the {}-byte blocks",
                e.block_size
            ));
        }
        e.size = r;
    }
    if e.size > size {
        return Err(format!(
            "--target {}: holds {size} bytes, fewer than the {} to check",
            path.display(),
            e.size
        ));
    }
    if e.block_size < block::SECTOR as u64 || !e.block_size.is_multiple_of(block::SECTOR as u64) {
        return Err(format!(
            "block size {} is not a multiple of 512",
            e.block_size
        ));
    }
    Ok(e)
}

/// Size of a regular file or block device.
fn data_size(path: &Path) -> Result<u64, String> {
    let m = std::fs::metadata(path).map_err(|e| format!("--target {}: {e}", path.display()))?;
    if m.file_type().is_block_device() {
        iolab_engine::safety::device_size(path)
            .map_err(|e| format!("--target {}: cannot size: {e}", path.display()))
    } else if m.is_file() {
        Ok(m.len())
    } else {
        Err(format!(
            "--target {}: not a regular file or block device",
            path.display()
        ))
    }
}

/// Why a later check could not give a verdict: bad input (what to check against does not
/// fit the target) or an I/O error while reading the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    Input(String),
    Io(String),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Input(m) | CheckError::Io(m) => f.write_str(m),
        }
    }
}

/// The result of a later check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    pub tally: Tally,
    pub bytes: u64,
    pub seconds: f64,
    /// Read with O_DIRECT (false: the filesystem refused it, the page cache may answer).
    pub direct: bool,
    /// With a journal: blocks with an intent but no ack (may be old or new).
    pub in_flight: u64,
    pub in_flight_new: u64,
    pub in_flight_old: u64,
    /// In flight and torn between the old and the new generation (not a failure).
    pub in_flight_torn: u64,
    /// Acknowledged blocks checked.
    pub acked: u64,
    /// Acknowledged writes not found (stale, zeroed or torn): durability failures.
    pub lost_acked: u64,
    pub interrupted: bool,
    /// Something the reader of the report should know (e.g. the target was identified by
    /// its content, not by the device and inode the journal recorded).
    pub note: Option<String>,
}

/// The offset of the first acknowledged block of the journal, if `path` holds there an
/// intact header of the journal's run written for that offset.
fn acked_block_of_run(path: &Path, j: &Journal) -> Option<u64> {
    let index = j.blocks.iter().position(|b| b.acked > 0)?;
    let at = index as u64 * j.block_size;
    let (file, _) = open(path, false, false, true).ok()?;
    let mut head = [0u8; block::HEADER_LEN];
    file.read_exact_at(&mut head, at).ok()?;
    block::parse_header(&head)
        .filter(|h| h.run_id == j.run_id && h.offset == at)
        .map(|_| at)
}

/// `iolab verify` without a journal: every block of the region against `e`.
pub fn check_file(
    path: &Path,
    e: &Expectation,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<CheckReport, CheckError> {
    let (file, direct) = open(path, false, true, true).map_err(CheckError::Input)?;
    let (lo, hi) = e.generations.unwrap_or((1, u64::MAX));
    let bs = e.block_size as usize;
    let mut tally = Tally::default();
    let t = Instant::now();
    let finished = scan(&file, path, e.size, bs, stop, progress, &mut |off, b| {
        tally.judge(b, off, e.run_id, lo, hi, "verify")
    })
    .map_err(CheckError::Io)?;
    Ok(CheckReport {
        tally,
        bytes: e.size,
        seconds: t.elapsed().as_secs_f64(),
        direct,
        interrupted: !finished,
        ..Default::default()
    })
}

/// `iolab verify --journal`: every block the journal names. An acknowledged block must
/// hold its acknowledged generation, or a later one that was in flight; a block in flight
/// may hold the old or the new generation (or a tear between them); anything older than
/// the ack is a lost acknowledged write.
pub fn check_with_journal(
    path: &Path,
    j: &Journal,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
) -> Result<CheckReport, CheckError> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)
        .map_err(|e| CheckError::Input(format!("--target {}: {e}", path.display())))?;
    let mut note = None;
    if (m.dev(), m.ino()) != (j.target_dev, j.target_ino) {
        // Device numbers are not stable across a reboot or a re-attached disk (loop devices
        // renumber, disks enumerate in another order, a device node gets a new inode), and
        // after a crash is when the journal is needed. The data itself says whose it is:
        // an acknowledged block carrying the journal's run id and its own offset.
        if let Some(at) = acked_block_of_run(path, j) {
            note = Some(format!(
                "the target is not the device and inode the journal recorded ({}:{} inode {}, \
                 now {}:{} inode {}), but its acknowledged block at offset {at} is of run \
                 {:016x}: checked as the same data",
                libc::major(j.target_dev),
                libc::minor(j.target_dev),
                j.target_ino,
                libc::major(m.dev()),
                libc::minor(m.dev()),
                m.ino(),
                j.run_id
            ));
        }
    }
    if (m.dev(), m.ino()) != (j.target_dev, j.target_ino) && note.is_none() {
        return Err(CheckError::Input(format!(
            "--journal {}: written for another file (device {}:{} inode {}), not --target {} \
             (device {}:{} inode {})",
            j.path.display(),
            libc::major(j.target_dev),
            libc::minor(j.target_dev),
            j.target_ino,
            path.display(),
            libc::major(m.dev()),
            libc::minor(m.dev()),
            m.ino()
        )));
    }
    let size = data_size(path).map_err(CheckError::Input)?;
    if size < j.region {
        return Err(CheckError::Input(format!(
            "--target {}: holds {size} bytes, the journal describes {}",
            path.display(),
            j.region
        )));
    }
    let (file, direct) = open(path, false, true, true).map_err(CheckError::Input)?;
    let bs = j.block_size as usize;
    let mut r = CheckReport {
        direct,
        bytes: j.region,
        note,
        ..Default::default()
    };
    let t = Instant::now();
    let finished = scan(&file, path, j.region, bs, stop, progress, &mut |off, b| {
        let h = j.blocks[(off / j.block_size) as usize];
        if h.intended == 0 {
            return;
        }
        let v = judge(b, off, j.run_id, h.acked, h.intended);
        let lost = h.acked > 0
            && match &v {
                Verdict::Stale { found, .. } => *found < h.acked,
                Verdict::Zeroed => true,
                // `Torn` names only the first change; a tear can hold more than two
                // generations (new, acked, then zeros), so every sector is looked at.
                Verdict::Torn { .. } => !h.in_flight() || torn_generations(b).any(|g| g < h.acked),
                _ => false,
            };
        if h.acked > 0 {
            r.acked += 1;
        }
        if h.in_flight() && !lost {
            match v {
                Verdict::Ok { generation } => {
                    r.in_flight += 1;
                    if generation == h.intended {
                        r.in_flight_new += 1;
                    } else {
                        r.in_flight_old += 1;
                    }
                    r.tally.ok();
                    return;
                }
                Verdict::Torn { .. } => {
                    r.in_flight += 1;
                    r.in_flight_torn += 1;
                    r.tally.ok();
                    return;
                }
                _ => {}
            }
        }
        if v.is_ok() {
            r.tally.ok();
            return;
        }
        if lost {
            r.lost_acked += 1;
        }
        r.tally.fail(Failure {
            offset: off,
            class: if lost { "lost-ack" } else { v.class() },
            expected: if h.in_flight() {
                format!(
                    "acknowledged generation {}, or {} in flight",
                    h.acked, h.intended
                )
            } else {
                format!("acknowledged generation {}", h.acked)
            },
            found: v.to_string(),
            phase: "verify".into(),
            acked_before_end_s: (h.acked > 0)
                .then(|| round6(j.last_ns.saturating_sub(h.acked_ns) as f64 / 1e9)),
        });
    })
    .map_err(CheckError::Io)?;
    r.seconds = t.elapsed().as_secs_f64();
    r.interrupted = !finished;
    Ok(r)
}

/// The generation of every sector of a block `block::check` found torn (each sector is then
/// intact on its own or all zero): the one its tag names, 0 for a zero sector.
fn torn_generations(buf: &[u8]) -> impl Iterator<Item = u64> + '_ {
    buf.chunks_exact(block::SECTOR).map(|s| {
        if s.iter().all(|&b| b == 0) {
            0
        } else {
            let at = block::SECTOR - block::TAG_LEN;
            u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
        }
    })
}

/// Verified blocks inside another workload's writes (`--verify` on `run streams`): every
/// `granule` bytes of a file is one block of generation 1 for its offset.
#[derive(Debug, Clone, Copy)]
pub struct Stamper {
    pub run_id: u64,
    pub granule: usize,
}

impl Stamper {
    /// For writes of `bs` bytes into files of `size` bytes: blocks of the largest power of
    /// two up to 4 KiB that divides both; None when that is below 512 bytes.
    pub fn new(run_id: u64, bs: u64, size: u64) -> Option<Stamper> {
        let granule = (9..=12)
            .rev()
            .map(|b| 1u64 << b)
            .find(|g| bs.is_multiple_of(*g) && size.is_multiple_of(*g))?;
        Some(Stamper {
            run_id,
            granule: granule as usize,
        })
    }

    /// Fills the buffer of a write going to `offset` (a multiple of the granule).
    pub fn fill(&self, buf: &mut [u8], offset: u64) {
        for (i, b) in buf.chunks_exact_mut(self.granule).enumerate() {
            block::stamp(b, offset + (i * self.granule) as u64, self.run_id, 1);
        }
    }

    /// Checks what was written to `path` (its length, down to a whole block): the counts,
    /// classes and first failures as JSON.
    pub fn check(&self, path: &Path) -> Result<serde_json::Value, String> {
        let len = data_size(path)?;
        let e = Expectation {
            run_id: self.run_id,
            block_size: self.granule as u64,
            size: len - len % self.granule as u64,
            generations: Some((1, 1)),
            source: "the workload".into(),
        };
        let r = check_file(path, &e, &AtomicBool::new(false), &mut |_| {})
            .map_err(|e| e.to_string())?;
        Ok(serde_json::json!({
            "run_id": format!("{:016x}", self.run_id),
            "block_size": self.granule,
            "bytes": r.bytes,
            "direct": r.direct,
            "seconds": round6(r.seconds),
            "checked": r.tally.checked,
            "failures": r.tally.failure_count,
            "classes": r.tally.classes,
            "failure_samples": r.tally.failures,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_text_reads_well_at_the_ends_of_the_range() {
        assert_eq!(expected_text(1, u64::MAX), "any generation of the run");
        assert_eq!(expected_text(0, 0), "unwritten (zeros)");
        assert_eq!(expected_text(2, 3), "generation 2..=3");
        assert_eq!(expected_text(0, 3), "unwritten (zeros) or generation 1..=3");
    }

    #[test]
    fn judge_accepts_the_range_and_zeros_only_for_unwritten() {
        let mut b = vec![0u8; 4096];
        block::stamp(&mut b, 0, 5, 2);
        assert_eq!(judge(&b, 0, 5, 2, 3), Verdict::Ok { generation: 2 });
        assert_eq!(
            judge(&b, 0, 5, 3, 3),
            Verdict::Stale {
                found: 2,
                expected: 3
            }
        );
        assert_eq!(
            judge(&b, 0, 5, 1, 1),
            Verdict::Newer {
                found: 2,
                expected: 1
            }
        );
        let z = vec![0u8; 4096];
        assert_eq!(judge(&z, 0, 5, 0, 1), Verdict::Ok { generation: 0 });
        assert_eq!(judge(&z, 0, 5, 1, 1), Verdict::Zeroed);
    }

    #[test]
    fn workload_writes_verifies_and_keeps_a_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = DataTarget::prepare(dir.path(), 1 << 20, true, false, false).unwrap();
        t.keep = true;
        let cfg = VerifyConfig {
            size: 1 << 20,
            bs: 4096,
            random: true,
            passes: 2,
            mode: VerifyMode::Both,
            verify_every: 4,
            fsync_every: 16,
            journal: None,
            direct: false,
            run_id: 0xfeed,
        };
        let stop = AtomicBool::new(false);
        let out = run(&cfg, &t, &stop, &mut |_, _| {}).unwrap();
        assert_eq!(out.tally.failure_count, 0);
        // 256 blocks: 64 inline checks and 256 after each of 2 passes.
        assert_eq!(out.test.extra["inline_checked"], 128);
        assert_eq!(out.test.extra["after_checked"], 512);
        assert_eq!(out.test.passes.len(), 2);
        assert_eq!(out.test.passes[0].write.as_ref().unwrap().ios, 256);
        let side = Sidecar::read(&t.sidecar().unwrap()).unwrap();
        assert_eq!((side.generation_done, side.complete), (2, true));
        let e = expectation(&t.path, Given::default()).unwrap();
        assert_eq!((e.run_id, e.generations), (0xfeed, Some((2, 2))));
        let r = check_file(&t.path, &e, &stop, &mut |_| {}).unwrap();
        assert_eq!((r.tally.checked, r.tally.failure_count), (256, 0));
        // Keep=false removes both files.
        t.keep = false;
        let (p, s) = (t.path.clone(), t.sidecar().unwrap());
        drop(t);
        assert!(!p.exists() && !s.exists());
    }

    #[test]
    fn stamper_blocks_fit_the_writes_and_check_back() {
        assert_eq!(Stamper::new(1, 1 << 20, 1 << 30).unwrap().granule, 4096);
        assert_eq!(Stamper::new(1, 1536, 3072).unwrap().granule, 512);
        assert!(Stamper::new(1, 1000, 4096).is_none());
        let st = Stamper::new(9, 8192, 24576).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut data = vec![0u8; 24576];
        for (i, w) in data.chunks_exact_mut(8192).enumerate() {
            st.fill(w, (i * 8192) as u64);
        }
        data[5000] ^= 1;
        std::fs::write(&p, &data).unwrap();
        let v = st.check(&p).unwrap();
        assert_eq!(
            (v["checked"].as_u64(), v["failures"].as_u64()),
            (Some(6), Some(1))
        );
        assert_eq!(v["failure_samples"][0]["offset"], 4096);
        assert_eq!(v["failure_samples"][0]["class"], "bit-corruption");
    }

    #[test]
    fn journal_rules_for_acknowledged_and_in_flight_blocks() {
        use crate::journal::{JournalWriter, Kind};
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        let bs = 4096usize;
        std::fs::write(&data, vec![0u8; 4 * bs]).unwrap();
        let meta = std::fs::metadata(&data).unwrap();
        let jp = dir.path().join("j");
        let mut j = JournalWriter::create(&jp, 7, bs as u64, 4 * bs as u64, 4, &meta).unwrap();
        // Blocks 0 and 1 acked at generation 1; block 0 then in flight at 2; block 2 in
        // flight at 1 (never acked); block 3 never written.
        for (kind, off, g) in [
            (Kind::Intent, 0, 1),
            (Kind::Intent, 1, 1),
            (Kind::Ack, 0, 1),
            (Kind::Ack, 1, 1),
            (Kind::Intent, 0, 2),
            (Kind::Intent, 2, 1),
        ] {
            j.push(kind, off * bs as u64, g);
        }
        j.commit().unwrap();
        let stamped = |off: usize, g: u64| {
            let mut b = vec![0u8; bs];
            block::stamp(&mut b, off as u64, 7, g);
            b
        };
        let write = |blocks: &[Vec<u8>]| std::fs::write(&data, blocks.concat()).unwrap();
        let check = || {
            let journal = Journal::read(&jp).unwrap();
            check_with_journal(&data, &journal, &AtomicBool::new(false), &mut |_| {}).unwrap()
        };
        // Block 0 torn between its acked and its in-flight generation, block 2 still zero.
        let mut torn = stamped(0, 2);
        torn[2048..].copy_from_slice(&stamped(0, 1)[2048..]);
        write(&[torn, stamped(bs, 1), vec![0; bs], vec![0; bs]]);
        let r = check();
        assert_eq!((r.acked, r.in_flight, r.in_flight_torn), (2, 2, 1));
        assert_eq!((r.in_flight_old, r.tally.failure_count), (1, 0));
        // In flight but older than its ack, and an acked block zeroed: both lost.
        write(&[vec![0; bs], vec![0; bs], stamped(2 * bs, 1), vec![0; bs]]);
        let r = check();
        assert_eq!((r.lost_acked, r.in_flight, r.in_flight_new), (2, 1, 1));
        let offsets: Vec<u64> = r.tally.failures.iter().map(|f| f.offset).collect();
        assert_eq!(offsets, [0, bs as u64]);
        assert!(r.tally.failures.iter().all(|f| f.class == "lost-ack"));
        // A tear from the in-flight generation to the acked one and then to zeros: the
        // acknowledged data in the zeroed tail is lost, though the first change is harmless.
        let mut torn = stamped(0, 2);
        torn[1024..].copy_from_slice(&stamped(0, 1)[1024..]);
        torn[3072..].fill(0);
        write(&[torn, stamped(bs, 1), vec![0; bs], vec![0; bs]]);
        let r = check();
        assert_eq!((r.lost_acked, r.in_flight_torn), (1, 0));
        assert_eq!(r.tally.failures[0].offset, 0);
        // A block 3 nobody intended is not looked at, whatever it holds.
        write(&[
            stamped(0, 2),
            stamped(bs, 1),
            stamped(2 * bs, 1),
            vec![9; bs],
        ]);
        let r = check();
        assert_eq!((r.tally.checked, r.tally.failure_count), (3, 0));
    }

    #[test]
    fn an_existing_file_is_not_overwritten_without_permission() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("someone-elses");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let e = DataTarget::prepare(&p, 8192, true, false, false).unwrap_err();
        assert!(e.contains("--allow-overwrite-file"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 8192]);
    }
}
