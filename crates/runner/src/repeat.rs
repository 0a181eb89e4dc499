//! `--repeat N`: the whole workload N times in a row (every test, then every test again),
//! each repetition its own stored run under one label, and a summary of each test across
//! the runs: the median of the runs' headline values, their spread and a 95% CI with the
//! runs as the unit.

use std::sync::atomic::Ordering;

use iolab_measure::{MetricSummary, RunRecord};
use serde_json::{json, Value};

use crate::context::{run_parsed, Finished};
use crate::status::{ExitStatus, RunError, UsageError};
use crate::workload::Parsed;

/// What a `--repeat` series came to.
pub struct Repeated {
    /// The label every run of the series carries.
    pub label: String,
    /// The repetitions asked for.
    pub asked: u32,
    /// Every repetition that started, in order.
    pub runs: Vec<Finished>,
    /// The worst status of the series.
    pub status: ExitStatus,
    /// Why the series ended before `asked` repetitions, if it did.
    pub ended_early: Option<String>,
    /// An error outside any one run (the signal handlers, a re-parse that failed).
    pub error: Option<RunError>,
}

/// One test across the complete runs of a series.
#[derive(Debug, Clone)]
pub struct AcrossRuns {
    pub name: String,
    pub group: String,
    /// Over the runs' headline MB/s of the test.
    pub mb_s: MetricSummary,
    /// Over the runs' headline IOPS of the test.
    pub iops: MetricSummary,
    /// The headline MB/s of each complete run, in run order.
    pub values_mb_s: Vec<f64>,
}

impl AcrossRuns {
    /// The figure a test is about: MB/s when it moved bytes, else IOPS (operations).
    pub fn headline(&self) -> (&MetricSummary, &'static str) {
        if self.mb_s.max > 0.0 {
            (&self.mb_s, "MB/s")
        } else {
            (&self.iops, "IOPS")
        }
    }
}

/// The label of a series given none: the workload and the start time.
pub fn default_label(name: &str) -> String {
    format!(
        "{name}-repeat-{}",
        chrono::Local::now().format("%Y%m%d-%H%M%S")
    )
}

/// Runs `first` and then `n - 1` more repetitions, each planned again by `again` (the
/// same command line) and all under one label (`--label`, else [`default_label`]).
/// `each` sees every repetition as it finishes. A repetition that does not end with
/// status 0 ends the series (a stop request, a failure, an integrity finding): what
/// finished is stored, and the series takes that status.
pub fn run(
    first: Parsed,
    n: u32,
    mut again: impl FnMut() -> Result<Parsed, UsageError>,
    mut each: impl FnMut(u32, &Finished),
) -> Repeated {
    let label = first
        .common
        .label
        .clone()
        .unwrap_or_else(|| default_label(&first.name));
    let mut out = Repeated {
        label: label.clone(),
        asked: n,
        runs: Vec::new(),
        status: ExitStatus::Ok,
        ended_early: None,
        error: None,
    };
    let stop = match crate::signals::install() {
        Ok(s) => s,
        Err(e) => {
            out.status = ExitStatus::Failed;
            out.error = Some(RunError::caused("signals", e));
            return out;
        }
    };
    let mut next = Some(first);
    for i in 1..=n {
        if stop.load(Ordering::Relaxed) {
            out.status = out.status.worst(ExitStatus::Interrupted);
            out.ended_early = Some(format!("interrupted before run {i} of {n}"));
            break;
        }
        let mut parsed = match next.take().map_or_else(&mut again, Ok) {
            Ok(p) => p,
            Err(e) => {
                out.status = out.status.worst(ExitStatus::Usage);
                out.ended_early = Some(format!("run {i} of {n} could not be planned again"));
                out.error = Some(RunError::Usage(e));
                break;
            }
        };
        parsed.common.label = Some(label.clone());
        let round = (
            format!("run {i}/{n} "),
            format!("repetition {i} of {n} (`--repeat {n}`, label {label})"),
        );
        let f = run_parsed(parsed, Some(stop.clone()), Some(round));
        each(i, &f);
        let status = f.status;
        out.status = out.status.worst(status);
        out.runs.push(f);
        if status != ExitStatus::Ok {
            if i < n {
                out.ended_early = Some(format!(
                    "run {i} of {n} ended with exit status {}: no more runs were started",
                    status.code()
                ));
            }
            break;
        }
    }
    out
}

impl Repeated {
    /// The runs that finished everything they were asked to do.
    pub fn complete(&self) -> Vec<&RunRecord> {
        self.runs
            .iter()
            .filter(|f| f.status == ExitStatus::Ok)
            .filter_map(|f| f.run.as_ref())
            .filter(|r| r.complete)
            .collect()
    }

    /// Every test across the complete runs, in the order of the first run that has it.
    pub fn across(&self) -> Vec<AcrossRuns> {
        let runs = self.complete();
        let mut out: Vec<AcrossRuns> = Vec::new();
        for r in &runs {
            for t in &r.tests {
                if out.iter().any(|a| a.name == t.name) {
                    continue;
                }
                let of = |f: fn(&iolab_measure::TestSummary) -> f64| -> Vec<f64> {
                    runs.iter()
                        .filter_map(|r| r.tests.iter().find(|x| x.name == t.name))
                        .map(|x| f(&x.summary))
                        .collect()
                };
                let values_mb_s = of(|s| s.mb_s);
                out.push(AcrossRuns {
                    name: t.name.clone(),
                    group: t.group.clone(),
                    mb_s: iolab_stats::metric(&values_mb_s),
                    iops: iolab_stats::metric(&of(|s| s.iops)),
                    values_mb_s,
                });
            }
        }
        out
    }

    /// The stored id of every repetition that started a run (`None`: not stored).
    pub fn run_ids(&self) -> Vec<Option<i64>> {
        self.runs
            .iter()
            .filter_map(|f| f.run.as_ref())
            .map(|r| r.id)
            .collect()
    }

    /// The summary printed after the runs.
    pub fn render(&self) -> String {
        let ids: Vec<String> = self
            .run_ids()
            .iter()
            .map(|id| id.map_or("(not stored)".into(), |i| i.to_string()))
            .collect();
        let complete = self.complete().len();
        let mut s = format!(
            "\n--repeat {}: {} run(s) started, {complete} complete, label {}; runs {}\n",
            self.asked,
            self.runs.len(),
            self.label,
            if ids.is_empty() {
                "none".into()
            } else {
                ids.join(", ")
            }
        );
        if let Some(why) = &self.ended_early {
            s.push_str(&format!("ended early: {why}\n"));
        }
        let across = self.across();
        if across.is_empty() {
            s.push_str("no complete run: nothing to summarise\n");
            return s;
        }
        s.push_str(&format!(
            "Each test across the {complete} complete run(s), the runs as the unit: the median \
             of the runs' headline values\n(MB/s, or IOPS for a test that moves no bytes), \
             their range, their CV and the {} (clamped at 0)\n",
            iolab_stats::RUNS_CI_METHOD
        ));
        s.push_str(&format!(
            "{:<26} {:>10} {:>5} {:>21} {:>7}  {}\n",
            "Test", "median", "", "min – max", "CV", "95% CI of the mean"
        ));
        for a in &across {
            let (m, unit) = a.headline();
            let ci = if m.n >= 2 {
                format!(
                    "{} – {} (±{:.1}%)",
                    num(m.ci_low.max(0.0)),
                    num(m.ci_high),
                    iolab_stats::ci_pct(m)
                )
            } else {
                "needs 2 runs".into()
            };
            s.push_str(&format!(
                "{:<26} {:>10} {unit:<5} {:>21} {:>6.1}%  {ci}\n",
                a.name,
                num(m.median),
                format!("{} – {}", num(m.min), num(m.max)),
                m.cv * 100.0,
            ));
        }
        s
    }

    /// The JSON document of the series (`"schema": "iolab.repeat/1"`, docs/json.md):
    /// `documents` are the runs' own documents, in order.
    pub fn document(&self, documents: Vec<Value>) -> Value {
        // The statistics object of a run document's summary, without an interval below 2.
        let metric = |m: &MetricSummary| {
            let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
            let ci = (m.n >= 2).then(|| iolab_stats::ci_pct(m));
            v["ci_pct"] = json!(ci);
            if ci.is_none() {
                v["ci_low"] = Value::Null;
                v["ci_high"] = Value::Null;
            }
            v
        };
        json!({
            "schema": REPEAT_SCHEMA,
            "label": self.label,
            "repeat": self.asked,
            "started": self.runs.len(),
            "complete": self.complete().len(),
            "run_ids": self.run_ids(),
            "exit_code": self.status.code(),
            "ended_early": self.ended_early,
            "ci_method": iolab_stats::RUNS_CI_METHOD,
            "tests": self.across().iter().map(|a| json!({
                "name": a.name,
                "group": a.group,
                "runs": a.mb_s.n,
                "mb_s": metric(&a.mb_s),
                "iops": metric(&a.iops),
                "values_mb_s": a.values_mb_s,
            })).collect::<Vec<_>>(),
            "runs": documents,
        })
    }
}

/// Identifies the layout of [`Repeated::document`].
pub const REPEAT_SCHEMA: &str = "iolab.repeat/1";

/// A MB/s figure with three significant digits (two decimals below 10).
fn num(v: f64) -> String {
    let decimals = 2 - (v.abs() >= 10.0) as usize - (v.abs() >= 100.0) as usize;
    format!("{v:.decimals$}")
}
