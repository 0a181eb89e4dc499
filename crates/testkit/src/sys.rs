//! Root, external tools, and running them.

use std::path::PathBuf;
use std::process::Command;

/// Whether /dev/shm is a tmpfs (memory that no disk writer beside a test slows).
pub fn shm_is_tmpfs() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            l.split_whitespace()
                .take(3)
                .eq(["tmpfs", "/dev/shm", "tmpfs"])
        })
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The path of an external tool, looking in PATH and then the sbin and bin directories
/// (a non-root PATH often lacks /usr/sbin, where mkfs and losetup live).
pub fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Whether `name` is installed.
pub fn have(name: &str) -> bool {
    tool(name).is_some()
}

/// Why a command a test runs gave nothing: not installed, not started (the error kept),
/// or failed (the command line and what it said).
#[derive(Debug, thiserror::Error)]
pub enum CmdError {
    #[error("{0} is not installed")]
    Missing(String),
    #[error("{name}: {source}")]
    Spawn {
        name: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command}: {output}")]
    Failed { command: String, output: String },
}

/// Runs `name args` and returns its trimmed stdout, or an error naming the command and
/// carrying its stderr.
pub fn try_sh(name: &str, args: &[&str]) -> Result<String, CmdError> {
    let prog = tool(name).ok_or_else(|| CmdError::Missing(name.to_string()))?;
    let out = Command::new(&prog)
        .args(args)
        .output()
        .map_err(|source| CmdError::Spawn {
            name: name.to_string(),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(CmdError::Failed {
            command: format!("{name} {}", args.join(" ")),
            output: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Runs `name args` and returns its trimmed stdout; panics when it fails.
#[track_caller]
pub fn sh(name: &str, args: &[&str]) -> String {
    try_sh(name, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `sh -c cmd` and returns its stdout (untrimmed); panics when it fails.
#[track_caller]
pub fn shell(cmd: &str) -> String {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The CPU time the machine's tasks spent waiting for a CPU from when it was made: the
/// kernel's pressure stall figure (`/proc/pressure/cpu`, `some`) times the number of CPUs,
/// since the kernel averages `some` over the CPUs. It bounds the scheduling delay any chain
/// of tasks met in that time (a task waiting on any CPU is counted there), so a
/// ground-truth test of time adds it to its bound: tight on a quiet machine, as loose as
/// the load made the truth. Without PSI it reads 0 and says so once.
pub struct CpuWait {
    start: Option<u64>,
}

/// A machine whose tasks waited for a CPU a quarter of a test's time or more
/// ([`CpuWait::busy_since`]) is too busy for the test to hold a model's rates against it: a
/// starved host leaves an emulated cache recovering and a throttle's budget unspent.
pub const BUSY: f64 = 0.25;

impl CpuWait {
    pub fn start() -> CpuWait {
        let start = cpu_some_total_us();
        if start.is_none() {
            eprintln!("testkit: no /proc/pressure/cpu: scheduling delay taken as 0");
        }
        CpuWait { start }
    }

    /// The share of the time since `started` that the machine's tasks spent waiting for a
    /// CPU ([`Self::us`] over the elapsed time): at [`BUSY`] or more a model's rates are
    /// no longer the host's to keep, and only what the run reported of itself is checked.
    pub fn busy_since(&self, started: std::time::Instant) -> f64 {
        self.us() / 1e6 / started.elapsed().as_secs_f64()
    }

    /// Microseconds of waiting for a CPU since `start`, over all CPUs.
    pub fn us(&self) -> f64 {
        match (self.start, cpu_some_total_us()) {
            (Some(a), Some(b)) => {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
                b.saturating_sub(a) as f64 * cpus as f64
            }
            _ => 0.0,
        }
    }
}

/// How far a rate measured under a blkio throttle may lie from its cap, as fractions
/// `(below, above)`, for `seconds` of measured passes (`passes` of them) during which the
/// machine's tasks waited `cpu_wait_s` for a CPU ([`CpuWait`]).
///
/// The throttle hands out its budget per slice (100 ms, the kernel's slice for a
/// rotational queue), counted from the slice's start. A process kept off the CPU leaves
/// budget unspent, which it may spend at once when it runs again, so a pass can hold up to
/// one slice's worth more than the cap when the machine was busy, and less when the process
/// waited for a CPU longer than its queue lasted. Both are bounded by the CPU wait measured
/// meanwhile: on a quiet machine the bound is the 2% the throttle gives, under load it
/// widens exactly as far as the load did.
pub fn throttle_bound(cpu_wait_s: f64, seconds: f64, passes: usize) -> (f64, f64) {
    let seconds = seconds.max(1e-9);
    let above = 0.02 + cpu_wait_s.min(0.1 * passes as f64) / seconds;
    let below = 0.02 + cpu_wait_s.min(seconds) / seconds;
    (below, above)
}

fn cpu_some_total_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("total="))?
        .parse()
        .ok()
}
