//! Filesystem specifics: btrfs (fsid, members, profiles, compression option) from sysfs and
//! mount options; ZFS (dataset properties, pool vdevs) from the `zfs` and `zpool` commands.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::error::EnvError;
use crate::mounts::MountEntry;
use crate::util::{block_name, read_trim, run};

/// How long a `zfs`/`zpool`/`btrfs` query may take before it counts as failed.
const COMMAND_LIMIT: Duration = Duration::from_secs(10);

const BTRFS_SYSFS: &str = "/sys/fs/btrfs";

/// The ZFS dataset properties recorded (those the installed `zfs` does not know are skipped).
const ZFS_PROPERTIES: &[&str] = &[
    "compression",
    "recordsize",
    "sync",
    "atime",
    "primarycache",
    "logbias",
    "dedup",
    "checksum",
    "copies",
];

/// `fs_extra` for a mount, and notes on what could not be read.
pub(crate) fn extras(m: &MountEntry) -> (BTreeMap<String, String>, Vec<String>) {
    let mut extra = BTreeMap::new();
    let mut notes = Vec::new();
    match m.fs_type.as_str() {
        "btrfs" => {
            let compress = m.super_options.split(',').find_map(|o| {
                o.strip_prefix("compress-force=")
                    .map(|v| format!("{v} (forced)"))
                    .or_else(|| o.strip_prefix("compress=").map(str::to_string))
            });
            // Without the option, only files with a compression property are compressed.
            extra.insert(
                "compress".into(),
                compress.unwrap_or_else(|| "(not set)".into()),
            );
            match btrfs_fsid(m) {
                Ok(fsid) => {
                    let dir = Path::new(BTRFS_SYSFS).join(&fsid);
                    for (key, file) in [
                        ("label", "label"),
                        ("checksum", "checksum"),
                        ("sectorsize", "sectorsize"),
                        ("nodesize", "nodesize"),
                    ] {
                        if let Some(v) = read_trim(dir.join(file)) {
                            extra.insert(key.into(), v);
                        }
                    }
                    for class in ["data", "metadata", "system"] {
                        let profiles = btrfs_profiles(&dir.join("allocation").join(class));
                        if !profiles.is_empty() {
                            extra.insert(format!("{class}_profile"), profiles.join(","));
                        }
                    }
                    extra.insert("fsid".into(), fsid);
                }
                Err(why) => notes.push(format!("btrfs fsid unknown: {why}")),
            }
        }
        "zfs" | "fuse.zfs" => match zfs_properties(&m.source) {
            Ok(props) => extra.extend(props),
            Err(why) => notes.push(format!("zfs properties of {} unknown: {why}", m.source)),
        },
        _ => {}
    }
    (extra, notes)
}

/// Allocation profiles in use for one btrfs block-group class (subdirectories of
/// `allocation/<class>/` named after a profile).
fn btrfs_profiles(dir: &Path) -> Vec<String> {
    const PROFILES: &[&str] = &[
        "single", "dup", "raid0", "raid1", "raid1c3", "raid1c4", "raid10", "raid5", "raid6",
    ];
    PROFILES
        .iter()
        .filter(|p| dir.join(p).is_dir())
        .map(|p| p.to_string())
        .collect()
}

/// The fsid (the `/sys/fs/btrfs/<fsid>` directory) of a mounted btrfs: found through the
/// mount source's device among the members sysfs lists, else from `btrfs filesystem show`.
pub(crate) fn btrfs_fsid(m: &MountEntry) -> Result<String, EnvError> {
    if let Ok(meta) = std::fs::metadata(&m.source) {
        use std::os::unix::fs::MetadataExt;
        let rdev = meta.rdev();
        let dev = (rustix::fs::major(rdev), rustix::fs::minor(rdev));
        if let Some(name) = block_name(dev) {
            if let Ok(rd) = std::fs::read_dir(BTRFS_SYSFS) {
                for e in rd.filter_map(|e| e.ok()) {
                    if e.path().join("devices").join(&name).exists() {
                        return Ok(e.file_name().to_string_lossy().into_owned());
                    }
                }
            }
        }
    }
    let out = run(
        "btrfs",
        &["filesystem", "show", &m.mount_point],
        COMMAND_LIMIT,
    )?;
    let uuid = out
        .lines()
        .find_map(|l| l.split("uuid:").nth(1).map(|u| u.trim().to_string()))
        .ok_or_else(|| EnvError::Missing("`btrfs filesystem show` printed no uuid".into()))?;
    if Path::new(BTRFS_SYSFS).join(&uuid).is_dir() {
        Ok(uuid)
    } else {
        Err(EnvError::Missing(format!(
            "{BTRFS_SYSFS}/{uuid} does not exist"
        )))
    }
}

/// Kernel names of a btrfs filesystem's member devices, sorted.
pub(crate) fn btrfs_member_names(fsid: &str) -> Vec<String> {
    let dir = Path::new(BTRFS_SYSFS).join(fsid).join("devices");
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

/// Selected properties of a ZFS dataset, via `zfs get -H -o property,value all DATASET`
/// (asking for "all" works with old `zfs` builds that lack some properties, e.g. `sync`).
fn zfs_properties(dataset: &str) -> Result<BTreeMap<String, String>, EnvError> {
    let out = run(
        "zfs",
        &["get", "-H", "-o", "property,value", "all", dataset],
        COMMAND_LIMIT,
    )?;
    Ok(parse_zfs_get(&out))
}

pub(crate) fn parse_zfs_get(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(k, _)| ZFS_PROPERTIES.contains(k))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// The leaf vdevs of a pool, each with the group it sits in ("mirror-0", "logs", ...), from
/// `zpool status -P` (full paths), or plain `zpool status` where `-P` is not supported.
pub(crate) fn zpool_vdevs(pool: &str) -> Result<Vec<(Option<String>, String)>, EnvError> {
    let out = run("zpool", &["status", "-P", pool], COMMAND_LIMIT)
        .or_else(|_| run("zpool", &["status", pool], COMMAND_LIMIT))?;
    let vdevs = parse_zpool_status(&out);
    if vdevs.is_empty() {
        Err(EnvError::Missing(
            "no config section in `zpool status`".into(),
        ))
    } else {
        Ok(vdevs)
    }
}

/// Parses the `config:` tree of `zpool status`: entries are indented by depth, the first is
/// the pool itself, and a leaf (a vdev) is an entry not followed by a deeper one.
pub(crate) fn parse_zpool_status(out: &str) -> Vec<(Option<String>, String)> {
    let mut entries: Vec<(usize, String)> = Vec::new();
    let mut in_config = false;
    let mut in_tree = false;
    for line in out.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("config:") {
            in_config = true;
            continue;
        }
        if !in_config {
            continue;
        }
        if !in_tree {
            if trimmed.starts_with("NAME") && trimmed.contains("STATE") {
                in_tree = true;
            }
            continue;
        }
        if trimmed.is_empty() {
            if entries.is_empty() {
                continue;
            }
            // A blank line ends the pool's tree; later sections (spares) are not parsed.
            break;
        }
        let indent = line.len() - line.trim_start().len();
        if let Some(name) = trimmed.split_whitespace().next() {
            entries.push((indent, name.to_string()));
        }
    }
    let mut out = Vec::new();
    // Open entries enclosing the current one: (indent, index into entries).
    let mut open: Vec<(usize, usize)> = Vec::new();
    for (i, (indent, name)) in entries.iter().enumerate() {
        while open.last().is_some_and(|(oi, _)| oi >= indent) {
            open.pop();
        }
        let is_leaf = entries.get(i + 1).is_none_or(|(next, _)| next <= indent);
        if i > 0 && is_leaf {
            // The innermost enclosing group other than the pool itself (entry 0), if any.
            let group = open
                .iter()
                .rev()
                .find(|(_, j)| *j != 0)
                .map(|(_, j)| entries[*j].1.clone());
            out.push((group, name.clone()));
        }
        open.push((*indent, i));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zpool_status_tree() {
        let out = "  pool: tank\n state: ONLINE\n scrub: none requested\nconfig:\n\n\
\tNAME              STATE     READ WRITE CKSUM\n\
\ttank              ONLINE       0     0     0\n\
\t  mirror-0        ONLINE       0     0     0\n\
\t    /tmp/zt1.img  ONLINE       0     0     0\n\
\t    /tmp/zt2.img  ONLINE       0     0     0\n\
\t  /dev/sdc1       ONLINE       0     0     0\n\
\tlogs\n\
\t  /dev/nvme0n1p2  ONLINE       0     0     0\n\
\nerrors: No known data errors\n";
        let v = parse_zpool_status(out);
        assert_eq!(
            v,
            vec![
                (Some("mirror-0".into()), "/tmp/zt1.img".into()),
                (Some("mirror-0".into()), "/tmp/zt2.img".into()),
                (None, "/dev/sdc1".into()),
                (Some("logs".into()), "/dev/nvme0n1p2".into()),
            ]
        );
        assert!(parse_zpool_status("no pools available\n").is_empty());
    }

    #[test]
    fn zfs_get_output() {
        let out = "type\tfilesystem\ncompression\tlz4\nrecordsize\t128K\nsync\tstandard\n";
        let p = parse_zfs_get(out);
        assert_eq!(p.get("compression").map(String::as_str), Some("lz4"));
        assert_eq!(p.get("recordsize").map(String::as_str), Some("128K"));
        assert_eq!(p.get("sync").map(String::as_str), Some("standard"));
        assert!(!p.contains_key("type"));
    }
}
