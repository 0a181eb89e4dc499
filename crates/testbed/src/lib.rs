//! Testbeds: builds the storage configurations a study compares (a directory, or loop devices
//! with ext4, xfs, btrfs or zfs-fuse on them, queue knobs and blkio throttles), describes them,
//! and tears them down again, even after a crash.
//!
//! A [`TestbedSpec`] (deserialised from TOML, unknown keys refused) is checked by [`validate`]
//! (no side effects), shown by [`plan`] (the exact commands, for `--dry-run`) and built by
//! [`build`], which returns a [`Testbed`]: where workloads run ([`Testbed::work_dir`]), the
//! devices, the throttle cgroup a workload joins, and [`Testbed::describe`] for the results.
//!
//! Teardown is the point of the design. Every resource is appended to a JSON-lines
//! [`StateFile`] before it is created (and confirmed after), so a process killed at any
//! moment leaves a journal from which [`cleanup_all`] removes exactly what iolab created and
//! nothing else. A failed or interrupted build removes its partial work; [`Testbed::teardown`]
//! and `Drop` remove everything in reverse order and restore the sysfs knobs (loop devices keep
//! them after detach). The format and the rules are described in `docs/testbeds.md`.
//!
//! Modules: `spec` (the TOML shape and validation), `commands` (every command line, shared by
//! plan and build), `build`, `testbed` (the built object, describe, teardown), `state` (the
//! testbed's journal; `journal`: the file, lock, lines and dead owner's side it shares with
//! `runstate`), `remove` (removing one resource, idempotently), `cleanup` (dead owners), `sys`
//! (tools, sysfs, mountinfo, /proc), `device` (kind = "device": the checks before a user's
//! device is formatted, the signatures a build made), `emulated` (emulated disks: the `iolab emudisk serve`
//! daemon under each image, its FUSE mount), `runstate` (what a single `iolab run` creates, recorded
//! the same way, and its cleanup).

mod build;
mod cleanup;
mod commands;
mod device;
mod emulated;
mod error;
mod journal;
mod remove;
pub mod runstate;
mod spec;
mod state;
mod sys;
mod testbed;
mod trust;

pub use build::build;
pub use cleanup::{cleanup_all, Report};
pub use commands::{image_parent, plan};
pub use device::{check_devices, describe_device, Signature};
pub use error::TestbedError;
pub use spec::{
    validate, ByteRate, DeviceConsent, Devices, Fs, Kind, PropValue, Raid, TestbedSpec, Throttle,
    Vdevs, WriteCache, ZfsDaemonSpec, MAX_DEVICES,
};
pub use state::{Resource, StateFile, STATE_VERSION};
pub use sys::find_tool;
pub use testbed::{
    Description, Device, DeviceFacts, KnobChange, MountFacts, Testbed, ZfsFacts, ZfsInfo,
};
