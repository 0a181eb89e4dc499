//! [`TestbedError`]: everything that can go wrong while validating, building or tearing down.

use std::fmt;

/// Why a testbed could not be validated, built or torn down.
#[derive(Debug)]
pub enum TestbedError {
    /// A key of the spec is wrong or does not fit the others. `key` is the TOML key
    /// (`throttle.read_bps`, `dataset_properties.recordsize`).
    Invalid { key: String, message: String },
    /// A program iolab needs is not installed.
    MissingTool {
        tool: String,
        package: &'static str,
        purpose: String,
    },
    /// One of the user's devices (kind = "device") may not be built on: not named with
    /// `--allow-destroy-device`, mounted, held, the system disk, or signed without `--wipe`.
    Refused {
        device: std::path::PathBuf,
        message: String,
    },
    /// The machine lacks something the spec asks for (root, a cgroup controller, a scheduler).
    Unsupported { key: String, message: String },
    /// A command failed.
    Command {
        command: String,
        status: String,
        stderr: String,
    },
    /// A file, directory or sysfs operation failed.
    Io {
        context: String,
        source: std::io::Error,
    },
    /// A zfs-fuse daemon iolab did not start is running; iolab neither shares nor stops it.
    ZfsDaemonBusy { pid: i32 },
    /// The zfs-fuse daemon did not start or did not answer.
    ZfsDaemon { message: String },
    /// The stop flag was raised during the build (everything built so far was removed).
    Interrupted,
    /// The state file could not be created, written or read.
    State { message: String },
    /// Teardown left resources behind; each entry says which and why. The state file keeps
    /// them, so `cleanup_all` can retry.
    Teardown { failures: Vec<String> },
    /// The build failed and removing what it had built also failed.
    BuildFailed {
        cause: Box<TestbedError>,
        leftovers: Vec<String>,
    },
}

impl TestbedError {
    /// The spec key an error is about, when there is one.
    pub fn key(&self) -> Option<&str> {
        match self {
            TestbedError::Invalid { key, .. } | TestbedError::Unsupported { key, .. } => Some(key),
            TestbedError::BuildFailed { cause, .. } => cause.key(),
            _ => None,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> TestbedError {
        TestbedError::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for TestbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestbedError::Invalid { key, message } => write!(f, "testbed: `{key}`: {message}"),
            TestbedError::MissingTool {
                tool,
                package,
                purpose,
            } => write!(
                f,
                "testbed: `{tool}` is not installed (Debian package {package}); it is needed {purpose}"
            ),
            TestbedError::Unsupported { key, message } => {
                write!(f, "testbed: `{key}`: {message}")
            }
            TestbedError::Refused { device, message } => {
                write!(f, "testbed: {}: {message}", device.display())
            }
            TestbedError::Command {
                command,
                status,
                stderr,
            } => {
                write!(f, "testbed: `{command}` failed ({status})")?;
                if !stderr.is_empty() {
                    write!(f, ": {stderr}")?;
                }
                Ok(())
            }
            TestbedError::Io { context, source } => write!(f, "testbed: {context}: {source}"),
            TestbedError::ZfsDaemonBusy { pid } => write!(
                f,
                "testbed: a zfs-fuse daemon that iolab did not start is running (pid {pid}); \
                 zfs-fuse allows one daemon per machine, and iolab neither shares nor stops it"
            ),
            TestbedError::ZfsDaemon { message } => write!(f, "testbed: zfs-fuse: {message}"),
            TestbedError::Interrupted => write!(f, "testbed: build interrupted"),
            TestbedError::State { message } => write!(f, "testbed: state file: {message}"),
            TestbedError::Teardown { failures } => {
                write!(f, "testbed: teardown left {} problem(s)", failures.len())?;
                for x in failures {
                    write!(f, "\n  - {x}")?;
                }
                Ok(())
            }
            TestbedError::BuildFailed { cause, leftovers } => {
                write!(f, "{cause}\ntestbed: removing the partial build left:")?;
                for x in leftovers {
                    write!(f, "\n  - {x}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for TestbedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestbedError::Io { source, .. } => Some(source),
            TestbedError::BuildFailed { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}
