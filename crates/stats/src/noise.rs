//! Differences that survive run-to-run noise.
//!
//! The passes inside one run are not independent samples of the next run: the page cache,
//! the host and the device's state all move between runs, so two identical runs differ by
//! more than their passes suggest. A difference between two sides (labels, runs,
//! configurations of a study) is therefore judged on **runs**: every run gives one value
//! per test and metric (its headline, the median of its passes), and the test is made on
//! the natural logarithm of those values, because storage noise is relative (a device at
//! 1000 MB/s wobbles by tens of MB/s, one at 20 MB/s by tenths) and a ratio is what a
//! report prints.
//!
//! - Both sides have two or more runs: Welch's t-test on the log values ([`Method::Welch`]).
//! - A side has a single run: its run-to-run noise must have been measured elsewhere, on
//!   other runs of the same command on the same target (the store's fingerprint), or on
//!   the other side's runs when they repeat the same command. The variance of the log
//!   values is pooled over every group of runs that measures it, with its degrees of
//!   freedom, and the difference is tested with Student's t ([`Method::Pooled`]).
//! - Otherwise the difference cannot be told from run-to-run noise ([`Outcome::NoNoise`]).
//!
//! `docs/statistics.md` has the reasoning and the A/A experiment that measures the
//! false-positive rate of this rule.

use crate::score::{student_t_p_two_sided, welch_from_moments, ALPHA};

/// The rule, as reports print it.
pub const METHOD: &str = "runs are the evidence, not passes: each run's headline value; \
     Welch's t-test on ln(value) when both sides have 2 or more runs, else Student's t \
     against the run-to-run variance of ln(value) measured on other stored runs of the same \
     command; two-sided, 95% (p < 0.05)";

/// Mean and sum of squared deviations of the natural logarithms of a group of positive
/// values (Welford's running form, so values can be added and taken out one at a time).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LogGroup {
    pub n: usize,
    /// Mean of ln(value).
    pub mean: f64,
    /// Sum of squared deviations of ln(value) from `mean`.
    pub ss: f64,
}

/// Whether a value has a logarithm: positive and finite.
pub fn loggable(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

impl LogGroup {
    /// The group of `values`; `None` when one of them is not positive and finite.
    pub fn of(values: &[f64]) -> Option<LogGroup> {
        let mut g = LogGroup::default();
        for &v in values {
            if !loggable(v) {
                return None;
            }
            g.add(v);
        }
        Some(g)
    }

    /// Adds a positive value.
    pub fn add(&mut self, value: f64) {
        let x = value.ln();
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.ss += d * (x - self.mean);
    }

    /// The group without one of its values (added before).
    pub fn without(&self, value: f64) -> LogGroup {
        if self.n <= 1 {
            return LogGroup::default();
        }
        let x = value.ln();
        let n = self.n - 1;
        let mean = (self.n as f64 * self.mean - x) / n as f64;
        let ss = (self.ss - (x - mean) * (x - self.mean)).max(0.0);
        LogGroup { n, mean, ss }
    }

    /// Sample variance of ln(value); `None` below two values.
    pub fn var(&self) -> Option<f64> {
        (self.n >= 2).then(|| self.ss / (self.n - 1) as f64)
    }

    /// The geometric mean of the values.
    pub fn geo_mean(&self) -> f64 {
        self.mean.exp()
    }
}

/// How a difference was tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Welch's t-test on the log values of both sides' runs (2 or more runs each).
    Welch,
    /// Student's t against a pooled run-to-run variance of log values that includes runs
    /// outside the two sides (a side has one run).
    Pooled,
}

impl Method {
    /// The key used in JSON.
    pub fn key(self) -> &'static str {
        match self {
            Method::Welch => "welch-log-runs",
            Method::Pooled => "pooled-log-noise",
        }
    }
}

/// One side of a comparison, as far as the test needs it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Side<'a> {
    /// The side's own runs (log values of their headlines).
    pub runs: LogGroup,
    /// The command every one of the side's runs repeats (the store's fingerprint), when
    /// known and shared.
    pub command: Option<&'a str>,
    /// Other stored runs of that command, on neither side: the measured run-to-run noise
    /// a side with a single run is tested against.
    pub others: Option<LogGroup>,
}

/// A difference tested on runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunTest {
    pub method: Method,
    /// Runs on each side.
    pub n_a: usize,
    pub n_b: usize,
    /// Whether side A's / side B's `others` went into the noise (so a report can say where
    /// the noise came from); with a shared command the other runs count once, on A.
    pub others_used: [bool; 2],
    /// Runs outside the two sides that the noise was measured on.
    pub noise_runs: usize,
    /// Ratio of the geometric means, B over A.
    pub ratio: f64,
    /// The 95% confidence interval of `ratio`.
    pub ratio_low: f64,
    pub ratio_high: f64,
    /// t statistic of ln(B) − ln(A).
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Standard error of ln(B) − ln(A).
    pub se: f64,
}

impl RunTest {
    /// Significant at the two-sided 95% level.
    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }

    /// Significant and B above A (on the log scale).
    pub fn higher(&self) -> bool {
        self.significant() && self.ratio > 1.0
    }

    /// Significant and B below A.
    pub fn lower(&self) -> bool {
        self.significant() && self.ratio < 1.0
    }
}

/// The margin a change must stay inside to be called *same*, in percent, unless
/// `--margin` says otherwise (docs/statistics.md says why 5).
pub const DEFAULT_MARGIN_PCT: f64 = 5.0;

/// One of the three verdicts on a difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Shown different: significant after the family's correction, and the 95% interval
    /// of the ratio is not inside the margin.
    Different,
    /// Shown the same within the margin: the 95% interval of the ratio lies inside
    /// [1/(1 + M), 1 + M].
    Same,
    /// Neither: more runs would decide it.
    Undecided,
}

impl Call {
    /// The key used in JSON: `different`, `same`, `undecided`.
    pub fn key(self) -> &'static str {
        match self {
            Call::Different => "different",
            Call::Same => "same",
            Call::Undecided => "undecided",
        }
    }
}

/// ln(1 + margin): the margin on the log scale the tests are made on.
pub fn log_margin(margin_pct: f64) -> f64 {
    (1.0 + margin_pct.max(0.0) / 100.0).ln()
}

/// Holm's step-down procedure over a family of p-values: which hypotheses are rejected at
/// family-wise level `alpha` (under any dependence between the tests).
pub fn holm(ps: &[f64], alpha: f64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    let m = ps.len();
    let mut out = vec![false; m];
    for (k, &i) in order.iter().enumerate() {
        if ps[i] < alpha / (m - k) as f64 {
            out[i] = true;
        } else {
            break;
        }
    }
    out
}

impl RunTest {
    /// The run-to-run standard deviation of ln(value) the test measured (both sides'
    /// runs, and other runs of the command where they were used).
    pub fn run_sd(&self) -> f64 {
        let k = 1.0 / self.n_a as f64 + 1.0 / self.n_b as f64;
        self.se / k.sqrt()
    }

    /// Whether the 95% interval of the ratio lies inside ±`margin_pct`.
    pub fn within(&self, margin_pct: f64) -> bool {
        let m = log_margin(margin_pct);
        self.ratio_low.ln() >= -m && self.ratio_high.ln() <= m
    }

    /// The verdict, given whether the family's correction (Holm) kept this test
    /// significant: *same* when the interval is inside the margin (whatever the p-value:
    /// a change smaller than the margin is not one that matters), else *different* when
    /// significant, else *undecided*.
    pub fn call(&self, margin_pct: f64, significant_in_family: bool) -> Call {
        if self.within(margin_pct) {
            Call::Same
        } else if significant_in_family && self.significant() {
            Call::Different
        } else {
            Call::Undecided
        }
    }

    /// Runs a side that would decide a change of `margin_pct` at the noise this test
    /// measured: the usual two-sample size for a two-sided 5% test with 80% power,
    /// `n = 2 (z₀.₉₇₅ + z₀.₈)² s² / ln(1 + M)²`, at least one more than the side with
    /// fewer runs has now. `None` when the noise is 0 (nothing more to gain) or the
    /// margin is 0.
    pub fn runs_needed(&self, margin_pct: f64) -> Option<usize> {
        let s = self.run_sd();
        let m = log_margin(margin_pct);
        if !(s > 0.0 && m > 0.0 && s.is_finite()) {
            return None;
        }
        const Z: f64 = 1.959964 + 0.841621;
        let n = (2.0 * Z * Z * s * s / (m * m)).ceil();
        let have = self.n_a.min(self.n_b) + 1;
        Some((n.min(1e6) as usize).max(have).max(2))
    }
}

/// The outcome of testing side B against side A.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    Tested(RunTest),
    /// A side has a single run and its run-to-run noise has not been measured: the
    /// difference cannot be told from noise. The flags name the side(s) lacking it.
    NoNoise {
        a: bool,
        b: bool,
    },
    /// A side has no run.
    Empty,
}

/// The 97.5% quantile of Student's t with (possibly fractional) `df` degrees of freedom.
fn t_975(df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if df > 0.0 => t.inverse_cdf(0.975),
        _ => f64::INFINITY,
    }
}

/// Tests side `b` against side `a` on runs; see the module documentation for the rule.
pub fn test(a: &Side<'_>, b: &Side<'_>) -> Outcome {
    let (na, nb) = (a.runs.n, b.runs.n);
    if na == 0 || nb == 0 {
        return Outcome::Empty;
    }
    let d = b.runs.mean - a.runs.mean;
    if na >= 2 && nb >= 2 {
        let (va, vb) = (a.runs.var().unwrap_or(0.0), b.runs.var().unwrap_or(0.0));
        let w = welch_from_moments((na, a.runs.mean, va), (nb, b.runs.mean, vb));
        let se = (va / na as f64 + vb / nb as f64).sqrt();
        return Outcome::Tested(finish(
            Method::Welch,
            (na, nb),
            [false; 2],
            0,
            d,
            se,
            w.t,
            w.df,
        ));
    }
    let shared = a.command.is_some() && a.command == b.command;
    let usable = |s: &Side<'_>| s.others.filter(|g| g.n >= 2 && s.runs.n == 1);
    let others_a = usable(a);
    // With a shared command both sides' other runs are the same runs: counted once.
    let others_b = usable(b).filter(|_| !(shared && others_a.is_some()));
    let own_a = na >= 2;
    let own_b = nb >= 2;
    let measured_by_b = own_b || others_b.is_some();
    let measured_by_a = own_a || others_a.is_some();
    let covered_a = measured_by_a || (shared && measured_by_b);
    let covered_b = measured_by_b || (shared && measured_by_a);
    if !covered_a || !covered_b {
        return Outcome::NoNoise {
            a: !covered_a,
            b: !covered_b,
        };
    }
    let mut ss = 0.0;
    let mut df = 0usize;
    let mut noise_runs = 0usize;
    for (g, own) in [(a.runs, own_a), (b.runs, own_b)] {
        if own {
            ss += g.ss;
            df += g.n - 1;
        }
    }
    for g in [others_a, others_b].into_iter().flatten() {
        ss += g.ss;
        df += g.n - 1;
        noise_runs += g.n;
    }
    let var = ss / df as f64;
    let se = (var * (1.0 / na as f64 + 1.0 / nb as f64)).sqrt();
    let t = if se > 0.0 {
        d / se
    } else if d == 0.0 {
        0.0
    } else {
        f64::INFINITY.copysign(d)
    };
    Outcome::Tested(finish(
        Method::Pooled,
        (na, nb),
        [others_a.is_some(), others_b.is_some()],
        noise_runs,
        d,
        se,
        t,
        df as f64,
    ))
}

#[allow(clippy::too_many_arguments)]
fn finish(
    method: Method,
    (n_a, n_b): (usize, usize),
    others_used: [bool; 2],
    noise_runs: usize,
    d: f64,
    se: f64,
    t: f64,
    df: f64,
) -> RunTest {
    let p = if t.is_infinite() {
        0.0
    } else if t == 0.0 {
        1.0
    } else {
        student_t_p_two_sided(t, df)
    };
    let half = if se > 0.0 { t_975(df) * se } else { 0.0 };
    RunTest {
        method,
        n_a,
        n_b,
        others_used,
        noise_runs,
        ratio: d.exp(),
        ratio_low: (d - half).exp(),
        ratio_high: (d + half).exp(),
        t,
        df,
        p,
        se,
    }
}

/// Rank ranges of `n` items listed best first: item `i` ranks from 1 + the number of
/// items significantly better than it to `n` − the number significantly worse.
/// `better(i, j)` says whether item `i` is significantly better than item `j`. Items
/// nothing separates share the whole range; the ranges of a consistent order never
/// invert (each low ≤ its high).
pub fn rank_ranges(n: usize, better: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    (0..n)
        .map(|i| {
            let above = (0..n).filter(|&j| j != i && better(j, i)).count();
            let below = (0..n).filter(|&j| j != i && better(i, j)).count();
            (1 + above, n - below)
        })
        .collect()
}

/// `1` or `1-3`.
pub fn rank_text((low, high): (usize, usize)) -> String {
    if low == high {
        low.to_string()
    } else {
        format!("{low}-{high}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn side(values: &[f64]) -> Side<'static> {
        Side {
            runs: LogGroup::of(values).unwrap(),
            ..Side::default()
        }
    }

    #[test]
    fn log_groups_add_and_remove() {
        // ln values 0, ln 2, ln 4 = 0, 0.693147, 1.386294: mean ln 2, ss 2 (ln 2)².
        let g = LogGroup::of(&[1.0, 2.0, 4.0]).unwrap();
        let l2 = 2f64.ln();
        assert_eq!(g.n, 3);
        assert!(close(g.mean, l2, 1e-12) && close(g.ss, 2.0 * l2 * l2, 1e-12));
        assert!(close(g.var().unwrap(), l2 * l2, 1e-12));
        assert!(close(g.geo_mean(), 2.0, 1e-12));
        let h = g.without(4.0);
        let direct = LogGroup::of(&[1.0, 2.0]).unwrap();
        assert_eq!(h.n, 2);
        assert!(close(h.mean, direct.mean, 1e-12) && close(h.ss, direct.ss, 1e-12));
        assert_eq!(h.without(1.0).without(2.0), LogGroup::default());
        assert!(LogGroup::of(&[1.0, 0.0]).is_none());
        assert!(LogGroup::of(&[1.0, f64::NAN]).is_none());
        assert_eq!(LogGroup::of(&[5.0]).unwrap().var(), None);
    }

    #[test]
    fn welch_on_logs_by_hand() {
        // A: e^0, e^0.1, e^0.2 -> ln mean 0.1, var 0.01. B: e^0.3, e^0.4, e^0.5 -> 0.4, 0.01.
        // se = sqrt(0.01/3 + 0.01/3) = 0.0816497; t = 0.3 / 0.0816497 = 3.674235; df = 4
        // (equal variances and sizes); two-sided p at t=3.674235, df 4: 0.021312 (from
        // the t distribution's closed form for 4 df: p = 1 - t(t²+6)/(t²+4)^1.5).
        let e = |x: f64| x.exp();
        let a = side(&[e(0.0), e(0.1), e(0.2)]);
        let b = side(&[e(0.3), e(0.4), e(0.5)]);
        let Outcome::Tested(r) = test(&a, &b) else {
            panic!()
        };
        assert_eq!(r.method, Method::Welch);
        assert!(close(r.t, 3.674235, 1e-6), "{r:?}");
        assert!(close(r.df, 4.0, 1e-9), "{r:?}");
        let t: f64 = r.t;
        let p4 = 1.0 - t * (t * t + 6.0) / (t * t + 4.0).powf(1.5);
        assert!(close(r.p, p4, 1e-9) && close(r.p, 0.021312, 1e-6), "{r:?}");
        assert!(r.significant() && r.higher() && !r.lower());
        assert!(close(r.ratio, e(0.3), 1e-12));
        // CI: 0.3 ± 2.776445 * 0.0816497 = [0.073306, 0.526694].
        assert!(close(r.ratio_low, e(0.073306), 1e-5), "{r:?}");
        assert!(close(r.ratio_high, e(0.526694), 1e-5), "{r:?}");
        assert_eq!(r.noise_runs, 0);
    }

    #[test]
    fn a_twenty_percent_step_with_three_runs_a_side() {
        // What the throttle test measures: 20 vs 24 MiB/s, runs within ±0.5%.
        let a = side(&[20.97, 21.05, 20.90]);
        let b = side(&[25.10, 25.20, 25.02]);
        let Outcome::Tested(r) = test(&a, &b) else {
            panic!()
        };
        assert!(r.significant() && r.p < 1e-4, "{r:?}");
        assert!(close(r.ratio, 1.2, 0.01));
    }

    #[test]
    fn one_run_without_measured_noise_cannot_be_told() {
        let one = side(&[100.0]);
        let three = side(&[90.0, 95.0, 100.0]);
        assert_eq!(test(&one, &one), Outcome::NoNoise { a: true, b: true });
        assert_eq!(test(&three, &one), Outcome::NoNoise { a: false, b: true });
        assert_eq!(test(&one, &three), Outcome::NoNoise { a: true, b: false });
        assert_eq!(test(&Side::default(), &one), Outcome::Empty);
        // Other runs of a different command do not measure this side's noise.
        let with_others = Side {
            command: Some("x"),
            others: LogGroup::of(&[1.0, 1.1, 1.2]),
            ..side(&[100.0])
        };
        let other_command = Side {
            command: Some("y"),
            ..side(&[100.0])
        };
        assert_eq!(
            test(&with_others, &other_command),
            Outcome::NoNoise { a: false, b: true }
        );
        // A single other run is not a noise level either.
        let lone = Side {
            others: LogGroup::of(&[1.0]),
            ..side(&[100.0])
        };
        assert_eq!(test(&lone, &lone), Outcome::NoNoise { a: true, b: true });
    }

    #[test]
    fn one_run_each_against_other_runs_of_the_command() {
        // Other runs: ln values 0, 0.1, 0.2, 0.3 (mean 0.15, ss 0.05, df 3, var 1/60).
        // A = e^0, B = e^0.2: se = sqrt(var * 2) = 0.182574; t = 0.2 / 0.182574 = 1.095445,
        // df 3. Shared command: the other runs count once.
        let e = |x: f64| x.exp();
        let others = LogGroup::of(&[e(0.0), e(0.1), e(0.2), e(0.3)]);
        let a = Side {
            runs: LogGroup::of(&[1.0]).unwrap(),
            command: Some("fp1"),
            others,
        };
        let b = Side {
            runs: LogGroup::of(&[e(0.2)]).unwrap(),
            ..a
        };
        let Outcome::Tested(r) = test(&a, &b) else {
            panic!()
        };
        assert_eq!(r.method, Method::Pooled);
        assert_eq!((r.n_a, r.n_b, r.noise_runs), (1, 1, 4));
        assert_eq!(r.others_used, [true, false]);
        assert!(close(r.t, 1.095445, 1e-6) && r.df == 3.0, "{r:?}");
        // Closed form for 3 df: p = 1 - (2/π)(atan(t/√3) + (t/√3)/(1 + t²/3)).
        let u = r.t / 3f64.sqrt();
        let p3 = 1.0 - 2.0 / std::f64::consts::PI * (u.atan() + u / (1.0 + u * u));
        assert!(close(r.p, p3, 1e-9), "{r:?} {p3}");
        assert!(!r.significant());
        // A step of 1.0 in ln against the same noise: t = 5.477226, p = 0.01196.
        let far = Side {
            runs: LogGroup::of(&[e(1.0)]).unwrap(),
            ..a
        };
        let Outcome::Tested(r) = test(&a, &far) else {
            panic!()
        };
        assert!(close(r.t, 5.477226, 1e-6) && r.significant(), "{r:?}");
    }

    #[test]
    fn a_single_run_borrows_the_other_sides_spread_of_the_same_command() {
        // A: 1 run, B: 3 runs of the same command, nothing else stored. Pooled over B:
        // ln B = 0.1, 0.2, 0.3 (ss 0.02, df 2, var 0.01); A = e^0.
        // se = sqrt(0.01 * (1 + 1/3)) = 0.11547; t = 0.2 / 0.11547 = 1.732051.
        let e = |x: f64| x.exp();
        let a = Side {
            runs: LogGroup::of(&[1.0]).unwrap(),
            command: Some("fp"),
            others: None,
        };
        let b = Side {
            runs: LogGroup::of(&[e(0.1), e(0.2), e(0.3)]).unwrap(),
            command: Some("fp"),
            others: None,
        };
        let Outcome::Tested(r) = test(&a, &b) else {
            panic!()
        };
        assert_eq!((r.method, r.noise_runs, r.df), (Method::Pooled, 0, 2.0));
        assert!(close(r.t, 1.732051, 1e-6), "{r:?}");
        // Two different commands with their own other runs: both variances pooled.
        // A others ln 0, 0.2 (ss 0.02), B others ln 0, 0.4 (ss 0.08): var 0.1/2 = 0.05.
        let a = Side {
            runs: LogGroup::of(&[1.0]).unwrap(),
            command: Some("x"),
            others: LogGroup::of(&[1.0, e(0.2)]),
        };
        let b = Side {
            runs: LogGroup::of(&[e(0.5)]).unwrap(),
            command: Some("y"),
            others: LogGroup::of(&[1.0, e(0.4)]),
        };
        let Outcome::Tested(r) = test(&a, &b) else {
            panic!()
        };
        assert_eq!((r.noise_runs, r.df, r.others_used), (4, 2.0, [true, true]));
        assert!(close(r.t, 0.5 / 0.1f64.sqrt(), 1e-9), "{r:?}");
    }

    #[test]
    fn zero_noise_is_decided_by_the_means() {
        let a = side(&[5.0, 5.0]);
        let Outcome::Tested(same) = test(&a, &a) else {
            panic!()
        };
        assert_eq!((same.p, same.ratio), (1.0, 1.0));
        let Outcome::Tested(apart) = test(&a, &side(&[6.0, 6.0])) else {
            panic!()
        };
        assert_eq!(apart.p, 0.0);
        assert!(apart.higher());
    }

    #[test]
    fn holm_steps_down() {
        // m = 4 at 0.05: thresholds 0.0125, 0.01667, 0.025, 0.05 for the sorted p-values.
        assert_eq!(
            holm(&[0.04, 0.001, 0.016, 0.02], 0.05),
            [true, true, true, true]
        );
        // m = 3: 0.02 > 0.0167, the smallest fails and nothing is rejected (each alone
        // would be at 95%).
        assert_eq!(holm(&[0.02, 0.03, 0.04], 0.05), [false, false, false]);
        // 0.01 < 0.0167 passes, 0.03 > 0.025 stops the rest.
        assert_eq!(holm(&[0.03, 0.01, 0.04], 0.05), [false, true, false]);
        assert!(holm(&[], 0.05).is_empty());
    }

    #[test]
    fn three_verdicts_and_the_runs_that_would_decide() {
        // 20 vs 24 MiB/s, runs within ±0.5%: different.
        let Outcome::Tested(r) = test(&side(&[20.97, 21.05, 20.90]), &side(&[25.1, 25.2, 25.0]))
        else {
            panic!()
        };
        assert_eq!(r.call(5.0, true), Call::Different);
        // Not kept by the family's correction: not different, and not inside ±5% either.
        assert_eq!(r.call(5.0, false), Call::Undecided);
        // Inside a 25% margin: same, whatever the p-value.
        assert_eq!(r.call(25.0, true), Call::Same);
        // 20 vs 20.4 with no noise: a 2% change, inside ±5%.
        let Outcome::Tested(r) = test(&side(&[20.0, 20.0, 20.0]), &side(&[20.4, 20.4, 20.4]))
        else {
            panic!()
        };
        assert_eq!((r.call(5.0, true), r.runs_needed(5.0)), (Call::Same, None));
        // sd of ln 0.1 a run, 3 a side, no change: undecided; n = 2·(2.8016)²·0.01/ln(1.05)²
        // = 0.15698/0.0023805 = 65.9 -> 66 runs a side.
        let e = |x: f64| x.exp();
        let a = side(&[e(-0.1), e(0.0), e(0.1)]);
        let Outcome::Tested(r) = test(&a, &a) else {
            panic!()
        };
        assert!(close(r.run_sd(), 0.1, 1e-12), "{r:?}");
        assert_eq!(r.call(5.0, false), Call::Undecided);
        assert_eq!(r.runs_needed(5.0), Some(66));
        // A wide margin needs few runs, but always one more than the sides have.
        assert_eq!(r.runs_needed(50.0), Some(4));
    }

    #[test]
    fn rank_ranges_from_pairwise_verdicts() {
        // Best first: 0 beats 2 and 3, 1 beats 3, nothing else is separated. Item 2: one
        // item above it (0), none below -> 2-4; item 3: two above -> 3-4.
        let beats = |i: usize, j: usize| matches!((i, j), (0, 2) | (0, 3) | (1, 3));
        let r = rank_ranges(4, beats);
        assert_eq!(r, vec![(1, 2), (1, 3), (2, 4), (3, 4)]);
        assert_eq!(rank_text(r[0]), "1-2");
        assert_eq!(rank_text((1, 1)), "1");
        // Nothing separated: everyone shares 1-3. Everything separated: 1, 2, 3.
        assert_eq!(rank_ranges(3, |_, _| false), vec![(1, 3); 3]);
        assert_eq!(rank_ranges(3, |i, j| i < j), vec![(1, 1), (2, 2), (3, 3)]);
    }
}
