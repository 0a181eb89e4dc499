//! When the kernel refuses io_uring, iolab falls back to psync and says so. The refusal is
//! made the way containers make it (Docker's default seccomp profile denies io_uring_setup):
//! a seccomp filter on the iolab process alone returns EPERM for io_uring_setup. Nothing
//! machine-wide changes, so other runs on the machine keep their io_uring, and no root is
//! needed.

use std::os::unix::process::CommandExt;
use std::time::Instant;

use iolab_testkit::{Out, Sandbox};
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};

/// A filter that answers io_uring_setup with EPERM and lets every other call through.
fn deny_io_uring() -> BpfProgram {
    let filter = SeccompFilter::new(
        [(libc::SYS_io_uring_setup, vec![])].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    filter.try_into().unwrap()
}

/// `iolab ARGS` with io_uring_setup denied to it.
fn run_denied(sb: &Sandbox, args: &[&str]) -> Out {
    let prog = deny_io_uring();
    let mut cmd = sb.cmd(args);
    // SAFETY: between fork and exec the closure only makes the prctl/seccomp calls
    // (apply_filter sets no_new_privs and loads the already built program): no allocation,
    // no lock.
    unsafe {
        cmd.pre_exec(move || {
            seccompiler::apply_filter(&prog).map_err(|e| std::io::Error::other(e.to_string()))
        });
    }
    let start = Instant::now();
    Out::new(args, cmd.output().unwrap(), start.elapsed())
}

#[test]
fn io_uring_refused_falls_back_to_psync_with_a_note() {
    let sb = Sandbox::new();
    let target = sb.path("t");
    let args = [
        "run",
        "custom",
        "--rw",
        "randread",
        "--iodepth",
        "8",
        "--size",
        "4MiB",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--runs",
        "1",
        "--json",
        "-",
        "--quiet",
        "--target",
        target.to_str().unwrap(),
    ];
    let out = run_denied(&sb, &args);
    let doc = out.ok().json();
    assert_eq!(doc["engine"], "psync", "{doc}");
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("io_uring is not available") && n.contains("psync")),
        "{notes:?}"
    );
    assert!(doc["tests"][0]["passes"][0]["ios"].as_u64().unwrap() > 0);
}

/// The same filter asked for io_uring by name: the run is refused, not quietly moved to
/// another engine.
#[test]
fn io_uring_asked_for_by_name_and_refused_is_an_error() {
    let sb = Sandbox::new();
    let target = sb.path("t");
    let args = [
        "run",
        "custom",
        "--engine",
        "io_uring",
        "--size",
        "4MiB",
        "--duration",
        "100ms",
        "--runs",
        "1",
        "--quiet",
        "--target",
        target.to_str().unwrap(),
    ];
    let out = run_denied(&sb, &args);
    assert_ne!(out.code, Some(0), "{out}");
    assert_eq!(out.code, Some(2), "{out}");
    out.stderr_has(&["--engine io_uring", "not available", "--engine psync"]);
}
