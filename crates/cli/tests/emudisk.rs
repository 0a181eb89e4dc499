//! Ground truth from the emulated disk (`iolab emudisk serve` under a direct-I/O loop
//! device): latency, flush cost, flush-dropping warnings, injected EIO and power loss. Root,
//! /dev/fuse and losetup needed (a counted skip elsewhere, a failure under
//! IOLAB_REQUIRE_DEVICE_TESTS=1).

use std::path::Path;

use iolab_testkit::{require_emudisk, warning_codes, CpuWait, EmuDisk, Sandbox, BUSY, MIB};
use serde_json::Value;

/// `iolab run ARGS --no-store --quiet --json -` and its document (any exit status).
fn run_json(sb: &Sandbox, args: &[&str]) -> (i32, Value, String) {
    let mut all: Vec<&str> = vec!["run"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--quiet", "--json", "-"]);
    let out = sb.cmd(&all).output().unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `iolab run custom` of 4 KiB random reads at QD1 on `disk`, `runs` passes of `duration`:
/// the document, and the CPU wait the machine's tasks met meanwhile (µs, [`CpuWait`]).
fn qd1_reads(sb: &Sandbox, disk: &EmuDisk, duration: &str, runs: &str) -> (Value, f64) {
    let wait = CpuWait::start();
    let (code, doc, err) = run_json(
        sb,
        &[
            "custom",
            "--rw",
            "randread",
            "--bs",
            "4k",
            "--iodepth",
            "1",
            "--target",
            disk.s(),
            "--size",
            "16MiB",
            "--duration",
            duration,
            "--ramp",
            "0",
            "--runs",
            runs,
            "--warmup",
            "0",
            "--allow-destroy-device",
            "--no-store",
        ],
    );
    let waited = wait.us();
    assert_eq!(code, 0, "{err}");
    (doc, waited)
}

/// 4 KiB random reads at QD1 on `disk` in `runs` passes of 1 s: the mean latency over
/// every I/O (µs), the median of the passes' p50s, the number of I/Os, and the CPU wait the
/// machine's tasks met meanwhile (µs, [`CpuWait`]).
fn qd1_read_latency(sb: &Sandbox, disk: &EmuDisk, runs: &str) -> (f64, f64, f64, f64) {
    let (doc, waited) = qd1_reads(sb, disk, "1s", runs);
    let passes = doc["tests"][0]["passes"].as_array().unwrap();
    let ios: f64 = passes.iter().map(|p| p["ios"].as_f64().unwrap()).sum();
    let mean = passes
        .iter()
        .map(|p| p["ios"].as_f64().unwrap() * p["lat_us"]["mean"].as_f64().unwrap())
        .sum::<f64>()
        / ios;
    let p50s: Vec<f64> = passes
        .iter()
        .map(|p| p["lat_us"]["p50"].as_f64().unwrap())
        .collect();
    (mean, iolab_testkit::median(&p50s), ios, waited)
}

/// The device's own clock (`served` in its stats) since the last `reset-served`: its
/// summary of `what` ("reads", "flushes" or "late") in µs.
fn served(disk: &EmuDisk, what: &str, key: &str) -> f64 {
    disk.stats()["served"][what][key].as_f64().unwrap()
}

/// iolab's latency is the device's plus the path's overhead. The device's own clock says
/// what each read took in the model (the truth a host with no overhead would see): iolab can
/// never see a read complete sooner (lower bound). Above it, iolab may add the overhead
/// measured on a zero-latency disk, 5%, and the scheduling delay the machine's tasks met
/// during the run ([`CpuWait`], spread over its I/Os, which at QD1 wait one after another):
/// a tight bound on a quiet machine that loosens exactly as much as the load made the truth
/// uncertain. The median may move by at most twice what the mean moves (Markov: at most
/// half the I/Os can be delayed by more than twice the mean delay).
#[test]
fn qd1_latency_equals_the_fixed_service_time() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let zero = EmuDisk::new(32 * MIB, r#"{"model":"fixed"}"#);
    let (o_mean, o_p50, _, _) = qd1_read_latency(&sb, &zero, "3");
    drop(zero);
    let t_us = 20000.0;
    let disk = EmuDisk::new(
        32 * MIB,
        r#"{"model":"fixed","read_latency":"20ms","write_latency":"20ms"}"#,
    );
    disk.ctl("reset-served");
    let (mean, p50, ios, waited) = qd1_read_latency(&sb, &disk, "3");
    let model_mean = served(&disk, "reads", "mean");
    let delay = waited / ios;
    println!(
        "overhead mean {o_mean:.1} µs p50 {o_p50:.1} µs; T = {t_us} µs (the model's own mean \
         {model_mean:.1}): mean {mean:.1} p50 {p50:.1} over {ios} I/Os; the machine's CPU \
         wait meanwhile {waited:.0} µs, {delay:.1} µs an I/O"
    );
    assert!(
        (model_mean - t_us).abs() <= 0.01 * t_us,
        "the model's own mean {model_mean} µs is not its fixed {t_us} µs"
    );
    for (what, got, base, sched) in [
        ("mean", mean, o_mean, delay),
        ("p50", p50, o_p50, 2.0 * delay),
    ] {
        assert!(
            got >= t_us * 0.995,
            "{what} {got:.1} µs is below the device's own {t_us} µs"
        );
        let bound = t_us * 1.05 + base + sched;
        assert!(
            got <= bound,
            "{what} {got:.1} µs is above {bound:.1} µs: {t_us} µs + 5% + the overhead \
             {base:.1} µs + the scheduling delay {sched:.1} µs"
        );
    }
    let reads = disk.stats()["counts"]["reads"].as_u64().unwrap();
    assert!(reads > 0, "the model served no read");
}

/// A latency distribution comes out where it was put. Two questions, each asked of the
/// clock that answers it: the model draws its percentiles right (its own clock, over every
/// read of the run; the draws themselves are checked exactly in the emudisk crate's unit
/// tests), and iolab reports the percentiles of what the device did: never below the
/// model's percentiles of the same reads, and above them by no more than 2% (the
/// histograms' resolution), three times the run's own mean excess over the model (which
/// carries the path's overhead), and the scheduling delay the machine's tasks met
/// ([`CpuWait`], per I/O; ten times it for p90, since a tenth of the I/Os may carry ten
/// times the mean delay).
#[test]
fn qd1_latency_percentiles_are_the_devices() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let disk = EmuDisk::new(
        32 * MIB,
        r#"{"model":"fixed","latency_percentiles":{"0":"18ms","50":"20ms","100":"24ms"}}"#,
    );
    disk.ctl("reset-served");
    let (doc, waited) = qd1_reads(&sb, &disk, "3s", "1");
    let pass = &doc["tests"][0]["passes"][0];
    let lat = &pass["lat_us"];
    let got = |k: &str| lat[k].as_f64().unwrap();
    let model = |k: &str| served(&disk, "reads", k);
    let excess = (got("mean") - model("mean")).max(0.0);
    let delay = waited / pass["ios"].as_f64().unwrap();
    println!(
        "iolab: mean {:.1} p50 {:.1} p90 {:.1} µs; the model's clock over {} reads: mean {:.1} \
         p50 {:.1} p90 {:.1} µs; iolab's mean excess {excess:.1} µs; CPU wait {delay:.1} µs \
         an I/O",
        got("mean"),
        got("p50"),
        got("p90"),
        model("count"),
        model("mean"),
        model("p50"),
        model("p90"),
    );
    // The model: ~150 draws from 18..24 ms with p50 at 20 ms and p90 at 23.2 ms.
    for (what, want) in [("p50", 20_000.0), ("p90", 23_200.0)] {
        let m = model(what);
        assert!(
            (m - want).abs() <= 0.06 * want,
            "the model's own {what} {m:.1} µs is not near {want} µs"
        );
    }
    for (what, sched) in [("p50", 2.0 * delay), ("p90", 10.0 * delay)] {
        let (g, m) = (got(what), model(what));
        assert!(
            g >= m * 0.99,
            "iolab's {what} {g:.1} µs is below the device's own {m:.1} µs"
        );
        let bound = m * 1.02 + 3.0 * excess + sched;
        assert!(
            g <= bound,
            "iolab's {what} {g:.1} µs is above {bound:.1} µs: the device's own {m:.1} µs + \
             2% + 3 x the run's mean excess {excess:.1} µs + the scheduling delay {sched:.1} µs"
        );
    }
}

/// ext4 on `disk`, mounted with `options`, for the probe.
fn ext4_on(disk: &EmuDisk, options: &str) -> iolab_testkit::Mount {
    iolab_testkit::sh("mkfs.ext4", &["-q", "-F", disk.s()]);
    iolab_testkit::Mount::new(disk.dev(), &["-o", options])
}

/// `iolab run fsync` with none and write+fdatasync at 4 KiB: the document.
fn probe(sb: &Sandbox, dir: &Path) -> Value {
    let (code, doc, err) = run_json(
        sb,
        &[
            "fsync",
            "--sizes",
            "4k",
            "--methods",
            "none,fdatasync",
            "--duration",
            "500ms",
            "--target",
            dir.to_str().unwrap(),
            "--no-store",
        ],
    );
    assert_eq!(code, 0, "{err}");
    doc
}

fn test_named<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no test {name}"))
}

#[test]
fn fsync_probe_flush_latency_is_the_configured_flush_cost() {
    let Some(_lock) = require_emudisk(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    // Writes cost nothing; every honoured flush costs 20 ms (the cache holds only a few
    // blocks, written at no cost).
    let disk = EmuDisk::new(
        64 * MIB,
        r#"{"model":"fixed","write_cache":"back","flush_latency":"20ms"}"#,
    );
    let m = ext4_on(&disk, "barrier=1");
    let before = disk.stats()["counts"]["flushes"].as_u64().unwrap();
    disk.ctl("reset-served");
    let wait = CpuWait::start();
    let doc = probe(&sb, &m.path());
    let waited = wait.us();
    let after = disk.stats()["counts"]["flushes"].as_u64().unwrap();
    let model_p50 = served(&disk, "flushes", "p50");
    let t = test_named(&doc, "write+fdatasync 4K");
    let p = &t["passes"][0];
    let ops = p["ios"].as_u64().unwrap();
    let flush_us = p["sync"]["lat_us"]["mean"].as_f64().unwrap();
    let flush_p50 = p["sync"]["lat_us"]["p50"].as_f64().unwrap();
    // The fdatasync calls wait one after another, each a chain of wake-ups (iolab, the
    // kernel, the FUSE daemon): the chain waits for a CPU only while some task does, so
    // the CPU wait measured over the whole run bounds what these calls waited together.
    // (Spread over both tests' calls, the no-sync test's thousands of cheap writes
    // included, the allowance vanished under load: 185 µs a call at load 13.)
    let delay = waited / ops as f64;
    println!(
        "fdatasync: {ops} calls, {} device flushes during the run, flush mean {flush_us:.0} µs \
         p50 {flush_p50:.0} µs; the device's own clock: flush p50 {model_p50:.0} µs; CPU wait \
         {delay:.1} µs a call",
        after - before
    );
    // One device flush per fdatasync (an in-place rewrite needs no journal commit).
    let per_call = (after - before) as f64 / ops as f64;
    assert!(
        (1.0..1.5).contains(&per_call),
        "{per_call} flushes per fdatasync"
    );
    // The model's flush is its configured cost; iolab's fdatasync is that flush and the
    // path to it: never less, and more by at most 5% and twice the scheduling delay per call
    // (Markov, as for the QD1 reads above).
    assert!(
        (model_p50 - 20_000.0).abs() <= 0.01 * 20_000.0,
        "the model's own flush p50 {model_p50:.0} µs is not the configured 20 ms"
    );
    assert!(
        flush_p50 >= model_p50 * 0.995,
        "fdatasync p50 {flush_p50:.0} µs is below the device's own flush {model_p50:.0} µs"
    );
    let bound = model_p50 * 1.05 + 2.0 * delay;
    assert!(
        flush_p50 <= bound,
        "fdatasync p50 {flush_p50:.0} µs is above {bound:.0} µs: the device's flush \
         {model_p50:.0} µs + 5% + the scheduling delay"
    );
}

/// [`probe`], with the CPU wait the machine's tasks met meanwhile ([`CpuWait`]) spread over
/// the fdatasync test's calls (µs a call): each call is a chain of wake-ups (iolab, the
/// kernel, the FUSE daemon) that waits for a CPU only while some task does.
fn probe_waited(sb: &Sandbox, dir: &Path) -> (Value, f64) {
    let wait = CpuWait::start();
    let doc = probe(sb, dir);
    let waited = wait.us();
    let t = test_named(&doc, "write+fdatasync 4K");
    let calls = t["passes"][0]["ios"].as_u64().unwrap().max(1);
    (doc, waited / calls as f64)
}

#[test]
fn flush_warnings_fire_exactly_when_the_disk_or_the_path_drops_flushes() {
    let Some(_lock) = require_emudisk(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let disk = EmuDisk::new(64 * MIB, r#"{"model":"hdd","write_cache":"back"}"#);
    let dropping = [
        "FSYNC_TOO_FAST",
        "FLUSH_NO_EFFECT",
        "NO_BARRIER",
        "WRITE_THROUGH_DROPS_FLUSH",
    ];
    let fired = |doc: &Value| -> Vec<String> {
        let mut got: Vec<String> = warning_codes(doc)
            .into_iter()
            .filter(|c| dropping.contains(&c.as_str()))
            .collect();
        got.sort();
        got
    };
    // What a probe on a path that drops flushes must raise: the warnings of what the path
    // says (`path_says`), whatever the timing; and FSYNC_TOO_FAST whenever the median flush
    // (over the passes, the warning's figure) came back under the floor, or the machine
    // left a free flush the time to: its CPU wait a call under half the floor. Only a
    // flush timed at the floor or above on a machine whose tasks waited that long may go
    // without it (beside five suites a free flush took 7.6 ms on average, and timing
    // cannot tell that from a platter); the durability verdict agrees with the warning.
    let floor = iolab_stats::warnings::FSYNC_FLOOR_ROTATIONAL_US;
    let must_raise = |what: &str, doc: &Value, delay: f64, path_says: &[&str]| {
        let t = test_named(doc, "write+fdatasync 4K");
        let p50s: Vec<f64> = t["passes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["sync"]["lat_us"]["p50"].as_f64().unwrap())
            .collect();
        let flush = iolab_testkit::median(&p50s);
        println!(
            "{what}: {} fdatasync/s, median flush {flush:.0} µs, CPU wait {delay:.0} µs a \
             call, warnings {:?}",
            t["summary"]["iops"],
            warning_codes(doc)
        );
        let mut want: Vec<String> = path_says.iter().map(|c| c.to_string()).collect();
        let got = fired(doc);
        let timed = got.iter().any(|c| c == "FSYNC_TOO_FAST");
        if timed || flush < floor || delay < floor / 2.0 {
            want.push("FSYNC_TOO_FAST".into());
        } else {
            println!("{what}: a free flush took the floor or more on a busy machine: not timed");
        }
        want.sort();
        assert_eq!(got, want, "{what}: {:?}", warning_codes(doc));
        let verdict = if timed {
            "cache_answered"
        } else {
            "as_far_as_timing_shows"
        };
        // (On a path that drops flushes the verdict is not_durable, whatever the timing.)
        if path_says.is_empty() {
            let found = &t["extra"]["durability"]["verdict"];
            assert_eq!(found, verdict, "{what}: {:#}", t["extra"]);
        }
    };
    // Honoured: a flush writes the cache to the platter, no warning.
    let m = ext4_on(&disk, "barrier=1");
    let doc = probe(&sb, &m.path());
    let t = test_named(&doc, "write+fdatasync 4K");
    println!(
        "honoured: {} fdatasync/s, flush {:.0} µs",
        t["summary"]["iops"], t["passes"][0]["sync"]["lat_us"]["mean"]
    );
    assert_eq!(fired(&doc), Vec::<String>::new());
    assert_eq!(
        t["extra"]["durability"]["verdict"],
        "as_far_as_timing_shows"
    );
    // The disk lies: flushes come back at once from a rotational device.
    disk.ctl("ignore-flush on");
    let (doc, delay) = probe_waited(&sb, &m.path());
    must_raise("ignored", &doc, delay, &[]);
    // The daemon's CPU is the device's work (its model), never another process's.
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", disk.pid())).unwrap();
    assert_eq!(comm.trim(), "iolab-emudisk");
    for t in doc["tests"].as_array().unwrap() {
        for p in t["passes"].as_array().unwrap() {
            let top = &p["context"]["activity"]["top_processes"];
            assert!(
                top.as_array()
                    .is_none_or(|v| v.iter().all(|x| x["pid"] != disk.pid())),
                "the emulated disk's daemon counted as another process: {top}"
            );
        }
    }
    disk.ctl("ignore-flush off");
    // barrier=0: the filesystem sends no flush.
    m.remount("barrier=0");
    let (doc, delay) = probe_waited(&sb, &m.path());
    must_raise("barrier=0", &doc, delay, &["NO_BARRIER"]);
    m.remount("barrier=1");
    // A write-through queue: the block layer drops the flushes.
    let q = format!(
        "/sys/block/{}/queue/write_cache",
        disk.dev().file_name().unwrap().to_str().unwrap()
    );
    std::fs::write(&q, "write through").unwrap();
    let (doc, delay) = probe_waited(&sb, &m.path());
    std::fs::write(&q, "write back").unwrap();
    must_raise("write through", &doc, delay, &["WRITE_THROUGH_DROPS_FLUSH"]);
}

/// The stored run `id` as JSON.
fn stored(sb: &Sandbox, id: &str) -> Value {
    let out = sb.iolab(&["show", id, "--json"]).ok();
    serde_json::from_str(&out.stdout).unwrap()
}

#[test]
fn injected_eio_fails_the_run_naming_errno_and_offset_and_stores_it_failed() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let disk = EmuDisk::new(32 * MIB, r#"{"model":"fixed"}"#);
    let at = "offset 4194304";
    // Reads of 4 MiB .. 4 MiB + 4 KiB fail.
    disk.ctl("fault read sectors 8192-8200");
    let common = ["--runs", "1", "--allow-destroy-device"];
    let mut read = vec![
        "run",
        "custom",
        "--rw",
        "read",
        "--bs",
        "64k",
        "--target",
        disk.s(),
    ];
    read.extend_from_slice(&[
        "--size",
        "16MiB",
        "--duration",
        "1s",
        "--ramp",
        "0",
        "--warmup",
        "0",
    ]);
    read.extend_from_slice(&common);
    let out = sb.iolab(&read).code(1);
    out.stderr_has(&["Input/output error", "errno 5", at]);
    // Stored, as failed, with what it finished.
    let doc = stored(&sb, "1");
    assert_eq!(doc["complete"], false);
    let notes = doc["notes"].to_string();
    assert!(notes.contains("failed:") && notes.contains(at), "{notes}");
    // Writes: run verify fails at the first bad block, stored failed.
    disk.ctl("clear-faults");
    disk.ctl("fault write sectors 8192-8200");
    let mut verify = vec!["run", "verify", "--target", disk.s(), "--size", "8MiB"];
    verify.extend_from_slice(&common);
    let out = sb.iolab(&verify).code(1);
    out.stderr_has(&["Input/output error", at]);
    assert!(stored(&sb, "2")["notes"].to_string().contains("failed:"));
    // The read-back of verify: the blocks were written, reading one fails; the integrity
    // verdict names it (exit 3).
    disk.ctl("clear-faults");
    disk.ctl("fault read sectors 8192-8200");
    let out = sb.iolab(&verify).code(3);
    assert!(
        out.stdout.contains("offset 4194304 [read-error]"),
        "{}",
        out.stdout
    );
    let s = disk.stats();
    println!("emulated disk counts: {}", s["counts"]);
    assert!(s["counts"]["errors_read"].as_u64().unwrap() >= 2);
    assert!(s["counts"]["errors_write"].as_u64().unwrap() >= 1);
    // Nothing of iolab's is left in the sandbox's target directory.
    assert!(sb.target_entries().is_empty());
}

/// One simulated power cut under `iolab run verify --journal` on `disk`: the writer runs
/// until its journal holds `cut_at` bytes, the power goes (tearing a write when `tear`), the
/// writer is killed, the power comes back and `iolab verify --journal` checks what the disk
/// kept. Returns the check's report and the ranges the model dropped.
fn cut(
    sb: &Sandbox,
    disk: &EmuDisk,
    n: usize,
    cut_at: u64,
    tear: bool,
) -> (Value, Vec<(u64, u64)>) {
    let journal = sb.path(&format!("cut{n}.journal"));
    let mut child = sb
        .cmd(&[
            "run",
            "verify",
            "--target",
            disk.s(),
            "--size",
            "4MiB",
            "--journal",
            journal.to_str().unwrap(),
            "--fsync-every",
            "16",
            "--runs",
            "1000",
            "--allow-destroy-device",
            "--no-store",
            "--quiet",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Progress, not time, decides the cut: the journal's size, then the moment the disk's
    // cache holds writes not yet flushed.
    loop {
        let len = std::fs::metadata(&journal).map(|m| m.len()).unwrap_or(0);
        if len >= cut_at && disk.stats()["cached_bytes"].as_u64().unwrap() > 0 {
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the writer ended before the cut ({st})");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let loss = disk.power_loss(tear);
    let _ = child.kill();
    let _ = child.wait();
    disk.power_on();
    let dropped: Vec<(u64, u64)> = loss["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap()))
        .collect();
    let out = sb.iolab(&[
        "verify",
        "--target",
        disk.s(),
        "--journal",
        journal.to_str().unwrap(),
        "--json",
    ]);
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|_| panic!("{out}"));
    (doc["report"].clone(), dropped)
}

/// Cut points: `IOLAB_EMU_CUTS` (bench/emudisk-powerloss.sh runs 50), else 8.
fn cuts() -> usize {
    std::env::var("IOLAB_EMU_CUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// A 16 MiB disk with a 1 MiB write-back cache (writes 50 µs) that honours flushes or not.
fn cached_disk(ignore_flush: bool) -> EmuDisk {
    EmuDisk::new(
        16 * MIB,
        &format!(
            r#"{{"model":"fixed","write_latency":"50us","write_cache":"back","cache_size":"1MiB","ignore_flush":{ignore_flush},"seed":7}}"#
        ),
    )
}

#[test]
fn power_loss_loses_no_acknowledged_write_when_flushes_are_honoured() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let disk = cached_disk(false);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let (mut acked, mut dropped_total, mut in_flight) = (0, 0, 0);
    let n = cuts();
    for i in 0..n {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let cut_at = 4096 + rng % (96 * 1024);
        let (report, dropped) = cut(&sb, &disk, i, cut_at, i % 2 == 1);
        let lost = report["lost_acked"].as_u64().unwrap();
        assert_eq!(
            lost, 0,
            "cut {i} at journal byte {cut_at}: {lost} acknowledged writes lost: {report}"
        );
        acked += report["acked"].as_u64().unwrap();
        in_flight += report["in_flight"].as_u64().unwrap();
        dropped_total += dropped.len();
    }
    println!(
        "{n} cuts: 0 lost of {acked} acknowledged blocks checked; the model dropped {dropped_total} \
         unflushed writes; {in_flight} blocks were in flight"
    );
    assert!(acked > 0);
    assert!(
        dropped_total > 0,
        "no cut found unflushed data in the cache: the test showed nothing"
    );
}

#[test]
fn power_loss_with_ignored_flushes_loses_only_what_the_model_dropped() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let disk = cached_disk(true);
    let mut found = 0;
    for (i, cut_at) in [48 * 1024u64, 80 * 1024, 120 * 1024]
        .into_iter()
        .enumerate()
    {
        let (report, dropped) = cut(&sb, &disk, i, cut_at, false);
        let lost = report["lost_acked"].as_u64().unwrap();
        let blocks: u64 = dropped.iter().map(|d| d.1 / 4096).sum();
        assert!(
            lost <= blocks,
            "{lost} lost acknowledged writes but the model dropped {blocks} blocks"
        );
        // Every reported loss (the report samples them) lies in a dropped range.
        for f in report["tally"]["failures"].as_array().unwrap() {
            assert_eq!(f["class"], "lost-ack", "{f}");
            let off = f["offset"].as_u64().unwrap();
            assert!(
                dropped
                    .iter()
                    .any(|&(o, l)| off >= o && off + 4096 <= o + l),
                "lost write at {off} is not among the {} ranges the model dropped",
                dropped.len()
            );
        }
        found += lost;
    }
    println!("ignored flushes: {found} lost acknowledged writes found, all among the dropped");
    assert!(
        found > 0,
        "a lying disk lost nothing: the test showed nothing"
    );
}

/// What a study with pid `pid` left: mounts, loop devices, directories under /var/tmp and
/// processes (the run, the emulated disk's daemon) naming its testbed.
fn left_by(pid: u32) -> Vec<String> {
    let tag = format!("iolab-testbed-{pid}-");
    let mut out: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&tag))
        .map(|l| format!("mount: {l}"))
        .collect();
    let loops = iolab_testkit::sh("losetup", &["-a"]);
    out.extend(
        loops
            .lines()
            .filter(|l| l.contains(&tag))
            .map(|l| format!("loop: {l}")),
    );
    for e in std::fs::read_dir("/var/tmp").unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.contains(&tag) {
            out.push(format!("dir: /var/tmp/{n}"));
        }
    }
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(&tag) {
                out.push(format!("process: {cmd}"));
            }
        }
    }
    out
}

fn until(what: &str, f: impl FnMut() -> bool) {
    until_or(what, String::new, f)
}

/// [`until`], saying what `describe` finds when it times out.
fn until_or(what: &str, describe: impl Fn() -> String, mut f: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !f() {
        if start.elapsed() >= std::time::Duration::from_secs(60) {
            panic!("timed out waiting for {what}\n{}", describe());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The state of the runs a study with pid `pid` started: each process's status (state,
/// parent, signals pending, blocked and caught) and the kernel stack of every thread.
fn described_runs(pid: u32) -> impl Fn() -> String {
    let tag = format!("iolab-testbed-{pid}-");
    move || {
        let mut out = String::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !cmd.contains(&tag) {
                continue;
            }
            out.push_str(&format!("{}: {cmd}\n", e.path().display()));
            let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
            for l in status.lines().filter(|l| {
                [
                    "State", "PPid", "SigQ", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt",
                ]
                .iter()
                .any(|k| l.starts_with(&format!("{k}:")))
            }) {
                out.push_str(&format!("  {l}\n"));
            }
            for t in std::fs::read_dir(e.path().join("task"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                let stack = std::fs::read_to_string(t.path().join("stack")).unwrap_or_default();
                let first: Vec<&str> = stack.lines().take(6).collect();
                out.push_str(&format!(
                    "  task {} {}: {}\n",
                    t.file_name().to_string_lossy(),
                    comm.trim(),
                    first.join(" < ")
                ));
            }
        }
        out
    }
}

fn study_file(sb: &Sandbox, duration: &str) -> String {
    let p = sb.path(&format!("emu-{duration}.toml"));
    std::fs::write(
        &p,
        format!(
            r#"name = "t-emulated"
[testbed]
kind = "loop"
size = "64MiB"
fs = "ext4"
[testbed.emulated]
model = "hdd"
rpm = 7200
write_cache = "back"
cache_size = "4MiB"
[[workload]]
kind = "fsync"
sizes = ["4k"]
methods = ["fdatasync"]
duration = "{duration}"
"#
        ),
    )
    .unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn a_study_runs_on_an_emulated_disk_and_cleanup_removes_it_after_kill_9() {
    let Some(_lock) = require_emudisk(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    // A whole study: built, measured, torn down; the run records the disk.
    let f = study_file(&sb, "300ms");
    let child = sb.cmd(&["study", &f]).output().unwrap();
    assert!(
        child.status.success(),
        "{}",
        String::from_utf8_lossy(&child.stderr)
    );
    // The report says which disk it was.
    let report = String::from_utf8_lossy(&child.stdout);
    assert!(
        report.contains("on an emulated hdd 7200 rpm, write-back cache 4 MiB"),
        "{report}"
    );
    let doc = stored(&sb, "1");
    let devices = doc["env"]["target"]["devices"].to_string();
    assert!(
        devices.contains("emulated hdd 7200 rpm, write-back cache 4 MiB"),
        "{devices}"
    );
    // Killed with SIGKILL while measuring: the daemon, its FUSE mount and the loop device
    // stay until `iolab cleanup`.
    let f = study_file(&sb, "60s");
    let mut child = sb
        .cmd(&["study", &f])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    until("a running workload", || {
        left_by(pid)
            .iter()
            .any(|l| l.starts_with("process") && l.contains(" run fsync "))
    });
    child.kill().unwrap();
    child.wait().unwrap();
    until_or("the run to exit", described_runs(pid), || {
        !left_by(pid)
            .iter()
            .any(|l| l.starts_with("process") && l.contains(" run fsync "))
    });
    let left = left_by(pid);
    for what in ["emudisk serve", "iolab-emudisk:"] {
        assert!(left.iter().any(|l| l.contains(what)), "{what}: {left:?}");
    }
    sb.iolab(&["cleanup"]).ok();
    let left = left_by(pid);
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn bad_emulated_keys_are_refused_with_file_line_and_key() {
    let sb = Sandbox::new();
    for (line, key) in [
        ("read_latency = \"1ms\"", "testbed.emulated.read_latency"),
        ("rpm = 0", "testbed.emulated.rpm"),
        ("rpm = 99999999999", "testbed.emulated"),
        ("cache_size = \"1MiB\"", "testbed.emulated.cache_size"),
        ("track_seek = \"1h\"", "testbed.emulated.track_seek"),
        ("transfer_rate = \"0\"", "testbed.emulated.transfer_rate"),
        ("write_cache = \"sometimes\"", "testbed.emulated"),
        (
            "errors = [{ op = \"read\", sectors = \"5-2\" }]",
            "testbed.emulated.errors[0]",
        ),
        (
            "errors = [{ op = \"read\", probability = 2.0 }]",
            "testbed.emulated.errors[0]",
        ),
    ] {
        let p = sb.path("bad.toml");
        std::fs::write(
            &p,
            format!(
                "name = \"x\"\n[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\n\
                 [testbed.emulated]\nmodel = \"hdd\"\n{line}\n[[workload]]\nkind = \"fsync\"\n"
            ),
        )
        .unwrap();
        let out = sb
            .iolab(&["study", "--dry-run", p.to_str().unwrap()])
            .code(2);
        let file = p.to_str().unwrap();
        assert!(
            out.stderr.contains(&format!("{file}:")) && out.stderr.contains(key),
            "{line}: {}",
            out.stderr
        );
    }
    // Cache and large sizes: refused, not allocated.
    let p = sb.path("huge.toml");
    std::fs::write(
        &p,
        "name = \"x\"\n[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\n[testbed.emulated]\n\
         model = \"ssd\"\nwrite_cache = \"back\"\ncache_size = \"100TiB\"\nparallelism = 100000\n\
         [[workload]]\nkind = \"fsync\"\n",
    )
    .unwrap();
    let out = sb
        .iolab(&["study", "--dry-run", p.to_str().unwrap()])
        .code(2);
    assert!(
        out.stderr.contains(":8: testbed.emulated.cache_size")
            || out.stderr.contains("parallelism"),
        "{}",
        out.stderr
    );
    // The daemon itself refuses a bad spec (exit 1, naming it) before mounting anything.
    let out = std::process::Command::new(iolab_testkit::iolab::iolab_bin())
        .args([
            "emudisk",
            "serve",
            "--dir",
            "/nonexistent",
            "--backing",
            "/nonexistent",
        ])
        .args(["--spec", "{\"model\":\"tape\"}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--spec") && err.contains("tape"), "{err}");
}

/// An SSD whose 48 MiB fast cache takes writes at 32 MiB/s (4 lanes at 8 MiB/s), then
/// 8 MiB/s (64 KiB in 31.25 ms a lane), and recovers 16 MiB/s once idle 50 ms: wholly in
/// 3.05 s.
const CACHED_SSD: &str = r#"{"model":"ssd","parallelism":4,"transfer_rate":"8MiB","fast_cache":"48MiB","fast_write_latency":"0s","write_latency":"23.4375ms","fast_cache_recovery":"16MiB"}"#;
const SSD_BURST_MB_S: f64 = 32.0 * MIB as f64 / 1e6;
const SSD_SUSTAINED_MB_S: f64 = 8.0 * MIB as f64 / 1e6;
const SSD_RECOVERY_S: f64 = 3.05;
const SSD_CACHE: u64 = 48 * MIB;

/// The size in a message's "first N MiB" (KiB, MiB or GiB), in bytes.
fn first_bytes(message: &str) -> f64 {
    let rest = message.split("for the first ").nth(1).expect(message);
    let mut words = rest.split(' ');
    let n: f64 = words.next().unwrap().parse().expect(message);
    n * match words.next().unwrap() {
        "KiB" => 1024.0,
        "MiB" => MIB as f64,
        "GiB" => (1u64 << 30) as f64,
        u => panic!("unit {u} in {message}"),
    }
}

/// Ground truth of the cliff (issue 27). A write test on the cached SSD: RATE_CLIFF says
/// where the cache filled (the bytes of its series before the drop). `run sustained` on the
/// same disk: the burst's bytes and rate, the sustained rate, and after a 1.5 s pause the
/// burst back in part and the time the cache takes to recover wholly. The bounds are the
/// model's figures with room for a loaded 2-core machine (a busy host can slow the burst,
/// never speed it up; docs/benchmarks.md has the figures of quiet runs), and no cliff on a
/// plain loop device. A loaded host can hide the cliff, never make one: each measurement
/// gets up to three tries.
#[test]
fn a_fast_cache_shows_a_cliff_a_sustained_rate_and_its_recovery() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let write = |target: &str, duration: &str| {
        let (code, doc, err) = run_json(
            &sb,
            &[
                "custom",
                "--rw",
                "write",
                "--bs",
                "64k",
                "--iodepth",
                "32",
                "--target",
                target,
                "--size",
                "64MiB",
                "--duration",
                duration,
                "--ramp",
                "0",
                "--runs",
                "1",
                "--warmup",
                "0",
                "--allow-destroy-device",
                "--no-store",
            ],
        );
        assert_eq!(code, 0, "{err}");
        doc
    };
    let plain = iolab_testkit::Loop::with_options(64 * MIB, &["--direct-io=on"]);
    let doc = write(plain.dev.to_str().unwrap(), "1s");
    assert!(
        !warning_codes(&doc).contains(&"RATE_CLIFF".to_string()),
        "a plain loop device has no cache to fill: {:#}",
        doc["warnings"]
    );
    drop(plain);

    // A loaded host can hide the cliff (dips in the burst when it cannot keep 32 I/Os in
    // flight), never make one: up to three tries, each on a recovered cache.
    let disk = EmuDisk::new(128 * MIB, CACHED_SSD);
    let mut seen = Vec::new();
    let cliff = (0..3)
        .find_map(|_| {
            // A fresh disk's cache is empty; after a try it recovers (wholly in 3.05 s).
            if disk.stats()["counts"]["write_bytes"].as_u64().unwrap() > 0 {
                std::thread::sleep(std::time::Duration::from_secs(4));
            }
            let doc = write(disk.s(), "3500ms");
            seen.push(doc["tests"][0]["passes"][0]["timeseries"]["mb_s"].clone());
            doc["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|w| w["code"] == "RATE_CLIFF")
                .cloned()
        })
        .unwrap_or_else(|| panic!("no RATE_CLIFF in three tries: {seen:?}"));
    let msg = cliff["message"].as_str().unwrap();
    assert!(msg.starts_with("writes ran at "), "{msg}");
    let at = first_bytes(msg) / SSD_CACHE as f64;
    assert!((0.8..1.25).contains(&at), "{msg}: the cache is 48 MiB");

    let sustained = || {
        std::thread::sleep(std::time::Duration::from_secs(4)); // the cache recovers wholly
        let (code, doc, err) = run_json(
            &sb,
            &[
                "sustained",
                "--rw",
                "write",
                "--bs",
                "64k",
                "--iodepth",
                "32",
                "--target",
                disk.s(),
                "--size",
                "96MiB",
                "--idle",
                "1500ms",
                "--max-time",
                "30s",
                "--allow-destroy-device",
                "--no-store",
            ],
        );
        assert_eq!(code, 0, "{err}");
        doc
    };
    let wait = CpuWait::start();
    let started = std::time::Instant::now();
    let mut doc = sustained();
    for _ in 0..2 {
        if !doc["tests"][0]["extra"]["sustained"]["burst_bytes"].is_null() {
            break;
        }
        doc = sustained();
    }
    // The share of the runs the machine's tasks waited for a CPU: a starved host leaves
    // the device idle while its cache recovers, so the rates come out off the model's
    // either way (beside five suites and stress-ng: 9.70 MB/s sustained, 1.155 of it).
    let busy = wait.busy_since(started);
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2, "{doc:#}");
    let s = &tests[0]["extra"]["sustained"];
    let r = &tests[1]["extra"]["recovery"];
    let num = |v: &Value, k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{k}: {v:#}"));
    let bytes = num(s, "burst_bytes") / SSD_CACHE as f64;
    assert!((0.8..1.25).contains(&bytes), "burst bytes: {s:#}");
    let burst = num(s, "burst_mb_s") / SSD_BURST_MB_S;
    let sustained = num(s, "sustained_mb_s") / SSD_SUSTAINED_MB_S;
    if busy < BUSY {
        assert!((0.6..1.1).contains(&burst), "burst rate: {s:#}");
        assert!((0.85..1.15).contains(&sustained), "sustained rate: {s:#}");
    } else {
        println!(
            "the machine busy {:.0}% of the runs: burst {burst:.2} and sustained {sustained:.2} \
             of the model's rates, not checked",
            busy * 100.0
        );
    }
    assert_eq!(s["steady"], true, "{s:#}");
    assert_eq!(s["stopped"], "steady", "{s:#}");
    // The window the pass ended on, from its progress ticks, stands in for the stored
    // series' only when late ticks can explain the difference: on a busy machine.
    if s["judged_on_ticks"] == true {
        assert!(busy >= BUSY, "CPU wait {:.0}%: {s:#}", busy * 100.0);
        println!("note: the steady window comes from the pass's ticks: {s:#}");
    }
    // The recovery's figures follow from the bytes regained: a share of the first burst,
    // over the idle time.
    let (share, idle) = (num(r, "share"), num(r, "idle_s"));
    assert_eq!(num(r, "first_burst_bytes"), num(s, "burst_bytes"), "{r:#}");
    let regained = num(r, "burst_bytes");
    assert!(
        (share - regained / num(r, "first_burst_bytes")).abs() < 1e-9,
        "{r:#}"
    );
    assert!(
        (num(r, "recovery_mb_s") - regained / 1e6 / idle).abs() < 1e-6,
        "{r:#}"
    );
    // 1.5 s idle brings back about half of the burst; at that rate the whole takes 3.05 s.
    // The regained burst ends where the rate stays low for a second, which a starved host
    // does too (beside five suites and stress-ng: 29% of the burst back, 5.28 s to
    // recover), so its figures are the model's only on a machine that was not busy.
    assert_eq!(r["recovered_within_idle"], share >= 0.9, "{r:#}");
    if share < 0.9 {
        assert!((num(r, "recovery_s") - idle / share).abs() < 1e-6, "{r:#}");
    }
    if busy < BUSY {
        assert!((0.25..0.9).contains(&share), "regained share: {r:#}");
        let recovery = num(r, "recovery_s") / SSD_RECOVERY_S;
        assert!((0.6..1.5).contains(&recovery), "recovery time: {r:#}");
    } else {
        println!(
            "the machine busy {:.0}% of the runs: {share:.2} of the burst regained ({r}), not \
             checked against the model",
            busy * 100.0
        );
    }
    let notes = doc["notes"].to_string();
    assert!(notes.contains("then sustained"), "{notes}");
    assert!(notes.contains("recovers wholly in"), "{notes}");
}

/// [`CACHED_SSD`] with an 8 MiB fast cache: a quarter of a second of burst.
const SMALL_CACHE_SSD: &str = r#"{"model":"ssd","parallelism":4,"transfer_rate":"8MiB","fast_cache":"8MiB","fast_write_latency":"0s","write_latency":"23.4375ms","fast_cache_recovery":"16MiB"}"#;

/// `--steady-state` on an SSD whose cache fills (issue 27): the rounds are stretches of one
/// continuous pass, so the device never idles between two of them and regains no cache;
/// the window holds only after the cache filled (the bytes before it are more than the
/// cache), and its mean is the model's sustained rate within 5%, on a machine whose tasks
/// waited for a CPU less than a quarter of the run ([`CpuWait`]); on a busier one the host
/// leaves the lanes idle and the cache recovers meanwhile, so only the rounds' own report
/// is checked. Rounds of
/// separate passes read 27-57% high here (docs/benchmarks.md, "Steady state").
#[test]
fn steady_state_on_a_fast_cache_reads_the_rate_after_the_cliff() {
    let Some(_lock) = require_emudisk(&[]) else {
        return;
    };
    let sb = Sandbox::new();
    let disk = EmuDisk::new(64 * MIB, SMALL_CACHE_SSD);
    let line = format!(
        "custom --rw write --bs 64k --iodepth 32 --target {} --size 32MiB --duration 500ms \
         --ramp 0 --warmup 0 --steady-state --allow-destroy-device --no-store",
        disk.s()
    );
    let wait = CpuWait::start();
    let started = std::time::Instant::now();
    let (code, doc, err) = run_json(&sb, &line.split_whitespace().collect::<Vec<_>>());
    // The share of the run the machine's tasks spent waiting for a CPU: the device's rate is
    // the model's only while the host keeps 32 writes queued on it, and a host held off the
    // CPU leaves its lanes idle (the device cannot see that: nothing has arrived).
    let busy = wait.busy_since(started);
    assert_eq!(code, 0, "{err}");
    let test = &doc["tests"][0];
    let ss = &test["extra"]["steady_state"];
    let passes = test["passes"].as_array().unwrap();
    assert_eq!(passes.len(), 1, "one continuous pass: {ss:#}");
    let series = &passes[0]["timeseries"];
    // On a machine whose tasks waited for a CPU a quarter of the run or more, the model's
    // rate is not what the host saw: idle lanes lower it, and the cache, recovering while
    // the lanes idle, then lifts it (beside a disk hog and another suite: windows at 1.08
    // and 1.14 of the model, or none that held). Only what the rounds report is checked.
    if busy >= BUSY {
        println!(
            "the machine busy {:.0}% of the run: attained {}, window mean {} MB/s",
            busy * 100.0,
            ss["attained"],
            ss["window_mean_mb_s"]
        );
        if ss["attained"] != true {
            return;
        }
    } else {
        assert_eq!(
            ss["attained"],
            true,
            "not attained on a machine busy only {:.0}% of the run: {ss:#} {}",
            busy * 100.0,
            series["mb_s"]
        );
        // The window starts after the cache filled: more than 8 MiB went before it.
        let start = ss["window_start_s"].as_f64().unwrap();
        let before: u64 = series["bytes"].as_array().unwrap()[..(start / 0.1).round() as usize]
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert!(before > 8 * MIB, "{before} bytes before the window: {ss:#}");
        let mean = ss["window_mean_mb_s"].as_f64().unwrap() / SSD_SUSTAINED_MB_S;
        assert!(
            (0.95..=1.05).contains(&mean),
            "{mean} of the model's rate (the machine busy {:.0}% of the run): {ss:#}",
            busy * 100.0
        );
    }
    let round = ss["round"].as_u64().unwrap();
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains(&format!("attained in rounds {round}-{}", round + 4)),
        "{notes}"
    );
}
