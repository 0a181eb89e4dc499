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

/// This process's threads' time on a CPU and their scheduler's run delay (nanoseconds
/// they were runnable but waited for a CPU), summed (/proc/self/task/*/schedstat's first
/// two fields), or `None` where the kernel does not keep them.
fn run_and_delay_ns() -> Option<(u64, u64)> {
    let (mut run, mut delay) = (0u64, 0u64);
    let mut any = false;
    for e in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("schedstat")) else {
            continue; // a thread that ended since the listing
        };
        let mut v = text.split_whitespace().map(|v| v.parse::<u64>().ok());
        if let (Some(Some(r)), Some(Some(d))) = (v.next(), v.next()) {
            run += r;
            delay += d;
            any = true;
        }
    }
    any.then_some((run, delay))
}

/// /proc/stat's "cpu" line over all CPUs: (steal, busy: user, nice, system, irq and
/// softirq, idle: idle and iowait, total) jiffies.
fn stat_jiffies() -> Option<(u64, u64, u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut it = text.lines().next()?.split_whitespace();
    if it.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = it.take(8).filter_map(|x| x.parse().ok()).collect();
    (v.len() == 8).then(|| {
        let busy = v[0] + v[1] + v[2] + v[5] + v[6];
        (v[7], busy, v[3] + v[4], v.iter().sum())
    })
}

/// The machine's CPUs (online), at least one.
fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

/// The CPU a pass lost, interval by interval of its series: its threads' wait for a CPU,
/// the machine's stolen time and the CPU its other work used (see
/// [`crate::TimeSeries::cpu_wait_ms`]). Ticked by the pass's own thread every few tens of
/// milliseconds; what changed since the last tick is put in the interval the tick falls in.
#[derive(Debug)]
pub struct CpuLossSampler {
    interval: Duration,
    /// This process's threads' (run, delay) ns at the last tick.
    own: Option<(u64, u64)>,
    /// /proc/stat's (steal, busy, idle, total) at the last tick.
    stat: Option<(u64, u64, u64, u64)>,
    /// The last tick, after the start.
    at: Duration,
    wait_ns: Vec<u64>,
    steal_ms: Vec<f64>,
    others_ms: Vec<f64>,
    idle_ms: Vec<f64>,
}

impl CpuLossSampler {
    /// Started now, for a series of `interval` intervals starting now.
    pub fn start(interval: Duration) -> CpuLossSampler {
        CpuLossSampler {
            interval,
            own: run_and_delay_ns(),
            stat: stat_jiffies(),
            at: Duration::ZERO,
            wait_ns: Vec::new(),
            steal_ms: Vec::new(),
            others_ms: Vec::new(),
            idle_ms: Vec::new(),
        }
    }

    /// A tick `elapsed` after the start.
    pub fn tick(&mut self, elapsed: Duration) {
        let i = (elapsed.as_nanos() / self.interval.as_nanos().max(1)) as usize;
        if self.wait_ns.len() <= i {
            self.wait_ns.resize(i + 1, 0);
            self.steal_ms.resize(i + 1, 0.0);
            self.others_ms.resize(i + 1, 0.0);
            self.idle_ms.resize(i + 1, 0.0);
        }
        let own = run_and_delay_ns();
        let mut own_run_ms = 0.0;
        if let (Some((r0, d0)), Some((r1, d1))) = (self.own, own) {
            self.wait_ns[i] += d1.saturating_sub(d0);
            own_run_ms = r1.saturating_sub(r0) as f64 / 1e6;
        }
        self.own = own;
        let stat = stat_jiffies();
        if let (Some((s0, b0, i0, t0)), Some((s1, b1, i1, t1))) = (self.stat, stat) {
            // Shares of the CPUs' time since the last tick, over the time since it.
            if t1 > t0 {
                let since = elapsed.saturating_sub(self.at).as_secs_f64() * 1000.0;
                let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / (t1 - t0) as f64;
                self.steal_ms[i] += share(s0, s1) * since;
                // The whole machine's busy CPU time (all CPUs) less iolab's own.
                let busy_ms = share(b0, b1) * since * cpus();
                self.others_ms[i] += (busy_ms - own_run_ms).max(0.0);
                self.idle_ms[i] += share(i0, i1) * since * cpus();
            }
        }
        self.stat = stat;
        self.at = elapsed;
    }

    /// The series' `intervals` entries: wait ms, steal ms, other work's CPU ms and idle
    /// CPU ms, each empty where the kernel did not give it.
    pub fn finish(mut self, intervals: usize) -> [Vec<u32>; 4] {
        self.wait_ns.resize(intervals, 0);
        self.steal_ms.resize(intervals, 0.0);
        self.others_ms.resize(intervals, 0.0);
        self.idle_ms.resize(intervals, 0.0);
        let ms = |v: &[f64]| v.iter().map(|ms| ms.round() as u32).collect();
        let wait = match self.own {
            Some(_) => self
                .wait_ns
                .iter()
                .map(|ns| (ns / 1_000_000) as u32)
                .collect(),
            None => Vec::new(),
        };
        match self.stat {
            Some(_) => [
                wait,
                ms(&self.steal_ms),
                ms(&self.others_ms),
                ms(&self.idle_ms),
            ],
            None => [wait, Vec::new(), Vec::new(), Vec::new()],
        }
    }
}
