//! NUMA nodes: which are online, the CPUs of each, and binding the calling thread's CPUs
//! and memory to some of them (fio's `numa_cpu_nodes`, `numa_mem_policy`).

use std::fs;
use std::io;

/// Why a node list does not parse, or a thread could not be placed on its nodes.
#[derive(Debug, thiserror::Error)]
pub enum NumaError {
    /// Not node numbers (the whole list as given).
    #[error("'{0}': expected node numbers such as 0, 0-1 or 0,2")]
    NotNodes(String),
    /// A range such as `3-1`.
    #[error("'{0}': a range runs upwards")]
    Downwards(String),
    #[error("NUMA nodes {0:?} have no CPUs")]
    NoCpus(Vec<u32>),
    #[error("sched_setaffinity to NUMA nodes {nodes:?}: {source}")]
    Affinity {
        nodes: Vec<u32>,
        #[source]
        source: io::Error,
    },
    #[error("set_mempolicy({mode}, nodes {nodes:?}): {source}")]
    MemPolicy {
        mode: i32,
        nodes: Vec<u32>,
        #[source]
        source: io::Error,
    },
}

/// For the callers that still report errors as text (a job file's option, a job thread).
impl From<NumaError> for String {
    fn from(e: NumaError) -> String {
        e.to_string()
    }
}

/// A node list as Linux and fio write one: `0`, `0-3`, `0,2-3` (at most 1024 nodes).
pub fn parse_list(s: &str) -> Result<Vec<u32>, NumaError> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let n = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|v| *v < 1024)
                .ok_or_else(|| NumaError::NotNodes(s.to_string()))
        };
        let (lo, hi) = (n(lo)?, n(hi)?);
        if hi < lo {
            return Err(NumaError::Downwards(part.to_string()));
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
pub fn bind_thread_cpus(nodes: &[u32]) -> Result<(), NumaError> {
    let cpus = cpus_of(nodes);
    if cpus.is_empty() {
        return Err(NumaError::NoCpus(nodes.to_vec()));
    }
    // CPUs < 1024 as parsed: within the set.
    let mut set = rustix::thread::CpuSet::new();
    for c in cpus {
        set.set(c as usize);
    }
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| NumaError::Affinity {
        nodes: nodes.to_vec(),
        source: e.into(),
    })
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
pub fn set_mem_policy(mode: i32, nodes: &[u32]) -> Result<(), NumaError> {
    let mut mask = [0u64; 16];
    for &n in nodes {
        mask[n as usize / 64] |= 1 << (n % 64);
    }
    let (ptr, maxnode) = if nodes.is_empty() {
        (std::ptr::null(), 0)
    } else {
        (mask.as_ptr(), 1024 + 1)
    };
    // SAFETY: set_mempolicy(2) reads maxnode - 1 bits of `mask`, which holds them and
    // outlives the call (a null mask with maxnode 0 for no nodes); rustix has no wrapper.
    let rc = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, maxnode as libc::c_ulong) };
    if rc == 0 {
        Ok(())
    } else {
        Err(NumaError::MemPolicy {
            mode,
            nodes: nodes.to_vec(),
            source: io::Error::last_os_error(),
        })
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
