//! Removing one recorded [`Resource`]: shared by teardown, partial-build cleanup, `Drop` and
//! `cleanup_all`. Every removal is idempotent (already gone is success) and checks that what
//! it touches is still iolab's.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use rustix::process::Signal;

use crate::commands;
use crate::state::Resource;
use crate::sys;

/// Where zfs-fuse listens; a daemon killed with SIGKILL leaves it behind.
const ZFS_SOCKET: &str = "/var/run/zfs/zfs_socket";

/// The result of removing one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Removal {
    /// Gone (or never there); `note` says anything worth reporting about how.
    Gone { note: Option<String> },
    /// Gone, but with a problem worth reporting (a failing teardown hook, a knob that could
    /// no longer be restored).
    GoneWithProblem(String),
    /// Still there.
    Failed(String),
}

fn gone() -> Removal {
    Removal::Gone { note: None }
}

fn gone_note(note: impl Into<String>) -> Removal {
    Removal::Gone {
        note: Some(note.into()),
    }
}

/// Removes `res`. `daemon` is the zfs-fuse child when this process started it (so it can be
/// reaped).
pub(crate) fn remove(res: &Resource, daemon: &mut Option<Child>) -> Removal {
    match res {
        Resource::Dir { path } => remove_dir(path),
        Resource::File { path } => match fs::remove_file(path) {
            Ok(()) => gone(),
            Err(e) if e.kind() == ErrorKind::NotFound => gone(),
            Err(e) => Removal::Failed(format!("file {} not removed: {e}", path.display())),
        },
        Resource::LoopDevice { image, device } => detach_loops(image, device.as_deref()),
        Resource::Knob {
            device,
            image,
            attr,
            previous,
        } => restore_knob(device, image, attr, previous),
        Resource::DeviceKnob {
            device,
            rdev,
            attr,
            previous,
        } => {
            if crate::device::is_device(device, rdev) {
                write_back(device, attr, previous)
            } else {
                Removal::GoneWithProblem(format!(
                    "{} {attr} not restored to '{previous}': it is no longer the device {rdev}",
                    device.display()
                ))
            }
        }
        Resource::DeviceSignatures {
            device,
            rdev,
            signatures,
        } => crate::device::wipe_made(device, rdev, signatures),
        Resource::DriveCache {
            device,
            rdev,
            tool,
            previous,
        } => crate::device::restore_drive_cache(device, rdev, tool, *previous),
        Resource::Cgroup { path } => remove_cgroup(path),
        Resource::Mount { target, .. } => unmount(target),
        Resource::BtrfsDevices { devices, images } => forget_btrfs(devices, images),
        Resource::ZfsDaemon {
            marker,
            pid,
            start_time,
        } => stop_daemon(marker, *pid, *start_time, daemon),
        Resource::EmuDaemon {
            dir,
            pid,
            start_time,
        } => crate::emulated::stop(dir, *pid, *start_time),
        Resource::ZfsPool { name } => destroy_pool(name),
        Resource::ZfsDataset { name, mountpoint } => destroy_dataset(name, mountpoint),
        Resource::Hook { command, cwd, env } => run_hook(command, cwd, env),
    }
}

fn remove_dir(path: &Path) -> Removal {
    match fs::remove_dir(path) {
        Ok(()) => gone(),
        Err(e) if e.kind() == ErrorKind::NotFound => gone(),
        Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => Removal::Failed(format!(
            "directory {} not removed: not empty (iolab removes only what it created; \
             the rest is left in place)",
            path.display()
        )),
        Err(e) => Removal::Failed(format!("directory {} not removed: {e}", path.display())),
    }
}

fn detach_loops(image: &Path, device: Option<&Path>) -> Removal {
    let mut devs: Vec<PathBuf> = sys::loops_backed_by(image);
    if let Some(d) = device {
        if sys::loop_backed_by(d, image) && !devs.iter().any(|x| x == d) {
            devs.push(d.to_path_buf());
        }
    }
    if devs.is_empty() {
        return gone();
    }
    let mut problems = Vec::new();
    for dev in &devs {
        let argv = vec!["losetup".to_string(), "-d".into(), sys::text(dev)];
        if let Err(e) = sys::run(&argv) {
            if !sys::loop_backed_by(dev, image) {
                continue;
            }
            problems.push(e.to_string());
            continue;
        }
        if !sys::wait_until(Duration::from_secs(2), Duration::from_millis(50), || {
            !sys::loop_backed_by(dev, image)
        }) {
            problems.push(format!(
                "{} is still attached to {} (in use; the kernel detaches it when its last \
                 user closes it)",
                dev.display(),
                image.display()
            ));
        }
    }
    if problems.is_empty() {
        gone()
    } else {
        Removal::Failed(problems.join("; "))
    }
}

/// The current value of a knob in the form it is written (the selected scheduler).
pub(crate) fn knob_value(device: &Path, attr: &str) -> Option<String> {
    let raw = sys::read_trim(sys::sysfs_attr(device, attr)).ok()?;
    if attr.ends_with("scheduler") {
        sys::bracketed(&raw).or(Some(raw))
    } else {
        Some(raw)
    }
}

fn restore_knob(device: &Path, image: &Path, attr: &str, previous: &str) -> Removal {
    if !sys::loop_backed_by(device, image) {
        return Removal::GoneWithProblem(format!(
            "{} {attr} not restored to '{previous}': the device is no longer attached to {}",
            device.display(),
            image.display()
        ));
    }
    write_back(device, attr, previous)
}

/// Writes `previous` back to `attr` of `device` (unless it already reads so) and checks it.
fn write_back(device: &Path, attr: &str, previous: &str) -> Removal {
    if knob_value(device, attr).as_deref() == Some(previous) {
        return gone();
    }
    let path = sys::sysfs_attr(device, attr);
    match sys::write_attr(&path, previous) {
        Ok(()) if knob_value(device, attr).as_deref() == Some(previous) => gone(),
        Ok(()) => Removal::Failed(format!(
            "{} reads '{}' after writing '{previous}' back",
            path.display(),
            knob_value(device, attr).unwrap_or_default()
        )),
        Err(e) => Removal::Failed(format!(
            "writing '{previous}' back to {}: {e}",
            path.display()
        )),
    }
}

fn remove_cgroup(path: &Path) -> Removal {
    if !path.exists() {
        return gone();
    }
    let mut last = None;
    // A process leaving the cgroup keeps it busy until the kernel has let go of it, and a
    // study's run child told by its parent-death signal first stores what it finished: on
    // a loaded machine that takes seconds, not a moment. Up to 10 s, then it is reported
    // with the processes still in it (iolab does not move or kill them).
    for _ in 0..200 {
        match fs::remove_dir(path) {
            Ok(()) => return gone(),
            Err(e) if e.kind() == ErrorKind::NotFound => return gone(),
            Err(e) => last = Some(e),
        }
        sleep(Duration::from_millis(50));
    }
    let procs = fs::read_to_string(path.join("cgroup.procs"))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Removal::Failed(format!(
        "cgroup {} not removed ({}){}",
        path.display(),
        last.map(|e| e.to_string()).unwrap_or_default(),
        if procs.is_empty() {
            String::new()
        } else {
            format!("; processes still in it: {procs} (iolab does not move them)")
        }
    ))
}

/// Unmounts the topmost mount on `target`: retries while busy, then detaches it lazily.
pub(crate) fn unmount(target: &Path) -> Removal {
    if sys::mount_at(target).is_none() {
        return gone();
    }
    let mut last = String::new();
    for _ in 0..15 {
        match sys::run(&commands::umount(target, false)) {
            Ok(_) => return gone(),
            Err(e) => last = e.to_string(),
        }
        if sys::mount_at(target).is_none() {
            return gone();
        }
        if !last.contains("busy") {
            break;
        }
        sleep(Duration::from_millis(200));
    }
    match sys::run(&commands::umount(target, true)) {
        Ok(_) => gone_note(format!(
            "{} was busy and was unmounted lazily ({last})",
            target.display()
        )),
        Err(e) => Removal::Failed(format!("{} still mounted: {last}; {e}", target.display())),
    }
}

fn forget_btrfs(devices: &[PathBuf], images: &[PathBuf]) -> Removal {
    if sys::find_tool("btrfs").is_none() {
        return gone_note("btrfs-progs missing: device registrations not forgotten");
    }
    // Only devices still attached to iolab's images: a reused loop device is not ours.
    for (d, _) in devices
        .iter()
        .zip(images)
        .filter(|(d, img)| sys::loop_backed_by(d, img))
    {
        // Only unmounted filesystems are forgotten; an error here changes nothing.
        let argv = vec![
            "btrfs".to_string(),
            "device".into(),
            "scan".into(),
            "--forget".into(),
            sys::text(d),
        ];
        let _ = sys::run(&argv);
    }
    gone()
}

/// The pid of iolab's daemon: the recorded one if it is still that process, else any
/// zfs-fuse with `marker` on its command line.
fn find_daemon(marker: &str, pid: Option<i32>, start_time: Option<u64>) -> Option<i32> {
    if let Some(p) = pid {
        if sys::proc_is(p, start_time) && sys::proc_comm(p).as_deref() == Some("zfs-fuse") {
            return Some(p);
        }
    }
    sys::pids_named("zfs-fuse")
        .into_iter()
        .find(|p| sys::proc_cmdline(*p).iter().any(|a| a == marker))
}

fn stop_daemon(
    marker: &str,
    pid: Option<i32>,
    start_time: Option<u64>,
    child: &mut Option<Child>,
) -> Removal {
    let found = find_daemon(marker, pid, start_time);
    let mut note = None;
    if let Some(p) = found {
        let exited = |child: &mut Option<Child>| match child {
            Some(c) if c.id() as i32 == p => matches!(c.try_wait(), Ok(Some(_))),
            _ => !sys::proc_alive(p),
        };
        sys::signal(p, Signal::TERM);
        let mut done = sys::wait_until(Duration::from_secs(10), Duration::from_millis(50), || {
            exited(child)
        });
        if !done {
            sys::signal(p, Signal::KILL);
            done = sys::wait_until(Duration::from_secs(3), Duration::from_millis(50), || {
                exited(child)
            });
            note = Some(format!("zfs-fuse (pid {p}) ignored SIGTERM and was killed"));
        }
        if !done {
            return Removal::Failed(format!("zfs-fuse (pid {p}) does not exit"));
        }
    }
    if let Some(c) = child.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    *child = None;
    // A daemon that did not exit cleanly leaves its socket; with no daemon left it is stale.
    let clean_exit = found.is_some() && note.is_none();
    if !clean_exit
        && Path::new(ZFS_SOCKET).exists()
        && sys::pids_named("zfs-fuse").is_empty()
        && fs::remove_file(ZFS_SOCKET).is_ok()
    {
        note = Some(format!(
            "{}removed the stale {ZFS_SOCKET}",
            note.map(|n| format!("{n}; ")).unwrap_or_default()
        ));
    }
    Removal::Gone { note }
}

fn zfs_daemon_running() -> bool {
    !sys::pids_named("zfs-fuse").is_empty()
}

fn destroy_pool(name: &str) -> Removal {
    // cachefile=none: without a daemon the pool is not imported anywhere.
    if !zfs_daemon_running() || !sys::run_ok(&["zpool", "list", "-H", "-o", "name", name]) {
        return gone();
    }
    let mut last = String::new();
    for attempt in 0..12 {
        let mut argv = vec!["zpool".to_string(), "destroy".into()];
        if attempt >= 8 {
            argv.push("-f".into());
        }
        argv.push(name.to_string());
        match sys::run(&argv) {
            Ok(_) => return gone(),
            Err(e) => last = e.to_string(),
        }
        if !sys::run_ok(&["zpool", "list", "-H", "-o", "name", name]) {
            return gone();
        }
        sleep(Duration::from_millis(300));
    }
    Removal::Failed(format!("zfs pool {name} not destroyed: {last}"))
}

fn destroy_dataset(name: &str, mountpoint: &Path) -> Removal {
    let mut note = None;
    if zfs_daemon_running() && sys::run_ok(&["zfs", "list", "-H", "-o", "name", name]) {
        let mut last = String::new();
        let mut ok = false;
        for attempt in 0..12 {
            let mut argv = vec!["zfs".to_string(), "destroy".into()];
            if attempt >= 8 {
                argv.push("-f".into());
            }
            argv.push(name.to_string());
            match sys::run(&argv) {
                Ok(_) => {
                    ok = true;
                    break;
                }
                Err(e) => last = e.to_string(),
            }
            if !sys::run_ok(&["zfs", "list", "-H", "-o", "name", name]) {
                ok = true;
                break;
            }
            sleep(Duration::from_millis(300));
        }
        if !ok {
            note = Some(format!("zfs destroy {name} failed: {last}"));
        }
    }
    // A dead daemon leaves its FUSE mount behind ("transport endpoint is not connected").
    if let Some(m) = sys::mount_at(mountpoint) {
        if m.fstype.starts_with("fuse") && m.source == name {
            if let Removal::Failed(e) = unmount(mountpoint) {
                return Removal::Failed(e);
            }
        }
    }
    match note {
        // The pool's destruction (next) takes the dataset with it.
        Some(n) => gone_note(n),
        None => gone(),
    }
}

fn run_hook(command: &str, cwd: &Path, env: &[(String, String)]) -> Removal {
    if command.is_empty() {
        return gone();
    }
    let Some(sh) = sys::find_tool("sh") else {
        return Removal::GoneWithProblem("teardown hook not run: no sh".into());
    };
    let dir = if cwd.is_dir() { cwd } else { Path::new("/") };
    let out = Command::new(sh)
        .arg("-c")
        .arg(command)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => gone(),
        Ok(o) => Removal::GoneWithProblem(format!(
            "teardown hook `{command}` failed ({}): {}",
            o.status,
            sys::tail(&String::from_utf8_lossy(&o.stderr), 6)
        )),
        Err(e) => Removal::GoneWithProblem(format!("teardown hook `{command}` not run: {e}")),
    }
}
