//! Loop devices and the files behind them, told apart by device and inode number: the path
//! sysfs shows is the one given to `losetup` as its process saw it (another mount namespace,
//! a relative path's directory, a file renamed or deleted since), so it can name another
//! file or miss this one.

use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A file's identity: the device it lives on (`st_dev`) and its inode number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl FileId {
    /// The identity of `path`, following symbolic links.
    pub fn of(path: &Path) -> std::io::Result<FileId> {
        Ok(FileId::from_meta(&fs::metadata(path)?))
    }

    pub fn from_meta(m: &fs::Metadata) -> FileId {
        FileId {
            dev: m.dev(),
            ino: m.ino(),
        }
    }
}

/// An attached loop device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopDevice {
    /// `loopN`.
    pub name: String,
    /// The backing file as sysfs shows it (`(deleted)` removed), when it shows one.
    pub backing_path: Option<PathBuf>,
    /// The backing file's identity: from the driver itself (`LOOP_GET_STATUS64`) when the
    /// device node can be opened, else from the path sysfs shows; `None` when neither works.
    pub backing: Option<FileId>,
}

impl LoopDevice {
    /// `/dev/loopN`.
    pub fn dev_path(&self) -> PathBuf {
        Path::new("/dev").join(&self.name)
    }
}

/// Every attached loop device (those whose sysfs directory has `loop/backing_file`), by name.
pub fn attached() -> Vec<LoopDevice> {
    let Ok(dir) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<LoopDevice> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("loop"))
        .filter_map(|n| describe(&n))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The loop device `name` (`loopN`) when it is attached.
pub fn describe(name: &str) -> Option<LoopDevice> {
    let text = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let text = text.trim_end_matches('\n');
    let deleted = text.ends_with(" (deleted)");
    let backing_path = Some(PathBuf::from(
        text.strip_suffix(" (deleted)").unwrap_or(text),
    ))
    .filter(|p| !p.as_os_str().is_empty());
    let backing = status_backing(name).or_else(|| {
        // A deleted backing file cannot be found by its old path (a new file may sit there).
        (!deleted)
            .then_some(backing_path.as_deref())
            .flatten()
            .and_then(|p| FileId::of(p).ok())
    });
    Some(LoopDevice {
        name: name.to_string(),
        backing_path,
        backing,
    })
}

/// The attached loop devices whose backing file is `id`.
pub fn backed_by(id: FileId) -> Vec<LoopDevice> {
    attached()
        .into_iter()
        .filter(|l| l.backing == Some(id))
        .collect()
}

/// `struct loop_info64` of `<linux/loop.h>`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;

/// The backing file's identity as the loop driver records it, or `None` when `/dev/NAME`
/// cannot be opened or is not attached.
fn status_backing(name: &str) -> Option<FileId> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(Path::new("/dev").join(name))
        .ok()?;
    // SAFETY: an all-zero loop_info64 is a valid value of a plain C struct.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 writes one loop_info64 to the pointer it is given.
    let rc = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64, &mut info) };
    if rc != 0 {
        return None;
    }
    Some(FileId {
        dev: decode_dev(info.lo_device),
        ino: info.lo_inode,
    })
}

/// The driver reports the device number in the kernel's 32-bit user encoding
/// (`new_encode_dev`); `st_dev` uses glibc's 64-bit one.
fn decode_dev(d: u64) -> u64 {
    let major = ((d & 0xfff00) >> 8) as u32;
    let minor = ((d & 0xff) | ((d >> 12) & 0xfff00)) as u32;
    libc::makedev(major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_device_numbers_decode_to_st_dev() {
        // major 8, minor 1 (sda1) and major 259, minor 300000 (a large nvme minor).
        assert_eq!(decode_dev(0x801), libc::makedev(8, 1));
        let enc = (300_000u64 & 0xff) | (259 << 8) | ((300_000u64 & !0xff) << 12);
        assert_eq!(decode_dev(enc), libc::makedev(259, 300_000));
    }

    #[test]
    fn loop_info_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
    }
}
