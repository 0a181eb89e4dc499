//! How a run ends: one exit-status enum for the whole binary, and the errors that lead to
//! it (a usage error names the option it is about).

use std::fmt;

/// The process exit status of every iolab command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything asked was done.
    Ok,
    /// Something failed while running (an I/O error, a tool that failed): exit 1.
    Failed,
    /// Bad input, refused before anything was touched: exit 2.
    Usage,
    /// Data did not read back as written: exit 3.
    Integrity,
    /// The data is intact but a filesystem's own report (scrub counts) is wrong: exit 4.
    Miscounted,
    /// Stopped by Ctrl-C, SIGTERM or SIGHUP: exit 130.
    Interrupted,
}

impl ExitStatus {
    pub const fn code(self) -> i32 {
        match self {
            ExitStatus::Ok => 0,
            ExitStatus::Failed => 1,
            ExitStatus::Usage => 2,
            ExitStatus::Integrity => 3,
            ExitStatus::Miscounted => 4,
            ExitStatus::Interrupted => 130,
        }
    }

    /// The status a child process exited with, if it is one of ours.
    pub fn from_code(code: i32) -> Option<ExitStatus> {
        Some(match code {
            0 => ExitStatus::Ok,
            1 => ExitStatus::Failed,
            2 => ExitStatus::Usage,
            3 => ExitStatus::Integrity,
            4 => ExitStatus::Miscounted,
            130 => ExitStatus::Interrupted,
            _ => return None,
        })
    }

    /// The more serious of two outcomes (an interruption or failure outranks a finding).
    pub fn worst(self, other: ExitStatus) -> ExitStatus {
        let rank = |s: ExitStatus| match s {
            ExitStatus::Ok => 0,
            ExitStatus::Miscounted => 1,
            ExitStatus::Integrity => 2,
            ExitStatus::Failed => 3,
            ExitStatus::Usage => 4,
            ExitStatus::Interrupted => 5,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// Input iolab refuses: the option it is about (as typed, without dashes: `bs`,
/// `journal`), when there is one, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError {
    pub option: Option<String>,
    pub message: String,
}

impl UsageError {
    /// An error about option `option` (without the leading dashes); the message is shown
    /// as `--option: message` unless it already starts with the flag.
    pub fn option(option: &str, message: impl Into<String>) -> Self {
        UsageError {
            option: Some(option.trim_start_matches('-').to_string()),
            message: message.into(),
        }
    }

    /// An error not about one option.
    pub fn general(message: impl Into<String>) -> Self {
        UsageError {
            option: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.option {
            Some(o) if !self.message.starts_with("--") => write!(f, "--{o}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl From<iolab_spec::SpecError> for UsageError {
    fn from(e: iolab_spec::SpecError) -> Self {
        UsageError {
            option: Some(e.field.clone()),
            message: format!("--{e}"),
        }
    }
}

/// Why a command did not finish normally.
#[derive(Debug)]
pub enum RunError {
    /// Bad input: exit 2.
    Usage(UsageError),
    /// Stopped by a signal: exit 130.
    Interrupted,
    /// Anything else, said in words (no error underneath): exit 1.
    Failed(String),
    /// Anything else, with the error it came from: exit 1. Shown as `context: source`
    /// (the source alone when there is no context), then each deeper cause the text does
    /// not already say (`: caused by ...`).
    Caused {
        context: String,
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl RunError {
    pub fn usage(message: impl Into<String>) -> Self {
        RunError::Usage(UsageError::general(message))
    }

    /// A failure (exit 1) while doing `context` ("cannot write FILE"), keeping the error
    /// underneath; shown as `context: source`.
    pub fn caused(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        RunError::Caused {
            context: context.into(),
            source: source.into(),
        }
    }

    /// A failure (exit 1) whose error says all there is to say: shown as it displays.
    pub fn from_error(
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        RunError::caused(String::new(), source)
    }

    pub fn status(&self) -> ExitStatus {
        match self {
            RunError::Usage(_) => ExitStatus::Usage,
            RunError::Interrupted => ExitStatus::Interrupted,
            RunError::Failed(_) | RunError::Caused { .. } => ExitStatus::Failed,
        }
    }

    /// Whether the command failed (exit 1), as opposed to refused or interrupted.
    pub fn is_failure(&self) -> bool {
        matches!(self, RunError::Failed(_) | RunError::Caused { .. })
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Usage(u) => u.fmt(f),
            RunError::Failed(m) => f.write_str(m),
            RunError::Caused { context, source } => {
                let mut text = if context.is_empty() {
                    source.to_string()
                } else {
                    format!("{context}: {source}")
                };
                // The deeper causes, each only where the text so far does not say it
                // (most errors already end with their source's words).
                let mut cause = source.source();
                while let Some(c) = cause {
                    let words = c.to_string();
                    if !words.is_empty() && !text.contains(&words) {
                        text.push_str(": caused by ");
                        text.push_str(&words);
                    }
                    cause = c.source();
                }
                f.write_str(&text)
            }
            RunError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Caused { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

impl From<UsageError> for RunError {
    fn from(e: UsageError) -> Self {
        RunError::Usage(e)
    }
}

impl From<iolab_spec::SpecError> for RunError {
    fn from(e: iolab_spec::SpecError) -> Self {
        RunError::Usage(e.into())
    }
}

impl From<iolab_store::StoreError> for RunError {
    fn from(e: iolab_store::StoreError) -> Self {
        if e.is_refusal() {
            // Refused untouched, before the run started: another --db is the remedy.
            return RunError::Usage(UsageError::option("db", e.to_string()));
        }
        RunError::from_error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for s in [
            ExitStatus::Ok,
            ExitStatus::Failed,
            ExitStatus::Usage,
            ExitStatus::Integrity,
            ExitStatus::Miscounted,
            ExitStatus::Interrupted,
        ] {
            assert_eq!(ExitStatus::from_code(s.code()), Some(s));
        }
        assert_eq!(ExitStatus::from_code(7), None);
    }

    #[test]
    fn an_interruption_outranks_a_finding() {
        assert_eq!(
            ExitStatus::Integrity.worst(ExitStatus::Interrupted),
            ExitStatus::Interrupted
        );
        assert_eq!(
            ExitStatus::Ok.worst(ExitStatus::Integrity),
            ExitStatus::Integrity
        );
        assert_eq!(
            ExitStatus::Integrity.worst(ExitStatus::Miscounted),
            ExitStatus::Integrity
        );
    }

    #[test]
    fn a_failure_keeps_its_source_and_adds_only_causes_not_yet_said() {
        let e = RunError::caused("cannot write x", std::io::Error::other("disk on fire"));
        assert_eq!(e.to_string(), "cannot write x: disk on fire");
        assert_eq!(e.status(), ExitStatus::Failed);
        assert!(e.is_failure());
        let source = std::error::Error::source(&e).expect("kept");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        // An error whose text does not say its source's: the source follows as a cause.
        #[derive(Debug)]
        struct Quiet(std::io::Error);
        impl fmt::Display for Quiet {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the store failed")
            }
        }
        impl std::error::Error for Quiet {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = RunError::from_error(Quiet(std::io::Error::other("EIO")));
        assert_eq!(e.to_string(), "the store failed: caused by EIO");
    }

    #[test]
    fn a_usage_error_names_its_option() {
        let e = UsageError::option("--bs", "must be a multiple of 512");
        assert_eq!(e.option.as_deref(), Some("bs"));
        assert_eq!(e.to_string(), "--bs: must be a multiple of 512");
        let spec = iolab_spec::parse_size("size", "12q").unwrap_err();
        let u: UsageError = spec.into();
        assert_eq!(u.option.as_deref(), Some("size"));
        assert!(u.message.starts_with("--size"), "{}", u.message);
    }
}
