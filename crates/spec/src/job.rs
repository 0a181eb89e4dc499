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
    or_list(&names)
}

/// Names as a message lists them: "a, b or c" ("a" alone, "" for none).
pub fn or_list<S: AsRef<str>>(names: &[S]) -> String {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
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

/// Which engine issues the I/O: its name, as runs store it. Each engine declares its own
/// ([`EngineKind::declare`], in its description in its own file, iolab-engine's
/// `engines/`); everything else gets one by looking a name up in the installed catalogue
/// ([`EngineKind::named`], [`crate::engopt::install`]), and asks the engine's description
/// ([`EngineKind::desc`]) what it does. Serialised as its name; an unknown name does not
/// deserialise (the error names it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EngineKind(&'static str);

impl EngineKind {
    /// An engine's name, for its description only (`DESC.kind` in its file).
    pub const fn declare(name: &'static str) -> EngineKind {
        EngineKind(name)
    }

    /// The installed engine of this name (not an alias: the name runs store).
    pub fn named(name: &str) -> Option<EngineKind> {
        crate::engopt::engines()
            .iter()
            .find(|d| d.kind.0 == name)
            .map(|d| d.kind)
    }

    /// What the engine is and does, as its file declares it.
    pub fn desc(self) -> &'static crate::engopt::EngineDesc {
        crate::engopt::engines()
            .iter()
            .find(|d| d.kind == self)
            .expect("an EngineKind is an installed engine's")
    }

    /// Whether its writes are writes of the job's buffers (false: each makes another call,
    /// ftruncate, a file's create...: there is no data to verify).
    pub fn moves_data(self) -> bool {
        self.desc().moves_data
    }

    /// Whether each I/O is a call on one file of a set in a directory (fio's filecreate,
    /// filestat, filedelete).
    pub fn file_set(self) -> bool {
        self.desc().file_set.is_some()
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for EngineKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for EngineKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        EngineKind::named(&name).ok_or_else(|| {
            let known: Vec<&str> = crate::engopt::engines().iter().map(|d| d.kind.0).collect();
            serde::de::Error::custom(format!(
                "unknown engine '{name}' (this iolab knows {})",
                crate::or_list(&known)
            ))
        })
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

/// A general option of a job, declared once for everything that reads it: `iolab run`'s
/// `--NAME N` (`-` for fio's `_`) ([`JobOptionArgs`]: help, range, the refusal where no test takes it; help,
/// man page and completions come from clap), export-fio's job section (`NAME=N`), fio's
/// job files (`NAME=N` read onto the job: `fiojob`), the JSON document's test (`NAME`: the
/// value, or null where it does not apply), the CSV column `NAME` and, for an option with
/// `header` words, every format's header when a test has a value other than `default`.
#[derive(Debug, Clone, Copy)]
pub struct JobOption {
    /// fio's option name, `iolab run`'s `--NAME`, the JSON key and the CSV column.
    pub name: &'static str,
    pub help: &'static str,
    /// The smallest and largest value `--NAME` and a job file take.
    pub min: u64,
    pub max: u64,
    /// A job's value when the option is not given.
    pub default: u64,
    /// Which block presets take `--NAME`.
    pub scope: Scope,
    /// What it does, for the refusal when no test of the run takes it: "--NAME {does}, and
    /// PRESET has none".
    pub does: &'static str,
    /// The words a run's header shows for a value other than `default` (None: the header
    /// does not show it; the tests' own lines do).
    pub header: Option<fn(u64) -> String>,
    /// Its value in a job, `None` where it does not apply.
    pub get: fn(&JobSpec) -> Option<u64>,
    /// Sets it in a job (a value within `min..=max`).
    pub set: fn(&mut JobSpec, u64),
}

/// Which block presets take a [`JobOption`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every block preset: set on each of its tests where the option applies (refused when
    /// none does).
    Tests,
    /// Part of the job's shape, which only the presets that take one build their tests
    /// from (`custom`, `iometer`); the others refuse it with them named.
    Shape,
}

/// `--iodepth`: I/Os in flight per job.
pub const IODEPTH: JobOption = JobOption {
    name: "iodepth",
    help: "I/Os in flight per job (iometer: outstanding I/Os per worker)",
    min: 1,
    max: 256,
    default: 1,
    scope: Scope::Shape,
    does: "sets the I/Os in flight per job",
    header: None,
    get: |j| Some(u64::from(j.iodepth)),
    set: |j, v| j.iodepth = u32::try_from(v).unwrap_or(u32::MAX),
};

/// `--numjobs`: parallel jobs, each with its own thread.
pub const NUMJOBS: JobOption = JobOption {
    name: "numjobs",
    help: "Parallel jobs, each with its own thread and ring (iometer: workers)",
    min: 1,
    max: 64,
    default: 1,
    scope: Scope::Shape,
    does: "sets the parallel jobs",
    header: None,
    get: |j| Some(u64::from(j.numjobs)),
    set: |j, v| j.numjobs = u32::try_from(v).unwrap_or(u32::MAX),
};

/// `--rwmixread`: the read share of a mixed test, in percent.
pub const RWMIXREAD: JobOption = JobOption {
    name: "rwmixread",
    help: "Percentage of reads in a mixed test (default 50; cdm's --mix uses 70)",
    min: 0,
    max: 100,
    default: 50,
    scope: Scope::Tests,
    does: "sets the read share of mixed tests",
    header: None,
    get: |j| j.rw.is_mixed().then_some(u64::from(j.rwmixread)),
    set: |j, v| j.rwmixread = u8::try_from(v).unwrap_or(u8::MAX),
};

impl JobOption {
    /// The option named `name` (fio's name), if it is one.
    pub fn named(name: &str) -> Option<&'static JobOption> {
        JOB_OPTIONS.iter().find(|o| o.name == name)
    }

    /// The header's words for this option over `jobs`: each value other than the default
    /// once, in the order met (empty for an option without header words).
    pub fn header_words<'a>(&self, jobs: impl IntoIterator<Item = &'a JobSpec>) -> Vec<String> {
        let Some(words) = self.header else {
            return Vec::new();
        };
        let mut seen = Vec::new();
        for v in jobs.into_iter().filter_map(self.get) {
            if v != self.default && !seen.contains(&v) {
                seen.push(v);
            }
        }
        seen.into_iter().map(words).collect()
    }

    /// `iolab run`'s option: fio's name with `-` for `_` (`--fsync-on-close` for
    /// `fsync_on_close`), as iolab's options are spelt.
    pub fn flag(&self) -> String {
        self.name.replace('_', "-")
    }

    fn arg(&self) -> clap::Arg {
        let arg = clap::Arg::new(self.name)
            .long(self.flag())
            .help(self.help)
            .value_name(self.name.to_uppercase())
            .value_parser(clap::value_parser!(u64).range(self.min..=self.max));
        if self.flag() == self.name {
            arg
        } else {
            // fio's spelling works too.
            arg.alias(self.name)
        }
    }
}

/// The general job options given to `iolab run` (`--NAME N` for each of [`JOB_OPTIONS`]).
#[derive(Debug, Clone, Default)]
pub struct JobOptionArgs(Vec<(&'static JobOption, u64)>);

impl JobOptionArgs {
    /// The options given, with their values.
    pub fn given(&self) -> impl Iterator<Item = (&'static JobOption, u64)> + '_ {
        self.0.iter().copied()
    }

    /// The value given for `o`, if it was.
    pub fn value(&self, o: &JobOption) -> Option<u64> {
        self.0
            .iter()
            .find(|(g, _)| g.name == o.name)
            .map(|(_, v)| *v)
    }

    /// These options with `o` given as `v` (replacing a value given before).
    pub fn with(mut self, o: &'static JobOption, v: u64) -> Self {
        self.0.retain(|(g, _)| g.name != o.name);
        self.0.push((o, v));
        self
    }

    /// Adds the options of [`Scope::Shape`] to `cmd` (the presets that take a job's shape);
    /// flattening `JobOptionArgs` adds those of [`Scope::Tests`], and reads both.
    pub fn augment_shape(cmd: clap::Command) -> clap::Command {
        JOB_OPTIONS
            .iter()
            .filter(|o| o.scope == Scope::Shape)
            .fold(cmd, |cmd, o| cmd.arg(o.arg()))
    }

    /// `--NAME` of each option of [`Scope::Shape`].
    pub fn shape_flags() -> impl Iterator<Item = String> {
        JOB_OPTIONS
            .iter()
            .filter(|o| o.scope == Scope::Shape)
            .map(|o| format!("--{}", o.flag()))
    }
}

impl clap::FromArgMatches for JobOptionArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let value = |o: &JobOption| m.try_get_one::<u64>(o.name).ok().flatten().copied();
        Ok(JobOptionArgs(
            JOB_OPTIONS
                .iter()
                .filter_map(|o| value(o).map(|v| (o, v)))
                .collect(),
        ))
    }

    /// The options given in `m` replace the same ones given before.
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        let now = Self::from_arg_matches(m)?;
        self.0
            .retain(|(o, _)| !now.0.iter().any(|(n, _)| n.name == o.name));
        self.0.extend(now.0);
        Ok(())
    }
}

impl clap::Args for JobOptionArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        JOB_OPTIONS
            .iter()
            .filter(|o| o.scope == Scope::Tests)
            .fold(cmd, |cmd, o| cmd.arg(o.arg()))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// Every general job option declared as a [`JobOption`], in the order a job lists them
/// (export-fio's lines, the CSV columns).
pub const JOB_OPTIONS: &[JobOption] = &[IODEPTH, NUMJOBS, RWMIXREAD];

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
    /// I/O buffers from ordinary 4 KiB pages (fio's default `mem=malloc`), rather than
    /// iolab's 2 MiB-aligned pool with transparent huge pages: a large direct I/O is then
    /// many segments and adjacent ones merge into fewer, smaller requests, as under fio.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub page_buffers: bool,
    /// I/O priorities: the job thread's and per I/O (fio's prioclass/prio, cmdprio_*).
    #[serde(default, skip_serializing_if = "Prio::is_none")]
    pub prio: Prio,
    /// Written data partly compressible and partly duplicate, as fio makes it
    /// (buffer_compress_percentage, dedupe_percentage); None: iolab's own data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Content>,
    /// Where the job's threads run and their buffers live (fio's numa_cpu_nodes,
    /// numa_mem_policy); None: wherever the kernel puts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<Numa>,
    /// Each of the `numjobs` threads' series is kept as well as their sum (fio's per-job
    /// logs of a `numjobs` job: `TimeSeries::threads`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thread_series: bool,
    /// Writes carry this fixed pattern, and reads are checked against it when it says so
    /// (fio's `verify_pattern`); None: iolab's own data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<crate::pattern::Pattern>,
    /// Strided zones (fio's `zonemode=strided`); None: the whole region at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strided: Option<Strided>,
    /// Each of the `numjobs` clones in its own part of the region (fio's `offset`,
    /// `offset_increment`); None: the clones share the region.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clones: Option<Clones>,
    /// The test's own engine, its options and direct/buffered, where the tests of a run
    /// differ (a fio job file's jobs); None: the run's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<TestIo>,
    /// A writing test of a `--verify` run that is not read back (a fio job without
    /// `verify` beside jobs with it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified: bool,
    /// Each write of the test is a trim instead (fio's `rw=trim`, `randtrim`): a hole
    /// punched in a file (`fallocate(PUNCH_HOLE|KEEP_SIZE)`), a discard on a block device
    /// (`BLKDISCARD`); no data moves, and its passes count them under `trim`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub trim: bool,
    /// fio's latency-target search (`latency_target`...): the depth in flight is searched
    /// from 1 up to `iodepth` as fio does it; None: `iodepth` throughout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_target: Option<LatTarget>,
}

/// fio's `latency_target`, `latency_window`, `latency_percentile` and `latency_run`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatTarget {
    /// An I/O slower than this (µs) misses the target.
    pub target_us: u64,
    /// Each depth is judged over a window this long (µs).
    pub window_us: u64,
    /// The share of a window's I/Os (%) that must meet the target.
    pub pct: f64,
    /// Keep adjusting the depth after it settled, to the end of the pass (fio's
    /// `latency_run=1`); else the job ends after one window at the depth found.
    pub run: bool,
}

/// A test's own engine and direct/buffered, in place of the run's (stored in the test's
/// job as `io`: `{"engine": "libaio", "direct": true, ...its engine's options}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestIo {
    pub engine: EngineKind,
    pub direct: bool,
    /// The options of `engine` as the test resolved them, each under its key.
    #[serde(flatten)]
    pub engine_opts: crate::engopt::EngineOpts,
}

/// fio's `zonemode=strided`: the region is zones of `range` bytes; a job does `size` bytes
/// of I/O in a zone from its start, then moves `skip` bytes past that zone's end to the
/// next one (back to the first past the region's end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Strided {
    pub size: u64,
    pub range: u64,
    pub skip: u64,
}

/// Where each clone of a job works: clone i from `offset + i * increment` of the region,
/// `len` bytes (fio's `offset`, `offset_increment`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clones {
    pub offset: u64,
    pub increment: u64,
    pub len: u64,
}

/// NUMA placement of a job's threads: the nodes whose CPUs they run on (empty: any), and
/// the memory policy of their buffers (`default`, `prefer`, `bind`, `interleave`, `local`)
/// over its nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Numa {
    pub cpu_nodes: Vec<u32>,
    pub mem_policy: Option<(String, Vec<u32>)>,
}

/// fio's write buffers with compression and deduplication: each chunk of `chunk` bytes is
/// `100 - compress_pct`% random bytes then zeros; `dedupe_pct`% of writes repeat an earlier
/// buffer's contents (the previous unique one, or one of `working_set` blocks' contents,
/// shared by every job of the run when `global`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    pub compress_pct: u8,
    pub chunk: u32,
    pub dedupe_pct: u8,
    /// Blocks in the working set (fio's `dedupe_mode=working_set`); None: `repeat`.
    pub working_set: Option<u64>,
    pub global: bool,
}

/// I/O priorities of a job, as Linux ioprio values (class << 13 | level).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prio {
    /// The job thread's priority (ioprio_set), which its requests take unless one is set
    /// per I/O; None: the default.
    pub thread: Option<u16>,
    /// Per-I/O priorities, for reads and for writes: the rules that apply to an I/O (its
    /// size, or any size) share 0..100 in order; an I/O that draws none keeps the thread's.
    pub per_io: [Vec<CmdPrio>; 2],
}

impl Prio {
    pub fn is_none(&self) -> bool {
        self.thread.is_none() && self.per_io.iter().all(Vec::is_empty)
    }

    /// ioprio of class (1 realtime, 2 best effort, 3 idle) and level (0..7).
    pub fn value(class: u8, level: u8) -> u16 {
        ((class as u16) << 13) | level as u16
    }
}

/// One per-I/O priority rule: `pct`% of a direction's I/Os (of `size` bytes, or of any
/// size) are issued with `ioprio`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CmdPrio {
    pub size: Option<u64>,
    pub pct: u8,
    pub ioprio: u16,
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
    /// A mixed job's limits per direction, [reads, writes] as (bytes/s, IOPS), 0: none
    /// (fio's `rate=r,w` and `rate_iops=r,w`); `rate_bytes` and `rate_iops` are then 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir_rates: Option<[(u64, u64); 2]>,
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
            page_buffers: false,
            prio: Prio::default(),
            content: None,
            numa: None,
            thread_series: false,
            pattern: None,
            strided: None,
            clones: None,
            io: None,
            unverified: false,
            trim: false,
            lat_target: None,
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

    /// The job's pattern as fio names it: `rw`'s name, or `trim`/`randtrim` for a job
    /// whose writes are trims.
    pub fn rw_name(&self) -> &'static str {
        match (self.trim, self.rw.is_random()) {
            (false, _) => self.rw.as_str(),
            (true, false) => "trim",
            (true, true) => "randtrim",
        }
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
    /// The engine the tests run on; `None` (stored as null): the run used no engine
    /// (metadata, dbench, copy...: their own system calls). Runs stored before it did say
    /// "psync" there whether they used it or not.
    pub engine: Option<EngineKind>,
    /// O_DIRECT (true) or through the page cache (false).
    pub direct: bool,
    pub data: DataPattern,
    /// The engines' own options as the run resolved them (io_uring's `fixedbufs`,
    /// `registerfiles`), each stored as a key of its own beside the fields above.
    #[serde(flatten)]
    pub engine_opts: crate::engopt::EngineOpts,
}

impl RunSettings {
    /// The settings `job` runs with: its own engine, options and direct where it has them
    /// ([`JobSpec::io`]), else the run's.
    pub fn for_job(&self, job: &JobSpec) -> RunSettings {
        match &job.io {
            None => self.clone(),
            Some(io) => RunSettings {
                engine: Some(io.engine),
                direct: io.direct,
                engine_opts: io.engine_opts.clone(),
                ..self.clone()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each general job option's row alone gives `iolab run`'s `--NAME` (its range checked),
    /// export-fio's `NAME=V` and fio's job-file option read onto the job.
    #[test]
    fn every_job_option_reaches_the_command_line_export_and_job_files() {
        use clap::{Args, FromArgMatches};
        let cmd =
            || JobOptionArgs::augment_args(JobOptionArgs::augment_shape(clap::Command::new("t")));
        for o in JOB_OPTIONS {
            assert_eq!(JobOption::named(o.name).map(|n| n.name), Some(o.name));
            let v = if o.default < o.max {
                o.default + 1
            } else {
                o.default - 1
            };
            let flag = format!("--{}", o.flag());
            let m = cmd()
                .try_get_matches_from(["t", flag.as_str(), &v.to_string()])
                .unwrap_or_else(|e| panic!("{}: {e}", o.name));
            let given = JobOptionArgs::from_arg_matches(&m).unwrap();
            assert_eq!(given.value(o), Some(v), "{}", o.name);
            let over = (o.max + 1).to_string();
            assert!(cmd()
                .try_get_matches_from(["t", flag.as_str(), over.as_str()])
                .is_err());
            // export-fio writes it for a job where it applies.
            let mut job = JobSpec::new(Rw::RandRw, 4096, 1, 1);
            (o.set)(&mut job, v);
            assert_eq!((o.get)(&job), Some(v), "{}", o.name);
            let test = TestSpec {
                name: "t".into(),
                group: "t".into(),
                job,
            };
            let section = crate::fio::job_section(&test, 1.0);
            assert!(
                section.contains(&format!("\n{}={v}\n", o.name)),
                "{section}"
            );
            // A job file's NAME=V maps onto it.
            let src = crate::fiojob::parse::Sources {
                read: &|_, _| {
                    Err(iolab_sys::input::InputError::Io(
                        std::io::ErrorKind::NotFound.into(),
                    ))
                },
                var: &|_| None,
            };
            let text = format!("[j]\nrw=randrw\nsize=1m\n{}={v}\n", o.name);
            let file = crate::fiojob::parse("j.fio", text.as_bytes(), &src).unwrap();
            let plan = crate::fiojob::map_jobs(&file, Default::default())
                .unwrap_or_else(|e| panic!("{}: {e}", o.name));
            assert_eq!((o.get)(&plan.jobs[0].job), Some(v), "{}", o.name);
        }
    }

    /// An option fio spells with `_` is `iolab run`'s with `-`; fio's spelling works too.
    #[test]
    fn underscores_are_dashes_on_the_command_line() {
        use clap::FromArgMatches;
        static O: JobOption = JobOption {
            name: "x_y",
            ..RWMIXREAD
        };
        assert_eq!(O.flag(), "x-y");
        let cmd = || clap::Command::new("t").arg(O.arg());
        for flag in ["--x-y", "--x_y"] {
            let m = cmd().try_get_matches_from(["t", flag, "3"]).unwrap();
            assert_eq!(m.get_one::<u64>("x_y"), Some(&3), "{flag}");
        }
        let help = cmd().render_long_help().to_string();
        assert!(help.contains("--x-y") && !help.contains("--x_y"), "{help}");
        let _ = JobOptionArgs::from_arg_matches(&cmd().get_matches_from(["t"])).unwrap();
    }

    /// A run's header shows an option with header words once per value other than its
    /// default, over the tests where it applies.
    #[test]
    fn header_words_name_each_value_other_than_the_default() {
        let o = JobOption {
            header: Some(|v| format!("{v}% reads")),
            ..RWMIXREAD
        };
        let job = |rw, mix| {
            let mut j = JobSpec::new(rw, 4096, 1, 1);
            (o.set)(&mut j, mix);
            j
        };
        let jobs = [
            job(Rw::RandRw, 70),
            job(Rw::Rw, 50),
            job(Rw::Read, 10),
            job(Rw::Rw, 70),
            job(Rw::RandRw, 30),
        ];
        assert_eq!(o.header_words(&jobs), ["70% reads", "30% reads"]);
        assert!(RWMIXREAD.header_words(&jobs).is_empty());
    }
}
