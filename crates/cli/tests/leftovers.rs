//! Nothing left behind, whatever ends a run: a second Ctrl-C or SIGTERM still removes what
//! the run created; SIGHUP stops every workload like Ctrl-C; after a kill -9, `iolab cleanup`
//! removes what the run recorded and a dbench rerun takes its own leftovers for what they
//! are. And a run whose I/O fails says so: dbench on a full, read-only or failing
//! filesystem exits 1 naming the errno, the file and the loadfile line, is stored as failed
//! with no throughput, and names what it could not remove.
//!
//! Moments are chosen by waiting for files to appear (and for a signal to be taken), never
//! by sleeping. Tests that kill runs share one lock: `iolab cleanup` removes what any dead
//! run left, so one test's cleanup must not run between another's kill and its check.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use iolab_testkit::{require_devices, require_root, sh, skip, Loop, Mount, Out, Sandbox};

const CLIENT_TXT: &str = "/usr/share/dbench/client.txt";

/// Long enough never to finish by itself; each is stopped once it has created something.
const WORKLOADS: &[(&str, &[&str])] = &[
    (
        "cdm",
        &["cdm", "--size", "32MiB", "--duration", "20s", "--runs", "9"],
    ),
    ("dbench", &["dbench", "--duration", "60s", "--warmup", "0s"]),
    ("verify", &["verify", "--size", "64MiB", "--runs", "1000"]),
    ("metadata", &["metadata", "--files", "2000000"]),
    // The shipped sqlite trace (25 ms) with its gaps stretched 1,000 times.
    (
        "replay",
        &[
            "replay",
            "--trace",
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../spec/tests/corpus/trace/sqlite-wal.trace"
            ),
            "--speed",
            "x0.001",
        ],
    ),
];

static KILLS: Mutex<()> = Mutex::new(());

fn kills() -> MutexGuard<'static, ()> {
    KILLS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn have_client_txt() -> bool {
    if Path::new(CLIENT_TXT).exists() {
        return true;
    }
    skip(format!(
        "{CLIENT_TXT} is not installed (apt-get install dbench)"
    ));
    false
}

/// Waits (up to a generous limit that only a hang reaches) until `f` holds.
#[track_caller]
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "gave up waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Everything under `dir`, recursively (relative paths).
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Waits until the run has created what it works on: a test file, a data file, a tree,
/// or (dbench) a file in a client's directory.
fn wait_until_working(sb: &Sandbox, workload: &str) {
    wait_for(&format!("{workload} to create something"), || {
        let t = tree(&sb.target);
        match workload {
            "dbench" => t.iter().any(|p| p.starts_with("clients/client0/")),
            "metadata" => t.iter().any(|p| p.components().count() >= 3),
            _ => !t.is_empty(),
        }
    });
}

/// Whether signal `sig` is still pending for process `pid` (not yet taken by a handler).
fn pending(pid: u32, sig: i32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let bit = 1u64 << (sig - 1);
    status
        .lines()
        .filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .any(|mask| mask & bit != 0)
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

fn finish(child: Child, what: &str) -> Out {
    let out = child.wait_with_output().unwrap();
    Out::new(&[what], out, Duration::ZERO)
}

/// The run-state files of process `pid` (in the sandbox's state directory).
fn run_state_files(sb: &Sandbox, pid: u32) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(sb.state_dir()) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("run-{pid}-")))
        })
        .collect()
}

/// Runs every workload (dbench only when its loadfile is installed) in a fresh sandbox and
/// hands it to `check` once it has created something.
fn each_working_run(mut check: impl FnMut(&str, &Sandbox, Child)) {
    for (name, args) in WORKLOADS {
        if *name == "dbench" && !have_client_txt() {
            continue;
        }
        let sb = Sandbox::new();
        let child = sb.spawn_run(args);
        wait_until_working(&sb, name);
        check(name, &sb, child);
    }
}

/// Nothing is left in the sandbox's target.
#[track_caller]
fn assert_nothing_left(name: &str, sb: &Sandbox, out: &dyn std::fmt::Display) {
    let left = tree(&sb.target);
    assert!(left.is_empty(), "{name} left {left:?}: {out}");
}

/// Two signals in a row (the second sent once the first was taken): exit 130, and every
/// file the run created is gone, its run-state file too.
fn two_signals(first: i32, second: i32) {
    if !require_root("the run state of a root run") {
        return;
    }
    let _g = kills();
    each_working_run(|name, sb, child| {
        let pid = child.id();
        signal(&child, first);
        wait_for("the first signal to be taken", || !pending(pid, first));
        signal(&child, second);
        let out = finish(child, name);
        assert_eq!(out.code, Some(130), "{name}: {out}");
        assert_nothing_left(name, sb, &out);
        assert!(run_state_files(sb, pid).is_empty(), "{name}: {out}");
    });
}

#[test]
fn a_second_ctrl_c_still_removes_what_the_run_created() {
    two_signals(libc::SIGINT, libc::SIGINT);
}

#[test]
fn a_second_sigterm_still_removes_what_the_run_created() {
    two_signals(libc::SIGTERM, libc::SIGTERM);
}

#[test]
fn sighup_stops_every_workload_like_ctrl_c() {
    let _g = kills();
    each_working_run(|name, sb, child| {
        signal(&child, libc::SIGHUP);
        let out = finish(child, name);
        assert_eq!(out.code, Some(130), "{name}: {out}");
        assert_nothing_left(name, sb, &out);
        // Stopped while preparing (cdm fills its test file first), nothing is stored;
        // later, what finished is stored as incomplete.
        let rows = sb.result_rows();
        assert!(rows.len() <= 1, "{name}: {}", sb.results());
        assert!(
            rows.iter().all(|r| r.2 == "incomplete"),
            "{name}: {}",
            sb.results()
        );
    });
}

#[test]
fn cleanup_removes_what_a_killed_run_left() {
    if !require_root("the run state of a root run") {
        return;
    }
    let _g = kills();
    each_working_run(|name, sb, mut child| {
        let pid = child.id();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            !tree(&sb.target).is_empty(),
            "{name}: a kill -9 left nothing?"
        );
        assert_eq!(run_state_files(sb, pid).len(), 1, "{name}: no run state");
        let out = sb.iolab(&["cleanup"]).ok();
        assert!(
            out.stdout
                .contains(&format!("removed {}", sb.target.display())),
            "{name}: {out}"
        );
        assert_nothing_left(name, sb, &out);
        assert!(run_state_files(sb, pid).is_empty(), "{name}: {out}");
    });
}

#[test]
fn a_dbench_rerun_takes_a_killed_runs_clients_for_iolabs_own() {
    if !require_root("the run state of a root run") || !have_client_txt() {
        return;
    }
    let _g = kills();
    let sb = Sandbox::new();
    let mut child = sb.spawn_run(&["dbench", "--duration", "60s", "--warmup", "0s"]);
    wait_until_working(&sb, "dbench");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(tree(&sb.target)
        .iter()
        .any(|p| p.starts_with("clients/client0/")));
    let out = sb
        .run(&[
            "dbench",
            "--duration",
            "300ms",
            "--warmup",
            "0s",
            "--json",
            "-",
        ])
        .ok();
    let doc = out.json();
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("removed what a killed iolab run left"),
        "{notes}"
    );
    assert!(tree(&sb.target).is_empty(), "{:?}", tree(&sb.target));
}

/// A dbench run on `dir` that must fail with `errno`: exit 1, the errno, a file and the
/// loadfile line on stderr; stored as failed, without a test (no throughput). `during` runs
/// once the first client has created a file (the free-space check passed, the run is on).
fn dbench_fails_with(sb: &Sandbox, dir: &Path, errno: &str, during: impl FnOnce()) -> Out {
    let args = [
        "run",
        "dbench",
        "--target",
        dir.to_str().unwrap(),
        "--duration",
        "20s",
        "--warmup",
        "0s",
        "--quiet",
        "--json",
        "-",
    ];
    let child = sb
        .cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut during = Some(during);
    wait_for("dbench to start or end", || {
        if tree(dir).iter().any(|p| p.starts_with("clients/client0/")) {
            if let Some(f) = during.take() {
                f();
            }
            return true;
        }
        // A read-only target never gets a file: the run ends by itself.
        !Path::new(&format!("/proc/{}", child.id())).exists()
            || fs::read_to_string(format!("/proc/{}/stat", child.id()))
                .is_ok_and(|s| s.contains(") Z "))
    });
    let out = finish(child, "dbench");
    assert_eq!(out.code, Some(1), "{out}");
    out.stderr_has(&[errno, &format!("{CLIENT_TXT}:"), "reports no throughput"]);
    let doc = out.json();
    assert_eq!(doc["complete"], false, "{out}");
    assert_eq!(doc["tests"].as_array().map(Vec::len), Some(0), "{out}");
    let notes = doc["notes"].to_string();
    assert!(notes.contains("failed: dbench:"), "{notes}");
    let rows = sb.result_rows();
    assert_eq!(rows.last().map(|r| r.2.as_str()), Some("incomplete"));
    out
}

#[test]
fn dbench_on_a_full_filesystem_fails_instead_of_reporting_a_speed() {
    if !require_root("mounting a tmpfs") || !have_client_txt() {
        return;
    }
    let sb = Sandbox::new();
    // Room for the free-space check; once the clients are writing, another process takes
    // the rest of it, and keeps taking whatever the clients free (dbench deletes its files
    // as it goes, so one fill at a moment when its files are large would leave it room
    // for every later loop).
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=64m"]);
    let filler = m.path().join("other-process.fill");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut thread = None;
    let out = dbench_fails_with(&sb, &m.path(), "ENOSPC", || {
        let mut f = fs::File::create(&filler).unwrap();
        let big = vec![0u8; 1 << 20];
        while std::io::Write::write_all(&mut f, &big).is_ok() {}
        let stop = stop.clone();
        thread = Some(std::thread::spawn(move || {
            let page = [0u8; 4096];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if std::io::Write::write_all(&mut f, &page).is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }));
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(t) = thread {
        t.join().unwrap();
    }
    // The file that did not fit is named.
    out.stderr_has(&[&format!("{}/clients/client0/", m.path().display())]);
    let left: Vec<PathBuf> = tree(&m.path())
        .into_iter()
        .filter(|p| p != Path::new("other-process.fill"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn dbench_on_a_read_only_mount_fails() {
    if !require_root("mounting a tmpfs") || !have_client_txt() {
        return;
    }
    let sb = Sandbox::new();
    // Large enough for the free-space check: the writes themselves must fail.
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=64m,ro"]);
    dbench_fails_with(&sb, &m.path(), "EROFS", || {});
}

/// ext4 on a loop device that turns read-only (errors=remount-ro, an error triggered once
/// `ready` sees the run's files): the run fails with EROFS, names what it could not remove
/// (`left`, relative to the mount) and keeps it recorded; once the filesystem is repaired
/// and mounted again, `iolab cleanup` removes it.
fn turns_read_only(args: &[&str], ready: impl Fn(&[PathBuf]) -> bool) -> Out {
    let sb = Sandbox::new();
    let lo = Loop::new(128 << 20);
    sh("mkfs.ext4", &["-q", lo.s()]);
    let mnt = sb.path("mnt");
    let m = Mount::at(&lo.dev, &mnt, &["-o", "errors=remount-ro"]);
    let dir = m.path();
    let trigger = format!("/sys/fs/ext4/{}/trigger_fs_error", lo.name());
    assert!(Path::new(&trigger).exists(), "{trigger} does not exist");
    let child = spawn_working(&sb, &dir, args, ready);
    let pid = child.id();
    fs::write(&trigger, "1").unwrap();
    let out = finish(child, args[0]);
    assert_eq!(out.code, Some(1), "{out}");
    out.stderr_has(&["Read-only file system"]);
    // The run met the read-only filesystem when it cleaned up, and said so.
    assert!(
        out.stderr.contains("left behind: could not remove"),
        "a read-only filesystem let it remove all: {out}"
    );
    // Whatever a listing shows is named on stderr (and in the stored run) and stays
    // recorded. The listing may show less than the run made: after the journal's abort the
    // directory blocks of the aborted transaction are clean pages in memory, never written,
    // and once the kernel drops them (this VM's DAMON pageout did, under load) the listing
    // reads the block from the device, without the new entry (its dentry may still be
    // cached: the run's unlink found the file and got EROFS).
    let left = top_level(&dir);
    for p in &left {
        out.stderr_has(&["left behind: could not remove", &p.to_string_lossy()]);
    }
    out.stderr_has(&["iolab cleanup"]);
    assert_eq!(run_state_files(&sb, pid).len(), 1, "{out}");
    let shown = sb.iolab(&["show", "last"]).ok();
    assert!(shown.stdout.contains("left behind"), "{shown}");
    // Repaired and mounted again: cleanup removes what the run recorded.
    drop(m);
    // e2fsck exits 1 when it corrected something: not a failure here. It needs the device
    // to itself, and just after the unmount another process may still have it open for a
    // moment (udev probing it; on a loaded machine e2fsck once found "/dev/loop2 is in
    // use"): it runs again while that is what it says, up to a limit only a hang reaches.
    let deadline = Instant::now() + Duration::from_secs(120);
    let fsck = loop {
        let fsck = std::process::Command::new("e2fsck")
            .args(["-fy", lo.s()])
            .output()
            .unwrap();
        let busy = String::from_utf8_lossy(&fsck.stdout).contains("is in use");
        if !busy || Instant::now() > deadline {
            break fsck;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(fsck.status.code().is_some_and(|c| c <= 1), "{fsck:?}");
    let _m = Mount::at(&lo.dev, &mnt, &[]);
    sb.iolab(&["cleanup"]).ok();
    assert!(top_level(&dir).is_empty(), "{:?}", top_level(&dir));
    assert!(run_state_files(&sb, pid).is_empty());
    out
}

/// Starts `iolab run ARGS --target DIR --quiet` and waits until `ready` sees its files.
fn spawn_working(
    sb: &Sandbox,
    dir: &Path,
    args: &[&str],
    ready: impl Fn(&[PathBuf]) -> bool,
) -> Child {
    let mut v = vec!["run"];
    v.extend_from_slice(args);
    v.extend_from_slice(&["--target", dir.to_str().unwrap(), "--quiet"]);
    let child = sb
        .cmd(&v)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the run's files", || ready(&tree(dir)));
    child
}

/// What is in a filesystem's root besides lost+found (a listing that fails fails the test).
fn top_level(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|n| n != "lost+found"))
        .collect();
    v.sort();
    v
}

#[test]
fn dbench_on_a_filesystem_that_turns_read_only_names_what_it_left() {
    let Some(_dev) = require_devices(&["mkfs.ext4", "e2fsck"]) else {
        return;
    };
    if !have_client_txt() {
        return;
    }
    let _g = kills();
    let out = turns_read_only(&["dbench", "--duration", "60s", "--warmup", "0s"], |t| {
        t.iter().any(|p| p.starts_with("clients/client0/"))
    });
    out.stderr_has(&["EROFS", &format!("{CLIENT_TXT}:")]);
}

#[test]
fn run_verify_on_a_filesystem_that_turns_read_only_names_what_it_left() {
    let Some(_dev) = require_devices(&["mkfs.ext4", "e2fsck"]) else {
        return;
    };
    let _g = kills();
    let out = turns_read_only(&["verify", "--size", "64MiB", "--runs", "1000"], |t| {
        t.iter().any(|p| p.to_string_lossy().ends_with(".dat"))
    });
    out.stderr_has(&["iolab-verify-"]);
}

/// A loop device whose backing file shrinks under a running workload (losetup -c) once
/// `ready` sees its files: what lies beyond the new end returns EIO. The run exits 1
/// saying so, names on stderr everything it could not remove, and once the device is gone
/// `iolab cleanup` finds nothing left to do but forget the record.
fn device_returns_eio(args: &[&str], ready: impl Fn(&[PathBuf]) -> bool) -> Out {
    let sb = Sandbox::new();
    let img = sb.path("disk.img");
    fs::File::create(&img).unwrap().set_len(128 << 20).unwrap();
    sh(
        "mkfs.ext4",
        &["-q", "-E", "nodiscard", img.to_str().unwrap()],
    );
    let lo = Loop::attach(&img, &[]);
    let m = Mount::new(&lo.dev, &[]);
    let dir = m.path();
    let child = spawn_working(&sb, &dir, args, ready);
    let pid = child.id();
    // The device now ends after 8 MiB.
    fs::OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .set_len(8 << 20)
        .unwrap();
    sh("losetup", &["-c", lo.s()]);
    let out = finish(child, args[0]);
    assert_eq!(out.code, Some(1), "{out}");
    // Each thing still there is named (the run could not remove it).
    for p in top_level(&dir) {
        out.stderr_has(&["left behind", &p.to_string_lossy()]);
    }
    drop(m);
    drop(lo);
    sb.iolab(&["cleanup"]).ok();
    assert!(run_state_files(&sb, pid).is_empty());
    out
}

#[test]
fn run_verify_on_a_device_that_returns_eio_says_what_failed() {
    let Some(_dev) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let _g = kills();
    // Once the sidecar exists, the data file is sized and being written.
    let out = device_returns_eio(&["verify", "--size", "96MiB", "--runs", "1000"], |t| {
        t.iter()
            .any(|p| p.to_string_lossy().ends_with(".iolab-verify.json"))
    });
    // The write fails with EIO, or the journal aborts on it first (EROFS).
    assert!(
        out.stderr.contains("Input/output error") || out.stderr.contains("Read-only file system"),
        "{out}"
    );
}

#[test]
fn dbench_on_a_device_that_returns_eio_fails_and_names_what_it_left() {
    let Some(_dev) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    if !have_client_txt() {
        return;
    }
    let _g = kills();
    let out = device_returns_eio(&["dbench", "--duration", "60s", "--warmup", "0s"], |t| {
        t.iter().any(|p| p.starts_with("clients/client0/"))
    });
    // Buffered writes fail at their flush (EIO), or the journal aborts first (EROFS).
    assert!(
        out.stderr.contains("failed with EIO") || out.stderr.contains("failed with EROFS"),
        "{out}"
    );
    out.stderr_has(&[&format!("{CLIENT_TXT}:"), "reports no throughput"]);
}

/// A failed run of a study (dbench on a read-only mount) is stored, but `report --study`
/// leaves it out of the comparison, saying why; the other configuration is compared.
#[test]
fn a_failed_run_is_never_ranked_in_a_study_report() {
    if !require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=64m,ro"]);
    let study = ["--study", "t-failed", "--config"];
    let ro = m.path();
    // The tiny loadfile: what is judged is the study's report, not the replay (client.txt
    // costs 6 s of CPU a run to read in a debug build).
    let lf = sb.path("tiny.txt");
    fs::write(&lf, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
    let lf = lf.to_str().unwrap();
    let mut failed = vec![
        "run",
        "dbench",
        "--loadfile",
        lf,
        "--target",
        ro.to_str().unwrap(),
    ];
    failed.extend_from_slice(&study);
    failed.extend_from_slice(&["readonly", "--duration", "1s", "--quiet"]);
    sb.iolab(&failed).code(1);
    let mut good = vec![
        "dbench",
        "--loadfile",
        lf,
        "--duration",
        "300ms",
        "--warmup",
        "0s",
    ];
    good.extend_from_slice(&study);
    good.push("writable");
    sb.run(&good).ok();
    assert_eq!(sb.result_rows().len(), 2, "{}", sb.results());
    let out = sb.iolab(&["report", "--study", "t-failed"]).ok();
    out.stderr_has(&["is left out: it failed", "EROFS"]);
    // Run 1 failed, run 2 is the study's only comparable run.
    assert!(out.stdout.contains("Run: #2"), "{out}");
    assert!(!out.stdout.contains("#1"), "{out}");
}

/// The end of a run removes its test file only while the path still holds that file (device
/// and inode): a file moved away during the run and replaced by someone else's is left
/// alone, the run says so and where its own went, and nothing stays recorded for cleanup.
#[test]
fn a_test_file_replaced_during_the_run_is_left_alone() {
    let _k = kills();
    let sb = Sandbox::new();
    let child = sb.spawn_run(&[
        "custom",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--size",
        "8MiB",
        "--runs",
        "1",
        "--duration",
        "60s",
    ]);
    let pid = child.id();
    // The test file (iolab-PID-….dat), once it is there and filled (8 MiB).
    let test_file = || {
        sb.target_entries().into_iter().find(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with(&format!("iolab-{pid}-"))
                && n.ends_with(".dat")
                && fs::metadata(p).is_ok_and(|m| m.len() == 8 << 20)
        })
    };
    wait_for("the test file", || test_file().is_some());
    let ours = test_file().unwrap();
    let moved = sb.path("moved-away.dat");
    fs::rename(&ours, &moved).unwrap();
    fs::write(&ours, "someone else's file\n").unwrap();
    signal(&child, libc::SIGINT);
    let out = finish(child, "custom");
    assert_eq!(out.code, Some(130), "{out}");
    assert_eq!(
        fs::read_to_string(&ours).unwrap(),
        "someone else's file\n",
        "the replacement was removed: {out}"
    );
    out.stderr_has(&[
        &format!("{} is not the file this run created", ours.display()),
        &format!("moved to {}", moved.display()),
    ]);
    assert!(moved.exists(), "iolab's moved file was removed");
    assert!(
        run_state_files(&sb, pid).is_empty(),
        "still recorded: {out}"
    );
    let notes = sb.iolab(&["show", "last", "--json"]).ok().json()["notes"].to_string();
    assert!(
        notes.contains("is not the file this run created"),
        "{notes}"
    );
    fs::remove_file(&moved).unwrap();
}

/// Something else where dbench's `clients/` or a client's directory goes is refused before
/// the run starts: exit 2 naming it, no run stored, nothing created, nothing recorded.
#[test]
fn dbench_refuses_what_is_in_the_way_before_the_run() {
    let sb = Sandbox::new();
    let lf = sb.path("tiny.txt");
    fs::write(&lf, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
    let args = [
        "dbench",
        "--loadfile",
        lf.to_str().unwrap(),
        "--duration",
        "1s",
        "--warmup",
        "0s",
    ];
    // A file where clients/ goes; then a file where client0/ goes.
    let clients = sb.target.join("clients");
    fs::write(&clients, "mine\n").unwrap();
    let client0 = clients.join("client0");
    for (theirs, made) in [(&clients, None), (&client0, Some(&clients))] {
        if let Some(d) = made {
            fs::remove_file(d).unwrap();
            fs::create_dir(d).unwrap();
            fs::write(theirs, "mine\n").unwrap();
        }
        let out = sb.run(&args).code(2);
        out.stderr_has(&[&format!("{} is in the way", theirs.display())]);
        assert_eq!(fs::read_to_string(theirs).unwrap(), "mine\n", "{out}");
        assert!(sb.result_rows().is_empty(), "stored: {out}");
        assert_eq!(
            tree(&sb.target),
            vec![PathBuf::from("clients")]
                .into_iter()
                .chain(made.map(|_| PathBuf::from("clients/client0")))
                .collect::<Vec<_>>(),
            "{out}"
        );
        let states: Vec<_> = fs::read_dir(sb.state_dir()).unwrap().collect();
        assert!(states.is_empty(), "recorded: {states:?}");
    }
}

/// A test file replaced while it is still being filled, the run then killed (kill -9): the
/// run state already names the file the run created (device and inode: the file has no name
/// before that, see the test before this one), so `iolab cleanup`
/// leaves the replacement alone (and says so) instead of removing whatever has iolab's
/// name for the process in the directory.
#[test]
fn a_test_file_replaced_while_filled_is_left_alone_by_cleanup_after_a_kill() {
    if !require_root("the run state of a root run") {
        return;
    }
    let _k = kills();
    let sb = Sandbox::new();
    const SIZE: u64 = 256 << 20;
    // The fill is caught by stopping the run (SIGSTOP) once its file is there; a fill that
    // had already finished by then is tried again.
    for attempt in 1.. {
        assert!(
            attempt <= 20,
            "never caught a test file while it was filled"
        );
        let mut child = sb.spawn_run(&[
            "custom",
            "--rw",
            "randread",
            "--bs",
            "4k",
            "--size",
            "256MiB",
            "--runs",
            "1",
            "--duration",
            "60s",
        ]);
        let pid = child.id();
        let test_file = || {
            sb.target_entries().into_iter().find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(&format!("iolab-{pid}-")) && n.ends_with(".dat")
            })
        };
        wait_for("the test file", || test_file().is_some());
        signal(&child, libc::SIGSTOP);
        let ours = test_file().unwrap();
        let filled = fs::metadata(&ours).unwrap().len() >= SIZE;
        let moved = sb.path("moved-away.dat");
        if !filled {
            fs::rename(&ours, &moved).unwrap();
            fs::write(&ours, "someone else's file\n").unwrap();
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if filled {
            sb.iolab(&["cleanup"]).ok();
            continue;
        }
        let out = sb.iolab(&["cleanup"]);
        assert_eq!(
            fs::read_to_string(&ours).unwrap(),
            "someone else's file\n",
            "cleanup removed the replacement: {out}"
        );
        assert!(out.stdout.contains("left alone"), "{out}");
        // Once the path is free, the record goes too (iolab's moved file was never at it).
        fs::remove_file(&ours).unwrap();
        sb.iolab(&["cleanup"]).ok();
        assert!(run_state_files(&sb, pid).is_empty());
        fs::remove_file(&moved).unwrap();
        break;
    }
}

/// A block run's test file and the fsync probe's file have no name until the run state
/// records them exactly: each is made unnamed (O_TMPFILE), its device and inode are written
/// to the run-state file, and only then is it linked at its path. A process stopped or
/// killed at any moment therefore never leaves a file at iolab's name for it that `iolab
/// cleanup` would take by name (a run stopped between a named create and its record once
/// let cleanup remove a replacement, in the test after this one). Checked in the order of
/// the system calls, under strace.
#[test]
fn files_are_named_only_once_the_run_state_records_them() {
    if !require_root("the run state of a root run") || !iolab_testkit::require_tools(&["strace"]) {
        return;
    }
    for args in [
        "custom --rw randread --bs 4k --size 1MiB --runs 1 --duration 60s --io-size 64k",
        "fsync --sizes 4k --methods fdatasync --duration 100ms",
    ] {
        named_once_recorded(args);
    }
}

/// `iolab LINE` in `sb` (its arguments split at white space, its environment) under
/// `strace -f -qq ARGS -o LOG`.
fn under_strace(sb: &Sandbox, line: &str, args: &[&str], log: &Path) -> std::process::Command {
    let run = sb.cmd(&line.split_whitespace().collect::<Vec<_>>());
    let mut traced = std::process::Command::new("strace");
    traced
        .args(["-f", "-qq"])
        .args(args)
        .arg("-o")
        .arg(log)
        .arg(run.get_program())
        .args(run.get_args());
    for (k, v) in run.get_envs() {
        match v {
            Some(v) => traced.env(k, v),
            None => traced.env_remove(k),
        };
    }
    traced
}

/// Runs `iolab run ARGS` under strace and checks the order of its system calls.
fn named_once_recorded(args: &str) {
    let sb = Sandbox::new();
    let log = sb.path("strace.log");
    let dir = sb.target.display().to_string();
    let line = format!("run {args} --target {dir} --quiet");
    let out = under_strace(
        &sb,
        &line,
        &["-s", "4096", "-e", "trace=openat,open,linkat,write"],
        &log,
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{args}: {out:?}");
    let text = fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let at = |what: &str, f: &dyn Fn(&str) -> bool| {
        lines
            .iter()
            .position(|l| f(l))
            .unwrap_or_else(|| panic!("{args}: no {what} in the trace:\n{text}"))
    };
    let link = at("link of the file", &|l| {
        l.contains("linkat(") && l.contains(&format!("\"{dir}/iolab-")) && l.ends_with("= 0")
    });
    let name = lines[link]
        .split('"')
        .find(|f| f.starts_with(&format!("{dir}/iolab-")))
        .unwrap()
        .to_string();
    // The record of that exact path with its identity comes first.
    let intent = at("record of the file", &|l| {
        l.contains("write(") && l.contains("intent") && l.contains(&name)
    });
    let done = intent
        + lines[intent..]
            .iter()
            .position(|l| l.contains("write(") && l.contains("done") && l.contains("ino"))
            .unwrap_or_else(|| panic!("{args}: no identity recorded:\n{text}"));
    assert!(
        done < link,
        "{args}: linked before its identity was recorded:\n{text}"
    );
    // Never created by name.
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("O_CREAT") && l.contains(&name)),
        "{args}: {name} was created by name:\n{text}"
    );
    assert!(
        sb.target_entries().is_empty(),
        "{args}: {:?}",
        sb.target_entries()
    );
}

/// What a run made, moved away during the run and replaced by someone else's directory:
/// the end of the run removes nothing in the replacement, says so on stderr and in a note,
/// and keeps nothing recorded for `iolab cleanup` (which would remove the replacement).
fn a_tree_replaced_during_the_run(
    sb: &Sandbox,
    args: &[&str],
    ours: impl Fn(u32) -> Option<PathBuf>,
    warning: &str,
) {
    let child = sb.spawn_run(args);
    let pid = child.id();
    // Held still (SIGSTOP) while it is replaced, so it cannot go in between; replaced only
    // once the run state names it exactly (device and inode), as the run knows it from then.
    let since = Instant::now();
    let ours = loop {
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "the run state never named what the run works in"
        );
        wait_for("what the run works in", || ours(pid).is_some());
        signal(&child, libc::SIGSTOP);
        match ours(pid) {
            Some(p) if recorded_exactly(sb, pid, &p) => break p,
            _ => {
                signal(&child, libc::SIGCONT);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let moved = sb.path("moved-away");
    fs::rename(&ours, &moved).unwrap();
    fs::create_dir(&ours).unwrap();
    fs::write(ours.join("keep"), "someone else's file\n").unwrap();
    signal(&child, libc::SIGCONT);
    signal(&child, libc::SIGINT);
    let out = finish(child, args[0]);
    assert!(matches!(out.code, Some(1 | 130)), "{out}");
    assert_eq!(
        fs::read_to_string(ours.join("keep")).unwrap(),
        "someone else's file\n",
        "the replacement was emptied: {out}"
    );
    out.stderr_has(&[&format!("{} is not {warning}", ours.display())]);
    let notes = sb.iolab(&["show", "last", "--json"]).ok().json()["notes"].to_string();
    assert!(
        notes.contains(&runstate_note(&ours)),
        "no note of {}: {notes}",
        ours.display()
    );
    assert!(run_state_files(sb, pid).is_empty(), "still recorded: {out}");
    let c = sb.iolab(&["cleanup"]).ok();
    assert!(ours.join("keep").exists(), "{c}");
    match moved.is_dir() {
        true => fs::remove_dir_all(&moved).unwrap(),
        false => fs::remove_file(&moved).unwrap(),
    }
    fs::remove_dir_all(&ours).unwrap();
}

/// Whether the run state of `pid` records `path`'s device and inode (a `done` line).
fn recorded_exactly(sb: &Sandbox, pid: u32, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = fs::symlink_metadata(path) else {
        return false;
    };
    run_state_files(sb, pid).iter().any(|f| {
        fs::read_to_string(f).unwrap_or_default().lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|v| {
                v["ino"].as_u64() == Some(m.ino()) && v["dev"].as_u64() == Some(m.dev())
            })
        })
    })
}

/// The note the run state's end gives a replaced path.
fn runstate_note(p: &Path) -> String {
    format!("{} is not the file this run created", p.display())
}

#[test]
fn a_metadata_tree_replaced_during_the_run_is_left_alone() {
    let _k = kills();
    let sb = Sandbox::new();
    a_tree_replaced_during_the_run(
        &sb,
        &["metadata", "--files", "2000000"],
        |pid| {
            sb.target_entries().into_iter().find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(&format!("iolab-md-{pid}-"))
            })
        },
        "the directory this run created (it was replaced during the run): left alone; \
        the run's own was moved to",
    );
}

#[test]
fn a_dbench_clients_directory_replaced_during_the_run_is_left_alone() {
    let _k = kills();
    let sb = Sandbox::new();
    let lf = sb.path("tiny.txt");
    fs::write(&lf, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
    let clients = sb.target.join("clients");
    a_tree_replaced_during_the_run(
        &sb,
        &[
            "dbench",
            "--loadfile",
            lf.to_str().unwrap(),
            "--duration",
            "60s",
            "--warmup",
            "0s",
        ],
        |_| clients.is_dir().then(|| clients.clone()),
        "the directory this run created (it was replaced during the run): left alone, nothing \
         in it removed; the run's own was moved to",
    );
}

#[test]
fn a_copy_destination_replaced_during_the_run_is_left_alone() {
    let _k = kills();
    let sb = Sandbox::new();
    a_tree_replaced_during_the_run(
        &sb,
        &["copy", "--size", "32MiB", "--runs", "1000"],
        |pid| {
            sb.target_entries().into_iter().find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(&format!("iolab-copy-{pid}-")) && !n.ends_with(".src")
            })
        },
        "what this run created (it was replaced during the run): left alone",
    );
}

#[test]
fn an_fsync_probe_file_replaced_during_the_run_is_left_alone() {
    let _k = kills();
    let sb = Sandbox::new();
    a_tree_replaced_during_the_run(
        &sb,
        &["fsync", "--duration", "60s"],
        |pid| {
            sb.target_entries().into_iter().find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(&format!("iolab-fsync-{pid}-"))
            })
        },
        "what this run created (it was replaced during the run): left alone; the run's own \
         was moved to",
    );
}

#[test]
fn a_verify_data_file_replaced_during_the_run_is_left_alone() {
    let _k = kills();
    let sb = Sandbox::new();
    a_tree_replaced_during_the_run(
        &sb,
        &["verify", "--size", "64MiB", "--runs", "1000"],
        |pid| {
            sb.target_entries().into_iter().find(|p| {
                let n = p.file_name().unwrap().to_string_lossy().into_owned();
                n.starts_with(&format!("iolab-verify-{pid}-")) && n.ends_with(".dat")
            })
        },
        "what this run created (it was replaced during the run): left alone; the run's own \
         was moved to",
    );
}

/// A signal that comes while the run is still installing its handlers stops it all the
/// same. A study killed as its run starts sends the run SIGTERM at once (its parent-death
/// signal); a signal that came after its handler was installed but before the handler's
/// action was registered (inside signal-hook), or before the thread that set the stop flag
/// listened, was dropped, and the run went on for its whole duration (beside four other
/// suites, the emulated-disk study test waited a minute for it). Under strace every
/// rt_sigaction is held 700 ms, and SIGTERM is sent as soon as the trace shows its handler
/// installed, before the SIGHUP handler is: the run must stop (exit 130), long before its
/// hour.
#[test]
fn a_signal_while_the_handlers_are_installed_stops_the_run() {
    if !iolab_testkit::require_tools(&["strace"]) {
        return;
    }
    let hup = |text: &str| text.contains("rt_sigaction(SIGHUP, {sa_handler=0x");
    for attempt in 1..=3 {
        let sb = Sandbox::new();
        let log = sb.path("strace.log");
        let dir = sb.target.display().to_string();
        let line = format!(
            "run fsync --sizes 4k --methods fdatasync --duration 1h --target {dir} --quiet"
        );
        let mut traced = under_strace(
            &sb,
            &line,
            &[
                "-e",
                "trace=rt_sigaction",
                "-e",
                "inject=rt_sigaction:delay_exit=700000",
            ],
            &log,
        );
        traced
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = traced.spawn().unwrap();
        let start = Instant::now();
        let pid: i32 = loop {
            let text = fs::read_to_string(&log).unwrap_or_default();
            if let Some(l) = text
                .lines()
                .find(|l| l.contains("rt_sigaction(SIGTERM, {sa_handler=0x"))
            {
                break l.split_whitespace().next().unwrap().parse().unwrap();
            }
            assert!(
                child.try_wait().unwrap().is_none(),
                "the run ended before its SIGTERM handler was installed:\n{text}"
            );
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "no SIGTERM handler installed:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        // SAFETY: kill(2) with a pid the trace named.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let in_time = !hup(&fs::read_to_string(&log).unwrap());
        // The run's hour is the failure: it is stopped after two minutes and the test fails.
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > Duration::from_secs(120) {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                let _ = child.wait();
                panic!(
                    "SIGTERM sent while the handlers were installed was lost: the run went \
                     on:\n{}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = fs::read_to_string(&log).unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(130), "{err}\n{text}");
        if in_time {
            return;
        }
        assert!(
            attempt < 3,
            "the signal never came before the SIGHUP handler was installed:\n{text}"
        );
        println!("attempt {attempt}: the signal came after the handlers were in place: again");
    }
}
