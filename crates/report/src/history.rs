//! Runs over time: for each target and preset, one line per run with its headline numbers
//! (MB/s, or IOPS for tests that move no bytes), a mark where a number moved beyond the
//! noise against the previous run (Welch's t-test on the passes, 95%), and the trend from
//! the first run to the last.

use iolab_measure::{RunRecord, TestRecord};
use serde_json::{json, Value};

use crate::set::{self, Metric};
use crate::text::{num, wrap, Column, Table};
use crate::MAX_WIDTH;

/// Runs of one target and preset, oldest first.
#[derive(Debug, Clone)]
pub struct Series<'a> {
    pub target: String,
    pub preset: String,
    pub runs: Vec<&'a RunRecord>,
    /// Test names in order of first appearance.
    pub tests: Vec<String>,
}

/// How one test's headline moved against the previous run that has it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Move {
    /// The first run with the test, or no previous value.
    First,
    /// Significantly higher / lower (p < 0.05).
    Up(f64),
    Down(f64),
    /// Within the noise.
    Steady(f64),
    /// Fewer than two passes on a side: not testable.
    Untested,
}

/// Splits runs (oldest first) into series by target and preset.
pub fn series(runs: &[RunRecord]) -> Vec<Series<'_>> {
    let mut out: Vec<Series<'_>> = Vec::new();
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

fn test<'a>(r: &'a RunRecord, name: &str) -> Option<&'a TestRecord> {
    r.tests
        .iter()
        .find(|t| t.name == name && !t.passes.is_empty())
}

impl Series<'_> {
    /// The metric of a test in this series: MB/s unless none of its runs moved bytes.
    pub fn metric(&self, name: &str) -> Metric {
        set::primary_metric(self.runs.iter().filter_map(|r| test(r, name)))
    }

    /// Headline of test `name` in run `i`, and how it moved against the previous run that
    /// has the test.
    pub fn point(&self, i: usize, name: &str) -> Option<(f64, Move)> {
        let m = self.metric(name);
        let t = test(self.runs[i], name)?;
        let v = m.headline(t)?;
        let prev = self.runs[..i].iter().rev().find_map(|r| test(r, name));
        let mv = match prev {
            None => Move::First,
            Some(p) => {
                let change = m
                    .headline(p)
                    .and_then(|a| set::change_pct(a, v))
                    .unwrap_or(0.0);
                match set::welch(m, p, t) {
                    None => Move::Untested,
                    Some(w) if w.significant() && w.mean_b > w.mean_a => Move::Up(change),
                    Some(w) if w.significant() => Move::Down(change),
                    Some(_) => Move::Steady(change),
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
/// its tests do not fit in [`MAX_WIDTH`] columns). Ends with a newline.
pub fn render(runs: &[RunRecord]) -> String {
    let mut out = Vec::new();
    if runs.is_empty() {
        return "No runs match.\n".to_string();
    }
    out.extend(wrap(
        "Headline per test: MB/s (IOPS for tests that move no bytes). ↑/↓: significantly \
         higher/lower than the previous run with that test (Welch's t-test on the passes, \
         two-sided, 95%); = within the noise; ? not testable (fewer than 2 passes). \
         W = warnings.",
        MAX_WIDTH,
        "",
        "",
    ));
    for s in series(runs) {
        out.push(String::new());
        out.extend(wrap(
            &format!(
                "{} · preset {} · {} run{}",
                s.target,
                s.preset,
                s.runs.len(),
                if s.runs.len() == 1 { "" } else { "s" }
            ),
            MAX_WIDTH,
            "",
            "  ",
        ));
        // Fixed columns take about 32 characters; each test column its name's width.
        let fixed = 4 + 2 + 16 + 2 + 10 + 2 + 2;
        let mut chunks: Vec<Vec<&String>> = vec![Vec::new()];
        let mut width = fixed;
        for t in &s.tests {
            let w = t.chars().count().max(9) + 2;
            if width + w > MAX_WIDTH && !chunks.last().unwrap().is_empty() {
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
                        Some((v, mv)) => {
                            let mark = match mv {
                                Move::First => " ",
                                Move::Up(_) => "↑",
                                Move::Down(_) => "↓",
                                Move::Steady(_) => "=",
                                Move::Untested => "?",
                            };
                            format!("{}{mark}", num(v))
                        }
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
                        .map(|r| test(r, t).and_then(|x| m.headline(x)))
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
            out.extend(table.render(MAX_WIDTH));
        }
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// The `iolab.history/1` JSON document.
pub fn document(runs: &[RunRecord], iolab_version: &str) -> Value {
    let series: Vec<Value> = series(runs)
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
                            let (movement, change) = match mv {
                                Move::First => ("first", None),
                                Move::Up(c) => ("up", Some(c)),
                                Move::Down(c) => ("down", Some(c)),
                                Move::Steady(c) => ("steady", Some(c)),
                                Move::Untested => ("untested", None),
                            };
                            Some(json!({
                                "test": t,
                                "metric": s.metric(t).key(),
                                "value": v,
                                "change_pct": change,
                                "movement": movement,
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
        "schema": "iolab.history/1",
        "iolab_version": iolab_version,
        "method": crate::compare::METHOD,
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
