//! HTML report: one self-contained file (inline CSS and SVG charts, no script, no network
//! fetch — a Content-Security-Policy forbids them) that reads on a laptop screen and
//! prints. Per run: facts, the results table with the warnings beside it, a
//! CrystalDiskMark-style panel or ATTO's block-size chart, workload tables (an `ops` table
//! such as dbench's), latency percentile curves, throughput over time for every pass, and
//! the captured environment. Several runs or a study add the comparison: grouped bars with
//! confidence intervals, the ratio-to-baseline table and the ranked score.
//!
//! Every piece of user or measured text goes through [`esc`].

use std::fmt::Write as _;

use iolab_measure::{DirResult, LatencyHistogram, PassRecord, RunRecord, TestRecord};
use iolab_spec::format_size_short;
use serde_json::Value;

use crate::charts::{self, BarSeries, Line, Scale, XLabels};
use crate::compare::p_text;
use crate::facts;
use crate::set::{self, RunSet};
use crate::text::{ci, lat, lat_unit, num, pct1};
use crate::warngroup;

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = r#"
:root{--fg:#1d2430;--muted:#5b6472;--line:#d8dde5;--soft:#f3f5f8;--warn:#7a4d00;--warnbg:#fff5dc;--warnline:#eccb7a;--read:#0072b2;--write:#d55e00;--readbg:#dcebf6;--writebg:#fbe6d9;--mixbg:#dcf1ea}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:#fff}
main{max-width:1180px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:20px;margin:34px 0 8px;padding-top:10px;border-top:2px solid var(--fg)}
h3{font-size:15px;margin:22px 0 8px}
p{margin:6px 0}
a{color:#0b5cad}
.muted,.sub{color:var(--muted)}
nav.toc{margin:10px 0;font-size:13px}
nav.toc a{margin-right:12px;white-space:nowrap}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:6px 0 12px}
th,td{padding:3px 7px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
table[data-table=results]{font-size:13px}
th{background:var(--soft);font-weight:600}
td.n,th.n{text-align:right;white-space:nowrap}
td.sub-row{padding-left:22px;color:var(--muted)}
td.name{white-space:nowrap}
.ci{color:var(--muted);font-size:12px;margin-left:3px}
.wide{overflow-x:auto}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:1px 14px;margin:8px 0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0;overflow-wrap:anywhere}
.cols{display:flex;flex-wrap:wrap;gap:14px 24px;align-items:flex-start;margin-top:8px}
.cols>*{flex:1 1 420px;min-width:0}
.cols>.view{flex:0 1 600px}
section.run>aside.warnings{margin:8px 0}
aside.warnings{background:var(--warnbg);border:1px solid var(--warnline);border-radius:6px;padding:8px 12px;font-size:13px}
aside.warnings.none{background:var(--soft);border-color:var(--line)}
aside.warnings h3{margin:2px 0 6px}
aside.warnings ul{margin:0;padding-left:18px}
aside.warnings li{margin:4px 0}
aside.warnings details{margin:2px 0 0}
aside.warnings details ul{padding-left:14px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);padding:0 2px;border-radius:2px}
.code{font:600 11px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
a.badge,span.badge{display:inline-block;white-space:nowrap;font:600 10px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;padding:0 4px;border-radius:3px;background:var(--warnbg);color:var(--warn);border:1px solid var(--warnline);text-decoration:none;margin:1px}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:10px 14px}
@media (max-width:1000px){.grid{grid-template-columns:minmax(0,1fr)}}
figure{margin:0 0 10px;break-inside:avoid;page-break-inside:avoid}
figcaption{font-size:12px;color:var(--muted)}
svg.chart{width:100%;height:auto;display:block}
.cdm{display:grid;gap:6px;margin:8px 0 14px;max-width:640px}
.cdm .hd{font-weight:600;text-align:center;padding:2px}
.cdm .lbl{display:flex;align-items:center;font-weight:600;padding:6px 10px;background:#2f3a4a;color:#fff;border-radius:4px;white-space:pre-line}
.tile{border:1px solid var(--line);border-radius:4px;padding:6px 10px;text-align:right;background:linear-gradient(90deg,var(--tc) var(--fill),#fff var(--fill))}
.tile.read{--tc:var(--readbg)}.tile.write{--tc:var(--writebg)}.tile.mix{--tc:var(--mixbg)}
.tile .big{display:block;font-size:26px;font-weight:600;line-height:1.1}
.tile .cmp{display:flex;justify-content:space-between;gap:8px;align-items:baseline}
.tile .cmp b{font-size:20px}
.tile .cfg{color:var(--muted);font-size:12px;text-align:left;overflow-wrap:anywhere}
.tile .small{font-size:12px;color:var(--muted)}
.tile.empty{background:var(--soft);color:var(--muted);text-align:center}
tr.best td.v{font-weight:700}
.sig{color:#0b5cad;font-weight:700}
.worse{color:#b3261e}
details{margin:8px 0}
summary{cursor:pointer;color:var(--muted)}
table.kv td:first-child{color:var(--muted);white-space:nowrap}
table.kv table.kv{margin:0}
footer{margin-top:30px;color:var(--muted);font-size:12px}
@media print{
 main{max-width:none;padding:0}
 body{font-size:11px}
 section.run,section.comparison{break-before:page}
 .grid{grid-template-columns:minmax(0,1fr)}
 a{color:inherit;text-decoration:none}
 nav.toc{display:none}
 .tile,.cdm .lbl,th{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"#;

/// The HTML report of a set of runs (one run is a set of one).
pub fn render(set: &RunSet) -> String {
    let mut h = String::new();
    let title = title(set);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; img-src data:\">\n",
    );
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(h, "<meta name=\"generator\" content=\"iolab\">");
    let _ = writeln!(h, "<title>{}</title>", esc(&title));
    let _ = writeln!(h, "<style>{CSS}</style>\n</head>\n<body>\n<main>");
    let _ = writeln!(h, "<header><h1>{}</h1>", esc(&title));
    let version = set
        .runs()
        .next()
        .map(|r| r.iolab_version.clone())
        .unwrap_or_default();
    let n_runs = set.runs().count();
    let _ = writeln!(
        h,
        "<p class=\"sub\">iolab {} · {n_runs} run{} · MB/s = 10<sup>6</sup> bytes/s · \
         headline = median of the passes (or the best pass where a run asked for it) · \
         ±x% = half-width of the 95% confidence interval of the mean (Student t)</p>",
        esc(&version),
        if n_runs == 1 { "" } else { "s" }
    );
    // Table of contents.
    h.push_str("<nav class=\"toc\">");
    let families: Vec<RunSet> = set
        .families()
        .into_iter()
        .filter(|f| f.configs.len() > 1 && !f.shared_test_names().is_empty())
        .collect();
    for (i, f) in families.iter().enumerate() {
        let _ = writeln!(
            h,
            "<a href=\"#{}\">{}</a>",
            comparison_anchor(i),
            esc(&comparison_heading(f, families.len()))
        );
    }
    for r in set.runs() {
        let _ = writeln!(
            h,
            "<a href=\"#{}\">{}</a>",
            run_anchor(r),
            esc(&run_title(r))
        );
    }
    h.push_str("</nav></header>\n");

    // The answer first: each comparison opens with its familiar view and verdicts; the
    // list of runs follows.
    for (i, f) in families.iter().enumerate() {
        comparison(f, i, families.len(), &mut h);
    }
    if n_runs > 1 {
        overview(set, &mut h);
    }
    for c in &set.configs {
        for r in &c.runs {
            run_section(r, set.configs.len() > 1, &c.label, &mut h);
        }
    }
    let _ = writeln!(
        h,
        "<footer>Generated by iolab {} from its result database. Charts are inline SVG; \
         this file loads nothing from the network.</footer>",
        esc(&version)
    );
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

fn title(set: &RunSet) -> String {
    if let Some(s) = &set.study {
        return format!("iolab study: {s}");
    }
    let runs: Vec<&RunRecord> = set.runs().collect();
    match runs.as_slice() {
        [r] => format!("iolab: {}", run_title(r)),
        _ => format!("iolab: {} runs", runs.len()),
    }
}

fn run_title(r: &RunRecord) -> String {
    let id =
        r.id.map_or("unstored run".to_string(), |i| format!("Run #{i}"));
    format!("{id} · {} · {}", r.preset, r.target.path)
}

fn run_anchor(r: &RunRecord) -> String {
    match r.id {
        Some(id) => format!("run-{id}"),
        None => format!("run-{}", esc(&r.uuid)),
    }
}

fn test_anchor(r: &RunRecord, i: usize) -> String {
    format!("{}-t{i}", run_anchor(r))
}

fn warning_anchor(r: &RunRecord, i: usize) -> String {
    format!("{}-w{i}", run_anchor(r))
}

fn overview(set: &RunSet, h: &mut String) {
    h.push_str("<section class=\"overview\"><h2 id=\"runs\">Runs</h2><div class=\"wide\">");
    h.push_str(
        "<table data-table=\"runs\"><tr><th>Run</th><th>Configuration</th><th>Preset</th>\
         <th>Target</th><th>Started (UTC)</th><th>Passes</th><th class=\"n\">Tests</th>\
         <th class=\"n\">Warnings</th><th>Status</th></tr>\n",
    );
    for c in &set.configs {
        for r in &c.runs {
            let _ = writeln!(
                h,
                "<tr><td><a href=\"#{}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"name\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
                run_anchor(r),
                r.id.map_or("-".into(), |i| format!("#{i}")),
                esc(&c.label),
                esc(&r.preset),
                esc(&facts::target(r)),
                esc(&r.started_at),
                esc(&facts::passes(r)),
                r.tests.len(),
                r.warnings.len(),
                if r.complete { "complete" } else { "incomplete" }
            );
        }
    }
    h.push_str("</table></div></section>\n");
}

// ---------------------------------------------------------------------------------------
// Comparison of configurations

fn comparison_anchor(i: usize) -> String {
    if i == 0 {
        "comparison".to_string()
    } else {
        format!("comparison-{}", i + 1)
    }
}

/// `Study NAME`, `Comparison`, or `Comparison: cdm runs` when there are several.
fn comparison_heading(set: &RunSet, families: usize) -> String {
    match &set.study {
        Some(s) => format!("Study {s}"),
        None if families > 1 => {
            let preset = set
                .runs()
                .next()
                .map(|r| r.preset.clone())
                .unwrap_or_default();
            format!("Comparison: {preset} runs")
        }
        None => "Comparison".to_string(),
    }
}

fn comparison(set: &RunSet, index: usize, families: usize, h: &mut String) {
    let _ = writeln!(
        h,
        "<section class=\"comparison\"><h2 id=\"{}\">{}</h2>",
        comparison_anchor(index),
        esc(&comparison_heading(set, families))
    );
    let base = &set.configs[set.baseline];
    let _ = writeln!(
        h,
        "<p>{} configurations; baseline <b>{}</b>; runs sharing a configuration have their \
         passes pooled.</p>",
        set.configs.len(),
        esc(&base.label)
    );

    h.push_str("<div class=\"cols\">");
    let tiles = cdm_compare_panel(set);
    if let Some(view) = &tiles {
        let _ = write!(h, "<div class=\"view\">{view}</div>");
    }
    h.push_str("<div>");
    ratio_table(set, h);
    h.push_str("</div></div>\n");
    if tiles.is_some() {
        // The tiles hold the same numbers: their bars wait behind a click.
        h.push_str(
            "<details data-panel=\"study-bars\"><summary>Bars by configuration, with the \
             95% confidence interval of each</summary>",
        );
        comparison_bars(set, h);
        h.push_str("</details>\n");
    } else {
        comparison_bars(set, h);
    }
    // Ranked score.
    let ranking = set.ranking();
    let s = &ranking.score;
    let _ = writeln!(
        h,
        "<h3>Score</h3><p class=\"muted\">Each test's headline (the geometric mean of a \
         configuration's runs) as a ratio to the best configuration for that test; the \
         geometric mean of those ratios over the random tests, the sequential tests and all \
         tests, divided by the best configuration's, so the best scores 1.00 in each column. \
         Ranked by total; a rank range (1-2) means the repeats cannot separate those \
         configurations. {}</p>\
         <table data-table=\"score\"><tr><th class=\"n\">Rank</th><th>Configuration</th>\
         <th class=\"n\">Random</th><th class=\"n\">Sequential</th><th class=\"n\">Total</th>\
         <th>Caveats</th></tr>",
        esc(&ranking.basis())
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for (c, range) in s.ranked.iter().zip(&ranking.ranges) {
        let _ = writeln!(
            h,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\"><b>{}</b></td><td>{}</td></tr>",
            iolab_stats::noise::rank_text(*range),
            esc(&set.configs[c.config].label),
            f(c.random),
            f(c.sequential),
            f(c.total),
            match set.configs[c.config].caveat_text() {
                t if t.is_empty() => "-".to_string(),
                t => format!("⚠ {}", esc(&t)),
            }
        );
    }
    h.push_str("</table>\n");
    if !s.excluded.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"muted\">Not scored (missing in some configuration): {}</p>",
            esc(&s.excluded.join(", "))
        );
    }
    // Facts some workloads record besides speed (space per file, scrub counts).
    for t in set.fact_tables() {
        let _ = write!(
            h,
            "<h3>{}</h3><table data-table=\"facts\"><tr><th>{}</th>",
            esc(&t.title),
            esc(&t.corner)
        );
        for c in &set.configs {
            let _ = write!(h, "<th class=\"n\">{}</th>", esc(&c.label));
        }
        h.push_str("</tr>\n");
        for (name, cells) in &t.rows {
            let _ = write!(h, "<tr><td>{}</td>", esc(name));
            for c in cells {
                let _ = write!(h, "<td class=\"n\">{}</td>", esc(c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    // Warnings of every configuration, linked to their runs.
    let warned: Vec<(&str, &RunRecord)> = set
        .configs
        .iter()
        .flat_map(|c| c.runs.iter().map(move |r| (c.label.as_str(), r)))
        .filter(|(_, r)| !r.warnings.is_empty())
        .collect();
    if !warned.is_empty() {
        h.push_str("<aside class=\"warnings\"><h3>Warnings in these runs</h3><ul>");
        for (label, r) in warned {
            let mut codes: Vec<&str> = r.warnings.iter().map(|w| w.code.as_str()).collect();
            codes.sort_unstable();
            codes.dedup();
            let _ = write!(
                h,
                "<li><b>{}</b>: <a href=\"#{}\">{} warning{}</a> ({})</li>",
                esc(label),
                run_anchor(r),
                r.warnings.len(),
                if r.warnings.len() == 1 { "" } else { "s" },
                esc(&codes.join(", "))
            );
        }
        h.push_str("</ul></aside>\n");
    }
    h.push_str("</section>\n");
}

/// Grouped bars: one panel per row of the results table.
fn comparison_bars(set: &RunSet, h: &mut String) {
    h.push_str(
        "<h3>By configuration</h3><p class=\"muted\">Each test's headline, with the 95% \
         confidence interval of the mean as an error bar.</p>",
    );
    let names = set.test_names();
    let unique: Vec<&TestRecord> = names
        .iter()
        .filter_map(|n| set.aligned(n).into_iter().flatten().next())
        .collect();
    let (rows, kinds) = set::rows_and_kinds(&unique);
    h.push_str("<div class=\"grid\">");
    for row in &rows {
        let in_row: Vec<&str> = kinds
            .iter()
            .filter(|k| set::test_at(&unique, row, k).is_some())
            .map(String::as_str)
            .collect();
        let tests_of = |k: &str| -> Vec<Option<&TestRecord>> {
            set.configs
                .iter()
                .map(|c| {
                    let ts: Vec<&TestRecord> = c.tests.iter().collect();
                    set::test_at(&ts, row, k)
                })
                .collect()
        };
        let all: Vec<&TestRecord> = in_row.iter().flat_map(|k| tests_of(k)).flatten().collect();
        let configs_in_row = (0..set.configs.len())
            .filter(|&c| in_row.iter().any(|k| tests_of(k)[c].is_some()))
            .count();
        if configs_in_row < 2 {
            continue;
        }
        let m = set::primary_metric(all.iter().copied());
        let label = facts::metric_label(m, all.iter().copied());
        let clusters: Vec<String> = in_row
            .iter()
            .map(|k| {
                if k.is_empty() {
                    label.to_string()
                } else {
                    k.to_string()
                }
            })
            .collect();
        let series: Vec<BarSeries> = set
            .configs
            .iter()
            .enumerate()
            .map(|(ci_, c)| {
                let ts: Vec<&TestRecord> = c.tests.iter().collect();
                let picked: Vec<Option<&TestRecord>> =
                    in_row.iter().map(|k| set::test_at(&ts, row, k)).collect();
                BarSeries {
                    name: c.label.clone(),
                    // A configuration keeps its colour in every panel.
                    color: charts::color(ci_),
                    values: picked
                        .iter()
                        .map(|t| t.and_then(|t| m.headline(t)))
                        .collect(),
                    ci: picked
                        .iter()
                        .map(|t| {
                            t.filter(|t| t.passes.len() >= 2).map(|t| {
                                let s = m.stats(t);
                                (s.ci_low, s.ci_high)
                            })
                        })
                        .collect(),
                }
            })
            .filter(|s: &BarSeries| s.values.iter().any(Option::is_some))
            .collect();
        let svg = charts::vbars(&chart_title(row, &[]), &clusters, &series, label);
        let _ = write!(
            h,
            "<figure data-chart=\"study-bars\">{svg}<figcaption>{} by configuration, 95% CI \
             error bars</figcaption></figure>",
            esc(label)
        );
    }
    h.push_str("</div>\n");
}

/// A comparison of CrystalDiskMark runs in CrystalDiskMark's layout: one tile per test,
/// read and write side by side, each configuration's MB/s in it with its change against
/// the baseline and the verdict. `None` for other presets or more than four
/// configurations (the ratio table is their view).
fn cdm_compare_panel(set: &RunSet) -> Option<String> {
    let cdm = set
        .runs()
        .all(|r| r.preset == "cdm" || r.preset.starts_with("cdm-"));
    if !cdm || !(2..=4).contains(&set.configs.len()) {
        return None;
    }
    let names = set.shared_test_names();
    let unique: Vec<&TestRecord> = names
        .iter()
        .filter_map(|n| set.aligned(n).into_iter().flatten().next())
        .collect();
    let (rows, kinds) = set::rows_and_kinds(&unique);
    if !kinds.iter().any(|k| k == "Read" || k == "Write") {
        return None;
    }
    let m = set::Metric::MbS;
    let value = |c: usize, name: &str| set.run_values(c, name, m).geo_mean();
    let decided: Vec<_> = (0..set.configs.len())
        .map(|i| (i != set.baseline).then(|| set.decisions(set.baseline, i)))
        .collect();
    let max = names
        .iter()
        .flat_map(|n| (0..set.configs.len()).filter_map(|c| value(c, n)))
        .fold(0.0, f64::max);
    let mut h = String::new();
    let _ = write!(
        h,
        "<h3>CrystalDiskMark view</h3><div class=\"cdm\" data-chart=\"cdm-compare\" \
         style=\"grid-template-columns:max-content repeat({},minmax(170px,1fr))\"><div></div>",
        kinds.len()
    );
    for k in &kinds {
        let _ = write!(h, "<div class=\"hd\">{} (MB/s)</div>", esc(k));
    }
    for row in &rows {
        let _ = write!(
            h,
            "<div class=\"lbl\">{}</div>",
            esc(&row.replacen(' ', "\n", 1))
        );
        for k in &kinds {
            let Some(t) = set::test_at(&unique, row, k) else {
                h.push_str("<div class=\"tile empty\">-</div>");
                continue;
            };
            let base = value(set.baseline, &t.name);
            let top = (0..set.configs.len())
                .filter_map(|c| value(c, &t.name))
                .fold(0.0, f64::max);
            let fill = if max > 0.0 { 100.0 * top / max } else { 0.0 };
            let _ = write!(
                h,
                "<div class=\"tile {}\" style=\"--fill:{fill:.1}%\">",
                kind_class(k)
            );
            for (c, conf) in set.configs.iter().enumerate() {
                let Some(v) = value(c, &t.name) else {
                    let _ = write!(
                        h,
                        "<span class=\"cmp\"><span class=\"cfg\">{}</span>-</span>",
                        esc(&conf.label)
                    );
                    continue;
                };
                let _ = write!(
                    h,
                    "<span class=\"cmp\"><span class=\"cfg\">{}</span><b>{}</b></span>",
                    esc(&conf.label),
                    num(v)
                );
                if c == set.baseline {
                    continue;
                }
                let change = base
                    .and_then(|b| set::change_pct(b, v))
                    .map_or(String::new(), |p| format!("{p:+.0}% "));
                let d = decided[c]
                    .as_ref()
                    .and_then(|d| d.get(&(t.name.clone(), m)));
                let verdict = match (set.judge(&t.name, m, set.baseline, c), d) {
                    (set::Judgement::Tested(_), Some(d)) if d.call == set::Call::Different => {
                        let star = if d.confounded_by.is_empty() { "" } else { "*" };
                        if v >= base.unwrap_or(v) {
                            format!("<span class=\"sig\">● better{star}</span>")
                        } else {
                            format!("<span class=\"worse\">● worse{star}</span>")
                        }
                    }
                    (set::Judgement::Tested(_), Some(d)) if d.call == set::Call::Same => {
                        format!("= same within ±{}", crate::compare::pct(set.margin_pct))
                    }
                    (set::Judgement::Tested(x), d) => format!(
                        "○ undecided ({}{})",
                        esc(&p_text(x.test.p)),
                        d.and_then(|d| d.runs_needed)
                            .map_or(String::new(), |n| format!("; {n} runs a side"))
                    ),
                    (set::Judgement::NoNoise { .. }, _) => "? cannot tell (1 run)".to_string(),
                    _ => String::new(),
                };
                let _ = write!(h, "<span class=\"small\">{change}{verdict}</span>");
            }
            h.push_str(&badges_of_test(set, &t.name));
            h.push_str("</div>");
        }
    }
    h.push_str("</div>\n");
    Some(h)
}

/// One mark for the warning codes any run of `set` raised about `test`: `⚠ CODE +2`,
/// every code in its title.
fn badges_of_test(set: &RunSet, test: &str) -> String {
    let mut codes: Vec<&iolab_measure::WarningCode> = Vec::new();
    for w in set.runs().flat_map(|r| r.warnings.iter()) {
        if w.test.as_deref() == Some(test) && !codes.contains(&&w.code) {
            codes.push(&w.code);
        }
    }
    codes.sort_by_key(|c| warngroup::severity(c));
    let Some(first) = codes.first() else {
        return String::new();
    };
    let all: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
    format!(
        " <span class=\"badge\" title=\"{}\">⚠ {}{}</span>",
        esc(&all.join(", ")),
        esc(first.as_str()),
        if codes.len() > 1 {
            format!(" +{}", codes.len() - 1)
        } else {
            String::new()
        }
    )
}

/// The ratio-to-baseline table: each configuration's value, its ratio and the verdict.
fn ratio_table(set: &RunSet, h: &mut String) {
    let base = &set.configs[set.baseline];
    let _ = writeln!(
        h,
        "<h3>Ratio to the baseline ({})</h3><p class=\"muted\">Headline values (MB/s, or \
         IOPS for tests that move no bytes) and their ratio to the baseline. \
         <span class=\"sig\">●</span> different (a configuration's tests and metrics \
         against the baseline corrected together, Holm, 95%, and not within the margin), = the \
         same within the margin, ○ undecided, ? cannot be told from run-to-run noise (a single run and no other stored run of its command): judged on \
         runs, not passes (t-test on ln of each run's value, two-sided; see \
         docs/statistics.md); bold: the best configuration for the test.</p>\
         <div class=\"wide\">\
         <table data-table=\"ratio\"><tr><th>Test</th><th>Metric</th>",
        esc(&base.label)
    );
    for c in &set.configs {
        let _ = write!(h, "<th class=\"n\">{}</th>", esc(&c.label));
    }
    h.push_str("</tr>\n");
    let decided: Vec<_> = (0..set.configs.len())
        .map(|i| (i != set.baseline).then(|| set.decisions(set.baseline, i)))
        .collect();
    for name in set.shared_test_names() {
        let tests = set.aligned(&name);
        let m = set::primary_metric(tests.iter().flatten().copied());
        // A configuration's value: the geometric mean of its runs' headlines.
        let vals: Vec<Option<f64>> = (0..tests.len())
            .map(|i| set.run_values(i, &name, m).geo_mean())
            .collect();
        let best = vals.iter().flatten().copied().reduce(|a, b| {
            if m.higher_is_better() {
                a.max(b)
            } else {
                a.min(b)
            }
        });
        let _ = write!(h, "<tr><td>{}</td><td>{}</td>", esc(&name), esc(m.label()));
        for i in 0..tests.len() {
            let Some(v) = vals[i] else {
                h.push_str("<td class=\"n\">-</td>");
                continue;
            };
            let is_best = Some(v) == best;
            let mut cell = num(v);
            if let Some(bv) = vals[set.baseline].filter(|x| *x > 0.0) {
                let _ = write!(cell, " <span class=\"ci\">{:.2}×</span>", v / bv);
                if i != set.baseline {
                    match set.judge(&name, m, set.baseline, i) {
                        set::Judgement::Tested(x) => {
                            let d = decided[i].as_ref().and_then(|d| d.get(&(name.clone(), m)));
                            let (class, mark, word) = match d.map(|d| d.call) {
                                Some(set::Call::Different) => ("sig", "●", "different"),
                                Some(set::Call::Same) => ("ci", "=", "same within the margin"),
                                _ => ("ci", "○", "undecided"),
                            };
                            let _ = write!(
                                cell,
                                " <span class=\"{class}\" title=\"{}\">{mark}</span>",
                                esc(&format!(
                                    "{word}, {}; {} vs {} run(s){}",
                                    p_text(x.test.p),
                                    x.test.n_b,
                                    x.test.n_a,
                                    if x.test.noise_runs > 0 {
                                        format!(
                                            "; noise from {} other runs of the command",
                                            x.test.noise_runs
                                        )
                                    } else {
                                        String::new()
                                    }
                                ))
                            );
                        }
                        set::Judgement::NoNoise { .. } => {
                            cell.push_str(
                                " <span class=\"ci\" title=\"cannot be told from run-to-run \
                                 noise: a single run and no other stored run of its \
                                 command\">?</span>",
                            );
                        }
                        _ => {}
                    }
                }
            }
            let style = if is_best {
                " style=\"font-weight:700\""
            } else {
                ""
            };
            let _ = write!(h, "<td class=\"n\"{style}>{cell}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
}

// ---------------------------------------------------------------------------------------
// One run

fn run_section(r: &RunRecord, in_set: bool, config: &str, h: &mut String) {
    let _ = writeln!(
        h,
        "<section class=\"run\" id=\"{}\"><h2>{}</h2>",
        run_anchor(r),
        esc(&run_title(r))
    );
    if in_set {
        let _ = writeln!(h, "<p class=\"muted\">Configuration: {}</p>", esc(config));
    }
    // The familiar view first (the CrystalDiskMark panel, ATTO's chart, or else the
    // results table) with the warnings, one line per code, beside it; then the facts.
    let tests: Vec<&TestRecord> = r.tests.iter().filter(|t| !t.passes.is_empty()).collect();
    let (rows, kinds) = set::rows_and_kinds(&tests);
    let mut view = String::new();
    if r.preset == "atto" {
        atto_chart(r, &tests, &rows, &mut view);
    } else if (r.preset == "cdm" || r.preset.starts_with("cdm-"))
        && kinds.iter().any(|k| k == "Read" || k == "Write")
    {
        cdm_panel(r, &tests, &rows, &kinds, &mut view);
    }
    let results = |h: &mut String| {
        if r.tests.is_empty() {
            h.push_str("<p>No test finished a pass.</p>");
        } else {
            results_table(r, h);
        }
    };
    if view.is_empty() {
        results(h);
        warnings_panel(r, h);
    } else {
        let _ = write!(h, "<div class=\"cols\"><div class=\"view\">{view}</div>");
        warnings_panel(r, h);
        h.push_str("</div>\n");
    }
    h.push_str("<dl class=\"facts\">");
    for (k, v) in facts::run_facts(r) {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    }
    h.push_str("</dl>\n");
    if !view.is_empty() {
        results(h);
    }
    mpi_hosts(r, h);
    ops_tables(r, h);
    let verdicts = facts::durability(r);
    if !verdicts.is_empty() {
        h.push_str("<h3>Durability, per sync method</h3><ul data-panel=\"durability\">");
        for v in &verdicts {
            let _ = write!(h, "<li>{}</li>", inline(v));
        }
        h.push_str("</ul>\n");
    }
    workload_details(r, h);
    latency_curves(&tests, &rows, &kinds, h);
    throughput_over_time(&tests, &rows, &kinds, h);
    errors(r, h);
    if !r.notes.is_empty() {
        h.push_str("<h3>Notes</h3><ul>");
        for n in &r.notes {
            let _ = write!(h, "<li>{}</li>", inline(n));
        }
        h.push_str("</ul>\n");
    }
    environment(r, h);
    h.push_str("</section>\n");
}

/// One small mark for the warnings about `test`: `⚠ CODE` for one code, `⚠ CODE +2` for
/// more, every code and first message in its title; it links to the first code's line in
/// the warnings panel.
fn badges(r: &RunRecord, test: &str) -> String {
    let mut codes: Vec<(&str, &str)> = Vec::new();
    for w in r
        .warnings
        .iter()
        .filter(|w| w.test.as_deref() == Some(test))
    {
        if !codes.iter().any(|(c, _)| *c == w.code.as_str()) {
            codes.push((w.code.as_str(), &w.message));
        }
    }
    codes.sort_by_key(|(c, _)| warngroup::severity(&iolab_measure::WarningCode::parse(c)));
    let Some((first, _)) = codes.first() else {
        return String::new();
    };
    let title: Vec<String> = codes
        .iter()
        .map(|(c, m)| format!("{c}: {}", m.replace('`', "")))
        .collect();
    format!(
        "<a class=\"badge\" href=\"#{}\" title=\"{}\">⚠ {}{}</a>",
        group_anchor(r, first),
        esc(&title.join("\n")),
        esc(first),
        if codes.len() > 1 {
            format!(" +{}", codes.len() - 1)
        } else {
            String::new()
        }
    )
}

/// Selects one direction of a pass (`|p| p.read.as_ref()`).
type PickDir = fn(&PassRecord) -> Option<&DirResult>;

fn dir_median(t: &TestRecord, pick: PickDir) -> Option<[f64; 4]> {
    let d: Vec<&DirResult> = t.passes.iter().filter_map(pick).collect();
    if d.is_empty() {
        return None;
    }
    let col =
        |f: fn(&DirResult) -> f64| iolab_stats::median(&d.iter().map(|x| f(x)).collect::<Vec<_>>());
    Some([
        col(|x| x.mb_s),
        col(|x| x.iops),
        col(|x| x.lat_us.mean),
        col(|x| x.lat_us.p99),
    ])
}

fn results_table(r: &RunRecord, h: &mut String) {
    // Block presets describe a test by its I/O pattern; the other workloads by what they
    // did (a replay's clients, a probe's write size), never a block size they do not have.
    let block = matches!(r.workload.as_str(), "" | "block" | "verify");
    let ops = facts::run_counts_operations(r);
    h.push_str("<div class=\"wide\"><table data-table=\"results\"><tr><th>Test</th>");
    if block {
        h.push_str("<th>rw</th><th class=\"n\">bs</th><th class=\"n\">QD×T</th>");
    } else {
        h.push_str("<th>What</th>");
    }
    h.push_str("<th class=\"n\">Passes</th>");
    if ops {
        h.push_str("<th class=\"n\">ops/s</th>");
    } else {
        h.push_str("<th class=\"n\">MB/s</th><th class=\"n\">IOPS</th>");
    }
    h.push_str(
        "<th class=\"n\">mean µs</th><th class=\"n\">p99 µs</th><th class=\"n\">p99.9 µs</th>\
         <th class=\"n\">max µs</th><th class=\"n\">CPU usr/sys %</th><th>Warnings</th></tr>\n",
    );
    let rates = if ops { 1 } else { 2 };
    let shape_cols = if block { 3 } else { 1 };
    for (i, t) in r.tests.iter().enumerate() {
        let j = &t.job;
        let _ = write!(
            h,
            "<tr id=\"{}\"><td class=\"name\">{}</td>",
            test_anchor(r, i),
            esc(&t.name)
        );
        if block {
            let _ = write!(
                h,
                "<td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}×{}</td>",
                esc(j.rw.as_str()),
                esc(&format_size_short(j.bs)),
                j.iodepth,
                j.numjobs
            );
        } else {
            let _ = write!(h, "<td>{}</td>", esc(&facts::test_what(r, t)));
        }
        let _ = write!(h, "<td class=\"n\">{}</td>", t.passes.len());
        if t.passes.is_empty() {
            h.push_str(&"<td class=\"n\">-</td>".repeat(rates + 5));
        } else {
            let s = &t.summary;
            let p999 =
                iolab_stats::median(&t.passes.iter().map(|p| p.lat_us.p999).collect::<Vec<_>>());
            let max = t.passes.iter().map(|p| p.lat_us.max).fold(0.0, f64::max);
            let usr =
                iolab_stats::median(&t.passes.iter().map(|p| p.cpu.usr_pct).collect::<Vec<_>>());
            let sys =
                iolab_stats::median(&t.passes.iter().map(|p| p.cpu.sys_pct).collect::<Vec<_>>());
            if ops {
                let _ = write!(
                    h,
                    "<td class=\"n\">{}<span class=\"ci\">{}</span></td>",
                    num(s.iops),
                    esc(&ci(&s.stats_iops))
                );
            } else {
                let _ = write!(
                    h,
                    "<td class=\"n\">{}<span class=\"ci\">{}</span></td><td class=\"n\">{}</td>",
                    num(s.mb_s),
                    esc(&ci(&s.stats_mb_s)),
                    num(s.iops)
                );
            }
            let _ = write!(
                h,
                "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}/{}</td>",
                lat(s.lat_mean_us),
                lat(s.lat_p99_us),
                lat(p999),
                lat(max),
                pct1(usr),
                pct1(sys)
            );
        }
        let _ = writeln!(h, "<td>{}</td></tr>", badges(r, &t.name));
        if j.rw.is_mixed() && !ops {
            let mix = j.rwmixread.min(100);
            let dirs: [(&str, u8, PickDir); 2] = [
                ("read", mix, |p| p.read.as_ref()),
                ("write", 100 - mix, |p| p.write.as_ref()),
            ];
            for (name, share, pick) in dirs {
                if let Some([mb, iops, mean, p99]) = dir_median(t, pick) {
                    let _ = writeln!(
                        h,
                        "<tr><td class=\"sub-row\" colspan=\"{}\">{name} ({share}%)</td>\
                         <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                         <td class=\"n\">{}</td><td colspan=\"4\"></td></tr>",
                        shape_cols + 2,
                        num(mb),
                        num(iops),
                        lat(mean),
                        lat(p99)
                    );
                }
            }
        }
    }
    h.push_str("</table></div>\n");
}

fn warnings_panel(r: &RunRecord, h: &mut String) {
    if r.warnings.is_empty() {
        h.push_str(
            "<aside class=\"warnings none\" data-panel=\"warnings\"><h3>Warnings</h3>\
             <p>None: no cache, compression, throttle, flush or noise condition was detected.</p></aside>",
        );
        return;
    }
    let groups = warngroup::group(&r.warnings);
    let _ = write!(
        h,
        "<aside class=\"warnings\" data-panel=\"warnings\"><h3>Warnings: {1} kind{2} ({0} in all)</h3>\
         <p class=\"muted\">Most serious first; one line per code, the details under it.</p><ul>",
        r.warnings.len(),
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for g in &groups {
        let code = g.code.as_str();
        let first = g.items[0].1;
        let _ = write!(
            h,
            "<li id=\"{}\" data-code=\"{}\"><span class=\"code\">{}</span> {}: {}",
            group_anchor(r, code),
            esc(code),
            esc(code),
            esc(&warngroup::scope(g, r.tests.len())),
            inline(&headline_of(g))
        );
        let _ = write!(
            h,
            "<details><summary>{} — details{}</summary><ul>",
            match g.items.len() {
                1 => "1 warning".to_string(),
                n => format!("{n} warnings"),
            },
            if first.fix.is_empty() { "" } else { " and fix" }
        );
        for (i, w) in &g.items {
            let _ = write!(h, "<li id=\"{}\">", warning_anchor(r, *i));
            if let Some(t) = &w.test {
                match r.tests.iter().position(|x| &x.name == t) {
                    Some(k) => {
                        let _ = write!(h, "<a href=\"#{}\">{}</a>: ", test_anchor(r, k), esc(t));
                    }
                    None => {
                        let _ = write!(h, "{}: ", esc(t));
                    }
                }
            }
            h.push_str(&inline(&w.message));
            if !w.fix.is_empty() {
                let _ = write!(h, " <i>Fix: {}</i>", inline(&w.fix));
            }
            h.push_str("</li>");
        }
        h.push_str("</ul></details></li>");
    }
    h.push_str("</ul></aside>");
}

/// The anchor of a run's group of warnings of one code.
fn group_anchor(r: &RunRecord, code: &str) -> String {
    format!("{}-w-{}", run_anchor(r), esc(code))
}

/// A group's one line: its message, marked as an example when the warnings of the code
/// say different things (each is in the details).
fn headline_of(g: &warngroup::Group<'_>) -> String {
    let first = &g.items[0].1.message;
    if g.items.iter().all(|(_, w)| &w.message == first) {
        first.clone()
    } else {
        format!("e.g. {first}")
    }
}

/// Escaped text with `code` spans (warning messages and fixes are written with
/// Markdown's backticks) shown as code, never as raw backticks.
pub fn inline(s: &str) -> String {
    let parts: Vec<&str> = s.split('`').collect();
    if parts.len() < 3 {
        return esc(&s.replace('`', "'"));
    }
    let mut out = String::new();
    let n = parts.len();
    for (i, p) in parts.iter().enumerate() {
        if i % 2 == 1 && i + 1 < n {
            let _ = write!(out, "<code>{}</code>", esc(p));
        } else if i % 2 == 1 {
            // An unpaired backtick: plain text.
            out.push('\'');
            out.push_str(&esc(p));
        } else {
            out.push_str(&esc(p));
        }
    }
    out
}

fn kind_class(kind: &str) -> &'static str {
    match kind {
        "Read" => "read",
        "Write" => "write",
        _ => "mix",
    }
}

fn cdm_panel(
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

fn atto_chart(r: &RunRecord, tests: &[&TestRecord], rows: &[String], h: &mut String) {
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

/// An MPI run: a bar chart of each host's MB/s per test beside the aggregate, and the
/// same figures as a table.
fn mpi_hosts(r: &RunRecord, h: &mut String) {
    let Some(p) = crate::mpi::per_host(r) else {
        return;
    };
    let tests: Vec<String> = p.tests.iter().map(|t| t.test.clone()).collect();
    let none = vec![None; tests.len()];
    let mut series: Vec<BarSeries> = p
        .hosts
        .iter()
        .enumerate()
        .map(|(i, (host, ranks))| BarSeries {
            name: format!(
                "{host} ({ranks} rank{})",
                if *ranks == 1 { "" } else { "s" }
            ),
            color: charts::color(i % (charts::PALETTE.len() - 1)),
            values: p.tests.iter().map(|t| t.hosts[i]).collect(),
            ci: none.clone(),
        })
        .collect();
    series.push(BarSeries {
        name: crate::mpi::ALL_HOSTS.to_string(),
        color: charts::PALETTE[charts::PALETTE.len() - 1],
        values: p.tests.iter().map(|t| t.aggregate).collect(),
        ci: none,
    });
    let u = &p.unit;
    let axis = match u.as_str() {
        "ops/s" => "operations per second",
        _ => "throughput (MB/s)",
    };
    let svg = charts::hbars(&format!("{u} per host"), &tests, &series, axis);
    let _ = writeln!(
        h,
        "<h3>Per host (MPI)</h3><figure data-chart=\"mpi-hosts\">{svg}<figcaption>Each \
         host's {u} per test, and all hosts together (black): {}.</figcaption></figure>",
        esc(&crate::mpi::explained(&p))
    );
    let _ = writeln!(
        h,
        "<table data-table=\"mpi-hosts\"><tr><th>Test</th><th>Host</th>\
         <th class=\"n\">Ranks</th><th class=\"n\">{}</th></tr>",
        esc(u)
    );
    for row in crate::mpi::rows(&p) {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&row[0]),
            esc(&row[1]),
            esc(&row[2]),
            esc(&row[3])
        );
    }
    h.push_str("</table>\n");
}

/// Tables found in a test's `extra.ops` (an array of objects, such as dbench's operation
/// table), rendered generically.
fn ops_tables(r: &RunRecord, h: &mut String) {
    for t in &r.tests {
        let Some(ops) = t.extra.get("ops").and_then(Value::as_array) else {
            continue;
        };
        if ops.is_empty() || !ops.iter().all(Value::is_object) {
            continue;
        }
        // The operation's name and count first (JSON objects may come with sorted keys),
        // the other columns in order of appearance.
        let mut keys: Vec<&str> = Vec::new();
        for first in ["op", "operation", "name", "count"] {
            if ops.iter().any(|o| o.get(first).is_some()) {
                keys.push(first);
            }
        }
        for o in ops {
            for k in o.as_object().expect("checked").keys() {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
        }
        let _ = write!(
            h,
            "<h3>Operations: {}</h3><div class=\"wide\"><table data-table=\"ops\"><tr>",
            esc(&t.name)
        );
        for k in &keys {
            let _ = write!(h, "<th>{}</th>", esc(&pretty_key(k)));
        }
        h.push_str("</tr>\n");
        for o in ops {
            h.push_str("<tr>");
            for k in &keys {
                let v = o.get(*k).unwrap_or(&Value::Null);
                let class = if v.is_number() { " class=\"n\"" } else { "" };
                // Milliseconds with three decimals, as dbench prints its table.
                let text = match v.as_f64() {
                    Some(ms) if k.ends_with("_ms") => format!("{ms:.3}"),
                    _ => scalar(v),
                };
                let _ = write!(h, "<td{class}>{text}</td>");
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table></div>\n");
    }
}

fn pretty_key(k: &str) -> String {
    let k = k
        .replace("_ms", " ms")
        .replace("_us", " µs")
        .replace("_pct", " %")
        .replace("_s", " s")
        .replace('_', " ");
    if k == "p99 ms" {
        "p99 ms".into()
    } else {
        k
    }
}

/// A JSON scalar as escaped HTML text; arrays and objects as compact JSON.
fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => num(f),
            _ => n.to_string(),
        },
        Value::String(s) => esc(s),
        other => esc(&other.to_string()),
    }
}

/// The scalar facts workloads keep in `extra` (copy phases, stream offsets, metadata
/// counts...), keys as rows and tests as columns.
fn workload_details(r: &RunRecord, h: &mut String) {
    let tests: Vec<&TestRecord> = r.tests.iter().filter(|t| t.extra.is_object()).collect();
    if tests.is_empty() {
        return;
    }
    let mut keys: Vec<&str> = Vec::new();
    for t in &tests {
        for (k, v) in t.extra.as_object().expect("checked") {
            if !(v.is_array() || v.is_object() || keys.contains(&k.as_str())) {
                keys.push(k);
            }
        }
    }
    if keys.is_empty() {
        return;
    }
    h.push_str(
        "<details data-table=\"workload\"><summary>Workload details (what each test \
         recorded besides its passes)</summary><div class=\"wide\"><table class=\"kv\"><tr><th></th>",
    );
    for t in &tests {
        let _ = write!(h, "<th>{}</th>", esc(&t.name));
    }
    h.push_str("</tr>\n");
    for k in keys {
        let _ = write!(h, "<tr><td>{}</td>", esc(k));
        for t in &tests {
            let _ = write!(
                h,
                "<td>{}</td>",
                scalar(t.extra.get(k).unwrap_or(&Value::Null))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div></details>\n");
}

fn merged(t: &TestRecord, pick: PickDir) -> LatencyHistogram {
    let mut hist = LatencyHistogram::new();
    for d in t.passes.iter().filter_map(pick) {
        hist.merge(&d.histogram);
    }
    hist
}

/// Points of a percentile curve: x in nines from 0 (the minimum) to what the I/O count
/// supports, at most 99.999%.
fn curve(hist: &LatencyHistogram) -> Vec<(f64, f64)> {
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

/// A test's colour: its direction's (read blue, write orange, mixed green), the same in
/// every chart of the report; a palette colour for a test that moves no data.
fn test_color(t: &TestRecord, i: usize) -> plotters::style::RGBColor {
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
fn chart_title(row: &str, kinds: &[&str]) -> String {
    let row = match row.split_once(": ") {
        Some((label, rest)) if rest == label || rest.starts_with(&format!("{label} ")) => rest,
        _ => row,
    };
    match kinds {
        [k] if !k.is_empty() => format!("{row} {k}"),
        _ => row.to_string(),
    }
}

/// Every direction of every test in `row` with I/Os: its name in the chart, its colour and
/// its latencies, all passes merged.
fn row_latencies(
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
        let picks: [(&str, PickDir); 2] = [
            ("read", |p| p.read.as_ref()),
            ("write", |p| p.write.as_ref()),
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
fn kinds_in<'k>(tests: &[&TestRecord], row: &str, kinds: &'k [String]) -> Vec<&'k str> {
    kinds
        .iter()
        .filter(|k| set::test_at(tests, row, k).is_some())
        .map(String::as_str)
        .collect()
}

fn latency_curves(tests: &[&TestRecord], rows: &[String], kinds: &[String], h: &mut String) {
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
fn fraction_at_or_below(hist: &LatencyHistogram, ns: u64) -> f64 {
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
fn bucket_edges(lo_us: f64, hi_us: f64) -> Vec<f64> {
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
fn latency_histogram(
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

/// `intro` and the figures in a grid; nothing when there are no figures.
fn figure_grid(h: &mut String, intro: &str, figs: &[String]) {
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
fn rate_series(t: &TestRecord, p: &PassRecord) -> Option<(f64, Vec<f64>)> {
    if facts::counts_operations(t) {
        if let (Some(series), Some(iv)) = (
            t.extra.get("ops_series").and_then(Value::as_array),
            t.extra.get("ops_interval_ms").and_then(Value::as_u64),
        ) {
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
                    v.as_f64().unwrap_or(0.0) / len
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

fn throughput_over_time(tests: &[&TestRecord], rows: &[String], kinds: &[String], h: &mut String) {
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

fn errors(r: &RunRecord, h: &mut String) {
    let errs: Vec<(&TestRecord, u32, &iolab_measure::IoErrorRecord)> = r
        .tests
        .iter()
        .flat_map(|t| {
            t.passes
                .iter()
                .flat_map(move |p| p.errors.iter().map(move |e| (t, p.index, e)))
        })
        .collect();
    if errs.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h3>I/O errors ({})</h3><div class=\"wide\"><table data-table=\"errors\"><tr><th>Test</th>\
         <th class=\"n\">Pass</th><th class=\"n\">errno</th><th>Message</th><th>Dir</th>\
         <th class=\"n\">Offset</th><th class=\"n\">Length</th></tr>",
        errs.len()
    );
    for (t, pass, e) in errs.iter().take(200) {
        let dir = match e.dir {
            iolab_spec::IoDir::Read => "read",
            iolab_spec::IoDir::Write => "write",
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{pass}</td><td class=\"n\">{}</td><td>{}</td>\
             <td>{dir}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&t.name),
            e.errno,
            esc(&e.message),
            e.offset,
            e.len
        );
    }
    h.push_str("</table></div>\n");
    if errs.len() > 200 {
        let _ = write!(
            h,
            "<p>… and {} more (all are in the JSON export).</p>",
            errs.len() - 200
        );
    }
}

fn environment(r: &RunRecord, h: &mut String) {
    h.push_str("<h3>Environment</h3>");
    if !r.env.is_object() {
        h.push_str("<p class=\"muted\">Not captured for this run.</p>\n");
        return;
    }
    h.push_str("<dl class=\"facts\" data-panel=\"environment\">");
    for (k, v) in facts::env_summary(&r.env) {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(&k), esc(&v));
    }
    h.push_str("</dl><details><summary>Everything captured</summary>");
    json_html(&r.env, h);
    h.push_str("</details>\n");
}

/// Nested key/value tables for a JSON value; nulls and empty collections are left out.
fn json_html(v: &Value, h: &mut String) {
    match v {
        Value::Object(map) => {
            h.push_str("<table class=\"kv\">");
            for (k, x) in map {
                let empty = match x {
                    Value::Null => true,
                    Value::Array(a) => a.is_empty(),
                    Value::Object(o) => o.is_empty(),
                    Value::String(s) => s.is_empty(),
                    _ => false,
                };
                if empty {
                    continue;
                }
                let _ = write!(h, "<tr><td>{}</td><td>", esc(k));
                json_html(x, h);
                h.push_str("</td></tr>");
            }
            h.push_str("</table>");
        }
        Value::Array(a) if a.iter().all(|x| !(x.is_object() || x.is_array())) => {
            let parts: Vec<String> = a.iter().map(scalar).collect();
            h.push_str(&parts.join(", "));
        }
        Value::Array(a) => {
            for x in a {
                json_html(x, h);
            }
        }
        other => h.push_str(&scalar(other)),
    }
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
