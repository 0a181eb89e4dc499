//! CPU use over a pass: iolab's own user/system time (getrusage) and the whole machine's
//! user/system/iowait shares (/proc/stat).

use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// CPU use over one pass. `usr_pct`/`sys_pct` are iolab's own time as a percentage of one
/// CPU (fio's convention: 100 = one core busy). `sys_*_pct` and `iowait_pct` are shares of
/// all CPUs of the machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    pub usr_pct: f64,
    pub sys_pct: f64,
    pub system_usr_pct: f64,
    pub system_sys_pct: f64,
    pub iowait_pct: f64,
    /// iolab's own CPU time (user + system) per completed I/O, in microseconds.
    pub cpu_us_per_io: f64,
}

/// A snapshot taken at the start and end of a pass.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    at: Instant,
    self_usr_us: u64,
    self_sys_us: u64,
    /// /proc/stat "cpu" line: user+nice, system+irq+softirq, iowait, total jiffies.
    stat: Option<[u64; 4]>,
}

fn rusage_self() -> (u64, u64) {
    // SAFETY: getrusage writes into the struct we pass; RUSAGE_SELF covers all threads.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    if rc != 0 {
        return (0, 0);
    }
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn proc_stat() -> Option<[u64; 4]> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let mut it = line.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.filter_map(|x| x.parse().ok()).collect();
    if v.len() < 7 {
        return None;
    }
    // user nice system idle iowait irq softirq steal ...
    let usr = v[0] + v[1];
    let sys = v[2] + v[5] + v[6];
    let iowait = v[4];
    let total: u64 = v.iter().take(8).sum();
    Some([usr, sys, iowait, total])
}

impl CpuSample {
    pub fn now() -> Self {
        let (u, s) = rusage_self();
        CpuSample {
            at: Instant::now(),
            self_usr_us: u,
            self_sys_us: s,
            stat: proc_stat(),
        }
    }

    /// CPU use between `self` (start) and `end`, for a pass that completed `ios` I/Os.
    pub fn usage_until(&self, end: &CpuSample, ios: u64) -> CpuUsage {
        let wall_us = end.at.duration_since(self.at).as_micros().max(1) as f64;
        let du = end.self_usr_us.saturating_sub(self.self_usr_us) as f64;
        let ds = end.self_sys_us.saturating_sub(self.self_sys_us) as f64;
        let mut out = CpuUsage {
            usr_pct: 100.0 * du / wall_us,
            sys_pct: 100.0 * ds / wall_us,
            cpu_us_per_io: if ios > 0 { (du + ds) / ios as f64 } else { 0.0 },
            ..CpuUsage::default()
        };
        if let (Some(a), Some(b)) = (self.stat, end.stat) {
            let total = b[3].saturating_sub(a[3]);
            if total > 0 {
                let pct = |i: usize| 100.0 * b[i].saturating_sub(a[i]) as f64 / total as f64;
                out.system_usr_pct = pct(0);
                out.system_sys_pct = pct(1);
                out.iowait_pct = pct(2);
            }
        }
        out
    }
}

/// The scheduler's run delay of this process's threads (nanoseconds they were runnable
/// but waited for a CPU, summed; /proc/self/task/*/schedstat's second field), or `None`
/// where the kernel does not keep it.
fn run_delay_ns() -> Option<u64> {
    let mut sum = 0u64;
    let mut any = false;
    for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("schedstat")) else {
            continue; // a thread that ended since the listing
        };
        if let Some(v) = text
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
        {
            sum += v;
            any = true;
        }
    }
    any.then_some(sum)
}

/// /proc/stat's "cpu" line: (steal, total) jiffies over all CPUs.
fn steal_jiffies() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut it = text.lines().next()?.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.take(8).filter_map(|x| x.parse().ok()).collect();
    (v.len() == 8).then(|| (v[7], v.iter().sum()))
}

/// The CPU a pass lost, interval by interval of its series: its threads' wait for a CPU
/// and the machine's stolen time (see [`crate::TimeSeries::cpu_wait_ms`]). Ticked by the
/// pass's own thread every few tens of milliseconds; what changed since the last tick is
/// put in the interval the tick falls in.
#[derive(Debug)]
pub struct CpuLossSampler {
    interval: Duration,
    wait: Option<u64>,
    stat: Option<(u64, u64)>,
    /// The last tick, after the start.
    at: Duration,
    wait_ns: Vec<u64>,
    steal_ms: Vec<f64>,
}

impl CpuLossSampler {
    /// Started now, for a series of `interval` intervals starting now.
    pub fn start(interval: Duration) -> CpuLossSampler {
        CpuLossSampler {
            interval,
            wait: run_delay_ns(),
            stat: steal_jiffies(),
            at: Duration::ZERO,
            wait_ns: Vec::new(),
            steal_ms: Vec::new(),
        }
    }

    /// A tick `elapsed` after the start.
    pub fn tick(&mut self, elapsed: Duration) {
        let i = (elapsed.as_nanos() / self.interval.as_nanos().max(1)) as usize;
        if self.wait_ns.len() <= i {
            self.wait_ns.resize(i + 1, 0);
            self.steal_ms.resize(i + 1, 0.0);
        }
        if let (Some(a), Some(b)) = (self.wait, run_delay_ns()) {
            self.wait_ns[i] += b.saturating_sub(a);
            self.wait = Some(b);
        } else {
            self.wait = None;
        }
        if let (Some((s0, t0)), Some((s1, t1))) = (self.stat, steal_jiffies()) {
            // A share of the CPUs' time since the last tick, over the time since it.
            if t1 > t0 {
                let share = s1.saturating_sub(s0) as f64 / (t1 - t0) as f64;
                let since = elapsed.saturating_sub(self.at).as_secs_f64() * 1000.0;
                self.steal_ms[i] += share * since;
            }
            self.stat = Some((s1, t1));
        } else {
            self.stat = None;
        }
        self.at = elapsed;
    }

    /// The series' `intervals` entries: (wait ms, steal ms), each empty where the kernel
    /// did not give it.
    pub fn finish(mut self, intervals: usize) -> (Vec<u32>, Vec<u32>) {
        self.wait_ns.resize(intervals, 0);
        self.steal_ms.resize(intervals, 0.0);
        let wait = match self.wait {
            Some(_) => self
                .wait_ns
                .iter()
                .map(|ns| (ns / 1_000_000) as u32)
                .collect(),
            None => Vec::new(),
        };
        let steal = match self.stat {
            Some(_) => self.steal_ms.iter().map(|ms| ms.round() as u32).collect(),
            None => Vec::new(),
        };
        (wait, steal)
    }
}
