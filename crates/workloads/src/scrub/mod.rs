//! The scrub test: on a redundant filesystem (btrfs raid1/raid5, zfs mirror/raidz), write a
//! dataset of self-describing blocks, corrupt a known number of them on one member device
//! (or on every member holding them, `all_copies`), drop the caches without reading the
//! files, run the filesystem's scrub, and compare what it reports with what was injected.
//! Then iolab reads every block back itself. Optionally a sequential reader runs on other
//! data during the scrub, and once before it without one, to measure the scrub's cost.
//!
//! Modules: `target` (what is scrubbed: from a testbed or discovered), `dataset` (the files,
//! the foreground reader, iolab's verify), `locate` (finding blocks on members, overwriting
//! them), `tools` (the btrfs and zfs commands and their output), `report` (expectations,
//! verdict, table, test records). docs/scrub.md describes the procedure and the units.

pub mod run;

mod dataset;
mod locate;
mod report;
mod target;
mod tools;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use dataset::{Class, Mismatch, VerifyOutcome};
pub use locate::Overwrite;
pub use report::{Counts, ScrubReport};
pub use target::{build_testbed, FsKind, Layout, Redundancy, ScrubTarget};

use dataset::{DataFile, ReadOutcome, WriteOutcome};
use tools::PoolStatus;

/// The dataset's block size (also the unit of `corrupt_size`).
pub const BLOCK: usize = 4096;
/// Default dataset size.
pub const DEFAULT_DATASET_SIZE: u64 = 128 << 20;
/// Default number of corruptions.
pub const DEFAULT_CORRUPT: u32 = 32;
/// Largest corruption: stays inside one btrfs raid5 strip and one default zfs record.
pub const MAX_CORRUPT_SIZE: u64 = 64 << 10;
/// Default size of each loop device of a `--testbed`.
pub const DEFAULT_DEVICE_SIZE: &str = "512MiB";

/// How the scrub test runs.
#[derive(Debug, Clone)]
pub struct ScrubConfig {
    /// Bytes of verified blocks written.
    pub dataset_size: u64,
    /// Share of the dataset in small files (4..64 KiB), in percent; the rest is in 8 MiB
    /// files. 0 or 100 gives one class only, for per-class scrub rates. Default 25.
    pub small_files_pct: u8,
    /// Corruptions injected.
    pub corrupt: u32,
    /// Bytes per corruption: a multiple of 4 KiB, at most 64 KiB.
    pub corrupt_size: u64,
    /// Corrupt the same data on every member that holds it (data and parity for raid5), so
    /// the scrub cannot repair it.
    pub all_copies: bool,
    /// Run a sequential reader on a file of this size during the scrub, and once without a
    /// scrub, and report the slowdown.
    pub foreground: Option<u64>,
    /// Allow corrupting members iolab did not create (an existing filesystem).
    pub allow_corrupt_members: bool,
    /// Seed for the file sizes and the choice of blocks (random when None).
    pub seed: Option<u64>,
}

impl Default for ScrubConfig {
    fn default() -> Self {
        ScrubConfig {
            dataset_size: DEFAULT_DATASET_SIZE,
            small_files_pct: 25,
            corrupt: DEFAULT_CORRUPT,
            corrupt_size: BLOCK as u64,
            all_copies: false,
            foreground: None,
            allow_corrupt_members: false,
            seed: None,
        }
    }
}

/// Why the scrub test could not run (a verdict on the filesystem is not an error: see
/// [`ScrubReport::problems`]).
#[derive(Debug)]
pub enum ScrubError {
    /// The request cannot work (not root, wrong filesystem, bad sizes, refused target).
    Invalid(String),
    /// Building the testbed failed.
    Testbed(iolab_testbed::TestbedError),
    /// A step failed.
    Failed(String),
    /// The stop flag was raised.
    Interrupted,
}

impl fmt::Display for ScrubError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScrubError::Invalid(m) | ScrubError::Failed(m) => write!(f, "scrub test: {m}"),
            ScrubError::Testbed(e) => write!(f, "scrub test: {e}"),
            ScrubError::Interrupted => write!(f, "scrub test: interrupted"),
        }
    }
}

impl std::error::Error for ScrubError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ScrubError::Testbed(e) => Some(e),
            _ => None,
        }
    }
}

/// One corruption: a range of the dataset and where it was overwritten.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    /// Dataset offset of the first corrupted block.
    pub offset: u64,
    pub len: u64,
    pub file: PathBuf,
    pub file_offset: u64,
    pub class: Class,
    /// zfs: the record holding the range (index in the file) and its size in bytes.
    pub record: Option<(u64, u64)>,
    pub overwrites: Vec<Overwrite>,
}

/// What the scrub reported, in the filesystem's own terms.
#[derive(Debug, Clone, Default)]
pub struct ScrubRun {
    pub seconds: f64,
    /// Bytes the scrub read: btrfs `data_bytes_scrubbed + tree_bytes_scrubbed` (every copy);
    /// zfs an estimate, see `bytes_source`.
    pub bytes: Option<u64>,
    pub bytes_source: String,
    /// btrfs: the `-R` counters.
    pub btrfs: BTreeMap<String, u64>,
    /// btrfs: the exit status of `btrfs scrub start -B` (3: uncorrectable errors).
    pub exit_code: Option<i32>,
    /// The scrub did not run to its end (the tool's message).
    pub failure: Option<String>,
    /// zfs: `zpool status` when the scrub had finished.
    pub zfs: Option<PoolStatusFacts>,
    /// Per member: counters after minus before (btrfs device stats; zfs READ/WRITE/CKSUM and
    /// bytes repaired).
    pub devices: Vec<(PathBuf, BTreeMap<String, u64>)>,
}

/// The parts of `zpool status` the report keeps.
#[derive(Debug, Clone, Default)]
pub struct PoolStatusFacts {
    pub scan: String,
    pub scrub_errors: Option<u64>,
    pub errors: String,
    pub error_files: Vec<String>,
}

impl From<&PoolStatus> for PoolStatusFacts {
    fn from(s: &PoolStatus) -> Self {
        PoolStatusFacts {
            scan: s.scan.clone(),
            scrub_errors: s.scrub_errors,
            errors: s.errors.clone(),
            error_files: s.error_files.clone(),
        }
    }
}

/// Runs the scrub test on `target`. `progress` gets a label and a detail for each step.
pub fn run(
    target: &ScrubTarget,
    cfg: &ScrubConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, String),
) -> Result<ScrubReport, ScrubError> {
    preflight(target, cfg)?;
    let seed = cfg.seed.unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let run_id = rng.u64(1..);
    let dir = target.work_dir.join(format!(
        "iolab-scrub-{}-{:08x}",
        std::process::id(),
        rng.u32(..)
    ));
    std::fs::create_dir(&dir)
        .map_err(|e| ScrubError::Failed(format!("{}: create: {e}", dir.display())))?;
    let files = dataset::plan(&dir, cfg.dataset_size, cfg.small_files_pct, &mut rng);
    let fg_path = dir.join("foreground.dat");
    let result = run_in(
        target, cfg, stop, progress, &files, &fg_path, run_id, &mut rng,
    );
    progress("removing the dataset", dir.display().to_string());
    let leftovers = dataset::remove(&dir, &files, &[fg_path]);
    let mut report = result?;
    report.seed = seed;
    report.notes.extend(
        leftovers
            .into_iter()
            .map(|l| format!("could not remove {l}")),
    );
    Ok(report)
}

/// Checks the sizes and counts of `cfg` (before anything is built).
pub fn check_config(cfg: &ScrubConfig) -> Result<(), ScrubError> {
    let b = BLOCK as u64;
    if cfg.corrupt_size == 0
        || !cfg.corrupt_size.is_multiple_of(b)
        || cfg.corrupt_size > MAX_CORRUPT_SIZE
    {
        return Err(ScrubError::Invalid(format!(
            "--corrupt-size {}: must be a multiple of 4 KiB, at most 64 KiB",
            cfg.corrupt_size
        )));
    }
    if cfg.small_files_pct > 100 {
        return Err(ScrubError::Invalid(format!(
            "--small-files {}: a percentage, 0..100",
            cfg.small_files_pct
        )));
    }
    if cfg.corrupt == 0 {
        return Err(ScrubError::Invalid("--corrupt must be at least 1".into()));
    }
    if cfg.dataset_size < 1 << 20 {
        return Err(ScrubError::Invalid(
            "--dataset-size must be at least 1 MiB".into(),
        ));
    }
    let room = cfg.dataset_size / cfg.corrupt_size;
    if u64::from(cfg.corrupt) > room {
        return Err(ScrubError::Invalid(format!(
            "--corrupt {}: more than the {room} ranges of --corrupt-size {} the dataset holds",
            cfg.corrupt, cfg.corrupt_size
        )));
    }
    Ok(())
}

/// Checks, without touching anything, that the test may and can run on `target` with
/// `cfg`: consent for members iolab did not create, root, sizes, the tools. [`run`] checks
/// the same first.
pub fn preflight(target: &ScrubTarget, cfg: &ScrubConfig) -> Result<(), ScrubError> {
    if !target.members_created_by_iolab && !cfg.allow_corrupt_members {
        return Err(ScrubError::Invalid(format!(
            "{} is on an existing {} filesystem whose members ({}) iolab did not create. The \
             scrub test overwrites blocks of its own files directly on a member device, \
             outside the filesystem: if anything goes wrong (a crash, a second failing \
             device), data of other files can be lost. Use --testbed to test on loop devices \
             iolab builds, or give --allow-corrupt-members to accept the risk",
            target.work_dir.display(),
            target.fs_name(),
            target
                .members
                .iter()
                .map(|m| m.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if !iolab_sys::is_root() {
        return Err(ScrubError::Invalid(
            "the scrub test needs root: it writes to member devices, drops the page cache \
             and runs the filesystem's scrub"
                .into(),
        ));
    }
    check_config(cfg)?;
    if cfg.all_copies
        && matches!(target.kind, FsKind::Zfs { .. })
        && target.redundancy == Redundancy::Parity
    {
        return Err(ScrubError::Invalid(
            "--all-copies on raidz: the parity of a block cannot be located by content (it is \
             not a copy), so iolab cannot corrupt every copy; use a mirror"
                .into(),
        ));
    }
    match &target.kind {
        FsKind::Btrfs => {
            tools::find("btrfs", "btrfs-progs")?;
            tools::find("btrfs-map-logical", "btrfs-progs")?;
        }
        FsKind::Zfs { .. } => {
            tools::find("zpool", "zfs-fuse")?;
            tools::find("zfs", "zfs-fuse")?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_in(
    target: &ScrubTarget,
    cfg: &ScrubConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&str, String),
    files: &[DataFile],
    fg_path: &std::path::Path,
    run_id: u64,
    rng: &mut fastrand::Rng,
) -> Result<ScrubReport, ScrubError> {
    let check_stop = || {
        if stop.load(Ordering::Relaxed) {
            Err(ScrubError::Interrupted)
        } else {
            Ok(())
        }
    };
    progress(
        "writing the dataset",
        format!(
            "{} files, {}",
            files.len(),
            iolab_spec::format_bytes(cfg.dataset_size)
        ),
    );
    let written: WriteOutcome = dataset::write(files, run_id, stop)?;
    if let Some(size) = cfg.foreground {
        progress(
            "writing the foreground file",
            iolab_spec::format_bytes(size),
        );
        dataset::write_plain(fg_path, size)?;
    }
    check_stop()?;
    progress("committing", target.mount.display().to_string());
    let mut notes = Vec::new();
    commit(target, &mut notes)?;
    tools::drop_caches()?;
    progress(
        "locating and corrupting",
        format!(
            "{} x {} on {}",
            cfg.corrupt,
            iolab_spec::format_bytes(cfg.corrupt_size),
            target.members[0].display()
        ),
    );
    let record_size = match &target.kind {
        FsKind::Zfs { dataset, .. } => {
            let rs = tools::zfs_property(dataset, "recordsize")?;
            Some(tools::parse_zfs_size(&rs).ok_or_else(|| {
                ScrubError::Failed(format!("{dataset}: recordsize '{rs}' not understood"))
            })?)
        }
        FsKind::Btrfs => None,
    };
    let injections = inject(
        target,
        cfg,
        files,
        run_id,
        record_size,
        rng,
        stop,
        &mut notes,
    )?;
    if (injections.len() as u32) < cfg.corrupt {
        return Err(ScrubError::Failed(format!(
            "found only {} of {} places to corrupt on {} (a larger --dataset-size helps)",
            injections.len(),
            cfg.corrupt,
            target.members[0].display()
        )));
    }
    // The files must not be read before the scrub: a read of a bad copy repairs it (btrfs,
    // zfs), and the scrub would then find nothing. Only the cache is dropped.
    tools::drop_caches()?;
    check_stop()?;
    progress("scrubbing", target.mount.display().to_string());
    let before = device_counters(target)?;
    let scrub_done = AtomicBool::new(false);
    let (scrub, during) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let r = scrub(target, stop);
            scrub_done.store(true, Ordering::SeqCst);
            r
        });
        let during = cfg.foreground.map(|_| {
            dataset::read_sequential(fg_path, &|_| {
                scrub_done.load(Ordering::SeqCst) || stop.load(Ordering::Relaxed)
            })
        });
        (h.join(), during)
    });
    let mut scrub = scrub.map_err(|_| ScrubError::Failed("the scrub thread panicked".into()))??;
    let during: Option<ReadOutcome> = during.transpose()?;
    let after = device_counters(target)?;
    scrub.devices = delta(&before, &after);
    if let FsKind::Zfs { .. } = &target.kind {
        scrub.bytes = zfs_bytes_scrubbed(target, &mut scrub.bytes_source);
    }
    check_stop()?;
    // What the scrub wrote back: the overwritten copies, read raw from the members.
    let restored = locate::restored(&injections, run_id)?;
    // The same reader without a scrub, for as long as it ran during the scrub, from a cold
    // cache as then. It reads only the foreground file, never the dataset.
    let baseline = match &during {
        Some(d) => {
            progress("foreground read (no scrub)", fg_path.display().to_string());
            tools::drop_caches()?;
            let limit = Duration::from_secs_f64(d.seconds);
            Some(dataset::read_sequential(fg_path, &|read| {
                read >= limit || stop.load(Ordering::Relaxed)
            })?)
        }
        None => None,
    };
    // And the scrub without the reader: a second scrub of the same (now repaired) data, so
    // the report shows what the reader cost the scrub as well.
    let scrub_alone = match &during {
        Some(_) => {
            progress("scrubbing again, alone", target.mount.display().to_string());
            tools::drop_caches()?;
            let mut again = self::scrub(target, stop)?;
            if let FsKind::Zfs { .. } = &target.kind {
                again.bytes = zfs_bytes_scrubbed(target, &mut again.bytes_source);
            }
            Some(again)
        }
        None => None,
    };
    check_stop()?;
    progress("verifying", format!("{} files", files.len()));
    tools::drop_caches()?;
    let verify = dataset::verify(files, run_id, stop)?;
    Ok(report::build(report::Inputs {
        target: target.clone(),
        cfg: cfg.clone(),
        files,
        written,
        injections,
        restored,
        scrub,
        scrub_alone,
        baseline,
        during,
        verify,
        notes,
    }))
}

/// Makes everything written so far part of the on-disk tree before the members are read
/// raw: a btrfs transaction commit; for zfs a transaction-group sync, forced by creating and
/// destroying a snapshot (fsync alone leaves the data in the intent log).
fn commit(target: &ScrubTarget, notes: &mut Vec<String>) -> Result<(), ScrubError> {
    match &target.kind {
        FsKind::Btrfs => {
            let m = target.mount.to_string_lossy();
            tools::run(&["btrfs", "filesystem", "sync", &m])?;
        }
        FsKind::Zfs { dataset, .. } => {
            let snap = format!("{dataset}@iolab-scrub-{}", std::process::id());
            tools::run(&["zfs", "snapshot", &snap])?;
            if let Err(e) = tools::run(&["zfs", "destroy", &snap]) {
                notes.push(format!("could not destroy snapshot {snap}: {e}"));
            }
        }
    }
    Ok(())
}

/// Chooses and overwrites `cfg.corrupt` ranges.
#[allow(clippy::too_many_arguments)]
fn inject(
    target: &ScrubTarget,
    cfg: &ScrubConfig,
    files: &[DataFile],
    run_id: u64,
    record_size: Option<u64>,
    rng: &mut fastrand::Rng,
    stop: &AtomicBool,
    notes: &mut Vec<String>,
) -> Result<Vec<Injection>, ScrubError> {
    let len = cfg.corrupt_size;
    // One corruption per 128 KiB region (btrfs) or per zfs record, so zfs counts one
    // checksum error per corruption.
    let unit = record_size.unwrap_or(128 << 10).max(len);
    let mut out = Vec::new();
    let victim = &target.members[0];
    let dataset_end = files.last().map_or(0, |f| f.base + f.size);
    let zfs_index = match &target.kind {
        FsKind::Btrfs => None,
        FsKind::Zfs { .. } => {
            let members: Vec<&PathBuf> = if cfg.all_copies {
                target.members.iter().collect()
            } else {
                vec![victim]
            };
            let mut idx = Vec::new();
            for m in members {
                idx.push((
                    m.clone(),
                    locate::scan_member(m, run_id, dataset_end, stop)?,
                ));
            }
            Some(idx)
        }
    };
    let mut extents_cache: BTreeMap<usize, Vec<locate::Extent>> = BTreeMap::new();
    let mut map_failures = Vec::new();
    for (fi, at) in locate::candidates(files, len, unit, rng) {
        if out.len() as u32 >= cfg.corrupt {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            return Err(ScrubError::Interrupted);
        }
        let f = &files[fi];
        let offset = f.base + at;
        let places: Vec<(PathBuf, u64, bool)> = match &zfs_index {
            Some(idx) => {
                let mut p = Vec::new();
                for (m, ix) in idx {
                    match locate::zfs_location(ix, offset, len) {
                        Some(pos) => p.push((m.clone(), pos, true)),
                        None => break,
                    }
                }
                if p.len() != idx.len() {
                    continue;
                }
                p
            }
            None => {
                let extents = match extents_cache.entry(fi) {
                    std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::btree_map::Entry::Vacant(e) => {
                        e.insert(locate::fiemap(&f.path)?)
                    }
                };
                let Some(logical) = locate::logical_of(extents, at, len) else {
                    continue;
                };
                let copies = match locate::btrfs_copies(logical, len, &target.members) {
                    Ok(Some(c)) => c,
                    Ok(None) => continue,
                    Err(e) => {
                        map_failures.push(e);
                        continue;
                    }
                };
                match btrfs_places(target, cfg, &copies) {
                    Some(p) => p,
                    None => continue,
                }
            }
        };
        let mut overwrites = Vec::new();
        for (member, pos, is_data) in places {
            let expect = is_data.then_some((offset, run_id));
            overwrites.push(locate::overwrite(&member, pos, len, expect, rng)?);
        }
        let record = record_size.map(|rs| {
            let rec = if f.size <= rs { f.size } else { rs };
            (at / rs, rec)
        });
        out.push(Injection {
            offset,
            len,
            file: f.path.clone(),
            file_offset: at,
            class: f.class,
            record,
            overwrites,
        });
    }
    if let Some(first) = map_failures.first() {
        notes.push(format!(
            "btrfs-map-logical failed for {} candidate range(s), which were skipped; first: {first}",
            map_failures.len()
        ));
    }
    Ok(out)
}

/// The btrfs copies to overwrite: the victim's copy (raid1), or the data strip when it is on
/// the victim (raid5); with `all_copies` every mirror, or data and parity. None when the
/// range has no data copy on the victim, or a copy is on a device that is not a member.
fn btrfs_places(
    target: &ScrubTarget,
    cfg: &ScrubConfig,
    copies: &[tools::MirrorLocation],
) -> Option<Vec<(PathBuf, u64, bool)>> {
    let member_of = |dev: &std::path::Path| {
        target
            .members
            .iter()
            .find(|m| tools::same_node(m, dev))
            .cloned()
    };
    let victim = &target.members[0];
    let mut out = Vec::new();
    for c in copies {
        let member = member_of(&c.device)?;
        // raid5: mirror 1 is the data strip, mirror 2 the parity.
        let is_data = target.redundancy == Redundancy::Mirror || c.mirror == 1;
        let on_victim = tools::same_node(&member, victim);
        if cfg.all_copies || (on_victim && is_data) {
            out.push((member, c.physical, is_data));
        }
    }
    let data_on_victim = out
        .iter()
        .any(|(m, _, d)| *d && tools::same_node(m, victim));
    (data_on_victim).then_some(out)
}

/// Runs the scrub to its end: `btrfs scrub start -B -R`, or `zpool scrub` and polling
/// `zpool status` every 100 ms.
fn scrub(target: &ScrubTarget, stop: &AtomicBool) -> Result<ScrubRun, ScrubError> {
    let mut run = ScrubRun::default();
    let start = Instant::now();
    match &target.kind {
        FsKind::Btrfs => {
            let m = target.mount.to_string_lossy();
            let out = btrfs_scrub_until_done(&m, stop)?;
            if stop.load(Ordering::Relaxed) {
                return Err(ScrubError::Interrupted);
            }
            run.seconds = start.elapsed().as_secs_f64();
            run.exit_code = out.status.code();
            let text = String::from_utf8_lossy(&out.stdout);
            run.btrfs = tools::parse_btrfs_scrub_raw(&text);
            // Exit 3 means "uncorrectable errors", a result. Any other failure (a device's
            // scrub aborting with EIO) is a result of the test too: it is reported, and the
            // verify still runs.
            if !matches!(run.exit_code, Some(0) | Some(3)) {
                run.failure = Some(format!(
                    "`btrfs scrub start -B -R {m}` failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                        .trim()
                        .replace('\n', "; ")
                ));
            }
            run.bytes = Some(
                run.btrfs.get("data_bytes_scrubbed").copied().unwrap_or(0)
                    + run.btrfs.get("tree_bytes_scrubbed").copied().unwrap_or(0),
            );
            run.bytes_source = "btrfs scrub -R: data_bytes_scrubbed + tree_bytes_scrubbed".into();
        }
        FsKind::Zfs { pool, .. } => {
            tools::run(&["zpool", "scrub", pool])?;
            let status = loop {
                let st = tools::parse_zpool_status(&tools::run(&["zpool", "status", "-v", pool])?);
                if st.completed {
                    break st;
                }
                if stop.load(Ordering::Relaxed) {
                    let _ = tools::run(&["zpool", "scrub", "-s", pool]);
                    return Err(ScrubError::Interrupted);
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            run.seconds = start.elapsed().as_secs_f64();
            run.zfs = Some(PoolStatusFacts::from(&status));
        }
    }
    Ok(run)
}

/// `btrfs scrub start -B -R MNT`, cancelled (`btrfs scrub cancel`) when `stop` is raised:
/// on a large existing filesystem a scrub can take hours, and a SIGTERM sent to iolab alone
/// does not reach the tool.
fn btrfs_scrub_until_done(
    mnt: &str,
    stop: &AtomicBool,
) -> Result<std::process::Output, ScrubError> {
    use std::process::{Command, Stdio};
    let child = Command::new("btrfs")
        .args(["scrub", "start", "-B", "-R", mnt])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ScrubError::Failed(format!("cannot run `btrfs scrub start`: {e}")))?;
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let mut cancelled = false;
    while !waiter.is_finished() {
        if !cancelled && stop.load(Ordering::Relaxed) {
            let _ = tools::output(&["btrfs", "scrub", "cancel", mnt]);
            cancelled = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    waiter
        .join()
        .map_err(|_| ScrubError::Failed("waiting for `btrfs scrub start` panicked".into()))?
        .map_err(|e| ScrubError::Failed(format!("`btrfs scrub start`: {e}")))
}

/// zfs-fuse prints no byte count for a scrub: it reads every allocated block of every copy,
/// so the estimate is the pool's ALLOC (which for raidz includes parity) times the mirror
/// width.
fn zfs_bytes_scrubbed(target: &ScrubTarget, source: &mut String) -> Option<u64> {
    let FsKind::Zfs { pool, .. } = &target.kind else {
        return None;
    };
    let alloc = tools::parse_zpool_alloc(&tools::run(&["zpool", "list", pool]).ok()?)?;
    let copies = match target.redundancy {
        Redundancy::Mirror => target.members.len() as u64,
        Redundancy::Parity => 1,
    };
    *source = format!("zpool list ALLOC x {copies} (estimate)");
    Some(alloc * copies)
}

type Counters = Vec<(PathBuf, BTreeMap<String, u64>)>;

/// Per-member error counters: `btrfs device stats`, or the zpool status leaf columns.
fn device_counters(target: &ScrubTarget) -> Result<Counters, ScrubError> {
    let mut out = Vec::new();
    match &target.kind {
        FsKind::Btrfs => {
            let m = target.mount.to_string_lossy();
            let stats =
                tools::parse_btrfs_device_stats(&tools::run(&["btrfs", "device", "stats", &m])?);
            for member in &target.members {
                let c = stats
                    .iter()
                    .find(|(dev, _)| tools::same_node(std::path::Path::new(dev), member))
                    .map(|(_, c)| c.clone())
                    .unwrap_or_default();
                out.push((member.clone(), c));
            }
        }
        FsKind::Zfs { pool, .. } => {
            let st = tools::parse_zpool_status(&tools::run(&["zpool", "status", pool])?);
            for member in &target.members {
                let row = st.leaves().into_iter().find(|v| {
                    tools::same_node(std::path::Path::new(&v.name), member)
                        || std::path::Path::new("/dev").join(&v.name) == *member
                });
                let mut c = BTreeMap::new();
                if let Some(r) = row {
                    c.insert("read".to_string(), r.read);
                    c.insert("write".to_string(), r.write);
                    c.insert("cksum".to_string(), r.cksum);
                    c.insert("repaired_bytes".to_string(), r.repaired.unwrap_or(0));
                }
                out.push((member.clone(), c));
            }
        }
    }
    Ok(out)
}

/// After minus before, per member and counter. zfs's "repaired" is per scrub, not
/// cumulative, so it is taken as it is after.
fn delta(before: &Counters, after: &Counters) -> Counters {
    after
        .iter()
        .map(|(m, a)| {
            let b = before.iter().find(|(bm, _)| bm == m).map(|(_, c)| c);
            let d = a
                .iter()
                .map(|(k, v)| {
                    let base = if k == "repaired_bytes" {
                        0
                    } else {
                        b.and_then(|c| c.get(k)).copied().unwrap_or(0)
                    };
                    (k.clone(), v.saturating_sub(base))
                })
                .collect();
            (m.clone(), d)
        })
        .collect()
}
