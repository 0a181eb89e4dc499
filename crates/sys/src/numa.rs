//! NUMA nodes: which are online, the CPUs of each, and binding the calling thread's CPUs
//! and memory to some of them (fio's `numa_cpu_nodes`, `numa_mem_policy`).

use std::fs;

/// A node list as Linux and fio write one: `0`, `0-3`, `0,2-3` (at most 1024 nodes).
pub fn parse_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let n = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|v| *v < 1024)
                .ok_or_else(|| format!("'{s}': expected node numbers such as 0, 0-1 or 0,2"))
        };
        let (lo, hi) = (n(lo)?, n(hi)?);
        if hi < lo {
            return Err(format!("'{part}': a range runs upwards"));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The nodes online (a kernel without NUMA has the one node 0).
pub fn online_nodes() -> Vec<u32> {
    fs::read_to_string("/sys/devices/system/node/online")
        .ok()
        .and_then(|t| parse_list(&t).ok())
        .unwrap_or_else(|| vec![0])
}

/// The CPUs of `nodes` (a node without a cpulist: none).
fn cpus_of(nodes: &[u32]) -> Vec<u32> {
    let mut cpus = Vec::new();
    for n in nodes {
        let path = format!("/sys/devices/system/node/node{n}/cpulist");
        if let Some(list) = fs::read_to_string(path)
            .ok()
            .filter(|t| !t.trim().is_empty())
        {
            cpus.extend(parse_list(&list).unwrap_or_default());
        }
    }
    cpus
}

/// Runs the calling thread only on the CPUs of `nodes` (sched_setaffinity).
pub fn bind_thread_cpus(nodes: &[u32]) -> Result<(), String> {
    let cpus = cpus_of(nodes);
    if cpus.is_empty() {
        return Err(format!("NUMA nodes {nodes:?} have no CPUs"));
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays within it (CPUs < 1024
    // as parsed) and sched_setaffinity reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "sched_setaffinity to NUMA nodes {nodes:?}: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Linux's memory policies (set_mempolicy's modes) as fio names them.
pub fn mem_mode(name: &str) -> Option<i32> {
    Some(match name {
        "default" => 0,
        "prefer" => 1,
        "bind" => 2,
        "interleave" => 3,
        "local" => 4,
        _ => return None,
    })
}

/// Sets the calling thread's memory policy (set_mempolicy) to `mode` over `nodes`; memory
/// it maps afterwards is placed by it.
pub fn set_mem_policy(mode: i32, nodes: &[u32]) -> Result<(), String> {
    let mut mask = [0u64; 16];
    for &n in nodes {
        mask[n as usize / 64] |= 1 << (n % 64);
    }
    let (ptr, maxnode) = if nodes.is_empty() {
        (std::ptr::null(), 0)
    } else {
        (mask.as_ptr(), 1024 + 1)
    };
    // SAFETY: the mask outlives the call and holds maxnode - 1 bits.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode as libc::c_ulong) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "set_mempolicy({mode}, nodes {nodes:?}): {}",
            std::io::Error::last_os_error()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_binding_to_the_first_node() {
        assert_eq!(parse_list("0-2,5,1\n").unwrap(), [0, 1, 2, 5]);
        assert!(parse_list("2-1").is_err());
        assert!(parse_list("x").is_err());
        let online = online_nodes();
        assert!(!online.is_empty());
        // In a thread of its own, so the test binary's other threads keep their CPUs.
        let first = online[0];
        std::thread::spawn(move || {
            bind_thread_cpus(&[first]).unwrap();
            set_mem_policy(mem_mode("bind").unwrap(), &[first]).unwrap();
            set_mem_policy(mem_mode("default").unwrap(), &[]).unwrap();
        })
        .join()
        .unwrap();
    }
}
