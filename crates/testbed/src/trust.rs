//! What `cleanup_all` may believe. A state file names things to unmount, detach and delete as
//! root, so one that anybody else could have written is not acted on at all, and a record is
//! acted on only while what it names still is what iolab recorded:
//!
//! - the state directory must be a real directory (not a symbolic link) owned by the
//!   invoking user (root, or the user running iolab) and writable by nobody else; the state
//!   file must be a regular file with one link, owned by that user and writable by nobody
//!   else (it is opened without following links, and checked on the open descriptor);
//! - a file or directory must have the device and inode recorded when iolab made it, or,
//!   for a record cut short before that, lie under a path component named `iolab-…`;
//! - a mount must still have the source and filesystem type recorded when it was mounted (a
//!   record cut short: the recorded source), on a mount point under an `iolab-…` directory;
//! - loop devices, knobs, btrfs registrations, cgroups, zfs pools and the zfs-fuse marker
//!   must name iolab's own images, cgroup, pool or directory (`iolab-…`); a loop device is
//!   detached only while its backing file is that image (checked when it is removed).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Why a state file, its directory or one of its records is not believed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The state directory could not be looked at.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("owned by uid {owner}, not by the user running iolab (uid {me})")]
    Owner { owner: u32, me: u32 },
    #[error("writable by others (mode {0:o})")]
    Writable(u32),
    #[error("not a directory (a symbolic link is not followed)")]
    NotDir,
    #[error("not a regular file")]
    NotFile,
    #[error("has {0} hard links")]
    Links(u64),
    /// A record that names something iolab did not make, or no longer what it made.
    #[error("{0}")]
    Record(String),
    /// A run's state file that is not believed, and why.
    #[error("state file {}: {source}; left alone", path.display())]
    StateFile {
        path: PathBuf,
        #[source]
        source: Box<TrustError>,
    },
    /// The directory of a run's state file that is not believed, and why.
    #[error("state directory {}: {source}; left alone", path.display())]
    StateDir {
        path: PathBuf,
        #[source]
        source: Box<TrustError>,
    },
}

use serde::{Deserialize, Serialize};

use crate::state::Resource;
use crate::sys;

/// What iolab saw of a resource right after making it, kept with its `done` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Observed {
    /// A file or directory (for a loop device: its image).
    Inode { dev: u64, ino: u64 },
    /// A mount as the mount table showed it.
    Mount { source: String, fstype: String },
}

/// What to record of `res`, now that it exists.
pub(crate) fn observe(res: &Resource) -> Option<Observed> {
    let inode = |p: &Path| {
        fs::symlink_metadata(p).ok().map(|m| Observed::Inode {
            dev: m.dev(),
            ino: m.ino(),
        })
    };
    match res {
        Resource::Dir { path } | Resource::File { path } => inode(path),
        Resource::LoopDevice { image, .. } => inode(image),
        Resource::Mount { target, .. } => sys::mount_at(target).map(|m| Observed::Mount {
            source: m.source,
            fstype: m.fstype,
        }),
        _ => None,
    }
}

/// The effective user id.
fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Whether `m` is owned by the invoking user and writable by nobody else.
fn owned_and_private(m: &fs::Metadata) -> Result<(), TrustError> {
    if m.uid() != me() {
        return Err(TrustError::Owner {
            owner: m.uid(),
            me: me(),
        });
    }
    if m.mode() & 0o022 != 0 {
        return Err(TrustError::Writable(m.mode() & 0o7777));
    }
    Ok(())
}

/// Whether state files in `dir` may be believed (see the module docs).
pub(crate) fn check_dir(dir: &Path) -> Result<(), TrustError> {
    let m = fs::symlink_metadata(dir)?;
    if !m.file_type().is_dir() {
        return Err(TrustError::NotDir);
    }
    owned_and_private(&m)
}

/// Whether the opened state file `m` may be believed.
pub(crate) fn check_file(m: &fs::Metadata) -> Result<(), TrustError> {
    if !m.file_type().is_file() {
        return Err(TrustError::NotFile);
    }
    if m.nlink() != 1 {
        return Err(TrustError::Links(m.nlink()));
    }
    owned_and_private(m)
}

/// Whether `path` is absolute, plain (no `.` or `..`) and lies in or is something named
/// `iolab-…`: a testbed's directory, image, cgroup or marker.
pub(crate) fn iolab_named(path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && path.components().any(|c| match c {
            Component::Normal(n) => n.to_string_lossy().starts_with("iolab-"),
            _ => false,
        })
}

/// Why `res` is not acted on, if it is not what iolab recorded (see the module docs);
/// `observed` is what its `done` record saw.
pub(crate) fn check_record(res: &Resource, observed: Option<&Observed>) -> Result<(), TrustError> {
    let named = |p: &Path, what: &str| {
        if iolab_named(p) {
            Ok(())
        } else {
            Err(TrustError::Record(format!(
                "{what} {} is not under a directory of iolab's (iolab-…)",
                p.display()
            )))
        }
    };
    match res {
        Resource::Dir { path } | Resource::File { path } => match observed {
            Some(Observed::Inode { dev, ino }) => match fs::symlink_metadata(path) {
                Ok(m) if (m.dev(), m.ino()) != (*dev, *ino) => Err(TrustError::Record(format!(
                    "{} is no longer the one iolab made (another file now has its name)",
                    path.display()
                ))),
                _ => Ok(()),
            },
            _ => named(path, "path"),
        },
        Resource::LoopDevice { image, .. } => match observed {
            Some(Observed::Inode { dev, ino }) => match fs::metadata(image) {
                Ok(m) if (m.dev(), m.ino()) != (*dev, *ino) => Err(TrustError::Record(format!(
                    "image {} is no longer the one iolab made",
                    image.display()
                ))),
                _ => Ok(()),
            },
            _ => named(image, "image"),
        },
        Resource::Knob { image, .. } => named(image, "image"),
        Resource::DeviceKnob { device, rdev, .. }
        | Resource::DeviceSignatures { device, rdev, .. }
        | Resource::DriveCache { device, rdev, .. } => {
            if device.starts_with("/dev/") && crate::device::is_device(device, rdev) {
                Ok(())
            } else {
                Err(TrustError::Record(format!(
                    "{} is no longer the block device {rdev} iolab recorded",
                    device.display()
                )))
            }
        }
        Resource::BtrfsDevices { images, .. } => images.iter().try_for_each(|i| named(i, "image")),
        Resource::Cgroup { path } => named(path, "cgroup"),
        Resource::ZfsDaemon { marker, .. } => named(Path::new(marker), "daemon marker"),
        Resource::EmuDaemon { dir, .. } => named(dir, "emulated disk directory"),
        Resource::ZfsPool { name } | Resource::ZfsDataset { name, .. } => {
            if name.starts_with("iolab-") {
                Ok(())
            } else {
                Err(TrustError::Record(format!(
                    "zfs {name} is not iolab's (iolab-…)"
                )))
            }
        }
        Resource::Mount { target, source } => {
            named(target, "mount point")?;
            let Some(now) = sys::mount_at(target) else {
                return Ok(()); // nothing mounted there: gone
            };
            let (want_source, want_type) = match observed {
                Some(Observed::Mount { source, fstype }) => (source.as_str(), Some(fstype)),
                // A record cut short: a bind mount of the directory onto itself shows the
                // source of the filesystem below, so only a device source can be compared.
                _ if Path::new(source) == target.as_path() => return Ok(()),
                _ => (source.as_str(), None),
            };
            if now.source != want_source || want_type.is_some_and(|t| *t != now.fstype) {
                return Err(TrustError::Record(format!(
                    "the mount on {} is of {} ({}), not the {}{} iolab mounted",
                    target.display(),
                    now.source,
                    now.fstype,
                    want_source,
                    want_type.map(|t| format!(" ({t})")).unwrap_or_default()
                )));
            }
            Ok(())
        }
        Resource::Hook { .. } => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iolab_names() {
        for p in [
            "/var/tmp/iolab-testbed-1-2-abc",
            "/var/tmp/iolab-testbed-1-2-abc/images/disk0.img",
            "/srv/img/iolab-testbed-1-2-abc-disk1.img",
            "/sys/fs/cgroup/blkio/iolab-testbed-1-2-abc",
        ] {
            assert!(iolab_named(Path::new(p)), "{p}");
        }
        for p in [
            "/etc/passwd",
            "relative/iolab-x",
            "/var/tmp/iolab-x/../../etc",
            "/home/u/iolab",
            "/",
        ] {
            assert!(!iolab_named(Path::new(p)), "{p}");
        }
    }

    #[test]
    fn a_file_record_must_still_name_the_same_inode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("made");
        fs::write(&p, "x").unwrap();
        let res = Resource::File { path: p.clone() };
        let seen = observe(&res).unwrap();
        assert!(check_record(&res, Some(&seen)).is_ok());
        // Without an observation, a path outside iolab's directories is not believed.
        assert!(check_record(&res, None)
            .unwrap_err()
            .to_string()
            .contains("not under"));
        // Another file put in its place (made while the first exists: another inode).
        fs::write(d.path().join("other"), "y").unwrap();
        fs::rename(d.path().join("other"), &p).unwrap();
        assert!(check_record(&res, Some(&seen))
            .unwrap_err()
            .to_string()
            .contains("no longer the one"));
    }

    #[test]
    fn private_directories_only() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        assert!(check_dir(d.path()).is_ok());
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_dir(d.path())
            .unwrap_err()
            .to_string()
            .contains("writable by others"));
        let link = d.path().join("link");
        std::os::unix::fs::symlink("/", &link).unwrap();
        assert!(check_dir(&link).is_err());
    }
}
