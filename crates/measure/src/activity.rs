//! What else the machine did during a pass: bytes moved by block devices (/proc/diskstats)
//! and CPU time used by other user-space processes (/proc/PID/stat), so a number measured
//! on a shared device or a busy machine can be flagged.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Instant;

/// Sector counts of one device, as /proc/diskstats reports them (512-byte units).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DiskCounters {
    read_sectors: u64,
    write_sectors: u64,
    /// Requests completed (after merging; a split I/O counts once per part).
    reads: u64,
    writes: u64,
}

/// Bytes a device moved during a pass, and the requests it completed for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceIo {
    pub device: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Read and write requests the device completed in the same time, iolab's uncounted
    /// I/O included (its bytes are in `Activity::own_uncounted_bytes`). Absent in records
    /// from before they were kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub read_requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub write_requests: u64,
}

/// Another process's CPU use during a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    pub pid: u32,
    pub name: String,
    /// Percent of one CPU.
    pub cpu_pct: f64,
}

/// The machine's activity around a pass besides iolab's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    pub devices: Vec<DeviceIo>,
    /// CPU used by other user-space processes, in percent of one CPU.
    pub other_cpu_pct: f64,
    /// The busiest of them (at most 3, each above 1% of a CPU).
    pub top_processes: Vec<ProcessCpu>,
    /// Bytes iolab itself moved outside the counted pass (its ramp, and what drained after
    /// the deadline), already taken off `devices`: what another rank of an MPI run on the
    /// same machine adds back to tell its I/O from someone else's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_uncounted_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn read_diskstats() -> HashMap<String, DiskCounters> {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    parse_diskstats(&text)
}

fn parse_diskstats(text: &str) -> HashMap<String, DiskCounters> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            Some((
                f[2].to_string(),
                DiskCounters {
                    read_sectors: f[5].parse().ok()?,
                    write_sectors: f[9].parse().ok()?,
                    reads: f[3].parse().ok()?,
                    writes: f[7].parse().ok()?,
                },
            ))
        })
        .collect()
}

/// PF_KTHREAD in /proc/PID/stat's flags field.
const PF_KTHREAD: u64 = 0x0020_0000;

/// User-space filesystems whose CPU time is the I/O being measured (a zfs-fuse daemon does
/// the checksums and the device I/O of a run on zfs), not competition for the CPU.
const STORAGE_DAEMONS: &[&str] = &["zfs-fuse"];

/// Other processes whose CPU time is the run's own: the other ranks of a multi-process
/// run on this machine (set once by the runner, see [`count_as_ours`]).
static ALSO_OURS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();

/// Counts the CPU of `pids` (the other ranks of an MPI run on this machine) as the run's
/// own, not as other processes' (BUSY_CPU). Set once per process; later calls are ignored
/// and return false.
pub fn count_as_ours(pids: Vec<u32>) -> bool {
    ALSO_OURS.set(pids).is_ok()
}

/// (name, utime + stime in clock ticks) of every user-space process but `skip`, the
/// processes [`count_as_ours`] named and the storage daemons.
fn read_process_times(skip: u32) -> HashMap<u32, (String, u64)> {
    let ours = ALSO_OURS.get().map(Vec::as_slice).unwrap_or(&[]);
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == skip || ours.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(parsed) = parse_stat(&stat) {
            if parsed.2 & PF_KTHREAD == 0 && !STORAGE_DAEMONS.contains(&parsed.0.as_str()) {
                out.insert(pid, (parsed.0, parsed.1));
            }
        }
    }
    out
}

/// (comm, utime + stime, flags) from a /proc/PID/stat line.
fn parse_stat(stat: &str) -> Option<(String, u64, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat[open + 1..close].to_string();
    let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    // Fields after ")" start at field 3 (state): flags is field 9, utime 14, stime 15.
    let flags: u64 = rest.get(6)?.parse().ok()?;
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime, flags))
}

/// A snapshot of device counters and process CPU times.
pub struct ActivitySample {
    at: Instant,
    disks: HashMap<String, DiskCounters>,
    procs: HashMap<u32, (String, u64)>,
}

impl ActivitySample {
    /// Samples now. `devices` limits nothing: all devices are read, the diff filters.
    pub fn now() -> Self {
        ActivitySample {
            at: Instant::now(),
            disks: read_diskstats(),
            procs: read_process_times(std::process::id()),
        }
    }

    /// Activity between `self` and `end`, for the named block devices.
    pub fn until(&self, end: &ActivitySample, devices: &[String]) -> Activity {
        let mut act = Activity::default();
        for d in devices {
            if let (Some(a), Some(b)) = (self.disks.get(d), end.disks.get(d)) {
                act.devices.push(DeviceIo {
                    device: d.clone(),
                    read_bytes: b.read_sectors.saturating_sub(a.read_sectors) * 512,
                    write_bytes: b.write_sectors.saturating_sub(a.write_sectors) * 512,
                    read_requests: b.reads.saturating_sub(a.reads),
                    write_requests: b.writes.saturating_sub(a.writes),
                });
            }
        }
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let secs = end.at.duration_since(self.at).as_secs_f64().max(1e-3);
        let mut procs: Vec<ProcessCpu> = Vec::new();
        for (pid, (name, t1)) in &end.procs {
            // A process missing from the first sample started during the pass: all its time counts.
            let t0 = self.procs.get(pid).map(|p| p.1).unwrap_or(0);
            let pct = 100.0 * t1.saturating_sub(t0) as f64 / hz / secs;
            if pct > 0.0 {
                act.other_cpu_pct += pct;
                procs.push(ProcessCpu {
                    pid: *pid,
                    name: name.clone(),
                    cpu_pct: pct,
                });
            }
        }
        procs.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
        act.top_processes = procs
            .into_iter()
            .filter(|p| p.cpu_pct > 1.0)
            .take(3)
            .collect();
        act
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_diskstats_and_stat() {
        let d = parse_diskstats(
            " 254       0 vda 1000 5 4096 10 2000 7 8192 20 0 30 40 0 0 0 0 0 0\n\
               7       0 loop0 1 0 8 0 0 0 0 0 0 0 0\n",
        );
        assert_eq!(d["vda"].read_sectors, 4096);
        assert_eq!(d["vda"].write_sectors, 8192);
        assert_eq!((d["vda"].reads, d["vda"].writes), (1000, 2000));
        assert_eq!(d["loop0"].read_sectors, 8);
        let s = "1234 (my (odd) name) S 1 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0";
        let (name, t, flags) = parse_stat(s).unwrap();
        assert_eq!(name, "my (odd) name");
        assert_eq!(t, 300);
        assert_eq!(flags, 4194560);
    }

    #[test]
    fn sees_a_busy_process() {
        let a = ActivitySample::now();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let b = ActivitySample::now();
        let _ = child.kill();
        let _ = child.wait();
        let act = a.until(&b, &[]);
        assert!(act.other_cpu_pct > 20.0, "{act:?}");
        assert!(act.top_processes.iter().any(|p| p.name == "sh"), "{act:?}");
    }
}
