//! ext4's own calls: whether a file is on ext4, and `EXT4_IOC_MOVE_EXT` (the extent swap
//! e4defrag makes: a range of a file's blocks exchanged with a donor file's).

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// ext4's `statfs` type (also ext2's and ext3's: one magic for the family).
pub const EXT4_SUPER_MAGIC: i64 = 0xEF53;

/// The name of a filesystem type `statfs` reports, for messages.
pub fn fs_name(magic: i64) -> String {
    match magic {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x6573_5546 => "fuse".into(),
        0x2FC1_2FC1 => "zfs".into(),
        0x794C_7630 => "overlayfs".into(),
        m => format!("type 0x{m:x}"),
    }
}

/// The `statfs` type of the filesystem `fd` is on.
pub fn fs_magic(fd: impl AsFd) -> io::Result<i64> {
    Ok(rustix::fs::fstatfs(fd)?.f_type as i64)
}

/// The kernel's `struct move_extent`.
#[repr(C)]
#[derive(Default)]
struct MoveExtent {
    reserved: u32,
    donor_fd: u32,
    orig_start: u64,
    donor_start: u64,
    len: u64,
    moved_len: u64,
}

/// `_IOWR('f', 15, struct move_extent)`.
const EXT4_IOC_MOVE_EXT: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<MoveExtent>() as libc::c_ulong) << 16) | (0x66 << 8) | 15;

/// Exchanges `len` blocks of `orig` from block `start` with the same blocks of `donor`
/// (`EXT4_IOC_MOVE_EXT`; blocks of the filesystem's block size); the blocks moved, which may
/// be fewer, or the call's error.
pub fn move_ext(orig: impl AsFd, donor: impl AsFd, start: u64, len: u64) -> io::Result<u64> {
    let mut me = MoveExtent {
        donor_fd: donor.as_fd().as_raw_fd() as u32,
        orig_start: start,
        donor_start: start,
        len,
        ..MoveExtent::default()
    };
    // SAFETY: `me` is the kernel's struct move_extent, alive and writable for the call;
    // both descriptors are borrowed for it.
    let rc = unsafe {
        libc::ioctl(
            orig.as_fd().as_raw_fd(),
            EXT4_IOC_MOVE_EXT as _,
            &mut me as *mut MoveExtent,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(me.moved_len)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_request_number_is_the_kernels() {
        // EXT4_IOC_MOVE_EXT in linux/ext4.h on x86_64 and arm64.
        assert_eq!(super::EXT4_IOC_MOVE_EXT, 0xC028_660F);
    }
}
