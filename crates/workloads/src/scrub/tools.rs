//! The filesystem tools the scrub test drives, and parsers for what they print: `btrfs scrub
//! start -B -R`, `btrfs device stats`, `btrfs-map-logical`, `zpool status`, `zpool list`.
//! The parsers are pure functions, tested on output captured on this machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::ScrubError;

/// The full path of `tool`, or an error naming the package that provides it.
pub(crate) fn find(tool: &str, package: &str) -> Result<PathBuf, ScrubError> {
    iolab_sys::find_tool(tool).ok_or_else(|| {
        ScrubError::Invalid(format!(
            "`{tool}` is not installed (Debian package {package}); the scrub test needs it"
        ))
    })
}

/// Runs `argv`, returning its output whatever the exit status.
pub(crate) fn output(argv: &[&str]) -> Result<Output, ScrubError> {
    Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| ScrubError::Failed(format!("cannot run `{}`: {e}", argv.join(" "))))
}

/// Runs `argv` and returns its standard output; a non-zero exit is an error quoting stderr.
pub(crate) fn run(argv: &[&str]) -> Result<String, ScrubError> {
    let out = output(argv)?;
    if !out.status.success() {
        return Err(ScrubError::Failed(format!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `name: value` lines of `btrfs scrub start -B -R` (and `btrfs scrub status -R`):
/// `data_bytes_scrubbed`, `csum_errors`, `corrected_errors`, `uncorrectable_errors`, ...
pub(crate) fn parse_btrfs_scrub_raw(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            let k = k.trim();
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                return None;
            }
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// `btrfs device stats MNT`: per device path, per counter (`corruption_errs`, ...).
pub(crate) fn parse_btrfs_device_stats(text: &str) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for line in text.lines() {
        // [/dev/loop1].corruption_errs  2
        let Some(rest) = line.trim().strip_prefix('[') else {
            continue;
        };
        let Some((dev, rest)) = rest.split_once("].") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(counter), Some(value)) = (words.next(), words.next()) else {
            continue;
        };
        if let Ok(v) = value.parse() {
            out.entry(dev.to_string())
                .or_default()
                .insert(counter.to_string(), v);
        }
    }
    out
}

/// One line of `btrfs-map-logical`: where copy `mirror` of a logical range lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MirrorLocation {
    pub mirror: u32,
    pub physical: u64,
    pub device: PathBuf,
}

/// `mirror 2 logical 88145920 physical 67174400 device /dev/loop1` lines.
pub(crate) fn parse_map_logical(text: &str) -> Vec<MirrorLocation> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() != 8 || w[0] != "mirror" || w[4] != "physical" || w[6] != "device" {
                return None;
            }
            Some(MirrorLocation {
                mirror: w[1].parse().ok()?,
                physical: w[5].parse().ok()?,
                device: PathBuf::from(w[7]),
            })
        })
        .collect()
}

/// One row of the config table of `zpool status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VdevRow {
    pub name: String,
    /// Indentation depth: 0 the pool, 1 a top-level vdev (mirror-0, raidz1-0, or a plain
    /// device), 2 a device inside a mirror or raidz.
    pub depth: usize,
    pub state: String,
    pub read: u64,
    pub write: u64,
    pub cksum: u64,
    /// Bytes the last scrub or resilver rewrote on this device ("144K repaired").
    pub repaired: Option<u64>,
}

/// What `zpool status POOL` says about the pool.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct PoolStatus {
    /// The scrub/scan line, as printed.
    pub scan: String,
    /// A scrub is running.
    pub in_progress: bool,
    /// A scrub has finished ("scrub completed", "scrub repaired ... with N errors").
    pub completed: bool,
    /// "with N errors" of a finished scrub: blocks it could not repair.
    pub scrub_errors: Option<u64>,
    pub vdevs: Vec<VdevRow>,
    /// The `errors:` line.
    pub errors: String,
    /// Files listed under "Permanent errors have been detected" (with -v).
    pub error_files: Vec<String>,
}

impl PoolStatus {
    /// The leaf devices (no children), in table order.
    pub(crate) fn leaves(&self) -> Vec<&VdevRow> {
        self.vdevs
            .iter()
            .enumerate()
            .filter(|(i, v)| {
                self.vdevs
                    .get(i + 1)
                    .is_none_or(|next| next.depth <= v.depth)
            })
            .map(|(_, v)| v)
            .collect()
    }
}

/// A zfs size as printed in status and list output: "144K", "1.50M", "512", "0".
pub(crate) fn parse_zfs_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 1u64 << 10),
        'M' => (&t[..t.len() - 1], 1 << 20),
        'G' => (&t[..t.len() - 1], 1 << 30),
        'T' => (&t[..t.len() - 1], 1 << 40),
        c if c.is_ascii_digit() => (t, 1),
        _ => return None,
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult as f64).round() as u64)
}

/// A byte count as zfs prints it (its `nicenum`): 3 significant digits, at most 5
/// characters, binary units ("598K", "1.31M", "4M").
pub(crate) fn zfs_nicenum(num: u64) -> String {
    let mut n = num;
    let mut index = 0;
    while n >= 1024 {
        n = (n + 512) / 1024;
        index += 1;
    }
    if index == 0 {
        return n.to_string();
    }
    let unit = [' ', 'K', 'M', 'G', 'T', 'P', 'E'][index];
    if num & ((1u64 << (10 * index)) - 1) == 0 {
        return format!("{n}{unit}");
    }
    let v = num as f64 / (1u64 << (10 * index)) as f64;
    (0..=2)
        .rev()
        .map(|p| format!("{v:.p$}{unit}"))
        .find(|t| t.len() <= 5)
        .unwrap_or_else(|| format!("{v:.0}{unit}"))
}

/// `num` as it reads back from zfs's display of it (rounded to what `zpool status` shows).
pub(crate) fn zfs_displayed(num: u64) -> u64 {
    parse_zfs_size(&zfs_nicenum(num)).unwrap_or(num)
}

/// Parses `zpool status -v POOL` (zfs-fuse 0.7 and later OpenZFS wording).
pub(crate) fn parse_zpool_status(text: &str) -> PoolStatus {
    let mut st = PoolStatus::default();
    let mut in_config = false;
    let mut in_error_files = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(scan) = trimmed
            .strip_prefix("scrub:")
            .or_else(|| trimmed.strip_prefix("scan:"))
        {
            let scan = scan.trim();
            st.scan = scan.to_string();
            st.in_progress = scan.contains("in progress");
            st.completed = !st.in_progress
                && (scan.contains("scrub completed") || scan.contains("scrub repaired"));
            if let Some(pos) = scan.find(" with ") {
                st.scrub_errors = scan[pos + 6..]
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok());
            }
            continue;
        }
        if trimmed.starts_with("NAME") && trimmed.contains("CKSUM") {
            in_config = true;
            continue;
        }
        if let Some(e) = trimmed.strip_prefix("errors:") {
            in_config = false;
            st.errors = e.trim().to_string();
            in_error_files = e.contains("Permanent errors");
            continue;
        }
        if in_error_files {
            if !trimmed.is_empty() {
                st.error_files.push(trimmed.to_string());
            }
            continue;
        }
        if in_config {
            if trimmed.is_empty() {
                in_config = false;
                continue;
            }
            // The table is indented with a tab, then two spaces per level.
            let body = line.trim_start_matches('\t');
            let depth = (body.len() - body.trim_start().len()) / 2;
            let w: Vec<&str> = trimmed.split_whitespace().collect();
            if w.len() < 5 {
                continue;
            }
            let n = |s: &str| parse_zfs_size(s).unwrap_or(0);
            let repaired = w
                .iter()
                .position(|x| *x == "repaired")
                .filter(|&i| i >= 6)
                .and_then(|i| parse_zfs_size(w[i - 1]));
            st.vdevs.push(VdevRow {
                name: w[0].to_string(),
                depth,
                state: w[1].to_string(),
                read: n(w[2]),
                write: n(w[3]),
                cksum: n(w[4]),
                repaired,
            });
        }
    }
    st
}

/// `ALLOC` of `zpool list POOL` (zfs-fuse prints NAME SIZE USED/ALLOC AVAIL CAP HEALTH
/// ALTROOT), in bytes.
pub(crate) fn parse_zpool_alloc(text: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next()?.split_whitespace().collect();
    let col = header.iter().position(|h| *h == "ALLOC" || *h == "USED")?;
    let row: Vec<&str> = lines.next()?.split_whitespace().collect();
    parse_zfs_size(row.get(col)?)
}

/// The value of one property from `zfs get -H -o value PROP DATASET`.
pub(crate) fn zfs_property(dataset: &str, prop: &str) -> Result<String, ScrubError> {
    Ok(run(&["zfs", "get", "-H", "-o", "value", prop, dataset])?
        .trim()
        .to_string())
}

/// Writes dirty data back and drops the page cache, dentries and inodes (root).
pub(crate) fn drop_caches() -> Result<(), ScrubError> {
    iolab_sys::drop_caches().map_err(|e| ScrubError::Failed(format!("drop the page cache: {e}")))
}

/// Whether two paths name the same file or device (same device number for block devices).
pub(crate) fn same_node(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => {
            if x.file_type().is_block_device() && y.file_type().is_block_device() {
                x.rdev() == y.rdev()
            } else {
                x.dev() == y.dev() && x.ino() == y.ino()
            }
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `btrfs scrub start -B -R` after 1 block was corrupted on both mirrors (btrfs-progs 6.2).
    const SCRUB_RAW: &str = "scrub done for 29778f8f-9b44-42c3-a04c-fda0ad0976bd
Scrub started:    Sun Nov 22 05:49:44 2026
Status:           finished
Duration:         0:00:00
\tdata_extents_scrubbed: 34
\ttree_extents_scrubbed: 18
\tdata_bytes_scrubbed: 2129920
\ttree_bytes_scrubbed: 294912
\tread_errors: 0
\tcsum_errors: 2
\tverify_errors: 0
\tno_csum: 0
\tcsum_discards: 0
\tsuper_errors: 0
\tmalloc_errors: 0
\tuncorrectable_errors: 2
\tunverified_errors: 0
\tcorrected_errors: 0
\tlast_physical: 130285568
";

    #[test]
    fn btrfs_scrub_raw_counters() {
        let m = parse_btrfs_scrub_raw(SCRUB_RAW);
        assert_eq!(m["data_bytes_scrubbed"], 2129920);
        assert_eq!(m["tree_bytes_scrubbed"], 294912);
        assert_eq!(m["csum_errors"], 2);
        assert_eq!(m["uncorrectable_errors"], 2);
        assert_eq!(m["corrected_errors"], 0);
        // "Scrub started: Sun ..." and "Duration: 0:00:00" are not counters.
        assert!(!m.contains_key("Duration") && !m.contains_key("duration"));
    }

    #[test]
    fn btrfs_device_stats() {
        let text = "[/dev/loop0].write_io_errs    0\n[/dev/loop0].corruption_errs  0\n\
                    [/dev/loop1].read_io_errs     0\n[/dev/loop1].corruption_errs  2\n";
        let m = parse_btrfs_device_stats(text);
        assert_eq!(m["/dev/loop1"]["corruption_errs"], 2);
        assert_eq!(m["/dev/loop0"]["write_io_errs"], 0);
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn map_logical_lines() {
        let text = "mirror 1 logical 105644032 physical 39518208 device /dev/loop0\n\
                    mirror 2 logical 105644032 physical 67174400 device /dev/loop2\n";
        let v = parse_map_logical(text);
        assert_eq!(v.len(), 2);
        assert_eq!(
            v[1],
            MirrorLocation {
                mirror: 2,
                physical: 67174400,
                device: "/dev/loop2".into()
            }
        );
        assert!(parse_map_logical("ERROR: cannot open /dev/x\n").is_empty());
    }

    /// zfs-fuse 0.7 after a repaired scrub on a two-way mirror of image files.
    const STATUS_REPAIRED: &str = "  pool: zsx
 state: ONLINE
status: One or more devices has experienced an unrecoverable error.  An
\tattempt was made to correct the error.  Applications are unaffected.
 scrub: scrub completed after 0h0m with 0 errors on Sun Nov 22 05:50:42 2026
config:

\tNAME                        STATE     READ WRITE CKSUM
\tzsx                         ONLINE       0     0     0
\t  mirror-0                  ONLINE       0     0     0
\t    /var/tmp/scrubx/za.img  ONLINE       0     0     0
\t    /var/tmp/scrubx/zb.img  ONLINE       0     0     2  144K repaired

errors: No known data errors
";

    /// The same pool after a block was corrupted on both sides.
    const STATUS_LOST: &str = "  pool: zsx
 state: ONLINE
 scrub: scrub completed after 0h0m with 1 errors on Sun Nov 22 05:50:57 2026
config:

\tNAME                        STATE     READ WRITE CKSUM
\tzsx                         ONLINE       0     0     1
\t  mirror-0                  ONLINE       0     0     2
\t    /var/tmp/scrubx/za.img  ONLINE       0     0     2
\t    /var/tmp/scrubx/zb.img  ONLINE       0     0     2

errors: Permanent errors have been detected in the following files:

        /var/tmp/scrubx/zm/f
";

    #[test]
    fn zpool_status_repaired() {
        let s = parse_zpool_status(STATUS_REPAIRED);
        assert!(s.completed && !s.in_progress);
        assert_eq!(s.scrub_errors, Some(0));
        assert_eq!(s.vdevs.len(), 4);
        assert_eq!(
            s.vdevs.iter().map(|v| v.depth).collect::<Vec<_>>(),
            [0, 1, 2, 2]
        );
        let leaves = s.leaves();
        assert_eq!(leaves.len(), 2);
        assert_eq!(leaves[1].name, "/var/tmp/scrubx/zb.img");
        assert_eq!(leaves[1].cksum, 2);
        assert_eq!(leaves[1].repaired, Some(144 << 10));
        assert_eq!(leaves[0].repaired, None);
        assert_eq!(s.errors, "No known data errors");
        assert!(s.error_files.is_empty());
    }

    #[test]
    fn zpool_status_permanent_errors() {
        let s = parse_zpool_status(STATUS_LOST);
        assert_eq!(s.scrub_errors, Some(1));
        assert_eq!(s.vdevs[0].cksum, 1);
        assert_eq!(s.error_files, ["/var/tmp/scrubx/zm/f"]);
        let running = parse_zpool_status(
            " scrub: scrub in progress for 0h0m, 45.20% done, 0h0m to go\nconfig:\n",
        );
        assert!(running.in_progress && !running.completed);
        let none = parse_zpool_status(" scrub: none requested\n");
        assert!(!none.in_progress && !none.completed);
    }

    #[test]
    fn zfs_sizes() {
        assert_eq!(parse_zfs_size("144K"), Some(147456));
        assert_eq!(parse_zfs_size("1.50M"), Some(1572864));
        assert_eq!(parse_zfs_size("0"), Some(0));
        assert_eq!(parse_zfs_size("x"), None);
        assert_eq!(zfs_nicenum(598016), "584K");
        assert_eq!(zfs_nicenum(4 << 20), "4M");
        assert_eq!(zfs_nicenum(1373635), "1.31M");
        assert_eq!(zfs_nicenum(1000), "1000");
        assert_eq!(zfs_nicenum(150 << 20 | 1), "150M");
        assert_eq!(zfs_displayed(1373635), parse_zfs_size("1.31M").unwrap());
        let list = "NAME   SIZE   USED  AVAIL    CAP  HEALTH  ALTROOT\n\
                    zsx    254M  3.09M   251M     1%  ONLINE  -\n";
        assert_eq!(
            parse_zpool_alloc(list),
            Some((3.09 * 1048576.0f64).round() as u64)
        );
    }
}
