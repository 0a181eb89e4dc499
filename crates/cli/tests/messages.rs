//! Messages say what happened in words a user can act on, and refusals exit 2: a target
//! that is a character device or a FIFO is named as such; a block size larger than the
//! region blames the option that set it, before anything is stored; a --target that did not
//! exist is said to be a new file; a run, label or study the database does not hold is bad
//! input; a read-only target is a failed operation (1), not bad input; a database on a
//! full filesystem says the filesystem is full, and it can still be read.

use std::path::Path;

use iolab_testkit::{require_root, Mount, Sandbox};

fn short(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["--duration", "100ms", "--runs", "1", "--size", "4MiB"];
    v.extend_from_slice(extra);
    v
}

#[test]
fn special_files_are_named_not_dumped() {
    let sb = Sandbox::new();
    let fifo = sb.path("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for (target, kind) in [
        (Path::new("/dev/null"), "a character device"),
        (fifo.as_path(), "a named pipe (FIFO)"),
    ] {
        for workload in ["custom", "verify"] {
            let mut args = vec!["run", workload, "--target", target.to_str().unwrap()];
            if workload == "custom" {
                args.extend(short(&["--quiet"]));
            } else {
                args.extend(["--size", "4MiB", "--quiet"]);
            }
            let out = sb.iolab(&args).code(2);
            out.stderr_has(&[kind]);
            assert!(!out.stderr.contains("FileType"), "{out}");
        }
    }
    assert!(sb.result_rows().is_empty());
}

#[test]
fn a_block_larger_than_the_region_blames_the_option_that_set_it() {
    let sb = Sandbox::new();
    let out = sb
        .run(&[
            "custom",
            "--bs",
            "8MiB",
            "--size",
            "4MiB",
            "--duration",
            "100ms",
            "--runs",
            "1",
        ])
        .code(2);
    out.stderr_has(&["--bs", "8 MiB blocks", "4 MiB test region"]);
    assert!(!out.stderr.contains("--size asks"), "{out}");
    let out = sb
        .run(&[
            "cdm",
            "--size",
            "512KiB",
            "--duration",
            "100ms",
            "--runs",
            "1",
        ])
        .code(2);
    out.stderr_has(&["--size", "1 MiB blocks", "512 KiB test region"]);
    // Refused before the run started: nothing stored, nothing left.
    assert!(sb.result_rows().is_empty(), "{}", sb.results());
    assert!(sb.target_entries().is_empty());
}

#[test]
fn a_target_that_did_not_exist_is_said_to_be_a_new_file() {
    let sb = Sandbox::new();
    let new = sb.path("t").join("dtaa");
    let mut args = vec!["run", "custom", "--target", new.to_str().unwrap()];
    args.extend(short(&["--quiet", "--json", "-"]));
    let out = sb.iolab(&args).ok();
    let notes = out.json()["notes"].to_string();
    assert!(
        notes.contains("did not exist: iolab created it as a new 4 MiB file"),
        "{notes}"
    );
    assert!(!new.exists(), "the new file was not removed");
    // The same note on the terminal.
    let mut args = vec!["run", "custom", "--target", new.to_str().unwrap()];
    args.extend(short(&[]));
    let out = sb.iolab(&args).ok();
    assert!(out.stdout.contains("did not exist"), "{out}");
    // An existing directory gets no such note.
    let out = sb.run(&short(&["--json", "-"])).ok();
    assert!(!out.json()["notes"].to_string().contains("did not exist"));
}

#[test]
fn what_the_database_does_not_hold_is_bad_input() {
    let sb = Sandbox::new();
    sb.run(&short(&[])).ok();
    sb.iolab(&["show", "999"])
        .code(2)
        .stderr_has(&["run 999 not found"]);
    sb.iolab(&["report", "999"]).code(2);
    sb.iolab(&["compare", "1", "999"]).code(2);
    sb.iolab(&["compare", "--label", "a", "--label", "b"])
        .code(2)
        .stderr_has(&["label 'a' not found"]);
    sb.iolab(&["report", "--study", "nope"])
        .code(2)
        .stderr_has(&["study 'nope' not found"]);
}

#[test]
fn a_read_only_target_is_a_failed_operation_for_every_workload() {
    if !require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=64m,ro"]);
    let dir = m.path();
    for w in [
        &["custom", "--rw", "write"][..],
        &["verify"],
        &["copy"],
        &["streams"],
        &["fsync"],
        &["metadata", "--files", "10"],
    ] {
        let mut args = vec!["run"];
        args.extend_from_slice(w);
        args.extend(["--target", dir.to_str().unwrap(), "--quiet"]);
        if w[0] != "metadata" && w[0] != "fsync" {
            args.extend(["--size", "4MiB"]);
        }
        if w[0] == "custom" || w[0] == "fsync" || w[0] == "streams" {
            args.extend(["--duration", "100ms"]);
        }
        let out = sb.iolab(&args).code(1);
        out.stderr_has(&["Read-only file system", &dir.to_string_lossy()]);
        assert!(!out.stderr.contains("cannot create:"), "{out}");
    }
}

#[test]
fn a_database_on_a_full_filesystem_says_so_and_can_still_be_read() {
    if !require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=8m"]);
    let db = m.path().join("r.db");
    let db = db.to_str().unwrap();
    let target = sb.path("t");
    let run = |n: &'static str| {
        let args = [
            "run",
            "custom",
            "--target",
            target.to_str().unwrap(),
            "--quiet",
            "--io-size",
            "1MiB",
            "--duration",
            "60s",
            "--size",
            "4MiB",
            "--runs",
            n,
            "--db",
            db,
        ];
        std::process::Command::new(iolab_testkit::iolab::iolab_bin())
            .args(args)
            .output()
            .unwrap()
    };
    assert!(run("1").status.success());
    // Another process fills the filesystem.
    let mut f = std::fs::File::create(m.path().join("fill")).unwrap();
    while std::io::Write::write_all(&mut f, &[0u8; 65536]).is_ok() {}
    let out = run("2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the filesystem holding it is full"),
        "{stderr}"
    );
    // Reading needs no space.
    let listed = std::process::Command::new(iolab_testkit::iolab::iolab_bin())
        .args(["results", "--db", db])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains("1 run"));
}
