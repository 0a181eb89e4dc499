//! psync: pread/pwrite from the job's thread, one I/O at a time (queue depth 1); a trim
//! job's writes are discards of a block device, one at a time, as fio's engines issue
//! them.

use std::io;
use std::os::fd::RawFd;

use iolab_spec::engopt::Trims;
use iolab_spec::{EngineKind, IoDir};

use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

pub struct Psync {
    fd: RawFd,
    done: Vec<Completion>,
    /// A trim job's: its writes are discards.
    trim: bool,
}

/// `_IO(0x12, 119)`: discard a range of a block device (linux/fs.h).
const BLKDISCARD: libc::c_ulong = 0x1277;

/// Discards `len` bytes at `offset` of the block device `fd`, as fio's `os_trim` does on
/// Linux (`ioctl(BLKDISCARD, [offset, len])`): `len` (fio counts a trim as an I/O of its
/// length), or -errno.
fn discard(fd: RawFd, offset: u64, len: u32) -> i32 {
    let range: [u64; 2] = [offset, len as u64];
    // SAFETY: BLKDISCARD reads two u64s from the pointer, which lives for the call.
    let rc = unsafe { libc::ioctl(fd, BLKDISCARD as _, range.as_ptr()) };
    if rc < 0 {
        -io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        len as i32
    }
}

impl Psync {
    pub fn new(fd: RawFd) -> Self {
        Psync {
            fd,
            done: Vec::with_capacity(1),
            trim: false,
        }
    }

    /// Records the completion of a system call made for `slot` that returned `rc` (bytes,
    /// or -1 with errno set), for the next reap; for every synchronous engine.
    pub(crate) fn complete(&mut self, slot: u32, rc: i64) {
        let result = if rc < 0 {
            -io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            rc as i32
        };
        self.complete_with(slot, result);
    }

    /// Records `result` (bytes, or -errno) for `slot`, for the next reap.
    pub(crate) fn complete_with(&mut self, slot: u32, result: i32) {
        self.done.push(Completion { slot, result });
    }
}

impl Engine for Psync {
    const DESC: Desc = Desc {
        aliases: &["sync"],
        fio: &["psync", "sync", "pvsync", "pvsync2", "vsync"],
        synchronous: true,
        trims: Trims::Discard,
        ..Desc::of(EngineKind::declare("psync"))
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        let mut p = Psync::new(o.fd);
        if o.trim {
            // fio's trim is BLKDISCARD, which only a block device takes (a regular file
            // fails it with ENOTTY; the fio mapping refuses such a job before the run).
            // SAFETY: the job's descriptor outlives the engine.
            let f = unsafe { std::os::fd::BorrowedFd::borrow_raw(o.fd) };
            let st = rustix::fs::fstat(f).map_err(|e| format!("fstat: {e}"))?;
            if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::BlockDevice
            {
                return Err(format!(
                    "{}: a trim (BLKDISCARD) needs a block device",
                    o.path.display()
                ));
            }
            p.trim = true;
        }
        Ok((p, Vec::new()))
    }

    #[inline]
    fn queue(&mut self, bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
        if dir == IoDir::Write && self.trim {
            let result = discard(self.fd, offset, len);
            self.complete_with(slot, result);
            return;
        }
        let ptr = bufs.slot_ptr(slot as usize);
        // SAFETY: the slot holds at least `len` bytes (len <= slot_len, checked by the
        // worker) and stays alive for the duration of the call.
        let rc = unsafe {
            match dir {
                IoDir::Read => libc::pread64(
                    self.fd,
                    ptr as *mut libc::c_void,
                    len as usize,
                    offset as i64,
                ),
                IoDir::Write => libc::pwrite64(
                    self.fd,
                    ptr as *const libc::c_void,
                    len as usize,
                    offset as i64,
                ),
            }
        };
        self.complete(slot, rc as i64);
    }

    #[inline]
    fn submit_and_reap(&mut self, _min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        out.append(&mut self.done);
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.fd
    }
}
