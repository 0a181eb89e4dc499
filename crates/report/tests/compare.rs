//! Comparison of two runs with a known difference (one test 50% faster, the others equal),
//! single-pass sides, more than two sides, the JSON document, and the history's marks.

mod common;

use iolab_report::compare::{compare, document, render, Verdict};
use iolab_report::history;
use iolab_report::set::{Metric, RunSet};

/// A, and B with SEQ1M Q8T1 Read 1.5 times as fast and RND4K Q1T1 Write 0.8 times.
fn pair() -> RunSet {
    let a = common::cdm_run();
    let mut b = common::cdm_run_with(&|name: &str| match name {
        "SEQ1M Q8T1 Read" => 1.5,
        "RND4K Q1T1 Write" => 0.8,
        _ => 1.0,
    });
    b.id = Some(43);
    b.label = Some("after".into());
    b.warnings[0].code = iolab_measure::WarningCode::BusyDevice;
    RunSet::per_run(vec![a, b])
}

#[test]
fn a_known_difference_is_found_and_nothing_else() {
    let c = compare(&pair());
    assert_eq!(c.sides.len(), 2);
    assert_eq!(c.sides[1].label, "after");
    let row = |test: &str, m: Metric| {
        c.rows
            .iter()
            .find(|r| r.test == test && r.metric == m)
            .unwrap_or_else(|| panic!("no {test} {m:?}"))
    };
    // 3000 -> 4500 I/Os of 1 MiB per second: +50%, passes ±0.3%: p far below 0.05.
    let fast = row("SEQ1M Q8T1 Read", Metric::MbS);
    assert_eq!(fast.cells[0].median, Some(3000.0 * 1048576.0 / 1e6));
    assert!((fast.cells[1].change_pct.unwrap() - 50.0).abs() < 1e-9);
    match &fast.cells[1].verdict {
        Verdict::Better(w) => assert!(w.p < 1e-4 && w.t > 0.0, "{w:?}"),
        v => panic!("{v:?}"),
    }
    assert_eq!(
        row("SEQ1M Q8T1 Read", Metric::Iops).cells[1].verdict.key(),
        "better"
    );
    // Slower is worse; for latency lower is better.
    let slow = row("RND4K Q1T1 Write", Metric::MbS);
    assert!((slow.cells[1].change_pct.unwrap() + 20.0).abs() < 1e-9);
    assert_eq!(slow.cells[1].verdict.key(), "worse");
    // Everything else is the same passes: t = 0, p = 1, not significant, 0% change.
    for r in &c.rows {
        if r.test == "SEQ1M Q8T1 Read" || r.test == "RND4K Q1T1 Write" {
            continue;
        }
        let cell = &r.cells[1];
        assert_eq!(cell.change_pct, Some(0.0), "{} {:?}", r.test, r.metric);
        match &cell.verdict {
            Verdict::Same(w) => assert!((w.p - 1.0).abs() < 1e-12),
            v => panic!("{} {:?}: {v:?}", r.test, r.metric),
        }
    }
    // Latency did not move in the fast test either: the difference is throughput only.
    assert_eq!(
        row("SEQ1M Q8T1 Read", Metric::LatMean).cells[1]
            .verdict
            .key(),
        "same"
    );
    assert_eq!(c.warnings.len(), 2);
}

#[test]
fn the_terminal_table_says_what_and_how() {
    let text = render(&compare(&pair()));
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(text.contains("Welch's t-test"));
    assert!(text.contains("two-sided, 95%"));
    let line = text
        .lines()
        .find(|l| l.starts_with("SEQ1M Q8T1 Read"))
        .unwrap();
    assert!(line.contains("3146") && line.contains("4719"), "{line}");
    assert!(
        line.contains("+50%") && line.contains("yes, better (p<0.001)"),
        "{line}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("RND4K Q1T1 Write"))
        .unwrap();
    assert!(
        line.contains("-20%") && line.contains("yes, worse"),
        "{line}"
    );
    assert!(text.contains("no (p=1.00)"));
    // Warnings from both sides, with the side they come from; the test is marked.
    assert!(text.contains("A: [CACHE_SMALL_REGION] SEQ1M Q8T1 Write"));
    assert!(text.contains("B: [BUSY_DEVICE] SEQ1M Q8T1 Write"));
    assert!(text.contains("SEQ1M Q8T1 Write !"));
}

#[test]
fn single_passes_cannot_be_tested() {
    let a = common::atto_run();
    let mut b = common::atto_run();
    b.id = Some(7);
    let c = compare(&RunSet::per_run(vec![a, b]));
    assert!(!c.rows.is_empty());
    for r in &c.rows {
        assert_eq!(r.cells[1].verdict, Verdict::TooFewPasses(1));
    }
    assert!(render(&c).contains("n/a (1 pass)"));
}

#[test]
fn three_sides_and_missing_tests() {
    let a = common::cdm_run();
    let mut b = common::cdm_run_with(&|_| 1.2);
    b.id = Some(2);
    let mut c3 = common::cdm_run();
    c3.id = Some(3);
    c3.tests.retain(|t| t.name.starts_with("SEQ"));
    let c = compare(&RunSet::per_run(vec![a, b, c3]));
    let text = render(&c);
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(text.contains("C vs A") || text.contains("C v"), "{text}");
    assert!(c
        .partial
        .iter()
        .any(|(t, have)| t == "RND4K Q1T1 Read" && have == &["A", "B"]));
    let r = c
        .rows
        .iter()
        .find(|r| r.test == "RND4K Q1T1 Read" && r.metric == Metric::MbS)
        .unwrap();
    assert_eq!(r.cells[2].verdict, Verdict::Missing);
    assert!((r.cells[1].change_pct.unwrap() - 20.0).abs() < 1e-9);
}

#[test]
fn the_json_document() {
    let c = compare(&pair());
    let doc = document(&c, "0.1.0");
    assert_eq!(doc["schema"], "iolab.comparison/1");
    assert_eq!(doc["alpha"], 0.05);
    assert_eq!(doc["sides"][1]["run_ids"], serde_json::json!([43]));
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "SEQ1M Q8T1 Read")
        .unwrap();
    let b = &t["metrics"]["mb_s"][1];
    assert_eq!(b["side"], "B");
    assert_eq!(b["verdict"], "better");
    assert_eq!(b["significant"], true);
    assert_eq!(b["passes"], 3);
    assert!(b["p"].as_f64().unwrap() < 1e-4);
    assert!((b["change_pct"].as_f64().unwrap() - 50.0).abs() < 1e-9);
    assert_eq!(t["metrics"]["mb_s"][0]["verdict"], "baseline");
    assert_eq!(doc["warnings"].as_array().unwrap().len(), 2);
}

#[test]
fn history_marks_changes_beyond_the_noise() {
    let mut runs = Vec::new();
    for (i, f) in [1.0, 1.0, 1.5, 1.5].iter().enumerate() {
        let mut r =
            common::cdm_run_with(&|name: &str| if name == "SEQ1M Q8T1 Read" { *f } else { 1.0 });
        r.id = Some(i as i64 + 1);
        r.started_at = format!("2025-03-0{}T10:00:00Z", i + 1);
        runs.push(r);
    }
    let mut other = common::atto_run();
    other.id = Some(9);
    runs.push(other);
    let s = history::series(&runs);
    assert_eq!(s.len(), 2, "cdm and atto are separate series");
    let cdm = &s[0];
    assert_eq!(cdm.runs.len(), 4);
    assert_eq!(
        cdm.point(0, "SEQ1M Q8T1 Read").unwrap().1,
        history::Move::First
    );
    assert!(
        matches!(cdm.point(1, "SEQ1M Q8T1 Read").unwrap().1, history::Move::Steady(c) if c == 0.0)
    );
    match cdm.point(2, "SEQ1M Q8T1 Read").unwrap().1 {
        history::Move::Up(c) => assert!((c - 50.0).abs() < 1e-9),
        m => panic!("{m:?}"),
    }
    assert!(matches!(
        cdm.point(3, "SEQ1M Q8T1 Read").unwrap().1,
        history::Move::Steady(_)
    ));
    // ATTO's single passes cannot be tested, but its first run is just first.
    assert_eq!(s[1].point(0, "4K Read").unwrap().1, history::Move::First);

    let text = history::render(&runs);
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    assert!(text.contains("3146 ") && text.contains("4719↑"), "{text}");
    assert!(
        text.contains("first → last") && text.contains("+50%"),
        "{text}"
    );
    assert!(text.contains("trend"));
    let doc = history::document(&runs, "0.1.0");
    assert_eq!(doc["schema"], "iolab.history/1");
    let third = &doc["series"][0]["runs"][2]["tests"][0];
    assert_eq!(third["test"], "SEQ1M Q8T1 Read");
    assert_eq!(third["movement"], "up");
}
