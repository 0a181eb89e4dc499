//! The JSON-lines journal both state files are: a testbed's (`state`) and a run's
//! (`runstate`). Each keeps its own line types; this is what they share: the header line,
//! the file created `PREFIX-PID-N.jsonl` (0600, in a 0700 directory) and held under an
//! exclusive `flock` by its owner for its whole life, one `write()` per line with
//! `O_APPEND` (a kill leaves at worst one cut line at the end, which readers skip), and the
//! other side: a dead owner's file opened (never through a link, checked and read on the
//! descriptor), its lock taken and its owner's pid checked gone.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::sys;

/// The first line of every journal: `{"event":"header","version":V,"pid":P,
/// "start_time":T,"created_unix":S}` (the `event` tag is the line enum's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Header {
    pub version: u32,
    pub pid: i32,
    #[serde(default)]
    pub start_time: Option<u64>,
    pub created_unix: u64,
}

/// Seconds since the epoch (0 if the clock is before it).
pub(crate) fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// Creates `PREFIX-PID-N.jsonl` in `dir` (mode 0600, the first free N) and takes its
/// exclusive lock: the owner's mark that it is alive. On failure, the path it was at and
/// the error.
pub(crate) fn create_locked(
    dir: &Path,
    prefix: &str,
    pid: i32,
) -> Result<(PathBuf, File), (PathBuf, io::Error)> {
    loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{prefix}-{pid}-{n}.jsonl"));
        match OpenOptions::new()
            .create_new(true)
            .append(true)
            .read(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                return match rustix::fs::flock(
                    &file,
                    rustix::fs::FlockOperation::NonBlockingLockExclusive,
                ) {
                    Ok(()) => Ok((path, file)),
                    Err(e) => Err((path, e.into())),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err((path, e)),
        }
    }
}

/// Makes `dir` (0700) when it is missing.
pub(crate) fn make_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The owner's journal: the locked file lines are appended to, until it is deleted.
#[derive(Debug)]
pub(crate) struct Writer {
    path: PathBuf,
    file: File,
    deleted: bool,
}

impl Writer {
    /// A journal made by [`create_locked`] in `dir`, its header line (`header` of this
    /// process's [`Header`] of format `version`) written.
    pub(crate) fn create<L: Serialize>(
        dir: &Path,
        prefix: &str,
        version: u32,
        header: impl FnOnce(Header) -> L,
    ) -> Result<Writer, (PathBuf, io::Error)> {
        let (pid, start_time) = sys::self_identity();
        let (path, file) = create_locked(dir, prefix, pid)?;
        let mut w = Writer {
            path,
            file,
            deleted: false,
        };
        let first = header(Header {
            version,
            pid,
            start_time,
            created_unix: now_unix(),
        });
        w.append(&first).map_err(|e| (w.path.clone(), e))?;
        Ok(w)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted
    }

    /// Appends one line (one `write()`); refused once the file is deleted.
    pub(crate) fn append<L: Serialize>(&mut self, line: &L) -> io::Result<()> {
        if self.deleted {
            return Err(io::Error::other(format!(
                "{} was already finished",
                self.path.display()
            )));
        }
        write_line(&mut self.file, line)
    }

    /// Deletes the file (once); true when it is gone.
    pub(crate) fn delete(&mut self) -> bool {
        if !self.deleted && fs::remove_file(&self.path).is_ok() {
            self.deleted = true;
        }
        self.deleted
    }
}

/// One line onto an append-only journal, in one `write()`.
pub(crate) fn write_line<L: Serialize>(file: &mut File, line: &L) -> io::Result<()> {
    let mut text = serde_json::to_string(line).map_err(io::Error::other)?;
    text.push('\n');
    file.write_all(text.as_bytes())
}

/// The lines of a journal's text that parse, in order, and how many did not (a write cut
/// short by a kill).
pub(crate) fn parse_lines<L: DeserializeOwned>(text: &str) -> (Vec<L>, usize) {
    let mut bad = 0;
    let lines = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).map_err(|_| bad += 1).ok())
        .collect();
    (lines, bad)
}

/// The whole of an open file, read from its start through the descriptor (not the path,
/// which may have been replaced since it was checked).
pub(crate) fn read_all(mut file: &File) -> io::Result<String> {
    file.seek(SeekFrom::Start(0))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// Why a dead owner's journal was not taken over.
#[derive(Debug)]
pub(crate) enum Skip {
    /// Its owner is alive (its pid with the recorded start time, or the lock is held).
    Live(Option<i32>),
    /// Not a journal, or unreadable.
    Unreadable(String),
    /// Someone other than the invoking user could have written it (see `trust`).
    Untrusted(String),
}

/// Who wrote a journal, as its text says: its format version, pid and the pid's start time.
pub(crate) struct Owner {
    pub version: Option<u32>,
    pub pid: Option<i32>,
    pub start_time: Option<u64>,
}

/// What a journal reader needs of its format to take a dead owner's file over.
pub(crate) struct Format<'a> {
    /// The format's name in messages ("state", "run-state").
    pub name: &'a str,
    /// The newest version this iolab reads.
    pub version: u32,
    /// The file's owner from its text.
    pub owner: &'a dyn Fn(&str) -> Owner,
    /// The checks of the open file (its metadata, from the descriptor) before it is read.
    pub trust: &'a dyn Fn(&Path, &fs::Metadata) -> Result<(), crate::trust::TrustError>,
}

/// A dead owner's journal, opened and locked, and its text read under the lock.
pub(crate) fn open_foreign(path: &Path, format: &Format) -> Result<(File, String), Skip> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| Skip::Unreadable(e.to_string()))?;
    let meta = file
        .metadata()
        .map_err(|e| Skip::Unreadable(e.to_string()))?;
    (format.trust)(path, &meta).map_err(|e| Skip::Untrusted(e.to_string()))?;
    let text = read_all(&file).map_err(|e| Skip::Unreadable(e.to_string()))?;
    let Owner {
        version,
        pid,
        start_time,
    } = (format.owner)(&text);
    if let Some(v) = version.filter(|v| *v > format.version) {
        return Err(Skip::Unreadable(format!(
            "{} format version {v} is newer than this iolab's ({})",
            format.name, format.version
        )));
    }
    let me = std::process::id() as i32;
    let owner_gone = pid.is_some_and(|p| p != me && !sys::proc_is(p, start_time));
    // The lock is on the open file: a helper the owner forked just before it was killed
    // holds it until it execs (which closes the descriptor). With the owner gone, wait a
    // little for that instead of calling the file live.
    let mut tries = if owner_gone { 40 } else { 1 };
    while rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        tries -= 1;
        if tries == 0 {
            return Err(Skip::Live(pid));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    if let Some(p) = pid {
        if p == me || sys::proc_is(p, start_time) {
            return Err(Skip::Live(Some(p)));
        }
    }
    // Re-read under the lock: the owner may have written more before dying.
    let text = read_all(&file).map_err(|e| Skip::Unreadable(e.to_string()))?;
    Ok((file, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "event", rename_all = "snake_case")]
    enum Line {
        Header(Header),
        Note { id: u64 },
    }

    #[test]
    fn a_header_line_keeps_its_format() {
        let h = Header {
            version: 1,
            pid: 7,
            start_time: Some(9),
            created_unix: 11,
        };
        let text = serde_json::to_string(&Line::Header(h.clone())).unwrap();
        assert_eq!(
            text,
            r#"{"event":"header","version":1,"pid":7,"start_time":9,"created_unix":11}"#
        );
        // A line cut short by a kill is counted, not read.
        let (lines, bad) =
            parse_lines::<Line>(&format!("{text}\n{{\"event\":\"note\",\"id\":3}}\n{{\"ev"));
        assert_eq!(lines, vec![Line::Header(h), Line::Note { id: 3 }]);
        assert_eq!(bad, 1);
    }
}
