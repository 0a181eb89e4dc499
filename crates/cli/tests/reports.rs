//! `iolab report`, `compare` and `history` on a database of real runs of every workload
//! type (small sizes, short passes), plus a study and a pair with a known difference made
//! from a real run. The HTML is opened in headless Chromium: no console errors, nothing
//! fetched, every chart drawn, a screenshot kept in `target/test-artifacts/`. Markdown and
//! CSV are parsed back and checked against `iolab show --json`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use iolab_measure::{PassRecord, RunRecord};
use iolab_stats::{summarize, Score};
use iolab_store::Store;
use iolab_testkit::{skip, tool, Out, MIB};
use serde_json::Value;

mod serve;

/// The fixture database and the ids of its runs.
struct Fixture {
    root: PathBuf,
    db: PathBuf,
    target: PathBuf,
    /// Real runs by workload (`cdm` is labelled "before", `cdm-after` "after").
    ids: HashMap<&'static str, i64>,
    /// The study "strip size": configurations 16KB, 32KB, 64KB.
    study: Vec<i64>,
    /// Two labels of three runs each made from the cdm run, every test wobbling by ±1%
    /// between runs: SEQ1M Q8T1 Read at 1000/1010 MB/s (× the wobble) in `pair-a` and
    /// 1500/1515 MB/s in `pair-b`, everything else the same.
    pair: (Vec<i64>, Vec<i64>),
    /// Five runs labelled `trend`: SEQ1M Q8T1 Read 50% faster in the last one.
    trend: Vec<i64>,
}

impl Fixture {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_iolab"));
        c.args(args)
            .arg("--db")
            .arg(&self.db)
            .env("XDG_DATA_HOME", &self.root)
            .env("HOME", &self.root)
            .current_dir(&self.root)
            .stdin(Stdio::null());
        c
    }

    fn iolab(&self, args: &[&str]) -> Out {
        let start = Instant::now();
        let out = self.cmd(args).output().unwrap();
        Out::new(args, out, start.elapsed())
    }

    fn run(&self, args: &[&str]) -> i64 {
        let mut v = vec!["run"];
        v.extend_from_slice(args);
        v.extend_from_slice(&["--target", self.target.to_str().unwrap(), "--quiet"]);
        let out = self.iolab(&v).ok();
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("stored as run "))
            .unwrap_or_else(|| panic!("no run id: {out}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    }

    fn show(&self, id: i64) -> Value {
        self.iolab(&["show", &id.to_string(), "--json"]).ok().json()
    }

    fn all_ids(&self) -> Vec<String> {
        let mut ids: Vec<i64> = self.ids.values().copied().collect();
        ids.sort_unstable();
        ids.iter().map(|i| i.to_string()).collect()
    }
}

/// Multiplies a pass's throughput (bytes, I/Os, MB/s, IOPS, time series) by `f`.
/// The device's counters move with the pass's own bytes, so that the I/O of others during
/// the pass (the device's bytes less the pass's) stays what the real run met: a copy is
/// measured under the same conditions as its original.
fn scale_pass(p: &mut PassRecord, f: f64) {
    let sc = |x: u64| (x as f64 * f).round() as u64;
    let moved =
        |d: Option<&iolab_measure::DirResult>| d.map_or(0, |d| sc(d.bytes) as i64 - d.bytes as i64);
    let (dr, dw) = (moved(p.read.as_ref()), moved(p.write.as_ref()));
    for dev in &mut p.context.activity.devices {
        dev.read_bytes = dev.read_bytes.saturating_add_signed(dr);
        dev.write_bytes = dev.write_bytes.saturating_add_signed(dw);
    }
    p.bytes = sc(p.bytes);
    p.ios = sc(p.ios);
    p.mb_s *= f;
    p.iops *= f;
    for d in [p.read.as_mut(), p.write.as_mut()].into_iter().flatten() {
        d.bytes = sc(d.bytes);
        d.ios = sc(d.ios);
        d.mb_s *= f;
        d.iops *= f;
    }
    for b in &mut p.timeseries.bytes {
        *b = sc(*b);
    }
}

/// A copy of `run` as a new run, each test's passes scaled by `f(test name, pass)`. The
/// original's warnings describe the original's numbers, so the copy starts without any.
fn derived(run: &RunRecord, f: &dyn Fn(&str, &PassRecord) -> f64) -> RunRecord {
    let mut r = run.clone();
    r.warnings.clear();
    r.id = None;
    r.uuid = format!("{}{:08x}", &run.uuid[..28], fastrand_u32());
    for t in &mut r.tests {
        for p in &mut t.passes {
            let k = f(&t.name, p);
            scale_pass(p, k);
        }
        t.summary = summarize(&t.passes, Score::Median);
    }
    r
}

fn fastrand_u32() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(1);
    N.fetch_add(1, Ordering::Relaxed)
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        // Runs are read back from the store below: their engines are looked up in the
        // catalogue the binary installs first thing.
        iolab_workloads::install();
        // One fixed directory, replaced on every test run, rather than a temporary one a
        // static would never remove.
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports-fixture");
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("t")).unwrap();
        let f0 = Fixture {
            db: root.join("r.db"),
            target: root.join("t"),
            root: root.clone(),
            ids: HashMap::new(),
            study: Vec::new(),
            pair: (Vec::new(), Vec::new()),
            trend: Vec::new(),
        };
        let loadfile = root.join("tiny-loadfile.txt");
        fs::write(&loadfile, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
        let short = ["--runs", "2", "--duration", "150ms", "--warmup", "0"];
        let with = |extra: &[&'static str]| -> Vec<&'static str> {
            let mut v = extra.to_vec();
            v.extend_from_slice(&short);
            v
        };
        let mut ids = HashMap::new();
        ids.insert(
            "cdm",
            f0.run(&with(&["cdm", "--size", "8MiB", "--label", "before"])),
        );
        ids.insert(
            "cdm-after",
            f0.run(&with(&["cdm", "--size", "8MiB", "--label", "after"])),
        );
        ids.insert(
            "atto",
            f0.run(&["atto", "--size", "2MiB", "--duration", "100ms"]),
        );
        ids.insert(
            "custom",
            f0.run(&with(&[
                "custom",
                "--rw",
                "randrw",
                "--bs",
                "4k",
                "--iodepth",
                "4",
                "--size",
                "8MiB",
            ])),
        );
        ids.insert("iometer", f0.run(&with(&["iometer", "--size", "8MiB"])));
        ids.insert(
            "fsync",
            // The probe has no warm-up passes.
            f0.run(&[
                "fsync",
                "--sizes",
                "4k",
                "--methods",
                "none,fdatasync",
                "--runs",
                "2",
                "--duration",
                "150ms",
            ]),
        );
        ids.insert("copy", f0.run(&["copy", "--size", "4MiB", "--runs", "2"]));
        ids.insert(
            "streams",
            f0.run(&["streams", "--streams", "2", "--size", "4MiB", "--bs", "1M"]),
        );
        ids.insert(
            "metadata",
            f0.run(&[
                "metadata",
                "--files",
                "200",
                "--dirs",
                "2",
                "--threads",
                "1",
            ]),
        );
        let lf = loadfile.to_str().unwrap();
        ids.insert(
            "dbench",
            f0.run(&[
                "dbench",
                "--loadfile",
                lf,
                "--clients",
                "2",
                "--time",
                "1s",
                "--warmup",
                "0s",
            ]),
        );

        // A study and a known difference, made from the real cdm run.
        let mut store = Store::open(&f0.db).unwrap();
        let base = store.load_run(ids["cdm"]).unwrap();
        let mut study = Vec::new();
        for (label, random, seq) in [
            ("16KB", 0.90, 1.00),
            ("32KB", 1.00, 0.98),
            ("64KB", 0.96, 0.95),
        ] {
            let mut r = derived(&base, &|name, _| {
                if name.starts_with("RND") {
                    random
                } else {
                    seq
                }
            });
            r.study = Some("strip size".into());
            r.config_label = Some(label.into());
            r.label = None;
            study.push(store.save_run(&r).unwrap());
        }
        // Run-to-run wobble: every test of a run scaled by one factor.
        let wobble = [1.0, 1.01, 0.99];
        let exact = |mbs: [f64; 2], w: f64| {
            move |name: &str, p: &PassRecord| {
                if name == "SEQ1M Q8T1 Read" {
                    w * mbs[p.index as usize - 1] / p.mb_s
                } else {
                    w
                }
            }
        };
        let mut save = |label: &str, mbs: [f64; 2], w: f64| {
            let mut r = derived(&base, &exact(mbs, w));
            r.label = Some(label.into());
            store.save_run(&r).unwrap()
        };
        let mut pair = (Vec::new(), Vec::new());
        for k in 0..3 {
            pair.0.push(save("pair-a", [1000.0, 1010.0], wobble[k]));
            pair.1
                .push(save("pair-b", [1500.0, 1515.0], wobble[(k + 1) % 3]));
        }
        let mut trend = Vec::new();
        for (k, f) in [1.0, 1.0, 1.0, 1.0, 1.5].into_iter().enumerate() {
            let w = [1.0, 1.01, 0.99, 1.005, 0.995][k];
            trend.push(save("trend", [1000.0 * f / w, 1010.0 * f / w], w));
        }
        Fixture {
            ids,
            study,
            pair,
            trend,
            ..f0
        }
    })
}

fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("test-artifacts");
    fs::create_dir_all(&dir).unwrap();
    dir
}

// --- Markdown and CSV parsed back -----------------------------------------------------

fn split_row(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut cells = vec![String::new()];
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cells.last_mut().unwrap().extend(chars.next()),
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

/// Tables of a Markdown document as (title line, header, rows).
fn md_tables(md: &str) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let lines: Vec<&str> = md.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        if lines[i].starts_with('|') && lines[i + 1].starts_with("|:-") {
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
            out.push((title, header, rows));
        } else {
            i += 1;
        }
    }
    out
}

fn first_number(cell: &str) -> f64 {
    cell.split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number in {cell:?}"))
}

/// A value printed with three significant digits (whole numbers from 100 up).
fn printed_as(printed: f64, stored: f64) -> bool {
    let tol = if stored.abs() >= 100.0 {
        0.5
    } else {
        stored.abs() * 0.005 + 1e-9
    };
    (printed - stored).abs() <= tol
}

#[test]
fn markdown_tables_match_the_stored_numbers() {
    let f = fixture();
    for (kind, id) in &f.ids {
        let md = f
            .iolab(&["report", &id.to_string(), "--markdown"])
            .ok()
            .stdout;
        let doc = f.show(*id);
        let tests = doc["tests"].as_array().unwrap();
        let tables = md_tables(&md);
        assert!(!tables.is_empty(), "{kind}: {md}");
        let mut checked = 0;
        for (title, header, rows) in &tables {
            let key = match title.as_str() {
                "**Throughput, MB/s**" => "mb_s",
                "**I/O operations per second**" | "**Operations per second**" => "iops",
                "**99th-percentile latency, µs**" => "lat_p99_us",
                _ => continue,
            };
            for row in rows {
                for (col, kindcol) in header.iter().enumerate().skip(1) {
                    let cell = &row[col];
                    if cell == "-" {
                        continue;
                    }
                    // The test is the row, or the row and the column ("SEQ1M Q8T1" "Read");
                    // ATTO's rows are sizes with units ("4 KiB" is the test "4K").
                    let row0 = match iolab_spec::parse_size("row", &row[0].replace(' ', "")) {
                        Ok(b) if *kind == "atto" => iolab_spec::format_size_short(b),
                        _ => row[0].clone(),
                    };
                    let name = if tests.iter().any(|t| t["name"] == row0.as_str()) {
                        row0.clone()
                    } else {
                        format!("{row0} {kindcol}")
                    };
                    let t = tests
                        .iter()
                        .find(|t| t["name"] == name.as_str())
                        .unwrap_or_else(|| panic!("{kind}: no test {name:?}"));
                    let stored = t["summary"][key].as_f64().unwrap();
                    let v = first_number(cell);
                    assert!(
                        printed_as(v, stored),
                        "{kind} {name} {key}: {v} vs {stored}"
                    );
                    if t["passes"].as_array().unwrap().len() >= 2 && stored > 0.0 {
                        let ci = t["summary"]["stats"][key]["ci_pct"].as_f64().unwrap();
                        let printed: f64 = cell
                            .split('±')
                            .nth(1)
                            .unwrap_or_else(|| panic!("{kind} {name}: no ± in {cell:?}"))
                            .trim_end_matches('%')
                            .parse()
                            .unwrap();
                        assert!(
                            (printed - ci).abs() <= 0.05 + 0.05 * ci,
                            "{name} CI {printed} vs {ci}"
                        );
                    }
                    checked += 1;
                }
            }
        }
        let n: usize = tests.len();
        assert!(checked >= n, "{kind}: only {checked} cells for {n} tests");
        // Every warning of the run is listed.
        for w in doc["warnings"].as_array().unwrap() {
            assert!(
                md.contains(&format!("`{}`", w["code"].as_str().unwrap())),
                "{kind}"
            );
        }
    }
}

#[test]
fn study_markdown_scores_the_configurations() {
    let f = fixture();
    let md = f
        .iolab(&["report", "--study", "strip size", "--markdown"])
        .ok()
        .stdout;
    let tables = md_tables(&md);
    let (_, header, _) = &tables[0];
    assert_eq!(header[1..4], ["Read 16KB", "Read 32KB", "Read 64KB"]);
    // Random tests scaled 0.90/1.00/0.96, sequential 1.00/0.98/0.95 (4 of each): totals
    // sqrt(0.9) = 0.9487, sqrt(0.98) = 0.9899, sqrt(0.96 · 0.95) = 0.9550, over the best:
    // 0.958, 1.000, 0.965.
    let (_, _, score) = tables.iter().find(|t| t.0.starts_with("**Score")).unwrap();
    // One run per configuration: the ranks cannot be told apart.
    assert_eq!(
        score,
        &[
            ["1-3", "32KB", "1.00", "0.98", "1.00", "-"],
            ["1-3", "64KB", "0.96", "0.95", "0.96", "-"],
            ["1-3", "16KB", "0.90", "1.00", "0.96", "-"],
        ]
    );
    // --baseline changes the ratio table's reference.
    let md = f
        .iolab(&["report", "--study", "strip size", "--baseline", "32KB"])
        .ok()
        .stdout;
    assert!(md.contains("**Ratio to the baseline (32KB)**"), "{md}");
    f.iolab(&["report", "--study", "strip size", "--baseline", "8KB"])
        .code(2)
        .stderr_has(&["no configuration labelled '8KB'"]);
}

#[test]
fn csv_rows_match_the_stored_passes() {
    let f = fixture();
    let out = f.root.join("all.csv");
    let mut args = vec!["report".to_string()];
    args.extend(f.all_ids());
    args.extend(["--csv".into(), out.to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    f.iolab(&args).ok();
    let mut reader = csv::Reader::from_path(&out).unwrap();
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, iolab_report::csv::COLUMNS);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    let mut expected = 0;
    for id in f.ids.values() {
        let doc = f.show(*id);
        for t in doc["tests"].as_array().unwrap() {
            for p in t["passes"].as_array().unwrap() {
                expected += 1;
                let row = rows
                    .iter()
                    .find(|r| {
                        r[col("run_id")] == id.to_string()
                            && r[col("test")] == *t["name"].as_str().unwrap()
                            && r[col("pass")].parse::<u64>().ok() == p["index"].as_u64()
                    })
                    .unwrap_or_else(|| {
                        panic!("no row for run {id} {} pass {}", t["name"], p["index"])
                    });
                for (c, key) in [("mb_s", "mb_s"), ("iops", "iops"), ("seconds", "seconds")] {
                    let v: f64 = row[col(c)].parse().unwrap();
                    assert_eq!(v, p[key].as_f64().unwrap(), "run {id} {} {c}", t["name"]);
                }
                assert_eq!(row[col("bytes")], p["bytes"].to_string());
                let lat: f64 = row[col("lat_p99_us")].parse().unwrap();
                assert_eq!(lat, p["lat_us"]["p99"].as_f64().unwrap());
                assert_eq!(row[col("workload")], *doc["workload"].as_str().unwrap());
            }
        }
    }
    assert_eq!(rows.len(), expected);
}

/// Terminal text with its line breaks and indents undone, for phrase checks.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn compare_finds_the_known_difference_on_runs() {
    let f = fixture();
    // Three runs a side: Welch's t-test on the runs.
    let text = f
        .iolab(&["compare", "--label", "pair-a", "--label", "pair-b"])
        .ok()
        .stdout;
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("SEQ1M Q8T1 Read"))
        .unwrap_or_else(|| panic!("{text}"));
    // Geometric means of the runs' medians (1005 and 1507.5 × the wobble): +50%.
    assert!(line.contains("1005") && line.contains("150"), "{line}");
    assert!(
        line.contains("+50%") && line.contains("different, better"),
        "{line}"
    );
    // The other tests wobble by ±1% between runs on both sides: the same within ±5%.
    for l in text.lines().filter(|l| l.starts_with("RND4K")) {
        assert!(l.contains("same within ±5%"), "{l}");
    }
    assert!(
        flat(&text).contains("B vs A: 3 runs on A, 3 runs on B: Welch's t-test on ln(run value)"),
        "{text}"
    );
    let doc = f
        .iolab(&[
            "compare", "--label", "pair-a", "--label", "pair-b", "--json",
        ])
        .ok()
        .json();
    assert_eq!(doc["schema"], "iolab.comparison/2");
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "SEQ1M Q8T1 Read")
        .unwrap();
    let cell = &t["metrics"]["mb_s"][1];
    assert_eq!(cell["verdict"], "different");
    assert_eq!(cell["direction"], "better");
    assert!((cell["change_pct"].as_f64().unwrap() - 50.0).abs() < 0.5);
    assert!(cell["p"].as_f64().unwrap() < 0.05);
    assert_eq!(cell["evidence"]["method"], "welch-log-runs");
    assert_eq!(cell["runs"], 3);
    // The margin: +50% is inside ±60%, so the same; a margin of 0 is refused.
    let wide = f
        .iolab(&[
            "compare", "--label", "pair-a", "--label", "pair-b", "--margin", "60", "--json",
        ])
        .ok()
        .json();
    assert_eq!(wide["margin_pct"], 60.0);
    let t = wide["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "SEQ1M Q8T1 Read")
        .unwrap();
    assert_eq!(t["metrics"]["mb_s"][1]["verdict"], "same", "{t}");
    let bad = f.iolab(&[
        "compare", "--label", "pair-a", "--label", "pair-b", "--margin", "0",
    ]);
    assert!(bad.stderr.contains("--margin"), "{bad}");
    bad.code(2);

    // One run a side: judged against the other stored runs of each label's command (two
    // each, pooled: 2 degrees of freedom).
    // Runs with no wobble on either side: exactly +50%.
    let (a, b) = (f.pair.0[0].to_string(), f.pair.1[2].to_string());
    let text = f.iolab(&["compare", &a, &b]).ok().stdout;
    let line = text
        .lines()
        .find(|l| l.starts_with("SEQ1M Q8T1 Read"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("+50%") && line.contains("different, better"),
        "{line}"
    );
    let mut others: Vec<i64> = f.pair.0[1..]
        .iter()
        .chain(&f.pair.1[..2])
        .copied()
        .collect();
    others.sort_unstable();
    assert!(
        flat(&text).contains("noise measured on 4 other stored runs of the same command"),
        "{text}"
    );
    let doc = f.iolab(&["compare", &a, &b, "--json"]).ok().json();
    let t = &doc["tests"][0];
    let e = &t["metrics"]["mb_s"][1]["evidence"];
    assert_eq!(e["method"], "pooled-log-noise");
    let mut ids: Vec<i64> = e["noise_run_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, others);
    // Warnings from either side are listed with the side.
    if !f.show(f.pair.0[0])["warnings"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            text.contains("\nA: [") || text.contains("\n  A: ["),
            "{text}"
        );
    }

    // The two real cdm runs, one each and no other run of their commands: nothing can be
    // told, and the output says what to do.
    let text = f
        .iolab(&["compare", "--label", "before", "--label", "after"])
        .ok()
        .stdout;
    assert!(
        text.contains("A = label before") && text.contains("B = label after"),
        "{text}"
    );
    for l in text.lines().filter(|l| l.starts_with("SEQ1M Q8T1 Read")) {
        assert!(l.contains("can't tell (1 run)"), "{l}");
    }
    assert!(
        flat(&text)
            .contains("cannot be told from run-to-run noise. Run it again (or use --repeat N)"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

#[test]
fn history_lists_runs_with_their_headlines() {
    let f = fixture();
    let target = f.target.to_str().unwrap();
    let text = f
        .iolab(&["history", "--target", target, "--preset", "cdm"])
        .ok()
        .stdout;
    assert!(text.contains("preset cdm · 16 runs"), "{text}");
    assert!(
        text.contains("first → last") && text.contains("trend"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let row = |id: i64| -> String {
        let id = id.to_string();
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    // The last `trend` run is 50% faster at SEQ1M Q8T1 Read than the one before, and the
    // three before that measure the noise of the command: an arrow.
    // 1005 x 1.5 = 1507.5: the copy's bytes are whole numbers, so it shows as 1507 or 1508.
    let last = row(f.trend[4]);
    assert!(last.contains("1508↑") || last.contains("1507↑"), "{last}");
    // Within the noise (measured on the first two): `=`. The second and third runs have
    // fewer than two earlier runs of their command: `?`.
    assert!(row(f.trend[3]).contains("1005="), "{}", row(f.trend[3]));
    assert!(row(f.trend[2]).contains("?"), "{}", row(f.trend[2]));
    // pair-b's first run follows pair-a's last: 52% faster (1507.5 × 1.01), but no earlier
    // run of pair-b's command measures its noise: `?`, not an arrow.
    assert!(row(f.pair.1[0]).contains("1523?"), "{}", row(f.pair.1[0]));
    let doc = f
        .iolab(&["history", "--preset", "cdm", "--json"])
        .ok()
        .json();
    assert_eq!(doc["schema"], "iolab.history/2");
    let runs = doc["series"][0]["runs"].as_array().unwrap();
    let last = runs.iter().find(|r| r["run_id"] == f.trend[4]).unwrap();
    let t = &last["tests"][0];
    assert_eq!(
        (t["test"].as_str(), t["movement"].as_str()),
        (Some("SEQ1M Q8T1 Read"), Some("up"))
    );
    assert_eq!(t["noise_runs"], 3);
    let doc = f
        .iolab(&["history", "--preset", "fsync", "--json"])
        .ok()
        .json();
    assert_eq!(doc["series"][0]["runs"].as_array().unwrap().len(), 1);
    let none = f.iolab(&["history", "--preset", "nope"]).ok().stdout;
    assert_eq!(none, "No runs match.\n");
}

#[test]
fn json_documents_for_a_run_and_a_study() {
    let f = fixture();
    let id = f.ids["cdm"].to_string();
    let doc = f.iolab(&["report", &id, "--json"]).ok().json();
    assert_eq!(doc, f.show(f.ids["cdm"]));
    let study = f
        .iolab(&["report", "--study", "strip size", "--json"])
        .ok()
        .json();
    assert_eq!(study["schema"], "iolab.study/2");
    assert_eq!(study["study"], "strip size");
    assert_eq!(study["configurations"].as_array().unwrap().len(), 3);
    assert_eq!(study["runs"].as_array().unwrap().len(), 3);
    assert_eq!(study["score"]["ranked"][0]["label"], "32KB");
    assert_eq!(study["score"]["ranked"][0]["total"], 1.0);
    // One run per configuration: the ranks share 1-3 and the document says why.
    assert_eq!(study["score"]["ranked"][0]["rank_text"], "1-3");
    assert_eq!(study["score"]["ranked"][0]["repeats"], 1);
    assert!(study["score"]["ranks_basis"]
        .as_str()
        .unwrap()
        .contains("cannot be told apart from run-to-run noise"));
    assert_eq!(
        study["tests"][0]["values"][1]["vs_baseline"]["significant"],
        Value::Null
    );
    let t = &study["tests"][0];
    assert_eq!(t["name"], "SEQ1M Q8T1 Read");
    assert_eq!(t["access"], "sequential");
    assert!((t["values"][1]["ratio_to_baseline"].as_f64().unwrap() - 0.98).abs() < 1e-9);
    let ids: Vec<i64> = study["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["run_ids"][0].as_i64().unwrap())
        .collect();
    assert_eq!(ids, f.study);
    // Several runs without a study: the same document, study null.
    let two = f
        .iolab(&["report", &id, &f.ids["cdm-after"].to_string(), "--json"])
        .ok()
        .json();
    assert_eq!(two["schema"], "iolab.study/2");
    assert_eq!(two["study"], Value::Null);
}

#[test]
fn bad_input_and_missing_runs() {
    let f = fixture();
    f.iolab(&["report", "999999", "--markdown"])
        .code(2)
        .stderr_has(&["not found"]);
    f.iolab(&["report", "twelve"])
        .code(2)
        .stderr_has(&["not a number"]);
    f.iolab(&["report"]).code(2);
    f.iolab(&["report", "--study", "no such study"])
        .code(2)
        .stderr_has(&["not found"]);
    f.iolab(&["report", "1", "--csv", "--markdown"])
        .code(2)
        .stderr_has(&["only one format"]);
    f.iolab(&["report", "1", "--csv", "12"])
        .code(2)
        .stderr_has(&["looks like a run id"]);
    f.iolab(&["compare", "1"])
        .code(2)
        .stderr_has(&["two sides"]);
    f.iolab(&["compare", "1", "999999"])
        .code(2)
        .stderr_has(&["not found"]);
    f.iolab(&["compare", "--label", "before", "--label", "nobody"])
        .code(2)
        .stderr_has(&["not found"]);
}

// --- HTML in a real browser -------------------------------------------------------------

/// Chromium (test.sh installs it; tests never install packages).
fn chromium() -> Option<PathBuf> {
    tool("chromium").or_else(|| tool("chromium-browser"))
}

/// Runs headless Chromium with a fresh profile on `page`; returns (stdout, stderr).
fn browse(chrome: &Path, page: &Path, extra: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-extensions",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes on threads so a full pipe cannot stall the browser.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut so, &mut s).ok();
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut se, &mut s).ok();
        s
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (t1.join().unwrap(), t2.join().unwrap())
}

/// A copy of the report with a probe: it records script errors and policy violations,
/// counts resources the page fetched, and measures every chart (collapsed ones opened
/// first), then writes its findings into the DOM for `--dump-dom`. The copy's policy
/// allows only that inline script.
fn probe_copy(html: &str, path: &Path) {
    probe_copy_with(
        html,
        path,
        "document.querySelectorAll('details').forEach(function(d){d.open=true});\
         var out={errors:window.__errs,charts:{},empty:0,\
         resources:performance.getEntriesByType('resource').length};\
         document.querySelectorAll('[data-chart]').forEach(function(el){\
           var k=el.getAttribute('data-chart');var r=el.getBoundingClientRect();\
           var svg=el.querySelector('svg');var s=svg?svg.getBoundingClientRect():r;\
           if(s.width>50&&s.height>50){out.charts[k]=(out.charts[k]||0)+1}else{out.empty++}});",
    );
}

/// A copy of the report that runs `measure` (script that sets `out`) once loaded and
/// writes `out` as JSON into a `<pre id="probe">` for `--dump-dom`.
fn probe_copy_with(html: &str, path: &Path, measure: &str) {
    let policy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";
    assert!(html.contains(policy));
    let early = "<script>window.__errs=[];\
        window.addEventListener('error',function(e){__errs.push('error: '+e.message)});\
        document.addEventListener('securitypolicyviolation',function(e){__errs.push('csp: '+e.blockedURI+' '+e.violatedDirective)});\
        </script>";
    let late = format!(
        "<script>(function(){{{measure}\
         var pre=document.createElement('pre');pre.id='probe';pre.textContent=JSON.stringify(out);\
         document.body.appendChild(pre);}})();</script>"
    );
    let relaxed = format!("{policy}; script-src 'unsafe-inline'");
    let copy = html
        .replacen(policy, &relaxed, 1)
        .replacen(
            "<meta charset=\"utf-8\">",
            &format!("<meta charset=\"utf-8\">{early}"),
            1,
        )
        .replacen("</body>", &format!("{late}</body>"), 1);
    fs::write(path, copy).unwrap();
}

/// Opens a probe copy (see [`probe_copy_with`]) and returns what it wrote, and the log.
fn run_probe(chrome: &Path, name: &str, probe: &Path, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["--dump-dom", "--virtual-time-budget=3000"];
    args.extend_from_slice(extra);
    let (dom, log) = browse(chrome, probe, &args);
    let start = dom
        .find("<pre id=\"probe\">")
        .unwrap_or_else(|| panic!("{name}: the probe did not run; log:\n{log}"));
    let json = &dom[start + 16..];
    let json = &json[..json.find("</pre>").unwrap()];
    let json = json
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    (serde_json::from_str(&json).unwrap(), log)
}

/// Console messages and refused loads in Chromium's log.
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Refused to") || l.contains("Uncaught"))
        .collect()
}

fn check_in_browser(chrome: &Path, name: &str, html_path: &Path, want: &[(&str, usize)]) {
    let html = fs::read_to_string(html_path).unwrap();
    let art = artifacts();
    fs::copy(html_path, art.join(format!("{name}.html"))).unwrap();
    // 1. The probe.
    let probe = html_path.with_extension("probe.html");
    probe_copy(&html, &probe);
    let (found, log) = run_probe(chrome, name, &probe, &[]);
    assert_eq!(found["errors"], serde_json::json!([]), "{name}: {found}");
    assert_eq!(found["resources"], 0, "{name} fetched something: {found}");
    assert_eq!(found["empty"], 0, "{name}: a chart has no size: {found}");
    for (kind, n) in want {
        let got = found["charts"][kind].as_u64().unwrap_or(0) as usize;
        assert!(
            got >= *n,
            "{name}: {got} {kind} charts drawn, want {n}: {found}"
        );
    }
    assert!(
        console_errors(&log).is_empty(),
        "{name}: {:?}",
        console_errors(&log)
    );
    // 2. The unmodified page: no console message at all, and a screenshot.
    let shot = art.join(format!("{name}.png"));
    let _ = fs::remove_file(&shot);
    let (_, log) = browse(
        chrome,
        html_path,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,2000",
            "--hide-scrollbars",
        ],
    );
    assert!(
        console_errors(&log).is_empty(),
        "{name}: {:?}",
        console_errors(&log)
    );
    let png = fs::read(&shot).unwrap_or_else(|_| panic!("{name}: no screenshot; log:\n{log}"));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    assert_eq!(width, 1280);
    assert!(
        png.len() > 20_000,
        "{name}: a blank screenshot? {} bytes",
        png.len()
    );
    println!("{name}: screenshot at {}", shot.display());
}

#[test]
fn html_reports_open_in_chromium() {
    let f = fixture();
    let all = f.root.join("all.html");
    let mut args = vec!["report".to_string()];
    args.extend(f.all_ids());
    args.extend(["--html".into(), all.to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    f.iolab(&args).ok();
    let study = f.root.join("study.html");
    f.iolab(&[
        "report",
        "--study",
        "strip size",
        "--html",
        study.to_str().unwrap(),
    ])
    .ok();
    let html = fs::read_to_string(&all).unwrap();
    // Offline: no URL but the SVG namespace, no script, a policy that forbids fetching.
    let stripped = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    assert!(!stripped.contains("http://") && !stripped.contains("https://"));
    assert!(!html.contains("<script"));
    // Every run has its section, and the workload-specific views are there.
    for id in f.ids.values() {
        assert!(html.contains(&format!("<section class=\"run\" id=\"run-{id}\">")));
    }
    let count = |s: &str| html.matches(s).count();
    assert_eq!(count("data-chart=\"atto\""), 1);
    assert_eq!(count("data-chart=\"cdm\""), 2);
    assert_eq!(count("data-table=\"ops\""), 1, "dbench's operation table");
    assert!(html.contains(">Flush</td>") && html.contains(">p99 ms</th>"));
    // The two cdm runs share tests: a comparison section.
    assert_eq!(count("data-table=\"score\""), 1);
    assert!(count("data-chart=\"throughput\"") >= 10);
    assert!(count("data-chart=\"latency\"") >= 10);
    let s = fs::read_to_string(&study).unwrap();
    assert_eq!(s.matches("data-chart=\"study-bars\"").count(), 4);

    let Some(chrome) = chromium() else {
        skip!("chromium is not installed (test.sh installs it)");
    };
    check_in_browser(
        &chrome,
        "report-all",
        &all,
        &[
            ("cdm", 2),
            ("atto", 1),
            ("latency", 10),
            ("throughput", 10),
            ("study-bars", 4),
        ],
    );
    check_in_browser(
        &chrome,
        "report-study",
        &study,
        &[("study-bars", 4), ("cdm", 3)],
    );
}

/// The lines of a terminal report's header (before the first empty line), by key.
fn header_of(text: &str) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    let mut key = String::new();
    for line in text.lines().skip(1).take_while(|l| !l.is_empty()) {
        match line.split_once(':') {
            Some((k, v)) if !line.starts_with(' ') => {
                key = k.to_string();
                out.insert(key.clone(), v.trim().to_string());
            }
            _ => {
                let v = out.entry(key.clone()).or_default();
                v.push(' ');
                v.push_str(line.trim());
            }
        }
    }
    out
}

#[test]
fn every_workload_header_says_what_it_measured() {
    let f = fixture();
    for (kind, id) in &f.ids {
        let id = id.to_string();
        let text = f.iolab(&["show", &id]).ok().stdout;
        let head = header_of(&text);
        let md = f.iolab(&["report", &id, "--markdown"]).ok().stdout;
        let html_path = f.root.join(format!("head-{kind}.html"));
        f.iolab(&["report", &id, "--html", html_path.to_str().unwrap()])
            .ok();
        let html = fs::read_to_string(&html_path).unwrap();
        // What each format must say, as (header key, text in its value).
        let want: Vec<(&str, &str)> = match *kind {
            // A 4 MiB generated source, copied twice: not the 1 GiB default, not "0s".
            "copy" => vec![
                ("Source", "a generated random file of 4 MiB"),
                ("Copy", "read()/write() of 1 MiB"),
                ("Passes", "2 copies"),
            ],
            "streams" => vec![
                (
                    "Streams",
                    "2 streams of sequential reads in read() calls of 1 MiB, each on its own \
                     4 MiB file",
                ),
                ("Passes", "1: every stream covers its file once"),
            ],
            "metadata" => vec![
                ("Files", "200 files of 100 B in 2 directories, 1 thread"),
                ("Phases", "create, stat, read, rename, delete"),
            ],
            "dbench" => vec![
                ("Replay", "tiny-loadfile.txt, 2 clients"),
                ("Passes", "1 × 1s"),
            ],
            "fsync" => vec![
                ("Probe", "none, write+fdatasync × write sizes 4K"),
                ("Passes", "2 × 150ms measured per method and size"),
            ],
            "atto" => vec![("Region", "2 MiB"), ("Passes", "1 × 100ms measured")],
            _ => vec![("Region", "8 MiB"), ("Passes", "2 × 150ms measured")],
        };
        for (key, value) in &want {
            let got = head
                .get(*key)
                .unwrap_or_else(|| panic!("{kind}: no {key} in\n{text}"));
            assert!(got.contains(value), "{kind} {key}: {got:?} lacks {value:?}");
            assert!(
                md.contains(&format!("{key}: ")) && md.contains(value),
                "{kind}: {key} not in the Markdown\n{md}"
            );
            assert!(
                html.contains(&format!("<dt>{key}</dt>")),
                "{kind}: {key} not in the HTML facts"
            );
        }
        let block = ["cdm", "cdm-after", "atto", "custom", "iometer"].contains(kind);
        if !block {
            // Nothing of a block preset's shape where there is none.
            for t in [&text, &md] {
                assert!(!t.contains("Region:"), "{kind}:\n{t}");
                assert!(!t.contains("× 0s"), "{kind}:\n{t}");
                assert!(!t.contains("Engine:"), "{kind}:\n{t}");
            }
            assert!(!html.contains("QD×T"), "{kind}: a queue depth in the HTML");
            assert!(html.contains("<th>What</th>"), "{kind}");
        }
        // Rates in the workload's unit: operations for the probe and metadata.
        let table = text
            .lines()
            .find(|l| l.starts_with("Test ") || l.starts_with("Size "))
            .unwrap_or_else(|| panic!("{kind}: no table"));
        if ["fsync", "metadata"].contains(kind) {
            assert!(
                table.contains("ops/s") && !table.contains("MB/s"),
                "{table}"
            );
            assert!(!md.contains("Throughput, MB/s"), "{kind}:\n{md}");
            assert!(md.contains("**Operations per second**"), "{kind}:\n{md}");
            assert!(html.contains("<th class=\"n\">ops/s</th>"), "{kind}");
        } else {
            assert!(table.contains("MB/s"), "{kind}: {table}");
        }
        // One unit per latency: never a µs column holding milliseconds, nor "ms µs".
        for t in [&text, &md, &html] {
            assert!(!t.contains(" ms µs"), "{kind}: a doubled unit");
        }
        let rows = text
            .lines()
            .skip_while(|l| !(l.starts_with("Test ") || l.starts_with("Size ")))
            .skip(2);
        for row in rows.take_while(|l| !l.is_empty()) {
            assert!(!row.contains(" ms"), "{kind}: a µs column in ms: {row}");
        }
    }
    // The probe answers which method is durable, one line per method, with numbers.
    let text = f.iolab(&["show", &f.ids["fsync"].to_string()]).ok().stdout;
    let verdicts: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Durability, per sync method:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| l.starts_with("  - "))
        .collect();
    assert_eq!(verdicts.len(), 2, "{text}");
    assert!(verdicts[0].starts_with("  - none: not durable"), "{text}");
    assert!(verdicts[1].starts_with("  - write+fdatasync: "), "{text}");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(" ops/s against "), "{text}");
    assert!(!text.contains("verdict: "), "{text}");
}

/// Option names (`--size`) in a text.
fn options_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if boundary && &b[i..i + 2] == b"--" && b[i + 2].is_ascii_lowercase() {
            let end = (i + 2..b.len())
                .find(|&j| !(b[j].is_ascii_lowercase() || b[j] == b'-'))
                .unwrap_or(b.len());
            out.push(text[i..end].trim_end_matches('-').to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

#[test]
fn every_fix_names_only_options_the_workload_takes() {
    use iolab_stats::warnings::Knobs;
    iolab_workloads::install();
    let f = fixture();
    let mut help: HashMap<String, Vec<String>> = HashMap::new();
    let mut checked = 0;
    let store = Store::open(&f.db).unwrap();
    for (kind, id) in &f.ids {
        let run = store.load_run(*id).unwrap();
        let preset = run.preset.clone();
        let takes = help
            .entry(preset.clone())
            .or_insert_with(|| options_in(&f.iolab(&["run", &preset, "--help"]).ok().stdout));
        // Every fix the run's warnings carry, and every fix its workload could be given,
        // with and without warm-up passes, a shared file, a dropped cache.
        let mut fixes: Vec<String> = run.warnings.iter().map(|w| w.fix.clone()).collect();
        for warmup in [0, 1] {
            for flags in [false, true] {
                let mut r = run.clone();
                r.settings.warmup_passes = warmup;
                for t in &mut r.tests {
                    if let Some(o) = t.extra.as_object_mut() {
                        o.insert("same_file".into(), flags.into());
                        o.insert("drop_caches".into(), flags.into());
                    }
                }
                let k = Knobs::new(&r);
                let tests: Vec<&iolab_measure::TestRecord> = r.tests.iter().collect();
                fixes.extend([
                    k.page_cache_fix(),
                    k.slow_first_fix(),
                    k.more_passes_fix(),
                    k.few_ios_fix(&tests),
                ]);
                fixes.extend(k.idle_reclaim_fix(Some(Duration::ZERO)));
            }
        }
        for fix in &fixes {
            for o in options_in(fix) {
                assert!(
                    takes.contains(&o),
                    "{kind}: the fix {fix:?} names {o}, which `iolab run {preset}` does not take"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "only {checked} options checked");
}

#[test]
fn atto_few_ios_is_one_warning_with_a_fix_that_can_change_it() {
    let f = fixture();
    let run = Store::open(&f.db).unwrap().load_run(f.ids["atto"]).unwrap();
    let few: Vec<_> = run
        .warnings
        .iter()
        .filter(|w| w.code.as_str() == "FEW_IOS")
        .collect();
    assert_eq!(few.len(), 1, "{:#?}", run.warnings);
    let fix = &few[0].fix;
    // A pass that moved the whole region ended there: only a larger region adds I/Os.
    let region = run.target.size;
    let byte_limited = run
        .tests
        .iter()
        .flat_map(|t| &t.passes)
        .any(|p| p.ios < 100 && p.bytes >= region);
    if byte_limited {
        assert!(fix.contains("a larger --size"), "{fix}");
        assert!(fix.contains("need --size 200 MiB"), "{fix}");
    } else {
        assert_eq!(fix, "longer passes (--duration)");
    }
}

#[test]
fn fixture_sizes_stay_small() {
    // The fixture's runs are meant to take seconds: make sure nothing was left behind
    // in the target directory and the database is small.
    let f = fixture();
    assert!(fs::read_dir(&f.target).unwrap().next().is_none());
    assert!(fs::metadata(&f.db).unwrap().len() < 64 * MIB);
}

/// The report of two short real cdm runs, as a person opens it on a 1280 px laptop: the
/// page at most 8,000 px tall (it was 18,000 to 28,900 px, most of it charts one per row
/// and each run's warning list), CrystalDiskMark's tiles in the first screen, nothing
/// wider than the window (the runs table scrolled sideways), and a print to PDF that
/// works. Screenshots of the first screen and the whole page go to target/test-artifacts.
#[test]
fn two_cdm_runs_fit_a_laptop_screen() {
    let f = fixture();
    let html_path = f.root.join("two-cdm.html");
    let (a, b) = (f.ids["cdm"].to_string(), f.ids["cdm-after"].to_string());
    f.iolab(&["report", &a, &b, "--html", html_path.to_str().unwrap()])
        .ok();
    let html = fs::read_to_string(&html_path).unwrap();
    let Some(chrome) = chromium() else {
        skip!("chromium is not installed (test.sh installs it)");
    };
    let probe = f.root.join("two-cdm.probe.html");
    probe_copy_with(
        &html,
        &probe,
        "var W=document.documentElement.clientWidth;\
         var out={errors:window.__errs,height:document.documentElement.scrollHeight,\
           scroll_width:document.documentElement.scrollWidth,viewport:W,wider:[]};\
         var t=document.querySelector('[data-chart^=cdm]');\
         out.tiles_top=t?t.getBoundingClientRect().top+window.scrollY:-1;\
         document.querySelectorAll('body *').forEach(function(e){\
           var r=e.getBoundingClientRect();\
           if(r.right>W+1&&out.wider.length<5){out.wider.push(e.tagName+'.'+e.className+' '+Math.round(r.right))}});",
    );
    let (found, log) = run_probe(&chrome, "two-cdm", &probe, &["--window-size=1280,1000"]);
    println!("two cdm runs at 1280 px: {found}");
    assert_eq!(found["errors"], serde_json::json!([]), "{found}\n{log}");
    let height = found["height"].as_f64().unwrap();
    assert!(height <= 8000.0, "the page is {height} px tall: {found}");
    // The first tiles: the comparison's (both runs in one panel), else a run's.
    let top = found["tiles_top"].as_f64().unwrap();
    assert!(
        (0.0..1000.0).contains(&top),
        "the tiles start at {top} px, below the first screen: {found}"
    );
    assert_eq!(found["wider"], serde_json::json!([]), "{found}");
    assert_eq!(found["scroll_width"], found["viewport"], "{found}");

    // Screenshots to look at, and the print.
    let art = artifacts();
    for (file, size) in [
        ("two-cdm-first-screen.png", "1280,1000".to_string()),
        ("two-cdm-page.png", format!("1280,{}", height.ceil() as u64)),
    ] {
        let shot = art.join(file);
        let _ = fs::remove_file(&shot);
        browse(
            &chrome,
            &html_path,
            &[
                &format!("--screenshot={}", shot.display()),
                &format!("--window-size={size}"),
                "--hide-scrollbars",
            ],
        );
        let png = fs::read(&shot).unwrap_or_else(|_| panic!("no screenshot {file}"));
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
    let pdf = art.join("two-cdm.pdf");
    let _ = fs::remove_file(&pdf);
    browse(
        &chrome,
        &html_path,
        &[
            &format!("--print-to-pdf={}", pdf.display()),
            "--no-pdf-header-footer",
        ],
    );
    let bytes = fs::read(&pdf).expect("no PDF printed");
    assert!(bytes.starts_with(b"%PDF"));
    // The comparison and each run start a page of their own.
    let pages = bytes
        .windows(12)
        .filter(|w| w.starts_with(b"/Type /Page") && w[11] != b's')
        .count();
    assert!(pages >= 3, "{pages} pages");
}
