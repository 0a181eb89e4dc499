//! The dataset the scrub test corrupts: large and small files of self-describing blocks
//! (`block::stamp`), each block carrying its *dataset offset* (the file's base plus the
//! offset in the file), so a block found anywhere on a member device names its file and
//! place. Also the reads: the foreground sequential reader, and iolab's own verify pass.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iolab_measure::LatencyHistogram;

use super::{ScrubError, BLOCK};
use iolab_integrity::block;

/// Size of each large file (smaller when the dataset is small).
pub(crate) const LARGE_FILE: u64 = 8 << 20;
/// Small files are 1..=SMALL_MAX_BLOCKS blocks (4 KiB .. 64 KiB).
pub(crate) const SMALL_MAX_BLOCKS: u64 = 16;
/// Files per directory of the small class.
const SMALL_PER_DIR: usize = 256;
/// Bytes per write and per read.
const IO_SIZE: usize = 1 << 20;

/// Large files hold the bulk of the data; small ones many files per byte (and more metadata,
/// which is why they scrub slower per byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    Large,
    Small,
}

impl Class {
    pub fn name(self) -> &'static str {
        match self {
            Class::Large => "large",
            Class::Small => "small",
        }
    }
}

/// One file of the dataset.
#[derive(Debug, Clone)]
pub(crate) struct DataFile {
    pub path: PathBuf,
    pub class: Class,
    /// Dataset offset of the file's first block.
    pub base: u64,
    pub size: u64,
}

/// The files of a dataset of about `size` bytes under `dir`: `small_pct` percent in small
/// files of 4..64 KiB (sizes drawn from `rng`), the rest in large files.
pub(crate) fn plan(dir: &Path, size: u64, small_pct: u8, rng: &mut fastrand::Rng) -> Vec<DataFile> {
    let b = BLOCK as u64;
    let small_bytes = (u128::from(size) * u128::from(small_pct.min(100)) / 100) as u64 / b * b;
    let large_bytes = (size - small_bytes) / b * b;
    let large_file = LARGE_FILE.min((large_bytes / 4).max(b)) / b * b;
    let mut files = Vec::new();
    let mut base = 0u64;
    let mut left = large_bytes;
    while left >= b {
        let s = large_file.min(left);
        files.push(DataFile {
            path: dir.join("large").join(format!("L{:04}.dat", files.len())),
            class: Class::Large,
            base,
            size: s,
        });
        base += s;
        left -= s;
    }
    let mut left = small_bytes;
    let mut n = 0usize;
    while left >= b {
        let s = (rng.u64(1..=SMALL_MAX_BLOCKS) * b).min(left);
        files.push(DataFile {
            path: dir
                .join("small")
                .join(format!("d{:03}", n / SMALL_PER_DIR))
                .join(format!("S{n:05}.dat")),
            class: Class::Small,
            base,
            size: s,
        });
        base += s;
        left -= s;
        n += 1;
    }
    files
}

fn io_err<'a>(path: &'a Path, what: &'a str) -> impl FnOnce(io::Error) -> ScrubError + 'a {
    move |e| ScrubError::Failed(format!("{}: {what}: {e}", path.display()))
}

/// What writing the dataset cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteOutcome {
    pub bytes: u64,
    pub seconds: f64,
    /// Latency of every write() call, and of the fsync of each file.
    pub writes: LatencyHistogram,
    pub fsyncs: LatencyHistogram,
}

/// Creates every file (which must not exist), writes its stamped blocks and fsyncs it.
pub(crate) fn write(
    files: &[DataFile],
    run_id: u64,
    stop: &AtomicBool,
) -> Result<WriteOutcome, ScrubError> {
    let mut out = WriteOutcome::default();
    let mut buf = vec![0u8; IO_SIZE];
    let start = Instant::now();
    for f in files {
        if stop.load(Ordering::Relaxed) {
            return Err(ScrubError::Interrupted);
        }
        if let Some(parent) = f.path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent, "create directory"))?;
        }
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&f.path)
            .map_err(io_err(&f.path, "create"))?;
        let mut at = 0u64;
        while at < f.size {
            let n = (f.size - at).min(IO_SIZE as u64) as usize;
            for (i, blk) in buf[..n].chunks_exact_mut(BLOCK).enumerate() {
                block::stamp(blk, f.base + at + (i * BLOCK) as u64, run_id, 1);
            }
            let t = Instant::now();
            file.write_all(&buf[..n])
                .map_err(io_err(&f.path, "write"))?;
            out.writes.record(t.elapsed().as_nanos() as u64);
            at += n as u64;
        }
        let t = Instant::now();
        file.sync_all().map_err(io_err(&f.path, "fsync"))?;
        out.fsyncs.record(t.elapsed().as_nanos() as u64);
        out.bytes += f.size;
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// A file of random bytes for the foreground reader (never corrupted).
pub(crate) fn write_plain(path: &Path, size: u64) -> Result<(), ScrubError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(io_err(path, "create"))?;
    let mut rng = fastrand::Rng::new();
    let mut buf = vec![0u8; IO_SIZE];
    let mut left = size;
    while left > 0 {
        rng.fill(&mut buf);
        let n = left.min(IO_SIZE as u64) as usize;
        file.write_all(&buf[..n]).map_err(io_err(path, "write"))?;
        left -= n as u64;
    }
    file.sync_all().map_err(io_err(path, "fsync"))
}

fn fadvise(file: &File, advice: rustix::fs::Advice) {
    // Len 0 (None) means "to the end". Failure only costs accuracy (the caller's reads may
    // then be served from the cache).
    let _ = rustix::fs::fadvise(file, 0, None, advice);
}

/// Sequential reads of one file.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadOutcome {
    pub bytes: u64,
    pub seconds: f64,
    pub reads: LatencyHistogram,
    /// Whole passes over the file.
    pub passes: u64,
}

impl ReadOutcome {
    pub(crate) fn mb_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

/// Reads `path` sequentially in 1 MiB reads, starting over from the beginning (after
/// evicting the file from the page cache) at its end, until `done` returns true; `done` is
/// handed the time read so far on the clock `seconds` is measured with, so a reader told to
/// stop at a time never reports less. The file was written by iolab, so evicting it touches
/// no one else's data.
pub(crate) fn read_sequential(
    path: &Path,
    done: &dyn Fn(Duration) -> bool,
) -> Result<ReadOutcome, ScrubError> {
    let file = File::open(path).map_err(io_err(path, "open"))?;
    let size = file.metadata().map_err(io_err(path, "stat"))?.len();
    let mut buf = vec![0u8; IO_SIZE];
    let mut out = ReadOutcome::default();
    let start = Instant::now();
    'passes: loop {
        fadvise(&file, rustix::fs::Advice::DontNeed);
        let mut at = 0u64;
        while at < size {
            if done(start.elapsed()) {
                break 'passes;
            }
            let t = Instant::now();
            let n = file.read_at(&mut buf, at).map_err(io_err(path, "read"))?;
            out.reads.record(t.elapsed().as_nanos() as u64);
            if n == 0 {
                break;
            }
            at += n as u64;
            out.bytes += n as u64;
        }
        out.passes += 1;
        if done(start.elapsed()) {
            break;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// A block iolab's verify did not read back intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Dataset offset of the block.
    pub offset: u64,
    pub file: PathBuf,
    pub file_offset: u64,
    /// `block::Verdict::class`.
    pub class: String,
    pub detail: String,
}

/// What reading every block of the dataset back found.
#[derive(Debug, Clone, Default)]
pub struct VerifyOutcome {
    pub blocks: u64,
    pub ok: u64,
    /// Dataset offsets of blocks whose read failed with EIO.
    pub read_errors: Vec<u64>,
    /// Read errors other than EIO: (dataset offset, error).
    pub other_errors: Vec<(u64, String)>,
    pub mismatches: Vec<Mismatch>,
    pub bytes: u64,
    pub seconds: f64,
    pub(crate) reads: LatencyHistogram,
}

/// Reads every file and checks every block against its expected dataset offset. A failing
/// 1 MiB read is retried block by block (with readahead off) to pin the failing blocks.
pub(crate) fn verify(
    files: &[DataFile],
    run_id: u64,
    stop: &AtomicBool,
) -> Result<VerifyOutcome, ScrubError> {
    let mut out = VerifyOutcome::default();
    let mut buf = vec![0u8; IO_SIZE];
    let start = Instant::now();
    for f in files {
        if stop.load(Ordering::Relaxed) {
            return Err(ScrubError::Interrupted);
        }
        let file = File::open(&f.path).map_err(io_err(&f.path, "open"))?;
        let mut at = 0u64;
        while at < f.size {
            let n = (f.size - at).min(IO_SIZE as u64) as usize;
            let t = Instant::now();
            let r = file.read_exact_at(&mut buf[..n], at);
            out.reads.record(t.elapsed().as_nanos() as u64);
            match r {
                Ok(()) => {
                    for (i, blk) in buf[..n].chunks_exact(BLOCK).enumerate() {
                        check_block(&mut out, f, at + (i * BLOCK) as u64, blk, run_id);
                    }
                    out.bytes += n as u64;
                }
                Err(_) => {
                    fadvise(&file, rustix::fs::Advice::Random);
                    for i in 0..n / BLOCK {
                        let off = at + (i * BLOCK) as u64;
                        let blk = &mut buf[..BLOCK];
                        match file.read_exact_at(blk, off) {
                            Ok(()) => {
                                check_block(&mut out, f, off, blk, run_id);
                                out.bytes += BLOCK as u64;
                            }
                            Err(e) if e.raw_os_error() == Some(libc::EIO) => {
                                out.blocks += 1;
                                out.read_errors.push(f.base + off);
                            }
                            Err(e) => {
                                out.blocks += 1;
                                out.other_errors.push((f.base + off, e.to_string()));
                            }
                        }
                    }
                    fadvise(&file, rustix::fs::Advice::Normal);
                }
            }
            at += n as u64;
        }
    }
    out.seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

fn check_block(out: &mut VerifyOutcome, f: &DataFile, file_offset: u64, blk: &[u8], run_id: u64) {
    out.blocks += 1;
    let v = block::check(blk, f.base + file_offset, run_id, Some(1));
    if v.is_ok() {
        out.ok += 1;
    } else {
        out.mismatches.push(Mismatch {
            offset: f.base + file_offset,
            file: f.path.clone(),
            file_offset,
            class: v.class().to_string(),
            detail: v.to_string(),
        });
    }
}

/// Removes the files of the dataset and the directories `plan` made under `dir`, then `dir`.
pub(crate) fn remove(dir: &Path, files: &[DataFile], extra: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    for p in files.iter().map(|f| &f.path).chain(extra) {
        if let Err(e) = std::fs::remove_file(p) {
            if e.kind() != io::ErrorKind::NotFound {
                problems.push(format!("{}: {e}", p.display()));
            }
        }
    }
    let mut dirs: Vec<PathBuf> = files
        .iter()
        .filter_map(|f| f.path.parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs.push(dir.join("small"));
    dirs.push(dir.join("large"));
    dirs.push(dir.to_path_buf());
    for d in dirs {
        if let Err(e) = std::fs::remove_dir(&d) {
            if e.kind() != io::ErrorKind::NotFound {
                problems.push(format!("{}: {e}", d.display()));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_splits_classes_and_offsets_are_contiguous() {
        let mut rng = fastrand::Rng::with_seed(7);
        let files = plan(Path::new("/x"), 128 << 20, 25, &mut rng);
        let large: u64 = files
            .iter()
            .filter(|f| f.class == Class::Large)
            .map(|f| f.size)
            .sum();
        let small: u64 = files
            .iter()
            .filter(|f| f.class == Class::Small)
            .map(|f| f.size)
            .sum();
        assert_eq!(large, 96 << 20);
        assert_eq!(small, 32 << 20);
        assert_eq!(files.iter().filter(|f| f.class == Class::Large).count(), 12);
        let mut next = 0;
        for f in &files {
            assert_eq!(f.base, next);
            assert!(f.size > 0 && f.size % BLOCK as u64 == 0);
            if f.class == Class::Small {
                assert!(f.size <= SMALL_MAX_BLOCKS * BLOCK as u64);
            }
            next += f.size;
        }
        // A tiny dataset still gets both classes.
        let tiny = plan(Path::new("/x"), 1 << 20, 25, &mut rng);
        assert!(tiny.iter().any(|f| f.class == Class::Large));
        assert!(tiny.iter().any(|f| f.class == Class::Small));
        // One class only, for per-class scrub rates.
        let only_small = plan(Path::new("/x"), 4 << 20, 100, &mut rng);
        assert!(only_small.iter().all(|f| f.class == Class::Small));
        assert_eq!(only_small.iter().map(|f| f.size).sum::<u64>(), 4 << 20);
        let only_large = plan(Path::new("/x"), 4 << 20, 0, &mut rng);
        assert!(only_large.iter().all(|f| f.class == Class::Large));
    }

    #[test]
    fn verify_finds_each_damaged_block() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = fastrand::Rng::with_seed(3);
        let files = plan(dir.path(), 2 << 20, 25, &mut rng);
        let stop = AtomicBool::new(false);
        let w = write(&files, 42, &stop).unwrap();
        assert_eq!(w.bytes, files.iter().map(|f| f.size).sum::<u64>());
        let clean = verify(&files, 42, &stop).unwrap();
        assert_eq!(clean.ok, clean.blocks);
        assert_eq!(clean.blocks * BLOCK as u64, w.bytes);
        // Flip a byte in block 3 of the first file; copy block 0 of the last over block 0 of
        // the second (a misdirected block).
        let f0 = &files[0];
        let h = OpenOptions::new().write(true).open(&f0.path).unwrap();
        h.write_all_at(&[0xAB], 3 * BLOCK as u64 + 100).unwrap();
        let last = files.last().unwrap();
        let mut blk = vec![0u8; BLOCK];
        File::open(&last.path)
            .unwrap()
            .read_exact_at(&mut blk, 0)
            .unwrap();
        let h1 = OpenOptions::new().write(true).open(&files[1].path).unwrap();
        h1.write_all_at(&blk, 0).unwrap();
        let v = verify(&files, 42, &stop).unwrap();
        assert_eq!(v.mismatches.len(), 2, "{:?}", v.mismatches);
        assert_eq!(v.mismatches[0].offset, f0.base + 3 * BLOCK as u64);
        assert_eq!(v.mismatches[0].class, "bit-corruption");
        assert_eq!(v.mismatches[1].offset, files[1].base);
        assert_eq!(v.mismatches[1].class, "misdirected");
        assert!(remove(dir.path(), &files, &[]).is_empty());
        assert!(!dir.path().exists());
    }
}
