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
    /// CPU used by other user-space processes, in percent of one CPU: at most the
    /// machine's CPUs times 100. 0 (and no `top_processes`) when the window was too short
    /// for the kernel's tick counts to give a figure: `cpu_resolution_pct` says how coarse
    /// it was.
    pub other_cpu_pct: f64,
    /// The busiest of them (at most 3, each above 1% of a CPU).
    pub top_processes: Vec<ProcessCpu>,
    /// What one clock tick of CPU time is over the sampled window (start of the first
    /// sample to the end of the second), in percent of one CPU: each process's figure is
    /// this coarse. Above [`MAX_CPU_RESOLUTION_PCT`] no CPU figure is given. Absent in
    /// records from before it was kept.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub cpu_resolution_pct: f64,
    /// Bytes iolab itself moved outside the counted pass (its ramp, and what drained after
    /// the deadline), already taken off `devices`: what another rank of an MPI run on the
    /// same machine adds back to tell its I/O from someone else's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_uncounted_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

/// The coarsest CPU figure given: one clock tick may be at most 5% of a CPU over the
/// window (at 100 ticks a second, a window of at least 200 ms). A shorter window gives no
/// figure: a process that ran 1 ms can be charged a whole 10 ms tick, and a handful of
/// them over 20 ms read as several CPUs' worth.
pub const MAX_CPU_RESOLUTION_PCT: f64 = 5.0;

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

/// The name iolab's emulated disk daemon (`iolab emudisk serve`) gives itself.
pub const EMUDISK_DAEMON: &std::ffi::CStr = c"iolab-emudisk";

/// User-space storage whose CPU time is the I/O being measured (a zfs-fuse daemon does the
/// checksums and the device I/O of a run on zfs; iolab's emulated disk runs its model), not
/// competition for the CPU.
const STORAGE_DAEMONS: &[&str] = &["zfs-fuse", "iolab-emudisk"];

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
    /// When reading began, and when it ended: a process's ticks were read somewhere
    /// in between.
    at: Instant,
    done: Instant,
    disks: HashMap<String, DiskCounters>,
    procs: HashMap<u32, (String, u64)>,
}

impl ActivitySample {
    /// Samples now. `devices` limits nothing: all devices are read, the diff filters.
    pub fn now() -> Self {
        let at = Instant::now();
        let disks = read_diskstats();
        let procs = read_process_times(std::process::id());
        ActivitySample {
            at,
            done: Instant::now(),
            disks,
            procs,
        }
    }

    /// Reads the device counters again, keeping the CPU sample: a rank of an MPI run
    /// starts its device window once every rank has passed the barrier, so that another
    /// rank's I/O before it (its layout, the tail of its last pass), which is in no rank's
    /// pass, is not read as someone else's. /proc/diskstats is one read, unlike the
    /// processes' CPU times, which stay before the barrier.
    pub fn devices_from_now(&mut self) {
        self.disks = read_diskstats();
    }

    /// Whether the process `pid` is among the others this sample read (the run's own
    /// processes, and those named by [`count_as_ours`], never are).
    pub fn counts_as_other(&self, pid: u32) -> bool {
        self.procs.contains_key(&pid)
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
        let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
        // SAFETY: sysconf has no preconditions (rustix has no call for the CPUs online;
        // std's available_parallelism counts this process's allowed CPUs instead).
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
        let ticks = end.procs.iter().map(|(pid, (name, t1))| {
            // A process missing from the first sample started during the pass: all its
            // time counts.
            let t0 = self.procs.get(pid).map(|p| p.1).unwrap_or(0);
            (*pid, name.clone(), t1.saturating_sub(t0))
        });
        let window = end.done.saturating_duration_since(self.at);
        other_cpu(&mut act, ticks, hz, window, ncpu);
        act
    }
}

/// Fills `act`'s CPU figures from each process's clock ticks (`hz` a second) over
/// `window` on a machine of `ncpu` CPUs: none when one tick is coarser than
/// [`MAX_CPU_RESOLUTION_PCT`], else each process and their sum bounded by `ncpu` CPUs
/// (tick counts are rounded per process, so a sum of many can exceed what the window
/// allows).
fn other_cpu(
    act: &mut Activity,
    ticks: impl Iterator<Item = (u32, String, u64)>,
    hz: f64,
    window: std::time::Duration,
    ncpu: u32,
) {
    let secs = window.as_secs_f64();
    let resolution = if secs > 0.0 {
        100.0 / (hz * secs)
    } else {
        f64::INFINITY
    };
    act.cpu_resolution_pct = resolution.min(1e6);
    act.other_cpu_pct = 0.0;
    act.top_processes.clear();
    if resolution > MAX_CPU_RESOLUTION_PCT {
        return;
    }
    let most = 100.0 * f64::from(ncpu);
    let mut procs: Vec<ProcessCpu> = Vec::new();
    for (pid, name, n) in ticks {
        let pct = (n as f64 * resolution).min(most);
        if pct > 0.0 {
            act.other_cpu_pct += pct;
            procs.push(ProcessCpu {
                pid,
                name,
                cpu_pct: pct,
            });
        }
    }
    act.other_cpu_pct = act.other_cpu_pct.min(most);
    procs.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
    act.top_processes = procs
        .into_iter()
        .filter(|p| p.cpu_pct > 1.0)
        .take(3)
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    /// Two samples `window` apart (each read instantly), `n` other processes charged
    /// `each` clock ticks between them.
    fn samples(window: Duration, n: u32, each: u64) -> (ActivitySample, ActivitySample) {
        let at = Instant::now();
        let procs = |t: u64| (0..n).map(|i| (100 + i, (format!("p{i}"), t))).collect();
        let sample = |at: Instant, t: u64| ActivitySample {
            at,
            done: at,
            disks: HashMap::new(),
            procs: procs(t),
        };
        (sample(at, 1000), sample(at + window, 1000 + each))
    }

    fn hz_and_cpus() -> (f64, f64) {
        let hz = rustix::param::clock_ticks_per_second() as f64;
        // SAFETY: sysconf has no preconditions.
        let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as f64;
        (hz, ncpu)
    }

    #[test]
    fn a_window_too_short_for_its_ticks_gives_no_cpu_figure() {
        // The samples that read "other processes used 461% of a CPU" on a 2-CPU machine:
        // a 13 ms pass, six processes charged a tick each (at 100 ticks a second).
        let (a, b) = samples(Duration::from_millis(13), 6, 1);
        let act = a.until(&b, &[]);
        assert_eq!(act.other_cpu_pct, 0.0, "{act:?}");
        assert!(act.top_processes.is_empty(), "{act:?}");
        let (hz, _) = hz_and_cpus();
        assert!(
            (act.cpu_resolution_pct - 100.0 / (hz * 0.013)).abs() < 1e-6,
            "{act:?}"
        );
        // No window at all: no figure, and a finite resolution in the record.
        let (a, b) = samples(Duration::ZERO, 6, 1);
        let act = a.until(&b, &[]);
        assert_eq!(act.other_cpu_pct, 0.0);
        assert!(act.cpu_resolution_pct.is_finite());
    }

    #[test]
    fn cpu_figures_are_bounded_by_the_machines_cpus() {
        let (hz, ncpu) = hz_and_cpus();
        // A window in which one tick is 2% of a CPU; every process shows 2 ticks more than
        // the window holds on all CPUs together, split over many processes and in one.
        let window = Duration::from_secs_f64(50.0 / hz);
        let ticks = (ncpu * 50.0) as u64 + 2;
        let (a, b) = samples(window, ticks as u32, 1);
        let act = a.until(&b, &[]);
        assert!((act.cpu_resolution_pct - 2.0).abs() < 1e-6, "{act:?}");
        assert!(act.other_cpu_pct <= 100.0 * ncpu, "{act:?}");
        let (a, b) = samples(window, 1, ticks);
        let act = a.until(&b, &[]);
        assert!(act.other_cpu_pct <= 100.0 * ncpu, "{act:?}");
        assert!(act.top_processes[0].cpu_pct <= 100.0 * ncpu, "{act:?}");
        // A plausible figure is kept as it is: 30 ticks a second for a second = 30%.
        let (a, b) = samples(Duration::from_secs(1), 1, (hz * 0.3) as u64);
        let act = a.until(&b, &[]);
        assert!((act.other_cpu_pct - 30.0).abs() < 1e-6, "{act:?}");
        assert_eq!(act.top_processes.len(), 1);
    }

    #[test]
    fn sees_a_busy_process() {
        let a = ActivitySample::now();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let b = ActivitySample::now();
        let _ = child.kill();
        let _ = child.wait();
        let act = a.until(&b, &[]);
        // The child's CPU is in the others' figure and the sample read it; whether it is
        // also among the three busiest depends on what else runs (under a loaded build it
        // was not: the listing's order is checked above on made-up counts).
        assert!(act.other_cpu_pct > 20.0, "{act:?}");
        assert!(b.counts_as_other(pid), "{act:?}");
    }
}
