//! A study as a hostile local user would meet it, with the real binary: what a testbed
//! creates has fixed modes under any umask (an unprivileged user cannot reach the emulated
//! disk's control socket, a link planted in its directory is never written through); a
//! study file cannot format, mount or corrupt a device the study does not build; labels
//! never become options and never carry control characters to a terminal.

use std::process::{Command, Output, Stdio};

use iolab_testkit::iolab::iolab_bin;
use iolab_testkit::{require_devices, require_emudisk, Sandbox};

fn write(sb: &Sandbox, name: &str, text: &str) -> String {
    let p = sb.path(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// `iolab ARGS` (the sandbox's database and environment) with the umask `mask`, set by a
/// shell that then execs the binary.
fn with_umask(sb: &Sandbox, mask: &str, args: &[&str]) -> Output {
    let inner = sb.cmd(args);
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("umask {mask}; exec \"$0\" \"$@\""))
        .arg(inner.get_program())
        .args(inner.get_args());
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    c.stdin(Stdio::null()).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Under `umask 000` a study's testbed (a loop device on an emulated disk) is built with
/// 0700 directories, 0600 files and a 0600 control socket: the setup hook lists the modes
/// while the testbed stands, asks the disk for its stats as user nobody (refused), plants
/// a link at the name the daemon used for its temporary stats file and asks for the stats
/// again (the daemon rewrites stats.json): the file the link points at is untouched.
#[test]
fn a_testbed_built_under_umask_000_is_private() {
    let Some(_g) = require_emudisk(&["setpriv"]) else {
        return;
    };
    let sb = Sandbox::new();
    let modes = sb.path("modes");
    let nobody = sb.path("nobody");
    let victim = sb.path("victim");
    std::fs::write(&victim, "keep").unwrap();
    let hook = format!(
        "img=${{IOLAB_TESTBED_IMAGES%% *}}; base=${{img%/images/*}}; \
         find \"$base\" -path \"$base/emu0/mnt/*\" -prune -o -printf '%m %y %P\\n' > {modes}; \
         setpriv --reuid=65534 --regid=65534 --clear-groups {bin} emudisk ctl \"$base/emu0\" \
         stats > {nobody} 2>&1; echo \"exit $?\" >> {nobody}; \
         ln -s {victim} \"$base/emu0/stats.tmp\"; {bin} emudisk ctl \"$base/emu0\" stats >/dev/null",
        modes = modes.display(),
        nobody = nobody.display(),
        victim = victim.display(),
        bin = iolab_bin().display(),
    );
    let f = write(
        &sb,
        "umask.toml",
        &format!(
            r#"name = "t-umask"
[testbed]
kind = "loop"
size = "16MiB"
setup = '''{hook}'''
teardown = 'img=${{IOLAB_TESTBED_IMAGES%% *}}; rm -f "${{img%/images/*}}/emu0/stats.tmp"'
[testbed.emulated]
model = "ssd"
[[workload]]
kind = "custom"
rw = "read"
bs = "64k"
size = "4MiB"
duration = "200ms"
ramp = "0s"
runs = 1
warmup = 0
"#
        ),
    );
    let out = with_umask(&sb, "000", &["study", &f]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let listed = std::fs::read_to_string(&modes).unwrap();
    let mut seen = Vec::new();
    for line in listed.lines() {
        let mut parts = line.splitn(3, ' ');
        let (mode, kind, name) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap_or(""),
        );
        let want = match kind {
            "d" => "700",
            "f" | "s" => "600",
            other => panic!("unexpected {other} {name} in the testbed:\n{listed}"),
        };
        assert_eq!(mode, want, "{kind} '{name}' has mode {mode}:\n{listed}");
        seen.push(name.to_string());
    }
    for name in [
        "",
        "images",
        "images/disk0.img",
        "emu0",
        "emu0/mnt",
        "emu0/log",
        "emu0/stats.json",
        "emu0/ctl.sock",
        "emu0/ready",
    ] {
        assert!(seen.iter().any(|s| s == name), "no {name}:\n{listed}");
    }
    let refused = std::fs::read_to_string(&nobody).unwrap();
    assert!(
        !refused.contains("exit 0") && refused.contains("ermission denied"),
        "user nobody reached the control socket:\n{refused}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

/// The daemon itself refuses a directory others can write to (its socket and stats would
/// be theirs to replace), whatever the caller's umask.
#[test]
fn the_emulated_disk_daemon_refuses_a_shared_directory() {
    let sb = Sandbox::new();
    let dir = sb.path("emu");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(dir.join("mnt")).unwrap();
    std::fs::write(sb.path("backing"), vec![0u8; 1 << 20]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut child = Command::new(iolab_bin())
        .args([
            "emudisk",
            "serve",
            "--dir",
            dir.to_str().unwrap(),
            "--backing",
            sb.path("backing").to_str().unwrap(),
            "--spec",
            "{\"model\": \"ssd\"}",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Without the check it serves (and would until stopped): stop it once it says ready.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if dir.join("ready").exists() || started.elapsed().as_secs() > 60 {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(!dir.join("ready").exists(), "it served:\n{}", text(&out));
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no one else can write to"),
        "{}",
        text(&out)
    );
    assert!(!dir.join("ctl.sock").exists());
}

/// A cheap hash of a device's contents (to show it was not written).
fn digest(lo: &iolab_testkit::Loop) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    lo.contents().hash(&mut h);
    h.finish()
}

/// Device paths in mkfs options, mount options and path keys are refused when the file is
/// read (exit 2, FILE:LINE: KEY), by `--dry-run` and by the study itself, and the device
/// is not written: a loop device of the test's own, named directly, through a link, and
/// inside `device=`.
#[test]
fn a_study_cannot_name_a_device_it_does_not_build() {
    let Some(_g) = require_devices(&["mkfs.btrfs", "mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = iolab_testkit::Loop::new(256 << 20);
    let before = digest(&lo);
    let link = sb.path("innocent");
    std::os::unix::fs::symlink(&lo.dev, &link).unwrap();
    let dev = lo.s();
    let link = link.to_str().unwrap();
    let cases = [
        (
            "btrfs",
            format!("mkfs_options = [\"{dev}\"]"),
            "testbed.mkfs_options[1]",
        ),
        (
            "btrfs",
            format!("mkfs_options = [\"-f\", \"{link}\"]"),
            "testbed.mkfs_options[2]",
        ),
        (
            "btrfs",
            format!("mount_options = \"device={dev}\""),
            "testbed.mount_options",
        ),
        (
            "ext4",
            format!("mkfs_options = [\"-J\", \"device={link}\"]"),
            "testbed.mkfs_options[2]",
        ),
        (
            "ext4",
            "image_dir = \"/dev/shm\"".to_string(),
            "testbed.image_dir",
        ),
    ];
    for (i, (fs, line, key)) in cases.iter().enumerate() {
        let f = write(
            &sb,
            &format!("dev{i}.toml"),
            &format!(
                "name = \"t-dev\"\n[testbed]\nkind = \"loop\"\nsize = \"128MiB\"\nfs = \"{fs}\"\n\
                 {line}\n[[workload]]\nkind = \"fsync\"\n"
            ),
        );
        for dry in [true, false] {
            let args: Vec<&str> = if dry {
                vec!["study", "--dry-run", &f]
            } else {
                vec!["study", &f]
            };
            sb.iolab(&args)
                .code(2)
                .stderr_has(&[&format!("dev{i}.toml:6: {key}:"), "names a device"]);
        }
    }
    assert_eq!(digest(&lo), before, "the device was written");
    assert!(sb.result_rows().is_empty());
}

/// A directory testbed pointing into a btrfs raid1 the study did not build (two loop
/// devices of the test's own): a scrub test with `allow_corrupt_members = true` is
/// refused when the file is read, and neither member is written.
#[test]
fn a_study_does_not_corrupt_a_filesystem_it_did_not_build() {
    let Some(_g) = require_devices(&["mkfs.btrfs", "btrfs"]) else {
        return;
    };
    let sb = Sandbox::new();
    let a = iolab_testkit::Loop::new(256 << 20);
    let b = iolab_testkit::Loop::new(256 << 20);
    iolab_testkit::sh(
        "mkfs.btrfs",
        &["-q", "-f", "-d", "raid1", "-m", "raid1", a.s(), b.s()],
    );
    let m = iolab_testkit::Mount::new(a.s(), &["-t", "btrfs", "-o", &format!("device={}", b.s())]);
    let work = m.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // Read-only from here, so the filesystem itself writes nothing to its members.
    m.remount("ro");
    iolab_testkit::sh("sync", &[]);
    let before = (digest(&a), digest(&b));
    let f = write(
        &sb,
        "scrub.toml",
        &format!(
            "name = \"t-scrub\"\n[testbed]\nkind = \"dir\"\npath = \"{}\"\n\n[[workload]]\n\
             kind = \"scrub-test\"\ndataset_size = \"16MiB\"\ncorrupt = 4\n\
             allow_corrupt_members = true\n",
            work.display()
        ),
    );
    for args in [vec!["study", "--dry-run", &f], vec!["study", &f]] {
        sb.iolab(&args).code(2).stderr_has(&[
            "scrub.toml:10: workload[1].allow_corrupt_members:",
            "directory testbed",
        ]);
    }
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0);
    iolab_testkit::sh("sync", &[]);
    assert_eq!((digest(&a), digest(&b)), before, "a member was written");
}

/// A workload label is the run's label and nothing else: `--target=/etc` does not move the
/// run; a label or name with a control character, and a workload key that is not an
/// option's name, are refused with FILE:LINE: KEY; an unknown key of `[testbed.emulated]`
/// is named by its path, on its line.
#[test]
fn labels_are_values_and_keys_are_named_where_they_are() {
    let sb = Sandbox::new();
    let dir = sb.path("bed");
    let base = format!(
        "name = \"t-label\"\n[testbed]\nkind = \"dir\"\npath = \"{}\"\n",
        dir.display()
    );
    let wl = "[[workload]]\nkind = \"custom\"\nrw = \"read\"\nbs = \"64k\"\nsize = \"1MiB\"\n\
              duration = \"100ms\"\nramp = \"0s\"\nruns = 1\nwarmup = 0\n";
    let f = write(
        &sb,
        "label.toml",
        &format!("{base}{wl}label = \"--target=/etc\"\n"),
    );
    let out = sb.iolab(&["study", &f]).ok();
    assert!(
        out.stdout.contains("· --target=/etc: run #1"),
        "{}",
        out.stdout
    );
    let rows = sb.result_rows();
    assert_eq!(rows.len(), 1, "{}", sb.results());
    let doc = sb
        .iolab(&["show", &rows[0].0.to_string(), "--json"])
        .ok()
        .json();
    assert_eq!(doc["label"], "--target=/etc");
    assert!(
        doc["target"]
            .as_str()
            .unwrap()
            .starts_with(dir.to_str().unwrap()),
        "{}",
        doc["target"]
    );
    for (name, text, want) in [
        ("esc.toml", format!("{base}{wl}label = \"a\\u001b[2Jb\"\n"), "esc.toml:14: workload[1].label: contains the control character"),
        ("nl.toml", format!("{base}{wl}label = \"a\\nb\"\n"), "nl.toml:14: workload[1].label: contains the control character"),
        ("name.toml", format!("{}{wl}", base.replace("t-label", "t\\u0007")), "name.toml:1: name: contains the control character"),
        ("key.toml", format!("{base}{wl}\"target=/etc\" = true\n"), "key.toml:14: workload[1].target=/etc: is not an option name"),
        (
            "emu.toml",
            format!(
                "name = \"e\"\n[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\n\n[[config]]\nlabel = \"a\"\n\
                 [config.testbed.emulated]\nmodel = \"ssd\"\nbogus = 3\n\n{wl}"
            ),
            "emu.toml:10: config[1].testbed.emulated.bogus: unknown field `bogus`",
        ),
        (
            "emu2.toml",
            format!("{base}[testbed.emulated]\nmodel = \"ssd\"\n\n{wl}")
                .replace("kind = \"dir\"\npath", "kind = \"loop\"\nsize = \"64MiB\"\nbogus = 1\n#path"),
            "emu2.toml:5: testbed.bogus: unknown field `bogus`",
        ),
    ] {
        let f = write(&sb, name, &text);
        sb.iolab(&["study", "--dry-run", &f]).code(2).stderr_has(&[want]);
    }
}
