//! Data integrity as one subsystem, below every workload: the self-describing block format
//! (`block`), the written-block map of the block tests' `--verify` (`written`), the
//! small-file content check (`filecheck`), dbench's content model (`dbench`), the
//! off-device intent/ack journal (`journal`), the sidecar and the later checks
//! (`verified`), and the one [`Tally`] every check counts in (`tally`). It depends only on
//! iolab-sys and iolab-spec; the writers (the engine's jobs, the workloads) call into it.

pub mod block;
pub mod dbench;
pub mod error;
pub mod filecheck;
pub mod journal;
pub mod tally;
pub mod verified;
pub mod written;

pub use error::IntegrityError;
pub use tally::{Failure, ReplayCounts, Tally, Unit};
