//! Comparisons judged on runs: three runs a side with a known difference, single runs that
//! cannot be told from noise, single runs against the noise of other runs of the same
//! command, more than two sides, the JSON document, and the history's marks.

mod common;

use std::collections::HashMap;

use iolab_measure::RunRecord;
use iolab_report::compare::{compare, document, evidence, render, Verdict};
use iolab_report::history;
use iolab_report::set::{Judgement, Metric, Noise, RunSet};
use iolab_stats::noise::Method;

/// Terminal text with its line breaks and indents undone, for phrase checks.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A cdm run with id `id`, every test scaled by `base`, SEQ1M Q8T1 Read also by `fast`.
fn run(id: i64, base: f64, fast: f64) -> RunRecord {
    let mut r = common::cdm_run_with(&|name: &str| {
        if name == "SEQ1M Q8T1 Read" {
            base * fast
        } else {
            base
        }
    });
    r.id = Some(id);
    r
}

/// Run-to-run wobble of ±1% (three runs: 1.00, 1.01, 0.99).
const WOBBLE: [f64; 3] = [1.0, 1.01, 0.99];

/// Labels before (runs 1-3) and after (runs 4-6): SEQ1M Q8T1 Read 1.5 times as fast after.
fn three_a_side() -> RunSet {
    let before = (0..3).map(|k| run(k as i64 + 1, WOBBLE[k], 1.0)).collect();
    let after = (0..3)
        .map(|k| run(k as i64 + 4, WOBBLE[(k + 1) % 3], 1.5))
        .collect();
    RunSet::groups(vec![
        ("label before".into(), before),
        ("label after".into(), after),
    ])
}

fn row<'a>(
    c: &'a iolab_report::compare::Comparison,
    test: &str,
    m: Metric,
) -> &'a iolab_report::compare::Row {
    c.rows
        .iter()
        .find(|r| r.test == test && r.metric == m)
        .unwrap_or_else(|| panic!("no {test} {m:?}"))
}

/// No row's B is "different", but the rows `skip` picks; rows of tests other than
/// SEQ1M Q8T1 Read (moved by a ±1% wobble only) are "same" within the default ±5%.
fn all_same(
    c: &iolab_report::compare::Comparison,
    skip: impl Fn(&iolab_report::compare::Row) -> bool,
) {
    for r in c.rows.iter().filter(|r| !skip(r)) {
        let key = r.cells[1].verdict.key();
        assert_ne!(key, "different", "{} {:?}", r.test, r.metric);
        if r.test != "SEQ1M Q8T1 Read" {
            let d = r.cells[1].decision.as_ref().expect("decided");
            assert_eq!(d.call.key(), "same", "{} {:?}", r.test, r.metric);
        }
    }
}

#[test]
fn three_runs_a_side_find_a_known_difference_and_nothing_else() {
    let c = compare(&three_a_side());
    assert_eq!(c.sides[1].run_ids, [4, 5, 6]);
    let fast = row(&c, "SEQ1M Q8T1 Read", Metric::MbS);
    // Geometric mean of 3146 × (1, 1.01, 0.99) on A; the same wobble times 1.5 on B.
    let a = 3000.0 * 1048576.0 / 1e6;
    let gm = (1.01f64 * 0.99).powf(1.0 / 3.0);
    assert!(
        (fast.cells[0].value.unwrap() - a * gm).abs() < 0.01 * a,
        "{fast:?}"
    );
    assert_eq!(fast.cells[0].runs, 3);
    assert_eq!(fast.cells[1].run_values.len(), 3);
    assert!(
        (fast.cells[1].change_pct.unwrap() - 50.0).abs() < 0.1,
        "{fast:?}"
    );
    match &fast.cells[1].verdict {
        Verdict::Better(t) => {
            assert_eq!(t.test.method, Method::Welch);
            assert_eq!((t.test.n_a, t.test.n_b), (3, 3));
            assert!(t.test.p < 1e-4 && t.test.t > 0.0, "{t:?}");
            assert!(t.test.ratio_low < 1.5 && 1.5 < t.test.ratio_high, "{t:?}");
            assert!(t.noise_ids.is_empty());
        }
        v => panic!("{v:?}"),
    }
    // Everything else moved by the wobble only: same.
    all_same(&c, |r| {
        r.test == "SEQ1M Q8T1 Read" && r.metric != Metric::LatMean
    });
    let text = render(&c);
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("SEQ1M Q8T1 Read"))
        .unwrap();
    assert!(
        line.contains("+50%") && line.contains("different, better (p<0.001)"),
        "{line}"
    );
    let f = flat(&text);
    assert!(
        f.contains("B vs A: 3 runs on A, 3 runs on B: Welch's t-test on ln(run value)."),
        "{text}"
    );
    // The answer comes first, and names the line.
    assert!(
        flat(text.lines().nth(1).unwrap_or(""))
            .starts_with("B differs from A on 1 of 9 tests: SEQ1M Q8T1 Read;"),
        "{text}"
    );
    assert!(f.contains("SEQ1M Q8T1 Read MB/s +50% ["), "{text}");
    // The rule in full, and every metric's line, with --all.
    let all = iolab_report::compare::render_opts(&c, iolab_report::Detail::Summary, true);
    assert!(
        flat(&all).contains("runs are the evidence, not passes"),
        "{all}"
    );
    assert!(all.lines().count() > text.lines().count(), "{all}");
}

#[test]
fn runs_of_two_machines_name_their_hardware_differences() {
    // B's runs were measured on another host: another CPU and more memory, same kernel.
    let mut set = three_a_side();
    for (k, side) in set.configs.iter_mut().enumerate() {
        let (host, cpu, mem) = [
            ("nas1", "AMD EPYC", 8u64 << 30),
            ("nas2", "Intel Xeon", 16 << 30),
        ][k];
        for r in side.runs.iter_mut() {
            r.env = serde_json::json!({
                "hostname": host,
                "cpu_model": cpu,
                "cpus_usable": 2,
                "memory_total_bytes": mem,
                "kernel_release": "6.18.0",
            });
        }
    }
    let c = compare(&set);
    let r = row(&c, "SEQ1M Q8T1 Read", Metric::MbS);
    let d = r.cells[1].decision.as_ref().expect("decided");
    let codes: Vec<&str> = d.confounded_by.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(codes, ["cpu", "memory"], "{d:?}");
    assert!(d.confounded_by[0].fact.contains("Intel Xeon"), "{d:?}");
    assert!(!d.clean_different());
}

#[test]
fn a_difference_measured_under_other_conditions_names_them() {
    // A's three runs ran under other I/O on the device (BUSY_DEVICE on SEQ1M Q8T1 Read)
    // at 09:00-09:09; B's ran quiet from 10:00: SEQ1M Q8T1 Read 1.5 times as fast.
    let mut set = three_a_side();
    for (k, r) in set.configs[0].runs.iter_mut().enumerate() {
        r.started_at = format!("2025-03-01T09:0{}:00Z", 3 * k);
        r.finished_at = Some(format!("2025-03-01T09:0{}:30Z", 3 * k + 2));
        r.warnings.push(iolab_measure::Warning {
            code: iolab_measure::WarningCode::BusyDevice,
            message: "other I/O on vda".into(),
            fix: String::new(),
            test: Some("SEQ1M Q8T1 Read".into()),
        });
    }
    for (k, r) in set.configs[1].runs.iter_mut().enumerate() {
        r.started_at = format!("2025-03-01T10:0{}:00Z", 3 * k);
        r.finished_at = Some(format!("2025-03-01T10:0{}:30Z", 3 * k + 2));
    }
    let c = compare(&set);
    let r = row(&c, "SEQ1M Q8T1 Read", Metric::MbS);
    let d = r.cells[1].decision.as_ref().expect("decided");
    assert_eq!(d.call.key(), "different");
    let codes: Vec<&str> = d.confounded_by.iter().map(|x| x.code.as_str()).collect();
    assert_eq!(codes, ["BUSY_DEVICE", "sequential"], "{d:?}");
    assert!(!d.clean_different());
    // A test without the warning is still confounded by the time the sides ran.
    let other = row(&c, "RND4K Q1T1 Read", Metric::MbS);
    let codes: Vec<&str> = other.cells[1]
        .decision
        .as_ref()
        .unwrap()
        .confounded_by
        .iter()
        .map(|x| x.code.as_str())
        .collect();
    assert_eq!(codes, ["sequential"]);
    let text = render(&c);
    let f = flat(&text);
    assert!(f.starts_with("iolab compare · 2 sides, tests aligned by name No clean difference: B differs from A on"), "{text}");
    assert!(
        f.contains("(BUSY_DEVICE, sequential), which could explain it"),
        "{text}"
    );
    assert!(f.contains("different*, better"), "{text}");
    assert!(
        f.contains("BUSY_DEVICE on SEQ1M Q8T1 Read (on A in 3 of 3 runs, on B in 0 of 3)")
            && f.contains("all 3 runs of A before any of B, 51m 30s apart")
            && f.contains("Batches are not replicates")
            && f.contains("No other batch of these commands is stored")
            && f.contains("interleave"),
        "{text}"
    );
    // The store holds two earlier batches of A's command (days before, ±1%): the batches'
    // spread is measured, and the +50% is far beyond it.
    let mut with_batches = set.clone();
    let others = (0..6)
        .map(|k| {
            let mut r = run(20 + k as i64, [1.0, 1.02][k / 3] * WOBBLE[k % 3], 1.0);
            r.started_at = format!("2025-02-{:02}T10:0{}:00Z", 20 + 5 * (k / 3), k % 3);
            r.finished_at = Some(format!("2025-02-{:02}T10:0{}:30Z", 20 + 5 * (k / 3), k % 3));
            r.tests.iter_mut().for_each(|t| t.passes.clear());
            ("fp-a".to_string(), r)
        })
        .collect();
    with_batches.set_noise(Noise {
        fingerprints: (1..=6)
            .map(|id| (id, if id <= 3 { "fp-a" } else { "fp-b" }.to_string()))
            .collect(),
        others,
    });
    let c = compare(&with_batches);
    let f = flat(&render(&c));
    assert!(
        f.contains("Between the 4 batches of these commands in the store (with runs 20-25)")
            && f.contains("beyond batch-to-batch variation"),
        "{f}"
    );
    assert_eq!(document(&c, "0.1.0")["between_batches"][1]["batches"], 4);
    let doc = document(&c, "0.1.0");
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "SEQ1M Q8T1 Read")
        .unwrap();
    let b = &t["metrics"]["mb_s"][1];
    assert_eq!(b["verdict"], "different");
    assert_eq!(b["confounded_by"][0]["code"], "BUSY_DEVICE", "{b}");
    assert_eq!(doc["sides"][1]["confounded_by"][1]["code"], "sequential");

    // Both sides under some other I/O (BUSY_DEVICE on each): what counts is how much. A's
    // passes saw 50 MB/s of it, B's 2 MB/s: named with the figures. At 50 and 40 MB/s:
    // alike, not a confound.
    let loaded = |set: &mut RunSet, side: usize, mb_s: f64| {
        for r in set.configs[side].runs.iter_mut() {
            r.warnings.push(iolab_measure::Warning {
                code: iolab_measure::WarningCode::BusyDevice,
                message: "other I/O on vda".into(),
                fix: String::new(),
                test: Some("SEQ1M Q8T1 Read".into()),
            });
            for t in r.tests.iter_mut() {
                for p in t.passes.iter_mut() {
                    p.context.activity.devices = vec![iolab_measure::DeviceIo {
                        device: "vda".into(),
                        read_bytes: p.bytes + (mb_s * 1e6 * p.seconds) as u64,
                        write_bytes: 0,
                        read_requests: 0,
                        write_requests: 0,
                    }];
                }
            }
        }
    };
    let codes = |set: &RunSet| -> Vec<(String, String)> {
        let c = compare(set);
        let r = row(&c, "SEQ1M Q8T1 Read", Metric::MbS);
        r.cells[1]
            .decision
            .as_ref()
            .unwrap()
            .confounded_by
            .iter()
            .map(|x| (x.code.clone(), x.fact.clone()))
            .collect()
    };
    let mut set = three_a_side();
    loaded(&mut set, 0, 50.0);
    loaded(&mut set, 1, 2.0);
    let named = codes(&set);
    assert_eq!(named.len(), 1, "{named:?}");
    assert_eq!(named[0].0, "BUSY_DEVICE");
    assert!(
        named[0]
            .1
            .starts_with("other I/O on the device: 50.0 MB/s on A, 2.00 MB/s on B"),
        "{named:?}"
    );
    let mut set = three_a_side();
    loaded(&mut set, 0, 50.0);
    loaded(&mut set, 1, 40.0);
    assert_eq!(codes(&set), []);
}

#[test]
fn single_runs_cannot_be_told_from_noise() {
    // The old failure: two runs whose passes are tight (±0.3%) but 5% apart. Passes say
    // "significant"; one run a side says nothing.
    let set = RunSet::per_run(vec![run(1, 1.0, 1.0), run(2, 1.05, 1.0)]);
    let c = compare(&set);
    assert!(!c.rows.is_empty());
    for r in &c.rows {
        let lone = Judgement::NoNoise {
            runs_a: 1,
            runs_b: 1,
            a: true,
            b: true,
        };
        match &r.cells[1].verdict {
            Verdict::Untested(j) => assert_eq!(*j, lone),
            v => panic!("{} {:?}: {v:?}", r.test, r.metric),
        }
        assert_eq!(r.cells[1].verdict.significant(), None);
    }
    let text = render(&c);
    assert!(text.contains("can't tell (1 run)"), "{text}");
    let f = flat(&text);
    assert!(
        f.contains("1 run on A and on B and no other stored run of the same command")
            && f.contains("cannot be told from run-to-run noise")
            && f.contains("--repeat N"),
        "{text}"
    );
    let doc = document(&c, "0.1.0");
    let cell = &doc["tests"][0]["metrics"]["mb_s"][1];
    assert_eq!(cell["verdict"], "undecided");
    assert_eq!(cell["runs_needed"], serde_json::Value::Null);
    assert_eq!(cell["significant"], serde_json::Value::Null);
    assert!(cell["evidence"]["reason"]
        .as_str()
        .unwrap()
        .contains("cannot be told from run-to-run noise"));
}

/// Runs 1 (A) and 2 (B), both of command `fp1-a`, and other stored runs 10-15 of that
/// command whose values wobble by ±1%.
fn with_other_runs(b_scale: f64) -> RunSet {
    let mut set = RunSet::per_run(vec![run(1, 1.0, 1.0), run(2, b_scale, 1.0)]);
    let wobble = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0];
    let others = wobble
        .iter()
        .enumerate()
        .map(|(k, w)| {
            let mut r = run(10 + k as i64, *w, 1.0);
            // As the store loads them: summaries only.
            r.tests.iter_mut().for_each(|t| t.passes.clear());
            ("fp1-a".to_string(), r)
        })
        .collect();
    set.set_noise(Noise {
        fingerprints: HashMap::from([(1, "fp1-a".to_string()), (2, "fp1-a".to_string())]),
        others,
    });
    set
}

#[test]
fn single_runs_are_judged_against_other_runs_of_the_same_command() {
    // Noise sd of ln: about 0.7%. A 5% step is far outside it; a 0.5% one is not.
    let c = compare(&with_other_runs(1.05));
    let r = row(&c, "RND4K Q1T1 Read", Metric::MbS);
    match &r.cells[1].verdict {
        Verdict::Better(t) => {
            assert_eq!(t.test.method, Method::Pooled);
            assert_eq!((t.test.n_a, t.test.n_b, t.test.noise_runs), (1, 1, 6));
            assert_eq!(t.test.df, 5.0);
            assert_eq!(t.noise_ids, [10, 11, 12, 13, 14, 15]);
        }
        v => panic!("{v:?}"),
    }
    let text = render(&c);
    assert!(
        flat(&text)
            .contains("noise measured on 6 other stored runs of the same command (runs 10-15"),
        "{text}"
    );
    let doc = document(&c, "0.1.0");
    let e = &doc["tests"][0]["metrics"]["mb_s"][1]["evidence"];
    assert_eq!(e["method"], "pooled-log-noise");
    assert_eq!(e["noise_runs"], 6);
    assert_eq!(
        e["noise_run_ids"],
        serde_json::json!([10, 11, 12, 13, 14, 15])
    );
    assert!(doc["sides"][1]["evidence"][0]
        .as_str()
        .unwrap()
        .contains("6 other stored runs"));

    all_same(&compare(&with_other_runs(1.005)), |_| false);
    // The other runs are not the compared ones: a set holding run 10 drops it from them.
    let mut set = with_other_runs(1.0);
    let mut ten = run(10, 1.0, 1.0);
    ten.label = Some("x".into());
    set.configs
        .push(RunSet::per_run(vec![ten]).configs.remove(0));
    let noise = set.noise.clone();
    set.set_noise(noise);
    assert_eq!(set.noise.others.len(), 5);
}

#[test]
fn evidence_names_a_borrowed_spread() {
    // A: one run; B: three runs of the same command and nothing else stored.
    let mut set = RunSet::groups(vec![
        ("run 1".into(), vec![run(1, 1.0, 1.0)]),
        (
            "label again".into(),
            (0..3).map(|k| run(k as i64 + 2, WOBBLE[k], 1.0)).collect(),
        ),
    ]);
    set.set_noise(Noise {
        fingerprints: (1..=4).map(|id| (id, "fp1-a".to_string())).collect(),
        others: Vec::new(),
    });
    let c = compare(&set);
    let r = row(&c, "SEQ1M Q8T1 Read", Metric::MbS);
    let t = r.cells[1].verdict.tested().expect("tested");
    assert_eq!((t.test.method, t.test.noise_runs), (Method::Pooled, 0));
    let lines = evidence(&c, 1);
    assert!(
        lines.iter().any(|l| l.contains("the spread of B's runs")),
        "{lines:?}"
    );
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
    assert_eq!(r.cells[2].verdict, Verdict::Untested(Judgement::Missing));
    assert!((r.cells[1].change_pct.unwrap() - 20.0).abs() < 1e-9);
}

#[test]
fn the_json_document() {
    let c = compare(&three_a_side());
    let doc = document(&c, "0.1.0");
    assert_eq!(doc["schema"], "iolab.comparison/2");
    assert_eq!(doc["alpha"], 0.05);
    assert!(doc["method"].as_str().unwrap().contains("not passes"));
    assert_eq!(doc["sides"][1]["run_ids"], serde_json::json!([4, 5, 6]));
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "SEQ1M Q8T1 Read")
        .unwrap();
    let b = &t["metrics"]["mb_s"][1];
    assert_eq!(b["side"], "B");
    assert_eq!(b["verdict"], "different");
    assert_eq!(b["direction"], "better");
    assert_eq!(b["significant"], true);
    assert!((b["ratio"].as_f64().unwrap() - 1.5).abs() < 0.01, "{b}");
    assert_eq!(b["ratio_ci95"], b["evidence"]["ratio_ci95"]);
    assert_eq!(b["confounded_by"], serde_json::json!([]));
    assert_eq!(
        (b["runs"].as_u64(), b["passes"].as_u64()),
        (Some(3), Some(9))
    );
    assert_eq!(b["run_values"].as_array().unwrap().len(), 3);
    assert!(b["p"].as_f64().unwrap() < 1e-4);
    assert_eq!(b["evidence"]["method"], "welch-log-runs");
    assert_eq!(
        (
            b["evidence"]["runs_a"].as_u64(),
            b["evidence"]["runs_b"].as_u64()
        ),
        (Some(3), Some(3))
    );
    let ci = b["evidence"]["ratio_ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() < 1.5 && ci[1].as_f64().unwrap() > 1.5);
    assert!((b["change_pct"].as_f64().unwrap() - 50.0).abs() < 0.1);
    assert_eq!(t["metrics"]["mb_s"][0]["verdict"], "baseline");
    assert_eq!(t["metrics"]["mb_s"][0]["evidence"], serde_json::Value::Null);
    assert_eq!(doc["warnings"].as_array().unwrap().len(), 6);
}

/// A run of the series: id, day, SEQ1M Q8T1 Read scaled by `f`, the rest by `w`.
fn day(i: i64, f: f64, w: f64) -> RunRecord {
    let mut r = run(i, w, f / w);
    r.started_at = format!("2025-03-{:02}T10:00:00Z", i);
    r
}

#[test]
fn history_marks_only_changes_beyond_the_noise_of_the_command() {
    // Eight runs of one command: ±1% wobble, then SEQ1M Q8T1 Read 50% faster from run 5.
    let f = [1.0, 1.01, 0.99, 1.0, 1.5, 1.51, 1.49, 1.5];
    let w = [1.0, 1.01, 0.99, 1.005, 0.995, 1.0, 1.01, 0.99];
    let mut runs: Vec<RunRecord> = (0..8).map(|k| day(k as i64 + 1, f[k], w[k])).collect();
    let mut other = common::atto_run();
    other.id = Some(9);
    runs.push(other);
    let noise = Noise {
        fingerprints: (1..=8).map(|id| (id, "fp1-cdm".to_string())).collect(),
        others: Vec::new(),
    };
    let s = history::series(&runs, &noise);
    assert_eq!(s.len(), 2, "cdm and atto are separate series");
    let cdm = &s[0];
    assert_eq!(cdm.runs.len(), 8);
    let mv = |i: usize, t: &str| cdm.point(i, t).unwrap().1;
    assert_eq!(mv(0, "SEQ1M Q8T1 Read"), history::Move::First);
    // The noise of a mark comes from the runs of the command before the two compared:
    // none for the second run, one (not a noise level) for the third.
    for i in [1, 2] {
        assert!(
            matches!(mv(i, "SEQ1M Q8T1 Read"), history::Move::Unknown(_)),
            "{i}"
        );
    }
    // Within the wobble: steady, tested against runs 1 and 2.
    match mv(3, "SEQ1M Q8T1 Read") {
        history::Move::Steady(c, t) => {
            assert!((c - 1.0 / 0.99 * 100.0 + 100.0).abs() < 1e-6, "{c}");
            assert_eq!((t.noise_runs, t.method), (2, Method::Pooled));
        }
        m => panic!("{m:?}"),
    }
    // The step, against runs 1-3 (sd of ln about 1%): t = ln 1.5 / (0.01 × √2) with 2 df.
    match mv(4, "SEQ1M Q8T1 Read") {
        history::Move::Up(c, t) => {
            assert!((c - 50.0).abs() < 0.5, "{c}");
            assert!(t.p < 0.01 && t.noise_runs == 3, "{t:?}");
        }
        m => panic!("{m:?}"),
    }
    // After it, the step is part of the earlier runs: the new level is steady.
    for i in [5, 6, 7] {
        assert!(
            matches!(mv(i, "SEQ1M Q8T1 Read"), history::Move::Steady(..)),
            "{i}"
        );
    }
    // The other tests wobble only: no mark moves.
    for i in 3..8 {
        assert!(
            matches!(mv(i, "RND4K Q1T1 Read"), history::Move::Steady(..)),
            "{i}"
        );
    }
    // ATTO's run has no other run of its command: its first run is just first.
    assert_eq!(s[1].point(0, "4K Read").unwrap().1, history::Move::First);

    let text = history::render(&runs, &noise);
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    // The tables, below the legend.
    let tables = |t: &str| -> String {
        t.lines()
            .skip_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let t = tables(&text);
    assert_eq!(t.matches('↑').count(), 1, "{text}");
    assert!(!t.contains('↓'), "{text}");
    assert!(
        text.contains("first → last") && text.contains("+50%"),
        "{text}"
    );
    assert!(text.contains("trend"));
    // As `iolab history` loads them (summaries, no passes): the same table.
    let mut light = runs.clone();
    for r in &mut light {
        r.tests.iter_mut().for_each(|t| t.passes.clear());
    }
    assert_eq!(history::render(&light, &noise), text);
    let doc = history::document(&runs, &noise, "0.1.0");
    assert_eq!(doc["schema"], "iolab.history/2");
    let fifth = &doc["series"][0]["runs"][4]["tests"][0];
    assert_eq!(fifth["test"], "SEQ1M Q8T1 Read");
    assert_eq!(fifth["movement"], "up");
    assert_eq!(fifth["verdict"], "different");
    assert!(fifth["ratio_ci95"][0].as_f64().unwrap() > 1.05, "{fifth}");
    // Run 4 against run 3, with two earlier runs as the noise (2 degrees of freedom): not
    // different, but too uncertain to be the same within ±5% either.
    let fourth = &doc["series"][0]["runs"][3]["tests"][0];
    assert_eq!(fourth["verdict"], "undecided", "{fourth}");
    assert!(fourth["runs_needed"].as_u64().unwrap() >= 2, "{fourth}");
    assert!(t.contains('~') && t.contains('='), "{text}");
    assert_eq!(fifth["method"], "pooled-log-noise");
    assert_eq!(fifth["noise_runs"], 3);

    // Without other runs of the command nothing can be told: `?`, never an arrow.
    let none = Noise::default();
    let text = tables(&history::render(&runs, &none));
    assert!(!text.contains('↑') && !text.contains('↓'), "{text}");
    assert!(text.contains("4719?"), "{text}");
    let s = history::series(&runs, &none);
    assert!(matches!(
        s[0].point(4, "SEQ1M Q8T1 Read").unwrap().1,
        history::Move::Unknown(_)
    ));
}

#[test]
fn noise_is_the_newest_fifty_other_runs_of_each_command() {
    use iolab_report::set::NOISE_RUNS;
    // A store of 80 runs of one command (ids 1-80, oldest first); runs 2 and 3 compared.
    let all: Vec<RunRecord> = (1..=80).map(|id| run(id, 1.0, 1.0)).collect();
    let mut asked = Vec::new();
    let noise = Noise::load(
        &[2, 3],
        |_| Ok::<_, ()>("fp1-a".to_string()),
        |fp, n| {
            asked.push((fp.to_string(), n));
            Ok(all[all.len() - n..].to_vec())
        },
    )
    .unwrap();
    // One query for the command, for 50 + the 2 runs of the set.
    assert_eq!(asked, [("fp1-a".to_string(), NOISE_RUNS + 2)]);
    let ids: Vec<i64> = noise.others.iter().map(|(_, r)| r.id.unwrap()).collect();
    assert_eq!(ids, (31..=80).collect::<Vec<i64>>());
    assert_eq!(noise.fingerprints.len(), 2);
}
