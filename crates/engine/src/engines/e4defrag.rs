//! e4defrag: every write is one `EXT4_IOC_MOVE_EXT` of its range of the job's file with a
//! donor file's blocks, from the job's thread, one at a time; no data moves through
//! iolab. fio's `ioengine=e4defrag`: the range in filesystem blocks (offset / block size,
//! rounded out to whole blocks) at the same place in the donor, a short move counted as a
//! short I/O, nothing moved an error (EINVAL, as fio); reads fail with EINVAL as fio's do
//! (the mapping refuses them). The donor is iolab's own new file beside the job's (0600,
//! `O_EXCL`), allocated over the whole region when the engine opens, or with `inplace`
//! allocated at each I/O over its range and truncated to nothing after it (fio's
//! `inplace=1`); it is removed when the pass ends, while it is still the file made. On a
//! filesystem that is not ext4 the engine refuses to open, naming it.

use std::fs::File;
use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::os::unix::fs::MetadataExt;

use iolab_spec::engopt::{EngineOption, Val};
use iolab_spec::{EngineKind, IoDir};
use iolab_sys::ext4;
use iolab_sys::files::{self, Made};
use rustix::fs::FallocateFlags;

use super::psync::Psync;
use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

static OPTIONS: &[EngineOption] = &[EngineOption {
    key: "inplace",
    cli: "inplace",
    help: "e4defrag: allocate the donor's blocks at each I/O and free them after it (fio's \
           inplace=1)",
    default: Val::Flag(false),
    max: 0,
    fio: Some(("inplace", Val::Flag(false))),
    header: "donor allocated per I/O",
}];

pub struct E4defrag {
    done: Psync,
    donor: File,
    made: Option<Made>,
    bsz: u64,
    inplace: bool,
}

impl Engine for E4defrag {
    const DESC: Desc = Desc {
        fio: &["e4defrag"],
        // Only a job file that asks for it: it writes no data.
        cli: false,
        synchronous: true,
        moves_data: false,
        refuses_reads: Some("moves extents on writes only and fails reads (EINVAL), as fio's does"),
        donor: true,
        fio_options: &["donorname"],
        options: OPTIONS,
        ..Desc::of(EngineKind::declare("e4defrag"))
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        // SAFETY: the job's descriptor outlives the engine being opened.
        let fd = unsafe { BorrowedFd::borrow_raw(o.fd) };
        let magic = ext4::fs_magic(fd).map_err(|e| format!("e4defrag: statfs: {e}"))?;
        if magic != ext4::EXT4_SUPER_MAGIC {
            return Err(format!(
                "ioengine=e4defrag moves extents with EXT4_IOC_MOVE_EXT, which only ext4 has; \
                 {} is on {}",
                o.path.display(),
                ext4::fs_name(magic)
            ));
        }
        let path = o.path.with_file_name(files::unique_name("e4defrag-donor"));
        let fail = |what: &str, e: io::Error| format!("e4defrag: {what} {}: {e}", path.display());
        let donor = files::create_new(&path).map_err(|e| fail("cannot make", e))?;
        let made = Made::of_file(&path, &donor).map_err(|e| fail("cannot hold", e))?;
        let inplace = o.settings.engine_opts.flag("inplace");
        let mut engine = E4defrag {
            done: Psync::new(o.fd),
            donor,
            made: Some(made),
            bsz: 4096,
            inplace,
        };
        if !inplace {
            rustix::fs::fallocate(&engine.donor, FallocateFlags::empty(), 0, o.settings.size)
                .map_err(|e| fail("cannot allocate", e.into()))?;
        }
        let meta = engine
            .donor
            .metadata()
            .map_err(|e| fail("cannot stat", e))?;
        engine.bsz = meta.blksize().max(512);
        Ok((engine, Vec::new()))
    }

    #[inline]
    fn queue(&mut self, _bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
        if dir == IoDir::Read {
            self.done.complete_with(slot, -libc::EINVAL);
            return;
        }
        let result = self.defrag(offset, len as u64);
        self.done.complete_with(
            slot,
            match result {
                Ok(n) => n as i32,
                Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
            },
        );
    }

    #[inline]
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        self.done.submit_and_reap(min, out)
    }

    fn fd(&self) -> RawFd {
        self.done.fd()
    }
}

impl E4defrag {
    /// One move of the range's blocks; the bytes moved (at most `len`).
    fn defrag(&mut self, offset: u64, len: u64) -> io::Result<u64> {
        if self.inplace {
            rustix::fs::fallocate(&self.donor, FallocateFlags::empty(), offset, len)?;
        }
        let start = offset / self.bsz;
        let blocks = (offset + len).div_ceil(self.bsz) - start;
        // SAFETY: the job's descriptor outlives the engine.
        let orig = unsafe { BorrowedFd::borrow_raw(self.done.fd()) };
        let moved = ext4::move_ext(orig, &self.donor, start, blocks);
        if self.inplace {
            rustix::fs::ftruncate(&self.donor, 0)?;
        }
        let moved = (moved? * self.bsz).min(len);
        if moved == 0 {
            // Nothing moved: beyond the file's size, as fio reads it.
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(moved)
    }
}

impl Drop for E4defrag {
    fn drop(&mut self) {
        if let Some(made) = self.made.take() {
            let path = made.path().to_path_buf();
            if let Err(e) = made.remove() {
                eprintln!("iolab: cannot remove {}: {e}", path.display());
            }
        }
    }
}
