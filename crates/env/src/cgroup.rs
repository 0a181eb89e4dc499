//! Block-I/O throttles that apply to this process: cgroup v1 `blkio.throttle.*` of its blkio
//! cgroup and every ancestor, or cgroup v2 `io.max` where no v1 blkio hierarchy is mounted.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::EnvError;
use crate::mounts::MountEntry;
use crate::util::{block_name, dev_string, parse_dev};
use crate::Throttle;

/// What a throttle limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleKind {
    /// Bytes per second read.
    ReadBps,
    /// Bytes per second written.
    WriteBps,
    /// Read I/Os per second.
    ReadIops,
    /// Write I/Os per second.
    WriteIops,
}

impl ThrottleKind {
    /// "read_bps" etc., as the v1 file names spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ThrottleKind::ReadBps => "read_bps",
            ThrottleKind::WriteBps => "write_bps",
            ThrottleKind::ReadIops => "read_iops",
            ThrottleKind::WriteIops => "write_iops",
        }
    }
}

/// One line of `/proc/<pid>/cgroup`: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMembership {
    /// 0 for the cgroup v2 (unified) hierarchy.
    pub hierarchy_id: u32,
    /// Controllers bound to the hierarchy (empty for v2); named hierarchies appear as "name=x".
    pub controllers: Vec<String>,
    /// The cgroup's path inside its hierarchy, starting with "/".
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup` text; malformed lines are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<CgroupMembership> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.splitn(3, ':');
            let id = it.next()?.trim().parse().ok()?;
            let controllers = it
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = it.next()?.to_string();
            Some(CgroupMembership {
                hierarchy_id: id,
                controllers,
                path,
            })
        })
        .collect()
}

const V1_FILES: [(&str, ThrottleKind); 4] = [
    ("blkio.throttle.read_bps_device", ThrottleKind::ReadBps),
    ("blkio.throttle.write_bps_device", ThrottleKind::WriteBps),
    ("blkio.throttle.read_iops_device", ThrottleKind::ReadIops),
    ("blkio.throttle.write_iops_device", ThrottleKind::WriteIops),
];

/// The throttles set in one cgroup directory: its four v1 `blkio.throttle.*_device` files,
/// or its v2 `io.max`. A cgroup directory with neither has none (`Ok(vec![])`); a directory
/// that is not a cgroup, or a file that cannot be read, is an error.
pub fn throttles_of_cgroup(dir: &Path) -> io::Result<Vec<Throttle>> {
    let cgroup = dir.display().to_string();
    let mut out = Vec::new();
    let mut found = false;
    for (file, kind) in V1_FILES {
        match std::fs::read_to_string(dir.join(file)) {
            Ok(text) => {
                found = true;
                for line in text.lines() {
                    let mut it = line.split_whitespace();
                    let (Some(dev), Some(limit)) = (it.next(), it.next()) else {
                        continue;
                    };
                    if let (Some(dev), Ok(limit)) = (parse_dev(dev), limit.parse()) {
                        out.push(throttle(&cgroup, dev, kind, limit));
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    if found {
        return Ok(out);
    }
    match std::fs::read_to_string(dir.join("io.max")) {
        Ok(text) => {
            for line in text.lines() {
                let mut it = line.split_whitespace();
                let Some(dev) = it.next().and_then(parse_dev) else {
                    continue;
                };
                for setting in it {
                    let Some((key, value)) = setting.split_once('=') else {
                        continue;
                    };
                    let kind = match key {
                        "rbps" => ThrottleKind::ReadBps,
                        "wbps" => ThrottleKind::WriteBps,
                        "riops" => ThrottleKind::ReadIops,
                        "wiops" => ThrottleKind::WriteIops,
                        _ => continue,
                    };
                    if let Ok(limit) = value.parse() {
                        out.push(throttle(&cgroup, dev, kind, limit));
                    }
                }
            }
            Ok(out)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A cgroup without throttle files: blk-throttle not built in (v1), or the io
            // controller not enabled here / the root cgroup (v2). Nothing can be set here.
            if dir.join("cgroup.procs").exists() {
                Ok(out)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} is not a cgroup directory", dir.display()),
                ))
            }
        }
        Err(e) => Err(e),
    }
}

fn throttle(cgroup: &str, dev: (u32, u32), kind: ThrottleKind, limit: u64) -> Throttle {
    Throttle {
        cgroup: cgroup.to_string(),
        device: dev_string(dev),
        device_name: block_name(dev),
        kind,
        limit,
    }
}

/// The throttles of cgroup `path` (as `/proc/<pid>/cgroup` gives it, relative to the
/// hierarchy's root) under the hierarchy mounted at `root`, and of each of its ancestors up to
/// the root: limits of a parent bound its children too. The cgroup's own come first.
pub fn throttles_along(root: &Path, path: &str) -> io::Result<Vec<Throttle>> {
    let mut dir: PathBuf = root.to_path_buf();
    let mut dirs = vec![dir.clone()];
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part == ".." || part == "." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unexpected cgroup path {path}"),
            ));
        }
        dir.push(part);
        dirs.push(dir.clone());
    }
    let mut out = Vec::new();
    for d in dirs.iter().rev() {
        out.extend(throttles_of_cgroup(d)?);
    }
    Ok(out)
}

/// Where this process's cgroup for one controller lives: the v1 hierarchy that has the
/// controller when the process is in one, else the unified v2 hierarchy.
pub(crate) struct OwnCgroup {
    /// The path `/proc/self/cgroup` gives.
    pub path: String,
    /// The mount point of the hierarchy.
    pub mount_point: PathBuf,
    /// `path` relative to that mount.
    pub rel: String,
    /// A cgroup v1 hierarchy (else v2).
    pub v1: bool,
}

/// This process's cgroup for `controller` ("blkio", "memory"), or why it cannot be found.
pub(crate) fn own_cgroup(mounts: &[MountEntry], controller: &str) -> Result<OwnCgroup, EnvError> {
    const PROC_CGROUP: &str = "/proc/self/cgroup";
    let text = std::fs::read_to_string(PROC_CGROUP).map_err(|source| EnvError::Read {
        path: PROC_CGROUP.into(),
        source,
    })?;
    let member = parse_proc_cgroup(&text);
    let has_opt = |m: &MountEntry, opt: &str| m.super_options.split(',').any(|o| o == opt);
    let (c, mount, v1) = if let Some(c) = member
        .iter()
        .find(|c| c.hierarchy_id != 0 && c.controllers.iter().any(|c| c == controller))
    {
        let mount = mounts
            .iter()
            .find(|m| m.fs_type == "cgroup" && has_opt(m, controller))
            .ok_or_else(|| {
                EnvError::Missing(format!(
                    "this process is in a {controller} cgroup, but no {controller} hierarchy \
                     is mounted"
                ))
            })?;
        (c, mount, true)
    } else if let Some(c) = member.iter().find(|c| c.hierarchy_id == 0) {
        let mount = mounts
            .iter()
            .find(|m| m.fs_type == "cgroup2")
            .ok_or_else(|| {
                EnvError::Missing(
                    "this process is in a cgroup v2, but no cgroup2 hierarchy is mounted".into(),
                )
            })?;
        (c, mount, false)
    } else {
        return Err(EnvError::Missing(format!(
            "no {controller} (v1) or unified (v2) cgroup in {PROC_CGROUP}"
        )));
    };
    Ok(OwnCgroup {
        path: c.path.clone(),
        mount_point: PathBuf::from(&mount.mount_point),
        rel: relative(&c.path, &mount.root)?.to_string(),
        v1,
    })
}

/// The throttles that apply to this process, or why they cannot be known.
pub(crate) fn capture_throttles(mounts: &[MountEntry]) -> Result<Vec<Throttle>, EnvError> {
    let own = own_cgroup(mounts, "blkio")?;
    throttles_along(&own.mount_point, &own.rel).map_err(|source| EnvError::Throttles {
        hierarchy: if own.v1 { "blkio" } else { "v2" },
        cgroup: own.path,
        source,
    })
}

/// A cgroup path relative to a mount of its hierarchy whose root is `mount_root`.
fn relative<'a>(path: &'a str, mount_root: &str) -> Result<&'a str, EnvError> {
    if mount_root == "/" {
        return Ok(path);
    }
    match path.strip_prefix(mount_root) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => Ok(rest),
        _ => Err(EnvError::Missing(format!(
            "cgroup {path} is outside the mounted part {mount_root}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_v1_and_v2() {
        let text = "9:name=systemd:/\n7:blkio:/iolab/run:1\n3:cpu,cpuacct:/\n0::/user.slice\n";
        let c = parse_proc_cgroup(text);
        assert_eq!(c.len(), 4);
        assert_eq!(c[1].hierarchy_id, 7);
        assert_eq!(c[1].controllers, vec!["blkio"]);
        assert_eq!(c[1].path, "/iolab/run:1");
        assert_eq!(c[2].controllers, vec!["cpu", "cpuacct"]);
        assert_eq!(c[3].hierarchy_id, 0);
        assert!(c[3].controllers.is_empty());
        assert_eq!(c[3].path, "/user.slice");
    }

    #[test]
    fn io_max_and_v1_files() {
        let dir = std::env::temp_dir().join(format!("iolab-env-cg-{}", std::process::id()));
        let v1 = dir.join("v1");
        let v2 = dir.join("v2");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::create_dir_all(&v2).unwrap();
        for (f, _) in V1_FILES {
            std::fs::write(v1.join(f), "").unwrap();
        }
        std::fs::write(v1.join("blkio.throttle.write_iops_device"), "8:16 300\n").unwrap();
        std::fs::write(
            v2.join("io.max"),
            "8:0 rbps=2097152 wbps=max riops=max wiops=120\n",
        )
        .unwrap();
        let a = throttles_of_cgroup(&v1).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(
            (a[0].device.as_str(), a[0].kind, a[0].limit),
            ("8:16", ThrottleKind::WriteIops, 300)
        );
        let b = throttles_of_cgroup(&v2).unwrap();
        let got: Vec<_> = b.iter().map(|t| (t.kind, t.limit)).collect();
        assert_eq!(
            got,
            vec![
                (ThrottleKind::ReadBps, 2097152),
                (ThrottleKind::WriteIops, 120)
            ]
        );
        assert!(throttles_of_cgroup(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn relative_paths() {
        assert_eq!(relative("/a/b", "/").unwrap(), "/a/b");
        assert_eq!(relative("/a/b", "/a").unwrap(), "/b");
        assert!(relative("/ab", "/a").is_err());
    }
}
