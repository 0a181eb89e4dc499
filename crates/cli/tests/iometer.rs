//! `iolab run iometer`: access specifications drive the size, direction and offset of
//! every I/O.

use iolab_testkit::Sandbox;

#[test]
fn file_server_mix_matches_its_shares() {
    let sb = Sandbox::new();
    // The shares are a property of the job loop, not of the device: the null engine
    // completes I/O at once. How many I/Os a timed pass counts depends on the machine's
    // load, so the tolerance follows the count; the exact check on a known number of
    // draws is the engine's (tests/exact.rs, step clock).
    let doc = sb
        .run(&[
            "iometer",
            "--engine",
            "null",
            "--size",
            "32MiB",
            "--iodepth",
            "8",
            "--duration",
            "400ms",
            "--runs",
            "2",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let t = &doc["tests"][0];
    assert_eq!(t["name"], "file-server Q8W1");
    let counts: Vec<f64> = t["extra"]["access_ios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let n: f64 = counts.iter().sum();
    assert!(n > 0.0, "no I/O counted: {t}");
    let shares = [10.0, 5.0, 5.0, 60.0, 2.0, 4.0, 4.0, 10.0];
    for (i, (c, s)) in counts.iter().zip(shares).enumerate() {
        let got = 100.0 * c / n;
        // Binomial standard deviation of a share over n draws, times 4.
        let tol = 4.0 * (s * (100.0 - s) / n).sqrt() + 0.2;
        assert!(
            (got - s).abs() <= tol,
            "line {i}: {got:.2}% vs {s}% (±{tol:.2})"
        );
    }
    // The I/Os counted per line add up to the passes' I/Os.
    let ios: u64 = t["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ios"].as_u64().unwrap())
        .sum();
    assert_eq!(ios as f64, n);
    // 80% reads overall.
    let p = &t["passes"][0];
    let r = p["read"]["ios"].as_f64().unwrap();
    let w = p["write"]["ios"].as_f64().unwrap();
    let share = r / (r + w);
    assert!((share - 0.8).abs() < 0.03, "read share {share}");
    // Bytes agree with the mix: mean transfer between 512 B and 64 KiB.
    let mean = p["bytes"].as_f64().unwrap() / p["ios"].as_f64().unwrap();
    assert!(mean > 4096.0 && mean < 16384.0, "mean transfer {mean}");
}

#[test]
fn ladder_and_spec_files() {
    let sb = Sandbox::new();
    let doc = sb
        .run(&[
            "iometer",
            "--pattern",
            "database",
            "--qd-ladder",
            "--size",
            "16MiB",
            "--duration",
            "100ms",
            "--runs",
            "1",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let names: Vec<&str> = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "database Q1W1",
            "database Q2W1",
            "database Q4W1",
            "database Q8W1",
            "database Q16W1",
            "database Q32W1",
            "database Q64W1"
        ]
    );
    let spec = sb.path("mail.toml");
    std::fs::write(
        &spec,
        "name = \"mail\"\n[[line]]\nshare = 100\nsize = \"16k\"\nread = 0\nrandom = 0\n",
    )
    .unwrap();
    let doc = sb
        .run(&[
            "iometer",
            "--spec",
            spec.to_str().unwrap(),
            "--size",
            "16MiB",
            "--duration",
            "100ms",
            "--runs",
            "1",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let p = &doc["tests"][0]["passes"][0];
    assert_eq!(doc["tests"][0]["name"], "mail Q1W1");
    assert!(p["read"].is_null(), "all writes: {p}");
    assert_eq!(
        p["bytes"].as_u64().unwrap(),
        p["ios"].as_u64().unwrap() * 16384
    );
    // A bad key names the file and line.
    std::fs::write(
        &spec,
        "[[line]]\nshare = 100\nsize = \"16k\"\nread = 0\nrandum = 0\n",
    )
    .unwrap();
    let out = sb
        .run(&["iometer", "--spec", spec.to_str().unwrap()])
        .code(2);
    out.stderr_has(&["mail.toml:5", "randum"]);
}

/// The dozen-specification Iometer configuration kept with the parser's fuzz seeds.
fn all_in_one() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/tests/corpus/icf/all-in-one.icf")
}

#[test]
fn icf_runs_every_assigned_spec_by_its_name() {
    let sb = Sandbox::new();
    let icf = all_in_one();
    // A short run of an .icf: one pass of 100 ms per test on a 4 MiB region.
    let run = |icf: &std::path::Path, null: bool| {
        let icf = icf.to_str().unwrap();
        let mut args = vec![
            "iometer",
            "--icf",
            icf,
            "--size",
            "4MiB",
            "--duration",
            "100ms",
        ];
        if null {
            args.extend(["--engine", "null"]);
        }
        args.extend(["--json", "-"]);
        sb.run(&args).ok().json()
    };
    let doc = run(&icf, false);
    let tests = doc["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "512 B; 100% Read; 0% random",
            "4 KiB; 100% Read; 0% random",
            "4 KiB; 0% Read; 0% random",
            "4 KiB aligned; 50% Read; 100% random",
            "16 KiB; 50% Read; 0% random",
            "32 KiB; 100% Read; 0% random",
            "64 KiB; 0% Read; 0% random",
            "256 KiB; 100% Read; 0% random",
            "File Server",
            "Web Server",
            "Database (8 KiB; 67% Read; 100% random)",
            "Workstation paced",
        ]
    );
    for t in tests {
        // Two workers of four outstanding I/Os each; one pass as Iometer runs a test.
        assert_eq!(
            (t["numjobs"].as_u64(), t["iodepth"].as_u64()),
            (Some(2), Some(4))
        );
        assert_eq!(t["passes"].as_array().unwrap().len(), 1, "{}", t["name"]);
    }
    // The web server's ten lines are all counted, and 100% reads wrote nothing.
    let web = &tests[9];
    assert_eq!(web["extra"]["access"].as_array().unwrap().len(), 10);
    assert!(web["passes"][0]["write"].is_null(), "{web}");
    let notes = doc["notes"].to_string();
    for n in [
        "(E: \\\"DATA\\\", PHYSICALDRIVE:1) are replaced by --target",
        "'Workstation paced': Iometer's delay of 1 ms after each burst of 8",
    ] {
        assert!(notes.contains(n), "{n} not in {notes}");
    }

    // Cycling outstanding I/Os is a sweep, a test per step (an access section without a
    // manager list runs every specification of the file).
    let text = std::fs::read_to_string(&icf).unwrap();
    let cyc = sb.path("cycle.icf");
    let setup = &text[..text.find("'RESULTS DISPLAY").unwrap()];
    std::fs::write(
        &cyc,
        format!(
            "{}'ACCESS SPECIFICATIONS\n'Access specification name,default assignment\n\
             \tdb,ALL\n'size\n\t8192,100,67,100,0,1,0,0\n'END access specifications\n",
            setup
                .replace("\tNORMAL", "\tCYCLE_OUTSTANDING_IOS")
                .replace("1          32         2", "1          4          2")
        ),
    )
    .unwrap();
    let doc = run(&cyc, true);
    let names: Vec<String> = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{} {}", t["name"].as_str().unwrap(), t["iodepth"]))
        .collect();
    assert_eq!(names, ["db Q1 1", "db Q2 2", "db Q4 4"]);

    // A field iolab cannot honour: FILE:LINE: FIELD, exit 2, nothing run.
    let bad = sb.path("bad.icf");
    std::fs::write(
        &bad,
        text.replace("\t65536,100,0,0,0,1,0,0", "\t65536,100,0,0,0,1,0,4096"),
    )
    .unwrap();
    let line = text
        .lines()
        .position(|l| l == "\t65536,100,0,0,0,1,0,0")
        .unwrap()
        + 1;
    sb.run(&["iometer", "--icf", bad.to_str().unwrap()])
        .code(2)
        .stderr_has(&[&format!(
            "bad.icf:{line}: reply: 4096: a reply size is a network worker's"
        )]);
}
