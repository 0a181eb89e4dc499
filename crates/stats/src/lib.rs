//! Statistics over repeated passes: median, mean, spread, 95% confidence intervals, and the
//! headline summary of a test.
//!
//! Confidence intervals use Student's t on the mean of the passes (the passes of a test are
//! independent repeats of the same job); with one pass the interval is the value itself.

pub mod noise;
pub mod score;
pub mod series;
pub mod warnings;

use iolab_measure::{MetricSummary, PassRecord, TestSummary};

/// How a test's headline value is chosen from its passes (the type the summary stores).
pub use iolab_measure::Score;

pub const CI_METHOD: &str = "95% CI, Student t on the mean of passes";

/// How the interval across the runs of `--repeat` is computed (with [`metric`] over each
/// run's headline value of a test).
pub const RUNS_CI_METHOD: &str = "95% CI, Student t on the mean of the runs' headline values";

/// Median of a slice (NaNs excluded); 0 when empty.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The 97.5% quantile of Student's t distribution with `df` degrees of freedom: the factor
/// of a two-sided 95% confidence interval (statrs' inverse CDF; infinite for `df` 0).
pub fn t_975(df: usize) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    match StudentsT::new(0.0, 1.0, df as f64) {
        Ok(t) if df > 0 => t.inverse_cdf(0.975),
        _ => f64::INFINITY,
    }
}

/// Summary statistics of one metric.
pub fn metric(values: &[f64]) -> MetricSummary {
    let n = values.len();
    if n == 0 {
        return MetricSummary::default();
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let stddev = if n > 1 {
        (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let half = if n > 1 {
        t_975(n - 1) * stddev / (n as f64).sqrt()
    } else {
        0.0
    };
    MetricSummary {
        n: n as u32,
        median: median(values),
        mean,
        min,
        max,
        stddev,
        cv: if mean != 0.0 { stddev / mean } else { 0.0 },
        ci_low: mean - half,
        ci_high: mean + half,
    }
}

/// Headline summary of a test over its passes.
pub fn summarize(passes: &[PassRecord], score: Score) -> TestSummary {
    let col = |f: fn(&PassRecord) -> f64| passes.iter().map(f).collect::<Vec<f64>>();
    let stats_mb_s = metric(&col(|p| p.mb_s));
    let stats_iops = metric(&col(|p| p.iops));
    let stats_lat_mean_us = metric(&col(|p| p.lat_us.mean));
    let stats_lat_p99_us = metric(&col(|p| p.lat_us.p99));
    let (mb_s, iops, lat_mean_us, lat_p99_us) = match score {
        Score::Median => (
            stats_mb_s.median,
            stats_iops.median,
            stats_lat_mean_us.median,
            stats_lat_p99_us.median,
        ),
        Score::Best => match passes.iter().max_by(|a, b| {
            a.mb_s
                .partial_cmp(&b.mb_s)
                .unwrap_or(std::cmp::Ordering::Equal)
        }) {
            Some(best) => (best.mb_s, best.iops, best.lat_us.mean, best.lat_us.p99),
            None => (0.0, 0.0, 0.0, 0.0),
        },
    };
    TestSummary {
        passes: passes.len() as u32,
        mb_s,
        iops,
        lat_mean_us,
        lat_p99_us,
        score: Some(score),
        stats_mb_s,
        stats_iops,
        stats_lat_mean_us,
        stats_lat_p99_us,
        ci_method: CI_METHOD.to_string(),
        converged: None,
    }
}

/// Relative half-width of the confidence interval, in percent of the mean (0 if unknown).
pub fn ci_pct(m: &MetricSummary) -> f64 {
    if m.mean == 0.0 || m.n < 2 {
        0.0
    } else {
        100.0 * (m.ci_high - m.ci_low) / 2.0 / m.mean.abs()
    }
}

/// Modified z-score threshold above which a pass is an outlier (Iglewicz and Hoaglin).
pub const OUTLIER_Z: f64 = 3.5;

/// Smallest relative distance from the median for a pass to count as an outlier, so that
/// three nearly equal passes (tiny MAD) do not flag a 2% difference.
pub const OUTLIER_MIN_REL: f64 = 0.05;

/// Indices of outliers: modified z-score 0.6745 * |x - median| / MAD above 3.5 and at least
/// 5% away from the median. Needs at least 3 values; with a MAD of zero nothing is flagged.
pub fn outliers(values: &[f64]) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    let med = median(values);
    let dev: Vec<f64> = values.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev);
    if mad == 0.0 {
        return Vec::new();
    }
    values
        .iter()
        .enumerate()
        .filter(|(_, x)| {
            0.6745 * (*x - med).abs() / mad > OUTLIER_Z
                && (*x - med).abs() > OUTLIER_MIN_REL * med.abs()
        })
        .map(|(i, _)| i)
        .collect()
}

/// A first pass is "slow" (still warming a cache or waking a device) when its throughput is
/// the lowest of all passes and below 80% of the median of the passes after it; needs at
/// least 3 passes. A first pass that some later pass undercuts is spread, not a warm-up.
pub fn slow_first(values: &[f64]) -> bool {
    values.len() >= 3
        && values[1..].iter().all(|&v| values[0] < v)
        && values[0] < 0.8 * median(&values[1..])
}

/// The rule of adaptive passes (`--until-stable`): at least 3 passes, and the 95% CI
/// half-width of the mean within `pct` percent of the mean (the `±x%` the tables print).
pub fn is_stable(values: &[f64], pct: f64) -> bool {
    if values.len() < 3 {
        return false;
    }
    let m = metric(values);
    m.mean != 0.0 && ci_pct(&m) <= pct
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_printed_tables() {
        // Student's t table, two-sided 95%: df 1, 2, 4, 9, 30, 60, 120.
        for (df, t) in [
            (1, 12.706),
            (2, 4.303),
            (4, 2.776),
            (9, 2.262),
            (30, 2.042),
            (60, 2.000),
            (120, 1.980),
        ] {
            assert!((t_975(df) - t).abs() < 0.0005, "df {df}: {}", t_975(df));
        }
        assert!((t_975(100_000) - 1.960).abs() < 0.0005);
        assert!(t_975(0).is_infinite());
    }

    #[test]
    fn outliers_and_slow_first() {
        // median 100, MAD 1: 0.6745 * 20 / 1 = 13.5 > 3.5.
        assert_eq!(outliers(&[100.0, 101.0, 99.0, 120.0, 100.0]), vec![3]);
        assert!(outliers(&[100.0, 100.0, 100.0, 250.0]).is_empty());
        assert!(outliers(&[1.0, 2.0]).is_empty());
        // z = 0.6745 * 3 / 0.1 = 20, but only 3% from the median.
        assert!(outliers(&[100.0, 100.1, 103.0]).is_empty());
        assert!(slow_first(&[70.0, 100.0, 101.0]));
        assert!(!slow_first(&[90.0, 100.0, 101.0]));
        // Below the others' median, but a later pass was slower still: not a warm-up.
        assert!(!slow_first(&[100.0, 70.0, 140.0, 140.0]));
    }

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn metric_against_hand_computation() {
        // mean 20, sample sd 10, n=3: half = t(0.975, 2) * 10 / sqrt(3), t = 4.3026527...
        let m = metric(&[10.0, 20.0, 30.0]);
        assert_eq!(m.median, 20.0);
        assert_eq!(m.mean, 20.0);
        assert!((m.stddev - 10.0).abs() < 1e-12);
        assert!((m.cv - 0.5).abs() < 1e-12);
        assert!((m.ci_high - 20.0 - 4.302_652_73 * 10.0 / 3f64.sqrt()).abs() < 1e-6);
        assert!((ci_pct(&m) - 124.2069).abs() < 1e-3);
        let one = metric(&[5.0]);
        assert!(is_stable(&[100.0, 101.0, 99.0, 100.0], 3.0));
        assert!(!is_stable(&[100.0, 130.0, 70.0], 3.0));
        assert!(!is_stable(&[100.0, 100.0], 3.0));
        assert_eq!((one.ci_low, one.ci_high, one.stddev), (5.0, 5.0, 0.0));
    }
}
