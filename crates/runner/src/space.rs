//! Free space before writing: every workload that writes asks [`check`] (or
//! [`check_target`]) whether what it is about to put on the target's filesystem fits, with
//! a margin, before it creates anything. A refusal is a usage error naming the option that
//! sets the amount and giving the numbers (exit 2): filling a filesystem to ENOSPC would
//! harm every other process that writes there.
//!
//! What counts as room: the bytes available to this user (`f_bavail`; the filesystem's
//! reserve for root is left alone even for root), lowered by the user's and the group's
//! block quota where the kernel reports one (`quotactl_fd`; root is not held to quotas),
//! and free inodes where the filesystem counts them. What an existing file of iolab's
//! already occupies there (a test file written over again) needs no new room.
//!
//! The margin: the lesser of 5% of the filesystem and 1 GiB stays free for everyone else,
//! plus 1/64 of what is written for the filesystem's own metadata (extent trees,
//! directories, journal).

use std::fs;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use iolab_spec::format_bytes;

use crate::status::UsageError;

/// The most the margin keeps free for other processes.
pub const KEEP_FREE_MAX: u64 = 1 << 30;

/// What a workload is about to put on one filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need<'a> {
    /// The option that sets the amount, without dashes (`size`, `files`, `clients`).
    pub option: &'a str,
    /// Bytes on the filesystem at the workload's peak.
    pub bytes: u64,
    /// Files and directories at the workload's peak.
    pub files: u64,
    /// Bytes of `bytes` that files of iolab's already occupy there: they need no new room.
    pub already: u64,
    /// Where an input file sets the amount in place of the option (`FILE:LINE: KEY`), named
    /// instead of `--option`.
    pub at: Option<&'a str>,
}

impl<'a> Need<'a> {
    /// `bytes` in `files` new files, set by `option`.
    pub fn new(option: &'a str, bytes: u64, files: u64) -> Need<'a> {
        Need {
            option,
            bytes,
            files,
            already: 0,
            at: None,
        }
    }
}

/// The room on a filesystem, as this process may use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Size of the filesystem.
    pub total: u64,
    /// Bytes this user may still allocate (`f_bavail`).
    pub available: u64,
    /// Free inodes; `None` when the filesystem does not count them (btrfs reports 0 of 0).
    pub files_free: Option<u64>,
    /// Bytes the user's or group's block quota still allows, when one is set.
    pub quota_bytes: Option<u64>,
    /// Files the inode quota still allows, when one is set.
    pub quota_files: Option<u64>,
}

impl Room {
    /// The room on the filesystem holding `dir` (statvfs and quotas).
    pub fn of(dir: &Path) -> io::Result<Room> {
        let st = iolab_sys::statvfs(dir)?;
        let (quota_bytes, quota_files) = quota_left(dir);
        Ok(Room {
            total: st.total_bytes,
            available: st.available_bytes,
            files_free: (st.files > 0).then_some(st.files_free),
            quota_bytes,
            quota_files,
        })
    }

    /// Bytes that may be written: the available space, or the quota when it is lower.
    pub fn usable(&self) -> u64 {
        self.quota_bytes
            .map_or(self.available, |q| q.min(self.available))
    }
}

/// What iolab leaves free on a filesystem of `total` bytes when it writes `bytes` there.
pub fn margin(total: u64, bytes: u64) -> u64 {
    (total / 20).min(KEEP_FREE_MAX) + bytes / 64
}

/// Why a run does not fit on a filesystem ([`fits`]): what the refusal is about (`--size`
/// or a job file's place), what the run needs, what the filesystem has and iolab keeps, and
/// what to make smaller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoRoom {
    #[error(
        "{about}: the run needs {} on the filesystem of {}{already}: {limit}, and iolab keeps \
         {} of it free (the lesser of 5% of the filesystem and 1 GiB for other processes, plus \
         1/64 of what it writes for the filesystem's own metadata); give a smaller {smaller} \
         or a --target on another filesystem",
        format_bytes(*needs),
        place.display(),
        format_bytes(*margin)
    )]
    Bytes {
        about: String,
        needs: u64,
        place: PathBuf,
        /// ` (N of it already allocated there, so M more)`, or empty.
        already: String,
        /// What the filesystem (or the quota) has.
        limit: String,
        margin: u64,
        smaller: String,
    },
    #[error(
        "{about}: the run needs {files} files and directories on the filesystem of {}: it has \
         {free} free inodes{}, and iolab leaves {keep} of them free; give a smaller {smaller} \
         or a --target on another filesystem",
        place.display(),
        if *quota { " (counting your inode quota)" } else { "" }
    )]
    Inodes {
        about: String,
        files: u64,
        place: PathBuf,
        free: u64,
        quota: bool,
        keep: u64,
        smaller: String,
    },
}

/// Whether `need` fits in `room` with the margin; why not otherwise. `place` names the
/// filesystem in the message.
pub fn fits(room: &Room, need: &Need, place: &Path) -> Result<(), Box<NoRoom>> {
    let opt = need.option;
    // What the refusal is about, and what to make smaller.
    let (about, smaller) = match need.at {
        Some(at) => (at.to_string(), format!("{opt} there, a --{opt},")),
        None => (format!("--{opt}"), format!("--{opt}")),
    };
    let new_bytes = need.bytes.saturating_sub(need.already);
    let margin = margin(room.total, new_bytes);
    let usable = room.usable();
    let limit = if room.quota_bytes.is_some_and(|q| q < room.available) {
        format!("your disk quota there allows {}", format_bytes(usable))
    } else {
        format!("it has {} available", format_bytes(usable))
    };
    if new_bytes > 0 && new_bytes.saturating_add(margin) > usable {
        let already = if need.already > 0 {
            format!(
                " ({} of it already allocated there, so {} more)",
                format_bytes(need.already),
                format_bytes(new_bytes)
            )
        } else {
            String::new()
        };
        return Err(Box::new(NoRoom::Bytes {
            about,
            needs: need.bytes,
            place: place.to_path_buf(),
            already,
            limit,
            margin,
            smaller,
        }));
    }
    let files_free = match (room.files_free, room.quota_files) {
        (Some(f), Some(q)) => Some(f.min(q)),
        (f, q) => f.or(q),
    };
    if let Some(free) = files_free {
        // The same share of inodes is left for everyone else.
        let keep = (free / 20).min(10_000);
        if need.files.saturating_add(keep) > free {
            return Err(Box::new(NoRoom::Inodes {
                about,
                files: need.files,
                place: place.to_path_buf(),
                free,
                quota: room.quota_files.is_some(),
                keep,
                smaller,
            }));
        }
    }
    Ok(())
}

/// Refuses, as a usage error naming `need.option`, what does not fit on the filesystem of
/// `dir` (an existing directory). When the room cannot be read (statvfs fails), the check
/// says nothing and creating the files reports the real error.
pub fn check(dir: &Path, need: Need) -> Result<(), UsageError> {
    let place = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    match Room::of(dir) {
        Ok(room) => fits(&room, &need, &place).map_err(|m| match need.at {
            Some(_) => UsageError::general(m.to_string()),
            None => UsageError::option(need.option, m.to_string()),
        }),
        Err(_) => Ok(()),
    }
}

/// The check for a block target, sized by `--size` (`size`, or `default_size` when it is
/// not given): a directory gets a new file of that size, a path that does not exist becomes
/// one, an existing regular file is written over only when `writes` (its length when no
/// size is given; what its blocks already hold needs no new room). A block device needs no
/// room; anything else is left to the target's own checks.
pub fn check_target(
    target: &Path,
    size: Option<u64>,
    default_size: u64,
    writes: bool,
    size_at: Option<&str>,
) -> Result<(), UsageError> {
    let new_file = |dir: &Path| {
        let need = Need {
            at: size_at,
            ..Need::new("size", size.unwrap_or(default_size), 1)
        };
        check(dir, need)
    };
    match fs::metadata(target) {
        Ok(m) if m.is_dir() => new_file(target),
        Ok(m) if m.is_file() && writes => {
            let bytes = size.unwrap_or(m.len());
            let need = Need {
                already: allocated_bytes(&m).min(bytes),
                at: size_at,
                ..Need::new("size", bytes, 0)
            };
            check(target.parent().unwrap_or(Path::new("/")), need)
        }
        Ok(_) => Ok(()),
        Err(_) => new_file(
            target
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        ),
    }
}

/// Bytes allocated to a file (its blocks, not its length: a sparse file holds less).
pub fn allocated_bytes(m: &fs::Metadata) -> u64 {
    m.blocks().saturating_mul(512)
}

/// Bytes allocated under `path` (a file, or a directory tree walked without following
/// symbolic links or leaving its filesystem); 0 when it does not exist. For leftovers of
/// iolab's own that a run reuses (dbench's `clients/`).
pub fn allocated_under(path: &Path) -> u64 {
    let Ok(top) = fs::symlink_metadata(path) else {
        return 0;
    };
    let mut total = allocated_bytes(&top);
    if !top.is_dir() {
        return total;
    }
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            total = total.saturating_add(allocated_bytes(&m));
            if m.is_dir() && m.dev() == top.dev() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// What the user's and the group's quotas on the filesystem of `dir` still allow (bytes,
/// files), each the lesser of the two where both are set. `None` where no limit is set,
/// quotas are off, the kernel has no quota support, or iolab runs as root (root is not
/// held to quotas).
fn quota_left(dir: &Path) -> (Option<u64>, Option<u64>) {
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    if uid == 0 {
        return (None, None);
    }
    let Ok(f) = fs::File::open(dir) else {
        return (None, None);
    };
    let mut bytes: Option<u64> = None;
    let mut files: Option<u64> = None;
    for (kind, id) in [(USRQUOTA, uid), (GRPQUOTA, gid)] {
        let Some(q) = get_quota(&f, kind, id) else {
            continue;
        };
        let (b, n) = quota_room(&q);
        bytes = min_opt(bytes, b);
        files = min_opt(files, n);
    }
    (bytes, files)
}

const USRQUOTA: libc::c_int = 0;
const GRPQUOTA: libc::c_int = 1;
/// `QIF_DQBLKSIZE`: quota block limits count 1 KiB blocks.
const QUOTA_BLOCK: u64 = 1024;

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Room left under one quota record: (bytes, files), each `None` when that limit is unset.
fn quota_room(q: &libc::dqblk) -> (Option<u64>, Option<u64>) {
    let bytes = (q.dqb_bhardlimit > 0).then(|| {
        q.dqb_bhardlimit
            .saturating_mul(QUOTA_BLOCK)
            .saturating_sub(q.dqb_curspace)
    });
    let files = (q.dqb_ihardlimit > 0).then(|| q.dqb_ihardlimit.saturating_sub(q.dqb_curinodes));
    (bytes, files)
}

/// `quotactl_fd(Q_GETQUOTA)` for one user or group; `None` when quotas are not on or the
/// kernel does not know the call.
fn get_quota(f: &fs::File, kind: libc::c_int, id: u32) -> Option<libc::dqblk> {
    // SAFETY: an all-zero dqblk is a valid value of a plain C struct.
    let mut q: libc::dqblk = unsafe { std::mem::zeroed() };
    let cmd = (libc::Q_GETQUOTA << 8) | (kind & 0xff);
    // SAFETY: quotactl_fd reads nothing but the descriptor and writes one dqblk to `q`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_quotactl_fd,
            f.as_raw_fd(),
            cmd as libc::c_uint,
            id as libc::c_uint,
            &mut q as *mut libc::dqblk,
        )
    };
    (rc == 0).then_some(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn room(total: u64, available: u64) -> Room {
        Room {
            total,
            available,
            files_free: Some(1_000_000),
            quota_bytes: None,
            quota_files: None,
        }
    }

    #[test]
    fn the_margin_is_a_share_of_the_filesystem_capped_plus_metadata() {
        assert_eq!(margin(64 * MIB, 0), 64 * MIB / 20);
        assert_eq!(margin(1 << 40, 0), GIB);
        assert_eq!(margin(1 << 40, 64 * MIB), GIB + MIB);
    }

    #[test]
    fn what_fits_and_what_does_not() {
        let p = Path::new("/mnt");
        let r = room(100 * MIB, 50 * MIB);
        assert!(fits(&r, &Need::new("size", 40 * MIB, 1), p).is_ok());
        let e = fits(&r, &Need::new("size", 48 * MIB, 1), p)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--size: the run needs 48 MiB on the filesystem of /mnt"),
            "{e}"
        );
        assert!(e.contains("it has 50 MiB available"), "{e}");
        assert!(e.contains("keeps 5.75 MiB of it free"), "{e}");
        // A file of iolab's that already holds most of it needs only the rest.
        let reuse = Need {
            already: 40 * MIB,
            ..Need::new("size", 48 * MIB, 0)
        };
        assert!(fits(&r, &reuse, p).is_ok());
        // A huge request does not overflow.
        assert!(fits(&r, &Need::new("size", u64::MAX, 1), p).is_err());
    }

    #[test]
    fn a_quota_lower_than_the_free_space_decides() {
        let p = Path::new("/home");
        let r = Room {
            quota_bytes: Some(8 * MIB),
            ..room(GIB, 500 * MIB)
        };
        assert_eq!(r.usable(), 8 * MIB);
        let e = fits(&r, &Need::new("size", 16 * MIB, 1), p)
            .unwrap_err()
            .to_string();
        assert!(e.contains("your disk quota there allows 8 MiB"), "{e}");
    }

    #[test]
    fn inodes_are_counted_where_the_filesystem_counts_them() {
        let p = Path::new("/mnt");
        let r = Room {
            files_free: Some(1000),
            ..room(GIB, GIB)
        };
        let e = fits(&r, &Need::new("files", 0, 990), p)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--files: the run needs 990 files and directories"),
            "{e}"
        );
        assert!(fits(&r, &Need::new("files", 0, 900), p).is_ok());
        let btrfs = Room {
            files_free: None,
            ..r
        };
        assert!(fits(&btrfs, &Need::new("files", 0, 990), p).is_ok());
    }

    #[test]
    fn quota_records_read_in_kib_blocks() {
        // SAFETY: an all-zero dqblk is valid.
        let mut q: libc::dqblk = unsafe { std::mem::zeroed() };
        assert_eq!(quota_room(&q), (None, None));
        q.dqb_bhardlimit = 1024; // 1 MiB
        q.dqb_curspace = 256 * 1024;
        q.dqb_ihardlimit = 10;
        q.dqb_curinodes = 12;
        assert_eq!(quota_room(&q), (Some(768 * 1024), Some(0)));
    }

    #[test]
    fn allocation_of_a_sparse_file_and_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("sparse");
        fs::File::create(&f).unwrap().set_len(64 * MIB).unwrap();
        assert!(allocated_under(&f) < MIB);
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/data"), vec![7u8; 256 << 10]).unwrap();
        assert!(allocated_under(dir.path()) >= 256 << 10);
        assert_eq!(allocated_under(&dir.path().join("missing")), 0);
    }
}
