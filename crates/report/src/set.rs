//! Several runs shown together: configurations (one run each, or the runs of a study that
//! share a `config_label`, their passes pooled for the tables), tests aligned by name, the
//! four headline metrics, and the study's ratio and score tables shared by every format.
//!
//! Differences between configurations are judged on runs, not passes ([`RunSet::judge`],
//! `iolab_stats::noise`): each run's headline value, the configuration's own runs, and the
//! other stored runs of the same command ([`Noise`]) for a configuration of a single run.

use std::collections::HashMap;

use iolab_measure::workload::{self, Injection, ScrubCounts, SpacePerFile, WorkloadInfo};
use iolab_measure::{
    Caveat, MetricSummary, PassRecord, RunRecord, TestRecord, TestSummary, Warning, WarningCode,
};
use iolab_stats::noise::{self, LogGroup, Outcome, RunTest, Side};
pub use iolab_stats::noise::{Call, DEFAULT_MARGIN_PCT};
use iolab_stats::score::{self, Access, ScoreInput, StudyScore};
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
        Some(self.of_summary(&t.summary))
    }

    /// The headline value of a test summary.
    pub fn of_summary(self, s: &TestSummary) -> f64 {
        match self {
            Metric::MbS => s.mb_s,
            Metric::Iops => s.iops,
            Metric::LatMean => s.lat_mean_us,
            Metric::LatP99 => s.lat_p99_us,
        }
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
        // A test loaded without its passes counts by its summary's largest pass.
        if t.passes.iter().any(|p| p.mb_s > 0.0) || t.summary.stats_mb_s.max > 0.0 {
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

/// Other stored runs of the commands a set's runs repeat: the measured run-to-run noise.
/// Filled by the caller, which has the store ([`RunSet::set_noise`]); empty, a
/// configuration of a single run cannot be told from noise.
#[derive(Debug, Clone, Default)]
pub struct Noise {
    /// The store's fingerprint of runs, by run id (the set's runs, at least).
    pub fingerprints: HashMap<i64, String>,
    /// Other stored runs, not in the set, each with its fingerprint; their tests carry
    /// summaries (passes need not be loaded).
    pub others: Vec<(String, RunRecord)>,
}

/// How many other runs of one command are loaded as its noise: the newest 50.
pub const NOISE_RUNS: usize = 50;

impl Noise {
    /// The fingerprints of runs `ids` and the newest [`NOISE_RUNS`] other complete runs of
    /// each of their commands, through the store's `fingerprint(id)` and
    /// `runs_like(fingerprint, limit)`.
    pub fn load<E>(
        ids: &[i64],
        mut fingerprint: impl FnMut(i64) -> Result<String, E>,
        mut runs_like: impl FnMut(&str, usize) -> Result<Vec<RunRecord>, E>,
    ) -> Result<Noise, E> {
        let mut fingerprints = HashMap::new();
        let mut fps: Vec<(String, usize)> = Vec::new();
        for &id in ids {
            let fp = fingerprint(id)?;
            match fps.iter_mut().find(|(f, _)| *f == fp) {
                Some((_, n)) => *n += 1,
                None => fps.push((fp.clone(), 1)),
            }
            fingerprints.insert(id, fp);
        }
        let mut others = Vec::new();
        let own_ids: std::collections::HashSet<i64> = ids.iter().copied().collect();
        for (fp, own) in fps {
            // The runs of `ids` may be among the newest: load enough to leave NOISE_RUNS,
            // and keep the newest NOISE_RUNS of the others (they come oldest first).
            let mine: Vec<RunRecord> = runs_like(&fp, NOISE_RUNS + own)?
                .into_iter()
                .filter(|r| r.id.is_some_and(|id| !own_ids.contains(&id)))
                .collect();
            let skip = mine.len().saturating_sub(NOISE_RUNS);
            others.extend(mine.into_iter().skip(skip).map(|r| (fp.clone(), r)));
        }
        Ok(Noise {
            fingerprints,
            others,
        })
    }

    /// The fingerprint of a run, if known.
    pub fn fingerprint(&self, run: &RunRecord) -> Option<&str> {
        run.id
            .and_then(|id| self.fingerprints.get(&id))
            .map(String::as_str)
    }
}

/// The runs behind one configuration's value of one test and metric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunValues {
    /// (run id, the run's headline value) of every run with the test, in run order.
    pub runs: Vec<(Option<i64>, f64)>,
    /// The fingerprint all of those runs share, when known.
    pub command: Option<String>,
    /// Other stored runs of that command with the same test and job: (run id, value).
    pub others: Vec<(i64, f64)>,
}

impl RunValues {
    pub fn values(&self) -> Vec<f64> {
        self.runs.iter().map(|(_, v)| *v).collect()
    }

    /// The geometric mean of the runs' values: 0 when one is 0; `None` without runs or
    /// with a value that is negative or not finite.
    pub fn geo_mean(&self) -> Option<f64> {
        let v = self.values();
        if !v.is_empty() && v.iter().all(|x| x.is_finite() && *x >= 0.0) && v.contains(&0.0) {
            return Some(0.0);
        }
        LogGroup::of(&v).filter(|g| g.n > 0).map(|g| g.geo_mean())
    }

    /// The other runs with a positive value (a value of 0 has no logarithm).
    fn usable_others(&self) -> Vec<(i64, f64)> {
        self.others
            .iter()
            .copied()
            .filter(|(_, v)| noise::loggable(*v))
            .collect()
    }

    /// The side for the statistics; `None` when a run's value is not positive.
    fn side(&self) -> Option<Side<'_>> {
        let others = self.usable_others();
        Some(Side {
            runs: LogGroup::of(&self.values())?,
            command: self.command.as_deref(),
            others: (!others.is_empty())
                .then(|| LogGroup::of(&others.iter().map(|(_, v)| *v).collect::<Vec<_>>()))
                .flatten(),
        })
    }
}

/// A difference tested on runs, and the other runs its noise was measured on.
#[derive(Debug, Clone, PartialEq)]
pub struct Tested {
    pub test: RunTest,
    /// Ids of the other stored runs of the same command(s) that measured the noise.
    pub noise_ids: Vec<i64>,
}

/// What can be said of one configuration against another for one test and metric.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    Tested(Tested),
    /// A side has a single run and its run-to-run noise is not measured: the difference
    /// cannot be told from noise. `a`/`b` say which side lacks it.
    NoNoise {
        runs_a: usize,
        runs_b: usize,
        a: bool,
        b: bool,
    },
    /// A run's value is 0 (or not finite): no ratio to test.
    NotPositive,
    /// A side has no run with the test.
    Missing,
}

impl Judgement {
    pub fn tested(&self) -> Option<&Tested> {
        match self {
            Judgement::Tested(t) => Some(t),
            _ => None,
        }
    }

    /// `Some(true)` when significant, `Some(false)` when tested and not, `None` otherwise.
    pub fn significant(&self) -> Option<bool> {
        self.tested().map(|t| t.test.significant())
    }
}

/// A condition the two sides were measured under that differs between them and could
/// explain a difference on its own: a warning code one side's runs raised and the
/// other's did not, a fact of the environment, or the time the runs were made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confound {
    /// `BUSY_DEVICE`, `BUSY_CPU`, `PAGE_CACHE`, `BLKIO_THROTTLE`, `kernel`, `filesystem`,
    /// `mount_options`, `device`, `throttle`, `sequential`.
    pub code: String,
    /// What differs, for a person: `on A in 3 of 3 runs, on B in 0 of 3`.
    pub fact: String,
}

impl Confound {
    /// `BUSY_DEVICE (on A in 3 of 3 runs, on B in 0 of 3)`.
    pub fn text(&self) -> String {
        format!("{} ({})", self.code, self.fact)
    }
}

/// Two batches of runs compared against the spread between batches of the same commands
/// stored at other times: runs are grouped into batches by time (a new batch after a gap
/// of more than a minute), each batch's mean of ln(value) is one sample, and the
/// difference of the two sides' means is tested against the variance of those batch
/// means (pooled over the commands, each about its own mean) with Student's t.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchTest {
    /// Batches found, the compared ones included.
    pub batches: usize,
    /// Standard deviation of ln(value) between batch means.
    pub sd: f64,
    /// Two-sided p-value of the sides' difference against it.
    pub p: f64,
    /// The other stored runs the batches came from.
    pub run_ids: Vec<i64>,
}

/// The verdict on one line (a test and metric, one side against another).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub call: Call,
    /// Whether the change is up (B above A); meaningful for *different*.
    pub higher: bool,
    /// For *undecided*: runs a side that would decide a change of the margin at the noise
    /// measured (`None` when the noise is not measured).
    pub runs_needed: Option<usize>,
    /// Conditions that differ between the sides (empty: same machine state).
    pub confounded_by: Vec<Confound>,
}

impl Decision {
    /// *different*, with no confound named.
    pub fn clean_different(&self) -> bool {
        self.call == Call::Different && self.confounded_by.is_empty()
    }
}

/// One line of a family: its judgement, the test it belongs to, and whether it is that
/// test's primary metric (MB/s, or IOPS for tests that move no bytes).
pub struct Line<'a> {
    pub judgement: &'a Judgement,
    pub test: &'a str,
    pub primary: bool,
}

/// Decides a family of lines (one side against another, every test and metric) together,
/// so that two identical sides get no *different* line at all at least 95% of the time:
/// the tests' primary lines are corrected together with Holm's step-down procedure (valid
/// whatever their dependence); a test's other metrics (IOPS, mean and p99 latency, which
/// mostly restate its throughput) can be *different* only when its primary line is, and
/// then on their own 95% test (gatekeeping: under identical sides no primary line passes
/// in 95% of comparisons, so no other line does either). A line is *same* when its
/// ratio's 95% interval lies inside ±`margin_pct`; otherwise *undecided*. `None` for a
/// side without the test.
pub fn decide_family(lines: &[Line<'_>], margin_pct: f64) -> Vec<Option<Decision>> {
    let primaries: Vec<(usize, f64)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.primary)
        .filter_map(|(i, l)| l.judgement.tested().map(|t| (i, t.test.p)))
        .collect();
    let ps: Vec<f64> = primaries.iter().map(|(_, p)| *p).collect();
    let kept_primary = noise::holm(&ps, iolab_stats::score::ALPHA);
    let passed = |i: usize| {
        primaries
            .iter()
            .position(|(x, _)| *x == i)
            .is_some_and(|k| kept_primary[k])
    };
    let gate_open = |test: &str| {
        lines
            .iter()
            .enumerate()
            .any(|(i, l)| l.primary && l.test == test && passed(i))
    };
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| match l.judgement {
            Judgement::Missing => None,
            Judgement::Tested(t) => {
                let kept = if l.primary {
                    passed(i)
                } else {
                    gate_open(l.test)
                };
                let call = t.test.call(margin_pct, kept);
                Some(Decision {
                    call,
                    higher: t.test.ratio > 1.0,
                    runs_needed: (call == Call::Undecided)
                        .then(|| t.test.runs_needed(margin_pct))
                        .flatten(),
                    confounded_by: Vec::new(),
                })
            }
            _ => Some(Decision {
                call: Call::Undecided,
                higher: false,
                runs_needed: None,
                confounded_by: Vec::new(),
            }),
        })
        .collect()
}

/// Seconds since the epoch of an RFC 3339 time as runs store it.
fn epoch(s: &str) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.timestamp_millis() as f64 / 1000.0)
}

/// How much earlier one batch of runs ended than the other started, when one side's runs
/// all came before the other's: (the earlier side: 0 or 1, the gap in seconds), where
/// the gap is longer than a minute and than any gap between runs inside a side.
pub fn sequential(a: &[&RunRecord], b: &[&RunRecord]) -> Option<(usize, f64)> {
    let span = |runs: &[&RunRecord]| -> Option<Vec<(f64, f64)>> {
        let mut v: Vec<(f64, f64)> = runs
            .iter()
            .map(|r| {
                let s = epoch(&r.started_at)?;
                let e = r.finished_at.as_deref().and_then(epoch).unwrap_or(s);
                Some((s, e))
            })
            .collect::<Option<Vec<_>>>()?;
        v.sort_by(|x, y| x.0.total_cmp(&y.0));
        (!v.is_empty()).then_some(v)
    };
    let (sa, sb) = (span(a)?, span(b)?);
    let inner = |v: &[(f64, f64)]| v.windows(2).map(|w| w[1].0 - w[0].1).fold(0.0f64, f64::max);
    let within = inner(&sa).max(inner(&sb)).max(60.0);
    let last = |v: &[(f64, f64)]| v.iter().map(|x| x.1).fold(f64::MIN, f64::max);
    for (first, (x, y)) in [(0, (&sa, &sb)), (1, (&sb, &sa))] {
        let gap = y[0].0 - last(x);
        if gap > within {
            return Some((first, gap));
        }
    }
    None
}

/// `1h 2m`, `10m 3s`, `42s`.
pub fn gap_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}

/// The warning codes that say a run was measured under load or another state of the
/// machine, per pass or per test: a side that has them and another that does not were
/// not measured alike. For BUSY_DEVICE and BUSY_CPU the passes' own figures come first
/// (other I/O in MB/s, other CPU in % of a CPU, compared by size: both sides under some
/// load is not a confound, one side under twice the other's is); the warnings count only
/// for runs loaded without their passes.
pub const CONFOUND_CODES: [WarningCode; 4] = [
    WarningCode::BusyDevice,
    WarningCode::BusyCpu,
    WarningCode::PageCache,
    WarningCode::BlkioThrottle,
];

/// Another's I/O on the target's devices during test `name` of run `r`, MB/s: per pass,
/// the most any device moved beyond iolab's own bytes, over the pass's time; the median
/// over the passes. `None` when the run is not direct I/O (the page cache hides whose the
/// device's bytes are) or no pass recorded device activity.
fn foreign_io(r: &RunRecord, name: &str) -> Option<f64> {
    if !r.settings.direct {
        return None;
    }
    let t = r.tests.iter().find(|t| t.name == name)?;
    let v: Vec<f64> = t
        .passes
        .iter()
        .filter(|p| p.seconds > 0.0 && !p.context.activity.devices.is_empty())
        .map(|p| {
            let foreign = p
                .context
                .activity
                .devices
                .iter()
                .map(|d| (d.read_bytes + d.write_bytes).saturating_sub(p.bytes))
                .max()
                .unwrap_or(0);
            foreign as f64 / p.seconds / 1e6
        })
        .collect();
    (!v.is_empty()).then(|| median(&v))
}

/// Other processes' CPU during test `name` of run `r`, in percent of one CPU: the median
/// over the passes that have a figure.
fn other_cpu(r: &RunRecord, name: &str) -> Option<f64> {
    let t = r.tests.iter().find(|t| t.name == name)?;
    let v: Vec<f64> = t
        .passes
        .iter()
        .map(|p| &p.context.activity)
        .filter(|a| a.cpu_resolution_pct > 0.0 && a.cpu_resolution_pct <= 5.0)
        .map(|a| a.other_cpu_pct)
        .collect();
    (!v.is_empty()).then(|| median(&v))
}

/// The blkio throttles of a run's environment as a person reads them: `read_bps 20 MiB/s
/// on loop2`, joined with `, `; `none` when the list is empty.
fn throttles_text(list: &[serde_json::Value]) -> String {
    let mut parts: Vec<String> = list
        .iter()
        .map(|t| {
            let kind = t["kind"].as_str().unwrap_or("?");
            let limit = t["limit"].as_f64().unwrap_or(0.0);
            let value = if kind.ends_with("bps") {
                format!("{} MiB/s", num(limit / 1048576.0))
            } else {
                format!("{} IOPS", num(limit))
            };
            let dev = t["device_name"]
                .as_str()
                .or(t["device"].as_str())
                .unwrap_or("?");
            format!("{kind} {value} on {dev}")
        })
        .collect();
    parts.sort();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

/// What differs between the conditions of runs `a` and runs `b` for test `name` (sides
/// named `la` and `lb`): see [`Confound`].
pub fn confounds(
    (la, a): (&str, &[&RunRecord]),
    (lb, b): (&str, &[&RunRecord]),
    name: &str,
) -> Vec<Confound> {
    let mut out = Vec::new();
    if a.is_empty() || b.is_empty() {
        return out;
    }
    let mut measured: Vec<WarningCode> = Vec::new();
    for (code, what, unit, level) in [
        (
            WarningCode::BusyDevice,
            "other I/O on the device",
            "MB/s",
            foreign_io as fn(&RunRecord, &str) -> Option<f64>,
        ),
        (
            WarningCode::BusyCpu,
            "other processes' CPU",
            "% of a CPU",
            other_cpu as fn(&RunRecord, &str) -> Option<f64>,
        ),
    ] {
        let side = |runs: &[&RunRecord]| -> Option<f64> {
            let v: Vec<f64> = runs.iter().filter_map(|r| level(r, name)).collect();
            (!v.is_empty()).then(|| median(&v))
        };
        let (Some(xa), Some(xb)) = (side(a), side(b)) else {
            continue;
        };
        measured.push(code.clone());
        let (lo, hi) = (xa.min(xb), xa.max(xb));
        // Twice as much, and more than a floor: 1 MB/s of other I/O, 25% of a CPU.
        let floor = if code == WarningCode::BusyDevice {
            1.0
        } else {
            25.0
        };
        if hi > 2.0 * lo && hi - lo > floor {
            out.push(Confound {
                code: code.as_str().to_string(),
                fact: format!(
                    "{what}: {} {unit} on {la}, {} {unit} on {lb} (the median of the runs' \
                     passes)",
                    num(xa),
                    num(xb)
                ),
            });
        }
    }
    for code in CONFOUND_CODES {
        if measured.contains(&code) {
            continue;
        }
        let count = |runs: &[&RunRecord]| {
            runs.iter()
                .filter(|r| {
                    r.warnings
                        .iter()
                        .any(|w| w.code == code && w.test.as_deref().is_none_or(|t| t == name))
                })
                .count()
        };
        let (ka, kb) = (count(a), count(b));
        if (ka == 0) != (kb == 0) {
            out.push(Confound {
                code: code.as_str().to_string(),
                fact: format!(
                    "on {la} in {ka} of {} run{}, on {lb} in {kb} of {}",
                    a.len(),
                    if a.len() == 1 { "" } else { "s" },
                    b.len()
                ),
            });
        }
    }
    // What a run's environment records of the machine and its setup: two sides that differ
    // in any of these (runs from two hosts, say) were not measured under one condition.
    let facts: [(&str, &[&str]); 8] = [
        ("cpu", &["cpu_model"]),
        ("cpus", &["cpus_usable"]),
        ("memory", &["memory_total_bytes"]),
        ("kernel", &["kernel_release"]),
        ("filesystem", &["target", "fs_type"]),
        ("mount_options", &["target", "mount_options"]),
        ("device", &["target", "mount_source"]),
        ("throttle", &["blkio_throttles"]),
    ];
    for (code, path) in facts {
        let values = |runs: &[&RunRecord]| -> Vec<String> {
            let mut v: Vec<String> = runs
                .iter()
                .filter_map(|r| {
                    let x = path.iter().fold(&r.env, |v, k| &v[*k]);
                    match x {
                        serde_json::Value::Null => None,
                        serde_json::Value::String(s) => Some(s.clone()),
                        serde_json::Value::Array(a) if code == "throttle" => {
                            Some(throttles_text(a))
                        }
                        other => Some(other.to_string()),
                    }
                })
                .collect();
            v.sort();
            v.dedup();
            v
        };
        let (va, vb) = (values(a), values(b));
        if !va.is_empty() && !vb.is_empty() && va != vb {
            out.push(Confound {
                code: code.to_string(),
                fact: format!("{} on {la}, {} on {lb}", va.join(" / "), vb.join(" / ")),
            });
        }
    }
    if let Some((first, gap)) = sequential(a, b) {
        let (x, y, n) = if first == 0 {
            (la, lb, a.len())
        } else {
            (lb, la, b.len())
        };
        out.push(Confound {
            code: "sequential".into(),
            fact: format!(
                "{} of {x} before any of {y}, {} apart: a change of the machine's state                  in between looks like a difference",
                if n == 1 {
                    "the run".to_string()
                } else {
                    format!("all {n} runs")
                },
                gap_text(gap)
            ),
        });
    }
    out
}

/// Tests the runs of `b` against those of `a` (the rule is in `iolab_stats::noise`).
pub fn judge(a: &RunValues, b: &RunValues) -> Judgement {
    if a.runs.is_empty() || b.runs.is_empty() {
        return Judgement::Missing;
    }
    let (Some(sa), Some(sb)) = (a.side(), b.side()) else {
        return Judgement::NotPositive;
    };
    match noise::test(&sa, &sb) {
        Outcome::Tested(test) => {
            let mut noise_ids: Vec<i64> = Vec::new();
            for (used, v) in test.others_used.iter().zip([a, b]) {
                if *used {
                    noise_ids.extend(v.usable_others().iter().map(|(id, _)| *id));
                }
            }
            noise_ids.sort_unstable();
            noise_ids.dedup();
            Judgement::Tested(Tested { test, noise_ids })
        }
        Outcome::NoNoise { a: na, b: nb } => Judgement::NoNoise {
            runs_a: a.runs.len(),
            runs_b: b.runs.len(),
            a: na,
            b: nb,
        },
        Outcome::Empty => Judgement::Missing,
    }
}

/// `3`, `3, 5`, `3-7, 9`: sorted ids with runs of consecutive ids collapsed.
pub fn id_ranges(ids: &[i64]) -> String {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", ids[i], ids[j])
        } else if j == i + 1 {
            format!("{}, {}", ids[i], ids[j])
        } else {
            ids[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
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
                let score = t.summary.score.unwrap_or(Score::Median);
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
    /// Other stored runs of the same commands (empty unless the caller loads them).
    pub noise: Noise,
    /// Whether test names carry their workload's label (a study of several workloads).
    labelled_tests: bool,
    /// The margin, in percent, inside which a change is called *same* (`--margin`).
    pub margin_pct: f64,
}

/// Prefixes test names (and the tests of warnings) with the run's label, as a study of
/// several workloads shows them.
fn label_tests(r: &mut RunRecord) {
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

/// A test's headline value in a run loaded with or without its passes.
pub fn run_value(t: &TestRecord, m: Metric) -> Option<f64> {
    (!t.passes.is_empty() || t.summary.passes > 0).then(|| m.of_summary(&t.summary))
}

/// Which repeat of a study a run belongs to: its invocation and round; outside a study
/// every run is a repeat of its own.
fn repeat_key(r: &RunRecord, i: usize) -> String {
    match (
        r.study_meta["invocation"].as_str(),
        r.study_meta["round"].as_u64(),
    ) {
        (Some(inv), Some(round)) => format!("{inv}#{round}"),
        _ => match r.id {
            Some(id) => format!("run {id}"),
            None => format!("unstored {i}"),
        },
    }
}

/// The score of each repeat of `runs` over the scored tests (name, metric): the
/// geometric mean of its values, latencies inverted — the same quantity as the study
/// score up to a factor common to every configuration. Repeats that lack a test are left
/// out.
fn repeat_scores(runs: &[&RunRecord], tests: &[(String, Metric)]) -> Vec<f64> {
    let mut keys: Vec<String> = Vec::new();
    let mut groups: Vec<Vec<&RunRecord>> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let k = repeat_key(r, i);
        match keys.iter().position(|x| *x == k) {
            Some(g) => groups[g].push(r),
            None => {
                keys.push(k);
                groups.push(vec![r]);
            }
        }
    }
    groups
        .iter()
        .filter_map(|g| {
            let mut sum = 0.0;
            for (name, m) in tests {
                let v = g.iter().find_map(|r| {
                    r.tests
                        .iter()
                        .find(|t| t.name == *name)
                        .and_then(|t| run_value(t, *m))
                })?;
                if !noise::loggable(v) {
                    return None;
                }
                sum += if m.higher_is_better() {
                    v.ln()
                } else {
                    -v.ln()
                };
            }
            (!tests.is_empty()).then(|| (sum / tests.len() as f64).exp())
        })
        .collect()
}

/// The study score with the uncertainty of its ranks.
#[derive(Debug, Clone)]
pub struct Ranking {
    pub score: StudyScore,
    /// Per entry of `score.ranked`: the range of ranks the repeats allow, (low, high).
    /// Configurations whose totals do not differ significantly share ranks.
    pub ranges: Vec<(usize, usize)>,
    /// Per configuration (input order): its repeats that have every scored test.
    pub repeats: Vec<usize>,
    /// Per configuration: earlier repeats of it found in the store, used as its noise
    /// when it has a single repeat here.
    pub noise_repeats: Vec<usize>,
    /// Per configuration: the sample standard deviation of ln of its own per-repeat
    /// scores (`None` with fewer than two repeats): how much its repeats scatter.
    pub spread: Vec<Option<f64>>,
    /// Per configuration: it has one repeat, judged against the spread of its earlier
    /// repeats (`noise_repeats`), and that repeat lies outside the 95% prediction interval
    /// of the earlier ones (`|x - m| > t(0.975, n-1) s sqrt(1 + 1/n)` on ln scores): the
    /// earlier spread does not describe it, so a verdict resting on it is not sound.
    pub unlike_earlier: Vec<bool>,
    /// Every pair of scored configurations (i < j, input order) and the test of j's
    /// per-repeat score against i's.
    pub pairs: Vec<(usize, usize, Judgement)>,
    /// Whether the configurations are a study's (its file sets the repeats) or runs put
    /// side by side (repeated with `--repeat N`).
    pub study: bool,
}

/// How the ranks are separated, as the score tables say it.
pub const RANK_METHOD: &str = "configurations share a rank range unless their total \
     scores differ significantly: a t-test on ln of the score of each repeat (Welch with 2 \
     or more repeats a side, else against earlier repeats in the store), two-sided, 95%";

/// An adjacent pair of the ranking (configurations `better` and `worse`, input order,
/// `better` ranked above) and its verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct AdjacentPair {
    pub better: usize,
    pub worse: usize,
    pub decision: Decision,
}

impl Ranking {
    /// Every pair of neighbours in the ranking (by total score, best first), each decided
    /// on the per-repeat scores: *different* when Holm's correction over the adjacent
    /// pairs keeps it significant and it is not within ±`margin_pct`, *same* when the
    /// ratio's 95% interval lies inside ±`margin_pct`, else *undecided* with the repeats a
    /// configuration that would decide.
    pub fn adjacent(&self, margin_pct: f64) -> Vec<AdjacentPair> {
        let order: Vec<usize> = self
            .score
            .ranked
            .iter()
            .filter(|c| c.total.is_some())
            .map(|c| c.config)
            .collect();
        let judgements: Vec<&Judgement> = order
            .windows(2)
            .filter_map(|w| {
                let (i, j) = (w[0].min(w[1]), w[0].max(w[1]));
                self.pairs
                    .iter()
                    .find(|(a, b, _)| *a == i && *b == j)
                    .map(|(_, _, jd)| jd)
            })
            .collect();
        let lines: Vec<Line<'_>> = judgements
            .iter()
            .map(|j| Line {
                judgement: j,
                test: "",
                primary: true,
            })
            .collect();
        // Each adjacent pair is its own "test": all primary, one Holm family.
        let decided = decide_family(&lines, margin_pct);
        order
            .windows(2)
            .zip(decided)
            .map(|(w, d)| AdjacentPair {
                better: w[0],
                worse: w[1],
                decision: d.unwrap_or(Decision {
                    call: Call::Undecided,
                    higher: false,
                    runs_needed: None,
                    confounded_by: Vec::new(),
                }),
            })
            .collect()
    }

    /// Whether any pair of configurations could be tested at all.
    pub fn any_tested(&self) -> bool {
        self.pairs
            .iter()
            .any(|(_, _, j)| matches!(j, Judgement::Tested(_)))
    }

    /// The rank range of configuration `config` as text (`1`, `1-3`).
    pub fn rank_text(&self, config: usize) -> String {
        self.score
            .ranked
            .iter()
            .zip(&self.ranges)
            .find(|(c, _)| c.config == config)
            .map_or_else(String::new, |(_, r)| noise::rank_text(*r))
    }

    /// One sentence on what the ranks rest on.
    pub fn basis(&self) -> String {
        let scored: Vec<usize> = self
            .score
            .ranked
            .iter()
            .filter(|c| c.total.is_some())
            .map(|c| c.config)
            .collect();
        if scored.len() < 2 {
            return "One configuration: nothing to rank.".into();
        }
        let min = scored.iter().map(|&c| self.repeats[c]).min().unwrap_or(0);
        let max = scored.iter().map(|&c| self.repeats[c]).max().unwrap_or(0);
        let reps = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        let noise: usize = scored.iter().map(|&c| self.noise_repeats[c]).sum();
        if !self.any_tested() {
            let how = if self.study {
                "repeat the study (repeats = 3 in its file)"
            } else {
                "run each configuration again, or with --repeat 3"
            };
            return format!(
                "Ranks cannot be told apart from run-to-run noise: {reps} repeat(s) per \
                 configuration and no earlier runs of them stored; {how} to separate them."
            );
        }
        let mut s = format!("Ranks rest on {reps} repeat(s) per configuration: {RANK_METHOD}.");
        if noise > 0 {
            s.push_str(&format!(
                " Noise of single-repeat configurations from {noise} earlier repeat(s) in \
                 the store."
            ));
        }
        s
    }
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

/// A `--baseline` that names no configuration of the set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no configuration labelled '{label}' (have: {have})")]
pub struct NoSuchConfig {
    pub label: String,
    /// The labels there are, comma-separated.
    pub have: String,
}

/// A study none of whose stored runs can be compared ([`RunSet::stored_study`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("study '{0}': every stored run of it failed; nothing to compare")]
pub struct AllFailed(pub String);

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
            noise: Noise::default(),
            labelled_tests: false,
            margin_pct: DEFAULT_MARGIN_PCT,
        }
    }

    /// The set `iolab report --study NAME` compares, from every stored run of the study:
    /// the runs of the newest invocation (all of them with `all_invocations`), without the
    /// failed ones (they measured nothing that can be ranked; returned second, to be named),
    /// with the study file's baseline when it has runs. Err when no run is left.
    pub fn stored_study(
        name: &str,
        runs: Vec<RunRecord>,
        all_invocations: bool,
    ) -> Result<(RunSet, Vec<RunRecord>), AllFailed> {
        let runs = if all_invocations {
            runs
        } else {
            newest_invocation(runs)
        };
        let (failed, runs): (Vec<RunRecord>, Vec<RunRecord>) =
            runs.into_iter().partition(|r| r.failure().is_some());
        if runs.is_empty() {
            return Err(AllFailed(name.to_string()));
        }
        let baseline = runs
            .last()
            .and_then(|r| r.study_meta["baseline"].as_str().map(str::to_string));
        let mut set = RunSet::study(name, runs);
        if let Some(b) = baseline {
            // The study file's baseline, when it has runs.
            let _ = set.set_baseline(&b);
        }
        Ok((set, failed))
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
        let labelled = labels.len() > 1;
        if labelled {
            runs.iter_mut().for_each(label_tests);
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
        set.labelled_tests = labelled;
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
            noise: Noise::default(),
            labelled_tests: false,
            margin_pct: DEFAULT_MARGIN_PCT,
        }
    }

    /// Ids of every stored run of the set.
    pub fn run_ids(&self) -> Vec<i64> {
        self.runs().filter_map(|r| r.id).collect()
    }

    /// Gives the set the fingerprints of runs and other stored runs of the same commands
    /// (`others`: fingerprint and run). Runs of the set itself are dropped from `others`;
    /// in a study of several workloads their test names get the workload's label, as the
    /// set's own do.
    pub fn set_noise(&mut self, noise: Noise) {
        let Noise {
            fingerprints,
            others,
        } = noise;
        let own: std::collections::HashSet<i64> = self.run_ids().into_iter().collect();
        let mut seen = std::collections::HashSet::new();
        let mut others: Vec<(String, RunRecord)> = others
            .into_iter()
            .filter(|(_, r)| r.id.is_none_or(|id| !own.contains(&id) && seen.insert(id)))
            .collect();
        if self.labelled_tests {
            for (_, r) in &mut others {
                label_tests(r);
            }
        }
        self.noise = Noise {
            fingerprints,
            others,
        };
    }

    /// The distinct fingerprints of the set's runs (known after [`RunSet::set_noise`]).
    pub fn fingerprints(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in self.runs() {
            if let Some(fp) = self.noise.fingerprint(r) {
                if !out.iter().any(|x| x == fp) {
                    out.push(fp.to_string());
                }
            }
        }
        out
    }

    /// The runs behind configuration `config`'s value of test `name` for metric `m`: each
    /// run's headline, their shared fingerprint, and the other stored runs of that
    /// command with the same test and job.
    pub fn run_values(&self, config: usize, name: &str, m: Metric) -> RunValues {
        let mut out = RunValues::default();
        let mut fps: Vec<Option<&str>> = Vec::new();
        let mut job = None;
        for r in &self.configs[config].runs {
            let Some(t) = r
                .tests
                .iter()
                .find(|t| t.name == name && !t.passes.is_empty())
            else {
                continue;
            };
            job.get_or_insert(&t.job);
            out.runs.push((r.id, m.of_summary(&t.summary)));
            fps.push(self.noise.fingerprint(r));
        }
        let shared = match fps.first() {
            Some(Some(first)) if fps.iter().all(|f| f == &Some(*first)) => Some(*first),
            _ => None,
        };
        if let (Some(fp), Some(job)) = (shared, job) {
            out.command = Some(fp.to_string());
            for (ofp, r) in &self.noise.others {
                if ofp != fp || !r.complete {
                    continue;
                }
                let v = r
                    .tests
                    .iter()
                    .find(|t| t.name == name && t.job == *job)
                    .and_then(|t| run_value(t, m));
                if let (Some(id), Some(v)) = (r.id, v) {
                    out.others.push((id, v));
                }
            }
        }
        out
    }

    /// Configuration `b` against `a` for test `name` and metric `m`, judged on runs.
    pub fn judge(&self, name: &str, m: Metric, a: usize, b: usize) -> Judgement {
        judge(&self.run_values(a, name, m), &self.run_values(b, name, m))
    }

    /// The spread between batches of the commands of configurations `a` and `b` (test
    /// `name`, metric `m`), from every stored run of them: see [`BatchTest`]. `None` when
    /// the store holds no batch of either command besides the compared ones.
    pub fn between_batches(&self, a: usize, b: usize, name: &str, m: Metric) -> Option<BatchTest> {
        let (va, vb) = (self.run_values(a, name, m), self.run_values(b, name, m));
        let when = |id: i64| -> Option<(f64, f64)> {
            let r = self
                .runs()
                .chain(self.noise.others.iter().map(|(_, r)| r))
                .find(|r| r.id == Some(id))?;
            let s = epoch(&r.started_at)?;
            Some((s, r.finished_at.as_deref().and_then(epoch).unwrap_or(s)))
        };
        let mut ss = 0.0;
        let mut df = 0usize;
        let mut batches = 0usize;
        let mut ids: Vec<i64> = Vec::new();
        let mut commands: Vec<&str> = Vec::new();
        for v in [&va, &vb] {
            let Some(cmd) = v.command.as_deref() else {
                continue;
            };
            if commands.contains(&cmd) {
                continue;
            }
            commands.push(cmd);
            // Every run of the command (both sides' own when they share it, and the others).
            let mut runs: Vec<(f64, f64, f64)> = Vec::new();
            for side in [&va, &vb] {
                if side.command.as_deref() == Some(cmd) {
                    for (id, x) in &side.runs {
                        if let (Some((s0, e0)), true) = (id.and_then(when), noise::loggable(*x)) {
                            runs.push((s0, e0, x.ln()));
                        }
                    }
                }
            }
            for (id, x) in v.usable_others() {
                if let Some((s0, e0)) = when(id) {
                    runs.push((s0, e0, x.ln()));
                    ids.push(id);
                }
            }
            runs.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mut means: Vec<f64> = Vec::new();
            let mut cur: Vec<f64> = Vec::new();
            let mut end = f64::MIN;
            for (s0, e0, x) in runs {
                if !cur.is_empty() && s0 - end > 60.0 {
                    means.push(cur.iter().sum::<f64>() / cur.len() as f64);
                    cur.clear();
                }
                cur.push(x);
                end = end.max(e0);
            }
            if !cur.is_empty() {
                means.push(cur.iter().sum::<f64>() / cur.len() as f64);
            }
            let mean = means.iter().sum::<f64>() / means.len().max(1) as f64;
            ss += means.iter().map(|x| (x - mean).powi(2)).sum::<f64>();
            df += means.len().saturating_sub(1);
            batches += means.len();
        }
        let (ga, gb) = (LogGroup::of(&va.values())?, LogGroup::of(&vb.values())?);
        let own_batches = if commands.len() == 1 {
            2
        } else {
            commands.len()
        };
        // The compared sides are batches too; without another one there is no spread.
        if batches <= own_batches || df == 0 {
            return None;
        }
        let var = ss / df as f64;
        let d = gb.mean - ga.mean;
        let se = (2.0 * var).sqrt();
        let p = if se > 0.0 {
            iolab_stats::score::student_t_p_two_sided(d / se, df as f64)
        } else if d == 0.0 {
            1.0
        } else {
            0.0
        };
        ids.sort_unstable();
        ids.dedup();
        Some(BatchTest {
            batches,
            sd: var.sqrt(),
            p,
            run_ids: ids,
        })
    }

    /// What differs between the conditions of configurations `a` and `b` for test `name`
    /// (sides named by their labels).
    /// In a study the testbed is what is compared: its filesystem, mount options, device
    /// and throttle are the configurations' differences, not confounds.
    pub fn confounds(&self, a: usize, b: usize, name: &str) -> Vec<Confound> {
        let runs = |c: usize| -> Vec<&RunRecord> { self.configs[c].runs.iter().collect() };
        let mut out = confounds(
            (&self.configs[a].label, &runs(a)),
            (&self.configs[b].label, &runs(b)),
            name,
        );
        if self.study.is_some() {
            out.retain(|x| {
                !matches!(
                    x.code.as_str(),
                    "filesystem" | "mount_options" | "device" | "throttle"
                )
            });
        }
        out
    }

    /// The verdict on every test and metric of configuration `b` against `a`, decided as
    /// one family ([`decide_family`]), with the confounds of each line: keyed by (test,
    /// metric); lines a side lacks are left out.
    pub fn decisions(&self, a: usize, b: usize) -> HashMap<(String, Metric), Decision> {
        let mut keys = Vec::new();
        let mut js = Vec::new();
        for name in self.test_names() {
            let primary = primary_metric(self.aligned(&name).iter().flatten().copied());
            for m in Metric::ALL {
                js.push(self.judge(&name, m, a, b));
                keys.push((name.clone(), m, m == primary));
            }
        }
        let lines: Vec<Line<'_>> = keys
            .iter()
            .zip(&js)
            .map(|((name, _, primary), j)| Line {
                judgement: j,
                test: name,
                primary: *primary,
            })
            .collect();
        let decided = decide_family(&lines, self.margin_pct);
        let mut out = HashMap::new();
        let mut conf: HashMap<String, Vec<Confound>> = HashMap::new();
        for ((name, m, _), d) in keys.iter().zip(decided) {
            if let Some(mut d) = d {
                d.confounded_by = conf
                    .entry(name.clone())
                    .or_insert_with(|| self.confounds(a, b, name))
                    .clone();
                out.insert((name.clone(), *m), d);
            }
        }
        out
    }

    /// Makes the configuration labelled `label` the baseline.
    pub fn set_baseline(&mut self, label: &str) -> Result<(), NoSuchConfig> {
        match self.configs.iter().position(|c| c.label == label) {
            Some(i) => {
                self.baseline = i;
                Ok(())
            }
            None => Err(NoSuchConfig {
                label: label.to_string(),
                have: self
                    .configs
                    .iter()
                    .map(|c| c.label.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
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
                    noise: self.noise.clone(),
                    labelled_tests: self.labelled_tests,
                    margin_pct: self.margin_pct,
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
    /// bytes): a configuration's value of a test is the geometric mean of its runs'
    /// headline values (the headline itself with one run).
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
                    values: (0..self.configs.len())
                        .map(|c| self.run_values(c, name, m).geo_mean())
                        .collect(),
                }
            })
            .collect();
        score::study_score(self.configs.len(), &inputs)
    }

    /// The score and the ranges of ranks the repeats support ([`Ranking`]).
    pub fn ranking(&self) -> Ranking {
        let score = self.score();
        let n = self.configs.len();
        let tests: Vec<(String, Metric)> = score
            .ratios
            .iter()
            .map(|(name, _, _)| {
                let m = primary_metric(self.aligned(name).iter().flatten().copied());
                (name.clone(), m)
            })
            .collect();
        let mut own: Vec<Vec<f64>> = Vec::new();
        let mut earlier: Vec<Vec<f64>> = Vec::new();
        for c in &self.configs {
            let runs: Vec<&RunRecord> = c.runs.iter().collect();
            own.push(repeat_scores(&runs, &tests));
            let fps: Vec<&str> = c
                .runs
                .iter()
                .filter_map(|r| self.noise.fingerprint(r))
                .collect();
            let others: Vec<&RunRecord> = self
                .noise
                .others
                .iter()
                .filter(|(fp, r)| r.complete && fps.contains(&fp.as_str()))
                .map(|(_, r)| r)
                .collect();
            earlier.push(repeat_scores(&others, &tests));
        }
        let side = |c: usize| -> RunValues {
            RunValues {
                runs: own[c].iter().map(|v| (None, *v)).collect(),
                command: None,
                others: earlier[c].iter().map(|v| (0, *v)).collect(),
            }
        };
        let scored: Vec<usize> = score
            .ranked
            .iter()
            .filter(|c| c.total.is_some())
            .map(|c| c.config)
            .collect();
        let mut pairs = Vec::new();
        for (k, &i) in scored.iter().enumerate() {
            for &j in &scored[k + 1..] {
                let (i, j) = (i.min(j), i.max(j));
                let mut jd = judge(&side(i), &side(j));
                if let Judgement::Tested(t) = &mut jd {
                    // Earlier repeats are not runs a report can name.
                    t.noise_ids.clear();
                }
                pairs.push((i, j, jd));
            }
        }
        pairs.sort_by_key(|(i, j, _)| (*i, *j));
        // `beats(x, y)`: configuration x's score is significantly above y's.
        let beats = |x: usize, y: usize| {
            pairs.iter().any(|(i, j, jd)| match jd.tested() {
                Some(t) if t.test.significant() => {
                    (*i == x && *j == y && t.test.ratio < 1.0)
                        || (*i == y && *j == x && t.test.ratio > 1.0)
                }
                _ => false,
            })
        };
        let ranges_scored = noise::rank_ranges(scored.len(), |a, b| beats(scored[a], scored[b]));
        let ranges = score
            .ranked
            .iter()
            .map(|c| match scored.iter().position(|&x| x == c.config) {
                Some(k) => ranges_scored[k],
                None => (c.rank, c.rank),
            })
            .collect();
        let noise_repeats = (0..n)
            .map(|c| {
                if own[c].len() == 1 {
                    earlier[c].len()
                } else {
                    0
                }
            })
            .collect();
        let spread = own
            .iter()
            .map(|v| {
                let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
                (logs.len() >= 2).then(|| {
                    let m = logs.iter().sum::<f64>() / logs.len() as f64;
                    let ss: f64 = logs.iter().map(|x| (x - m).powi(2)).sum();
                    (ss / (logs.len() - 1) as f64).sqrt()
                })
            })
            .collect();
        let unlike_earlier = (0..n)
            .map(|c| {
                if own[c].len() != 1 || earlier[c].len() < 2 {
                    return false;
                }
                let e: Vec<f64> = earlier[c].iter().map(|v| v.ln()).collect();
                let k = e.len() as f64;
                let m = e.iter().sum::<f64>() / k;
                let s = (e.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
                let half = iolab_stats::t_975(e.len() - 1) * s * (1.0 + 1.0 / k).sqrt();
                // Equal I/O counts give equal scores: a tolerance for rounding only.
                (own[c][0].ln() - m).abs() > half + 1e-9
            })
            .collect();
        Ranking {
            repeats: own.iter().map(Vec::len).collect(),
            noise_repeats,
            spread,
            unlike_earlier,
            score,
            ranges,
            pairs,
            study: self.study.is_some(),
        }
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
        /// A configuration's test, with its workload's descriptor.
        type Described<'a> = (&'a TestRecord, Option<&'static dyn WorkloadInfo>);
        // Each configuration's test of that name, with its workload's descriptor.
        let aligned = |name: &str| -> Vec<Option<Described>> {
            self.configs
                .iter()
                .map(|c| {
                    let t = c.test(name)?;
                    let run = c
                        .runs
                        .iter()
                        .find(|r| r.tests.iter().any(|x| x.name == name));
                    Some((
                        t,
                        workload::of_test(t).or_else(|| run.and_then(workload::of_run)),
                    ))
                })
                .collect()
        };
        let space = |x: &Described| x.1.and_then(|w| w.space_per_file(x.0));
        let injection = |x: &Described| x.1.and_then(|w| w.injection(x.0));
        let names = |has: &dyn Fn(&Described) -> bool| -> Vec<String> {
            self.test_names()
                .into_iter()
                .filter(|n| aligned(n).iter().flatten().any(has))
                .collect()
        };
        let space_rows: Vec<(String, Vec<String>)> = names(&|x| space(x).is_some())
            .into_iter()
            .map(|name| {
                let cells = aligned(&name)
                    .iter()
                    .map(|x| match x.as_ref().and_then(space) {
                        Some(SpacePerFile {
                            used,
                            allocated: Some(alloc),
                        }) => format!("{} / {}", num(used), num(alloc)),
                        Some(SpacePerFile { used, .. }) => num(used),
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
        for name in names(&|x| injection(x).is_some()) {
            let found: Vec<Option<Injection>> = aligned(&name)
                .iter()
                .map(|x| x.as_ref().and_then(injection))
                .collect();
            let count = |r: Option<u64>, x: Option<u64>| -> String {
                match (r, x) {
                    (Some(r), Some(x)) if r != x => format!("{r} ({x})"),
                    (Some(r), _) => r.to_string(),
                    (None, Some(x)) => format!("? ({x})"),
                    (None, None) => "-".into(),
                }
            };
            let row = |label: &str, f: &dyn Fn(&Injection) -> String| {
                (
                    label.to_string(),
                    found
                        .iter()
                        .map(|e| e.as_ref().map_or("-".to_string(), f))
                        .collect::<Vec<_>>(),
                )
            };
            let mut rows = vec![row("injected", &|e| e.injected.to_string())];
            type Count = fn(&ScrubCounts) -> Option<u64>;
            let counts: [(&str, Count); 5] = [
                ("detected", |c| c.detected),
                ("repaired", |c| c.repaired),
                ("repaired bytes", |c| c.repaired_bytes),
                ("uncorrectable", |c| c.uncorrectable),
                ("restored on member", |c| c.restored_on_member),
            ];
            for (label, get) in counts {
                rows.push(row(label, &|e| count(get(&e.reported), get(&e.expected))));
            }
            rows.push(row("verdict", &|e| {
                if e.passed {
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

/// The runs of the study invocation the newest run belongs to (runs stored without an
/// invocation, by hand with a study name, are kept together).
fn newest_invocation(runs: Vec<RunRecord>) -> Vec<RunRecord> {
    let invocation = |r: &RunRecord| r.study_meta["invocation"].as_str().map(str::to_string);
    let Some(newest) = runs
        .iter()
        .max_by_key(|r| r.started_at.clone())
        .map(invocation)
    else {
        return runs;
    };
    runs.into_iter()
        .filter(|r| invocation(r) == newest)
        .collect()
}
