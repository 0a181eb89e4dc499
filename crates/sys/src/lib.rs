//! OS helpers every layer uses, kept once below all other iolab crates: whether the process
//! is root, dropping the page cache, statvfs(3), the size of a block device, finding an
//! external tool, page-aligned memory for O_DIRECT I/O ([`buffers`]), loop devices with
//! their backing files ([`loopdev`]), the files and directories iolab creates, with fixed
//! modes, never through a link, removed by inode, an output written under a temporary name
//! and renamed into place ([`files`]), bounded reads of input files ([`input`]) and
//! which process is which across pid reuse ([`process`]). Depends on no iolab crate.

pub mod buffers;
pub mod ext4;
pub mod files;
pub mod host;
pub mod input;
pub mod loopdev;
pub mod numa;
pub mod process;

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Whether the effective user is root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Writes dirty data back (sync(2)) and drops the page cache, dentries and inodes
/// (`echo 3 > /proc/sys/vm/drop_caches`). Needs root: without it the write fails with
/// permission denied.
pub fn drop_caches() -> io::Result<()> {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
}

/// What statvfs(3) says about the filesystem holding a path, in bytes where it is space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// The preferred I/O block size (`f_bsize`; btrfs: its sector size).
    pub block_size: u64,
    /// The unit of the block counts (`f_frsize`).
    pub fragment_size: u64,
    /// Size of the filesystem (`f_blocks` × `f_frsize`).
    pub total_bytes: u64,
    /// Free space (`f_bfree` × `f_frsize`), root's reserve included.
    pub free_bytes: u64,
    /// Space an unprivileged writer may still allocate (`f_bavail` × `f_frsize`).
    pub available_bytes: u64,
    /// Inodes in total and free (`f_files`, `f_ffree`).
    pub files: u64,
    pub files_free: u64,
    /// Mounted read-only (`ST_RDONLY` in `f_flag`): nothing can be written there.
    pub read_only: bool,
}

impl FsStats {
    /// Bytes in use: total minus free.
    pub fn used_bytes(&self) -> u64 {
        self.total_bytes.saturating_sub(self.free_bytes)
    }
}

/// statvfs(3) of the filesystem holding `path`.
pub fn statvfs(path: &Path) -> io::Result<FsStats> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    statvfs_cstr(&c)
}

/// [`statvfs`] of a path already made a C string (for callers that ask often, such as a
/// replayed `QUERY_FS_INFO`).
pub fn statvfs_cstr(path: &CStr) -> io::Result<FsStats> {
    let st = rustix::fs::statvfs(path)?;
    let frsize = st.f_frsize;
    Ok(FsStats {
        block_size: st.f_bsize,
        fragment_size: frsize,
        total_bytes: st.f_blocks.saturating_mul(frsize),
        free_bytes: st.f_bfree.saturating_mul(frsize),
        available_bytes: st.f_bavail.saturating_mul(frsize),
        files: st.f_files,
        files_free: st.f_ffree,
        read_only: st.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY),
    })
}

/// The size in bytes of the block device at `path` (`BLKGETSIZE64`). Opens it read-only.
pub fn device_size(path: &Path) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    // BLKGETSIZE64 is `_IOR(0x12, 114, size_t)`: read direction (2) in bits 30..32, the
    // argument's size in bits 16..30, type 0x12 in bits 8..16, number 114 in bits 0..8.
    const BLKGETSIZE64: u64 =
        (2 << 30) | ((std::mem::size_of::<usize>() as u64) << 16) | (0x12 << 8) | 114;
    let file = std::fs::File::open(path)?;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes exactly one u64 to the pointer, which points at ours.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64 as _, &mut size as *mut u64) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(size)
}

/// Directories searched after $PATH: root's sbin directories are often missing from a
/// user's PATH.
const EXTRA_PATH: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// Finds the executable `tool` in $PATH or the sbin directories.
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(EXTRA_PATH.iter().map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statvfs_of_a_directory_adds_up() {
        let dir = tempfile::tempdir().unwrap();
        let st = statvfs(dir.path()).unwrap();
        assert!(st.block_size > 0 && st.fragment_size > 0);
        assert!(st.available_bytes <= st.free_bytes && st.free_bytes <= st.total_bytes);
        assert_eq!(st.used_bytes(), st.total_bytes - st.free_bytes);
        assert!(statvfs(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn a_regular_file_has_no_device_size() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert!(device_size(f.path()).is_err());
    }

    #[test]
    fn finds_sh_and_not_a_made_up_tool() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("iolab-no-such-tool").is_none());
    }
}
