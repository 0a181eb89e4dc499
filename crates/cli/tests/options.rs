//! Options that do not apply are refused by name (exit 2), with the workloads that take
//! them, before anything runs or is stored; options that depend on another say so; each
//! workload's help lists its own options and the common ones only.

use iolab_testkit::Sandbox;

/// `args` exits 2 having said every needle, wrote nothing into the target, stored nothing.
fn refused(sb: &Sandbox, args: &[&str], needles: &[&str]) {
    let target = sb.target.to_str().unwrap();
    let mut v = args.to_vec();
    v.extend(["--target", target]);
    let out = sb.iolab(&v).code(2);
    out.stderr_has(needles);
    assert!(sb.target_entries().is_empty(), "{args:?} left files: {out}");
}

#[test]
fn an_option_of_another_workload_is_refused_naming_it_and_its_workloads() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["run", "cdm", "--clients", "4"],
        &["--clients", "dbench"],
    );
    refused(&sb, &["run", "dbench", "--bs", "4k"], &["--bs", "custom"]);
    refused(
        &sb,
        &["run", "metadata", "--iodepth", "8"],
        &["--iodepth", "custom", "iometer"],
    );
    refused(
        &sb,
        &["export-fio", "cdm", "--clients", "2"],
        &["--clients", "`iolab export-fio`", "dbench"],
    );
    refused(
        &sb,
        &["crosscheck", "cdm", "--files", "2"],
        &["--files", "`iolab crosscheck`", "metadata"],
    );
    refused(&sb, &["export-fio", "cdm", "--runs", "5"], &["--runs"]);
    // A journal is written only by `run verify`: elsewhere it is refused, never ignored.
    refused(
        &sb,
        &[
            "run",
            "custom",
            "--rw",
            "write",
            "--verify",
            "--journal",
            "/tmp/j",
        ],
        &["--journal", "verify"],
    );
    assert!(!std::path::Path::new("/tmp/j").exists());
    assert_eq!(
        sb.iolab(&["results", "--json"]).ok().json(),
        serde_json::json!([])
    );
}

#[test]
fn options_that_need_another_say_which() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["run", "custom", "--max-runs", "3"],
        &["--max-runs", "--until-stable"],
    );
    refused(
        &sb,
        &["run", "dbench", "--time", "1s", "--duration", "2s"],
        &["--duration"],
    );
    refused(
        &sb,
        &["run", "streams", "--stagger", "1s"],
        &["--stagger", "--same-file"],
    );
}

#[test]
fn a_workloads_help_lists_its_options_and_the_common_ones_only() {
    let sb = Sandbox::new();
    let out = sb.iolab(&["run", "metadata", "--help"]).ok();
    for own in [
        "--files",
        "--dirs",
        "--threads",
        "--target",
        "--json",
        "--repeat",
    ] {
        assert!(out.stdout.contains(own), "{own} missing: {out}");
    }
    for other in ["--iodepth", "--clients", "--bs", "--journal", "--engine"] {
        assert!(!out.stdout.contains(other), "{other} listed: {out}");
    }
}

/// Sizes past the largest iolab takes are refused at parse time naming the option, never
/// wrapped into a tiny run: `--io-size 18446744073709551615` used to round up to the block
/// size as 0 bytes and store a run of 0 I/Os at 0 MB/s, exit 0 (a panic in a debug build).
#[test]
fn sizes_that_would_overflow_are_refused_naming_the_option() {
    let sb = Sandbox::new();
    for (option, value) in [
        ("--io-size", "18446744073709551615"),
        ("--io-size", "18446744073709551616"),
        ("--io-size", "1025t"),
        ("--size", "18446744073709551615"),
        ("--bs", "18446744073709551615"),
    ] {
        let mut args = vec!["run", "custom", "--rw", "read", option, value];
        if option != "--bs" {
            args.extend(["--bs", "4k"]);
        }
        args.extend(["--runs", "1", "--duration", "100ms"]);
        refused(&sb, &args, &[option, "the largest size iolab takes"]);
    }
    for (workload, option, value) in [
        ("streams", "--size", "18446744073709551615"),
        ("metadata", "--file-size", "18446744073709551615"),
        ("copy", "--bs", "18446744073709551615"),
        ("verify", "--size", "17179869184t"),
    ] {
        refused(
            &sb,
            &["run", workload, option, value],
            &[option, "the largest size iolab takes"],
        );
    }
    assert_eq!(
        sb.iolab(&["results", "--json"]).ok().json(),
        serde_json::json!([])
    );
}

/// Counts and sizes a workload checked only once its run had started (stored as a failed
/// run, exit 1) or took as a silent no-op (`--fsync 0`: never) are refused before anything
/// runs, naming the option.
#[test]
fn counts_out_of_range_are_refused_before_the_run() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["run", "streams", "--streams", "65", "--size", "1m"],
        &["--streams 65", "between 1 and 64"],
    );
    refused(
        &sb,
        &["run", "streams", "--streams", "4000000000", "--size", "1m"],
        &["--streams 4000000000"],
    );
    refused(&sb, &["run", "streams", "--bs", "65m"], &["--bs"]);
    refused(&sb, &["run", "copy", "--bs", "257m"], &["--bs"]);
    for o in ["--fsync", "--fdatasync"] {
        refused(
            &sb,
            &["run", "custom", "--rw", "write", o, "0"],
            &[&format!("{o} 0")],
        );
    }
    assert_eq!(
        sb.iolab(&["results", "--json"]).ok().json(),
        serde_json::json!([])
    );
}

/// A test in which no I/O completed is not a measurement of 0 MB/s: an emulated disk that
/// takes 5 s for every read and a pass of 200 ms, so no read can finish inside it. The run
/// fails (exit 1) and is stored with a failure note naming the test.
#[test]
fn a_pass_that_completed_no_io_fails_the_run() {
    let Some(_lock) = iolab_testkit::require_devices(&[]) else {
        return;
    };
    if !std::path::Path::new("/dev/fuse").exists() {
        iolab_testkit::skip::skip("no /dev/fuse (the emulated disk is a FUSE file)");
        return;
    }
    let sb = Sandbox::new();
    let disk = iolab_testkit::EmuDisk::new(
        16 << 20,
        r#"{"model":"fixed","read_latency":"5s","write_latency":"5s"}"#,
    );
    let out = sb
        .iolab(&[
            "run",
            "custom",
            "--rw",
            "read",
            "--bs",
            "4k",
            "--iodepth",
            "1",
            "--size",
            "1MiB",
            "--duration",
            "200ms",
            "--ramp",
            "0",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--quiet",
            "--target",
            disk.s(),
        ])
        .code(1);
    out.stderr_has(&[
        "no I/O completed in any measured pass",
        "nothing to measure",
    ]);
    let doc = sb.iolab(&["show", "last", "--json"]).ok().json();
    assert_eq!(doc["complete"], false, "{doc}");
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("failed: ") && n.contains("no I/O completed")),
        "{notes:?}"
    );
}

#[test]
fn like_crystaldiskmark_is_its_schedule_and_only_for_cdm() {
    let sb = Sandbox::new();
    // Five passes of 5 s, each second measured (no ramp), best pass: the fio job shows the
    // pass length and no ramp for every test.
    let job = sb
        .iolab(&[
            "export-fio",
            "cdm",
            "--like-crystaldiskmark",
            "--target",
            sb.target.to_str().unwrap(),
        ])
        .ok()
        .stdout;
    assert_eq!(job.matches("runtime=5000ms").count(), 8, "{job}");
    assert!(!job.contains("ramp_time"), "{job}");
    refused(
        &sb,
        &["run", "atto", "--like-crystaldiskmark"],
        &["--like-crystaldiskmark", "cdm"],
    );
    refused(
        &sb,
        &["run", "cdm", "--like-crystaldiskmark", "--runs", "3"],
        &["--like-crystaldiskmark", "--runs"],
    );
    refused(
        &sb,
        &["run", "cdm", "--like-crystaldiskmark", "--score", "median"],
        &["--score", "best"],
    );
}

/// An engine's own options (declared in its file) are refused with another engine, from
/// the command line and from a job file, and a psync run's header names none of
/// io_uring's; a workload that uses no engine records none (JSON null), nor its options.
#[test]
fn engine_options_are_their_engines_and_a_run_without_one_records_none() {
    let sb = Sandbox::new();
    refused(
        &sb,
        &["run", "custom", "--engine", "psync", "--no-fixedbufs"],
        &["--no-fixedbufs is an io_uring option", "--engine psync"],
    );
    let job = sb.path("j.fio");
    std::fs::write(&job, "[j]\nioengine=psync\nrw=read\nsize=1m\nfixedbufs=1\n").unwrap();
    refused(
        &sb,
        &["run", "fio", job.to_str().unwrap()],
        &["j.fio:5: fixedbufs: an io_uring option"],
    );
    let psync =
        "custom --engine psync --rw read --size 1MiB --io-size 1MiB --duration 60s --runs 1";
    sb.run(&psync.split(' ').collect::<Vec<_>>()).ok();
    let show = sb.iolab(&["show", "last"]).ok();
    assert!(show.stdout.contains("Engine:   psync · "), "{show}");
    let doc = sb
        .run(&["metadata", "--files", "8", "--json", "-"])
        .ok()
        .json();
    for v in [
        &doc["engine"],
        &doc["settings"]["engine"],
        &doc["settings"]["fixedbufs"],
    ] {
        assert!(v.is_null(), "{v} in {doc}");
    }
}

/// `--rwmixread`, declared once (`iolab_spec::RWMIXREAD`): refused where no test is mixed
/// and above 100, and written by export-fio for the mixed tests only.
#[test]
fn rwmixread_is_refused_without_a_mixed_test_and_exported_with_each() {
    let sb = Sandbox::new();
    let none = "--rwmixread sets the read share of mixed tests, and cdm has none (add --mix)";
    for (args, needle) in [
        ("run cdm --rwmixread 60", none),
        (
            "run custom --rw randrw --rwmixread 101",
            "101 is not in 0..=100",
        ),
    ] {
        refused(&sb, &args.split(' ').collect::<Vec<_>>(), &[needle]);
    }
    let target = sb.target.to_str().unwrap();
    let out = sb
        .iolab(&[
            "export-fio",
            "cdm",
            "--mix",
            "--rwmixread",
            "60",
            "--target",
            target,
        ])
        .ok();
    let mixed =
        out.stdout.matches("\nrw=rw\n").count() + out.stdout.matches("\nrw=randrw\n").count();
    assert!(mixed > 0, "{out}");
    assert_eq!(
        out.stdout.matches("\nrwmixread=60\n").count(),
        mixed,
        "{out}"
    );
    assert_eq!(out.stdout.matches("rwmixread").count(), mixed, "{out}");
}
