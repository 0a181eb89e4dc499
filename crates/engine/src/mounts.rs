//! Which mount holds a path: mount point, filesystem type, source and options, from
//! /proc/self/mountinfo (longest matching mount point wins).

use std::path::Path;

/// One line of /proc/self/mountinfo, the fields iolab uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
    /// Per-mount options and superblock options, comma-joined.
    pub options: String,
    /// "major:minor" of the device holding the filesystem.
    pub dev: String,
}

/// Mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let octal = |c: u8| (b'0'..=b'7').contains(&c);
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|&c| octal(c)) {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let l: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            if l.len() < 6 || r.len() < 3 {
                return None;
            }
            Some(MountEntry {
                mount_point: unescape(l[4]),
                fs_type: r[0].to_string(),
                source: unescape(r[1]),
                options: format!("{},{}", l[5], r[2]),
                dev: l[2].to_string(),
            })
        })
        .collect()
}

/// All current mounts.
pub fn mounts() -> Vec<MountEntry> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// The mount holding `path` (which should exist; symlinks are resolved).
pub fn mount_of(path: &Path) -> Option<MountEntry> {
    let canon = std::fs::canonicalize(path).ok()?;
    let canon = canon.to_string_lossy();
    mounts()
        .into_iter()
        .filter(|m| {
            let mp = m.mount_point.as_str();
            mp == "/"
                || canon == mp
                || (canon.starts_with(mp) && canon.as_bytes().get(mp.len()) == Some(&b'/'))
        })
        .max_by_key(|m| m.mount_point.len())
}

/// Filesystem type of the mount holding `path`, or "unknown".
pub fn fs_type_of(path: &Path) -> String {
    mount_of(path)
        .map(|m| m.fs_type)
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_unescapes() {
        let t = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                 40 22 7:0 / /mnt/my\\040disk rw - xfs /dev/loop0 rw,attr2\n";
        let m = parse_mountinfo(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].mount_point, "/mnt/my disk");
        assert_eq!(m[1].fs_type, "xfs");
        assert_eq!(m[1].dev, "7:0");
        assert_eq!(m[1].options, "rw,rw,attr2");
    }

    #[test]
    fn root_is_found() {
        assert!(mount_of(Path::new("/")).is_some());
    }
}
