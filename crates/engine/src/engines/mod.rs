//! The I/O engines, one file each, behind one small interface: queue I/Os into slots, then
//! submit and reap completions. The job loop in `worker.rs` is generic over [`Engine`], so
//! the per-I/O path has no dynamic dispatch.

pub mod io_uring;
pub mod null;
pub mod psync;

use std::io;
use std::os::fd::RawFd;

use iolab_spec::IoDir;

use crate::buffers::BufferPool;

/// A completed I/O: the slot it used and the kernel's result (bytes, or -errno).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub slot: u32,
    pub result: i32,
}

/// One job's I/O engine, bound to one file descriptor and one buffer pool.
pub trait Engine {
    /// Queues an I/O of `len` bytes at `offset` using buffer slot `slot`. The I/O may be
    /// executed here (psync) or at the next [`Engine::submit_and_reap`] (io_uring).
    fn queue(&mut self, bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32);

    /// Submits everything queued and waits until at least `min` I/Os have completed (or
    /// none are outstanding); appends every available completion to `out`.
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()>;

    /// The file descriptor, for synchronous flushes.
    fn fd(&self) -> RawFd;
}
