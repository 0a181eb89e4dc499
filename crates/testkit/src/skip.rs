//! Skips that are counted, and that fail the run when device tests are required.
//!
//! A test that cannot run here calls [`skip()`] (or the [`skip!`](crate::skip!) macro, which
//! also returns from the test). It prints `skipped: <reason>` and counts the skip; with
//! `IOLAB_REQUIRE_DEVICE_TESTS=1` (set by `.ci/run` as root) it panics naming the reason
//! instead, so a run can never pass by skipping. [`skip_allowed()`] is for the few facts
//! of a machine that the test suite's setup cannot provide (an optional package such as
//! zfs-fuse, a build directory that happens to share /dev/shm's filesystem): it never
//! fails. With `IOLAB_SKIP_LOG=FILE` every skip is also appended to FILE, one per line.

use std::fmt::Display;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::MutexGuard;

use crate::dev::device_lock;
use crate::sys::{is_root, tool};

/// The environment variable that turns every [`skip()`] into a failure.
pub const REQUIRE_VAR: &str = "IOLAB_REQUIRE_DEVICE_TESTS";

static SKIPS: AtomicUsize = AtomicUsize::new(0);

/// Whether skips are failures in this run (`IOLAB_REQUIRE_DEVICE_TESTS=1`).
pub fn required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

/// How many tests of this test binary have skipped so far.
pub fn skips() -> usize {
    SKIPS.load(Ordering::Relaxed)
}

fn record(kind: &str, reason: &str) {
    let n = SKIPS.fetch_add(1, Ordering::Relaxed) + 1;
    let test = std::thread::current().name().unwrap_or("?").to_string();
    println!("{kind}: {reason} [{test}; skip {n} of this test binary]");
    if let Some(log) = std::env::var_os("IOLAB_SKIP_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{kind}: {test}: {reason}");
        }
    }
}

/// Skips the calling test for `reason`: prints and counts it, or panics naming the reason
/// when `IOLAB_REQUIRE_DEVICE_TESTS=1`. The caller returns afterwards.
#[track_caller]
pub fn skip(reason: impl Display) {
    let reason = reason.to_string();
    if required() {
        panic!("test needed but would skip: {reason} ({REQUIRE_VAR}=1 makes every skip a failure)");
    }
    record("skipped", &reason);
}

/// Skips for a reason the suite's setup cannot remove (an optional package, a property of
/// this machine's layout). Printed and counted, never a failure.
pub fn skip_allowed(reason: impl Display) {
    record("skipped (allowed)", &reason.to_string());
}

/// Prints and counts a skip (a failure under `IOLAB_REQUIRE_DEVICE_TESTS=1`), then returns
/// from the calling function: `skip!("{tool} is not installed")`. An optional first
/// argument `=> value` is what the function returns: `skip!(=> None, "no btrfs")`.
#[macro_export]
macro_rules! skip {
    ($($arg:tt)+) => {
        $crate::skip_and_return!($crate::skip::skip, $($arg)+)
    };
}

/// Like [`skip!`] for an allowed skip ([`skip_allowed()`]): never a failure.
#[macro_export]
macro_rules! skip_allowed {
    ($($arg:tt)+) => {
        $crate::skip_and_return!($crate::skip::skip_allowed, $($arg)+)
    };
}

/// The body of [`skip!`] and [`skip_allowed!`]: calls `$f` with the formatted reason, then
/// returns `$ret` (or nothing).
#[doc(hidden)]
#[macro_export]
macro_rules! skip_and_return {
    ($f:path, => $ret:expr, $($arg:tt)+) => {{
        $f(format!($($arg)+));
        return $ret;
    }};
    ($f:path, $($arg:tt)+) => {{
        $f(format!($($arg)+));
        return;
    }};
}

/// True as root; otherwise skips (see [`skip()`]) saying `what` needs root.
#[track_caller]
pub fn require_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(format!("{what} needs root"));
    false
}

/// The first of `tools` that is not installed.
fn missing<'a>(tools: &[&'a str]) -> Option<&'a str> {
    tools.iter().copied().find(|t| tool(t).is_none())
}

/// True when every tool is installed; otherwise skips naming the first missing one.
#[track_caller]
pub fn require_tools(tools: &[&str]) -> bool {
    let absent = missing(tools);
    if let Some(t) = absent {
        skip(format!("{t} is not installed"));
    }
    absent.is_none()
}

/// True when every tool of an optional package (one test.sh may fail to install, such as
/// zfs-fuse) is installed; otherwise an allowed skip naming the first missing one.
pub fn optional_tools(tools: &[&str]) -> bool {
    let absent = missing(tools);
    if let Some(t) = absent {
        skip_allowed(format!("{t} is not installed (an optional package)"));
    }
    absent.is_none()
}

/// For tests that attach loop devices: root, losetup, the loop driver and `tools`. Returns
/// the device lock (device tests of one binary run one at a time), or `None` after a skip.
#[track_caller]
pub fn require_devices(tools: &[&str]) -> Option<MutexGuard<'static, ()>> {
    if !require_root("attaching loop devices") {
        return None;
    }
    let mut all = vec!["losetup"];
    all.extend_from_slice(tools);
    if !require_tools(&all) {
        return None;
    }
    if !std::path::Path::new("/dev/loop-control").exists() {
        skip("no /dev/loop-control (loop driver missing)");
        return None;
    }
    Some(device_lock())
}

/// For tests of the emulated disk: [`require_devices`] (root, losetup, the loop driver,
/// `tools`) and /dev/fuse (the disk is a FUSE file). The device lock, or `None` after a
/// skip.
#[track_caller]
pub fn require_emudisk(tools: &[&str]) -> Option<MutexGuard<'static, ()>> {
    let lock = require_devices(tools)?;
    if !std::path::Path::new("/dev/fuse").exists() {
        skip("no /dev/fuse (the emulated disk is a FUSE file)");
        return None;
    }
    Some(lock)
}
