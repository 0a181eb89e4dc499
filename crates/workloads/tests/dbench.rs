//! dbench loadfile replay: exact operation counts on a hand-made loadfile, status mismatch
//! accounting, loadfile errors, gzip, Debian's client.txt, stopping early and cleanup, and
//! `--verify`: clean replays check out, and files changed behind the model's back are caught
//! with their class and offset.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use iolab_integrity::Tally;
use iolab_testkit::skip;
use iolab_workloads::dbench::{
    parse_loadfile, run, run_with_seam, DbenchConfig, DbenchError, DbenchResult, Loadfile, OpKind,
    Phase, Seam, Tamper,
};

/// Every operation, old (dbench 3/4 client.txt) and new names, a timestamp, expected
/// failures, a case-insensitive lookup, a Sleep (untimed). Ends with Deltree so passes repeat.
const TINY: &str = r#"# hand-made: every operation at least once
Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
Close 1 NT_STATUS_OK
Qpathinfo "\clients\client1\missing.txt" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
NTCreateX "\clients\client1\missing.txt" 0x40 0x1 2 NT_STATUS_OBJECT_NAME_NOT_FOUND
NTCreateX "\clients\client1\a.dat" 0x40 0x2 3 NT_STATUS_OK
WriteX 3 0 65536 65536 NT_STATUS_OK
WriteX 3 65536 4096 4096 NT_STATUS_OK
ReadX 3 0 4096 4096 NT_STATUS_OK
ReadX 3 4096 65536 65536 NT_STATUS_OK
LockX 3 100 10 NT_STATUS_OK
UnlockX 3 100 10 NT_STATUS_OK
QUERY_FILE_INFORMATION 3 1004 NT_STATUS_OK
SET_FILE_INFORMATION 3 1004 NT_STATUS_OK
Flush 3 NT_STATUS_OK
Close 3 NT_STATUS_OK
QUERY_FS_INFORMATION 1 NT_STATUS_OK
0.000 QUERY_PATH_INFORMATION "\clients\client1\A.DAT" 1004 NT_STATUS_OK
Find "\clients\client1\*.dat" 260 1366 1 NT_STATUS_OK
FIND_FIRST "\clients\client1\<.JNK" 260 1366 0 NT_STATUS_NO_SUCH_FILE
Sleep 100 NT_STATUS_OK
Mkdir "\clients\client1\sub" NT_STATUS_OK
Rename "\clients\client1\a.dat" "\clients\client1\sub\b.dat" NT_STATUS_OK
Unlink "\clients\client1\a.dat" 0x6 NT_STATUS_OBJECT_NAME_NOT_FOUND
Unlink "\clients\client1\sub\b.dat" 0x6 NT_STATUS_OK
Rmdir "\clients\client1\sub" NT_STATUS_OK
Deltree "\clients\client1" NT_STATUS_OK
"#;

/// Operations of one pass over TINY.
const TINY_COUNTS: &[(OpKind, u64)] = &[
    (OpKind::NTCreateX, 3),
    (OpKind::Close, 2),
    (OpKind::Rename, 1),
    (OpKind::Unlink, 2),
    (OpKind::Deltree, 2),
    (OpKind::Rmdir, 1),
    (OpKind::Mkdir, 2),
    (OpKind::Qpathinfo, 2),
    (OpKind::Qfileinfo, 1),
    (OpKind::Qfsinfo, 1),
    (OpKind::Sfileinfo, 1),
    (OpKind::Find, 2),
    (OpKind::WriteX, 2),
    (OpKind::ReadX, 2),
    (OpKind::LockX, 1),
    (OpKind::UnlockX, 1),
    (OpKind::Flush, 1),
];

const CLIENT_TXT: &str = "/usr/share/dbench/client.txt";

fn config(dir: &Path, clients: u32, time: Duration) -> DbenchConfig {
    let mut c = DbenchConfig::new(dir, "loadfile", clients, time);
    c.warmup = Duration::ZERO;
    c
}

fn replay(cfg: &DbenchConfig, lf: &Loadfile) -> DbenchResult {
    let stop = AtomicBool::new(false);
    run(cfg, lf, &stop, &mut |_| {}).expect("replay runs")
}

fn count(r: &DbenchResult, k: OpKind) -> u64 {
    r.ops.iter().find(|o| o.op == k).map_or(0, |o| o.count)
}

fn assert_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn tiny_loadfile_exact_counts() {
    let lf = Loadfile::parse_str("tiny.txt", TINY).unwrap();
    let mut per_pass = lf.op_counts();
    per_pass.retain(|(k, _)| *k != OpKind::Sleep);
    assert_eq!(per_pass, TINY_COUNTS);
    assert!(lf.has_timestamps());

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), 1, Duration::from_secs(60));
    cfg.max_loops = Some(3);
    let r = replay(&cfg, &lf);

    assert!(!r.interrupted);
    assert_eq!(r.loops_completed, 3);
    assert_eq!(r.status_mismatches, 0, "{:?}", r.mismatches);
    let kinds: Vec<OpKind> = r.ops.iter().map(|o| o.op).collect();
    let expected: Vec<OpKind> = TINY_COUNTS.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, expected, "table order and content");
    for &(k, n) in TINY_COUNTS {
        assert_eq!(count(&r, k), 3 * n, "{k}");
    }
    let (rd, wr) = lf.bytes_per_pass();
    assert_eq!((rd, wr), (69632, 69632));
    assert_eq!(r.bytes_read, 3 * rd);
    assert_eq!(r.bytes_written, 3 * wr);
    assert_eq!(r.short_reads, 0);
    assert!(r.measured_seconds > 0.0 && r.measured_seconds < 60.0);
    let expect_mb_s = (r.bytes_read + r.bytes_written) as f64 / 1e6 / r.measured_seconds;
    assert!((r.mb_s - expect_mb_s).abs() < 1e-9 * expect_mb_s.max(1.0));
    for o in &r.ops {
        assert_eq!(o.histogram.count(), o.count);
        assert!(o.max_ms >= o.avg_ms && o.max_ms >= o.p99_ms * 0.99, "{o:?}");
    }
    // Serialises for TestRecord.extra and comes back (histograms are not serialised).
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["ops"][0]["op"], "NTCreateX");
    let back: DbenchResult = serde_json::from_value(json).unwrap();
    assert_eq!(back.ops.len(), r.ops.len());
    assert_eq!(back.ops[0].count, r.ops[0].count);
    assert!(r.op_table().contains("Rmdir"));
    assert_empty(dir.path());
}

#[test]
fn status_mismatches_are_counted_with_their_line() {
    let text = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients\client1" NT_STATUS_OK
Qpathinfo "\clients\client1" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
Unlink "\clients\client1\nothere" 0x6 NT_STATUS_OK
ReadX 77 0 10 10 NT_STATUS_OK
Qfsinfo 0x0
Deltree "\clients\client1" NT_STATUS_OK
"#;
    let lf = Loadfile::parse_str("mismatch.txt", text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), 1, Duration::from_secs(60));
    cfg.max_loops = Some(2);
    let r = replay(&cfg, &lf);
    assert_eq!(r.status_mismatches, 6, "three lines, two passes");
    let per_op = |k: OpKind| r.ops.iter().find(|o| o.op == k).unwrap().status_mismatches;
    assert_eq!(per_op(OpKind::Qpathinfo), 2);
    assert_eq!(per_op(OpKind::Unlink), 2);
    assert_eq!(per_op(OpKind::ReadX), 2);
    assert_eq!(per_op(OpKind::Qfsinfo), 0, "0x0 means success");
    let lines: Vec<u32> = r.mismatches.iter().map(|m| m.line).collect();
    assert_eq!(lines, vec![4, 5, 6, 4, 5, 6]);
    let m = &r.mismatches[0];
    assert_eq!(m.op, OpKind::Qpathinfo);
    assert_eq!(m.expected, "NT_STATUS_OBJECT_NAME_NOT_FOUND");
    assert_eq!(m.got, "NT_STATUS_OK");
    assert_eq!(m.path.as_deref(), Some(r"\clients\client1"));
    let m = &r.mismatches[1];
    assert_eq!(
        (m.op, m.expected.as_str()),
        (OpKind::Unlink, "NT_STATUS_OK")
    );
    assert!(
        m.got.starts_with("NT_STATUS_OBJECT_NAME_NOT_FOUND"),
        "{}",
        m.got
    );
    let m = &r.mismatches[2];
    assert_eq!((m.op, m.fnum), (OpKind::ReadX, Some(77)));
    assert!(m.got.contains("fnum 77"), "{}", m.got);
    assert_empty(dir.path());
}

#[test]
fn malformed_lines_name_file_line_and_reason() {
    // Lines that are operations are quoted; a line that is not one (not the format: the
    // file may be anything) is not.
    let cases: &[(&str, &str, bool)] = &[
        ("Frobnicate 1 NT_STATUS_OK", "not a loadfile line", false),
        ("ReadX 1 0 4096 NT_STATUS_OK", "missing returned", true),
        (
            "WriteX 1 0 12x 12 NT_STATUS_OK",
            "bad number \"12x\" for size",
            true,
        ),
        ("Close 1", "missing status", true),
        (
            "Unlink \"\\etc\\passwd\" 0x6 NT_STATUS_OK",
            "outside \\clients\\client1",
            true,
        ),
        ("Close 1 2 NT_STATUS_OK", "found 2 arguments", true),
        ("1.2.3 Close 1 NT_STATUS_OK", "bad timestamp", false),
        (
            "Unlink \"\\clients\\client1\\x 0x6 NT_STATUS_OK",
            "unterminated quote",
            false,
        ),
        ("SMBopenX 1 2 NT_STATUS_OK", "dbench 1", false),
    ];
    for (line, reason, quoted) in cases {
        let text = format!("Qfsinfo 1 NT_STATUS_OK\n{line}\n");
        let e = Loadfile::parse_str("bad.txt", &text).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("bad.txt:2: "), "{msg}");
        assert!(msg.contains(reason), "{msg} should say {reason}");
        if *quoted {
            assert!(msg.ends_with(line.trim()), "{msg} should quote the line");
        } else {
            let word = line.split(' ').next().unwrap();
            assert!(!msg.contains(word), "{msg} should not quote the line");
        }
        assert_eq!(e.line, Some(2));
    }
    // From a file: the file's path leads the message.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("load.txt");
    std::fs::write(
        &p,
        "Mkdir \"\\clients\" NT_STATUS_OK\n\n# x\nReadX 1 0 NT_STATUS_OK\n",
    )
    .unwrap();
    let msg = parse_loadfile(&p).unwrap_err().to_string();
    assert!(msg.starts_with(&format!("{}:4: ", p.display())), "{msg}");
    let missing = parse_loadfile(dir.path().join("nope.txt")).unwrap_err();
    assert_eq!(missing.line, None);
    let empty = Loadfile::parse_str("empty.txt", "# nothing\n\n").unwrap_err();
    assert!(empty.to_string().contains("no operations"));
}

#[test]
fn gzipped_loadfile_parses_to_the_same_operations() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = TINY.to_string();
    // Some of client.txt too, when it is there (its first 5000 lines).
    if let Ok(ct) = std::fs::read_to_string(CLIENT_TXT) {
        text.push_str(&ct.lines().take(5000).collect::<Vec<_>>().join("\n"));
        text.push('\n');
    }
    let plain = dir.path().join("load.txt");
    std::fs::write(&plain, &text).unwrap();
    let gz = dir.path().join("load.txt.gz");
    let mut enc =
        flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
    // Without the .gz name too: recognised by its magic bytes.
    let disguised = dir.path().join("load.bin");
    std::fs::copy(&gz, &disguised).unwrap();

    let a = parse_loadfile(&plain).unwrap();
    let b = parse_loadfile(&gz).unwrap();
    let c = parse_loadfile(&disguised).unwrap();
    assert!(a.same_operations(&b));
    assert!(a.same_operations(&c));
    assert_eq!(a.op_counts(), b.op_counts());
    assert_eq!(a.len(), b.len());
    let other = Loadfile::parse_str("x", "Qfsinfo 1 NT_STATUS_OK").unwrap();
    assert!(!a.same_operations(&other));
}

/// client.txt, a directory and 2 clients for 2 s after 0.5 s of warm-up; None after a skip
/// when dbench (which test.sh installs) is missing.
fn client_txt_two_clients() -> Option<(Loadfile, tempfile::TempDir, DbenchConfig)> {
    if !Path::new(CLIENT_TXT).exists() {
        skip!(=> None, "{CLIENT_TXT} is not installed (test.sh installs dbench)");
    }
    let lf = parse_loadfile(CLIENT_TXT).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = DbenchConfig::new(dir.path(), CLIENT_TXT, 2, Duration::from_secs(2));
    cfg.warmup = Duration::from_millis(500);
    Some((lf, dir, cfg))
}

#[test]
fn client_txt_two_clients_two_seconds() {
    let Some((lf, dir, cfg)) = client_txt_two_clients() else {
        return;
    };
    let stop = AtomicBool::new(false);
    let mut reports = Vec::new();
    let r = run(&cfg, &lf, &stop, &mut |p| reports.push(p.clone())).unwrap();

    assert!(r.mb_s > 0.0, "{r:?}");
    assert!(r.bytes_read > 0 && r.bytes_written > 0);
    assert_eq!(r.status_mismatches, 0, "{:#?}", r.mismatches);
    assert_eq!(r.short_reads, 0);
    assert!((r.measured_seconds - 2.0).abs() < 1e-6);
    assert_eq!(r.per_second_mb_s.len(), 2);
    let file_kinds: Vec<OpKind> = lf
        .op_counts()
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.is_timed())
        .collect();
    let table_kinds: Vec<OpKind> = r.ops.iter().map(|o| o.op).collect();
    assert_eq!(
        table_kinds, file_kinds,
        "every operation of the file has a row"
    );
    assert!(count(&r, OpKind::ReadX) > 0 && count(&r, OpKind::NTCreateX) > 0);
    assert!(!reports.is_empty(), "progress about once a second");
    assert!(reports.iter().any(|p| p.phase == Phase::Measure));
    assert_empty(dir.path());
}

#[test]
fn stop_flag_ends_early_and_cleans_up() {
    let lf = Loadfile::parse_str("tiny.txt", TINY).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), 2, Duration::from_secs(60));
    cfg.warmup = Duration::from_millis(200);
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(800));
            stop.store(true, Ordering::Relaxed);
        });
        run(&cfg, &lf, &stop, &mut |_| {}).unwrap()
    });
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(r.interrupted);
    assert!(
        r.measured_seconds > 0.3 && r.measured_seconds < 5.0,
        "{}",
        r.measured_seconds
    );
    assert!(r.loops_completed > 0);
    assert_eq!(r.status_mismatches, 0, "{:?}", r.mismatches);
    assert_empty(dir.path());
}

#[test]
fn foreign_files_are_never_touched() {
    let lf = Loadfile::parse_str("tiny.txt", TINY).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("clients/client0/keep.txt");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::write(&theirs, b"not iolab's").unwrap();
    let stop = AtomicBool::new(false);
    let cfg = config(dir.path(), 1, Duration::from_secs(1));
    let e = run(&cfg, &lf, &stop, &mut |_| {}).unwrap_err();
    assert!(matches!(e, DbenchError::Occupied { .. }), "{e}");
    assert!(e.to_string().contains("keep.txt"), "{e}");
    assert_eq!(std::fs::read(&theirs).unwrap(), b"not iolab's");

    // What dbench 4.0 leaves behind (empty directories) is taken over and removed; the
    // clients/ directory that was already there stays, as does anything beside it.
    std::fs::remove_file(&theirs).unwrap();
    std::fs::create_dir_all(dir.path().join("clients/client0/~dmtmp/WORD")).unwrap();
    std::fs::write(dir.path().join("other.txt"), b"x").unwrap();
    let mut cfg = config(dir.path(), 1, Duration::from_secs(60));
    cfg.max_loops = Some(1);
    let r = run(&cfg, &lf, &stop, &mut |_| {}).unwrap();
    assert_eq!(r.status_mismatches, 0, "{:?}", r.mismatches);
    assert!(!dir.path().join("clients/client0").exists());
    assert!(dir.path().join("clients").is_dir());
    assert!(dir.path().join("other.txt").exists());

    let file_target = dir.path().join("other.txt");
    let cfg = config(&file_target, 1, Duration::from_secs(1));
    assert!(matches!(
        run(&cfg, &lf, &stop, &mut |_| {}),
        Err(DbenchError::Dir { .. })
    ));
    let cfg = config(dir.path(), 0, Duration::from_secs(1));
    assert!(matches!(
        run(&cfg, &lf, &stop, &mut |_| {}),
        Err(DbenchError::Config(_))
    ));
}

#[test]
fn o_sync_and_fsync_per_write_replay_cleanly() {
    let lf = Loadfile::parse_str("tiny.txt", TINY).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), 1, Duration::from_secs(60));
    cfg.max_loops = Some(2);
    cfg.sync_open = true;
    cfg.fsync_every_write = true;
    let r = replay(&cfg, &lf);
    assert_eq!(r.status_mismatches, 0, "{:?}", r.mismatches);
    assert_eq!(count(&r, OpKind::WriteX), 4);
    assert_empty(dir.path());
}

/// `--verify`: files written at aligned and unaligned offsets, overwritten in part, with a
/// hole, renamed, unlinked while open, and reopened; lines are numbered from 1 (no comments).
const VERIFY_LF: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients\client1" NT_STATUS_OK
NTCreateX "\clients\client1\a.dat" 0x40 0x5 1 NT_STATUS_OK
WriteX 1 0 65536 65536 NT_STATUS_OK
WriteX 1 4096 8192 8192 NT_STATUS_OK
WriteX 1 70000 1 1 NT_STATUS_OK
ReadX 1 0 65536 65536 NT_STATUS_OK
ReadX 1 65536 4465 4465 NT_STATUS_OK
Close 1 NT_STATUS_OK
NTCreateX "\clients\client1\b.dat" 0x40 0x5 2 NT_STATUS_OK
WriteX 2 3 10000 10000 NT_STATUS_OK
WriteX 2 5000 7 7 NT_STATUS_OK
Close 2 NT_STATUS_OK
Rename "\clients\client1\b.dat" "\clients\client1\c.dat" NT_STATUS_OK
NTCreateX "\clients\client1\c.dat" 0x40 0x1 3 NT_STATUS_OK
ReadX 3 0 10003 10003 NT_STATUS_OK
Close 3 NT_STATUS_OK
NTCreateX "\clients\client1\x.tmp" 0x40 0x2 4 NT_STATUS_OK
WriteX 4 0 100 100 NT_STATUS_OK
Unlink "\clients\client1\x.tmp" 0x6 NT_STATUS_OK
ReadX 4 0 100 100 NT_STATUS_OK
Close 4 NT_STATUS_OK
NTCreateX "\clients\client1\a.dat" 0x40 0x1 5 NT_STATUS_OK
ReadX 5 60000 10001 10001 NT_STATUS_OK
Close 5 NT_STATUS_OK
"#;

/// The loadfile line of VERIFY_LF's first ReadX (all of a.dat's first 64 KiB).
const FIRST_READ_LINE: u32 = 8;

fn verify_config(dir: &Path, clients: u32) -> DbenchConfig {
    let mut cfg = config(dir, clients, Duration::from_secs(60));
    cfg.max_loops = Some(1);
    cfg.verify = Some(0x5eed_f00d);
    cfg
}

/// Replays VERIFY_LF once with --verify, `seam` called as the seam is.
fn verify_replay(clients: u32, seam: &Seam<'_>) -> (DbenchResult, Tally) {
    let lf = Loadfile::parse_str("verify.txt", VERIFY_LF).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stop = AtomicBool::new(false);
    let r = run_with_seam(
        &verify_config(dir.path(), clients),
        &lf,
        &stop,
        &mut |_| {},
        seam,
    )
    .expect("replay runs");
    assert_eq!(r.status_mismatches, 0, "{:?}", r.mismatches);
    assert_empty(dir.path());
    let v = r.verify.clone().expect("a verify tally");
    (r, v)
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

/// (file, offset, class, phase) of every failure sample, sorted.
fn failures(v: &Tally) -> Vec<(String, u64, String, String)> {
    let mut f: Vec<_> = v
        .failure_samples
        .iter()
        .map(|s| {
            (
                s.file.clone().unwrap_or_default(),
                s.offset,
                s.class.clone(),
                s.phase.clone(),
            )
        })
        .collect();
    f.sort();
    f
}

#[test]
fn verify_checks_every_read_and_reads_the_files_back() {
    let content_seen = Mutex::new(Vec::new());
    let (r, v) = verify_replay(2, &|t: &Tamper| {
        if t.line.is_some() {
            return;
        }
        // What WriteX wrote is the model's generated content, not dbench's zeros.
        let on_disk = std::fs::read(t.root.join("a.dat")).unwrap();
        assert_eq!(on_disk.len(), 70001);
        assert_eq!(t.generation_at("a.dat", 5000), Some((2, 1)));
        assert_eq!(t.generation_at("a.dat", 66000), Some((0, 0)), "a hole");
        assert_eq!(t.generation_at("a.dat", 70001), None, "past the end");
        let gen2 = t.content("a.dat", 2, 4096, 8192).unwrap();
        assert_eq!(on_disk[4096..12288], gen2[..]);
        assert_ne!(
            on_disk[0..4096],
            t.content("a.dat", 2, 0, 4096).unwrap()[..]
        );
        assert!(on_disk[65536..70000].iter().all(|&b| b == 0));
        assert!(on_disk[..4096].iter().any(|&b| b != 0));
        content_seen.lock().unwrap().push(t.client);
    });
    let mut seen = content_seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, [0, 1], "the seam ran in both clients");
    assert_eq!(v.failures, 0, "{:#?}", v.failure_samples);
    let rc = v.replay.as_ref().expect("replay counts");
    assert!(v.checked > 0);
    assert_eq!(v.ok, v.checked);
    assert_eq!(v.classes.get("ok"), Some(&v.checked));
    assert_eq!(v.classes.len(), 1, "{:?}", v.classes);
    assert_eq!(rc.reads_checked, 2 * 5, "five ReadX per client");
    assert_eq!(rc.reads_unchecked, 0);
    assert_eq!(rc.writes_stamped, 2 * 6);
    assert_eq!(
        rc.read_back_files,
        2 * 2,
        "a.dat and c.dat; x.tmp was unlinked"
    );
    assert_eq!(rc.read_back_bytes, 2 * (70001 + 10003));
    assert!(rc.checked_bytes > rc.read_back_bytes);
    assert!(v.inline_seconds.unwrap_or(0.0) > 0.0);
    // Serialises for extra.verify with the keys DATA_MISMATCH reads.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["verify"]["failures"], 0);
    assert_eq!(json["verify"]["classes"]["ok"], v.checked);
    // Without --verify there is no tally.
    let lf = Loadfile::parse_str("verify.txt", VERIFY_LF).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = verify_config(dir.path(), 1);
    cfg.verify = None;
    let r = replay(&cfg, &lf);
    assert!(r.verify.is_none());
    assert!(serde_json::to_value(&r).unwrap().get("verify").is_none());
}

#[test]
fn verify_classifies_what_was_changed_behind_its_back() {
    let (_, v) = verify_replay(1, &|t: &Tamper| {
        if t.line.is_some() {
            return;
        }
        let a = t.root.join("a.dat");
        // One bit of generation 1.
        let mut b = t.content("a.dat", 1, 100, 1).unwrap();
        b[0] ^= 0x04;
        write_at(&a, 100, &b);
        // A 4 KiB block zeroed.
        write_at(&a, 20480, &[0u8; 4096]);
        // Generation 2's first block put back to what generation 1 wrote there.
        assert_eq!(t.generation_at("a.dat", 4096), Some((2, 1)));
        write_at(&a, 4096, &t.content("a.dat", 1, 4096, 4096).unwrap());
        // Bytes that no write made.
        write_at(&a, 45056, &[0xa5u8; 4096]);
        // c.dat loses its end.
        let c = std::fs::OpenOptions::new()
            .write(true)
            .open(t.root.join("c.dat"))
            .unwrap();
        c.set_len(5000).unwrap();
    });
    let rb = |file: &str, offset: u64, class: &str| {
        (
            format!("clients/client0/{file}"),
            offset,
            class.to_string(),
            "read-back".to_string(),
        )
    };
    assert_eq!(
        failures(&v),
        vec![
            rb("a.dat", 100, "corrupt"),
            rb("a.dat", 4096, "stale"),
            rb("a.dat", 20480, "zeroed"),
            rb("a.dat", 45056, "foreign"),
            rb("c.dat", 5000, "truncated"),
        ]
    );
    assert_eq!(v.failures, 5);
    for class in ["corrupt", "stale", "zeroed", "foreign", "truncated"] {
        assert_eq!(v.classes.get(class), Some(&1), "{class}: {:?}", v.classes);
    }
    assert_eq!(v.ok + v.failures, v.checked);
    let stale = v
        .failure_samples
        .iter()
        .find(|s| s.class == "stale")
        .unwrap();
    assert_eq!(
        (stale.expected_generation, stale.found_generation),
        (Some(2), Some(1))
    );
    let corrupt = v
        .failure_samples
        .iter()
        .find(|s| s.class == "corrupt")
        .unwrap();
    assert!(corrupt.detail.contains("1 bit"), "{}", corrupt.detail);
}

#[test]
fn verify_catches_a_change_at_the_read_that_sees_it() {
    let (_, v) = verify_replay(1, &|t: &Tamper| {
        if t.line == Some(FIRST_READ_LINE) {
            let mut b = t.content("a.dat", 1, 30000, 2).unwrap();
            b[1] = !b[1];
            write_at(&t.root.join("a.dat"), 30000, &b);
        }
    });
    assert_eq!(
        failures(&v),
        vec![
            (
                "clients/client0/a.dat".to_string(),
                30001,
                "corrupt".to_string(),
                format!("ReadX line {FIRST_READ_LINE}")
            ),
            (
                "clients/client0/a.dat".to_string(),
                30001,
                "corrupt".to_string(),
                "read-back".to_string()
            ),
        ]
    );
}

#[test]
fn client_txt_with_verify_two_clients() {
    let Some((lf, dir, mut cfg)) = client_txt_two_clients() else {
        return;
    };
    cfg.verify = Some(fastrand::u64(1..));
    let stop = AtomicBool::new(false);
    let r = run(&cfg, &lf, &stop, &mut |_| {}).unwrap();
    assert_eq!(r.status_mismatches, 0, "{:#?}", r.mismatches);
    let readx = count(&r, OpKind::ReadX);
    let v = r.verify.expect("a verify tally");
    assert_eq!(v.failures, 0, "{:#?}", v.failure_samples);
    let rc = v.replay.as_ref().expect("replay counts");
    assert!(rc.writes_stamped > 0, "{v:?}");
    // Every ReadX the replay reached was checked. On a busy machine it may reach none in
    // its 2.5 s (beside five suites and stress-ng: 652 writes and no read); the read-back
    // below still checks every file it wrote.
    assert!(
        rc.reads_checked > 0 || readx == 0,
        "{readx} ReadX, none checked: {v:?}"
    );
    assert_eq!(rc.reads_unchecked, 0, "{v:?}");
    assert!(v.checked > 0 && v.ok == v.checked);
    assert!(rc.read_back_files > 0, "{v:?}");
    assert_empty(dir.path());
}

/// A directory of the client's swapped for a link to somewhere else during the run: every
/// later operation through it fails (a status mismatch), nothing outside the run directory
/// is created, written or removed, and the link itself is removed with the client's files.
#[test]
fn a_link_swapped_in_during_the_run_is_never_followed() {
    const LF: &str = r#"Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
Close 1 NT_STATUS_OK
Mkdir "\clients\client1\sub" NT_STATUS_OK
NTCreateX "\clients\client1\sub\new.dat" 0x40 0x2 2 NT_STATUS_OK
WriteX 2 0 4096 4096 NT_STATUS_OK
Close 2 NT_STATUS_OK
Unlink "\clients\client1\sub\victim" 0x6 NT_STATUS_OK
Mkdir "\clients\client1\sub\d" NT_STATUS_OK
Rename "\clients\client1\sub\victim" "\clients\client1\moved" NT_STATUS_OK
Deltree "\clients\client1\sub" NT_STATUS_OK
"#;
    let lf = Loadfile::parse_str("swap.txt", LF).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim"), "keep").unwrap();
    let stop = AtomicBool::new(false);
    let out = outside.path().to_path_buf();
    let r = run_with_seam(
        &verify_config(dir.path(), 1),
        &lf,
        &stop,
        &mut |_| {},
        &|t: &Tamper| {
            // Before line 5 (the create in sub): sub becomes a link to the outside directory.
            if t.line == Some(5) {
                let sub = t.root.join("sub");
                std::fs::remove_dir(&sub).unwrap();
                std::os::unix::fs::symlink(&out, &sub).unwrap();
            }
        },
    )
    .expect("replay runs");
    let mut outside_now: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    outside_now.sort();
    assert_eq!(
        outside_now,
        ["victim"],
        "nothing created or removed outside"
    );
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim")).unwrap(),
        "keep"
    );
    // Create, write, close, unlink, mkdir, rename through the link: each one failed.
    let lines: Vec<u32> = r.mismatches.iter().map(|m| m.line).collect();
    for l in [5, 8, 9, 10] {
        assert!(
            lines.contains(&l),
            "line {l} did not fail: {:?}",
            r.mismatches
        );
    }
    assert_empty(dir.path());
}
