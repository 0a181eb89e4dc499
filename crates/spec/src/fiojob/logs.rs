//! fio's per-interval logs asked for in a job file: `write_bw_log`, `write_iops_log`,
//! `write_lat_log`, with `log_avg_msec` (the window) and `per_job_logs` (the `.N` in the
//! name). Each job's files are named as fio names them (`PREFIX_bw.N.log`, `PREFIX_iops.N.log`,
//! `PREFIX_lat.N.log`, N the job's thread number over the file; `PREFIX_bw.log` with
//! `per_job_logs=0`); the workload writes them from the run's stored per-interval series.
//!
//! What differs from fio, said in a run note or refused by name: iolab keeps no record of
//! each I/O, so without `log_avg_msec` it logs 1000 ms windows where fio logs every I/O; a
//! window is a multiple of the 100 ms the series is kept in; `write_lat_log` gives the total
//! latency (`_lat`) only, as iolab does not time submission and completion apart (no `_slat`
//! or `_clat`). A `numjobs` job's threads each get their file (fio's per-job logs: the
//! job's tests keep each thread's series, `JobSpec::thread_series`), or with
//! `per_job_logs=0` one of their sum.

use std::path::PathBuf;

use super::map::{effective, FioPlan};
use super::parse::{JobFile, RawOption};
use super::{values, FioError};

/// The options this module reads (accepted by the job-file check, handled here).
pub const KEYS: &[&str] = &[
    "write_bw_log",
    "write_iops_log",
    "write_lat_log",
    "log_avg_msec",
    "per_job_logs",
    "log_offset",
];

/// The window iolab logs when `log_avg_msec` is not given.
pub const DEFAULT_AVG_MS: u64 = 1000;

/// The interval the series is kept in; a window is a multiple of it.
pub const STORED_MS: u64 = 100;

/// Which log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// KiB/s per window.
    Bw,
    /// I/Os per second per window.
    Iops,
    /// The mean total latency per window, in nanoseconds.
    Lat,
}

impl LogKind {
    pub const ALL: [LogKind; 3] = [LogKind::Bw, LogKind::Iops, LogKind::Lat];

    /// The type in fio's file name.
    pub fn suffix(self) -> &'static str {
        match self {
            LogKind::Bw => "bw",
            LogKind::Iops => "iops",
            LogKind::Lat => "lat",
        }
    }

    fn option(self) -> &'static str {
        match self {
            LogKind::Bw => "write_bw_log",
            LogKind::Iops => "write_iops_log",
            LogKind::Lat => "write_lat_log",
        }
    }
}

/// fio's name for a log: `PREFIX_TYPE.N.log`, or `PREFIX_TYPE.log` without a job number.
pub fn file_name(prefix: &str, kind: LogKind, num: Option<u32>) -> String {
    match num {
        Some(n) => format!("{prefix}_{}.{n}.log", kind.suffix()),
        None => format!("{prefix}_{}.log", kind.suffix()),
    }
}

/// One log file a job asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct LogFile {
    pub kind: LogKind,
    /// Relative to the current directory, as fio writes it.
    pub path: PathBuf,
    /// `FILE:LINE: OPTION` of the option that asks for it.
    pub at: String,
    /// fio's per-job log of one thread of a `numjobs` job (0-based within the job), or
    /// `None`: the job's (its threads' sum, or its one thread).
    pub thread: Option<u32>,
}

/// The logs of one job (one test of the run, by name).
#[derive(Debug, Clone, PartialEq)]
pub struct JobLogs {
    pub test: String,
    pub files: Vec<LogFile>,
    /// The window, in milliseconds.
    pub avg_ms: u64,
    /// fio's `log_offset`: an offset column before the priority (0: a window has no one
    /// offset, as fio writes it for averaged samples).
    pub offset: bool,
}

/// What a job file asks to be logged: the jobs with logs and the notes on what differs
/// from fio.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogPlan {
    pub jobs: Vec<JobLogs>,
    pub notes: Vec<String>,
}

fn err(o: &RawOption, msg: impl Into<String>) -> FioError {
    FioError::new(&o.file, o.line, super::options::canonical(&o.key), msg)
}

/// The logs of every job of `file`, mapped as `plan` (its jobs in the order of the file's
/// job sections).
pub fn plan(file: &JobFile, plan: &FioPlan) -> Result<LogPlan, FioError> {
    let mut out = LogPlan::default();
    let mut thread = 0u32;
    let mut jobs = plan.jobs.iter();
    for (idx, sec) in file.sections.iter().enumerate() {
        if sec.is_global() {
            continue;
        }
        let Some(job) = jobs.next() else { break };
        let numjobs = job.job.numjobs;
        let first = thread + 1;
        thread += numjobs;
        let m = effective(&file.sections, idx);
        let asked: Vec<(LogKind, &RawOption)> = LogKind::ALL
            .iter()
            .filter_map(|&k| m.get(k.option()).map(|o| (k, *o)))
            .collect();
        let avg = match m.get("log_avg_msec") {
            None => None,
            Some(o) => {
                let v = values::int(o.value.as_deref().unwrap_or(""), 0, 3_600_000)
                    .map_err(|e| err(o, e))?;
                if v != 0 && !v.is_multiple_of(STORED_MS) {
                    return Err(err(
                        o,
                        format!(
                            "{v}: iolab keeps each pass's series in {STORED_MS} ms intervals; \
                             give a multiple of {STORED_MS}"
                        ),
                    ));
                }
                (v != 0).then_some(v)
            }
        };
        let per_job = match m.get("per_job_logs") {
            None => true,
            Some(o) => values::boolean(o.value.as_deref()).map_err(|e| err(o, e))?,
        };
        let offset = match m.get("log_offset") {
            None => false,
            Some(o) => values::boolean(o.value.as_deref()).map_err(|e| err(o, e))?,
        };
        if asked.is_empty() {
            continue;
        }
        if offset {
            let n = "log_offset: each line gets fio's offset column; a window's line has no \
                     one offset, so it is 0, as fio writes it for averaged samples"
                .to_string();
            if !out.notes.contains(&n) {
                out.notes.push(n);
            }
        }
        if avg.is_none() {
            let n = format!(
                "fio logs each I/O without log_avg_msec; iolab keeps no record of each I/O, so \
                 job {} logs {DEFAULT_AVG_MS} ms averages (set log_avg_msec to choose)",
                sec.name
            );
            if !out.notes.contains(&n) {
                out.notes.push(n);
            }
        }
        let mut files = Vec::new();
        for (kind, o) in asked {
            let prefix = match o.value.as_deref().map(str::trim) {
                Some(p) if !p.is_empty() => p.to_string(),
                _ => sec.name.clone(),
            };
            // fio's per-job logs: a file for each thread (clone) of the job, numbered
            // by the thread; with per_job_logs=0 one of their sum.
            let threads: Vec<Option<u32>> = match (per_job, numjobs) {
                (false, _) => vec![None],
                (true, 1) => vec![Some(0)],
                (true, n) => (0..n).map(Some).collect(),
            };
            for thread in threads {
                let num = thread.map(|i| first + i);
                let path = PathBuf::from(file_name(&prefix, kind, num));
                let at = format!("{}:{}: {}", o.file, o.line, kind.option());
                let clash = out
                    .jobs
                    .iter()
                    .flat_map(|j| &j.files)
                    .chain(&files)
                    .find(|f: &&LogFile| f.path == path);
                if let Some(c) = clash {
                    return Err(err(
                        o,
                        format!(
                            "{} is also written by {}: fio appends the jobs to one file, \
                             iolab writes a file per job's log; give the jobs different names",
                            path.display(),
                            c.at
                        ),
                    ));
                }
                let thread = thread.filter(|_| numjobs > 1);
                files.push(LogFile {
                    kind,
                    path,
                    at,
                    thread,
                });
            }
        }
        if files.iter().any(|f| f.kind == LogKind::Lat) {
            let n = "write_lat_log: iolab writes the total latency (_lat) only; it does not \
                     time submission and completion apart (no _slat or _clat)"
                .to_string();
            if !out.notes.contains(&n) {
                out.notes.push(n);
            }
        }
        out.jobs.push(JobLogs {
            test: job.name.clone(),
            files,
            avg_ms: avg.unwrap_or(DEFAULT_AVG_MS),
            offset,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::parse::{parse, Sources};
    use super::super::{map_jobs, Overrides};
    use super::*;

    fn logs(text: &str) -> Result<LogPlan, FioError> {
        let src = Sources {
            read: &|_, _| {
                Err(iolab_sys::input::InputError::Io(
                    std::io::ErrorKind::NotFound.into(),
                ))
            },
            var: &|_| None,
        };
        let f = parse("j.fio", text.as_bytes(), &src).unwrap();
        let p = map_jobs(&f, Overrides::default())?;
        plan(&f, &p)
    }

    #[test]
    fn names_windows_and_numbers_follow_fio() {
        let p = logs(
            "[global]\nrw=write\nsize=1m\nlog_avg_msec=500\n[a]\nwrite_bw_log=out/x\n\
             write_lat_log\n[b]\nnumjobs=2\nper_job_logs=0\nwrite_iops_log=y\n[c]\n\
             write_bw_log=z\n",
        )
        .unwrap();
        let names: Vec<Vec<String>> = p
            .jobs
            .iter()
            .map(|j| {
                j.files
                    .iter()
                    .map(|f| f.path.display().to_string())
                    .collect()
            })
            .collect();
        assert_eq!(
            names,
            [
                vec!["out/x_bw.1.log", "a_lat.1.log"],
                vec!["y_iops.log"],
                vec!["z_bw.4.log"]
            ]
        );
        assert!(p.jobs.iter().all(|j| j.avg_ms == 500));
        assert_eq!(p.jobs[0].files[1].at, "j.fio:7: write_lat_log");
        assert!(
            p.notes.iter().any(|n| n.contains("_lat) only")),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn without_a_window_one_second_is_said_and_bad_ones_are_refused() {
        let p = logs("[a]\nrw=read\nsize=1m\nwrite_bw_log=a\n").unwrap();
        assert_eq!(p.jobs[0].avg_ms, DEFAULT_AVG_MS);
        assert!(p.notes[0].contains("1000 ms averages"), "{:?}", p.notes);
        let e = logs("[a]\nsize=1m\nlog_avg_msec=250\nwrite_bw_log=a\n").unwrap_err();
        assert_eq!((e.line, e.option.as_str()), (3, "log_avg_msec"));
        // numjobs=2: a file for each thread, numbered on from the jobs before.
        let p = logs("[s]\nsize=1m\n[a]\nsize=1m\nnumjobs=2\nwrite_bw_log=a\n").unwrap();
        let files: Vec<(String, Option<u32>)> = p.jobs[0]
            .files
            .iter()
            .map(|f| (f.path.display().to_string(), f.thread))
            .collect();
        assert_eq!(
            files,
            [
                ("a_bw.2.log".into(), Some(0)),
                ("a_bw.3.log".into(), Some(1))
            ]
        );
        let e = logs("[global]\nsize=1m\n[a]\nper_job_logs=0\nwrite_bw_log=s\n[b]\nwrite_bw_log=s\nper_job_logs=0\n")
            .unwrap_err();
        assert!(
            e.message.contains("s_bw.log is also written by j.fio:5"),
            "{e}"
        );
        assert!(logs("[a]\nsize=1m\nlog_avg_msec=0\n")
            .unwrap()
            .jobs
            .is_empty());
    }
}
