//! The `iolab` binary end to end: real runs on real files (and, as root, loop devices),
//! the stored results, bad input, signals and the target safety rules.

use std::fs;
use std::time::{Duration, Instant};

use iolab_testkit::*;
use serde_json::Value;

const CDM_ROWS: [&str; 4] = ["SEQ1M Q8T1", "SEQ1M Q1T1", "RND4K Q32T1", "RND4K Q1T1"];

/// A line of the table that starts with `label` followed by whitespace.
fn has_row(stdout: &str, label: &str) -> bool {
    stdout.lines().any(|l| {
        l.strip_prefix(label)
            .is_some_and(|rest| rest.starts_with(' '))
    })
}

/// Checks one pass object of the JSON document.
#[track_caller]
fn check_pass(p: &Value, bs: u64) {
    let bytes = uint(p, "bytes");
    let ios = uint(p, "ios");
    let seconds = num(p, "seconds");
    assert!(bytes > 0 && ios > 0 && seconds > 0.0, "{p}");
    assert_eq!(bytes, ios * bs, "bytes = ios x bs: {p}");
    let mb_s = num(p, "mb_s");
    let iops = num(p, "iops");
    assert!(mb_s > 0.0 && iops > 0.0);
    assert!(
        (mb_s - bytes as f64 / 1e6 / seconds).abs() <= 1e-6 * mb_s,
        "{p}"
    );
    assert!((iops - ios as f64 / seconds).abs() <= 1e-6 * iops, "{p}");
    let lat = get(p, "lat_us");
    for k in ["mean", "p50", "p90", "p99", "p999", "max"] {
        assert!(num(lat, k) > 0.0, "lat_us.{k}: {lat}");
    }
    assert!(num(lat, "p50") <= num(lat, "p99") && num(lat, "p99") <= num(lat, "max"));
    let cpu = get(p, "cpu");
    for k in ["usr_pct", "sys_pct", "iowait_pct"] {
        let v = num(cpu, k);
        assert!(v.is_finite() && v >= 0.0, "cpu.{k}: {cpu}");
    }
    assert!(num(cpu, "usr_pct") + num(cpu, "sys_pct") > 0.0, "{cpu}");
    assert!(arr(p, "errors").is_empty(), "{p}");
}

// --- B1: cdm end to end ------------------------------------------------------------------

#[test]
fn cdm_end_to_end() {
    let sb = Sandbox::new();
    let json = sb.path("cdm.json");
    let out = sb
        .run(&[
            "cdm",
            "--size",
            "16MiB",
            "--runs",
            "2",
            "--duration",
            "200ms",
            "--warmup",
            "0",
            "--json",
            json.to_str().unwrap(),
        ])
        .ok();
    for row in CDM_ROWS {
        assert!(has_row(&out.stdout, row), "no {row} row: {out}");
    }
    assert!(out.stdout.contains("MB/s = 10^6"), "{out}");
    assert!(
        sb.target_entries().is_empty(),
        "test file left behind: {:?}",
        sb.target_entries()
    );

    let doc = read_json(&json);
    for k in ["iolab_version", "preset", "target", "started_at"] {
        assert!(!string(&doc, k).is_empty(), "{k}");
    }
    assert_eq!(string(&doc, "iolab_version"), env!("CARGO_PKG_VERSION"));
    assert_eq!(uint(&doc, "run_id"), 1);
    assert_eq!(string(&doc, "preset"), "cdm");
    assert_eq!(
        fs::canonicalize(string(&doc, "target")).unwrap(),
        fs::canonicalize(&sb.target).unwrap()
    );
    assert_eq!(get(&doc, "complete"), &Value::Bool(true));
    let tests = arr(&doc, "tests");
    let names: Vec<&str> = tests.iter().map(|t| string(t, "name")).collect();
    let want: Vec<String> = CDM_ROWS
        .iter()
        .flat_map(|r| [format!("{r} Read"), format!("{r} Write")])
        .collect();
    assert_eq!(names, want);
    for t in tests {
        let name = string(t, "name");
        let bs = uint(t, "bs");
        let random = name.starts_with("RND");
        let read = name.ends_with("Read");
        let rw = match (random, read) {
            (false, true) => "read",
            (false, false) => "write",
            (true, true) => "randread",
            (true, false) => "randwrite",
        };
        assert_eq!(string(t, "rw"), rw, "{name}");
        assert_eq!(bs, if random { 4096 } else { MIB }, "{name}");
        let qd = if name.contains("Q32") {
            32
        } else if name.contains("Q8") {
            8
        } else {
            1
        };
        assert_eq!(uint(t, "iodepth"), qd, "{name}");
        assert_eq!(uint(t, "numjobs"), 1, "{name}");
        let passes = arr(t, "passes");
        assert_eq!(passes.len(), 2, "{name}");
        for (i, p) in passes.iter().enumerate() {
            assert_eq!(uint(p, "index"), i as u64 + 1);
            if uint(p, "ios") == 0 {
                // A 200 ms window shorter than the I/Os took on a busy machine: the pass
                // stays as measured (0 bytes, 0 MB/s), under FEW_IOS, never a figure made up.
                assert_eq!(uint(p, "bytes"), 0, "{name}: {p}");
                assert_eq!(num(p, "mb_s"), 0.0, "{name}: {p}");
                assert!(
                    warning_codes(&doc).iter().any(|c| c == "FEW_IOS"),
                    "{name}: a pass without I/O and no FEW_IOS: {p}"
                );
            } else {
                check_pass(p, bs);
            }
            // Each pass ran for its duration (200 ms) and then stopped: it never ends early,
            // and once the 200 ms are up only the I/Os already in flight may complete (at
            // most the queue depth's worth, however long a busy machine takes to reap them).
            let s = num(p, "seconds");
            assert!(s >= 0.19, "{name}: {s} s");
            let series = get(p, "timeseries");
            assert_eq!(uint(series, "interval_ms"), 100, "{name}");
            let after: u64 = arr(series, "bytes")
                .iter()
                .skip(2)
                .map(|b| b.as_u64().unwrap())
                .sum();
            assert!(
                after <= qd * bs,
                "{name}: {after} bytes completed after the 200 ms (queue depth {qd} x {bs})"
            );
        }
        let summary = get(t, "summary");
        let mbs: Vec<f64> = passes.iter().map(|p| num(p, "mb_s")).collect();
        let iops: Vec<f64> = passes.iter().map(|p| num(p, "iops")).collect();
        let m = median(&mbs);
        assert!(
            (num(summary, "mb_s") - m).abs() <= 1e-9 * m,
            "{name}: summary {} vs median {m}",
            num(summary, "mb_s")
        );
        let mi = median(&iops);
        assert!((num(summary, "iops") - mi).abs() <= 1e-9 * mi, "{name}");
    }
}

// --- B2: atto ------------------------------------------------------------------------------

/// Checks every ATTO pass: the region covered exactly once, unless the duration cut it short.
#[track_caller]
fn check_atto(doc: &Value, region: u64, duration_s: f64) -> Vec<String> {
    let mut names = Vec::new();
    for t in arr(doc, "tests") {
        let name = string(t, "name").to_string();
        let bs = uint(t, "bs");
        assert_eq!(uint(t, "iodepth"), 4, "{name}");
        let passes = arr(t, "passes");
        assert_eq!(passes.len(), 1, "{name}");
        let p = &passes[0];
        check_pass(p, bs);
        let bytes = uint(p, "bytes");
        let secs = num(p, "seconds");
        assert!(
            bytes == region || (bytes < region && secs >= duration_s * 0.99),
            "{name}: {bytes} bytes in {secs} s"
        );
        names.push(name);
    }
    names
}

#[test]
fn atto_covers_the_region_once_per_size() {
    let sb = Sandbox::new();
    let json = sb.path("atto.json");
    let out = sb
        .run(&[
            "atto",
            "--size",
            "8MiB",
            // Every pass ends when it has covered the region, however slow the machine is.
            "--duration",
            "60s",
            "--json",
            json.to_str().unwrap(),
        ])
        .ok();
    let doc = read_json(&json);
    let names = check_atto(&doc, 8 * MIB, 60.0);
    let notes: Vec<&str> = arr(&doc, "notes")
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    // Sizes up to the region run; those above it (16M..64M) are skipped with a note.
    let mut bs = 512u64;
    let mut i = 0;
    while bs <= 8 * MIB {
        let short = match bs {
            b if b >= MIB => format!("{}M", b / MIB),
            b if b >= 1024 => format!("{}K", b / 1024),
            b => b.to_string(),
        };
        assert_eq!(names[i], format!("{short} Write"));
        assert_eq!(names[i + 1], format!("{short} Read"));
        i += 2;
        bs *= 2;
    }
    if names.len() < 36 {
        assert!(
            notes
                .iter()
                .any(|n| n.contains("skipped") && n.contains("64M")),
            "{notes:?}"
        );
    }
    assert!(has_row(&out.stdout, "512 B"), "{out}");
    assert!(has_row(&out.stdout, "8 MiB"), "{out}");
    assert!(sb.target_entries().is_empty());
}

#[test]
fn atto_full_sweep_to_64m() {
    let sb = Sandbox::new();
    let json = sb.path("atto.json");
    // Zeros keep buffer set-up cheap for the 64 MiB blocks.
    let out = sb
        .run(&[
            "atto",
            "--size",
            "64MiB",
            // Every pass ends when it has covered the region, however slow the machine is.
            "--duration",
            "60s",
            "--data",
            "zeros",
            "--json",
            json.to_str().unwrap(),
        ])
        .ok();
    let doc = read_json(&json);
    let names = check_atto(&doc, 64 * MIB, 60.0);
    if names.len() < 36 {
        // Only a filesystem whose blocks are larger than 512 B may skip the small sizes.
        let notes = arr(&doc, "notes");
        assert!(
            notes
                .iter()
                .any(|n| n.as_str().unwrap().contains("logical block")),
            "{names:?} {notes:?}"
        );
    } else {
        assert_eq!(names.len(), 36);
        assert!(has_row(&out.stdout, "512 B"), "{out}");
    }
    assert_eq!(names.last().unwrap(), "64M Read");
    assert!(has_row(&out.stdout, "64 MiB"), "{out}");
    // The 64 MiB tests are one I/O each.
    let last = arr(&doc, "tests").last().unwrap();
    assert_eq!(uint(&arr(last, "passes")[0], "ios"), 1);
    assert!(sb.target_entries().is_empty());
}

// --- B3: custom jobs, engines, JSON on stdout ------------------------------------------------

#[test]
fn custom_jobs_on_both_engines_with_json_on_stdout() {
    let sb = Sandbox::new();
    let common = [
        "custom",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--iodepth",
        "8",
        "--size",
        "4MiB",
        "--runs",
        "2",
        "--duration",
        "100ms",
        "--json",
        "-",
    ];
    for engine in ["io_uring", "psync"] {
        let mut args = common.to_vec();
        args.extend_from_slice(&["--engine", engine]);
        let out = sb.run(&args).ok();
        // stdout is exactly one JSON document; the table went to stderr.
        let doc = out.json();
        assert!(out.stderr.contains("MB/s = 10^6"), "{out}");
        assert!(!out.stdout.contains("MB/s = 10^6"));
        assert_eq!(string(&doc, "preset"), "custom");
        let tests = arr(&doc, "tests");
        assert_eq!(tests.len(), 1);
        let t = &tests[0];
        assert_eq!(string(t, "rw"), "randread");
        assert_eq!(uint(t, "bs"), 4096);
        assert_eq!(uint(t, "iodepth"), 8);
        assert_eq!(arr(t, "passes").len(), 2);
        for p in arr(t, "passes") {
            check_pass(p, 4096);
        }
        let used = string(&doc, "engine");
        let notes = format!("{}", get(&doc, "notes"));
        if engine == "psync" {
            assert_eq!(used, "psync");
            assert!(notes.contains("queue depth 1"), "{notes}");
        } else {
            assert!(
                used == "io_uring" || notes.contains("fell back to psync"),
                "{used} {notes}"
            );
        }
    }
    let rows = sb.result_rows();
    assert_eq!(rows.len(), 2, "{}", sb.results());
    assert!(sb.target_entries().is_empty());
}

#[test]
fn custom_write_mix_and_buffered() {
    let sb = Sandbox::new();
    let out = sb
        .run(&[
            "custom",
            "--rw",
            "randrw",
            "--rwmixread",
            "70",
            "--bs",
            "4k",
            "--iodepth",
            "4",
            "--size",
            "4MiB",
            "--runs",
            "1",
            "--duration",
            "200ms",
            "--buffered",
            "--json",
            "-",
        ])
        .ok();
    let doc = out.json();
    assert_eq!(get(get(&doc, "settings"), "direct"), &Value::Bool(false));
    let t = &arr(&doc, "tests")[0];
    assert_eq!(string(t, "rw"), "randrw");
    assert_eq!(uint(t, "rwmixread"), 70);
    let p = &arr(t, "passes")[0];
    check_pass(p, 4096);
    let r = uint(get(p, "read"), "ios");
    let w = uint(get(p, "write"), "ios");
    assert_eq!(r + w, uint(p, "ios"));
    assert!(r > w && w > 0, "reads {r}, writes {w}");
}

// --- B4: results and show ------------------------------------------------------------------

#[test]
fn results_and_show_reprint_the_stored_runs() {
    let sb = Sandbox::new();
    let j1 = sb.path("1.json");
    let j2 = sb.path("2.json");
    let r1 = sb
        .run(&[
            "custom",
            "--rw",
            "randread",
            "--bs",
            "4k",
            "--iodepth",
            "4",
            "--size",
            "4MiB",
            "--runs",
            "2",
            "--duration",
            "100ms",
            "--label",
            "first",
            "--json",
            j1.to_str().unwrap(),
        ])
        .ok();
    let r2 = sb
        .run(&[
            "cdm-real",
            "--size",
            "4MiB",
            "--runs",
            "1",
            "--duration",
            "100ms",
            "--warmup",
            "0",
            "--json",
            j2.to_str().unwrap(),
        ])
        .ok();
    assert!(r1.stdout.contains("stored as run 1"), "{r1}");
    assert!(r2.stdout.contains("stored as run 2"), "{r2}");

    let rows = sb.result_rows();
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [1, 2], "{}", sb.results());
    for (id, preset, status) in &rows {
        let want = if *id == 1 { "custom" } else { "cdm-real" };
        assert_eq!(preset, want, "{}", sb.results());
        assert_eq!(status, "ok", "{}", sb.results());
    }

    for (id, run, json) in [("1", &r1, &j1), ("2", &r2, &j2)] {
        // The table is printed again exactly as the run printed it.
        let shown = sb.iolab(&["show", id]).ok();
        assert_eq!(
            table_part(&shown.stdout),
            table_part(&run.stdout),
            "show {id} differs from the run's output"
        );
        // And the JSON document is the same, run_id included.
        let shown = sb.iolab(&["show", id, "--json"]).ok();
        let doc = shown.json();
        assert_eq!(doc, read_json(json), "show {id} --json differs");
        assert_eq!(uint(&doc, "run_id"), id.parse::<u64>().unwrap());
    }
    let last = sb.iolab(&["show", "last", "--json"]).ok();
    assert_eq!(uint(&last.json(), "run_id"), 2);
    let last = sb.iolab(&["show", "last"]).ok();
    assert_eq!(table_part(&last.stdout), table_part(&r2.stdout));

    let missing = sb.iolab(&["show", "999"]);
    assert_eq!(missing.code, Some(2), "{missing}");
    assert!(missing.stderr.contains("not found"), "{missing}");
    assert!(missing.stdout.is_empty(), "{missing}");
    let bad = sb.iolab(&["show", "abc"]);
    assert_ne!(bad.code, Some(0), "{bad}");
}

#[test]
fn results_on_an_empty_database() {
    let sb = Sandbox::new();
    let out = sb.iolab(&["results"]).ok();
    assert!(sb.result_rows().is_empty(), "{out}");
    let last = sb.iolab(&["show", "last"]);
    assert_ne!(last.code, Some(0), "{last}");
}

/// `last` and a run id are read by one parser: every command that takes them refuses `last`
/// in an empty database and an id that is not a number alike (exit 2, the same words).
#[test]
fn every_command_refuses_a_missing_last_and_a_bad_id_alike() {
    let sb = Sandbox::new();
    let other = sb.path("other.db");
    let other = other.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["show"],
        &["report"],
        &["compare", "last"],
        &["push", "--to", other],
        &["delete", "--yes"],
    ];
    // A database that holds no run: one run stored, then deleted.
    sb.run(&[
        "custom",
        "--rw",
        "read",
        "--size",
        "1MiB",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--runs",
        "1",
        "--warmup",
        "0",
    ])
    .ok();
    sb.iolab(&["delete", "--yes", "last"]).ok();
    for c in commands {
        let mut args = c.to_vec();
        args.push("last");
        sb.iolab(&args)
            .code(2)
            .stderr_has(&["run 'last' not found: no runs are stored in"]);
        let mut args = c.to_vec();
        args.push("twelve");
        sb.iolab(&args)
            .code(2)
            .stderr_has(&["run id 'twelve' is not a number (see `iolab results`)"]);
    }
}

/// Every enumerated option is one declaration (clap's `ValueEnum` or its table): a value it
/// does not take is refused before anything runs, naming the option and its values.
#[test]
fn an_enumerated_option_refuses_a_value_it_lacks_and_lists_its_values() {
    let sb = Sandbox::new();
    let cases: [(&[&str], &str); 7] = [
        (
            &["custom", "--rw", "sideways"],
            "--rw 'sideways': expected read, write, randread, randwrite, rw, randrw",
        ),
        (
            &["custom", "--data", "ones"],
            "--data 'ones': expected random, zeros",
        ),
        (
            &["custom", "--engine", "aio"],
            "--engine 'aio': expected io_uring, psync, null",
        ),
        (
            &["cdm", "--score", "mean"],
            "--score 'mean': expected median, best",
        ),
        (
            &["iometer", "--pattern", "mail"],
            "--pattern 'mail': expected file-server, database, workstation",
        ),
        (
            &["streams", "--rw", "randread"],
            "--rw 'randread': expected read, write",
        ),
        (
            &["sustained", "--rw", "read"],
            "--rw 'read': expected write, randwrite, both",
        ),
    ];
    for (args, want) in cases {
        sb.run(args).code(2).stderr_has(&[want]);
    }
    // The aliases stay accepted (zero, uring, readwrite).
    sb.run(&[
        "custom",
        "--rw",
        "readwrite",
        "--data",
        "zero",
        "--engine",
        "uring",
        "--size",
        "1MiB",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--runs",
        "1",
        "--warmup",
        "0",
    ])
    .ok();
    assert_eq!(sb.result_rows().len(), 1);
}

// --- B5: bad input -------------------------------------------------------------------------

#[test]
fn bad_input_exits_2_naming_the_option_and_stores_nothing() {
    let sb = Sandbox::new();
    let cases: [(&[&str], &str); 6] = [
        (&["custom", "--bs", "4q"], "--bs"),
        (&["custom", "--rw", "sideways"], "--rw"),
        (&["sideways-preset"], "preset"),
        (&["custom", "--iodepth", "0"], "--iodepth"),
        (&["custom", "--bs", "1000"], "--bs"),
        (&["cdm", "--duration", "soon"], "--duration"),
    ];
    for (args, option) in cases {
        let mut v = args.to_vec();
        v.extend_from_slice(&["--size", "4MiB", "--runs", "1", "--duration", "100ms"]);
        if args.contains(&"--duration") {
            v.truncate(v.len() - 2);
        }
        let out = sb.run(&v).code(2);
        out.stderr_has(&[option]);
        assert!(out.stdout.is_empty(), "{out}");
        assert!(sb.target_entries().is_empty(), "{args:?} left a file");
    }
    assert!(sb.result_rows().is_empty(), "{}", sb.results());
    // A clap-level error (missing value) is a usage error too.
    let out = sb.run(&["custom", "--iodepth"]).code(2);
    out.stderr_has(&["--iodepth"]);
    assert!(sb.result_rows().is_empty());
}

// --- B6: interrupt -------------------------------------------------------------------------

fn interrupt(signal: libc::c_int) {
    let sb = Sandbox::new();
    let child = sb.spawn_run(&[
        "cdm",
        "--size",
        "16MiB",
        "--duration",
        "1s",
        "--runs",
        "5",
        "--warmup",
        "0",
    ]);
    let pid = child.id() as libc::pid_t;
    // Signal once the run has stored its first pass (the store shows a run while it is
    // written), whatever the machine's load made of the preparation before it.
    let start = Instant::now();
    loop {
        let stored = sb.cmd(&["show", "1", "--json"]).output().unwrap();
        let doc: Value = serde_json::from_slice(&stored.stdout).unwrap_or(Value::Null);
        if doc["tests"][0]["passes"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no pass stored after 5 minutes (a hung run)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    let output = child.wait_with_output().unwrap();
    let out = Out::new(&["run", "cdm", "(signalled)"], output, start.elapsed());
    assert_eq!(out.code, Some(130), "{out}");
    assert!(
        sb.target_entries().is_empty(),
        "test file left behind: {:?}",
        sb.target_entries()
    );

    let rows = sb.result_rows();
    assert_eq!(rows.len(), 1, "{}", sb.results());
    assert_eq!(rows[0].2, "incomplete", "{}", sb.results());
    let id = rows[0].0.to_string();
    let shown = sb.iolab(&["show", &id]).ok();
    assert!(has_row(&shown.stdout, "SEQ1M Q8T1"), "{shown}");
    assert!(shown.stdout.contains("incomplete"), "{shown}");
    let doc = sb.iolab(&["show", &id, "--json"]).ok().json();
    assert_eq!(get(&doc, "complete"), &Value::Bool(false));
    let tests = arr(&doc, "tests");
    assert!(!tests.is_empty());
    let first = &tests[0];
    assert_eq!(string(first, "name"), "SEQ1M Q8T1 Read");
    let passes = arr(first, "passes");
    // It stopped when told: the first test's five 1 s passes did not all run (the signal
    // came one pass in; the next four take 4 s more), and no other test started.
    assert!(
        (1..5).contains(&passes.len()),
        "{} passes finished",
        passes.len()
    );
    assert_eq!(tests.len(), 1, "a test after the signal");
    for p in passes {
        check_pass(p, MIB);
        assert!(num(p, "seconds") >= 0.99, "a cut-short pass was kept: {p}");
    }
    // What the run printed on the way out matches what was stored.
    assert_eq!(table_part(&out.stdout), table_part(&shown.stdout));
}

#[test]
fn sigint_stops_cleanly_and_keeps_finished_passes() {
    interrupt(libc::SIGINT);
}

#[test]
fn sigterm_stops_cleanly_and_keeps_finished_passes() {
    interrupt(libc::SIGTERM);
}

#[test]
fn sighup_stops_cleanly_and_keeps_finished_passes() {
    // A closed terminal: the same as Ctrl-C, nothing left behind.
    interrupt(libc::SIGHUP);
}

// --- B7: an existing regular file ----------------------------------------------------------

#[test]
fn existing_file_is_only_written_with_permission() {
    let sb = Sandbox::new();
    let file = sb.target.join("precious.bin");
    let content = random_bytes(4 * MIB as usize, 42);
    fs::write(&file, &content).unwrap();
    let f = file.to_str().unwrap();
    let job = |rw: &'static str| {
        vec![
            "run",
            "custom",
            "--rw",
            rw,
            "--bs",
            "64k",
            "--iodepth",
            "4",
            "--runs",
            "1",
            "--duration",
            "100ms",
            "--quiet",
            "--target",
            f,
        ]
    };

    for rw in ["write", "randwrite", "randrw"] {
        let out = sb.iolab(&job(rw)).code(2);
        out.stderr_has(&["--allow-overwrite-file"]);
        assert_eq!(fs::read(&file).unwrap(), content, "{rw} changed the file");
    }
    assert!(sb.result_rows().is_empty(), "{}", sb.results());

    for rw in ["read", "randread"] {
        let out = sb.iolab(&job(rw)).ok();
        assert!(out.stdout.contains("MB/s"), "{out}");
        assert_eq!(fs::read(&file).unwrap(), content, "{rw} changed the file");
    }
    assert_eq!(sb.result_rows().len(), 2);

    let mut args = job("write");
    args.push("--allow-overwrite-file");
    sb.iolab(&args).ok();
    let after = fs::read(&file).unwrap();
    assert_eq!(after.len(), content.len(), "the file keeps its size");
    assert_ne!(after, content, "the permitted write did not write");
    // The file is the user's: never removed.
    assert_eq!(sb.target_entries(), vec![file.clone()]);
}

// --- B8, B9: block devices (root only) ------------------------------------------------------

#[test]
fn device_with_a_filesystem_is_never_written() {
    let Some(_lock) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = Loop::new(64 * MIB);
    sh("mkfs.ext4", &["-q", "-F", lo.s()]);
    let before = lo.contents();
    let out = sb
        .iolab(&[
            "run",
            "custom",
            "--rw",
            "write",
            "--bs",
            "64k",
            "--runs",
            "1",
            "--duration",
            "100ms",
            "--quiet",
            "--target",
            lo.s(),
            "--allow-destroy-device",
        ])
        .code(2);
    out.stderr_has(&["ext4"]);
    assert!(lo.contents() == before, "the device changed");
    assert!(sb.result_rows().is_empty());
    // Reading it is fine.
    sb.iolab(&[
        "run",
        "custom",
        "--rw",
        "randread",
        "--size",
        "16MiB",
        "--runs",
        "1",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--quiet",
        "--target",
        lo.s(),
    ])
    .ok();
    assert!(lo.contents() == before, "the device changed");
}

#[test]
fn blank_device_reads_freely_and_writes_with_the_flag() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = Loop::new(64 * MIB);
    let job = |rw: &'static str| {
        vec![
            "run",
            "custom",
            "--rw",
            rw,
            "--bs",
            "64k",
            "--iodepth",
            "4",
            "--size",
            "16MiB",
            "--runs",
            "1",
            // A pass of known work (the whole region once), however slow the machine is.
            "--io-size",
            "16MiB",
            "--duration",
            "60s",
            "--quiet",
            "--target",
            lo.s(),
            "--json",
            "-",
        ]
    };
    let doc = sb.iolab(&job("read")).ok().json();
    assert_eq!(string(&doc, "target_kind"), "device");
    check_pass(&arr(&arr(&doc, "tests")[0], "passes")[0], 64 * 1024);
    assert!(lo.contents().iter().all(|&b| b == 0));

    let out = sb.iolab(&job("write")).code(2);
    out.stderr_has(&["--allow-destroy-device"]);
    assert!(
        lo.contents().iter().all(|&b| b == 0),
        "written without the flag"
    );

    let mut args = job("write");
    args.push("--allow-destroy-device");
    let doc = sb.iolab(&args).ok().json();
    let p = &arr(&arr(&doc, "tests")[0], "passes")[0];
    check_pass(p, 64 * 1024);
    let data = lo.contents();
    let region = 16 * MIB as usize;
    assert!(
        data[..region].iter().any(|&b| b != 0),
        "nothing was written in the region"
    );
    assert!(
        data[region..].iter().all(|&b| b == 0),
        "written beyond the 16 MiB region"
    );
    assert_eq!(sb.result_rows().len(), 2);
}

#[test]
fn direct_io_below_the_logical_block_size_is_refused_clearly() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = Loop::with_options(16 * MIB, &["--sector-size", "4096"]);
    let lbs =
        fs::read_to_string(format!("/sys/block/{}/queue/logical_block_size", lo.name())).unwrap();
    if lbs.trim() != "4096" {
        skip!("losetup --sector-size 4096 gave a {} B block", lbs.trim());
    }
    let job = vec![
        "run",
        "custom",
        "--rw",
        "randread",
        "--bs",
        "512",
        "--runs",
        "1",
        "--duration",
        "100ms",
        "--quiet",
        "--target",
        lo.s(),
    ];
    let out = sb.iolab(&job);
    assert_ne!(out.code, Some(0), "{out}");
    out.stderr_has(&["logical block size", "4096", "--buffered"]);
    assert!(sb.result_rows().is_empty());

    let mut buffered = job.clone();
    buffered.push("--buffered");
    let out = sb.iolab(&buffered).ok();
    assert!(has_row(&out.stdout, "RND512 Q1T1"), "{out}");
    // A 4 KiB block is fine with O_DIRECT.
    let mut aligned = job.clone();
    aligned[5] = "4k";
    sb.iolab(&aligned).ok();
}

/// What a block test learns only after its passes (the `--verify` counts, the adaptive
/// stop) is stored with it: `show --json` gives back the `extra` the run printed.
#[test]
fn show_json_keeps_what_a_block_test_found_after_its_passes() {
    let sb = Sandbox::new();
    let run = sb
        .run(&[
            "custom",
            "--rw",
            "randwrite",
            "--size",
            "4MiB",
            "--duration",
            "100ms",
            "--runs",
            "3",
            "--until-stable",
            "--max-runs",
            "4",
            "--verify",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let extra = &run["tests"][0]["extra"];
    assert!(extra["verify"].is_object(), "{extra}");
    assert!(extra["adaptive"].is_object(), "{extra}");
    let shown = sb.iolab(&["show", "last", "--json"]).ok().json();
    assert_eq!(&shown["tests"][0]["extra"], extra);
}
