//! Side-by-side comparison of runs (or of groups of runs): tests aligned by name, each
//! metric's median over the passes on every side, the change against the first side, and
//! whether that change is significant given the passes (Welch's t-test, two-sided, 95%).
//!
//! [`compare`] computes it, [`render`] prints it for a terminal (≤ 100 columns) and
//! [`document`] gives the `iolab.comparison/1` JSON document (`docs/reports.md`).

use iolab_measure::Warning;
use iolab_stats::score::{Welch, ALPHA};
use serde_json::{json, Value};

use crate::set::{self, Metric, RunSet};
use crate::text::{lat, num, wrap, Column, Gap, Shrink, Table};
use crate::MAX_WIDTH;

/// How the significance is decided, as reports print it.
pub const METHOD: &str = "Welch's t-test on the per-pass values, two-sided, 95% (p < 0.05)";

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

/// Outcome of the significance test of one side against the first.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The first side itself.
    Baseline,
    /// Significant and in the better direction for the metric.
    Better(Welch),
    /// Significant and in the worse direction.
    Worse(Welch),
    /// Not significant.
    Same(Welch),
    /// Not testable: fewer than two passes on a side (the count is the smaller side's).
    TooFewPasses(usize),
    /// A side lacks the test or the value.
    Missing,
}

impl Verdict {
    pub fn welch(&self) -> Option<&Welch> {
        match self {
            Verdict::Better(w) | Verdict::Worse(w) | Verdict::Same(w) => Some(w),
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

    /// A short word for JSON: `baseline better worse same n/a missing`.
    pub fn key(&self) -> &'static str {
        match self {
            Verdict::Baseline => "baseline",
            Verdict::Better(_) => "better",
            Verdict::Worse(_) => "worse",
            Verdict::Same(_) => "same",
            Verdict::TooFewPasses(_) => "n/a",
            Verdict::Missing => "missing",
        }
    }

    /// As the table prints it: `yes, better (p=0.003)`, `no (p=0.41)`, `n/a (1 pass)`.
    pub fn text(&self) -> String {
        match self {
            Verdict::Baseline | Verdict::Missing => String::new(),
            Verdict::Better(w) => format!("yes, better ({})", p_text(w.p)),
            Verdict::Worse(w) => format!("yes, worse ({})", p_text(w.p)),
            Verdict::Same(w) => format!("no ({})", p_text(w.p)),
            Verdict::TooFewPasses(n) => {
                format!("n/a ({n} pass{})", if *n == 1 { "" } else { "es" })
            }
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
    /// Passes on this side.
    pub n: usize,
    /// Median over the passes.
    pub median: Option<f64>,
    pub mean: Option<f64>,
    /// Change of the median against the first side, in percent.
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
        let Some(base) = tests.first().copied().flatten() else {
            continue;
        };
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
            let base_median = m.median(base);
            let cells = tests
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let Some(t) = t else {
                        return Cell {
                            n: 0,
                            median: None,
                            mean: None,
                            change_pct: None,
                            verdict: Verdict::Missing,
                        };
                    };
                    let median = m.median(t);
                    let stats = m.stats(t);
                    let n = t.passes.len();
                    let change_pct = if i == 0 {
                        None
                    } else {
                        base_median
                            .zip(median)
                            .and_then(|(a, b)| set::change_pct(a, b))
                    };
                    let verdict = if i == 0 {
                        Verdict::Baseline
                    } else if n < 2 || base.passes.len() < 2 {
                        Verdict::TooFewPasses(n.min(base.passes.len()))
                    } else {
                        match set::welch(m, base, t) {
                            Some(w) if w.p < ALPHA => {
                                let up = w.mean_b > w.mean_a;
                                if up == m.higher_is_better() {
                                    Verdict::Better(w)
                                } else {
                                    Verdict::Worse(w)
                                }
                            }
                            Some(w) => Verdict::Same(w),
                            None => Verdict::Missing,
                        }
                    };
                    Cell {
                        n,
                        median,
                        mean: (n > 0).then_some(stats.mean),
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
    Comparison {
        sides,
        rows,
        partial,
        warnings,
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

/// The comparison as terminal text, at most [`MAX_WIDTH`] columns. Ends with a newline.
pub fn render(c: &Comparison) -> String {
    let mut out = Vec::new();
    out.push(format!(
        "iolab compare · {} sides, tests aligned by name",
        c.sides.len()
    ));
    for s in &c.sides {
        let line = format!("{} = {}: {}", s.letter, s.label, s.runs.join("; "));
        out.extend(wrap(&line, MAX_WIDTH, "  ", "      "));
    }
    out.push(String::new());
    let legend = format!(
        "Values are medians over the passes; change is against A. Significant: {METHOD}; \
         n/a with fewer than 2 passes on a side. `!` marks tests with warnings (below)."
    );
    out.extend(wrap(&legend, MAX_WIDTH, "", ""));
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
            let name = if r.test == last {
                String::new()
            } else if warned.contains(&r.test.as_str()) {
                format!("{} !", r.test)
            } else {
                r.test.clone()
            };
            last = &r.test;
            let mut row = vec![name, r.metric.label().to_string()];
            row.push(value(r.metric, r.cells[0].median));
            for cell in &r.cells[1..] {
                row.push(value(r.metric, cell.median));
                row.push(change_text(cell.change_pct));
                row.push(cell.verdict.text());
            }
            table.row(row);
        }
        out.extend(table.render(MAX_WIDTH));
    }
    if !c.partial.is_empty() {
        out.push(String::new());
        out.push("Tests not on every side:".into());
        for (t, have) in &c.partial {
            out.extend(wrap(
                &format!("{t}: only on {}", have.join(", ")),
                MAX_WIDTH,
                "  ",
                "    ",
            ));
        }
    }
    if !c.warnings.is_empty() {
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
            out.extend(wrap(&line, MAX_WIDTH, "  ", "    "));
        }
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

/// The `iolab.comparison/1` JSON document.
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
                    let w = cell.verdict.welch();
                    json!({
                        "side": side.letter,
                        "passes": cell.n,
                        "median": finite(cell.median),
                        "mean": finite(cell.mean),
                        "change_pct": finite(cell.change_pct),
                        "verdict": cell.verdict.key(),
                        "significant": cell.verdict.significant(),
                        "p": finite(w.map(|w| w.p)),
                        "t": finite(w.map(|w| w.t)),
                        "df": finite(w.map(|w| w.df)),
                    })
                })
                .collect();
            metrics.insert(r.metric.key().to_string(), Value::Array(cells));
            i += 1;
        }
        tests.push(json!({ "name": name, "metrics": metrics }));
    }
    json!({
        "schema": "iolab.comparison/1",
        "iolab_version": iolab_version,
        "method": METHOD,
        "alpha": ALPHA,
        "sides": c.sides.iter().map(|s| json!({
            "side": s.letter,
            "label": s.label,
            "run_ids": s.run_ids,
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
        assert_eq!(Verdict::TooFewPasses(1).text(), "n/a (1 pass)");
    }
}
