//! The emulated disk: a device model (fixed service time, HDD, SSD, a volatile write cache,
//! injected errors, power loss) served as the one image file of a FUSE filesystem, for a loop
//! device (`--direct-io=on`) to sit on; its control socket and its stats file.
//!
//! Layout of a running disk's directory `DIR` (made by the caller): `DIR/mnt` is the FUSE
//! mount point holding the one file [`IMAGE_NAME`], `DIR/ctl.sock` the control socket
//! ([`ctl`]), `DIR/stats.json` the parameters and the I/O counts ([`Stats`]), refreshed every
//! second and at exit, `DIR/ready` written once the mount answers. The data lives in a sparse
//! backing file (any path) plus the model's volatile cache in memory. [`serve`] runs the
//! daemon (`iolab emudisk serve`); `docs/testbeds.md` describes the models and their limits.

pub mod ctl;
mod device;
mod error;
mod fs;
mod model;
mod serve;
mod spec;

pub use device::{Device, PowerLoss, Stats};
pub use error::EmudiskError;
pub use serve::{serve, ServeArgs};
pub use spec::{validate, EmuSpec, ErrorRule, ModelKind, Params, SpecIssue, WriteCacheMode};

/// The name of the image file in the FUSE mount.
pub const IMAGE_NAME: &str = "disk.img";
/// The FUSE subtype: the mount shows as `fuse.iolab-emudisk` in /proc/self/mountinfo.
pub const FS_SUBTYPE: &str = "iolab-emudisk";
