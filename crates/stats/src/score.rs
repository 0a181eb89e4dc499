//! Comparing configurations: Welch's t-test between two sets of passes, and the study score
//! (each test's ratio to the best configuration, geometric means over the random tests, the
//! sequential tests and all of them, normalised so that the best configuration scores 1.00).
//!
//! Both are used by `iolab compare`, `iolab history` and the study reports; `docs/reports.md`
//! describes the methods.

/// Significance level of [`Welch::significant`]: two-sided 95%.
pub const ALPHA: f64 = 0.05;

/// The outcome of Welch's unequal-variances t-test between two samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    pub n_a: usize,
    pub n_b: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    /// t statistic of `mean_b - mean_a`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

impl Welch {
    /// The difference is significant at the two-sided 95% level (`p < 0.05`).
    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }
}

fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Welch's t-test of `b` against `a` (two-sided). `None` when either side has fewer than two
/// values or a value is not finite. When both samples have zero variance the test is
/// degenerate: equal means give `p = 1`, different means `p = 0`.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 || a.iter().chain(b).any(|v| !v.is_finite()) {
        return None;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    Some(welch_from_moments((a.len(), ma, va), (b.len(), mb, vb)))
}

/// Welch's t-test from each side's (n, mean, sample variance); both `n` at least 2.
pub fn welch_from_moments(a: (usize, f64, f64), b: (usize, f64, f64)) -> Welch {
    let ((na, ma, va), (nb, mb, vb)) = (a, b);
    let (sa, sb) = (va / na as f64, vb / nb as f64);
    let se2 = sa + sb;
    let (t, df, p) = if se2 <= 0.0 {
        let p = if ma == mb { 1.0 } else { 0.0 };
        let t = if ma == mb {
            0.0
        } else {
            f64::INFINITY.copysign(mb - ma)
        };
        (t, (na + nb - 2) as f64, p)
    } else {
        let t = (mb - ma) / se2.sqrt();
        let df = se2 * se2 / (sa * sa / (na as f64 - 1.0) + sb * sb / (nb as f64 - 1.0));
        (t, df, student_t_p_two_sided(t, df))
    };
    Welch {
        n_a: na,
        n_b: nb,
        mean_a: ma,
        mean_b: mb,
        t,
        df,
        p,
    }
}

/// Two-sided p-value of Student's t distribution with `df` (possibly fractional) degrees
/// of freedom: `P(|T| >= |t|) = I_{df/(df+t²)}(df/2, 1/2)`.
pub fn student_t_p_two_sided(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t.is_infinite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    statrs::function::beta::beta_reg(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

/// Geometric mean of positive finite values; `None` when there are none or one is not
/// positive and finite.
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    Some((values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp())
}

/// Which score group a test belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Random offsets (fio's `randread`, `randwrite`, `randrw`).
    Random,
    /// Sequential offsets (`read`, `write`, `rw`) and everything without offsets.
    Sequential,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Random => "random",
            Access::Sequential => "sequential",
        }
    }
}

/// One test of a study: its headline value in each configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreInput {
    pub test: String,
    pub access: Access,
    /// True for throughput (MB/s, IOPS), false for latencies.
    pub higher_is_better: bool,
    /// One value per configuration, in configuration order; `None` where the configuration
    /// has no such test.
    pub values: Vec<Option<f64>>,
}

/// Scores of one configuration; every group score is relative to the best configuration in
/// that group (1.00).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConfigScore {
    /// Index of the configuration in the input order.
    pub config: usize,
    pub random: Option<f64>,
    pub sequential: Option<f64>,
    pub total: Option<f64>,
    /// 1 for the best total; configurations without a total come last.
    pub rank: usize,
}

/// The score of a study.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyScore {
    /// Per scored test (in input order, excluded tests left out): the test's name and each
    /// configuration's ratio to the best configuration for that test (best = 1).
    pub ratios: Vec<(String, Access, Vec<f64>)>,
    /// Configurations, best total first.
    pub ranked: Vec<ConfigScore>,
    /// Tests not scored because some configuration lacks them or has no positive value.
    pub excluded: Vec<String>,
}

/// Each value's ratio to the best of them (higher-is-better: `v / max`; otherwise
/// `min / v`), so the best is 1 and the others are below. `None` when a value is missing,
/// not finite or not positive.
pub fn ratio_to_best(values: &[Option<f64>], higher_is_better: bool) -> Option<Vec<f64>> {
    let v: Vec<f64> = values
        .iter()
        .map(|x| x.filter(|x| x.is_finite() && *x > 0.0))
        .collect::<Option<_>>()?;
    if v.is_empty() {
        return None;
    }
    Some(if higher_is_better {
        let best = v.iter().copied().fold(f64::MIN, f64::max);
        v.iter().map(|x| x / best).collect()
    } else {
        let best = v.iter().copied().fold(f64::MAX, f64::min);
        v.iter().map(|x| best / x).collect()
    })
}

/// The study score of `configs` configurations over `tests`.
///
/// For each test present with a positive value in every configuration, each configuration's
/// ratio to the best one ([`ratio_to_best`]). A configuration's group score is the geometric
/// mean of its ratios over the group's tests (random, sequential, or all for `total`), divided
/// by the highest such mean among the configurations, so the best configuration of every
/// group scores exactly 1.00. The geometric mean weighs every test equally whatever its
/// magnitude: a 4 KiB random test at 25 MB/s counts as much as a sequential one at 1000 MB/s.
/// Configurations are ranked by total (ties keep input order).
pub fn study_score(configs: usize, tests: &[ScoreInput]) -> StudyScore {
    let mut ratios = Vec::new();
    let mut excluded = Vec::new();
    for t in tests {
        match ratio_to_best(&t.values, t.higher_is_better) {
            Some(r) if r.len() == configs => ratios.push((t.test.clone(), t.access, r)),
            _ => excluded.push(t.test.clone()),
        }
    }
    let group = |pick: Option<Access>| -> Vec<Option<f64>> {
        let means: Vec<Option<f64>> = (0..configs)
            .map(|c| {
                let v: Vec<f64> = ratios
                    .iter()
                    .filter(|(_, a, _)| pick.is_none_or(|p| p == *a))
                    .map(|(_, _, r)| r[c])
                    .collect();
                geometric_mean(&v)
            })
            .collect();
        let best = means.iter().flatten().copied().fold(0.0, f64::max);
        means
            .into_iter()
            .map(|m| m.filter(|_| best > 0.0).map(|m| m / best))
            .collect()
    };
    let random = group(Some(Access::Random));
    let sequential = group(Some(Access::Sequential));
    let total = group(None);
    let mut ranked: Vec<ConfigScore> = (0..configs)
        .map(|c| ConfigScore {
            config: c,
            random: random[c],
            sequential: sequential[c],
            total: total[c],
            rank: 0,
        })
        .collect();
    ranked.sort_by(|a, b| match (a.total, b.total) {
        (Some(x), Some(y)) => y.total_cmp(&x).then(a.config.cmp(&b.config)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.config.cmp(&b.config),
    });
    for (i, s) in ranked.iter_mut().enumerate() {
        s.rank = i + 1;
    }
    StudyScore {
        ratios,
        ranked,
        excluded,
    }
}

/// The score as field report 002 computed it by hand: the sum of a group's MB/s in each
/// configuration divided by the highest such sum. Large values dominate it (a sequential
/// test at 1000 MB/s outweighs every 4 KiB test), which is why [`study_score`] uses the
/// geometric mean of ratios instead; this one is kept to reproduce hand-made tables.
/// Tests missing from any configuration are left out, as in [`study_score`].
pub fn sum_score(configs: usize, tests: &[ScoreInput], pick: Option<Access>) -> Vec<Option<f64>> {
    let sums: Vec<f64> = (0..configs)
        .map(|c| {
            tests
                .iter()
                .filter(|t| pick.is_none_or(|p| p == t.access))
                .filter(|t| t.values.len() == configs && t.values.iter().all(|v| v.is_some()))
                .filter_map(|t| t.values[c])
                .sum()
        })
        .collect();
    let best = sums.iter().copied().fold(0.0, f64::max);
    sums.into_iter()
        .map(|s| (best > 0.0).then_some(s / best))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn t_distribution_matches_tables() {
        // Critical values of the two-sided 95% test: p = 0.05 exactly.
        for (t, df) in [(12.706, 1.0), (4.303, 2.0), (2.262, 9.0), (2.042, 30.0)] {
            let p = student_t_p_two_sided(t, df);
            assert!(close(p, 0.05, 2e-4), "t={t} df={df}: p={p}");
        }
        assert!(close(student_t_p_two_sided(1.96, 1e6), 0.05, 1e-4));
        assert!(close(student_t_p_two_sided(0.0, 5.0), 1.0, 1e-12));
        // t = 1 with 1 df is the Cauchy distribution: P(|T| >= 1) = 1/2.
        assert!(close(student_t_p_two_sided(1.0, 1.0), 0.5, 1e-12));
        assert!(close(student_t_p_two_sided(-1.0, 1.0), 0.5, 1e-12));
        assert_eq!(student_t_p_two_sided(f64::INFINITY, 3.0), 0.0);
    }

    #[test]
    fn welch_against_hand_computation() {
        // a: mean 10, var 1; b: mean 13, var 4; n = 3 each.
        // se² = 1/3 + 4/3 = 5/3; t = 3 / sqrt(5/3) = 2.3238
        // df = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 2.7778 / (0.05556 + 0.88889) = 2.9412
        let w = welch(&[9.0, 10.0, 11.0], &[11.0, 13.0, 15.0]).unwrap();
        assert!(close(w.t, 2.32379, 1e-5), "{w:?}");
        assert!(close(w.df, 2.94118, 1e-5), "{w:?}");
        // Between the t tables' 0.10 (2.353 at df 3) and 0.20 levels: not significant.
        assert!(w.p > 0.05 && w.p < 0.2, "{w:?}");
        assert!(!w.significant());
        let w = welch(&[100.0, 101.0, 99.0], &[150.0, 151.0, 149.0]).unwrap();
        assert!(w.significant() && w.t > 0.0 && w.p < 1e-4, "{w:?}");
        assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
        assert!(welch(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
        let same = welch(&[5.0, 5.0], &[5.0, 5.0]).unwrap();
        assert_eq!(same.p, 1.0);
        let apart = welch(&[5.0, 5.0], &[6.0, 6.0]).unwrap();
        assert_eq!(apart.p, 0.0);
    }

    fn input(test: &str, access: Access, values: &[f64]) -> ScoreInput {
        ScoreInput {
            test: test.into(),
            access,
            higher_is_better: true,
            values: values.iter().map(|v| Some(*v)).collect(),
        }
    }

    /// Report 002's strip-size study (CrystalDiskMark 3, write-back cache; MB/s for strip
    /// sizes 16/32/64/128 KB). Its Seq tests are sequential, 512K, 4K and 4K QD32 random.
    fn report_002() -> Vec<ScoreInput> {
        use Access::*;
        vec![
            input("Seq Read", Sequential, &[1083.0, 1057.0, 1039.0, 947.1]),
            input("512K Read", Random, &[551.1, 692.8, 647.8, 571.5]),
            input("4K Read", Random, &[24.99, 25.59, 24.6, 25.13]),
            input("4K QD32 Read", Random, &[442.8, 452.1, 461.6, 438.7]),
            input("Seq Write", Sequential, &[463.5, 460.9, 477.8, 428.5]),
            input("512K Write", Random, &[113.9, 104.0, 89.83, 80.3]),
            input("4K Write", Random, &[74.41, 75.16, 73.61, 75.46]),
            input("4K QD32 Write", Random, &[98.86, 98.82, 96.26, 99.47]),
        ]
    }

    #[test]
    fn report_002_by_hand_is_a_sum_of_mb_s() {
        // The published scores: random 0.90/1.00/0.96/0.89, total 0.96/1.00/0.98/0.90.
        let t = report_002();
        let r = sum_score(4, &t, Some(Access::Random));
        let total = sum_score(4, &t, None);
        let round = |v: &[Option<f64>]| -> Vec<f64> {
            v.iter()
                .map(|x| (x.unwrap() * 100.0).round() / 100.0)
                .collect()
        };
        assert_eq!(round(&r), [0.90, 1.00, 0.96, 0.89]);
        assert_eq!(round(&total), [0.96, 1.00, 0.98, 0.90]);
    }

    #[test]
    fn report_002_geometric_score() {
        // Computed by hand from the table above: random ratios to the best per test, e.g.
        // 16 KB: 551.1/692.8, 24.99/25.59, 442.8/461.6, 113.9/113.9, 74.41/75.46,
        // 98.86/99.47 -> geometric mean 0.9490; 32 KB 0.9798; 64 KB 0.9353; 128 KB 0.9032;
        // divided by the best (0.9798): 0.9685, 1.0000, 0.9545, 0.9218. Total (all eight
        // tests): 0.9799, 1.0000, 0.9680, 0.9195. The ranking differs from the report's sum
        // (16 KB and 64 KB swap places): its 512K Read dominates the sum.
        let s = study_score(4, &report_002());
        let by_config = |c: usize| s.ranked.iter().find(|x| x.config == c).copied().unwrap();
        let random: Vec<f64> = (0..4).map(|c| by_config(c).random.unwrap()).collect();
        for (got, want) in random.iter().zip([0.9685, 1.0, 0.9545, 0.9218]) {
            assert!(close(*got, want, 1e-4), "{random:?}");
        }
        let total: Vec<f64> = (0..4).map(|c| by_config(c).total.unwrap()).collect();
        for (got, want) in total.iter().zip([0.9799, 1.0, 0.9680, 0.9195]) {
            assert!(close(*got, want, 1e-4), "{total:?}");
        }
        // 32 KB first, as in the report; 128 KB last.
        let order: Vec<usize> = s.ranked.iter().map(|x| x.config).collect();
        assert_eq!(order, [1, 0, 2, 3]);
        assert_eq!(s.ranked[0].rank, 1);
        assert!(s.excluded.is_empty());
    }

    #[test]
    fn small_study_by_hand() {
        // Config A is best at the random test, B at both sequential ones.
        // Random ratios: A 1, B 0.5. Sequential: A 0.8 and 0.5 (gm sqrt(0.4) = 0.63246), B 1.
        // Total gm: A (1*0.8*0.5)^(1/3) = 0.73681, B (0.5)^(1/3) = 0.79370 -> A 0.92832, B 1.
        let tests = [
            input("RND4K Read", Access::Random, &[100.0, 50.0]),
            input("SEQ1M Read", Access::Sequential, &[800.0, 1000.0]),
            input("SEQ1M Write", Access::Sequential, &[200.0, 400.0]),
            ScoreInput {
                test: "only in A".into(),
                access: Access::Random,
                higher_is_better: true,
                values: vec![Some(1.0), None],
            },
            ScoreInput {
                test: "latency".into(),
                access: Access::Random,
                higher_is_better: false,
                values: vec![Some(10.0), Some(20.0)],
            },
        ];
        let s = study_score(2, &tests[..4]);
        assert_eq!(s.excluded, ["only in A"]);
        let a = s.ranked.iter().find(|x| x.config == 0).unwrap();
        let b = s.ranked.iter().find(|x| x.config == 1).unwrap();
        assert_eq!((a.random, b.random), (Some(1.0), Some(0.5)));
        assert!(close(a.sequential.unwrap(), 0.63246, 1e-5));
        assert_eq!(b.sequential, Some(1.0));
        assert!(close(a.total.unwrap(), 0.92832, 1e-5));
        assert_eq!(b.total, Some(1.0));
        assert_eq!((b.rank, a.rank), (1, 2));
        // Lower is better: 10 µs is the best.
        assert_eq!(
            ratio_to_best(&tests[4].values, false).unwrap(),
            vec![1.0, 0.5]
        );
        assert!(ratio_to_best(&[Some(1.0), Some(0.0)], true).is_none());
        assert_eq!(geometric_mean(&[2.0, 8.0]), Some(4.0));
        assert_eq!(geometric_mean(&[]), None);
    }
}
