//! falloc: every I/O is one `fallocate(fd, mode, offset, len)` on the job's file, from the
//! job's thread, one at a time; no data moves. fio's `ioengine=falloc`: a write allocates
//! the range (mode 0, extending the file). fio's reads (`FALLOC_FL_KEEP_SIZE`, which also
//! allocates) are refused by the mapping (iolab opens a reading job's file read-only; a
//! read here is `KEEP_SIZE` as in fio, should one come); a trim job's writes are fio's
//! trims, `PUNCH_HOLE | KEEP_SIZE`.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};

use iolab_spec::engopt::Trims;
use iolab_spec::{EngineKind, IoDir};
use rustix::fs::FallocateFlags;

use super::psync::Psync;
use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

/// psync's completions, with fallocate in place of pread/pwrite; whether the job's writes
/// are trims.
pub struct Falloc(Psync, bool);

impl Engine for Falloc {
    const DESC: Desc = Desc {
        fio: &["falloc"],
        // Only a job file that asks for it: it writes no data.
        cli: false,
        synchronous: true,
        moves_data: false,
        refuses_reads: Some(
            "turns a read into fallocate(KEEP_SIZE), which allocates blocks; iolab allows \
             reads where it may not write, so a falloc job that reads is refused",
        ),
        trims: Trims::Own,
        ..Desc::of(EngineKind::declare("falloc"))
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        Ok((Falloc(Psync::new(o.fd), o.trim), Vec::new()))
    }

    #[inline]
    fn queue(&mut self, _bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
        let mode = match dir {
            IoDir::Read => FallocateFlags::KEEP_SIZE,
            // A trim job's writes are fio's falloc trims: punched holes.
            IoDir::Write if self.1 => FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            IoDir::Write => FallocateFlags::empty(),
        };
        // SAFETY: the job's descriptor outlives the engine.
        let fd = unsafe { BorrowedFd::borrow_raw(self.0.fd()) };
        // fio counts each call as an I/O of its length.
        let result = match rustix::fs::fallocate(fd, mode, offset, len as u64) {
            Ok(()) => len as i32,
            Err(e) => -e.raw_os_error(),
        };
        self.0.complete_with(slot, result);
    }

    #[inline]
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        self.0.submit_and_reap(min, out)
    }

    fn fd(&self) -> RawFd {
        self.0.fd()
    }
}
