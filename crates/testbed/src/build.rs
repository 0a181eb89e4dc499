//! [`build`]: creating a testbed step by step, recording each resource in the state file
//! before creating it, and removing everything again when a step fails.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::commands::{self, Names};
use crate::error::TestbedError;
use crate::remove::knob_value;
use crate::spec::{validate, Fs, Kind, TestbedSpec, Vdevs};
use crate::state::{Resource, StateFile};
use crate::sys::{self, display_cmd, display_write};
use crate::testbed::{Device, KnobChange, Testbed, ZfsInfo};

/// How long the zfs-fuse daemon may take to answer.
const DAEMON_READY_TIMEOUT: Duration = Duration::from_secs(20);

static NAME_SEQ: AtomicU64 = AtomicU64::new(0);

/// Whether a knob reads what was written (read_ahead_kb is kept in whole pages, so it may
/// read up to a page less).
fn knob_took(attr: &str, wanted: &str, now: &str) -> bool {
    if attr == "queue/read_ahead_kb" {
        match (wanted.parse::<u64>(), now.parse::<u64>()) {
            (Ok(w), Ok(n)) => n <= w && w - n < 64,
            _ => false,
        }
    } else {
        wanted == now
    }
}

/// A fresh name for a testbed's directory, cgroup and pool.
fn fresh_name() -> String {
    format!(
        "iolab-testbed-{}-{}-{}",
        std::process::id(),
        NAME_SEQ.fetch_add(1, Ordering::Relaxed),
        sys::random_suffix(6)
    )
}

/// Builds the testbed `spec` describes. Every resource is recorded in `state` before it is
/// created; if a step fails or `stop` is raised, everything built so far is removed again
/// (in reverse order) before the error is returned. Needs root for kind = "loop".
pub fn build(
    spec: &TestbedSpec,
    state: &StateFile,
    stop: &AtomicBool,
) -> Result<Testbed, TestbedError> {
    validate(spec)?;
    preflight(spec)?;
    state.claim()?;
    let mut tb = Testbed::new(spec.clone(), state.clone());
    match build_into(&mut tb, stop) {
        Ok(()) => Ok(tb),
        Err(cause) => {
            let leftovers = tb.remove_all();
            if leftovers.is_empty() {
                Err(cause)
            } else {
                Err(TestbedError::BuildFailed {
                    cause: Box::new(cause),
                    leftovers,
                })
            }
        }
    }
}

/// Facts of the machine a build needs, checked before anything is created.
fn preflight(spec: &TestbedSpec) -> Result<(), TestbedError> {
    let mut tools: Vec<(&str, &str)> = Vec::new();
    match spec.kind {
        Kind::Dir => {
            let path = spec.path.as_deref().unwrap_or(Path::new("/"));
            if path.exists() && !path.is_dir() {
                return Err(TestbedError::Invalid {
                    key: "path".into(),
                    message: format!("{} exists and is not a directory", path.display()),
                });
            }
        }
        Kind::Device => {
            if !sys::is_root() {
                return Err(TestbedError::Unsupported {
                    key: "kind".into(),
                    message: "device testbeds need root (mkfs, mount, sysfs)".into(),
                });
            }
            crate::device::check_devices(spec)?;
            tools.push(("wipefs", "to list and erase the signatures a build makes"));
            fs_tools(spec, &mut tools);
        }
        Kind::Loop => {
            if !sys::is_root() {
                return Err(TestbedError::Unsupported {
                    key: "kind".into(),
                    message: "loop testbeds need root (losetup, mkfs, mount)".into(),
                });
            }
            if let Some(d) = &spec.image_dir {
                if !d.is_dir() {
                    return Err(TestbedError::Unsupported {
                        key: "image_dir".into(),
                        message: format!("{} is not an existing directory", d.display()),
                    });
                }
            }
            if !Path::new(commands::BASE_PARENT).is_dir() {
                return Err(TestbedError::Unsupported {
                    key: "kind".into(),
                    message: format!("{} does not exist", commands::BASE_PARENT),
                });
            }
            if spec.uses_loop_devices() {
                tools.push(("losetup", "to attach the image files as loop devices"));
            }
            fs_tools(spec, &mut tools);
        }
    }
    if spec.kind != Kind::Dir && spec.fs_kind() == Fs::Zfs {
        if let Some(pid) = sys::pids_named("zfs-fuse").first() {
            return Err(TestbedError::ZfsDaemonBusy { pid: *pid });
        }
        check_daemon_options(spec)?;
    }
    if spec.setup.is_some() || spec.teardown.is_some() || spec.throttle.is_some() {
        tools.push(("sh", "for the setup and teardown hooks"));
    }
    if spec.throttle.is_some() && sys::blkio_root().is_none() {
        return Err(TestbedError::Unsupported {
            key: "throttle".into(),
            message: "no cgroup v1 blkio hierarchy is mounted (looked for \
                      /sys/fs/cgroup/blkio and cgroup mounts with blkio)"
                .into(),
        });
    }
    for (tool, purpose) in tools {
        sys::require_tool(tool, purpose)?;
    }
    Ok(())
}

/// Every option the spec gives the zfs-fuse daemon (`zfs_daemon`) must be one this zfs-fuse
/// has (its `--help` lists it): otherwise the knob is refused by its key before anything is
/// built, rather than a daemon that fails to start.
fn check_daemon_options(spec: &TestbedSpec) -> Result<(), TestbedError> {
    const KEYS: [(&str, &str); 8] = [
        ("--zfs-prefetch-disable", "zfs_daemon.prefetch"),
        ("--vdev-cache-size", "zfs_daemon.vdev_cache_size_mb"),
        ("--max-arc-size", "zfs_daemon.max_arc_size_mb"),
        ("--disable-block-cache", "zfs_daemon.disable_block_cache"),
        ("--fuse-attr-timeout", "zfs_daemon.fuse_attr_timeout"),
        ("--fuse-entry-timeout", "zfs_daemon.fuse_entry_timeout"),
        ("--fuse-mount-options", "zfs_daemon.fuse_mount_options"),
        ("--enable-xattr", "zfs_daemon.enable_xattr"),
    ];
    if spec.zfs_daemon.is_none() {
        return Ok(());
    }
    let exe = sys::require_tool("zfs-fuse", "for fs = \"zfs\" (the daemon)")?;
    let out = Command::new(&exe)
        .arg("--help")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestbedError::io(format!("running {} --help", exe.display()), e))?;
    let help = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let args = commands::zfs_fuse_args(spec, Path::new("/"));
    for (flag, key) in KEYS {
        if args.iter().any(|a| a == flag) && !help.contains(flag) {
            return Err(TestbedError::Unsupported {
                key: key.into(),
                message: format!(
                    "this zfs-fuse ({}) has no {flag} option (its --help does not list it)",
                    exe.display()
                ),
            });
        }
    }
    Ok(())
}

/// The tools the filesystem of `spec` needs.
fn fs_tools(spec: &TestbedSpec, tools: &mut Vec<(&str, &str)>) {
    match spec.fs_kind() {
        Fs::None => {}
        Fs::Ext4 => tools.push(("mkfs.ext4", "for fs = \"ext4\"")),
        Fs::Xfs => tools.push(("mkfs.xfs", "for fs = \"xfs\"")),
        Fs::Btrfs => {
            tools.push(("mkfs.btrfs", "for fs = \"btrfs\""));
            tools.push(("btrfs", "for fs = \"btrfs\" (device registrations)"));
        }
        Fs::Zfs => {
            tools.push(("zfs-fuse", "for fs = \"zfs\" (the daemon)"));
            tools.push(("zpool", "for fs = \"zfs\""));
            tools.push(("zfs", "for fs = \"zfs\""));
            if commands::zfsrc_mount().is_some() {
                tools.push((
                    "unshare",
                    "for fs = \"zfs\" (to hide /etc/zfs/zfsrc from the daemon)",
                ));
            }
        }
    }
    if spec.fs_kind() != Fs::None {
        tools.push(("mount", "to mount the filesystem"));
        tools.push(("umount", "to unmount the filesystem"));
    }
}

pub(crate) fn check(stop: &AtomicBool) -> Result<(), TestbedError> {
    if stop.load(Ordering::Relaxed) {
        Err(TestbedError::Interrupted)
    } else {
        Ok(())
    }
}

fn build_into(tb: &mut Testbed, stop: &AtomicBool) -> Result<(), TestbedError> {
    let spec = tb.spec.clone();
    let hook_cwd = match spec.kind {
        Kind::Dir => {
            let path = spec.path.clone().unwrap_or_default();
            for d in commands::missing_dirs(&path) {
                check(stop)?;
                tb.make_dir(&d)?;
            }
            tb.work_dir = Some(path.clone());
            path
        }
        Kind::Loop => build_loop(tb, &spec, stop)?,
        Kind::Device => build_device(tb, &spec, stop)?,
    };
    check(stop)?;
    if spec.setup.is_some() || spec.teardown.is_some() {
        tb.run_setup(&spec, &hook_cwd)?;
    }
    Ok(())
}

/// A fresh name and the testbed's directory under /var/tmp.
fn start(tb: &mut Testbed, spec: &TestbedSpec, stop: &AtomicBool) -> Result<Names, TestbedError> {
    check(stop)?;
    let names = Names::new(spec, &fresh_name());
    tb.make_dir(&names.base)?;
    tb.base = Some(names.base.clone());
    tb.name = Some(names.name.clone());
    Ok(names)
}

fn build_loop(
    tb: &mut Testbed,
    spec: &TestbedSpec,
    stop: &AtomicBool,
) -> Result<PathBuf, TestbedError> {
    let names = start(tb, spec, stop)?;
    if names.own_image_dir {
        tb.make_dir(&names.image_dir)?;
    }
    let size = spec.size_bytes()?;
    for i in 0..spec.device_count() {
        check(stop)?;
        tb.make_image(&names.image(i), size)?;
    }
    if spec.uses_loop_devices() {
        let mut targets = tb.images.clone();
        if spec.emulated.is_some() {
            for (i, img) in tb.images.clone().iter().enumerate() {
                check(stop)?;
                targets[i] = tb.start_emudisk(spec, &names, i, img, stop)?;
            }
        }
        for img in targets {
            check(stop)?;
            tb.attach(spec, &img)?;
        }
        check(stop)?;
        tb.apply_knobs(spec)?;
    }
    throttle_and_fs(tb, spec, &names, stop)
}

/// The throttle's cgroup (validation allows one only over devices) and the filesystem;
/// returns where the hooks run.
fn throttle_and_fs(
    tb: &mut Testbed,
    spec: &TestbedSpec,
    names: &Names,
    stop: &AtomicBool,
) -> Result<PathBuf, TestbedError> {
    if spec.throttle.is_some() {
        check(stop)?;
        tb.make_cgroup(spec, &names.name)?;
    }
    check(stop)?;
    match spec.fs_kind() {
        Fs::None => Ok(names.base.clone()),
        Fs::Zfs => {
            tb.make_zfs(spec, names, stop)?;
            Ok(names.mnt())
        }
        Fs::Ext4 | Fs::Xfs | Fs::Btrfs => {
            tb.make_fs(spec, names, stop)?;
            Ok(names.mnt())
        }
    }
}

/// kind = "device": the user's devices, checked by [`preflight`]; `--wipe` erases what is
/// on them, then knobs, throttle and filesystem as on loop devices.
fn build_device(
    tb: &mut Testbed,
    spec: &TestbedSpec,
    stop: &AtomicBool,
) -> Result<PathBuf, TestbedError> {
    let names = start(tb, spec, stop)?;
    for p in spec.device_paths() {
        let path = crate::device::canonical(p)?;
        let rdev = crate::device::rdev_text(&path).ok_or_else(|| TestbedError::Refused {
            device: p.clone(),
            message: "is not a block device".into(),
        })?;
        let (major, minor) = rdev
            .split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or_default();
        tb.devices.push(Device {
            path,
            major,
            minor,
            image: PathBuf::new(),
        });
    }
    if spec.consent.wipe {
        for dev in tb.devices.clone() {
            check(stop)?;
            if !crate::device::signatures(&dev.path)?.is_empty() {
                let argv = vec!["wipefs".to_string(), "-a".into(), sys::text(&dev.path)];
                tb.commands.push(format!(
                    "{}  # --wipe: the signatures already on it",
                    display_cmd(&argv)
                ));
                sys::run(&argv)?;
            }
        }
    }
    check(stop)?;
    tb.apply_knobs(spec)?;
    if let Some(on) = spec.drive_write_cache {
        for dev in tb.devices.clone() {
            check(stop)?;
            tb.set_drive_cache(&dev, on)?;
        }
    }
    throttle_and_fs(tb, spec, &names, stop)
}

impl Testbed {
    /// Records and logs a command, then runs it.
    fn run_logged(&mut self, argv: &[String]) -> Result<String, TestbedError> {
        self.commands.push(display_cmd(argv));
        sys::run(argv)
    }

    /// Creates directory `dir` (which must not exist) and records it.
    pub(crate) fn make_dir(&mut self, dir: &Path) -> Result<(), TestbedError> {
        let res = Resource::Dir {
            path: dir.to_path_buf(),
        };
        let id = self.state.intent(&res)?;
        self.commands.push(commands::mkdir_line(dir));
        match iolab_sys::files::create_dir(dir) {
            Ok(_) => self.state.done(id, &res),
            Err(e) => {
                // Nothing was created (an existing directory is not ours to remove).
                self.state.removed(id, true)?;
                Err(TestbedError::io(format!("creating {}", dir.display()), e))
            }
        }
    }

    /// Creates a new empty file (mode 0600, never through a link, never an existing file)
    /// and records it.
    pub(crate) fn make_file(
        &mut self,
        path: &Path,
        size: u64,
    ) -> Result<std::fs::File, TestbedError> {
        let res = Resource::File {
            path: path.to_path_buf(),
        };
        let id = self.state.intent(&res)?;
        let f = match iolab_sys::files::create_new(path) {
            Ok(f) => f,
            Err(e) => {
                if e.kind() == ErrorKind::AlreadyExists {
                    self.state.removed(id, true)?;
                }
                return Err(TestbedError::io(format!("creating {}", path.display()), e));
            }
        };
        self.state.done(id, &res)?;
        if size > 0 {
            f.set_len(size)
                .map_err(|e| TestbedError::io(format!("sizing {}", path.display()), e))?;
        }
        Ok(f)
    }

    /// A sparse image file of `size` bytes.
    fn make_image(&mut self, path: &Path, size: u64) -> Result<(), TestbedError> {
        self.commands.push(commands::create_image_line(path, size));
        drop(self.make_file(path, size)?);
        self.images.push(path.to_path_buf());
        Ok(())
    }

    /// `losetup -f --show` on `image`, recorded before it runs.
    fn attach(&mut self, spec: &TestbedSpec, image: &Path) -> Result<(), TestbedError> {
        let mut res = Resource::LoopDevice {
            image: image.to_path_buf(),
            device: None,
        };
        let id = self.state.intent(&res)?;
        let out = self.run_logged(&commands::losetup(spec, image))?;
        let dev = PathBuf::from(out.trim());
        if !sys::loop_backed_by(&dev, image) {
            return Err(TestbedError::Command {
                command: display_cmd(&commands::losetup(spec, image)),
                status: "unexpected output".into(),
                stderr: format!(
                    "'{}' is not a loop device attached to the image",
                    out.trim()
                ),
            });
        }
        res = Resource::LoopDevice {
            image: image.to_path_buf(),
            device: Some(dev.clone()),
        };
        self.state.done(id, &res)?;
        let (major, minor) = sys::block_dev_numbers(&dev).ok_or_else(|| TestbedError::State {
            message: format!("no device numbers for {} in sysfs", dev.display()),
        })?;
        // A loop device keeps its queue's write_cache across detach and attach: one left at
        // "write through" by an earlier user would silently change this configuration (and
        // drop its flushes). Without a write_cache in the spec, the device starts at the
        // kernel's default for a loop device over a file.
        if spec.write_cache.is_none() {
            let path = sys::sysfs_attr(&dev, "queue/write_cache");
            if sys::read_trim(&path).is_ok_and(|v| v != "write back") {
                self.commands
                    .push(display_write(&sys::text(&path), "write back"));
                sys::write_attr(&path, "write back").map_err(|e| {
                    TestbedError::io(format!("writing 'write back' to {}", path.display()), e)
                })?;
            }
        }
        if spec.direct_io.unwrap_or(true) {
            let dio = sys::read_trim(sys::sysfs_attr(&dev, "loop/dio")).unwrap_or_default();
            if dio != "1" {
                return Err(TestbedError::Unsupported {
                    key: "direct_io".into(),
                    message: format!(
                        "the kernel left direct I/O off for {} (loop/dio = {dio:?}): the \
                         filesystem holding {} does not support O_DIRECT with this sector \
                         size; set direct_io = false or move image_dir",
                        dev.display(),
                        image.display()
                    ),
                });
            }
        }
        self.devices.push(Device {
            path: dev,
            major,
            minor,
            image: image.to_path_buf(),
        });
        Ok(())
    }

    /// Sets scheduler, write_cache and read_ahead_kb on every device. All previous values are
    /// read and recorded before the first write (read_ahead_kb recorded first, so teardown
    /// restores it last), then the values are written and read back.
    fn apply_knobs(&mut self, spec: &TestbedSpec) -> Result<(), TestbedError> {
        let knobs = commands::knob_writes(spec);
        if knobs.is_empty() {
            return Ok(());
        }
        for dev in self.devices.clone() {
            let mut ids = Vec::new();
            for (attr, value) in commands::knob_record_order(&knobs) {
                let path = sys::sysfs_attr(&dev.path, attr);
                let raw = match sys::read_trim(&path) {
                    Ok(v) => v,
                    Err(e) if e.kind() == ErrorKind::NotFound => {
                        return Err(TestbedError::Unsupported {
                            key: attr.trim_start_matches("queue/").into(),
                            message: format!(
                                "{} has no {attr} ({} does not exist; a partition's queue is \
                                 its disk's)",
                                dev.path.display(),
                                path.display()
                            ),
                        })
                    }
                    Err(e) => {
                        return Err(TestbedError::io(format!("reading {}", path.display()), e))
                    }
                };
                if attr == "queue/scheduler" {
                    let available = sys::list_entries(&raw);
                    if !available.contains(&value) {
                        return Err(TestbedError::Unsupported {
                            key: "scheduler".into(),
                            message: format!(
                                "'{value}' is not available for {} (available: {})",
                                dev.path.display(),
                                available.join(", ")
                            ),
                        });
                    }
                }
                let previous = knob_value(&dev.path, attr).unwrap_or(raw);
                let res = if spec.kind == Kind::Device {
                    Resource::DeviceKnob {
                        device: dev.path.clone(),
                        rdev: dev.maj_min(),
                        attr: attr.to_string(),
                        previous: previous.clone(),
                    }
                } else {
                    Resource::Knob {
                        device: dev.path.clone(),
                        image: dev.image.clone(),
                        attr: attr.to_string(),
                        previous: previous.clone(),
                    }
                };
                ids.push((self.state.intent(&res)?, res, attr, previous));
            }
            for (attr, value) in &knobs {
                let path = sys::sysfs_attr(&dev.path, attr);
                self.commands.push(display_write(&sys::text(&path), value));
                sys::write_attr(&path, value).map_err(|e| {
                    TestbedError::io(format!("writing '{value}' to {}", path.display()), e)
                })?;
            }
            for (id, res, attr, previous) in ids {
                self.state.done(id, &res)?;
                let wanted = knobs
                    .iter()
                    .find(|(a, _)| *a == attr)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let now = knob_value(&dev.path, attr).unwrap_or_default();
                if !knob_took(attr, &wanted, &now) {
                    let key = attr.trim_start_matches("queue/");
                    return Err(TestbedError::Unsupported {
                        key: key.into(),
                        message: format!(
                            "{} reads '{now}' after '{wanted}' was written",
                            sys::sysfs_attr(&dev.path, attr).display()
                        ),
                    });
                }
                self.knobs.push(KnobChange {
                    device: dev.path.clone(),
                    attr: attr.to_string(),
                    previous,
                    value: now,
                });
            }
        }
        Ok(())
    }

    /// The drive's own write cache of `dev` (kind = "device"), recorded, set and read back.
    fn set_drive_cache(&mut self, dev: &Device, on: bool) -> Result<(), TestbedError> {
        use crate::device::{drive_cache_read, drive_cache_set, drive_cache_tool};
        let tool = drive_cache_tool(&dev.path)?;
        let previous = drive_cache_read(tool, &dev.path)?;
        let res = Resource::DriveCache {
            device: dev.path.clone(),
            rdev: dev.maj_min(),
            tool: tool.to_string(),
            previous,
        };
        let id = self.state.intent(&res)?;
        self.run_logged(&drive_cache_set(tool, &dev.path, on))?;
        self.state.done(id, &res)?;
        if drive_cache_read(tool, &dev.path)? != on {
            return Err(TestbedError::Unsupported {
                key: "drive_write_cache".into(),
                message: format!(
                    "{} did not take the write cache setting (the drive may not allow it)",
                    dev.path.display()
                ),
            });
        }
        self.knobs.push(KnobChange {
            device: dev.path.clone(),
            attr: format!("drive write cache ({tool})"),
            previous: if previous { "on" } else { "off" }.into(),
            value: if on { "on" } else { "off" }.into(),
        });
        Ok(())
    }

    /// A blkio cgroup with the throttle limits for every device.
    fn make_cgroup(&mut self, spec: &TestbedSpec, name: &str) -> Result<(), TestbedError> {
        let Some(throttle) = &spec.throttle else {
            return Ok(());
        };
        let root = sys::blkio_root().ok_or_else(|| TestbedError::Unsupported {
            key: "throttle".into(),
            message: "no cgroup v1 blkio hierarchy".into(),
        })?;
        let path = root.join(name);
        let res = Resource::Cgroup { path: path.clone() };
        let id = self.state.intent(&res)?;
        self.commands.push(commands::mkdir_line(&path));
        if let Err(e) = iolab_sys::files::create_dir(&path) {
            if e.kind() == ErrorKind::AlreadyExists {
                self.state.removed(id, true)?;
            }
            return Err(TestbedError::io(format!("creating {}", path.display()), e));
        }
        self.state.done(id, &res)?;
        self.cgroup = Some(path.clone());
        for (file, limit) in throttle.limits()? {
            for dev in &self.devices {
                let line = format!("{} {limit}", dev.maj_min());
                let f = path.join(file);
                self.commands.push(display_write(&sys::text(&f), &line));
                sys::write_attr(&f, &line).map_err(|e| {
                    TestbedError::io(format!("writing '{line}' to {}", f.display()), e)
                })?;
            }
        }
        Ok(())
    }

    /// mkfs, a fresh mount directory, mount.
    fn make_fs(
        &mut self,
        spec: &TestbedSpec,
        names: &Names,
        stop: &AtomicBool,
    ) -> Result<(), TestbedError> {
        let devs: Vec<String> = self.devices.iter().map(|d| sys::text(&d.path)).collect();
        if spec.kind == Kind::Device {
            return self.make_fs_on_devices(spec, names, stop, &devs);
        }
        if spec.fs_kind() == Fs::Btrfs {
            let res = Resource::BtrfsDevices {
                devices: self.devices.iter().map(|d| d.path.clone()).collect(),
                images: self.devices.iter().map(|d| d.image.clone()).collect(),
            };
            let id = self.state.intent(&res)?;
            self.state.done(id, &res)?;
        }
        if let Some(argv) = commands::mkfs(spec, &devs) {
            self.run_logged(&argv)?;
        }
        self.mount_fs(spec, names, stop, &devs)
    }

    /// mkfs on the user's devices, each one's signatures recorded before (none) and after,
    /// then the mount.
    fn make_fs_on_devices(
        &mut self,
        spec: &TestbedSpec,
        names: &Names,
        stop: &AtomicBool,
        devs: &[String],
    ) -> Result<(), TestbedError> {
        let records = self.signatures_to_come()?;
        if let Some(argv) = commands::mkfs(spec, devs) {
            self.run_logged(&argv)?;
        }
        self.signatures_made(records)?;
        self.mount_fs(spec, names, stop, devs)
    }

    /// Records, before mkfs or zpool create writes them, the signatures to come on each of
    /// the user's devices (none for loop testbeds).
    fn signatures_to_come(&mut self) -> Result<Vec<(u64, Device)>, TestbedError> {
        let mut records = Vec::new();
        if self.spec.kind != Kind::Device {
            return Ok(records);
        }
        for dev in self.devices.clone() {
            let res = Resource::DeviceSignatures {
                device: dev.path.clone(),
                rdev: dev.maj_min(),
                signatures: Vec::new(),
            };
            records.push((self.state.intent(&res)?, dev));
        }
        Ok(records)
    }

    /// Completes [`Testbed::signatures_to_come`] with what wipefs now lists.
    fn signatures_made(&mut self, records: Vec<(u64, Device)>) -> Result<(), TestbedError> {
        for (id, dev) in records {
            let res = Resource::DeviceSignatures {
                signatures: crate::device::signatures(&dev.path)?,
                rdev: dev.maj_min(),
                device: dev.path,
            };
            self.state.done(id, &res)?;
        }
        Ok(())
    }

    /// A fresh mount directory and the mount of the new filesystem.
    fn mount_fs(
        &mut self,
        spec: &TestbedSpec,
        names: &Names,
        stop: &AtomicBool,
        devs: &[String],
    ) -> Result<(), TestbedError> {
        check(stop)?;
        let mnt = names.mnt();
        self.make_dir(&mnt)?;
        let res = Resource::Mount {
            target: mnt.clone(),
            source: devs.first().cloned().unwrap_or_default(),
        };
        let id = self.state.intent(&res)?;
        self.run_logged(&commands::mount(spec, devs, &mnt))?;
        self.state.done(id, &res)?;
        self.mount_point = Some(mnt.clone());
        self.work_dir = Some(mnt);
        Ok(())
    }

    /// The zfs-fuse daemon, a pool and a dataset mounted on a fresh directory.
    fn make_zfs(
        &mut self,
        spec: &TestbedSpec,
        names: &Names,
        stop: &AtomicBool,
    ) -> Result<(), TestbedError> {
        let mnt = names.mnt();
        self.make_dir(&mnt)?;
        // The user's devices: erased after the daemon has let go of them (recorded first).
        let records = self.signatures_to_come()?;
        let etc_mount = commands::zfsrc_mount();
        if etc_mount.is_some() {
            let res = Resource::Mount {
                target: mnt.clone(),
                source: sys::text(&mnt),
            };
            let id = self.state.intent(&res)?;
            for argv in commands::shared_bind(&mnt) {
                self.run_logged(&argv)?;
            }
            self.state.done(id, &res)?;
        }
        if let Some(pid) = sys::pids_named("zfs-fuse").first() {
            return Err(TestbedError::ZfsDaemonBusy { pid: *pid });
        }
        let log = names.daemon_log();
        self.commands.push(commands::touch_line(&log));
        let log_file = self.make_file(&log, 0)?;
        let marker = sys::text(names.daemon_marker());
        let procs = self.cgroup.as_ref().map(|c| c.join("cgroup.procs"));
        let argv = commands::zfs_daemon(
            spec,
            &names.daemon_marker(),
            etc_mount.as_deref(),
            procs.as_deref(),
        );
        let mut res = Resource::ZfsDaemon {
            marker: marker.clone(),
            pid: None,
            start_time: None,
        };
        let id = self.state.intent(&res)?;
        self.commands.push(display_cmd(&argv));
        let log_file = |what| {
            log_file
                .try_clone()
                .map_err(|e| TestbedError::io(format!("opening {} for {what}", log.display()), e))
        };
        // Its own process group: a Ctrl-C meant for iolab must not reach the daemon (it
        // would exit on SIGINT and take the pool with it before iolab's orderly teardown).
        let child = sys::command(&argv)?
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log_file("stdout")?)
            .stderr(log_file("stderr")?)
            .spawn()
            .map_err(|e| TestbedError::io(format!("starting {}", display_cmd(&argv)), e))?;
        let pid = child.id() as i32;
        self.daemon = Some(child);
        res = Resource::ZfsDaemon {
            marker,
            pid: Some(pid),
            start_time: sys::proc_start_time(pid),
        };
        self.state.done(id, &res)?;
        self.wait_for_daemon(&log, stop)?;
        let vdevs: Vec<String> = if spec.vdevs == Some(Vdevs::Files) {
            self.images.iter().map(sys::text).collect()
        } else {
            self.devices.iter().map(|d| sys::text(&d.path)).collect()
        };
        let pool = names.pool();
        let res = Resource::ZfsPool { name: pool.clone() };
        let id = self.state.intent(&res)?;
        let create = commands::zpool_create(spec, &pool, &vdevs);
        self.run_logged(&create)?;
        self.state.done(id, &res)?;
        self.signatures_made(records)?;
        check(stop)?;
        let dataset = names.dataset();
        let res = Resource::ZfsDataset {
            name: dataset.clone(),
            mountpoint: mnt.clone(),
        };
        let id = self.state.intent(&res)?;
        self.run_logged(&commands::zfs_create(spec, &dataset, &mnt))?;
        self.state.done(id, &res)?;
        let mounted = sys::wait_until(Duration::from_secs(5), Duration::from_millis(50), || {
            sys::mount_at(&mnt).is_some_and(|m| m.source == dataset)
        });
        if !mounted {
            return Err(TestbedError::ZfsDaemon {
                message: format!(
                    "{dataset} does not appear mounted on {} in this mount namespace",
                    mnt.display()
                ),
            });
        }
        self.zfs = Some(ZfsInfo {
            pool,
            dataset,
            vdevs,
            daemon_command: display_cmd(&argv),
            daemon_pid: pid as u32,
        });
        self.mount_point = Some(mnt.clone());
        self.work_dir = Some(mnt);
        Ok(())
    }

    fn wait_for_daemon(&mut self, log: &Path, stop: &AtomicBool) -> Result<(), TestbedError> {
        let ready = commands::zpool_ready();
        self.commands.push(format!(
            "{}  # repeated until the daemon answers",
            display_cmd(&ready)
        ));
        let start = Instant::now();
        loop {
            check(stop)?;
            if let Some(c) = self.daemon.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    let text = fs::read_to_string(log).unwrap_or_default();
                    return Err(TestbedError::ZfsDaemon {
                        message: format!("exited at start ({status}): {}", sys::tail(&text, 8)),
                    });
                }
            }
            if sys::run(&ready).is_ok() {
                return Ok(());
            }
            if start.elapsed() > DAEMON_READY_TIMEOUT {
                return Err(TestbedError::ZfsDaemon {
                    message: format!(
                        "no answer after {} s ({})",
                        DAEMON_READY_TIMEOUT.as_secs(),
                        sys::tail(&fs::read_to_string(log).unwrap_or_default(), 4)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Records the teardown hook, then runs the setup hook.
    fn run_setup(&mut self, spec: &TestbedSpec, cwd: &Path) -> Result<(), TestbedError> {
        let env = self.hook_env();
        let res = Resource::Hook {
            command: spec.teardown.clone().unwrap_or_default(),
            cwd: cwd.to_path_buf(),
            env: env.clone(),
        };
        let id = self.state.intent(&res)?;
        self.state.done(id, &res)?;
        let Some(setup) = &spec.setup else {
            return Ok(());
        };
        let argv = commands::hook(setup);
        self.commands
            .push(format!("{}  # in {}", display_cmd(&argv), cwd.display()));
        let out = Command::new(sys::require_tool("sh", "for the setup hook")?)
            .arg("-c")
            .arg(setup)
            .current_dir(cwd)
            .envs(env)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| TestbedError::io("running the setup hook", e))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(TestbedError::Command {
                command: display_cmd(&argv),
                status: out.status.to_string(),
                stderr: sys::tail(&String::from_utf8_lossy(&out.stderr), 12),
            })
        }
    }
}
