//! Habits of other tools: shell completions, man pages, terminal width and colour.

use std::process::Command;

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
    iolab(&["man", sb.path("missing").to_str().unwrap()])
        .code(2)
        .stderr_has(&["not a directory"]);
}
