//! Options more than one workload takes, each declared once with its help text. A
//! workload's own options struct flattens the groups that apply to it; an option of a group
//! it does not flatten is refused by the parser with the workloads that take it.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use iolab_spec::{format_bytes, parse_duration, parse_size};

use crate::status::UsageError;

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
    /// Result database (default: $XDG_DATA_HOME/iolab/results.db).
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
}

/// `--size`.
#[derive(Args, Debug, Clone, Default)]
pub struct SizeArg {
    /// How much data: the test region (block presets, verify) or the file size (fsync,
    /// copy, streams), e.g. 1GiB, 256m.
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
