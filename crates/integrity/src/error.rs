//! [`IntegrityError`]: why a journal, a sidecar or a target could not be read, written or
//! used for a check. It keeps the error underneath (`source()`) and displays as the message
//! `iolab verify` and `run verify` have always printed (`--journal PATH: cannot read: ...`).

use std::io;

use iolab_sys::input::InputError;

/// Why a journal, a sidecar or a target could not be read, written or checked against.
#[derive(Debug, thiserror::Error)]
pub enum IntegrityError {
    /// A system call on a file failed: what was being done with which file
    /// (`--target PATH: cannot open`), and the error.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    /// An input file (a journal, a sidecar) could not be read within its bound.
    #[error("{context}: {source}")]
    Input {
        context: String,
        #[source]
        source: InputError,
    },
    /// A sidecar that is not a sidecar's JSON.
    #[error("{context}: {source}")]
    Json {
        context: String,
        #[source]
        source: serde_json::Error,
    },
    /// What was given or found does not fit: a damaged journal, a `--bs` the sidecar
    /// contradicts, a target too small, two files on one filesystem.
    #[error("{0}")]
    Invalid(String),
}

impl IntegrityError {
    /// An I/O error while doing `context` (`PATH: cannot write`).
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        IntegrityError::Io {
            context: context.into(),
            source,
        }
    }
}
