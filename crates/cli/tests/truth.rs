//! Output that matches what was measured, end to end on real targets: the header counts the
//! passes `--until-stable` actually ran; the fsync probe's durability verdict agrees with the
//! warnings about the same flushes (a "rotational" loop device whose flushes end in memory);
//! direct writes that a cache below the OS answered (a loop device without direct I/O over
//! a throttled one) are flagged with their numbers, and the same device with direct I/O on
//! is not.

use std::os::unix::process::CommandExt;
use std::path::Path;

use iolab_testkit::*;
use serde_json::Value;

fn warnings_of<'a>(doc: &'a Value, code: &str) -> Vec<&'a Value> {
    arr(doc, "warnings")
        .iter()
        .filter(|w| w["code"] == code)
        .collect()
}

#[test]
fn until_stable_headers_count_the_passes_that_ran() {
    let sb = Sandbox::new();
    let target = sb.target.to_str().unwrap();
    // A CI of ±0.0001% is never reached: every test runs to --max-runs, past --runs.
    let args = [
        "run",
        "custom",
        "--rw",
        "read",
        "--bs",
        "64k",
        "--size",
        "4MiB",
        "--duration",
        "100ms",
        "--runs",
        "2",
        "--warmup",
        "0",
        "--until-stable",
        "0.0001",
        "--max-runs",
        "5",
        "--max-time",
        "60s",
        "--target",
        target,
        "--quiet",
    ];
    let out = sb.iolab(&args).ok();
    let ran = {
        let id = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("stored as run "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap()
            .to_string();
        let doc = sb.iolab(&["show", &id, "--json"]).ok().json();
        arr(&arr(&doc, "tests")[0], "passes").len()
    };
    assert_eq!(ran, 5, "{}", out.stdout);
    // The "Passes:" line and its wrapped continuation lines, joined.
    let passes = out
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Passes:"))
        .enumerate()
        .take_while(|(i, l)| *i == 0 || l.starts_with(' '))
        .map(|(_, l)| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        passes.contains("5 × 100ms measured") && passes.contains("0 of 1 test converged"),
        "{passes}"
    );
    assert!(
        out.stdout.contains("headline = median of 5 passes"),
        "{}",
        out.stdout
    );
}

/// `iolab <args>` inside the blkio cgroup `cg` (the child joins it before exec, so every
/// thread it starts is throttled); its JSON document.
fn in_cgroup(sb: &Sandbox, cg: &Cgroup, args: &[&str]) -> Value {
    let mut cmd = sb.cmd(args);
    // Opened before the fork: between fork and exec the child only calls write(2), which is
    // async-signal-safe; "0" moves the writing process itself.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(cg.dir.join("cgroup.procs"))
        .unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    // SAFETY: see above; `file` outlives the spawn.
    unsafe {
        cmd.pre_exec(move || {
            if libc::write(fd, b"0\n".as_ptr().cast(), 2) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    drop(file);
    assert!(
        out.status.success(),
        "iolab failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// A loop device over a sparse image of `size` bytes in /dev/shm (memory), with the
/// directory that holds the image (dropped after the device); None without /dev/shm.
fn memory_loop(size: u64) -> Option<(tempfile::TempDir, Loop)> {
    if !Path::new("/dev/shm").is_dir() {
        return None;
    }
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let img = dir.path().join("memory.img");
    std::fs::File::create(&img).unwrap().set_len(size).unwrap();
    let dev = Loop::attach(&img, &[]);
    Some((dir, dev))
}

#[test]
fn direct_writes_a_cache_below_answered_are_flagged_with_their_numbers() {
    let Some(_lock) = require_devices(&[]) else {
        return;
    };
    if !Cgroup::blkio_available() {
        skip!("no cgroup-v1 blkio hierarchy at {}", Cgroup::BLKIO);
    }
    // The medium: a loop device over memory capped at 8 MiB/s both ways for this test's
    // cgroup (memory, so that no cache of the build machine's disk takes part).
    let Some((_shm, medium)) = memory_loop(64 * MIB) else {
        skip!("no /dev/shm");
    };
    let cg = Cgroup::blkio(&format!("iolab-truth-wfr-{}", std::process::id()));
    for file in [
        "blkio.throttle.read_bps_device",
        "blkio.throttle.write_bps_device",
    ] {
        cg.set(file, &format!("{} {}", medium.majmin(), 8 * MIB));
    }
    let sb = Sandbox::new();
    let run = |dev: &Loop| {
        in_cgroup(
            &sb,
            &cg,
            &[
                "run",
                "cdm-real",
                "--target",
                dev.s(),
                "--allow-destroy-device",
                "--size",
                "16MiB",
                "--duration",
                "500ms",
                "--runs",
                "1",
                "--warmup",
                "0",
                "--no-store",
                "--quiet",
                "--json",
                "-",
            ],
        )
    };
    // Without direct I/O, the loop device above it writes into the medium's page cache and
    // reads what is not there from the capped medium.
    let cached = Loop::attach(&medium.dev, &[]);
    let doc = run(&cached);
    let hits = warnings_of(&doc, "WRITES_FASTER_THAN_READS");
    assert_eq!(hits.len(), 1, "{:#}", doc["warnings"]);
    let msg = hits[0]["message"].as_str().unwrap();
    println!("{msg}");
    assert!(msg.contains("SEQ1M Q1T1: writes "), "{msg}");
    let read = arr(&doc, "tests")
        .iter()
        .find(|t| t["name"] == "SEQ1M Q1T1 Read")
        .unwrap()["summary"]["mb_s"]
        .as_f64()
        .unwrap();
    assert!(
        msg.contains(&format!("reads {read:.1} MB/s")),
        "{msg} lacks the read rate {read:.1}"
    );
    assert!(hits[0]["fix"].as_str().unwrap().contains("--fsync 1"));
    drop(cached);
    // With direct I/O both directions reach the capped medium: nothing to flag. Unless the
    // reads were starved of CPU: beside four other suites a 500 ms read pass completed one
    // 1 MiB read (2.1 MB/s against writes at the cap). The run then says the machine was
    // busy for the read test, and only a machine whose tasks waited for a CPU a quarter of
    // the run or more may give that.
    let direct = Loop::attach(&medium.dev, &["--direct-io=on"]);
    let (wait, started) = (CpuWait::start(), std::time::Instant::now());
    let doc = run(&direct);
    let busy = wait.busy_since(started);
    let hits = warnings_of(&doc, "WRITES_FASTER_THAN_READS");
    assert!(hits.len() <= 1, "{:#}", doc["warnings"]);
    if let Some(hit) = hits.first() {
        let starved = warnings_of(&doc, "BUSY_CPU")
            .iter()
            .any(|w| w["test"] == "SEQ1M Q1T1 Read");
        assert!(
            busy >= BUSY && starved,
            "CPU wait {:.0}% of the run: {:#}",
            busy * 100.0,
            doc["warnings"]
        );
        // And the warning itself names the starved reads as the other explanation.
        let msg = hit["message"].as_str().unwrap();
        assert!(
            msg.contains("held off the CPU") && msg.contains("during SEQ1M Q1T1 Read"),
            "{msg}"
        );
        println!(
            "note: CPU wait {:.0}% of the run: the direct reads were starved: {:#}",
            busy * 100.0,
            doc["warnings"]
        );
    }
}

#[test]
fn the_fsync_verdict_agrees_with_the_flush_warnings() {
    let Some(_lock) = require_devices(&["mkfs.ext4"]) else {
        return;
    };
    // A volatile cache below a device that says it is a disk: ext4 on a loop device marked
    // rotational, whose flushes end in another loop device's backing file in memory. The
    // backing file of the top device is a block device, so nothing in its own chain says
    // "memory": only the timing can tell.
    let Some((_shm, memory)) = memory_loop(96 * MIB) else {
        skip!("no /dev/shm");
    };
    let disk = Loop::attach(&memory.dev, &[]);
    let rotational = QueueSetting::of(&disk.name(), "rotational");
    rotational.set("1");
    sh("mkfs.ext4", &["-q", disk.s()]);
    let mnt = Mount::new(&disk.dev, &[]);
    let sb = Sandbox::new();
    let out = sb
        .iolab(&[
            "run",
            "fsync",
            "--sizes",
            "4k",
            "--methods",
            "none,fdatasync,fsync,O_DSYNC,O_DIRECT+O_DSYNC",
            "--duration",
            "300ms",
            "--target",
            mnt.path().to_str().unwrap(),
            "--no-store",
            "--quiet",
            "--json",
            "-",
        ])
        .ok();
    let doc = out.json();
    let verdict = |t: &Value| {
        t["extra"]["durability"]["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let tests = arr(&doc, "tests");
    for t in tests {
        println!(
            "{}: {} ({})",
            t["name"],
            verdict(t),
            t["extra"]["durability"]["evidence"]
        );
    }
    // Every test named by FSYNC_TOO_FAST (flushes faster than a platter) is judged as
    // answered by a volatile cache, and then no flushing method on that device is called
    // durable; without the warning, no verdict claims a cache answered.
    let too_fast = warnings_of(&doc, "FSYNC_TOO_FAST");
    let flushing: Vec<&Value> = tests.iter().filter(|t| t["name"] != "none 4K").collect();
    match too_fast.first() {
        Some(w) => {
            let msg = w["message"].as_str().unwrap();
            for t in &flushing {
                let name = t["name"].as_str().unwrap();
                let v = verdict(t);
                assert_ne!(v, "as_far_as_timing_shows", "{name} beside {msg}");
                if msg.contains(name) {
                    assert_eq!(v, "cache_answered", "{name} beside {msg}");
                }
            }
        }
        None => {
            for t in &flushing {
                assert_ne!(verdict(t), "cache_answered", "{t}");
            }
        }
    }
    assert_eq!(verdict(&tests[0]), "not_durable");
    // No run-wide sentence contradicts the per-method verdicts any more.
    assert!(
        !arr(&doc, "notes")
            .iter()
            .any(|n| n.as_str().unwrap().contains("verdict")),
        "{:#}",
        doc["notes"]
    );
}
