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

/// `--engine` and every engine's own options. An engine's options are declared in its
/// file; giving one with another engine is refused.
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// I/O engine: io_uring, psync, or null (completes every I/O without touching the
    /// target: iolab's own overhead). Default io_uring, or psync with a note where the
    /// kernel refuses io_uring; asked for by name, io_uring is never replaced.
    #[arg(long)]
    pub engine: Option<String>,
    #[command(flatten)]
    pub io_uring: io_uring::Options,
}

/// The engine chosen and its settings, resolved from [`EngineArgs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineChoice {
    pub kind: iolab_spec::EngineKind,
    pub fixedbufs: bool,
    pub registerfiles: bool,
    /// `--engine` was given: the run uses this engine or fails, never another.
    pub named: bool,
}

impl EngineArgs {
    /// The engine, or the option that does not apply to it and why.
    pub fn resolve(&self) -> Result<EngineChoice, (String, String)> {
        let kind: iolab_spec::EngineKind = self
            .engine
            .as_deref()
            .unwrap_or("io_uring")
            .parse()
            .map_err(|e: iolab_spec::SpecError| ("engine".to_string(), format!("--{e}")))?;
        if kind != iolab_spec::EngineKind::IoUring {
            if let Some(o) = self.io_uring.given().first() {
                return Err((
                    o.to_string(),
                    format!(
                        "--{o} is an io_uring option and does not apply to --engine {}",
                        kind.as_str()
                    ),
                ));
            }
        }
        Ok(EngineChoice {
            kind,
            fixedbufs: !self.io_uring.no_fixedbufs,
            registerfiles: !self.io_uring.no_registerfiles,
            named: self.engine.is_some(),
        })
    }
}

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
