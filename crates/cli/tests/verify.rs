//! `iolab run verify` and `iolab verify` on real files through the built binary: every
//! corruption class injected into a kept data file is found with its class and offset,
//! a writer killed with SIGKILL loses no acknowledged write, and tampering with
//! acknowledged blocks after a clean run is reported as lost acknowledged writes.

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iolab_integrity::block;
use iolab_integrity::journal::Journal;
use iolab_testkit::{
    arr, get, require_devices, scratch_dir, sh, skip_allowed, string, uint, Loop, Mount, Out,
    Sandbox, MIB,
};
use serde_json::Value;

const BS: u64 = 8192;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `iolab run verify --target FILE <args> --quiet --json -`.
fn run_verify(sb: &Sandbox, data: &Path, args: &[&str]) -> Out {
    let mut v = vec![
        "run",
        "verify",
        "--target",
        s(data),
        "--quiet",
        "--json",
        "-",
    ];
    v.extend_from_slice(args);
    sb.iolab(&v)
}

/// `iolab verify --target FILE <args> --json`.
fn verify(sb: &Sandbox, data: &Path, args: &[&str]) -> Out {
    let mut v = vec!["verify", "--target", s(data), "--json"];
    v.extend_from_slice(args);
    sb.iolab(&v)
}

fn read_block(path: &Path, index: u64) -> Vec<u8> {
    let mut b = vec![0u8; BS as usize];
    std::fs::File::open(path)
        .unwrap()
        .read_exact_at(&mut b, index * BS)
        .unwrap();
    b
}

fn write_at(path: &Path, offset: u64, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
    f.sync_all().unwrap();
}

/// What generation `generation` of block `index` of run `run_id` looks like: exactly
/// what that pass wrote there, but for the write time in the header.
fn old_generation(run_id: u64, index: u64, generation: u64) -> Vec<u8> {
    let mut b = vec![0u8; BS as usize];
    block::stamp(&mut b, index * BS, run_id, generation);
    b
}

fn run_id_of(doc: &Value) -> u64 {
    u64::from_str_radix(string(doc, "run_id"), 16).unwrap()
}

/// Failures of a check, by offset: (class, found text).
fn failures(doc: &Value) -> Vec<(u64, String, String)> {
    arr(&doc["report"]["tally"], "failures")
        .iter()
        .map(|f| {
            (
                uint(f, "offset"),
                string(f, "class").to_string(),
                string(f, "found").to_string(),
            )
        })
        .collect()
}

fn has_warning(doc: &Value, code: &str) -> bool {
    arr(doc, "warnings").iter().any(|w| w["code"] == code)
}

/// Another writer that clobbers data every 200 µs while iolab runs.
struct Corrupter {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Corrupter {
    /// Calls `clobber` (true when it wrote) on its own thread until `stop`.
    fn start(clobber: impl Fn() -> bool + Send + 'static) -> Corrupter {
        let done = Arc::new(AtomicBool::new(false));
        let d = Arc::clone(&done);
        let thread = std::thread::spawn(move || {
            let mut hits = 0;
            while !d.load(Ordering::Relaxed) {
                hits += u64::from(clobber());
                std::thread::sleep(Duration::from_micros(200));
            }
            hits
        });
        Corrupter { done, thread }
    }

    /// Stops it; panics if it never wrote (the test would then prove nothing).
    fn stop(self) {
        self.done.store(true, Ordering::Relaxed);
        assert!(self.thread.join().unwrap() > 0, "the corrupter never wrote");
    }

    /// Keeps zeroing bytes `from..to` of every file in `dir` that is long enough.
    fn zeroing(dir: PathBuf, from: u64, to: u64) -> Corrupter {
        Corrupter::start(move || {
            let mut hit = false;
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                if let Ok(f) = OpenOptions::new().write(true).open(e.path()) {
                    hit |= f.metadata().is_ok_and(|m| m.len() >= to)
                        && f.write_all_at(&vec![0u8; (to - from) as usize], from)
                            .is_ok();
                }
            }
            hit
        })
    }
}

/// The run document of a `--verify` run whose one test of 4 KiB blocks had `from..to`
/// zeroed underneath it: exit 3, and only blocks of that range failed, as zeroed or torn.
fn zeroed_range_caught(out: Out, from: u64, to: u64) -> Value {
    let out = out.code(3);
    out.stderr_has(&["integrity:"]);
    let doc = out.json();
    let v = &arr(&doc, "tests")[0]["extra"]["verify"];
    let samples = arr(v, "failure_samples");
    assert!(uint(v, "failures") >= 1 && !samples.is_empty(), "{v}");
    let blocks = (to - from) / 4096;
    assert!(
        uint(v, "failures") <= blocks,
        "only the {blocks} zeroed blocks can fail: {v}"
    );
    for m in samples {
        let off = uint(m, "offset");
        assert!((from..to).contains(&off) && off.is_multiple_of(4096), "{m}");
        assert!(["zeroed", "torn"].contains(&string(m, "class")), "{m}");
    }
    assert!(has_warning(&doc, "DATA_MISMATCH"), "{}", doc["warnings"]);
    doc
}

#[test]
fn every_injected_corruption_class_is_found_with_its_offset() {
    let sb = Sandbox::new();
    let data = sb.path("data");
    let run = run_verify(
        &sb,
        &data,
        &[
            "--size",
            "4MiB",
            "--bs",
            "8k",
            "--rw",
            "randwrite",
            "--runs",
            "2",
            "--keep",
            "--verify-mode",
            "both",
            "--verify-every",
            "8",
        ],
    )
    .ok()
    .json();
    let extra = &run["tests"][0]["extra"];
    assert_eq!(uint(extra, "failures"), 0, "{extra}");
    // 512 blocks: one in 8 read back inline, and the whole region after each of 2 passes.
    assert_eq!(uint(extra, "inline_checked"), 2 * 512 / 8, "{extra}");
    assert_eq!(uint(extra, "after_checked"), 2 * 512, "{extra}");
    assert_eq!(run["tests"][0]["passes"].as_array().unwrap().len(), 2);
    assert!(run["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w["code"] != "DATA_MISMATCH"));

    // A clean file verifies from a separate process.
    let clean = verify(&sb, &data, &[]).ok().json();
    assert_eq!(uint(&clean["report"]["tally"], "checked"), 512);
    assert_eq!(uint(&clean["report"]["tally"], "failure_count"), 0);
    let run_id = run_id_of(&clean);
    assert_eq!(format!("{run_id:016x}"), string(extra, "run_id"));

    // Inject one of each class.
    let flip = 3;
    let mut b = read_block(&data, flip);
    b[1000] ^= 0x08;
    write_at(&data, flip * BS, &b);
    let stale = 7;
    write_at(&data, stale * BS, &old_generation(run_id, stale, 1));
    let (from, misdirected) = (12, 13);
    write_at(&data, misdirected * BS, &read_block(&data, from));
    let zeroed = 20..23;
    write_at(&data, zeroed.start * BS, &vec![0u8; (3 * BS) as usize]);
    let torn = 30;
    let mut b = read_block(&data, torn);
    b[(BS / 2) as usize..].copy_from_slice(&old_generation(run_id, torn, 1)[(BS / 2) as usize..]);
    write_at(&data, torn * BS, &b);

    let out = verify(&sb, &data, &[]).code(3);
    let doc = out.json();
    assert_eq!(doc["exit"], 3);
    let mut expected: Vec<(u64, &str, String)> = vec![
        (
            flip * BS,
            "bit-corruption",
            "1 bit(s) differ from generation 2, first at byte 1000".into(),
        ),
        (stale * BS, "stale", "found generation 1, expected 2".into()),
        (
            misdirected * BS,
            "misdirected",
            format!("written for offset {}", from * BS),
        ),
        (
            torn * BS,
            "torn",
            format!(
                "generation 2 up to byte {} of the block, generation 1 from there",
                BS / 2
            ),
        ),
    ];
    for z in zeroed {
        expected.push((z * BS, "zeroed", "every byte is zero".into()));
    }
    expected.sort();
    let found = failures(&doc);
    assert_eq!(found.len(), expected.len(), "{found:#?}");
    for ((off, class, text), (eoff, eclass, etext)) in found.iter().zip(&expected) {
        assert_eq!((off, class.as_str()), (eoff, *eclass), "{found:#?}");
        assert!(text.contains(etext.as_str()), "{text} lacks {etext}");
    }
    assert_eq!(uint(&doc["report"]["tally"], "checked"), 512);
    assert_eq!(uint(&doc["report"]["tally"], "ok"), 512 - 7);

    // The text report names the offsets and the exit status.
    let text = sb.iolab(&["verify", "--target", s(&data)]).code(3);
    assert!(
        text.stdout
            .contains(&format!("offset {} [stale]", stale * BS)),
        "{text}"
    );
    assert!(text.stdout.contains("FAILED: 7 block(s)"), "{text}");
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let sb = Sandbox::new();
    // A file iolab did not create stays as it was.
    let foreign = sb.path("foreign");
    std::fs::write(&foreign, vec![0x5a; 65536]).unwrap();
    run_verify(&sb, &foreign, &["--size", "64k"])
        .code(2)
        .stderr_has(&["--allow-overwrite-file"]);
    assert_eq!(std::fs::read(&foreign).unwrap(), vec![0x5a; 65536]);
    // A journal on the target's filesystem.
    let data = sb.path("data");
    run_verify(&sb, &data, &["--journal", s(&sb.path("j"))])
        .code(2)
        .stderr_has(&["--journal", "same filesystem"]);
    assert!(!data.exists() && !sb.path("j").exists());
    run_verify(&sb, &data, &["--bs", "1000"])
        .code(2)
        .stderr_has(&["--bs 1000", "multiple of 512"]);
    run_verify(&sb, &data, &["--verify-mode", "sometimes"])
        .code(2)
        .stderr_has(&["--verify-mode 'sometimes'"]);
    assert!(!data.exists());
    // `iolab verify` on something that is not iolab's data.
    sb.iolab(&["verify", "--target", s(&foreign)])
        .code(2)
        .stderr_has(&["--target", "not an iolab block", "--run-id"]);
    sb.iolab(&["verify", "--target", s(&sb.path("missing"))])
        .code(2)
        .stderr_has(&["--target", "does not exist"]);
}

#[test]
fn a_sidecar_path_iolab_did_not_create_is_neither_replaced_nor_removed() {
    let sb = Sandbox::new();
    // Someone else's file where the sidecar of a new data file would go: without --keep
    // the run used to remove it at the end, with --keep replace it.
    for keep in [false, true] {
        let data = sb.path(&format!("data-{keep}"));
        let side = sb.path(&format!("data-{keep}.iolab-verify.json"));
        std::fs::write(&side, b"precious").unwrap();
        let mut args = vec!["--size", "64k"];
        if keep {
            args.push("--keep");
        }
        let out = run_verify(&sb, &data, &args).code(2);
        out.stderr_has(&["--target", "iolab-verify.json", "exists"]);
        // Not recorded as the run's own either: nothing "left behind" for `iolab cleanup`
        // to delete later.
        assert!(!out.stderr.contains("left behind"), "{out}");
        assert_eq!(std::fs::read(&side).unwrap(), b"precious");
        assert!(!data.exists());
    }
    sb.iolab(&["cleanup"]).ok();
    for keep in [false, true] {
        let side = sb.path(&format!("data-{keep}.iolab-verify.json"));
        assert_eq!(std::fs::read(&side).unwrap(), b"precious");
    }
    // A symlink where the sidecar's temporary file goes: iolab used to write through it.
    let victim = sb.path("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let data = sb.path("linked");
    std::os::unix::fs::symlink(&victim, sb.path("linked.iolab-verify.json.new")).unwrap();
    run_verify(&sb, &data, &["--size", "64k", "--keep"])
        .code(2)
        .stderr_has(&["--target", "iolab-verify.json.new", "exists"]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
}

/// The data file in the sandbox and a journal in a directory on another filesystem
/// (/dev/shm); None after an allowed skip when there is no second filesystem (a fact of
/// the machine's layout that test.sh cannot change).
fn data_and_journal(sb: &Sandbox) -> Option<(tempfile::TempDir, PathBuf, PathBuf)> {
    let shm = Path::new("/dev/shm");
    let sdev = std::fs::metadata(sb.dir.path()).unwrap().dev();
    let dir = match std::fs::metadata(shm) {
        Ok(m) if m.is_dir() && m.dev() != sdev => tempfile::tempdir_in(shm).unwrap(),
        Ok(_) => {
            skip_allowed!(=> None, "/dev/shm is on the same filesystem as the build directory")
        }
        Err(e) => {
            skip_allowed!(=> None, "no /dev/shm ({e}); the journal needs a second filesystem")
        }
    };
    let journal = dir.path().join("journal");
    Some((dir, sb.path("data"), journal))
}

fn journal_file_len(p: &PathBuf) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

#[test]
fn sigkill_mid_run_loses_no_acknowledged_write() {
    let sb = Sandbox::new();
    let Some((_jdir, data, journal)) = data_and_journal(&sb) else {
        return;
    };
    let mut child = sb
        .cmd(&[
            "run",
            "verify",
            "--target",
            s(&data),
            "--size",
            "32MiB",
            "--bs",
            "8k",
            "--rw",
            "randwrite",
            "--runs",
            "1000",
            "--fsync-every",
            "32",
            "--journal",
            s(&journal),
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Kill it once it is well into its second pass (4096 blocks per pass, two records each).
    // How long that takes is the machine's business (beside five suites and a disk hog it
    // took more than 30 s): the bound only keeps a writer that hangs from hanging the suite.
    let t = Instant::now();
    while journal_file_len(&journal) < 32 * 3 * 4096 {
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the writer made no progress in 10 minutes"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the writer ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let j = Journal::read(&journal).unwrap();
    assert_eq!(j.ended, None);
    let in_flight = j.blocks.iter().filter(|b| b.in_flight()).count() as u64;
    assert!(
        in_flight <= 32,
        "{in_flight} blocks in flight, more than one fsync batch"
    );

    let doc = verify(&sb, &data, &["--journal", s(&journal)]).ok().json();
    let r = &doc["report"];
    assert_eq!(uint(&r["tally"], "failure_count"), 0, "{r}");
    assert_eq!(uint(r, "lost_acked"), 0);
    assert_eq!(uint(r, "in_flight"), in_flight, "{r}");
    assert_eq!(
        uint(r, "in_flight_new") + uint(r, "in_flight_old") + uint(r, "in_flight_torn"),
        in_flight
    );
    assert!(uint(r, "acked") >= 4096, "{r}");
    let text = sb
        .iolab(&["verify", "--target", s(&data), "--journal", s(&journal)])
        .ok();
    assert!(
        text.stdout
            .contains(&format!("In flight: {in_flight} blocks")),
        "{text}"
    );
    assert!(text.stdout.contains("no end record"), "{text}");
}

#[test]
fn tampered_acknowledged_blocks_are_lost_acknowledged_writes() {
    let sb = Sandbox::new();
    let Some((_jdir, data, journal)) = data_and_journal(&sb) else {
        return;
    };
    run_verify(
        &sb,
        &data,
        &[
            "--size",
            "2MiB",
            "--bs",
            "8k",
            "--runs",
            "2",
            "--journal",
            s(&journal),
            "--verify-mode",
            "none",
        ],
    )
    .ok();
    let doc = verify(&sb, &data, &["--journal", s(&journal)]).ok().json();
    assert_eq!(uint(&doc["report"], "acked"), 256);
    assert_eq!(uint(&doc["report"], "in_flight"), 0);
    let run_id = run_id_of(&doc);

    let (stale, zeroed) = (5u64, 200u64);
    write_at(&data, stale * BS, &old_generation(run_id, stale, 1));
    write_at(&data, zeroed * BS, &vec![0u8; BS as usize]);
    let doc = verify(&sb, &data, &["--journal", s(&journal)])
        .code(3)
        .json();
    let r = &doc["report"];
    assert_eq!(uint(r, "lost_acked"), 2, "{r}");
    let f = arr(&r["tally"], "failures");
    assert_eq!(f.len(), 2, "{r}");
    for (f, off, what) in [(&f[0], stale * BS, "stale"), (&f[1], zeroed * BS, "zeroed")] {
        assert_eq!(uint(f, "offset"), off);
        assert_eq!(string(f, "class"), "lost-ack");
        assert!(string(f, "found").starts_with(what), "{f}");
        assert_eq!(string(f, "expected"), "acknowledged generation 2");
        let before = get(f, "acked_before_end_s").as_f64().unwrap();
        assert!((0.0..60.0).contains(&before), "{f}");
    }
    let text = sb
        .iolab(&["verify", "--target", s(&data), "--journal", s(&journal)])
        .code(3);
    assert!(
        text.stdout.contains("2 lost acknowledged write(s)"),
        "{text}"
    );
    assert!(
        text.stdout
            .contains(&format!("offset {} [lost-ack]", stale * BS)),
        "{text}"
    );
}

#[test]
fn a_run_whose_data_changes_underneath_is_stored_with_data_mismatch() {
    use std::os::unix::fs::OpenOptionsExt;
    let sb = Sandbox::new();
    let data = sb.path("data");
    // Another writer keeps zeroing the last block while iolab writes and verifies.
    let corrupter = {
        let data = data.clone();
        let zeros = iolab_engine::buffers::BufferPool::new(1, 4096);
        Corrupter::start(move || {
            let f = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&data);
            f.is_ok_and(|f| f.write_all_at(&zeros.slot(0)[..4096], 255 * 4096).is_ok())
        })
    };
    let out = run_verify(
        &sb,
        &data,
        &[
            "--size",
            "1MiB",
            "--bs",
            "4k",
            "--runs",
            "3",
            "--verify-mode",
            "after",
        ],
    );
    corrupter.stop();
    let out = out.code(3);
    let doc = out.json();
    let extra = &doc["tests"][0]["extra"];
    assert!(uint(extra, "failures") >= 1, "{extra}");
    let sample = &arr(extra, "failure_samples")[0];
    assert_eq!(uint(sample, "offset"), 255 * 4096, "{sample}");
    assert_eq!(string(sample, "class"), "zeroed", "{sample}");
    let w: Vec<&Value> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["code"] == "DATA_MISMATCH")
        .collect();
    assert_eq!(w.len(), 1, "{}", doc["warnings"]);
    assert!(out.stderr.contains("stored as run 1"), "{out}");
    assert!(out.stderr.contains("offset 1044480 [zeroed]"), "{out}");
    // The stored run carries the warning too, and the data file is gone (no --keep).
    let shown = sb.iolab(&["show", "1", "--json"]).ok().json();
    assert!(shown["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["code"] == "DATA_MISMATCH"));
    assert!(!data.exists());
}

#[test]
fn a_block_device_is_written_only_when_allowed_and_verified_from_its_first_header() {
    let Some(_serial) = require_devices(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let dev = Loop::new(8 * MIB);
    let args = ["--size", "4MiB", "--bs", "4k", "--runs", "2"];
    let mut refused = vec!["run", "verify", "--target", dev.s(), "--quiet"];
    refused.extend_from_slice(&args);
    sb.iolab(&refused)
        .code(2)
        .stderr_has(&["--allow-destroy-device"]);
    assert!(
        dev.contents().iter().all(|&b| b == 0),
        "written without the flag"
    );
    let mut allowed = refused.clone();
    allowed.push("--allow-destroy-device");
    sb.iolab(&allowed).ok();

    // No sidecar for a device: the first block's header names the run and block size.
    let out = sb
        .iolab(&[
            "verify",
            "--target",
            dev.s(),
            "--size",
            "4MiB",
            "--generation",
            "2",
        ])
        .ok();
    assert!(
        out.stdout.contains("from the header of the first block"),
        "{out}"
    );
    assert!(out.stdout.contains("1024 blocks: 1024 ok"), "{out}");
    // The half iolab did not write is zeros, and is reported as such when included.
    let doc = verify(&sb, &dev.dev, &[]).code(3).json();
    let t = &doc["report"]["tally"];
    assert_eq!(
        (uint(t, "ok"), uint(t, "failure_count")),
        (1024, 1024),
        "{t}"
    );
    assert_eq!(uint(&t["classes"], "zeroed"), 1024);
    // An older generation is stale once the expected one is given.
    let doc = verify(&sb, &dev.dev, &["--size", "4MiB", "--generation", "3"])
        .code(3)
        .json();
    assert_eq!(uint(&doc["report"]["tally"]["classes"], "stale"), 1024);
}

#[test]
fn streams_with_verify_check_their_files_and_catch_a_change_underneath() {
    let sb = Sandbox::new();
    let args = [
        "streams",
        "--rw",
        "write",
        "--streams",
        "2",
        "--bs",
        "64k",
        "--size",
        "2MiB",
        "--verify",
        "--json",
        "-",
    ];
    let doc = sb.run(&args).ok().json();
    for t in &arr(&doc, "tests")[..2] {
        let v = &t["extra"]["verify"];
        assert_eq!((uint(v, "checked"), uint(v, "failures")), (512, 0), "{t}");
        assert_eq!(uint(v, "block_size"), 4096);
    }
    assert!(sb.target_entries().is_empty(), "files left behind");
    sb.run(&["copy", "--verify"])
        .code(2)
        .stderr_has(&["--verify does not apply to `iolab run copy`", "streams"]);
    sb.run(&["streams", "--verify"])
        .code(2)
        .stderr_has(&["--verify", "--rw write"]);

    // Another writer keeps zeroing the first block of every stream file.
    let dir = sb.target.clone();
    let corrupter = Corrupter::start(move || {
        let mut hit = false;
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if let Ok(f) = OpenOptions::new().write(true).open(e.path()) {
                hit |= f.metadata().is_ok_and(|m| m.len() >= 4096)
                    && f.write_all_at(&[0u8; 4096], 0).is_ok();
            }
        }
        hit
    });
    let out = sb.run(&args);
    corrupter.stop();
    let out = out.code(3);
    out.stderr_has(&["integrity:"]);
    let doc = out.json();
    for t in &arr(&doc, "tests")[..2] {
        let v = &t["extra"]["verify"];
        assert!(uint(v, "failures") >= 1, "{t}");
        let first = &arr(v, "failure_samples")[0];
        assert_eq!(
            (uint(first, "offset"), string(first, "class")),
            (0, "zeroed")
        );
    }
    assert!(has_warning(&doc, "DATA_MISMATCH"), "{}", doc["warnings"]);
    assert!(sb.target_entries().is_empty(), "files left behind");
}

#[test]
fn metadata_with_verify_checks_every_file_and_stores_the_run() {
    let sb = Sandbox::new();
    let out = sb
        .run(&[
            "metadata", "--verify", "--files", "200", "--dirs", "3", "--json", "-",
        ])
        .ok();
    let doc = out.json();
    let tests = arr(&doc, "tests");
    let read = tests
        .iter()
        .find(|t| t["name"] == "read")
        .expect("a read test");
    let v = &read["extra"]["verify"];
    assert_eq!((uint(v, "checked"), uint(v, "failures")), (200, 0), "{v}");
    assert_eq!(uint(&v["classes"], "ok"), 200);
    assert!(arr(&doc, "notes").iter().any(|n| {
        n.as_str().is_some_and(|n| {
            n.starts_with("verify read: 200 files checked") && n.ends_with("all ok")
        })
    }));
    assert!(!has_warning(&doc, "DATA_MISMATCH"), "{}", doc["warnings"]);
    let rows = sb.result_rows();
    assert_eq!(rows.len(), 1, "{}", sb.results());
    assert_eq!(rows[0].1, "metadata");
    assert!(sb.target_entries().is_empty(), "files left behind");
}

#[test]
fn metadata_with_verify_exits_3_on_files_zeroed_underneath() {
    let sb = Sandbox::new();
    // Another writer keeps zeroing every file that has its 100 bytes (its create is done);
    // fsync makes the create phase long enough for it to hit files before they are read.
    let dir = sb.target.clone();
    let corrupter = Corrupter::start(move || {
        let mut hit = false;
        let files = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|work| {
                std::fs::read_dir(work.path())
                    .into_iter()
                    .flatten()
                    .flatten()
            })
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten());
        for e in files {
            if let Ok(f) = OpenOptions::new().write(true).open(e.path()) {
                hit |= f.metadata().is_ok_and(|m| m.len() == 100)
                    && f.write_all_at(&[0u8; 100], 0).is_ok();
            }
        }
        hit
    });
    let out = sb.run(&[
        "metadata", "--verify", "--files", "400", "--dirs", "2", "--fsync", "--json", "-",
    ]);
    corrupter.stop();
    let out = out.code(3);
    out.stderr_has(&["integrity:", "file(s) did not read back as written"]);
    let doc = out.json();
    let read = arr(&doc, "tests")
        .iter()
        .find(|t| t["name"] == "read")
        .expect("a read test");
    let v = &read["extra"]["verify"];
    assert_eq!(uint(v, "checked"), 400, "{v}");
    assert!(uint(v, "failures") >= 1, "{v}");
    for m in arr(v, "failure_samples") {
        assert!(["zeroed", "corrupt"].contains(&string(m, "class")), "{m}");
        assert!(string(m, "file").starts_with('d'), "{m}");
    }
    assert!(has_warning(&doc, "DATA_MISMATCH"), "{}", doc["warnings"]);
    assert!(arr(&doc, "notes")
        .iter()
        .any(|n| n.as_str().is_some_and(|n| n.contains("MISMATCH(ES): "))));
    assert_eq!(sb.result_rows().len(), 1, "stored: {}", sb.results());
    assert!(sb.target_entries().is_empty(), "files left behind");
}

#[test]
fn fsync_with_verify_checks_every_test_and_catches_a_change_underneath() {
    let sb = Sandbox::new();
    let doc = sb
        .run(&[
            "fsync",
            "--verify",
            "--sizes",
            "512,4k",
            "--methods",
            "none,fdatasync,O_DIRECT+O_DSYNC",
            "--duration",
            "100ms",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let tests = arr(&doc, "tests");
    // O_DIRECT+O_DSYNC 512 is skipped where the device's logical block is larger.
    assert!(tests.len() >= 5, "{}", doc["notes"]);
    let notes: Vec<&str> = arr(&doc, "notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    for t in tests {
        let v = &t["extra"]["verify"];
        assert!(uint(v, "checked") > 0, "{t}");
        assert_eq!(
            (uint(v, "ok"), uint(v, "failures")),
            (uint(v, "checked"), 0)
        );
        assert_eq!(uint(v, "read_backs"), 1);
        let line = format!("verify {}: ", string(t, "name"));
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with(&line) && n.ends_with("all ok")),
            "no {line:?} line in {notes:?}"
        );
    }
    assert!(!has_warning(&doc, "DATA_MISMATCH"), "{}", doc["warnings"]);
    assert!(sb.target_entries().is_empty(), "files left behind");
    sb.run(&["fsync", "--verify", "--sizes", "4k,1000"])
        .code(2)
        .stderr_has(&["--sizes", "512", "1000 is not"]);

    // Another writer keeps zeroing blocks 4..12 of the probe file. O_DSYNC writes are slow
    // enough that a 400 ms pass writes them once, early, and never again.
    let (from, to) = (4 * 4096u64, 12 * 4096u64);
    let corrupter = Corrupter::zeroing(sb.target.clone(), from, to);
    let runs_before = sb.result_rows().len();
    let out = sb.run(&[
        "fsync",
        "--verify",
        "--sizes",
        "4k",
        "--methods",
        "O_DSYNC",
        "--duration",
        "400ms",
        "--json",
        "-",
    ]);
    corrupter.stop();
    let doc = zeroed_range_caught(out, from, to);
    assert!(arr(&doc, "notes")
        .iter()
        .any(|n| n.as_str().is_some_and(|n| n.contains("MISMATCH(ES)"))));
    // Stored before the exit status said so.
    assert_eq!(sb.result_rows().len(), runs_before + 1);
    assert!(sb.target_entries().is_empty(), "files left behind");
}

#[test]
fn fsync_verify_reads_back_buffered_where_o_direct_refuses_the_blocks() {
    let Some(_serial) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    // 4096-byte logical blocks: O_DIRECT refuses to read 6 KiB of 512-byte blocks.
    let dev = Loop::with_options(64 * MIB, &["--sector-size", "4096"]);
    sh("mkfs.ext4", &["-q", "-F", dev.s()]);
    let mnt = scratch_dir();
    let _mounted = Mount::at(&dev.dev, mnt.path(), &[]);
    let doc = sb
        .iolab(&[
            "run",
            "fsync",
            "--target",
            s(mnt.path()),
            "--verify",
            "--sizes",
            "512",
            "--size",
            "6k",
            "--methods",
            "none,fdatasync",
            "--duration",
            "100ms",
            "--quiet",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let tests = arr(&doc, "tests");
    assert_eq!(tests.len(), 2);
    for t in tests {
        let v = &t["extra"]["verify"];
        assert_eq!(v["direct"], false, "{t}");
        assert!(uint(v, "checked") > 0 && uint(v, "failures") == 0, "{t}");
    }
    // The plain writes cover all 12 blocks.
    assert_eq!(uint(&tests[0]["extra"]["verify"], "checked"), 12);
}

/// A dbench loadfile that writes 64 KiB to a file, reads it back and keeps it, then
/// writes a second file at an odd offset; then it sleeps 3 s, so a 1 s run ends with every
/// client asleep after one pass and its two files in place for the final read-back.
const DBENCH_VERIFY_LOADFILE: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients\client1" NT_STATUS_OK
NTCreateX "\clients\client1\a.dat" 0x40 0x5 1 NT_STATUS_OK
WriteX 1 0 65536 65536 NT_STATUS_OK
WriteX 1 8192 3000 3000 NT_STATUS_OK
Flush 1 NT_STATUS_OK
ReadX 1 0 65536 65536 NT_STATUS_OK
Close 1 NT_STATUS_OK
NTCreateX "\clients\client1\b.dat" 0x40 0x5 2 NT_STATUS_OK
WriteX 2 7 20000 20000 NT_STATUS_OK
ReadX 2 0 20007 20007 NT_STATUS_OK
Close 2 NT_STATUS_OK
Sleep 3000000 NT_STATUS_OK
"#;

#[test]
fn dbench_with_verify_checks_reads_and_files_and_catches_a_change_underneath() {
    let sb = Sandbox::new();
    let lf = sb.path("verify-loadfile.txt");
    std::fs::write(&lf, DBENCH_VERIFY_LOADFILE).unwrap();
    let args = [
        "dbench",
        "--loadfile",
        s(&lf),
        "--clients",
        "2",
        "--time",
        "1s",
        "--warmup",
        "0s",
        "--verify",
    ];
    let out = sb.run(&args).ok();
    assert!(
        out.stdout.contains("verify dbench 2 clients: ") && out.stdout.contains(": all ok"),
        "{out}"
    );
    let mut json_args = args.to_vec();
    json_args.extend(["--json", "-"]);
    let doc = sb.run(&json_args).ok().json();
    let t = &arr(&doc, "tests")[0];
    let v = &t["extra"]["verify"];
    assert_eq!(uint(v, "failures"), 0, "{v}");
    assert!(
        uint(v, "checked") > 0 && uint(v, "reads_checked") > 0,
        "{v}"
    );
    assert_eq!(uint(v, "ok"), uint(v, "checked"));
    assert_eq!(uint(&v["classes"], "ok"), uint(v, "checked"));
    assert_eq!(uint(v, "read_back_files"), 4, "{v}");
    assert!(!has_warning(&doc, "DATA_MISMATCH"));
    assert!(sb.target_entries().is_empty(), "files left behind");

    // Another writer keeps zeroing the first 4 KiB of client 0's a.dat.
    let a = sb.target.join("clients/client0/a.dat");
    let corrupter = Corrupter::start(move || {
        OpenOptions::new().write(true).open(&a).is_ok_and(|f| {
            f.metadata().is_ok_and(|m| m.len() >= 65536) && f.write_all_at(&[0u8; 4096], 0).is_ok()
        })
    });
    let out = sb.run(&json_args);
    corrupter.stop();
    let out = out.code(3);
    out.stderr_has(&["integrity:", "MISMATCH"]);
    let doc = out.json();
    let v = &arr(&doc, "tests")[0]["extra"]["verify"];
    assert!(uint(v, "failures") >= 1, "{v}");
    // Zeros in the first block (a read racing the other writer may see them begin later).
    for f in arr(v, "failure_samples") {
        assert_eq!(
            (string(f, "file"), string(f, "class")),
            ("clients/client0/a.dat", "zeroed"),
            "{f}"
        );
        assert!(uint(f, "offset") < 4096, "{f}");
    }
    assert!(has_warning(&doc, "DATA_MISMATCH"), "{}", doc["warnings"]);
    assert!(sb.target_entries().is_empty(), "files left behind");
}

/// `run custom --verify` with these extra arguments on a 4 MiB file of 4 KiB blocks; each
/// pass writes 256 MiB (64 Ki writes over 1024 blocks: the chance that a block is never
/// written is e^-64), however slow the machine is.
fn custom_verify(sb: &Sandbox, rw: &str, extra: &[&str]) -> Out {
    let mut v = vec![
        "custom",
        "--rw",
        rw,
        "--bs",
        "4k",
        "--size",
        "4MiB",
        "--iodepth",
        "32",
        "--numjobs",
        "2",
        "--io-size",
        "256MiB",
        "--duration",
        "120s",
        "--warmup",
        "0",
        "--verify",
        "--json",
        "-",
    ];
    v.extend_from_slice(extra);
    sb.run(&v)
}

#[test]
fn block_presets_verify_every_written_block_after_each_pass() {
    let sb = Sandbox::new();
    let doc = custom_verify(&sb, "randwrite", &["--runs", "2"])
        .ok()
        .json();
    let v = &arr(&doc, "tests")[0]["extra"]["verify"];
    // 1024 blocks, tens of thousands of writes per pass: every block is written, and each
    // read-back checks all of them.
    assert_eq!(uint(v, "read_backs"), 2, "{v}");
    assert_eq!(uint(v, "checked"), 2 * 1024, "{v}");
    assert_eq!((uint(v, "ok"), uint(v, "failures")), (2 * 1024, 0), "{v}");
    assert_eq!(uint(&v["classes"], "ok"), 2 * 1024);
    assert!(arr(&doc, "notes").iter().any(|n| n
        .as_str()
        .is_some_and(|n| n.starts_with("verify RND4K") && n.ends_with("all ok"))));
    // Mixed tests check the blocks they wrote.
    let doc = custom_verify(&sb, "randrw", &["--runs", "1"]).ok().json();
    let v = &arr(&doc, "tests")[0]["extra"]["verify"];
    assert!(uint(v, "checked") > 512 && uint(v, "failures") == 0, "{v}");

    // Not whole sectors, or nothing written: refused before anything runs.
    sb.run(&["custom", "--rw", "randwrite", "--bs", "1000", "--verify"])
        .code(2)
        .stderr_has(&["--bs", "512"]);
    sb.run(&["custom", "--rw", "randread", "--verify"])
        .code(2)
        .stderr_has(&["--verify checks what the tests write", "only reads"]);
    assert!(sb.target_entries().is_empty(), "files left behind");
}

#[test]
fn block_verify_catches_a_range_zeroed_underneath_the_pass() {
    let sb = Sandbox::new();
    // Another writer keeps zeroing blocks 16..24 of the test file while the pass runs.
    let (from, to) = (16 * 4096u64, 24 * 4096u64);
    let corrupter = Corrupter::zeroing(sb.target.clone(), from, to);
    let out = custom_verify(&sb, "randwrite", &["--runs", "1"]);
    corrupter.stop();
    zeroed_range_caught(out, from, to);
    assert!(sb.target_entries().is_empty(), "files left behind");
}

#[test]
fn a_read_error_is_a_failure_of_its_block_and_the_check_goes_on() {
    let Some(_serial) = require_devices(&["mkfs.btrfs"]) else {
        return;
    };
    let sb = Sandbox::new();
    let dev = Loop::new(256 * MIB);
    sh("mkfs.btrfs", &["-q", "-f", "-d", "single", dev.s()]);
    let mnt = scratch_dir();
    let mounted = Mount::at(&dev.dev, mnt.path(), &[]);
    let data = mnt.path().join("data");
    let args = ["--size", "1MiB", "--bs", "4k", "--keep", "--no-store"];
    let doc = run_verify(&sb, &data, &args).ok().json();
    let run_id = u64::from_str_radix(string(&doc["tests"][0]["extra"], "run_id"), 16).unwrap();
    drop(mounted);
    // Damage block 10 of the file on the device itself: btrfs's data checksum then fails
    // and the read returns EIO.
    let bad = 10 * 4096u64;
    let image = dev.contents();
    let at = image
        .chunks_exact(4096)
        .position(|b| block::parse_header(b).is_some_and(|h| h.run_id == run_id && h.offset == bad))
        .expect("block 10 found on the device") as u64
        * 4096;
    write_at(&dev.dev, at + 1000, &[0x5a; 16]);
    let _mounted = Mount::at(&dev.dev, mnt.path(), &[]);
    // The unreadable block is reported (exit 3) and every other block is still checked.
    let doc = verify(&sb, &data, &[]).code(3).json();
    let tally = &doc["report"]["tally"];
    assert_eq!(uint(tally, "checked"), 256, "{tally}");
    assert_eq!(uint(tally, "failure_count"), 1, "{tally}");
    let f = failures(&doc);
    assert_eq!(f[0].0, bad, "{f:?}");
    assert_eq!(f[0].1, "read-error", "{f:?}");
    assert!(f[0].2.contains("Input/output error"), "{f:?}");
}

#[track_caller]
fn stdout_has(out: &Out, needles: &[&str]) {
    for n in needles {
        assert!(out.stdout.contains(n), "stdout lacks {n:?}: {out}");
    }
}

/// A kept 256 KiB file of 8 KiB blocks and its sidecar.
fn kept_data(sb: &Sandbox) -> PathBuf {
    let data = sb.path("data");
    let args = ["--size", "256k", "--bs", "8k", "--keep", "--no-store"];
    run_verify(sb, &data, &args).ok();
    data
}

#[test]
fn a_truncated_file_misses_blocks_and_bytes_appended_after_the_data_are_reported() {
    let sb = Sandbox::new();
    let data = kept_data(&sb);
    verify(&sb, &data, &[]).ok();
    // Cut to 196 KiB: 24 whole blocks remain, the 8 after them (one cut in half) are
    // missing, and that is a finding (exit 3), not a usage error.
    let f = OpenOptions::new().write(true).open(&data).unwrap();
    f.set_len(196 * 1024).unwrap();
    let doc = verify(&sb, &data, &[]).code(3).json();
    let tally = &doc["report"]["tally"];
    assert_eq!(uint(tally, "checked"), 32, "{tally}");
    assert_eq!(uint(&tally["classes"], "missing"), 8, "{tally}");
    assert_eq!(failures(&doc)[0].0, 24 * BS);
    stdout_has(
        &sb.iolab(&["verify", "--target", s(&data)]).code(3),
        &["missing", "ends at byte 200704"],
    );

    // Whole again, then 100 bytes appended after the data: reported, exit 3.
    let data = {
        std::fs::remove_file(&data).unwrap();
        std::fs::remove_file(sb.path("data.iolab-verify.json")).unwrap();
        kept_data(&sb)
    };
    let f = OpenOptions::new().append(true).open(&data).unwrap();
    std::io::Write::write_all(&mut &f, &[0x41; 100]).unwrap();
    let doc = verify(&sb, &data, &[]).code(3).json();
    assert_eq!(uint(&doc["report"], "appended"), 100, "{doc}");
    assert_eq!(uint(&doc["report"]["tally"], "failure_count"), 0, "{doc}");
    stdout_has(
        &sb.iolab(&["verify", "--target", s(&data)]).code(3),
        &["Appended: 100 B", "byte 262144", "FAILED"],
    );
    // Narrowed with --size, the rest of the file is not the check's business.
    verify(&sb, &data, &["--size", "64k"]).ok();
}

#[test]
fn a_sidecar_that_describes_no_data_or_part_blocks_is_refused() {
    let sb = Sandbox::new();
    let data = kept_data(&sb);
    let side = sb.path("data.iolab-verify.json");
    let original: Value = serde_json::from_str(&std::fs::read_to_string(&side).unwrap()).unwrap();
    for (size, says) in [(0u64, "size 0"), (12345, "size 12345: not a whole number")] {
        let mut doc = original.clone();
        doc["size"] = size.into();
        std::fs::write(&side, doc.to_string()).unwrap();
        sb.iolab(&["verify", "--target", s(&data)])
            .code(2)
            .stderr_has(&[s(&side), says]);
    }
}

#[test]
fn blocks_smaller_than_the_devices_sectors_are_refused_by_name() {
    let Some(_serial) = require_devices(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let dev = Loop::with_options(8 * MIB, &["--sector-size", "4096"]);
    let out = sb
        .iolab(&[
            "run",
            "verify",
            "--target",
            dev.s(),
            "--bs",
            "512",
            "--size",
            "1MiB",
            "--allow-destroy-device",
            "--no-store",
            "--quiet",
        ])
        .code(2);
    out.stderr_has(&["--bs 512", "4096-byte logical sectors"]);
    assert!(
        dev.contents().iter().all(|&b| b == 0),
        "nothing was written"
    );
    sb.iolab(&[
        "verify",
        "--target",
        dev.s(),
        "--run-id",
        "1",
        "--bs",
        "512",
    ])
    .code(2)
    .stderr_has(&["512 bytes", "4096-byte logical sectors"]);
}

#[test]
fn a_journal_in_another_subvolume_of_the_targets_btrfs_is_refused() {
    let Some(_serial) = require_devices(&["mkfs.btrfs", "btrfs"]) else {
        return;
    };
    let sb = Sandbox::new();
    let dev = Loop::new(256 * MIB);
    sh("mkfs.btrfs", &["-q", "-f", dev.s()]);
    let mnt = scratch_dir();
    let _mounted = Mount::at(&dev.dev, mnt.path(), &[]);
    let sv = mnt.path().join("sv");
    sh("btrfs", &["subvolume", "create", s(&sv)]);
    // A subvolume has an st_dev of its own, but it is the same filesystem.
    assert_ne!(
        std::fs::metadata(&sv).unwrap().dev(),
        std::fs::metadata(mnt.path()).unwrap().dev()
    );
    let data = mnt.path().join("data");
    run_verify(
        &sb,
        &data,
        &["--size", "64k", "--journal", s(&sv.join("j"))],
    )
    .code(2)
    .stderr_has(&["--journal", "same filesystem"]);
    assert!(!data.exists() && !sv.join("j").exists());
}

#[test]
fn a_journal_checks_its_data_after_the_device_number_or_inode_changed_but_not_another_runs() {
    let sb = Sandbox::new();
    let Some((_jdir, data, journal)) = data_and_journal(&sb) else {
        return;
    };
    let args = ["--size", "256k", "--bs", "8k", "--journal", s(&journal)];
    run_verify(&sb, &data, &args).ok();
    // A copy has another inode, as the data has another device number once its disk is
    // attached elsewhere after a reboot: its blocks still name the journal's run.
    let copy = sb.path("copy");
    std::fs::copy(&data, &copy).unwrap();
    let out = sb
        .iolab(&["verify", "--target", s(&copy), "--journal", s(&journal)])
        .ok();
    assert!(
        out.stdout.contains("Note:") && out.stdout.contains("same data"),
        "{out}"
    );
    assert!(out.stdout.contains("32 blocks: 32 ok"), "{out}");
    // What the journal says is not overridden from the command line.
    for (extra, needle) in [
        (["--bs", "4k"], "--bs 4096"),
        (["--generation", "5"], "--generation"),
        (["--size", "8k"], "--size"),
    ] {
        let mut v = vec!["verify", "--target", s(&data), "--journal", s(&journal)];
        v.extend_from_slice(&extra);
        sb.iolab(&v).code(2).stderr_has(&[needle]);
    }
    // The data of another run is still refused.
    let other = sb.path("other");
    run_verify(&sb, &other, &["--size", "256k", "--bs", "8k", "--keep"]).ok();
    sb.iolab(&["verify", "--target", s(&other), "--journal", s(&journal)])
        .code(2)
        .stderr_has(&["--journal", "written for another file"]);
}

#[test]
fn a_size_beyond_the_free_space_is_refused_before_writing() {
    let Some(_serial) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let dev = Loop::new(32 * MIB);
    sh("mkfs.ext4", &["-q", "-F", dev.s()]);
    let mnt = scratch_dir();
    let _mounted = Mount::at(&dev.dev, mnt.path(), &[]);
    let data = mnt.path().join("data");
    let t = Instant::now();
    run_verify(&sb, &data, &["--size", "64MiB"])
        .code(2)
        .stderr_has(&["--size", "free"]);
    assert!(!data.exists());
    assert!(t.elapsed() < Duration::from_secs(5));
    sb.iolab(&["run", "verify", "--target", "/dev/null", "--size", "4k"])
        .code(2)
        .stderr_has(&["/dev/null: a character device"]);
}
