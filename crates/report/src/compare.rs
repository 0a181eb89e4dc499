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

use crate::set::{self, id_ranges, Call, Decision, Judgement, Metric, RunSet, Tested};
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
    /// *Different* (significant in the side's family of lines, and not inside the
    /// margin) and in the better direction for the metric.
    Better(Tested),
    /// *Different* in the worse direction.
    Worse(Tested),
    /// Tested and not shown different: *same* within the margin or *undecided* (the
    /// cell's [`Decision`] says which).
    Same(Tested),
    /// Not tested, and why: a single run without measured noise
    /// ([`Judgement::NoNoise`]), a value of 0, a missing test.
    Untested(Judgement),
}

impl Verdict {
    fn of(j: Judgement, d: Option<&Decision>, higher_is_better: bool) -> Verdict {
        let different = d.is_some_and(|d| d.call == Call::Different);
        match j {
            Judgement::Tested(t) if different => {
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

    /// The JSON `verdict` of a cell without a decision (`baseline`, `missing`); with one,
    /// the decision's: `different`, `same`, `undecided`.
    pub fn key(&self) -> &'static str {
        match self {
            Verdict::Baseline => "baseline",
            Verdict::Better(_) | Verdict::Worse(_) => "different",
            Verdict::Same(_) | Verdict::Untested(Judgement::NoNoise { .. }) => "undecided",
            Verdict::Untested(Judgement::NotPositive | Judgement::Tested(_)) => "undecided",
            Verdict::Untested(Judgement::Missing) => "missing",
        }
    }

    /// The direction for JSON: `better`, `worse`, or `None` when not *different*.
    pub fn direction(&self) -> Option<&'static str> {
        match self {
            Verdict::Better(_) => Some("better"),
            Verdict::Worse(_) => Some("worse"),
            _ => None,
        }
    }

    /// As the table prints it, with the cell's decision: `different, better (p=0.003)`
    /// (`different*` when confounded), `same within ±5%`, `undecided: 9 runs a side`,
    /// `can't tell (1 run)`.
    pub fn text(&self, d: Option<&Decision>, margin_pct: f64) -> String {
        let star = |d: Option<&Decision>| {
            if d.is_some_and(|d| !d.confounded_by.is_empty()) {
                "*"
            } else {
                ""
            }
        };
        match self {
            Verdict::Baseline | Verdict::Untested(Judgement::Missing) => String::new(),
            Verdict::Better(t) => format!("different{}, better ({})", star(d), p_text(t.test.p)),
            Verdict::Worse(t) => format!("different{}, worse ({})", star(d), p_text(t.test.p)),
            Verdict::Same(_) => match d {
                Some(d) if d.call == Call::Same => format!("same within ±{}", pct(margin_pct)),
                Some(Decision {
                    runs_needed: Some(n),
                    ..
                }) => format!("undecided: {n} runs a side"),
                _ => "undecided".into(),
            },
            Verdict::Untested(Judgement::NoNoise { .. }) => "can't tell (1 run)".into(),
            Verdict::Untested(_) => "n/a (a value is 0)".into(),
        }
    }
}

/// `5%`, `2.5%`.
pub fn pct(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{x:.0}%")
    } else {
        format!("{x}%")
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
    /// The three-way verdict (with its confounds); `None` for A and missing tests.
    pub decision: Option<Decision>,
}

impl Cell {
    /// As the table prints the verdict.
    pub fn verdict_text(&self, margin_pct: f64) -> String {
        self.verdict.text(self.decision.as_ref(), margin_pct)
    }
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
    /// The margin, in percent, inside which a change is *same*.
    pub margin_pct: f64,
    /// Per side (A: `None`): the spread between batches of its and A's commands stored
    /// at other times, for the line with the largest *different* change (or the first
    /// line): the line's name and the test against it.
    pub batches: Vec<Option<(String, set::BatchTest)>>,
    /// Commands that would run a side and A interleaved (`iolab ab`), set by the caller
    /// where the sides ran as separate batches: (side letter, command). JSON:
    /// `ab_commands`, present only when there is one.
    pub ab_commands: Vec<(String, String)>,
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
                            decision: None,
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
                    // Decided below, with the rest of the side's family.
                    let verdict = if i == 0 {
                        Verdict::Baseline
                    } else {
                        Verdict::Untested(set::judge(&base, &v))
                    };
                    Cell {
                        runs: v.runs.len(),
                        passes: t.passes.len(),
                        run_values: v.values(),
                        value,
                        change_pct,
                        verdict,
                        decision: None,
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
    decide(set, &mut rows);
    let batches = (0..set.configs.len())
        .map(|k| {
            if k == 0 {
                return None;
            }
            let size = |r: &&Row| {
                r.cells[k]
                    .verdict
                    .tested()
                    .filter(|_| {
                        matches!(r.cells[k].verdict, Verdict::Better(_) | Verdict::Worse(_))
                    })
                    .map_or(-1.0, |t| t.test.ratio.ln().abs())
            };
            let row = rows.iter().fold(None::<&Row>, |best, r| match best {
                Some(x) if size(&x) >= size(&r) => Some(x),
                _ => Some(r),
            })?;
            let t = set.between_batches(0, k, &row.test, row.metric)?;
            Some((format!("{} {}", row.test, row.metric.label()), t))
        })
        .collect();
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
        margin_pct: set.margin_pct,
        batches,
        ab_commands: Vec::new(),
    }
}

/// Decides every side's lines against A as one family (`set::decide_family`: Holm over
/// the side's lines), names the confounds of each test, and turns the judgements the
/// cells hold into verdicts.
fn decide(set: &RunSet, rows: &mut [Row]) {
    let sides = rows.first().map_or(0, |r| r.cells.len());
    for k in 1..sides {
        let js: Vec<Judgement> = rows
            .iter()
            .map(|r| match &r.cells[k].verdict {
                Verdict::Untested(j) => j.clone(),
                _ => Judgement::Missing,
            })
            .collect();
        let primary: Vec<Metric> = rows
            .iter()
            .map(|r| set::primary_metric(set.aligned(&r.test).iter().flatten().copied()))
            .collect();
        let lines: Vec<set::Line<'_>> = rows
            .iter()
            .zip(&js)
            .zip(&primary)
            .map(|((r, j), p)| set::Line {
                judgement: j,
                test: &r.test,
                primary: r.metric == *p,
            })
            .collect();
        let decisions = set::decide_family(&lines, set.margin_pct);
        drop(lines);
        let mut confounds: Vec<(String, Vec<set::Confound>)> = Vec::new();
        for ((r, j), d) in rows.iter_mut().zip(js).zip(decisions) {
            let d = d.map(|mut d| {
                if !matches!(j, Judgement::Tested(_)) {
                    return d;
                }
                let c = match confounds.iter().find(|(t, _)| *t == r.test) {
                    Some((_, c)) => c.clone(),
                    None => {
                        let runs = |c: usize| -> Vec<&iolab_measure::RunRecord> {
                            set.configs[c].runs.iter().collect()
                        };
                        let c = set::confounds(("A", &runs(0)), (&letter(k), &runs(k)), &r.test);
                        confounds.push((r.test.clone(), c.clone()));
                        c
                    }
                };
                d.confounded_by = c;
                d
            });
            let cell = &mut r.cells[k];
            cell.verdict = Verdict::of(j, d.as_ref(), r.metric.higher_is_better());
            cell.decision = d;
        }
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

/// The comparison as terminal text with its warnings as `detail` asks (every line of
/// every metric with [`Detail::Full`]).
pub fn render_with(c: &Comparison, detail: Detail) -> String {
    render_opts(c, detail, detail == Detail::Full)
}

/// `+12% [+8%, +16%]`: a ratio's change and its 95% interval.
fn ratio_text(t: &Tested) -> String {
    let p = |r: f64| change_text(Some(100.0 * (r - 1.0)));
    format!(
        "{} [{}, {}]",
        p(t.test.ratio),
        p(t.test.ratio_low),
        p(t.test.ratio_high)
    )
}

/// The median of the runs a side the undecided lines of side `k` need.
fn runs_needed(c: &Comparison, k: usize) -> Option<usize> {
    let mut v: Vec<usize> = c
        .rows
        .iter()
        .filter_map(|r| r.cells[k].decision.as_ref()?.runs_needed)
        .collect();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// The confounds named on side `k`'s lines, each once, in order of appearance.
pub fn side_confounds(c: &Comparison, k: usize) -> Vec<set::Confound> {
    let mut out: Vec<set::Confound> = Vec::new();
    for r in &c.rows {
        for x in r.cells[k]
            .decision
            .iter()
            .flat_map(|d| d.confounded_by.iter())
        {
            if !out.contains(x) {
                out.push(x.clone());
            }
        }
    }
    out
}

/// A confound's code, the tests it is named on, and its distinct facts (test, fact).
type CodeSeen<'a> = (String, Vec<&'a str>, Vec<(&'a str, &'a str)>);

/// The confounds of side `k` as the terminal names them: each code once, with the fact of
/// its first test and the number of tests it concerns (`BUSY_DEVICE on 5 of 8 tests (SEQ1M
/// Q8T1 Read: other I/O ...)`); every fact with `all`.
fn confound_summary(c: &Comparison, k: usize, all: bool) -> Vec<String> {
    if all {
        return side_confounds(c, k).iter().map(|x| x.text()).collect();
    }
    let mut tests: Vec<&str> = c.rows.iter().map(|r| r.test.as_str()).collect();
    tests.dedup();
    // Per code: the tests it is named on and its facts (test, fact), in order.
    let mut out: Vec<CodeSeen<'_>> = Vec::new();
    for r in &c.rows {
        for x in r.cells[k]
            .decision
            .iter()
            .flat_map(|d| d.confounded_by.iter())
        {
            let i = match out.iter().position(|(code, _, _)| *code == x.code) {
                Some(i) => i,
                None => {
                    out.push((x.code.clone(), Vec::new(), Vec::new()));
                    out.len() - 1
                }
            };
            let (_, t, facts) = &mut out[i];
            if !t.contains(&r.test.as_str()) {
                t.push(&r.test);
            }
            if !facts.iter().any(|(_, f)| *f == x.fact) {
                facts.push((&r.test, &x.fact));
            }
        }
    }
    out.into_iter()
        .map(|(code, t, facts)| {
            let on = if t.len() == tests.len() {
                String::new()
            } else if t.len() == 1 {
                format!(" on {}", t[0])
            } else {
                format!(" on {} of {} tests", t.len(), tests.len())
            };
            match facts.as_slice() {
                [(_, fact)] => format!("{code}{on} ({fact})"),
                _ => format!(
                    "{code}{on} ({}: {}; each test's: --all)",
                    facts[0].0, facts[0].1
                ),
            }
        })
        .collect()
}

/// The answer for side `k` against A, in one or two sentences: which lines are
/// *different* (the largest first), or that no difference is shown and whether that is
/// *same* or not yet decided.
pub fn answer(c: &Comparison, k: usize) -> String {
    let a = &c.sides[0].letter;
    let b = &c.sides[k].letter;
    let lines: Vec<(&Row, &Cell, &Decision)> = c
        .rows
        .iter()
        .filter_map(|r| Some((r, &r.cells[k], r.cells[k].decision.as_ref()?)))
        .collect();
    let n = lines.len();
    let different: Vec<&(&Row, &Cell, &Decision)> = lines
        .iter()
        .filter(|(_, _, d)| d.call == Call::Different)
        .collect();
    let clean: Vec<&&(&Row, &Cell, &Decision)> = different
        .iter()
        .filter(|(_, _, d)| d.confounded_by.is_empty())
        .collect();
    let same = lines
        .iter()
        .filter(|(_, _, d)| d.call == Call::Same)
        .count();
    let tested = lines
        .iter()
        .filter(|(_, cell, _)| cell.verdict.tested().is_some())
        .count();
    let margin = pct(c.margin_pct);
    let largest = |set: &[&(&Row, &Cell, &Decision)]| -> String {
        // The largest change, the first line of it (MB/s before IOPS); a throughput line
        // before a latency one, which says the same more loudly.
        let size = |r: &Row, c: &Cell| {
            let s = c.verdict.tested().map_or(0.0, |t| t.test.ratio.ln().abs());
            if r.metric.higher_is_better() {
                s + 1e6
            } else {
                s
            }
        };
        let top = set
            .iter()
            .fold(None::<&&(&Row, &Cell, &Decision)>, |best, x| match best {
                Some(b) if size(b.0, b.1) >= size(x.0, x.1) => Some(b),
                _ => Some(x),
            });
        match top.and_then(|(r, cell, _)| Some((r, cell, cell.verdict.tested()?))) {
            Some((r, cell, t)) => format!(
                "{} {} {} ({b} {})",
                r.test,
                r.metric.label(),
                ratio_text(t),
                cell.verdict.direction().unwrap_or("")
            ),
            None => String::new(),
        }
    };
    let tests = |set: &[&(&Row, &Cell, &Decision)]| -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (r, _, _) in set {
            if !v.contains(&r.test) {
                v.push(r.test.clone());
            }
        }
        v
    };
    let n_tests = tests(&lines.iter().collect::<Vec<_>>()).len();
    if !clean.is_empty() {
        let flat: Vec<&(&Row, &Cell, &Decision)> = clean.iter().map(|x| **x).collect();
        let names = tests(&flat);
        let which = if names.len() <= 3 {
            format!(": {}", names.join(", "))
        } else {
            String::new()
        };
        let mut s = format!(
            "{b} differs from {a} on {} of {n_tests} tests{which}; the largest change is {}.",
            names.len(),
            largest(&flat)
        );
        if different.len() > clean.len() {
            s.push_str(&format!(
                " {} more line(s) differ but the sides were not measured alike (*, below).",
                different.len() - clean.len()
            ));
        }
        return s;
    }
    if !different.is_empty() {
        let codes: Vec<String> = {
            let mut v: Vec<String> = Vec::new();
            for (_, _, d) in &different {
                for x in &d.confounded_by {
                    if !v.contains(&x.code) {
                        v.push(x.code.clone());
                    }
                }
            }
            v
        };
        return format!(
            "No clean difference: {b} differs from {a} on {} of {n_tests} tests (the largest: \
             {}), but the sides were not measured alike ({}), which could explain it.",
            tests(&different).len(),
            largest(&different),
            codes.join(", ")
        );
    }
    if tested == 0 {
        return format!(
            "Cannot tell: {b} against {a} has no line whose run-to-run noise is measured \
             (a single run and no other stored run of its command); run each again (or use \
             --repeat 3) and compare the labels."
        );
    }
    if same == n {
        return format!(
            "No difference shown: {b} is the same as {a} within ±{margin} on all {n} lines."
        );
    }
    let undecided = n - same;
    let more = match runs_needed(c, k) {
        Some(r) if r > 100 => format!(
            "; the runs vary too much to decide a {margin} change (about {r} runs a side; see \
             the warnings)"
        ),
        Some(r) => {
            format!("; about {r} runs a side would decide a {margin} change at the noise measured")
        }
        None => String::new(),
    };
    format!(
        "No difference shown between {b} and {a} ({n} lines judged together, 95%): {same} \
             the same within ±{margin}, {undecided} undecided{more}."
    )
}

/// The comparison as terminal text: the answer first, then the lines that matter (each
/// test's first metric and every *different* line; every line with `all`), then what
/// the verdicts rest on, the conditions that differ, and the warnings as `detail` asks.
pub fn render_opts(c: &Comparison, detail: Detail, all: bool) -> String {
    let width = crate::style::width();
    let mut out = Vec::new();
    out.push(format!(
        "iolab compare · {} sides, tests aligned by name",
        c.sides.len()
    ));
    for k in 1..c.sides.len() {
        if !c.rows.is_empty() {
            out.extend(wrap(&answer(c, k), width, "", "  "));
        }
    }
    out.push(String::new());
    for s in &c.sides {
        let line = if all || s.runs.len() <= 1 {
            format!("{} = {}: {}", s.letter, s.label, s.runs.join("; "))
        } else {
            format!(
                "{} = {}: {} runs ({}), {}",
                s.letter,
                s.label,
                s.runs.len(),
                id_ranges(&s.run_ids),
                s.runs[0]
                    .split_once(": ")
                    .map_or(s.runs[0].as_str(), |(_, w)| w)
                    .split(" · ")
                    .next()
                    .unwrap_or_default()
            )
        };
        out.extend(wrap(&line, width, "", "      "));
    }
    out.push(String::new());
    let more = !all && c.rows.windows(2).any(|w| w[0].test == w[1].test);
    let mut legend = format!(
        "Values: each run's headline (median of its passes), a side's runs' geometric mean; \
         change against A. Verdicts on runs: different, same within ±{}, or undecided (runs a \
         side that would decide). `!`: warnings.",
        pct(c.margin_pct)
    );
    if more {
        legend.push_str(" Each test's first metric and every different line (all: --all).");
    }
    out.extend(wrap(&legend, width, "", ""));
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
                        "Verdict".to_string()
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
            let first = r.test != last;
            let different = r.cells[1..]
                .iter()
                .any(|x| matches!(x.verdict, Verdict::Better(_) | Verdict::Worse(_)));
            if more && !first && !different {
                continue;
            }
            let name = if !first {
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
                row.push(cell.verdict_text(c.margin_pct));
            }
            table.row(row);
        }
        out.extend(table.render(width));
        for k in 1..c.sides.len() {
            // By default only where a line differs: that is what a confound could explain.
            let differs = c
                .rows
                .iter()
                .any(|r| matches!(r.cells[k].verdict, Verdict::Better(_) | Verdict::Worse(_)));
            let conf = side_confounds(c, k);
            if conf.is_empty() || !(differs || all) {
                continue;
            }
            out.push(String::new());
            let b = &c.sides[k].letter;
            out.extend(wrap(
                &format!(
                    "* {b} and A were not measured alike, which could explain a difference: \
                     {}.",
                    confound_summary(c, k, all).join("; ")
                ),
                width,
                "",
                "  ",
            ));
            if conf.iter().any(|x| x.code == "sequential") {
                out.extend(wrap(&batch_advice(c, k), width, "  ", "  "));
            }
        }
        out.push(String::new());
        let how = if detail == Detail::Full || all {
            format!("How it was decided ({METHOD}; Holm's correction over each side's lines):")
        } else {
            "How it was decided (each side's lines together, Holm; the rule: --all):".into()
        };
        out.extend(wrap(&how, width, "", "  "));
        for k in 1..c.sides.len() {
            for line in evidence(c, k) {
                out.extend(wrap(&line, width, "  ", "    "));
            }
        }
    }
    if !c.partial.is_empty() {
        out.push(String::new());
        out.push("Tests not on every side:".into());
        for (t, have) in &c.partial {
            out.extend(wrap(
                &format!("{t}: only on {}", have.join(", ")),
                width,
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

/// What to do about batches: runs made back to back under one label share the state of
/// the machine of their time, so they are not independent of it. With the spread between
/// batches of the same commands measured from the store (`Comparison::batches`), what it
/// says of the largest change.
pub fn batch_advice(c: &Comparison, k: usize) -> String {
    let b = &c.sides[k].letter;
    let measured = match c.batches.get(k).and_then(|x| x.as_ref()) {
        Some((line, t)) => format!(
            "Between the {} batches of these commands in the store (with runs {}), batch \
             means of {line} vary by {:.1}% (sd of ln); against that, {b}'s change is {} \
             (p={}).",
            t.batches,
            id_ranges(&t.run_ids),
            100.0 * t.sd,
            if t.p < ALPHA {
                "beyond batch-to-batch variation"
            } else {
                "within batch-to-batch variation"
            },
            p_text(t.p).trim_start_matches("p=").trim_start_matches("p")
        ),
        None => "No other batch of these commands is stored to measure how much batches \
                 differ."
            .to_string(),
    };
    format!(
        "Batches are not replicates: the runs of a side made back to back share the \
         machine's state of that time. {measured} To decide, interleave: run A's and {b}'s \
         commands alternately (each with its --label), a few times, and compare the labels \
         again."
    )
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
                    let d = cell.decision.as_ref();
                    json!({
                        "side": side.letter,
                        "runs": cell.runs,
                        "passes": cell.passes,
                        "run_values": cell.run_values,
                        "value": finite(cell.value),
                        "change_pct": finite(cell.change_pct),
                        "verdict": d.map_or(cell.verdict.key(), |d| d.call.key()),
                        "direction": cell.verdict.direction(),
                        "ratio": finite(t.map(|t| t.test.ratio)),
                        "ratio_ci95": t.map(|t| json!([
                            finite(Some(t.test.ratio_low)),
                            finite(Some(t.test.ratio_high))
                        ])),
                        "runs_needed": d.and_then(|d| d.runs_needed),
                        "confounded_by": d.map(|d| d.confounded_by.iter().map(|x| json!({
                            "code": x.code,
                            "fact": x.fact,
                        })).collect::<Vec<_>>()),
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
    let mut doc = json!({
        "schema": "iolab.comparison/2",
        "iolab_version": iolab_version,
        "method": METHOD,
        "alpha": ALPHA,
        "family_correction": "holm",
        "between_batches": c.batches.iter().map(|x| x.as_ref().map(|(line, t)| json!({
            "line": line,
            "batches": t.batches,
            "sd_ln": t.sd,
            "p": t.p,
            "run_ids": t.run_ids,
        }))).collect::<Vec<_>>(),
        "margin_pct": c.margin_pct,
        "sides": c.sides.iter().enumerate().map(|(k, s)| json!({
            "side": s.letter,
            "label": s.label,
            "run_ids": s.run_ids,
            "answer": if k == 0 { Value::Null } else { json!(answer(c, k)) },
            "confounded_by": if k == 0 { Vec::new() } else {
                side_confounds(c, k).iter().map(|x| json!({
                    "code": x.code,
                    "fact": x.fact,
                })).collect()
            },
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
    });
    if !c.ab_commands.is_empty() {
        doc["ab_commands"] = c
            .ab_commands
            .iter()
            .map(|(side, cmd)| json!({"side": side, "command": cmd}))
            .collect();
    }
    doc
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
        assert_eq!(
            Verdict::Untested(lone).text(None, 5.0),
            "can't tell (1 run)"
        );
        assert_eq!(pct(5.0), "5%");
        assert_eq!(pct(2.5), "2.5%");
    }
}
