//! Every workload prints the verdict its help promises, once: `run verify` how many blocks it
//! read back and whether they held what was written, `run copy` "verified identical",
//! `run metadata` the space each small file takes, `dbench --verify` its check (once, not
//! again after the report). And the small messages: `--size` that is not a multiple of 4 KiB
//! on a directory blames --size, not the directory; `iolab man DIR` makes DIR (0755 whatever
//! the umask) and writes no page for the hidden `emudisk`; `--help` puts each option under
//! the heading it belongs to.

use std::os::unix::fs::PermissionsExt;

use iolab_testkit::{Out, Sandbox};

/// How often `needle` is in `text`, with lines joined (the report wraps long notes).
fn count(text: &str, needle: &str) -> usize {
    flat(text).matches(needle).count()
}

fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn verify_prints_its_verdict() {
    let sb = Sandbox::new();
    let out = sb.run(&["verify", "--size", "4MiB", "--runs", "1"]).ok();
    let line = "verify write 4K: 1024 blocks read back and checked: all held what was written";
    assert_eq!(count(&out.stdout, line), 1, "{out}");
    // Stored with the run: `show` says it too.
    let shown = sb.iolab(&["show", "1"]).ok();
    assert_eq!(count(&shown.stdout, line), 1, "{shown}");
}

#[test]
fn copy_says_verified_identical() {
    let sb = Sandbox::new();
    let out = sb.run(&["copy", "--size", "2MiB", "--runs", "2"]).ok();
    assert_eq!(count(&out.stdout, "verified identical"), 1, "{out}");
    assert!(
        flat(&out.stdout).contains("each of 2 copies read back and compared with the source"),
        "{out}"
    );
}

#[test]
fn metadata_prints_the_space_per_file() {
    let sb = Sandbox::new();
    // On a filesystem nothing else writes to (the other tests of this binary write theirs
    // beside the sandbox, other suites their in-memory images to /dev/shm): else the run
    // rightly says the figure is not its own.
    let quiet = iolab_testkit::QuietDir::new();
    let t = quiet.path().to_str().unwrap();
    let out = sb
        .iolab(&[
            "run",
            "metadata",
            "--files",
            "50",
            "--dirs",
            "2",
            "--file-size",
            "100B",
            "--target",
            t,
            "--quiet",
        ])
        .ok();
    let text = flat(&out.stdout);
    if quiet.shared() && text.contains("space: not measured") {
        // Not root: /dev/shm is anyone's, and the run says whose the change was.
        assert!(text.contains("other processes"), "{out}");
        eprintln!("space not checked: {t} is shared");
        return;
    }
    assert_eq!(
        count(&out.stdout, "space: each 100 B file takes"),
        1,
        "{out}"
    );
    assert!(text.contains("bytes allocated per file"), "{out}");
}

#[test]
fn dbench_verify_prints_its_verdict_once() {
    let sb = Sandbox::new();
    let lf = sb.path("tiny.txt");
    std::fs::write(&lf, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
    let out = sb
        .run(&[
            "dbench",
            "--loadfile",
            lf.to_str().unwrap(),
            "--time",
            "300ms",
            "--warmup",
            "0",
            "--verify",
        ])
        .ok();
    assert_eq!(count(&out.stdout, "verify dbench 1 client:"), 1, "{out}");
    assert!(out.stdout.contains(": all ok"), "{out}");
}

#[test]
fn a_size_that_is_not_a_multiple_of_4k_blames_size_not_the_directory() {
    let sb = Sandbox::new();
    let out = sb
        .run(&[
            "custom",
            "--size",
            "1GB",
            "--runs",
            "1",
            "--duration",
            "100ms",
        ])
        .code(2);
    out.stderr_has(&[
        "--size 1000000000 is not a positive multiple of 4 KiB",
        "1GiB",
    ]);
    assert!(
        !out.stderr.contains("use a directory, a regular file"),
        "{out}"
    );
}

#[test]
fn man_makes_its_directory_and_has_no_page_for_hidden_commands() {
    let sb = Sandbox::new();
    let dir = sb.path("share/man/man1");
    // SAFETY: umask only changes this process's mask; the child inherits it.
    let old = unsafe { libc::umask(0o077) };
    let man = |d: &std::path::Path| {
        let out = std::process::Command::new(iolab_testkit::iolab::iolab_bin())
            .arg("man")
            .arg(d)
            .output()
            .unwrap();
        Out::new(&["man"], out, std::time::Duration::ZERO)
    };
    let out = man(&dir);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let out = out.ok();
    assert!(out.stdout.contains("man pages to"), "{out}");
    for d in [sb.path("share"), sb.path("share/man"), dir.clone()] {
        let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "{}", d.display());
    }
    assert!(dir.join("iolab-run-cdm.1").is_file());
    assert!(!dir.join("iolab-emudisk.1").exists());
    // A file where the directory should be is refused, naming it.
    let file = sb.path("f");
    std::fs::write(&file, b"x").unwrap();
    man(&file)
        .code(2)
        .stderr_has(&["exists and is not a directory"]);
}

#[test]
fn help_groups_hold_their_own_options() {
    let sb = Sandbox::new();
    let out = sb.iolab(&["run", "custom", "--help"]).ok();
    // The options under each heading, heading by heading.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for l in out.stdout.lines() {
        if !l.starts_with(' ') && l.ends_with(':') {
            groups.push((l.trim_end_matches(':').to_string(), Vec::new()));
        } else if let Some(opt) = l
            .split_whitespace()
            .take_while(|w| w.starts_with('-'))
            .find(|w| w.starts_with("--"))
        {
            if let Some(g) = groups.last_mut() {
                g.1.push(opt.trim_end_matches(',').to_string());
            }
        }
    }
    let group_of = |opt: &str| {
        groups
            .iter()
            .find(|g| g.1.iter().any(|o| o == opt))
            .map(|g| g.0.clone())
            .unwrap_or_else(|| panic!("{opt} in no group: {groups:?}"))
    };
    let uring = group_of("--no-fixedbufs");
    for opt in [
        "--buffered",
        "--verify",
        "--stonewall",
        "--rw",
        "--until-stable",
    ] {
        assert_ne!(group_of(opt), uring, "{opt}: {groups:?}");
    }
    assert_eq!(group_of("--stonewall"), group_of("--shared-file"));
    let cdm = sb.iolab(&["run", "cdm", "--help"]).ok();
    assert!(cdm.stdout.contains("cdm options:\n      --mix"), "{cdm}");
}

#[test]
fn streams_that_never_overlapped_say_so() {
    let sb = Sandbox::new();
    // 4 MiB reads started 2 s apart: each is long done when the next starts.
    let out = sb
        .run(&[
            "streams",
            "--streams",
            "2",
            "--same-file",
            "--stagger",
            "2s",
            "--size",
            "4MiB",
            "--json",
            "-",
        ])
        .ok();
    let doc = out.json();
    let spans: Vec<(f64, f64)> = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["extra"]["stream"].is_u64())
        .map(|t| {
            (
                t["extra"]["start_s"].as_f64().unwrap(),
                t["extra"]["end_s"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(spans.len(), 2, "{out}");
    let said = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .any(|n| n.starts_with("the streams never overlapped"));
    if spans[0].1 <= spans[1].0 {
        assert!(said, "{out}");
        assert!(
            flat(&out.stderr).contains("the streams never overlapped"),
            "{out}"
        );
    } else {
        // A 4 MiB read that outlasted 2 s (a very busy machine): nothing to check.
        assert!(!said, "{out}");
        iolab_testkit::skip::skip_allowed("the first 4 MiB stream outlasted the 2 s stagger");
    }
}

/// The README's recording: `seq > n.txt` through the shell's redirection (dash saves fd 1,
/// dup2s the file onto it and vforks, a call strace pads before ` = `) is recorded, so the
/// replay reads what it wrote and nothing differs; what a recording leaves out beneath its
/// root is named with its calls and why.
#[test]
fn a_redirected_write_is_recorded_and_replayed() {
    if !iolab_testkit::have("strace") {
        iolab_testkit::skip::skip_allowed("strace is not installed");
        return;
    }
    let sb = Sandbox::new();
    let root = sb.target.to_str().unwrap().to_string();
    let trace = sb.path("sort.trace");
    let script = format!("seq 20000 > {root}/n.txt && sort -rn {root}/n.txt -o {root}/s.txt");
    let out = sb
        .iolab(&[
            "record",
            "-o",
            trace.to_str().unwrap(),
            "--root",
            &root,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .ok();
    assert!(!out.stdout.contains("untracked"), "{out}");
    let text = std::fs::read_to_string(&trace).unwrap();
    let writes = text
        .lines()
        .filter(|l| l.contains(" write h") && l.ends_with("= 4096"))
        .count();
    assert!(writes > 0, "no write of n.txt recorded: {text}");
    std::fs::remove_file(sb.target.join("n.txt")).unwrap();
    std::fs::remove_file(sb.target.join("s.txt")).unwrap();
    let out = sb
        .run(&["replay", "--trace", trace.to_str().unwrap(), "--verify"])
        .ok();
    assert!(out.stdout.contains(", 0 outcomes differ"), "{out}");
}

/// A replay whose outcomes differ says which and why, and its operation table counts them.
#[test]
fn a_replay_that_differs_says_which_calls_and_why() {
    let sb = Sandbox::new();
    let trace = sb.path("m.trace");
    std::fs::write(
        &trace,
        "iolab-trace 1\nroot 0 /x\nskipped untracked 2\n\
         1 0.000000 0.000010 open h1 0:n.txt w+creat+trunc 666 = 0\n\
         1 0.000100 0.000010 close h1 = 0\n\
         1 0.000200 0.000010 open h2 0:n.txt r 0 = 0\n\
         1 0.000300 0.000010 read h2 4096 = 100\n\
         1 0.000400 0.000010 close h2 = 0\n",
    )
    .unwrap();
    let out = sb.run(&["replay", "--trace", trace.to_str().unwrap()]).ok();
    let text = flat(&out.stdout);
    assert!(
        text.contains("1 outcomes differ from the recording"),
        "{out}"
    );
    assert!(
        text.contains("differ: 1 read (first: trace line 7: read returned 0, recorded 100)"),
        "{out}"
    );
    assert!(
        text.contains("the recording left out 2 calls beneath its roots"),
        "{out}"
    );
    assert!(text.contains("--verify makes this exit 3"), "{out}");
    // The table's Mismatch column: the read row counts it.
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("read "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.trim_end().ends_with(" 1"), "{row}");
    sb.run(&["replay", "--trace", trace.to_str().unwrap(), "--verify"])
        .code(3);
}

/// `history` of runs too few to judge changes says why every change is "?", under the
/// table, and still shows the values.
#[test]
fn history_says_why_every_change_is_unknown() {
    let sb = Sandbox::new();
    for _ in 0..2 {
        sb.run(&[
            "custom",
            "--size",
            "4MiB",
            "--runs",
            "1",
            "--io-size",
            "1MiB",
            "--duration",
            "60s",
        ])
        .ok();
    }
    let out = sb.iolab(&["history", "--preset", "custom"]).ok();
    let text = flat(&out.stdout);
    assert!(
        text.contains("? on every change: no run here has 2 earlier stored runs"),
        "{out}"
    );
    assert!(text.contains("iolab run custom ... --repeat 3"), "{out}");
}
