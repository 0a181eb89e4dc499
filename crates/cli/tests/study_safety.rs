//! A study as a hostile local user would meet it, with the real binary: what a testbed
//! creates has fixed modes under any umask (an unprivileged user cannot reach the emulated
//! disk's control socket, a link planted in its directory is never written through); a
//! study file cannot format, mount or corrupt a device the study does not build; labels
//! never become options and never carry control characters to a terminal.

use std::process::{Command, Output, Stdio};

use iolab_testkit::iolab::iolab_bin;
use iolab_testkit::{require_emudisk, Sandbox};

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
