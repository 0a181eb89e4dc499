//! Test targets: a directory (iolab creates, fills and later removes its own test file), a
//! regular file, or a block device. Everything iolab creates is removed when the
//! [`Target`] is dropped, which also happens after Ctrl-C and SIGTERM (the stop flag makes
//! every loop return).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use iolab_measure::{TargetInfo, TargetKind};
use iolab_spec::{format_bytes, DataPattern};

use crate::buffers::{fill_random, stamp, BufferPool};
use crate::safety;

/// How the user wants the target treated.
#[derive(Debug, Clone)]
pub struct TargetRequest {
    pub path: PathBuf,
    /// `--size`, if given.
    pub size: Option<u64>,
    /// Size used when `--size` is absent and the target has no size of its own.
    pub default_size: u64,
    /// Some test writes.
    pub writes: bool,
    pub direct: bool,
    pub data: DataPattern,
    /// fio's `verify_pattern` of a job that checks its reads: a file iolab creates is laid
    /// out with it, in blocks of the given size (a divisor of [`LAYOUT_CHUNK`], else the
    /// target is refused as unsupported; each block starts the
    /// pattern afresh, its `%o` the block's own offset), so a
    /// reader that checks every byte finds what this run wrote wherever no writing job
    /// reached (a writer cut short by its runtime), not the random layout.
    pub layout_pattern: Option<(iolab_spec::Pattern, u64)>,
    pub allow_destroy_device: bool,
    pub allow_overwrite_file: bool,
}

/// Why a target could not be prepared.
#[derive(Debug)]
pub enum TargetError {
    NotFound(PathBuf),
    Unsupported(PathBuf, String),
    Safety(safety::SafetyError),
    TooSmall {
        path: PathBuf,
        have: u64,
        want: u64,
    },
    Io {
        path: PathBuf,
        action: &'static str,
        err: io::Error,
    },
    DirectUnsupported {
        path: PathBuf,
        err: io::Error,
    },
    Interrupted,
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::NotFound(p) => write!(f, "target {} does not exist", p.display()),
            TargetError::Unsupported(p, what) => write!(f, "target {}: {what}", p.display()),
            TargetError::Safety(e) => write!(f, "{e}"),
            TargetError::TooSmall { path, have, want } => write!(
                f,
                "target {} holds {} but --size asks for {}; give a smaller --size",
                path.display(),
                format_bytes(*have),
                format_bytes(*want)
            ),
            TargetError::Io { path, action, err } => {
                write!(f, "cannot {action} {}: {err}", path.display())
            }
            TargetError::DirectUnsupported { path, err } => write!(
                f,
                "{}: direct I/O (O_DIRECT) was refused ({err}); this filesystem may not \
                 support it, or the block size/offset is not aligned to the device's \
                 logical block size; use --buffered to go through the page cache",
                path.display()
            ),
            TargetError::Interrupted => write!(f, "interrupted while preparing the test file"),
        }
    }
}

impl std::error::Error for TargetError {}

/// A prepared target. Dropping it removes the test file iolab created (if any).
#[derive(Debug)]
pub struct Target {
    pub info: TargetInfo,
    /// The file or device the I/O goes to.
    pub io_path: PathBuf,
    /// True when iolab created `io_path` and must remove it.
    created: bool,
    /// The file iolab created, held open: `io_path` is removed only while it is still this
    /// file (device and inode), and if it was moved, where it went can be said.
    own: Option<iolab_sys::files::Made>,
    /// Logical block size of the device under the target (512 if unknown).
    pub logical_block: u64,
    /// Where the region (`info.size` bytes) starts in `io_path`: 0 but for one process's
    /// region of a file several share (an MPI run's `--shared-file`).
    pub region_offset: u64,
}

impl Target {
    /// A target whose I/O goes to `io_path`; `created` says whether iolab made (and must
    /// remove) that file.
    fn new(
        path: &Path,
        kind: TargetKind,
        io_path: PathBuf,
        fs_type: String,
        size: u64,
        created: bool,
    ) -> Self {
        let is_device = kind == TargetKind::Device;
        Target {
            info: TargetInfo {
                path: path.to_string_lossy().into_owned(),
                kind,
                io_path: io_path.to_string_lossy().into_owned(),
                fs_type,
                size,
            },
            logical_block: logical_block_size(&io_path, is_device),
            io_path,
            created,
            own: None,
            region_offset: 0,
        }
    }

    /// The device and inode of the file iolab created, when it did.
    pub fn identity(&self) -> Option<(u64, u64)> {
        let id = self.own.as_ref()?.id();
        Some((id.dev, id.ino))
    }

    /// This target as the region `[offset, offset + len)` of its file, a file in directory
    /// `dir` that several processes share, each its own region.
    pub fn into_region(mut self, dir: &Path, offset: u64, len: u64) -> Target {
        self.info.kind = TargetKind::Dir;
        self.info.path = dir.to_string_lossy().into_owned();
        self.info.size = len;
        self.region_offset = offset;
        self
    }

    /// Region `[offset, offset + len)` of `io_path`, a file in `dir` another process made
    /// (and removes): refused when the file is not there or too short.
    pub fn shared_region(
        dir: &Path,
        io_path: PathBuf,
        offset: u64,
        len: u64,
    ) -> Result<Target, TargetError> {
        let meta = std::fs::metadata(&io_path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => TargetError::NotFound(io_path.clone()),
            _ => io_err(&io_path, "inspect")(e),
        })?;
        if !meta.is_file() {
            return Err(TargetError::Unsupported(
                io_path,
                not_a_target(meta.file_type()),
            ));
        }
        let want = offset.saturating_add(len);
        if meta.len() < want {
            return Err(TargetError::TooSmall {
                path: io_path,
                have: meta.len(),
                want,
            });
        }
        let fs_type = fs_type_of(dir);
        let t = Target::new(dir, TargetKind::File, io_path, fs_type, want, false);
        Ok(t.into_region(dir, offset, len))
    }

    pub fn created(&self) -> bool {
        self.created
    }

    /// Removes the test file now (also done on drop). Returns what was removed.
    pub fn cleanup(&mut self) -> Option<PathBuf> {
        match self.remove() {
            Removal::Removed(p) => Some(p),
            _ => None,
        }
    }

    /// Removes the test file iolab created, only while `io_path` is still that file (the
    /// same device and inode): a file put in its place during the run is left alone.
    pub fn remove(&mut self) -> Removal {
        use iolab_sys::files::Found;
        if !std::mem::take(&mut self.created) {
            return Removal::Nothing;
        }
        let Some(own) = self.own.take() else {
            return Removal::Nothing;
        };
        match own.remove() {
            Ok(Found::Same) => Removal::Removed(self.io_path.clone()),
            Ok(Found::Replaced { moved_to }) => Removal::NotOurs {
                path: self.io_path.clone(),
                moved_to,
            },
            Ok(Found::Gone) | Err(_) => Removal::Nothing,
        }
    }

    /// `--verify`: reads the test region back (O_DIRECT when `direct`) once no write is
    /// running and checks every block `written` says was written; the time includes
    /// opening the target.
    pub fn read_back(
        &self,
        written: &iolab_integrity::written::Written,
        direct: bool,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<iolab_integrity::Tally, TargetError> {
        let t0 = std::time::Instant::now();
        let file = self.open(false, direct)?;
        let mut tally = written
            .check_file(&file, stop)
            .map_err(|err| TargetError::Io {
                path: self.io_path.clone(),
                action: "read back for --verify",
                err,
            })?;
        tally.seconds = Some(t0.elapsed().as_secs_f64());
        Ok(tally)
    }

    /// Opens the target for one job.
    ///
    /// With O_NOATIME where the kernel allows it (the caller owns the file, or is root): a
    /// benchmark leaves the target's access time alone, and a buffered read skips the
    /// atime check and update (about 2% of a page-cached 4K read's CPU); where it is
    /// refused (EPERM), the plain open.
    pub fn open(&self, write: bool, direct: bool) -> Result<File, TargetError> {
        let open = |noatime: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(write);
            let direct = if direct { libc::O_DIRECT } else { 0 };
            let noatime = if noatime { libc::O_NOATIME } else { 0 };
            o.custom_flags(direct | noatime);
            o.open(&self.io_path)
        };
        let file = match open(true) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(false),
            r => r,
        };
        file.map_err(|err| {
            if direct && err.raw_os_error() == Some(libc::EINVAL) {
                TargetError::DirectUnsupported {
                    path: self.io_path.clone(),
                    err,
                }
            } else {
                TargetError::Io {
                    path: self.io_path.clone(),
                    action: "open",
                    err,
                }
            }
        })
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.cleanup();
    }
}

fn io_err<'a>(path: &'a Path, action: &'static str) -> impl FnOnce(io::Error) -> TargetError + 'a {
    move |err| TargetError::Io {
        path: path.to_path_buf(),
        action,
        err,
    }
}

/// Logical block size of the block device holding `path` (or of `path` itself).
fn logical_block_size(path: &Path, is_device: bool) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return 512;
    };
    let rdev = if is_device { meta.rdev() } else { meta.dev() };
    let (maj, min) = (libc::major(rdev), libc::minor(rdev));
    let p = format!("/sys/dev/block/{maj}:{min}/queue/logical_block_size");
    let p2 = format!("/sys/dev/block/{maj}:{min}/../queue/logical_block_size");
    std::fs::read_to_string(&p)
        .or_else(|_| std::fs::read_to_string(&p2))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(512)
}

/// The size of the writes that lay out a test file iolab creates: a layout pattern's block
/// must divide it ([`layout_block_fits`]), so that every block starts the pattern afresh.
pub const LAYOUT_CHUNK: u64 = 1 << 20;

/// Whether a test file can be laid out with a pattern in blocks of `block` bytes: a
/// non-zero size that divides [`LAYOUT_CHUNK`].
pub fn layout_block_fits(block: u64) -> bool {
    block != 0 && LAYOUT_CHUNK.is_multiple_of(block)
}

/// Writes `size` bytes of test data (`req`'s data, or its layout pattern) to a new file,
/// sequentially in [`LAYOUT_CHUNK`] blocks, then flushes it. Checks `stop` between blocks; `progress`
/// gets the bytes written so far.
fn fill_file(
    file: &File,
    path: &Path,
    size: u64,
    req: &TargetRequest,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), TargetError> {
    const CHUNK: usize = LAYOUT_CHUNK as usize;
    let (direct, pattern) = (req.direct, req.layout_pattern.as_ref());
    let mut pool = BufferPool::new(1, CHUNK);
    let mut rng = fastrand::Rng::new();
    let data = if pattern.is_some() {
        DataPattern::Zeros
    } else {
        req.data
    };
    if data == DataPattern::Random {
        fill_random(pool.slot_mut(0), &mut rng);
    }
    let mut off = 0u64;
    while off < size {
        if stop.load(Ordering::Relaxed) {
            return Err(TargetError::Interrupted);
        }
        let len = (size - off).min(CHUNK as u64) as usize;
        // Direct I/O needs whole blocks: sizes are validated to be multiples of 4 KiB before
        // we get here, so the last, shorter chunk is still a whole number of blocks.
        if data == DataPattern::Random {
            stamp(pool.slot_mut(0), &mut rng);
        }
        if let Some((p, block)) = pattern {
            if !layout_block_fits(*block) {
                return Err(TargetError::Unsupported(
                    path.to_path_buf(),
                    format!(
                        "a layout pattern in blocks of {block} bytes, which do not divide the \
                         layout's {LAYOUT_CHUNK}-byte writes"
                    ),
                ));
            }
            let block = *block as usize;
            for (i, b) in pool.slot_mut(0)[..len].chunks_mut(block).enumerate() {
                p.fill(b, off + (i * block) as u64);
            }
        }
        let buf = &pool.slot(0)[..len];
        let mut done = 0;
        while done < len {
            // SAFETY: buf is a valid, aligned buffer of len bytes.
            let rc = unsafe {
                libc::pwrite64(
                    file.as_raw_fd(),
                    buf[done..].as_ptr() as *const libc::c_void,
                    len - done,
                    (off + done as u64) as i64,
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                if direct && err.raw_os_error() == Some(libc::EINVAL) {
                    return Err(TargetError::DirectUnsupported {
                        path: path.to_path_buf(),
                        err,
                    });
                }
                return Err(TargetError::Io {
                    path: path.to_path_buf(),
                    action: "write test data to",
                    err,
                });
            }
            done += rc as usize;
        }
        off += len as u64;
        progress(off, size);
    }
    file.sync_all().map_err(io_err(path, "flush"))?;
    Ok(())
}

fn create_and_fill(
    path: &Path,
    size: u64,
    req: &TargetRequest,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<iolab_sys::files::Made, TargetError> {
    // Named only once `created` has recorded what it is (made unnamed where the filesystem
    // can): nothing is ever at `path` that a record does not name exactly.
    let (file, own) = match iolab_sys::files::create_recorded(path, req.direct, created) {
        Ok(made) => made,
        Err(e) if req.direct && e.raw_os_error() == Some(libc::EINVAL) => {
            return Err(TargetError::DirectUnsupported {
                path: path.to_path_buf(),
                err: e,
            })
        }
        Err(e) => return Err(io_err(path, "create")(e)),
    };
    // Held from now on: the fill may take long, and whatever replaces the path meanwhile
    // is never taken for this file (by the run state either, told before it had a name).
    let res = fill_file(&file, path, size, req, stop, progress);
    if let Err(e) = res {
        // Only while the path still holds the file just made (it may have been replaced).
        let _ = own.remove();
        return Err(e);
    }
    Ok(own)
}

/// What [`Target::remove`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// Nothing to remove (iolab did not create the file, or it is gone).
    Nothing,
    Removed(PathBuf),
    /// `path` is not the file iolab created (replaced during the run): left alone.
    /// `moved_to`: where iolab's file is now, when it was moved and still has a name.
    NotOurs {
        path: PathBuf,
        moved_to: Option<PathBuf>,
    },
}

/// Why a path of this type cannot be a target.
fn not_a_target(t: std::fs::FileType) -> String {
    format!(
        "is {}; use a directory, a regular file or a block device",
        kind_name(t)
    )
}

/// Resolves the target, checks it is safe to use, and creates and fills the test file
/// when iolab needs one.
pub fn prepare(
    req: &TargetRequest,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Target, TargetError> {
    prepare_with(req, stop, progress, &mut |_, _| {})
}

/// [`prepare`], calling `created` with the test file's path and identity (device, inode)
/// as soon as it is created, before it is filled (for a record that must never take
/// another file at its path for it).
pub fn prepare_with(
    req: &TargetRequest,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<Target, TargetError> {
    let path = std::path::absolute(&req.path).unwrap_or_else(|_| req.path.clone());
    if let Some(s) = req.size {
        if s == 0 || s % 4096 != 0 {
            return Err(TargetError::Unsupported(
                path,
                format!(
                    "--size {s} is not a positive multiple of 4 KiB (4096 bytes); give one, \
                     e.g. 1GiB (1073741824) rather than 1GB (1000000000)"
                ),
            ));
        }
    }
    let meta = match std::fs::metadata(&path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&path, "inspect")(e)),
    };
    let size = req.size.unwrap_or(req.default_size);
    match meta {
        Some(m) if m.is_dir() => {
            let name = format!("iolab-{}-{:08x}.dat", std::process::id(), fastrand::u32(..));
            let io_path = path.join(name);
            let own = create_and_fill(&io_path, size, req, stop, progress, created)?;
            let fs_type = fs_type_of(&path);
            let mut t = Target::new(&path, TargetKind::Dir, io_path, fs_type, size, true);
            t.own = Some(own);
            Ok(t)
        }
        Some(m) if m.file_type().is_block_device() => {
            let dev_size = safety::device_size(&path).map_err(io_err(&path, "size"))?;
            let size = req.size.unwrap_or(dev_size);
            if size > dev_size {
                return Err(TargetError::TooSmall {
                    path,
                    have: dev_size,
                    want: size,
                });
            }
            if req.writes {
                safety::check_device_writable(&path, req.allow_destroy_device)
                    .map_err(TargetError::Safety)?;
            }
            Ok(Target::new(
                &path,
                TargetKind::Device,
                path.clone(),
                "raw device".into(),
                size,
                false,
            ))
        }
        Some(m) if m.is_file() => {
            if req.writes {
                safety::check_regular_file_overwrite(&path, req.allow_overwrite_file)
                    .map_err(TargetError::Safety)?;
            }
            let have = m.len();
            let size = req.size.unwrap_or(have - have % 4096);
            if size > have || size == 0 {
                return Err(TargetError::TooSmall {
                    path,
                    have,
                    want: size.max(4096),
                });
            }
            let fs_type = fs_type_of(&path);
            Ok(Target::new(
                &path,
                TargetKind::File,
                path.clone(),
                fs_type,
                size,
                false,
            ))
        }
        Some(m) => Err(TargetError::Unsupported(path, not_a_target(m.file_type()))),
        None => {
            // A new file: its directory must exist; iolab creates, fills and removes it.
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            if let Some(parent) = parent {
                if !parent.is_dir() {
                    return Err(TargetError::NotFound(parent.to_path_buf()));
                }
            }
            let own = create_and_fill(&path, size, req, stop, progress, created)?;
            let fs_type = fs_type_of(&path);
            let mut t = Target::new(&path, TargetKind::File, path.clone(), fs_type, size, true);
            t.own = Some(own);
            Ok(t)
        }
    }
}

/// What a target that is neither a directory, a regular file nor a block device is, in
/// words.
pub fn kind_name(t: std::fs::FileType) -> &'static str {
    if t.is_char_device() {
        "a character device"
    } else if t.is_fifo() {
        "a named pipe (FIFO)"
    } else if t.is_socket() {
        "a socket"
    } else {
        "neither a directory, a regular file nor a block device"
    }
}

impl Target {
    /// Fraction (0..1) of the test region resident in the page cache (mincore). None when
    /// it cannot be known.
    pub fn resident_fraction(&self) -> Option<f64> {
        let (resident, len) = page_cache_residency(&self.io_path, Some(self.info.size))?;
        (len > 0).then(|| resident as f64 / len as f64)
    }

    /// Drops the test region's clean pages from the page cache (posix_fadvise DONTNEED on
    /// the file or device, fio's `invalidate=1`), so O_DIRECT I/O does not run against
    /// cached pages (the kernel looks them up, and writes must invalidate them). Dirty
    /// pages are written first (fdatasync), else they would stay. Returns the bytes of the
    /// region that were cached before, when that can be known.
    pub fn drop_cached_pages(&self) -> Result<Option<u64>, TargetError> {
        let before = page_cache_residency(&self.io_path, Some(self.info.size)).map(|(r, _)| r);
        if before == Some(0) {
            return Ok(before);
        }
        let file = File::open(&self.io_path).map_err(io_err(&self.io_path, "open"))?;
        let fail = |err| TargetError::Io {
            path: self.io_path.clone(),
            action: "drop the cached pages of",
            err,
        };
        file.sync_data().map_err(fail)?;
        // No length (a size beyond off_t's range included): to the end.
        let len = std::num::NonZeroU64::new(self.info.size).filter(|l| l.get() <= i64::MAX as u64);
        rustix::fs::fadvise(&file, 0, len, rustix::fs::Advice::DontNeed)
            .map_err(|e| fail(io::Error::from(e)))?;
        Ok(before)
    }

    /// Whether O_DIRECT is really honoured: a direct read into a misaligned buffer must be
    /// refused with EINVAL. If it succeeds, either the filesystem ignores O_DIRECT (tmpfs,
    /// some FUSE filesystems) and reads come from memory, or it only falls back to the page
    /// cache for misaligned I/O (btrfs): an aligned direct read then tells them apart by
    /// whether it leaves the page cached. None when it cannot be probed.
    ///
    /// The read goes to the first allocated block: filesystems answer a direct read of a
    /// hole (or of an unwritten extent) with zeros without checking alignment, so a probe
    /// of a hole would wrongly say O_DIRECT is ignored. A file with no data cannot be probed.
    pub fn direct_io_honoured(&self) -> Option<bool> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.io_path)
            .ok()?;
        // SAFETY: lseek on an open descriptor has no memory-safety preconditions.
        let data = unsafe { libc::lseek64(file.as_raw_fd(), 0, libc::SEEK_DATA) };
        let offset = if data >= 0 {
            data & !4095
        } else if io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
            return None;
        } else {
            // SEEK_DATA unsupported (block devices, some filesystems): probe the start.
            0
        };
        let pool = BufferPool::new(1, 8192);
        // SAFETY: the pointer is one byte into an 8 KiB buffer and we read 4096 bytes.
        let rc = unsafe {
            libc::pread64(
                file.as_raw_fd(),
                pool.slot_ptr(0).add(1) as *mut libc::c_void,
                4096,
                offset,
            )
        };
        if rc >= 0 {
            // btrfs serves a misaligned direct read through the page cache but bypasses it
            // for aligned ones: O_DIRECT is ignored only if an aligned read is cached too.
            Some(!aligned_direct_read_cached(&file, offset).unwrap_or(true))
        } else if io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            Some(true)
        } else {
            None
        }
    }
}

/// Evicts the page at `offset` (4 KiB aligned), reads it with an aligned direct read and
/// says whether it is in the page cache afterwards (mincore). None when it cannot be told.
fn aligned_direct_read_cached(file: &File, offset: i64) -> Option<bool> {
    let fd = file.as_raw_fd();
    // SAFETY: plain syscalls on an open descriptor; dirty pages must be written to be evicted.
    unsafe {
        libc::fdatasync(fd);
        libc::posix_fadvise(fd, offset, 4096, libc::POSIX_FADV_DONTNEED);
    }
    let pool = BufferPool::new(1, 4096);
    // SAFETY: an aligned 4 KiB buffer, read into with 4096 bytes.
    let rc = unsafe { libc::pread64(fd, pool.slot_ptr(0) as *mut libc::c_void, 4096, offset) };
    if rc <= 0 {
        return None;
    }
    // SAFETY: a shared read-only mapping of one page of an open file; unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            offset,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let mut vec = [0u8; 1];
    // SAFETY: one byte for the one page mapped; then unmapping exactly what was mapped.
    let rc = unsafe { libc::mincore(addr, 4096, vec.as_mut_ptr()) };
    // SAFETY: as above.
    unsafe { libc::munmap(addr, 4096) };
    (rc == 0).then_some(vec[0] & 1 == 1)
}

/// Bytes of a file (its first `len` bytes, or all of it) resident in the page cache, and the
/// length examined; reads nothing. None when it cannot be known.
pub fn page_cache_residency(path: &Path, len: Option<u64>) -> Option<(u64, u64)> {
    let file = File::open(path).ok()?;
    let len = match len {
        Some(l) => l,
        None => file.metadata().ok()?.len(),
    };
    if len == 0 {
        return Some((0, 0));
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let fd = file.as_raw_fd();
    let pages = cachestat_pages(fd, len).or_else(|| mincore_pages(fd, len, page))?;
    Some(((pages * page).min(len), len))
}

/// Cached pages of the first `len` bytes of `fd` by cachestat(2) (Linux 6.5+): one call
/// that walks the page cache folio by folio, where mincore(2) looks up every page (12 ms
/// per GiB on the project VM, and a direct run probed twice before its first I/O). None
/// where the kernel lacks it.
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
))]
fn cachestat_pages(fd: RawFd, len: u64) -> Option<u64> {
    // The same number on every architecture with the unified syscall table.
    const SYS_CACHESTAT: libc::c_long = 451;
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    let range = Range { off: 0, len };
    let mut stat = Stat::default();
    // SAFETY: the kernel reads `range` and writes `stat`, both live and of the layout
    // cachestat(2) defines; flags must be 0.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd as libc::c_uint,
            &range as *const Range,
            &mut stat as *mut Stat,
            0 as libc::c_uint,
        )
    };
    (rc == 0).then_some(stat.nr_cache)
}

#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64"
)))]
fn cachestat_pages(_fd: RawFd, _len: u64) -> Option<u64> {
    None
}

/// Resident pages of the first `len` bytes of `fd`: mincore(2) on a shared read-only
/// mapping.
fn mincore_pages(fd: RawFd, len: u64, page: u64) -> Option<u64> {
    let len = usize::try_from(len).ok()?;
    // SAFETY: a shared read-only mapping of `len` bytes of an open file; unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let mut vec = vec![0u8; len.div_ceil(page as usize)];
    // SAFETY: vec has one byte per page of the mapping.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    // SAFETY: unmapping exactly what was mapped.
    unsafe { libc::munmap(addr, len) };
    (rc == 0).then(|| vec.iter().filter(|&&b| b & 1 == 1).count() as u64)
}

/// Filesystem type of the mount holding `path`, or "unknown".
fn fs_type_of(path: &Path) -> String {
    iolab_env::mount_of(path)
        .map(|m| m.fs_type)
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn cachestat_and_mincore_agree() {
        let dir = std::env::temp_dir().join(format!("iolab-cachestat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        // SAFETY: an advisory call on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut r = File::open(&path).unwrap();
        r.read_exact(&mut vec![0u8; 256 << 10]).unwrap();
        let (fd, len) = (r.as_raw_fd(), 1u64 << 20);
        let by_mincore = mincore_pages(fd, len, 4096).unwrap();
        assert!(by_mincore > 0, "the pages just read are cached");
        if let Some(by_cachestat) = cachestat_pages(fd, len) {
            assert_eq!(by_cachestat, by_mincore);
        }
        let (resident, examined) = page_cache_residency(&path, None).unwrap();
        assert_eq!((resident, examined), (by_mincore * 4096, len));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
