//! Why a fact of the environment could not be read: [`EnvError`], which keeps the error it
//! came from (`source()`) and displays as the note a run records (`block-I/O throttles
//! unknown: /proc/self/cgroup: ...`).

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

/// Why a fact of the environment is unknown.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A file or directory of procfs or sysfs could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A program (`btrfs`, `zfs`, `zpool`) could not be started.
    #[error("`{program}` could not be started: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    /// Waiting for a program failed.
    #[error("`{program}`: {source}")]
    Wait {
        program: String,
        #[source]
        source: io::Error,
    },
    /// A program ran past its time limit and was killed.
    #[error("`{command}` timed out")]
    TimedOut { command: String },
    /// A program exited with a failure, with the first line of its standard error.
    #[error("`{command}` failed ({status}): {first_line}")]
    Failed {
        command: String,
        status: ExitStatus,
        first_line: String,
    },
    /// The blkio or v2 cgroup's throttle files could not be read.
    #[error("{hierarchy} cgroup {cgroup}: {source}")]
    Throttles {
        hierarchy: &'static str,
        cgroup: String,
        #[source]
        source: io::Error,
    },
    /// What was read does not say what is needed (no cgroup, no uuid, no vdev).
    #[error("{0}")]
    Missing(String),
}
