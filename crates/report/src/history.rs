//! Runs over time: for each target and preset, one line per run with its headline numbers
//! (MB/s, or IOPS for tests that move no bytes), a mark where a number moved beyond the
//! run-to-run noise against the previous run (the rule of `iolab_stats::noise`: the noise
//! measured on the other runs of the same command, in the history or in the store), and
//! the trend from the first run to the last.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use iolab_measure::{RunRecord, TestRecord};
use iolab_stats::noise::{self, LogGroup, Outcome, RunTest, Side};
use serde_json::{json, Value};

use crate::set::{self, Metric, Noise};
use crate::text::{num, wrap, Column, Table};

/// What the marks rest on, as the history prints it.
pub const MARKS: &str = "↑/↓: different, higher/lower than the previous run with that test \
     by more than run-to-run noise (Student's t on ln(value) against the variance of the \
     earlier runs of the same command — same target, options, label and host —, two-sided, \
     95%, a run's tests corrected together with Holm) and not within the margin; = the same \
     within the margin (the ratio's 95% interval inside it); ~ undecided; ? cannot be told: \
     fewer than 2 earlier runs of the command measure its noise.";

/// Command (fingerprint), test name, job (as JSON) and metric.
type Key = (String, String, String, Metric);
/// When a run started, and its id: the order of a command's runs.
type When = (String, i64);

/// The earlier runs of a command: for each command, test, job and metric, the complete
/// runs known with it (the history's own and the store's other runs of the same
/// commands) in time order, with the running log group after each. A mark's noise is the
/// group of the runs before the earlier of its two runs: a level shift after them cannot
/// hide it, and a mark never changes when later runs are stored.
#[derive(Debug, Default)]
pub struct NoiseIndex<'a> {
    noise: Option<&'a Noise>,
    groups: HashMap<Key, Vec<(When, LogGroup)>>,
}

impl<'a> NoiseIndex<'a> {
    /// The index of `runs` and `noise.others`, fingerprints from `noise`.
    pub fn new(runs: &'a [RunRecord], noise: &'a Noise) -> NoiseIndex<'a> {
        let mut entries: HashMap<Key, Vec<(When, f64)>> = HashMap::new();
        let mut seen: HashSet<i64> = HashSet::new();
        let all = runs
            .iter()
            .filter_map(|r| Some((noise.fingerprint(r)?, r)))
            .chain(noise.others.iter().map(|(fp, r)| (fp.as_str(), r)));
        for (fp, r) in all {
            let Some(id) = r.id else { continue };
            if !r.complete || !seen.insert(id) {
                continue;
            }
            for t in &r.tests {
                for m in [Metric::MbS, Metric::Iops] {
                    if let Some((key, v)) = member(fp, t, m) {
                        entries
                            .entry(key)
                            .or_default()
                            .push(((r.started_at.clone(), id), v));
                    }
                }
            }
        }
        let groups = entries
            .into_iter()
            .map(|(k, mut v)| {
                v.sort_by(|a, b| a.0.cmp(&b.0));
                let mut g = LogGroup::default();
                let running = v
                    .into_iter()
                    .map(|(when, x)| {
                        g.add(x);
                        (when, g)
                    })
                    .collect();
                (k, running)
            })
            .collect();
        NoiseIndex {
            noise: Some(noise),
            groups,
        }
    }

    /// The side of run `r`'s test `t`: its value, its command, and the runs of that
    /// command started before `before` (the earlier of the two compared runs).
    fn side(
        &self,
        r: &RunRecord,
        t: &TestRecord,
        m: Metric,
        before: &RunRecord,
    ) -> Option<Side<'a>> {
        let runs = LogGroup::of(&[m.of_summary(&t.summary)])?;
        let Some(fp) = self.noise.and_then(|n| n.fingerprint(r)) else {
            return Some(Side {
                runs,
                command: None,
                others: None,
            });
        };
        let job = serde_json::to_string(&t.job).ok()?;
        let when = (before.started_at.clone(), before.id.unwrap_or(i64::MIN));
        let others = self
            .groups
            .get(&(fp.to_string(), t.name.clone(), job, m))
            .and_then(|v| {
                let k = v.partition_point(|(w, _)| *w < when);
                k.checked_sub(1).map(|k| v[k].1)
            });
        Some(Side {
            runs,
            command: Some(fp),
            others,
        })
    }
}

/// The key and value a run's test adds to the noise: a test with passes and a positive
/// value.
fn member(fp: &str, t: &TestRecord, m: Metric) -> Option<(Key, f64)> {
    if t.passes.is_empty() && t.summary.passes == 0 {
        return None;
    }
    let v = m.of_summary(&t.summary);
    let job = serde_json::to_string(&t.job).ok()?;
    noise::loggable(v).then(|| ((fp.to_string(), t.name.clone(), job, m), v))
}

/// Runs of one target and preset, oldest first.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    pub target: String,
    pub preset: String,
    pub runs: Vec<&'a RunRecord>,
    /// Test names in order of first appearance.
    pub tests: Vec<String>,
    index: Rc<NoiseIndex<'a>>,
    /// The margin, in percent, inside which a change is *same*.
    pub margin_pct: f64,
}

/// How one test's headline moved against the previous run that has it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Move {
    /// The first run with the test, or no previous value.
    First,
    /// Significantly higher / lower than the previous run (change in percent).
    Up(f64, RunTest),
    Down(f64, RunTest),
    /// Within the noise.
    Steady(f64, RunTest),
    /// Cannot be told from run-to-run noise: fewer than 2 other runs of the command.
    Unknown(f64),
    /// A value is 0: no ratio to test.
    Untested,
}

impl Move {
    /// The change against the previous run, in percent.
    pub fn change(&self) -> Option<f64> {
        match self {
            Move::Up(c, _) | Move::Down(c, _) | Move::Steady(c, _) | Move::Unknown(c) => Some(*c),
            Move::First | Move::Untested => None,
        }
    }

    /// The test behind the mark.
    pub fn test(&self) -> Option<&RunTest> {
        match self {
            Move::Up(_, t) | Move::Down(_, t) | Move::Steady(_, t) => Some(t),
            _ => None,
        }
    }

    fn key(&self) -> &'static str {
        match self {
            Move::First => "first",
            Move::Up(..) => "up",
            Move::Down(..) => "down",
            Move::Steady(..) => "steady",
            Move::Unknown(_) => "cannot_tell",
            Move::Untested => "untested",
        }
    }

    fn mark(&self) -> &'static str {
        match self {
            Move::First | Move::Untested => " ",
            Move::Up(..) => "↑",
            Move::Down(..) => "↓",
            Move::Steady(..) => "=",
            Move::Unknown(_) => "?",
        }
    }
}

/// Splits runs (oldest first) into series by target and preset; `noise` gives the runs'
/// fingerprints and the other stored runs of their commands.
pub fn series<'a>(runs: &'a [RunRecord], noise: &'a Noise) -> Vec<Series<'a>> {
    series_at(runs, noise, set::DEFAULT_MARGIN_PCT)
}

/// [`series`] with the margin inside which a change is *same*.
pub fn series_at<'a>(runs: &'a [RunRecord], noise: &'a Noise, margin_pct: f64) -> Vec<Series<'a>> {
    let index = Rc::new(NoiseIndex::new(runs, noise));
    let mut out: Vec<Series<'a>> = Vec::new();
    for r in runs {
        let k = match out
            .iter()
            .position(|s| s.target == r.target.path && s.preset == r.preset)
        {
            Some(k) => k,
            None => {
                out.push(Series {
                    target: r.target.path.clone(),
                    preset: r.preset.clone(),
                    runs: Vec::new(),
                    tests: Vec::new(),
                    index: Rc::clone(&index),
                    margin_pct,
                });
                out.len() - 1
            }
        };
        let s = &mut out[k];
        s.runs.push(r);
        for t in &r.tests {
            if !s.tests.contains(&t.name) {
                s.tests.push(t.name.clone());
            }
        }
    }
    out
}

/// Test `name` of run `r` when it measured something (runs may be loaded with their
/// tests' summaries only).
fn test<'a>(r: &'a RunRecord, name: &str) -> Option<&'a TestRecord> {
    r.tests
        .iter()
        .find(|t| t.name == name && (!t.passes.is_empty() || t.summary.passes > 0))
}

impl Series<'_> {
    /// The metric of a test in this series: MB/s unless none of its runs moved bytes.
    pub fn metric(&self, name: &str) -> Metric {
        set::primary_metric(self.runs.iter().filter_map(|r| test(r, name)))
    }

    /// Headline of test `name` in run `i`, and how it moved against the previous run that
    /// has the test: up or down only when *different* — kept by Holm's correction over
    /// the run's tests and not within the margin ([`Series::decision`]).
    pub fn point(&self, i: usize, name: &str) -> Option<(f64, Move)> {
        let (v, mv) = self.raw_point(i, name)?;
        let mv = match (mv, self.decision(i, name).map(|d| d.call)) {
            (Move::Up(c, t) | Move::Down(c, t), Some(call)) if call != set::Call::Different => {
                Move::Steady(c, t)
            }
            (m, _) => m,
        };
        Some((v, mv))
    }

    /// The three-way verdict on test `name` of run `i` against the previous run with it,
    /// the run's tests decided together; `None` for a first run or an untested value.
    pub fn decision(&self, i: usize, name: &str) -> Option<set::Decision> {
        let raw: Vec<(&String, Option<Move>)> = self
            .tests
            .iter()
            .map(|t| (t, self.raw_point(i, t).map(|(_, m)| m)))
            .collect();
        let tested: Vec<(&String, RunTest)> = raw
            .iter()
            .filter_map(|(t, m)| Some((*t, *m.as_ref()?.test()?)))
            .collect();
        let ps: Vec<f64> = tested.iter().map(|(_, t)| t.p).collect();
        let kept = noise::holm(&ps, iolab_stats::score::ALPHA);
        let (_, mv) = raw.iter().find(|(t, _)| *t == name)?;
        match mv.as_ref()? {
            Move::Unknown(_) => Some(set::Decision {
                call: set::Call::Undecided,
                higher: false,
                runs_needed: None,
                confounded_by: Vec::new(),
            }),
            m => {
                let t = m.test()?;
                let k = tested.iter().position(|(x, _)| *x == name)?;
                let call = t.call(self.margin_pct, kept[k]);
                Some(set::Decision {
                    call,
                    higher: t.ratio > 1.0,
                    runs_needed: (call == set::Call::Undecided)
                        .then(|| t.runs_needed(self.margin_pct))
                        .flatten(),
                    confounded_by: Vec::new(),
                })
            }
        }
    }

    /// [`Series::point`] with each test judged alone.
    fn raw_point(&self, i: usize, name: &str) -> Option<(f64, Move)> {
        let m = self.metric(name);
        let r = self.runs[i];
        let t = test(r, name)?;
        let v = set::run_value(t, m)?;
        let prev = self.runs[..i]
            .iter()
            .rev()
            .find_map(|p| Some((*p, test(p, name)?)));
        let mv = match prev {
            None => Move::First,
            Some((p, pt)) => {
                let change = set::change_pct(m.of_summary(&pt.summary), v).unwrap_or(0.0);
                let sides = self
                    .index
                    .side(p, pt, m, p)
                    .zip(self.index.side(r, t, m, p));
                match sides.map(|(a, b)| noise::test(&a, &b)) {
                    None | Some(Outcome::Empty) => Move::Untested,
                    Some(Outcome::NoNoise { .. }) => Move::Unknown(change),
                    Some(Outcome::Tested(rt)) if rt.higher() => Move::Up(change, rt),
                    Some(Outcome::Tested(rt)) if rt.lower() => Move::Down(change, rt),
                    Some(Outcome::Tested(rt)) => Move::Steady(change, rt),
                }
            }
        };
        Some((v, mv))
    }
}

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// A sparkline of `values` (None leaves a space), scaled from their minimum to maximum.
pub fn sparkline(values: &[Option<f64>]) -> String {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let lo = present.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = present.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|v| match v {
            None => ' ',
            Some(v) if hi > lo => {
                let k = ((v - lo) / (hi - lo) * 7.0).round() as usize;
                SPARK[k.min(7)]
            }
            Some(_) => SPARK[3],
        })
        .collect()
}

/// `2025-03-01T10:00:00.123Z` as `2025-03-01 10:00`.
fn short_time(t: &str) -> String {
    if t.len() >= 16 && t.as_bytes()[10] == b'T' && t.is_char_boundary(16) {
        format!("{} {}", &t[..10], &t[11..16])
    } else {
        t.to_string()
    }
}

/// The history as terminal text: a table per target and preset (split into several when
/// its tests do not fit in [`crate::style::width`] columns). `noise`: the runs' fingerprints and
/// the other stored runs of their commands. Ends with a newline.
pub fn render(runs: &[RunRecord], noise: &Noise) -> String {
    render_at(runs, noise, set::DEFAULT_MARGIN_PCT)
}

/// [`render`] with the margin inside which a change is *same*.
pub fn render_at(runs: &[RunRecord], noise: &Noise, margin_pct: f64) -> String {
    let mut out = Vec::new();
    if runs.is_empty() {
        return "No runs match.\n".to_string();
    }
    out.extend(wrap(
        &format!(
            "Headline per test: MB/s (IOPS for tests that move no bytes), the median of the \
             run's passes. {MARKS} Margin: ±{}. W = warnings.",
            crate::compare::pct(margin_pct)
        ),
        crate::style::width(),
        "",
        "",
    ));
    for s in series_at(runs, noise, margin_pct) {
        out.push(String::new());
        out.extend(wrap(
            &format!(
                "{} · preset {} · {} run{}",
                s.target,
                s.preset,
                s.runs.len(),
                if s.runs.len() == 1 { "" } else { "s" }
            ),
            crate::style::width(),
            "",
            "  ",
        ));
        // Fixed columns take about 32 characters; each test column its name's width.
        let fixed = 4 + 2 + 16 + 2 + 10 + 2 + 2;
        let mut chunks: Vec<Vec<&String>> = vec![Vec::new()];
        let mut width = fixed;
        for t in &s.tests {
            let w = t.chars().count().max(9) + 2;
            if width + w > crate::style::width() && !chunks.last().unwrap().is_empty() {
                chunks.push(Vec::new());
                width = fixed;
            }
            width += w;
            chunks.last_mut().unwrap().push(t);
        }
        for chunk in chunks.iter().filter(|c| !c.is_empty()) {
            out.push(String::new());
            let mut cols = vec![
                Column::right("ID"),
                Column::left("Started (UTC)"),
                Column::left("Label").shrink(crate::text::Shrink::End(6)),
                Column::right("W"),
            ];
            for t in chunk {
                let m = s.metric(t);
                let h = if m == Metric::MbS {
                    t.to_string()
                } else {
                    format!("{t} ({})", m.label())
                };
                cols.push(Column::right(&h));
            }
            let mut table = Table::new(cols);
            for (i, r) in s.runs.iter().enumerate() {
                let mut row = vec![
                    r.id.map(|i| i.to_string()).unwrap_or_default(),
                    short_time(&r.started_at),
                    r.label.clone().unwrap_or_default(),
                    if r.warnings.is_empty() {
                        String::new()
                    } else {
                        r.warnings.len().to_string()
                    },
                ];
                for t in chunk {
                    row.push(match s.point(i, t) {
                        None => "-".into(),
                        Some((v, mv @ Move::Steady(..))) => {
                            let same = s.decision(i, t).is_some_and(|d| d.call == set::Call::Same);
                            format!("{}{}", num(v), if same { mv.mark() } else { "~" })
                        }
                        Some((v, mv)) => format!("{}{}", num(v), mv.mark()),
                    });
                }
                table.row(row);
            }
            if s.runs.len() > 1 {
                let mut trend = vec![String::new(), "trend".into(), String::new(), String::new()];
                let mut change = vec![
                    String::new(),
                    "first → last".into(),
                    String::new(),
                    String::new(),
                ];
                for t in chunk {
                    let m = s.metric(t);
                    let vals: Vec<Option<f64>> = s
                        .runs
                        .iter()
                        .map(|r| test(r, t).and_then(|x| set::run_value(x, m)))
                        .collect();
                    let w = t.chars().count().max(9);
                    let tail = &vals[vals.len().saturating_sub(w)..];
                    trend.push(sparkline(tail));
                    let present: Vec<f64> = vals.iter().flatten().copied().collect();
                    change.push(match (present.first(), present.last()) {
                        (Some(a), Some(b)) if present.len() > 1 => {
                            crate::compare::change_text(set::change_pct(*a, *b))
                        }
                        _ => String::new(),
                    });
                }
                table.row(trend);
                table.row(change);
            }
            out.extend(table.render(crate::style::width()));
        }
        // Every change "?": say why here, not only in the legend above.
        let (mut unknown, mut judged) = (0usize, 0usize);
        for i in 0..s.runs.len() {
            for t in &s.tests {
                match s.point(i, t) {
                    Some((_, Move::Unknown(_))) => unknown += 1,
                    Some((_, Move::Up(..) | Move::Down(..) | Move::Steady(..))) => judged += 1,
                    _ => {}
                }
            }
        }
        if unknown > 0 && judged == 0 {
            out.push(String::new());
            out.extend(wrap(
                &format!(
                    "? on every change: no run here has 2 earlier stored runs of its own \
                     command (same target, options, label and host) to measure run-to-run \
                     noise, so no change can be told from noise; the values are the runs' \
                     medians. Repeat the command (`iolab run {} ... --repeat 3`, or the same \
                     command on other days) to have changes judged.",
                    s.preset
                ),
                crate::style::width(),
                "",
                "",
            ));
        }
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// The `iolab.history/2` JSON document.
pub fn document(runs: &[RunRecord], noise: &Noise, iolab_version: &str) -> Value {
    document_at(runs, noise, iolab_version, set::DEFAULT_MARGIN_PCT)
}

/// [`document`] with the margin inside which a change is *same*.
pub fn document_at(
    runs: &[RunRecord],
    noise: &Noise,
    iolab_version: &str,
    margin_pct: f64,
) -> Value {
    let series: Vec<Value> = series_at(runs, noise, margin_pct)
        .iter()
        .map(|s| {
            let runs: Vec<Value> = s
                .runs
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let tests: Vec<Value> = s
                        .tests
                        .iter()
                        .filter_map(|t| {
                            let (v, mv) = s.point(i, t)?;
                            let rt = mv.test();
                            let d = s.decision(i, t);
                            Some(json!({
                                "verdict": d.as_ref().map(|d| d.call.key()),
                                "ratio": rt.map(|x| x.ratio),
                                "ratio_ci95": rt.map(|x| [x.ratio_low, x.ratio_high]),
                                "runs_needed": d.as_ref().and_then(|d| d.runs_needed),
                                "test": t,
                                "metric": s.metric(t).key(),
                                "value": v,
                                "change_pct": mv.change(),
                                "movement": mv.key(),
                                "p": rt.map(|x| x.p),
                                "method": rt.map(|x| x.method.key()),
                                "noise_runs": rt.map(|x| x.noise_runs),
                                "df": rt.map(|x| x.df),
                            }))
                        })
                        .collect();
                    json!({
                        "run_id": r.id,
                        "started_at": r.started_at,
                        "label": r.label,
                        "complete": r.complete,
                        "warnings": r.warnings.len(),
                        "tests": tests,
                    })
                })
                .collect();
            json!({
                "target": s.target,
                "preset": s.preset,
                "runs": runs,
            })
        })
        .collect();
    json!({
        "schema": "iolab.history/2",
        "iolab_version": iolab_version,
        "method": noise::METHOD,
        "marks": MARKS,
        "margin_pct": margin_pct,
        "series": series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_between_extremes() {
        assert_eq!(sparkline(&[Some(1.0), Some(2.0), None, Some(3.0)]), "▁▅ █");
        assert_eq!(sparkline(&[Some(5.0), Some(5.0)]), "▄▄");
        assert_eq!(short_time("2025-03-01T10:00:00.123Z"), "2025-03-01 10:00");
    }
}
