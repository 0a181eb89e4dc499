//! Host facts: uname, CPU model and count, memory.

use crate::util::read_trim;
use crate::Environment;

pub(crate) fn fill(env: &mut Environment) {
    let uts = rustix::system::uname();
    let text = |c: &std::ffi::CStr| {
        let s = c.to_string_lossy().trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    env.hostname = text(uts.nodename());
    env.machine_id = iolab_sys::host::machine_id();
    env.kernel_release = text(uts.release());
    env.kernel_version = text(uts.version());
    env.arch = text(uts.machine());

    env.cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| cpu_model(&s));
    env.cpu_cores = read_trim("/sys/devices/system/cpu/online").and_then(|s| count_cpu_list(&s));
    env.cpus_usable = std::thread::available_parallelism().ok().map(|n| n.get());

    if let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") {
        env.memory_total_bytes = meminfo_bytes(&meminfo, "MemTotal");
        env.memory_available_bytes = meminfo_bytes(&meminfo, "MemAvailable");
    }
}

/// The first CPU model line of `/proc/cpuinfo`: "model name" (x86), "cpu model" (MIPS),
/// "cpu" (POWER), "Model" (some ARM boards). `None` when none is there.
pub(crate) fn cpu_model(cpuinfo: &str) -> Option<String> {
    for key in ["model name", "cpu model", "cpu", "Model"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':') {
                let v = v.trim();
                if k.trim() == key && !v.is_empty() {
                    return Some(v.split_whitespace().collect::<Vec<_>>().join(" "));
                }
            }
        }
    }
    None
}

/// Counts the CPUs of a kernel CPU list such as "0-3,8,10-11".
pub(crate) fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0usize;
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<usize>().ok()?;
                n += 1;
            }
        }
    }
    (n > 0).then_some(n)
}

/// A `/proc/meminfo` value ("MemTotal:  24684084 kB") in bytes.
pub(crate) fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.split(':').next() == Some(key))?;
    let mut it = line.split(':').nth(1)?.split_whitespace();
    let value: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn meminfo() {
        let text = "MemTotal:       24684084 kB\nMemFree:  1 kB\nMemAvailable:   100 kB\n";
        assert_eq!(meminfo_bytes(text, "MemTotal"), Some(24684084 * 1024));
        assert_eq!(meminfo_bytes(text, "MemAvailable"), Some(102400));
        assert_eq!(meminfo_bytes(text, "SwapTotal"), None);
    }

    #[test]
    fn cpu_models() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\n\
                   model name\t: Intel(R) Xeon(R)  Processor\n";
        assert_eq!(
            cpu_model(x86).as_deref(),
            Some("Intel(R) Xeon(R) Processor")
        );
        let arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n";
        assert_eq!(cpu_model(arm), None);
    }
}
