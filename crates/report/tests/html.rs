//! The HTML report built from hand-made runs of every workload type and from a study: one
//! self-contained document, every chart and table where it belongs, user text escaped.
//! (The CLI tests open reports of real runs in headless Chromium.)

mod common;

use iolab_measure::{RunRecord, Warning, WarningCode};
use iolab_report::html::{esc, render};
use iolab_report::set::RunSet;

/// Keeps a report under `target/test-artifacts/` for a person to open.
fn save(name: &str, html: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), html).unwrap();
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Every element that must be closed is closed as often as opened.
fn assert_balanced(html: &str) {
    for tag in [
        "section", "table", "figure", "div", "aside", "details", "svg", "ul", "dl", "main",
    ] {
        let open = count(html, &format!("<{tag}>")) + count(html, &format!("<{tag} "));
        let close = count(html, &format!("</{tag}>"));
        assert_eq!(open, close, "<{tag}> opened {open} times, closed {close}");
    }
}

/// No URL outside the SVG namespace declaration, and a policy that forbids loading any.
fn assert_offline(html: &str) {
    let stripped = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for scheme in ["http://", "https://", "//cdn", "src=\"", "@import", "url("] {
        assert!(!stripped.contains(scheme), "found {scheme:?}");
    }
    assert!(html.contains("Content-Security-Policy"));
    assert!(html.contains("default-src 'none'"));
    assert!(!html.contains("<script"));
}

fn one(run: RunRecord) -> String {
    let html = render(&RunSet::per_run(vec![run]));
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_balanced(&html);
    assert_offline(&html);
    html
}

#[test]
fn cdm_run_has_the_panel_curves_time_series_and_warnings_beside_the_numbers() {
    let html = one(common::cdm_run());
    save("report-lib-cdm.html", &html);
    assert_eq!(count(&html, "data-chart=\"cdm\""), 1);
    // One latency panel and one throughput panel per row: 4 CrystalDiskMark rows.
    assert_eq!(count(&html, "data-chart=\"latency\""), 4);
    assert_eq!(count(&html, "data-chart=\"throughput\""), 4);
    assert_eq!(count(&html, "data-chart=\"latency-histogram\""), 4);
    assert_eq!(count(&html, "<svg class=\"chart\""), 12);
    // The warning's code sits on its test's row and in the panel with its message.
    let row = html
        .find("<td class=\"name\">SEQ1M Q8T1 Write</td>")
        .unwrap();
    let row_end = row + html[row..].find("</tr>").unwrap();
    assert!(html[row..row_end].contains("CACHE_SMALL_REGION"));
    assert!(html.contains("data-panel=\"warnings\""));
    assert!(html.contains("fits in the drive&#39;s SLC cache"));
    // Headline numbers: SEQ1M Q8T1 Read is 3000 IOPS of 1 MiB = 3146 MB/s.
    assert!(html.contains("<span class=\"big\">3146</span>"), "CDM tile");
    // The mixed test gets its directions as sub-rows.
    assert!(html.contains("read (70%)") && html.contains("write (30%)"));
    // The environment.
    assert!(html.contains("data-panel=\"environment\""));
    assert!(html.contains("6.8.0"));
}

#[test]
fn atto_run_has_the_block_size_chart() {
    let html = one(common::atto_run());
    assert_eq!(count(&html, "data-chart=\"atto\""), 1);
    assert_eq!(count(&html, "data-chart=\"cdm\""), 0);
    let atto = &html[html.find("data-chart=\"atto\"").unwrap()..];
    let atto = &atto[..atto.find("</figure>").unwrap()];
    for size in ["512 B", "4 KiB", "64 KiB", "1 MiB", "64 MiB"] {
        assert!(atto.contains(&format!(">\n{size}\n<")), "no {size} label");
    }
    assert!(atto.contains("Write") && atto.contains("Read"));
    // Bars are drawn by plotters as rectangles, two per size.
    assert!(count(atto, "<rect") >= 10);
}

#[test]
fn every_workload_type_renders_with_its_own_tables() {
    for run in common::workload_runs()
        .into_iter()
        .chain([common::custom_run()])
    {
        let workload = run.workload.clone();
        let html = one(run);
        assert!(
            html.contains("data-table=\"results\""),
            "{workload}: no results"
        );
        assert!(
            count(&html, "data-chart=\"latency\"") >= 1,
            "{workload}: no latency curve"
        );
        assert!(
            count(&html, "data-chart=\"throughput\"") >= 1,
            "{workload}: no time series"
        );
        match workload.as_str() {
            "dbench" => {
                let ops = &html[html.find("data-table=\"ops\"").expect("ops table")..];
                let ops = &ops[..ops.find("</table>").unwrap()];
                let header = &ops[..ops.find("</tr>").unwrap()];
                // The operation first, then the count, then the other columns.
                let op = header.find(">op<").unwrap();
                let cnt = header.find(">count<").unwrap();
                let p99 = header.find(">p99 ms<").unwrap();
                assert!(op < cnt && cnt < p99, "{header}");
                assert!(ops.contains("NTCreateX") && ops.contains("4.016"));
            }
            "metadata" => {
                // A scalar `ops` count is not a table.
                assert!(!html.contains("data-table=\"ops\""));
                assert!(html.contains("data-table=\"workload\""));
            }
            "block" => assert!(html.contains("data-table=\"errors\"")),
            _ => {}
        }
    }
}

#[test]
fn user_text_is_escaped_everywhere() {
    let mut run = common::cdm_run();
    let evil = "<script>alert(\"x\")</script> & 'q'";
    run.label = Some(evil.into());
    run.target.path = format!("/mnt/{evil}");
    run.notes.push(evil.into());
    run.tests[0].name = evil.into();
    run.warnings.push(Warning {
        code: WarningCode::Other("X<Y".into()),
        message: evil.into(),
        fix: evil.into(),
        test: Some(evil.into()),
    });
    run.env = serde_json::json!({"kernel_release": evil, "nested": {"k<": [evil]}});
    let html = one(run);
    assert!(!html.contains("<script>"));
    assert!(html.contains(&esc(evil)));
    assert_eq!(
        esc(evil),
        "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"
    );
}

#[test]
fn a_study_adds_grouped_bars_ratios_and_the_ranked_score() {
    let set = RunSet::study("strip size", common::study_runs());
    let html = render(&set);
    save("report-lib-study.html", &html);
    assert_balanced(&html);
    assert_offline(&html);
    assert!(html.contains("<h1>iolab study: strip size</h1>"));
    // One grouped-bar panel per CrystalDiskMark row, bars per configuration.
    assert_eq!(count(&html, "data-chart=\"study-bars\""), 4);
    for t in [
        "data-table=\"ratio\"",
        "data-table=\"score\"",
        "data-table=\"runs\"",
    ] {
        assert_eq!(count(&html, t), 1, "{t}");
    }
    // Every run keeps its own section.
    assert_eq!(count(&html, "<section class=\"run\""), 3);
    // Score: totals 0.95 / 1.00 / 0.96 (hand computation in stats' and markdown's tests),
    // ranked 32KB, 64KB, 16KB.
    let score = &html[html.find("data-table=\"score\"").unwrap()..];
    let score = &score[..score.find("</table>").unwrap()];
    let a = score.find("<td>32KB</td>").unwrap();
    let b = score.find("<td>64KB</td>").unwrap();
    let c = score.find("<td>16KB</td>").unwrap();
    assert!(a < b && b < c, "{score}");
    // Ratios to the baseline (16KB): random tests of 32KB are 1/0.9 = 1.11×.
    let ratio = &html[html.find("data-table=\"ratio\"").unwrap()..];
    let row = &ratio[ratio.find("<td>RND4K Q1T1 Read</td>").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("1.00×") && row.contains("1.11×") && row.contains("1.07×"),
        "{row}"
    );
    // One run per configuration: however tight its passes, a difference cannot be told
    // from run-to-run noise, and the ranks share 1-3.
    assert!(!row.contains("class=\"sig\""), "{row}");
    assert!(
        row.contains("cannot be told from run-to-run noise"),
        "{row}"
    );
    assert_eq!(count(score, ">1-3<"), 3, "{score}");
    assert!(html.contains("Ranks cannot be told apart from run-to-run noise"));

    // Three repeats with ±1% between runs: 32KB first on its own, the rest share 2-3.
    let html = render(&RunSet::study("strip size", common::study_runs_repeated()));
    assert_balanced(&html);
    let score = &html[html.find("data-table=\"score\"").unwrap()..];
    let score = &score[..score.find("</table>").unwrap()];
    assert!(
        score.contains("<td class=\"n\">1</td><td>32KB</td>"),
        "{score}"
    );
    assert_eq!(count(score, ">2-3<"), 2, "{score}");
    let ratio = &html[html.find("data-table=\"ratio\"").unwrap()..];
    let row = &ratio[ratio.find("<td>RND4K Q1T1 Read</td>").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert_eq!(count(row, "class=\"sig\""), 2, "{row}");
}

#[test]
fn a_study_with_a_scrub_test_shows_its_counts() {
    let html = render(&RunSet::study("s", common::scrub_study_runs()));
    assert_balanced(&html);
    assert_offline(&html);
    assert_eq!(count(&html, "data-table=\"facts\""), 1);
    let t = &html[html.find("data-table=\"facts\"").unwrap()..];
    let t = &t[..t.find("</table>").unwrap()];
    let row = &t[t.find("<td>repaired</td>").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains(">32<") && row.contains(">11 (32)<"), "{row}");
    assert!(t.contains("⚠ FAIL"), "{t}");
}

#[test]
fn a_latency_carries_one_unit_in_tiles_and_none_of_its_own_in_columns() {
    // RND4K Q32T1 Read's passes spread 40..600 µs; make SEQ1M Q8T1 Read's p99 12.3 ms.
    let mut run = common::cdm_run();
    let t = run
        .tests
        .iter_mut()
        .find(|t| t.name == "SEQ1M Q8T1 Read")
        .unwrap();
    t.summary.lat_p99_us = 12_345.0;
    let html = one(run);
    assert!(!html.contains("ms µs"), "a doubled unit");
    assert!(html.contains("IOPS · p99 12.3 ms</span>"), "tile");
    // The results table's p99 µs column holds µs.
    let row = html
        .find("<td class=\"name\">SEQ1M Q8T1 Read</td>")
        .unwrap();
    let row_end = row + html[row..].find("</tr>").unwrap();
    assert!(
        html[row..row_end].contains(">12345<"),
        "{}",
        &html[row..row_end]
    );
}

#[test]
fn the_probe_and_metadata_are_charted_in_operations() {
    // Two configurations of the fsync probe: their study panels count durable writes.
    let mut runs = Vec::new();
    for (label, f) in [("a", 1.0), ("b", 2.0)] {
        let mut r = common::workload_runs().remove(0);
        assert_eq!(r.workload, "fsync");
        for t in &mut r.tests {
            t.summary.iops *= f;
        }
        r.study = Some("probe".into());
        r.config_label = Some(label.into());
        runs.push(r);
    }
    let html = render(&RunSet::study("probe", runs));
    let panels: Vec<&str> = html
        .split("<figure data-chart=\"study-bars\">")
        .skip(1)
        .collect();
    assert_eq!(panels.len(), 3, "one panel per method");
    for p in panels {
        let caption = &p[p.find("<figcaption>").unwrap()..p.find("</figcaption>").unwrap()];
        assert!(caption.contains("ops/s by configuration"), "{caption}");
        assert!(!p[..p.find("</figure>").unwrap()].contains("MB/s"));
    }
    // A single run: ops/s in the results table, and its throughput over time in ops/s.
    let meta = common::workload_runs()
        .into_iter()
        .find(|r| r.workload == "metadata")
        .unwrap();
    let html = one(meta);
    assert!(html.contains("<th class=\"n\">ops/s</th>"));
    assert!(!html.contains("<th class=\"n\">MB/s</th>"));
    assert!(html.contains("<th>What</th>") && !html.contains("QD×T"));
}

/// Every `<svg class="chart" ...>` element of `html`.
fn charts_of(html: &str) -> Vec<&str> {
    html.match_indices("<svg class=\"chart\"")
        .map(|(at, _)| {
            let end = at + html[at..].find("</svg>").unwrap();
            &html[at..end]
        })
        .collect()
}

/// The number in `attr="N"` of the first `tag` of `svg`.
fn attr_num(svg: &str, attr: &str) -> f64 {
    let at = svg.find(&format!(" {attr}=\"")).unwrap() + attr.len() + 3;
    svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
}

#[test]
fn charts_are_readable_and_each_direction_has_one_colour() {
    // SVG colours as plotters writes them: #RRGGBB.
    const READ: &str = "#0072B2";
    const WRITE: &str = "#D55E00";
    for (name, run) in [
        ("cdm", common::cdm_run()),
        ("atto", common::atto_run()),
        ("dbench", common::dbench_run()),
    ] {
        let html = one(run);
        let charts = charts_of(&html);
        assert!(!charts.is_empty(), "{name}");
        for svg in &charts {
            // Drawn 560 px wide and shown two per row at 1280 px (about 560 px each), one
            // per row on paper: text stays at 12 px or more on a laptop and on an A4 page.
            assert_eq!(attr_num(svg, "width"), 560.0, "{name}: {}", &svg[..200]);
            for (at, _) in svg.match_indices("font-size=\"") {
                let v: f64 = svg[at + 11..at + 11 + svg[at + 11..].find('"').unwrap()]
                    .trim_end_matches("px")
                    .parse()
                    .unwrap();
                assert!(v >= 16.0, "{name}: font-size {v}");
            }
            // No test named twice in a title.
            assert!(!svg.contains("dbench: dbench"), "{name}");
        }
        // Charts two per row on a laptop screen, one per row in print and below 1000 px.
        assert!(html.contains(".grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));"));
        assert!(
            html.contains("@media print{")
                && html.contains(" .grid{grid-template-columns:minmax(0,1fr)}")
        );
        assert!(!html.contains("auto-fill"));
        // A legend names each test once, never each pass: a time chart of seven passes of
        // a read, a write and a mix has three entries.
        for svg in charts
            .iter()
            .filter(|s| s.contains(": throughput over time"))
        {
            assert!(
                count(svg, "pass 1") == 0 && count(svg, "passes)") <= 3,
                "{name}: {svg}"
            );
        }
        // Reads blue and writes orange wherever a chart shows a direction; the old
        // green/red pair nowhere.
        if name != "dbench" {
            let all = charts.join("");
            assert!(all.contains(READ) && all.contains(WRITE), "{name}");
        }
        for old in ["#2EA043", "#D53E30"] {
            assert!(!html.to_uppercase().contains(old), "{name}: {old}");
        }
        // Axes say their unit.
        let all = charts.join("");
        assert!(
            all.contains("(µs, log scale)") || all.contains("(MB/s)"),
            "{name}"
        );
    }
    let html = one(common::dbench_run());
    let latency = &html[html.find("data-chart=\"latency\"").unwrap()..];
    assert!(latency.contains(": latency percentiles"));
    // The histogram's shares of one direction add up to 100%: read from the bar heights
    // is not possible in SVG text, so the chart is checked to exist with its axis.
    let hist = &html[html.find("data-chart=\"latency-histogram\"").unwrap()..];
    assert!(hist.contains("share of I/Os (%)"));
}

/// The run opens with its familiar view and the warnings beside it, one line per code with
/// the details collapsed, most serious first; warning text written with backticks shows as
/// code, never as raw backticks.
#[test]
fn a_run_opens_with_its_view_and_one_line_per_warning_code() {
    let mut run = common::cdm_run();
    let tests: Vec<String> = run.tests.iter().map(|t| t.name.clone()).collect();
    for t in &tests {
        run.warnings.push(Warning {
            code: WarningCode::NotConverged,
            message: format!("{t}: MB/s varied by 9% after 7 passes"),
            fix: "more passes (`--max-runs 20`)".into(),
            test: Some(t.clone()),
        });
    }
    run.notes.push("ran with `--buffered`".into());
    run.warnings.push(Warning {
        code: WarningCode::PageCache,
        message: "reads came from the page cache".into(),
        fix: "use `--direct`".into(),
        test: None,
    });
    let html = one(run);
    save("report-lib-warnings.html", &html);
    let panel = &html[html.find("data-panel=\"warnings\"").unwrap()..];
    let panel = &panel[..panel.find("</aside>").unwrap()];
    // One line per code, PAGE_CACHE (a cache caveat) before NOT_CONVERGED (noise).
    assert_eq!(count(panel, "data-code=\"NOT_CONVERGED\""), 1, "{panel}");
    let cache = panel.find("data-code=\"PAGE_CACHE\"").unwrap();
    let noise = panel.find("data-code=\"NOT_CONVERGED\"").unwrap();
    assert!(cache < noise, "{panel}");
    assert!(
        panel.contains(&format!("all {} tests", tests.len())),
        "{panel}"
    );
    // The details: every warning, behind a closed <details>.
    assert_eq!(count(panel, "<details>"), count(panel, "data-code="));
    assert!(!panel.contains("<details open"));
    assert_eq!(count(panel, "MB/s varied by 9%"), tests.len() + 1);
    // Backticks became code.
    assert!(panel.contains("<code>--max-runs 20</code>"), "{panel}");
    assert!(html.contains("ran with <code>--buffered</code>"));
    let text_only: String = html
        .split("<style>")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part
            } else {
                &part[part.find("</style>").unwrap()..]
            }
        })
        .collect();
    assert!(!text_only.contains('`'), "a raw backtick");
    // The familiar view comes first, with the warnings beside it; the facts and the
    // results table after; charts last.
    let tiles = html.find("data-chart=\"cdm\"").unwrap();
    let facts = html.find("<dl class=\"facts\">").unwrap();
    let results = html.find("data-table=\"results\"").unwrap();
    let chart = html.find("<svg class=\"chart\"").unwrap();
    assert!(tiles < html.find("data-panel=\"warnings\"").unwrap());
    assert!(tiles < facts && facts < results && results < chart);
    // A table row carries one compact mark, not a badge per warning.
    let row = html
        .find("<td class=\"name\">SEQ1M Q8T1 Read</td>")
        .unwrap();
    let row = &html[row..row + html[row..].find("</tr>").unwrap()];
    assert_eq!(count(row, "class=\"badge\""), 1, "{row}");
}

/// Two cdm runs side by side open with CrystalDiskMark's tiles holding both runs' numbers
/// and the verdicts, the ratio table beside them; the bars wait behind a click; a run
/// that is not a study is not told to repeat "the study".
#[test]
fn a_comparison_of_cdm_runs_opens_with_tiles_and_verdicts() {
    let a = common::cdm_run();
    let mut b = common::cdm_run_with(&|_| 1.5);
    b.id = Some(a.id.unwrap_or(1) + 1);
    b.uuid = "00000000-0000-4000-8000-0000000000b2".into();
    b.label = Some("after".into());
    let html = render(&RunSet::per_run(vec![a, b]));
    save("report-lib-compare.html", &html);
    assert_balanced(&html);
    let cmp = html.find("<section class=\"comparison\"").unwrap();
    let tiles = html.find("data-chart=\"cdm-compare\"").unwrap();
    let ratio = html.find("data-table=\"ratio\"").unwrap();
    let bars = html.find("data-chart=\"study-bars\"").unwrap();
    let runs = html.find("data-table=\"runs\"").unwrap();
    assert!(cmp < tiles && tiles < ratio && ratio < bars && bars < runs);
    assert!(html[..bars].contains("<details data-panel=\"study-bars\">"));
    let tile = &html[tiles..ratio];
    assert!(tile.contains("+50% ? cannot tell (1 run)"), "{tile}");
    assert!(!html.contains("repeat the study"), "not a study");
    assert!(html.contains("with --repeat 3"));
}
