//! ftruncate: every write sets the file's length to its offset (`ftruncate(fd, offset)`),
//! from the job's thread, one at a time; no data moves. fio's `ioengine=ftruncate`, which
//! measures how the filesystem grows and shrinks a file; a read is refused (EINVAL), as
//! fio's engine does.

use std::io;
use std::os::fd::RawFd;

use iolab_spec::{EngineKind, IoDir};

use super::psync::Psync;
use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

/// psync's completions, with ftruncate in place of pwrite.
pub struct Ftruncate(Psync);

impl Engine for Ftruncate {
    const DESC: Desc = Desc {
        fio: &["ftruncate"],
        // Only a job file that asks for it: it writes no data.
        cli: false,
        synchronous: true,
        moves_data: false,
        refuses_reads: Some(
            "turns each write into ftruncate(offset) and fails reads (EINVAL), as fio's does",
        ),
        ..Desc::of(EngineKind::declare("ftruncate"))
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        Ok((Ftruncate(Psync::new(o.fd)), Vec::new()))
    }

    #[inline]
    fn queue(&mut self, _bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
        let rc = match dir {
            IoDir::Read => {
                // fio's engine fails reads; so does this one (the mapping refuses them).
                self.0.complete_with(slot, -libc::EINVAL);
                return;
            }
            // SAFETY: a plain system call on the job's descriptor, which outlives the
            // engine; no memory is passed.
            IoDir::Write => unsafe { libc::ftruncate(self.0.fd(), offset as libc::off_t) },
        };
        // fio counts each call as an I/O of the job's block size.
        self.0
            .complete(slot, if rc == 0 { len as i64 } else { rc as i64 });
    }

    #[inline]
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        self.0.submit_and_reap(min, out)
    }

    fn fd(&self) -> RawFd {
        self.0.fd()
    }
}
