//! kind = "device": the user's own block devices. [`check_devices`] decides, before anything
//! is written, whether a build may format them; the signatures a build's mkfs writes are
//! recorded ([`Signature`]) and erased again at teardown, exactly those and nothing else
//! (`iolab cleanup` never wipes).

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use iolab_engine::safety::{self, SafetyError};

use crate::error::TestbedError;
use crate::remove::Removal;
use crate::spec::{Kind, TestbedSpec};
use crate::sys;

/// One signature `wipefs` lists on a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// Byte offset as wipefs prints it (`0x438`).
    pub offset: String,
    /// What it is (`ext4`, `btrfs`).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// `major:minor` of the block device at `path` (following links), if it is one.
pub(crate) fn rdev_text(path: &Path) -> Option<String> {
    let m = fs::metadata(path).ok()?;
    m.file_type().is_block_device().then(|| {
        format!(
            "{}:{}",
            rustix::fs::major(m.rdev()),
            rustix::fs::minor(m.rdev())
        )
    })
}

/// Whether `path` is still the block device `rdev` (`major:minor`).
pub(crate) fn is_device(path: &Path, rdev: &str) -> bool {
    rdev_text(path).is_some_and(|r| r == rdev)
}

fn refused(device: &Path, message: impl Into<String>) -> TestbedError {
    TestbedError::Refused {
        device: device.to_path_buf(),
        message: message.into(),
    }
}

/// The `st_dev` values of the device at `path` and of its partitions.
fn members(path: &Path, rdev: u64) -> Vec<u64> {
    let mut v = vec![rdev];
    for p in safety::partitions(path).unwrap_or_default() {
        if let Ok(m) = fs::metadata(&p) {
            v.push(m.rdev());
        }
    }
    v
}

/// Checks every device of a kind = "device" spec before anything is written: each must be a
/// block device, named once, named with `--allow-destroy-device` (`spec.consent`), not hold
/// the root filesystem, not be mounted, held (holders, swap, btrfs, a loop device over it,
/// the kernel's exclusive claim), open for writing by another process or hold the backing
/// file of a loop device; a device with a signature needs `--wipe`; `drive_write_cache`
/// needs a drive that has one and its tool. Nothing is changed.
pub fn check_devices(spec: &TestbedSpec) -> Result<(), TestbedError> {
    if spec.kind != Kind::Device {
        return Ok(());
    }
    let paths = spec.device_paths();
    if paths.is_empty() {
        return Err(TestbedError::Invalid {
            key: "devices".into(),
            message: "kind = \"device\" names no device: give devices = [\"/dev/sdX\"] in the \
                      file or --device /dev/sdX on the command line"
                .into(),
        });
    }
    let allowed: Vec<u64> = spec
        .consent
        .allowed
        .iter()
        .filter_map(|p| fs::metadata(p).ok())
        .filter(|m| m.file_type().is_block_device())
        .map(|m| m.rdev())
        .collect();
    let root_dev = fs::metadata("/").map(|m| m.dev()).ok();
    let mut seen = Vec::new();
    for path in paths {
        let meta = fs::metadata(path).map_err(|e| refused(path, e.to_string()))?;
        if !meta.file_type().is_block_device() {
            return Err(refused(path, "is not a block device"));
        }
        let rdev = meta.rdev();
        if seen.contains(&rdev) {
            return Err(refused(path, "is named twice (under two names)"));
        }
        seen.push(rdev);
        let mine = members(path, rdev);
        if root_dev.is_some_and(|d| mine.contains(&d)) {
            return Err(refused(
                path,
                "holds the root filesystem (the system disk); iolab never builds on it",
            ));
        }
        match safety::check_device_writable(path, true) {
            Ok(()) => {}
            Err(SafetyError::Signature { kind, offset, .. }) if !spec.consent.wipe => {
                return Err(refused(
                    path,
                    format!(
                        "holds a signature: {kind}{}; a device testbed erases it only with \
                         --wipe (everything on the device is lost)",
                        offset.map(|o| format!(" at byte {o}")).unwrap_or_default()
                    ),
                ))
            }
            Err(SafetyError::Signature { .. }) => {}
            Err(e) => return Err(refused(path, e.to_string())),
        }
        if let Some(l) = backing_file_on(&mine) {
            return Err(refused(path, l));
        }
        let writers = safety::device_writers(path);
        if !writers.is_empty() {
            return Err(refused(path, format!("is in use: {}", writers.join("; "))));
        }
        if spec.drive_write_cache.is_some() {
            drive_cache_tool(&canonical(path)?)?;
        }
        knobs_exist(spec, &canonical(path)?)?;
        if !allowed.contains(&rdev) {
            return Err(refused(
                path,
                format!(
                    "is not named with --allow-destroy-device {} on the command line; a device \
                     testbed formats it, destroying everything on it",
                    path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Every sysfs knob the spec sets exists for `dev` (a partition has no queue of its own),
/// and a scheduler is one the device lists.
fn knobs_exist(spec: &TestbedSpec, dev: &Path) -> Result<(), TestbedError> {
    for (attr, value) in crate::commands::knob_writes(spec) {
        let path = sys::sysfs_attr(dev, attr);
        let key = attr.trim_start_matches("queue/");
        let Ok(now) = sys::read_trim(&path) else {
            return Err(TestbedError::Unsupported {
                key: key.into(),
                message: format!(
                    "{} has no {attr} ({} does not exist; a partition's queue is its \
                     disk's: name the disk)",
                    dev.display(),
                    path.display()
                ),
            });
        };
        if attr == "queue/scheduler" && !sys::list_entries(&now).contains(&value) {
            return Err(TestbedError::Unsupported {
                key: key.into(),
                message: format!(
                    "'{value}' is not available for {} (available: {})",
                    dev.display(),
                    sys::list_entries(&now).join(", ")
                ),
            });
        }
    }
    Ok(())
}

/// A loop device whose backing file lies on a filesystem of one of `devs` (the device or its
/// partitions), said as a reason.
fn backing_file_on(devs: &[u64]) -> Option<String> {
    for e in fs::read_dir("/sys/class/block").ok()?.flatten() {
        let Ok(b) = fs::read_to_string(e.path().join("loop/backing_file")) else {
            continue;
        };
        let b = b.trim_end_matches('\n');
        let b = b.strip_suffix(" (deleted)").unwrap_or(b);
        if fs::metadata(b).is_ok_and(|m| devs.contains(&m.dev())) {
            return Some(format!(
                "holds the backing file of loop device /dev/{} ({b}); iolab never builds on a \
                 disk a loop device depends on",
                e.file_name().to_string_lossy()
            ));
        }
    }
    None
}

/// The signatures `wipefs` lists on `dev` (it prints nothing when there are none).
pub(crate) fn signatures(dev: &Path) -> Result<Vec<Signature>, TestbedError> {
    #[derive(Deserialize)]
    struct Listing {
        #[serde(default)]
        signatures: Vec<Signature>,
    }
    let out = sys::run(&["wipefs".to_string(), "--json".into(), sys::text(dev)])?;
    if out.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str::<Listing>(&out)
        .map(|l| l.signatures)
        .map_err(|e| TestbedError::State {
            message: format!("wipefs --json {}: {e}", dev.display()),
        })
}

/// `wipefs -q -o OFFSET DEV`: erases the one signature at `offset`.
pub(crate) fn wipe_argv(dev: &Path, offset: &str) -> Vec<String> {
    wipe_all_argv(dev, &[offset])
}

/// `wipefs -q -o OFFSET... DEV`: erases the signatures at `offsets`.
pub(crate) fn wipe_all_argv(dev: &Path, offsets: &[&str]) -> Vec<String> {
    let mut v = vec!["wipefs".to_string(), "-q".into()];
    for o in offsets {
        v.extend(["-o".to_string(), o.to_string()]);
    }
    v.push(sys::text(dev));
    v
}

/// Whether `now` is one of the signatures a build `made`: the same type at a recorded offset,
/// or the same type with a recorded UUID (the same filesystem or pool: zfs writes its
/// uberblocks at new offsets as it runs, each listed with the pool's id).
fn is_made(now: &Signature, made: &[Signature]) -> bool {
    made.iter().any(|m| {
        m.kind == now.kind && (m.offset == now.offset || (m.uuid.is_some() && m.uuid == now.uuid))
    })
}

/// Erases the signatures a build made on `device` (recorded in `made`; an empty record is one
/// cut short before mkfs finished, when the device had none before it, so whatever is there
/// now is the build's). Only while `device` is still the block device `rdev`, and only the
/// signatures whose offset and type still match.
pub(crate) fn wipe_made(device: &Path, rdev: &str, made: &[Signature]) -> Removal {
    if !is_device(device, rdev) {
        return Removal::GoneWithProblem(format!(
            "{} is no longer the device {rdev}: its signatures were left alone",
            device.display()
        ));
    }
    let now = match signatures(device) {
        Ok(s) => s,
        Err(e) => return Removal::Failed(e.to_string()),
    };
    let ours: Vec<&Signature> = now
        .iter()
        .filter(|s| made.is_empty() || is_made(s, made))
        .collect();
    if ours.iter().any(|s| s.kind == "btrfs") && sys::find_tool("btrfs").is_some() {
        // Unregister the member before its superblock goes (an error changes nothing).
        let _ = sys::run(&[
            "btrfs".into(),
            "device".into(),
            "scan".into(),
            "--forget".into(),
            sys::text(device),
        ]);
    }
    if made.iter().any(|m| m.kind == "zfs_member") {
        if let Err(e) = zero_zfs_labels(device) {
            return Removal::Failed(format!(
                "zeroing the zfs labels iolab's pool wrote on {}: {e}",
                device.display()
            ));
        }
    }
    if ours.is_empty() {
        return Removal::Gone { note: None };
    }
    let offsets: Vec<&str> = ours.iter().map(|s| s.offset.as_str()).collect();
    if let Err(e) = sys::run(&wipe_all_argv(device, &offsets)) {
        return Removal::Failed(e.to_string());
    }
    // Erasing the first of a kind can unveil others of the same filesystem (a backup
    // superblock, the next uberblock): list again, once.
    match signatures(device) {
        Ok(left) if left.iter().any(|s| is_made(s, made)) => {
            let again: Vec<&str> = left
                .iter()
                .filter(|s| is_made(s, made))
                .map(|s| s.offset.as_str())
                .collect();
            match sys::run(&wipe_all_argv(device, &again)) {
                Ok(_) => Removal::Gone { note: None },
                Err(e) => Removal::Failed(e.to_string()),
            }
        }
        _ => Removal::Gone { note: None },
    }
}

/// Zeroes the four zfs labels of a pool iolab made on `device` (256 KiB each: two at the
/// start, two ending at the size rounded down to 256 KiB). wipefs erases only the magic it
/// lists, and the uberblock rings keep others that iolab's own signature check (and zfs)
/// still find; the labels are the pool's own, so nothing else is touched.
fn zero_zfs_labels(device: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    const LABEL: u64 = 256 << 10;
    let size = iolab_sys::device_size(device)?;
    let end = size / LABEL * LABEL;
    if end < 4 * LABEL {
        return Ok(());
    }
    let f = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_EXCL)
        .open(device)?;
    let zeros = vec![0u8; 2 * LABEL as usize];
    f.write_all_at(&zeros, 0)?;
    f.write_all_at(&zeros, end - 2 * LABEL)?;
    f.sync_all()
}

/// What `iolab cleanup` says instead of wiping.
pub(crate) fn left_note(device: &Path, made: &[Signature]) -> String {
    let how = if made.is_empty() {
        format!("wipefs -a {}", device.display())
    } else {
        let mut kinds: Vec<&str> = made.iter().map(|s| s.kind.as_str()).collect();
        kinds.dedup();
        sys::display_cmd(&[
            "wipefs".into(),
            "-a".into(),
            "-t".into(),
            kinds.join(","),
            sys::text(device),
        ])
    };
    format!(
        "left in place: the signatures a killed build made on {} (iolab cleanup never wipes \
         a device; erase them with `{how}` once you are sure)",
        device.display()
    )
}

/// The tool that reads and sets the drive's own volatile write cache of `dev` (a canonical
/// `/dev/NAME`): `nvme` for NVMe namespaces, `sdparm` (else `hdparm`) for SCSI/SATA disks;
/// refused, naming `drive_write_cache`, for a device without a drive cache of its own or
/// without the tool.
pub(crate) fn drive_cache_tool(dev: &Path) -> Result<&'static str, TestbedError> {
    let name = dev
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let unsupported = |message: String| TestbedError::Unsupported {
        key: "drive_write_cache".into(),
        message,
    };
    let wanted: &[&'static str] = if name.starts_with("nvme") {
        &["nvme"]
    } else if name.starts_with("sd") {
        &["sdparm", "hdparm"]
    } else {
        return Err(unsupported(format!(
            "{} has no drive write cache iolab can set (hdparm and sdparm set SCSI/SATA              disks, nvme NVMe namespaces; a loop, dm, md or virtio device has none of its              own); write_cache sets the kernel's view",
            dev.display()
        )));
    };
    wanted
        .iter()
        .copied()
        .find(|t| sys::find_tool(t).is_some())
        .ok_or_else(|| {
            unsupported(format!(
                "{} needs {} to read and set its write cache, and it is not installed",
                dev.display(),
                wanted.join(" or ")
            ))
        })
}

/// The command that reads the drive cache of `dev` with `tool`.
pub(crate) fn drive_cache_get(tool: &str, dev: &Path) -> Vec<String> {
    let d = sys::text(dev);
    match tool {
        "nvme" => vec![
            "nvme".into(),
            "get-feature".into(),
            d,
            "-f".into(),
            "6".into(),
        ],
        "sdparm" => vec!["sdparm".into(), "--get=WCE".into(), d],
        _ => vec!["hdparm".into(), "-W".into(), d],
    }
}

/// The command that sets the drive cache of `dev` with `tool` (volatile: not saved).
pub(crate) fn drive_cache_set(tool: &str, dev: &Path, on: bool) -> Vec<String> {
    let d = sys::text(dev);
    let v = if on { "1" } else { "0" };
    match tool {
        "nvme" => ["nvme", "set-feature", &d, "-f", "6", "-v", v]
            .map(String::from)
            .to_vec(),
        "sdparm" => vec!["sdparm".into(), format!("--set=WCE={v}"), d],
        _ => vec!["hdparm".into(), format!("-W{v}"), d],
    }
}

/// Whether the output of [`drive_cache_get`] says the cache is on.
pub(crate) fn drive_cache_parse(tool: &str, out: &str) -> Option<bool> {
    let value = match tool {
        // "get-feature:0x06 (Volatile Write Cache), Current value:0x00000001"
        "nvme" => {
            let hex = out.rsplit("value:").next()?.trim();
            u64::from_str_radix(hex.trim_start_matches("0x"), 16).ok()? & 1
        }
        // "WCE           1  [cha: y, def:  1, sav:  1]"
        "sdparm" => out
            .lines()
            .find_map(|l| l.trim().strip_prefix("WCE"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?,
        // " write-caching =  1 (on)"
        _ => out
            .lines()
            .find_map(|l| l.split_once("write-caching").map(|(_, r)| r.to_string()))?
            .trim_start_matches([' ', '='])
            .split_whitespace()
            .next()?
            .parse()
            .ok()?,
    };
    Some(value == 1)
}

/// Reads the drive cache of `dev`.
pub(crate) fn drive_cache_read(tool: &str, dev: &Path) -> Result<bool, TestbedError> {
    let argv = drive_cache_get(tool, dev);
    let out = sys::run(&argv)?;
    drive_cache_parse(tool, &out).ok_or_else(|| TestbedError::Unsupported {
        key: "drive_write_cache".into(),
        message: format!(
            "`{}` did not say whether the cache is on: {}",
            sys::display_cmd(&argv),
            sys::tail(&out, 3)
        ),
    })
}

/// Writes `previous` back to the drive cache of `device` while it is still `rdev`.
pub(crate) fn restore_drive_cache(
    device: &Path,
    rdev: &str,
    tool: &str,
    previous: bool,
) -> Removal {
    if !is_device(device, rdev) {
        return Removal::GoneWithProblem(format!(
            "{} drive write cache not restored: it is no longer the device {rdev}",
            device.display()
        ));
    }
    if drive_cache_read(tool, device).is_ok_and(|v| v == previous) {
        return Removal::Gone { note: None };
    }
    match sys::run(&drive_cache_set(tool, device, previous)) {
        Ok(_) if drive_cache_read(tool, device).is_ok_and(|v| v == previous) => {
            Removal::Gone { note: None }
        }
        Ok(_) => Removal::Failed(format!(
            "{} drive write cache does not read {} after it was written back",
            device.display(),
            if previous { "on" } else { "off" }
        )),
        Err(e) => Removal::Failed(e.to_string()),
    }
}

/// One line about the device at `path`, for the user to see it is the one meant: its size,
/// model and serial (a loop device: its backing file) from sysfs, and the signatures on it
/// (`wipefs`, which needs read access: root).
pub fn describe_device(path: &Path) -> String {
    let dev = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if rdev_text(&dev).is_none() {
        return format!("{}: not a block device here", path.display());
    }
    let sys = sys::sysfs_attr(&dev, "");
    let read = |rel: &str| sys::read_trim(sys.join(rel)).ok().filter(|v| !v.is_empty());
    let mut parts = Vec::new();
    if let Some(sectors) = read("size").and_then(|v| v.parse::<u64>().ok()) {
        parts.push(iolab_spec::format_bytes(sectors * 512));
    }
    if let Some(b) = read("loop/backing_file") {
        parts.push(format!("loop device over {b}"));
    }
    for (label, rel) in [("model", "device/model"), ("serial", "device/serial")] {
        if let Some(v) = read(rel) {
            parts.push(format!("{label} {v}"));
        }
    }
    if let (false, Some(v)) = (
        parts.iter().any(|p| p.starts_with("serial")),
        read("serial"),
    ) {
        parts.push(format!("serial {v}"));
    }
    let signatures = match signatures(&dev) {
        Ok(s) if s.is_empty() => "none".to_string(),
        Ok(s) => s
            .iter()
            .map(|s| format!("{} at {}", s.kind, s.offset))
            .collect::<Vec<_>>()
            .join(", "),
        Err(_) => {
            "unknown (wipefs could not read it: not root, or the device is in use)".to_string()
        }
    };
    format!(
        "{}: {}; signatures: {signatures}",
        dev.display(),
        parts.join(", ")
    )
}

/// The canonical path of each device (`/dev/disk/by-id/…` resolved), for sysfs.
pub(crate) fn canonical(path: &Path) -> Result<PathBuf, TestbedError> {
    fs::canonicalize(path).map_err(|e| TestbedError::io(format!("resolving {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drive_cache_outputs_parse() {
        let nvme = "get-feature:0x06 (Volatile Write Cache), Current value:0x00000001";
        assert_eq!(drive_cache_parse("nvme", nvme), Some(true));
        let sd = "    /dev/sdb: ATA  WDC  0A80\nWCE           0  [cha: y, def:  1, sav:  1]\n";
        assert_eq!(drive_cache_parse("sdparm", sd), Some(false));
        let hd = "\n/dev/sda:\n write-caching =  1 (on)\n";
        assert_eq!(drive_cache_parse("hdparm", hd), Some(true));
        assert_eq!(drive_cache_parse("hdparm", "nonsense"), None);
        assert_eq!(
            drive_cache_set("hdparm", Path::new("/dev/sda"), false),
            ["hdparm", "-W0", "/dev/sda"]
        );
        assert!(drive_cache_tool(Path::new("/dev/loop3"))
            .unwrap_err()
            .to_string()
            .contains("drive_write_cache"));
    }

    #[test]
    fn wipefs_listing_parses() {
        let text = r#"{"signatures": [{"device":"loop0","offset":"0x438","type":"ext4",
            "uuid":"0865a863","label":null}]}"#;
        #[derive(Deserialize)]
        struct L {
            signatures: Vec<Signature>,
        }
        let l: L = serde_json::from_str(text).unwrap();
        assert_eq!(l.signatures[0].offset, "0x438");
        assert_eq!(l.signatures[0].kind, "ext4");
        assert_eq!(
            wipe_argv(Path::new("/dev/loop0"), "0x438"),
            ["wipefs", "-q", "-o", "0x438", "/dev/loop0"]
        );
        let sig = |offset: &str, kind: &str, uuid: Option<&str>| Signature {
            offset: offset.into(),
            kind: kind.into(),
            uuid: uuid.map(String::from),
        };
        let made = [sig("0x3e000", "zfs_member", Some("903"))];
        // A later uberblock of the same pool, at a new offset: made by the build.
        assert!(is_made(&sig("0x60000", "zfs_member", Some("903")), &made));
        // Another pool's label, or another type at the offset: not.
        assert!(!is_made(&sig("0x60000", "zfs_member", Some("111")), &made));
        assert!(!is_made(&sig("0x3e000", "ext4", None), &made));
    }
}
