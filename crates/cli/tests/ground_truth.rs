//! Ground truth: a loop device with direct I/O under a cgroup-v1 blkio throttle has a known
//! speed. iolab's median must land within ±2% of the cap, and the throttle warning must be
//! raised. Root only; skipped with a printed reason elsewhere.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{device_test, Loop, Sandbox, MIB};
use serde_json::Value;

const BPS: f64 = 20.0 * MIB as f64; // 20 MiB/s
const IOPS: f64 = 200.0;

/// A blkio cgroup with throttles, removed on drop.
struct Throttled {
    dir: PathBuf,
}

impl Throttled {
    fn new(majmin: &str) -> Option<Throttled> {
        let root = Path::new("/sys/fs/cgroup/blkio");
        if !root.join("cgroup.procs").exists() {
            println!("skipped: no cgroup-v1 blkio hierarchy at /sys/fs/cgroup/blkio");
            return None;
        }
        let dir = root.join(format!("iolab-truth-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let t = Throttled { dir };
        for (file, value) in [
            ("blkio.throttle.read_bps_device", BPS as u64),
            ("blkio.throttle.write_bps_device", BPS as u64),
            ("blkio.throttle.read_iops_device", IOPS as u64),
            ("blkio.throttle.write_iops_device", IOPS as u64),
        ] {
            std::fs::write(t.dir.join(file), format!("{majmin} {value}")).unwrap();
        }
        Some(t)
    }

    /// Runs iolab inside the cgroup and returns its JSON document.
    fn iolab(&self, sb: &Sandbox, args: &[&str]) -> Value {
        let cmd = sb.cmd(args);
        // Enter the cgroup from a shell, then exec iolab, so every thread is throttled.
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"",
            self.dir.display()
        );
        let program = cmd.get_program().to_owned();
        let all: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(program)
            .args(all)
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "iolab failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON on stdout")
    }
}

impl Drop for Throttled {
    fn drop(&mut self) {
        // The processes that were in it have exited; the directory can go.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn check(doc: &Value, metric: &str, truth: f64) {
    let test = &doc["tests"][0];
    let got = test["summary"][metric].as_f64().unwrap();
    let passes: Vec<f64> = test["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[metric].as_f64().unwrap())
        .collect();
    let err = (got - truth) / truth;
    println!(
        "{}: {metric} median {got:.3} vs cap {truth:.3} ({:+.2}%), passes {passes:?}",
        test["name"],
        err * 100.0
    );
    assert!(
        err.abs() <= 0.02,
        "{metric} {got} is not within 2% of {truth}"
    );
    let codes: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"BLKIO_THROTTLE"), "warnings: {codes:?}");
}

#[test]
fn throttled_loop_device_reads_and_writes_at_its_caps() {
    let Some(_lock) = device_test(&[]) else {
        return;
    };
    let dev = Loop::with_options(128 * MIB, &["--direct-io=on"]);
    let Some(cg) = Throttled::new(&dev.majmin()) else {
        return;
    };
    let sb = Sandbox::new();
    let common = [
        "--target",
        dev.s(),
        "--size",
        "64MiB",
        "--iodepth",
        "4",
        "--duration",
        "1s",
        "--ramp",
        "300ms",
        "--runs",
        "3",
        "--warmup",
        "0",
        "--allow-destroy-device",
        "--no-store",
        "--quiet",
        "--json",
        "-",
    ];
    let bytes_per_s = BPS / 1e6; // MB/s, 10^6 bytes
    for (rw, bs, metric, truth) in [
        ("read", "128k", "mb_s", bytes_per_s),
        ("write", "128k", "mb_s", bytes_per_s),
        ("randread", "4k", "iops", IOPS),
        ("randwrite", "4k", "iops", IOPS),
    ] {
        let mut args = vec!["run", "custom", "--rw", rw, "--bs", bs];
        args.extend_from_slice(&common);
        let doc = cg.iolab(&sb, &args);
        check(&doc, metric, truth);
    }
}
