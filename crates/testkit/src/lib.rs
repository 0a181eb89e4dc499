//! The test kit owns what iolab's test crates share: skips that are counted and that fail
//! the run under `IOLAB_REQUIRE_DEVICE_TESTS=1`, root and tool checks, loop devices, mounts
//! and cgroups torn down on drop, scratch directories, and running the `iolab` binary.
//!
//! It is a dev-dependency only. Helpers that serve a single test file stay in that file.
//!
//! - [`skip`]: [`skip()`](skip::skip), [`skip!`], [`skip_allowed!`], [`require_root`],
//!   [`require_tools`], [`optional_tools`], [`require_devices`].
//! - [`sys`]: [`is_root`], [`tool`], [`have`], [`sh`], [`try_sh`], [`shell`], [`CpuWait`] (the
//!   scheduling delay a ground-truth test adds to its bound), [`throttle_bound`].
//! - [`dev`]: [`Loop`], [`Mount`], [`Cgroup`], [`QueueSetting`], [`device_lock`].
//! - [`emudisk`]: [`EmuDisk`], an emulated disk (`iolab emudisk serve`) with a loop device.
//! - [`scratch`]: [`scratch_dir`] (on the build directory's filesystem, not a tmpfs).
//! - [`iolab`]: [`Sandbox`] and [`Out`], for running the built binary.
//! - [`fuzz`]: a bounded mutation loop over a corpus for the text parsers.
//! - [`postgres`]: [`PgServer`], a throwaway PostgreSQL server on a unix socket, one per
//!   test binary, a database for each test ([`require_postgres`]).
//! - [`json`] and [`data`]: field access that names what is missing; reproducible bytes.

pub mod data;
pub mod dev;
pub mod emudisk;
pub mod fuzz;
pub mod iolab;
pub mod json;
pub mod postgres;
pub mod scratch;
pub mod skip;
pub mod sys;

pub use data::{median, random_bytes, DBENCH_TINY_LOADFILE, KIB, MIB};
pub use dev::{
    device_lock, mkfs_ext4_initialised, zfs_machine_lock, Cgroup, Loop, Mount, QueueSetting,
    QuietDir,
};
pub use emudisk::EmuDisk;
pub use iolab::{table_part, Out, Sandbox};
pub use json::{arr, get, num, read_json, string, uint, warning_codes};
pub use postgres::{require_postgres, PgServer};
pub use scratch::{scratch_dir, scratch_root};
pub use skip::{
    optional_tools, require_devices, require_emudisk, require_root, require_tools, skip,
    skip_allowed, skips, REQUIRE_VAR,
};
pub use sys::{
    have, is_root, sh, shell, shm_is_tmpfs, throttle_bound, tool, try_sh, CpuWait, BUSY,
};
