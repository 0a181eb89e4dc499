//! One job's shape in fio's vocabulary (`rw`, `bs`, `iodepth`, `numjobs`, `rwmixread`) and the
//! settings shared by every test of a run.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::units::{format_size_short, SpecError};

/// Access pattern, named as fio names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lower")]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    /// Sequential mixed reads and writes (`rwmixread` % reads).
    #[value(alias = "readwrite")]
    Rw,
    /// Random mixed reads and writes (`rwmixread` % reads).
    RandRw,
}

impl Rw {
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite | Rw::RandRw)
    }
    pub fn is_mixed(self) -> bool {
        matches!(self, Rw::Rw | Rw::RandRw)
    }
    pub fn writes(self) -> bool {
        !matches!(self, Rw::Read | Rw::RandRead)
    }
    pub fn reads(self) -> bool {
        !matches!(self, Rw::Write | Rw::RandWrite)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::Rw => "rw",
            Rw::RandRw => "randrw",
        }
    }
}

impl fmt::Display for Rw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Rw {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_value("rw", s)
    }
}

/// A value of an enumerated option by its name or an alias (its clap declaration, the one
/// the command line, study files and fio's job files read), or the error listing the names.
pub fn parse_value<T: ValueEnum>(key: &str, s: &str) -> Result<T, SpecError> {
    T::from_str(s, false).map_err(|_| SpecError::new(key, s, format!("expected {}", names::<T>())))
}

/// The names of an enumerated option's values: "a, b or c".
pub fn names<T: ValueEnum>() -> String {
    let names: Vec<String> = T::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| p.get_name().to_string())
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    }
}

/// Direction of one I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lower")]
pub enum IoDir {
    Read,
    Write,
}

/// Which engine issues the I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    IoUring,
    Psync,
    /// Completes every I/O at once without touching the target (fio's null ioengine).
    Null,
    /// Each write sets the file's length to its offset (fio's ftruncate ioengine).
    Ftruncate,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Psync => "psync",
            EngineKind::Null => "null",
            EngineKind::Ftruncate => "ftruncate",
        }
    }
}

/// What write buffers contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lower")]
pub enum DataPattern {
    /// Incompressible random bytes, re-stamped before every write so no two blocks repeat.
    Random,
    /// All 0x00 (CrystalDiskMark's "All 0x00" test data).
    #[value(alias = "zero", alias = "0x00")]
    Zeros,
}

impl FromStr for DataPattern {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_value("data", s)
    }
}

/// Which call makes written data durable when `fsync_every`/`end_fsync` ask for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    Fsync,
    Fdatasync,
}

/// One line of an Iometer access specification: this share of the I/Os has this transfer
/// size, read percentage, random percentage and alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessLine {
    /// Percent of all I/Os (the lines of a spec add up to 100).
    pub share: u8,
    /// Transfer size in bytes.
    pub size: u64,
    /// Percent of this line's I/Os that read.
    pub read_pct: u8,
    /// Percent of this line's I/Os at random offsets (the rest continue sequentially).
    pub random_pct: u8,
    /// Offsets are multiples of this (bytes).
    pub align: u64,
}

/// The shape of one job: what fio calls a job section, minus the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub rw: Rw,
    /// Block size in bytes.
    pub bs: u64,
    pub iodepth: u32,
    pub numjobs: u32,
    /// Percentage of reads in a mixed job (ignored otherwise).
    pub rwmixread: u8,
    /// Sync after every N writes of each job (0 = never).
    pub fsync_every: u32,
    pub sync_mode: SyncMode,
    /// Sync once at the end of a write pass; its time counts in the pass.
    pub end_fsync: bool,
    /// Stop a pass after this many bytes in total (ATTO covers its region once per size).
    pub io_limit: Option<u64>,
    /// An Iometer access specification; when not empty it replaces `rw`, `bs` and
    /// `rwmixread` per I/O (`bs` is then the largest transfer size).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<AccessLine>,
    /// Rate limits and think time of each job thread (fio's rate, rate_iops, thinktime).
    #[serde(default, skip_serializing_if = "Pace::is_none")]
    pub pace: Pace,
    /// Blocks skipped after each sequential I/O (negative: stepped back), fio's
    /// `rw=read:8k` over `bs`; 0: contiguous.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq_skip: i64,
    /// Random offsets Zipf-distributed with this exponent (fio's
    /// `random_distribution=zipf:THETA`); None: uniform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf: Option<f64>,
    /// Buffered passes start by dropping the target's clean cached pages (fio's
    /// `invalidate=1`, posix_fadvise DONTNEED); iolab's own presets never do.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalidate: bool,
    /// Random offsets drawn by zones (fio's `random_distribution=zoned:A/S:...`): the
    /// zones split the region in order, each holding `size`% of it and getting `access`%
    /// of the random I/Os, uniform within it; empty: uniform over the region.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<Zone>,
    /// Each of the `numjobs` threads' series is kept as well as their sum (fio's per-job
    /// logs of a `numjobs` job: `TimeSeries::threads`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thread_series: bool,
}

/// One zone of a zoned random distribution (percentages of I/Os and of the region).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zone {
    pub access: u8,
    pub size: u8,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// fio's pacing of one job thread; all zero: none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pace {
    /// At most this many bytes per second (fio's `rate`); 0: no limit.
    pub rate_bytes: u64,
    /// At most this many I/Os per second (fio's `rate_iops`); 0: no limit.
    pub rate_iops: u64,
    /// Idle this long, in microseconds, once every `think_blocks` I/Os have completed
    /// (fio's `thinktime`, `thinktime_blocks`); 0: never.
    pub think_us: u64,
    pub think_blocks: u32,
    /// The gaps between paced I/Os are exponentially distributed around the rate's mean
    /// gap (fio's `rate_process=poisson`), rather than even.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub poisson: bool,
}

impl Pace {
    pub fn is_none(&self) -> bool {
        *self == Pace::default()
    }
}

impl JobSpec {
    pub fn new(rw: Rw, bs: u64, iodepth: u32, numjobs: u32) -> Self {
        JobSpec {
            rw,
            bs,
            iodepth,
            numjobs,
            rwmixread: 50,
            fsync_every: 0,
            sync_mode: SyncMode::Fsync,
            end_fsync: false,
            io_limit: None,
            access: Vec::new(),
            pace: Pace::default(),
            seq_skip: 0,
            zipf: None,
            invalidate: false,
            zones: Vec::new(),
            thread_series: false,
        }
    }

    /// Checks the ranges iolab supports: bs 512 B..64 MiB (a multiple of 512), iodepth
    /// 1..256, numjobs 1..64, rwmixread 0..100.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.bs < 512 || self.bs > 64 << 20 {
            return Err(SpecError::new(
                "bs",
                self.bs.to_string(),
                "block size must be between 512 B and 64 MiB",
            ));
        }
        if !self.bs.is_multiple_of(512) {
            return Err(SpecError::new(
                "bs",
                self.bs.to_string(),
                "block size must be a multiple of 512 bytes",
            ));
        }
        if !(1..=256).contains(&self.iodepth) {
            return Err(SpecError::new(
                "iodepth",
                self.iodepth.to_string(),
                "must be between 1 and 256",
            ));
        }
        if !(1..=64).contains(&self.numjobs) {
            return Err(SpecError::new(
                "numjobs",
                self.numjobs.to_string(),
                "must be between 1 and 64",
            ));
        }
        if !self.access.is_empty() {
            let total: u32 = self.access.iter().map(|l| l.share as u32).sum();
            if total != 100 {
                return Err(SpecError::new(
                    "access",
                    total.to_string(),
                    "the shares of an access specification must add up to 100",
                ));
            }
            for l in &self.access {
                if l.size < 512 || l.size > 64 << 20 || !l.size.is_multiple_of(512) {
                    return Err(SpecError::new(
                        "size",
                        l.size.to_string(),
                        "transfer sizes must be multiples of 512 B up to 64 MiB",
                    ));
                }
                if l.read_pct > 100 || l.random_pct > 100 {
                    return Err(SpecError::new(
                        "read/random",
                        format!("{}/{}", l.read_pct, l.random_pct),
                        "percentages between 0 and 100",
                    ));
                }
                if l.align == 0 || !l.align.is_multiple_of(512) {
                    return Err(SpecError::new(
                        "align",
                        l.align.to_string(),
                        "alignment must be a positive multiple of 512 bytes",
                    ));
                }
            }
        }
        if self.seq_skip.unsigned_abs() > 1 << 40 {
            return Err(SpecError::new(
                "rw",
                self.seq_skip.to_string(),
                "the skip between sequential I/Os is larger than any region",
            ));
        }
        if let Some(t) = self.zipf {
            if !(t > 0.0 && t <= 100.0) || t == 1.0 || !self.access.is_empty() {
                return Err(SpecError::new(
                    "random_distribution",
                    t.to_string(),
                    "a Zipf exponent above 0, other than 1, up to 100, for a job without an \
                     access specification",
                ));
            }
        }
        if !self.zones.is_empty() {
            let access: u32 = self.zones.iter().map(|z| z.access as u32).sum();
            let size: u32 = self.zones.iter().map(|z| z.size as u32).sum();
            if access != 100 || size != 100 || self.zones.iter().any(|z| z.size == 0) {
                return Err(SpecError::new(
                    "random_distribution",
                    format!("zoned ({access}% of I/Os over {size}% of the region)"),
                    "zones of a positive size whose I/O shares and sizes each add up to 100",
                ));
            }
            if self.zipf.is_some() {
                return Err(SpecError::new(
                    "random_distribution",
                    "zoned and zipf",
                    "one distribution per job",
                ));
            }
        }
        if self.rwmixread > 100 {
            return Err(SpecError::new(
                "rwmixread",
                self.rwmixread.to_string(),
                "a percentage between 0 and 100",
            ));
        }
        Ok(())
    }

    /// CrystalDiskMark-style short name: `SEQ1M Q8T1`, `RND4K Q32T16`.
    pub fn cdm_name(&self) -> String {
        let kind = if self.rw.is_random() { "RND" } else { "SEQ" };
        format!(
            "{kind}{} Q{}T{}",
            format_size_short(self.bs),
            self.iodepth,
            self.numjobs
        )
    }
}

/// One test of a run: a named job. Tests that share a `group` are shown on one table row
/// (CrystalDiskMark's read and write of `SEQ1M Q8T1`, ATTO's read and write of one size).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSpec {
    /// Unique within the run, e.g. `SEQ1M Q8T1 Read`.
    pub name: String,
    /// Row label, e.g. `SEQ1M Q8T1`.
    pub group: String,
    pub job: JobSpec,
}

/// Settings shared by every test of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// Size of the test region (test file size, or the part of a device used).
    pub size: u64,
    /// Length of each pass.
    pub duration: Duration,
    /// Measured passes per test.
    pub runs: u32,
    /// Unscored warm-up passes per test, run before the measured ones.
    pub warmup_passes: u32,
    /// Length of each warm-up pass.
    pub warmup_duration: Duration,
    /// Unmeasured time at the start of every pass (fio's ramp_time).
    #[serde(default)]
    pub ramp: Duration,
    pub engine: EngineKind,
    /// O_DIRECT (true) or through the page cache (false).
    pub direct: bool,
    pub data: DataPattern,
    /// io_uring: register the job's buffers with the kernel.
    pub fixedbufs: bool,
    /// io_uring: register the job's file with the kernel.
    pub registerfiles: bool,
}
