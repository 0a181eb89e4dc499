//! psync: pread/pwrite from the job's thread, one I/O at a time (queue depth 1).

use std::io;
use std::os::fd::RawFd;

use iolab_spec::{EngineKind, IoDir};

use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

pub struct Psync {
    fd: RawFd,
    done: Vec<Completion>,
}

impl Psync {
    pub fn new(fd: RawFd) -> Self {
        Psync {
            fd,
            done: Vec::with_capacity(1),
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
        kind: EngineKind::Psync,
        aliases: &["sync"],
        fio: &["psync", "sync", "pvsync", "pvsync2", "vsync"],
        cli: true,
        synchronous: true,
        touches_device: true,
        options: &[],
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        Ok((Psync::new(o.fd), Vec::new()))
    }

    #[inline]
    fn queue(&mut self, bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
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
