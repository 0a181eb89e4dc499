//! [`cleanup_all`]: removing what testbeds of dead processes left behind, from their state
//! files.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::remove::{remove, Removal};
use crate::state::{is_state_file_name, ForeignState, Resource, Skip};
use crate::{sys, trust};

/// How long to wait for helpers (mkfs, mount, losetup) a killed owner left running.
const HELPER_WAIT: Duration = Duration::from_secs(15);

/// What [`cleanup_all`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// State files looked at.
    pub examined: Vec<PathBuf>,
    /// State files whose owner is still alive (left alone), with the owner's pid.
    pub live: Vec<(PathBuf, Option<i32>)>,
    /// State files fully cleaned and deleted.
    pub cleaned: Vec<PathBuf>,
    /// Files that are not readable state files (left alone).
    pub skipped: Vec<(PathBuf, String)>,
    /// State files (or the whole directory) someone other than the invoking user could
    /// have written: not acted on, and the cleanup does not count as clean.
    pub untrusted: Vec<(PathBuf, String)>,
    /// Resources removed, one line each.
    pub removed: Vec<String>,
    /// Notes on how (lazy unmounts, helpers waited for, stale sockets).
    pub notes: Vec<String>,
    /// What could not be removed; those resources stay in their state file.
    pub failures: Vec<String>,
}

impl Report {
    /// True when nothing failed and every state file could be trusted.
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty() && self.untrusted.is_empty()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} state file(s): {} cleaned, {} of live processes, {} skipped",
            self.examined.len(),
            self.cleaned.len(),
            self.live.len(),
            self.skipped.len()
        )?;
        for r in &self.removed {
            writeln!(f, "  removed {r}")?;
        }
        for n in &self.notes {
            writeln!(f, "  note: {n}")?;
        }
        for x in &self.failures {
            writeln!(f, "  FAILED: {x}")?;
        }
        for (p, why) in &self.untrusted {
            writeln!(
                f,
                "  NOT TRUSTED, left alone: {}: {why} (iolab acts only on state files of the \
                 user running it, in a directory only that user can write)",
                p.display()
            )?;
        }
        Ok(())
    }
}

/// Reads every state file in `state_dir` whose owner is dead (its pid gone or reused, and its
/// lock free) and removes what it lists, newest first: teardown hooks, mounts (lazily if still
/// busy after retries), zfs datasets and pools, the zfs-fuse daemon (found by its recorded pid
/// and start time, or its marker argument), blkio cgroups, knobs (restored while the device is
/// still attached to iolab's image), loop devices (any attached to a recorded image), files and
/// directories. Idempotent: what is already gone counts as removed. A state file is deleted
/// once everything in it is gone; otherwise it stays, with the failures in the report.
pub fn cleanup_all(state_dir: &Path) -> Report {
    let mut report = Report::default();
    if !state_dir.exists() {
        return report;
    }
    if let Err(why) = trust::check_dir(state_dir) {
        report
            .untrusted
            .push((state_dir.to_path_buf(), why.to_string()));
        return report;
    }
    let Ok(dir) = fs::read_dir(state_dir) else {
        return report;
    };
    let mut files: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_state_file_name(p))
        .collect();
    files.sort();
    for path in files {
        report.examined.push(path.clone());
        let mut st = match ForeignState::open(&path) {
            Ok(s) => s,
            Err(Skip::Live(pid)) => {
                report.live.push((path, pid));
                continue;
            }
            Err(Skip::Unreadable(why)) => {
                report.skipped.push((path, why));
                continue;
            }
            Err(Skip::Untrusted(why)) => {
                report.untrusted.push((path, why));
                continue;
            }
        };
        if st.journal.bad_lines > 0 {
            report.notes.push(format!(
                "{}: ignored {} cut-off line(s)",
                path.display(),
                st.journal.bad_lines
            ));
        }
        let resources: Vec<(u64, Resource)> = st
            .journal
            .open
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        let waited = wait_for_helpers(&resources);
        if !waited.is_empty() {
            report.notes.push(format!(
                "waited for helper process(es) of the dead owner: {}",
                waited.join(", ")
            ));
        }
        let mut daemon = None;
        for (id, res) in resources.into_iter().rev() {
            if let Err(why) = trust::check_record(&res, st.journal.observed.get(&id)) {
                // Not what iolab made (any more): iolab's own is gone, this is not its own.
                report
                    .notes
                    .push(format!("left alone: {}: {why}", res.describe()));
                if let Err(e) = st.removed(id) {
                    report.failures.push(e.to_string());
                }
                continue;
            }
            if let Resource::DeviceSignatures {
                device, signatures, ..
            } = &res
            {
                // Never wiped here: the user's device is theirs to erase.
                report
                    .notes
                    .push(crate::device::left_note(device, signatures));
                if let Err(e) = st.removed(id) {
                    report.failures.push(e.to_string());
                }
                continue;
            }
            match remove(&res, &mut daemon) {
                Removal::Gone { note } => {
                    report.removed.push(res.describe());
                    report.notes.extend(note);
                }
                Removal::GoneWithProblem(p) => {
                    report.removed.push(res.describe());
                    report.failures.push(format!("{}: {p}", path.display()));
                }
                Removal::Failed(p) => {
                    report
                        .failures
                        .push(format!("{}: {}: {p}", path.display(), res.describe()));
                    continue;
                }
            }
            if let Err(e) = st.removed(id) {
                report.failures.push(e.to_string());
            }
        }
        if st.journal.open.is_empty() {
            match fs::remove_file(&path) {
                Ok(()) => report.cleaned.push(path),
                Err(e) => report
                    .failures
                    .push(format!("{}: not deleted: {e}", path.display())),
            }
        }
    }
    report
}

/// Paths named by the resources, to recognise a dead owner's helper processes.
fn needles(resources: &[(u64, Resource)]) -> Vec<String> {
    let mut v = Vec::new();
    for (_, r) in resources {
        match r {
            Resource::Dir { path } | Resource::File { path } | Resource::Cgroup { path } => {
                v.push(sys::text(path))
            }
            Resource::LoopDevice { image, device } => {
                v.push(sys::text(image));
                v.extend(device.iter().map(sys::text));
            }
            Resource::Mount { target, .. } => v.push(sys::text(target)),
            Resource::BtrfsDevices { devices, .. } => v.extend(devices.iter().map(sys::text)),
            Resource::DeviceSignatures { device, .. } => v.push(sys::text(device)),
            Resource::ZfsPool { name } => v.push(name.clone()),
            Resource::ZfsDataset { name, mountpoint } => {
                v.push(name.clone());
                v.push(sys::text(mountpoint));
            }
            Resource::Knob { .. }
            | Resource::DeviceKnob { .. }
            | Resource::DriveCache { .. }
            | Resource::ZfsDaemon { .. }
            | Resource::EmuDaemon { .. }
            | Resource::Hook { .. } => {}
        }
    }
    v.retain(|s| !s.is_empty());
    v
}

/// Whether `arg` names `needle` (the whole argument, a path under it, or a `key=needle`
/// option), not merely a longer name that starts the same (`/dev/loop1` in `/dev/loop10`).
fn mentions(arg: &str, needle: &str) -> bool {
    let mut from = 0;
    while let Some(i) = arg[from..].find(needle) {
        let end = from + i + needle.len();
        let before_ok = from + i == 0 || matches!(arg.as_bytes()[from + i - 1], b'=' | b',' | b' ');
        let after_ok = end == arg.len() || matches!(arg.as_bytes()[end], b'/' | b',' | b' ');
        if before_ok && after_ok {
            return true;
        }
        from = end;
    }
    false
}

/// Waits (up to [`HELPER_WAIT`]) for processes other than zfs-fuse whose command line names
/// one of the resources: a `mkfs` or `mount` the killed owner started may still be running
/// and would otherwise create something after it was cleaned up. Returns what it waited for.
fn wait_for_helpers(resources: &[(u64, Resource)]) -> Vec<String> {
    let needles = needles(resources);
    let me = std::process::id() as i32;
    let helpers = || -> Vec<(i32, String)> {
        sys::all_pids()
            .into_iter()
            .filter(|p| *p != me && sys::proc_alive(*p))
            .filter(|p| sys::proc_comm(*p).as_deref() != Some("zfs-fuse"))
            .filter(|p| !crate::emulated::is_daemon(&sys::proc_cmdline(*p)))
            .filter_map(|p| {
                let cmd = sys::proc_cmdline(p);
                cmd.iter()
                    .any(|a| needles.iter().any(|n| mentions(a, n)))
                    .then(|| (p, cmd.join(" ")))
            })
            .collect()
    };
    let first = helpers();
    if first.is_empty() {
        return Vec::new();
    }
    sys::wait_until(HELPER_WAIT, Duration::from_millis(50), || {
        helpers().is_empty()
    });
    first
        .into_iter()
        .map(|(p, c)| format!("{p} ({c})"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_respects_boundaries() {
        assert!(mentions("/dev/loop1", "/dev/loop1"));
        assert!(!mentions("/dev/loop10", "/dev/loop1"));
        assert!(mentions(
            "device=/dev/loop1,device=/dev/loop2",
            "/dev/loop2"
        ));
        assert!(mentions("/var/tmp/x/mnt", "/var/tmp/x"));
        assert!(!mentions("/var/tmp/xy", "/var/tmp/x"));
    }

    #[test]
    fn empty_or_missing_dir() {
        let r = cleanup_all(Path::new("/nonexistent/iolab-state"));
        assert!(r.examined.is_empty() && r.is_clean());
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("other.txt"), "x").unwrap();
        let r = cleanup_all(d.path());
        assert!(r.examined.is_empty());
    }

    #[test]
    fn a_state_file_others_could_write_is_not_acted_on() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("iolab-victim");
        fs::create_dir(&victim).unwrap();
        let state = d.path().join("testbed-999999999-0.jsonl");
        fs::write(
            &state,
            format!(
                "{{\"event\":\"header\",\"version\":1,\"pid\":999999999,\"created_unix\":0}}\n\
                 {{\"event\":\"intent\",\"id\":1,\"resource\":{{\"type\":\"dir\",\"path\":{victim:?}}}}}\n"
            ),
        )
        .unwrap();
        fs::set_permissions(&state, fs::Permissions::from_mode(0o666)).unwrap();
        let r = cleanup_all(d.path());
        assert_eq!(r.untrusted.len(), 1, "{r}");
        assert!(r.untrusted[0].1.contains("writable by others"), "{r}");
        assert!(!r.is_clean() && victim.exists() && state.exists());
        // A symbolic link to a state file is not followed.
        fs::set_permissions(&state, fs::Permissions::from_mode(0o600)).unwrap();
        let real = d.path().join("elsewhere.json");
        fs::rename(&state, &real).unwrap();
        std::os::unix::fs::symlink(&real, &state).unwrap();
        let r = cleanup_all(d.path());
        assert!(r.removed.is_empty() && victim.exists(), "{r}");
        // Nor is anything in a directory others can write.
        fs::remove_file(&state).unwrap();
        fs::rename(&real, &state).unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let r = cleanup_all(d.path());
        assert_eq!(r.untrusted.len(), 1, "{r}");
        assert!(r.examined.is_empty() && victim.exists());
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let r = cleanup_all(d.path());
        assert!(r.is_clean() && !victim.exists(), "{r}");
    }

    #[test]
    fn newer_format_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("testbed-999999999-0.jsonl");
        fs::write(
            &state,
            "{\"event\":\"header\",\"version\":99,\"pid\":999999999,\"created_unix\":0}\n",
        )
        .unwrap();
        let r = cleanup_all(d.path());
        assert_eq!(r.skipped.len(), 1, "{r}");
        assert!(r.skipped[0].1.contains("version 99"));
        assert!(state.exists());
    }

    #[test]
    fn dead_owner_file_is_cleaned() {
        let d = tempfile::tempdir().unwrap();
        let made = d.path().join("iolab-testbed-dead-owner");
        fs::create_dir(&made).unwrap();
        let file = made.join("f");
        fs::write(&file, "x").unwrap();
        // Not under a directory of iolab's, and with no inode recorded: never believed.
        let victim = d.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        // A pid that cannot be alive with this start time.
        let text = format!(
            "{{\"event\":\"header\",\"version\":1,\"pid\":{},\"start_time\":1,\"created_unix\":0}}\n\
             {{\"event\":\"intent\",\"id\":1,\"resource\":{{\"type\":\"dir\",\"path\":{:?}}}}}\n\
             {{\"event\":\"intent\",\"id\":2,\"resource\":{{\"type\":\"file\",\"path\":{:?}}}}}\n\
             {{\"event\":\"intent\",\"id\":3,\"resource\":{{\"type\":\"file\",\"path\":\"/nonexistent/iolab-x/gone\"}}}}\n\
             {{\"event\":\"intent\",\"id\":4,\"resource\":{{\"type\":\"file\",\"path\":{:?}}}}}\n",
            std::process::id(),
            made,
            file,
            victim
        );
        let state = d.path().join("testbed-999999999-0.jsonl");
        fs::write(&state, text).unwrap();
        // Its pid is ours: alive, so left alone.
        let r = cleanup_all(d.path());
        assert_eq!(r.live.len(), 1, "{r}");
        assert!(made.exists());
        // Rewrite with a pid that does not exist.
        let text = fs::read_to_string(&state).unwrap().replacen(
            &format!("\"pid\":{}", std::process::id()),
            "\"pid\":999999999",
            1,
        );
        fs::write(&state, text).unwrap();
        let r = cleanup_all(d.path());
        assert!(r.is_clean(), "{r}");
        assert_eq!(r.cleaned, vec![state.clone()]);
        assert_eq!(r.removed.len(), 3);
        assert!(!made.exists() && !state.exists());
        assert!(victim.exists(), "{r}");
        assert!(
            r.notes.iter().any(|n| n.starts_with("left alone: file")
                && n.contains("not under a directory of iolab's")),
            "{r}"
        );
        // Again: nothing to do.
        assert!(cleanup_all(d.path()).examined.is_empty());
    }
}
