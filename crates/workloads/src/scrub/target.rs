//! What the scrub test runs on: a redundant filesystem, its member devices, and whether iolab
//! created them. Built from an iolab testbed ([`Layout`]) or discovered under a directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use iolab_runner::space::{self, Need};
use iolab_testbed::{Fs, PropValue, Raid, StateFile, Testbed, TestbedError, TestbedSpec};

use super::tools;
use super::ScrubError;

/// The redundant testbeds `--testbed` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    #[value(name = "btrfs-raid1")]
    BtrfsRaid1,
    #[value(name = "btrfs-raid5")]
    BtrfsRaid5,
    #[value(name = "zfs-mirror")]
    ZfsMirror,
    #[value(name = "zfs-raidz")]
    ZfsRaidz,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::BtrfsRaid1 => "btrfs-raid1",
            Layout::BtrfsRaid5 => "btrfs-raid5",
            Layout::ZfsMirror => "zfs-mirror",
            Layout::ZfsRaidz => "zfs-raidz",
        }
    }

    /// Bytes of data the layout holds on devices of `each` bytes: one device's worth for a
    /// two-way mirror, two for parity over three devices.
    pub fn usable_bytes(self, each: u64) -> u64 {
        match self {
            Layout::BtrfsRaid1 | Layout::ZfsMirror => each,
            Layout::BtrfsRaid5 | Layout::ZfsRaidz => 2 * each,
        }
    }

    /// The testbed: two devices for a mirror, three for parity; zfs with compression off (the
    /// blocks must be findable on the member as written) and `primarycache=metadata` (data
    /// read after the scrub must come from the disks, not from the ARC).
    pub fn spec(self, device_size: &str) -> TestbedSpec {
        let (fs, raid, devices) = match self {
            Layout::BtrfsRaid1 => (Fs::Btrfs, Raid::Raid1, 2),
            Layout::BtrfsRaid5 => (Fs::Btrfs, Raid::Raid5, 3),
            Layout::ZfsMirror => (Fs::Zfs, Raid::Mirror, 2),
            Layout::ZfsRaidz => (Fs::Zfs, Raid::Raidz, 3),
        };
        let mut spec = TestbedSpec::loop_devices(devices, device_size, fs);
        spec.raid = Some(raid);
        if fs == Fs::Zfs {
            for (k, v) in [("compression", "off"), ("primarycache", "metadata")] {
                spec.dataset_properties
                    .insert(k.into(), PropValue::Text(v.into()));
            }
        }
        spec
    }
}

/// The filesystem family, with what its tools need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsKind {
    Btrfs,
    Zfs { pool: String, dataset: String },
}

/// How the data is made redundant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redundancy {
    /// Every member of the group holds a full copy (btrfs raid1 on two devices, zfs mirror).
    Mirror,
    /// Data strips plus parity (btrfs raid5, zfs raidz).
    Parity,
}

/// A redundant filesystem to scrub.
#[derive(Debug, Clone)]
pub struct ScrubTarget {
    pub kind: FsKind,
    /// Where the dataset directory is created.
    pub work_dir: PathBuf,
    /// The mount point (what `btrfs scrub` is given).
    pub mount: PathBuf,
    /// Member devices (or image files), in the filesystem's order.
    pub members: Vec<PathBuf>,
    pub redundancy: Redundancy,
    /// "raid1", "raid5", "mirror", "raidz".
    pub profile: String,
    /// True when iolab built the members itself (a testbed): only then may it corrupt them
    /// without `--allow-corrupt-members`.
    pub members_created_by_iolab: bool,
}

impl ScrubTarget {
    pub fn fs_name(&self) -> &'static str {
        match self.kind {
            FsKind::Btrfs => "btrfs",
            FsKind::Zfs { .. } => "zfs",
        }
    }

    /// The target of a testbed built from `layout.spec(..)`.
    pub fn from_testbed(tb: &Testbed, layout: Layout) -> Result<ScrubTarget, ScrubError> {
        let mount = tb
            .mount_point()
            .ok_or_else(|| ScrubError::Failed("the testbed has no mount".into()))?
            .to_path_buf();
        let members: Vec<PathBuf> = tb.devices().iter().map(|d| d.path.clone()).collect();
        let kind = match layout {
            Layout::BtrfsRaid1 | Layout::BtrfsRaid5 => FsKind::Btrfs,
            Layout::ZfsMirror | Layout::ZfsRaidz => {
                let z = tb
                    .zfs()
                    .ok_or_else(|| ScrubError::Failed("the zfs testbed has no pool".into()))?;
                FsKind::Zfs {
                    pool: z.pool.clone(),
                    dataset: z.dataset.clone(),
                }
            }
        };
        let (redundancy, profile) = match layout {
            Layout::BtrfsRaid1 => (Redundancy::Mirror, "raid1"),
            Layout::BtrfsRaid5 => (Redundancy::Parity, "raid5"),
            Layout::ZfsMirror => (Redundancy::Mirror, "mirror"),
            Layout::ZfsRaidz => (Redundancy::Parity, "raidz"),
        };
        Ok(ScrubTarget {
            kind,
            work_dir: mount.clone(),
            mount,
            members,
            redundancy,
            profile: profile.into(),
            members_created_by_iolab: true,
        })
    }

    /// Finds the redundant filesystem holding `dir`: btrfs members from sysfs (via iolab-env's
    /// device chain) and the data profile, or the zfs pool's vdevs from `zpool status`.
    pub fn discover(dir: &Path) -> Result<ScrubTarget, ScrubError> {
        let env = iolab_env::capture(Some(dir));
        let t = env
            .target
            .ok_or_else(|| ScrubError::Invalid(format!("{}: not found", dir.display())))?;
        if t.kind.as_deref() != Some("dir") {
            return Err(ScrubError::Invalid(format!(
                "--target {}: needs a directory on btrfs or zfs",
                dir.display()
            )));
        }
        let fs = t.fs_type.clone().unwrap_or_default();
        let mount = PathBuf::from(t.mount_point.clone().unwrap_or_default());
        match fs.as_str() {
            "btrfs" => {
                let members: Vec<PathBuf> = t
                    .devices
                    .iter()
                    .filter(|d| {
                        d.relation.as_ref().map(|r| r.kind)
                            == Some(iolab_env::RelationKind::BtrfsMember)
                    })
                    .map(|d| PathBuf::from("/dev").join(&d.name))
                    .collect();
                let profile = t.fs_extra.get("data_profile").cloned().unwrap_or_default();
                let redundancy = match profile.as_str() {
                    "raid1" | "raid1c3" | "raid1c4" | "raid10" => Redundancy::Mirror,
                    "raid5" | "raid6" => Redundancy::Parity,
                    other => {
                        return Err(ScrubError::Invalid(format!(
                            "--target {}: btrfs data profile is '{}', which keeps one copy: a \
                             scrub can detect but not repair; the scrub test needs raid1, \
                             raid10, raid5 or raid6",
                            dir.display(),
                            if other.is_empty() { "unknown" } else { other }
                        )))
                    }
                };
                if members.len() < 2 {
                    return Err(ScrubError::Invalid(format!(
                        "--target {}: found {} btrfs member device(s); need at least 2",
                        dir.display(),
                        members.len()
                    )));
                }
                Ok(ScrubTarget {
                    kind: FsKind::Btrfs,
                    work_dir: dir.to_path_buf(),
                    mount,
                    members,
                    redundancy,
                    profile,
                    members_created_by_iolab: false,
                })
            }
            "zfs" | "fuse.zfs" => {
                let dataset = t.mount_source.clone().unwrap_or_default();
                let pool = dataset.split('/').next().unwrap_or_default().to_string();
                let st = tools::parse_zpool_status(&tools::run(&["zpool", "status", &pool])?);
                let group = st
                    .vdevs
                    .iter()
                    .find(|v| v.depth == 1)
                    .map(|v| v.name.clone())
                    .unwrap_or_default();
                let (redundancy, profile) = if group.starts_with("mirror") {
                    (Redundancy::Mirror, "mirror")
                } else if group.starts_with("raidz") {
                    (Redundancy::Parity, "raidz")
                } else {
                    return Err(ScrubError::Invalid(format!(
                        "--target {}: zfs pool {pool} has no mirror or raidz vdev; a scrub \
                         there can detect but not repair",
                        dir.display()
                    )));
                };
                let members = st
                    .leaves()
                    .iter()
                    .filter(|v| v.depth == 2)
                    .map(|v| {
                        if v.name.starts_with('/') {
                            PathBuf::from(&v.name)
                        } else {
                            PathBuf::from("/dev").join(&v.name)
                        }
                    })
                    .collect();
                Ok(ScrubTarget {
                    kind: FsKind::Zfs { pool, dataset },
                    work_dir: dir.to_path_buf(),
                    mount,
                    members,
                    redundancy,
                    profile: profile.into(),
                    members_created_by_iolab: false,
                })
            }
            other => Err(ScrubError::Invalid(format!(
                "--target {}: the filesystem is {}, not btrfs or zfs; the scrub test needs a \
                 redundant btrfs (raid1/raid5) or zfs (mirror/raidz) filesystem, or \
                 --testbed to build one",
                dir.display(),
                if other.is_empty() { "unknown" } else { other }
            ))),
        }
    }
}

/// Builds the testbed for `layout` (loop devices of `device_size` each). Needs root. The
/// caller keeps the returned [`Testbed`] alive while the test runs; dropping it (or
/// `teardown`) removes everything, also after an error or a signal.
pub fn build_testbed(
    layout: Layout,
    device_size: &str,
    cfg: &super::ScrubConfig,
    stop: &AtomicBool,
) -> Result<(Testbed, ScrubTarget), ScrubError> {
    if !iolab_sys::is_root() {
        return Err(ScrubError::Invalid(format!(
            "--testbed {} needs root: it attaches loop devices, runs mkfs and mount, and \
             writes to the member devices",
            layout.name()
        )));
    }
    let spec = layout.spec(device_size);
    iolab_testbed::validate(&spec).map_err(ScrubError::Testbed)?;
    let each = spec.size_bytes().map_err(ScrubError::Testbed)?;
    let needed = cfg.dataset_size + cfg.foreground.unwrap_or(0);
    let usable = layout.usable_bytes(each);
    // Metadata, chunk allocation (btrfs) and the pool's own reserve (zfs) need room too.
    if needed > usable / 10 * 7 {
        return Err(ScrubError::Invalid(format!(
            "{} of data (dataset{}) does not fit well on {} with {device_size} devices \
             ({} usable); give a larger --device-size or a smaller --dataset-size",
            iolab_spec::format_bytes(needed),
            if cfg.foreground.is_some() {
                " and foreground file"
            } else {
                ""
            },
            layout.name(),
            iolab_spec::format_bytes(usable)
        )));
    }
    // The images are sparse: what the filesystem writes into them (the dataset on every
    // copy or with its parity, at most twice over) lands on the filesystem that holds them.
    let devices = spec.device_count() as u64;
    let need = Need::new(
        "dataset-size",
        needed.saturating_mul(2).min(each.saturating_mul(devices)),
        devices,
    );
    space::check(&iolab_testbed::image_parent(&spec), need)
        .map_err(|e| ScrubError::Invalid(e.to_string()))?;
    let dir = StateFile::default_dir().map_err(ScrubError::Testbed)?;
    let state = StateFile::create(&dir).map_err(ScrubError::Testbed)?;
    let tb = iolab_testbed::build(&spec, &state, stop).map_err(|e| match e {
        TestbedError::Interrupted => ScrubError::Interrupted,
        e => ScrubError::Testbed(e),
    })?;
    let target = ScrubTarget::from_testbed(&tb, layout)?;
    Ok((tb, target))
}
