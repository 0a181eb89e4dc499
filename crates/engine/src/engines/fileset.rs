//! The set of files fio's file engines (filecreate, filestat, filedelete) work on, one
//! file an I/O: the I/O at `offset` is file `offset / bs` of the job's region, in a private
//! directory (0700, an unpredictable name) the engine makes beside the job's file and
//! holds open. Every name in it is one iolab made (`O_CREAT|O_EXCL|O_NOFOLLOW`, 0600); the
//! directory is removed with what is left in it when the engine closes, only while its
//! path is still the directory made (device and inode).

use std::ffi::CStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;

use iolab_spec::engopt::Files;
use iolab_spec::{EngineKind, IoDir};
use iolab_sys::files::{self, Made};
use rustix::fs::{Mode, OFlags};

use super::psync::Psync;
use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

/// A file engine's description: only a job file asks for one (it moves no data), from
/// the job's thread, one I/O at a time, on the target's filesystem.
pub const fn desc(kind: EngineKind, fio: &'static [&'static str], files: Files) -> Desc {
    Desc {
        fio,
        cli: false,
        synchronous: true,
        moves_data: false,
        file_set: Some(files),
        ..Desc::of(kind)
    }
}

/// What one of the file engines does to the file of an I/O.
pub trait FileOp: Default {
    /// Its description, with how it works on its files (`Files`: laid out before the pass
    /// or made by its I/O...).
    const DESC: Desc;
    /// And their blocks synced to disk, as fio's `create_fsync=1` does: filedelete, whose
    /// unlink costs what it frees (a stat does not depend on it).
    const SYNCED: bool = false;
    /// Set up for the job's set.
    fn prepare(&mut self, _set: &FileSet) -> Result<(), String> {
        Ok(())
    }
    /// The I/O's call on file `i` of the set, `name` in the set's directory `dir`.
    fn call(&mut self, i: u64, dir: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<()>;
}

/// A file engine: psync's completions, each I/O one call of `O` on the file of its
/// offset, counted as one I/O of the block size (fio's file engines count each file so).
pub struct FileEngine<O> {
    done: Psync,
    set: FileSet,
    op: O,
}

impl<O: FileOp> Engine for FileEngine<O> {
    const DESC: Desc = O::DESC;

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        let laid_out = O::DESC.file_set.is_some_and(|f| f.laid_out);
        let set = FileSet::open(o, O::DESC.kind.as_str(), laid_out, O::SYNCED)?;
        let mut op = O::default();
        op.prepare(&set)?;
        let done = Psync::new(o.fd);
        Ok((FileEngine { done, set, op }, Vec::new()))
    }

    #[inline]
    fn queue(&mut self, _bufs: &BufferPool, slot: u32, _dir: IoDir, offset: u64, len: u32) {
        // fio counts the call in the job's direction (the default rw=read: a read).
        let r = match self.set.at(offset) {
            Some((i, dir, name)) => self.op.call(i, dir, name),
            None => Err(rustix::io::Errno::INVAL),
        };
        let result = match r {
            Ok(()) => len as i32,
            Err(e) => -e.raw_os_error(),
        };
        self.done.complete_with(slot, result);
    }

    #[inline]
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        self.done.submit_and_reap(min, out)
    }

    fn fd(&self) -> RawFd {
        self.done.fd()
    }
}

/// At most this many files a job (fio's `nrfiles`, or the region over the block size).
pub const MAX_FILES: u64 = 10_000_000;

/// A job's files, named `f0`, `f1`, ... in the engine's private directory.
pub struct FileSet {
    made: Option<Made>,
    dir: OwnedFd,
    bs: u64,
    count: u64,
    /// The name of the file the last [`FileSet::name`] gave, with its NUL.
    name: Vec<u8>,
}

impl FileSet {
    /// Makes the private directory for the engine `word` beside the job's file, with
    /// `populate`: the region's files made first (one block of zeros each, as fio lays out a
    /// job's files before it starts; with `sync` synced to disk, as fio's `create_fsync=1`). Refused on a device (the files need a
    /// directory) and for more than [`MAX_FILES`] files.
    pub fn open(o: &Open<'_>, word: &str, populate: bool, sync: bool) -> Result<FileSet, String> {
        // SAFETY: the job's descriptor outlives the engine being opened.
        let st = rustix::fs::fstat(unsafe { std::os::fd::BorrowedFd::borrow_raw(o.fd) })
            .map_err(|e| format!("{word}: {}", io::Error::from(e)))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(format!(
                "ioengine={word} makes its files in a directory: give --target a directory or a \
                 file in one, not a device"
            ));
        }
        let bs = o.bufs.slot_len() as u64;
        let count = o.settings.size / bs.max(1);
        if count == 0 || count > MAX_FILES {
            return Err(format!(
                "ioengine={word}: the region ({} bytes) over the block size ({bs}) gives {count} \
                 files a job; between 1 and {MAX_FILES} are run",
                o.settings.size
            ));
        }
        let parent = match o.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
        let path = parent.join(files::unique_name(word));
        let fail = |what: &str, e: io::Error| format!("{word}: {what} {}: {e}", path.display());
        let made = Made::private_dir(&path).map_err(|e| fail("cannot make", e))?;
        let dir = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| fail("cannot open", e.into()))?;
        let same = rustix::fs::fstat(&dir)
            .map(|s| s.st_dev == made.id().dev && s.st_ino == made.id().ino)
            .unwrap_or(false);
        let mut set = FileSet {
            made: Some(made),
            dir,
            bs,
            count,
            name: Vec::with_capacity(24),
        };
        if !same {
            return Err(fail(
                "replaced as it was made:",
                io::Error::other("not opened"),
            ));
        }
        if populate {
            // fio writes each file's blocks and fsyncs it (create_fsync=1, its default):
            // here a block of zeros each, its writeback started at once, then each file
            // fdatasync'ed (the first commit takes the others' allocations with it; a
            // syncfs would wait for everything else written to the filesystem).
            let block = vec![0u8; bs as usize];
            for i in 0..count {
                let (_, dir, name) = set.at(i * bs).expect("within the region");
                let mut f = files::create_in(dir, name).map_err(|e| fail("cannot fill", e))?;
                f.write_all(&block).map_err(|e| fail("cannot fill", e))?;
                if sync {
                    // SAFETY: a plain system call on a descriptor held for it.
                    unsafe {
                        libc::sync_file_range(f.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE)
                    };
                }
            }
            for i in (0..count).filter(|_| sync) {
                let (_, dir, name) = set.at(i * bs).expect("within the region");
                let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let f = rustix::fs::openat(dir, name, flags, Mode::empty())
                    .map_err(|e| fail("cannot sync", e.into()))?;
                rustix::fs::fdatasync(&f).map_err(|e| fail("cannot sync", e.into()))?;
            }
        }
        Ok(set)
    }

    /// How many files the set has.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The file of the I/O at `offset`: its index, the directory and its name there (for
    /// the engine's call relative to the directory), or None past the region.
    pub fn at(&mut self, offset: u64) -> Option<(u64, BorrowedFd<'_>, &CStr)> {
        let i = self.index(offset)?;
        self.name.clear();
        write!(self.name, "f{i}\0").expect("a Vec takes every write");
        let name = CStr::from_bytes_with_nul(&self.name).ok()?;
        Some((i, self.dir.as_fd(), name))
    }

    /// The index of the file of the I/O at `offset`, or None past the region.
    pub fn index(&self, offset: u64) -> Option<u64> {
        let i = offset / self.bs;
        (i < self.count).then_some(i)
    }

    /// Whether files made with mode 0600 get it (false: the umask takes bits away, so each
    /// new file needs its mode set through its descriptor). Checked once with a probe file.
    pub fn umask_keeps_mode(&self) -> io::Result<bool> {
        let probe = c"probe";
        let f = rustix::fs::openat(
            &self.dir,
            probe,
            OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(files::FILE_MODE as _),
        )?;
        let mode = std::fs::File::from(f).metadata()?.permissions().mode() & 0o777;
        rustix::fs::unlinkat(&self.dir, probe, rustix::fs::AtFlags::empty())?;
        Ok(mode == files::FILE_MODE)
    }
}

impl Drop for FileSet {
    fn drop(&mut self) {
        if let Some(made) = self.made.take() {
            let path = made.path().to_path_buf();
            match made.remove() {
                Ok(files::Found::Same) | Ok(files::Found::Gone) => {}
                Ok(files::Found::Replaced { .. }) => eprintln!(
                    "iolab: {} is no longer the directory the engine made; left alone",
                    path.display()
                ),
                Err(e) => eprintln!("iolab: cannot remove {}: {e}", path.display()),
            }
        }
    }
}
