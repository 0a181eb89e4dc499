//! Small readers shared by the modules: sysfs/procfs files, device numbers, external commands.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::EnvError;

/// A file's content with surrounding whitespace trimmed; `None` when unreadable or empty.
pub(crate) fn read_trim(path: impl AsRef<Path>) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

pub(crate) fn read_u64(path: impl AsRef<Path>) -> Option<u64> {
    read_trim(path)?.parse().ok()
}

/// "0"/"1" flags.
pub(crate) fn read_bool(path: impl AsRef<Path>) -> Option<bool> {
    match read_trim(path)?.as_str() {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    }
}

/// The last component of a symlink's target.
pub(crate) fn link_name(path: impl AsRef<Path>) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// "maj:min" parsed into numbers.
pub(crate) fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

pub(crate) fn dev_string(dev: (u32, u32)) -> String {
    format!("{}:{}", dev.0, dev.1)
}

/// The kernel name of a block device number, from `/sys/dev/block/MAJ:MIN`.
pub(crate) fn block_name(dev: (u32, u32)) -> Option<String> {
    link_name(format!("/sys/dev/block/{}", dev_string(dev)))
}

/// `/sys/class/block/NAME`.
pub(crate) fn sys_block(name: &str) -> PathBuf {
    Path::new("/sys/class/block").join(name)
}

/// Runs a command with a time limit and returns its stdout when it exits 0. `Err` says why
/// not (missing program, failure, timeout), for a note.
pub(crate) fn run(program: &str, args: &[&str], limit: Duration) -> Result<String, EnvError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| EnvError::Spawn {
            program: program.to_string(),
            source,
        })?;
    // Read stdout on a thread so a chatty command cannot block on a full pipe.
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut buf = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut buf);
        }
        buf
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(EnvError::TimedOut {
                    command: format!("{program} {}", args.join(" ")),
                });
            }
            Err(source) => {
                return Err(EnvError::Wait {
                    program: program.to_string(),
                    source,
                })
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        Err(EnvError::Failed {
            command: format!("{program} {}", args.join(" ")),
            status,
            first_line: err.lines().next().unwrap_or("").trim().to_string(),
        })
    }
}
