//! Options more than one workload takes, each declared once with its help text. A
//! workload's own options struct flattens the groups that apply to it; an option of a group
//! it does not flatten is refused by the parser with the workloads that take it.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use iolab_spec::{format_bytes, parse_duration, parse_size};

use crate::status::UsageError;

/// How the ranks of an MPI run share the target and end their passes (docs/mpi.md);
/// refused outside mpirun.
#[derive(Args, Debug, Clone, Default)]
pub struct MpiArgs {
    /// Under mpirun: one file in the target directory for every rank, each rank its own
    /// region of --size in it (IOR's shared-file mode); default: a file per rank.
    #[arg(long)]
    pub shared_file: bool,
    /// Under mpirun: when the first rank finishes a pass, the others end theirs there
    /// (IOR's stonewalling), for passes of a fixed amount of I/O (--io-size).
    #[arg(long)]
    pub stonewall: bool,
}

impl MpiArgs {
    pub fn mode(&self) -> crate::coord::MpiMode {
        crate::coord::MpiMode {
            shared_file: self.shared_file,
            stonewall: self.stonewall,
        }
    }
}

/// What every `iolab run` takes: where, how to label, store and show the run.
#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Where to run: a directory (iolab makes and removes its own files in it); the block
    /// presets and `verify` also take a regular file or a block device.
    #[arg(long, short = 't', value_name = "PATH", default_value = ".")]
    pub target: PathBuf,
    /// Free-text label stored with the run.
    #[arg(long)]
    pub label: Option<String>,
    /// Result database: a file, or a postgresql://USER@HOST/DB URL (default: $IOLAB_DB if
    /// set, else $XDG_DATA_HOME/iolab/results.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Do not store the run.
    #[arg(long)]
    pub no_store: bool,
    /// Also write the run as JSON to PATH ("-" for stdout, which then carries only JSON).
    #[arg(long, value_name = "PATH|-")]
    pub json: Option<String>,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print every warning in full (its test, message and fix) and every note whole, instead
    /// of one line per warning code and note (`iolab show N --warnings` prints the warnings
    /// of a stored run).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Run the whole workload N times (every test, then all again), each repetition stored
    /// as its own run under one label, then summarise each test across the N runs.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub repeat: Option<String>,
    /// Set by `iolab study` for the runs it starts: the study's name.
    #[arg(long, hide = true, requires = "config")]
    pub study: Option<String>,
    /// Set by `iolab study`: the configuration's label.
    #[arg(long, hide = true, requires = "study")]
    pub config: Option<String>,
    /// Set by `iolab study`: a JSON file describing the configuration (stored with the run);
    /// "-" reads it from standard input.
    #[arg(long, hide = true, value_name = "FILE", requires = "study")]
    pub study_meta: Option<PathBuf>,
}

impl CommonArgs {
    /// Whether stdout carries only the JSON document (`--json -`), so text goes to stderr.
    pub fn json_to_stdout(&self) -> bool {
        self.json.as_deref() == Some("-")
    }

    /// The target as an absolute path.
    pub fn target_abs(&self) -> PathBuf {
        std::path::absolute(&self.target).unwrap_or_else(|_| self.target.clone())
    }

    /// `--repeat`: how many times to run the whole workload (1 without the option).
    pub fn repeat(&self) -> Result<u32, UsageError> {
        let Some(text) = &self.repeat else {
            return Ok(1);
        };
        let bad = || {
            UsageError::option(
                "repeat",
                format!("--repeat '{text}': expected a number of runs from 1 to {MAX_REPEAT}"),
            )
        };
        let n: u32 = text.trim().parse().map_err(|_| bad())?;
        if n == 0 || n > MAX_REPEAT {
            return Err(bad());
        }
        if self.study.is_some() {
            return Err(UsageError::option(
                "repeat",
                "--repeat does not apply to a study's runs: a study repeats them with \
                 `repeats` in its file",
            ));
        }
        Ok(n)
    }
}

/// The most repetitions `--repeat` takes.
pub const MAX_REPEAT: u32 = 1000;

/// Adaptive passes: `--until-stable`, its per-test limits and the run's time budget (the
/// block presets; the cdm profiles have them on by default).
#[derive(Args, Debug, Clone, Default)]
pub struct StableArgs {
    /// Adaptive passes: after --runs passes (at least 3), stop a test once the 95% CI
    /// half-width of its MB/s is within PCT% of the mean (default 3); a test that is not
    /// stable gets more passes within the limits below. On by default for the cdm profiles
    /// (unless --runs is given); "off" turns it off.
    #[arg(long, value_name = "PCT|off", num_args = 0..=1, default_missing_value = "3")]
    pub until_stable: Option<String>,
    /// Adaptive passes: most measured passes per test (default 20).
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u32>,
    /// Adaptive passes: most pass time spent on one test's measured passes (default 2m).
    #[arg(long, value_name = "TIME")]
    pub max_time: Option<String>,
    /// Adaptive passes: most pass time (ramp and duration of every pass, warm-ups included)
    /// the whole run spends; default eight passes' time per test.
    #[arg(long, value_name = "TIME")]
    pub budget: Option<String>,
}

/// Adaptive passes as asked for; a limit not given is `None` (the plan fills in defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StableChoice {
    /// The target CI half-width, % of the mean.
    pub pct: f64,
    pub max_runs: Option<u32>,
    pub max_time: Option<Duration>,
    pub budget: Option<Duration>,
}

impl StableArgs {
    /// Parses the group. `default_on`: adaptive passes apply unless turned off (the cdm
    /// profiles without `--runs`). Returns `None` when passes are a fixed number, refusing
    /// the limits then.
    pub fn get(&self, default_on: bool) -> Result<Option<StableChoice>, UsageError> {
        let pct = match self.until_stable.as_deref().map(str::trim) {
            None if default_on => Some(DEFAULT_STABLE_PCT),
            None => None,
            Some("off") => None,
            Some(t) => match t.parse::<f64>() {
                Ok(p) if p > 0.0 && p < 100.0 => Some(p),
                _ => {
                    return Err(UsageError::option(
                        "until-stable",
                        format!(
                            "--until-stable '{t}': expected a percentage between 0 and 100, \
                             or off"
                        ),
                    ))
                }
            },
        };
        let Some(pct) = pct else {
            for (given, o) in [
                (self.max_runs.is_some(), "max-runs"),
                (self.max_time.is_some(), "max-time"),
                (self.budget.is_some(), "budget"),
            ] {
                if given {
                    return Err(UsageError::option(
                        o,
                        format!(
                            "--{o} limits adaptive passes, and this run has a fixed number of \
                             passes (give --until-stable{})",
                            if self.until_stable.as_deref() == Some("off") {
                                " instead of off"
                            } else {
                                ""
                            }
                        ),
                    ));
                }
            }
            return Ok(None);
        };
        if let Some(n) = self.max_runs {
            bounded("max-runs", n, 1, MAX_PASSES)?;
        }
        let positive = |o: &str, v: &Option<String>| -> Result<Option<Duration>, UsageError> {
            match opt_duration(o, v)? {
                Some(d) if d.is_zero() => Err(UsageError::option(
                    o,
                    format!("--{o} must be longer than 0"),
                )),
                d => Ok(d),
            }
        };
        Ok(Some(StableChoice {
            pct,
            max_runs: self.max_runs,
            max_time: positive("max-time", &self.max_time)?,
            budget: positive("budget", &self.budget)?,
        }))
    }
}

/// The half-width adaptive passes aim for when no PCT is given: 3% of the mean.
pub const DEFAULT_STABLE_PCT: f64 = 3.0;

/// `--size`.
#[derive(Args, Debug, Clone, Default)]
pub struct SizeArg {
    /// How much data: the test region (block presets, verify) or the file size (fsync,
    /// copy, streams), e.g. 1GiB, 256m (k/m/g/t and KiB/MiB/GiB: powers of 2; kB/MB/GB:
    /// powers of 10).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
}

impl SizeArg {
    pub fn get(&self) -> Result<Option<u64>, UsageError> {
        opt_size("size", &self.size)
    }
}

/// `--runs`.
#[derive(Args, Debug, Clone, Default)]
pub struct RunsArg {
    /// Measured passes per test.
    #[arg(long, value_name = "N", alias = "passes")]
    pub runs: Option<u32>,
}

impl RunsArg {
    /// The number of passes, 1 to [`MAX_PASSES`].
    pub fn get(&self, default: u32) -> Result<u32, UsageError> {
        match self.runs {
            Some(n) => bounded("runs", n, 1, MAX_PASSES),
            None => Ok(default),
        }
    }
}

/// The most passes of one test any count option asks for (`--runs`, `--warmup`,
/// `--max-runs`): every pass is stored, so a count is bounded like a duration.
pub const MAX_PASSES: u32 = 1000;

/// `value` of the count option `option` when it lies in `min..=max`; otherwise a usage
/// error naming the option and the range.
pub fn bounded<T>(option: &str, value: T, min: T, max: T) -> Result<T, UsageError>
where
    T: PartialOrd + std::fmt::Display + Copy,
{
    if value < min || value > max {
        return Err(UsageError::option(
            option,
            format!("--{option} {value}: must be between {min} and {max}"),
        ));
    }
    Ok(value)
}

/// `--duration` (`--time` is the same option, as dbench calls it).
#[derive(Args, Debug, Clone, Default)]
pub struct DurationArg {
    /// Length of each measured pass, e.g. 5s, 500ms, 2m.
    #[arg(long, value_name = "TIME", alias = "time")]
    pub duration: Option<String>,
}

impl DurationArg {
    pub fn get(&self) -> Result<Option<Duration>, UsageError> {
        opt_duration("duration", &self.duration)
    }
}

/// `--verify`.
#[derive(Args, Debug, Clone, Default)]
pub struct VerifyArg {
    /// Write self-describing data and check it: block presets read the region back after
    /// every pass, streams --rw write every file, fsync every test's writes after every
    /// pass, dbench every ReadX and every file at the end, metadata compares every file in
    /// its read phase; exit 3 on a mismatch (see docs/integrity.md).
    #[arg(long)]
    pub verify: bool,
}

/// What may be overwritten.
#[derive(Args, Debug, Clone, Default)]
pub struct SafetyArgs {
    /// Allow writing to a block device (destroys its contents; refused if it is mounted,
    /// in use, or carries a filesystem or partition table).
    #[arg(long)]
    pub allow_destroy_device: bool,
    /// Allow writing into an existing regular file iolab did not create.
    #[arg(long)]
    pub allow_overwrite_file: bool,
}

/// `--buffered`.
#[derive(Args, Debug, Clone, Default)]
pub struct BufferedArg {
    /// Go through the page cache (no O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
}

/// `--drop-caches`.
#[derive(Args, Debug, Clone, Default)]
pub struct DropCachesArg {
    /// Empty the page cache before measuring (root).
    #[arg(long)]
    pub drop_caches: bool,
}

/// `--bs`.
#[derive(Args, Debug, Clone, Default)]
pub struct BsArg {
    /// Block size: of every I/O (custom, streams, verify) or of the copy buffer (copy),
    /// e.g. 4k, 1m.
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<String>,
}

impl BsArg {
    pub fn get(&self) -> Result<Option<u64>, UsageError> {
        opt_size("bs", &self.bs)
    }
}

/// `--end-fsync`.
#[derive(Args, Debug, Clone, Default)]
pub struct EndFsyncArg {
    /// fsync at the end of every write pass (counted in the pass).
    #[arg(long)]
    pub end_fsync: bool,
}

/// The most memory `--verify` may keep for the block tests' written-block maps (8 bytes per
/// block of the region).
pub const MAX_VERIFY_MAP: u64 = 1 << 30;

/// Refuses a `--verify` run of `tests` whose written-block map would exceed
/// [`MAX_VERIFY_MAP`]: the region is `size` (`--size`), else the size of the existing file or
/// device at `target`, else `default_size`.
pub fn check_verify_map(
    tests: &[iolab_spec::TestSpec],
    target: &std::path::Path,
    size: Option<u64>,
    default_size: u64,
) -> Result<(), UsageError> {
    let granule = tests
        .iter()
        .filter(|t| t.job.rw.writes())
        .map(|t| iolab_integrity::written::granule_of(&t.job))
        .filter(|g| *g > 0)
        .min();
    let Some(granule) = granule else {
        return Ok(());
    };
    let region = size
        .or_else(|| {
            let m = std::fs::metadata(target).ok()?;
            if m.is_file() {
                Some(m.len())
            } else if std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()) {
                iolab_sys::device_size(target).ok()
            } else {
                None
            }
        })
        .unwrap_or(default_size);
    let map = (region / granule).saturating_mul(8);
    if map > MAX_VERIFY_MAP {
        return Err(UsageError::option(
            "verify",
            format!(
                "--verify keeps 8 bytes for every {granule}-byte block it writes: a region of {} \
                 needs {} of memory, more than the {} iolab allows; give a smaller --size or a \
                 larger --bs",
                format_bytes(region),
                format_bytes(map),
                format_bytes(MAX_VERIFY_MAP)
            ),
        ));
    }
    Ok(())
}

/// A size option's value, parsed.
pub fn opt_size(option: &str, v: &Option<String>) -> Result<Option<u64>, UsageError> {
    v.as_deref()
        .map(|s| parse_size(option, s).map_err(UsageError::from))
        .transpose()
}

/// A duration option's value, parsed.
pub fn opt_duration(option: &str, v: &Option<String>) -> Result<Option<Duration>, UsageError> {
    v.as_deref()
        .map(|s| parse_duration(option, s).map_err(UsageError::from))
        .transpose()
}

/// A comma-separated list option, every item parsed by `parse`.
pub fn list<T>(
    option: &str,
    text: &str,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
) -> Result<Vec<T>, UsageError> {
    text.split(',')
        .map(|item| {
            parse(item.trim()).ok_or_else(|| {
                UsageError::option(option, format!("--{option} '{item}': expected {expected}"))
            })
        })
        .collect()
}
