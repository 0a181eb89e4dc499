//! The later checks of verified blocks (`iolab verify`) and what they check against: the
//! sidecar next to a kept data file (or, after a crash, the journal) says what every block
//! must hold; every block of the region is read back, judged and counted in a [`Tally`].
//! Also [`Stamper`], verified blocks inside another workload's writes. The writer, `iolab
//! run verify`, is a workload (iolab-workloads' `verify`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_sys::buffers::BufferPool;
use iolab_sys::loopdev::FileId;
use serde::{Deserialize, Serialize, Serializer};

use crate::block::{self, Verdict};
use crate::journal::Journal;
use crate::tally::{Failure, Tally};
use crate::IntegrityError;

/// Suffix of the sidecar that describes a kept data file.
pub const SIDECAR_SUFFIX: &str = ".iolab-verify.json";
/// Appended to the sidecar's name for the file that atomically replaces it.
pub const SIDECAR_TMP_SUFFIX: &str = ".new";
/// Failures described one by one; beyond this only the counts grow.
pub const MAX_DETAILS: usize = 100;
/// Bytes per read when a whole region is checked.
const SCAN_CHUNK: usize = 1 << 20;
/// How often progress is reported.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// A tally of verified blocks, describing up to [`MAX_DETAILS`] failures.
pub fn block_tally() -> Tally {
    Tally::default().with_sample_limit(MAX_DETAILS)
}

/// Checks one block against the generation range `lo..=hi` and counts it in `tally`;
/// `phase` says when ("inline pass 2", "after pass 2", "verify").
pub fn judge_into(
    tally: &mut Tally,
    buf: &[u8],
    offset: u64,
    run_id: u64,
    range: (u64, u64),
    phase: &str,
) {
    let (lo, hi) = range;
    let v = judge(buf, offset, run_id, lo, hi);
    tally.record(v.is_ok(), v.class(), || Failure {
        offset,
        class: v.class().into(),
        expected: expected_text(lo, hi),
        found: v.to_string(),
        phase: phase.to_string(),
        ..Failure::default()
    });
}

/// Like [`judge_into`] for a block `scan` read, or a `read-error` failure for one it could
/// not read (the check goes on with the next block).
pub fn judge_read_into(
    tally: &mut Tally,
    read: BlockRead<'_>,
    offset: u64,
    run_id: u64,
    range: (u64, u64),
    phase: &str,
) {
    match read {
        Ok(buf) => judge_into(tally, buf, offset, run_id, range, phase),
        Err(e) => tally.fail(read_failure(
            offset,
            expected_text(range.0, range.1),
            e,
            phase,
        )),
    }
}

/// The failure of a block that could not be read.
fn read_failure(offset: u64, expected: String, e: &io::Error, phase: &str) -> Failure {
    Failure {
        offset,
        class: "read-error".into(),
        expected,
        found: format!("the block cannot be read: {e}"),
        phase: phase.to_string(),
        ..Failure::default()
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
    pub fn read(path: &Path) -> Result<Sidecar, IntegrityError> {
        // A sidecar is a few hundred bytes of JSON.
        let text = iolab_sys::input::read_input(path, 64 << 10).map_err(|source| {
            IntegrityError::Input {
                context: path.display().to_string(),
                source,
            }
        })?;
        let s: Sidecar = serde_json::from_slice(&text).map_err(|source| IntegrityError::Json {
            context: format!("{}: not a sidecar", path.display()),
            source,
        })?;
        s.check().map_err(|m| {
            IntegrityError::Invalid(format!("{}: not a usable sidecar: {m}", path.display()))
        })?;
        Ok(s)
    }

    /// What a sidecar says must make sense before anything is read by it: a block size
    /// iolab writes, and a region of whole blocks that is not empty.
    pub fn check(&self) -> Result<(), IntegrityError> {
        let bs = self.block_size;
        if bs < block::SECTOR as u64 || !bs.is_multiple_of(block::SECTOR as u64) || bs > 64 << 20 {
            return Err(IntegrityError::Invalid(format!(
                "block_size {bs}: verified blocks are a multiple of 512 bytes, 512 B .. 64 MiB"
            )));
        }
        if self.size == 0 {
            return Err(IntegrityError::Invalid(
                "size 0: the sidecar describes no data, so nothing can be checked".into(),
            ));
        }
        if !self.size.is_multiple_of(bs) {
            return Err(IntegrityError::Invalid(format!(
                "size {}: not a whole number of its {bs}-byte blocks",
                self.size
            )));
        }
        if self.generation_writing < self.generation_done {
            return Err(IntegrityError::Invalid(format!(
                "generation_writing {} is before generation_done {}",
                self.generation_writing, self.generation_done
            )));
        }
        Ok(())
    }

    /// Replaces the sidecar atomically (a new file, fsynced, renamed over the old one), so
    /// a crash leaves the old or the new one, never a torn one.
    pub fn write(&self, path: &Path) -> Result<(), IntegrityError> {
        let text = serde_json::to_string_pretty(self).expect("sidecar serializes");
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(SIDECAR_TMP_SUFFIX);
        let tmp = PathBuf::from(tmp);
        let err = |e: io::Error| IntegrityError::io(format!("{}: cannot write", path.display()), e);
        // Made and renamed while a second signal's teardown waits (it removes both names).
        let _making = iolab_sys::files::making();
        // A new file (O_EXCL|O_NOFOLLOW, mode 0600 whatever the umask): never one someone
        // put there, through a link or a hard link to their file, which would be truncated.
        let f = iolab_sys::files::create_new(&tmp).map_err(err)?;
        let made = f.metadata().map(|m| FileId::from_meta(&m)).map_err(err)?;
        let written = f
            .write_all_at(text.as_bytes(), 0)
            .and_then(|_| f.sync_all())
            .and_then(|_| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            // Ours (just made): removed while it still is.
            let _ = iolab_sys::files::remove_one_if_same(&tmp, made);
            return Err(err(e));
        }
        match path.parent() {
            Some(dir) => File::open(dir).and_then(|d| d.sync_all()).map_err(err),
            None => Ok(()),
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
pub fn open(
    path: &Path,
    write: bool,
    direct: bool,
    fallback: bool,
) -> Result<(File, bool), IntegrityError> {
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
            .map_err(|e| IntegrityError::io(format!("{}: cannot open", path.display()), e)),
        Err(e) if direct && e.raw_os_error() == Some(libc::EINVAL) => {
            Err(IntegrityError::Invalid(format!(
                "{}: the filesystem refuses O_DIRECT ({e}); use --buffered",
                path.display()
            )))
        }
        Err(e) => Err(IntegrityError::io(
            format!("{}: cannot open", path.display()),
            e,
        )),
    }
}

/// A block as [`scan`] read it, or why it could not.
pub type BlockRead<'a> = Result<&'a [u8], &'a io::Error>;

/// Reads `size` bytes of `file` in large aligned chunks and hands over each block, or the
/// error of a block that cannot be read (a chunk that fails is read again block by block,
/// so only the blocks that fail are reported, and the scan goes on); false when `stop`
/// ended it early. A read refused as invalid (EINVAL: blocks smaller than the device's
/// sectors under O_DIRECT) is an error: no block can be read that way.
pub fn scan(
    file: &File,
    path: &Path,
    size: u64,
    bs: usize,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64),
    each: &mut dyn FnMut(u64, BlockRead<'_>),
) -> Result<bool, IntegrityError> {
    let chunk = (SCAN_CHUNK / bs).max(1) * bs;
    let mut pool = BufferPool::new(1, chunk);
    let mut off = 0u64;
    let mut last = Instant::now();
    let invalid = |at: u64, e: &io::Error| {
        IntegrityError::Invalid(format!(
            "{}: reading {bs} bytes at offset {at} is refused ({e}): the {bs}-byte blocks do              not fit what the device accepts for direct I/O (a larger logical sector?)",
            path.display()
        ))
    };
    while off < size {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let n = (size - off).min(chunk as u64) as usize;
        let buf = &mut pool.slot_mut(0)[..n];
        match file.read_exact_at(buf, off) {
            Ok(()) => {
                for (i, b) in buf.chunks_exact(bs).enumerate() {
                    each(off + (i * bs) as u64, Ok(b));
                }
            }
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Err(invalid(off, &e)),
            Err(_) => {
                for (i, b) in buf.chunks_exact_mut(bs).enumerate() {
                    let at = off + (i * bs) as u64;
                    match file.read_exact_at(b, at) {
                        Ok(()) => each(at, Ok(b)),
                        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                            return Err(invalid(at, &e))
                        }
                        Err(e) => each(at, Err(&e)),
                    }
                }
            }
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
    /// Bytes the target holds (fewer than `size`: it was truncated).
    pub present: u64,
    /// The region is all the target should hold (a regular file with a sidecar, the region
    /// not narrowed by --size): bytes after it were appended.
    pub whole: bool,
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
pub fn expectation(path: &Path, given: Given) -> Result<Expectation, IntegrityError> {
    let Given {
        run_id,
        bs,
        generation,
        size: region,
    } = given;
    let size = data_size(path)?;
    let side = sidecar_path(path);
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    let from_sidecar = side.exists();
    let mut e = if from_sidecar {
        let s = Sidecar::read(&side)?;
        Expectation {
            run_id: s.run_id,
            block_size: s.block_size,
            size: s.size,
            present: size,
            whole: regular && region.is_none(),
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
                present: size,
                whole: false,
                generations: None,
                source: "the header of the first block".into(),
            },
            (None, Some(r), Some(b)) => Expectation {
                run_id: r,
                block_size: b,
                size: size - size % b,
                present: size,
                whole: false,
                generations: None,
                source: "--run-id and --bs".into(),
            },
            (None, _, _) => {
                return Err(IntegrityError::Invalid(format!(
                    "--target {}: no sidecar {} and the first block is not an iolab block; \
                     give --run-id and --bs, or --journal",
                    path.display(),
                    side.display()
                )))
            }
        }
    };
    if let Some(r) = run_id {
        if r != e.run_id {
            return Err(IntegrityError::Invalid(format!(
                "--run-id {r:016x}: {} says the data is run {:016x}",
                e.source, e.run_id
            )));
        }
    }
    if let Some(b) = bs {
        if b != e.block_size {
            return Err(IntegrityError::Invalid(format!(
                "--bs {b}: {} says blocks of {} bytes",
                e.source, e.block_size
            )));
        }
    }
    if let Some(g) = generation {
        e.generations = Some((g, g));
    }
    if let Some(r) = region {
        if r == 0 || !r.is_multiple_of(e.block_size) {
            return Err(IntegrityError::Invalid(format!(
                "--size {r}: not a positive multiple of the {}-byte blocks",
                e.block_size
            )));
        }
        if from_sidecar && r > e.size {
            return Err(IntegrityError::Invalid(format!(
                "--size {r}: {} says the data is {} bytes",
                e.source, e.size
            )));
        }
        e.size = r;
    }
    // A region the sidecar describes that the target no longer holds is a finding of the
    // check (missing blocks), not a usage error; a region asked for with --size is.
    if e.size > size && !(from_sidecar && region.is_none()) {
        return Err(IntegrityError::Invalid(format!(
            "--target {}: holds {size} bytes, fewer than the {} to check",
            path.display(),
            e.size
        )));
    }
    if e.size == 0 {
        return Err(IntegrityError::Invalid(format!(
            "--target {}: holds {size} bytes, not one whole {}-byte block: nothing to check",
            path.display(),
            e.block_size
        )));
    }
    if e.block_size < block::SECTOR as u64 || !e.block_size.is_multiple_of(block::SECTOR as u64) {
        return Err(IntegrityError::Invalid(format!(
            "block size {} is not a multiple of 512",
            e.block_size
        )));
    }
    Ok(e)
}

/// The logical sector of the device under `path` (a block device, or the device that holds
/// a regular file's filesystem): direct I/O must come in multiples of it. None when it
/// cannot be told (a filesystem without one device, such as tmpfs or btrfs on several).
pub fn logical_sector(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() {
        m.rdev()
    } else {
        m.dev()
    };
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    ["queue", "../queue"].iter().find_map(|q| {
        std::fs::read_to_string(format!("/sys/dev/block/{maj}:{min}/{q}/logical_block_size"))
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// Refuses direct I/O in `bs`-byte blocks on a device whose logical sector does not divide
/// them (the kernel would answer every read or write with EINVAL).
pub fn check_direct_block_size(path: &Path, bs: u64) -> Result<(), IntegrityError> {
    match logical_sector(path) {
        Some(sector) if sector > 0 && !bs.is_multiple_of(sector) => {
            Err(IntegrityError::Invalid(format!(
                "blocks of {bs} bytes: {} is on a device with {sector}-byte logical sectors, and \
             direct I/O comes in whole sectors; use a block size that is a multiple of \
             {sector}",
                path.display()
            )))
        }
        _ => Ok(()),
    }
}

/// Size of a regular file or block device.
fn data_size(path: &Path) -> Result<u64, IntegrityError> {
    let m = std::fs::metadata(path)
        .map_err(|e| IntegrityError::io(format!("--target {}", path.display()), e))?;
    if m.file_type().is_block_device() {
        iolab_sys::device_size(path)
            .map_err(|e| IntegrityError::io(format!("--target {}: cannot size", path.display()), e))
    } else if m.is_file() {
        Ok(m.len())
    } else {
        Err(IntegrityError::Invalid(format!(
            "--target {}: not a regular file or block device",
            path.display()
        )))
    }
}

/// Why a later check could not give a verdict: bad input (what to check against does not
/// fit the target) or an I/O error while reading the target.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Input(IntegrityError),
    #[error(transparent)]
    Io(IntegrityError),
}

/// The result of a later check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckReport {
    /// In the report's JSON as `iolab verify` has always written it: `checked`, `ok`,
    /// `classes`, `failure_count` and the described `failures`.
    #[serde(serialize_with = "report_tally")]
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
    /// Bytes after the region in a file that should end with it (a failure).
    pub appended: u64,
    /// The region checked against, in bytes.
    pub region: u64,
    /// Something the reader of the report should know (e.g. the target was identified by
    /// its content, not by the device and inode the journal recorded).
    pub note: Option<String>,
}

impl CheckReport {
    /// The lines `iolab verify` prints about a check (`journal`: it used one).
    pub fn render(&self, journal: bool) -> String {
        let r = self;
        let t = &r.tally;
        let mut out = r
            .note
            .as_ref()
            .map(|n| format!("Note:     {n}\n"))
            .unwrap_or_default();
        out.push_str(&format!(
            "Read:     {} in {:.3} s ({:.0} MB/s){}\n",
            iolab_spec::format_bytes(r.bytes),
            r.seconds,
            r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
            if r.direct {
                ", O_DIRECT"
            } else {
                ", buffered (the filesystem refused O_DIRECT)"
            }
        ));
        let classes = t.failed_classes();
        out.push_str(&format!(
            "Checked:  {} blocks: {} ok, {} failed{}\n",
            t.checked,
            t.ok,
            t.failures,
            if classes.is_empty() {
                String::new()
            } else {
                format!(" ({})", classes.join(", "))
            }
        ));
        if journal {
            out.push_str(&format!(
                "Acked:    {} acknowledged blocks checked; {} lost acknowledged write(s)\n",
                r.acked, r.lost_acked
            ));
            out.push_str(&format!(
                "In flight: {} blocks with an intent but no ack (old or new, not failures): {} \
                 new, {} old, {} torn between them\n",
                r.in_flight, r.in_flight_new, r.in_flight_old, r.in_flight_torn
            ));
        }
        if r.appended > 0 {
            out.push_str(&format!(
                "Appended: {} after the end of the data at byte {}, which the sidecar says \
                 the file ends with\n",
                iolab_spec::format_bytes(r.appended),
                r.region
            ));
        }
        if t.failures > 0 || r.appended > 0 {
            if t.failures > 0 {
                out.push_str("Failures:\n");
                out.push_str(&t.failure_lines());
            }
            out.push_str(&format!(
                "Result:   FAILED: {} block(s) do not hold what was written{}{} (exit 3)\n",
                t.failures,
                if r.lost_acked > 0 {
                    format!(", {} of them lost acknowledged writes", r.lost_acked)
                } else {
                    String::new()
                },
                if r.appended > 0 {
                    format!("; {} bytes were appended", r.appended)
                } else {
                    String::new()
                }
            ));
        } else if t.checked == 0 {
            out.push_str("Result:   nothing was checked\n");
        } else {
            out.push_str("Result:   OK: every checked block holds what was written\n");
        }
        out
    }
}

fn report_tally<S: Serializer>(t: &Tally, s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Shape<'a> {
        checked: u64,
        ok: u64,
        classes: &'a std::collections::BTreeMap<String, u64>,
        failure_count: u64,
        failures: &'a [Failure],
    }
    Shape {
        checked: t.checked,
        ok: t.ok,
        classes: &t.classes,
        failure_count: t.failures,
        failures: &t.failure_samples,
    }
    .serialize(s)
}

/// Rounded to microseconds, for reports.
fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
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
    if direct {
        check_direct_block_size(path, e.block_size).map_err(|m| {
            CheckError::Input(IntegrityError::Invalid(format!("{m} ({})", e.source)))
        })?;
    }
    let (lo, hi) = e.generations.unwrap_or((1, u64::MAX));
    let bs = e.block_size as usize;
    let mut tally = block_tally();
    let t = Instant::now();
    // Blocks the target still holds in whole are read; the rest of the region is missing.
    let held = e.present.min(e.size);
    let readable = held - held % e.block_size;
    let finished = scan(&file, path, readable, bs, stop, progress, &mut |off, b| {
        judge_read_into(&mut tally, b, off, e.run_id, (lo, hi), "verify")
    })
    .map_err(CheckError::Input)?;
    let missing = (e.size - readable) / e.block_size;
    if finished {
        tally.fail_many(missing, "missing", |i| Failure {
            offset: readable + i * e.block_size,
            class: "missing".into(),
            expected: expected_text(lo, hi),
            found: format!("not there: the target ends at byte {}", e.present),
            phase: "verify".into(),
            ..Failure::default()
        });
    }
    let appended = if e.whole {
        e.present.saturating_sub(e.size)
    } else {
        0
    };
    Ok(CheckReport {
        tally,
        bytes: readable,
        seconds: t.elapsed().as_secs_f64(),
        direct,
        interrupted: !finished,
        appended,
        region: e.size,
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
    let m = std::fs::metadata(path).map_err(|e| {
        CheckError::Input(IntegrityError::io(
            format!("--target {}", path.display()),
            e,
        ))
    })?;
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
        return Err(CheckError::Input(IntegrityError::Invalid(format!(
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
        ))));
    }
    let size = data_size(path).map_err(CheckError::Input)?;
    if size < j.region {
        return Err(CheckError::Input(IntegrityError::Invalid(format!(
            "--target {}: holds {size} bytes, the journal describes {}",
            path.display(),
            j.region
        ))));
    }
    let (file, direct) = open(path, false, true, true).map_err(CheckError::Input)?;
    let bs = j.block_size as usize;
    let mut r = CheckReport {
        direct,
        bytes: j.region,
        region: j.region,
        note,
        ..Default::default()
    };
    let t = Instant::now();
    let finished = scan(
        &file,
        path,
        j.region,
        bs,
        stop,
        progress,
        &mut |off, read| {
            let h = j.blocks[(off / j.block_size) as usize];
            if h.intended == 0 {
                return;
            }
            let b = match read {
                Ok(b) => b,
                Err(e) => {
                    let expected = format!("acknowledged generation {}", h.acked);
                    r.tally.fail(read_failure(off, expected, e, "verify"));
                    return;
                }
            };
            let v = judge(b, off, j.run_id, h.acked, h.intended);
            let lost = h.acked > 0
                && match &v {
                    Verdict::Stale { found, .. } => *found < h.acked,
                    Verdict::Zeroed => true,
                    // `Torn` names only the first change; a tear can hold more than two
                    // generations (new, acked, then zeros), so every sector is looked at.
                    Verdict::Torn { .. } => {
                        !h.in_flight() || torn_generations(b).any(|g| g < h.acked)
                    }
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
                        r.tally.pass(1);
                        return;
                    }
                    Verdict::Torn { .. } => {
                        r.in_flight += 1;
                        r.in_flight_torn += 1;
                        r.tally.pass(1);
                        return;
                    }
                    _ => {}
                }
            }
            if v.is_ok() {
                r.tally.pass(1);
                return;
            }
            if lost {
                r.lost_acked += 1;
            }
            r.tally.fail(Failure {
                offset: off,
                class: if lost { "lost-ack" } else { v.class() }.into(),
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
                ..Failure::default()
            });
        },
    )
    .map_err(CheckError::Input)?;
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
    /// classes and first failures, with the run id, block size, bytes read and time.
    pub fn check(&self, path: &Path) -> Result<Tally, IntegrityError> {
        let len = data_size(path)?;
        let e = Expectation {
            run_id: self.run_id,
            block_size: self.granule as u64,
            size: len - len % self.granule as u64,
            generations: Some((1, 1)),
            source: "the workload".into(),
            present: len,
            whole: false,
        };
        let r =
            check_file(path, &e, &AtomicBool::new(false), &mut |_| {}).map_err(|e| match e {
                CheckError::Input(e) | CheckError::Io(e) => e,
            })?;
        let mut t = r.tally.with_run_id(self.run_id);
        t.block_size = Some(self.granule as u64);
        t.bytes = Some(r.bytes);
        t.direct = Some(r.direct);
        t.seconds = Some(r.seconds);
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sidecar() -> Sidecar {
        Sidecar {
            format: "t".into(),
            run_id: 7,
            block_size: 4096,
            size: 1 << 20,
            rw: "write".into(),
            passes_planned: 1,
            generation_done: 0,
            generation_writing: 1,
            complete: false,
            journal: None,
        }
    }

    #[test]
    fn a_sidecar_is_written_new_with_a_fixed_mode_and_never_into_a_planted_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let side = dir.path().join("data.iolab-verify");
        sidecar().write(&side).unwrap();
        let mode = std::fs::metadata(&side).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(Sidecar::read(&side).is_ok());
        // A hard link to someone's file planted at the temporary name: refused, the file
        // keeps its bytes, the sidecar stays the last good one.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep me").unwrap();
        let mut tmp = side.clone().into_os_string();
        tmp.push(SIDECAR_TMP_SUFFIX);
        std::fs::hard_link(&victim, &tmp).unwrap();
        let e = sidecar().write(&side).unwrap_err().to_string();
        assert!(e.contains("cannot write"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
        assert!(Sidecar::read(&side).is_ok());
    }

    #[test]
    fn a_sidecar_that_cannot_be_read_keeps_the_io_error_as_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let e = Sidecar::read(&dir.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
        let input = std::error::Error::source(&e).expect("the input error");
        let io = input.source().expect("the I/O error");
        assert_eq!(
            io.downcast_ref::<io::Error>().map(io::Error::kind),
            Some(io::ErrorKind::NotFound)
        );
    }

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
        let v = serde_json::to_value(st.check(&p).unwrap()).unwrap();
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
        assert_eq!((r.in_flight_old, r.tally.failures), (1, 0));
        // In flight but older than its ack, and an acked block zeroed: both lost.
        write(&[vec![0; bs], vec![0; bs], stamped(2 * bs, 1), vec![0; bs]]);
        let r = check();
        assert_eq!((r.lost_acked, r.in_flight, r.in_flight_new), (2, 1, 1));
        let offsets: Vec<u64> = r.tally.failure_samples.iter().map(|f| f.offset).collect();
        assert_eq!(offsets, [0, bs as u64]);
        assert!(r
            .tally
            .failure_samples
            .iter()
            .all(|f| f.class == "lost-ack"));
        // A tear from the in-flight generation to the acked one and then to zeros: the
        // acknowledged data in the zeroed tail is lost, though the first change is harmless.
        let mut torn = stamped(0, 2);
        torn[1024..].copy_from_slice(&stamped(0, 1)[1024..]);
        torn[3072..].fill(0);
        write(&[torn, stamped(bs, 1), vec![0; bs], vec![0; bs]]);
        let r = check();
        assert_eq!((r.lost_acked, r.in_flight_torn), (1, 0));
        assert_eq!(r.tally.failure_samples[0].offset, 0);
        // A block 3 nobody intended is not looked at, whatever it holds.
        write(&[
            stamped(0, 2),
            stamped(bs, 1),
            stamped(2 * bs, 1),
            vec![9; bs],
        ]);
        let r = check();
        assert_eq!((r.tally.checked, r.tally.failures), (3, 0));
    }
}
