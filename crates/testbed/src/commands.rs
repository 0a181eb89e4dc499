//! The commands a testbed runs, built in one place for both [`crate::build`] (real names)
//! and [`plan`] (placeholders such as `<name>` and `<loop0>`), so a dry run shows exactly what a
//! build does.

use std::path::{Path, PathBuf};

use crate::spec::{fs_name, validate, Fs, Kind, Raid, TestbedSpec, Vdevs};
use crate::sys::{self, display_cmd, display_write};

/// Where fresh testbed directories are made.
pub(crate) const BASE_PARENT: &str = "/var/tmp";
/// The configuration file zfs-fuse always reads.
pub(crate) const ZFSRC: &str = "/etc/zfs/zfsrc";
/// The dataset workloads run in, under the pool.
pub(crate) const DATASET: &str = "bench";

/// The directory on whose filesystem a build of `spec` puts its image files (the images
/// themselves go into a fresh directory below it unless `image_dir` is set).
pub fn image_parent(spec: &TestbedSpec) -> PathBuf {
    spec.image_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(BASE_PARENT))
}

/// The names a build uses: real ones during a build, placeholders in a plan.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// The fresh name (`iolab-testbed-PID-N-RANDOM`): base directory, cgroup, pool.
    pub name: String,
    pub base: PathBuf,
    pub image_dir: PathBuf,
    /// Whether `image_dir` is iolab's own (inside `base`).
    pub own_image_dir: bool,
}

impl Names {
    pub(crate) fn new(spec: &TestbedSpec, name: &str) -> Names {
        let base = Path::new(BASE_PARENT).join(name);
        let (image_dir, own) = match &spec.image_dir {
            Some(d) => (d.clone(), false),
            None => (base.join("images"), true),
        };
        Names {
            name: name.to_string(),
            base,
            image_dir,
            own_image_dir: own,
        }
    }

    pub(crate) fn image(&self, i: u32) -> PathBuf {
        if self.own_image_dir {
            self.image_dir.join(format!("disk{i}.img"))
        } else {
            self.image_dir.join(format!("{}-disk{i}.img", self.name))
        }
    }

    pub(crate) fn mnt(&self) -> PathBuf {
        self.base.join("mnt")
    }

    pub(crate) fn daemon_log(&self) -> PathBuf {
        self.base.join("zfs-fuse.log")
    }

    /// The argument that marks iolab's zfs-fuse daemon (a `--pidfile` path, which zfs-fuse
    /// ignores with `--no-daemon`).
    pub(crate) fn daemon_marker(&self) -> PathBuf {
        self.base.join("zfs-fuse.pid")
    }

    pub(crate) fn pool(&self) -> String {
        self.name.clone()
    }

    pub(crate) fn dataset(&self) -> String {
        format!("{}/{DATASET}", self.name)
    }
}

fn s(p: &Path) -> String {
    sys::text(p)
}

/// `truncate -s SIZE IMAGE` (iolab creates the file itself, refusing to reuse one).
pub(crate) fn create_image_line(image: &Path, size: u64) -> String {
    display_cmd(&["truncate".into(), "-s".into(), size.to_string(), s(image)])
}

pub(crate) fn mkdir_line(dir: &Path) -> String {
    display_cmd(&["mkdir".into(), s(dir)])
}

pub(crate) fn touch_line(file: &Path) -> String {
    display_cmd(&["touch".into(), s(file)])
}

pub(crate) fn losetup(spec: &TestbedSpec, image: &Path) -> Vec<String> {
    let mut v = vec!["losetup".to_string(), "-f".into(), "--show".into()];
    v.push(if spec.direct_io.unwrap_or(true) {
        "--direct-io=on".into()
    } else {
        "--direct-io=off".into()
    });
    if let Some(ss) = spec.sector_size {
        v.push("--sector-size".into());
        v.push(ss.to_string());
    }
    v.push(s(image));
    v
}

/// The sysfs attributes set on every loop device, with their values, in the order they are
/// written. read_ahead_kb comes last: on this kernel every queue-limits update (writing
/// write_cache is one) recomputes the readahead from the device's optimal I/O size, which
/// silently undoes an earlier read_ahead_kb.
pub(crate) fn knob_writes(spec: &TestbedSpec) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    if let Some(sched) = &spec.scheduler {
        v.push(("queue/scheduler", sched.clone()));
    }
    // A loop device over a FUSE file starts as "write through", which drops flushes before
    // they reach the emulated disk: its cache is what the study is about, so write back.
    let emulated = spec.emulated.as_ref().map(|_| crate::WriteCache::WriteBack);
    if let Some(wc) = spec.write_cache.or(emulated) {
        v.push(("queue/write_cache", wc.as_sysfs().to_string()));
    }
    // An emulated hard disk says so, as a real one does (FSYNC_TOO_FAST reads it).
    if spec
        .emulated
        .as_ref()
        .is_some_and(|e| e.model == Some(iolab_emudisk::ModelKind::Hdd))
    {
        v.push(("queue/rotational", "1".into()));
    }
    // Queue-limit updates too (they reset read_ahead_kb); nr_requests after the scheduler,
    // which resets it.
    if let Some(kb) = spec.max_sectors_kb {
        v.push(("queue/max_sectors_kb", kb.to_string()));
    }
    if let Some(n) = spec.nr_requests {
        v.push(("queue/nr_requests", n.to_string()));
    }
    if let Some(a) = spec.rq_affinity {
        v.push(("queue/rq_affinity", a.to_string()));
    }
    if let Some(kb) = spec.read_ahead_kb {
        v.push(("queue/read_ahead_kb", kb.to_string()));
    }
    v
}

/// The order knobs are recorded in the state file: read_ahead_kb first and nr_requests
/// second, so that teardown (newest first) writes them back last, after the writes that
/// reset them (queue limits reset read_ahead_kb, a scheduler change nr_requests).
pub(crate) fn knob_record_order(knobs: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    const LAST: [&str; 2] = ["queue/read_ahead_kb", "queue/nr_requests"];
    let mut v: Vec<(&'static str, String)> = LAST
        .iter()
        .filter_map(|l| knobs.iter().find(|(a, _)| a == l).cloned())
        .collect();
    v.extend(knobs.iter().filter(|(a, _)| !LAST.contains(a)).cloned());
    v
}

/// btrfs `-d`/`-m` profiles for a raid setting.
pub(crate) fn btrfs_profiles(raid: Raid) -> (&'static str, &'static str) {
    match raid {
        Raid::Single => ("single", "single"),
        Raid::Raid0 => ("raid0", "raid0"),
        Raid::Raid1 => ("raid1", "raid1"),
        Raid::Raid10 => ("raid10", "raid10"),
        // Metadata on raid5 is discouraged (write hole); raid1 is the usual choice.
        Raid::Raid5 => ("raid5", "raid1"),
        Raid::Mirror | Raid::Raidz => ("single", "single"),
    }
}

pub(crate) fn mkfs(spec: &TestbedSpec, devices: &[String]) -> Option<Vec<String>> {
    let mut v: Vec<String> = match spec.fs_kind() {
        Fs::Ext4 => vec!["mkfs.ext4".into(), "-F".into(), "-q".into()],
        Fs::Xfs => vec!["mkfs.xfs".into(), "-f".into(), "-q".into()],
        Fs::Btrfs => {
            let mut v = vec!["mkfs.btrfs".to_string(), "-f".into(), "-q".into()];
            if let Some(r) = spec.raid {
                let (d, m) = btrfs_profiles(r);
                v.extend(["-d".into(), d.into(), "-m".into(), m.into()]);
            }
            v
        }
        Fs::None | Fs::Zfs => return None,
    };
    v.extend(spec.mkfs_options.iter().cloned());
    v.extend(devices.iter().cloned());
    Some(v)
}

pub(crate) fn mount(spec: &TestbedSpec, devices: &[String], target: &Path) -> Vec<String> {
    let fs = fs_name(spec.fs_kind());
    let mut opts: Vec<String> = Vec::new();
    if spec.fs_kind() == Fs::Btrfs && devices.len() > 1 {
        // Name every member: without udev nothing else guarantees the kernel knows them.
        opts.extend(devices.iter().map(|d| format!("device={d}")));
    }
    if let Some(o) = &spec.mount_options {
        opts.push(o.clone());
    }
    let mut v = vec!["mount".to_string(), "-t".into(), fs.into()];
    if !opts.is_empty() {
        v.push("-o".into());
        v.push(opts.join(","));
    }
    v.push(devices[0].clone());
    v.push(s(target));
    v
}

pub(crate) fn umount(target: &Path, lazy: bool) -> Vec<String> {
    let mut v = vec!["umount".to_string()];
    if lazy {
        v.push("-l".into());
    }
    v.push(s(target));
    v
}

/// The three commands that make `dir` a shared mount of its own, so mounts the zfs-fuse
/// daemon makes inside its private namespace appear outside it.
pub(crate) fn shared_bind(dir: &Path) -> [Vec<String>; 3] {
    let d = s(dir);
    [
        vec!["mount".into(), "--bind".into(), d.clone(), d.clone()],
        vec!["mount".into(), "--make-private".into(), d.clone()],
        vec!["mount".into(), "--make-shared".into(), d],
    ]
}

/// The zfs-fuse daemon's own arguments.
pub(crate) fn zfs_fuse_args(spec: &TestbedSpec, marker: &Path) -> Vec<String> {
    let mut v = vec![
        "zfs-fuse".to_string(),
        "--no-daemon".into(),
        "--no-kstat-mount".into(),
        "--pidfile".into(),
        s(marker),
    ];
    let d = spec.zfs_daemon.clone().unwrap_or_default();
    if d.prefetch == Some(false) {
        v.push("--zfs-prefetch-disable".into());
    }
    if let Some(n) = d.vdev_cache_size_mb {
        v.extend(["--vdev-cache-size".into(), n.to_string()]);
    }
    if let Some(n) = d.max_arc_size_mb {
        v.extend(["--max-arc-size".into(), n.to_string()]);
    }
    if d.disable_block_cache == Some(true) {
        v.push("--disable-block-cache".into());
    }
    if let Some(t) = d.fuse_attr_timeout {
        v.extend(["--fuse-attr-timeout".into(), t.to_string()]);
    }
    if let Some(t) = d.fuse_entry_timeout {
        v.extend(["--fuse-entry-timeout".into(), t.to_string()]);
    }
    if let Some(o) = &d.fuse_mount_options {
        v.extend(["--fuse-mount-options".into(), o.clone()]);
    }
    if d.enable_xattr == Some(true) {
        v.push("--enable-xattr".into());
    }
    v
}

/// How the daemon is started. With `etc_mount` (the mount holding /etc/zfs/zfsrc): in a new
/// mount namespace where that mount is private and /dev/null hides zfsrc. With `cgroup_procs`:
/// the shell joins the cgroup before it execs the daemon, so the daemon's I/O to the loop
/// devices is throttled.
pub(crate) fn zfs_daemon(
    spec: &TestbedSpec,
    marker: &Path,
    etc_mount: Option<&Path>,
    cgroup_procs: Option<&Path>,
) -> Vec<String> {
    let daemon = zfs_fuse_args(spec, marker);
    let cg = cgroup_procs.map(s).unwrap_or_default();
    match etc_mount {
        Some(m) => {
            let mut v: Vec<String> = [
                "unshare",
                "-m",
                "--propagation",
                "unchanged",
                "sh",
                "-c",
                "set -e; if [ -n \"$2\" ]; then echo $$ > \"$2\"; fi; \
                 mount --make-private \"$1\"; mount --bind /dev/null /etc/zfs/zfsrc; \
                 shift 2; exec \"$@\"",
                "sh",
            ]
            .iter()
            .map(|x| x.to_string())
            .collect();
            v.push(s(m));
            v.push(cg);
            v.extend(daemon);
            v
        }
        None if cgroup_procs.is_some() => {
            let mut v: Vec<String> = [
                "sh",
                "-c",
                "set -e; echo $$ > \"$1\"; shift; exec \"$@\"",
                "sh",
            ]
            .iter()
            .map(|x| x.to_string())
            .collect();
            v.push(cg);
            v.extend(daemon);
            v
        }
        None => daemon,
    }
}

pub(crate) fn zpool_ready() -> Vec<String> {
    vec!["zpool".into(), "list".into(), "-H".into()]
}

pub(crate) fn zpool_create(spec: &TestbedSpec, pool: &str, vdevs: &[String]) -> Vec<String> {
    let mut v = vec![
        "zpool".to_string(),
        "create".into(),
        "-o".into(),
        "cachefile=none".into(),
    ];
    for (k, val) in &spec.pool_properties {
        v.push("-o".into());
        v.push(format!("{k}={val}"));
    }
    v.extend(["-m".into(), "none".into(), pool.to_string()]);
    match spec.raid {
        Some(Raid::Mirror) => v.push("mirror".into()),
        Some(Raid::Raidz) => v.push("raidz".into()),
        _ => {}
    }
    v.extend(vdevs.iter().cloned());
    v
}

pub(crate) fn zfs_create(spec: &TestbedSpec, dataset: &str, mountpoint: &Path) -> Vec<String> {
    let mut v = vec![
        "zfs".to_string(),
        "create".into(),
        "-o".into(),
        format!("mountpoint={}", s(mountpoint)),
    ];
    for (k, val) in &spec.dataset_properties {
        v.push("-o".into());
        v.push(format!("{k}={val}"));
    }
    v.push(dataset.to_string());
    v
}

pub(crate) fn hook(command: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), command.to_string()]
}

/// The missing directories of `path`, outermost first.
pub(crate) fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = path
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
        .map(Path::to_path_buf)
        .collect();
    v.reverse();
    v
}

/// The blkio hierarchy a throttle cgroup goes in (the usual place when none is mounted).
pub(crate) fn blkio_root_or_default() -> PathBuf {
    sys::blkio_root().unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup/blkio"))
}

/// The mount holding /etc/zfs/zfsrc, when that file exists (it then has to be hidden).
pub(crate) fn zfsrc_mount() -> Option<PathBuf> {
    let rc = Path::new(ZFSRC);
    if rc.exists() {
        Some(sys::mount_containing(rc).unwrap_or_else(|| PathBuf::from("/")))
    } else {
        None
    }
}

/// The commands [`crate::build`] would run for `spec`, in order, then (after a
/// `# teardown` comment) what teardown would run. Placeholders: `<name>` is the fresh name
/// (`iolab-testbed-PID-N-RANDOM`), `<loopI>` the device `losetup -f` picks for image I,
/// `<maj:minI>` its device numbers. File, directory and sysfs steps, which iolab performs
/// itself, are shown as the equivalent `mkdir`, `truncate`, `touch` and `echo` commands.
/// Lines starting with `#` are comments.
pub fn plan(spec: &TestbedSpec) -> Vec<String> {
    if let Err(e) = validate(spec) {
        return vec![format!("# invalid testbed: {e}")];
    }
    let mut out = Vec::new();
    let mut down: Vec<String> = Vec::new();
    let hook_cwd;
    match spec.kind {
        Kind::Dir => {
            let path = spec.path.clone().unwrap_or_default();
            out.push(format!("# directory testbed on {}", path.display()));
            for d in missing_dirs(&path) {
                out.push(mkdir_line(&d));
                down.push(display_cmd(&["rmdir".into(), s(&d)]));
            }
            hook_cwd = path;
        }
        Kind::Device => hook_cwd = plan_device(spec, &mut out, &mut down),
        Kind::Loop => {
            let names = Names::new(spec, "<name>");
            let n = spec.device_count();
            let size = spec.size_bytes().unwrap_or(0);
            out.push(format!(
                "# loop testbed: {n} x {} image(s), fs = {}{}; <name> = a fresh iolab-testbed-PID-N-RANDOM{}",
                iolab_spec::format_bytes(size),
                fs_name(spec.fs_kind()),
                spec.raid
                    .map(|r| format!(", raid = {}", crate::spec::raid_name(r)))
                    .unwrap_or_default(),
                if spec.uses_loop_devices() {
                    ", <loopI> = the device losetup picks for image I"
                } else {
                    ""
                }
            ));
            out.push(mkdir_line(&names.base));
            down.push(display_cmd(&["rmdir".into(), s(&names.base)]));
            if names.own_image_dir {
                out.push(mkdir_line(&names.image_dir));
                down.push(display_cmd(&["rmdir".into(), s(&names.image_dir)]));
            }
            let images: Vec<PathBuf> = (0..n).map(|i| names.image(i)).collect();
            for img in &images {
                out.push(create_image_line(img, size));
                down.push(display_cmd(&["rm".into(), s(img)]));
            }
            let devs: Vec<String> = (0..n).map(|i| format!("/dev/<loop{i}>")).collect();
            let mut cgroup_procs = None;
            if spec.uses_loop_devices() {
                for (i, img) in images.iter().enumerate() {
                    let img = match &spec.emulated {
                        Some(e) => {
                            let dir = names.base.join(format!("emu{i}"));
                            out.push(mkdir_line(&dir.join("mnt")));
                            let json = serde_json::to_string(e).unwrap_or_default();
                            let bin = std::path::Path::new("iolab");
                            out.push(format!(
                                "{}  # emulated disk daemon; waits for {}",
                                display_cmd(&crate::emulated::serve_argv(bin, &dir, img, &json)),
                                s(&dir.join("ready"))
                            ));
                            down.push(format!(
                                "kill -TERM <emudisk pid {i}>  # unmounts {}",
                                s(&dir.join("mnt"))
                            ));
                            dir.join("mnt").join(iolab_emudisk::IMAGE_NAME)
                        }
                        None => img.clone(),
                    };
                    let img = &img;
                    out.push(display_cmd(&losetup(spec, img)));
                    down.push(display_cmd(&[
                        "losetup".into(),
                        "-d".into(),
                        devs[i].clone(),
                    ]));
                }
                for i in 0..n {
                    let knobs = knob_writes(spec);
                    for (attr, value) in &knobs {
                        out.push(display_write(
                            &format!("/sys/block/<loop{i}>/{attr}"),
                            value,
                        ));
                    }
                    // Restored in the reverse of the order they are recorded in (read_ahead_kb
                    // first), so read_ahead_kb is written back last.
                    for (attr, _) in knob_record_order(&knobs) {
                        down.push(display_write(
                            &format!("/sys/block/<loop{i}>/{attr}"),
                            "<previous value>",
                        ));
                    }
                }
                if let Some(t) = &spec.throttle {
                    let cg = blkio_root_or_default().join(&names.name);
                    out.push(mkdir_line(&cg));
                    down.push(display_cmd(&["rmdir".into(), s(&cg)]));
                    for (file, v) in t.limits().unwrap_or_default() {
                        for i in 0..n {
                            out.push(display_write(
                                &s(&cg.join(file)),
                                &format!("<maj:min{i}> {v}"),
                            ));
                        }
                    }
                    cgroup_procs = Some(cg.join("cgroup.procs"));
                }
            }
            let mnt = names.mnt();
            match spec.fs_kind() {
                Fs::None => {}
                Fs::Zfs => {
                    let vdevs: Vec<String> = if spec.vdevs == Some(Vdevs::Files) {
                        images.iter().map(|p| s(p)).collect()
                    } else {
                        devs.clone()
                    };
                    let procs = cgroup_procs.as_deref();
                    plan_zfs(spec, &names, &vdevs, procs, &mut out, &mut down);
                }
                _ => {
                    if spec.fs_kind() == Fs::Btrfs {
                        let mut v = vec![
                            "btrfs".to_string(),
                            "device".into(),
                            "scan".into(),
                            "--forget".into(),
                        ];
                        v.extend(devs.iter().cloned());
                        down.push(display_cmd(&v));
                    }
                    plan_mkfs_mount(spec, &devs, &mnt, &mut out, &mut down);
                }
            }
            hook_cwd = if spec.fs_kind() == Fs::None {
                names.base.clone()
            } else {
                mnt
            };
        }
    }
    if let Some(h) = &spec.setup {
        out.push(format!(
            "{}  # in {}",
            display_cmd(&hook(h)),
            hook_cwd.display()
        ));
    }
    if let Some(h) = &spec.teardown {
        down.push(format!(
            "{}  # in {}",
            display_cmd(&hook(h)),
            hook_cwd.display()
        ));
    }
    out.push("# teardown, in reverse order:".into());
    out.extend(down.into_iter().rev());
    out
}

/// The plan of a kind = "device" testbed (build lines into `out`, teardown lines into `down`
/// in creation order); returns the hooks' directory.
fn plan_device(spec: &TestbedSpec, out: &mut Vec<String>, down: &mut Vec<String>) -> PathBuf {
    let names = Names::new(spec, "<name>");
    let mut devs: Vec<String> = spec
        .device_paths()
        .iter()
        .map(|p| s(&std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())))
        .collect();
    if devs.is_empty() {
        devs.push("<--device>".into());
    }
    out.push(format!(
        "# device testbed on {}: fs = {}{}; <name> = a fresh iolab-testbed-PID-N-RANDOM; each \
         device is checked first: named with --allow-destroy-device, not mounted, held or the \
         system disk, no signature unless --wipe",
        devs.join(", "),
        fs_name(spec.fs_kind()),
        spec.raid
            .map(|r| format!(", raid = {}", crate::spec::raid_name(r)))
            .unwrap_or_default(),
    ));
    for d in spec.device_paths() {
        out.push(format!("# {}", crate::device::describe_device(d)));
    }
    out.push(mkdir_line(&names.base));
    down.push(display_cmd(&["rmdir".into(), s(&names.base)]));
    if spec.consent.wipe {
        for d in &devs {
            out.push(format!(
                "{}  # --wipe: the signatures already on it",
                display_cmd(&["wipefs".into(), "-a".into(), d.clone()])
            ));
        }
    }
    let knobs = knob_writes(spec);
    for d in &devs {
        let sysfs = |attr: &str| s(&sys::sysfs_attr(Path::new(d), attr));
        for (attr, value) in &knobs {
            out.push(display_write(&sysfs(attr), value));
        }
        for (attr, _) in knob_record_order(&knobs) {
            down.push(display_write(&sysfs(attr), "<previous value>"));
        }
    }
    if let Some(on) = spec.drive_write_cache {
        for d in &devs {
            let dev = Path::new(d);
            if d.starts_with('<') {
                out.push(format!(
                    "# hdparm -W / sdparm --set=WCE / nvme set-feature -f 6 on {d}: {}",
                    if on { "on" } else { "off" }
                ));
                continue;
            }
            match crate::device::drive_cache_tool(dev) {
                Ok(tool) => {
                    out.push(display_cmd(&crate::device::drive_cache_get(tool, dev)));
                    out.push(display_cmd(&crate::device::drive_cache_set(tool, dev, on)));
                    down.push(format!(
                        "# {tool}: the drive write cache of {d} back to the value read before"
                    ));
                }
                Err(e) => out.push(format!("# refused: {e}")),
            }
        }
    }
    let mut cgroup_procs = None;
    if let Some(t) = &spec.throttle {
        let cg = blkio_root_or_default().join(&names.name);
        out.push(mkdir_line(&cg));
        down.push(display_cmd(&["rmdir".into(), s(&cg)]));
        for (file, v) in t.limits().unwrap_or_default() {
            for i in 0..devs.len() {
                out.push(display_write(
                    &s(&cg.join(file)),
                    &format!("<maj:min{i}> {v}"),
                ));
            }
        }
        cgroup_procs = Some(cg.join("cgroup.procs"));
    }
    if spec.fs_kind() == Fs::None {
        return names.base;
    }
    for d in &devs {
        down.push(format!(
            "{}  # each signature {} made on {d}, nothing else",
            display_cmd(&crate::device::wipe_argv(Path::new(d), "<offset>")),
            if spec.fs_kind() == Fs::Zfs {
                "zpool create"
            } else {
                "mkfs"
            }
        ));
    }
    let mnt = names.mnt();
    if spec.fs_kind() == Fs::Zfs {
        plan_zfs(spec, &names, &devs, cgroup_procs.as_deref(), out, down);
    } else {
        plan_mkfs_mount(spec, &devs, &mnt, out, down);
    }
    mnt
}

/// The zfs-fuse daemon (in the cgroup whose `cgroup.procs` is `cgroup_procs`, if any), the
/// pool on `vdevs` and the dataset mounted on the mount directory, with their teardown.
fn plan_zfs(
    spec: &TestbedSpec,
    names: &Names,
    vdevs: &[String],
    cgroup_procs: Option<&Path>,
    out: &mut Vec<String>,
    down: &mut Vec<String>,
) {
    let mnt = names.mnt();
    out.push(mkdir_line(&mnt));
    down.push(display_cmd(&["rmdir".into(), s(&mnt)]));
    let etc = zfsrc_mount();
    if etc.is_some() {
        for c in shared_bind(&mnt) {
            out.push(display_cmd(&c));
        }
        down.push(display_cmd(&umount(&mnt, false)));
    }
    out.push(touch_line(&names.daemon_log()));
    down.push(display_cmd(&["rm".into(), s(&names.daemon_log())]));
    out.push(display_cmd(&zfs_daemon(
        spec,
        &names.daemon_marker(),
        etc.as_deref(),
        cgroup_procs,
    )));
    down.push("kill -TERM <zfs-fuse pid>".into());
    out.push(format!(
        "{}  # repeated until the daemon answers",
        display_cmd(&zpool_ready())
    ));
    out.push(display_cmd(&zpool_create(spec, &names.pool(), vdevs)));
    down.push(display_cmd(&[
        "zpool".into(),
        "destroy".into(),
        names.pool(),
    ]));
    out.push(display_cmd(&zfs_create(spec, &names.dataset(), &mnt)));
    down.push(display_cmd(&[
        "zfs".into(),
        "destroy".into(),
        names.dataset(),
    ]));
}

/// mkfs on `devs`, the mount directory and the mount, with their teardown.
fn plan_mkfs_mount(
    spec: &TestbedSpec,
    devs: &[String],
    mnt: &Path,
    out: &mut Vec<String>,
    down: &mut Vec<String>,
) {
    if let Some(m) = mkfs(spec, devs) {
        out.push(display_cmd(&m));
    }
    out.push(mkdir_line(mnt));
    down.push(display_cmd(&["rmdir".into(), s(mnt)]));
    out.push(display_cmd(&mount(spec, devs, mnt)));
    down.push(display_cmd(&umount(mnt, false)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Throttle, WriteCache};

    #[test]
    fn btrfs_raid5_plan() {
        let mut spec = TestbedSpec::loop_devices(3, "256MiB", Fs::Btrfs);
        spec.raid = Some(Raid::Raid5);
        spec.write_cache = Some(WriteCache::WriteThrough);
        spec.throttle = Some(Throttle {
            read_iops: Some(150),
            ..Throttle::default()
        });
        spec.setup = Some("echo hi > f".into());
        let p = plan(&spec);
        let text = p.join("\n");
        assert!(text.contains("mkdir /var/tmp/<name>\n"), "{text}");
        assert!(text.contains("truncate -s 268435456 /var/tmp/<name>/images/disk2.img"));
        assert!(text.contains("losetup -f --show --direct-io=on /var/tmp/<name>/images/disk0.img"));
        assert!(text.contains("echo 'write through' > /sys/block/<loop1>/queue/write_cache"));
        assert!(text.contains("blkio.throttle.read_iops_device"));
        assert!(text.contains("echo '<maj:min2> 150' > "));
        assert!(text
            .contains("mkfs.btrfs -f -q -d raid5 -m raid1 /dev/<loop0> /dev/<loop1> /dev/<loop2>"));
        assert!(text.contains(
            "mount -t btrfs -o device=/dev/<loop0>,device=/dev/<loop1>,device=/dev/<loop2> /dev/<loop0> /var/tmp/<name>/mnt"
        ));
        assert!(text.contains("sh -c 'echo hi > f'  # in /var/tmp/<name>/mnt"));
        let down = text.split("# teardown").nth(1).unwrap();
        let umount = down.find("umount /var/tmp/<name>/mnt").unwrap();
        let detach = down.find("losetup -d /dev/<loop0>").unwrap();
        let restore = down.find("queue/write_cache").unwrap();
        let forget = down.find("btrfs device scan --forget").unwrap();
        assert!(
            umount < forget && forget < restore && restore < detach,
            "{down}"
        );
    }

    #[test]
    fn zfs_plan_and_invalid_plan() {
        let mut spec = TestbedSpec::loop_devices(2, "128MiB", Fs::Zfs);
        spec.raid = Some(Raid::Mirror);
        spec.vdevs = Some(Vdevs::Files);
        spec.dataset_properties.insert(
            "recordsize".into(),
            crate::spec::PropValue::Text("16K".into()),
        );
        let text = plan(&spec).join("\n");
        assert!(text.contains("zpool create -o cachefile=none -m none <name> mirror /var/tmp/<name>/images/disk0.img /var/tmp/<name>/images/disk1.img"), "{text}");
        assert!(text.contains(
            "zfs create -o mountpoint=/var/tmp/<name>/mnt -o recordsize=16K <name>/bench"
        ));
        assert!(text.contains(
            "zfs-fuse --no-daemon --no-kstat-mount --pidfile /var/tmp/<name>/zfs-fuse.pid"
        ));
        assert!(!text.contains("losetup"));
        spec.raid = Some(Raid::Raid1);
        let p = plan(&spec);
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("# invalid testbed:") && p[0].contains("`raid`"),
            "{p:?}"
        );
    }

    #[test]
    fn names() {
        let spec = TestbedSpec::loop_devices(1, "1g", Fs::Ext4);
        let n = Names::new(&spec, "iolab-testbed-1-2-abc");
        assert_eq!(
            n.image(0),
            PathBuf::from("/var/tmp/iolab-testbed-1-2-abc/images/disk0.img")
        );
        let mut spec2 = spec.clone();
        spec2.image_dir = Some("/srv/img".into());
        let n = Names::new(&spec2, "iolab-testbed-1-2-abc");
        assert_eq!(
            n.image(1),
            PathBuf::from("/srv/img/iolab-testbed-1-2-abc-disk1.img")
        );
        assert_eq!(n.dataset(), "iolab-testbed-1-2-abc/bench");
        assert_eq!(
            missing_dirs(Path::new("/nonexistent-iolab/a/b")),
            vec![
                PathBuf::from("/nonexistent-iolab"),
                PathBuf::from("/nonexistent-iolab/a"),
                PathBuf::from("/nonexistent-iolab/a/b")
            ]
        );
    }
}
