//! Which process is which: a pid is reused once its process is gone, so a process is named
//! by its pid, its start time (clock ticks since boot, `/proc/PID/stat`) and the boot it
//! started in (`/proc/sys/kernel/random/boot_id`). A record of "who is writing this" made
//! with [`Identity::current`] can later be checked with [`Identity::alive`].

use std::fs;

/// A process as another process can recognise it later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub pid: u32,
    /// Clock ticks from boot to the process's start (field 22 of `/proc/PID/stat`).
    pub start_ticks: u64,
    /// The kernel's boot id: a process of an earlier boot (or another machine) is not
    /// one of this boot's, whatever its pid.
    pub boot_id: String,
}

impl Identity {
    /// This process; `None` without `/proc`.
    pub fn current() -> Option<Identity> {
        let pid = std::process::id();
        Some(Identity {
            pid,
            start_ticks: start_ticks(pid)?,
            boot_id: boot_id()?,
        })
    }

    /// Whether this process is still running: same boot, the pid exists and is not a
    /// zombie, and it started at the recorded tick (not a later process given the pid).
    /// A process of another boot or another machine reads as gone.
    pub fn alive(&self) -> bool {
        boot_id().as_deref() == Some(self.boot_id.as_str())
            && stat_fields(self.pid).is_some_and(|f| {
                !matches!(f.first().map(String::as_str), Some("Z" | "X") | None)
                    && f.get(19).and_then(|t| t.parse().ok()) == Some(self.start_ticks)
            })
    }
}

/// The kernel's id of the current boot.
pub fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string()).filter(|s| !s.is_empty())
}

/// A process's start time in clock ticks since boot.
pub fn start_ticks(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces and
/// parentheses): the state first, the start time at index 19.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 1..)?;
    Some(after.split_whitespace().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_changed_record_is_not() {
        let me = Identity::current().expect("/proc is mounted");
        assert_eq!(me.pid, std::process::id());
        assert!(me.alive());
        let later = Identity {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert!(!later.alive(), "a pid reused by a later process");
        let other_boot = Identity {
            boot_id: "another boot".into(),
            ..me.clone()
        };
        assert!(!other_boot.alive());
        let gone = Identity {
            pid: u32::MAX,
            ..me
        };
        assert!(!gone.alive());
    }
}
