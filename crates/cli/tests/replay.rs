//! `iolab record` and `iolab run replay` with the real binary: real applications (sqlite3,
//! tar, git) recorded under strace and replayed on tmpfs and on ext4; fio's iolog; bad
//! traces refused with FILE:LINE; a trace that tries to leave the target; an interrupted
//! replay cleaning up; a replay as a study workload.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use iolab_testkit::{require_devices, require_tools, sh, Loop, Mount, Sandbox};
use serde_json::Value;

/// Records `cmd` (run in `cwd`) with `root` as the only root into `out`.
fn record(sb: &Sandbox, cwd: &Path, root: &Path, out: &Path, cmd: &[&str]) {
    let mut args = vec![
        "record",
        "-o",
        out.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--",
    ];
    args.extend_from_slice(cmd);
    let o = sb.cmd(&args).current_dir(cwd).output().unwrap();
    assert!(
        o.status.success(),
        "record {cmd:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `run replay --trace T --target DIR --json -` and the test's `extra`.
fn replay(sb: &Sandbox, trace: &Path, target: &Path, more: &[&str]) -> Value {
    let mut args = vec![
        "run",
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--target",
        target.to_str().unwrap(),
        "--quiet",
        "--json",
        "-",
    ];
    args.extend_from_slice(more);
    let out = sb.iolab(&args).ok();
    out.json()["tests"][0]["extra"].clone()
}

/// The replay did what the recording did: every call, the same bytes, the same outcomes.
fn assert_same(x: &Value, what: &str) {
    for (a, b) in [
        ("calls", "recorded_calls"),
        ("bytes_read", "recorded_bytes_read"),
        ("bytes_written", "recorded_bytes_written"),
    ] {
        assert_eq!(x[a], x[b], "{what}: {a} vs {b}: {x:#}");
    }
    assert!(x["calls"].as_u64().unwrap() > 0, "{what}: {x:#}");
    assert_eq!(x["mismatches"], 0, "{what}: {x:#}");
    for op in x["ops"].as_array().unwrap() {
        assert_eq!(op["count"], op["recorded"], "{what}: {op}");
    }
}

/// Only what was there before (ext4's lost+found) is left in `dir`.
fn assert_clean(dir: &Path) {
    let left: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "lost+found")
        .collect();
    assert!(left.is_empty(), "left in {}: {left:?}", dir.display());
}

/// Sum of the sizes of the regular files beneath `dir`.
fn file_bytes(dir: &Path) -> u64 {
    let mut n = 0;
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.path().symlink_metadata().unwrap();
        if m.is_dir() {
            n += file_bytes(&e.path());
        } else if m.is_file() {
            n += m.len();
        }
    }
    n
}

#[test]
fn real_applications_replay_on_tmpfs_and_ext4() {
    if !require_tools(&["strace", "sqlite3", "tar", "git"]) {
        return;
    }
    let Some(_lock) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let work = sb.path("work");
    fs::create_dir(&work).unwrap();

    // SQLite: transactions in rollback-journal mode (fdatasync per commit).
    let db = work.join("db");
    fs::create_dir(&db).unwrap();
    fs::write(
        work.join("w.sql"),
        "create table t(id integer primary key, v text);\n\
         begin;\n\
         insert into t(v) select hex(randomblob(100)) from (with recursive c(x) as \
         (select 1 union all select x+1 from c where x<300) select x from c);\n\
         commit;\n\
         begin; update t set v = hex(randomblob(50)) where id % 3 = 0; commit;\n\
         begin; delete from t where id % 5 = 0; commit;\n",
    )
    .unwrap();
    let sqlite_trace = sb.path("sqlite.trace.gz");
    record(
        &sb,
        &work,
        &db,
        &sqlite_trace,
        &["sh", "-c", "sqlite3 db/t.db < w.sql"],
    );

    // tar extracting a source tree: the bytes it writes are the files' sizes.
    let tree = work.join("tree");
    fs::create_dir(&tree).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec");
    let tarball = work.join("src.tar");
    sh(
        "tar",
        &[
            "-cf",
            tarball.to_str().unwrap(),
            "-C",
            src.to_str().unwrap(),
            "src",
        ],
    );
    let tar_trace = sb.path("tar.trace");
    record(
        &sb,
        &work,
        &tree,
        &tar_trace,
        &["tar", "-xf", "src.tar", "-C", "tree"],
    );
    let extracted = file_bytes(&tree);

    // git: init, add and commit the extracted tree (several processes, links, renames).
    let git_trace = sb.path("git.trace");
    record(
        &sb,
        &tree,
        &tree,
        &git_trace,
        &[
            "sh",
            "-c",
            "git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm t",
        ],
    );

    let tmpfs = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=64m"]);
    let lo = Loop::new(96 << 20);
    sh("mkfs.ext4", &["-q", "-F", lo.s()]);
    let ext4 = Mount::new(&lo.dev, &[]);
    for (config, dir) in [("tmpfs", tmpfs.path()), ("ext4", ext4.path())] {
        for (app, trace) in [
            ("sqlite3", &sqlite_trace),
            ("tar", &tar_trace),
            ("git", &git_trace),
        ] {
            let x = replay(&sb, trace, &dir, &["--verify"]);
            assert_same(&x, &format!("{app} on {config}"));
            if app == "tar" {
                assert_eq!(x["recorded_bytes_written"], extracted, "{x:#}");
            }
            if app == "git" {
                assert!(x["threads"].as_u64().unwrap() > 1, "{x:#}");
            }
            assert_clean(&dir);
        }
    }
    // Stored like every run.
    assert_eq!(sb.result_rows().len(), 6);
}

#[test]
fn fio_iolog_replays() {
    if !require_tools(&["fio"]) {
        return;
    }
    let sb = Sandbox::new();
    let log = sb.path("fio.iolog");
    let data = sb.path("fio.data");
    sh(
        "fio",
        &[
            "--name=j",
            &format!("--filename={}", data.display()),
            "--size=256k",
            "--bs=4k",
            "--rw=randrw",
            "--ioengine=psync",
            &format!("--write_iolog={}", log.display()),
        ],
    );
    let x = replay(&sb, &log, &sb.target, &[]);
    assert_same(&x, "fio iolog");
    assert!(x["format"].as_str().unwrap().starts_with("fio iolog"));
    // 256 KiB of 4 KiB transfers, as fio did them.
    let moved = x["bytes_read"].as_u64().unwrap() + x["bytes_written"].as_u64().unwrap();
    assert_eq!(moved, 256 << 10, "{x:#}");
    assert_clean(&sb.target);
}

fn write(sb: &Sandbox, name: &str, text: &str) -> PathBuf {
    let p = sb.path(name);
    fs::write(&p, text).unwrap();
    p
}

const GOOD: &str = "iolab-trace 1\nroot 0 /r\nfile 0:f 4096\n\
    1 0.000000 0.000010 open h1 0:f rw 0 = 0\n\
    1 0.000020 0.000010 pread h1 4096 0 = 4096\n\
    1 0.000040 0.000010 close h1 = 0\n";

#[test]
fn bad_traces_are_refused_with_file_and_line() {
    let sb = Sandbox::new();
    // (file, text replaced, by, the line refused, what the reason says)
    let cases = [
        ("escape", "0:f rw", "0:../f rw", 4, "`..`"),
        ("abs", "0:f rw", "0:/etc/passwd rw", 4, "absolute"),
        ("root", "open h1 0:f", "open h1 3:f", 4, "root 3"),
        ("handle", "pread h1", "pread h9", 5, "h9"),
        ("size", "= 4096", "= 9999", 5, "more than"),
        ("op", "close h1", "mmap h1", 6, "unknown operation"),
        ("cut", "close h1 = 0\n", "close h1", 6, "expected `TID"),
        ("magic", "iolab-trace 1", "iolab-trace 7", 1, "version"),
    ];
    for (name, from, to, line, why) in cases {
        let p = write(&sb, &format!("{name}.trace"), &GOOD.replace(from, to));
        let out = sb.run(&["replay", "--trace", p.to_str().unwrap()]).code(2);
        out.stderr_has(&[&format!("{}:{line}: ", p.display()), why]);
    }
    // A truncated gzip.
    let p = write(&sb, "cut.trace", &GOOD.repeat(50));
    sh("gzip", &["-f", p.to_str().unwrap()]);
    let gz = sb.path("cut.trace.gz");
    let bytes = fs::read(&gz).unwrap();
    fs::write(&gz, &bytes[..bytes.len() / 2]).unwrap();
    sb.run(&["replay", "--trace", gz.to_str().unwrap()])
        .code(2)
        .stderr_has(&["cut.trace.gz"]);
    // Binary garbage, an empty file, a bad speed.
    let p = sb.path("garbage.trace");
    fs::write(&p, [0xffu8, 0, 1, 2, 0x80, b'\n', 7]).unwrap();
    sb.run(&["replay", "--trace", p.to_str().unwrap()])
        .code(2)
        .stderr_has(&["garbage.trace:1: "]);
    let p = write(&sb, "empty.trace", "");
    sb.run(&["replay", "--trace", p.to_str().unwrap()])
        .code(2)
        .stderr_has(&["empty.trace:1: "]);
    let p = write(&sb, "ok.trace", GOOD);
    sb.run(&["replay", "--trace", p.to_str().unwrap(), "--speed", "fast"])
        .code(2)
        .stderr_has(&["--speed"]);
    sb.run(&["replay"]).code(2).stderr_has(&["--trace"]);
    // record: no command, a root that is not there.
    sb.iolab(&[
        "record",
        "-o",
        sb.path("x").to_str().unwrap(),
        "--root",
        "/nonexistent/x",
        "--",
        "true",
    ])
    .code(2)
    .stderr_has(&["--root /nonexistent/x"]);
    sb.iolab(&[
        "record",
        "-o",
        sb.path("y").to_str().unwrap(),
        "--",
        "no-such-command-zz",
    ])
    .code(2)
    .stderr_has(&["no-such-command-zz not found"]);
    assert!(!sb.path("x").exists() && !sb.path("y").exists());
    assert!(sb.target_entries().is_empty());
}

#[test]
fn replay_never_leaves_the_target() {
    let sb = Sandbox::new();
    let outside = sb.path("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("victim"), "keep").unwrap();
    fs::write(sb.target.join("mine"), "mine").unwrap();
    // The trace plants a link to the outside directory, then writes and unlinks through it.
    let text = format!(
        "iolab-trace 1\nroot 0 /r\n\
         1 0.000000 0.000010 symlink {} 0:esc = 0\n\
         1 0.000020 0.000010 open h1 0:esc/victim w+trunc 0 = 0\n\
         1 0.000030 0.000010 write h1 4 = 4\n\
         1 0.000040 0.000010 unlink 0:esc/victim = 0\n\
         1 0.000050 0.000010 open - 0:esc/new w+creat 644 = ENOENT\n",
        outside.display()
    );
    let p = write(&sb, "escape.trace", &text);
    let out = sb
        .run(&[
            "replay",
            "--trace",
            p.to_str().unwrap(),
            "--verify",
            "--json",
            "-",
        ])
        .code(3);
    let x = &out.json()["tests"][0]["extra"];
    // Every call through the link failed (the open, the write on its handle, the unlink,
    // the open that expected ENOENT): each is a mismatch.
    assert_eq!(x["mismatches"], 4, "{x:#}");
    assert_eq!(fs::read_to_string(outside.join("victim")).unwrap(), "keep");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 1);
    assert_eq!(fs::read_to_string(sb.target.join("mine")).unwrap(), "mine");
    assert_eq!(sb.target_entries(), vec![sb.target.join("mine")]);
}

#[test]
fn interrupted_replay_cleans_up() {
    let sb = Sandbox::new();
    // A recorded gap of an hour: the replay waits in it, honouring the recorded time.
    let text = "iolab-trace 1\nroot 0 /r\n\
        1 0.000000 0.000010 open h1 0:f w+creat 644 = 0\n\
        1 0.000020 0.000010 write h1 4096 = 4096\n\
        1 3600.000000 0.000010 close h1 = 0\n";
    let p = write(&sb, "slow.trace", text);
    let mut child = sb.spawn_run(&[
        "replay",
        "--trace",
        p.to_str().unwrap(),
        "--speed",
        "recorded",
    ]);
    // Wait for the replay's directory and its file (no time limit: the condition is the
    // signal that the replay is in its gap).
    let file_made = || sb.target_entries().iter().any(|d| d.join("0/f").exists());
    while !file_made() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the replay ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
}

#[test]
fn replay_is_a_study_workload() {
    let sb = Sandbox::new();
    let trace =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/tests/corpus/trace/sqlite-wal.trace");
    let study = |extra: &str| {
        format!(
            "name = \"r\"\n[testbed]\nkind = \"dir\"\npath = \"{}\"\n\n[[workload]]\n\
             kind = \"replay\"\ntrace = \"{}\"\n{extra}",
            sb.target.display(),
            trace.display()
        )
    };
    let p = write(&sb, "ok.toml", &study("speed = \"x2\"\n"));
    sb.iolab(&["study", "--dry-run", p.to_str().unwrap()]).ok();
    let p = write(&sb, "bad.toml", &study("speed = \"warp\"\n"));
    sb.iolab(&["study", "--dry-run", p.to_str().unwrap()])
        .code(2)
        .stderr_has(&["bad.toml:9: workload[1].speed"]);
    // And the shipped example replays with every outcome as recorded.
    let x = replay(&sb, &trace, &sb.target, &["--verify"]);
    assert_same(&x, "the shipped sqlite trace");
    assert_clean(&sb.target);
}

#[test]
fn a_full_filesystem_fails_the_replay_and_it_cleans_up() {
    if !iolab_testkit::require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    // One byte on each of 400 pages: 400 bytes by the trace's count (the free-space check
    // passes), 1.6 MB of pages on tmpfs, which has 1 MiB.
    let mut text =
        String::from("iolab-trace 1\nroot 0 /r\n1 0.000000 0.000001 open h1 0:f w+creat 644 = 0\n");
    for i in 0..400u64 {
        text.push_str(&format!(
            "1 0.{:06} 0.000001 pwrite h1 1 {} = 1\n",
            i + 1,
            i * 4096
        ));
    }
    let p = write(&sb, "full.trace", &text);
    let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=1m"]);
    let out = sb
        .iolab(&[
            "run",
            "replay",
            "--trace",
            p.to_str().unwrap(),
            "--target",
            m.path().to_str().unwrap(),
            "--quiet",
        ])
        .code(1);
    out.stderr_has(&["ENOSPC", "reports no throughput"]);
    assert_clean(&m.path());
    // Stored as a failed run.
    let rows = sb.result_rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].2, "incomplete", "{rows:?}");
    let shown = sb.iolab(&["show", "last"]).ok();
    assert!(shown.stdout.contains("ENOSPC"), "{}", shown.stdout);
}

#[test]
fn a_recording_holds_no_contents_and_nothing_outside_its_roots() {
    if !require_tools(&["strace"]) {
        return;
    }
    let sb = Sandbox::new();
    let root = sb.path("root");
    let outside = sb.path("elsewhere");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(root.join("old"), "0123456789").unwrap();
    let trace = sb.path("t.trace");
    record(
        &sb,
        &root,
        &root,
        &trace,
        &[
            "sh",
            "-c",
            "echo $((123456789 * 3)) > new; head -c 10 old > ../elsewhere/copy; mkdir d; mv new d/new",
        ],
    );
    let text = fs::read_to_string(&trace).unwrap();
    // What the shell wrote (370370367) is nowhere; only the command line (informational)
    // names the outside directory.
    assert!(!text.contains("370370367"), "{text}");
    let calls: String = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(
        !calls.contains("elsewhere") && !calls.contains("/etc"),
        "{text}"
    );
    // The roots' file that existed, with its size; the calls on it and on the new file.
    assert!(text.contains("\nfile 0:old 10\n"), "{text}");
    assert!(
        text.contains(" open h") && text.contains(" 0:new w+creat+trunc 666 = 0\n"),
        "{text}"
    );
    assert!(text.contains(" write h1 10 = 10\n"), "{text}");
    assert!(
        text.contains(" read h") && text.contains(" = 10\n"),
        "{text}"
    );
    assert!(text.contains(" mkdir 0:d 777 = 0\n"), "{text}");
    // mv renames with RENAME_NOREPLACE.
    assert!(text.contains(" rename 0:new 0:d/new"), "{text}");
    assert!(!text.contains("unsupported"), "{text}");
    assert!(text.contains("\nskipped outside "), "{text}");
    // And it replays as recorded.
    let x = replay(&sb, &trace, &sb.target, &["--verify"]);
    assert_same(&x, "sh");
    assert_clean(&sb.target);
}

#[test]
fn a_trace_beyond_the_replays_bounds_is_refused() {
    let sb = Sandbox::new();
    // 5000 threads, one stat each.
    let mut text = String::from("iolab-trace 1\nroot 0 /r\n");
    for t in 0..5000 {
        text.push_str(&format!("{} 0.{t:06} 0.000001 stat 0:. = 0\n", t + 1));
    }
    let p = write(&sb, "threads.trace", &text);
    sb.run(&["replay", "--trace", p.to_str().unwrap()])
        .code(2)
        .stderr_has(&["5000 threads"]);
    // 16 threads each reading 256 MiB at once: 4 GiB of buffers.
    let mut text = String::from("iolab-trace 1\nroot 0 /r\nfile 0:f 0\n");
    for t in 0..16 {
        text.push_str(&format!(
            "{} 0.{:06} 0.000001 open h{} 0:f r 0 = 0\n{} 0.{:06} 0.000001 read h{} 268435456 = 0\n",
            t + 1,
            2 * t,
            t + 1,
            t + 1,
            2 * t + 1,
            t + 1
        ));
    }
    let p = write(&sb, "buffers.trace", &text);
    sb.run(&["replay", "--trace", p.to_str().unwrap()])
        .code(2)
        .stderr_has(&["at most 2147483648"]);
    assert!(sb.target_entries().is_empty());
}
