//! Reading fio job files (`iolab run fio JOBFILE`): the text format ([`parse`]: sections,
//! `include`, `${VAR}`, comments), fio's numbers ([`values`]: sizes by `kb_base`, times,
//! booleans) and the mapping of each job onto a [`JobSpec`](crate::JobSpec) with the run's
//! shared settings ([`map`]). Every refusal is a [`FioError`] naming `FILE:LINE: OPTION`.

pub mod filejobs;
pub mod logs;
pub mod map;
pub mod options;
pub mod parse;
pub mod values;

use std::fmt;

pub use map::{map_jobs, FioJob, FioPlan, Overrides};
pub use parse::{parse, parse_file, JobFile, RawOption, Section};

/// A refusal of a job file: where (`file:line`), which option (or `[section]`, `include`,
/// `${VAR}`), and why. Displayed as `FILE:LINE: OPTION: message` (`FILE: JOBFILE: message`
/// when the file cannot be read at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FioError {
    pub file: String,
    pub line: usize,
    pub option: String,
    pub message: String,
}

impl FioError {
    pub fn new(
        file: &str,
        line: usize,
        option: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        FioError {
            file: file.to_string(),
            line,
            option: option.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Line 0: about the file as a whole (it cannot be read).
        if self.line == 0 {
            return write!(f, "{}: {}: {}", self.file, self.option, self.message);
        }
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.option, self.message
        )
    }
}

impl std::error::Error for FioError {}
