//! Write-safety checks: whether a block device may be written or a regular file overwritten.
//!
//! The rule: a block device is written only with `--allow-destroy-device`, and never while it or
//! any of its partitions is mounted or otherwise in use (holders such as dm/md, btrfs membership,
//! swap, a loop device backed by it, or any other exclusive opener), nor while it carries a
//! filesystem or partition-table signature. Reading a device needs no flag. A regular file that
//! iolab did not create is overwritten only with `--allow-overwrite-file`, and never while
//! something holds it ([`file_holders`]: a loop device it backs, an active swap file, another
//! process writing it), whatever the flag.
//!
//! [`check_device_writable`] runs the checks from the most specific reason to the least, so the
//! error names the actual blocker: mounts (by `major:minor` from `/proc/self/mountinfo`, plus the
//! mount source for filesystems such as btrfs that report an anonymous device number), holders,
//! swap, btrfs membership, loop backing, an `O_EXCL` open (catches mounts in other mount namespaces
//! and any other kernel claim), signatures, and only then the missing flag — so a user is never
//! told to add `--allow-destroy-device` for a device that would be refused anyway.
//!
//! These checks are a point-in-time snapshot. Callers that go on to write a device should open it
//! with `O_EXCL` too, which keeps the kernel from mounting or claiming it during the run; files
//! iolab creates should be created with `O_CREAT | O_EXCL` (`create_new`).

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use iolab_sys::loopdev::{self, FileId};

/// The command-line flag that permits writing (destroying) a block device.
pub const ALLOW_DESTROY_DEVICE_FLAG: &str = "--allow-destroy-device";
/// The command-line flag that permits overwriting an existing regular file.
pub const ALLOW_OVERWRITE_FILE_FLAG: &str = "--allow-overwrite-file";
/// How much of the start of a device the built-in magic checks read.
pub const PROBE_LEN: usize = 1 << 20;

/// Why a target may not be written.
#[derive(Debug)]
pub enum SafetyError {
    /// The target is a block device and `--allow-destroy-device` was not given.
    NotAllowed { device: PathBuf },
    /// `device` (the target or one of its partitions) is mounted at `mountpoint`.
    Mounted {
        device: PathBuf,
        mountpoint: PathBuf,
    },
    /// `device` (the target or one of its partitions) is in use by `holder`.
    InUse { device: PathBuf, holder: String },
    /// The target carries a signature of `kind` (e.g. "ext4 filesystem", "GPT partition table")
    /// at byte `offset`; the offset is `None` only when blkid found a signature that the built-in
    /// checks cannot locate (e.g. one stored at the end of the device).
    Signature {
        device: PathBuf,
        kind: String,
        offset: Option<u64>,
    },
    /// The regular file exists and `--allow-overwrite-file` was not given.
    ExistingFile { path: PathBuf },
    /// The regular file is held: it backs a loop device, is an active swap file, or another
    /// process has it open for writing. Refused even with `--allow-overwrite-file`.
    FileInUse { path: PathBuf, holders: Vec<String> },
    /// Checking failed, or the target is not what the check applies to.
    Io { path: PathBuf, source: io::Error },
}

impl fmt::Display for SafetyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SafetyError::NotAllowed { device } => write!(
                f,
                "{} is a block device; writing to it destroys all data on it. \
                 Pass {ALLOW_DESTROY_DEVICE_FLAG} to let iolab overwrite the device \
                 (reading a device needs no flag)",
                device.display()
            ),
            SafetyError::Mounted { device, mountpoint } => write!(
                f,
                "{} is mounted at {}; iolab never writes to a mounted device \
                 or a device with a mounted partition",
                device.display(),
                mountpoint.display()
            ),
            SafetyError::InUse { device, holder } => write!(
                f,
                "{} is in use ({holder}); iolab never writes to a device that is in use",
                device.display()
            ),
            SafetyError::Signature {
                device,
                kind,
                offset,
            } => {
                write!(f, "{} holds a signature: {kind}", device.display())?;
                match offset {
                    Some(off) => write!(f, " (magic at byte offset {off})")?,
                    None => write!(f, " (reported by blkid)")?,
                }
                write!(
                    f,
                    "; iolab never writes to a device holding a filesystem, partition table \
                     or volume signature, even with {ALLOW_DESTROY_DEVICE_FLAG}. If its contents \
                     are truly disposable, erase the signatures first (e.g. `wipefs -a {}`)",
                    device.display()
                )
            }
            SafetyError::ExistingFile { path } => write!(
                f,
                "{} already exists and was not created by iolab; pass \
                 {ALLOW_OVERWRITE_FILE_FLAG} to let iolab overwrite it",
                path.display()
            ),
            SafetyError::FileInUse { path, holders } => write!(
                f,
                "{} is in use: {}; iolab never writes to a file the kernel or another \
                 program holds, even with {ALLOW_OVERWRITE_FILE_FLAG}",
                path.display(),
                holders.join("; ")
            ),
            SafetyError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for SafetyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SafetyError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> SafetyError + '_ {
    move |source| SafetyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

/// Whether `path` (following symlinks) is a block device. A missing path is an error.
pub fn is_block_device(path: &Path) -> io::Result<bool> {
    Ok(fs::metadata(path)?.file_type().is_block_device())
}

pub use iolab_sys::device_size;

/// Decides whether iolab may write the block device at `path` (symlinks such as
/// `/dev/disk/by-id/…` are followed). See the module docs for the rule and check order.
pub fn check_device_writable(path: &Path, allow_destroy: bool) -> Result<(), SafetyError> {
    let meta = fs::metadata(path).map_err(io_at(path))?;
    if !meta.file_type().is_block_device() {
        return Err(io_at(path)(invalid("not a block device")));
    }
    let target = fs::canonicalize(path).map_err(io_at(path))?;
    let members = device_and_partitions(&target, meta.rdev())?;

    check_mounts(&members)?;
    check_holders(&members)?;
    check_swaps(&members)?;
    check_btrfs_members(&members)?;
    check_loop_backing(&members)?;
    check_exclusive_open(&members)?;
    if let Some(sig) = probe_signature(&target).map_err(io_at(&target))? {
        return Err(SafetyError::Signature {
            device: target,
            kind: sig.kind,
            offset: sig.offset,
        });
    }
    if !allow_destroy {
        return Err(SafetyError::NotAllowed { device: target });
    }
    Ok(())
}

/// Decides whether iolab may write a regular file at `path`. A missing path is fine; an existing
/// regular file (also through a symlink) is refused while something holds it
/// ([`file_holders`]: [`SafetyError::FileInUse`], whatever the flag) and otherwise needs
/// `allow_overwrite`; anything else that exists (directory, device, dangling symlink, …) is
/// refused with [`SafetyError::Io`].
pub fn check_regular_file_overwrite(path: &Path, allow_overwrite: bool) -> Result<(), SafetyError> {
    let lmeta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_at(path)(e)),
    };
    let meta = if lmeta.file_type().is_symlink() {
        match fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(io_at(path)(invalid(
                    "is a dangling symbolic link; refusing to create a file through it",
                )))
            }
            Err(e) => return Err(io_at(path)(e)),
        }
    } else {
        lmeta
    };
    let ft = meta.file_type();
    if ft.is_file() {
        let holders = file_holders(&meta);
        if !holders.is_empty() {
            return Err(SafetyError::FileInUse {
                path: path.to_path_buf(),
                holders,
            });
        }
        return if allow_overwrite {
            Ok(())
        } else {
            Err(SafetyError::ExistingFile {
                path: path.to_path_buf(),
            })
        };
    }
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else {
        "a special file"
    };
    Err(io_at(path)(invalid(format!(
        "exists and is {what}, not a regular file"
    ))))
}

/// What holds the regular file `meta` describes, each named for the message: the loop
/// devices it backs (attached, mounted or not), an active swap area in it (`/proc/swaps`),
/// and the other processes that have it open for writing (`/proc/PID/fd` with the access
/// mode from `/proc/PID/fdinfo`; as another user only your own processes can be seen).
/// Files are compared by device and inode number, never by path. Empty when nothing holds it.
pub fn file_holders(meta: &fs::Metadata) -> Vec<String> {
    let id = FileId::from_meta(meta);
    let mut holders: Vec<String> = loopdev::backed_by(id)
        .into_iter()
        .map(|l| format!("it backs loop device {}", l.dev_path().display()))
        .collect();
    holders.extend(swap_files(id));
    holders.extend(lasting_writers(id));
    holders
}

/// The active swap areas that are the file `id`.
fn swap_files(id: FileId) -> Vec<String> {
    let Ok(text) = fs::read_to_string("/proc/swaps") else {
        return Vec::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(unescape_octal)
        .filter(|name| FileId::of(Path::new(name)).is_ok_and(|f| f == id))
        .map(|name| format!("it is an active swap area ({name}, listed in /proc/swaps)"))
        .collect()
}

/// The processes other than this one that have the block device (or file) at `path` open
/// for writing, and keep it open ([`lasting_writers`]), each said as a reason; empty when
/// none does or `path` cannot be read.
pub fn device_writers(path: &Path) -> Vec<String> {
    FileId::of(path).map(lasting_writers).unwrap_or_default()
}

/// How long [`lasting_writers`] keeps looking, and how often.
const WRITER_LOOKS: (Duration, Duration) = (Duration::from_secs(2), Duration::from_millis(100));

/// The writers of `id` ([`writers`]) that are there at every look until none is, or for
/// [`WRITER_LOOKS`]: a program that opens every device for a moment (`losetup` looking for
/// a free loop device, udev's probe after a change) holds none of them in use, and one
/// look can catch it there. A process that holds the file all along is named.
fn lasting_writers(id: FileId) -> Vec<String> {
    let (window, every) = WRITER_LOOKS;
    let start = std::time::Instant::now();
    let mut seen = writers(id);
    while !seen.is_empty() && start.elapsed() < window {
        std::thread::sleep(every);
        let now = writers(id);
        seen.retain(|w| now.contains(w));
    }
    seen
}

/// The processes other than this one that have the file `id` open for writing.
fn writers(id: FileId) -> Vec<String> {
    let me = std::process::id().to_string();
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if pid == me || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue; // gone, or another user's
        };
        for fd in fds.flatten() {
            if !fs::metadata(fd.path()).is_ok_and(|m| FileId::from_meta(&m) == id) {
                continue;
            }
            let fdinfo = p.path().join("fdinfo").join(fd.file_name());
            if opened_for_writing(&fs::read_to_string(fdinfo).unwrap_or_default()) {
                let comm = fs::read_to_string(p.path().join("comm")).unwrap_or_default();
                out.push(format!(
                    "process {pid} ({}) has it open for writing",
                    comm.trim()
                ));
                break;
            }
        }
    }
    out
}

/// Whether an `fdinfo` text's `flags:` (octal) open the file for writing.
fn opened_for_writing(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        .is_some_and(|flags| flags & libc::O_ACCMODE as u32 != libc::O_RDONLY as u32)
}

/// The partitions of the block device at `path`, as `/dev/<name>` paths ordered by partition
/// number (empty for a partition or an unpartitioned device). Read from sysfs: the children of
/// `/sys/class/block/<name>/` that have a `partition` file.
pub fn partitions(path: &Path) -> io::Result<Vec<PathBuf>> {
    let meta = fs::metadata(path)?;
    if !meta.file_type().is_block_device() {
        return Err(invalid(format!("{} is not a block device", path.display())));
    }
    let sys = sysfs_dir(meta.rdev())?;
    Ok(partitions_in(&sys)?.into_iter().map(|m| m.path).collect())
}

// ---------------------------------------------------------------------------------------------
// The device and its partitions.

/// One block device taking part in a check: the target itself or one of its partitions.
struct Member {
    path: PathBuf,
    name: String,
    rdev: u64,
    sys: PathBuf,
}

fn parse_majmin(s: &str) -> Option<u64> {
    let (maj, min) = s.trim().split_once(':')?;
    Some(rustix::fs::makedev(maj.parse().ok()?, min.parse().ok()?))
}

fn sysfs_dir(rdev: u64) -> io::Result<PathBuf> {
    let link = format!(
        "/sys/dev/block/{}:{}",
        rustix::fs::major(rdev),
        rustix::fs::minor(rdev)
    );
    fs::canonicalize(&link).map_err(|e| io::Error::new(e.kind(), format!("{link}: {e}")))
}

fn device_and_partitions(target: &Path, rdev: u64) -> Result<Vec<Member>, SafetyError> {
    let sys = sysfs_dir(rdev).map_err(io_at(target))?;
    let name = sys
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut members = vec![Member {
        path: target.to_path_buf(),
        name,
        rdev,
        sys: sys.clone(),
    }];
    members.extend(partitions_in(&sys).map_err(io_at(&sys))?);
    Ok(members)
}

fn partitions_in(sys: &Path) -> io::Result<Vec<Member>> {
    let mut parts = Vec::new();
    for entry in fs::read_dir(sys)? {
        let dir = entry?.path();
        let number = match fs::read_to_string(dir.join("partition")) {
            Ok(s) => s.trim().parse::<u32>().unwrap_or(u32::MAX),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let rdev = parse_majmin(&fs::read_to_string(dir.join("dev"))?)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad sysfs dev file"))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let devname = fs::read_to_string(dir.join("uevent"))
            .ok()
            .and_then(|u| {
                u.lines()
                    .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_owned))
            })
            .unwrap_or_else(|| name.clone());
        parts.push((
            number,
            Member {
                path: Path::new("/dev").join(devname),
                name,
                rdev,
                sys: dir,
            },
        ));
    }
    parts.sort_by_key(|(n, _)| *n);
    Ok(parts.into_iter().map(|(_, m)| m).collect())
}

fn block_rdev(path: &Path) -> Option<u64> {
    let meta = fs::metadata(path).ok()?;
    meta.file_type().is_block_device().then(|| meta.rdev())
}

/// The member a device path (from mountinfo, /proc/swaps, …) refers to. Only `/dev/…` paths are
/// stat'ed, so a source on a hung network filesystem cannot block the check.
fn member_for_path<'a>(members: &'a [Member], path: &str) -> Option<&'a Member> {
    if !path.starts_with("/dev/") {
        return None;
    }
    let rdev = block_rdev(Path::new(path))?;
    members.iter().find(|m| m.rdev == rdev)
}

// ---------------------------------------------------------------------------------------------
// In-use checks.

use iolab_env::unescape_octal;

fn check_mounts(members: &[Member]) -> Result<(), SafetyError> {
    let path = Path::new("/proc/self/mountinfo");
    let text = fs::read_to_string(path).map_err(io_at(path))?;
    for m in iolab_env::parse_mountinfo(&text) {
        // Block-backed filesystems report their device's number; btrfs (and others) report an
        // anonymous 0:N number, so the mount source is checked too.
        let dev = rustix::fs::makedev(m.dev.0, m.dev.1);
        let hit = members
            .iter()
            .find(|mem| mem.rdev == dev)
            .or_else(|| member_for_path(members, &m.source));
        if let Some(mem) = hit {
            return Err(SafetyError::Mounted {
                device: mem.path.clone(),
                mountpoint: PathBuf::from(m.mount_point),
            });
        }
    }
    Ok(())
}

fn check_holders(members: &[Member]) -> Result<(), SafetyError> {
    for mem in members {
        let dir = mem.sys.join("holders");
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_at(&dir)(e)),
        };
        let mut holders = Vec::new();
        for entry in entries {
            let name = entry.map_err(io_at(&dir))?.file_name();
            let name = name.to_string_lossy();
            let class = Path::new("/sys/class/block").join(&*name);
            holders.push(if let Ok(dm) = fs::read_to_string(class.join("dm/name")) {
                format!("{name} (device-mapper {})", dm.trim())
            } else if class.join("md").exists() {
                format!("{name} (md RAID)")
            } else {
                name.into_owned()
            });
        }
        if !holders.is_empty() {
            holders.sort();
            return Err(SafetyError::InUse {
                device: mem.path.clone(),
                holder: format!("held by {}", holders.join(", ")),
            });
        }
    }
    Ok(())
}

fn check_swaps(members: &[Member]) -> Result<(), SafetyError> {
    let path = Path::new("/proc/swaps");
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()), // no swap support
        Err(e) => return Err(io_at(path)(e)),
    };
    for line in text.lines().skip(1) {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if let Some(mem) = member_for_path(members, &unescape_octal(name)) {
            return Err(SafetyError::InUse {
                device: mem.path.clone(),
                holder: "active swap area, listed in /proc/swaps".into(),
            });
        }
    }
    Ok(())
}

/// A mounted btrfs lists all its member devices under /sys/fs/btrfs/<fsid>/devices/, while
/// mountinfo names only one of them.
fn check_btrfs_members(members: &[Member]) -> Result<(), SafetyError> {
    let Ok(filesystems) = fs::read_dir("/sys/fs/btrfs") else {
        return Ok(()); // btrfs not loaded
    };
    for fsdir in filesystems.flatten() {
        let Ok(devices) = fs::read_dir(fsdir.path().join("devices")) else {
            continue; // e.g. /sys/fs/btrfs/features
        };
        for dev in devices.flatten() {
            let name = dev.file_name();
            if let Some(mem) = members.iter().find(|m| *m.name == *name) {
                return Err(SafetyError::InUse {
                    device: mem.path.clone(),
                    holder: format!(
                        "member of mounted btrfs filesystem {}",
                        fsdir.file_name().to_string_lossy()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A loop device whose backing file is this device does not show up as a holder.
fn check_loop_backing(members: &[Member]) -> Result<(), SafetyError> {
    let Ok(devices) = fs::read_dir("/sys/class/block") else {
        return Ok(());
    };
    for dev in devices.flatten() {
        let Ok(backing) = fs::read_to_string(dev.path().join("loop/backing_file")) else {
            continue;
        };
        let backing = backing.trim_end_matches('\n');
        let backing = backing.strip_suffix(" (deleted)").unwrap_or(backing);
        if let Some(mem) = member_for_path(members, backing) {
            return Err(SafetyError::InUse {
                device: mem.path.clone(),
                holder: format!("backing device of {}", dev.file_name().to_string_lossy()),
            });
        }
    }
    Ok(())
}

/// The kernel refuses an `O_EXCL` open of a block device with EBUSY while anything has claimed
/// it: a mount (in any mount namespace), swap, md, dm, btrfs, … — the catch-all after the
/// specific checks.
fn check_exclusive_open(members: &[Member]) -> Result<(), SafetyError> {
    for mem in members {
        match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_EXCL)
            .open(&mem.path)
        {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(SafetyError::InUse {
                    device: mem.path.clone(),
                    holder: "claimed by the kernel: an exclusive open fails with EBUSY \
                             (mounted in another mount namespace, or held by a driver)"
                        .into(),
                })
            }
            Err(e) => return Err(io_at(&mem.path)(e)),
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Signatures.

/// A signature found on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// What it is, e.g. "ext4 filesystem", "DOS/MBR partition table", "LUKS".
    pub kind: String,
    /// Byte offset of the magic, when known.
    pub offset: Option<u64>,
}

/// A match of the built-in magic table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MagicHit {
    /// What it is, e.g. "xfs filesystem".
    pub kind: &'static str,
    /// Byte offset of the magic in the probed buffer.
    pub offset: u64,
    blkid_types: &'static [&'static str],
}

/// Where a magic may sit: at any of a list of offsets, or every `step` bytes in `start..end`.
enum Where {
    At(&'static [usize]),
    Every(usize, usize, usize),
}
use Where::{At, Every};

/// Extra validation at a magic's offset: the (possibly refined) kind, or `None` to reject.
type Check = fn(&[u8], usize) -> Option<&'static str>;

struct Magic {
    kind: &'static str,
    magic: &'static [u8],
    at: Where,
    check: Option<Check>,
    /// The blkid TYPE / PTTYPE names of the same thing.
    blkid: &'static [&'static str],
}

const fn sig(
    kind: &'static str,
    magic: &'static [u8],
    at: Where,
    blkid: &'static [&'static str],
) -> Magic {
    Magic {
        kind,
        magic,
        at,
        check: None,
        blkid,
    }
}

impl Magic {
    const fn with(self, check: Check) -> Magic {
        Magic {
            check: Some(check),
            ..self
        }
    }
}

/// The swap signature ends the first page: 4, 8, 16 or 64 KiB pages.
const SWAP_AT: Where = At(&[4086, 8182, 16374, 65526]);
/// The uberblock rings of zfs labels 0 and 1.
const ZFS_RINGS: Where = Every(128 << 10, 512 << 10, 1 << 10);
const EXT: &[&str] = &["ext2", "ext3", "ext4", "ext4dev", "jbd"];

/// Filesystems and volumes first, partition tables last (a GPT disk also has an MBR, and FAT/NTFS
/// boot sectors end in 0x55AA too). md 0.90/1.0 superblocks and backup GPT headers sit at the end
/// of the device and are left to blkid.
#[rustfmt::skip]
const MAGICS: &[Magic] = &[
    sig("ext2/3/4 filesystem", &[0x53, 0xef], At(&[1080]), EXT).with(check_ext),
    sig("xfs filesystem", b"XFSB", At(&[0]), &["xfs"]),
    sig("btrfs filesystem", b"_BHRfS_M", At(&[65600]), &["btrfs"]),
    sig("swap", b"SWAPSPACE2", SWAP_AT, &["swap"]),
    sig("swap", b"SWAP-SPACE", SWAP_AT, &["swap"]),
    sig("LUKS", b"LUKS\xba\xbe", At(&[0]), &["crypto_LUKS"]),
    sig("Linux RAID member", &[0xfc, 0x4e, 0x2b, 0xa9], At(&[0, 4096]), &["linux_raid_member"]),
    sig("LVM2 member", b"LABELONE", At(&[0, 512, 1024, 1536]), &["LVM2_member"]).with(check_lvm2),
    sig("zfs member", &0x00ba_b10c_u64.to_le_bytes(), ZFS_RINGS, &["zfs_member"]),
    sig("zfs member", &0x00ba_b10c_u64.to_be_bytes(), ZFS_RINGS, &["zfs_member"]),
    sig("vfat filesystem", b"FAT", At(&[54, 82]), &["vfat"]).with(check_boot_sector),
    sig("ntfs filesystem", b"NTFS    ", At(&[3]), &["ntfs"]),
    sig("exfat filesystem", b"EXFAT   ", At(&[3]), &["exfat"]),
    sig("iso9660 filesystem", b"CD001", At(&[32769]), &["iso9660", "udf"]),
    sig("GPT partition table", b"EFI PART", At(&[512, 4096]), &["gpt", "PMBR"]),
    sig("DOS/MBR partition table", &[0x55, 0xaa], At(&[510]), &["dos", "PMBR"]).with(check_mbr),
];

fn le32(buf: &[u8], off: usize) -> u32 {
    buf.get(off..off + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn check_ext(buf: &[u8], magic_off: usize) -> Option<&'static str> {
    let sb = magic_off.checked_sub(0x38)?; // s_magic is at 0x38 in the superblock
    if le32(buf, sb + 0x18) > 6 {
        return None; // s_log_block_size: blocks are 1 KiB..64 KiB
    }
    let (compat, incompat, ro_compat) = (
        le32(buf, sb + 0x5c),
        le32(buf, sb + 0x60),
        le32(buf, sb + 0x64),
    );
    const JOURNAL_DEV: u32 = 0x8;
    const EXT3_INCOMPAT: u32 = 0x2 | 0x4 | 0x10; // filetype, recover, meta_bg
    const EXT3_RO_COMPAT: u32 = 0x1 | 0x2 | 0x4; // sparse_super, large_file, btree_dir
    Some(if incompat & JOURNAL_DEV != 0 {
        "ext3/4 external journal"
    } else if incompat & !EXT3_INCOMPAT != 0 || ro_compat & !EXT3_RO_COMPAT != 0 {
        "ext4 filesystem"
    } else if compat & 0x4 != 0 {
        "ext3 filesystem" // has_journal
    } else {
        "ext2 filesystem"
    })
}

fn check_lvm2(buf: &[u8], off: usize) -> Option<&'static str> {
    (buf.get(off + 24..off + 32)? == b"LVM2 001").then_some("LVM2 member")
}

fn check_boot_sector(buf: &[u8], _off: usize) -> Option<&'static str> {
    (buf.get(510..512)? == [0x55, 0xaa]).then_some("vfat filesystem")
}

fn check_mbr(buf: &[u8], _off: usize) -> Option<&'static str> {
    let table = buf.get(446..510)?;
    let mut used = false;
    let mut protective = false;
    for entry in table.chunks_exact(16) {
        if entry[0] != 0 && entry[0] != 0x80 {
            return None; // boot indicator must be 0x00 or 0x80
        }
        let sectors = le32(entry, 12);
        if entry[4] != 0 && sectors != 0 {
            used = true;
            protective |= entry[4] == 0xee;
        }
    }
    match (used, protective) {
        (false, _) => None,
        (true, true) => Some("GPT partition table (protective MBR)"),
        (true, false) => Some("DOS/MBR partition table"),
    }
}

/// Runs the built-in magic table over `buf`, the start of a device (see [`PROBE_LEN`]). Returns
/// every match, most specific (filesystems, volumes) first and partition tables last.
pub fn scan_magic(buf: &[u8]) -> Vec<MagicHit> {
    let mut hits = Vec::new();
    for m in MAGICS {
        let (list, range, step) = match m.at {
            At(list) => (list, 0..0, 1),
            Every(start, end, step) => (&[][..], start..end, step),
        };
        for off in list.iter().copied().chain(range.step_by(step)) {
            if buf.get(off..off + m.magic.len()) != Some(m.magic) {
                continue;
            }
            let kind = match m.check {
                Some(check) => match check(buf, off) {
                    Some(kind) => kind,
                    None => continue,
                },
                None => m.kind,
            };
            hits.push(MagicHit {
                kind,
                offset: off as u64,
                blkid_types: m.blkid,
            });
            break; // one hit per table entry is enough
        }
    }
    hits
}

/// What `blkid -p` said about a device.
#[derive(Debug, PartialEq)]
enum Blkid {
    Nothing,
    Found { type_name: String, kind: String },
    Ambivalent,
}

fn blkid_kind(type_name: &str, usage: Option<&str>) -> String {
    match (type_name, usage) {
        ("swap", _) => "swap".into(),
        ("crypto_LUKS", _) => "LUKS".into(),
        ("zfs_member", _) => "zfs member".into(),
        ("LVM2_member", _) => "LVM2 member".into(),
        ("linux_raid_member", _) => "Linux RAID member".into(),
        (t, Some("filesystem")) => format!("{t} filesystem"),
        (t, Some("raid")) => format!("{t} RAID member"),
        (t, Some("crypto")) => format!("{t} encrypted volume"),
        (t, _) => t.into(),
    }
}

fn pttype_kind(pttype: &str) -> String {
    match pttype {
        "dos" => "DOS/MBR partition table".into(),
        "gpt" => "GPT partition table".into(),
        "PMBR" => "GPT partition table (protective MBR)".into(),
        other => format!("{other} partition table"),
    }
}

fn parse_blkid_export(text: &str) -> Blkid {
    let (mut ty, mut usage, mut pttype) = (None, None, None);
    for line in text.lines() {
        match line.split_once('=') {
            Some(("TYPE", v)) => ty = Some(v),
            Some(("USAGE", v)) => usage = Some(v),
            Some(("PTTYPE", v)) => pttype = Some(v),
            _ => {}
        }
    }
    match (ty, pttype) {
        (Some(t), _) => Blkid::Found {
            type_name: t.into(),
            kind: blkid_kind(t, usage),
        },
        (None, Some(p)) => Blkid::Found {
            type_name: p.into(),
            kind: pttype_kind(p),
        },
        (None, None) => Blkid::Nothing,
    }
}

/// `blkid -p -o export` (libblkid's low-level probe, no cache). `None` when blkid is not
/// installed or the probe failed; the built-in checks then decide alone.
fn run_blkid(path: &Path) -> Option<Blkid> {
    for prog in ["blkid", "/usr/sbin/blkid", "/sbin/blkid"] {
        let out = match Command::new(prog)
            .args(["-p", "-o", "export"])
            .arg(path)
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) => out,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => return None,
        };
        return match out.status.code() {
            Some(0) => Some(parse_blkid_export(&String::from_utf8_lossy(&out.stdout))),
            Some(2) => Some(Blkid::Nothing),
            Some(8) => Some(Blkid::Ambivalent),
            _ => None,
        };
    }
    None
}

/// Looks for a filesystem, volume or partition-table signature on the device (or file) at
/// `path`: asks `blkid -p` when available, and always runs [`scan_magic`] over the first
/// [`PROBE_LEN`] bytes (read with a plain read). blkid's answer is preferred (it knows more
/// formats and validates checksums); a built-in hit counts even when blkid found nothing.
pub fn probe_signature(path: &Path) -> io::Result<Option<Signature>> {
    let mut head = Vec::with_capacity(PROBE_LEN);
    File::open(path)?
        .take(PROBE_LEN as u64)
        .read_to_end(&mut head)?;
    let hits = scan_magic(&head);
    let first = hits.first().map(|h| Signature {
        kind: h.kind.to_string(),
        offset: Some(h.offset),
    });
    Ok(match run_blkid(path) {
        Some(Blkid::Found { type_name, kind }) => Some(Signature {
            offset: hits
                .iter()
                .find(|h| h.blkid_types.contains(&type_name.as_str()))
                .map(|h| h.offset),
            kind,
        }),
        Some(Blkid::Ambivalent) => Some(match first {
            Some(sig) => Signature {
                kind: format!("{} (blkid: several conflicting signatures)", sig.kind),
                ..sig
            },
            None => Signature {
                kind: "several conflicting signatures (blkid ambivalent result)".into(),
                offset: None,
            },
        }),
        Some(Blkid::Nothing) | None => first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf() -> Vec<u8> {
        vec![0u8; PROBE_LEN]
    }

    fn put(b: &mut [u8], off: usize, bytes: &[u8]) {
        b[off..off + bytes.len()].copy_from_slice(bytes);
    }

    fn kinds(b: &[u8]) -> Vec<(&'static str, u64)> {
        scan_magic(b).iter().map(|h| (h.kind, h.offset)).collect()
    }

    #[test]
    fn blank_and_short_buffers_have_no_signature() {
        assert!(scan_magic(&buf()).is_empty());
        assert!(scan_magic(&[]).is_empty());
        assert!(scan_magic(&[0x55; 100]).is_empty());
        assert!(scan_magic(&vec![0xffu8; PROBE_LEN]).is_empty());
    }

    #[test]
    fn ext_family_is_refined_by_features() {
        let mut b = buf();
        put(&mut b, 1080, &[0x53, 0xef]);
        assert_eq!(kinds(&b), [("ext2 filesystem", 1080)]);
        put(&mut b, 1024 + 0x5c, &4u32.to_le_bytes()); // has_journal
        assert_eq!(kinds(&b), [("ext3 filesystem", 1080)]);
        put(&mut b, 1024 + 0x60, &(0x2u32 | 0x40 | 0x200).to_le_bytes()); // extents, flex_bg
        assert_eq!(kinds(&b), [("ext4 filesystem", 1080)]);
        put(&mut b, 1024 + 0x18, &7u32.to_le_bytes()); // implausible block size
        assert!(scan_magic(&b).is_empty());
    }

    #[test]
    fn fixed_offset_magics() {
        let cases: &[(usize, &[u8], &str)] = &[
            (0, b"XFSB", "xfs filesystem"),
            (65600, b"_BHRfS_M", "btrfs filesystem"),
            (4086, b"SWAPSPACE2", "swap"),
            (65526, b"SWAPSPACE2", "swap"),
            (4086, b"SWAP-SPACE", "swap"),
            (0, b"LUKS\xba\xbe", "LUKS"),
            (4096, &[0xfc, 0x4e, 0x2b, 0xa9], "Linux RAID member"),
            (3, b"NTFS    ", "ntfs filesystem"),
            (3, b"EXFAT   ", "exfat filesystem"),
            (32769, b"CD001", "iso9660 filesystem"),
            (512, b"EFI PART", "GPT partition table"),
            (4096, b"EFI PART", "GPT partition table"),
        ];
        for &(off, magic, kind) in cases {
            let mut b = buf();
            put(&mut b, off, magic);
            assert_eq!(kinds(&b), [(kind, off as u64)], "{kind} at {off}");
            // One byte short of the magic is no match.
            let mut b = buf();
            put(&mut b, off, &magic[..magic.len() - 1]);
            assert!(scan_magic(&b).is_empty(), "partial {kind}");
        }
    }

    #[test]
    fn lvm2_label_needs_its_type() {
        let mut b = buf();
        put(&mut b, 512, b"LABELONE");
        assert!(scan_magic(&b).is_empty());
        put(&mut b, 512 + 24, b"LVM2 001");
        assert_eq!(kinds(&b), [("LVM2 member", 512)]);
    }

    #[test]
    fn zfs_uberblock_either_byte_order() {
        let mut b = buf();
        put(&mut b, 128 * 1024 + 5 * 1024, &0x00bab10cu64.to_le_bytes());
        assert_eq!(kinds(&b), [("zfs member", 133 * 1024)]);
        let mut b = buf();
        put(&mut b, 200 * 1024, &0x00bab10cu64.to_be_bytes());
        assert_eq!(kinds(&b), [("zfs member", 200 * 1024)]);
        let mut b = buf();
        put(&mut b, 100 * 1024, &0x00bab10cu64.to_le_bytes()); // outside the ring
        assert!(scan_magic(&b).is_empty());
    }

    fn mbr_entry(b: &mut [u8], slot: usize, boot: u8, ptype: u8, start: u32, len: u32) {
        let e = 446 + 16 * slot;
        b[e] = boot;
        b[e + 4] = ptype;
        put(b, e + 8, &start.to_le_bytes());
        put(b, e + 12, &len.to_le_bytes());
    }

    #[test]
    fn mbr_needs_a_plausible_entry() {
        let mut b = buf();
        put(&mut b, 510, &[0x55, 0xaa]);
        assert!(scan_magic(&b).is_empty(), "empty table");
        mbr_entry(&mut b, 0, 0x80, 0x83, 2048, 100_000);
        assert_eq!(kinds(&b), [("DOS/MBR partition table", 510)]);
        b[446 + 16] = 0x12; // bad boot indicator in slot 1
        assert!(scan_magic(&b).is_empty());
    }

    #[test]
    fn gpt_disk_reports_gpt_before_protective_mbr() {
        let mut b = buf();
        put(&mut b, 510, &[0x55, 0xaa]);
        mbr_entry(&mut b, 0, 0, 0xee, 1, u32::MAX);
        assert_eq!(kinds(&b), [("GPT partition table (protective MBR)", 510)]);
        put(&mut b, 512, b"EFI PART");
        assert_eq!(
            kinds(&b),
            [
                ("GPT partition table", 512),
                ("GPT partition table (protective MBR)", 510)
            ]
        );
    }

    #[test]
    fn fat_boot_sector_is_a_filesystem() {
        let mut b = buf();
        put(&mut b, 82, b"FAT32   ");
        assert!(scan_magic(&b).is_empty(), "needs the 0x55AA boot signature");
        put(&mut b, 510, &[0x55, 0xaa]);
        assert_eq!(kinds(&b)[0], ("vfat filesystem", 82));
    }

    #[test]
    fn blkid_export_parsing() {
        let ext4 = "DEVNAME=/dev/loop0\nUUID=f8\nVERSION=1.0\nBLOCK_SIZE=4096\nTYPE=ext4\nUSAGE=filesystem\n";
        assert_eq!(
            parse_blkid_export(ext4),
            Blkid::Found {
                type_name: "ext4".into(),
                kind: "ext4 filesystem".into()
            }
        );
        let swap = "DEVNAME=/dev/loop0\nVERSION=1\nTYPE=swap\nUSAGE=other\n";
        assert!(matches!(parse_blkid_export(swap), Blkid::Found { kind, .. } if kind == "swap"));
        let luks = "TYPE=crypto_LUKS\nUSAGE=crypto\n";
        assert!(matches!(parse_blkid_export(luks), Blkid::Found { kind, .. } if kind == "LUKS"));
        let dos = "DEVNAME=/dev/loop0\nPTUUID=1234\nPTTYPE=dos\n";
        assert!(matches!(parse_blkid_export(dos),
            Blkid::Found { kind, .. } if kind == "DOS/MBR partition table"));
        // A bare partition: only PART_ENTRY_* details, no signature.
        let part = "DEVNAME=/dev/loop0p1\nPART_ENTRY_SCHEME=dos\nPART_ENTRY_TYPE=0x83\n";
        assert_eq!(parse_blkid_export(part), Blkid::Nothing);
    }

    #[test]
    fn fdinfo_access_modes() {
        assert!(!opened_for_writing(
            "pos:\t0\nflags:\t0100000\nmnt_id:\t30\n"
        ));
        assert!(opened_for_writing("pos:\t0\nflags:\t0100001\n"));
        assert!(opened_for_writing("pos:\t0\nflags:\t02100002\n"));
        assert!(!opened_for_writing("garbage"));
    }

    #[test]
    fn messages_name_the_flags() {
        let e = SafetyError::NotAllowed {
            device: "/dev/sdz".into(),
        };
        assert!(e.to_string().contains(ALLOW_DESTROY_DEVICE_FLAG));
        let e = SafetyError::ExistingFile {
            path: "/tmp/x".into(),
        };
        assert!(e.to_string().contains(ALLOW_OVERWRITE_FILE_FLAG));
        let e = SafetyError::Signature {
            device: "/dev/sdz".into(),
            kind: "xfs filesystem".into(),
            offset: Some(0),
        };
        assert!(e
            .to_string()
            .contains("signature: xfs filesystem (magic at byte offset 0)"));
    }
}
