//! `iolab record` as a hostile local user would meet it: links planted where it writes, a
//! umask of 000, signals to iolab alone or to its process group, a kill -9; and names that
//! strace shows escaped, links that lead out of the recorded root. Real strace, real files.
//!
//! Moments are chosen by waiting for the traced command to run (found in /proc beneath
//! iolab), never by sleeping.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use iolab_testkit::{require_root, require_tools, Out, Sandbox};

/// Tests that kill iolab share one lock: `iolab cleanup` removes what any dead run left.
fn kills() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `iolab record -o OUT --root ROOT -- CMD...` in `cwd`, TMPDIR `tmp`.
fn record_cmd(
    sb: &Sandbox,
    cwd: &Path,
    tmp: &Path,
    out: &Path,
    root: &Path,
    cmd: &[&str],
) -> Command {
    let mut args = vec![
        "record",
        "-o",
        out.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--",
    ];
    args.extend_from_slice(cmd);
    let mut c = sb.cmd(&args);
    c.current_dir(cwd).env("TMPDIR", tmp);
    c
}

fn output(mut c: Command, what: &str) -> Out {
    let t = Instant::now();
    Out::new(&[what], c.output().unwrap(), t.elapsed())
}

/// (pid, comm) of every live process beneath `pid`.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut parent = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let mut w = stat[close + 1..].split_whitespace();
        let state = w.next().unwrap_or("");
        let ppid: u32 = w.next().and_then(|x| x.parse().ok()).unwrap_or(0);
        if state != "Z" && state != "X" {
            parent.push((p, ppid, comm));
        }
    }
    let mut out: Vec<(u32, String)> = Vec::new();
    let mut frontier = vec![pid];
    while let Some(x) = frontier.pop() {
        for (p, pp, comm) in &parent {
            if *pp == x && !out.iter().any(|(q, _)| q == p) {
                out.push((*p, comm.clone()));
                frontier.push(*p);
            }
        }
    }
    out
}

/// Whether process `pid` is alive (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let st = s
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start())
                .unwrap_or("");
            !st.starts_with('Z') && !st.starts_with('X')
        }
        Err(_) => false,
    }
}

/// Waits until `sleep` runs under strace under `child`; the pids of strace and sleep.
fn wait_for_sleep(child: &mut Child) -> Vec<u32> {
    let t0 = Instant::now();
    loop {
        let d = descendants(child.id());
        if d.iter().any(|(_, c)| c == "sleep") && d.iter().any(|(_, c)| c == "strace") {
            return d.into_iter().map(|(p, _)| p).collect();
        }
        if let Some(st) = child.try_wait().unwrap() {
            panic!("record ended before its command ran: {st}");
        }
        // A bound on a hang, not a timing assertion.
        assert!(t0.elapsed() < Duration::from_secs(120), "sleep never ran");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn run_state_files(sb: &Sandbox, pid: u32) -> Vec<PathBuf> {
    let prefix = format!("run-{pid}-");
    fs::read_dir(sb.state_dir())
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// A sandbox with `w/` (the command's directory and the root), `tmp/` (TMPDIR) and a
/// victim file outside both.
struct Setup {
    sb: Sandbox,
    work: PathBuf,
    tmp: PathBuf,
    victim: PathBuf,
}

fn setup() -> Setup {
    let sb = Sandbox::new();
    let work = sb.path("w");
    let tmp = sb.path("tmp");
    fs::create_dir(&work).unwrap();
    fs::create_dir(&tmp).unwrap();
    let victim = sb.path("victim");
    fs::write(&victim, "the victim's data\n").unwrap();
    Setup {
        sb,
        work,
        tmp,
        victim,
    }
}

#[test]
fn record_never_writes_through_a_planted_link_and_ignores_the_umask() {
    if !require_tools(&["strace"]) {
        return;
    }
    let s = setup();
    let out = s.sb.path("out.trace");
    // Links at every name an older record wrote or a guess would try.
    let planted: Vec<PathBuf> = ["out.trace.partial", "out.trace.tmp", ".out.trace.partial"]
        .iter()
        .map(|n| s.sb.path(n))
        .collect();
    for p in &planted {
        symlink(&s.victim, p).unwrap();
    }
    let mut c = record_cmd(
        &s.sb,
        &s.work,
        &s.tmp,
        &out,
        &s.work,
        &["sh", "-c", "echo x > f"],
    );
    // SAFETY: the closure only calls umask(2), which is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            umask_zero();
            Ok(())
        })
    };
    let o = output(c, "record").ok();
    assert_eq!(
        fs::read_to_string(&s.victim).unwrap(),
        "the victim's data\n",
        "{o}"
    );
    for p in &planted {
        assert_eq!(fs::read_link(p).unwrap(), s.victim, "{}", p.display());
    }
    let m = fs::symlink_metadata(&out).unwrap();
    assert!(m.is_file());
    assert_eq!(m.permissions().mode() & 0o7777, 0o600, "umask 000: {o}");
    assert!(fs::read_to_string(&out)
        .unwrap()
        .contains(" 0:f w+creat+trunc"));
    // Nothing but the trace and the planted links next to it; nothing left in TMPDIR.
    let mut expect: Vec<PathBuf> = planted.clone();
    expect.extend([
        out.clone(),
        s.sb.path("tmp"),
        s.sb.path("victim"),
        s.sb.path("w"),
        s.sb.path("t"),
    ]);
    expect.sort();
    assert_eq!(entries(s.sb.path("").as_path()), expect);
    assert!(entries(&s.tmp).is_empty());

    // An existing regular file is replaced (not written through: its inode is not reused).
    let before = fs::metadata(&out).unwrap();
    let hard = s.sb.path("hardlink");
    fs::hard_link(&out, &hard).unwrap();
    let old = fs::read(&hard).unwrap();
    let c = record_cmd(
        &s.sb,
        &s.work,
        &s.tmp,
        &out,
        &s.work,
        &["sh", "-c", "echo y > g"],
    );
    output(c, "record").ok();
    assert_eq!(
        fs::read(&hard).unwrap(),
        old,
        "the old trace was written through"
    );
    use std::os::unix::fs::MetadataExt;
    assert_ne!(fs::metadata(&out).unwrap().ino(), before.ino());
    assert!(fs::read_to_string(&out)
        .unwrap()
        .contains(" 0:g w+creat+trunc"));

    // A link at OUT itself, a directory, a FIFO: refused before the command runs.
    let at_out = s.sb.path("linked.trace");
    symlink(&s.victim, &at_out).unwrap();
    let marker = s.work.join("ran");
    let c = record_cmd(&s.sb, &s.work, &s.tmp, &at_out, &s.work, &["touch", "ran"]);
    let o = output(c, "record").code(2);
    o.stderr_has(&["linked.trace", "not a regular file"]);
    assert!(!marker.exists(), "the command ran: {o}");
    assert_eq!(fs::read_link(&at_out).unwrap(), s.victim);
    let dir = s.sb.path("dir.trace");
    fs::create_dir(&dir).unwrap();
    let c = record_cmd(&s.sb, &s.work, &s.tmp, &dir, &s.work, &["touch", "ran"]);
    output(c, "record").code(2);
    assert!(!marker.exists());
    assert_eq!(
        fs::read_to_string(&s.victim).unwrap(),
        "the victim's data\n"
    );
}

/// umask(0) for this process (libc's, which this crate does not depend on otherwise).
fn umask_zero() {
    extern "C" {
        fn umask(mask: u32) -> u32;
    }
    // SAFETY: umask has no preconditions and is async-signal-safe.
    unsafe { umask(0) };
}

/// Sends `sig` to iolab alone (`group`: to its process group, as Ctrl-C in a terminal)
/// while `record -- sleep 30` runs: strace and sleep are gone, no temporary directory, no
/// trace, no run state, exit 130.
fn interrupt(sig: &str, group: bool) {
    let s = setup();
    let out = s.sb.path("out.trace");
    let mut c = record_cmd(&s.sb, &s.work, &s.tmp, &out, &s.work, &["sleep", "30"]);
    if group {
        c.process_group(0);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let pids = wait_for_sleep(&mut child);
    assert_eq!(entries(&s.tmp).len(), 1, "no temporary directory?");
    let target = if group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    let k = Command::new("kill")
        .args([&format!("-{sig}"), "--", &target])
        .status()
        .unwrap();
    assert!(k.success());
    let t = Instant::now();
    let o = Out::new(&[sig], child.wait_with_output().unwrap(), t.elapsed());
    let o = o.code(130);
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .status();
    }
    assert!(left.is_empty(), "{sig}: still running: {left:?}: {o}");
    assert!(entries(&s.tmp).is_empty(), "{sig}: {:?}", entries(&s.tmp));
    assert!(!out.exists(), "{sig}: a trace was written");
    let names: Vec<String> = entries(s.sb.path("").as_path())
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.contains("iolab-") || n.contains("partial")),
        "{names:?}"
    );
    assert!(run_state_files(&s.sb, pid).is_empty(), "{sig}: {o}");
}

#[test]
fn a_signal_to_iolab_alone_stops_strace_and_the_command_and_leaves_nothing() {
    if !require_tools(&["strace", "sleep"]) {
        return;
    }
    let _g = kills();
    for sig in ["INT", "TERM", "HUP"] {
        interrupt(sig, false);
    }
}

#[test]
fn ctrl_c_to_the_process_group_leaves_nothing() {
    if !require_tools(&["strace", "sleep"]) {
        return;
    }
    let _g = kills();
    interrupt("INT", true);
}

#[test]
fn cleanup_removes_what_a_killed_record_left() {
    if !require_tools(&["strace", "sleep"]) || !require_root("the run state of a root run") {
        return;
    }
    let _g = kills();
    let s = setup();
    let out = s.sb.path("out.trace");
    let c = &mut record_cmd(&s.sb, &s.work, &s.tmp, &out, &s.work, &["sleep", "30"]);
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = wait_for_sleep(&mut child);
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    // strace dies with iolab; what it traced runs on (strace 6.1 cannot kill it): stopped
    // here so the test leaves nothing.
    for p in pids {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .status();
    }
    let left = entries(&s.tmp);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].join("strace.out").exists());
    assert_eq!(
        fs::metadata(&left[0]).unwrap().permissions().mode() & 0o7777,
        0o700
    );
    assert_eq!(run_state_files(&s.sb, pid).len(), 1);
    let o = s.sb.iolab(&["cleanup"]);
    assert!(
        o.stdout.contains(&format!("removed {}", left[0].display())),
        "{o}"
    );
    assert!(entries(&s.tmp).is_empty(), "{o}");
    assert!(run_state_files(&s.sb, pid).is_empty(), "{o}");
    assert!(!out.exists());
}

/// The paths a trace's calls name (`R:…` words; the root itself, which the shell looks at,
/// left out), each once.
fn paths(trace: &str) -> Vec<String> {
    let mut v: Vec<String> = trace
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .flat_map(|l| l.split(' ').map(str::to_string).collect::<Vec<_>>())
        .filter(|w| w.starts_with("0:") && w != "0:.")
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn every_name_is_escaped_one_way_and_replays() {
    if !require_tools(&["strace"]) {
        return;
    }
    let s = setup();
    let out = s.sb.path("names.trace");
    // Names strace shows escaped: a backslash, a newline, a quote, `>`, `<` and a comma
    // (which the `<path>` after a descriptor escapes too), a space, an ESC, UTF-8; and one
    // that looks like the end of a call (`) = `).
    let script = r#"for n in 'd\x' "$(printf 'a\nb')" 'q"x' 'x>, <5' 'sp ace' "$(printf 'e\033z')" 'ü' 'p) = 9'; do
        echo 1234 > "$n"; cat "$n" > /dev/null; rm "$n"; done"#;
    let c = record_cmd(&s.sb, &s.work, &s.tmp, &out, &s.work, &["sh", "-c", script]);
    output(c, "record").ok();
    let text = fs::read_to_string(&out).unwrap();
    assert_eq!(
        paths(&text),
        [
            "0:%C3%BC",
            "0:a%0Ab",
            "0:d\\x",
            "0:e%1Bz",
            "0:p)%20=%209",
            "0:q\"x",
            "0:sp%20ace",
            "0:x>,%20<5",
        ],
        "{text}"
    );
    // Each name opened twice (written, read), looked at and removed, under the one name.
    for p in paths(&text) {
        assert_eq!(text.matches(&format!(" {p} ")).count(), 4, "{p}: {text}");
        assert_eq!(
            text.matches(&format!(" unlink {p} = 0\n")).count(),
            1,
            "{p}: {text}"
        );
    }
    // Read back by the trace reader and replayed as recorded.
    let o =
        s.sb.iolab(&[
            "run",
            "replay",
            "--trace",
            out.to_str().unwrap(),
            "--target",
            s.sb.path("t").to_str().unwrap(),
            "--quiet",
            "--json",
            "-",
        ])
        .ok();
    let x = &o.json()["tests"][0]["extra"];
    assert_eq!(x["calls"], x["recorded_calls"], "{x:#}");
    assert_eq!(x["mismatches"], 0, "{x:#}");
}

#[test]
fn a_link_out_of_the_root_is_outside_and_one_inside_is_resolved() {
    if !require_tools(&["strace", "stat"]) {
        return;
    }
    let s = setup();
    let root = s.work.join("root");
    fs::create_dir_all(root.join("sub")).unwrap();
    fs::write(root.join("sub/file"), "inside\n").unwrap();
    // Out of the root: to a file, to a directory, through `..`.
    symlink(&s.victim, root.join("leak")).unwrap();
    symlink(s.sb.path(""), root.join("away")).unwrap();
    symlink("../..", root.join("sub/up")).unwrap();
    // Inside: relative and absolute.
    symlink("sub/file", root.join("in")).unwrap();
    symlink(root.join("sub"), root.join("subdir")).unwrap();
    let out = s.sb.path("links.trace");
    let script = "cat leak away/victim sub/up/victim > /dev/null; stat -L leak > /dev/null; \
                  cat in subdir/file > /dev/null; stat -L in > /dev/null";
    let c = record_cmd(&s.sb, &root, &s.tmp, &out, &root, &["sh", "-c", script]);
    output(c, "record").ok();
    let text = fs::read_to_string(&out).unwrap();
    assert_eq!(paths(&text), ["0:sub/file"], "{text}");
    // Two opens of the file (through each inside link), its stat; what went to the victim
    // is left out.
    assert_eq!(text.matches(" open h").count(), 2, "{text}");
    assert!(text.contains(" stat 0:sub/file = 0\n"), "{text}");
    let calls: String = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(
        !calls.contains("victim") && !calls.contains("leak"),
        "{text}"
    );
}
