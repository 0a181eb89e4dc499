//! [`check_workload`]: a study workload's options checked by `iolab run`'s own registry (the
//! workload's options struct parses them and its plan checks them, as a run would before
//! touching anything), with the TOML key each refusal is about.

use iolab_runner::{ParseError, Registry};

use crate::file::{Workload, WorkloadProblem};

/// Checks `w` with `reg`; a refusal names the workload's key (`buffered`, not `--buffered`
/// or the value `yes` given to it) when it can tell which.
pub fn check_workload(reg: &Registry, w: &Workload) -> Result<(), WorkloadProblem> {
    let mut argv: Vec<String> = vec![w.kind.clone()];
    argv.extend(w.args.iter().cloned());
    if reg.find(&w.kind).is_none() {
        return Err(WorkloadProblem {
            key: Some("kind".into()),
            message: format!(
                "unknown workload '{}' (known: {})",
                w.kind.escape_debug(),
                reg.names().join(", ")
            ),
        });
    }
    let key_of = |flag: &str| flag.trim_start_matches('-').replace('-', "_");
    match reg.parse("iolab run", &argv) {
        Ok(p) if p.common.repeat.is_some() => Err(WorkloadProblem {
            key: Some("repeat".into()),
            message: "--repeat does not apply to a study's runs: give the study `repeats`".into(),
        }),
        Ok(_) => Ok(()),
        Err(ParseError::Usage(u)) => Err(WorkloadProblem {
            key: u.option.as_deref().map(key_of),
            message: u.to_string(),
        }),
        Err(ParseError::Clap(e)) => {
            let invalid = e
                .get(clap::error::ContextKind::InvalidArg)
                .map(|v| v.to_string())
                .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
                .filter(|v| !v.is_empty());
            let first = first_line(&e);
            // A value that is not an option is the value given to a switch (`buffered =
            // "yes"` became `--buffered yes`): name the switch.
            let value_of = invalid
                .as_deref()
                .filter(|a| !a.starts_with('-'))
                .and_then(|a| {
                    w.args
                        .windows(2)
                        .find(|p| p[1] == a && p[0].starts_with("--"))
                        .map(|p| key_of(&p[0]))
                });
            if let Some(key) = value_of {
                return Err(WorkloadProblem {
                    message: format!(
                        "is a switch: write `{key} = true` or `{key} = false`, not a string"
                    ),
                    key: Some(key),
                });
            }
            Err(WorkloadProblem {
                key: invalid.map(|a| key_of(&a)),
                message: format!("not an option of `iolab run {}`: {first}", w.kind),
            })
        }
    }
}

/// The first line of a clap error, without its `error: `.
pub(crate) fn first_line(e: &clap::Error) -> String {
    let text = e.to_string();
    text.lines()
        .next()
        .unwrap_or("")
        .trim_start_matches("error: ")
        .to_string()
}
