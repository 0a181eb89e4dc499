//! What to run: fio-style job shapes, size and duration parsing, and the built-in presets.
//!
//! The only files it reads are fio job files and the files they include (through
//! `iolab-sys`'s bounded reader); it writes none. It turns user input (`--rw randread --bs 4k`,
//! `cdm`, `atto`) into a validated list of [`TestSpec`]s that the engine executes.

pub mod engopt;
pub mod fio;
pub mod fiojob;
pub mod icf;
pub mod iometer;
mod job;
pub mod pattern;
mod presets;
pub mod tomlkey;
pub mod trace;
mod units;

pub use job::{names as value_names, or_list, parse_value};
pub use job::{
    AccessLine, CmdPrio, Content, DataPattern, EngineKind, IoDir, JobOption, JobOptionArgs,
    JobSpec, Numa, Pace, Prio, RunSettings, Rw, Scope, SyncMode, TestSpec, Zone, IODEPTH,
    JOB_OPTIONS, NUMJOBS, RWMIXREAD,
};
pub use job::{Clones, LatTarget, Strided, TestIo};
pub use pattern::Pattern;
pub use presets::{expand_preset, preset_info, preset_names, PresetDefaults, PresetInfo, PRESETS};
pub use units::{
    format_bytes, format_bytes_exact, format_duration, format_size_short, parse_age,
    parse_duration, parse_size, SpecError, MAX_DURATION, MAX_SIZE,
};
