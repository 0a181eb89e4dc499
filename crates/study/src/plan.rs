//! What `iolab study` prints without running anything: the plan of a study
//! (`--dry-run`) and the testbeds this machine can build (`--list-testbeds`).

use std::path::Path;

use iolab_testbed::Kind;

use crate::{schedule, Study};

/// `--dry-run`: the expanded configurations, their build commands, the workloads' command
/// lines and the order of the runs.
pub fn dry_run_text(study: &Study) -> String {
    let mut s = hooks_text(study);
    let runs = study.run_count();
    s.push_str(&format!(
        "Study {} ({}): {} configuration(s), {} workload(s), {} repeat(s): {runs} runs, {} \
         order{}\n",
        study.name,
        study.file,
        study.configs.len(),
        study.workloads.len(),
        study.repeats,
        study.order.as_str(),
        if study.drop_caches {
            ", page cache dropped before every run"
        } else {
            ""
        }
    ));
    if let Some(d) = &study.description {
        s.push_str(&format!("  {}\n", d.trim()));
    }
    s.push_str(&format!(
        "Baseline: {}\n\nConfigurations (each built for every visit and torn down after it):\n",
        study.configs[study.baseline].label
    ));
    for (i, c) in study.configs.iter().enumerate() {
        s.push_str(&format!("{}. {} (line {})\n", i + 1, c.label, c.line));
        let table = crate::value_text(&toml::Value::Table(c.testbed_table.clone()));
        s.push_str(&format!("   testbed: {table}\n"));
        for line in iolab_testbed::plan(&c.testbed) {
            s.push_str(&format!("     {line}\n"));
        }
    }
    s.push_str("\nWorkloads (run on every configuration, in this order):\n");
    for w in &study.workloads {
        s.push_str(&format!(
            "  {}: iolab run {} {}--target=<testbed> --label='{}'{}\n",
            w.label,
            w.kind,
            w.args.iter().map(|a| format!("{a} ")).collect::<String>(),
            w.label,
            if w.only.is_empty() {
                String::new()
            } else {
                format!("  (only on: {})", w.only.join(", "))
            }
        ));
    }
    s.push_str("\nOrder:\n");
    let steps = schedule(study);
    let mut round_line = String::new();
    let mut last_round = None;
    for st in &steps {
        let label = &study.configs[st.config].label;
        match study.order {
            crate::Order::Interleaved | crate::Order::Rotated => {
                if last_round != Some(st.round) {
                    if !round_line.is_empty() {
                        s.push_str(&format!("{round_line}\n"));
                    }
                    round_line = format!("  round {}: {label}", st.round + 1);
                    last_round = Some(st.round);
                } else {
                    round_line.push_str(&format!(" | {label}"));
                }
            }
            crate::Order::Grouped => {
                s.push_str(&format!("  {label} (repeat {})\n", st.round + 1));
            }
        }
    }
    if !round_line.is_empty() {
        s.push_str(&format!("{round_line}\n"));
    }
    let root = study.configs.iter().any(|c| c.testbed.kind != Kind::Dir) || study.drop_caches;
    if root {
        s.push_str("\nNeeds root (loop devices, mounts, sysfs knobs, cgroups).\n");
    }
    if study.configs.iter().any(|c| c.testbed.kind == Kind::Device) {
        s.push_str(
            "Formats your devices: each must be named with --allow-destroy-device DEV (and \
             --wipe if it holds a signature); a mounted, held or system disk is refused.\n",
        );
    }
    s
}

/// The shell commands a study's testbeds run (`setup`, `teardown`), printed first by
/// `--dry-run`: they run as the study's user (root for loop testbeds) with no check of
/// what they do, so whoever runs the study must read them.
fn hooks_text(study: &Study) -> String {
    let mut lines = Vec::new();
    for c in &study.configs {
        for (key, hook) in [
            ("setup", &c.testbed.setup),
            ("teardown", &c.testbed.teardown),
        ] {
            if let Some(h) = hook {
                lines.push(format!("  {} · {key}: {}\n", c.label, h.trim()));
            }
        }
    }
    if lines.is_empty() {
        return String::new();
    }
    lines.dedup();
    let mut s = String::from(
        "Hooks: shell commands this study runs as your user (root for loop testbeds), \
         unchecked. A study file with hooks is as trusted as a shell script run as root:\n",
    );
    for l in lines {
        s.push_str(&l);
    }
    s.push('\n');
    s
}

/// `--dry-run`'s estimate: the planned pass time of every run whose workload fixes it
/// (the block presets, through `reg`), summed over the schedule, and what it leaves out.
pub fn estimate_text(study: &Study, reg: &iolab_runner::Registry) -> String {
    let mut planned = std::time::Duration::ZERO;
    let mut unknown: Vec<&str> = Vec::new();
    let mut counted = 0usize;
    for c in &study.configs {
        for w in study.workloads.iter().filter(|w| w.applies_to(&c.label)) {
            let mut argv = vec![w.kind.clone()];
            argv.extend(w.args.iter().cloned());
            match reg
                .parse("iolab run", &argv)
                .ok()
                .and_then(|p| p.job.planned())
            {
                Some(d) => {
                    planned += d * study.repeats;
                    counted += study.repeats as usize;
                }
                None => {
                    if !unknown.contains(&w.label.as_str()) {
                        unknown.push(&w.label);
                    }
                }
            }
        }
    }
    let mut s = if counted > 0 {
        format!(
            "\nEstimated duration: {} of planned passes ({counted} of {} runs)",
            iolab_runner::progress::short_duration(planned),
            study.run_count()
        )
    } else {
        "\nEstimated duration: not known".to_string()
    };
    if !unknown.is_empty() {
        s.push_str(&format!(
            "; not estimated: {} (only the block presets plan their pass time)",
            unknown.join(", ")
        ));
    }
    s.push_str("; building and tearing down each configuration comes on top.\n");
    s
}

/// Whether `tool` is installed.
fn have(tool: &str) -> bool {
    iolab_sys::find_tool(tool).is_some()
}

/// `--list-testbeds`: the kinds and knobs, and what this machine has of them.
pub fn catalogue() -> String {
    let yes = |b: bool| if b { "yes" } else { "NO" };
    let root = iolab_sys::is_root();
    let blkio = Path::new("/sys/fs/cgroup/blkio").is_dir();
    let rows: Vec<(&str, &str, bool, &str)> = vec![
        (
            "dir",
            "an existing directory (created and removed if missing); nothing built",
            true,
            "-",
        ),
        (
            "loop",
            "N sparse images as loop devices: devices, size, direct_io, sector_size, image_dir",
            have("losetup") && root,
            "root, util-linux",
        ),
        (
            "loop + fs=ext4",
            "mkfs_options (-b 1024, -O bigalloc -C 65536), mount_options (barrier=0); one device",
            have("mkfs.ext4"),
            "e2fsprogs",
        ),
        (
            "loop + fs=xfs",
            "mkfs_options (-b size=65536); size >= 320MiB; one device",
            have("mkfs.xfs"),
            "xfsprogs",
        ),
        (
            "loop + fs=btrfs",
            "raid = single|raid0|raid1|raid10|raid5 over the devices; mount_options (compress=zstd)",
            have("mkfs.btrfs"),
            "btrfs-progs",
        ),
        (
            "loop + fs=zfs",
            "raid = mirror|raidz; vdevs = loop|files; pool_properties, dataset_properties \
             (recordsize, compression); zfs_daemon (prefetch, max_arc_size_mb, ...)",
            have("zfs-fuse") && have("zpool"),
            "zfs-fuse",
        ),
        (
            "device",
            "your own disks: devices = [\"/dev/sdb\"] or --device DEV; fs, raid, mkfs_options, \
             mount_options and knobs as for loop; each named with --allow-destroy-device",
            have("wipefs") && root,
            "root, util-linux",
        ),
        (
            "knobs (loop, dev)",
            "read_ahead_kb, scheduler, write_cache = \"write back\"|\"write through\", \
             nr_requests, max_sectors_kb, rq_affinity (restored after)",
            root,
            "root",
        ),
        (
            "throttle (loop)",
            "[throttle] read_bps, write_bps, read_iops, write_iops: cgroup-v1 blkio caps the \
             workload runs under (an HDD-like device: 150 IOPS + 50MiB)",
            blkio && root,
            "cgroup v1 blkio",
        ),
        (
            "hooks",
            "setup, teardown: sh -c in the work directory (your responsibility)",
            true,
            "-",
        ),
    ];
    let mut s = String::from("Testbeds a study can build (details: docs/testbeds.md)\n\n");
    s.push_str(&format!(
        "{:<17} {:<6} {:<17} {}\n",
        "kind / part", "here", "needs", "keys"
    ));
    for (k, keys, ok, needs) in rows {
        s.push_str(&format!("{k:<17} {:<6} {needs:<17} {keys}\n", yes(ok)));
    }
    s.push_str(
        "\nA [matrix] axis may be any of these keys (dotted for nested ones, e.g. \
         \"throttle.read_iops\" or \"dataset_properties.recordsize\").\n",
    );
    s
}
