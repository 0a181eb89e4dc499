//! Which stored runs repeat one measurement: the fingerprint of a run's command.
//!
//! Two runs share a fingerprint when they measured the same thing the same way: the same
//! workload and preset, on the same target (path and kind; for a study run, the study and
//! configuration, whose devices are rebuilt for every run), with the same settings, the
//! same options on the command line (less those that only say where results go: `--label`
//! is kept, `--db`, `--json`, `--quiet`, `--no-store`, `--target`, `--repeat` and the
//! device-permission flags are not), the same label and configuration label, the same
//! engine, on the same host. Their spread is the run-to-run noise `iolab compare` and
//! `iolab history` test a single run against (see docs/statistics.md).
//!
//! The fingerprint is `fp1-` and 16 hex digits (64-bit FNV-1a of the parts, each named and
//! on its own line); `fp1` names this recipe, so a later change of recipe can tell old
//! fingerprints apart.

use iolab_measure::RunRecord;

/// What a fingerprint is made of, as stored in a run's row.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    pub workload: &'a str,
    pub preset: &'a str,
    pub target_kind: &'a str,
    pub target_path: &'a str,
    pub label: Option<&'a str>,
    pub config_label: Option<&'a str>,
    pub study: Option<&'a str>,
    /// The host name from the captured environment.
    pub host: Option<&'a str>,
    pub engine: &'a str,
    /// The settings as stored (`runs.settings_json`).
    pub settings_json: &'a str,
    pub command_line: &'a [String],
}

/// Options that do not change what is measured, and whether each takes a value.
const IGNORED: &[(&str, bool)] = &[
    ("--target", true),
    ("-t", true),
    ("--db", true),
    ("--json", true),
    ("--label", true),
    ("--study", true),
    ("--config", true),
    ("--study-meta", true),
    ("--repeat", true),
    ("--no-store", false),
    ("--quiet", false),
    ("-q", false),
    ("--allow-destroy-device", false),
    ("--allow-overwrite-file", false),
];

/// The command line without the program name and without the options in [`IGNORED`]
/// (`--opt VALUE`, `--opt=VALUE`, `-tVALUE`), in its order.
pub fn measured_args(command_line: &[String]) -> Vec<&str> {
    let mut out = Vec::new();
    let mut args = command_line.iter().skip(1).map(String::as_str);
    while let Some(a) = args.next() {
        let mut skip = false;
        for (name, takes_value) in IGNORED {
            if a == *name {
                if *takes_value {
                    args.next();
                }
                skip = true;
            } else if *takes_value
                && (a.starts_with(&format!("{name}="))
                    || (name.len() == 2 && a.starts_with(name) && !a.starts_with("--")))
            {
                skip = true;
            }
        }
        if !skip {
            out.push(a);
        }
    }
    out
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The fingerprint of a run from its stored parts.
pub fn of_parts(p: &Parts<'_>) -> String {
    // A study's devices and mount points are rebuilt for every run: the study and its
    // configuration name the target instead.
    let target = match (p.study, p.config_label) {
        (Some(s), Some(c)) => format!("study {s} / config {c}"),
        _ => p.target_path.to_string(),
    };
    let text = format!(
        "workload={}\npreset={}\nkind={}\ntarget={target}\nlabel={}\nconfig={}\nstudy={}\n\
         host={}\nengine={}\nsettings={}\nargs={}",
        p.workload,
        p.preset,
        p.target_kind,
        p.label.unwrap_or("\u{0}"),
        p.config_label.unwrap_or("\u{0}"),
        p.study.unwrap_or("\u{0}"),
        p.host.unwrap_or("\u{0}"),
        p.engine,
        p.settings_json,
        measured_args(p.command_line).join("\u{1f}"),
    );
    format!("fp1-{:016x}", fnv1a(text.as_bytes()))
}

/// The fingerprint of `run`, given its settings encoded as the store encodes them.
pub(crate) fn of_run(run: &RunRecord, settings_json: &str) -> String {
    of_parts(&Parts {
        workload: &run.workload,
        preset: &run.preset,
        target_kind: run.target.kind.as_str(),
        target_path: &run.target.path,
        label: run.label.as_deref(),
        config_label: run.config_label.as_deref(),
        study: run.study.as_deref(),
        host: run.env["hostname"].as_str(),
        engine: run.engine_text(),
        settings_json,
        command_line: &run.command_line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn where_results_go_is_not_part_of_the_command() {
        let a = argv(
            "/usr/bin/iolab run custom --rw read --target /tmp/x --db /tmp/a.db --json - \
             --quiet --bs 128k",
        );
        assert_eq!(
            measured_args(&a),
            ["run", "custom", "--rw", "read", "--bs", "128k"]
        );
        let b = argv(
            "iolab run custom -t/tmp/y --rw read --db=/tmp/b.db -q --no-store --bs 128k \
             --repeat 5 --label=x --allow-destroy-device",
        );
        assert_eq!(
            measured_args(&b),
            ["run", "custom", "--rw", "read", "--bs", "128k"]
        );
        // A value that merely starts like an ignored short option is kept.
        let c = argv("iolab run custom --rw read --bs 4k --target-size 1");
        assert_eq!(
            measured_args(&c),
            [
                "run",
                "custom",
                "--rw",
                "read",
                "--bs",
                "4k",
                "--target-size",
                "1"
            ]
        );
    }

    #[test]
    fn every_part_counts() {
        let cl = argv("iolab run cdm --size 64MiB");
        let base = Parts {
            workload: "block",
            preset: "cdm",
            target_kind: "dir",
            target_path: "/mnt/x",
            label: None,
            config_label: None,
            study: None,
            host: Some("h"),
            engine: "io_uring",
            settings_json: "{}",
            command_line: &cl,
        };
        let fp = of_parts(&base);
        assert!(fp.starts_with("fp1-") && fp.len() == 20, "{fp}");
        assert_eq!(fp, of_parts(&base), "deterministic");
        let other_cl = argv("iolab run cdm --size 32MiB");
        let variants = [
            Parts {
                preset: "atto",
                ..base
            },
            Parts {
                target_path: "/mnt/y",
                ..base
            },
            Parts {
                target_kind: "file",
                ..base
            },
            Parts {
                label: Some("a"),
                ..base
            },
            Parts {
                label: Some(""),
                ..base
            },
            Parts {
                host: Some("g"),
                ..base
            },
            Parts {
                settings_json: "{\"direct\":true}",
                ..base
            },
            Parts {
                command_line: &other_cl,
                ..base
            },
            Parts {
                engine: "psync",
                ..base
            },
        ];
        for v in &variants {
            assert_ne!(of_parts(v), fp, "{v:?}");
        }
        // A study run is identified by its study and configuration, not its device.
        let s1 = Parts {
            study: Some("s"),
            config_label: Some("c"),
            target_path: "/dev/loop3",
            ..base
        };
        let s2 = Parts {
            target_path: "/dev/loop7",
            ..s1
        };
        assert_eq!(of_parts(&s1), of_parts(&s2));
        // Known value: guards against an accidental change of recipe.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
