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
