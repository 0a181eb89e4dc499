//! [`StudyError`]: what is wrong with a study file, and where.

use std::fmt;

/// A problem in a study file: the file, the line (when known), the key and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StudyError {
    pub file: String,
    /// 1-based line of the key (or of the table that holds it).
    pub line: Option<usize>,
    /// The TOML key, dotted (`config[2].testbed.fs`, `matrix.read_ahead_kb`), or empty for
    /// syntax errors.
    pub key: String,
    pub message: String,
}

impl fmt::Display for StudyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for StudyError {}
