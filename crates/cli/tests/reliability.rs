//! Reliability end to end: iolab never harms what it did not create (loop backing files,
//! swap files, files open for writing elsewhere, a full filesystem, a damaged result
//! database, foreign cleanup state) and never panics on hostile input or a closed pipe.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use iolab_testkit::*;

/// A stored run in the sandbox's database (a short read of a 1 MiB file).
fn one_run(sb: &Sandbox) {
    sb.run(&[
        "custom",
        "--rw",
        "read",
        "--bs",
        "4k",
        "--size",
        "1MiB",
        "--duration",
        "100ms",
        "--runs",
        "1",
        "--warmup",
        "0",
    ])
    .ok();
}

// --- Item 9: a reader that went away -----------------------------------------------------

/// `iolab <args>` with stdout a pipe whose reader is already gone: every write fails with
/// EPIPE.
fn into_closed_pipe(sb: &Sandbox, args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    sb.cmd(args)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_pipe_ends_quietly() {
    let sb = Sandbox::new();
    one_run(&sb);
    for args in [
        &["results"][..],
        &["show", "1", "--json"],
        &["show", "1"],
        &["report", "1", "--html"],
        &["history"],
        &["presets"],
    ] {
        let out = into_closed_pipe(&sb, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGPIPE),
            "iolab {args:?} should end like `cat` on a closed pipe: {:?}\n{stderr}",
            out.status
        );
        assert!(stderr.is_empty(), "iolab {args:?} printed: {stderr}");
    }
}

// --- Item 9: every count and duration is bounded ----------------------------------------

#[test]
fn huge_counts_and_durations_are_usage_errors_naming_the_option() {
    let sb = Sandbox::new();
    let base = ["custom", "--rw", "read", "--size", "1MiB"];
    let cases: &[(&[&str], &str)] = &[
        (&["--duration", "99999999999999h"], "--duration"),
        (&["--duration", "1000000h"], "--duration"),
        (&["--warmup-time", "1000000h"], "--warmup-time"),
        (&["--ramp", "1000000h"], "--ramp"),
        (&["--runs", "4000000000"], "--runs"),
        (&["--warmup", "4000000000"], "--warmup"),
        (
            &["--until-stable", "--max-runs", "4000000000"],
            "--max-runs",
        ),
    ];
    for (extra, option) in cases {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let out = sb.run(&args).code(2);
        out.stderr_has(&[option]);
        assert!(!out.stderr.contains("panicked"), "{out}");
        assert!(sb.target_entries().is_empty(), "{out}");
    }
    sb.run(&["dbench", "--clients", "100000"])
        .code(2)
        .stderr_has(&["--clients 100000: must be between 1 and 1024"]);
    sb.run(&["metadata", "--files", "1000000000000"])
        .code(2)
        .stderr_has(&["--files"]);
    sb.run(&["fsync", "--duration", "1000000h"])
        .code(2)
        .stderr_has(&["--duration"]);
    assert!(sb.target_entries().is_empty());
    assert!(!sb.db.exists() || sb.result_rows().is_empty());
}

#[test]
fn a_study_matrix_of_a_billion_configurations_is_refused() {
    let sb = Sandbox::new();
    let mut text = String::from("name = \"huge\"\n[testbed]\nkind = \"dir\"\n[matrix]\n");
    for i in 0..9 {
        text.push_str(&format!("knob{i} = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"));
    }
    text.push_str("[[workload]]\nkind = \"custom\"\nrw = \"read\"\n");
    let file = sb.path("huge.toml");
    std::fs::write(&file, text).unwrap();
    let out = sb
        .iolab(&["study", file.to_str().unwrap(), "--dry-run"])
        .code(2);
    out.stderr_has(&["huge.toml:4: matrix:", "more than the 1000"]);
}

// --- Item 2: free space is checked before anything is written ---------------------------

/// `iolab run <args> --target <target> --no-store --quiet`.
fn run_on(sb: &Sandbox, target: &std::path::Path, args: &[&str]) -> Out {
    let mut v = vec!["run"];
    v.extend_from_slice(args);
    v.extend_from_slice(&[
        "--target",
        target.to_str().unwrap(),
        "--no-store",
        "--quiet",
    ]);
    sb.iolab(&v)
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn every_writing_workload_refuses_what_does_not_fit_on_a_small_tmpfs() {
    if !require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=32m,nr_inodes=1000"]);
    let dir = m.path();
    let loadfile = sb.path("big.txt");
    std::fs::write(
        &loadfile,
        "NTCreateX \"\\clients\\client1\\f\" 0x0 0x2 1 NT_STATUS_OK\n\
         WriteX 1 0 20971520 20971520 NT_STATUS_OK\nClose 1 NT_STATUS_OK\n",
    )
    .unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["cdm", "--size", "64MiB"], "--size: the run needs 64 MiB"),
        (
            &["custom", "--rw", "write", "--size", "31MiB"],
            "--size: the run needs 31 MiB",
        ),
        (
            &["custom", "--rw", "read", "--size", "31MiB"],
            "--size: the run needs 31 MiB",
        ),
        (
            &["fsync", "--size", "40MiB"],
            "--size: the run needs 40 MiB",
        ),
        (
            &[
                "streams",
                "--rw",
                "write",
                "--size",
                "10MiB",
                "--streams",
                "4",
            ],
            "--size: the run needs 40 MiB",
        ),
        (&["copy", "--size", "20MiB"], "--size: the run needs 40 MiB"),
        (
            &["metadata", "--files", "900", "--file-size", "64KiB"],
            "--files: the run needs 56.25 MiB",
        ),
        (
            &["metadata", "--files", "2000", "--file-size", "0"],
            "--files: the run needs 2011 files and directories",
        ),
        (
            &[
                "dbench",
                "--clients",
                "2",
                "--loadfile",
                loadfile.to_str().unwrap(),
            ],
            "--clients: the run needs 40 MiB",
        ),
        (
            &["verify", "--size", "40MiB"],
            "--size: the run needs 40 MiB",
        ),
    ];
    for (args, message) in cases {
        let out = run_on(&sb, &dir, args).code(2);
        out.stderr_has(&[message, "give a smaller"]);
        assert!(
            entries(&dir).is_empty(),
            "{:?} left files: {out}",
            entries(&dir)
        );
    }
    // What fits runs.
    run_on(
        &sb,
        &dir,
        &[
            "custom",
            "--rw",
            "write",
            "--buffered",
            "--size",
            "8MiB",
            "--duration",
            "100ms",
            "--runs",
            "1",
            "--warmup",
            "0",
        ],
    )
    .ok();
    assert!(entries(&dir).is_empty());
}

#[test]
fn an_existing_file_counts_what_its_blocks_already_hold() {
    if !require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=32m"]);
    let data = m.path().join("data");
    let d = data.to_str().unwrap();
    // 20 MiB of 32 kept: 12 MiB stay free.
    run_on(&sb, &data, &["verify", "--size", "20MiB", "--keep"]).ok();
    // Writing over those 20 MiB needs no new room...
    for args in [
        &["verify", "--size", "20MiB", "--allow-overwrite-file"][..],
        &[
            "custom",
            "--rw",
            "write",
            "--buffered",
            "--duration",
            "100ms",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--allow-overwrite-file",
        ],
    ] {
        run_on(&sb, &data, args).ok();
    }
    // ...growing the file to 24 MiB does, and 20 more do not fit beside it.
    run_on(
        &sb,
        &data,
        &["verify", "--size", "24MiB", "--allow-overwrite-file"],
    )
    .ok();
    let out = run_on(&sb, &m.path().join("other"), &["verify", "--size", "20MiB"]).code(2);
    out.stderr_has(&["--size: the run needs 20 MiB"]);
    let out = run_on(
        &sb,
        &data,
        &["verify", "--size", "40MiB", "--allow-overwrite-file"],
    );
    out.code(2)
        .stderr_has(&["(24 MiB of it already allocated there, so 16 MiB more)"]);
    assert_eq!(std::fs::metadata(d).unwrap().len(), 24 << 20);
}
