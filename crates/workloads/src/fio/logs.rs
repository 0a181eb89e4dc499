//! fio's per-interval logs written from a run's stored series: the files a job file's
//! `write_bw_log`/`write_iops_log`/`write_lat_log` ask for (after `iolab run fio`), and
//! `iolab show N --series --fio-log PREFIX` for any stored run. Each file is new
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, 0600, through `iolab_sys::files`): an existing one is
//! refused before anything is written.

use std::io::Write;
use std::path::{Path, PathBuf};

use iolab_measure::RunRecord;
use iolab_spec::fiojob::logs::{file_name, LogKind, LogPlan};
use iolab_stats::series::fio_log;

/// One log to write: which test, which log, where.
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub test: String,
    pub kind: LogKind,
    pub path: PathBuf,
    pub avg_ms: u64,
    /// One job thread's own log (0-based), or `None`: the threads' sum.
    pub thread: Option<u32>,
    /// fio's `log_offset`: a 0 offset column before the priority.
    pub offset: bool,
}

/// The logs a job file's plan asks for.
pub fn from_plan(plan: &LogPlan) -> Vec<Wanted> {
    plan.jobs
        .iter()
        .flat_map(|j| {
            j.files.iter().map(|f| Wanted {
                test: j.test.clone(),
                kind: f.kind,
                path: f.path.clone(),
                avg_ms: j.avg_ms,
                thread: f.thread,
                offset: j.offset,
            })
        })
        .collect()
}

/// Every log of every test of `run`, test N (1-based, in the run's order, as fio numbers its
/// jobs) in `PREFIX_bw.N.log`, `PREFIX_iops.N.log` and `PREFIX_lat.N.log`.
pub fn for_run(run: &RunRecord, prefix: &str, avg_ms: u64) -> Vec<Wanted> {
    run.tests
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            LogKind::ALL.into_iter().map(move |kind| Wanted {
                test: t.name.clone(),
                kind,
                path: PathBuf::from(file_name(prefix, kind, Some(i as u32 + 1))),
                avg_ms,
                thread: None,
                offset: false,
            })
        })
        .collect()
}

/// The first of `wanted` whose path is taken (anything there, a dangling link too).
pub fn taken(wanted: &[Wanted]) -> Option<&Wanted> {
    wanted.iter().find(|w| w.path.symlink_metadata().is_ok())
}

/// Why a log may not go at `path` (a file named from a prefix), if so: its directory is
/// not a directory, or is one of the kernel's (`/dev`, `/proc`, `/sys` or beneath: a
/// prefix such as `/dev/null` would put files among the device nodes).
pub fn unfit_place(path: &Path) -> Option<String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let real = match std::fs::canonicalize(dir) {
        Ok(r) if r.is_dir() => r,
        Ok(_) => return Some(format!("{} is not a directory", dir.display())),
        Err(e) => return Some(format!("{}: {e}", dir.display())),
    };
    ["/dev", "/proc", "/sys"]
        .into_iter()
        .find(|k| real.starts_with(k))
        .map(|k| {
            format!(
                "the logs would go in {} ({k} is the kernel's, not a directory for files): give \
                 a prefix in a directory of your own",
                real.display()
            )
        })
}

/// The first of `wanted` that may not go where it is named, with the reason.
pub fn unfit(wanted: &[Wanted]) -> Option<(&Wanted, String)> {
    wanted
        .iter()
        .find_map(|w| unfit_place(&w.path).map(|why| (w, why)))
}

/// Why `prefix` (of `show --series --fio-log`) is refused, if it is: it names something
/// other than a regular file or a directory (a device node, a FIFO, a socket), or the
/// logs named from it may not go where they would.
pub fn unfit_prefix(prefix: &str, wanted: &[Wanted]) -> Option<String> {
    if let Some((_, why)) = unfit(wanted) {
        return Some(why);
    }
    let m = std::fs::metadata(prefix).ok()?;
    (!m.is_file() && !m.is_dir()).then(|| {
        format!(
            "{prefix} is a device node, FIFO or socket, not a directory for files: the prefix \
             names the log files (PREFIX_bw.1.log ...), give one in a directory of your own"
        )
    })
}

/// What [`write`] did: the files written, and the logs it could not give with the reason.
#[derive(Debug, Default)]
pub struct Written {
    pub files: Vec<PathBuf>,
    pub skipped: Vec<String>,
}

/// Why [`write`] wrote no more logs: the path named, and the I/O error kept as the source.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    #[error("{}: {why}", path.display())]
    Unfit { path: PathBuf, why: String },
    #[error(
        "{}: exists; iolab does not overwrite a log (remove it or give another name)",
        .0.display()
    )]
    Exists(PathBuf),
    #[error("{}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes each of `wanted` from `run` (a test it does not hold, or a log its record cannot
/// give, is skipped with the reason); fails on the first file that cannot be created or
/// written.
pub fn write(run: &RunRecord, wanted: &[Wanted]) -> Result<Written, LogsError> {
    if let Some((w, why)) = unfit(wanted) {
        return Err(LogsError::Unfit {
            path: w.path.clone(),
            why,
        });
    }
    if let Some(w) = taken(wanted) {
        return Err(LogsError::Exists(w.path.clone()));
    }
    let mut out = Written::default();
    for w in wanted {
        let Some(t) = run.tests.iter().find(|t| t.name == w.test) else {
            out.skipped.push(format!(
                "{}: the run has no test {}",
                w.path.display(),
                w.test
            ));
            continue;
        };
        let text = match fio_log(t, w.kind, w.avg_ms, w.thread.map(|n| n as usize)) {
            // time, value, ddir, bs, then the offset (0 for a window) before the priority,
            // which is 0 too: the line gains a ", 0".
            Ok(text) if w.offset => text.lines().map(|l| format!("{l}, 0\n")).collect(),
            Ok(text) => text,
            Err(e) => {
                out.skipped.push(format!("{}: {e}", w.path.display()));
                continue;
            }
        };
        let failed = |source| LogsError::Write {
            path: w.path.clone(),
            source,
        };
        let mut f = iolab_sys::files::create_new(&w.path).map_err(failed)?;
        f.write_all(text.as_bytes()).map_err(failed)?;
        out.files.push(w.path.clone());
    }
    Ok(out)
}
