//! `/proc/self/mountinfo`: parsing, and finding the mount that holds a path.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One line of `/proc/self/mountinfo` (see proc(5)), with octal escapes decoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountEntry {
    pub mount_id: u64,
    pub parent_id: u64,
    /// The superblock's device number (anonymous `0:N` for btrfs, tmpfs, FUSE, ...).
    pub dev: (u32, u32),
    /// The directory of the filesystem that is mounted here ("/" unless a bind or subvolume).
    pub root: String,
    pub mount_point: String,
    pub mount_options: String,
    pub fs_type: String,
    pub source: String,
    pub super_options: String,
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // The optional fields end at a lone "-"; three fields follow it.
    let sep = fields.iter().position(|f| *f == "-")?;
    if sep < 6 || fields.len() < sep + 3 {
        return None;
    }
    Some(MountEntry {
        mount_id: fields[0].parse().ok()?,
        parent_id: fields[1].parse().ok()?,
        dev: crate::util::parse_dev(fields[2])?,
        root: unescape_octal(fields[3]),
        mount_point: unescape_octal(fields[4]),
        mount_options: fields[5].to_string(),
        fs_type: unescape_octal(fields[sep + 1]),
        source: unescape_octal(fields[sep + 2]),
        super_options: fields
            .get(sep + 3)
            .map(|s| unescape_octal(s))
            .unwrap_or_default(),
    })
}

/// Decodes the kernel's `\ooo` escapes (space, tab, newline, backslash) used in
/// /proc/self/mountinfo and /proc/swaps.
pub fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            if let Ok(byte) = u8::try_from(v) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn read_self() -> Option<Vec<MountEntry>> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .map(|t| parse_mountinfo(&t))
}

/// Whether `mount_point` is `path` or one of its ancestors.
fn covers(mount_point: &str, path: &Path) -> bool {
    path.starts_with(Path::new(mount_point))
}

/// The mount holding the existing, canonical `path`: by the statx mount id when the kernel
/// gives one, else by device number among the mounts covering the path, else the deepest
/// covering mount (the last one mounted wins ties, as it hides the others).
pub(crate) fn find_mount<'a>(
    mounts: &'a [MountEntry],
    path: &Path,
    mnt_id: Option<u64>,
    st_dev: Option<(u32, u32)>,
) -> Option<&'a MountEntry> {
    if let Some(id) = mnt_id {
        if let Some(m) = mounts.iter().find(|m| m.mount_id == id) {
            return Some(m);
        }
    }
    let deepest = |pred: &dyn Fn(&MountEntry) -> bool| {
        mounts
            .iter()
            .filter(|m| covers(&m.mount_point, path) && pred(m))
            .fold(None::<&MountEntry>, |best, m| match best {
                Some(b) if b.mount_point.len() > m.mount_point.len() => Some(b),
                _ => Some(m),
            })
    };
    if let Some(dev) = st_dev {
        if let Some(m) = deepest(&|m: &MountEntry| m.dev == dev) {
            return Some(m);
        }
    }
    deepest(&|_: &MountEntry| true)
}

/// The mount holding an existing `path` (symlinks resolved): the deepest mount covering it
/// whose device number matches the path's, else the deepest covering mount.
pub fn mount_of(path: &Path) -> Option<MountEntry> {
    use std::os::unix::fs::MetadataExt;
    let canon = std::fs::canonicalize(path).ok()?;
    let dev = std::fs::metadata(&canon).ok().map(|m| {
        let d = m.dev();
        (rustix::fs::major(d), rustix::fs::minor(d))
    });
    let mounts = read_self()?;
    find_mount(&mounts, &canon, None, dev).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime shared:12 - cgroup cgroup rw,blkio
43 27 0:39 / /tmp/b\\040mnt rw,relatime - btrfs /dev/loop0 rw,space_cache=v2,subvolid=5,subvol=/
44 27 0:40 / /tmp/ztmnt rw,relatime - fuse.zfs pool/ds rw,user_id=0
45 27 0:41 / /tmp rw - tmpfs tmpfs rw
46 45 7:1 / /tmp/deep rw - ext4 /dev/loop1 rw
47 45 7:2 / /tmp/deep rw - xfs /dev/loop2 rw
garbage line
";

    #[test]
    fn parses_fields_and_escapes() {
        let m = parse_mountinfo(SAMPLE);
        assert_eq!(m.len(), 7);
        assert_eq!(m[0].dev, (254, 0));
        assert_eq!(m[0].fs_type, "ext4");
        assert_eq!(m[0].source, "/dev/vda");
        assert_eq!(m[0].super_options, "rw,discard,resv_strict");
        assert_eq!(m[1].fs_type, "cgroup");
        assert_eq!(m[1].super_options, "rw,blkio");
        assert_eq!(m[2].mount_point, "/tmp/b mnt");
        assert_eq!(m[3].source, "pool/ds");
    }

    #[test]
    fn finds_mounts() {
        let m = parse_mountinfo(SAMPLE);
        let p = Path::new("/tmp/deep/x");
        assert_eq!(find_mount(&m, p, Some(43), None).unwrap().mount_id, 43);
        // No mount id: device number among covering mounts, then deepest (last wins).
        assert_eq!(find_mount(&m, p, None, Some((7, 1))).unwrap().mount_id, 46);
        assert_eq!(find_mount(&m, p, None, Some((9, 9))).unwrap().mount_id, 47);
        assert_eq!(
            find_mount(&m, Path::new("/tmpx"), None, None)
                .unwrap()
                .mount_id,
            27
        );
        // A btrfs subvolume has its own st_dev: falls back to the covering mount.
        let sub = Path::new("/tmp/b mnt/sv");
        assert_eq!(
            find_mount(&m, sub, None, Some((0, 77))).unwrap().mount_id,
            43
        );
    }

    #[test]
    fn octal_escapes_and_the_root_mount() {
        assert_eq!(unescape_octal(r"/a\040b\011c\134d"), "/a b\tc\\d");
        assert_eq!(unescape_octal(r"/x\04"), r"/x\04");
        assert_eq!(unescape_octal(r"/x\9999"), r"/x\9999");
        assert!(mount_of(Path::new("/")).is_some());
    }
}
