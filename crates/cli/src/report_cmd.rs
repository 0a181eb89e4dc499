//! `iolab report`, `iolab compare` and `iolab history`: load stored runs, hand them to
//! iolab-report, and write what it renders to files or standard output.

use iolab_runner::RunError;
use std::path::Path;

use iolab_measure::RunRecord;
use iolab_report::compare as cmp;
use iolab_report::formats::{self, Format, View};
use iolab_report::history as hist;
use iolab_report::set::{Noise, RunSet};
use iolab_store::{RunFilter, Store};

use crate::args::{CompareArgs, HistoryArgs, ReportArgs};
use crate::error::{open_store, RunRef};

fn load_ids(store: &Store, ids: &[RunRef]) -> Result<Vec<RunRecord>, RunError> {
    ids.iter()
        .map(|r| Ok(store.load_run(r.resolve(store)?)?))
        .collect()
}

/// The fingerprints of runs `ids` and the other stored runs of their commands: the
/// run-to-run noise single runs are judged against.
fn load_noise(store: &Store, ids: &[i64]) -> Result<Noise, RunError> {
    Ok(Noise::load(
        ids,
        |id| store.fingerprint(id),
        |fp, n| store.runs_like(fp, n, &mut crate::error::skipped_warning),
    )?)
}

fn load_filtered(store: &Store, filter: &RunFilter) -> Result<Vec<RunRecord>, RunError> {
    store
        .list_runs(filter)?
        .into_iter()
        .map(|l| Ok(store.load_run(l.id)?))
        .collect()
}

/// Where one output goes: a file, or standard output for `-`.
struct Output<'a> {
    dest: &'a str,
    text: String,
}

/// Checks destinations before anything is computed: at most one on standard output, and
/// none that looks like a run id swallowed by an option (`--csv 12`).
fn check_destinations(dests: &[(&'static dyn Format, String)]) -> Result<(), RunError> {
    let mut stdout = Vec::new();
    for (f, d) in dests {
        let opt = f.name();
        if d == "-" {
            stdout.push(opt);
        } else if d.parse::<RunRef>().is_ok() && !Path::new(d).exists() {
            return Err(RunError::usage(format!(
                "--{opt} {d}: '{d}' looks like a run id; put run ids before --{opt} \
                 (or write ./{d} to mean a file)"
            )));
        }
    }
    if stdout.len() > 1 {
        return Err(RunError::usage(format!(
            "only one format can go to standard output (--{} all have no FILE)",
            stdout.join(", --")
        )));
    }
    Ok(())
}

fn write_outputs(outputs: Vec<Output<'_>>) -> Result<(), RunError> {
    for o in outputs {
        if o.dest == "-" {
            print!("{}", o.text);
        } else {
            std::fs::write(o.dest, &o.text)
                .map_err(|e| RunError::caused(format!("cannot write {}", o.dest), e))?;
            eprintln!("wrote {}", o.dest);
        }
    }
    Ok(())
}

/// Renders `view` in each chosen format.
fn render_all<'a>(chosen: &'a [(&'static dyn Format, String)], view: &View<'_>) -> Vec<Output<'a>> {
    chosen
        .iter()
        .map(|(f, dest)| Output {
            dest,
            text: f
                .render(view)
                .expect("the options offer only formats that render the view"),
        })
        .collect()
}

pub fn report(a: ReportArgs) -> Result<(), RunError> {
    let mut chosen = a.formats.chosen.clone();
    if chosen.is_empty() {
        chosen.push((formats::SCREEN, "-".into()));
    }
    check_destinations(&chosen)?;
    let store = open_store(&a.db)?;
    let set = match &a.study {
        Some(study) => {
            let runs = load_filtered(
                &store,
                &RunFilter {
                    study: Some(study.clone()),
                    ..RunFilter::default()
                },
            )?;
            if runs.is_empty() {
                return Err(RunError::usage(format!(
                    "study '{study}' not found in {}: no stored run belongs to it",
                    store.path().display()
                )));
            }
            let (set, failed) = RunSet::stored_study(study, runs, a.all_invocations)
                .map_err(RunError::from_error)?;
            for r in &failed {
                eprintln!(
                    "iolab: run {} ({}) is left out: it failed: {}",
                    r.id.unwrap_or(0),
                    r.config_label.as_deref().unwrap_or(&r.preset),
                    r.failure().unwrap_or("")
                );
            }
            set
        }
        None => RunSet::per_run(load_ids(&store, &a.run_ids)?),
    };
    let mut set = set;
    if let Some(m) = a.margin {
        set.margin_pct = m;
    }
    if let Some(b) = &a.baseline {
        set.set_baseline(b)
            .map_err(|e| RunError::usage(e.to_string()))?;
    }
    set.set_noise(load_noise(&store, &set.run_ids())?);
    write_outputs(render_all(&chosen, &View::Runs(&set)))?;
    Ok(())
}

pub fn compare(a: CompareArgs) -> Result<(), RunError> {
    check_destinations(&a.formats.chosen)?;
    let store = open_store(&a.db)?;
    if a.label.len() > 1 && a.host.len() > 1 {
        return Err(RunError::usage(
            "compare takes its sides from --label or from --host, not both: give one of \
             them more than once and the other at most once",
        ));
    }
    let groups: Vec<(String, Vec<RunRecord>)> = if !a.label.is_empty() || !a.host.is_empty() {
        // The option given more than once makes the sides; the other narrows every side.
        let by_host = a.host.len() > 1 || a.label.is_empty();
        let (sides, one) = if by_host {
            (&a.host, a.label.first())
        } else {
            (&a.label, a.host.first())
        };
        let mut g = Vec::new();
        for side in sides {
            let (label, host) = if by_host {
                (one.cloned(), Some(side.clone()))
            } else {
                (Some(side.clone()), one.cloned())
            };
            let filter = RunFilter {
                label: label.clone(),
                host: host.clone(),
                ..RunFilter::default()
            };
            let runs = load_filtered(&store, &filter)?;
            let name = match (by_host, &label, &host) {
                (true, Some(l), _) => format!("host {side} (label {l})"),
                (true, None, _) => format!("host {side}"),
                (false, _, Some(h)) => format!("label {side} (host {h})"),
                (false, _, None) => format!("label {side}"),
            };
            if runs.is_empty() {
                let what = match (by_host, &host) {
                    (false, None) => format!("label '{side}' not found"),
                    _ => format!("{name}: not found"),
                };
                return Err(RunError::usage(format!(
                    "{what} in {}: no stored run {}",
                    store.path().display(),
                    if host.is_none() {
                        "carries it"
                    } else {
                        "matches"
                    }
                )));
            }
            g.push((name, runs));
        }
        g
    } else {
        load_ids(&store, &a.run_ids)?
            .into_iter()
            .map(|r| {
                let mut name = r.id.map_or("run".to_string(), |id| format!("run {id}"));
                if let Some(l) = r.config_label.as_ref().or(r.label.as_ref()) {
                    name.push_str(&format!(" ({l})"));
                }
                (name, vec![r])
            })
            .collect()
    };
    if groups.len() < 2 {
        return Err(RunError::usage(
            "compare needs at least two sides: two or more run ids, or --label twice",
        ));
    }
    let mut set = RunSet::groups(groups);
    if let Some(m) = a.margin {
        set.margin_pct = m;
    }
    set.set_noise(load_noise(&store, &set.run_ids())?);
    let mut c = cmp::compare(&set);
    // Sides run as separate batches: the command that runs each with A interleaved.
    let db = a.db.db.as_ref().map(|p| p.to_string_lossy().into_owned());
    let reg = crate::run_cmd::registry();
    c.ab_commands = (1..c.sides.len())
        .filter(|&k| {
            cmp::side_confounds(&c, k)
                .iter()
                .any(|x| x.code == "sequential")
        })
        .filter_map(|k| {
            let first = |i: usize| set.configs.get(i).and_then(|g| g.runs.first());
            let cmd = iolab_study::ab::suggestion(&reg, first(0)?, first(k)?, db.as_deref())?;
            Some((c.sides[k].letter.clone(), cmd))
        })
        .collect();
    if !a.formats.chosen.is_empty() {
        let version = set
            .runs()
            .next()
            .map_or(env!("CARGO_PKG_VERSION").to_string(), |r| {
                r.iolab_version.clone()
            });
        let view = View::Comparison {
            comparison: &c,
            iolab_version: &version,
        };
        write_outputs(render_all(&a.formats.chosen, &view))?;
    } else {
        let detail = if a.verbose {
            iolab_report::Detail::Full
        } else {
            iolab_report::Detail::Summary
        };
        print!(
            "{}",
            iolab_report::style::paint(&cmp::render_opts(&c, detail, a.all || a.verbose))
        );
        for (letter, cmd) in &c.ab_commands {
            // Laid out at the terminal's width, continued with ` \` so it still pastes.
            let cmd = iolab_report::shell_lines(cmd, iolab_report::style::width(), "  ", "  ");
            println!("\nTo run A and {letter} interleaved until decided:\n{cmd}");
        }
    }
    Ok(())
}

pub fn history(a: HistoryArgs) -> Result<(), RunError> {
    check_destinations(&a.formats.chosen)?;
    let store = open_store(&a.db)?;
    let filter = RunFilter {
        host: a.host,
        ..crate::listing::filter(a.preset, a.target, a.label, None, a.limit)
    };
    // The headlines are in the tests' summaries: no pass is decoded.
    let runs = crate::error::load_skipping_damaged(&store, &filter)?;
    let ids: Vec<i64> = runs.iter().filter_map(|r| r.id).collect();
    let noise = load_noise(&store, &ids)?;
    let margin = a.margin.unwrap_or(iolab_report::set::DEFAULT_MARGIN_PCT);
    if a.formats.chosen.is_empty() {
        print!(
            "{}",
            iolab_report::style::paint(&hist::render_at(&runs, &noise, margin))
        );
    } else {
        let view = View::History {
            runs: &runs,
            noise: &noise,
            iolab_version: env!("CARGO_PKG_VERSION"),
            margin_pct: margin,
        };
        write_outputs(render_all(&a.formats.chosen, &view))?;
    }
    Ok(())
}
