//! The state file: a JSON-lines journal of every resource a testbed creates, written before
//! each resource is created, so that whatever a killed process leaves behind can be found and
//! removed by [`crate::cleanup_all`].
//!
//! Lines (one JSON object each, `event` says which):
//! - `{"event":"header","version":1,"pid":P,"start_time":T,"created_unix":S}` first;
//! - `{"event":"intent","id":N,"resource":{...}}` before resource N is created;
//! - `{"event":"done","id":N,"resource":{...}}` once it exists (with what was learnt, e.g. the
//!   loop device name or the daemon pid);
//! - `{"event":"removed","id":N}` once it is gone again;
//! - `{"event":"cancelled","id":N}` when the creation failed without creating anything.
//!
//! Resources are removed in reverse `id` order. The owner holds an exclusive `flock` on its
//! file for its whole life; the file is deleted when nothing in it is left.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::error::TestbedError;
pub(crate) use crate::journal::Skip;
use crate::journal::{self, Header, Writer};
use crate::sys;
use crate::trust::{self, Observed};

/// Version of the state-file format.
pub const STATE_VERSION: u32 = 1;

/// Something a testbed created, as recorded in the state file. Removing a resource only ever
/// touches what the record names, and checks it is still iolab's (a loop device must still be
/// backed by the recorded image; a process must have the recorded start time or marker).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Resource {
    /// A directory iolab created. Removed with `rmdir` only (never recursively).
    Dir { path: PathBuf },
    /// A file iolab created (image, log).
    File { path: PathBuf },
    /// A loop device over `image`. `device` is unknown in the intent record: removal then
    /// detaches every loop device backed by `image`.
    LoopDevice {
        image: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        device: Option<PathBuf>,
    },
    /// A sysfs attribute of `device` (e.g. `queue/write_cache`) iolab changed; `previous` is
    /// written back while `device` is still backed by `image`.
    Knob {
        device: PathBuf,
        image: PathBuf,
        attr: String,
        previous: String,
    },
    /// A sysfs attribute of one of the user's devices (kind = "device"); `previous` is
    /// written back while `device` is still the block device `rdev` (`major:minor`).
    DeviceKnob {
        device: PathBuf,
        rdev: String,
        attr: String,
        previous: String,
    },
    /// The drive's own volatile write cache of one of the user's devices, set with `tool`
    /// (hdparm, sdparm or nvme); `previous` is written back while `device` is still `rdev`.
    DriveCache {
        device: PathBuf,
        rdev: String,
        tool: String,
        previous: bool,
    },
    /// The signatures a build's mkfs wrote on one of the user's devices (kind = "device"),
    /// recorded before mkfs runs (empty then) and listed once it has: teardown erases exactly
    /// these with `wipefs -o`; `iolab cleanup` never wipes and says how to.
    DeviceSignatures {
        device: PathBuf,
        rdev: String,
        #[serde(default)]
        signatures: Vec<crate::device::Signature>,
    },
    /// A blkio cgroup directory.
    Cgroup { path: PathBuf },
    /// A mount on `target` (a directory iolab created); `source` is the device, or the
    /// directory itself for the shared bind mount of a zfs testbed.
    Mount { target: PathBuf, source: String },
    /// btrfs member devices (attached to `images`, in the same order) registered with the
    /// kernel by mkfs; removal runs `btrfs device scan --forget` on those still attached.
    BtrfsDevices {
        devices: Vec<PathBuf>,
        images: Vec<PathBuf>,
    },
    /// A zfs-fuse daemon. `marker` is an argument only iolab's daemon has on its command line;
    /// pid and start time are recorded once it runs.
    ZfsDaemon {
        marker: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time: Option<u64>,
    },
    /// An emulated disk's daemon (`iolab emudisk serve --dir DIR`); `dir` is its directory
    /// (under an `iolab-…` directory), pid and start time are recorded once it runs. Its FUSE
    /// mount is a separate [`Resource::Mount`] recorded before it.
    EmuDaemon {
        dir: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        start_time: Option<u64>,
    },
    /// A zfs pool (created with cachefile=none: it vanishes with the daemon).
    ZfsPool { name: String },
    /// The zfs dataset workloads run in, mounted on `mountpoint`.
    ZfsDataset { name: String, mountpoint: PathBuf },
    /// The user's teardown hook (empty `command`: no hook, only a setup hook ran).
    Hook {
        command: String,
        cwd: PathBuf,
        env: Vec<(String, String)>,
    },
}

impl Resource {
    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            Resource::Dir { path } => format!("directory {}", path.display()),
            Resource::File { path } => format!("file {}", path.display()),
            Resource::LoopDevice { image, device } => match device {
                Some(d) => format!("loop device {} ({})", d.display(), image.display()),
                None => format!("loop device for {}", image.display()),
            },
            Resource::Knob {
                device,
                attr,
                previous,
                ..
            }
            | Resource::DeviceKnob {
                device,
                attr,
                previous,
                ..
            } => format!(
                "{attr} of {} (previous value '{previous}')",
                device.display()
            ),
            Resource::DriveCache {
                device, previous, ..
            } => format!(
                "drive write cache of {} (previous value {})",
                device.display(),
                if *previous { "on" } else { "off" }
            ),
            Resource::DeviceSignatures { device, .. } => {
                format!("signatures made on {}", device.display())
            }
            Resource::Cgroup { path } => format!("cgroup {}", path.display()),
            Resource::Mount { target, source } => {
                format!("mount of {source} on {}", target.display())
            }
            Resource::BtrfsDevices { devices, .. } => format!(
                "btrfs registration of {}",
                devices
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Resource::ZfsDaemon { pid, .. } => match pid {
                Some(p) => format!("zfs-fuse daemon (pid {p})"),
                None => "zfs-fuse daemon".to_string(),
            },
            Resource::EmuDaemon { dir, pid, .. } => match pid {
                Some(p) => format!("emulated disk daemon pid {p} ({})", dir.display()),
                None => format!("emulated disk daemon for {}", dir.display()),
            },
            Resource::ZfsPool { name } => format!("zfs pool {name}"),
            Resource::ZfsDataset { name, .. } => format!("zfs dataset {name}"),
            Resource::Hook { command, .. } => format!("teardown hook `{command}`"),
        }
    }
}

/// One line of a state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Line {
    Header(Header),
    Intent {
        id: u64,
        resource: Resource,
    },
    Done {
        id: u64,
        resource: Resource,
        /// What the resource looked like once made (its inode, its mount), which cleanup
        /// checks before it acts on the record.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        observed: Option<Observed>,
    },
    Removed {
        id: u64,
    },
    Cancelled {
        id: u64,
    },
}

/// What a state file says: its owner and the resources not yet removed (by id).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Journal {
    pub version: Option<u32>,
    pub pid: Option<i32>,
    pub start_time: Option<u64>,
    pub open: BTreeMap<u64, Resource>,
    /// What the `done` records saw of the open resources.
    pub observed: BTreeMap<u64, Observed>,
    /// Lines that could not be parsed (a write cut short by a kill).
    pub bad_lines: usize,
}

impl Journal {
    pub(crate) fn apply(&mut self, line: Line) {
        match line {
            Line::Header(h) => {
                self.version = Some(h.version);
                self.pid = Some(h.pid);
                self.start_time = h.start_time;
            }
            Line::Intent { id, resource } => {
                self.open.insert(id, resource);
            }
            Line::Done {
                id,
                resource,
                observed,
            } => {
                self.open.insert(id, resource);
                match observed {
                    Some(o) => self.observed.insert(id, o),
                    None => self.observed.remove(&id),
                };
            }
            Line::Removed { id } | Line::Cancelled { id } => {
                self.open.remove(&id);
                self.observed.remove(&id);
            }
        }
    }

    pub(crate) fn parse(text: &str) -> Journal {
        let (lines, bad_lines) = journal::parse_lines::<Line>(text);
        let mut j = Journal {
            bad_lines,
            ..Journal::default()
        };
        for l in lines {
            j.apply(l);
        }
        j
    }
}

/// A state file: the journal of one testbed. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct StateFile {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    journal: Writer,
    next_id: u64,
    open: BTreeMap<u64, Resource>,
    claimed: bool,
}

impl StateFile {
    /// Where state files go: `$IOLAB_STATE_DIR` when set (one machine, several independent
    /// setups: each test sandbox has its own, so one's `iolab cleanup` never meets another's
    /// state), else /run/iolab for root, else $XDG_RUNTIME_DIR/iolab.
    pub fn default_dir() -> Result<PathBuf, TestbedError> {
        if let Some(d) = std::env::var_os("IOLAB_STATE_DIR").filter(|d| !d.is_empty()) {
            let d = PathBuf::from(d);
            if !d.is_absolute() {
                return Err(TestbedError::State {
                    message: format!("IOLAB_STATE_DIR={} is not an absolute path", d.display()),
                });
            }
            return Ok(d);
        }
        if sys::is_root() && Path::new("/run").is_dir() {
            return Ok(PathBuf::from("/run/iolab"));
        }
        match std::env::var_os("XDG_RUNTIME_DIR") {
            Some(d) if !d.is_empty() => Ok(PathBuf::from(d).join("iolab")),
            _ => Err(TestbedError::State {
                message: "no state directory: not root and $XDG_RUNTIME_DIR is not set".into(),
            }),
        }
    }

    /// Creates a new state file `testbed-PID-N.jsonl` in `dir` (created 0700 if missing),
    /// locks it and writes the header.
    pub fn create(dir: &Path) -> Result<StateFile, TestbedError> {
        journal::make_dir(dir)
            .map_err(|e| TestbedError::io(format!("creating {}", dir.display()), e))?;
        // `iolab cleanup` believes only a private directory: a journal kept anywhere else
        // could not be cleaned up after a kill.
        trust::check_dir(dir).map_err(|why| TestbedError::State {
            message: format!("state directory {}: {why}", dir.display()),
        })?;
        let journal =
            Writer::create(dir, "testbed", STATE_VERSION, Line::Header).map_err(|(path, e)| {
                TestbedError::State {
                    message: format!("creating and locking {}: {e}", path.display()),
                }
            })?;
        let state = StateFile {
            inner: Arc::new(Mutex::new(Inner {
                journal,
                next_id: 1,
                open: BTreeMap::new(),
                claimed: false,
            })),
        };
        Ok(state)
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.lock().journal.path().to_path_buf()
    }

    /// Resources recorded and not yet removed, in creation order.
    pub fn open_resources(&self) -> Vec<(u64, Resource)> {
        self.lock()
            .open
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the file as used by a testbed (one testbed per state file).
    pub(crate) fn claim(&self) -> Result<(), TestbedError> {
        let mut i = self.lock();
        if i.claimed || i.journal.is_deleted() {
            return Err(TestbedError::State {
                message: format!(
                    "{} already belongs to a testbed; create one StateFile per testbed",
                    i.journal.path().display()
                ),
            });
        }
        i.claimed = true;
        Ok(())
    }

    fn append_locked(i: &mut Inner, line: &Line) -> Result<(), TestbedError> {
        let path = i.journal.path();
        if i.journal.is_deleted() {
            return Err(TestbedError::State {
                message: format!("{} was already finished", path.display()),
            });
        }
        let path = path.to_path_buf();
        i.journal
            .append(line)
            .map_err(|e| TestbedError::io(format!("writing {}", path.display()), e))
    }

    /// Records that `resource` is about to be created; returns its id.
    pub(crate) fn intent(&self, resource: &Resource) -> Result<u64, TestbedError> {
        let mut i = self.lock();
        let id = i.next_id;
        Self::append_locked(
            &mut i,
            &Line::Intent {
                id,
                resource: resource.clone(),
            },
        )?;
        i.next_id += 1;
        i.open.insert(id, resource.clone());
        Ok(id)
    }

    /// Records that resource `id` exists, as `resource` describes it now.
    pub(crate) fn done(&self, id: u64, resource: &Resource) -> Result<(), TestbedError> {
        let mut i = self.lock();
        Self::append_locked(
            &mut i,
            &Line::Done {
                id,
                resource: resource.clone(),
                observed: trust::observe(resource),
            },
        )?;
        i.open.insert(id, resource.clone());
        Ok(())
    }

    /// Records that resource `id` is gone (removed, or never created).
    pub(crate) fn removed(&self, id: u64, cancelled: bool) -> Result<(), TestbedError> {
        let mut i = self.lock();
        let line = if cancelled {
            Line::Cancelled { id }
        } else {
            Line::Removed { id }
        };
        Self::append_locked(&mut i, &line)?;
        i.open.remove(&id);
        Ok(())
    }

    /// Deletes the file if nothing is left in it; true if it was deleted.
    pub(crate) fn finish(&self) -> bool {
        let mut i = self.lock();
        if i.journal.is_deleted() {
            return true;
        }
        if !i.open.is_empty() {
            return false;
        }
        i.journal.delete()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // An unused or fully cleaned journal is noise; a journal with open resources stays for
        // cleanup_all.
        if self.open.is_empty() {
            self.journal.delete();
        }
    }
}

/// A dead owner's state file, opened and locked by a cleaner.
pub(crate) struct ForeignState {
    pub path: PathBuf,
    file: File,
    pub journal: Journal,
}

impl ForeignState {
    /// Opens `path` for cleaning: takes the lock (fails while the owner lives) and checks the
    /// owner's pid is gone.
    pub(crate) fn open(path: &Path) -> Result<ForeignState, Skip> {
        let owner = |text: &str| {
            let j = Journal::parse(text);
            journal::Owner {
                version: j.version,
                pid: j.pid.or_else(|| pid_from_name(path)),
                start_time: j.start_time,
            }
        };
        let trust = |_: &Path, meta: &std::fs::Metadata| trust::check_file(meta);
        let format = journal::Format {
            name: "state",
            version: STATE_VERSION,
            owner: &owner,
            trust: &trust,
        };
        let (file, text) = journal::open_foreign(path, &format)?;
        Ok(ForeignState {
            path: path.to_path_buf(),
            file,
            journal: Journal::parse(&text),
        })
    }

    /// Appends a `removed` line for `id`.
    pub(crate) fn removed(&mut self, id: u64) -> Result<(), TestbedError> {
        journal::write_line(&mut self.file, &Line::Removed { id })
            .map_err(|e| TestbedError::io(format!("writing {}", self.path.display()), e))?;
        self.journal.open.remove(&id);
        Ok(())
    }
}

/// The pid in a `testbed-PID-N.jsonl` file name.
pub(crate) fn pid_from_name(path: &Path) -> Option<i32> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("testbed-")?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// Whether `path` looks like a state file.
pub(crate) fn is_state_file_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("testbed-") && n.ends_with(".jsonl"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn journal_folds_events_and_ignores_a_cut_line() {
        let text = r#"{"event":"header","version":1,"pid":42,"start_time":7,"created_unix":1}
{"event":"intent","id":1,"resource":{"type":"dir","path":"/var/tmp/x"}}
{"event":"done","id":1,"resource":{"type":"dir","path":"/var/tmp/x"}}
{"event":"intent","id":2,"resource":{"type":"loop_device","image":"/var/tmp/x/a.img"}}
{"event":"done","id":2,"resource":{"type":"loop_device","image":"/var/tmp/x/a.img","device":"/dev/loop3"}}
{"event":"intent","id":3,"resource":{"type":"file","path":"/var/tmp/x/b"}}
{"event":"cancelled","id":3}
{"event":"intent","id":4,"resource":{"type":"mount","target":"/var/tmp/x/mnt","source":"/dev/loop3"}}
{"event":"removed","id":4}
{"event":"intent","id":5,"resource":{"type":"cgr"#;
        let j = Journal::parse(text);
        assert_eq!(j.pid, Some(42));
        assert_eq!(j.start_time, Some(7));
        assert_eq!(j.bad_lines, 1);
        assert_eq!(j.open.len(), 2);
        assert_eq!(
            j.open[&2],
            Resource::LoopDevice {
                image: "/var/tmp/x/a.img".into(),
                device: Some("/dev/loop3".into())
            }
        );
    }

    #[test]
    fn state_file_lifecycle() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateFile::create(dir.path()).unwrap();
        let path = s.path();
        assert!(is_state_file_name(&path));
        assert_eq!(pid_from_name(&path), Some(std::process::id() as i32));
        s.claim().unwrap();
        assert!(s.claim().is_err());
        let r = Resource::Dir {
            path: "/nonexistent/x".into(),
        };
        let id = s.intent(&r).unwrap();
        s.done(id, &r).unwrap();
        // A live owner's file is not taken over.
        assert!(matches!(ForeignState::open(&path), Err(Skip::Live(_))));
        assert!(!s.finish());
        s.removed(id, false).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4);
        assert!(Journal::parse(&text).open.is_empty());
        assert!(s.finish());
        assert!(!path.exists());
        // An unused state file disappears when dropped.
        let s2 = StateFile::create(dir.path()).unwrap();
        let p2 = s2.path();
        assert!(p2.exists());
        drop(s2);
        assert!(!p2.exists());
    }
}
