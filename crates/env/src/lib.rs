//! The environment of a run: host facts, the target's filesystem and block-device chain, and
//! the block-I/O throttles that apply to iolab.
//!
//! [`capture`] reads everything from procfs, sysfs and (for ZFS and as a btrfs fallback) the
//! filesystem's own tools, and returns an [`Environment`] in which every fact is an `Option`:
//! `None` (JSON `null`) means "could not be read", never "zero" or "default". Nothing is
//! guessed; where a chain of devices could not be followed to its end, [`TargetEnv::notes`]
//! says where and why, and [`TargetEnv::chain_complete`] is false. [`render`] turns it into the
//! text of `iolab env`. Where each fact comes from is described in `docs/environment.md`.
//!
//! Modules: `host` (kernel, CPU, memory), `reclaim` (DAMON pageout, memory-cgroup limit),
//! `mounts` (`/proc/self/mountinfo`), `blockdev` (sysfs
//! device facts and the chain walk), `fsinfo` (btrfs and ZFS specifics), `cgroup` (blkio and
//! io.max throttles), `render` (text), `error` (`EnvError`: why a fact is unknown, with its
//! source).

mod blockdev;
mod cgroup;
mod error;
mod fsinfo;
mod host;
mod mounts;
mod reclaim;
mod render;
mod util;

pub use error::EnvError;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use cgroup::{
    parse_proc_cgroup, throttles_along, throttles_of_cgroup, CgroupMembership, ThrottleKind,
};
pub use mounts::{mount_of, parse_mountinfo, unescape_octal, MountEntry};
pub use reclaim::{
    damon_reclaimers, memory_limit_along, MemoryLimit, Reclaimer, DAMON_ADMIN, DAMON_RECLAIM_PARAMS,
};
pub use render::render;

/// Everything iolab records about where a run happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Environment {
    /// When the capture was taken, RFC 3339 UTC.
    pub captured_at: Option<String>,
    /// `uname` nodename.
    pub hostname: Option<String>,
    /// This machine's id as iolab records it: a one-way hash of `/etc/machine-id`
    /// (`iolab_sys::host`), stable across reboots, telling apart hosts of one name.
    pub machine_id: Option<String>,
    /// `uname` release, e.g. "6.18.44".
    pub kernel_release: Option<String>,
    /// `uname` version, e.g. "#1 SMP PREEMPT_DYNAMIC ...".
    pub kernel_version: Option<String>,
    /// `uname` machine, e.g. "x86_64".
    pub arch: Option<String>,
    /// The CPU's model name from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Online logical CPUs (`/sys/devices/system/cpu/online`).
    pub cpu_cores: Option<usize>,
    /// CPUs this process may use (affinity and CPU quota), as `available_parallelism` says.
    pub cpus_usable: Option<usize>,
    /// `MemTotal` from `/proc/meminfo`, in bytes.
    pub memory_total_bytes: Option<u64>,
    /// `MemAvailable` from `/proc/meminfo`, in bytes, at capture time.
    pub memory_available_bytes: Option<u64>,
    /// Mechanisms that page out memory the kernel finds idle (DAMON "pageout" and
    /// "lru_deprio" schemes, the damon_reclaim module): cached pages can vanish without
    /// memory pressure. `Some(vec![])` means "looked, none running"; `None`, unreadable.
    pub page_cache_reclaim: Option<Vec<Reclaimer>>,
    /// The tightest memory limit of iolab's memory cgroup and its ancestors (page cache is
    /// charged to it); `None` when it could not be read.
    pub memory_limit: Option<MemoryLimit>,
    /// The benchmark target, when one was given.
    pub target: Option<TargetEnv>,
    /// Block-I/O throttles of iolab's cgroup and its ancestors (cgroup v1 `blkio.throttle.*`,
    /// or cgroup v2 `io.max` where v1 blkio is not mounted). `Some(vec![])` means "read, and
    /// none set"; `None` means they could not be read.
    pub blkio_throttles: Option<Vec<Throttle>>,
    /// Why something is unknown, when there is more to say than `null`.
    pub notes: Vec<String>,
}

/// The filesystem and device chain under a target path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TargetEnv {
    /// The target as given.
    pub path: String,
    /// The existing path that was examined: the canonical target, or its nearest existing
    /// ancestor when the target does not exist yet.
    pub resolved_path: Option<String>,
    /// "dir", "file", "device" (block device) or "other"; `None` when the target does not exist.
    pub kind: Option<String>,
    /// Filesystem type as mountinfo names it ("ext4", "btrfs", "fuse.zfs", ...). `None` for a
    /// block-device target.
    pub fs_type: Option<String>,
    pub mount_point: Option<String>,
    /// The mount source field of mountinfo (a device path, a dataset name, ...).
    pub mount_source: Option<String>,
    /// The mount's device number from mountinfo ("maj:min"; anonymous "0:N" for btrfs, tmpfs...).
    pub mount_dev: Option<String>,
    /// Per-mount options (mountinfo field 6).
    pub mount_options: Option<String>,
    /// Superblock options (the last mountinfo field).
    pub super_options: Option<String>,
    /// Filesystem specifics: btrfs fsid, profiles and `compress`; ZFS dataset properties.
    pub fs_extra: BTreeMap<String, String>,
    /// Direct-I/O alignment the filesystem reports for the target (statx `STATX_DIOALIGN`):
    /// file offsets and lengths must be multiples of this. `Some(0)` means direct I/O is not
    /// supported there.
    pub dio_offset_align: Option<u32>,
    /// Memory-buffer alignment required for direct I/O (statx `STATX_DIOALIGN`).
    pub dio_mem_align: Option<u32>,
    /// The block devices under the target, top first (depth-first where the chain branches).
    pub devices: Vec<BlockDevice>,
    /// True when every link of the chain was followed to a device with nothing under it.
    pub chain_complete: bool,
    /// Where and why the chain or a fact could not be followed.
    pub notes: Vec<String>,
}

/// One block device in a target's chain, with what sysfs says about it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockDevice {
    /// Kernel name ("vda", "sda1", "loop0", "dm-0", "nvme0n1").
    pub name: String,
    /// "maj:min".
    pub dev: Option<String>,
    /// "disk", "partition", "loop", "dm", "md", "zram".
    pub kind: Option<String>,
    /// How the disk is attached: "virtio", "nvme", "ata", "scsi", "usb", "mmc", ...
    pub bus: Option<String>,
    /// How this device relates to the one before it in the chain (or to the target/mount).
    pub relation: Option<Relation>,
    pub size_bytes: Option<u64>,
    /// For a partition: where it starts on its disk, in bytes.
    pub partition_start_bytes: Option<u64>,
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub serial: Option<String>,
    pub firmware_rev: Option<String>,
    pub rotational: Option<bool>,
    pub logical_block_size: Option<u64>,
    pub physical_block_size: Option<u64>,
    /// The selected I/O scheduler (the bracketed entry of `queue/scheduler`).
    pub scheduler: Option<String>,
    pub nr_requests: Option<u64>,
    pub read_ahead_kb: Option<u64>,
    /// `queue/write_cache`: "write back" or "write through".
    pub write_cache: Option<String>,
    /// Device-mapper name, for dm devices.
    pub dm_name: Option<String>,
    /// Loop devices: the backing file as the kernel reports it.
    pub loop_backing_file: Option<String>,
    /// Loop devices: whether the backing file is accessed with direct I/O.
    pub loop_dio: Option<bool>,
    pub loop_offset: Option<u64>,
    pub loop_sizelimit: Option<u64>,
    /// Loop devices over an iolab emulated disk (the image of an `iolab emudisk serve` FUSE
    /// mount): the disk's `stats.json` (summary, model parameters, I/O counts so far).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emulated_disk: Option<serde_json::Value>,
    /// SATA (libata) disks: the host's `link_power_management_policy`.
    pub link_power_policy: Option<String>,
    /// NVMe disks: power settings found in sysfs (controller runtime PM, APST latency
    /// tolerance, nvme_core APST parameters), by file name.
    pub nvme_power: Option<BTreeMap<String, String>>,
}

/// How a device in the chain relates to what came before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relation {
    pub kind: RelationKind,
    /// What it relates to: a mount point, a device name, a pool name.
    pub of: String,
    /// Extra words, e.g. the loop backing file's path or the btrfs fsid.
    pub detail: Option<String>,
}

/// The kinds of link in a device chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationKind {
    /// The device is the target itself.
    Target,
    /// The filesystem at `of` is mounted from this device.
    Mounted,
    /// The device is one member of the btrfs filesystem mounted at `of`.
    BtrfsMember,
    /// The device holds (or is) a vdev of the ZFS pool `of`.
    ZfsMember,
    /// The disk the partition `of` lives on.
    ParentDisk,
    /// The device holding the backing file of loop device `of`.
    BackingFileOn,
    /// A component (sysfs `slaves/`) of the dm/md device `of`.
    Underlying,
}

/// One block-I/O throttle setting of a cgroup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throttle {
    /// The cgroup directory the setting was read from.
    pub cgroup: String,
    /// "maj:min" of the throttled device.
    pub device: String,
    /// Kernel name of that device, when it exists in sysfs.
    pub device_name: Option<String>,
    pub kind: ThrottleKind,
    /// Bytes per second or I/Os per second, per `kind`.
    pub limit: u64,
}

/// Captures the environment: host facts, throttles, and (with `target`) the target's
/// filesystem and device chain. Never panics; whatever cannot be read stays `None`.
pub fn capture(target: Option<&Path>) -> Environment {
    let mut env = Environment {
        captured_at: Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        ..Environment::default()
    };
    host::fill(&mut env);
    let mountinfo = mounts::read_self();
    if mountinfo.is_none() {
        env.notes
            .push("/proc/self/mountinfo unreadable: mounts and cgroups unknown".into());
    }
    let mounts = mountinfo.unwrap_or_default();
    match cgroup::capture_throttles(&mounts) {
        Ok(t) => env.blkio_throttles = Some(t),
        Err(why) => env
            .notes
            .push(format!("block-I/O throttles unknown: {why}")),
    }
    match reclaim::damon_reclaimers(Path::new(DAMON_ADMIN), Path::new(DAMON_RECLAIM_PARAMS)) {
        Ok(r) => env.page_cache_reclaim = Some(r),
        Err(why) => env
            .notes
            .push(format!("proactive page-cache reclaim unknown: {why}")),
    }
    match reclaim::capture_memory_limit(&mounts) {
        Ok(l) => env.memory_limit = Some(l),
        Err(why) => env
            .notes
            .push(format!("memory cgroup limit unknown: {why}")),
    }
    env.target = target.map(|t| blockdev::target_env(t, &mounts));
    env
}

/// The throttles that name one of `devs` (for example the target's chain).
pub fn throttles_for_devices<'a>(env: &'a Environment, devs: &[BlockDevice]) -> Vec<&'a Throttle> {
    let Some(all) = &env.blkio_throttles else {
        return Vec::new();
    };
    all.iter()
        .filter(|t| {
            devs.iter()
                .any(|d| d.dev.as_deref() == Some(t.device.as_str()))
        })
        .collect()
}

impl Environment {
    /// The throttles that apply to the target's device chain (empty without a target, and
    /// when throttles are unknown — check `blkio_throttles.is_none()` for that).
    pub fn target_throttles(&self) -> Vec<&Throttle> {
        match &self.target {
            Some(t) => throttles_for_devices(self, &t.devices),
            None => Vec::new(),
        }
    }
}
