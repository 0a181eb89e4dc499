//! Block devices: what sysfs says about one, and the walk from a target down its chain
//! (mount -> device -> partition's disk / loop's backing file / dm-md components / btrfs and
//! ZFS members).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, StatxFlags, CWD};

use crate::fsinfo;
use crate::mounts::{find_mount, MountEntry};
use crate::util::{
    block_name, dev_string, link_name, parse_dev, read_bool, read_trim, read_u64, sys_block,
};
use crate::{BlockDevice, Relation, RelationKind, TargetEnv};

/// At most this many devices in one chain (a guard against pathological stacks).
const MAX_DEVICES: usize = 64;

/// What statx says about a path.
struct Stat {
    kind: FileType,
    dev: (u32, u32),
    rdev: (u32, u32),
    mnt_id: Option<u64>,
    dio: Option<(u32, u32)>,
}

fn stat(path: &Path) -> Option<Stat> {
    let mask = StatxFlags::BASIC_STATS | StatxFlags::MNT_ID | StatxFlags::DIOALIGN;
    match rustix::fs::statx(CWD, path, AtFlags::empty(), mask) {
        Ok(s) => {
            let got = StatxFlags::from_bits_retain(s.stx_mask);
            Some(Stat {
                kind: FileType::from_raw_mode(s.stx_mode.into()),
                dev: (s.stx_dev_major, s.stx_dev_minor),
                rdev: (s.stx_rdev_major, s.stx_rdev_minor),
                mnt_id: got.contains(StatxFlags::MNT_ID).then_some(s.stx_mnt_id),
                dio: got
                    .contains(StatxFlags::DIOALIGN)
                    .then_some((s.stx_dio_offset_align, s.stx_dio_mem_align)),
            })
        }
        // Kernels before 4.11 have no statx: plain stat, no mount id.
        Err(_) => {
            let s = rustix::fs::stat(path).ok()?;
            let split = |d| (rustix::fs::major(d), rustix::fs::minor(d));
            Some(Stat {
                kind: FileType::from_raw_mode(s.st_mode),
                dev: split(s.st_dev),
                rdev: split(s.st_rdev),
                mnt_id: None,
                dio: None,
            })
        }
    }
}

/// The target's filesystem, mount and device chain.
pub(crate) fn target_env(target: &Path, mounts: &[MountEntry]) -> TargetEnv {
    let mut t = TargetEnv {
        path: target.display().to_string(),
        chain_complete: true,
        ..TargetEnv::default()
    };
    let absolute = if target.is_absolute() {
        target.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(cwd) => cwd.join(target),
            Err(e) => {
                t.notes.push(format!(
                    "current directory unknown ({e}); target not examined"
                ));
                t.chain_complete = false;
                return t;
            }
        }
    };
    let mut examined = absolute.as_path();
    while !examined.exists() {
        match examined.parent() {
            Some(p) => examined = p,
            None => break,
        }
    }
    let exists = examined == absolute.as_path();
    let resolved = std::fs::canonicalize(examined).unwrap_or_else(|_| examined.to_path_buf());
    if !exists {
        t.notes.push(format!(
            "{} does not exist; examined {}",
            absolute.display(),
            resolved.display()
        ));
    }
    t.resolved_path = Some(resolved.display().to_string());
    let Some(st) = stat(&resolved) else {
        t.notes.push(format!("cannot stat {}", resolved.display()));
        t.chain_complete = false;
        return t;
    };
    if exists {
        t.kind = Some(
            match st.kind {
                FileType::Directory => "dir",
                FileType::RegularFile => "file",
                FileType::BlockDevice => "device",
                _ => "other",
            }
            .to_string(),
        );
        if matches!(st.kind, FileType::RegularFile | FileType::BlockDevice) {
            if let Some((offset, mem)) = st.dio {
                t.dio_offset_align = Some(offset);
                t.dio_mem_align = Some(mem);
            }
        }
    }

    let mut walker = Walker::new(mounts);
    if exists && st.kind == FileType::BlockDevice {
        let rel = relation(RelationKind::Target, &t.path, None);
        walker.device(st.rdev, rel);
    } else {
        match find_mount(mounts, &resolved, st.mnt_id, Some(st.dev)) {
            Some(m) => {
                t.fs_type = Some(m.fs_type.clone());
                t.mount_point = Some(m.mount_point.clone());
                t.mount_source = Some(m.source.clone());
                t.mount_dev = Some(dev_string(m.dev));
                t.mount_options = Some(m.mount_options.clone());
                t.super_options = Some(m.super_options.clone());
                let (extra, notes) = fsinfo::extras(m);
                t.fs_extra = extra;
                t.notes.extend(notes);
                walker.mount(m, relation(RelationKind::Mounted, &m.mount_point, None));
            }
            None => {
                walker.incomplete(format!("no mount found for {}", resolved.display()));
            }
        }
    }
    t.devices = walker.out;
    t.notes.extend(walker.notes);
    t.chain_complete &= walker.complete;
    t
}

fn relation(kind: RelationKind, of: &str, detail: Option<String>) -> Relation {
    Relation {
        kind,
        of: of.to_string(),
        detail,
    }
}

/// Follows links down from mounts, files and devices, collecting devices top first.
struct Walker<'a> {
    mounts: &'a [MountEntry],
    out: Vec<BlockDevice>,
    notes: Vec<String>,
    complete: bool,
    /// Devices on the path from the top to here: a device met again is a cycle.
    stack: Vec<(u32, u32)>,
}

impl<'a> Walker<'a> {
    fn new(mounts: &'a [MountEntry]) -> Self {
        Walker {
            mounts,
            out: Vec::new(),
            notes: Vec::new(),
            complete: true,
            stack: Vec::new(),
        }
    }

    fn incomplete(&mut self, note: String) {
        self.complete = false;
        self.notes.push(note);
    }

    /// The devices under a mounted filesystem.
    fn mount(&mut self, m: &MountEntry, rel: Relation) {
        if m.dev.0 != 0 {
            self.device(m.dev, rel);
            return;
        }
        let via = (rel.kind != RelationKind::Mounted).then(|| describe(&rel));
        match m.fs_type.as_str() {
            "btrfs" => match fsinfo::btrfs_fsid(m) {
                Ok(fsid) => {
                    let members = fsinfo::btrfs_member_names(&fsid);
                    if members.is_empty() {
                        self.incomplete(format!("btrfs {fsid}: no member devices in sysfs"));
                    }
                    for name in members {
                        let detail = join_detail(format!("fsid {fsid}"), via.as_deref());
                        let r = relation(RelationKind::BtrfsMember, &m.mount_point, Some(detail));
                        match read_trim(sys_block(&name).join("dev")).and_then(|d| parse_dev(&d)) {
                            Some(dev) => self.device(dev, r),
                            None => {
                                self.incomplete(format!("btrfs member {name}: no device number"))
                            }
                        }
                    }
                }
                Err(why) => self.incomplete(format!(
                    "btrfs at {}: member devices unknown ({why})",
                    m.mount_point
                )),
            },
            "zfs" | "fuse.zfs" => {
                let pool = m.source.split('/').next().unwrap_or_default().to_string();
                match fsinfo::zpool_vdevs(&pool) {
                    Ok(vdevs) => {
                        if vdevs.is_empty() {
                            self.incomplete(format!("zfs pool {pool}: no vdevs in `zpool status`"));
                        }
                        for (group, vdev) in vdevs {
                            let mut detail = match group {
                                Some(g) => format!("{g}: {vdev}"),
                                None => vdev.clone(),
                            };
                            if let Some(v) = &via {
                                detail = join_detail(detail, Some(v));
                            }
                            let r = relation(RelationKind::ZfsMember, &pool, Some(detail));
                            self.zfs_vdev(&vdev, r);
                        }
                    }
                    Err(why) => {
                        self.incomplete(format!("zfs pool {pool}: member devices unknown ({why})"))
                    }
                }
            }
            "tmpfs" | "ramfs" | "devtmpfs" => self.notes.push(format!(
                "{} at {} lives in memory: no block device",
                m.fs_type, m.mount_point
            )),
            other => self.incomplete(format!(
                "{other} at {} (source {}) has no block device iolab can follow",
                m.mount_point, m.source
            )),
        }
    }

    /// A ZFS vdev as `zpool status` names it: a path (device or file) or a short device name.
    fn zfs_vdev(&mut self, vdev: &str, rel: Relation) {
        let candidates: Vec<PathBuf> = if vdev.starts_with('/') {
            vec![PathBuf::from(vdev)]
        } else {
            [
                "/dev",
                "/dev/disk/by-id",
                "/dev/disk/by-vdev",
                "/dev/mapper",
            ]
            .iter()
            .map(|d| Path::new(d).join(vdev))
            .collect()
        };
        for path in candidates {
            match stat(&path) {
                Some(st) if st.kind == FileType::BlockDevice => return self.device(st.rdev, rel),
                Some(st) if st.kind == FileType::RegularFile => return self.file(&path, rel),
                _ => {}
            }
        }
        self.incomplete(format!("zfs vdev {vdev}: not found as a device or file"));
    }

    /// The devices under the filesystem holding an existing file.
    fn file(&mut self, path: &Path, rel: Relation) {
        let Some(st) = stat(path) else {
            return self.incomplete(format!("cannot stat {}", path.display()));
        };
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        match find_mount(self.mounts, &canon, st.mnt_id, Some(st.dev)) {
            Some(m) => self.mount(m, rel),
            None => self.incomplete(format!("no mount found for {}", path.display())),
        }
    }

    /// One device, then whatever lies under it.
    fn device(&mut self, dev: (u32, u32), rel: Relation) {
        if self.out.len() >= MAX_DEVICES {
            return self.incomplete(format!("chain cut after {MAX_DEVICES} devices"));
        }
        if self.stack.contains(&dev) {
            return self.incomplete(format!("device {} loops back on itself", dev_string(dev)));
        }
        let Some(name) = block_name(dev) else {
            self.out.push(BlockDevice {
                name: dev_string(dev),
                dev: Some(dev_string(dev)),
                relation: Some(rel),
                ..BlockDevice::default()
            });
            return self.incomplete(format!("block device {} not in sysfs", dev_string(dev)));
        };
        let mut bd = read_device(&name);
        bd.dev.get_or_insert_with(|| dev_string(dev));
        bd.relation = Some(rel);
        let kind = bd.kind.clone();
        let backing = bd.loop_backing_file.clone();
        self.out.push(bd);
        self.stack.push(dev);
        match kind.as_deref() {
            Some("partition") => match parent_disk(&name) {
                Some(pdev) => self.device(pdev, relation(RelationKind::ParentDisk, &name, None)),
                None => self.incomplete(format!("{name}: parent disk not found")),
            },
            Some("loop") => match backing {
                None => self.incomplete(format!("{name}: backing file unknown")),
                Some(b) if b.ends_with("(deleted)") => {
                    self.incomplete(format!("{name}: backing file {b}: cannot follow"))
                }
                Some(b) => {
                    let rel = relation(RelationKind::BackingFileOn, &name, Some(b.clone()));
                    self.file(Path::new(&b), rel);
                }
            },
            _ => {
                for slave in list_dir(&sys_block(&name).join("slaves")) {
                    let rel = relation(RelationKind::Underlying, &name, None);
                    match read_trim(sys_block(&slave).join("dev")).and_then(|d| parse_dev(&d)) {
                        Some(sdev) => self.device(sdev, rel),
                        None => {
                            self.incomplete(format!("{slave} (under {name}): no device number"))
                        }
                    }
                }
            }
        }
        self.stack.pop();
    }
}

/// "backing file of loop0 (/x.img)" and the like, for a detail text.
fn describe(rel: &Relation) -> String {
    let what = match rel.kind {
        RelationKind::Target => "target",
        RelationKind::Mounted => "mounted at",
        RelationKind::BtrfsMember => "btrfs member at",
        RelationKind::ZfsMember => "zfs member of pool",
        RelationKind::ParentDisk => "disk of",
        RelationKind::BackingFileOn => "holds the backing file of",
        RelationKind::Underlying => "under",
    };
    match &rel.detail {
        Some(d) => format!("{what} {} ({d})", rel.of),
        None => format!("{what} {}", rel.of),
    }
}

fn join_detail(first: String, via: Option<&str>) -> String {
    match via {
        Some(v) => format!("{first}; {v}"),
        None => first,
    }
}

fn list_dir(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The disk a partition lives on: the parent directory of its sysfs node.
fn parent_disk(name: &str) -> Option<(u32, u32)> {
    let canon = std::fs::canonicalize(sys_block(name)).ok()?;
    parse_dev(&read_trim(canon.parent()?.join("dev"))?)
}

/// Everything sysfs says about one block device (its chain relation is set by the caller).
pub(crate) fn read_device(name: &str) -> BlockDevice {
    let sys = sys_block(name);
    let mut bd = BlockDevice {
        name: name.to_string(),
        dev: read_trim(sys.join("dev")),
        size_bytes: read_u64(sys.join("size")).and_then(|s| s.checked_mul(512)),
        ..BlockDevice::default()
    };
    let kind = if sys.join("partition").exists() {
        "partition"
    } else if sys.join("loop").is_dir() {
        "loop"
    } else if sys.join("dm").is_dir() {
        "dm"
    } else if sys.join("md").is_dir() {
        "md"
    } else if name.starts_with("zram") {
        "zram"
    } else {
        "disk"
    };
    bd.kind = Some(kind.to_string());
    if kind == "partition" {
        // Queue and hardware facts belong to the disk, which follows in the chain.
        bd.partition_start_bytes = read_u64(sys.join("start")).and_then(|s| s.checked_mul(512));
        return bd;
    }

    let q = sys.join("queue");
    bd.rotational = read_bool(q.join("rotational"));
    bd.logical_block_size = read_u64(q.join("logical_block_size"));
    bd.physical_block_size = read_u64(q.join("physical_block_size"));
    bd.scheduler = read_trim(q.join("scheduler")).and_then(|s| selected_scheduler(&s));
    bd.nr_requests = read_u64(q.join("nr_requests"));
    bd.read_ahead_kb = read_u64(q.join("read_ahead_kb"));
    bd.write_cache = read_trim(q.join("write_cache"));

    match kind {
        "loop" => {
            let l = sys.join("loop");
            bd.loop_backing_file = read_trim(l.join("backing_file"));
            bd.loop_dio = read_bool(l.join("dio"));
            bd.loop_offset = read_u64(l.join("offset"));
            bd.loop_sizelimit = read_u64(l.join("sizelimit"));
            bd.emulated_disk = bd.loop_backing_file.as_deref().and_then(emulated_disk);
        }
        "dm" => bd.dm_name = read_trim(sys.join("dm/name")),
        _ => {}
    }

    let d = sys.join("device");
    if d.is_dir() {
        let first = |files: &[&str]| files.iter().find_map(|f| read_trim(d.join(f)));
        bd.model = first(&["model", "name"]);
        bd.vendor = first(&["vendor"]);
        bd.firmware_rev = first(&["firmware_rev", "rev", "fwrev"]);
        bd.serial = first(&["serial"])
            .or_else(|| read_trim(sys.join("serial")))
            .or_else(|| {
                std::fs::read(d.join("vpd_pg80"))
                    .ok()
                    .and_then(|b| vpd_serial(&b))
            });
        let canon = std::fs::canonicalize(&sys).unwrap_or_default();
        bd.bus = bus(&d, &canon);
        match bd.bus.as_deref() {
            Some("ata") | Some("scsi") => bd.link_power_policy = link_power_policy(&canon),
            Some("nvme") => bd.nvme_power = Some(nvme_power(&d)),
            _ => {}
        }
    } else if let Some(serial) = read_trim(sys.join("serial")) {
        bd.serial = Some(serial);
    }
    bd
}

/// "none [mq-deadline] kyber bfq" -> "mq-deadline"; a single entry without brackets is
/// the only choice and so the selected one.
pub(crate) fn selected_scheduler(s: &str) -> Option<String> {
    if let Some(open) = s.find('[') {
        let rest = &s[open + 1..];
        return rest.find(']').map(|close| rest[..close].to_string());
    }
    let mut words = s.split_whitespace();
    match (words.next(), words.next()) {
        (Some(only), None) => Some(only.to_string()),
        _ => None,
    }
}

/// The unit serial number of a SCSI VPD page 0x80 (4-byte header, then ASCII).
pub(crate) fn vpd_serial(page: &[u8]) -> Option<String> {
    if page.len() < 4 || page[1] != 0x80 {
        return None;
    }
    let len = u16::from_be_bytes([page[2], page[3]]) as usize;
    let body = page.get(4..(4 + len).min(page.len()))?;
    let s = String::from_utf8_lossy(body)
        .trim_matches(|c: char| c.is_whitespace() || c == '\0')
        .to_string();
    (!s.is_empty()).then_some(s)
}

/// How the disk is attached, from the subsystem of its sysfs `device` and its sysfs path.
fn bus(device: &Path, canon: &Path) -> Option<String> {
    let subsystem = link_name(device.join("subsystem"))?;
    let has = |prefix: &str| {
        canon.components().any(|c| {
            let c = c.as_os_str().to_string_lossy();
            c.strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    };
    Some(
        match subsystem.as_str() {
            "nvme" | "nvme-subsystem" => "nvme",
            "scsi" if has("ata") => "ata",
            "scsi" if has("usb") => "usb",
            other => other,
        }
        .to_string(),
    )
}

/// `link_power_management_policy` of the SCSI host (`hostN` in the sysfs path) a disk hangs
/// off. libata hosts have it; other SCSI hosts do not.
fn link_power_policy(canon: &Path) -> Option<String> {
    let host = canon.components().find_map(|c| {
        let c = c.as_os_str().to_string_lossy();
        let n = c.strip_prefix("host")?;
        (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| c.to_string())
    })?;
    read_trim(
        Path::new("/sys/class/scsi_host")
            .join(host)
            .join("link_power_management_policy"),
    )
}

/// NVMe power settings visible in sysfs: each controller's runtime-PM and APST latency
/// tolerance, and the nvme_core module's APST parameters.
fn nvme_power(device: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let canon = std::fs::canonicalize(device).unwrap_or_else(|_| device.to_path_buf());
    let own = canon
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // A namespace under native multipath hangs off the subsystem, which links its controllers.
    let controllers: Vec<PathBuf> = if own.starts_with("nvme-subsys") {
        list_dir(&canon)
            .into_iter()
            .filter(|n| {
                n.strip_prefix("nvme")
                    .is_some_and(|r| r.bytes().all(|b| b.is_ascii_digit()) && !r.is_empty())
            })
            .map(|n| canon.join(n))
            .collect()
    } else {
        vec![canon.clone()]
    };
    for c in controllers {
        let cname = c
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for f in ["control", "runtime_status", "pm_qos_latency_tolerance_us"] {
            if let Some(v) = read_trim(c.join("power").join(f)) {
                out.insert(format!("{cname}/power/{f}"), v);
            }
        }
    }
    let params = Path::new("/sys/module/nvme_core/parameters");
    for p in [
        "default_ps_max_latency_us",
        "apst_primary_timeout_ms",
        "apst_secondary_timeout_ms",
        "apst_primary_latency_tol_us",
        "apst_secondary_latency_tol_us",
    ] {
        if let Some(v) = read_trim(params.join(p)) {
            out.insert(format!("nvme_core.{p}"), v);
        }
    }
    out
}

/// The stats of the iolab emulated disk whose image `file` is (a file on a FUSE mount with
/// the source `iolab-emudisk:...`; its `stats.json` lies beside the mount point), if it is one.
fn emulated_disk(file: &str) -> Option<serde_json::Value> {
    let m = crate::mounts::mount_of(Path::new(file))?;
    if !m.source.starts_with("iolab-emudisk:") {
        return None;
    }
    let stats = Path::new(&m.mount_point).parent()?.join("stats.json");
    serde_json::from_str(&std::fs::read_to_string(stats).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedulers() {
        assert_eq!(
            selected_scheduler("none [mq-deadline] kyber bfq").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(
            selected_scheduler("[none] mq-deadline").as_deref(),
            Some("none")
        );
        assert_eq!(selected_scheduler("none").as_deref(), Some("none"));
        assert_eq!(selected_scheduler("none kyber"), None);
    }

    #[test]
    fn vpd_page_80() {
        let mut page = vec![0x00, 0x80, 0x00, 0x0a];
        page.extend_from_slice(b"  S3Z9NB0K");
        assert_eq!(vpd_serial(&page).as_deref(), Some("S3Z9NB0K"));
        assert_eq!(vpd_serial(&[0, 0x83, 0, 0]), None);
        assert_eq!(vpd_serial(&[0, 0x80, 0, 0]), None);
    }

    #[test]
    fn root_disk_reads_without_panicking() {
        for name in list_dir(Path::new("/sys/class/block")) {
            let bd = read_device(&name);
            assert_eq!(bd.name, name);
        }
    }
}
