//! Block-device safety checks against real loop devices (needs root and losetup; otherwise
//! the device tests skip, a failure under IOLAB_REQUIRE_DEVICE_TESTS=1), plus the
//! regular-file overwrite rule.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use iolab_engine::safety::{
    check_device_writable, check_regular_file_overwrite, device_size, is_block_device, partitions,
    probe_signature, scan_magic, SafetyError, PROBE_LEN,
};
use iolab_testkit::{require_devices, require_tools, sh, tool, Loop, Mount, MIB};

/// An active swap area, turned off on drop.
struct Swap(PathBuf);

impl Drop for Swap {
    fn drop(&mut self) {
        if let Some(swapoff) = tool("swapoff") {
            let _ = Command::new(swapoff).arg(&self.0).status();
        }
    }
}

/// The built-in magic checks on the first PROBE_LEN bytes of `dev`, without blkid.
fn builtin_kinds(dev: &Path) -> Vec<(&'static str, u64)> {
    let mut head = Vec::new();
    File::open(dev)
        .unwrap()
        .take(PROBE_LEN as u64)
        .read_to_end(&mut head)
        .unwrap();
    scan_magic(&head)
        .iter()
        .map(|h| (h.kind, h.offset))
        .collect()
}

#[track_caller]
fn expect_signature(dev: &Path, want_kind: &str, want_offset: u64) {
    match check_device_writable(dev, true) {
        Err(SafetyError::Signature {
            device,
            kind,
            offset,
        }) => {
            assert_eq!(device, dev);
            assert!(kind.contains(want_kind), "kind {kind:?}, want {want_kind}");
            assert_eq!(offset, Some(want_offset), "{kind}");
        }
        other => panic!("want a {want_kind} signature, got {other:?}"),
    }
    // Without the flag the signature is still what is reported.
    assert!(matches!(
        check_device_writable(dev, false),
        Err(SafetyError::Signature { .. })
    ));
    let builtin = builtin_kinds(dev);
    assert!(
        builtin
            .iter()
            .any(|&(k, off)| k.contains(want_kind) && off == want_offset),
        "built-in checks found {builtin:?}, want {want_kind} at {want_offset}"
    );
}

#[test]
fn blank_device_needs_the_flag() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let disk = Loop::new(64 * MIB);
    assert!(is_block_device(&disk.dev).unwrap());
    assert_eq!(device_size(&disk.dev).unwrap(), 64 * MIB);
    assert!(partitions(&disk.dev).unwrap().is_empty());
    assert_eq!(probe_signature(&disk.dev).unwrap(), None);
    assert!(builtin_kinds(&disk.dev).is_empty());

    check_device_writable(&disk.dev, true).unwrap();
    let err = check_device_writable(&disk.dev, false).unwrap_err();
    assert!(
        matches!(&err, SafetyError::NotAllowed { device } if *device == disk.dev),
        "{err:?}"
    );
    assert!(err.to_string().contains("--allow-destroy-device"), "{err}");
}

#[test]
fn ext4_signature() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !require_tools(&["mkfs.ext4"]) {
        return;
    }
    let disk = Loop::new(64 * MIB);
    sh("mkfs.ext4", &["-q", "-F", disk.s()]);
    expect_signature(&disk.dev, "ext4 filesystem", 1080);
}

#[test]
fn xfs_signature() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !require_tools(&["mkfs.xfs"]) {
        return;
    }
    let disk = Loop::new(512 * MIB); // recent mkfs.xfs wants at least 300 MB
    sh("mkfs.xfs", &["-q", "-f", disk.s()]);
    expect_signature(&disk.dev, "xfs filesystem", 0);
}

#[test]
fn btrfs_signature() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !require_tools(&["mkfs.btrfs"]) {
        return;
    }
    let disk = Loop::new(256 * MIB);
    sh("mkfs.btrfs", &["-q", "-f", disk.s()]);
    expect_signature(&disk.dev, "btrfs filesystem", 65600);
}

#[test]
fn swap_signature_and_active_swap() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !require_tools(&["mkswap"]) {
        return;
    }
    let disk = Loop::new(64 * MIB);
    sh("mkswap", &[disk.s()]);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    expect_signature(&disk.dev, "swap", page - 10);

    if !require_tools(&["swapon"]) || !require_tools(&["swapoff"]) {
        return;
    }
    sh("swapon", &["-p", "-2", disk.s()]);
    let _swap = Swap(disk.dev.clone());
    match check_device_writable(&disk.dev, true) {
        Err(SafetyError::InUse { device, holder }) => {
            assert_eq!(device, disk.dev);
            assert!(holder.contains("swap"), "{holder}");
        }
        other => panic!("want InUse (swap), got {other:?}"),
    }
}

/// A one-partition MBR: type 0x83 from sector 2048 to the end.
fn write_mbr(img: &Path) {
    let sectors = fs::metadata(img).unwrap().len() / 512;
    let mut mbr = [0u8; 512];
    mbr[446 + 4] = 0x83;
    mbr[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
    mbr[446 + 12..446 + 16].copy_from_slice(&(sectors as u32 - 2048).to_le_bytes());
    mbr[510] = 0x55;
    mbr[511] = 0xaa;
    OpenOptions::new()
        .write(true)
        .open(img)
        .unwrap()
        .write_all_at(&mbr, 0)
        .unwrap();
}

#[test]
fn partition_table_and_mounted_partition() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let disk = Loop::with_image(64 * MIB, write_mbr, &["-P"]);
    expect_signature(&disk.dev, "DOS/MBR partition table", 510);

    let part = PathBuf::from(format!("{}p1", disk.s()));
    if partitions(&disk.dev).unwrap().is_empty() {
        // Kernels built without CONFIG_MSDOS_PARTITION do not parse the table themselves; partx
        // adds the partitions with BLKPG (they go away when the loop device is detached).
        if !require_tools(&["partx"]) {
            return;
        }
        sh("partx", &["-a", disk.s()]);
    }
    let parts = partitions(&disk.dev).unwrap();
    assert_eq!(parts, std::slice::from_ref(&part));
    assert_eq!(device_size(&part).unwrap(), 63 * MIB);
    // A blank partition is writable on its own (with the flag).
    check_device_writable(&part, true).unwrap();

    if !require_tools(&["mkfs.ext4"]) {
        return;
    }
    sh("mkfs.ext4", &["-q", "-F", part.to_str().unwrap()]);
    let mnt = Mount::new(&part, &[]);
    for target in [&disk.dev, &part] {
        match check_device_writable(target, true) {
            Err(SafetyError::Mounted { device, mountpoint }) => {
                assert_eq!(device, part, "checking {}", target.display());
                assert_eq!(mountpoint, mnt.path());
            }
            other => panic!("{}: want Mounted, got {other:?}", target.display()),
        }
    }
    // Also without the flag: the mount is the reason given.
    assert!(matches!(
        check_device_writable(&disk.dev, false),
        Err(SafetyError::Mounted { .. })
    ));
}

#[test]
fn mounted_device_through_a_symlink() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !require_tools(&["mkfs.ext4"]) {
        return;
    }
    let disk = Loop::new(64 * MIB);
    sh("mkfs.ext4", &["-q", "-F", disk.s()]);
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("by-id-style-link");
    std::os::unix::fs::symlink(&disk.dev, &link).unwrap();
    assert!(is_block_device(&link).unwrap());

    let mnt = Mount::new(&disk.dev, &[]);
    for target in [&disk.dev, &link] {
        match check_device_writable(target, true) {
            Err(SafetyError::Mounted { device, mountpoint }) => {
                assert_eq!(device, disk.dev);
                assert_eq!(mountpoint, mnt.path());
            }
            other => panic!("{}: want Mounted, got {other:?}", target.display()),
        }
    }
    // Reading needs no flag and still works.
    assert_eq!(device_size(&link).unwrap(), 64 * MIB);
}

#[test]
fn mounted_btrfs_with_two_devices() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !require_tools(&["mkfs.btrfs"]) {
        return;
    }
    let a = Loop::new(256 * MIB);
    let b = Loop::new(256 * MIB);
    sh(
        "mkfs.btrfs",
        &["-q", "-f", "-d", "raid1", "-m", "raid1", a.s(), b.s()],
    );
    let device_opt = format!("device={}", b.s());
    let mnt = Mount::new(&a.dev, &["-t", "btrfs", "-o", &device_opt]);
    // btrfs reports an anonymous 0:N device in mountinfo; the mount source names `a`.
    match check_device_writable(&a.dev, true) {
        Err(SafetyError::Mounted { device, mountpoint }) => {
            assert_eq!(device, a.dev);
            assert_eq!(mountpoint, mnt.path());
        }
        other => panic!("want Mounted, got {other:?}"),
    }
    // The second member is not in mountinfo at all.
    match check_device_writable(&b.dev, true) {
        Err(SafetyError::InUse { device, holder }) => {
            assert_eq!(device, b.dev);
            assert!(holder.contains("btrfs"), "{holder}");
        }
        other => panic!("want InUse (btrfs member), got {other:?}"),
    }
}

#[test]
fn backing_device_of_another_loop() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let lower = Loop::new(64 * MIB);
    let upper = Loop::attach(&lower.dev, &[]);
    match check_device_writable(&lower.dev, true) {
        Err(SafetyError::InUse { device, holder }) => {
            assert_eq!(device, lower.dev);
            let name = upper.dev.file_name().unwrap().to_str().unwrap();
            assert!(holder.contains(name), "{holder}");
        }
        other => panic!("want InUse (loop backing), got {other:?}"),
    }
    drop(upper);
    check_device_writable(&lower.dev, true).unwrap();
}

#[test]
fn exclusively_opened_device_is_in_use() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let disk = Loop::new(64 * MIB);
    let held = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL)
        .open(&disk.dev)
        .unwrap();
    match check_device_writable(&disk.dev, true) {
        Err(SafetyError::InUse { device, holder }) => {
            assert_eq!(device, disk.dev);
            assert!(holder.contains("EBUSY"), "{holder}");
        }
        other => panic!("want InUse (exclusive open), got {other:?}"),
    }
    drop(held);
    check_device_writable(&disk.dev, true).unwrap();
}

#[test]
fn regular_file_is_not_a_device() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    fs::write(&file, b"x").unwrap();
    assert!(!is_block_device(&file).unwrap());
    assert!(is_block_device(&dir.path().join("missing")).is_err());
    match check_device_writable(&file, true) {
        Err(SafetyError::Io { path, source }) => {
            assert_eq!(path, file);
            assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput);
        }
        other => panic!("want Io(not a block device), got {other:?}"),
    }
}

#[test]
fn regular_file_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    check_regular_file_overwrite(&file, false).unwrap();
    check_regular_file_overwrite(&file, true).unwrap();

    fs::write(&file, b"precious").unwrap();
    let err = check_regular_file_overwrite(&file, false).unwrap_err();
    assert!(
        matches!(&err, SafetyError::ExistingFile { path } if *path == file),
        "{err:?}"
    );
    assert!(err.to_string().contains("--allow-overwrite-file"), "{err}");
    check_regular_file_overwrite(&file, true).unwrap();

    // Through a symlink it is the same file.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    assert!(matches!(
        check_regular_file_overwrite(&link, false),
        Err(SafetyError::ExistingFile { .. })
    ));
    // A dangling symlink or a directory is never "a file to overwrite".
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    for p in [&dangling, &dir.path().to_path_buf()] {
        assert!(
            matches!(
                check_regular_file_overwrite(p, true),
                Err(SafetyError::Io { .. })
            ),
            "{}",
            p.display()
        );
    }
}
