//! The engine: issues I/O for a job (io_uring, psync, or null, which completes I/O without
//! touching anything), prepares and removes test targets,
//! and turns one timed pass into a [`iolab_measure::PassRecord`].
//!
//! Layers, bottom up: `buffers` (aligned, incompressible data), `engines/` (one file per
//! I/O engine behind the [`engines::Engine`] trait), `clock` (the loop's time source, real
//! or a test clock), `worker` (the per-job loop), `pass` (threads, merging), `target` (test
//! files and devices, and the `--verify` read-back of a test region), `safety` (what may be
//! written). `--verify` stamps blocks in iolab-integrity's format and records them in its
//! written-block map ([`iolab_integrity::written`]). Mount tables come from iolab-env.

pub mod buffers;
pub mod clock;
pub mod engines;
pub mod pass;
pub mod safety;
pub mod target;
pub mod worker;
pub mod zipf;

pub use pass::{effective_iodepth, run_pass, run_pass_with_clock, PassObserver, PassOutcome};
pub use target::{prepare, prepare_with, Target, TargetError, TargetRequest};

/// Whether io_uring can be used here; the error says why not.
pub fn io_uring_available() -> Result<(), std::io::Error> {
    engines::io_uring::available()
}
