//! Markdown export: tables parsed back and checked against the records' numbers; the study
//! layout (directions × configurations as columns) and its score table checked by hand.

mod common;

use iolab_measure::WarningCode;
use iolab_report::markdown::{escape, render};
use iolab_report::set::RunSet;

/// A parsed Markdown table: header cells and body rows, cells unescaped and trimmed.
#[derive(Debug)]
struct MdTable {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '|' => cells.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    cells.push(cur);
    cells
        .into_iter()
        .map(|c| c.trim().replace("&lt;", "<").replace("&gt;", ">"))
        .collect()
}

/// Every table of the document with the bold title line above it.
fn tables(md: &str) -> Vec<MdTable> {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].starts_with('|')
            && lines
                .get(i + 1)
                .is_some_and(|l| l.starts_with("|:-") || l.starts_with("|--"))
        {
            let title = lines[..i]
                .iter()
                .rev()
                .find(|l| l.starts_with("**"))
                .map(|l| l.to_string())
                .unwrap_or_default();
            let header = split_row(lines[i]);
            let mut rows = Vec::new();
            i += 2;
            while i < lines.len() && lines[i].starts_with('|') {
                rows.push(split_row(lines[i]));
                i += 1;
            }
            out.push(MdTable {
                title,
                header,
                rows,
            });
        } else {
            i += 1;
        }
    }
    out
}

/// `1095 ±3.5%` as (1095, Some(3.5)); `-` as None.
fn value(cell: &str) -> Option<(f64, Option<f64>)> {
    if cell == "-" {
        return None;
    }
    let mut it = cell.split_whitespace();
    let v: f64 = it
        .next()?
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {cell}"));
    let ci = it.next().map(|c| {
        c.trim_start_matches('±')
            .trim_end_matches('%')
            .parse()
            .unwrap()
    });
    Some((v, ci))
}

/// Three significant digits (or whole numbers from 100 up), as the table prints them.
fn close(printed: f64, stored: f64) -> bool {
    let tol = if stored.abs() >= 100.0 {
        0.5
    } else {
        stored.abs() * 0.005 + 1e-9
    };
    (printed - stored).abs() <= tol
}

#[test]
fn cdm_tables_parse_back_to_the_stored_numbers() {
    let run = common::cdm_run();
    let md = render(&RunSet::per_run(vec![run.clone()]));
    let t = tables(&md);
    assert_eq!(t.len(), 3, "{md}");
    assert_eq!(t[0].title, "**Throughput, MB/s**");
    assert_eq!(t[0].header, ["Test", "Read", "Write", "Mix"]);
    assert_eq!(
        t[0].rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(),
        ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"]
    );
    let mut checked = 0;
    for (table, metric) in t.iter().zip(["mb_s", "iops", "p99"]) {
        for row in &table.rows {
            for (col, kind) in table.header.iter().enumerate().skip(1) {
                let name = format!("{} {kind}", row[0]);
                let stored = run.tests.iter().find(|x| x.name == name);
                let Some(stored) = stored else {
                    assert_eq!(row[col], "-", "{name}");
                    continue;
                };
                let (v, ci) = value(&row[col]).unwrap();
                let (want, stats) = match metric {
                    "mb_s" => (stored.summary.mb_s, stored.summary.stats_mb_s),
                    "iops" => (stored.summary.iops, stored.summary.stats_iops),
                    _ => (stored.summary.lat_p99_us, stored.summary.stats_lat_p99_us),
                };
                assert!(close(v, want), "{name} {metric}: {v} vs {want}");
                let want_ci = iolab_stats::ci_pct(&stats);
                let got_ci = ci.expect("3 passes give an interval");
                assert!(
                    (got_ci - want_ci).abs() <= 0.05 + want_ci * 0.05,
                    "{name} CI {got_ci} vs {want_ci}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 3 * 9);
    // The fixture's numbers by hand: SEQ1M Q8T1 Read 3000 × 1 MiB/s, RND4K Q1T1 Read
    // 12000 × 4 KiB/s.
    assert_eq!(t[0].rows[0][1].split(' ').next(), Some("3146"));
    assert_eq!(t[0].rows[3][1].split(' ').next(), Some("49.2"));
    assert!(md.contains("`CACHE_SMALL_REGION` SEQ1M Q8T1 Write:"));
    assert!(md.contains("Environment: "));
}

#[test]
fn workloads_without_bytes_get_iops_and_sizes_become_columns() {
    for run in common::workload_runs() {
        let md = render(&RunSet::per_run(vec![run.clone()]));
        let t = tables(&md);
        match run.workload.as_str() {
            "metadata" => {
                // File operations are counted as operations: no MB/s table (create's bytes
                // are a by-product), the rate in ops/s.
                assert_eq!(t[0].title, "**Operations per second**");
                assert_eq!(t[0].header, ["Test", "ops/s"]);
                assert!(!md.contains("MB/s"), "{md}");
                let stat = t[0].rows.iter().find(|r| r[0] == "stat").unwrap();
                assert!(close(value(&stat[1]).unwrap().0, run.tests[1].summary.iops));
            }
            "fsync" => {
                // Durable writes per second, not MB/s; "none 4K" in group "none": methods
                // are rows, sizes columns.
                assert_eq!(t[0].title, "**Operations per second**");
                assert_eq!(t[0].header, ["Test", "4K"]);
                assert_eq!(t[0].rows[2][0], "O_DIRECT+O_DSYNC");
                assert!(!md.contains("MB/s"), "{md}");
            }
            _ => assert!(!t.is_empty(), "{}", run.workload),
        }
    }
}

/// The row of test `name` in the ratio-to-baseline table.
fn ratio_row<'a>(t: &'a [MdTable], name: &str) -> &'a Vec<String> {
    let ratio = t.iter().find(|x| x.title.starts_with("**Ratio")).unwrap();
    ratio.rows.iter().find(|r| r[0] == name).unwrap()
}

#[test]
fn study_columns_are_directions_by_configuration_with_the_score() {
    let mut runs = common::study_runs();
    // One configuration's runs dropped flushes; the score table must say so.
    let i = runs
        .iter()
        .position(|r| r.config_label.as_deref() == Some("64KB"))
        .unwrap();
    for (code, test) in [
        (WarningCode::NoBarrier, None),
        (WarningCode::PageCache, Some("RND4K Q1T1 Read")),
    ] {
        runs[i].warnings.push(iolab_measure::Warning {
            code,
            message: "test".into(),
            fix: String::new(),
            test: test.map(str::to_string),
        });
    }
    let set = RunSet::study("strip size", runs);
    let md = render(&set);
    let t = tables(&md);
    assert!(md.starts_with("## iolab: Study strip size"));
    assert_eq!(
        t[0].header,
        [
            "Test",
            "Read 16KB",
            "Read 32KB",
            "Read 64KB",
            "Write 16KB",
            "Write 32KB",
            "Write 64KB",
            "Mix 16KB",
            "Mix 32KB",
            "Mix 64KB"
        ]
    );
    // RND4K Q1T1 Read: 12000, 10800 (0.9), 12000 (1.0), 11520 (0.96) × 4096 B/s.
    let row = t[0].rows.iter().find(|r| r[0] == "RND4K Q1T1").unwrap();
    for (col, ios) in [(1, 10_800.0), (2, 12_000.0), (3, 11_520.0)] {
        let (v, _) = value(&row[col]).unwrap();
        assert!(close(v, ios * 4096.0 / 1e6), "{row:?}");
    }
    let r = ratio_row(&t, "RND4K Q1T1 Read");
    // One run per configuration: the ratios cannot be told from run-to-run noise.
    assert_eq!(&r[1..], ["1.00", "1.11 ?", "1.07 ?"]);
    // Score by hand: random 0.90/1.00/0.96; sequential 1.00/0.98/0.95; total is the
    // geometric mean over 5 random and 4 sequential tests: 16KB 0.9^(5/9) = 0.9432,
    // 32KB 0.98^(4/9) = 0.9911, 64KB (0.96^5 · 0.95^4)^(1/9) = 0.9555; over the best:
    // 0.9517, 1.0000, 0.9642.
    let score = t.iter().find(|x| x.title.starts_with("**Score")).unwrap();
    assert_eq!(
        score.header,
        [
            "Rank",
            "Configuration",
            "Random",
            "Sequential",
            "Total",
            "Caveats"
        ]
    );
    // One repeat: the ranks cannot be told apart, and the table says so.
    assert!(
        score
            .title
            .contains("Ranks cannot be told apart from run-to-run noise"),
        "{}",
        score.title
    );
    assert_eq!(
        score.rows,
        [
            ["1-3", "32KB", "1.00", "0.98", "1.00", "-"],
            [
                "1-3",
                "64KB",
                "0.96",
                "0.95",
                "0.96",
                "⚠ unsafe: NO_BARRIER; cache: PAGE_CACHE"
            ],
            ["1-3", "16KB", "0.90", "1.00", "0.95", "-"],
        ]
    );
    let s = set.score();
    let total = |label: &str| {
        let i = set.configs.iter().position(|c| c.label == label).unwrap();
        s.ranked
            .iter()
            .find(|c| c.config == i)
            .unwrap()
            .total
            .unwrap()
    };
    assert!((total("16KB") - 0.9517).abs() < 1e-4);
    assert!((total("64KB") - 0.9642).abs() < 1e-4);
}

#[test]
fn repeats_separate_ranks_and_ratios() {
    // Three rounds, ±1% between runs. Score differences in ln: 32KB over 16KB 0.050,
    // over 64KB 0.037; 64KB over 16KB 0.013 (see the score test above). With a per-repeat
    // sd of about 0.01, Welch on 3 + 3 repeats gives t about 6 and 4.5 for the first two
    // (p < 0.05) and 1.6 for the last: 32KB ranks first, the other two share 2-3.
    let set = RunSet::study("strip size", common::study_runs_repeated());
    let t = tables(&render(&set));
    let score = t.iter().find(|x| x.title.starts_with("**Score")).unwrap();
    assert!(
        score
            .title
            .contains("Ranks rest on 3 repeat(s) per configuration"),
        "{}",
        score.title
    );
    let ranks: Vec<(&str, &str)> = score
        .rows
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str()))
        .collect();
    assert_eq!(ranks, [("1", "32KB"), ("2-3", "64KB"), ("2-3", "16KB")]);
    let r = ratio_row(&t, "RND4K Q1T1 Read");
    // 10% and 6.7% above 16KB with ±1% between runs: significant.
    assert_eq!(&r[1..], ["1.00", "1.11*", "1.07*"]);
    let ranking = set.ranking();
    assert_eq!(ranking.repeats, [3, 3, 3]);
    assert_eq!(ranking.pairs.len(), 3);
}

#[test]
fn a_wide_study_gets_one_table_per_direction() {
    // Five configurations x three directions would be 15 value columns: split.
    let mut runs = common::study_runs();
    for (i, label) in ["128KB", "256KB"].into_iter().enumerate() {
        let mut r = runs[0].clone();
        r.id = Some(200 + i as i64);
        r.uuid = format!("00000000-0000-4000-8000-00000000020{i}");
        r.config_label = Some(label.into());
        runs.push(r);
    }
    let set = RunSet::study("strip size", runs);
    let t = tables(&render(&set));
    let titles: Vec<&str> = t.iter().map(|x| x.title.as_str()).collect();
    for title in [
        "**Throughput, MB/s, Read**",
        "**Throughput, MB/s, Write**",
        "**Throughput, MB/s, Mix**",
        "**I/O operations per second, Read**",
    ] {
        assert!(titles.contains(&title), "{title} in {titles:?}");
    }
    let read = t
        .iter()
        .find(|x| x.title == "**Throughput, MB/s, Read**")
        .unwrap();
    assert_eq!(
        read.header,
        ["Test", "16KB", "32KB", "64KB", "128KB", "256KB"]
    );
    // Only tests that read are rows; 128KB is a copy of 16KB.
    let rnd = read.rows.iter().find(|r| r[0] == "RND4K Q1T1").unwrap();
    assert_eq!(rnd[1], rnd[4]);
    assert!(
        read.rows.iter().all(|r| r.len() == 6 && r[1] != "-"),
        "{read:?}"
    );
    // Three configurations stay side by side (9 columns), as the other test shows.
}

#[test]
fn markdown_text_is_escaped() {
    assert_eq!(escape("a|b <c> *d*"), "a\\|b \\<c> \\*d\\*");
    // No HTML entity: `&gt;` would show literally where the Markdown is read as text.
    assert_eq!(
        escape("z-score > 3.5, p<0.001, </x>"),
        "z-score > 3.5, p<0.001, \\</x>"
    );
    let mut run = common::cdm_run();
    run.tests[0].name = "SEQ1M Q8T1 Re|ad".into();
    let md = render(&RunSet::per_run(vec![run]));
    let t = tables(&md);
    // The pipe stays inside its cell: every row keeps the header's width.
    assert!(t
        .iter()
        .all(|t| t.rows.iter().all(|r| r.len() == t.header.len())));
    // Its name extends its group, so its suffix became a column of its own.
    assert!(t[0].header.iter().any(|h| h == "Re|ad"), "{md}");
}

/// A study with two workloads on two configurations: test names carry the workload's label,
/// warnings repeated across runs are listed once with their count, and the space each small
/// file takes gets its own table.
#[test]
fn study_of_several_workloads_labels_tests_and_shows_space() {
    use iolab_spec::Rw;
    use serde_json::json;
    let mut runs = Vec::new();
    for (config, per_file) in [("ext4 1K", 1060.0f64), ("bigalloc 64K", 65536.0)] {
        let mut meta = common::workload_run(
            "metadata",
            &[(
                "create",
                "create",
                Rw::Write,
                1024,
                20_000,
                json!({"phase": "create", "space": {"bytes_per_file": per_file,
                       "allocated_bytes_per_file": per_file.max(1024.0)}}),
            )],
        );
        meta.label = Some("tiny files".into());
        let mut block = common::cdm_run();
        block.label = Some("cdm".into());
        for (i, r) in [&mut meta, &mut block].into_iter().enumerate() {
            r.study = Some("au".into());
            r.config_label = Some(config.into());
            r.id = Some(runs.len() as i64 + i as i64 + 1);
        }
        // The same warning in two runs of one configuration.
        for r in [&mut meta, &mut block] {
            r.warnings.push(iolab_measure::Warning {
                code: WarningCode::BusyCpu,
                message: "busy".into(),
                fix: String::new(),
                test: None,
            });
        }
        runs.push(meta);
        runs.push(block);
    }
    let set = RunSet::study("au", runs);
    let md = render(&set);
    let t = tables(&md);
    let names: Vec<&str> = t[0].rows.iter().map(|r| r[0].as_str()).collect();
    assert!(names.contains(&"tiny files: create"), "{names:?}");
    assert!(
        names.iter().any(|n| n.starts_with("cdm: SEQ1M")),
        "{names:?}"
    );
    let space = t
        .iter()
        .find(|x| x.title.starts_with("**Space per small file"))
        .unwrap_or_else(|| panic!("{md}"));
    assert_eq!(space.header, ["Test", "ext4 1K", "bigalloc 64K"]);
    assert_eq!(
        space.rows,
        [["tiny files: create", "1060 / 1060", "65536 / 65536"]]
    );
    assert_eq!(md.matches("`BUSY_CPU`").count(), 2, "{md}");
    assert!(md.contains("busy (2 of 2 runs)"), "{md}");
}

/// The scrub test's counts get a table of their own, with the expected value beside a
/// reported one that differs and the verdict.
#[test]
fn scrub_counts_are_tabulated_per_configuration() {
    let runs = common::scrub_study_runs();
    let md = render(&RunSet::study("s", runs));
    let t = tables(&md);
    let s = t
        .iter()
        .find(|x| x.title.contains("corruptions injected"))
        .unwrap_or_else(|| panic!("{md}"));
    assert_eq!(s.header, ["", "raid1", "raid5"]);
    let row = |name: &str| s.rows.iter().find(|r| r[0] == name).unwrap().clone();
    assert_eq!(row("injected"), ["injected", "32", "32"]);
    assert_eq!(row("repaired"), ["repaired", "32", "11 (32)"]);
    assert_eq!(row("verdict"), ["verdict", "pass", "⚠ FAIL"]);
}

#[test]
fn one_repeat_is_ranked_against_earlier_invocations() {
    use std::collections::HashMap;
    // This invocation: one run per configuration. The store holds an earlier invocation of
    // the same study with three repeats: the spread of those repeats is each
    // configuration's noise.
    let mut set = RunSet::study("strip size", common::study_runs());
    let fp = |label: &str| format!("fp1-{label}");
    let fingerprints: HashMap<i64, String> = set
        .runs()
        .map(|r| (r.id.unwrap(), fp(r.config_label.as_deref().unwrap())))
        .collect();
    let others = common::study_runs_repeated()
        .into_iter()
        .map(|mut r| {
            r.id = Some(r.id.unwrap() + 1000);
            r.study_meta["invocation"] = "earlier".into();
            r.tests.iter_mut().for_each(|t| t.passes.clear());
            (fp(r.config_label.as_deref().unwrap()), r)
        })
        .collect();
    set.set_noise(iolab_report::set::Noise {
        fingerprints,
        others,
    });
    let ranking = set.ranking();
    assert_eq!(ranking.repeats, [1, 1, 1]);
    assert_eq!(ranking.noise_repeats, [3, 3, 3]);
    let text = |c: &str| ranking.rank_text(set.configs.iter().position(|x| x.label == c).unwrap());
    // One repeat against one: se = 0.00998 × √2 = 0.0141 (the earlier repeats' sd of ln,
    // 4 degrees of freedom from two configurations' 3 repeats each). 32KB over 16KB:
    // t = 0.0496 / 0.0141 = 3.5, p = 0.025, separated; over 64KB: t = 0.037 / 0.0141 = 2.6,
    // p = 0.06, and 64KB over 16KB t = 0.9: not. So 32KB ranks 1-2, 64KB 1-3, 16KB 2-3 —
    // less separated than three repeats a side (see above).
    assert_eq!(
        (text("32KB"), text("64KB"), text("16KB")),
        ("1-2".into(), "1-3".into(), "2-3".into())
    );
    assert!(
        ranking.basis().contains("9 earlier repeat(s)"),
        "{}",
        ranking.basis()
    );
    // The ratio of a single run is tested against the earlier runs of its command too;
    // a configuration's tests are corrected together (Holm), which still keeps the +11%
    // step but no longer the +7% one.
    let md = render(&set);
    let t = tables(&md);
    assert_eq!(
        &ratio_row(&t, "RND4K Q1T1 Read")[1..],
        ["1.00", "1.11*", "1.07"]
    );
}

#[test]
fn a_repeat_unlike_its_earlier_runs_is_flagged() {
    use std::collections::HashMap;
    // Earlier: three repeats of each configuration that read exactly alike (spread 0, as a
    // throttle's runs do). Now: one repeat each, two of them 1% off: outside the earlier
    // runs' prediction interval, so their spread cannot judge those repeats.
    let now: Vec<_> = common::study_runs_repeated()
        .into_iter()
        .filter(|r| r.study_meta["round"] == 2)
        .collect();
    let mut set = RunSet::study("strip size", now);
    let fp = |label: &str| format!("fp-{label}");
    let fingerprints: HashMap<i64, String> = set
        .runs()
        .map(|r| (r.id.unwrap(), fp(r.config_label.as_deref().unwrap())))
        .collect();
    let mut others = Vec::new();
    for round in 1..=3 {
        for mut r in common::study_runs() {
            r.id = Some(r.id.unwrap() + 1000 * round);
            r.study_meta = serde_json::json!({"invocation": "earlier", "round": round});
            others.push((fp(r.config_label.as_deref().unwrap()), r));
        }
    }
    set.set_noise(iolab_report::set::Noise {
        fingerprints,
        others,
    });
    let ranking = set.ranking();
    let labels: Vec<&str> = set.configs.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels, ["16KB", "32KB", "64KB"]);
    assert_eq!(ranking.noise_repeats, [3, 3, 3]);
    // Round 2 scaled 16KB by 1.01 and 32KB by 0.99; 64KB read as before.
    assert_eq!(ranking.unlike_earlier, [true, true, false]);
}

/// Warnings with `>` and `<` read as written in the Markdown, never as `&gt;`/`&lt;`.
#[test]
fn markdown_prints_no_entities() {
    let mut run = common::cdm_run();
    run.warnings.push(iolab_measure::Warning {
        code: iolab_measure::WarningCode::OutlierPass,
        message: "pass 7 is an outlier (modified z-score > 3.5)".into(),
        fix: "p<0.05 is not enough".into(),
        test: Some(run.tests[0].name.clone()),
    });
    let md = render(&RunSet::per_run(vec![run]));
    assert!(md.contains("modified z-score > 3.5"), "{md}");
    assert!(md.contains("p<0.05"), "{md}");
    assert!(!md.contains("&gt;") && !md.contains("&lt;"), "{md}");
}

/// A wide study whose tests include one that is a row of its own: its table per direction
/// is titled "other tests", never with an empty direction (`**Throughput, MB/s, **`).
#[test]
fn a_wide_study_titles_the_table_of_tests_without_a_direction() {
    let mut runs = common::study_runs();
    for (i, label) in ["128KB", "256KB"].into_iter().enumerate() {
        let mut r = runs[0].clone();
        r.id = Some(200 + i as i64);
        r.uuid = format!("00000000-0000-4000-8000-00000000020{i}");
        r.config_label = Some(label.into());
        runs.push(r);
    }
    for r in &mut runs {
        let mut t = r.tests[0].clone();
        t.name = "flush".into();
        r.tests.push(t);
    }
    let md = render(&RunSet::study("strip size", runs));
    assert!(!md.contains(", **"), "an empty heading: {md}");
    assert!(md.contains("**Throughput, MB/s, other tests**"), "{md}");
    let t = tables(&md);
    let other = t
        .iter()
        .find(|x| x.title == "**Throughput, MB/s, other tests**")
        .unwrap();
    assert_eq!(other.rows.len(), 1);
    assert_eq!(other.rows[0][0], "flush");
}
