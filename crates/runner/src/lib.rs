//! The run lifecycle every workload goes through (run context, the block pass loop,
//! storing, warnings, the exit status) and the workload interface `iolab run` dispatches
//! through.

pub mod block;
pub mod context;
pub mod coord;
pub mod facts;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod options;
pub mod precondition;
pub mod progress;
pub mod repeat;
pub mod signals;
pub mod space;
pub mod status;
pub mod steady;
pub mod sustained;
pub mod verify;
pub mod workload;

pub use context::{
    dir_info, execute, execute_with, plain_settings, target_dir, Finished, RunContext, RunStart,
};
pub use coord::Coordinator;
pub use options::CommonArgs;
pub use status::{ExitStatus, RunError, UsageError};
pub use workload::{unknown_flag, Def, Job, ParseError, Parsed, Registry, Workload};
