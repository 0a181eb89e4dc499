//! The terminal report of cdm-, atto- and custom-shaped runs: layout, values, width.

mod common;

use common::*;
use iolab_measure::{RunRecord, TestRecord};
use iolab_report::{
    render_list, render_run, render_run_with, render_warnings, Detail, ListRow, MAX_WIDTH,
};

fn assert_fits(text: &str) {
    for line in text.lines() {
        let n = line.chars().count();
        assert!(n <= MAX, "line of {n} chars:\n{line}\n---\n{text}");
    }
}

/// The numbers of a table row after its label; `12.3 ms` becomes 12300 (µs), `±0.7%` and
/// `a/b` cells are kept as text.
fn cells(text: &str, label: &str) -> Vec<String> {
    // The row whose label is exactly `label` (gaps are two spaces, or one in tight tables).
    let rows = || text.lines().filter(|l| l.starts_with(label));
    let line = rows()
        .find(|l| l[label.len()..].starts_with("  "))
        .or_else(|| rows().find(|l| l[label.len()..].starts_with(' ')))
        .unwrap_or_else(|| panic!("no row '{label}' in\n{text}"));
    let mut out: Vec<String> = Vec::new();
    for tok in line[label.len()..].split_whitespace() {
        if tok == "ms" {
            let v: f64 = out.pop().unwrap().parse().unwrap();
            out.push((v * 1000.0).to_string());
        } else {
            out.push(tok.to_string());
        }
    }
    out
}

/// Numbers only (no `±` cells).
fn numbers(text: &str, label: &str) -> Vec<f64> {
    cells(text, label)
        .iter()
        .filter(|c| !c.starts_with('±'))
        .map(|c| {
            c.parse()
                .unwrap_or_else(|_| panic!("'{c}' in row '{label}'"))
        })
        .collect()
}

/// Equal to three significant digits (what the table prints).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= want.abs() * 0.005 + 1e-9
}

fn assert_close_all(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(close(*g, *w), "{what}: got {got:?}, want {want:?}");
    }
}

/// All lines joined by spaces with wrap indentation removed.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn test<'a>(run: &'a RunRecord, name: &str) -> &'a TestRecord {
    run.tests.iter().find(|t| t.name == name).unwrap()
}

fn head(t: &TestRecord) -> [f64; 4] {
    let s = &t.summary;
    [s.mb_s, s.iops, s.lat_mean_us, s.lat_p99_us]
}

#[test]
fn cdm_rows_follow_crystaldiskmark() {
    let run = cdm_run();
    let out = render_run_with(&run, Detail::Full);
    assert_fits(&out);
    let f = flat(&out);
    for want in [
        "iolab 0.1.0",
        "preset cdm",
        "#42 · 0b6c1f7e-5d2a-4c1e-9a77-3f1d2e4b5c6d",
        "/mnt/nvme0 (dir, ext4); I/O on /mnt/nvme0/iolab-test.dat",
        "Region: 1 GiB",
        "3 × 5s measured (+1 warm-up × 5s)",
        "io_uring · direct (O_DIRECT) · data random",
        "Started: 2025-03-01T10:00:00Z · finished 2025-03-01T10:04:10Z",
        "Label: nightly",
    ] {
        assert!(f.contains(want), "missing '{want}' in\n{out}");
    }
    assert!(out.lines().any(|l| l
        == "MB/s = 10^6 bytes/s; headline = median of 3 passes \
            (±x% = 95% CI half-width, Student t)"));
    assert!(!out.contains("incomplete"));

    // Read block before write block.
    let span = out
        .lines()
        .find(|l| l.contains("Read") && l.contains("Write"))
        .unwrap();
    assert!(span.find("Read") < span.find("Write"));

    // One row per group plus the mix row, in run order.
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("SEQ") || l.starts_with("RND"))
        .map(|l| l.split("  ").next().unwrap())
        .collect();
    assert_eq!(
        rows,
        [
            "SEQ1M Q8T1",
            "SEQ1M Q1T1",
            "RND4K Q32T1",
            "RND4K Q32T1 Mix r/w",
            "RND4K Q1T1"
        ]
    );

    for group in ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"] {
        let r = head(test(&run, &format!("{group} Read")));
        let w = head(test(&run, &format!("{group} Write")));
        let want: Vec<f64> = r.iter().chain(w.iter()).copied().collect();
        assert_close_all(&numbers(&out, group), &want, group);
        // Three passes 0.3% apart: a CI of ±0.7% on both sides.
        let c = cells(&out, group);
        assert_eq!(c.iter().filter(|c| *c == "±0.7%").count(), 2, "{c:?}");
    }
    // Exact cells of the first row (medians: 3000 and 2500 IOPS of 1 MiB over 1 s).
    assert_eq!(
        &cells(&out, "SEQ1M Q8T1")[..4],
        ["3146", "±0.7%", "3000", "2500"]
    );
    assert_eq!(
        &cells(&out, "SEQ1M Q8T1")[5..9],
        ["2621", "±0.7%", "2500", "3000"]
    );

    // The mixed test's directions: medians of pass.read / pass.write.
    let mix = numbers(&out, "RND4K Q32T1 Mix r/w");
    let m = test(&run, "RND4K Q32T1 Mix");
    let p99r = iolab_stats::median(
        &m.passes
            .iter()
            .map(|p| p.read.as_ref().unwrap().lat_us.p99)
            .collect::<Vec<_>>(),
    );
    let p99w = iolab_stats::median(
        &m.passes
            .iter()
            .map(|p| p.write.as_ref().unwrap().lat_us.p99)
            .collect::<Vec<_>>(),
    );
    assert_close_all(
        &mix,
        &[286.72, 70_000.0, 450.0, p99r, 122.88, 30_000.0, 600.0, p99w],
        "mix",
    );
    assert_eq!(cells(&out, "RND4K Q32T1 Mix r/w")[0], "287");

    assert!(f.contains("Notes: - io_uring: registered buffers unavailable, using plain buffers"));
    assert!(f.contains(
        "Warnings: [CACHE_SMALL_REGION] SEQ1M Q8T1 Write: the 1 GiB region fits in the \
         drive's SLC cache — fix: use --size 64g to measure sustained writes"
    ));
    assert!(!out.contains("I/O errors"));
}

#[test]
fn atto_rows_are_sizes_write_before_read() {
    let run = atto_run();
    let out = render_run(&run);
    assert_fits(&out);
    let header = out.lines().find(|l| l.starts_with("Size")).unwrap();
    let cols = [
        "Write MB/s",
        "Read MB/s",
        "Write IOPS",
        "Read IOPS",
        "Write mean µs",
        "Read mean µs",
    ];
    let pos: Vec<usize> = cols.iter().map(|c| header.find(c).unwrap()).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{header}");
    // One pass: no confidence interval column, and the legend says so.
    assert!(!header.contains("±"));
    assert!(out.contains("headline = median of 1 pass (no confidence interval"));
    assert!(out.contains("data zeros (all 0x00)"));

    let sizes: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Size"))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split("  ").next().unwrap())
        .collect();
    assert_eq!(sizes, ["512 B", "4 KiB", "64 KiB", "1 MiB", "64 MiB"]);

    assert_eq!(
        cells(&out, "512 B"),
        ["51.2", "56.3", "100000", "110000", "30.0", "30.0"]
    );
    assert_close_all(
        &numbers(&out, "64 MiB"),
        &[2684.35, 3355.44, 40.0, 50.0, 75_000.0, 75_000.0],
        "64 MiB",
    );
    // Mean latency in the µs column it is under: 75 ms is 75000, not "75.0 ms".
    assert!(out
        .lines()
        .any(|l| l.starts_with("64 MiB") && l.ends_with("75000")));
    for size in ["4 KiB", "64 KiB", "1 MiB"] {
        let bs = match size {
            "4 KiB" => "4K",
            "64 KiB" => "64K",
            _ => "1M",
        };
        let w = head(test(&run, &format!("{bs} Write")));
        let r = head(test(&run, &format!("{bs} Read")));
        assert_close_all(
            &numbers(&out, size),
            &[w[0], r[0], w[1], r[1], w[2], r[2]],
            size,
        );
    }
}

#[test]
fn custom_rows_show_tails_cpu_errors_and_the_interruption() {
    let run = custom_run();
    let out = render_run_with(&run, Detail::Full);
    assert_fits(&out);
    let f = flat(&out);
    assert!(
        f.contains("Status: incomplete (interrupted or failed)"),
        "{out}"
    );
    assert!(f.contains("(not stored)"));
    assert!(f.contains("psync (asked for io_uring) · buffered (page cache)"));
    // Interrupted: the mixed test finished its 3 passes, the read test 1.
    assert!(f.contains(
        "headline = best of each test's passes (1–3) (±x% = 95% CI half-width, Student t)"
    ));
    assert!(f.contains("Passes: 1–3 × 5s measured per test"), "{out}");
    assert!(!out.contains("Label:"));

    // The long path is wrapped, not cut.
    let target: String = out
        .lines()
        .skip_while(|l| !l.starts_with("Target:"))
        .take_while(|l| l.starts_with("Target:") || l.starts_with("          "))
        .map(|l| &l[10..])
        .collect();
    assert!(target.contains(&run.target.path), "{target}");
    assert!(target.contains(&run.target.io_path));

    // The long mixed test name already ends with "randrw": the rw column gives way.
    let header = out.lines().find(|l| l.starts_with("Test")).unwrap();
    for col in [
        "MB/s",
        "IOPS",
        "mean µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "CPU usr/sys %",
    ] {
        assert!(header.contains(col), "missing {col} in {header}");
    }
    assert!(!header.contains(" rw "), "{header}");

    // Best of 3: the pass with the most I/O (index 2: 140420 reads + 60180 writes in 2 s).
    let t = test(&run, "RND4K Q32T4 70/30 randrw");
    let best = &t.passes[1];
    assert_eq!(t.summary.mb_s, best.mb_s);
    let c = cells(&out, "RND4K Q32T4 70/30 randrw");
    assert_eq!(&c[..3], ["411", "±0.7%", "100300"]);
    assert_eq!(c.last().unwrap(), "12.0/22.0");
    let nums: Vec<f64> = c[3..7].iter().map(|x| x.parse().unwrap()).collect();
    let max_all = t.passes.iter().map(|p| p.lat_us.max).fold(0.0, f64::max);
    assert_close_all(
        &nums,
        &[best.lat_us.mean, best.lat_us.p99, best.lat_us.p999, max_all],
        "latencies",
    );
    // Its directions, from the same best pass.
    assert_eq!(&cells(&out, "  read (70%)")[..3], ["288", "±0.7%", "70210"]);
    assert_eq!(
        &cells(&out, "  write (30%)")[..3],
        ["123", "±0.7%", "30090"]
    );
    // A single pass has no interval.
    assert_eq!(
        &cells(&out, "RND4K Q1T1 randread")[..3],
        ["41.0", "10000", "1.00"]
    );

    assert!(f.contains("Tests with fewer passes than asked: RND4K Q1T1 randread (1 of 3)"));
    assert!(f.contains(
        "I/O errors (1): RND4K Q32T4 70/30 randrw, pass 2: errno 5 (Input/output error) on \
         write at offset 1048576 (1 MiB), length 4096 (4 KiB)"
    ));
    assert!(f.contains("- io_uring is not available (EPERM from io_uring_setup); fell back"));
    assert!(f.contains(
        "[BUFFERED_IO] buffered I/O measures the page cache as much as the device — fix: \
         drop --buffered to use O_DIRECT"
    ));
    assert!(f.contains("[HIGH_VARIANCE] RND4K Q32T4 70/30 randrw: passes differ by more"));
    assert!(f.contains("fix: run longer passes (--duration 30s) or more of them (--runs 5)"));
}

#[test]
fn custom_table_keeps_the_rw_column_when_it_fits() {
    let mut run = custom_run();
    run.tests.remove(0);
    let out = render_run(&run);
    assert_fits(&out);
    let header = out.lines().find(|l| l.starts_with("Test")).unwrap();
    let cols = [
        "rw",
        "MB/s",
        "IOPS",
        "mean µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "CPU usr/sys %",
    ];
    let pos: Vec<usize> = cols.iter().map(|c| header.find(c).unwrap()).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "{header}");
    // Two spaces between columns when there is room.
    assert_eq!(
        cells(&out, "RND4K Q1T1 randread"),
        [
            "randread",
            "41.0",
            "10000",
            "1.00",
            "1.49",
            "1.50",
            "1.50",
            "11.0/21.0"
        ]
    );
    // A workload whose test names do not carry the rw keeps it.
    let mut run = custom_run();
    run.workload = "other".into();
    run.tests[0].name = "mixed job".into();
    let out = render_run(&run);
    assert_fits(&out);
    assert!(out.contains("preset custom (other)"));
    let header = out.lines().find(|l| l.starts_with("Test")).unwrap();
    assert!(header.contains(" rw "), "{out}");
}

#[test]
fn errors_are_listed_with_their_kind_and_capped() {
    use iolab_measure::IoErrorRecord;
    use iolab_spec::IoDir;
    let mut run = custom_run();
    let errs = &mut run.tests[1].passes[0].errors;
    errs.push(IoErrorRecord {
        errno: 0,
        message: "short transfer: 512 of 4096 bytes".into(),
        dir: IoDir::Read,
        offset: 8192,
        len: 4096,
    });
    errs.push(IoErrorRecord {
        errno: 28,
        message: "No space left on device".into(),
        dir: IoDir::Write,
        offset: 0,
        len: 0,
    });
    for k in 0..12 {
        errs.push(IoErrorRecord {
            errno: 5,
            message: "Input/output error".into(),
            dir: IoDir::Read,
            offset: k * 4096,
            len: 4096,
        });
    }
    let out = render_run(&run);
    assert_fits(&out);
    let f = flat(&out);
    assert!(f.contains("I/O errors (15):"), "{out}");
    assert!(f.contains(
        "RND4K Q1T1 randread, pass 1: (short transfer: 512 of 4096 bytes) on read at offset \
         8192 (8 KiB), length 4096 (4 KiB)"
    ));
    assert!(f.contains("pass 1: errno 28 (No space left on device) on write RND4K"));
    assert!(f.contains("… and 4 more in RND4K Q1T1 randread (all are in the JSON output)"));
    let listed = out
        .lines()
        .filter(|l| l.starts_with("  RND4K Q1T1 randread, pass"))
        .count();
    assert_eq!(listed, 10);
}

#[test]
fn extreme_values_and_long_names_still_fit() {
    let mut run = cdm_run();
    for t in &mut run.tests {
        t.group = format!("{} with a group name far too long for any table", t.group);
        t.summary.mb_s = 12_345_678.9;
        t.summary.iops = 98_765_432.1;
        t.summary.lat_mean_us = 123_456_789.0;
        t.summary.lat_p99_us = 0.0123;
    }
    let out = render_run(&run);
    assert_fits(&out);
    assert!(out.contains('…'), "long labels are cut:\n{out}");
    assert!(out.contains("12345679"));
    assert!(out.contains("123456789"));
    assert!(out.contains("0.0123"));

    let mut custom = custom_run();
    custom.tests[0].name = "n".repeat(150);
    custom.preset = "something-new".into();
    let out = render_run(&custom);
    assert_fits(&out);
}

#[test]
fn missing_passes_and_empty_runs() {
    let mut run = cdm_run();
    run.complete = false;
    run.tests[1].passes.clear(); // SEQ1M Q8T1 Write never ran
    run.tests[1].summary = Default::default();
    let out = render_run(&run);
    assert_fits(&out);
    let c = cells(&out, "SEQ1M Q8T1");
    assert_eq!(&c[5..], ["-", "-", "-", "-"], "{out}");
    assert!(out.contains("SEQ1M Q8T1 Write (0 of 3)"));
    assert!(out.contains("incomplete (interrupted or failed)"));

    run.tests.clear();
    let out = render_run(&run);
    assert_fits(&out);
    assert!(out.contains("No test finished a pass."));
}

#[test]
fn list_fits_and_marks_incomplete_runs() {
    let rows = vec![
        ListRow {
            id: 1,
            started_at: "2025-03-01T10:00:00.123456Z".into(),
            preset: "cdm".into(),
            target: "/mnt/nvme0".into(),
            fs_type: "ext4".into(),
            label: Some("baseline".into()),
            config: None,
            complete: true,
            tests: 8,
        },
        ListRow {
            id: 1234,
            started_at: "2025-03-02T11:30:00Z".into(),
            preset: "custom".into(),
            target: format!("/srv/{}/data", "deep".repeat(40)),
            fs_type: "xfs".into(),
            label: Some("a label that goes on and on and on and on and on".into()),
            config: None,
            complete: false,
            tests: 1,
        },
    ];
    let out = render_list(&rows);
    assert_fits(&out);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].trim_start().starts_with("ID Started (UTC)"),
        "{out}"
    );
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        words(lines[2]),
        [
            "1",
            "2025-03-01",
            "10:00:00",
            "cdm",
            "/mnt/nvme0",
            "ext4",
            "8",
            "ok",
            "baseline"
        ]
    );
    let long = words(lines[3]);
    assert_eq!(&long[..4], ["1234", "2025-03-02", "11:30:00", "custom"]);
    assert!(
        long[4].starts_with('…') && long[4].ends_with("deepdeep/data"),
        "{out}"
    );
    assert!(long[4].chars().count() >= 15, "{out}");
    assert_eq!(&long[5..8], ["xfs", "1", "incomplete"]);
    assert!(lines[3].contains("a label that goes on") && lines[3].ends_with('…'));
    assert_eq!(*lines.last().unwrap(), "2 runs");
    assert_eq!(render_list(&[]), "No runs stored.\n");
}

#[test]
fn output_ends_with_one_newline() {
    let out = render_run(&atto_run());
    assert!(out.ends_with('\n') && !out.ends_with("\n\n"));
    assert_eq!(MAX_WIDTH, MAX);
}

#[test]
fn the_header_counts_the_passes_each_test_ran() {
    // --until-stable asked for 3 and ran 3 to 5: the header says so, not "3 ×".
    let mut run = cdm_run();
    let extra = run.tests[0].passes[0].clone();
    for k in 0..2 {
        let mut p = extra.clone();
        p.index = 4 + k;
        run.tests[0].passes.push(p);
    }
    for (i, t) in run.tests.iter_mut().enumerate() {
        t.summary.converged = Some(i != 0);
    }
    let out = render_run(&run);
    let f = flat(&out);
    assert!(
        f.contains("Passes: 3–5 × 5s measured per test (+1 warm-up × 5s); until stable: 8 of 9 tests converged"),
        "{out}"
    );
    assert!(
        f.contains("headline = median of each test's passes (3–5)"),
        "{out}"
    );
}

/// A warning of `code` on `test`.
fn warn(code: &str, message: &str, test: Option<&str>) -> iolab_measure::Warning {
    iolab_measure::Warning {
        code: iolab_measure::WarningCode::parse(code),
        message: message.into(),
        fix: "the fix".into(),
        test: test.map(str::to_string),
    }
}

#[test]
fn warnings_are_one_line_a_code_caveats_first_and_busy_cpu_names_the_pid() {
    let mut run = cdm_run();
    run.id = Some(7);
    run.warnings.clear();
    let names: Vec<String> = run.tests.iter().map(|t| t.name.clone()).collect();
    for (i, name) in names.iter().enumerate() {
        run.warnings.push(warn(
            "HIGH_VARIATION",
            &format!(
                "MB/s varied by {}% (coefficient of variation) across 7 passes",
                10 + i
            ),
            Some(name),
        ));
        run.warnings.push(warn(
            "BUSY_CPU",
            "other processes used 50% of a CPU during pass 1 (cc1 50%)",
            Some(name),
        ));
    }
    run.warnings.push(warn(
        "WRITES_FASTER_THAN_READS",
        "direct writes ran at least 2× as fast as direct reads: a cache",
        None,
    ));
    // The busiest pass of all: 110% of a CPU, most of it `cc1` with pid 4123.
    let pass = &mut run.tests[2].passes[1];
    pass.context.activity.other_cpu_pct = 110.0;
    pass.context.activity.top_processes = vec![iolab_measure::ProcessCpu {
        pid: 4123,
        name: "cc1".into(),
        cpu_pct: 90.0,
    }];
    let n = names.len();
    let out = render_run(&run);
    assert_fits(&out);
    // The header says once how the headline relates to CrystalDiskMark's.
    assert_eq!(
        out.matches("CrystalDiskMark: best of 5 × 5 s passes (--score best")
            .count(),
        1,
        "{out}"
    );
    let at = out.find("Warnings (").expect("a warnings heading");
    let lines: Vec<&str> = out[at..].lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "Warnings ({} in all; each with its fix: `iolab show 7 --warnings`):",
            2 * n + 1
        )
    );
    assert_eq!(lines.len(), 4, "one line a code:\n{out}");
    assert!(lines[1].starts_with("  [WRITES_FASTER_THAN_READS] direct writes ran"));
    assert_eq!(
        lines[2],
        format!(
            "  [HIGH_VARIATION] on {n} of {n} tests: MB/s varied by {}% across 7 passes \
             (worst: {})",
            10 + n - 1,
            names[n - 1]
        )
    );
    assert_eq!(
        lines[3],
        format!("  [BUSY_CPU] on {n} of {n} tests: up to 110% of a CPU, most by `cc1` (pid 4123)")
    );
    // In full: every warning with its fix, caveats first.
    let full = render_run_with(&run, Detail::Full);
    assert_eq!(flat(&full).matches("— fix: the fix").count(), 2 * n + 1);
    let only = render_warnings(&run);
    assert!(only.starts_with("  [WRITES_FASTER_THAN_READS]"), "{only}");
    assert_eq!(only.matches("[BUSY_CPU]").count(), n);
}

#[test]
fn a_run_with_more_warning_codes_than_a_screen_holds_names_the_rest_on_one_line() {
    let mut run = cdm_run();
    run.id = Some(9);
    run.warnings.clear();
    // One warning of each of many codes, as a loaded machine gathers them.
    let codes: Vec<&str> = iolab_measure::WarningCode::ALL
        .iter()
        .map(|c| c.as_str())
        .take(30)
        .collect();
    for c in &codes {
        run.warnings.push(warn(c, "something to know", None));
    }
    let out = render_run(&run);
    assert!(
        out.lines().count() <= 40,
        "{} lines:\n{out}",
        out.lines().count()
    );
    let last = out.lines().last().unwrap();
    let more: usize = last
        .strip_prefix("  and ")
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `and N more` line:\n{out}"));
    assert!(last.contains("more (`iolab show 9 --warnings`): "), "{out}");
    // Every code is either on its own line or counted in the last one.
    let shown = codes
        .iter()
        .filter(|c| out.contains(&format!("[{c}]")))
        .count();
    assert_eq!(shown + more, codes.len(), "{out}");
    // In full, nothing is left out.
    let full = render_run_with(&run, Detail::Full);
    for c in &codes {
        assert!(full.contains(c), "{c}");
    }
}
