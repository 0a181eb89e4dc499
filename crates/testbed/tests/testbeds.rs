//! Builds and tears down real testbeds: a directory, loop devices with ext4 (1k blocks,
//! bigalloc), xfs, btrfs raid1 and raid5, zfs-fuse pools, knobs, throttles; a failed build; an
//! interrupted build; and a builder killed with SIGKILL, cleaned up by `cleanup_all`.
//!
//! Everything but the directory testbed needs root: without it the tests skip (a failure
//! under IOLAB_REQUIRE_DEVICE_TESTS=1; zfs-fuse, an optional package, may skip anyway). Tests that create devices hold one global lock, so they never run concurrently
//! with each other; other test binaries may create loop devices at the same time, so every
//! check looks only at this test's own names.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use iolab_testbed::{
    build, cleanup_all, plan, ByteRate, Fs, PropValue, Raid, StateFile, Testbed, TestbedError,
    TestbedSpec, Throttle, Vdevs, WriteCache, ZfsDaemonSpec,
};
use iolab_testkit::{
    device_lock, optional_tools, require_root, require_tools, shell, skip_allowed, zfs_machine_lock,
};

fn no_stop() -> AtomicBool {
    AtomicBool::new(false)
}

/// Everything on the machine that still carries `prefix` (a testbed name, or the
/// `iolab-testbed-PID-` prefix of one process's testbeds).
fn traces(prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir("/var/tmp").unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix) {
            out.push(format!("directory {}", e.path().display()));
        }
    }
    for line in fs::read_to_string("/proc/self/mountinfo").unwrap().lines() {
        if line.contains(prefix) {
            out.push(format!("mount {line}"));
        }
    }
    for e in fs::read_dir("/sys/block").unwrap().flatten() {
        let b = e.path().join("loop/backing_file");
        if let Ok(text) = fs::read_to_string(&b) {
            if text.contains(prefix) {
                out.push(format!("loop {}: {}", e.path().display(), text.trim()));
            }
        }
    }
    if let Ok(dir) = fs::read_dir("/sys/fs/cgroup/blkio") {
        for e in dir.flatten() {
            if e.file_name().to_string_lossy().starts_with(prefix) {
                out.push(format!("cgroup {}", e.path().display()));
            }
        }
    }
    let me = std::process::id().to_string();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == me || !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(prefix) {
                out.push(format!("process {name}: {cmd}"));
            }
        }
    }
    out
}

fn assert_no_traces(prefix: &str) {
    let t = traces(prefix);
    assert!(t.is_empty(), "left behind: {t:#?}");
}

fn state_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// The plan's command lines (made before the build) with the placeholders filled in equal
/// what the build ran.
fn assert_plan_matches(planned: Vec<String>, tb: &Testbed) {
    let mut lines: Vec<String> = Vec::new();
    for l in planned {
        if l.starts_with("# teardown") {
            break;
        }
        if l.starts_with('#') {
            continue;
        }
        let mut l = l;
        if let Some(name) = tb.name() {
            l = l.replace("<name>", name);
        }
        for (i, d) in tb.devices().iter().enumerate() {
            let dev = d.path.file_name().unwrap().to_string_lossy().into_owned();
            l = l.replace(&format!("<loop{i}>"), &dev);
            l = l.replace(&format!("<maj:min{i}>"), &d.maj_min());
        }
        lines.push(l);
    }
    assert_eq!(lines, tb.commands(), "plan and build differ");
}

/// Builds `spec` with a fresh state directory, runs `check`, tears down, and checks that
/// nothing is left.
fn build_check_teardown(spec: &TestbedSpec, check: impl FnOnce(&Testbed)) {
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let planned = plan(spec);
    let tb = match build(spec, &state, &no_stop()) {
        Ok(tb) => tb,
        Err(e) => panic!("build failed: {e}"),
    };
    let name = tb.name().map(str::to_string);
    assert_plan_matches(planned, &tb);
    assert!(tb.state_path().exists());
    check(&tb);
    tb.teardown().unwrap();
    drop(state);
    assert!(state_files(state_dir.path()).is_empty());
    if let Some(name) = name {
        assert_no_traces(&name);
    }
}

fn write_file(dir: &Path, name: &str, bytes: usize) {
    let p = dir.join(name);
    fs::write(&p, vec![0x5a; bytes]).unwrap();
    assert_eq!(fs::read(&p).unwrap().len(), bytes);
    fs::remove_file(p).unwrap();
}

#[test]
fn dir_testbed_creates_missing_dirs_and_runs_hooks() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("new/work");
    let marker = tmp.path().join("teardown-ran");
    let mut spec = TestbedSpec::dir(&path);
    spec.setup = Some("echo \"$IOLAB_TESTBED_WORK_DIR\" > setup.txt".into());
    spec.teardown = Some(format!("rm setup.txt && touch {}", marker.display()));
    build_check_teardown(&spec, |tb| {
        assert_eq!(tb.work_dir(), Some(path.as_path()));
        assert_eq!(tb.mount_point(), None);
        assert!(tb.devices().is_empty() && tb.cgroup().is_none());
        let text = fs::read_to_string(path.join("setup.txt")).unwrap();
        assert_eq!(text.trim(), path.to_str().unwrap());
        assert_eq!(tb.describe().kind, "dir");
    });
    assert!(marker.exists(), "teardown hook did not run");
    assert!(
        !tmp.path().join("new").exists(),
        "created directories not removed"
    );

    // An existing directory is used as it is and kept.
    let spec = TestbedSpec::dir(tmp.path());
    build_check_teardown(&spec, |tb| assert_eq!(tb.commands().len(), 0));
    assert!(tmp.path().exists());
}

#[test]
fn ext4_with_1k_blocks() {
    if !require_root("ext4_with_1k_blocks") {
        return;
    }
    let _g = device_lock();
    let mut spec = TestbedSpec::loop_devices(1, "64MiB", Fs::Ext4);
    spec.mkfs_options = vec!["-b".into(), "1024".into()];
    spec.mount_options = Some("noatime".into());
    build_check_teardown(&spec, |tb| {
        let mnt = tb.mount_point().unwrap();
        assert_eq!(tb.work_dir(), Some(mnt));
        assert_eq!(
            shell(&format!("stat -f -c %S {}", mnt.display())).trim(),
            "1024"
        );
        let d = tb.describe();
        let m = d.mount.as_ref().unwrap();
        assert_eq!(m.fstype, "ext4");
        assert!(m.options.contains("noatime"), "{m:?}");
        assert_eq!(d.devices.len(), 1);
        assert_eq!(d.devices[0].direct_io, Some(true));
        assert_eq!(m.source, d.devices[0].path.to_str().unwrap());
        write_file(mnt, "f", 1 << 20);
    });
}

#[test]
fn ext4_bigalloc() {
    if !require_root("ext4_bigalloc") {
        return;
    }
    let _g = device_lock();
    let mut spec = TestbedSpec::loop_devices(1, "128MiB", Fs::Ext4);
    spec.mkfs_options = ["-O", "bigalloc", "-C", "65536"].map(String::from).to_vec();
    spec.direct_io = Some(false);
    build_check_teardown(&spec, |tb| {
        let dev = &tb.devices()[0].path;
        let info = shell(&format!("dumpe2fs -h {} 2>/dev/null", dev.display()));
        assert!(info.contains("bigalloc"), "{info}");
        let cluster = info
            .lines()
            .find(|l| l.starts_with("Cluster size:"))
            .unwrap_or_default();
        assert!(cluster.ends_with("65536"), "{cluster}");
        assert_eq!(tb.describe().devices[0].direct_io, Some(false));
        write_file(tb.work_dir().unwrap(), "small", 100);
    });
}

#[test]
fn xfs_with_4k_blocks() {
    if !require_root("xfs_with_4k_blocks") || !require_tools(&["mkfs.xfs"]) {
        return;
    }
    let _g = device_lock();
    let mut spec = TestbedSpec::loop_devices(1, "320MiB", Fs::Xfs);
    spec.mkfs_options = vec!["-b".into(), "size=4096".into()];
    spec.sector_size = Some(4096);
    build_check_teardown(&spec, |tb| {
        let mnt = tb.mount_point().unwrap();
        assert_eq!(tb.describe().mount.unwrap().fstype, "xfs");
        assert_eq!(
            shell(&format!("stat -f -c %S {}", mnt.display())).trim(),
            "4096"
        );
        assert_eq!(tb.describe().devices[0].logical_block_size, Some(4096));
        write_file(mnt, "f", 1 << 20);
    });
}

fn btrfs_profiles(devices: u32, raid: Raid, data: &str, metadata: &str) {
    let mut spec = TestbedSpec::loop_devices(devices, "256MiB", Fs::Btrfs);
    spec.raid = Some(raid);
    build_check_teardown(&spec, |tb| {
        let mnt = tb.mount_point().unwrap();
        assert_eq!(tb.devices().len(), devices as usize);
        write_file(mnt, "f", 4 << 20);
        shell(&format!("sync -f {}", mnt.display()));
        let df = shell(&format!("btrfs filesystem df {}", mnt.display()));
        assert!(df.contains(&format!("Data, {data}")), "{df}");
        assert!(df.contains(&format!("Metadata, {metadata}")), "{df}");
        let show = shell(&format!("btrfs filesystem show {}", mnt.display()));
        for d in tb.devices() {
            assert!(show.contains(d.path.to_str().unwrap()), "{show}");
        }
    });
}

#[test]
fn btrfs_raid1_over_two_devices() {
    if !require_root("btrfs_raid1_over_two_devices") || !require_tools(&["mkfs.btrfs"]) {
        return;
    }
    let _g = device_lock();
    btrfs_profiles(2, Raid::Raid1, "RAID1", "RAID1");
}

#[test]
fn btrfs_raid5_over_three_devices() {
    if !require_root("btrfs_raid5_over_three_devices") || !require_tools(&["mkfs.btrfs"]) {
        return;
    }
    let _g = device_lock();
    btrfs_profiles(3, Raid::Raid5, "RAID5", "RAID1");
}

/// Live zfs-fuse processes (a killed daemon's zombie waits for init to reap it).
fn zfs_daemons() -> usize {
    shell("ps -eo stat=,comm= | awk '$1 !~ /^Z/ && $2 == \"zfs-fuse\"' | wc -l")
        .trim()
        .parse()
        .unwrap()
}

/// Takes the machine's zfs-fuse lock (another suite beside this one may build a zfs
/// testbed) and waits (a little) for a zfs-fuse daemon of someone else to go; the lock, or
/// `None` (after an allowed skip) if a daemon stays or zfs-fuse, an optional package, is
/// not installed.
fn zfs_usable(test: &str) -> Option<std::fs::File> {
    if !optional_tools(&["zfs-fuse", "zpool", "zfs"]) {
        return None;
    }
    let lock = zfs_machine_lock();
    let start = Instant::now();
    loop {
        if zfs_daemons() == 0 {
            return Some(lock);
        }
        if start.elapsed() > Duration::from_secs(15) {
            // zfs-fuse allows one daemon per machine; another test binary's may hold it.
            skip_allowed(format!("{test}: another zfs-fuse daemon is running"));
            return None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Builds a zfs testbed; `None` (after printing why) when the daemon cannot run here.
fn build_zfs(test: &str, spec: &TestbedSpec, state: &StateFile) -> Option<Testbed> {
    match build(spec, state, &no_stop()) {
        Ok(tb) => Some(tb),
        Err(e @ (TestbedError::ZfsDaemon { .. } | TestbedError::ZfsDaemonBusy { .. })) => {
            skip_allowed(format!("{test}: zfs-fuse (optional) cannot run here: {e}"));
            None
        }
        Err(e) => panic!("{test}: build failed: {e}"),
    }
}

#[test]
fn zfs_mirror_over_files_with_16k_records() {
    let test = "zfs_mirror_over_files_with_16k_records";
    if !require_root(test) {
        return;
    }
    let _g = device_lock();
    let Some(_zfs) = zfs_usable(test) else {
        return;
    };
    let mut spec = TestbedSpec::loop_devices(2, "128MiB", Fs::Zfs);
    spec.raid = Some(Raid::Mirror);
    spec.vdevs = Some(Vdevs::Files);
    spec.dataset_properties
        .insert("recordsize".into(), PropValue::Text("16K".into()));
    spec.dataset_properties
        .insert("compression".into(), PropValue::Bool(false));
    spec.zfs_daemon = Some(ZfsDaemonSpec {
        max_arc_size_mb: Some(64),
        ..ZfsDaemonSpec::default()
    });
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let planned = plan(&spec);
    let Some(tb) = build_zfs(test, &spec, &state) else {
        return;
    };
    let name = tb.name().unwrap().to_string();
    assert_plan_matches(planned, &tb);
    let mnt = tb.mount_point().unwrap().to_path_buf();
    let d = tb.describe();
    assert_eq!(d.mount.as_ref().unwrap().fstype, "fuse.zfs");
    let z = d.zfs.as_ref().unwrap();
    assert_eq!(
        z.dataset_properties.get("recordsize").map(String::as_str),
        Some("16K"),
        "{z:?}"
    );
    assert_eq!(
        z.dataset_properties.get("compression").map(String::as_str),
        Some("off")
    );
    assert!(z.daemon_command.contains("--max-arc-size 64"));
    assert!(tb.devices().is_empty());
    let status = shell(&format!("zpool status {}", z.pool));
    assert!(status.contains("mirror"), "{status}");
    for img in tb.images() {
        assert!(status.contains(img.to_str().unwrap()), "{status}");
    }
    write_file(&mnt, "f", 2 << 20);
    // The daemon does not see the system's zfsrc; this namespace still does.
    if Path::new("/etc/zfs/zfsrc").exists() {
        let pid = tb.zfs().unwrap().daemon_pid;
        assert_eq!(
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .unwrap()
                .trim(),
            "zfs-fuse"
        );
        let daemon_mounts = fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        assert!(
            daemon_mounts.contains(" /etc/zfs/zfsrc "),
            "{daemon_mounts}"
        );
        let ours = fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(!ours.contains(" /etc/zfs/zfsrc "));
    }
    let pid = tb.zfs().unwrap().daemon_pid;
    tb.teardown().unwrap();
    assert_no_traces(&name);
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.contains(") Z "),
        "daemon {pid} still running"
    );
    assert!(state_files(state_dir.path()).is_empty());
}

#[test]
fn zfs_raidz_over_throttled_loop_devices() {
    let test = "zfs_raidz_over_throttled_loop_devices";
    if !require_root(test) {
        return;
    }
    let _g = device_lock();
    let Some(_zfs) = zfs_usable(test) else {
        return;
    };
    let mut spec = TestbedSpec::loop_devices(3, "96MiB", Fs::Zfs);
    spec.raid = Some(Raid::Raidz);
    spec.pool_properties
        .insert("ashift".into(), PropValue::Int(12));
    spec.throttle = Some(Throttle {
        write_bps: Some(ByteRate::Text("200MiB".into())),
        ..Throttle::default()
    });
    spec.zfs_daemon = Some(ZfsDaemonSpec {
        prefetch: Some(false),
        ..ZfsDaemonSpec::default()
    });
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let planned = plan(&spec);
    let Some(tb) = build_zfs(test, &spec, &state) else {
        return;
    };
    let name = tb.name().unwrap().to_string();
    assert_plan_matches(planned, &tb);
    assert_eq!(tb.devices().len(), 3);
    let cg = tb.cgroup().unwrap();
    // The daemon issues the device I/O, so it is the process in the throttle cgroup.
    let procs = fs::read_to_string(cg.join("cgroup.procs")).unwrap();
    let pid = procs
        .split_whitespace()
        .next()
        .expect("daemon in the cgroup");
    assert_eq!(
        fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap()
            .trim(),
        "zfs-fuse"
    );
    let d = tb.describe();
    let z = d.zfs.as_ref().unwrap();
    assert_eq!(
        z.pool_properties.get("ashift").map(String::as_str),
        Some("12"),
        "{z:?}"
    );
    assert!(z.daemon_command.contains("--zfs-prefetch-disable"));
    let status = shell(&format!("zpool status {}", z.pool));
    assert!(
        status.contains("raidz1") || status.contains("raidz"),
        "{status}"
    );
    write_file(tb.work_dir().unwrap(), "f", 1 << 20);
    tb.teardown().unwrap();
    assert_no_traces(&name);
    assert!(!cg.exists());
}

#[test]
fn knobs_are_applied_and_restored() {
    if !require_root("knobs_are_applied_and_restored") {
        return;
    }
    let _g = device_lock();
    let available = fs::read_to_string("/sys/block/loop0/queue/scheduler").unwrap_or_default();
    let sched = ["kyber", "mq-deadline", "bfq"]
        .into_iter()
        .find(|s| available.contains(s))
        .unwrap_or("none");
    let mut spec = TestbedSpec::loop_devices(2, "16MiB", Fs::None);
    spec.read_ahead_kb = Some(1028);
    spec.write_cache = Some(WriteCache::WriteThrough);
    spec.scheduler = Some(sched.into());
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let planned = plan(&spec);
    let tb = build(&spec, &state, &no_stop()).unwrap();
    assert_plan_matches(planned, &tb);
    assert_eq!(tb.work_dir(), None);
    let d = tb.describe();
    for dev in &d.devices {
        assert_eq!(dev.read_ahead_kb, Some(1028));
        assert_eq!(dev.write_cache.as_deref(), Some("write through"));
        assert_eq!(dev.scheduler.as_deref(), Some(sched));
    }
    assert_eq!(tb.knob_changes().len(), 6);
    let changes = tb.knob_changes().to_vec();
    let devices: Vec<PathBuf> = tb.devices().iter().map(|d| d.path.clone()).collect();
    tb.teardown().unwrap();
    for c in changes {
        let name = c.device.file_name().unwrap().to_string_lossy().into_owned();
        // Another test binary may have attached the device again meanwhile: then it is not
        // ours to look at.
        if fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).is_ok() {
            println!("note: {} reused before the check", c.device.display());
            continue;
        }
        let now = fs::read_to_string(format!("/sys/block/{name}/{}", c.attr)).unwrap();
        let now = now.trim();
        let now = match (now.find('['), now.find(']')) {
            (Some(a), Some(b)) => &now[a + 1..b],
            _ => now,
        };
        assert_eq!(
            now,
            c.previous,
            "{} {} not restored",
            c.device.display(),
            c.attr
        );
    }
    assert!(devices.iter().all(|d| {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        !fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
            .unwrap_or_default()
            .contains("iolab-testbed")
    }));
}

#[test]
fn throttle_cgroup_has_a_line_per_device_and_throttles() {
    if !require_root("throttle_cgroup_has_a_line_per_device_and_throttles") {
        return;
    }
    let _g = device_lock();
    let mut spec = TestbedSpec::loop_devices(2, "32MiB", Fs::None);
    spec.throttle = Some(Throttle {
        read_bps: Some(ByteRate::Text("10MiB".into())),
        write_iops: Some(150),
        ..Throttle::default()
    });
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let planned = plan(&spec);
    let tb = build(&spec, &state, &no_stop()).unwrap();
    assert_plan_matches(planned, &tb);
    let cg = tb.cgroup().unwrap();
    assert!(cg.starts_with("/sys/fs/cgroup/blkio") || cg.exists());
    let read_bps = fs::read_to_string(cg.join("blkio.throttle.read_bps_device")).unwrap();
    let write_iops = fs::read_to_string(cg.join("blkio.throttle.write_iops_device")).unwrap();
    for d in tb.devices() {
        assert!(
            read_bps.contains(&format!("{} 10485760", d.maj_min())),
            "{read_bps}"
        );
        assert!(
            write_iops.contains(&format!("{} 150", d.maj_min())),
            "{write_iops}"
        );
    }
    assert_eq!(tb.describe().throttle.len(), 4);
    // 4 MiB at 10 MiB/s inside the cgroup takes about 0.4 s (unthrottled: milliseconds).
    let dev = tb.devices()[0].path.display().to_string();
    let start = Instant::now();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec dd if={dev} of=/dev/null bs=1M count=4 iflag=direct",
            cg.display()
        ))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let took = start.elapsed();
    assert!(took > Duration::from_millis(250), "not throttled: {took:?}");
    let name = tb.name().unwrap().to_string();
    tb.teardown().unwrap();
    assert!(!cg.exists());
    assert_no_traces(&name);
}

#[test]
fn failed_mkfs_removes_the_partial_build() {
    if !require_root("failed_mkfs_removes_the_partial_build") {
        return;
    }
    let _g = device_lock();
    let mut spec = TestbedSpec::loop_devices(1, "32MiB", Fs::Ext4);
    spec.mkfs_options = vec!["--no-such-option".into()];
    spec.write_cache = Some(WriteCache::WriteThrough);
    spec.throttle = Some(Throttle {
        read_iops: Some(1000),
        ..Throttle::default()
    });
    spec.teardown = Some("true".into());
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let prefix = format!("iolab-testbed-{}-", std::process::id());
    let before = traces(&prefix);
    let err = build(&spec, &state, &no_stop()).unwrap_err();
    match &err {
        TestbedError::Command { command, .. } => assert!(command.starts_with("mkfs.ext4"), "{err}"),
        other => panic!("expected the mkfs failure itself, got {other}"),
    }
    drop(state);
    assert!(state_files(state_dir.path()).is_empty());
    assert_eq!(traces(&prefix), before);

    // A setup hook that fails is a failed build too, and the teardown hook still runs.
    let tmp = tempfile::tempdir().unwrap();
    let mut spec = TestbedSpec::loop_devices(1, "16MiB", Fs::None);
    spec.setup = Some("exit 3".into());
    spec.teardown = Some(format!("touch {}/ran", tmp.path().display()));
    let state = StateFile::create(state_dir.path()).unwrap();
    let err = build(&spec, &state, &no_stop()).unwrap_err();
    assert!(err.to_string().contains("exit status: 3"), "{err}");
    assert!(tmp.path().join("ran").exists());
    drop(state);
    assert!(state_files(state_dir.path()).is_empty());
    assert_eq!(traces(&prefix), before);
}

#[test]
fn raised_stop_flag_interrupts_and_cleans() {
    if !require_root("raised_stop_flag_interrupts_and_cleans") || !require_tools(&["mkfs.btrfs"]) {
        return;
    }
    let _g = device_lock();
    let spec = TestbedSpec::loop_devices(2, "16MiB", Fs::Btrfs);
    let state_dir = tempfile::tempdir().unwrap();
    let state = StateFile::create(state_dir.path()).unwrap();
    let prefix = format!("iolab-testbed-{}-", std::process::id());
    let before = traces(&prefix);
    let err = build(&spec, &state, &AtomicBool::new(true)).unwrap_err();
    assert!(matches!(err, TestbedError::Interrupted), "{err}");
    drop(state);
    assert!(state_files(state_dir.path()).is_empty());
    assert_eq!(traces(&prefix), before);
}

const KILL9_ENV: &str = "IOLAB_TESTBED_KILL9_STATE_DIR";
const KILL9_KIND_ENV: &str = "IOLAB_TESTBED_KILL9_KIND";

/// The testbed the SIGKILL test's child builds: btrfs raid1 with knobs and a throttle, or
/// (kind "zfs") a raidz pool on throttled loop devices, so the daemon sits in the cgroup.
fn kill9_spec(kind: &str) -> TestbedSpec {
    let mut spec = if kind == "zfs" {
        let mut s = TestbedSpec::loop_devices(3, "96MiB", Fs::Zfs);
        s.raid = Some(Raid::Raidz);
        s
    } else {
        let mut s = TestbedSpec::loop_devices(2, "160MiB", Fs::Btrfs);
        s.raid = Some(Raid::Raid1);
        s
    };
    spec.write_cache = Some(WriteCache::WriteThrough);
    spec.read_ahead_kb = Some(64);
    spec.throttle = Some(Throttle {
        read_iops: Some(5000),
        ..Throttle::default()
    });
    spec
}

/// Child side of `sigkill_during_or_after_build_then_cleanup_all`: does nothing unless the
/// test starts this binary with the environment variable set.
#[test]
fn kill9_child() {
    let Some(dir) = std::env::var_os(KILL9_ENV) else {
        return;
    };
    let kind = std::env::var(KILL9_KIND_ENV).unwrap_or_default();
    let state = StateFile::create(Path::new(&dir)).unwrap();
    match build(&kill9_spec(&kind), &state, &no_stop()) {
        Ok(tb) => {
            println!("IOLAB-BUILT {}", tb.name().unwrap_or_default());
            std::thread::sleep(Duration::from_secs(120));
            drop(tb);
        }
        Err(e) => println!("IOLAB-FAILED {e}"),
    }
}

/// Starts the child; with `wait_built`, returns once it printed that the build finished.
fn spawn_kill9_child(kind: &str, state_dir: &Path, wait_built: bool) -> std::process::Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "kill9_child", "--nocapture", "--test-threads=1"])
        .env(KILL9_ENV, state_dir)
        .env(KILL9_KIND_ENV, kind)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    if wait_built {
        let out = child.stdout.take().unwrap();
        let mut built = false;
        for line in BufReader::new(out).lines() {
            let line = line.unwrap();
            // libtest prints "test kill9_child ... " before the child's own output.
            if line.contains("IOLAB-BUILT") {
                built = true;
                break;
            }
            assert!(!line.contains("IOLAB-FAILED"), "{line}");
        }
        assert!(built, "child did not build");
    }
    child
}

/// A state directory for one killed builder. If the test fails before its check passed,
/// what the builder left would lose its state files with the directory: then it runs
/// `cleanup_all` once more and, if anything is still recorded, keeps the directory and says
/// where, so `iolab cleanup --state-dir` can finish the job.
struct KillDir(Option<tempfile::TempDir>);

impl KillDir {
    fn new() -> KillDir {
        KillDir(Some(tempfile::tempdir().unwrap()))
    }

    fn path(&self) -> &Path {
        self.0.as_ref().unwrap().path()
    }
}

impl Drop for KillDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let dir = self.0.take().unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let report = cleanup_all(dir.path());
        eprintln!("after the failure, cleanup_all: {report}");
        if !state_files(dir.path()).is_empty() {
            let kept = dir.keep();
            eprintln!(
                "state files kept in {}: run `iolab cleanup --state-dir {}`",
                kept.display(),
                kept.display()
            );
        }
    }
}

/// Kills the child with SIGKILL, runs cleanup_all and checks nothing of it is left.
fn kill_and_clean(mut child: std::process::Child, state_dir: &Path, what: &str) {
    let prefix = format!("iolab-testbed-{}-", child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    let report = cleanup_all(state_dir);
    assert!(report.is_clean(), "{what}: {report}");
    assert!(report.live.is_empty(), "{what}: {report}");
    assert!(
        state_files(state_dir).is_empty(),
        "{what}: state file kept: {report}"
    );
    let t = traces(&prefix);
    assert!(t.is_empty(), "{what}: left behind {t:#?}\n{report}");
    println!(
        "{what}: cleanup removed {} resource(s){}",
        report.removed.len(),
        if report.notes.is_empty() {
            String::new()
        } else {
            format!(" ({})", report.notes.join("; "))
        }
    );
    // Again: nothing left to do.
    assert!(cleanup_all(state_dir).examined.is_empty());
}

#[test]
fn sigkill_during_or_after_build_then_cleanup_all() {
    if !require_root("sigkill_during_or_after_build_then_cleanup_all")
        || !require_tools(&["mkfs.btrfs"])
    {
        return;
    }
    let _g = device_lock();
    // Killed once the build finished (which also times it), then at random points during it.
    let state_dir = KillDir::new();
    let started = Instant::now();
    let child = spawn_kill9_child("btrfs", state_dir.path(), true);
    let build_time = started.elapsed();
    kill_and_clean(child, state_dir.path(), "btrfs, killed after the build");
    for _ in 0..6 {
        let state_dir = KillDir::new();
        let delay = Duration::from_millis(fastrand::u64(0..build_time.as_millis().max(50) as u64));
        let child = spawn_kill9_child("btrfs", state_dir.path(), false);
        std::thread::sleep(delay);
        kill_and_clean(
            child,
            state_dir.path(),
            &format!("btrfs, killed {delay:?} after start (build takes {build_time:?})"),
        );
    }
    // The zfs-fuse daemon outlives its killed owner; cleanup_all stops it by its recorded pid.
    if let Some(_zfs) = zfs_usable("sigkill_during_or_after_build_then_cleanup_all (zfs round)") {
        let state_dir = KillDir::new();
        let child = spawn_kill9_child("zfs", state_dir.path(), true);
        let prefix = format!("iolab-testbed-{}-", child.id());
        let daemon: Vec<String> = traces(&prefix)
            .into_iter()
            .filter(|t| t.starts_with("process ") && t.contains("zfs-fuse --no-daemon"))
            .collect();
        assert_eq!(daemon.len(), 1, "{daemon:?}");
        // kill_and_clean checks that no process naming the testbed is left.
        kill_and_clean(child, state_dir.path(), "zfs, killed after the build");
    }
}

/// A run's file removed (or renamed away) on a filesystem that then turns read-only stays
/// recorded: ext4 with errors=remount-ro stops writing when it aborts, so the removal may
/// never reach the disk and the name come back after the repair (a verify sidecar's
/// temporary file did, once, after the e2fsck in the leftovers test). A filesystem that was
/// read-only before the run recorded anything is not one that turned: nothing made there
/// stays recorded.
#[test]
fn what_is_gone_on_a_filesystem_that_turned_read_only_stays_recorded() {
    use iolab_testbed::runstate::{RunResource, RunState};
    if !require_root("what_is_gone_on_a_filesystem_that_turned_read_only_stays_recorded") {
        return;
    }
    let state_dir = tempfile::tempdir().unwrap();
    let m = iolab_testkit::Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=4m"]);
    let file = m.path().join("iolab-side.json.new");
    let st = RunState::create(state_dir.path()).unwrap();
    st.intent(RunResource::File { path: file.clone() }).unwrap();
    // Made, then renamed away as the run saw it; then the filesystem turns read-only.
    fs::write(&file, "x").unwrap();
    fs::rename(&file, m.path().join("other")).unwrap();
    m.remount("ro");
    let f = st.finish();
    assert_eq!(f.unsure, vec![file.display().to_string()], "{f:?}");
    assert!(f.left.is_empty(), "{f:?}");
    assert!(st.path().exists(), "the run state was deleted");
    // Back after the repair: the recorded name is removed (made after the intent).
    m.remount("rw");
    fs::write(&file, "x").unwrap();
    let (removed, failed) = st.remove_all();
    assert_eq!(removed, vec![file.display().to_string()]);
    assert!(failed.is_empty(), "{failed:?}");
    assert!(!file.exists());
    let path = st.path();
    drop(st);
    assert!(
        !path.exists(),
        "the run state stayed once everything was removed"
    );

    // Read-only from the start: the run made nothing there, nothing stays recorded.
    m.remount("ro");
    let st = RunState::create(state_dir.path()).unwrap();
    st.intent(RunResource::File { path: file.clone() }).unwrap();
    let f = st.finish();
    assert!(f.unsure.is_empty() && f.left.is_empty(), "{f:?}");
    assert!(
        !st.path().exists(),
        "a run state stayed for a read-only filesystem"
    );
}
