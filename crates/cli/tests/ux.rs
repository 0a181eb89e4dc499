//! Habits of other tools: shell completions, man pages, terminal width and colour.

use std::process::Command;

use iolab_report::style::plain;
use iolab_testkit::iolab::iolab_bin;
use iolab_testkit::{have, Out, Sandbox};

/// `iolab ARGS` without a database (the commands here open none).
fn iolab(args: &[&str]) -> Out {
    let start = std::time::Instant::now();
    let out = Command::new(iolab_bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Out::new(args, out, start.elapsed())
}

/// What bash completes for `words` (the last one being completed), with the generated
/// script loaded the way bash-completion loads it.
fn bash_complete(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let prog = format!(
        "source {}; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; \
         COMP_POINT=${{#COMP_LINE}}; _iolab iolab '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash").args(["-c", &prog]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completion_knows_workloads_and_their_options() {
    let sb = Sandbox::new();
    let out = iolab(&["completions", "bash"]).ok();
    let script = sb.path("iolab.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // The registry's workloads, under run.
    let names = bash_complete(&script, &["iolab", "run", "db"]);
    assert_eq!(names, vec!["dbench"]);
    // A workload's own option, which only the registry declares.
    let opts = bash_complete(&script, &["iolab", "run", "dbench", "--cli"]);
    assert_eq!(opts, vec!["--clients"]);
    // And not another workload's.
    assert!(bash_complete(&script, &["iolab", "run", "cdm", "--cli"]).is_empty());
    // The fixed commands.
    assert_eq!(
        bash_complete(&script, &["iolab", "comp"]),
        vec!["compare", "completions"]
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = iolab(&["completions", shell]).ok();
        assert!(
            out.stdout.contains("clients"),
            "{shell} completion lacks dbench's --clients"
        );
    }
    iolab(&["completions", "tcsh"]).code(2);
}

#[test]
fn man_pages_render_for_every_command_and_workload() {
    let sb = Sandbox::new();
    let dir = sb.path("man1");
    std::fs::create_dir(&dir).unwrap();
    iolab(&["man", dir.to_str().unwrap()]).ok();
    for page in [
        "iolab",
        "iolab-results",
        "iolab-run",
        "iolab-run-dbench",
        "iolab-run-cdm",
    ] {
        let path = dir.join(format!("{page}.1"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{page}.1: {e}"));
        assert!(text.contains(&format!(".TH {page} 1")), "{page}.1: {text}");
    }
    let dbench = std::fs::read_to_string(dir.join("iolab-run-dbench.1")).unwrap();
    assert!(dbench.contains("clients"));
    // Without DIR: iolab.1 on stdout, listing the commands.
    let top = iolab(&["man"]).ok();
    assert!(top.stdout.starts_with(".ie") && top.stdout.contains("completions"));
    // Rendered by groff without a warning.
    if have("groff") {
        let out = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww"])
            .arg(dir.join("iolab-run-dbench.1"))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("--clients"));
    } else {
        iolab_testkit::skip::skip("groff is not installed: man pages not rendered");
    }
    // A missing directory is made (crates/cli/tests/verdicts.rs checks its mode).
    iolab(&["man", sb.path("missing").to_str().unwrap()]).ok();
    assert!(sb.path("missing/iolab-run-cdm.1").is_file());
}

/// `cmd` run by `sh` on a terminal of `cols` columns (util-linux `script` makes the pty);
/// its output, carriage returns made line ends. `None` (after a counted skip) without `script`.
fn on_terminal(cols: u32, env: &[(&str, &str)], cmd: &str) -> Option<String> {
    if !have("script") {
        iolab_testkit::skip::skip("script (util-linux) is not installed: no terminal");
        return None;
    }
    let mut c = Command::new("script");
    c.args([
        "-qec",
        &format!("stty cols {cols} rows 40; {cmd}"),
        "/dev/null",
    ])
    .stdin(std::process::Stdio::null())
    .env_remove("NO_COLOR");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    // A progress bar redraws its line after a carriage return: each drawing on its own line.
    let text = String::from_utf8_lossy(&out.stdout)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    assert!(out.status.success(), "{cmd}: {text}");
    Some(text)
}

/// The side and code leading each line from the `Warnings` heading on (one line a code and
/// side, cut to the width: the lines, not their words, are the same at any width).
fn warning_words(text: &str) -> Vec<String> {
    let at = text.find("\nWarnings (").expect("a Warnings section");
    text[at..]
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

/// Two stored runs of the same small file, the first buffered (so that it carries the
/// PAGE_CACHE warning: the file was just written, its reads come from memory).
fn two_runs(sb: &Sandbox) {
    small_run(sb, "--size 4MiB --buffered").ok();
    small_run(sb, "--size 4MiB").ok();
}

/// `iolab run custom` reading 64k blocks for one pass that ends after 1 MiB (a 100 ms pass
/// beside a disk hog once completed no read, and the run rightly failed), with `extra`
/// options.
fn small_run(sb: &Sandbox, extra: &str) -> Out {
    let line = format!(
        "custom --rw read --bs 64k --runs 1 --io-size 1MiB --duration 60s --warmup 0 {extra}"
    );
    let args: Vec<&str> = line.split_whitespace().collect();
    sb.run(&args)
}

#[test]
fn text_fits_an_80_column_terminal_and_pipes_get_the_stable_layout() {
    let sb = Sandbox::new();
    two_runs(&sb);
    let bin = iolab_bin();
    let db = sb.db.display().to_string();
    let piped = sb.iolab(&["compare", "1", "2"]).ok().stdout;
    assert!(!piped.contains('\x1b'), "colour in a pipe");
    assert!(
        piped.lines().any(|l| l.chars().count() > 80),
        "the pipe layout is 100 columns"
    );
    assert!(piped.lines().all(|l| l.chars().count() <= 100));
    // COLUMNS does not change a pipe's layout.
    let mut c = sb.cmd(&["compare", "1", "2"]);
    let with_columns = c.env("COLUMNS", "60").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&with_columns.stdout), piped);

    for cmd in [
        format!("compare 1 2 --db {db}"),
        format!("results --db {db}"),
        format!("show 1 --db {db}"),
        "presets".to_string(),
    ] {
        let Some(text) = on_terminal(80, &[], &format!("{} {cmd}", bin.display())) else {
            return;
        };
        let text = plain(&text);
        // `show` ends with the environment, which iolab-env lays out on its own.
        let report = text.split("\nEnvironment captured").next().unwrap();
        for line in report.lines() {
            assert!(
                line.chars().count() <= 80,
                "{cmd}: {} columns: {line}",
                line.chars().count()
            );
        }
        if cmd.starts_with("compare") {
            // The same warning lines as the 100-column text, each cut to the width.
            assert_eq!(warning_words(&text), warning_words(&piped));
        }
    }
}

#[test]
fn colour_on_a_terminal_honours_no_color_and_the_color_flag() {
    let sb = Sandbox::new();
    two_runs(&sb);
    let cmd = format!(
        "{} compare 1 2 --db {}",
        iolab_bin().display(),
        sb.db.display()
    );
    let Some(tty) = on_terminal(100, &[], &cmd) else {
        return;
    };
    assert!(tty.contains("\x1b[33m[PAGE_CACHE]\x1b[0m"), "{tty}");
    let no_color = on_terminal(100, &[("NO_COLOR", "1")], &cmd).unwrap();
    assert!(!no_color.contains('\x1b'));
    assert_eq!(no_color, plain(&tty));
    let never = on_terminal(100, &[], &format!("{cmd} --color never")).unwrap();
    assert!(!never.contains('\x1b'));
    // --color always: in a pipe too, and it wins over NO_COLOR.
    let mut c = sb.cmd(&["compare", "1", "2", "--color", "always"]);
    let out = c.env("NO_COLOR", "1").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\x1b[33m[PAGE_CACHE]"));
    // Taken after a workload's options too, where the registry parses the rest.
    // Its file was just laid out, so PAGE_CACHE, or PAGE_CACHE_POSSIBLE when the kernel took
    // the pages back before the pass (this VM's DAMON pageout did, beside other suites).
    let run = small_run(&sb, "--size 1MiB --buffered --color=always").ok();
    let coloured = ["\x1b[33m[PAGE_CACHE]", "\x1b[33m[PAGE_CACHE_POSSIBLE]"];
    assert!(coloured.iter().any(|c| run.stdout.contains(c)), "{run}");
    sb.iolab(&["results", "--color", "sometimes"])
        .code(2)
        .stderr_has(&["--color"]);
}

#[test]
fn progress_shows_the_plan_and_which_test_and_dry_run_an_estimate() {
    let sb = Sandbox::new();
    let cmd = format!(
        "{} run cdm-real --target {} --size 4MiB --runs 1 --duration 100ms --warmup 0 --db {}",
        iolab_bin().display(),
        sb.target.display(),
        sb.db.display()
    );
    let Some(text) = on_terminal(100, &[], &cmd) else {
        return;
    };
    let text = plain(&text);
    assert!(
        text.contains("cdm-real on ") && text.contains("· region 4 MiB · 4 tests × (1 × 100ms)"),
        "{text}"
    );
    for k in 1..=4 {
        assert!(
            text.contains(&format!("test {k} of 4 ")),
            "test {k}: {text}"
        );
    }
    let studies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies");
    let out = sb
        .iolab(&[
            "study",
            "--dry-run",
            studies.join("raid5-cache.toml").to_str().unwrap(),
        ])
        .ok();
    assert!(
        out.stdout.contains("Estimated duration: ") && out.stdout.contains("of planned passes"),
        "{}",
        out.stdout
    );
}

#[test]
fn sizes_mean_what_their_unit_says_and_the_header_says_it() {
    let sb = Sandbox::new();
    for (size, region, bytes) in [
        (
            "64MB",
            "Region:   61.04 MiB (64000000 bytes)",
            64_000_000u64,
        ),
        ("8MiB", "Region:   8 MiB\n", 8 << 20),
        ("8m", "Region:   8 MiB\n", 8 << 20),
    ] {
        let out = small_run(&sb, &format!("--size {size} --json -")).ok();
        assert!(out.stderr.contains(region), "{size}: {}", out.stderr);
        assert_eq!(out.json()["size_bytes"].as_u64(), Some(bytes), "{size}");
    }
    // 4KB is 4000 bytes: not a block size O_DIRECT can use.
    sb.run(&["custom", "--rw", "read", "--bs", "4KB", "--size", "1MiB"])
        .code(2)
        .stderr_has(&["--bs", "512"]);
    sb.run(&["custom", "--size", "1Gb/s"])
        .code(2)
        .stderr_has(&["--size", "powers of 10"]);
}
