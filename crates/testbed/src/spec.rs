//! The testbed description ([`TestbedSpec`]) as it appears in a study file, and [`validate`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::TestbedError;

/// Most loop devices one testbed may create.
pub const MAX_DEVICES: u32 = 16;

/// One configuration to build. Deserialises from a TOML table (unknown keys are refused), so a
/// study file can embed it; [`validate`] checks the combination of keys.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedSpec {
    /// `"dir"`: an existing (or new) directory; `"loop"`: loop devices over sparse image files.
    pub kind: Kind,
    /// kind = "dir": the directory workloads run in (created, and removed again if empty, when
    /// it does not exist yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// kind = "loop": how many devices (image files) to create (a number, default 1);
    /// kind = "device": the user's block devices (a list of paths); a number N takes the
    /// first N devices the command line names (`iolab study FILE --device DEV`), absent all
    /// of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Devices>,
    /// kind = "loop": size of each image file, e.g. "1GiB" (binary units, as everywhere in iolab).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// kind = "loop": an existing directory for the image files. Default: a fresh directory
    /// under /var/tmp that is removed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_dir: Option<PathBuf>,
    /// kind = "loop": attach with `--direct-io=on` (the loop driver bypasses the host page
    /// cache for the image file). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_io: Option<bool>,
    /// kind = "loop": logical sector size of the loop devices (512, 1024, 2048 or 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sector_size: Option<u32>,
    /// kind = "loop": the filesystem to create. Default "none" (raw devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs: Option<Fs>,
    /// Extra arguments for mkfs (ext4, xfs, btrfs), placed before the device names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mkfs_options: Vec<String>,
    /// `mount -o` options (ext4, xfs, btrfs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_options: Option<String>,
    /// Redundancy across the devices: btrfs "single", "raid0", "raid1", "raid10", "raid5";
    /// zfs "mirror", "raidz" (absent: a plain stripe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid: Option<Raid>,
    /// fs = "zfs": what the pool is built on: "loop" (the loop devices, default) or "files"
    /// (the image files themselves; no loop devices, so no knobs or throttles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vdevs: Option<Vdevs>,
    /// fs = "zfs": `zpool create -o KEY=VALUE`, e.g. `ashift = 12`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pool_properties: BTreeMap<String, PropValue>,
    /// fs = "zfs": `zfs create -o KEY=VALUE` for the dataset workloads run in, e.g.
    /// `recordsize = "16K"`, `compression = "off"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dataset_properties: BTreeMap<String, PropValue>,
    /// fs = "zfs": how the zfs-fuse daemon is started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zfs_daemon: Option<ZfsDaemonSpec>,
    /// Every loop device: `queue/read_ahead_kb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ahead_kb: Option<u32>,
    /// Every loop device: `queue/scheduler` (e.g. "none", "mq-deadline", "bfq").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// Every loop device: `queue/write_cache`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<WriteCache>,
    /// Every device: `queue/nr_requests`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_requests: Option<u32>,
    /// Every device: `queue/max_sectors_kb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sectors_kb: Option<u32>,
    /// Every device: `queue/rq_affinity` (0, 1 or 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rq_affinity: Option<u32>,
    /// kind = "device": the drive's own volatile write cache (`hdparm -W`, `sdparm WCE`,
    /// `nvme set-feature -f 6`), recorded before and restored after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drive_write_cache: Option<bool>,
    /// Every loop device: cgroup v1 blkio throttle limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttle: Option<Throttle>,
    /// kind = "loop": put each image on an emulated disk (`iolab-emudisk`): the loop device
    /// sits on the one file of a FUSE filesystem whose device model (`model = "hdd"`, ...)
    /// serves it; the image file is the model's backing store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulated: Option<iolab_emudisk::EmuSpec>,
    /// Shell command (`sh -c`) run after the testbed is built, in its work directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<String>,
    /// kind = "device": what the command line allows (never read from a file).
    #[serde(skip)]
    pub consent: DeviceConsent,
    /// Shell command (`sh -c`) run first when the testbed is torn down, also after a failed or
    /// interrupted setup, so it must tolerate a partial setup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teardown: Option<String>,
}

/// What a testbed is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Dir,
    Loop,
    /// The user's own block devices, named in `devices` (or on the command line).
    Device,
}

/// `devices`: a number of images (kind = "loop") or a list of device paths (kind = "device").
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Devices {
    Count(u32),
    Paths(Vec<PathBuf>),
}

/// What the user allowed on the command line for a kind = "device" testbed: each device
/// named with `--allow-destroy-device DEV`, and `--wipe` (erase the signatures already on
/// the devices before building). Never part of a study file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceConsent {
    pub allowed: Vec<PathBuf>,
    pub wipe: bool,
}

/// The filesystem on loop devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fs {
    None,
    Ext4,
    Xfs,
    Btrfs,
    Zfs,
}

/// Redundancy profile (btrfs: data and metadata profile; zfs: vdev type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Raid {
    Single,
    Raid0,
    Raid1,
    Raid10,
    Raid5,
    Mirror,
    Raidz,
}

/// What a zfs pool is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vdevs {
    Loop,
    Files,
}

/// `queue/write_cache` of a block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum WriteCache {
    #[serde(rename = "write back")]
    WriteBack,
    #[serde(rename = "write through")]
    WriteThrough,
}

/// cgroup v1 blkio throttle limits, applied to every loop device of the testbed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    /// Bytes per second: an integer or a size such as "10MiB".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bps: Option<ByteRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bps: Option<ByteRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_iops: Option<u64>,
}

/// A byte rate: a plain integer (bytes per second) or a size string ("10MiB" per second).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ByteRate {
    Bytes(u64),
    Text(String),
}

/// A zfs property value: TOML strings, integers and booleans are all passed on as text
/// (`true`/`false` become `on`/`off`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum PropValue {
    Text(String),
    Int(i64),
    Bool(bool),
}

impl fmt::Display for PropValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PropValue::Text(s) => f.write_str(s),
            PropValue::Int(i) => write!(f, "{i}"),
            PropValue::Bool(true) => f.write_str("on"),
            PropValue::Bool(false) => f.write_str("off"),
        }
    }
}

/// Options of the zfs-fuse daemon iolab starts for a zfs testbed. The daemon never reads the
/// system's /etc/zfs/zfsrc (iolab hides it), so what is not set here is the compiled-in
/// default of zfs-fuse, not the distribution's configuration.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ZfsDaemonSpec {
    /// ZFS file-level prefetch. Default true (compiled-in; Debian's zfsrc turns it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<bool>,
    /// `--vdev-cache-size` in MiB (zfs-fuse default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vdev_cache_size_mb: Option<u32>,
    /// `--max-arc-size` in MiB, 16..=16384.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_arc_size_mb: Option<u32>,
    /// `--disable-block-cache`: the daemon opens its vdevs with O_DIRECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_block_cache: Option<bool>,
    /// `--fuse-attr-timeout` in seconds (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_attr_timeout: Option<f64>,
    /// `--fuse-entry-timeout` in seconds (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_entry_timeout: Option<f64>,
    /// `--fuse-mount-options`, comma-separated (e.g. "default_permissions").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_mount_options: Option<String>,
    /// `--enable-xattr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_xattr: Option<bool>,
}

impl TestbedSpec {
    /// A `kind = "dir"` testbed on `path`.
    pub fn dir(path: impl Into<PathBuf>) -> TestbedSpec {
        TestbedSpec {
            path: Some(path.into()),
            ..TestbedSpec::empty(Kind::Dir)
        }
    }

    /// A `kind = "loop"` testbed of `devices` images of `size` with filesystem `fs`.
    pub fn loop_devices(devices: u32, size: &str, fs: Fs) -> TestbedSpec {
        TestbedSpec {
            devices: Some(Devices::Count(devices)),
            size: Some(size.to_string()),
            fs: Some(fs),
            ..TestbedSpec::empty(Kind::Loop)
        }
    }

    fn empty(kind: Kind) -> TestbedSpec {
        TestbedSpec {
            kind,
            path: None,
            devices: None,
            size: None,
            image_dir: None,
            direct_io: None,
            sector_size: None,
            fs: None,
            mkfs_options: Vec::new(),
            mount_options: None,
            raid: None,
            vdevs: None,
            pool_properties: BTreeMap::new(),
            dataset_properties: BTreeMap::new(),
            zfs_daemon: None,
            read_ahead_kb: None,
            scheduler: None,
            write_cache: None,
            nr_requests: None,
            max_sectors_kb: None,
            rq_affinity: None,
            drive_write_cache: None,
            throttle: None,
            emulated: None,
            setup: None,
            consent: DeviceConsent::default(),
            teardown: None,
        }
    }

    /// A `kind = "device"` testbed on the user's `devices`.
    pub fn user_devices(devices: &[PathBuf], fs: Fs) -> TestbedSpec {
        TestbedSpec {
            devices: Some(Devices::Paths(devices.to_vec())),
            fs: Some(fs),
            ..TestbedSpec::empty(Kind::Device)
        }
    }

    /// Number of images (1 unless `devices` says otherwise), or of the user's devices.
    pub fn device_count(&self) -> u32 {
        match &self.devices {
            Some(Devices::Count(n)) => *n,
            Some(Devices::Paths(p)) => p.len() as u32,
            None if self.kind == Kind::Device => 0,
            None => 1,
        }
    }

    /// kind = "device": the user's devices as named (empty when the command line is to
    /// name them).
    pub fn device_paths(&self) -> &[PathBuf] {
        match &self.devices {
            Some(Devices::Paths(p)) => p,
            _ => &[],
        }
    }

    /// Whether the testbed has block devices whose knobs it can set (loop devices or the
    /// user's devices).
    pub fn has_block_devices(&self) -> bool {
        self.kind == Kind::Device || self.uses_loop_devices()
    }

    /// The filesystem ("none" unless `fs` says otherwise).
    pub fn fs_kind(&self) -> Fs {
        self.fs.unwrap_or(Fs::None)
    }

    /// Whether the images are attached as loop devices (false for kind = "dir" and for zfs
    /// pools built on the files themselves).
    pub fn uses_loop_devices(&self) -> bool {
        self.kind == Kind::Loop && !(self.fs_kind() == Fs::Zfs && self.vdevs == Some(Vdevs::Files))
    }

    /// Whether any per-device knob or a throttle is set.
    pub fn has_device_knobs(&self) -> bool {
        self.read_ahead_kb.is_some()
            || self.scheduler.is_some()
            || self.write_cache.is_some()
            || self.nr_requests.is_some()
            || self.max_sectors_kb.is_some()
            || self.rq_affinity.is_some()
            || self.drive_write_cache.is_some()
            || self.throttle.is_some()
    }

    /// Size of each image in bytes (after [`validate`] succeeded).
    pub fn size_bytes(&self) -> Result<u64, TestbedError> {
        let text = self
            .size
            .as_deref()
            .ok_or_else(|| invalid("size", "kind = \"loop\" needs a size, e.g. size = \"1GiB\""))?;
        let bytes = iolab_spec::parse_size("size", text)
            .map_err(|e| invalid("size", &format!("'{text}': {}", e.reason)))?;
        if bytes < 1 << 20 {
            return Err(invalid("size", &format!("'{text}' is below 1 MiB")));
        }
        Ok(bytes)
    }
}

impl Throttle {
    /// The blkio files and their per-device values, in a fixed order.
    pub fn limits(&self) -> Result<Vec<(&'static str, u64)>, TestbedError> {
        let mut out = Vec::new();
        if let Some(r) = &self.read_bps {
            out.push((
                "blkio.throttle.read_bps_device",
                r.bytes("throttle.read_bps")?,
            ));
        }
        if let Some(r) = &self.write_bps {
            out.push((
                "blkio.throttle.write_bps_device",
                r.bytes("throttle.write_bps")?,
            ));
        }
        if let Some(n) = self.read_iops {
            out.push(("blkio.throttle.read_iops_device", n));
        }
        if let Some(n) = self.write_iops {
            out.push(("blkio.throttle.write_iops_device", n));
        }
        Ok(out)
    }
}

impl ByteRate {
    /// Bytes per second; `key` names the field in errors.
    pub fn bytes(&self, key: &str) -> Result<u64, TestbedError> {
        match self {
            ByteRate::Bytes(n) => Ok(*n),
            ByteRate::Text(t) => {
                let t = t.trim();
                let t = t.strip_suffix("/s").unwrap_or(t);
                iolab_spec::parse_size(key, t)
                    .map_err(|e| invalid(key, &format!("'{t}': {}", e.reason)))
            }
        }
    }
}

fn invalid(key: &str, message: &str) -> TestbedError {
    TestbedError::Invalid {
        key: key.to_string(),
        message: message.to_string(),
    }
}

/// Whether `word` (a whole option, or a part of one between `=` and `,`) names a device: a
/// path under /dev, a path that resolves to a block or character device, or a
/// `LABEL=`/`UUID=`-style name a tool would look a device up by.
fn names_device(word: &str) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let w = word.trim();
    if w.is_empty() {
        return false;
    }
    let upper = w.to_ascii_uppercase();
    if ["UUID=", "LABEL=", "PARTUUID=", "PARTLABEL="]
        .iter()
        .any(|p| upper.contains(p))
    {
        return true;
    }
    let under_dev =
        |p: &std::path::Path| p == std::path::Path::new("/dev") || p.starts_with("/dev/");
    for part in w.split([',', '=']).map(str::trim).filter(|p| !p.is_empty()) {
        let path = std::path::Path::new(part);
        if under_dev(path) || std::fs::canonicalize(path).is_ok_and(|c| under_dev(&c)) {
            return true;
        }
        if std::fs::metadata(path)
            .is_ok_and(|m| m.file_type().is_block_device() || m.file_type().is_char_device())
        {
            return true;
        }
    }
    false
}

/// A study or testbed builds its own devices and nothing else: options passed on to mkfs,
/// mount, zpool/zfs and the zfs-fuse daemon, and the image directory, may not name a
/// device (an extra argument to mkfs.btrfs would make a device the testbed never declared
/// a member; `device=` in btrfs's mount options, an ext4 external journal, an xfs log
/// device likewise). Refused whatever the flags of the command: a study file is
/// declarative.
fn refuse_devices(spec: &TestbedSpec) -> Result<(), TestbedError> {
    let refuse = |key: &str, value: &str| {
        invalid(
            key,
            &format!(
                "'{value}' names a device; a testbed formats, mounts and changes only the \
                 devices it creates (loop devices over its own images)"
            ),
        )
    };
    for (i, opt) in spec.mkfs_options.iter().enumerate() {
        if names_device(opt) {
            return Err(refuse(&format!("mkfs_options[{}]", i + 1), opt));
        }
    }
    let single = [
        ("mount_options", spec.mount_options.as_deref()),
        (
            "zfs_daemon.fuse_mount_options",
            spec.zfs_daemon
                .as_ref()
                .and_then(|z| z.fuse_mount_options.as_deref()),
        ),
        (
            "image_dir",
            spec.image_dir.as_deref().and_then(|p| p.to_str()),
        ),
    ];
    for (key, value) in single {
        if let Some(v) = value.filter(|v| names_device(v)) {
            return Err(refuse(key, v));
        }
    }
    for (table, props) in [
        ("pool_properties", &spec.pool_properties),
        ("dataset_properties", &spec.dataset_properties),
    ] {
        for (k, v) in props {
            let v = v.to_string();
            if names_device(&v) {
                return Err(refuse(&format!("{table}.{k}"), &v));
            }
        }
    }
    Ok(())
}

/// Checks that the keys of `spec` make sense together, and that none names a device (see
/// [`refuse_devices`]: paths are looked at, nothing is opened or changed); every error
/// names the offending key. Facts of the machine (tools, schedulers, cgroups) are checked
/// by [`crate::build`].
pub fn validate(spec: &TestbedSpec) -> Result<(), TestbedError> {
    refuse_devices(spec)?;
    let loop_only: [(&str, bool); 19] = [
        ("emulated", spec.emulated.is_some()),
        ("devices", spec.devices.is_some()),
        ("size", spec.size.is_some()),
        ("image_dir", spec.image_dir.is_some()),
        ("direct_io", spec.direct_io.is_some()),
        ("sector_size", spec.sector_size.is_some()),
        ("fs", spec.fs.is_some()),
        ("mkfs_options", !spec.mkfs_options.is_empty()),
        ("mount_options", spec.mount_options.is_some()),
        ("raid", spec.raid.is_some()),
        ("vdevs", spec.vdevs.is_some()),
        ("read_ahead_kb", spec.read_ahead_kb.is_some()),
        ("scheduler", spec.scheduler.is_some()),
        ("write_cache", spec.write_cache.is_some()),
        ("nr_requests", spec.nr_requests.is_some()),
        ("max_sectors_kb", spec.max_sectors_kb.is_some()),
        ("rq_affinity", spec.rq_affinity.is_some()),
        ("drive_write_cache", spec.drive_write_cache.is_some()),
        ("throttle", spec.throttle.is_some()),
    ];
    let zfs_only: [(&str, bool); 4] = [
        ("vdevs", spec.vdevs.is_some()),
        ("pool_properties", !spec.pool_properties.is_empty()),
        ("dataset_properties", !spec.dataset_properties.is_empty()),
        ("zfs_daemon", spec.zfs_daemon.is_some()),
    ];
    for (key, hook) in [("setup", &spec.setup), ("teardown", &spec.teardown)] {
        if let Some(h) = hook {
            if h.trim().is_empty() {
                return Err(invalid(key, "is empty (leave it out instead)"));
            }
        }
    }
    match spec.kind {
        Kind::Dir => {
            let path = spec
                .path
                .as_ref()
                .ok_or_else(|| invalid("path", "kind = \"dir\" needs path = \"/some/dir\""))?;
            if !path.is_absolute() {
                return Err(invalid("path", "must be an absolute path"));
            }
            if path.parent().is_none() {
                return Err(invalid("path", "cannot be /"));
            }
            for (key, set) in loop_only.iter().chain(zfs_only.iter()) {
                if *set {
                    return Err(invalid(
                        key,
                        "applies to kind = \"loop\" only (a directory testbed does not create \
                         or change devices)",
                    ));
                }
            }
            Ok(())
        }
        Kind::Loop | Kind::Device => validate_loop(spec, &zfs_only),
    }
}

/// The keys of a kind = "device" testbed that only loop testbeds have, and its device list.
fn validate_device_list(spec: &TestbedSpec) -> Result<(), TestbedError> {
    for (key, set) in [
        ("size", spec.size.is_some()),
        ("image_dir", spec.image_dir.is_some()),
        ("direct_io", spec.direct_io.is_some()),
        ("sector_size", spec.sector_size.is_some()),
        ("emulated", spec.emulated.is_some()),
        ("vdevs", spec.vdevs.is_some()),
    ] {
        if set {
            return Err(invalid(
                key,
                "applies to kind = \"loop\" only (a device testbed uses the devices as they are)",
            ));
        }
    }
    if let Some(Devices::Count(n)) = spec.devices {
        if n == 0 || n > MAX_DEVICES {
            return Err(invalid(
                "devices",
                &format!(
                    "must be between 1 and {MAX_DEVICES} (the first N devices of --device), \
                     got {n}"
                ),
            ));
        }
    }
    let paths = spec.device_paths();
    if paths.len() > MAX_DEVICES as usize {
        return Err(invalid(
            "devices",
            &format!("at most {MAX_DEVICES} devices, got {}", paths.len()),
        ));
    }
    for (i, p) in paths.iter().enumerate() {
        let key = format!("devices[{}]", i + 1);
        if !p.is_absolute() || p.to_str().is_none_or(|t| t.chars().any(char::is_control)) {
            return Err(invalid(&key, "must be an absolute path, e.g. /dev/sdb"));
        }
        if paths[..i].contains(p) {
            return Err(invalid(&key, &format!("{} is named twice", p.display())));
        }
    }
    Ok(())
}

fn validate_loop(spec: &TestbedSpec, zfs_only: &[(&str, bool)]) -> Result<(), TestbedError> {
    if spec.path.is_some() {
        return Err(invalid(
            "path",
            "applies to kind = \"dir\" only (use image_dir for where loop images go)",
        ));
    }
    let n = spec.device_count();
    // kind = "device" without devices: the command line names them, and the counts are
    // checked again once it has.
    let deferred = spec.kind == Kind::Device && n == 0;
    if spec.kind == Kind::Device {
        validate_device_list(spec)?;
    } else {
        if n == 0 || n > MAX_DEVICES {
            return Err(invalid(
                "devices",
                &format!("must be between 1 and {MAX_DEVICES}, got {n}"),
            ));
        }
        spec.size_bytes()?;
    }
    if let Some(e) = &spec.emulated {
        iolab_emudisk::validate(e)
            .map_err(|i| invalid(&format!("emulated.{}", i.key), &i.message))?;
        if spec.direct_io == Some(false) {
            return Err(invalid(
                "direct_io",
                "an emulated disk needs direct_io (a buffered loop device would hide its latency)",
            ));
        }
        if spec.vdevs == Some(Vdevs::Files) {
            return Err(invalid(
                "vdevs",
                "\"files\" bypasses the loop devices, so the emulated disks would serve nothing",
            ));
        }
    }
    if let Some(dir) = &spec.image_dir {
        if !dir.is_absolute() {
            return Err(invalid("image_dir", "must be an absolute path"));
        }
    }
    if let Some(s) = spec.sector_size {
        if ![512, 1024, 2048, 4096].contains(&s) {
            return Err(invalid(
                "sector_size",
                &format!("must be 512, 1024, 2048 or 4096, got {s}"),
            ));
        }
    }
    let fs = spec.fs_kind();
    if fs != Fs::Zfs {
        for (key, set) in zfs_only {
            if *set {
                return Err(invalid(key, "applies to fs = \"zfs\" only"));
            }
        }
    }
    match fs {
        Fs::None => {
            for (key, set) in [
                ("mkfs_options", !spec.mkfs_options.is_empty()),
                ("mount_options", spec.mount_options.is_some()),
                ("raid", spec.raid.is_some()),
            ] {
                if set {
                    return Err(invalid(
                        key,
                        "needs a filesystem (fs = \"none\" leaves raw devices)",
                    ));
                }
            }
        }
        Fs::Ext4 | Fs::Xfs => {
            let name = if fs == Fs::Ext4 { "ext4" } else { "xfs" };
            if spec.raid.is_some() {
                return Err(invalid(
                    "raid",
                    &format!("{name} has no RAID of its own and md RAID is not used; use fs = \"btrfs\" or \"zfs\""),
                ));
            }
            if n != 1 && !deferred {
                return Err(invalid(
                    "devices",
                    &format!(
                        "{name} uses one device; several devices need fs = \"btrfs\" or \"zfs\""
                    ),
                ));
            }
        }
        Fs::Btrfs => {
            if let Some(raid) = spec.raid {
                let min =
                    match raid {
                        Raid::Single | Raid::Raid0 => 1,
                        Raid::Raid1 | Raid::Raid10 | Raid::Raid5 => 2,
                        Raid::Mirror | Raid::Raidz => return Err(invalid(
                            "raid",
                            "btrfs takes \"single\", \"raid0\", \"raid1\", \"raid10\" or \"raid5\"",
                        )),
                    };
                if n < min && !deferred {
                    return Err(invalid(
                        "raid",
                        &format!(
                            "{} needs at least {min} devices, devices = {n}",
                            raid_name(raid)
                        ),
                    ));
                }
            }
        }
        // Counts wait for the command line's devices (u32::MAX: no count check yet).
        Fs::Zfs => validate_zfs(spec, if deferred { u32::MAX } else { n })?,
    }
    for (i, opt) in spec.mkfs_options.iter().enumerate() {
        if opt.is_empty() {
            return Err(invalid(&format!("mkfs_options[{i}]"), "is empty"));
        }
    }
    if let Some(o) = &spec.mount_options {
        if o.trim().is_empty() || o.chars().any(char::is_whitespace) {
            return Err(invalid(
                "mount_options",
                "must be one comma-separated list without spaces, e.g. \"noatime,nobarrier\"",
            ));
        }
    }
    if spec.has_device_knobs() && !spec.has_block_devices() {
        let key = if spec.read_ahead_kb.is_some() {
            "read_ahead_kb"
        } else if spec.scheduler.is_some() {
            "scheduler"
        } else if spec.write_cache.is_some() {
            "write_cache"
        } else if spec.nr_requests.is_some() {
            "nr_requests"
        } else if spec.max_sectors_kb.is_some() {
            "max_sectors_kb"
        } else if spec.rq_affinity.is_some() {
            "rq_affinity"
        } else if spec.drive_write_cache.is_some() {
            "drive_write_cache"
        } else {
            "throttle"
        };
        return Err(invalid(
            key,
            "applies to loop devices; vdevs = \"files\" builds the pool without them",
        ));
    }
    if spec.drive_write_cache.is_some() && spec.kind != Kind::Device {
        return Err(invalid(
            "drive_write_cache",
            "applies to kind = \"device\" only (a loop device has no drive cache; use \
             write_cache for the kernel's view, or an emulated disk's write_cache)",
        ));
    }
    if let Some(a) = spec.rq_affinity {
        if a > 2 {
            return Err(invalid(
                "rq_affinity",
                &format!("must be 0, 1 or 2, got {a}"),
            ));
        }
    }
    for (key, v) in [
        ("nr_requests", spec.nr_requests),
        ("max_sectors_kb", spec.max_sectors_kb),
    ] {
        if v == Some(0) {
            return Err(invalid(key, "must be at least 1"));
        }
    }
    if !spec.uses_loop_devices() && spec.kind != Kind::Device {
        for (key, set) in [
            ("direct_io", spec.direct_io.is_some()),
            ("sector_size", spec.sector_size.is_some()),
        ] {
            if set {
                return Err(invalid(
                    key,
                    "applies to loop devices; vdevs = \"files\" has none",
                ));
            }
        }
    }
    if let Some(kb) = spec.read_ahead_kb {
        if kb > 1 << 20 {
            return Err(invalid("read_ahead_kb", "is above 1048576 (1 GiB)"));
        }
    }
    if let Some(s) = &spec.scheduler {
        if s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(
                "scheduler",
                &format!("'{s}' is not a scheduler name (e.g. none, mq-deadline, kyber, bfq)"),
            ));
        }
    }
    if let Some(t) = &spec.throttle {
        let limits = t.limits()?;
        if limits.is_empty() {
            return Err(invalid(
                "throttle",
                "sets no limit (use read_bps, write_bps, read_iops or write_iops)",
            ));
        }
        for (file, v) in limits {
            if v == 0 {
                let key = file
                    .trim_start_matches("blkio.throttle.")
                    .trim_end_matches("_device");
                return Err(invalid(
                    &format!("throttle.{key}"),
                    "is 0, which blkio reads as \"no limit\"; leave it out instead",
                ));
            }
        }
    }
    Ok(())
}

fn validate_zfs(spec: &TestbedSpec, n: u32) -> Result<(), TestbedError> {
    for key in ["mkfs_options", "mount_options"] {
        let set = match key {
            "mkfs_options" => !spec.mkfs_options.is_empty(),
            _ => spec.mount_options.is_some(),
        };
        if set {
            return Err(invalid(
                key,
                "does not apply to zfs (use pool_properties, dataset_properties or zfs_daemon)",
            ));
        }
    }
    match spec.raid {
        None => {}
        Some(Raid::Mirror) | Some(Raid::Raidz) if n >= 2 => {}
        Some(r @ (Raid::Mirror | Raid::Raidz)) => {
            return Err(invalid(
                "raid",
                &format!("{} needs at least 2 devices, devices = {n}", raid_name(r)),
            ))
        }
        Some(_) => {
            return Err(invalid(
                "raid",
                "zfs takes \"mirror\" or \"raidz\" (leave it out for a plain stripe)",
            ))
        }
    }
    for (table, props, reserved) in [
        (
            "pool_properties",
            &spec.pool_properties,
            ["cachefile", "altroot"],
        ),
        (
            "dataset_properties",
            &spec.dataset_properties,
            ["mountpoint", "canmount"],
        ),
    ] {
        for (k, v) in props {
            let key = format!("{table}.{k}");
            if k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-'))
            {
                return Err(invalid(&key, "is not a zfs property name"));
            }
            if reserved.contains(&k.as_str()) {
                return Err(invalid(&key, "is set by iolab itself"));
            }
            let v = v.to_string();
            if v.is_empty() || v.chars().any(|c| c.is_control()) {
                return Err(invalid(&key, "needs a non-empty, single-line value"));
            }
        }
    }
    if let Some(d) = &spec.zfs_daemon {
        if let Some(m) = d.max_arc_size_mb {
            if !(16..=16384).contains(&m) {
                return Err(invalid("zfs_daemon.max_arc_size_mb", "must be 16..=16384"));
            }
        }
        for (key, t) in [
            ("zfs_daemon.fuse_attr_timeout", d.fuse_attr_timeout),
            ("zfs_daemon.fuse_entry_timeout", d.fuse_entry_timeout),
        ] {
            if let Some(t) = t {
                if !t.is_finite() || t < 0.0 {
                    return Err(invalid(key, "must be a number of seconds >= 0"));
                }
            }
        }
        if let Some(o) = &d.fuse_mount_options {
            if o.is_empty() || o.chars().any(char::is_whitespace) {
                return Err(invalid(
                    "zfs_daemon.fuse_mount_options",
                    "must be one comma-separated list without spaces",
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn raid_name(r: Raid) -> &'static str {
    match r {
        Raid::Single => "single",
        Raid::Raid0 => "raid0",
        Raid::Raid1 => "raid1",
        Raid::Raid10 => "raid10",
        Raid::Raid5 => "raid5",
        Raid::Mirror => "mirror",
        Raid::Raidz => "raidz",
    }
}

pub(crate) fn fs_name(f: Fs) -> &'static str {
    match f {
        Fs::None => "none",
        Fs::Ext4 => "ext4",
        Fs::Xfs => "xfs",
        Fs::Btrfs => "btrfs",
        Fs::Zfs => "zfs",
    }
}

impl WriteCache {
    /// The text sysfs uses.
    pub fn as_sysfs(self) -> &'static str {
        match self {
            WriteCache::WriteBack => "write back",
            WriteCache::WriteThrough => "write through",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TestbedSpec {
        toml::from_str(text).unwrap()
    }

    fn key_of(r: Result<(), TestbedError>) -> String {
        match r {
            Err(TestbedError::Invalid { key, .. }) => key,
            other => panic!("expected an Invalid error, got {other:?}"),
        }
    }

    #[test]
    fn full_loop_spec_parses_and_validates() {
        let s = parse(
            r#"
            kind = "loop"
            devices = 3
            size = "1GiB"
            direct_io = false
            sector_size = 4096
            fs = "btrfs"
            raid = "raid5"
            mkfs_options = ["-n", "16384"]
            mount_options = "noatime,compress=zstd"
            read_ahead_kb = 0
            scheduler = "mq-deadline"
            write_cache = "write through"
            setup = "echo hi"
            teardown = "echo bye"
            [throttle]
            read_bps = "10MiB"
            write_iops = 150
            "#,
        );
        validate(&s).unwrap();
        assert_eq!(s.raid, Some(Raid::Raid5));
        assert_eq!(s.write_cache, Some(WriteCache::WriteThrough));
        assert_eq!(
            s.throttle.as_ref().unwrap().limits().unwrap(),
            vec![
                ("blkio.throttle.read_bps_device", 10 << 20),
                ("blkio.throttle.write_iops_device", 150)
            ]
        );
        assert_eq!(s.size_bytes().unwrap(), 1 << 30);
    }

    #[test]
    fn zfs_spec_parses() {
        let s = parse(
            r#"
            kind = "loop"
            devices = 2
            size = "256MiB"
            fs = "zfs"
            raid = "mirror"
            vdevs = "files"
            pool_properties = { ashift = 12 }
            dataset_properties = { recordsize = "16K", compression = false }
            zfs_daemon = { prefetch = false, max_arc_size_mb = 64 }
            "#,
        );
        validate(&s).unwrap();
        assert_eq!(s.pool_properties["ashift"].to_string(), "12");
        assert_eq!(s.dataset_properties["compression"].to_string(), "off");
        assert!(!s.uses_loop_devices());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let e =
            toml::from_str::<TestbedSpec>("kind = \"loop\"\nsize = \"1g\"\nfilesystem = \"ext4\"")
                .unwrap_err();
        assert!(e.to_string().contains("filesystem"), "{e}");
        let e = toml::from_str::<TestbedSpec>(
            "kind = \"loop\"\nsize = \"1g\"\n[throttle]\nread_mbps = 3",
        )
        .unwrap_err();
        assert!(e.to_string().contains("read_mbps"), "{e}");
        assert!(toml::from_str::<TestbedSpec>("kind = \"lvm\"").is_err());
        assert!(
            toml::from_str::<TestbedSpec>("kind = \"loop\"\nwrite_cache = \"writeback\"").is_err()
        );
    }

    #[test]
    fn errors_name_the_key() {
        let base = || TestbedSpec::loop_devices(1, "64MiB", Fs::Ext4);
        assert_eq!(key_of(validate(&TestbedSpec::empty(Kind::Dir))), "path");
        assert_eq!(key_of(validate(&TestbedSpec::dir("rel/dir"))), "path");
        let mut d = TestbedSpec::dir("/tmp/x");
        d.scheduler = Some("none".into());
        assert_eq!(key_of(validate(&d)), "scheduler");
        let mut s = base();
        s.size = None;
        assert_eq!(key_of(validate(&s)), "size");
        s.size = Some("12 parsecs".into());
        assert_eq!(key_of(validate(&s)), "size");
        let mut s = base();
        s.devices = Some(Devices::Count(2));
        assert_eq!(key_of(validate(&s)), "devices");
        let mut s = base();
        s.raid = Some(Raid::Raid1);
        assert_eq!(key_of(validate(&s)), "raid");
        let mut s = TestbedSpec::loop_devices(1, "1g", Fs::Btrfs);
        s.raid = Some(Raid::Raid1);
        assert_eq!(key_of(validate(&s)), "raid");
        s.raid = Some(Raid::Mirror);
        s.devices = Some(Devices::Count(2));
        assert_eq!(key_of(validate(&s)), "raid");
        let mut s = TestbedSpec::loop_devices(2, "1g", Fs::Zfs);
        s.raid = Some(Raid::Raid1);
        assert_eq!(key_of(validate(&s)), "raid");
        s.raid = None;
        s.mkfs_options = vec!["-x".into()];
        assert_eq!(key_of(validate(&s)), "mkfs_options");
        s.mkfs_options.clear();
        s.dataset_properties
            .insert("mountpoint".into(), PropValue::Text("/x".into()));
        assert_eq!(key_of(validate(&s)), "dataset_properties.mountpoint");
        s.dataset_properties.clear();
        s.vdevs = Some(Vdevs::Files);
        s.write_cache = Some(WriteCache::WriteBack);
        assert_eq!(key_of(validate(&s)), "write_cache");
        let mut s = base();
        s.pool_properties
            .insert("ashift".into(), PropValue::Int(12));
        assert_eq!(key_of(validate(&s)), "pool_properties");
        let mut s = base();
        s.sector_size = Some(3000);
        assert_eq!(key_of(validate(&s)), "sector_size");
        let mut s = base();
        s.throttle = Some(Throttle::default());
        assert_eq!(key_of(validate(&s)), "throttle");
        s.throttle = Some(Throttle {
            read_bps: Some(ByteRate::Text("fast".into())),
            ..Throttle::default()
        });
        assert_eq!(key_of(validate(&s)), "throttle.read_bps");
        s.throttle = Some(Throttle {
            write_iops: Some(0),
            ..Throttle::default()
        });
        assert_eq!(key_of(validate(&s)), "throttle.write_iops");
        let mut s = base();
        s.mount_options = Some("noatime, nobarrier".into());
        assert_eq!(key_of(validate(&s)), "mount_options");
        let mut s = base();
        s.setup = Some("  ".into());
        assert_eq!(key_of(validate(&s)), "setup");
        let mut s = TestbedSpec::loop_devices(1, "1g", Fs::None);
        s.mount_options = Some("noatime".into());
        assert_eq!(key_of(validate(&s)), "mount_options");
    }

    #[test]
    fn device_specs_name_their_keys() {
        let d = |text: &str| parse(&format!("kind = \"device\"\n{text}"));
        validate(&d(
            "devices = [\"/dev/sdb\", \"/dev/sdc\"]\nfs = \"btrfs\"\nraid = \"raid1\"\n\
                     nr_requests = 64\nmax_sectors_kb = 256\nrq_affinity = 2\n\
                     drive_write_cache = false",
        ))
        .unwrap();
        // Devices from the command line: counted once they are given.
        validate(&d("fs = \"btrfs\"\nraid = \"raid1\"")).unwrap();
        validate(&d("devices = 1\nfs = \"ext4\"")).unwrap();
        assert_eq!(d("devices = 2").device_count(), 2);
        assert_eq!(d("").device_count(), 0);
        for (text, key) in [
            ("devices = [\"/dev/sdb\"]\nsize = \"1GiB\"", "size"),
            (
                "devices = [\"/dev/sdb\"]\nfs = \"zfs\"\nvdevs = \"files\"",
                "vdevs",
            ),
            ("devices = [\"sdb\"]", "devices[1]"),
            ("devices = [\"/dev/sdb\", \"/dev/sdb\"]", "devices[2]"),
            ("devices = 0", "devices"),
            (
                "devices = [\"/dev/sdb\", \"/dev/sdc\"]\nfs = \"ext4\"",
                "devices",
            ),
            (
                "devices = [\"/dev/sdb\"]\nfs = \"btrfs\"\nraid = \"raid1\"",
                "raid",
            ),
            ("devices = [\"/dev/sdb\"]\nrq_affinity = 3", "rq_affinity"),
            ("devices = [\"/dev/sdb\"]\nnr_requests = 0", "nr_requests"),
        ] {
            assert_eq!(key_of(validate(&d(text))), key, "{text}");
        }
        let mut l = TestbedSpec::loop_devices(1, "64MiB", Fs::Ext4);
        l.drive_write_cache = Some(true);
        assert_eq!(key_of(validate(&l)), "drive_write_cache");
        let mut dir = TestbedSpec::dir("/tmp/x");
        dir.nr_requests = Some(4);
        assert_eq!(key_of(validate(&dir)), "nr_requests");
    }

    #[test]
    fn byte_rates() {
        assert_eq!(ByteRate::Bytes(5).bytes("k").unwrap(), 5);
        assert_eq!(
            ByteRate::Text("50MiB/s".into()).bytes("k").unwrap(),
            50 << 20
        );
        assert_eq!(ByteRate::Text("1k".into()).bytes("k").unwrap(), 1024);
        assert!(ByteRate::Text("x".into()).bytes("k").is_err());
    }
}
