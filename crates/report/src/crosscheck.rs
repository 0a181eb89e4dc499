//! `iolab crosscheck`'s table and JSON: medians of both tools, and the iolab/fio ratio as
//! the geometric mean of the alternated pairs' ratios with its 95% interval over the pairs
//! (so a ratio is shown with what it rests on, and a difference only where the interval
//! leaves 1.0).

use iolab_measure::crosscheck::{CrossRow, ToolSample};
use iolab_stats::median;

/// The ratio iolab/fio of one metric over the pairs: geometric mean and, from two pairs
/// on, the 95% Student t interval of the mean log ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub value: f64,
    pub ci95: Option<(f64, f64)>,
    pub pairs: usize,
}

/// The ratio of `pick` over the pairs whose both values are positive; None without one.
pub fn ratio(row: &CrossRow, pick: fn(&ToolSample) -> f64) -> Option<Ratio> {
    let logs: Vec<f64> = row
        .iolab
        .iter()
        .zip(&row.fio)
        .map(|(a, b)| (pick(a), pick(b)))
        .filter(|(a, b)| *a > 0.0 && *b > 0.0 && a.is_finite() && b.is_finite())
        .map(|(a, b)| (a / b).ln())
        .collect();
    if logs.is_empty() {
        return None;
    }
    // The Student t interval of the mean log ratio, as every other interval iolab shows.
    let m = iolab_stats::metric(&logs);
    Some(Ratio {
        value: m.mean.exp(),
        ci95: (m.n >= 2).then(|| (m.ci_low.exp(), m.ci_high.exp())),
        pairs: logs.len(),
    })
}

fn med(v: &[ToolSample], pick: fn(&ToolSample) -> f64) -> f64 {
    median(&v.iter().map(pick).collect::<Vec<_>>())
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn ratio_text(r: Option<Ratio>) -> String {
    match r {
        None => "–".into(),
        Some(Ratio {
            value,
            ci95: Some((lo, hi)),
            ..
        }) => format!("{value:.2} [{lo:.2}, {hi:.2}]"),
        Some(Ratio { value, .. }) => format!("{value:.2} (1 pair)"),
    }
}

fn mb_s(s: &ToolSample) -> f64 {
    s.mb_s
}

fn iops(s: &ToolSample) -> f64 {
    s.iops
}

fn lat(s: &ToolSample) -> f64 {
    s.lat_mean_us
}

/// The terminal table under `heading`.
pub fn text(heading: &str, rows: &[CrossRow]) -> String {
    let mut out = format!(
        "{heading}\nMB/s = 10^6 bytes/s; medians of the passes; ratio = iolab / fio MB/s, the \
         geometric mean of the alternated pairs [95% interval]\n\n"
    );
    out.push_str(&format!(
        "{:<22} {:>10} {:>9} {:>18} {:>10} {:>9} {:>8} {:>8}\n",
        "Test", "iolab MB/s", "fio MB/s", "ratio", "iolab IOPS", "fio IOPS", "iolab µs", "fio µs"
    ));
    for r in rows {
        out.push_str(&format!(
            "{:<22} {:>10} {:>9} {:>18} {:>10} {:>9} {:>8} {:>8}\n",
            r.test,
            num(med(&r.iolab, mb_s)),
            num(med(&r.fio, mb_s)),
            ratio_text(ratio(r, mb_s)),
            num(med(&r.iolab, iops)),
            num(med(&r.fio, iops)),
            num(med(&r.iolab, lat)),
            num(med(&r.fio, lat)),
        ));
    }
    out
}

fn ratio_json(r: Option<Ratio>) -> (serde_json::Value, serde_json::Value) {
    match r {
        Some(r) => (
            serde_json::json!(r.value),
            match r.ci95 {
                Some((lo, hi)) => serde_json::json!([lo, hi]),
                None => serde_json::Value::Null,
            },
        ),
        None => (serde_json::Value::Null, serde_json::Value::Null),
    }
}

/// The JSON document: one object per test with both tools' medians, every pass, and the
/// ratios with their intervals (docs/fio.md).
pub fn json(rows: &[CrossRow]) -> serde_json::Value {
    let doc = rows
        .iter()
        .map(|r| {
            let (rm, rm_ci) = ratio_json(ratio(r, mb_s));
            let (ri, ri_ci) = ratio_json(ratio(r, iops));
            let tool = |v: &[ToolSample]| {
                serde_json::json!({
                    "mb_s": med(v, mb_s),
                    "iops": med(v, iops),
                    "lat_mean_us": med(v, lat),
                    "passes": v,
                })
            };
            serde_json::json!({
                "test": r.test,
                "iolab": tool(&r.iolab),
                "fio": tool(&r.fio),
                "pairs": r.iolab.len().min(r.fio.len()),
                "ratio_mb_s": rm,
                "ratio_mb_s_ci95": rm_ci,
                "ratio_iops": ri,
                "ratio_iops_ci95": ri_ci,
            })
        })
        .collect();
    serde_json::Value::Array(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iolab_stats::t_975;

    fn s(mb_s: f64) -> ToolSample {
        ToolSample {
            mb_s,
            iops: mb_s * 10.0,
            lat_mean_us: 1.0,
        }
    }

    fn row(a: &[f64], b: &[f64]) -> CrossRow {
        CrossRow {
            test: "t".into(),
            iolab: a.iter().map(|x| s(*x)).collect(),
            fio: b.iter().map(|x| s(*x)).collect(),
        }
    }

    #[test]
    fn identical_pairs_give_a_ratio_of_one_with_no_width() {
        let r = ratio(&row(&[100.0, 200.0, 300.0], &[100.0, 200.0, 300.0]), mb_s).unwrap();
        assert_eq!(r.value, 1.0);
        assert_eq!(r.ci95, Some((1.0, 1.0)));
        assert_eq!(r.pairs, 3);
    }

    #[test]
    fn the_interval_is_over_the_pairs_log_ratios() {
        // Ratios 2 and 8: geometric mean 4; log ratios ln2, ln8, mean ln4, sd ln2·√2,
        // half width t(1)·sd/√2 = 12.706·ln 2.
        let r = ratio(&row(&[2.0, 8.0], &[1.0, 1.0]), mb_s).unwrap();
        assert!((r.value - 4.0).abs() < 1e-12);
        let (lo, hi) = r.ci95.unwrap();
        let half = t_975(1) * std::f64::consts::LN_2;
        assert!((lo.ln() - (4f64.ln() - half)).abs() < 1e-9);
        assert!((hi.ln() - (4f64.ln() + half)).abs() < 1e-9);
    }

    #[test]
    fn one_pair_has_no_interval_and_says_so() {
        let r = row(&[150.0], &[100.0]);
        assert_eq!(ratio(&r, mb_s).unwrap().ci95, None);
        assert!(text("h", &[r]).contains("1.50 (1 pair)"));
    }

    #[test]
    fn zero_rates_give_no_ratio() {
        let r = row(&[0.0], &[100.0]);
        assert_eq!(ratio(&r, mb_s), None);
        assert_eq!(json(&[r])[0]["ratio_mb_s"], serde_json::Value::Null);
    }
}
