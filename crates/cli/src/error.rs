//! The error of the commands that are not runs (listing, reports, studies, checks), with
//! its exit status, and the result database they open.

use std::fmt;

use iolab_runner::{ExitStatus, RunError, UsageError};
use iolab_store::{default_db_path, Store};

use crate::args::DbArgs;

/// Everything that ends a command with a message and a non-zero exit.
#[derive(Debug)]
pub enum CliError {
    /// Bad input: exit 2.
    Usage(String),
    /// The run was stopped by a signal: exit 130.
    Interrupted,
    /// Anything else: exit 1.
    Failed(String),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => ExitStatus::Usage,
            CliError::Interrupted => ExitStatus::Interrupted,
            CliError::Failed(_) => ExitStatus::Failed,
        }
        .code()
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failed(m) => f.write_str(m),
            CliError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl From<iolab_spec::SpecError> for CliError {
    fn from(e: iolab_spec::SpecError) -> Self {
        CliError::Usage(format!("--{e}"))
    }
}

impl From<UsageError> for CliError {
    fn from(e: UsageError) -> Self {
        CliError::Usage(e.to_string())
    }
}

impl From<RunError> for CliError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Usage(u) => CliError::Usage(u.to_string()),
            RunError::Interrupted => CliError::Interrupted,
            RunError::Failed(m) => CliError::Failed(m),
        }
    }
}

impl From<iolab_store::StoreError> for CliError {
    fn from(e: iolab_store::StoreError) -> Self {
        CliError::Failed(e.to_string())
    }
}

pub fn open_store(db: &DbArgs) -> Result<Store, CliError> {
    let path = db.db.clone().unwrap_or_else(default_db_path);
    Ok(Store::open(&path)?)
}
