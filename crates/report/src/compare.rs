//! Side-by-side comparison of runs (or of groups of runs): tests aligned by name, each
//! metric's value on every side (per run the headline, the median of its passes; a side of
//! several runs shows their geometric mean), the change against the first side, and
//! whether that change stands out from run-to-run noise: judged on runs, never on the
//! passes inside one run (`iolab_stats::noise`, docs/statistics.md).
//!
//! [`compare`] computes it, [`render`] prints it for a terminal (≤ 100 columns) and
//! [`document`] gives the `iolab.comparison/2` JSON document (`docs/reports.md`).

use iolab_measure::{Warning, WarningCode};
use iolab_stats::noise::{Method, METHOD};
use iolab_stats::score::ALPHA;
use serde_json::{json, Value};

use crate::set::{self, id_ranges, Judgement, Metric, RunSet, Tested};
use crate::terminal::Detail;
use crate::text::{lat, num, wrap, Column, Gap, Shrink, Table};

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// `A`, `B`, ... as the table heads its columns.
    pub letter: String,
    /// The configuration label (run label, `run N`, or the `--label` value).
    pub label: String,
    pub run_ids: Vec<i64>,
    /// `cdm on /mnt/x (dir, ext4) · 2025-03-01T10:00:00Z` for each run (prefixed with
    /// `run N: ` when the side has several).
    pub runs: Vec<String>,
}

/// Outcome of the test of one side against the first.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The first side itself.
    Baseline,
    /// Significant and in the better direction for the metric.
    Better(Tested),
    /// Significant and in the worse direction.
    Worse(Tested),
    /// Not significant.
    Same(Tested),
    /// Not tested, and why: a single run without measured noise
    /// ([`Judgement::NoNoise`]), a value of 0, a missing test.
    Untested(Judgement),
}

impl Verdict {
    fn of(j: Judgement, higher_is_better: bool) -> Verdict {
        match j {
            Judgement::Tested(t) if t.test.significant() => {
                if (t.test.ratio > 1.0) == higher_is_better {
                    Verdict::Better(t)
                } else {
                    Verdict::Worse(t)
                }
            }
            Judgement::Tested(t) => Verdict::Same(t),
            other => Verdict::Untested(other),
        }
    }

    pub fn tested(&self) -> Option<&Tested> {
        match self {
            Verdict::Better(t) | Verdict::Worse(t) | Verdict::Same(t) => Some(t),
            _ => None,
        }
    }

    /// `Some(true)` when significant, `Some(false)` when tested and not, `None` otherwise.
    pub fn significant(&self) -> Option<bool> {
        match self {
            Verdict::Better(_) | Verdict::Worse(_) => Some(true),
            Verdict::Same(_) => Some(false),
            _ => None,
        }
    }

    /// A short word for JSON: `baseline better worse same cannot_tell n/a missing`.
    pub fn key(&self) -> &'static str {
        match self {
            Verdict::Baseline => "baseline",
            Verdict::Better(_) => "better",
            Verdict::Worse(_) => "worse",
            Verdict::Same(_) => "same",
            Verdict::Untested(Judgement::NoNoise { .. }) => "cannot_tell",
            Verdict::Untested(Judgement::NotPositive | Judgement::Tested(_)) => "n/a",
            Verdict::Untested(Judgement::Missing) => "missing",
        }
    }

    /// As the table prints it: `yes, better (p=0.003)`, `no (p=0.41)`, `can't tell (1 run)`.
    pub fn text(&self) -> String {
        match self {
            Verdict::Baseline | Verdict::Untested(Judgement::Missing) => String::new(),
            Verdict::Better(t) => format!("yes, better ({})", p_text(t.test.p)),
            Verdict::Worse(t) => format!("yes, worse ({})", p_text(t.test.p)),
            Verdict::Same(t) => format!("no ({})", p_text(t.test.p)),
            Verdict::Untested(Judgement::NoNoise { .. }) => "can't tell (1 run)".into(),
            Verdict::Untested(_) => "n/a (a value is 0)".into(),
        }
    }
}

/// `p=0.003`, `p=0.41`, `p<0.001`.
pub fn p_text(p: f64) -> String {
    if p < 0.001 {
        "p<0.001".to_string()
    } else if p < 0.01 {
        format!("p={p:.3}")
    } else {
        format!("p={p:.2}")
    }
}

/// One side's value of one metric of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Runs on this side with the test.
    pub runs: usize,
    /// Passes of those runs together.
    pub passes: usize,
    /// Each run's headline value, in run order.
    pub run_values: Vec<f64>,
    /// The side's value: the geometric mean of `run_values` (the headline with one run).
    pub value: Option<f64>,
    /// Change of `value` against the first side, in percent.
    pub change_pct: Option<f64>,
    pub verdict: Verdict,
}

/// One metric of one test on every side.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub test: String,
    pub metric: Metric,
    pub cells: Vec<Cell>,
}

/// A whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub sides: Vec<Side>,
    /// Tests present on the first side and at least one other, metric by metric.
    pub rows: Vec<Row>,
    /// Tests missing on some side: (test, letters of the sides that have it).
    pub partial: Vec<(String, Vec<String>)>,
    /// Every warning of every run, with the side's letter.
    pub warnings: Vec<(String, Warning)>,
    /// Per side, BUSY_CPU's worst figure over the passes of the tests it was raised on: the
    /// most CPU other processes used in one pass, the busiest of them and its pid.
    pub busiest: Vec<Option<String>>,
}

fn letter(i: usize) -> String {
    let mut s = String::new();
    let mut i = i;
    loop {
        s.insert(0, (b'A' + (i % 26) as u8) as char);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    s
}

/// Compares the configurations of `set`, the first (`set.baseline` is ignored: the first
/// configuration is side A and the reference).
pub fn compare(set: &RunSet) -> Comparison {
    let sides: Vec<Side> = set
        .configs
        .iter()
        .enumerate()
        .map(|(i, c)| Side {
            letter: letter(i),
            label: c.label.clone(),
            run_ids: c.run_ids(),
            runs: c
                .runs
                .iter()
                .map(|r| {
                    let what = format!(
                        "{} on {} · {}",
                        r.preset,
                        crate::facts::target(r),
                        r.started_at
                    );
                    // A side of one run is labelled by it already.
                    match r.id {
                        Some(id) if c.runs.len() > 1 => format!("run {id}: {what}"),
                        _ => what,
                    }
                })
                .collect(),
        })
        .collect();
    let mut rows = Vec::new();
    let mut partial = Vec::new();
    for name in set.test_names() {
        let tests = set.aligned(&name);
        let have: Vec<String> = tests
            .iter()
            .enumerate()
            .filter(|(_, t)| t.is_some())
            .map(|(i, _)| letter(i))
            .collect();
        if have.len() < tests.len() {
            partial.push((name.clone(), have.clone()));
        }
        if tests.first().copied().flatten().is_none() {
            continue;
        }
        if have.len() < 2 {
            continue;
        }
        for m in Metric::ALL {
            // MB/s of tests that move no bytes (metadata operations) says nothing.
            if m == Metric::MbS
                && tests
                    .iter()
                    .flatten()
                    .all(|t| t.passes.iter().all(|p| p.mb_s == 0.0))
            {
                continue;
            }
            let base = set.run_values(0, &name, m);
            let base_value = base.geo_mean();
            let cells = tests
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let Some(t) = t else {
                        return Cell {
                            runs: 0,
                            passes: 0,
                            run_values: Vec::new(),
                            value: None,
                            change_pct: None,
                            verdict: Verdict::Untested(Judgement::Missing),
                        };
                    };
                    let v = if i == 0 {
                        base.clone()
                    } else {
                        set.run_values(i, &name, m)
                    };
                    let value = v.geo_mean();
                    let change_pct = if i == 0 {
                        None
                    } else {
                        base_value
                            .zip(value)
                            .and_then(|(a, b)| set::change_pct(a, b))
                    };
                    let verdict = if i == 0 {
                        Verdict::Baseline
                    } else {
                        Verdict::of(set::judge(&base, &v), m.higher_is_better())
                    };
                    Cell {
                        runs: v.runs.len(),
                        passes: t.passes.len(),
                        run_values: v.values(),
                        value,
                        change_pct,
                        verdict,
                    }
                })
                .collect();
            rows.push(Row {
                test: name.clone(),
                metric: m,
                cells,
            });
        }
    }
    let warnings = set
        .configs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.runs
                .iter()
                .flat_map(move |r| r.warnings.iter().map(move |w| (letter(i), w.clone())))
        })
        .collect();
    let busiest = set
        .configs
        .iter()
        .map(|c| {
            let busy: Vec<&str> = c
                .runs
                .iter()
                .flat_map(|r| &r.warnings)
                .filter(|w| w.code == WarningCode::BusyCpu)
                .filter_map(|w| w.test.as_deref())
                .collect();
            crate::terminal::busiest(&c.tests, &busy)
        })
        .collect();
    Comparison {
        sides,
        rows,
        partial,
        warnings,
        busiest,
    }
}

fn value(m: Metric, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) => match m {
            Metric::LatMean | Metric::LatP99 => lat(v),
            _ => num(v),
        },
    }
}

/// `+26.6%`, `-3.1%`, `0.0%`.
pub fn change_text(c: Option<f64>) -> String {
    match c {
        None => String::new(),
        Some(c) if c.abs() < 0.05 => "0.0%".into(),
        Some(c) if c.abs() < 10.0 => format!("{c:+.1}%"),
        Some(c) => format!("{c:+.0}%"),
    }
}

/// What the verdicts of side `k` (not A) rest on, one sentence per kind, each once.
pub fn evidence(c: &Comparison, k: usize) -> Vec<String> {
    let a = &c.sides[0].letter;
    let b = &c.sides[k].letter;
    let runs = |n: usize, side: &str| format!("{n} run{} on {side}", if n == 1 { "" } else { "s" });
    let mut out: Vec<String> = Vec::new();
    let mut noise_ids: Vec<i64> = Vec::new();
    let mut pooled_runs: Option<(usize, usize)> = None;
    for r in &c.rows {
        let line = match &r.cells[k].verdict {
            Verdict::Better(t) | Verdict::Worse(t) | Verdict::Same(t) => match t.test.method {
                Method::Welch => format!(
                    "{b} vs {a}: {}, {}: Welch's t-test on ln(run value).",
                    runs(t.test.n_a, a),
                    runs(t.test.n_b, b)
                ),
                Method::Pooled if t.noise_ids.is_empty() => {
                    let many = if t.test.n_a >= 2 { a } else { b };
                    format!(
                        "{b} vs {a}: {}, {}: the single run is tested against the spread of \
                         {many}'s runs, which repeat its command (Student's t on ln(run \
                         value)).",
                        runs(t.test.n_a, a),
                        runs(t.test.n_b, b),
                    )
                }
                Method::Pooled => {
                    noise_ids.extend(&t.noise_ids);
                    pooled_runs.get_or_insert((t.test.n_a, t.test.n_b));
                    continue;
                }
            },
            Verdict::Untested(Judgement::NoNoise { runs_a, runs_b, .. }) => {
                let lone: Vec<&str> = [(runs_a, a.as_str()), (runs_b, b.as_str())]
                    .iter()
                    .filter(|(n, _)| **n == 1)
                    .map(|(_, s)| *s)
                    .collect();
                format!(
                    "{b} vs {a}: {} and no other stored run of the same command: the \
                     difference cannot be told from run-to-run noise. Run it again (or use \
                     --repeat N) and compare the labels.",
                    if lone.len() == 2 {
                        format!("1 run on {a} and on {b}")
                    } else {
                        runs(1, lone.first().copied().unwrap_or(b))
                    }
                )
            }
            _ => continue,
        };
        if !out.contains(&line) {
            out.push(line);
        }
    }
    if let Some((na, nb)) = pooled_runs {
        noise_ids.sort_unstable();
        noise_ids.dedup();
        out.push(format!(
            "{b} vs {a}: {}, {}: tested against the run-to-run noise measured on {} other \
             stored run{} of the same command (run{} {}; same target, options, label and \
             host): Student's t on ln(run value) with their pooled variance.",
            runs(na, a),
            runs(nb, b),
            noise_ids.len(),
            if noise_ids.len() == 1 { "" } else { "s" },
            if noise_ids.len() == 1 { "" } else { "s" },
            id_ranges(&noise_ids)
        ));
    }
    out
}

/// The comparison as terminal text, at most [`crate::style::width`] columns, each side's
/// warnings one line a code. Ends with a newline.
pub fn render(c: &Comparison) -> String {
    render_with(c, Detail::Summary)
}

/// Every warning of every side in full (its test, message and fix).
fn warnings_full(c: &Comparison, out: &mut Vec<String>) {
    if c.warnings.is_empty() {
        return;
    }
    out.push(String::new());
    out.push("Warnings:".into());
    for (side, w) in &c.warnings {
        let mut line = format!("{side}: [{}] ", w.code);
        if let Some(t) = &w.test {
            line.push_str(&format!("{t}: "));
        }
        line.push_str(&w.message);
        if !w.fix.is_empty() {
            line.push_str(&format!(" — fix: {}", w.fix));
        }
        out.extend(wrap(&line, crate::style::width(), "  ", "    "));
    }
}

/// Each side's warnings, one line a code, most meaningful code first.
fn warnings_summary(c: &Comparison, out: &mut Vec<String>) {
    if c.warnings.is_empty() {
        return;
    }
    let mut tests: Vec<&str> = c.rows.iter().map(|r| r.test.as_str()).collect();
    tests.extend(c.partial.iter().map(|(t, _)| t.as_str()));
    tests.sort_unstable();
    tests.dedup();
    out.push(String::new());
    out.push(format!(
        "Warnings ({} in all; each with its fix: --verbose):",
        c.warnings.len()
    ));
    for (k, s) in c.sides.iter().enumerate() {
        let mine: Vec<&Warning> = c
            .warnings
            .iter()
            .filter(|(side, _)| *side == s.letter)
            .map(|(_, w)| w)
            .collect();
        if !mine.is_empty() {
            let lead = format!("  {}: ", s.letter);
            let busy = || c.busiest.get(k).cloned().flatten();
            out.extend(crate::terminal::summarise(mine, tests.len(), &lead, |_| {
                busy()
            }));
        }
    }
}

/// The comparison as terminal text with its warnings as `detail` asks.
pub fn render_with(c: &Comparison, detail: Detail) -> String {
    let mut out = Vec::new();
    out.push(format!(
        "iolab compare · {} sides, tests aligned by name",
        c.sides.len()
    ));
    for s in &c.sides {
        let line = format!("{} = {}: {}", s.letter, s.label, s.runs.join("; "));
        out.extend(wrap(&line, crate::style::width(), "  ", "      "));
    }
    out.push(String::new());
    let mut legend = "Values: each run's headline (median of its passes), the geometric mean \
                      where a side has several runs; change is against A. Significant? is \
                      decided on runs, not passes (see below and docs/statistics.md). `!` marks \
                      tests with warnings (below)."
        .to_string();
    let more = detail == Detail::Summary && c.rows.windows(2).any(|w| w[0].test == w[1].test);
    if more {
        legend.push_str(" Each test's first metric; IOPS and latencies with --verbose.");
    }
    out.extend(wrap(&legend, crate::style::width(), "", ""));
    out.push(String::new());

    if c.rows.is_empty() {
        out.push("No test is present on A and another side.".into());
    } else {
        let two = c.sides.len() == 2;
        let mut cols = vec![
            Column::left("Test").shrink(Shrink::End(12)),
            Column::left("Metric"),
            Column::right("A"),
        ];
        for s in &c.sides[1..] {
            cols.push(Column::right(&s.letter).gap(Gap::Block));
            cols.push(Column::right(if two { "Change" } else { "Δ" }));
            cols.push(
                Column::left(
                    if two {
                        "Significant?".to_string()
                    } else {
                        format!("{} vs A", s.letter)
                    }
                    .as_str(),
                )
                .shrink(Shrink::End(5)),
            );
        }
        let mut table = Table::new(cols);
        let warned: Vec<&str> = c
            .warnings
            .iter()
            .filter_map(|(_, w)| w.test.as_deref())
            .collect();
        let mut last = "";
        for r in &c.rows {
            if more && r.test == last {
                continue;
            }
            let name = if r.test == last {
                String::new()
            } else if warned.contains(&r.test.as_str()) {
                format!("{} !", r.test)
            } else {
                r.test.clone()
            };
            last = &r.test;
            let mut row = vec![name, r.metric.label().to_string()];
            row.push(value(r.metric, r.cells[0].value));
            for cell in &r.cells[1..] {
                row.push(value(r.metric, cell.value));
                row.push(change_text(cell.change_pct));
                row.push(cell.verdict.text());
            }
            table.row(row);
        }
        out.extend(table.render(crate::style::width()));
        out.push(String::new());
        out.extend(wrap(
            &format!("How it was decided ({METHOD}):"),
            crate::style::width(),
            "",
            "  ",
        ));
        for k in 1..c.sides.len() {
            for line in evidence(c, k) {
                out.extend(wrap(&line, crate::style::width(), "  ", "    "));
            }
        }
    }
    if !c.partial.is_empty() {
        out.push(String::new());
        out.push("Tests not on every side:".into());
        for (t, have) in &c.partial {
            out.extend(wrap(
                &format!("{t}: only on {}", have.join(", ")),
                crate::style::width(),
                "  ",
                "    ",
            ));
        }
    }
    match detail {
        Detail::Full => warnings_full(c, &mut out),
        Detail::Summary => warnings_summary(c, &mut out),
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

fn finite(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

/// What a verdict rests on, for JSON: the method, runs per side, where the noise came
/// from; `null` for the baseline and missing tests.
pub fn evidence_json(v: &Verdict) -> Value {
    match v {
        Verdict::Better(t) | Verdict::Worse(t) | Verdict::Same(t) => json!({
            "method": t.test.method.key(),
            "runs_a": t.test.n_a,
            "runs_b": t.test.n_b,
            "noise_runs": t.test.noise_runs,
            "noise_run_ids": t.noise_ids,
            "p": finite(Some(t.test.p)),
            "t": finite(Some(t.test.t)),
            "df": finite(Some(t.test.df)),
            "ratio": finite(Some(t.test.ratio)),
            "ratio_ci95": [finite(Some(t.test.ratio_low)), finite(Some(t.test.ratio_high))],
        }),
        Verdict::Untested(Judgement::NoNoise {
            runs_a,
            runs_b,
            a,
            b,
        }) => json!({
            "method": Value::Null,
            "runs_a": runs_a,
            "runs_b": runs_b,
            "reason": format!(
                "a single run on side {} and no other stored run of the same command: the \
                 difference cannot be told from run-to-run noise",
                match (a, b) {
                    (true, true) => "A and on the other side",
                    (true, false) => "A",
                    _ => "B",
                }
            ),
        }),
        Verdict::Untested(Judgement::NotPositive | Judgement::Tested(_)) => json!({
            "method": Value::Null,
            "reason": "a run's value is 0 or not finite: no ratio to test",
        }),
        Verdict::Baseline | Verdict::Untested(Judgement::Missing) => Value::Null,
    }
}

/// The `iolab.comparison/2` JSON document.
pub fn document(c: &Comparison, iolab_version: &str) -> Value {
    let mut tests: Vec<Value> = Vec::new();
    let mut i = 0;
    while i < c.rows.len() {
        let name = &c.rows[i].test;
        let mut metrics = serde_json::Map::new();
        while i < c.rows.len() && &c.rows[i].test == name {
            let r = &c.rows[i];
            let cells: Vec<Value> = r
                .cells
                .iter()
                .zip(&c.sides)
                .map(|(cell, side)| {
                    let t = cell.verdict.tested();
                    json!({
                        "side": side.letter,
                        "runs": cell.runs,
                        "passes": cell.passes,
                        "run_values": cell.run_values,
                        "value": finite(cell.value),
                        "change_pct": finite(cell.change_pct),
                        "verdict": cell.verdict.key(),
                        "significant": cell.verdict.significant(),
                        "p": finite(t.map(|t| t.test.p)),
                        "evidence": evidence_json(&cell.verdict),
                    })
                })
                .collect();
            metrics.insert(r.metric.key().to_string(), Value::Array(cells));
            i += 1;
        }
        tests.push(json!({ "name": name, "metrics": metrics }));
    }
    json!({
        "schema": "iolab.comparison/2",
        "iolab_version": iolab_version,
        "method": METHOD,
        "alpha": ALPHA,
        "sides": c.sides.iter().enumerate().map(|(k, s)| json!({
            "side": s.letter,
            "label": s.label,
            "run_ids": s.run_ids,
            "evidence": if k == 0 { Vec::new() } else { evidence(c, k) },
        })).collect::<Vec<_>>(),
        "tests": tests,
        "partial": c.partial.iter().map(|(t, have)| json!({
            "test": t,
            "sides": have,
        })).collect::<Vec<_>>(),
        "warnings": c.warnings.iter().map(|(side, w)| json!({
            "side": side,
            "code": w.code,
            "message": w.message,
            "fix": w.fix,
            "test": w.test,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_and_texts() {
        assert_eq!(letter(0), "A");
        assert_eq!(letter(25), "Z");
        assert_eq!(letter(26), "AA");
        assert_eq!(p_text(0.0004), "p<0.001");
        assert_eq!(p_text(0.0031), "p=0.003");
        assert_eq!(p_text(0.414), "p=0.41");
        assert_eq!(change_text(Some(26.62)), "+27%");
        assert_eq!(change_text(Some(-3.12)), "-3.1%");
        let lone = Judgement::NoNoise {
            runs_a: 1,
            runs_b: 1,
            a: true,
            b: true,
        };
        assert_eq!(Verdict::Untested(lone).text(), "can't tell (1 run)");
    }
}
