//! The verified-write workload (`iolab run verify`): every block written is stamped
//! (`block::stamp`) with the pass number as its generation, read back inline and/or after
//! the pass and counted in an integrity [`Tally`]; a sidecar file next to a kept data file,
//! or the journal, says later what every block must hold (checked by iolab-integrity's
//! `verified::check_file` and `check_with_journal`).

pub mod info;
pub mod later;
pub mod run;

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_engine::buffers::BufferPool;
use iolab_integrity::block;
use iolab_integrity::journal::{JournalWriter, Kind};
use iolab_integrity::verified::{
    block_tally, judge_into, judge_read_into, open, scan, sidecar_path, Sidecar, SIDECAR_TMP_SUFFIX,
};
use iolab_integrity::{Failure, IntegrityError, Tally};
use iolab_measure::{DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord};
use iolab_spec::{format_size_short, JobSpec, Rw, SyncMode};
use serde::Serialize;

use crate::common::{
    device_of, ser_round6, ser_round6_opt, test_record, unique_name, Series, Watch,
};

/// How often progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// When blocks are read back during `iolab run verify` (`--verify-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "lower")]
pub enum VerifyMode {
    None,
    /// Every `verify_every`-th block right after it is written.
    Inline,
    /// The whole region after each pass.
    After,
    #[value(alias = "inline,after")]
    Both,
}

impl VerifyMode {
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
    /// `File` or `Device`.
    pub kind: iolab_measure::TargetKind,
    pub size: u64,
    /// iolab created the file (and removes it unless `keep`).
    pub created: bool,
    pub keep: bool,
    /// The data file iolab created, held: removed only while `path` still is it.
    made: Option<iolab_sys::files::Made>,
}

/// Why `--target` could not be prepared.
#[derive(Debug)]
pub enum PrepareError {
    /// The target is refused (someone else's file, a device in use, a size that does not
    /// fit): exit 2.
    Refused(String),
    /// Creating the data file failed (a read-only or full filesystem): exit 1.
    Failed(IntegrityError),
}

impl std::fmt::Display for PrepareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrepareError::Refused(m) => f.write_str(m),
            PrepareError::Failed(e) => e.fmt(f),
        }
    }
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
    ) -> Result<DataTarget, PrepareError> {
        use iolab_engine::safety;
        let path = std::path::absolute(target).unwrap_or_else(|_| target.to_path_buf());
        let meta = match std::fs::metadata(&path) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(PrepareError::Refused(format!(
                    "--target {}: {e}",
                    path.display()
                )))
            }
        };
        let new_file = |p: PathBuf| -> Result<DataTarget, PrepareError> {
            let parent = p.parent().unwrap_or(Path::new("/"));
            if !parent.is_dir() {
                return Err(PrepareError::Refused(format!(
                    "--target {}: directory {} does not exist",
                    p.display(),
                    parent.display()
                )));
            }
            // The sidecar and its temporary file are replaced during the run and removed
            // with the data: refuse to start when either already exists, as iolab did not
            // make it for this file (also not a symlink to follow).
            let side = sidecar_path(&p);
            let mut tmp = side.clone().into_os_string();
            tmp.push(SIDECAR_TMP_SUFFIX);
            for q in [side, PathBuf::from(tmp)] {
                if std::fs::symlink_metadata(&q).is_ok() {
                    return Err(PrepareError::Refused(format!(
                        "--target {}: {} already exists; iolab writes the sidecar of a new data \
                         file there and removes it with the file: move it away or choose \
                         another --target",
                        p.display(),
                        q.display()
                    )));
                }
            }
            // The free space was checked by the caller (`iolab_runner::space`).
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&p)
                .map_err(|e| {
                    PrepareError::Failed(IntegrityError::io(
                        format!("cannot create {}", p.display()),
                        e,
                    ))
                })?;
            let made = iolab_sys::files::Made::of_file(&p, &file).ok();
            Ok(DataTarget {
                path: p,
                kind: iolab_measure::TargetKind::File,
                size,
                created: true,
                keep: false,
                made,
            })
        };
        match meta {
            Some(m) if m.is_dir() => new_file(path.join(format!("{}.dat", unique_name("verify")))),
            None => new_file(path),
            Some(m) if m.file_type().is_block_device() => {
                safety::check_device_writable(&path, allow_destroy).map_err(|e| {
                    PrepareError::Refused(format!("--target {}: {e}", path.display()))
                })?;
                let have = safety::device_size(&path).map_err(|e| {
                    PrepareError::Refused(format!("--target {}: cannot size: {e}", path.display()))
                })?;
                let size = if size_given { size } else { have };
                if size > have {
                    return Err(PrepareError::Refused(format!(
                        "--size {size}: larger than the device {} ({have} bytes)",
                        path.display()
                    )));
                }
                Ok(DataTarget {
                    path,
                    kind: iolab_measure::TargetKind::Device,
                    size,
                    created: false,
                    keep: true,
                    made: None,
                })
            }
            Some(m) if m.is_file() => {
                safety::check_regular_file_overwrite(&path, allow_overwrite).map_err(|e| {
                    PrepareError::Refused(format!("--target {}: {e}", path.display()))
                })?;
                Ok(DataTarget {
                    path,
                    kind: iolab_measure::TargetKind::File,
                    size,
                    created: false,
                    keep: true,
                    made: None,
                })
            }
            Some(m) => {
                let kind = iolab_engine::target::kind_name(m.file_type());
                Err(PrepareError::Refused(format!(
                    "--target {}: {kind}, not a directory, regular file or block device",
                    path.display()
                )))
            }
        }
    }

    /// The device and inode of the data file iolab created, when it did.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let id = self.made.as_ref()?.id();
        Some((id.dev, id.ino))
    }

    /// The sidecar describing the data (regular files only).
    pub fn sidecar(&self) -> Option<PathBuf> {
        (self.kind == iolab_measure::TargetKind::File).then(|| sidecar_path(&self.path))
    }
}

impl DataTarget {
    /// Removes the data file and its sidecar (and the sidecar's temporary file) when iolab
    /// created them and they are not kept; returns what could not be removed, and why.
    pub fn cleanup(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        if !self.created || self.keep {
            return failed;
        }
        self.created = false;
        // The data file only while its path still holds it (a file put there during the
        // run is someone else's); the sidecar, rewritten by rename during the run, by name.
        let mut paths = Vec::new();
        match self.made.take().map(|m| m.remove()) {
            Some(Ok(iolab_sys::files::Found::Replaced { moved_to })) => {
                let mut what = format!(
                    "{} is not what this run created (it was replaced during the run): left \
                     alone",
                    self.path.display()
                );
                if let Some(m) = moved_to {
                    what.push_str(&format!("; the run's own was moved to {}", m.display()));
                }
                eprintln!("iolab: warning: {what}");
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => failed.push(format!("could not remove {}: {e}", self.path.display())),
            None => paths.push(self.path.clone()),
        }
        if let Some(s) = self.sidecar() {
            let mut tmp = s.clone().into_os_string();
            tmp.push(SIDECAR_TMP_SUFFIX);
            paths.push(s);
            paths.push(PathBuf::from(tmp));
        }
        for p in paths {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => failed.push(format!("could not remove {}: {e}", p.display())),
            }
        }
        failed
    }
}

impl Drop for DataTarget {
    fn drop(&mut self) {
        for what in self.cleanup() {
            eprintln!("iolab: warning: left behind: {what}");
        }
    }
}

/// What a `run verify` test carries in `extra` (docs/verify.md): the configuration, the
/// journal's counts and the verification counts of all passes.
#[derive(Debug, Serialize)]
struct VerifyExtra {
    workload: &'static str,
    /// The run id stamped into the blocks, as 16 hex digits.
    run_id: String,
    data_file: PathBuf,
    /// Files: the sidecar next to the data (null on a device).
    sidecar: Option<PathBuf>,
    kept: bool,
    block_size: usize,
    size: u64,
    blocks: u64,
    rw: &'static str,
    /// Passes done.
    passes: usize,
    direct: bool,
    verify_mode: &'static str,
    verify_every: u64,
    fsync_every: u64,
    /// `--journal`: its path and counts (null without one).
    journal: Option<PathBuf>,
    journal_records: Option<u64>,
    journal_commits: Option<u64>,
    #[serde(serialize_with = "ser_round6")]
    journal_sync_seconds: f64,
    inline_checked: u64,
    after_checked: u64,
    checked: u64,
    verified_ok: u64,
    failures: u64,
    classes: BTreeMap<String, u64>,
    failure_samples: Vec<Failure>,
    /// The median time of one read-back after a pass (null without those).
    #[serde(serialize_with = "ser_round6_opt")]
    after_verify_seconds: Option<f64>,
    #[serde(serialize_with = "ser_round6_opt")]
    after_verify_mb_s: Option<f64>,
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
) -> Result<WorkloadOutput, IntegrityError> {
    let bs = cfg.bs;
    let (file, _) = open(&target.path, true, cfg.direct, false)?;
    if target.created {
        file.set_len(cfg.size).map_err(|e| {
            IntegrityError::io(format!("{}: cannot size", target.path.display()), e)
        })?;
    }
    let meta = file
        .metadata()
        .map_err(|e| IntegrityError::io(target.path.display().to_string(), e))?;
    let blocks = cfg.size / bs as u64;
    let fsync_every = if cfg.fsync_every > 0 {
        cfg.fsync_every
    } else {
        blocks
    };
    let mut journal = match &cfg.journal {
        Some(p) => Some(
            JournalWriter::create(p, cfg.run_id, bs as u64, cfg.size, fsync_every, &meta).map_err(
                |e| IntegrityError::io(format!("--journal {}: cannot create", p.display()), e),
            )?,
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
    let mut tally = block_tally();
    let mut inline_tally = block_tally();
    let mut passes = Vec::new();
    let mut after_seconds = Vec::new();
    let mut journal_seconds = 0.0;
    let mut interrupted = false;
    let io_err = |what: &str, off: u64, e: io::Error| {
        IntegrityError::io(
            format!("{}: cannot {what} at offset {off}", target.path.display()),
            e,
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
                j.commit().map_err(|e| {
                    IntegrityError::io(format!("--journal {}", j.path().display()), e)
                })?;
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
                    judge_into(
                        &mut inline_tally,
                        rb,
                        off,
                        cfg.run_id,
                        (generation, generation),
                        &phase,
                    );
                }
                if done - last_progress >= PROGRESS_EVERY {
                    progress(&label, written * bs as u64);
                    last_progress = done;
                }
            }
            let t = Instant::now();
            file.sync_data().map_err(|e| {
                IntegrityError::io(format!("{}: cannot fdatasync", target.path.display()), e)
            })?;
            sync_hist.record(t.elapsed().as_nanos() as u64);
            if let Some(j) = &mut journal {
                for &b in batch {
                    j.push(Kind::Ack, b * bs as u64, generation);
                }
                j.commit().map_err(|e| {
                    IntegrityError::io(format!("--journal {}", j.path().display()), e)
                })?;
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
            let mut after = block_tally();
            let finished = scan(
                &rfile,
                &target.path,
                cfg.size,
                bs,
                stop,
                &mut |n| progress(&label, n),
                &mut |off, b| {
                    judge_read_into(
                        &mut after,
                        b,
                        off,
                        cfg.run_id,
                        (generation, generation),
                        &phase,
                    )
                },
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
                .map_err(|e| IntegrityError::io(format!("--journal {}", j.path().display()), e))?;
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
    let extra = VerifyExtra {
        workload: "verify",
        run_id: format!("{:016x}", cfg.run_id),
        data_file: target.path.clone(),
        sidecar,
        kept: target.keep,
        block_size: bs,
        size: cfg.size,
        blocks,
        rw: rw.as_str(),
        passes: passes.len(),
        direct: cfg.direct,
        verify_mode: cfg.mode.as_str(),
        verify_every: cfg.verify_every,
        fsync_every,
        journal: cfg.journal.clone(),
        journal_records: journal.as_ref().map(|j| j.records()),
        journal_commits: journal.as_ref().map(|j| j.commits),
        journal_sync_seconds: journal_seconds,
        inline_checked,
        after_checked: tally.checked - inline_checked,
        checked: tally.checked,
        verified_ok: tally.ok,
        failures: tally.failures,
        classes: tally.classes.clone(),
        failure_samples: tally.failure_samples.clone(),
        after_verify_seconds: median_after,
        after_verify_mb_s: median_after.map(|s| cfg.size as f64 / 1e6 / s.max(1e-9)),
    };
    let name = format!("verify {} {}", rw.as_str(), format_size_short(bs as u64));
    let group = format!("VERIFY {}", cfg.mode.as_str());
    Ok(WorkloadOutput {
        test: test_record(
            name,
            group,
            job,
            passes,
            serde_json::to_value(&extra).unwrap_or_default(),
        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use iolab_integrity::verified::{check_file, expectation, Given};

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
        assert_eq!(out.tally.failures, 0);
        // 256 blocks: 64 inline checks and 256 after each of 2 passes.
        assert_eq!(out.test.extra["inline_checked"], 128);
        assert_eq!(out.test.extra["after_checked"], 512);
        crate::common::assert_keys(&out.test.extra, &EXTRA_KEYS);
        assert!(out.test.extra["journal"].is_null());
        assert!(out.test.extra["after_verify_seconds"].is_f64());
        assert_eq!(out.test.passes.len(), 2);
        assert_eq!(out.test.passes[0].write.as_ref().unwrap().ios, 256);
        let side = Sidecar::read(&t.sidecar().unwrap()).unwrap();
        assert_eq!((side.generation_done, side.complete), (2, true));
        let e = expectation(&t.path, Given::default()).unwrap();
        assert_eq!((e.run_id, e.generations), (0xfeed, Some((2, 2))));
        let r = check_file(&t.path, &e, &stop, &mut |_| {}).unwrap();
        assert_eq!((r.tally.checked, r.tally.failures), (256, 0));
        // Keep=false removes both files.
        t.keep = false;
        let (p, s) = (t.path.clone(), t.sidecar().unwrap());
        drop(t);
        assert!(!p.exists() && !s.exists());
    }

    /// The keys of `extra` as the JSON run document has them.
    const EXTRA_KEYS: [&str; 27] = [
        "workload",
        "run_id",
        "data_file",
        "sidecar",
        "kept",
        "block_size",
        "size",
        "blocks",
        "rw",
        "passes",
        "direct",
        "verify_mode",
        "verify_every",
        "fsync_every",
        "journal",
        "journal_records",
        "journal_commits",
        "journal_sync_seconds",
        "inline_checked",
        "after_checked",
        "checked",
        "verified_ok",
        "failures",
        "classes",
        "failure_samples",
        "after_verify_seconds",
        "after_verify_mb_s",
    ];

    #[test]
    fn extra_keeps_the_keys_and_values_of_the_json_document() {
        let extra = VerifyExtra {
            workload: "verify",
            run_id: format!("{:016x}", 0xfeedu64),
            data_file: "/dev/sdz".into(),
            sidecar: None,
            kept: true,
            block_size: 4096,
            size: 1 << 20,
            blocks: 256,
            rw: Rw::RandWrite.as_str(),
            passes: 3,
            direct: true,
            verify_mode: VerifyMode::After.as_str(),
            verify_every: 1,
            fsync_every: 16,
            journal: Some("/dev/shm/j".into()),
            journal_records: Some(1537),
            journal_commits: Some(49),
            journal_sync_seconds: 0.250_000_49,
            inline_checked: 0,
            after_checked: 768,
            checked: 768,
            verified_ok: 767,
            failures: 1,
            classes: BTreeMap::from([("stale".to_string(), 1)]),
            failure_samples: Vec::new(),
            after_verify_seconds: Some(0.1),
            after_verify_mb_s: Some((1 << 20) as f64 / 1e6 / 0.1),
        };
        let v = serde_json::to_value(&extra).unwrap();
        crate::common::assert_keys(&v, &EXTRA_KEYS);
        assert_eq!(v["run_id"], "000000000000feed");
        assert_eq!(v["data_file"], "/dev/sdz");
        assert!(v["sidecar"].is_null());
        assert_eq!(v["rw"], "randwrite");
        assert_eq!(v["journal"], "/dev/shm/j");
        assert_eq!(v["journal_records"], 1537);
        assert_eq!(v["journal_sync_seconds"], 0.25);
        assert_eq!(v["classes"]["stale"], 1);
        assert_eq!(v["after_verify_mb_s"], 10.48576);
    }

    #[test]
    fn an_existing_file_is_not_overwritten_without_permission() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("someone-elses");
        std::fs::write(&p, vec![7u8; 8192]).unwrap();
        let e = DataTarget::prepare(&p, 8192, true, false, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--allow-overwrite-file"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 8192]);
    }
}
