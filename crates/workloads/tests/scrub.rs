//! The scrub test on real testbeds: loop devices with btrfs raid1 and zfs-fuse mirrors built
//! by iolab-testbed, blocks corrupted on one member (or on every copy), the filesystem's own
//! scrub, and iolab's verify afterwards. Each test checks the exact counts and that nothing
//! of the testbed is left behind.
//!
//! Root is needed (loop devices, mkfs, mount, writes to members, drop_caches); without it, or
//! without btrfs-progs, a test skips (a failure under IOLAB_REQUIRE_DEVICE_TESTS=1); without
//! zfs-fuse, an optional package, the zfs tests skip and pass. The tests hold
//! one lock so they never build testbeds concurrently with each other; zfs-fuse allows one
//! daemon per machine, so a zfs build retries while another one (of another test binary or
//! engineer) is running.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use iolab_testbed::TestbedError;
use iolab_testkit::{device_lock, optional_tools, require_root, require_tools, skip_allowed};
use iolab_workloads::scrub::{
    self, build_testbed, FsKind, Layout, Redundancy, ScrubConfig, ScrubError, ScrubReport,
    ScrubTarget,
};

/// Whether `layout` can be tested here; prints why not.
fn usable(test: &str, layout: Layout) -> bool {
    if !require_root(&format!(
        "{test} (loop devices, mkfs, mount, member writes)"
    )) {
        return false;
    }
    match layout {
        Layout::BtrfsRaid1 | Layout::BtrfsRaid5 => {
            require_tools(&["mkfs.btrfs", "btrfs", "btrfs-map-logical"])
        }
        // zfs-fuse is optional: test.sh may fail to install it.
        Layout::ZfsMirror | Layout::ZfsRaidz => optional_tools(&["zfs-fuse", "zpool", "zfs"]),
    }
}

/// Everything on the machine that still names the testbed `name`: loop devices backed by
/// its images, mounts, blkio cgroups, processes (the zfs-fuse daemon carries it).
fn traces(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let losetup = std::process::Command::new("losetup")
        .arg("-a")
        .output()
        .unwrap();
    for l in String::from_utf8_lossy(&losetup.stdout).lines() {
        if l.contains(name) {
            out.push(format!("loop {l}"));
        }
    }
    for l in std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
    {
        if l.contains(name) {
            out.push(format!("mount {l}"));
        }
    }
    if Path::new("/sys/fs/cgroup/blkio").join(name).exists() {
        out.push(format!("cgroup {name}"));
    }
    let me = std::process::id().to_string();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy() == me {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(name) {
                out.push(format!(
                    "process {}: {cmd}",
                    e.file_name().to_string_lossy()
                ));
            }
        }
    }
    if Path::new("/var/tmp").join(name).exists() {
        out.push(format!("directory /var/tmp/{name}"));
    }
    out
}

/// Builds `layout`, runs the scrub test with `cfg`, tears the testbed down and checks that
/// nothing of it is left. `None` (after printing why) when the layout cannot be tested here
/// or a zfs daemon of someone else stayed in the way.
fn run_on(test: &str, layout: Layout, cfg: &ScrubConfig) -> Option<ScrubReport> {
    if !usable(test, layout) {
        return None;
    }
    let _g = device_lock();
    // Another suite beside this one may build a zfs testbed meanwhile.
    let _zfs = matches!(layout, Layout::ZfsMirror | Layout::ZfsRaidz)
        .then(iolab_testkit::zfs_machine_lock);
    let stop = AtomicBool::new(false);
    let mut tries = 0;
    let (tb, target) = loop {
        match build_testbed(layout, "256MiB", cfg, &stop) {
            Ok(x) => break x,
            Err(ScrubError::Testbed(TestbedError::ZfsDaemonBusy { pid })) if tries < 12 => {
                tries += 1;
                println!("{test}: zfs-fuse {pid} of someone else is running; waiting");
                std::thread::sleep(Duration::from_secs(10));
            }
            Err(ScrubError::Testbed(
                e @ (TestbedError::ZfsDaemonBusy { .. } | TestbedError::ZfsDaemon { .. }),
            )) => {
                skip_allowed(format!("{test}: zfs-fuse (optional) cannot run here: {e}"));
                return None;
            }
            Err(e) => panic!("{test}: build: {e}"),
        }
    };
    let name = tb.name().unwrap().to_string();
    let result = scrub::run(&target, cfg, &stop, &mut |label, detail| {
        println!("{test}: {label}: {detail}")
    });
    tb.teardown().unwrap();
    let left = traces(&name);
    assert!(left.is_empty(), "{test}: left behind: {left:#?}");
    let report = result.unwrap_or_else(|e| panic!("{test}: {e}"));
    println!("{}", report.render());
    Some(report)
}

fn small(corrupt: u32) -> ScrubConfig {
    ScrubConfig {
        dataset_size: 32 << 20,
        corrupt,
        ..ScrubConfig::default()
    }
}

#[test]
fn btrfs_raid1_detects_and_repairs_exactly_the_injected_blocks() {
    let test = "btrfs_raid1_detects_and_repairs_exactly_the_injected_blocks";
    let mut cfg = small(16);
    cfg.foreground = Some(32 << 20);
    let Some(r) = run_on(test, Layout::BtrfsRaid1, &cfg) else {
        return;
    };
    assert_eq!(r.injections.len(), 16);
    // Every corruption overwrote one copy, on the first member, after checking it held the
    // block iolab wrote for that offset.
    for j in &r.injections {
        assert_eq!(j.overwrites.len(), 1);
        assert_eq!(j.overwrites[0].member, r.target.members[0]);
        assert!(j.overwrites[0].checked_content);
    }
    assert!(r.injections.iter().any(|j| j.class == scrub::Class::Small));
    assert!(r.injections.iter().any(|j| j.class == scrub::Class::Large));
    assert_eq!(r.reported.detected, Some(16), "{}", r.render());
    assert_eq!(r.reported.repaired, Some(16));
    assert_eq!(r.reported.uncorrectable, Some(0));
    assert_eq!(r.scrub.exit_code, Some(0));
    let victim = &r.scrub.devices[0];
    assert_eq!(victim.1["corruption_errs"], 16);
    assert_eq!(r.scrub.devices[1].1["corruption_errs"], 0);
    assert!(r.verify.mismatches.is_empty() && r.verify.read_errors.is_empty());
    assert_eq!(r.verify.ok, r.verify.blocks);
    assert_eq!(r.verify.blocks, (32 << 20) / scrub::BLOCK as u64);
    // Both copies of the dataset (and the foreground file) were read by the scrub.
    assert!(
        r.scrub.bytes.unwrap() >= 2 * (64 << 20),
        "{:?}",
        r.scrub.bytes
    );
    // The reader without a scrub ran at least as long as the one during it, on its own
    // clock (how far past that its last read took it depends on the machine's load: a
    // loaded run took 1.58 s for 1.08 s, so no upper bound is asserted).
    let (b, d) = (r.baseline.as_ref().unwrap(), r.during.as_ref().unwrap());
    let (bs, ds) = (b.seconds, d.seconds);
    assert!(b.mb_s > 0.0 && d.bytes > 0, "{bs} s, {ds} s");
    assert!(bs + 1e-6 >= ds, "{bs} s vs {ds} s"); // 1 µs: seconds to Duration and back
                                                  // The scrub rewrote every corrupted copy: iolab reads them back intact from the member.
    assert_eq!(r.reported.restored, Some(16));
    assert!(r.passed(), "{}", r.render());
    let tests = r.tests();
    let names: Vec<&str> = tests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "write dataset",
            "scrub",
            "scrub (no foreground)",
            "foreground read (during scrub)",
            "foreground read (no scrub)",
            "verify"
        ]
    );
    assert_eq!(tests[1].extra["reported"]["repaired"], 16);
    // The second scrub, alone, read as much data and found nothing left to repair. Its
    // tree bytes may differ: btrfs commits its metadata between the two (on a busy machine
    // the second read 128 KiB of tree less).
    let alone = r.scrub_alone.as_ref().unwrap();
    assert_eq!(
        alone.btrfs["data_bytes_scrubbed"],
        r.scrub.btrfs["data_bytes_scrubbed"]
    );
    assert_eq!(alone.btrfs["csum_errors"], 0);
}

#[test]
fn btrfs_raid1_all_copies_is_uncorrectable_and_reads_fail_there() {
    let test = "btrfs_raid1_all_copies_is_uncorrectable_and_reads_fail_there";
    let mut cfg = small(8);
    cfg.all_copies = true;
    let Some(r) = run_on(test, Layout::BtrfsRaid1, &cfg) else {
        return;
    };
    assert_eq!(r.injections.len(), 8);
    for j in &r.injections {
        assert_eq!(j.overwrites.len(), 2, "both mirrors");
    }
    // btrfs counts per copy: 8 blocks x 2 copies.
    assert_eq!(r.reported.detected, Some(16), "{}", r.render());
    assert_eq!(r.reported.uncorrectable, Some(16));
    assert_eq!(r.reported.repaired, Some(0));
    assert_eq!(r.scrub.exit_code, Some(3));
    assert_eq!(r.reported.restored, Some(0), "nothing to restore from");
    let mut injected: Vec<u64> = r.injections.iter().map(|j| j.offset).collect();
    injected.sort_unstable();
    let mut eio = r.verify.read_errors.clone();
    eio.sort_unstable();
    assert_eq!(eio, injected, "EIO exactly at the corrupted blocks");
    assert!(r.verify.mismatches.is_empty());
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn zfs_mirror_repairs_every_corrupted_record() {
    let test = "zfs_mirror_repairs_every_corrupted_record";
    let cfg = small(8);
    let Some(r) = run_on(test, Layout::ZfsMirror, &cfg) else {
        return;
    };
    assert!(matches!(r.target.kind, FsKind::Zfs { .. }));
    assert_eq!(r.injections.len(), 8);
    // One checksum error per corrupted record on the corrupted member, none elsewhere, no
    // unrepaired record, and the bytes repaired are those records.
    assert_eq!(r.reported.detected, Some(8), "{}", r.render());
    assert_eq!(r.reported.uncorrectable, Some(0));
    let records: u64 = r.injections.iter().map(|j| j.record.unwrap().1).sum();
    // zpool status prints three significant digits ("584K", "1.31M").
    let repaired = r.reported.repaired_bytes.unwrap();
    assert!(
        repaired.abs_diff(records) <= records / 100,
        "{repaired} vs {records}"
    );
    assert_eq!(r.scrub.devices[1].1["cksum"], 0);
    assert_eq!(r.reported.restored, Some(8));
    assert!(r.verify.mismatches.is_empty() && r.verify.read_errors.is_empty());
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn btrfs_raid5_rebuilds_every_block_from_parity() {
    let test = "btrfs_raid5_rebuilds_every_block_from_parity";
    let Some(r) = run_on(test, Layout::BtrfsRaid5, &small(12)) else {
        return;
    };
    // Each corruption hit a data strip on the first member; parity was left alone.
    for j in &r.injections {
        assert_eq!(j.overwrites.len(), 1);
        assert_eq!(j.overwrites[0].member, r.target.members[0]);
    }
    // The data comes back whole: iolab reads every corrupted copy intact from the member
    // and every block through the filesystem. (What btrfs counts for raid5 is another
    // matter: on Linux 6.18 it reports only some of the errors it fixes, which the report
    // marks as MISCOUNTED, exit 4; see docs/scrub.md.)
    assert_eq!(r.reported.restored, Some(12), "{}", r.render());
    assert!(r.problems.is_empty(), "{}", r.render());
    assert_eq!(r.verify.ok, r.verify.blocks);
    assert_eq!(r.reported.uncorrectable, Some(0));
    let detected = r.reported.detected.unwrap();
    assert!(detected <= 12, "{}", r.render());
    assert_eq!(r.exit_code(), if detected == 12 { 0 } else { 4 });
}

#[test]
fn zfs_raidz_rebuilds_the_bad_columns() {
    let test = "zfs_raidz_rebuilds_the_bad_columns";
    let Some(r) = run_on(test, Layout::ZfsRaidz, &small(8)) else {
        return;
    };
    assert_eq!(r.target.redundancy, Redundancy::Parity);
    assert_eq!(r.reported.detected, Some(8), "{}", r.render());
    assert_eq!(r.reported.uncorrectable, Some(0));
    assert_eq!(r.reported.restored, Some(8));
    // raidz rewrites only the bad column, so the bytes are reported but not compared.
    assert_eq!(r.expected.repaired_bytes, None);
    assert!(r.reported.repaired_bytes.unwrap() > 0);
    assert!(r.scrub.devices[1..].iter().all(|(_, c)| c["cksum"] == 0));
    assert_eq!(r.verify.ok, r.verify.blocks);
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn zfs_mirror_all_copies_fails_the_whole_records() {
    let test = "zfs_mirror_all_copies_fails_the_whole_records";
    let mut cfg = small(4);
    cfg.all_copies = true;
    let Some(r) = run_on(test, Layout::ZfsMirror, &cfg) else {
        return;
    };
    for j in &r.injections {
        assert_eq!(j.overwrites.len(), 2, "both sides of the mirror");
    }
    // Four records with no good copy: "with 4 errors", nothing repaired or restored.
    assert_eq!(r.reported.uncorrectable, Some(4), "{}", r.render());
    assert_eq!(r.reported.repaired_bytes, Some(0));
    assert_eq!(r.reported.restored, Some(0));
    // zfs fails every block of a bad record, not only the corrupted 4 KiB.
    let blocks: u64 = r
        .injections
        .iter()
        .map(|j| j.record.unwrap().1 / scrub::BLOCK as u64)
        .sum();
    let mut eio = r.verify.read_errors.clone();
    eio.sort_unstable();
    assert_eq!(eio.len() as u64, blocks);
    assert_eq!(eio, r.expected_read_errors);
    for j in &r.injections {
        assert!(eio.binary_search(&j.offset).is_ok());
    }
    assert!(r.verify.mismatches.is_empty());
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn corrupting_members_of_an_existing_filesystem_needs_consent() {
    let target = ScrubTarget {
        kind: FsKind::Btrfs,
        work_dir: "/srv/data".into(),
        mount: "/srv".into(),
        members: vec!["/dev/sdb".into(), "/dev/sdc".into()],
        redundancy: Redundancy::Mirror,
        profile: "raid1".into(),
        members_created_by_iolab: false,
    };
    let stop = AtomicBool::new(false);
    let err = scrub::run(&target, &ScrubConfig::default(), &stop, &mut |_, _| {}).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ScrubError::Invalid(_)), "{text}");
    assert!(text.contains("--allow-corrupt-members"), "{text}");
    assert!(text.contains("/dev/sdb, /dev/sdc"), "{text}");
    // A directory that is not on btrfs or zfs is refused by name.
    let dir = tempfile::tempdir().unwrap();
    let err = ScrubTarget::discover(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not btrfs or zfs"), "{err}");
}
