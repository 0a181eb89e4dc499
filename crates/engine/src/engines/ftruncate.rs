//! ftruncate: every write sets the file's length to its offset (`ftruncate(fd, offset)`),
//! from the job's thread, one at a time; no data moves. fio's `ioengine=ftruncate`, which
//! measures how the filesystem grows and shrinks a file; a read is refused (EINVAL), as
//! fio's engine does.

use std::io;
use std::os::fd::RawFd;

use iolab_spec::{EngineKind, IoDir};

use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

pub struct Ftruncate {
    fd: RawFd,
    done: Vec<Completion>,
}

impl Engine for Ftruncate {
    const DESC: Desc = Desc {
        kind: EngineKind::Ftruncate,
        aliases: &[],
        fio: &["ftruncate"],
        // Only a job file that asks for it: it writes no data.
        cli: false,
        synchronous: true,
        touches_device: true,
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        Ok((
            Ftruncate {
                fd: o.fd,
                done: Vec::with_capacity(1),
            },
            Vec::new(),
        ))
    }

    #[inline]
    fn queue(&mut self, _bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
        let result = match dir {
            IoDir::Read => -libc::EINVAL,
            IoDir::Write => {
                // SAFETY: a plain system call on the job's descriptor, which outlives the
                // engine; no memory is passed.
                let rc = unsafe { libc::ftruncate(self.fd, offset as libc::off_t) };
                if rc == 0 {
                    // fio counts each call as an I/O of the job's block size.
                    len as i32
                } else {
                    -io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EIO)
                }
            }
        };
        self.done.push(Completion { slot, result });
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
