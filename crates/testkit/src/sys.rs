//! Root, external tools, and running them.

use std::path::PathBuf;
use std::process::Command;

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

/// Runs `name args` and returns its trimmed stdout, or an error naming the command and
/// carrying its stderr.
pub fn try_sh(name: &str, args: &[&str]) -> Result<String, String> {
    let prog = tool(name).ok_or_else(|| format!("{name} is not installed"))?;
    let out = Command::new(&prog)
        .args(args)
        .output()
        .map_err(|e| format!("{name}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{name} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
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
