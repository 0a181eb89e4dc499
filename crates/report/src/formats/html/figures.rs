//! The charts of a run: the CrystalDiskMark panel, ATTO's block-size chart, each test's
//! colour and chart titles, and throughput over time for every pass.

use super::*;
use iolab_measure::workload::{self, OpSeries};

pub(super) fn cdm_panel(
    r: &RunRecord,
    tests: &[&TestRecord],
    rows: &[String],
    kinds: &[String],
    h: &mut String,
) {
    let max = tests.iter().map(|t| t.summary.mb_s).fold(0.0, f64::max);
    let _ = write!(
        h,
        "<h3>CrystalDiskMark view</h3><div class=\"cdm\" data-chart=\"cdm\" \
         style=\"grid-template-columns:max-content repeat({},minmax(150px,1fr))\"><div></div>",
        kinds.len()
    );
    for k in kinds {
        let _ = write!(h, "<div class=\"hd\">{} (MB/s)</div>", esc(k));
    }
    for row in rows {
        let _ = write!(
            h,
            "<div class=\"lbl\">{}</div>",
            esc(&row.replacen(' ', "\n", 1))
        );
        for k in kinds {
            match set::test_at(tests, row, k) {
                Some(t) => {
                    let fill = if max > 0.0 {
                        100.0 * t.summary.mb_s / max
                    } else {
                        0.0
                    };
                    let c = ci(&t.summary.stats_mb_s);
                    let _ = write!(
                        h,
                        "<div class=\"tile {}\" style=\"--fill:{fill:.1}%\"><span class=\"big\">{}</span>\
                         <span class=\"small\">{}{} IOPS · p99 {}</span> {}</div>",
                        kind_class(k),
                        num(t.summary.mb_s),
                        if c.is_empty() { String::new() } else { format!("{} · ", esc(&c)) },
                        num(t.summary.iops),
                        lat_unit(t.summary.lat_p99_us),
                        badges(r, &t.name)
                    );
                }
                None => h.push_str("<div class=\"tile empty\">-</div>"),
            }
        }
    }
    h.push_str("</div>\n");
}

pub(super) fn atto_chart(r: &RunRecord, tests: &[&TestRecord], rows: &[String], h: &mut String) {
    let pick = |row: &str, kind: &str| set::test_at(tests, row, kind);
    let cats: Vec<String> = rows
        .iter()
        .map(|row| {
            pick(row, "Write")
                .or(pick(row, "Read"))
                .map_or(row.clone(), |t| iolab_spec::format_bytes(t.job.bs))
        })
        .collect();
    let series = |kind: &str, color| BarSeries {
        name: kind.to_string(),
        color,
        values: rows
            .iter()
            .map(|row| pick(row, kind).map(|t| t.summary.mb_s))
            .collect(),
        ci: rows
            .iter()
            .map(|row| {
                pick(row, kind)
                    .filter(|t| t.passes.len() >= 2)
                    .map(|t| (t.summary.stats_mb_s.ci_low, t.summary.stats_mb_s.ci_high))
            })
            .collect(),
    };
    let svg = charts::hbars(
        "Transfer rate by block size",
        &cats,
        &[series("Write", charts::WRITE), series("Read", charts::READ)],
        "throughput (MB/s)",
    );
    let qd = tests.first().map_or(0, |t| t.job.iodepth);
    let _ = writeln!(
        h,
        "<h3>ATTO view</h3><figure data-chart=\"atto\">{svg}<figcaption>Write (orange) and read \
         (blue) MB/s per block size, queue depth {qd}; error bars: 95% CI where a size had \
         two or more passes. Run {}.</figcaption></figure>",
        esc(&r.id.map_or(r.uuid.clone(), |i| format!("#{i}")))
    );
}

/// A test's colour: its direction's (read blue, write orange, mixed green), the same in
/// every chart of the report; a palette colour for a test that moves no data.
pub(super) fn test_color(t: &TestRecord, i: usize) -> plotters::style::RGBColor {
    let rw = t.job.rw;
    if rw.is_mixed() {
        charts::MIXED
    } else if rw.writes() {
        charts::WRITE
    } else if rw.reads() {
        charts::READ
    } else {
        charts::color(i + 3)
    }
}

/// A chart's title for a row of tests: the row, with the one kind it holds
/// (`dbench 2 clients`), and without a study's workload label repeated in front of a
/// test named after it (`dbench: dbench` is `dbench`).
pub(super) fn chart_title(row: &str, kinds: &[&str]) -> String {
    let row = match row.split_once(": ") {
        Some((label, rest)) if rest == label || rest.starts_with(&format!("{label} ")) => rest,
        _ => row,
    };
    match kinds {
        [k] if !k.is_empty() => format!("{row} {k}"),
        _ => row.to_string(),
    }
}

/// `intro` and the figures in a grid; nothing when there are no figures.
pub(super) fn figure_grid(h: &mut String, intro: &str, figs: &[String]) {
    if figs.is_empty() {
        return;
    }
    h.push_str(intro);
    // Two charts per row on a laptop screen, one on paper and narrow screens (the CSS):
    // drawn at the width they are shown, their text stays at 12 px or more.
    h.push_str("<div class=\"grid\">");
    h.push_str(&figs.join("\n"));
    h.push_str("</div>\n");
}

/// A pass's rate per interval of its time series: MB/s, or operations per second for a
/// test that counts operations (metadata keeps an operation series in `extra`; a probe's
/// operations are its bytes over its write size).
pub(super) fn rate_series(t: &TestRecord, p: &PassRecord) -> Option<(f64, Vec<f64>)> {
    if facts::counts_operations(t) {
        if let Some(OpSeries {
            interval_ms: iv,
            ops: series,
        }) = workload::of_test(t).and_then(|w| w.op_series(t))
        {
            if iv == 0 || series.is_empty() {
                return None;
            }
            let s = iv as f64 / 1000.0;
            let n = series.len();
            let rates = series
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let len = if i + 1 == n {
                        (p.seconds - s * i as f64).clamp(s * 0.01, s)
                    } else {
                        s
                    };
                    v / len
                })
                .collect();
            return Some((s, rates));
        }
        let ts = &p.timeseries;
        if ts.bytes.is_empty() || ts.interval_ms == 0 || t.job.bs == 0 {
            return None;
        }
        let per_op = t.job.bs as f64 / 1e6;
        let rates = ts.mb_s(p.seconds).iter().map(|mb| mb / per_op).collect();
        return Some((ts.interval_ms as f64 / 1000.0, rates));
    }
    let ts = &p.timeseries;
    if ts.bytes.is_empty() || ts.interval_ms == 0 {
        return None;
    }
    Some((ts.interval_ms as f64 / 1000.0, ts.mb_s(p.seconds)))
}

pub(super) fn throughput_over_time(
    tests: &[&TestRecord],
    rows: &[String],
    kinds: &[String],
    h: &mut String,
) {
    let mut figs = Vec::new();
    for row in rows {
        let mut series = Vec::new();
        let mut ops = false;
        for k in kinds {
            let Some(t) = set::test_at(tests, row, k) else {
                continue;
            };
            ops |= facts::counts_operations(t);
            for p in &t.passes {
                let Some((iv, rates)) = rate_series(t, p) else {
                    continue;
                };
                let pts: Vec<(f64, f64)> = rates
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        let end = ((i + 1) as f64 * iv).min(p.seconds.max(i as f64 * iv));
                        ((i as f64 * iv + end) / 2.0, v)
                    })
                    .collect();
                // One legend entry per test, on its first pass: every pass of a test is
                // drawn in the test's direction colour.
                let first = std::ptr::eq(p, &t.passes[0]);
                let passes = match t.passes.len() {
                    1 => "1 pass".to_string(),
                    n => format!("{n} passes"),
                };
                let name = match (first, k.is_empty()) {
                    (false, _) => String::new(),
                    (true, true) => passes,
                    (true, false) => format!("{k} ({passes})"),
                };
                series.push(Line {
                    name,
                    color: test_color(t, series.len()),
                    points: pts,
                });
            }
        }
        if series.is_empty() {
            continue;
        }
        let svg = charts::lines(
            &format!(
                "{}: throughput over time",
                chart_title(row, &kinds_in(tests, row, kinds))
            ),
            &series,
            "time in the pass (s)",
            if ops {
                "operations per second (ops/s)"
            } else {
                "throughput (MB/s)"
            },
            Scale::Linear,
            XLabels::Plain,
        );
        figs.push(format!("<figure data-chart=\"throughput\">{svg}</figure>"));
    }
    figure_grid(
        h,
        "<h3>Throughput over time</h3><p class=\"muted\">Every measured pass, one line each \
         in its test's colour, MB/s (ops/s for workloads that count operations) per interval; \
         a stall or a cache running out shows as a drop.</p>",
        &figs,
    );
}
