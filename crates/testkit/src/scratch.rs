//! Scratch directories on the build directory's filesystem.

use std::path::PathBuf;

use tempfile::TempDir;

/// `target/tmp` of the build running this test (what cargo calls `CARGO_TARGET_TMPDIR`):
/// found from the test executable, `target/<profile>/deps/<test>`; the system temporary
/// directory when the layout is different.
pub fn scratch_root() -> PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("tmp")))
        .filter(|d| std::fs::create_dir_all(d).is_ok())
        .unwrap_or_else(std::env::temp_dir);
    dir
}

/// A fresh directory under [`scratch_root`], removed on drop. Unlike `/tmp`, which may be a
/// tmpfs, it is on a disk filesystem that supports O_DIRECT.
pub fn scratch_dir() -> TempDir {
    tempfile::tempdir_in(scratch_root()).unwrap()
}
