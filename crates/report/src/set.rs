//! Several runs shown together: configurations (one run each, or the runs of a study that
//! share a `config_label`, their passes pooled), tests aligned by name, the four headline
//! metrics, and the study's ratio and score tables shared by every format.

use iolab_measure::{
    Caveat, MetricSummary, PassRecord, RunRecord, TestRecord, Warning, WarningCode,
};
use iolab_stats::score::{self, Access, ScoreInput, StudyScore, Welch};
use iolab_stats::{median, metric, summarize, Score};

use crate::text::num;

/// A headline metric of a test, computed per pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Throughput, MB/s (10^6 bytes/s).
    MbS,
    /// I/Os (operations) per second.
    Iops,
    /// Mean latency, µs.
    LatMean,
    /// 99th-percentile latency, µs.
    LatP99,
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::MbS, Metric::Iops, Metric::LatMean, Metric::LatP99];

    /// The key used in JSON and CSV (`mb_s`, `iops`, `lat_mean_us`, `lat_p99_us`).
    pub fn key(self) -> &'static str {
        match self {
            Metric::MbS => "mb_s",
            Metric::Iops => "iops",
            Metric::LatMean => "lat_mean_us",
            Metric::LatP99 => "lat_p99_us",
        }
    }

    /// A column heading: `MB/s`, `IOPS`, `mean µs`, `p99 µs`.
    pub fn label(self) -> &'static str {
        match self {
            Metric::MbS => "MB/s",
            Metric::Iops => "IOPS",
            Metric::LatMean => "mean µs",
            Metric::LatP99 => "p99 µs",
        }
    }

    /// Throughput is better higher, latency lower.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Metric::MbS | Metric::Iops)
    }

    pub fn of_pass(self, p: &PassRecord) -> f64 {
        match self {
            Metric::MbS => p.mb_s,
            Metric::Iops => p.iops,
            Metric::LatMean => p.lat_us.mean,
            Metric::LatP99 => p.lat_us.p99,
        }
    }

    /// The metric of every pass of `t`, in order.
    pub fn passes(self, t: &TestRecord) -> Vec<f64> {
        t.passes.iter().map(|p| self.of_pass(p)).collect()
    }

    /// Median over the passes; `None` without passes.
    pub fn median(self, t: &TestRecord) -> Option<f64> {
        (!t.passes.is_empty()).then(|| median(&self.passes(t)))
    }

    /// The headline value the test's summary shows (median, or the best pass).
    pub fn headline(self, t: &TestRecord) -> Option<f64> {
        if t.passes.is_empty() {
            return None;
        }
        let s = &t.summary;
        Some(match self {
            Metric::MbS => s.mb_s,
            Metric::Iops => s.iops,
            Metric::LatMean => s.lat_mean_us,
            Metric::LatP99 => s.lat_p99_us,
        })
    }

    /// Spread over the passes (n, mean, CI...), recomputed from the passes.
    pub fn stats(self, t: &TestRecord) -> MetricSummary {
        metric(&self.passes(t))
    }
}

/// The metric a set of tests is best compared on: MB/s, unless they count operations
/// (the fsync probe, metadata: [`crate::facts::counts_operations`]) or none of them moves
/// bytes, then IOPS.
pub fn primary_metric<'a>(tests: impl IntoIterator<Item = &'a TestRecord>) -> Metric {
    let tests: Vec<&TestRecord> = tests.into_iter().collect();
    if tests.iter().any(|t| crate::facts::counts_operations(t)) {
        return Metric::Iops;
    }
    let mut any = false;
    for t in tests {
        any = true;
        if t.passes.iter().any(|p| p.mb_s > 0.0) {
            return Metric::MbS;
        }
    }
    if any {
        Metric::Iops
    } else {
        Metric::MbS
    }
}

/// Random or sequential, for the study score.
pub fn access(t: &TestRecord) -> Access {
    if t.job.rw.is_random() {
        Access::Random
    } else {
        Access::Sequential
    }
}

/// Welch's t-test of a metric between two tests' passes (`b` against `a`).
pub fn welch(m: Metric, a: &TestRecord, b: &TestRecord) -> Option<Welch> {
    score::welch(&m.passes(a), &m.passes(b))
}

/// Relative change from `a` to `b` in percent; `None` when `a` is zero or either is not
/// finite.
pub fn change_pct(a: f64, b: f64) -> Option<f64> {
    (a != 0.0 && a.is_finite() && b.is_finite()).then(|| 100.0 * (b - a) / a.abs())
}

/// One configuration: a label and the runs measured with it. With several runs, tests of
/// the same name are pooled (all their passes, summarised again).
#[derive(Debug, Clone)]
pub struct Config {
    pub label: String,
    pub runs: Vec<RunRecord>,
    /// Tests by name in order of first appearance, passes of every run pooled.
    pub tests: Vec<TestRecord>,
}

impl Config {
    pub fn new(label: String, runs: Vec<RunRecord>) -> Config {
        let mut tests: Vec<TestRecord> = Vec::new();
        for run in &runs {
            for t in &run.tests {
                match tests.iter_mut().find(|x| x.name == t.name) {
                    Some(x) => x.passes.extend(t.passes.iter().cloned()),
                    None => tests.push(t.clone()),
                }
            }
        }
        if runs.len() > 1 {
            for t in &mut tests {
                let score = if t.summary.score == "best" {
                    Score::Best
                } else {
                    Score::Median
                };
                t.summary = summarize(&t.passes, score);
            }
        }
        Config { label, runs, tests }
    }

    pub fn test(&self, name: &str) -> Option<&TestRecord> {
        self.tests.iter().find(|t| t.name == name)
    }

    /// The warnings of every run, each (code, test) once, with the number of runs that
    /// raised it; in order of first appearance.
    pub fn warnings(&self) -> Vec<(Warning, usize)> {
        let mut out: Vec<(Warning, usize)> = Vec::new();
        for r in &self.runs {
            let mut seen: Vec<(&WarningCode, Option<&str>)> = Vec::new();
            for w in &r.warnings {
                let key = (&w.code, w.test.as_deref());
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                match out
                    .iter_mut()
                    .find(|(x, _)| x.code == w.code && x.test == w.test)
                {
                    Some((_, n)) => *n += 1,
                    None => out.push((w.clone(), 1)),
                }
            }
        }
        out
    }

    /// Warning codes of this configuration's runs that change what its numbers mean:
    /// unsafe ones (flushes not reaching stable storage) first, then cache artifacts.
    pub fn caveats(&self) -> Vec<(Caveat, WarningCode)> {
        let mut out: Vec<(Caveat, WarningCode)> = Vec::new();
        for (w, _) in self.warnings() {
            if let Some(c) = w.code.caveat() {
                if !out.iter().any(|(_, code)| *code == w.code) {
                    out.push((c, w.code));
                }
            }
        }
        out.sort_by_key(|(c, _)| *c != Caveat::Unsafe);
        out
    }

    /// [`Config::caveats`] for a score table: `unsafe: NO_BARRIER; cache: PAGE_CACHE`, or
    /// empty.
    pub fn caveat_text(&self) -> String {
        let caveats = self.caveats();
        let part = |kind: Caveat| {
            let codes: Vec<&str> = caveats
                .iter()
                .filter(|(c, _)| *c == kind)
                .map(|(_, code)| code.as_str())
                .collect();
            (!codes.is_empty()).then(|| format!("{}: {}", kind.as_str(), codes.join(", ")))
        };
        [part(Caveat::Unsafe), part(Caveat::Cache)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Ids of the runs (stored runs only).
    pub fn run_ids(&self) -> Vec<i64> {
        self.runs.iter().filter_map(|r| r.id).collect()
    }
}

/// Runs shown together, as configurations; the first is the baseline unless chosen.
#[derive(Debug, Clone)]
pub struct RunSet {
    /// The study's name when the set is a study.
    pub study: Option<String>,
    pub configs: Vec<Config>,
    /// Index of the configuration ratios and significance are computed against.
    pub baseline: usize,
}

/// How a run is named as a configuration: its config label, else its label, else `run N`.
pub fn run_label(run: &RunRecord) -> String {
    run.config_label
        .clone()
        .or_else(|| run.label.clone())
        .unwrap_or_else(|| match run.id {
            Some(id) => format!("run {id}"),
            None => "run".to_string(),
        })
}

impl RunSet {
    /// Each run its own configuration, labelled by [`run_label`] (made unique with `#id`).
    pub fn per_run(runs: Vec<RunRecord>) -> RunSet {
        let labels: Vec<String> = runs.iter().map(run_label).collect();
        let configs = runs
            .into_iter()
            .enumerate()
            .map(|(i, run)| {
                let mut label = labels[i].clone();
                if labels.iter().filter(|l| **l == label).count() > 1 {
                    label = match run.id {
                        Some(id) => format!("{label} #{id}"),
                        None => format!("{label} ({})", i + 1),
                    };
                }
                Config::new(label, vec![run])
            })
            .collect();
        RunSet {
            study: None,
            configs,
            baseline: 0,
        }
    }

    /// A study: runs grouped by `config_label` (runs without one are their own
    /// configuration), configurations in order of their first run.
    pub fn study(name: &str, runs: Vec<RunRecord>) -> RunSet {
        // Several workloads in one study: their tests are told apart by the workload's
        // label (two ATTO sweeps, direct and buffered, share every test name).
        let mut labels: Vec<Option<String>> = Vec::new();
        for r in &runs {
            if !labels.contains(&r.label) {
                labels.push(r.label.clone());
            }
        }
        let mut runs = runs;
        if labels.len() > 1 {
            for r in &mut runs {
                if let Some(l) = r.label.clone() {
                    for t in &mut r.tests {
                        t.name = format!("{l}: {}", t.name);
                        t.group = format!("{l}: {}", t.group);
                    }
                    for w in &mut r.warnings {
                        if let Some(t) = &mut w.test {
                            *t = format!("{l}: {t}");
                        }
                    }
                }
            }
        }
        let mut groups: Vec<(String, Vec<RunRecord>)> = Vec::new();
        for run in runs {
            let label = run_label(&run);
            match groups.iter_mut().find(|(l, _)| *l == label) {
                Some((_, v)) => v.push(run),
                None => groups.push((label, vec![run])),
            }
        }
        let mut set = RunSet::groups(groups);
        set.study = Some(name.to_string());
        set
    }

    /// Configurations given as (label, runs).
    pub fn groups(groups: Vec<(String, Vec<RunRecord>)>) -> RunSet {
        RunSet {
            study: None,
            configs: groups
                .into_iter()
                .map(|(label, runs)| Config::new(label, runs))
                .collect(),
            baseline: 0,
        }
    }

    /// Makes the configuration labelled `label` the baseline.
    pub fn set_baseline(&mut self, label: &str) -> Result<(), String> {
        match self.configs.iter().position(|c| c.label == label) {
            Some(i) => {
                self.baseline = i;
                Ok(())
            }
            None => Err(format!(
                "no configuration labelled '{label}' (have: {})",
                self.configs
                    .iter()
                    .map(|c| c.label.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// The sets whose configurations are compared with each other: a study as a whole;
    /// otherwise the configurations grouped by the preset of their first run (a cdm run is
    /// compared with cdm runs, not with an ATTO sweep), in order of appearance. The
    /// baseline stays the baseline where it belongs, else a family's first configuration.
    pub fn families(&self) -> Vec<RunSet> {
        if self.study.is_some() || self.configs.len() < 2 {
            return vec![self.clone()];
        }
        let preset = |c: &Config| c.runs.first().map(|r| r.preset.clone()).unwrap_or_default();
        let mut keys: Vec<String> = Vec::new();
        for c in &self.configs {
            let k = preset(c);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys.iter()
            .map(|k| {
                let members: Vec<usize> = (0..self.configs.len())
                    .filter(|&i| preset(&self.configs[i]) == *k)
                    .collect();
                RunSet {
                    study: None,
                    baseline: members
                        .iter()
                        .position(|&i| i == self.baseline)
                        .unwrap_or(0),
                    configs: members.iter().map(|&i| self.configs[i].clone()).collect(),
                }
            })
            .collect()
    }

    /// Every run of every configuration.
    pub fn runs(&self) -> impl Iterator<Item = &RunRecord> {
        self.configs.iter().flat_map(|c| c.runs.iter())
    }

    /// Test names of all configurations, in order of first appearance.
    pub fn test_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for c in &self.configs {
            for t in &c.tests {
                if !names.contains(&t.name) {
                    names.push(t.name.clone());
                }
            }
        }
        names
    }

    /// The test named `name` in every configuration (None where missing).
    pub fn aligned(&self, name: &str) -> Vec<Option<&TestRecord>> {
        self.configs.iter().map(|c| c.test(name)).collect()
    }

    /// Test names present in at least two configurations.
    pub fn shared_test_names(&self) -> Vec<String> {
        self.test_names()
            .into_iter()
            .filter(|n| self.aligned(n).iter().flatten().count() >= 2)
            .collect()
    }

    /// The study score on each test's primary metric (MB/s, or IOPS for tests that move no
    /// bytes), headline values.
    pub fn score(&self) -> StudyScore {
        let inputs: Vec<ScoreInput> = self
            .test_names()
            .iter()
            .map(|name| {
                let tests = self.aligned(name);
                let m = primary_metric(tests.iter().flatten().copied());
                let first = tests.iter().flatten().next().expect("named by a config");
                ScoreInput {
                    test: name.clone(),
                    access: access(first),
                    higher_is_better: m.higher_is_better(),
                    values: tests
                        .iter()
                        .map(|t| t.and_then(|t| m.headline(t)))
                        .collect(),
                }
            })
            .collect();
        score::study_score(self.configs.len(), &inputs)
    }
}

/// A table of workload facts, configurations as columns: rows of (name, one cell per
/// configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct FactTable {
    pub title: String,
    /// The header of the row-name column.
    pub corner: String,
    pub rows: Vec<(String, Vec<String>)>,
}

impl RunSet {
    /// Facts some workloads record besides their speed, per configuration: the space each
    /// small file takes (metadata) and what a scrub test injected and the scrub found.
    pub fn fact_tables(&self) -> Vec<FactTable> {
        let mut out = Vec::new();
        let space = |t: &TestRecord| {
            let s = &t.extra["space"];
            Some((
                s["bytes_per_file"].as_f64()?,
                s["allocated_bytes_per_file"].as_f64(),
            ))
        };
        let names = |has: &dyn Fn(&TestRecord) -> bool| -> Vec<String> {
            self.test_names()
                .into_iter()
                .filter(|n| self.aligned(n).iter().flatten().any(|t| has(t)))
                .collect()
        };
        let space_rows: Vec<(String, Vec<String>)> = names(&|t| space(t).is_some())
            .into_iter()
            .map(|name| {
                let cells = self
                    .aligned(&name)
                    .iter()
                    .map(|t| match t.and_then(&space) {
                        Some((used, Some(alloc))) => format!("{} / {}", num(used), num(alloc)),
                        Some((used, None)) => num(used),
                        None => "-".into(),
                    })
                    .collect();
                (name, cells)
            })
            .collect();
        if !space_rows.is_empty() {
            out.push(FactTable {
                title: "Space per small file, bytes: filesystem space used (statvfs, before \
                        and after creating them) / blocks allocated to the file (st_blocks)"
                    .into(),
                corner: "Test".into(),
                rows: space_rows,
            });
        }
        for name in names(&|t| t.extra["injected"].as_u64().is_some()) {
            let extras: Vec<Option<&serde_json::Value>> = self
                .aligned(&name)
                .iter()
                .map(|t| t.map(|t| &t.extra).filter(|e| e["injected"].is_u64()))
                .collect();
            let count = |e: &serde_json::Value, key: &str| -> String {
                match (e["reported"][key].as_u64(), e["expected"][key].as_u64()) {
                    (Some(r), Some(x)) if r != x => format!("{r} ({x})"),
                    (Some(r), _) => r.to_string(),
                    (None, Some(x)) => format!("? ({x})"),
                    (None, None) => "-".into(),
                }
            };
            let row = |label: &str, f: &dyn Fn(&serde_json::Value) -> String| {
                (
                    label.to_string(),
                    extras
                        .iter()
                        .map(|e| e.map_or("-".to_string(), f))
                        .collect::<Vec<_>>(),
                )
            };
            let mut rows = vec![row("injected", &|e| e["injected"].to_string())];
            for key in [
                "detected",
                "repaired",
                "repaired_bytes",
                "uncorrectable",
                "restored_on_member",
            ] {
                rows.push(row(&key.replace('_', " "), &|e| count(e, key)));
            }
            rows.push(row("verdict", &|e| {
                if e["passed"].as_bool() == Some(true) {
                    "pass".into()
                } else {
                    "⚠ FAIL".into()
                }
            }));
            out.push(FactTable {
                title: format!(
                    "{name}: corruptions injected on one member and what the scrub reported \
                     (expected in brackets where it differs)"
                ),
                corner: String::new(),
                rows,
            });
        }
        out
    }
}

/// Where a test goes in a table with tests as rows: the test name split into its row (the
/// `group`) and its column kind (what the name adds to the group: `Read`, `Write`, `Mix`,
/// a size...). A name that does not extend its group is a row of its own (kind empty).
pub fn row_and_kind(t: &TestRecord) -> (String, String) {
    match t.name.strip_prefix(&t.group) {
        Some(rest) if !t.group.is_empty() && rest.starts_with(' ') && rest.trim() != "" => {
            (t.group.clone(), rest.trim().to_string())
        }
        _ => (t.name.clone(), String::new()),
    }
}

/// Rows (groups) and column kinds of a set of tests, each in order of first appearance.
/// When the split would give every row a single cell (each group one test), the tests
/// themselves become the rows.
pub fn rows_and_kinds(tests: &[&TestRecord]) -> (Vec<String>, Vec<String>) {
    let mut rows: Vec<String> = Vec::new();
    let mut kinds: Vec<String> = Vec::new();
    for t in tests {
        let (r, k) = row_and_kind(t);
        if !rows.contains(&r) {
            rows.push(r);
        }
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    (rows, kinds)
}

/// The test placed at (`row`, `kind`) among `tests`.
pub fn test_at<'a>(tests: &[&'a TestRecord], row: &str, kind: &str) -> Option<&'a TestRecord> {
    tests.iter().copied().find(|t| {
        let (r, k) = row_and_kind(t);
        r == row && k == kind
    })
}
