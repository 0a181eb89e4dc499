//! [`EmudiskError`]: why the daemon could not start or a control request got no answer.
//! It keeps the error underneath (`source()`) and displays as the daemon has always
//! printed (`--backing FILE: No such file or directory (os error 2)`).

use std::io;
use std::path::PathBuf;

use crate::spec::SpecIssue;

/// Why the emulated disk's daemon could not start, or a control request failed.
#[derive(Debug, thiserror::Error)]
pub enum EmudiskError {
    /// A system call on a file or socket failed: which one (`--backing FILE`), and why.
    #[error("{context}: {source}")]
    File {
        context: String,
        #[source]
        source: io::Error,
    },
    /// A system call that concerns no one file (signals, the FUSE session's thread).
    #[error(transparent)]
    Os(#[from] io::Error),
    /// `--spec` is not JSON of an emulated disk.
    #[error("--spec: {0}")]
    SpecJson(#[source] serde_json::Error),
    /// `--spec` has a key the model refuses.
    #[error("--spec: {0}")]
    Spec(SpecIssue),
    /// Something refused as it is: a directory others may write to, a control request that
    /// does not parse (the daemon's `err` answer).
    #[error("{0}")]
    Refused(String),
    /// The control socket answered something that is neither `ok` nor `err`.
    #[error("no answer from {} ({answer:?})", sock.display())]
    NoAnswer { sock: PathBuf, answer: String },
}

impl EmudiskError {
    pub(crate) fn file(context: impl Into<String>, source: io::Error) -> Self {
        EmudiskError::File {
            context: context.into(),
            source,
        }
    }
}
