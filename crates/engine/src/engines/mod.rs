//! The I/O engines, one file each, behind one small interface: open for a job, queue I/Os
//! into slots, then submit and reap completions. The job loop in `worker.rs` is generic over
//! [`Engine`], so the per-I/O path has no dynamic dispatch; the registry at the end of this
//! file (one line an engine) picks the concrete engine for a run's [`EngineKind`].

pub mod io_uring;
pub mod null;
pub mod psync;

use std::io;
use std::os::fd::RawFd;

use iolab_spec::{EngineKind, IoDir, RunSettings};

use crate::buffers::BufferPool;

/// `--engine` and every engine's own options. An engine's options are declared in its
/// file; giving one with another engine is refused.
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// I/O engine: io_uring, psync, or null (completes every I/O without touching the
    /// target: iolab's own overhead). Default io_uring, or psync with a note where the
    /// kernel refuses io_uring; asked for by name, io_uring is never replaced.
    #[arg(long)]
    pub engine: Option<EngineKind>,
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
        let kind = self.engine.unwrap_or(EngineKind::IoUring);
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

/// What a job's engine is opened with.
pub struct Open<'a> {
    /// The job's file descriptor.
    pub fd: RawFd,
    /// The job's queue depth (after [`Engine::depth`]).
    pub iodepth: u32,
    /// The job's buffers (the engine may register them; it must not keep a reference).
    pub bufs: &'a BufferPool,
    pub settings: &'a RunSettings,
    /// The job's offsets are random (they cannot merge into larger requests).
    pub random: bool,
}

/// One job's I/O engine, bound to one file descriptor and one buffer pool.
pub trait Engine {
    /// Opens the engine for one job thread. The notes say what the settings asked for and
    /// the engine did another way (a registration the kernel refused); an error fails the
    /// pass.
    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String>
    where
        Self: Sized;

    /// The queue depth a job runs at with this engine, given `--iodepth`.
    fn depth(iodepth: u32) -> u32
    where
        Self: Sized,
    {
        iodepth
    }

    /// Queues an I/O of `len` bytes at `offset` using buffer slot `slot`. The I/O may be
    /// executed here (psync) or at the next [`Engine::submit_and_reap`] (io_uring).
    fn queue(&mut self, bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32);

    /// Submits everything queued and waits until at least `min` I/Os have completed (or
    /// none are outstanding); appends every available completion to `out`.
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()>;

    /// The file descriptor, for synchronous flushes.
    fn fd(&self) -> RawFd;
}

/// Work on a job's engine whatever its type (the job loop, generic over [`Engine`]).
pub trait WithEngine {
    type Output;
    fn run<E: Engine>(self, engine: &mut E, bufs: &mut BufferPool) -> Self::Output;
}

/// The registry of engines: `EngineKind` variant => engine type.
macro_rules! registry {
    ($($kind:ident => $engine:ty),* $(,)?) => {
        /// Opens the engine of `kind` for one job and runs `work` on it; the engine's notes
        /// beside the output. The engine is closed before `bufs` can be dropped.
        pub fn open_and_run<W: WithEngine>(
            kind: EngineKind,
            fd: RawFd,
            iodepth: u32,
            bufs: &mut BufferPool,
            settings: &RunSettings,
            random: bool,
            work: W,
        ) -> Result<(W::Output, Vec<String>), String> {
            match kind {
                $(EngineKind::$kind => {
                    let o = Open { fd, iodepth, bufs: &*bufs, settings, random };
                    let (mut engine, notes) = <$engine>::open(&o)?;
                    Ok((work.run(&mut engine, bufs), notes))
                })*
            }
        }

        /// The queue depth a job of `kind` runs at, given `--iodepth` (psync: 1).
        pub fn effective_iodepth(kind: EngineKind, iodepth: u32) -> u32 {
            match kind {
                $(EngineKind::$kind => <$engine>::depth(iodepth),)*
            }
        }
    };
}

// Every engine, one line each (its name and string are `EngineKind`'s, in iolab-spec).
registry! {
    IoUring => io_uring::Uring,
    Psync => psync::Psync,
    Null => null::Null,
}
