//! CSV export in tidy form: one row per measured pass, one column per variable, the run and
//! test identifying columns repeated on every row (see `docs/reports.md` for the columns).
//!
//! Numbers are written with Rust's shortest round-trip formatting, so reading a cell back
//! gives exactly the stored value; a missing value (a direction the test does not have) is
//! an empty cell.

use iolab_measure::{DirResult, PassRecord, RunRecord, TestRecord};
use iolab_spec::JOB_OPTIONS;

use crate::set::RunSet;

/// The columns before the general job options.
const HEAD: &[&str] = &[
    "run_id",
    "run_uuid",
    "study",
    "config",
    "label",
    "preset",
    "workload",
    "target",
    "fs_type",
    "started_at",
    "complete",
    "test",
    "group",
    "rw",
    "bs",
];

/// The columns after them.
const TAIL: &[&str] = &[
    "pass",
    "seconds",
    "bytes",
    "ios",
    "mb_s",
    "iops",
    "lat_mean_us",
    "lat_min_us",
    "lat_p50_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p999_us",
    "lat_max_us",
    "read_mb_s",
    "read_iops",
    "read_lat_mean_us",
    "read_lat_p99_us",
    "write_mb_s",
    "write_iops",
    "write_lat_mean_us",
    "write_lat_p99_us",
    "sync_count",
    "sync_lat_mean_us",
    "cpu_usr_pct",
    "cpu_sys_pct",
    "errors",
];

const N: usize = HEAD.len() + JOB_OPTIONS.len() + TAIL.len();

/// The header row, in order: [`HEAD`], a column for each general job option (its name, in
/// `JOB_OPTIONS`' order), [`TAIL`].
pub const COLUMNS: &[&str] = &columns();

const fn columns() -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < HEAD.len() {
        out[i] = HEAD[i];
        i += 1;
    }
    let mut k = 0;
    while k < JOB_OPTIONS.len() {
        out[i] = JOB_OPTIONS[k].name;
        i += 1;
        k += 1;
    }
    k = 0;
    while k < TAIL.len() {
        out[i] = TAIL[k];
        i += 1;
        k += 1;
    }
    out
}

fn f(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}

fn dir_cells(d: Option<&DirResult>) -> [String; 4] {
    match d {
        Some(d) => [f(d.mb_s), f(d.iops), f(d.lat_us.mean), f(d.lat_us.p99)],
        None => Default::default(),
    }
}

fn row(run: &RunRecord, config: &str, t: &TestRecord, p: &PassRecord) -> Vec<String> {
    let j = &t.job;
    let mut r = vec![
        run.id.map(|i| i.to_string()).unwrap_or_default(),
        run.uuid.clone(),
        run.study.clone().unwrap_or_default(),
        config.to_string(),
        run.label.clone().unwrap_or_default(),
        run.preset.clone(),
        run.workload.clone(),
        run.target.path.clone(),
        run.target.fs_type.clone(),
        run.started_at.clone(),
        run.complete.to_string(),
        t.name.clone(),
        t.group.clone(),
        j.rw_name().to_string(),
        j.bs.to_string(),
    ];
    // The general job options: the value, empty where it does not apply.
    r.extend(
        JOB_OPTIONS
            .iter()
            .map(|o| (o.get)(j).map(|v| v.to_string()).unwrap_or_default()),
    );
    r.extend([
        p.index.to_string(),
        f(p.seconds),
        p.bytes.to_string(),
        p.ios.to_string(),
        f(p.mb_s),
        f(p.iops),
        f(p.lat_us.mean),
        f(p.lat_us.min),
        f(p.lat_us.p50),
        f(p.lat_us.p90),
        f(p.lat_us.p99),
        f(p.lat_us.p999),
        f(p.lat_us.max),
    ]);
    r.extend(dir_cells(p.read.as_ref()));
    r.extend(dir_cells(p.write.as_ref()));
    match &p.sync {
        Some(s) => r.extend([s.count.to_string(), f(s.lat_us.mean)]),
        None => r.extend([String::new(), String::new()]),
    }
    r.extend([
        f(p.cpu.usr_pct),
        f(p.cpu.sys_pct),
        p.errors.len().to_string(),
    ]);
    r
}

/// Every pass of every run of `set` (each run's own passes, not pooled), with the
/// configuration label of its set. Ends with a newline.
pub fn render(set: &RunSet) -> String {
    let mut rows = Vec::new();
    for c in &set.configs {
        for run in &c.runs {
            for t in &run.tests {
                for p in &t.passes {
                    let r = row(run, &c.label, t, p);
                    debug_assert_eq!(r.len(), COLUMNS.len());
                    rows.push(r);
                }
            }
        }
    }
    table(COLUMNS, rows)
}

/// A CSV table (RFC 4180 quoting): the header `columns`, then `rows`. Ends with a newline.
pub fn table<R: AsRef<[u8]>>(columns: &[&str], rows: impl IntoIterator<Item = Vec<R>>) -> String {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    w.write_record(columns).expect("writing to memory");
    for r in rows {
        w.write_record(&r).expect("writing to memory");
    }
    let bytes = w.into_inner().expect("flushing to memory");
    String::from_utf8(bytes).expect("all cells are UTF-8")
}

/// [`render`] for runs that are not part of a set (each run its own configuration).
pub fn render_runs(runs: &[RunRecord]) -> String {
    render(&RunSet::per_run(runs.to_vec()))
}

/// CSV: `iolab report --csv`, one row per pass.
pub struct Csv;

static ABOUT: super::About = super::About {
    name: "csv",
    title: "CSV",
    extension: "csv",
    runs: Some("Write CSV, one row per pass, to FILE (\"-\" or no FILE: standard output)"),
    comparison: None,
    history: None,
};

impl super::Format for Csv {
    fn about(&self) -> &'static super::About {
        &ABOUT
    }
    fn render(&self, view: &super::View<'_>) -> Option<String> {
        view.runs().map(render)
    }
}
