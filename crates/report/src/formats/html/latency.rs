//! Latency figures: percentile curves and histograms of a row's directions, all passes
//! merged.

use super::*;

pub(super) fn merged(t: &TestRecord, pick: PickDir) -> LatencyHistogram {
    let mut hist = LatencyHistogram::new();
    for d in t.passes.iter().filter_map(pick) {
        hist.merge(&d.histogram);
    }
    hist
}

/// Points of a percentile curve: x in nines from 0 (the minimum) to what the I/O count
/// supports, at most 99.999%.
pub(super) fn curve(hist: &LatencyHistogram) -> Vec<(f64, f64)> {
    let n = hist.count();
    if n == 0 {
        return Vec::new();
    }
    let top = (n as f64).log10().clamp(0.5, 5.0);
    let steps = (top / 0.05).ceil() as usize;
    (0..=steps)
        .map(|i| {
            let x = (i as f64 * 0.05).min(top);
            let q = if i == 0 { 0.0 } else { 1.0 - 10f64.powf(-x) };
            (x, hist.quantile_ns(q) as f64 / 1000.0)
        })
        .collect()
}

/// Every direction of every test in `row` with I/Os: its name in the chart, its colour and
/// its latencies, all passes merged.
pub(super) fn row_latencies(
    tests: &[&TestRecord],
    row: &str,
    kinds: &[String],
) -> Vec<(String, plotters::style::RGBColor, LatencyHistogram)> {
    let mut out = Vec::new();
    for (ki, k) in kinds.iter().enumerate() {
        let Some(t) = set::test_at(tests, row, k) else {
            continue;
        };
        let base = if k.is_empty() {
            t.name.clone()
        } else {
            k.clone()
        };
        let picks: [(&str, PickDir); 3] = [
            ("read", |p| p.read.as_ref()),
            ("write", |p| p.write.as_ref()),
            ("trim", |p| p.trim.as_ref()),
        ];
        let mixed = t.job.rw.is_mixed();
        for (di, (dname, pick)) in picks.into_iter().enumerate() {
            let hist = merged(t, pick);
            if hist.is_empty() {
                continue;
            }
            let name = if mixed {
                format!("{base} {dname}")
            } else {
                base.clone()
            };
            // A direction has one colour everywhere; a mixed test's read and write are
            // lighter shades of it, so they stay apart from pure tests.
            let color = if mixed {
                charts::shade(if di == 0 { charts::READ } else { charts::WRITE }, 2)
            } else {
                test_color(t, ki + out.len())
            };
            out.push((name, color, hist));
        }
    }
    out
}

/// The kinds `row` has a test of.
pub(super) fn kinds_in<'k>(tests: &[&TestRecord], row: &str, kinds: &'k [String]) -> Vec<&'k str> {
    kinds
        .iter()
        .filter(|k| set::test_at(tests, row, k).is_some())
        .map(String::as_str)
        .collect()
}

pub(super) fn latency_curves(
    tests: &[&TestRecord],
    rows: &[String],
    kinds: &[String],
    h: &mut String,
) {
    let mut figs = Vec::new();
    let mut hists = Vec::new();
    for row in rows {
        let lat = row_latencies(tests, row, kinds);
        let series: Vec<Line> = lat
            .iter()
            .map(|(name, color, hist)| Line {
                name: name.clone(),
                color: *color,
                points: curve(hist),
            })
            .filter(|l| !l.points.is_empty())
            .collect();
        if series.is_empty() {
            continue;
        }
        let title = chart_title(row, &kinds_in(tests, row, kinds));
        let svg = charts::lines(
            &format!("{title}: latency percentiles"),
            &series,
            "percentile (%)",
            "latency (µs, log scale)",
            Scale::Log,
            XLabels::Nines,
        );
        figs.push(format!("<figure data-chart=\"latency\">{svg}</figure>"));
        hists.push(latency_histogram(&title, &lat));
    }
    figure_grid(
        h,
        "<h3>Latency percentiles</h3><p class=\"muted\">All passes of a test together; x is \
         the percentile on a scale of nines (90, 99, 99.9...), y the latency on a log scale. \
         A curve ends where the I/O count stops supporting finer percentiles.</p>",
        &figs,
    );
    if !hists.is_empty() {
        // The curves say the same at a glance: the histograms wait behind a click.
        h.push_str(
            "<details data-panel=\"latency-histograms\"><summary>Latency histograms</summary>",
        );
        figure_grid(
            h,
            "<p class=\"muted\">The share of each direction's I/Os (all passes) whose latency \
             falls in each bucket; buckets end at 1, 2 and 5 times a power of ten \
             microseconds, the label is the bucket's upper end.</p>",
            &hists,
        );
        h.push_str("</details>\n");
    }
}

/// The fraction of `hist`'s values at or below `ns` (from its quantiles: the histogram's
/// own resolution, about 0.1%).
pub(super) fn fraction_at_or_below(hist: &LatencyHistogram, ns: u64) -> f64 {
    if hist.quantile_ns(0.0) > ns {
        return 0.0;
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..40 {
        let mid = (lo + hi) / 2.0;
        if hist.quantile_ns(mid) <= ns {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Bucket upper ends (µs) covering `lo..=hi` at 1, 2 and 5 times powers of ten; decades
/// only when that would make more than 16 buckets.
pub(super) fn bucket_edges(lo_us: f64, hi_us: f64) -> Vec<f64> {
    let lo = lo_us.max(0.1);
    let hi = hi_us.max(lo);
    let mut steps = vec![1.0, 2.0, 5.0];
    loop {
        let mut edges = Vec::new();
        let mut p = 10f64.powf(lo.log10().floor());
        'outer: loop {
            for m in &steps {
                let e = m * p;
                if e >= lo {
                    edges.push(e);
                }
                if e >= hi {
                    break 'outer;
                }
            }
            p *= 10.0;
        }
        if edges.len() <= 16 || steps.len() == 1 {
            return edges;
        }
        steps = vec![1.0];
    }
}

/// A figure with the latency histogram of a row's directions, or nothing to show.
pub(super) fn latency_histogram(
    title: &str,
    lat: &[(String, plotters::style::RGBColor, LatencyHistogram)],
) -> String {
    let lo = lat
        .iter()
        .map(|(_, _, h)| h.quantile_ns(0.0) as f64 / 1000.0)
        .fold(f64::INFINITY, f64::min);
    let hi = lat
        .iter()
        .map(|(_, _, h)| h.quantile_ns(1.0) as f64 / 1000.0)
        .fold(0.0, f64::max);
    let edges = bucket_edges(lo, hi);
    let series: Vec<BarSeries> = lat
        .iter()
        .map(|(name, color, hist)| {
            let mut below = 0.0;
            let values = edges
                .iter()
                .map(|e| {
                    let at = fraction_at_or_below(hist, (e * 1000.0) as u64);
                    let share = (at - below).max(0.0) * 100.0;
                    below = at;
                    Some(share)
                })
                .collect();
            BarSeries {
                name: name.clone(),
                color: *color,
                values,
                ci: vec![None; edges.len()],
            }
        })
        .collect();
    let clusters: Vec<String> = edges.iter().map(|e| charts::axis_num(*e)).collect();
    let svg = charts::vbars(
        &format!("{title}: latency histogram"),
        &clusters,
        &series,
        "share of I/Os (%)",
    );
    format!(
        "<figure data-chart=\"latency-histogram\">{svg}<figcaption>x: bucket upper end in \
         µs</figcaption></figure>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_cover_the_latencies_and_shares_add_up() {
        assert_eq!(
            bucket_edges(130.0, 1800.0),
            vec![200.0, 500.0, 1000.0, 2000.0]
        );
        assert_eq!(bucket_edges(100.0, 100.0), vec![100.0]);
        // Eight decades would be 22 buckets: decades only.
        assert_eq!(bucket_edges(1.0, 5e7).len(), 9);
        let mut h = LatencyHistogram::new();
        for us in [150u64, 160, 170, 900, 950, 1500] {
            h.record(us * 1000);
        }
        let at = |us: f64| fraction_at_or_below(&h, (us * 1000.0) as u64);
        assert_eq!(at(100.0), 0.0);
        assert!((at(200.0) - 0.5).abs() < 0.01, "{}", at(200.0));
        assert!((at(1000.0) - 5.0 / 6.0).abs() < 0.01);
        assert!(at(2000.0) > 0.999);
        let title = latency_histogram("t", &[("Read".into(), charts::READ, h)]);
        assert!(title.contains("t: latency histogram"));
    }
}
