//! null: every I/O completes at once with its full length and touches nothing (fio's null
//! ioengine). It measures the job loop alone, and with a
//! [`StepClock`](crate::clock::StepClock) it makes a pass deterministic for tests.

use std::io;
use std::os::fd::RawFd;

use iolab_spec::engopt::Trims;
use iolab_spec::{EngineKind, IoDir};

use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

/// Queued I/Os are held as (slot, length) and all complete, in full, at the next submit.
pub struct Null {
    fd: RawFd,
    queued: Vec<(u32, u32)>,
}

impl Null {
    /// `fd` is used only for flushes (`--fsync`, `--end-fsync`), which still reach the file.
    pub fn new(fd: RawFd, iodepth: u32) -> Self {
        Null {
            fd,
            queued: Vec::with_capacity(iodepth as usize),
        }
    }
}

impl Engine for Null {
    const DESC: Desc = Desc {
        // cpp_null: fio's example of an engine written in C++, a null engine.
        fio: &["null", "cpp_null"],
        touches_device: false,
        trims: Trims::Own,
        ..Desc::of(EngineKind::declare("null"))
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        Ok((Null::new(o.fd, o.iodepth), Vec::new()))
    }

    #[inline]
    fn queue(&mut self, _bufs: &BufferPool, slot: u32, _dir: IoDir, _offset: u64, len: u32) {
        self.queued.push((slot, len));
    }

    #[inline]
    fn submit_and_reap(&mut self, _min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        let done = self.queued.drain(..).map(|(slot, len)| Completion {
            slot,
            result: len as i32,
        });
        out.extend(done);
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.fd
    }
}
