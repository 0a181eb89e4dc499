//! Reliability end to end: iolab never harms what it did not create (loop backing files,
//! swap files, files open for writing elsewhere, a full filesystem, a damaged result
//! database, foreign cleanup state) and never panics on hostile input or a closed pipe.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use iolab_testkit::*;

/// `args` with one short measured pass and no warm-up: it ends after 1 MiB (a minute is a
/// bound never reached), so it always measures something, even where a 100 ms pass beside
/// a disk hog completed no I/O (and the run rightly failed).
fn short(args: &[&'static str]) -> Vec<&'static str> {
    let mut v = args.to_vec();
    v.extend_from_slice(&[
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--runs",
        "1",
        "--warmup",
        "0",
    ]);
    v
}

/// A stored run in the sandbox's database (a short read of a 1 MiB file).
fn one_run(sb: &Sandbox) {
    sb.run(&short(&[
        "custom", "--rw", "read", "--bs", "4k", "--size", "1MiB",
    ]))
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
    // An error message into a closed stderr: still the command's own status, no panic.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = sb
        .cmd(&["show", "99"])
        .stderr(writer)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(out.code(), Some(2), "{out:?}");
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
    sb.iolab(&[
        "run",
        "scrub-test",
        "--testbed",
        "btrfs-raid1",
        "--corrupt",
        "4000000000",
    ])
    .code(2)
    .stderr_has(&["--corrupt 4000000000: more than"]);
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

/// A sandbox and a tmpfs mounted with `options` (root), or `None` after a skip.
fn small_tmpfs(options: &str) -> Option<(Sandbox, Mount)> {
    if !require_root("mounting a tmpfs") {
        return None;
    }
    Some((
        Sandbox::new(),
        Mount::new("tmpfs", &["-t", "tmpfs", "-o", options]),
    ))
}

#[test]
fn every_writing_workload_refuses_what_does_not_fit_on_a_small_tmpfs() {
    let Some((sb, m)) = small_tmpfs("size=32m,nr_inodes=1000") else {
        return;
    };
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
        &short(&["custom", "--rw", "write", "--buffered", "--size", "8MiB"]),
    )
    .ok();
    assert!(entries(&dir).is_empty());
}

#[test]
fn an_existing_file_counts_what_its_blocks_already_hold() {
    let Some((sb, m)) = small_tmpfs("size=32m") else {
        return;
    };
    let data = m.path().join("data");
    let d = data.to_str().unwrap();
    // 20 MiB of 32 kept: 12 MiB stay free.
    run_on(&sb, &data, &["verify", "--size", "20MiB", "--keep"]).ok();
    // Writing over those 20 MiB needs no new room...
    for args in [
        &["verify", "--size", "20MiB", "--allow-overwrite-file"][..],
        &short(&[
            "custom",
            "--rw",
            "write",
            "--buffered",
            "--allow-overwrite-file",
        ]),
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

// --- Item 1: files the kernel or another program holds are never written -----------------

/// `iolab run custom --rw write` over `file` with --allow-overwrite-file: must be refused
/// naming `holder`, leaving the file as it was.
#[track_caller]
fn write_is_refused(sb: &Sandbox, file: &std::path::Path, holder: &str) {
    let before = std::fs::read(file).unwrap();
    for args in [
        &OVERWRITE[..],
        &["verify", "--size", "1MiB", "--allow-overwrite-file"],
    ] {
        let out = run_on(sb, file, args).code(2);
        out.stderr_has(&["is in use", holder, "even with --allow-overwrite-file"]);
    }
    // Without the flag the holder is named too, not the missing flag.
    run_on(sb, file, &["custom", "--rw", "write", "--size", "1MiB"])
        .code(2)
        .stderr_has(&[holder]);
    assert!(
        std::fs::read(file).unwrap() == before,
        "the file was written"
    );
}

#[test]
fn a_loop_backing_file_is_never_written_mounted_or_not() {
    let Some(_lock) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let img = sb.path("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    sh("mkfs.ext4", &["-q", img.to_str().unwrap()]);
    let lo = Loop::attach(&img, &[]);
    write_is_refused(&sb, &img, &format!("it backs loop device {}", lo.s()));
    // Under another name (sysfs still shows the old one): found by device and inode.
    let moved = sb.path("renamed.img");
    std::fs::rename(&img, &moved).unwrap();
    write_is_refused(&sb, &moved, &format!("it backs loop device {}", lo.s()));
    let m = Mount::new(&lo.dev, &[]);
    run_on(&sb, &moved, &OVERWRITE)
        .code(2)
        .stderr_has(&[&format!("it backs loop device {}", lo.s())]);
    drop(m);
    drop(lo);
    // Detached, the flag is enough.
    overwrite(&sb, &moved).ok();
}

#[test]
fn a_file_another_process_writes_is_never_written_but_one_it_reads_is() {
    let sb = Sandbox::new();
    let file = sb.path("shared.dat");
    std::fs::write(&file, vec![5u8; 2 << 20]).unwrap();
    let writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    let mut child = sleeper().stdout(Stdio::from(writer)).spawn().unwrap();
    let holder = format!("process {} (sleep) has it open for writing", child.id());
    write_is_refused(&sb, &file, &holder);
    child.kill().unwrap();
    child.wait().unwrap();
    // A reader does not hold it.
    let reader = std::fs::File::open(&file).unwrap();
    let mut child = sleeper().stdin(Stdio::from(reader)).spawn().unwrap();
    overwrite(&sb, &file).ok();
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `sleep 60`, to hold a file open.
fn sleeper() -> std::process::Command {
    let mut c = std::process::Command::new("sleep");
    c.arg("60");
    c
}

/// A write over an existing file, with permission.
const OVERWRITE: [&str; 6] = [
    "custom",
    "--rw",
    "write",
    "--size",
    "1MiB",
    "--allow-overwrite-file",
];

/// A short write over `file` with --allow-overwrite-file.
fn overwrite(sb: &Sandbox, file: &std::path::Path) -> Out {
    run_on(sb, file, &short(&OVERWRITE))
}

/// An active swap file, switched off on drop.
struct SwapFile(std::path::PathBuf);

impl Drop for SwapFile {
    fn drop(&mut self) {
        let _ = std::process::Command::new("swapoff").arg(&self.0).status();
    }
}

#[test]
fn an_active_swap_file_is_never_written() {
    if !require_root("swapon") || !require_tools(&["mkswap", "swapon", "swapoff"]) {
        return;
    }
    let sb = Sandbox::new();
    let file = sb.path("swap.img");
    std::fs::write(&file, vec![0u8; 16 << 20]).unwrap();
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    sh("mkswap", &[file.to_str().unwrap()]);
    sh("swapon", &[file.to_str().unwrap()]);
    let swap = SwapFile(file.clone());
    write_is_refused(&sb, &file, "it is an active swap area");
    drop(swap);
}

// --- Item 3: the result database --------------------------------------------------------

/// Overwrites `len` bytes of `path` at `at` with fixed pseudo-random bytes.
fn scribble(path: &std::path::Path, at: u64, len: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&random_bytes(len, 2000)).unwrap();
}

/// A sandbox whose database holds `n` short runs. The last iolab to close a database
/// folds its write-ahead log into the file, so byte offsets in the file mean what they say.
fn sandbox_with_runs(n: usize) -> Sandbox {
    let sb = Sandbox::new();
    for _ in 0..n {
        one_run(&sb);
    }
    assert!(!std::path::Path::new(&format!("{}-wal", sb.db.display())).exists());
    sb
}

#[test]
fn a_damaged_database_is_never_written() {
    let sb = sandbox_with_runs(3);
    // 2000 random bytes over the start of page 2, the root of the runs table.
    scribble(&sb.db, 4096, 2000);
    let before = std::fs::read(&sb.db).unwrap();
    let listing = sb.iolab(&["results"]);
    assert_ne!(listing.code, Some(0), "{listing}");
    assert!(listing.stderr.contains("malformed"), "{listing}");
    let out = sb
        .run(&short(&["custom", "--rw", "read", "--size", "1MiB"]))
        .code(2);
    out.stderr_has(&["is damaged", "left it untouched", "--db"]);
    assert!(sb.target_entries().is_empty(), "{out}");
    assert!(
        std::fs::read(&sb.db).unwrap() == before,
        "the database was written"
    );
}

#[test]
fn a_negative_schema_version_is_an_error_not_a_panic() {
    let sb = sandbox_with_runs(1);
    // user_version is the 4 bytes at offset 60 of the header.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&sb.db)
            .unwrap();
        f.seek(SeekFrom::Start(60)).unwrap();
        f.write_all(&(-5i32).to_be_bytes()).unwrap();
    }
    for args in [&["results"][..], &["show", "1"], &["history"]] {
        let out = sb.iolab(args).code(2);
        out.stderr_has(&["schema version -5"]);
        assert!(!out.stderr.contains("panicked"), "{out}");
    }
    sb.run(&["custom", "--rw", "read", "--size", "1MiB"])
        .code(2)
        .stderr_has(&["schema version -5"]);
}

#[test]
fn one_corrupt_row_is_skipped_by_history_naming_the_run() {
    let sb = sandbox_with_runs(3);
    // Run 2's test summary: JSON that no longer decodes.
    rusqlite::Connection::open(&sb.db)
        .unwrap()
        .execute(
            "UPDATE tests SET summary_json = '{broken' WHERE run_id = 2",
            [],
        )
        .unwrap();
    let out = sb.iolab(&["history"]).ok();
    out.stderr_has(&["run 2 skipped", "summary_json of test"]);
    assert!(out.stdout.contains("2 runs"), "{out}");
}

#[test]
fn a_database_on_a_read_only_mount_can_be_read() {
    if !require_root("mounting read-only") {
        return;
    }
    let sb = sandbox_with_runs(2);
    let dir = sb.path("ro");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(&sb.db, dir.join("r.db")).unwrap();
    let m = Mount::new(&dir, &["--bind"]);
    m.remount("bind,ro");
    let db = m.path().join("r.db");
    let db = db.to_str().unwrap();
    let read = |args: &[&str]| {
        let mut v = args.to_vec();
        v.extend_from_slice(&["--db", db]);
        let mut c = std::process::Command::new(iolab_testkit::iolab::iolab_bin());
        c.args(&v).env("HOME", sb.dir.path());
        Out::new(&v, c.output().unwrap(), std::time::Duration::ZERO)
    };
    assert!(read(&["results"]).ok().stdout.contains("2 runs"));
    read(&["show", "2"]).ok();
    read(&["show", "last", "--json"]).ok();
    read(&["history"]).ok();
    read(&["compare", "1", "2"]).ok();
    read(&["report", "1"]).ok();
    // A writer is refused, as docs/cli.md's exit statuses say (2: a database refused).
    let out = read(&["run", "custom", "--rw", "read", "--size", "1MiB", "-q"]);
    assert_eq!(out.code, Some(2), "{out}");
    out.stderr_has(&["read-only filesystem"]);
    assert!(!out.stderr.contains("panicked"), "{out}");
}

// --- Item 4: iolab cleanup believes only its own state, and only what still matches -------

/// A state file of a dead owner (pid 999999999) in `dir` with these resource lines
/// (`"intent"`/`"done"` JSON objects after the header).
fn state_file(dir: &std::path::Path, n: u32, lines: &[String]) -> std::path::PathBuf {
    let mut text =
        String::from("{\"event\":\"header\",\"version\":1,\"pid\":999999999,\"created_unix\":0}\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    let path = dir.join(format!("testbed-999999999-{n}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path
}

fn json_path(p: &std::path::Path) -> String {
    serde_json::to_string(p.to_str().unwrap()).unwrap()
}

#[test]
fn cleanup_acts_only_on_trusted_state_and_matching_resources() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let state_dir = sb.path("state");
    std::fs::create_dir(&state_dir).unwrap();
    std::fs::set_permissions(
        &state_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let sd = state_dir.to_str().unwrap();
    let cleanup = || sb.iolab(&["cleanup", "--state-dir", sd]);

    // A state file owned by another user naming a directory of iolab's: not believed.
    let victim = sb.path("iolab-testbed-victim");
    std::fs::create_dir(&victim).unwrap();
    let foreign = state_file(
        &state_dir,
        0,
        &[format!(
            "{{\"event\":\"intent\",\"id\":1,\"resource\":{{\"type\":\"dir\",\"path\":{}}}}}",
            json_path(&victim)
        )],
    );
    sh("chown", &["65534", foreign.to_str().unwrap()]);
    let out = cleanup().code(1);
    out.stderr_has(&["not trusted"]);
    assert!(out.stdout.contains("NOT TRUSTED"), "{out}");
    assert!(victim.exists() && foreign.exists());
    std::fs::remove_file(&foreign).unwrap();

    // Trusted, but what the records name is not what iolab made.
    let base = sb.path("iolab-testbed-fake");
    let (m1, m2) = (base.join("mnt1"), base.join("mnt2"));
    let other_mount = Mount::at("tmpfs", &m1, &["-t", "tmpfs"]);
    let ours = Mount::at("tmpfs", &m2, &["-t", "tmpfs"]);
    let img = sb.path("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let lo = Loop::attach(&img, &[]);
    let outside = sb.path("not-iolabs");
    std::fs::write(&outside, "keep").unwrap();
    state_file(
        &state_dir,
        1,
        &[
            // A mount iolab recorded with a loop device source; a tmpfs is there now.
            format!(
                "{{\"event\":\"intent\",\"id\":1,\"resource\":{{\"type\":\"mount\",\"target\":{},\"source\":\"/dev/loop999\"}}}}",
                json_path(&m1)
            ),
            // A loop device over an image outside iolab's directories.
            format!(
                "{{\"event\":\"intent\",\"id\":2,\"resource\":{{\"type\":\"loop_device\",\"image\":{}}}}}",
                json_path(&img)
            ),
            // A file outside iolab's directories with no inode recorded.
            format!(
                "{{\"event\":\"intent\",\"id\":3,\"resource\":{{\"type\":\"file\",\"path\":{}}}}}",
                json_path(&outside)
            ),
            // A mount that is what iolab saw when it made it: removed.
            format!(
                "{{\"event\":\"done\",\"id\":4,\"resource\":{{\"type\":\"mount\",\"target\":{},\"source\":\"tmpfs\"}},\"observed\":{{\"kind\":\"mount\",\"source\":\"tmpfs\",\"fstype\":\"tmpfs\"}}}}",
                json_path(&m2)
            ),
        ],
    );
    let out = cleanup().ok();
    assert!(
        out.stdout.contains("left alone: mount of /dev/loop999"),
        "{out}"
    );
    assert!(out.stdout.contains("left alone: loop device for"), "{out}");
    assert!(out.stdout.contains("left alone: file"), "{out}");
    assert!(Mount::is_mounted(&m1), "{out}");
    assert!(!Mount::is_mounted(&m2), "{out}");
    assert!(outside.exists());
    assert!(
        std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", lo.name()))
            .is_ok_and(|b| b.trim() == img.to_str().unwrap()),
        "{out}"
    );
    drop((other_mount, ours, lo));
}

#[test]
fn verify_on_a_huge_device_is_refused_before_allocating_its_block_map() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    // A sparse 2 TiB device: 2^32 blocks of 512 bytes would need 32 GiB of block map.
    let lo = Loop::new(2 << 40);
    let out = run_on(
        &sb,
        &lo.dev,
        &[
            "custom",
            "--rw",
            "write",
            "--bs",
            "512",
            "--verify",
            "--allow-destroy-device",
        ],
    )
    .code(2);
    out.stderr_has(&["--verify keeps 8 bytes", "needs 32 GiB of memory"]);
}
