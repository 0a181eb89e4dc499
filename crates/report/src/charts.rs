//! Charts as inline SVG, drawn with plotters' SVG backend: horizontal bars (ATTO's
//! block-size chart), vertical grouped bars with confidence-interval error bars (study
//! panels), and line charts (latency percentile curves, throughput over time).
//!
//! Text is emitted as SVG `<text>` (plotters escapes it), so no font is rendered here and
//! the browser draws the labels. Every function returns one `<svg>` element that scales to
//! its container.

use plotters::coord::Shift;
use plotters::element::ErrorBar;
use plotters::prelude::*;

/// Okabe–Ito colours, distinguishable with the common colour-vision deficiencies.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(204, 121, 167),
    RGBColor(120, 120, 120),
    RGBColor(0, 0, 0),
];

/// One colour per direction across the whole report (ATTO, latency curves, throughput over
/// time, the CrystalDiskMark tiles): reads blue, writes orange, mixed tests green (the first
/// three Okabe–Ito colours).
pub const READ: RGBColor = PALETTE[0];
pub const WRITE: RGBColor = PALETTE[1];
pub const MIXED: RGBColor = PALETTE[2];

const FONT: &str = "sans-serif";

/// Text sizes given to plotters, which writes about 0.8 of them as the SVG's font-size
/// (20 becomes 16.1). Charts are drawn [`WIDE`] pixels wide and shown two per row on a
/// laptop screen (about 560 px each at 1280 px) and one per row on an A4 page (about
/// 700 px), so labels stay at 12 px or more as displayed, on screen and in print.
const TITLE_PX: u32 = 24;
const LABEL_PX: u32 = 20;
const DESC_PX: u32 = 20;

/// The width line and bar charts are drawn at.
pub const WIDE: u32 = 560;

/// Where each legend entry goes, flowing left to right and wrapping at the chart's width:
/// (x, y) of every entry (`None` for an unnamed series, which has no entry) and the
/// legend's height. Entries are a 24 px swatch and their text.
fn legend_layout(names: &[&str]) -> (Vec<Option<(i32, i32)>>, u32) {
    let (left, right) = (16i32, WIDE as i32 - 8);
    let (mut x, mut y) = (left, 2i32);
    let mut any = false;
    let out = names
        .iter()
        .map(|n| {
            if n.is_empty() {
                return None;
            }
            let w = 28 + text_px(n, LABEL_PX as f64 * 0.8) as i32 + 18;
            if x > left && x + w > right {
                x = left;
                y += 24;
            }
            any = true;
            let at = (x, y);
            x += w;
            Some(at)
        })
        .collect();
    (out, if any { (y + 26) as u32 } else { 0 })
}

/// `c` blended towards white by `k` steps (0: `c` itself): passes of one direction in
/// shades of its colour.
pub fn shade(c: RGBColor, k: usize) -> RGBColor {
    let t = (k.min(4) as f64) * 0.17;
    let mix = |v: u8| (v as f64 + (255.0 - v as f64) * t).round() as u8;
    RGBColor(mix(c.0), mix(c.1), mix(c.2))
}

/// The colour of series `i` when nothing else decides it.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// A named series of bar values (one per category), each with an optional interval.
#[derive(Debug, Clone)]
pub struct BarSeries {
    pub name: String,
    pub color: RGBColor,
    pub values: Vec<Option<f64>>,
    /// Error bar (low, high) per value, drawn when present.
    pub ci: Vec<Option<(f64, f64)>>,
}

/// A named line of (x, y) points.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// Axis scale of a line chart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    Log,
}

/// How x values of a line chart are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XLabels {
    Plain,
    /// x is the number of nines of a percentile: 1 → 90, 2 → 99, 3 → 99.9.
    Nines,
}

fn err(e: impl std::fmt::Display) -> String {
    format!("chart error: {e}")
}

/// Width in pixels a label takes at `size` px in a sans-serif font (an estimate: the
/// browser draws the text, plotters only needs room for it).
fn text_px(s: &str, size: f64) -> u32 {
    (s.chars().count() as f64 * size * 0.58).ceil() as u32
}

/// Makes plotters' fixed-size SVG scale to its container and labels it for screen readers.
fn finish(svg: String, title: &str) -> String {
    let label = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;");
    svg.replacen(
        "<svg ",
        &format!("<svg class=\"chart\" role=\"img\" aria-label=\"{label}\" "),
        1,
    )
}

fn draw<F>(w: u32, h: u32, title: &str, f: F) -> String
where
    F: FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), String>,
{
    let mut svg = String::new();
    let res = {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE)
            .map_err(err)
            .and_then(|_| f(&root))
            .and_then(|_| root.present().map_err(err))
    };
    match res {
        Ok(()) => finish(svg, title),
        Err(e) => format!(
            "<p class=\"chart-error\">{}</p>",
            e.replace('&', "&amp;").replace('<', "&lt;")
        ),
    }
}

fn max_of<'a>(values: impl Iterator<Item = &'a f64>) -> f64 {
    values
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// The end of a bar chart's value axis: room for every bar and the whole of every error bar
/// (an interval is never cut at the edge; a wide one from a few noisy passes shows as wide).
fn value_axis_max(series: &[BarSeries]) -> f64 {
    let bars = max_of(series.iter().flat_map(|s| s.values.iter().flatten()));
    let ci = max_of(
        series
            .iter()
            .flat_map(|s| s.ci.iter().flatten().map(|(_, hi)| hi)),
    );
    nice_max(bars.max(ci))
}

/// The power of ten at or below `lo` and the one at or above `hi`: a log axis between them
/// starts and ends on a labelled value (plotters always marks powers of ten), so no curve
/// runs below the lowest label or above the highest.
fn log_bounds(lo: f64, hi: f64) -> (f64, f64) {
    let down = 10f64.powf(lo.log10().floor());
    let up = 10f64.powf(hi.log10().ceil());
    (down, if up > down { up } else { down * 10.0 })
}

/// Labels for a logarithmic axis: only 1, 2 and 5 times a power of ten, so that the many
/// grid lines plotters draws between decades stay unlabelled.
fn log_label(y: f64) -> String {
    if !(y.is_finite() && y > 0.0) {
        return String::new();
    }
    let p = 10f64.powf(y.log10().floor());
    let m = y / p;
    if [1.0, 2.0, 5.0].iter().any(|k| (m - k).abs() < 1e-6) {
        axis_num(y)
    } else {
        String::new()
    }
}

/// Horizontal bars: one row per category (top to bottom), one bar per series in each row,
/// value axis from zero — ATTO's block-size chart.
pub fn hbars(title: &str, categories: &[String], series: &[BarSeries], x_desc: &str) -> String {
    let n = categories.len().max(1);
    let k = series.len().max(1);
    let row_px = (12 * k as u32 + 10).max(26);
    let h = 80 + row_px * n as u32 + 30;
    let label_w = categories
        .iter()
        .map(|c| text_px(c, LABEL_PX as f64))
        .max()
        .unwrap_or(20)
        + 14;
    let x_max = value_axis_max(series);
    draw(WIDE, h, title, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, TITLE_PX))
            .margin(10)
            .margin_right(30)
            .x_label_area_size(48)
            .y_label_area_size(label_w)
            .build_cartesian_2d(0f64..x_max, -0.5f64..(n as f64 - 0.5))
            .map_err(err)?;
        let cat = |y: &f64| -> String {
            let r = y.round();
            if (y - r).abs() > 1e-6 || r < 0.0 || r as usize >= n {
                return String::new();
            }
            categories
                .get(n - 1 - r as usize)
                .cloned()
                .unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&cat)
            .x_label_formatter(&|x| axis_num(*x))
            .x_desc(x_desc)
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, DESC_PX))
            .max_light_lines(0)
            .draw()
            .map_err(err)?;
        let slot = 0.8 / k as f64;
        for (si, s) in series.iter().enumerate() {
            let style = s.color.filled();
            let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
                let v = (*v)?;
                let y = (n - 1 - i) as f64 + 0.4 - slot * si as f64;
                Some(Rectangle::new([(0.0, y), (v, y - slot * 0.9)], style))
            });
            chart
                .draw_series(bars)
                .map_err(err)?
                .label(s.name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], style));
            let errs = s.ci.iter().enumerate().filter_map(|(i, ci)| {
                let (lo, hi) = (*ci)?;
                let v = s.values.get(i).copied().flatten()?;
                let y = (n - 1 - i) as f64 + 0.4 - slot * si as f64 - slot * 0.45;
                Some(ErrorBar::new_horizontal(
                    y,
                    lo.clamp(0.0, x_max),
                    v,
                    hi.min(x_max),
                    BLACK.stroke_width(1),
                    6,
                ))
            });
            chart.draw_series(errs).map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, LABEL_PX))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(err)
    })
}

/// Vertical grouped bars: clusters along x (e.g. Read, Write), one bar per series (e.g.
/// configuration) in each, with error bars where an interval is given.
pub fn vbars(title: &str, clusters: &[String], series: &[BarSeries], y_desc: &str) -> String {
    let n = clusters.len().max(1);
    let k = series.len().max(1);
    // Every chart is drawn at one width and shown one per row, so text has one size.
    let w = WIDE;
    let y_max = value_axis_max(series);
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let (spots, legend_h) = legend_layout(&names);
    draw(w, 260 + legend_h, title, |root| {
        let (plot, legend) = root.split_vertically(260);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, (FONT, TITLE_PX))
            .margin(8)
            .margin_right(16)
            .x_label_area_size(34)
            .y_label_area_size(100)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
            .map_err(err)?;
        let cat = |x: &f64| -> String {
            let r = x.round();
            if (x - r).abs() > 1e-6 || r < 0.0 || r as usize >= n {
                return String::new();
            }
            clusters.get(r as usize).cloned().unwrap_or_default()
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&cat)
            .y_label_formatter(&|y| axis_num(*y))
            .y_desc(y_desc)
            .label_style((FONT, LABEL_PX))
            .axis_desc_style((FONT, DESC_PX))
            .max_light_lines(0)
            .draw()
            .map_err(err)?;
        let slot = 0.8 / k as f64;
        for (si, s) in series.iter().enumerate() {
            let style = s.color.filled();
            let x0 = |i: usize| i as f64 - 0.4 + slot * si as f64;
            let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
                let v = (*v)?;
                Some(Rectangle::new(
                    [(x0(i) + slot * 0.05, 0.0), (x0(i) + slot * 0.95, v)],
                    style,
                ))
            });
            chart.draw_series(bars).map_err(err)?;
            let errs = s.ci.iter().enumerate().filter_map(|(i, ci)| {
                let (lo, hi) = (*ci)?;
                let v = s.values.get(i).copied().flatten()?;
                Some(ErrorBar::new_vertical(
                    x0(i) + slot * 0.5,
                    lo.clamp(0.0, y_max),
                    v,
                    hi.min(y_max),
                    BLACK.stroke_width(1),
                    6,
                ))
            });
            chart.draw_series(errs).map_err(err)?;
        }
        // The legend goes under the plot, its entries side by side, so long labels never
        // cover a bar.
        for (s, spot) in series.iter().zip(&spots) {
            let Some((x, y)) = *spot else { continue };
            legend
                .draw(&Rectangle::new(
                    [(x, y + 2), (x + 16, y + 18)],
                    s.color.filled(),
                ))
                .map_err(err)?;
            legend
                .draw(&Text::new(s.name.clone(), (x + 24, y), (FONT, LABEL_PX)))
                .map_err(err)?;
        }
        Ok(())
    })
}

/// A line chart. With `points` of one or two values per line, markers are drawn too.
pub fn lines(
    title: &str,
    series: &[Line],
    x_desc: &str,
    y_desc: &str,
    y_scale: Scale,
    x_labels: XLabels,
) -> String {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite());
    let x_max = xs.fold(0.0, f64::max).max(1e-3);
    let (y_min, y_max) = ys.fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
        (if y > 0.0 { lo.min(y) } else { lo }, hi.max(y))
    });
    let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let (spots, legend_h) = legend_layout(&names);
    draw(WIDE, 280 + legend_h, title, |root| {
        let (plot, legend) = root.split_vertically(280);
        let mut builder = ChartBuilder::on(&plot);
        builder
            .caption(title, (FONT, TITLE_PX))
            .margin(8)
            .margin_right(24)
            .x_label_area_size(48)
            .y_label_area_size(100);
        let x_fmt = |x: &f64| match x_labels {
            XLabels::Plain => axis_num(*x),
            XLabels::Nines => nines_label(*x),
        };
        match y_scale {
            Scale::Log => {
                let lo = if y_min.is_finite() { y_min } else { 1.0 };
                let (lo, hi) = log_bounds(lo, y_max.max(lo));
                let mut chart = builder
                    .build_cartesian_2d(0f64..x_max, (lo..hi).log_scale())
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .x_labels(if x_labels == XLabels::Nines {
                        (x_max.floor() as usize + 1).max(2)
                    } else {
                        6
                    })
                    .x_label_formatter(&x_fmt)
                    .y_label_formatter(&|y| log_label(*y))
                    .label_style((FONT, LABEL_PX))
                    .axis_desc_style((FONT, DESC_PX))
                    .max_light_lines(0)
                    .draw()
                    .map_err(err)?;
                for s in series {
                    let pts: Vec<(f64, f64)> =
                        s.points.iter().copied().filter(|p| p.1 > 0.0).collect();
                    chart
                        .draw_series(LineSeries::new(pts.clone(), s.color.stroke_width(2)))
                        .map_err(err)?;
                    if pts.len() <= 2 {
                        chart
                            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, s.color.filled())))
                            .map_err(err)?;
                    }
                }
            }
            Scale::Linear => {
                let hi = nice_max(y_max);
                let mut chart = builder
                    .build_cartesian_2d(0f64..x_max, 0f64..hi)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .x_label_formatter(&x_fmt)
                    .y_label_formatter(&|y| axis_num(*y))
                    .label_style((FONT, LABEL_PX))
                    .axis_desc_style((FONT, DESC_PX))
                    .max_light_lines(0)
                    .draw()
                    .map_err(err)?;
                for s in series {
                    chart
                        .draw_series(LineSeries::new(
                            s.points.iter().copied(),
                            s.color.stroke_width(2),
                        ))
                        .map_err(err)?;
                    if s.points.len() <= 2 {
                        chart
                            .draw_series(
                                s.points
                                    .iter()
                                    .map(|p| Circle::new(*p, 3, s.color.filled())),
                            )
                            .map_err(err)?;
                    }
                }
            }
        }
        // Entries side by side under the plot; a series without a name (a further pass
        // of a test already in the legend) has none.
        for (s, spot) in series.iter().zip(&spots) {
            let Some((x, y)) = *spot else { continue };
            legend
                .draw(&PathElement::new(
                    vec![(x, y + 10), (x + 20, y + 10)],
                    s.color.stroke_width(3),
                ))
                .map_err(err)?;
            legend
                .draw(&Text::new(s.name.clone(), (x + 28, y), (FONT, LABEL_PX)))
                .map_err(err)?;
        }
        Ok(())
    })
}

/// A round upper bound a little above `v` for a value axis (1, 2 or 5 times a power of 10).
pub fn nice_max(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let target = v * 1.08;
    let p = 10f64.powf(target.log10().floor());
    for m in [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
        if m * p >= target {
            return m * p;
        }
    }
    10.0 * p
}

/// Axis numbers: no exponent for ordinary values, `k`/`M` suffixes for large ones.
pub fn axis_num(x: f64) -> String {
    let a = x.abs();
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", x / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", x / 1e3)))
    } else if a >= 10.0 || a == 0.0 {
        format!("{x:.0}")
    } else if a >= 0.1 {
        trim(format!("{x:.2}"))
    } else {
        trim(format!("{x:.4}"))
    }
}

/// The percentile that `x` nines stands for: 0 → "0", 1 → "90", 2 → "99", 3 → "99.9".
pub fn nines_label(x: f64) -> String {
    let r = x.round();
    if (x - r).abs() > 1e-6 || r < 0.0 {
        return String::new();
    }
    match r as i32 {
        0 => "0".to_string(),
        1 => "90".to_string(),
        2 => "99".to_string(),
        k => format!("99.{}", "9".repeat(k as usize - 2)),
    }
}

/// x position of percentile `q` (0 ≤ q < 1) on the nines axis: `-log10(1 - q)`.
pub fn nines(q: f64) -> f64 {
    -(1.0 - q).max(1e-12).log10()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_helpers() {
        assert_eq!(nice_max(93.0), 120.0);
        assert_eq!(nice_max(1900.0), 2500.0);
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(axis_num(1500.0), "1500");
        assert_eq!(axis_num(25_000.0), "25k");
        assert_eq!(axis_num(2_500_000.0), "2.5M");
        assert_eq!(axis_num(0.25), "0.25");
        assert_eq!(nines_label(3.0), "99.9");
        assert_eq!(nines_label(1.0), "90");
        assert_eq!(nines_label(1.5), "");
        assert!((nines(0.99) - 2.0).abs() < 1e-9);
        assert_eq!(log_label(2000.0), "2000");
        assert_eq!(log_label(3000.0), "");
        assert_eq!(log_label(50_000.0), "50k");
        assert_eq!(log_bounds(1300.0, 18_000.0), (1000.0, 100_000.0));
        assert_eq!(log_bounds(1000.0, 5000.0), (1000.0, 10_000.0));
        assert_eq!(log_bounds(7.4, 7.4), (1.0, 10.0));
        assert_eq!(shade(READ, 0), READ);
        assert!(shade(WRITE, 2).0 > WRITE.0);
    }

    #[test]
    fn error_bars_fit_on_the_axis() {
        let s = BarSeries {
            name: "a".into(),
            color: READ,
            values: vec![Some(100.0)],
            ci: vec![Some((20.0, 900.0))],
        };
        assert!(value_axis_max(&[s]) >= 900.0);
    }

    #[test]
    fn charts_are_svg_with_escaped_text() {
        let s = BarSeries {
            name: "<write> & co".into(),
            color: WRITE,
            values: vec![Some(10.0), None],
            ci: vec![Some((9.0, 11.0)), None],
        };
        let svg = hbars(
            "ATTO",
            &["4K".into(), "1M".into()],
            std::slice::from_ref(&s),
            "MB/s",
        );
        assert!(svg.starts_with("<svg class=\"chart\""), "{svg}");
        assert!(svg.contains("&lt;write&gt; &amp; co"), "{svg}");
        assert!(!svg.contains("<write>"));
        let v = vbars("A \"B\"", &["Read".into(), "Write".into()], &[s], "MB/s");
        assert!(v.contains("aria-label=\"A &quot;B&quot;\""), "{v}");
        let l = lines(
            "lat",
            &[Line {
                name: "read".into(),
                color: READ,
                points: vec![(0.0, 10.0), (1.0, 20.0), (2.0, 80.0)],
            }],
            "percentile",
            "µs",
            Scale::Log,
            XLabels::Nines,
        );
        assert!(l.contains("<polyline") || l.contains("<path"), "{l}");
        assert!(l.contains(">\n99\n<") || l.contains(">99<"), "{l}");
    }
}
