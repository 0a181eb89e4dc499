//! `iolab run scrub-test` through the built binary: refusals before anything is built
//! (exit 2), and on a btrfs raid1 testbed the stored run, its JSON phases and exit status 0,
//! with the testbed gone afterwards. Library-level counts are tested in
//! crates/workloads/tests/scrub.rs.

use iolab_testkit::{arr, get, require_devices, skip_allowed, string, uint, Sandbox};

#[test]
fn scrub_test_refuses_before_building_anything() {
    let sb = Sandbox::new();
    // The sandbox is on the build directory's filesystem: not btrfs or zfs here.
    let out = sb.run(&["scrub-test"]);
    if out.code == Some(0) {
        skip_allowed!("the build directory is on a redundant filesystem");
    }
    out.code(2).stderr_has(&["not btrfs or zfs", "--testbed"]);
    sb.iolab(&["run", "scrub-test", "--testbed", "raid7"])
        .code(2)
        .stderr_has(&["btrfs-raid1, btrfs-raid5, zfs-mirror, zfs-raidz"]);
    sb.iolab(&[
        "run",
        "scrub-test",
        "--testbed",
        "btrfs-raid1",
        "--corrupt-size",
        "6k",
    ])
    .code(2)
    .stderr_has(&["multiple of 4 KiB"]);
    sb.iolab(&["run", "scrub-test", "--device-size", "1g", "--target", "/"])
        .code(2)
        .stderr_has(&["--device-size applies with --testbed"]);
    // Nothing was stored.
    assert!(sb.result_rows().is_empty());
}

#[test]
fn scrub_test_on_a_btrfs_raid1_testbed_is_stored_with_its_phases() {
    if require_devices(&["mkfs.btrfs", "btrfs-map-logical"]).is_none() {
        return;
    }
    let sb = Sandbox::new();
    let out = sb
        .iolab(&[
            "run",
            "scrub-test",
            "--testbed",
            "btrfs-raid1",
            "--device-size",
            "256MiB",
            "--dataset-size",
            "16MiB",
            "--corrupt",
            "6",
            "--foreground",
            "--quiet",
            "--json",
            "-",
        ])
        .ok();
    let doc = out.json();
    let tests = arr(&doc, "tests");
    // Six phases (their order is checked in crates/workloads/tests/scrub.rs); the scrub's
    // record carries the counts, the last one the verify.
    assert_eq!(tests.len(), 6);
    assert_eq!(string(&tests[1], "name"), "scrub");
    assert_eq!(string(&tests[5], "name"), "verify");
    let scrub = get(&tests[1], "extra");
    let alone = get(&tests[2], "extra");
    assert!(uint(alone, "bytes_scrubbed") > 2 * 16 * iolab_testkit::MIB);
    assert_eq!(uint(scrub, "injected"), 6);
    assert_eq!(uint(get(scrub, "reported"), "repaired"), 6);
    assert_eq!(uint(get(scrub, "reported"), "restored_on_member"), 6);
    assert_eq!(get(scrub, "passed"), &serde_json::Value::Bool(true));
    let verify = get(&tests[5], "extra");
    assert_eq!(uint(verify, "blocks"), 4096);
    assert_eq!(uint(verify, "ok"), 4096);
    // The table went to stderr (stdout carries only JSON) and the run is stored complete.
    assert!(out.stderr.contains("result: PASS"), "{}", out.stderr);
    let rows = sb.result_rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, "scrub-test");
    // The testbed is gone: no loop device is backed by an image of the testbed.
    let mount = string(&doc, "target");
    let name = mount
        .split('/')
        .find(|p| p.starts_with("iolab-testbed-"))
        .unwrap()
        .to_string();
    let losetup = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&losetup.stdout).contains(&name));
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&name));
}
