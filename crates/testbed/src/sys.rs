//! Small wrappers around the system: finding and running tools, sysfs, /proc/self/mountinfo,
//! processes in /proc, loop devices in /sys/block.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::error::TestbedError;

/// The Debian package that provides `tool`.
pub(crate) fn package_of(tool: &str) -> &'static str {
    match tool {
        "losetup" | "mount" | "umount" => "mount",
        "unshare" | "findmnt" => "util-linux",
        "mkfs.ext4" => "e2fsprogs",
        "mkfs.xfs" => "xfsprogs",
        "mkfs.btrfs" | "btrfs" => "btrfs-progs",
        "zfs-fuse" | "zpool" | "zfs" => "zfs-fuse",
        "sh" => "dash",
        _ => "?",
    }
}

pub use iolab_sys::find_tool;

/// Requires `tool`, naming what it is needed for.
pub(crate) fn require_tool(tool: &str, purpose: &str) -> Result<PathBuf, TestbedError> {
    find_tool(tool).ok_or_else(|| TestbedError::MissingTool {
        tool: tool.to_string(),
        package: package_of(tool),
        purpose: purpose.to_string(),
    })
}

/// Quotes one word for a POSIX shell, only when needed. Plan placeholders such as `<loop0>`
/// or `<base>/mnt` are left as they are.
pub(crate) fn shell_quote(word: &str) -> String {
    let safe = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | ',' | '+' | '@' | '%')
    };
    if !word.is_empty() && strip_placeholders(word).chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `word` without its `<name>` placeholders (names: lowercase letters, digits, `_`, `:`).
fn strip_placeholders(word: &str) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(start) = rest.find('<') {
        let Some(len) = rest[start..].find('>') else {
            break;
        };
        let name = &rest[start + 1..start + len];
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':');
        out.push_str(&rest[..start]);
        if !ok {
            out.push_str(&rest[start..start + len + 1]);
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// A command line as a shell would read it.
pub(crate) fn display_cmd(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `echo VALUE > FILE` line that shows a sysfs or cgroup write.
pub(crate) fn display_write(path: &str, value: &str) -> String {
    format!("echo {} > {}", shell_quote(value), shell_quote(path))
}

/// Runs `argv` (argv[0] is looked up with [`find_tool`]), returns stdout.
pub(crate) fn run(argv: &[String]) -> Result<String, TestbedError> {
    let out = command(argv)?
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestbedError::io(format!("running {}", display_cmd(argv)), e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(TestbedError::Command {
            command: display_cmd(argv),
            status: out.status.to_string(),
            stderr: summarize(&String::from_utf8_lossy(&out.stderr)),
        })
    }
}

/// Runs `argv`, ignoring its output, and says whether it succeeded.
pub(crate) fn run_ok(argv: &[&str]) -> bool {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    run(&argv).is_ok()
}

/// A `Command` for `argv` with argv[0] resolved.
pub(crate) fn command(argv: &[String]) -> Result<Command, TestbedError> {
    let tool = &argv[0];
    let path = require_tool(tool, "to build or remove a testbed")?;
    let mut c = Command::new(path);
    c.args(&argv[1..]);
    Ok(c)
}

/// A tool's error output in one line: all of it when short, else the first lines (where
/// mkfs says what is wrong, before its usage text) and the last ones.
pub(crate) fn summarize(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.len() <= 10 {
        lines.join("; ")
    } else {
        format!(
            "{}; …; {}",
            lines[..6].join("; "),
            lines[lines.len() - 3..].join("; ")
        )
    }
}

/// The last `n` non-empty lines of `text`, joined with "; ".
pub(crate) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("; ")
}

/// Reads a small text file (sysfs attribute), trimmed.
pub(crate) fn read_trim(path: impl AsRef<Path>) -> io::Result<String> {
    Ok(fs::read_to_string(path)?.trim().to_string())
}

/// Writes a sysfs or cgroup attribute in one write.
pub(crate) fn write_attr(path: impl AsRef<Path>, value: &str) -> io::Result<()> {
    use std::io::Write;
    let mut f = fs::OpenOptions::new().write(true).open(path)?;
    f.write_all(value.as_bytes())
}

/// The selected entry of a sysfs list such as `none [mq-deadline] kyber`.
pub(crate) fn bracketed(list: &str) -> Option<String> {
    let start = list.find('[')?;
    let end = list[start..].find(']')? + start;
    Some(list[start + 1..end].to_string())
}

/// The entries of a sysfs list such as `none [mq-deadline] kyber`.
pub(crate) fn list_entries(list: &str) -> Vec<String> {
    list.split_whitespace()
        .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
        .collect()
}

/// One line of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// Per-mount options, then the superblock options.
    pub options: String,
}

/// Parses mountinfo text (with iolab-env's parser, the one every crate shares).
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    iolab_env::parse_mountinfo(text)
        .into_iter()
        .map(|m| MountEntry {
            mount_point: PathBuf::from(m.mount_point),
            fstype: m.fs_type,
            source: m.source,
            options: format!("{},{}", m.mount_options, m.super_options),
        })
        .collect()
}

/// The mounts of this process's namespace, in mount order.
pub(crate) fn mounts() -> Vec<MountEntry> {
    fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default()
}

/// The topmost mount at `path`, if `path` is a mount point.
pub(crate) fn mount_at(path: &Path) -> Option<MountEntry> {
    mounts().into_iter().rev().find(|m| m.mount_point == path)
}

/// The mount point of the mount holding `path` (longest matching prefix).
pub(crate) fn mount_containing(path: &Path) -> Option<PathBuf> {
    mounts()
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|mp| path.starts_with(mp))
        .max_by_key(|mp| mp.as_os_str().len())
}

/// A process's start time (clock ticks since boot): `iolab_sys::process`'s reading.
pub(crate) fn proc_start_time(pid: i32) -> Option<u64> {
    iolab_sys::process::start_ticks(u32::try_from(pid).ok()?)
}

/// Whether `pid` is a live process (not a zombie).
pub(crate) fn proc_alive(pid: i32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next().map(str::to_string));
    !matches!(state.as_deref(), Some("Z") | Some("X") | None)
}

/// Whether `pid` is alive and started at `start_time` (guards against reused pids).
pub(crate) fn proc_is(pid: i32, start_time: Option<u64>) -> bool {
    proc_alive(pid) && (start_time.is_none() || proc_start_time(pid) == start_time)
}

pub(crate) fn proc_comm(pid: i32) -> Option<String> {
    read_trim(format!("/proc/{pid}/comm")).ok()
}

pub(crate) fn proc_cmdline(pid: i32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Every pid in /proc.
pub(crate) fn all_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live processes whose command name is `comm`.
pub(crate) fn pids_named(comm: &str) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter(|p| proc_comm(*p).as_deref() == Some(comm) && proc_alive(*p))
        .collect()
}

/// This process's pid and start time.
pub(crate) fn self_identity() -> (i32, Option<u64>) {
    let pid = std::process::id() as i32;
    (pid, proc_start_time(pid))
}

/// Sends `signal` to `pid` (errors ignored: the process may be gone).
pub(crate) fn signal(pid: i32, signal: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(p, signal);
    }
}

/// Waits until `done()` or `timeout`; true if `done()`.
pub(crate) fn wait_until(
    timeout: Duration,
    step: Duration,
    mut done: impl FnMut() -> bool,
) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        sleep(step);
    }
}

/// The backing file of loop device `dev` (`/dev/loop3`), without the " (deleted)" suffix.
pub(crate) fn loop_backing_file(dev: &Path) -> Option<PathBuf> {
    let name = dev.file_name()?.to_str()?;
    let text = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    let text = text.trim_end_matches('\n');
    let text = text.strip_suffix(" (deleted)").unwrap_or(text);
    Some(PathBuf::from(text))
}

/// Whether loop device `dev` is attached to `image`.
pub(crate) fn loop_backed_by(dev: &Path, image: &Path) -> bool {
    loop_backing_file(dev).is_some_and(|b| b == image)
}

/// Every loop device attached to `image`.
pub(crate) fn loops_backed_by(image: &Path) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.starts_with("loop"))
        .map(|n| Path::new("/dev").join(n))
        .filter(|d| loop_backed_by(d, image))
        .collect();
    out.sort();
    out
}

/// `major:minor` of block device `dev` from sysfs.
pub(crate) fn block_dev_numbers(dev: &Path) -> Option<(u32, u32)> {
    let name = dev.file_name()?.to_str()?;
    let text = read_trim(format!("/sys/block/{name}/dev")).ok()?;
    let (a, b) = text.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The sysfs queue/loop attribute path of a block device.
pub(crate) fn sysfs_attr(dev: &Path, attr: &str) -> PathBuf {
    let name = dev
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    Path::new("/sys/block").join(name).join(attr)
}

/// Where the cgroup v1 blkio hierarchy is mounted, if it is.
pub(crate) fn blkio_root() -> Option<PathBuf> {
    let fixed = Path::new("/sys/fs/cgroup/blkio");
    if fixed.join("blkio.throttle.read_bps_device").exists() {
        return Some(fixed.to_path_buf());
    }
    mounts()
        .into_iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "blkio"))
        .map(|m| m.mount_point)
        .filter(|p| p.join("blkio.throttle.read_bps_device").exists())
}

pub(crate) use iolab_sys::is_root;

/// A path as text (lossy, for command lines).
pub(crate) fn text(p: impl AsRef<OsStr>) -> String {
    p.as_ref().to_string_lossy().into_owned()
}

/// A random lowercase-alphanumeric suffix.
pub(crate) fn random_suffix(n: usize) -> String {
    (0..n)
        .map(|_| {
            let i = fastrand::usize(..36);
            char::from_digit(i as u32, 36).unwrap_or('x')
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_parsing_and_escapes() {
        let text = "44 27 254:0 /var/tmp/x /var/tmp/a\\040b rw,relatime shared:1 - ext4 /dev/vda rw,discard\n\
                    71 44 0:40 / /mnt/z rw,relatime - fuse.zfs pool/ds rw,user_id=0\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].mount_point, PathBuf::from("/var/tmp/a b"));
        assert_eq!(m[0].fstype, "ext4");
        assert_eq!(m[0].options, "rw,relatime,rw,discard");
        assert_eq!(m[1].source, "pool/ds");
    }

    #[test]
    fn lists_and_quoting() {
        assert_eq!(
            bracketed("none [mq-deadline] kyber").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(list_entries("[none] bfq"), vec!["none", "bfq"]);
        assert_eq!(shell_quote("/dev/loop0"), "/dev/loop0");
        assert_eq!(shell_quote("write through"), "'write through'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("<loop0>"), "<loop0>");
        assert_eq!(shell_quote("$x"), "'$x'");
        assert_eq!(shell_quote("<base>/mnt"), "<base>/mnt");
        assert_eq!(shell_quote("a>b"), "'a>b'");
        assert_eq!(tail("a\n\nb\nc\n", 2), "b; c");
        let long: String = (0..20).map(|i| format!("l{i}\n")).collect();
        assert_eq!(summarize(&long), "l0; l1; l2; l3; l4; l5; …; l17; l18; l19");
    }

    #[test]
    fn own_process_is_alive() {
        let (pid, start) = self_identity();
        assert!(start.is_some());
        assert!(proc_is(pid, start));
        assert!(!proc_is(pid, start.map(|s| s + 1)));
    }
}
