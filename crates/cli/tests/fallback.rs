//! When the kernel refuses io_uring, iolab falls back to psync and says so. Root only: the
//! test disables io_uring machine-wide through /proc/sys/kernel/io_uring_disabled for a
//! moment (this file is its own test binary, so no other test runs meanwhile).

use iolab_testkit::{require_root, skip_allowed, Sandbox};

const KNOB: &str = "/proc/sys/kernel/io_uring_disabled";

struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(KNOB, &self.0);
    }
}

#[test]
fn io_uring_refused_falls_back_to_psync_with_a_note() {
    if !require_root("disabling io_uring") {
        return;
    }
    let Ok(old) = std::fs::read_to_string(KNOB) else {
        // Kernels before 6.6 have no such switch; nothing test.sh can install adds it.
        skip_allowed!("this kernel has no {KNOB}");
    };
    let _restore = Restore(old.trim().to_string());
    std::fs::write(KNOB, "2").unwrap();
    let sb = Sandbox::new();
    let doc = sb
        .run(&[
            "custom",
            "--rw",
            "randread",
            "--iodepth",
            "8",
            "--size",
            "4MiB",
            "--duration",
            "100ms",
            "--runs",
            "1",
            "--json",
            "-",
        ])
        .ok()
        .json();
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
