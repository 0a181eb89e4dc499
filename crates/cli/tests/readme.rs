//! The README's commands, pasted in order on a fresh machine, must work.
//!
//! Every fenced block opened with "```sh" in README.md is run, line by line, in a scratch
//! directory that stands for the user's home (`HOME` and `XDG_DATA_HOME` point into it, so
//! `~/iolab-try` and the default result database are the scratch directory's). A block
//! preceded by the line `<!-- readme-test: skip (REASON) -->` is not run (the test suite
//! itself, installing, commands that need minutes or write system directories); the
//! reason is required. On every line the text after ` # ` is a comment.
//!
//! Sizes and durations are shrunk so the whole README runs in seconds: for each
//! `iolab run|crosscheck|export-fio NAME ...` line, every option in [`SHRINK`] that NAME
//! takes (as its `--help` lists) is set to the small value, replacing the README's value or
//! (for sizes and durations, except --warmup, which export-fio and crosscheck refuse) added;
//! the block presets get `--runs 1` unless the line sets --runs or --until-stable; `run`
//! lines get --quiet; nothing else changes. `iolab` is the binary under test, and the journal path in
//! /dev/shm is made unique to this test. A command that exits non-zero fails the test with
//! the README line, what ran and its output. The output of `iolab run cdm`, `run atto` and
//! `compare` lines must fit their screens ([`SCREENS`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use iolab_testkit::iolab::iolab_bin;
use iolab_testkit::{have, scratch_dir};

/// Options set to a small value on every workload command that takes them: (option,
/// value, whether it is added when the README line does not give it).
const SHRINK: &[(&str, &str, bool)] = &[
    ("--size", "8MiB", true),
    ("--duration", "100ms", true),
    ("--warmup", "0", true),
    ("--sizes", "4k", true),
    ("--budget", "3s", false),
    ("--repeat", "2", false),
    ("--files", "200", false),
    ("--stagger", "100ms", false),
];

/// The screens the README's commands print on: (how the README line starts, lines of at most
/// 100 columns, the layout of a pipe). A `--repeat` line prints every run and is not held
/// to a run's screen. docs/reports.md states the same budgets.
const SCREENS: &[(&str, usize)] = &[
    ("iolab run cdm ", 40),
    ("iolab run atto ", 50),
    ("iolab compare ", 50),
];

/// The screen `line`'s output must fit in, if it has one.
fn screen(line: &str) -> Option<(&'static str, usize)> {
    if line.contains(" --repeat ") {
        return None;
    }
    SCREENS.iter().copied().find(|(p, _)| line.starts_with(p))
}

/// The spare disk of the README's "Tune your own disk" lines: a loop device stands in for it
/// (as root; the lines are skipped otherwise), and the studies those lines run are copied
/// with small sizes, short durations and one repeat ([`shrink_study`]).
const SPARE_DISK: &str = "/dev/sdX";

/// A study file with every `size`, `duration`, `time` and `warmup` small, one repeat, and
/// dbench replaying the tiny `loadfile` instead of client.txt.
fn shrink_study(text: &str, loadfile: &Path) -> String {
    let mut out = String::new();
    for l in text.lines() {
        if l.trim() == "kind = \"dbench\"" {
            out.push_str(&format!("{l}\nloadfile = \"{}\"\n", loadfile.display()));
            continue;
        }
        let key = l.split('=').next().unwrap_or("").trim();
        let line = match key {
            "repeats" => "repeats = 1".to_string(),
            "duration" | "time" => format!("{key} = \"300ms\""),
            "warmup" => "warmup = \"0s\"".to_string(),
            "size" => "size = \"8MiB\"".to_string(),
            _ => l.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The marker that keeps the next block from running.
const SKIP_MARKER: &str = "<!-- readme-test: skip (";

/// One command of the README: its line number and text (comment removed).
#[derive(Debug, PartialEq)]
struct Line {
    number: usize,
    text: String,
}

/// The commands of the `sh` blocks that are not marked to be skipped, and how many blocks
/// were skipped.
fn commands(readme: &str) -> (Vec<Line>, usize) {
    let mut out = Vec::new();
    let mut skipped = 0;
    let mut in_block = false;
    let mut run_block = false;
    let mut previous = "";
    for (i, raw) in readme.lines().enumerate() {
        let line = raw.trim_end();
        if in_block {
            if line.starts_with("```") {
                in_block = false;
            } else if run_block {
                let text = match line.find(" # ") {
                    Some(at) => &line[..at],
                    None if line.trim_start().starts_with('#') => "",
                    None => line,
                };
                if !text.trim().is_empty() {
                    out.push(Line {
                        number: i + 1,
                        text: text.trim().to_string(),
                    });
                }
            }
        } else if line.starts_with("```") {
            in_block = true;
            let sh = line == "```sh";
            let marked = previous.starts_with(SKIP_MARKER);
            if marked {
                assert!(
                    previous.ends_with(") -->") && previous.len() > SKIP_MARKER.len() + 5,
                    "README line {i}: a skip marker needs a reason: {previous}"
                );
            }
            run_block = sh && !marked;
            skipped += usize::from(sh && marked);
        }
        if !line.is_empty() {
            previous = line;
        }
    }
    (out, skipped)
}

/// The long options `iolab run NAME` takes, from its help.
fn options_of(name: &str) -> Vec<String> {
    let out = Command::new(iolab_bin())
        .args(["run", name, "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "iolab run {name} --help failed");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with("--"))
        .map(|w| w.trim_end_matches(',').to_string())
        .collect()
}

/// `words` of a workload command with every [`SHRINK`] option NAME takes set small.
fn shrink(words: &mut Vec<String>, known: &mut HashMap<String, Vec<String>>) {
    let Some(name) = words.get(2).filter(|w| !w.starts_with('-')).cloned() else {
        return;
    };
    if words.iter().any(|w| w == "--help") {
        return;
    }
    let takes = known
        .entry(name.clone())
        .or_insert_with(|| options_of(&name));
    for (opt, small, add) in SHRINK {
        // export-fio and crosscheck refuse --warmup (fio has no warm-up passes).
        let fio = words[1] != "run" && *opt == "--warmup";
        if fio || !takes.iter().any(|t| t == opt) {
            continue;
        }
        match words.iter().position(|w| w == opt) {
            Some(at) => words[at + 1] = small.to_string(),
            None if *add => words.extend([opt.to_string(), small.to_string()]),
            None => {}
        }
    }
    // One pass per test for the block presets (not for export-fio, which refuses --runs),
    // unless the line asks for passes itself.
    let block = takes.iter().any(|t| t == "--until-stable");
    let own = words.iter().any(|w| w == "--runs" || w == "--until-stable");
    if block && !own && words[1] != "export-fio" {
        words.extend(["--runs".to_string(), "1".to_string()]);
    }
    if words[1] == "run" {
        words.push("--quiet".into());
    }
}

/// The README line as it runs here: the binary under test, shrunk sizes, a private journal.
fn rewrite(
    text: &str,
    bin: &Path,
    journal: &str,
    known: &mut HashMap<String, Vec<String>>,
) -> String {
    let text = text.replace("/dev/shm/iolab-journal", journal);
    let mut words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    if words.first().map(String::as_str) != Some("iolab") {
        return text;
    }
    words[0] = bin.display().to_string();
    if matches!(
        words.get(1).map(String::as_str),
        Some("run" | "crosscheck" | "export-fio")
    ) {
        shrink(&mut words, known);
    }
    words.join(" ")
}

fn readme_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")
}

#[test]
fn extraction_honours_the_skip_marker_and_comments() {
    let text = "intro\n```sh\niolab a   # comment\n# only a comment\n\niolab b\n```\n\
                <!-- readme-test: skip (needs root) -->\n```sh\niolab c\n```\n```\n\
                iolab d\n```\n";
    let (lines, skipped) = commands(text);
    assert_eq!(
        lines,
        vec![
            Line {
                number: 3,
                text: "iolab a".into()
            },
            Line {
                number: 6,
                text: "iolab b".into()
            }
        ]
    );
    assert_eq!(skipped, 1);
}

#[test]
fn every_readme_command_works_in_order() {
    let readme = std::fs::read_to_string(readme_path()).unwrap();
    let (lines, skipped) = commands(&readme);
    // The README's "Using it" block alone has more than 25 commands; fewer means the
    // extraction broke, not that the README is fine.
    assert!(
        lines.len() >= 25,
        "only {} README commands found",
        lines.len()
    );
    assert!(skipped >= 1);

    let home = scratch_dir();
    let studies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies");
    std::os::unix::fs::symlink(studies, home.path().join("studies")).unwrap();
    let journal = format!("/dev/shm/iolab-readme-{}", std::process::id());
    let _ = std::fs::remove_file(&journal);
    let bin = iolab_bin();
    let mut known = HashMap::new();
    let mut screened: Vec<&str> = Vec::new();
    let state = home.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let (_lock, spare) = match readme.contains(SPARE_DISK) {
        true => match iolab_testkit::require_devices(&["mkfs.ext4", "wipefs", "lsblk"]) {
            Some(g) => (Some(g), Some(iolab_testkit::Loop::new(1 << 30))),
            None => (None, None),
        },
        false => (None, None),
    };
    for line in &lines {
        if line.text.contains(" crosscheck ") && !have("fio") {
            iolab_testkit::skip::skip(format!("README line {}: fio is not installed", line.number));
            continue;
        }
        let mut text = line.text.clone();
        if text.contains(SPARE_DISK) {
            let Some(spare) = &spare else {
                continue; // require_devices said why
            };
            text = text.replace(SPARE_DISK, spare.dev.to_str().unwrap());
            if text.starts_with("iolab study ") && !text.contains("--dry-run") {
                let words: Vec<String> = text.split_whitespace().map(String::from).collect();
                let file = words.iter().find(|w| w.ends_with(".toml")).unwrap();
                let small = home.path().join(format!("readme-{}.toml", line.number));
                let study = std::fs::read_to_string(home.path().join(file)).unwrap();
                let tiny = home.path().join("tiny-client.txt");
                std::fs::write(&tiny, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
                std::fs::write(&small, shrink_study(&study, &tiny)).unwrap();
                text = text.replace(file.as_str(), small.to_str().unwrap());
            }
        }
        let cmd = rewrite(&text, &bin, &journal, &mut known);
        let start = std::time::Instant::now();
        let out = Command::new("bash")
            .args(["-c", &cmd])
            .current_dir(home.path())
            .env("HOME", home.path())
            .env("XDG_DATA_HOME", home.path().join("data"))
            .env("IOLAB_STATE_DIR", &state)
            .env_remove("IOLAB_DB")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        println!(
            "README line {}: {:.1} s: {cmd}",
            line.number,
            start.elapsed().as_secs_f64()
        );
        assert!(
            out.status.success(),
            "README line {}: `{}` failed ({}); ran `{cmd}`\nstdout:\n{}\nstderr:\n{}",
            line.number,
            line.text,
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some((prefix, rows)) = screen(&line.text) {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let n = stdout.lines().count();
            assert!(
                n <= rows,
                "README line {}: `{}` printed {n} lines, more than its {rows}-line screen:\n{stdout}",
                line.number,
                line.text
            );
            for l in stdout.lines() {
                assert!(
                    l.chars().count() <= 100,
                    "README line {}: a line wider than 100 columns: {l}",
                    line.number
                );
            }
            screened.push(prefix);
        }
    }
    let _ = std::fs::remove_file(&journal);
    let _ = std::fs::remove_file(format!("{journal}.lock"));
    for (prefix, _) in SCREENS {
        assert!(
            screened.contains(prefix),
            "no README line starting `{prefix}` had its output measured"
        );
    }
}

/// The README says how many studies ship, in words; `studies/` holds that many files, and
/// the install line builds the locked dependency versions.
#[test]
fn the_readme_counts_the_shipped_studies_and_installs_locked() {
    let readme = std::fs::read_to_string(readme_path()).unwrap();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let studies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies");
    let n = std::fs::read_dir(studies)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "toml")
        })
        .count();
    let words = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let said = words
        .iter()
        .position(|w| flat.contains(&format!("the {w} shipped studies")))
        .expect("the README says how many studies ship");
    assert_eq!(said, n, "the README says {} shipped studies", words[said]);
    assert!(flat.contains("cargo install --locked --path crates/cli"));
}
