//! Workloads shaped like real jobs rather than synthetic block tests: dbench loadfile
//! replay, file copies, dd-style streams, the sync-method probe, metadata rates, the
//! verified-write workload (`verify`, `iolab run verify`), the scrub test on redundant
//! testbeds (`scrub`) and the record/replay of an application's own I/O (`replay`). Each
//! produces iolab's ordinary test records, so statistics, the store, reports and warnings
//! treat them like any other run. What their `--verify` writes and checks (block format,
//! small-file content, dbench's model, the tally) is iolab-integrity's.

pub mod block;
pub mod dbench;
pub mod fsync;

mod beneath;
pub mod common;
pub mod copy;
pub mod crosscheck;
mod describe;
pub mod fio;
pub mod metadata;
pub mod replay;
pub mod scrub;
pub mod streams;
pub mod sustained;
pub mod verify;

/// Every workload `iolab run` knows, in the order `iolab run --help` lists them: the block
/// presets, then the workloads shaped like real jobs. Adding a workload is one line here.
pub static WORKLOADS: &[&dyn iolab_runner::Workload] = &[
    &block::WORKLOAD,
    &fsync::run::WORKLOAD,
    &dbench::run::WORKLOAD,
    &copy::run::WORKLOAD,
    &streams::run::WORKLOAD,
    &metadata::run::WORKLOAD,
    &verify::run::WORKLOAD,
    &scrub::run::WORKLOAD,
    &fio::run::WORKLOAD,
    &replay::run::WORKLOAD,
    &sustained::run::WORKLOAD,
];

/// Installs what every workload says of itself (`iolab_measure::workload`), and every
/// engine's description (`iolab_spec::engopt`), for the crates below this one: reports, warnings, the runner. The binary calls it first; so does every
/// test that reports or warns on runs in process.
pub fn install() {
    iolab_measure::workload::install(infos());
    iolab_engine::engines::install();
}

/// Every workload's descriptor once, in the registry's order (fio and sustained run
/// through the block pass loop and store block runs: they share the block presets').
fn infos() -> Vec<&'static dyn iolab_measure::workload::WorkloadInfo> {
    let mut out: Vec<&'static dyn iolab_measure::workload::WorkloadInfo> = Vec::new();
    for info in registry().infos() {
        if !out.iter().any(|o| o.name() == info.name()) {
            out.push(info);
        }
    }
    out
}

/// The registry `iolab run` and `iolab study` parse workloads with.
pub fn registry() -> iolab_runner::Registry {
    iolab_runner::Registry {
        workloads: WORKLOADS,
        default: block::default_name,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use iolab_measure::workload::{self, Counts, MpiPass};

    use super::*;

    #[test]
    fn every_workload_describes_itself_once() {
        install();
        let infos = infos();
        for w in WORKLOADS {
            let info = w.info();
            assert!(
                !info.name().is_empty(),
                "{:?}: a descriptor without a name",
                w.names()
            );
            assert!(info.stored_as(info.name()), "{}", info.name());
            // The catalogue answers for the name its runs store, with this descriptor.
            let found = workload::named(info.name()).expect("installed");
            assert_eq!(found.name(), info.name());
            assert_eq!(found.counts(), info.counts(), "{}", info.name());
            assert_eq!(found.mpi(), info.mpi(), "{}", info.name());
        }
        let mut names: Vec<&str> = infos.iter().map(|i| i.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), infos.len(), "two descriptors share a name");
        // What docs/mpi.md and the reports say of them (a workload added later says its own:
        // adding one leaves this test as it is).
        let known = [
            "block",
            "copy",
            "dbench",
            "fsync",
            "metadata",
            "replay",
            "scrub-test",
            "streams",
            "verify",
        ];
        assert!(known.iter().all(|n| names.contains(n)), "{names:?}");
        names.retain(|n| known.contains(n));
        let of = |n: &str| workload::named(n).unwrap();
        let ops: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| of(n).counts() == Counts::Operations)
            .collect();
        assert_eq!(ops, ["fsync", "metadata"]);
        let mpi: Vec<(&str, MpiPass)> = names
            .iter()
            .filter_map(|n| of(n).mpi().map(|m| (*n, m)))
            .collect();
        assert_eq!(
            mpi,
            [
                ("block", MpiPass::Pass),
                ("dbench", MpiPass::Replay),
                ("metadata", MpiPass::Phase)
            ]
        );
        // The views the reports draw, by preset, and how tests are described.
        let block = of("block");
        assert_eq!(block.view("atto"), Some(workload::View::Atto));
        for cdm in ["cdm", "cdm-real", "cdm-nvme", "cdm-peak"] {
            assert_eq!(
                block.view(cdm),
                Some(workload::View::CrystalDiskMark),
                "{cdm}"
            );
        }
        assert_eq!(block.view("custom"), None);
        let patterns: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| of(n).tests_are_io_patterns())
            .collect();
        assert_eq!(patterns, ["block", "verify"]);
        // Runs stored before the family was recorded are block runs.
        assert_eq!(workload::named("").map(|w| w.name()), Some("block"));
        // fsync tests stored before their extra named the workload are still fsync's.
        let legacy = serde_json::json!({"open_flags": "O_DSYNC", "method": "open_datasync"});
        assert!(of("fsync").owns_extra(&legacy));
        assert!(!of("fsync").owns_extra(&serde_json::json!({"workload": "copy", "method": 1})));
    }

    /// The crates below this one, whose code must not branch on a workload's name.
    const BELOW: [&str; 6] = ["report", "stats", "runner", "study", "engine", "store"];

    /// Sites left in files another change is rewriting (the report formats' split): each
    /// file may keep at most this many until it is ported; none may be added anywhere.
    const NOT_YET_PORTED: [(&str, usize); 0] = [];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "tests") {
                    rust_files(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs")
                && p.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(p);
            }
        }
    }

    /// The lines of non-test code: without `#[cfg(test)]` items and comment lines.
    fn code_lines(text: &str) -> Vec<(usize, &str)> {
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let t = lines[i].trim();
            if t == "#[cfg(test)]" {
                i += 1;
                let (mut depth, mut opened) = (0i64, false);
                while i < lines.len() {
                    let l = lines[i];
                    depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
                    opened |= l.contains('{');
                    i += 1;
                    if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                        break;
                    }
                }
                continue;
            }
            if !t.starts_with("//") {
                out.push((i + 1, lines[i]));
            }
            i += 1;
        }
        out
    }

    /// Whether `line` compares or matches the string literal `"name"` (or tests a prefix
    /// `"name-`).
    fn branches_on(line: &str, name: &str) -> bool {
        let lit = format!("\"{name}\"");
        let prefix = format!("(\"{name}-");
        if line.contains(&format!("starts_with{prefix}")) {
            return true;
        }
        line.match_indices(&lit).any(|(at, _)| {
            let before = line[..at].trim_end();
            let after = line[at + lit.len()..].trim_start();
            let before = before.strip_suffix("Some(").unwrap_or(before).trim_end();
            ["==", "!=", "|", "matches!(", "contains(&", "contains("]
                .iter()
                .any(|s| before.ends_with(s))
                || ["=>", "|", "==", "!=", "if "]
                    .iter()
                    .any(|s| after.starts_with(s))
                || before.contains("[&str;")
        })
    }

    #[test]
    fn no_crate_below_names_a_workload() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut names: Vec<String> = registry().names().iter().map(|s| s.to_string()).collect();
        names.extend(infos().iter().map(|i| i.name().to_string()));
        let mut sites: Vec<(String, String)> = Vec::new();
        for c in BELOW {
            let mut files = Vec::new();
            rust_files(&crates.join(c).join("src"), &mut files);
            for f in files {
                let text = std::fs::read_to_string(&f).unwrap();
                let rel = f.strip_prefix(&crates).unwrap().display().to_string();
                for (n, line) in code_lines(&text) {
                    if names.iter().any(|name| branches_on(line, name)) {
                        sites.push((rel.clone(), format!("{rel}:{n}: {}", line.trim())));
                    }
                }
            }
        }
        let mut over = Vec::new();
        let mut files: Vec<&String> = sites.iter().map(|(f, _)| f).collect();
        files.dedup();
        for f in files {
            let here: Vec<&String> = sites
                .iter()
                .filter(|(g, _)| g == f)
                .map(|(_, s)| s)
                .collect();
            let allowed = NOT_YET_PORTED
                .iter()
                .find(|(g, _)| g == f)
                .map_or(0, |(_, n)| *n);
            if here.len() > allowed {
                over.extend(here);
            }
        }
        assert!(
            over.is_empty(),
            "code below iolab-workloads branches on a workload's name; ask its \
             descriptor (iolab_measure::workload) instead:\n{}",
            over.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
        // The rule itself finds what it is meant to.
        assert!(branches_on("    if run.workload == \"fsync\" {", "fsync"));
        assert!(branches_on("        \"copy\" => copy_facts(run),", "copy"));
        assert!(branches_on(
            "matches!(w, \"fsync\" | \"metadata\")",
            "metadata"
        ));
        assert!(branches_on(
            "x.get(\"workload\") == Some(\"verify\")",
            "verify"
        ));
        assert!(branches_on("r.preset.starts_with(\"cdm-\")", "cdm"));
        assert!(!branches_on("plural(n, \"copy\", \"copies\")", "copy"));
        let test_only = "fn a() {}\n#[cfg(test)]\nmod tests {\n    x == \"copy\";\n}\n";
        assert_eq!(code_lines(test_only).len(), 1);
    }

    /// The modules below this crate that declare the typed keys of a test's `extra`.
    const EXTRA_TYPED: [&str; 1] = ["measure/src/extra.rs"];

    /// Where non-test code reads a test's `extra` by a string key: `extra` followed
    /// (across line breaks) by `["KEY"]`, `.get("KEY")` or `.pointer("KEY")`, as line
    /// numbers.
    fn extra_key_reads(code: &[(usize, &str)]) -> Vec<usize> {
        let text: String = code.iter().map(|(_, l)| format!("{l}\n")).collect();
        let line_at = |at: usize| code[text[..at].matches('\n').count()].0;
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let mut out = Vec::new();
        for (at, _) in text.match_indices("extra") {
            let before = text[..at].chars().next_back();
            let rest = &text[at + "extra".len()..];
            if before.is_some_and(ident) || rest.chars().next().is_some_and(ident) {
                continue;
            }
            let rest = rest.trim_start();
            let keyed = ["[", ".get(", ".pointer("]
                .iter()
                .find_map(|open| rest.strip_prefix(open))
                .is_some_and(|arg| arg.trim_start().starts_with('"'));
            if keyed {
                out.push(line_at(at));
            }
        }
        out
    }

    #[test]
    fn no_crate_below_reads_extra_by_key() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut sites = Vec::new();
        for c in BELOW.iter().chain(&["measure", "serve"]) {
            let mut files = Vec::new();
            rust_files(&crates.join(c).join("src"), &mut files);
            for f in files {
                let rel = f.strip_prefix(&crates).unwrap().display().to_string();
                if EXTRA_TYPED.contains(&rel.as_str()) {
                    continue;
                }
                let text = std::fs::read_to_string(&f).unwrap();
                let code = code_lines(&text);
                for n in extra_key_reads(&code) {
                    let line = code.iter().find(|(m, _)| *m == n).map_or("", |l| l.1);
                    sites.push(format!("{rel}:{n}: {}", line.trim()));
                }
            }
        }
        assert!(
            sites.is_empty(),
            "code below iolab-workloads reads a test's `extra` by a string key; read the \
             runner's keys through `TestRecord::runner_extra` (iolab_measure::extra) and a \
             workload's through its descriptor (iolab_measure::workload):\n{}",
            sites.join("\n")
        );
        // The rule itself finds what it is meant to, across lines, and nothing else.
        let reads = |src: &str| extra_key_reads(&code_lines(src));
        assert_eq!(reads("let d = &t.extra[\"durability\"];"), [1]);
        assert_eq!(reads("a\nt.extra\n    .get(\"ops\")\n"), [2]);
        assert_eq!(reads("x.extra.get( \"adaptive\")"), [1]);
        assert!(reads("t.fs_extra.get(\"sync\")").is_empty());
        assert!(reads("t.extra.get(k)").is_empty());
        assert!(reads("let extra = json!({\"a\": 1});").is_empty());
    }
}
