//! The HTML report's chart of a test's rate within it: MB/s of each stored interval (100 ms)
//! of its measured passes one after another, the passes' boundaries, and, where RATE_CLIFF
//! found one, the cliff marked: a dashed line where the rate dropped (after how many bytes
//! and seconds) and the median rates before and after it. One self-contained `<svg>`
//! element (no script, no external reference) that scales to its container.

use std::fmt::Write as _;

use iolab_measure::{TestRecord, MB};
use iolab_stats::series::{test_cliff, test_samples};

const W: f64 = 720.0;
const H: f64 = 220.0;
/// Plot area: left, right, top, bottom edges.
const L: f64 = 56.0;
const R: f64 = 708.0;
const T: f64 = 28.0;
const B: f64 = 188.0;
/// Most points drawn: longer series are averaged in groups of intervals.
const MAX_POINTS: usize = 650;

fn text_escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            c if c.is_control() => " ".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// A round axis end at or above `v`: 1, 2 or 5 times a power of ten.
fn axis_end(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|k| k * p)
        .find(|x| *x >= v)
        .unwrap_or(10.0 * p)
}

/// The chart of `t`'s series with its cliff marked; `None` when it has fewer than two
/// intervals (a workload that stores no series, or a pass too short to show one).
pub fn series_chart(t: &TestRecord) -> Option<String> {
    let samples = test_samples(t);
    if samples.len() < 2 {
        return None;
    }
    // (start s, length s, MB/s) of each drawn point, and where each pass begins.
    let per = samples.len().div_ceil(MAX_POINTS);
    let mut points: Vec<(f64, f64, f64)> = Vec::new();
    let mut starts: Vec<f64> = Vec::new();
    let mut at = 0.0;
    let mut last_pass = None;
    for chunk in samples.chunks(per) {
        if last_pass != Some(chunk[0].pass) {
            starts.push(at);
            last_pass = Some(chunk[0].pass);
        }
        let secs: f64 = chunk.iter().map(|s| s.seconds).sum();
        let bytes: u64 = chunk.iter().map(|s| s.bytes).sum();
        points.push((at, secs, bytes as f64 / MB / secs.max(1e-9)));
        at += secs;
    }
    let total_s = at.max(1e-9);
    let cliff = test_cliff(t);
    let top = points
        .iter()
        .map(|p| p.2)
        .chain(cliff.iter().map(|c| c.before_mb_s))
        .fold(0.0, f64::max);
    let y_max = axis_end(top * 1.05);
    let x = |s: f64| L + (R - L) * s / total_s;
    let y = |v: f64| B - (B - T) * (v / y_max).clamp(0.0, 1.0);

    let name = text_escape(&t.name);
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg class=\"chart series-chart\" role=\"img\" viewBox=\"0 0 {W} {H}\" \
         xmlns=\"http://www.w3.org/2000/svg\" aria-label=\"{name}: MB/s within the test\">\
         <rect width=\"{W}\" height=\"{H}\" fill=\"#fff\"/>\
         <text x=\"{L}\" y=\"18\" font-family=\"sans-serif\" font-size=\"14\">{name}: MB/s \
         per {} ms, passes in a row</text>",
        samples_interval_ms(t) * per as u32
    );
    // Axes, the y axis's end and middle, the x axis's length.
    let _ = write!(
        svg,
        "<g stroke=\"#999\" stroke-width=\"1\"><line x1=\"{L}\" y1=\"{B}\" x2=\"{R}\" y2=\"{B}\"/>\
         <line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{B}\"/></g>\
         <g font-family=\"sans-serif\" font-size=\"12\" fill=\"#333\">\
         <text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\">{ymax}</text>\
         <text x=\"{lx}\" y=\"{my}\" text-anchor=\"end\">{ymid}</text>\
         <text x=\"{lx}\" y=\"{by}\" text-anchor=\"end\">0</text>\
         <text x=\"{R}\" y=\"{sx}\" text-anchor=\"end\">{secs:.1} s</text></g>",
        lx = L - 6.0,
        ty = T + 4.0,
        my = (T + B) / 2.0 + 4.0,
        by = B + 4.0,
        sx = B + 18.0,
        ymax = crate::charts::axis_num(y_max),
        ymid = crate::charts::axis_num(y_max / 2.0),
        secs = total_s,
    );
    // Where each pass after the first begins.
    for s in starts.iter().skip(1) {
        let _ = write!(
            svg,
            "<line class=\"pass\" x1=\"{0:.1}\" y1=\"{T}\" x2=\"{0:.1}\" y2=\"{B}\" \
             stroke=\"#ddd\" stroke-width=\"1\"/>",
            x(*s)
        );
    }
    // The rate, one step per point.
    let mut path = String::new();
    for (i, (s, len, v)) in points.iter().enumerate() {
        let cmd = if i == 0 { 'M' } else { 'L' };
        let _ = write!(path, "{cmd}{:.1},{:.1}H{:.1}", x(*s), y(*v), x(s + len));
    }
    let color = if t.job.rw.writes() && !t.job.rw.reads() {
        "#d55e00"
    } else {
        "#0072b2"
    };
    let _ = write!(
        svg,
        "<path class=\"rate\" d=\"{path}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/>"
    );
    if let Some(c) = cliff {
        let cx = x(c.seconds_before);
        let end = x((c.seconds_before + c.seconds_after).min(total_s));
        let _ = write!(
            svg,
            "<g class=\"cliff\" stroke=\"#000\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\">\
             <line x1=\"{cx:.1}\" y1=\"{T}\" x2=\"{cx:.1}\" y2=\"{B}\"/>\
             <line x1=\"{L}\" y1=\"{yb:.1}\" x2=\"{cx:.1}\" y2=\"{yb:.1}\"/>\
             <line x1=\"{cx:.1}\" y1=\"{ya:.1}\" x2=\"{end:.1}\" y2=\"{ya:.1}\"/></g>\
             <text class=\"cliff\" x=\"{tx:.1}\" y=\"{ly}\" font-family=\"sans-serif\" \
             font-size=\"12\" text-anchor=\"{anchor}\">cliff after {gib} ({sb:.1} s): \
             {before:.1} → {after:.1} MB/s</text>",
            ly = T + 14.0,
            yb = y(c.before_mb_s),
            ya = y(c.after_mb_s),
            tx = if cx > (L + R) / 2.0 {
                cx - 4.0
            } else {
                cx + 4.0
            },
            anchor = if cx > (L + R) / 2.0 { "end" } else { "start" },
            gib = iolab_spec::format_bytes(c.bytes_before),
            sb = c.seconds_before,
            before = c.before_mb_s,
            after = c.after_mb_s,
        );
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// A run's section of these charts (its `tests`): a `<details>` element (closed, so it adds one line to
/// the page until opened) whose summary counts the tests with a cliff, the charts of those
/// tests first; empty when no test has a series to draw. The HTML report's one call.
pub fn run_section(tests: &[TestRecord]) -> String {
    let mut charts: Vec<(bool, String)> = tests
        .iter()
        .filter_map(|t| series_chart(t).map(|c| (test_cliff(t).is_some(), c)))
        .collect();
    if charts.is_empty() {
        return String::new();
    }
    charts.sort_by_key(|(cliff, _)| !cliff);
    let cliffs = charts.iter().filter(|(c, _)| *c).count();
    let mut out = format!(
        "<details class=\"series\"><summary>Rate within each test ({} with a series, {} with \
         a cliff)</summary>",
        charts.len(),
        cliffs
    );
    for (_, c) in charts {
        out.push_str(&c);
    }
    out.push_str("</details>");
    out
}

/// The stored interval of `t`'s passes (100 ms for block passes).
fn samples_interval_ms(t: &TestRecord) -> u32 {
    t.passes
        .iter()
        .map(|p| p.timeseries.interval_ms)
        .find(|&i| i > 0)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_of(name: &str, bytes: Vec<u64>) -> TestRecord {
        let secs = bytes.len() as f64 / 10.0;
        let pass = crate::series::tests::pass(1, secs, bytes);
        TestRecord {
            name: name.into(),
            group: name.into(),
            job: iolab_spec::JobSpec::new(iolab_spec::Rw::Write, 131072, 1, 1),
            passes: vec![pass],
            summary: Default::default(),
            extra: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_cliff_is_marked_where_the_rate_dropped() {
        // 3 s at 100 MB/s (10 MB an interval), then 3 s at 20 MB/s.
        let mut bytes = vec![10_000_000u64; 30];
        bytes.extend(vec![2_000_000u64; 30]);
        let svg = series_chart(&test_of("SEQ <w>", bytes.clone())).unwrap();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"), "{svg}");
        assert!(svg.contains("SEQ &lt;w&gt;"), "the name is escaped");
        assert!(svg.contains("<g class=\"cliff\""), "{svg}");
        assert!(svg.contains("→ 20.0 MB/s"), "{svg}");
        // The drop at 3.0 s of 6.0 s: halfway along the plot.
        let mid = format!("x1=\"{:.1}\"", L + (R - L) / 2.0);
        assert!(svg.contains(&mid), "{mid} in {svg}");

        let flat = series_chart(&test_of("flat", vec![10_000_000u64; 60])).unwrap();
        assert!(!flat.contains("class=\"cliff\""), "{flat}");
        assert!(series_chart(&test_of("none", vec![])).is_none());

        let tests = vec![
            test_of("flat", vec![10_000_000u64; 60]),
            test_of("W", bytes),
        ];
        let sec = run_section(&tests);
        assert!(sec.starts_with("<details class=\"series\">"), "{sec}");
        assert!(sec.contains("(2 with a series, 1 with a cliff)"), "{sec}");
        assert!(
            sec.find("aria-label=\"W:") < sec.find("aria-label=\"flat:"),
            "cliffs first"
        );
        assert_eq!(run_section(&[]), "");
    }
}
