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
    let why: Vec<String> = rows.iter().filter_map(explain).collect();
    if !why.is_empty() {
        out.push('\n');
        for w in why {
            out.push_str(&w);
            out.push('\n');
        }
    }
    out
}

/// The median of an optional figure over the passes that have it.
fn med_opt(v: &[ToolSample], pick: fn(&ToolSample) -> Option<f64>) -> Option<f64> {
    let xs: Vec<f64> = v
        .iter()
        .filter_map(pick)
        .filter(|x| x.is_finite())
        .collect();
    (!xs.is_empty()).then(|| median(&xs))
}

/// One line for a test whose MB/s ratio stands out (its interval leaves 1.0 by more than
/// 10%, or a single pair 10% off): which of what iolab measured on both sides differs most
/// (device requests or merges per I/O, CPU per I/O, the share of the region cached before
/// the pass), or that none of them does.
pub fn explain(row: &CrossRow) -> Option<String> {
    let r = ratio(row, mb_s)?;
    let beyond = |x: f64, f: f64| x > f || x < 1.0 / f;
    // Clearly off (the interval leaves 1.0 by 10%), or a large ratio the pairs are too few
    // or too noisy to pin down (said so).
    let (off, unsure) = match r.ci95 {
        Some((lo, hi)) if lo > 1.1 || hi < 1.0 / 1.1 => (true, false),
        _ => (beyond(r.value, 1.5), true),
    };
    if !off {
        return None;
    }
    // (how different, the sentence), the most different first.
    let mut found: Vec<(f64, String)> = Vec::new();
    let both = |pick: fn(&ToolSample) -> Option<f64>| {
        Some((med_opt(&row.iolab, pick)?, med_opt(&row.fio, pick)?))
    };
    let spread = |a: f64, b: f64, floor: f64| (a.max(floor) / b.max(floor)).ln().abs();
    if let Some((a, b)) = both(|s| s.requests_per_io) {
        let more = if b > a { "fio's" } else { "iolab's" };
        found.push((
            spread(a, b, 0.01),
            format!(
                "{more} I/Os reached the device as more requests (per I/O: iolab {a:.2}, fio \
                 {b:.2}; smaller requests: buffer alignment or the queue's size limits split \
                 them)"
            ),
        ));
    }
    if let Some((a, b)) = both(|s| s.merges_per_io) {
        let more = if b > a { "fio's" } else { "iolab's" };
        found.push((
            spread(a, b, 0.25),
            format!(
                "the queue merged more of {more} requests (merges per I/O: iolab {a:.2}, fio \
                 {b:.2})"
            ),
        ));
    }
    if let Some((a, b)) = both(|s| s.cpu_us_per_io) {
        let more = if b > a { "fio" } else { "iolab" };
        found.push((
            spread(a, b, 0.5),
            format!("{more} spent more CPU per I/O (iolab {a:.1} µs, fio {b:.1} µs)"),
        ));
    }
    if let Some((a, b)) = both(|s| s.cached_before) {
        let more = if b > a { "fio's" } else { "iolab's" };
        // A tenth of the region cached counts as much as a 25% spread.
        found.push((
            (a - b).abs() * 2.2,
            format!(
                "more of the region was in the page cache before {more} passes (iolab \
                 {:.0}%, fio {:.0}%)",
                a * 100.0,
                b * 100.0
            ),
        ));
    }
    found.sort_by(|x, y| y.0.total_cmp(&x.0));
    let head = format!(
        "{} {:.2}x{}:",
        row.test,
        r.value,
        if unsure {
            " (its interval includes 1.0)"
        } else {
            ""
        }
    );
    Some(match found.first() {
        Some((d, why)) if *d > 0.22 => format!("{head} {why}"),
        _ if found.is_empty() => format!(
            "{head} not explained: neither tool's device requests, CPU or cached pages could \
             be measured here"
        ),
        _ => format!(
            "{head} not explained by device requests, merges, CPU per I/O or cached pages \
             (alike on both sides)"
        ),
    })
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
            ..ToolSample::default()
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
    fn a_ratio_that_stands_out_is_explained_by_what_differs_most() {
        let with = |mb: f64, req: f64, cpu: f64| ToolSample {
            requests_per_io: Some(req),
            merges_per_io: Some(0.0),
            cpu_us_per_io: Some(cpu),
            cached_before: Some(0.0),
            ..s(mb)
        };
        // SEQ1M Q1T1 Read: iolab 2.3 times fio, fio's 1 MiB I/Os as 8 requests, iolab's 2.
        let r = CrossRow {
            test: "SEQ1M Q1T1 Read".into(),
            iolab: vec![with(1590.0, 2.0, 20.0), with(1580.0, 2.0, 21.0)],
            fio: vec![with(690.0, 8.0, 22.0), with(687.0, 8.0, 21.0)],
        };
        let line = explain(&r).unwrap();
        assert!(
            line.starts_with(
                "SEQ1M Q1T1 Read 2.30x: fio's I/Os reached the device as more requests"
            ),
            "{line}"
        );
        assert!(text("h", &[r]).contains(&line));
        // Alike on both sides: said to be unexplained.
        let r = CrossRow {
            test: "t".into(),
            iolab: vec![with(200.0, 1.0, 5.0), with(200.0, 1.0, 5.0)],
            fio: vec![with(100.0, 1.0, 5.0), with(101.0, 1.0, 5.0)],
        };
        assert!(explain(&r).unwrap().contains("not explained by"));
        // Equal rates: nothing to explain; no figures measured: said so.
        assert_eq!(explain(&row(&[100.0, 101.0], &[100.0, 100.5])), None);
        assert!(explain(&row(&[200.0, 201.0], &[100.0, 100.0]))
            .unwrap()
            .contains("could be measured"));
    }

    #[test]
    fn zero_rates_give_no_ratio() {
        let r = row(&[0.0], &[100.0]);
        assert_eq!(ratio(&r, mb_s), None);
        assert_eq!(json(&[r])[0]["ratio_mb_s"], serde_json::Value::Null);
    }
}
