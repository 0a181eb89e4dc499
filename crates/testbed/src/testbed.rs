//! [`Testbed`]: a built configuration, what it exposes to workloads, [`Testbed::describe`] and
//! teardown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;

use serde::Serialize;

use crate::error::TestbedError;
use crate::remove::{knob_value, remove, Removal};
use crate::spec::{fs_name, raid_name, Kind, TestbedSpec};
use crate::state::StateFile;
use crate::sys;

/// A loop device of a testbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Device {
    /// `/dev/loopN`.
    pub path: PathBuf,
    pub major: u32,
    pub minor: u32,
    /// The image file behind it.
    pub image: PathBuf,
}

impl Device {
    /// `major:minor`, as blkio and /proc/diskstats name devices.
    pub fn maj_min(&self) -> String {
        format!("{}:{}", self.major, self.minor)
    }
}

/// A sysfs knob iolab changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KnobChange {
    pub device: PathBuf,
    /// Relative to /sys/block/NAME, e.g. `queue/write_cache`.
    pub attr: String,
    /// The value before (written back at teardown).
    pub previous: String,
    /// The value read back after the change.
    pub value: String,
}

/// The zfs parts of a testbed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZfsInfo {
    pub pool: String,
    pub dataset: String,
    /// What the pool is built on (loop devices or image files).
    pub vdevs: Vec<String>,
    /// How the daemon was started.
    pub daemon_command: String,
    /// The daemon's pid.
    pub daemon_pid: u32,
}

/// A built testbed. Dropping it tears it down (errors go to stderr); call
/// [`Testbed::teardown`] to see them.
#[derive(Debug)]
pub struct Testbed {
    pub(crate) spec: TestbedSpec,
    pub(crate) state: StateFile,
    pub(crate) name: Option<String>,
    pub(crate) base: Option<PathBuf>,
    pub(crate) work_dir: Option<PathBuf>,
    pub(crate) mount_point: Option<PathBuf>,
    pub(crate) images: Vec<PathBuf>,
    pub(crate) devices: Vec<Device>,
    pub(crate) cgroup: Option<PathBuf>,
    pub(crate) knobs: Vec<KnobChange>,
    pub(crate) zfs: Option<ZfsInfo>,
    pub(crate) commands: Vec<String>,
    pub(crate) daemon: Option<Child>,
    /// The directories of the emulated disks (`emuI/`), in device order.
    pub(crate) emulated: Vec<PathBuf>,
    finished: bool,
}

/// What a testbed is, read back from the system: for storing with results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Description {
    pub kind: String,
    pub fs: String,
    pub raid: Option<String>,
    pub work_dir: Option<PathBuf>,
    pub mount_point: Option<PathBuf>,
    /// From /proc/self/mountinfo: filesystem type, source, options (per-mount, then
    /// superblock).
    pub mount: Option<MountFacts>,
    pub image_size_bytes: Option<u64>,
    pub images: Vec<PathBuf>,
    pub mkfs_options: Vec<String>,
    pub devices: Vec<DeviceFacts>,
    pub knob_changes: Vec<KnobChange>,
    pub cgroup: Option<PathBuf>,
    /// Throttle rules as the cgroup reports them: `read_bps_device 7:3 10485760`.
    pub throttle: Vec<String>,
    pub zfs: Option<ZfsFacts>,
    /// Emulated disks: each one's `stats.json` (model parameters, I/O counts so far).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub emulated: Vec<serde_json::Value>,
    /// The commands the build ran.
    pub commands: Vec<String>,
}

/// A mount as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountFacts {
    pub fstype: String,
    pub source: String,
    pub options: String,
}

/// A device's queue settings as sysfs reports them (`None`: unreadable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFacts {
    pub path: PathBuf,
    pub maj_min: String,
    pub image: PathBuf,
    pub direct_io: Option<bool>,
    pub logical_block_size: Option<u32>,
    pub read_ahead_kb: Option<u32>,
    pub scheduler: Option<String>,
    pub write_cache: Option<String>,
}

/// zfs facts read back from the pool and dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZfsFacts {
    pub pool: String,
    pub dataset: String,
    pub vdevs: Vec<String>,
    pub daemon_command: String,
    pub pool_properties: BTreeMap<String, String>,
    pub dataset_properties: BTreeMap<String, String>,
}

/// Dataset properties always reported besides the ones the spec sets.
const DATASET_FACTS: [&str; 5] = [
    "recordsize",
    "compression",
    "checksum",
    "atime",
    "primarycache",
];
/// Pool properties always reported besides the ones the spec sets.
const POOL_FACTS: [&str; 2] = ["ashift", "version"];

impl Testbed {
    pub(crate) fn new(spec: TestbedSpec, state: StateFile) -> Testbed {
        Testbed {
            spec,
            state,
            name: None,
            base: None,
            work_dir: None,
            mount_point: None,
            images: Vec::new(),
            devices: Vec::new(),
            cgroup: None,
            knobs: Vec::new(),
            zfs: None,
            commands: Vec::new(),
            daemon: None,
            emulated: Vec::new(),
            finished: false,
        }
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &TestbedSpec {
        &self.spec
    }

    /// The fresh name of a loop testbed (`iolab-testbed-PID-N-RANDOM`): its directory under
    /// /var/tmp, its cgroup and its zfs pool are named after it.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Where workloads run: the directory (kind = "dir") or the mounted filesystem. `None`
    /// for raw loop devices (fs = "none"): use [`Testbed::devices`].
    pub fn work_dir(&self) -> Option<&Path> {
        if self.spec.kind != Kind::Dir && self.mount_point.is_none() {
            return None;
        }
        self.work_dir.as_deref()
    }

    /// The mount iolab made (ext4, xfs, btrfs, zfs), if any.
    pub fn mount_point(&self) -> Option<&Path> {
        self.mount_point.as_deref()
    }

    /// The loop devices, in image order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The image files.
    pub fn images(&self) -> &[PathBuf] {
        &self.images
    }

    /// The blkio cgroup with the throttle limits: a workload process joins it by writing its
    /// pid to `cgroup.procs` in this directory (before it opens the target). With zfs the
    /// daemon, which does the device I/O, is already in it.
    pub fn cgroup(&self) -> Option<PathBuf> {
        self.cgroup.clone()
    }

    /// The knobs changed, with their previous values.
    pub fn knob_changes(&self) -> &[KnobChange] {
        &self.knobs
    }

    /// The zfs pool and dataset, for fs = "zfs".
    pub fn zfs(&self) -> Option<&ZfsInfo> {
        self.zfs.as_ref()
    }

    /// The commands the build ran (file, directory and sysfs steps shown as shell commands),
    /// the same lines [`crate::plan`] prints with the placeholders filled in.
    pub fn commands(&self) -> &[String] {
        &self.commands
    }

    /// The state file recording this testbed.
    pub fn state_path(&self) -> PathBuf {
        self.state.path()
    }

    /// Environment given to the setup and teardown hooks.
    pub(crate) fn hook_env(&self) -> Vec<(String, String)> {
        let join = |v: Vec<String>| v.join(" ");
        vec![
            (
                "IOLAB_TESTBED_WORK_DIR".into(),
                self.work_dir.as_deref().map(sys::text).unwrap_or_default(),
            ),
            (
                "IOLAB_TESTBED_MOUNT_POINT".into(),
                self.mount_point
                    .as_deref()
                    .map(sys::text)
                    .unwrap_or_default(),
            ),
            (
                "IOLAB_TESTBED_DEVICES".into(),
                join(self.devices.iter().map(|d| sys::text(&d.path)).collect()),
            ),
            (
                "IOLAB_TESTBED_IMAGES".into(),
                join(self.images.iter().map(sys::text).collect()),
            ),
            (
                "IOLAB_TESTBED_CGROUP".into(),
                self.cgroup.as_deref().map(sys::text).unwrap_or_default(),
            ),
        ]
    }

    /// Reads the testbed's settings back from the system.
    pub fn describe(&self) -> Description {
        let mount = self
            .mount_point
            .as_deref()
            .and_then(sys::mount_at)
            .map(|m| MountFacts {
                fstype: m.fstype,
                source: m.source,
                options: m.options,
            });
        let devices = self
            .devices
            .iter()
            .map(|d| {
                let num = |attr: &str| {
                    sys::read_trim(sys::sysfs_attr(&d.path, attr))
                        .ok()
                        .and_then(|v| v.parse().ok())
                };
                DeviceFacts {
                    path: d.path.clone(),
                    maj_min: d.maj_min(),
                    image: d.image.clone(),
                    direct_io: sys::read_trim(sys::sysfs_attr(&d.path, "loop/dio"))
                        .ok()
                        .map(|v| v == "1"),
                    logical_block_size: num("queue/logical_block_size"),
                    read_ahead_kb: num("queue/read_ahead_kb"),
                    scheduler: knob_value(&d.path, "queue/scheduler"),
                    write_cache: knob_value(&d.path, "queue/write_cache"),
                }
            })
            .collect();
        let mut throttle = Vec::new();
        if let Some(cg) = &self.cgroup {
            for file in [
                "blkio.throttle.read_bps_device",
                "blkio.throttle.write_bps_device",
                "blkio.throttle.read_iops_device",
                "blkio.throttle.write_iops_device",
            ] {
                let text = std::fs::read_to_string(cg.join(file)).unwrap_or_default();
                let short = file.trim_start_matches("blkio.throttle.");
                throttle.extend(
                    text.lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| format!("{short} {}", l.trim())),
                );
            }
        }
        let zfs = self.zfs.as_ref().map(|z| ZfsFacts {
            pool: z.pool.clone(),
            dataset: z.dataset.clone(),
            vdevs: z.vdevs.clone(),
            daemon_command: z.daemon_command.clone(),
            pool_properties: zfs_props(
                "zpool",
                &z.pool,
                POOL_FACTS
                    .iter()
                    .map(|s| s.to_string())
                    .chain(self.spec.pool_properties.keys().cloned()),
            ),
            dataset_properties: zfs_props(
                "zfs",
                &z.dataset,
                DATASET_FACTS
                    .iter()
                    .map(|s| s.to_string())
                    .chain(self.spec.dataset_properties.keys().cloned()),
            ),
        });
        Description {
            kind: match self.spec.kind {
                Kind::Dir => "dir".into(),
                Kind::Loop => "loop".into(),
                Kind::Device => "device".into(),
            },
            fs: fs_name(self.spec.fs_kind()).into(),
            raid: self.spec.raid.map(|r| raid_name(r).to_string()),
            work_dir: self.work_dir().map(Path::to_path_buf),
            mount_point: self.mount_point.clone(),
            mount,
            image_size_bytes: self
                .spec
                .size_bytes()
                .ok()
                .filter(|_| !self.images.is_empty()),
            images: self.images.clone(),
            mkfs_options: self.spec.mkfs_options.clone(),
            devices,
            knob_changes: self.knobs.clone(),
            cgroup: self.cgroup.clone(),
            throttle,
            zfs,
            emulated: crate::emulated::stats(&self.emulated),
            commands: self.commands.clone(),
        }
    }

    /// Removes every resource the state file still lists, newest first; returns what could
    /// not be removed. Deletes the state file when nothing is left.
    pub(crate) fn remove_all(&mut self) -> Vec<String> {
        self.finished = true;
        let mut failures = Vec::new();
        for (id, res) in self.state.open_resources().into_iter().rev() {
            let gone = match remove(&res, &mut self.daemon) {
                Removal::Gone { .. } => true,
                Removal::GoneWithProblem(p) => {
                    failures.push(p);
                    true
                }
                Removal::Failed(p) => {
                    failures.push(format!("{}: {p}", res.describe()));
                    false
                }
            };
            if gone {
                if let Err(e) = self.state.removed(id, false) {
                    failures.push(e.to_string());
                }
            }
        }
        if failures.is_empty() {
            self.state.finish();
        }
        failures
    }

    /// Tears the testbed down in reverse order of creation: teardown hook, mounts, pool,
    /// daemon, cgroup, knobs (restored), loop devices, files, directories. What could not be
    /// removed is listed in the error and stays in the state file for `cleanup_all`.
    pub fn teardown(mut self) -> Result<(), TestbedError> {
        let failures = self.remove_all();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(TestbedError::Teardown { failures })
        }
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if !self.finished {
            for f in self.remove_all() {
                eprintln!("iolab testbed teardown: {f}");
            }
        }
    }
}

/// `zpool get` / `zfs get` of the given properties (unknown ones are skipped).
fn zfs_props(
    tool: &str,
    target: &str,
    names: impl Iterator<Item = String>,
) -> BTreeMap<String, String> {
    let wanted: Vec<String> = names.collect();
    let argv: Vec<String> = if tool == "zfs" {
        ["zfs", "get", "-H", "-o", "property,value", "all", target]
            .map(String::from)
            .to_vec()
    } else {
        // zfs-fuse's zpool get has no -H/-o: NAME PROPERTY VALUE SOURCE columns.
        ["zpool", "get", "all", target].map(String::from).to_vec()
    };
    let Ok(out) = sys::run(&argv) else {
        return BTreeMap::new();
    };
    out.lines()
        .filter_map(|l| parse_prop_line(tool, l))
        .filter(|(k, _)| wanted.iter().any(|w| w == k))
        .collect()
}

/// One property line of `zfs get -H -o property,value` or of `zpool get`.
fn parse_prop_line(tool: &str, line: &str) -> Option<(String, String)> {
    if tool == "zfs" {
        let (k, v) = line.split_once('\t')?;
        return Some((k.to_string(), v.trim().to_string()));
    }
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 4 || f[1] == "PROPERTY" {
        return None;
    }
    Some((f[1].to_string(), f[2..f.len() - 1].join(" ")))
}

#[cfg(test)]
mod tests {
    use super::parse_prop_line;

    #[test]
    fn property_lines() {
        assert_eq!(
            parse_prop_line("zpool", "zq    ashift    12       local"),
            Some(("ashift".into(), "12".into()))
        );
        assert_eq!(
            parse_prop_line("zpool", "NAME  PROPERTY  VALUE    SOURCE"),
            None
        );
        assert_eq!(
            parse_prop_line("zfs", "recordsize\t16K"),
            Some(("recordsize".into(), "16K".into()))
        );
    }
}
