//! `iolab ab CMD_A -- CMD_B`: two `iolab run` commands run alternately, each run stored
//! under its side's label, judged after every pair with `iolab compare`'s verdicts, until
//! the comparison is decided or a budget ends. A study of two configurations without a
//! testbed: the runs are child `iolab run`s, as a study's are ([`crate::run`]).
//!
//! The order is A B B A, A B B A, ...: every pair holds one run of each side, and over
//! every four runs both sides sit at the same mean position in time (A at 0 and 3, B at 1
//! and 2), so a drift of the machine that is linear over those runs moves both sides' means
//! alike; A B A B would leave B one step later than A in every pair. A run that comes after
//! its own side's run and one that comes after the other side's are balanced too (a warm
//! cache left by the previous run touches both sides alike).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use iolab_report::compare::{self as cmp, Comparison};
use iolab_report::set::{primary_metric, Call, RunSet};
use iolab_runner::{ParseError, Registry, RunError};
use iolab_store::Store;
use serde_json::json;

use crate::run::joined;

/// Runs a side `iolab ab` makes at most unless `--max-runs` says otherwise.
pub const DEFAULT_MAX_RUNS: u32 = 10;
/// The most runs a side `--max-runs` takes.
pub const MAX_RUNS: u32 = 1000;
/// Runs a side before the first judgement: two give each side its own spread (Welch), and
/// stopping at the first possible look would spend the 5% on the noisiest estimate.
pub const MIN_RUNS: usize = 2;
/// The order, as the output and the JSON name it.
pub const ORDER: &str = "A B B A";

/// Confounds that more alternated runs can take away: load that happened to fall on one
/// side's runs. A line *different* only with one of them is not yet decided.
const LOAD_CONFOUNDS: &[&str] = &["BUSY_DEVICE", "BUSY_CPU", "PAGE_CACHE", "BLKIO_THROTTLE"];

/// What `iolab ab` was asked.
#[derive(Debug, Clone)]
pub struct AbOptions {
    /// The arguments of `iolab run` for side A (the workload first) and side B.
    pub a: Vec<String>,
    pub b: Vec<String>,
    pub label_a: String,
    pub label_b: String,
    /// The margin, in percent, inside which the sides are *same*.
    pub margin_pct: f64,
    /// Wall time the whole ab may take; `None`: only `max_runs` ends it.
    pub budget: Option<Duration>,
    /// Runs a side at most.
    pub max_runs: u32,
    pub db: PathBuf,
    /// Whether `--db` was given (repeated in the hints).
    pub db_given: bool,
    /// `--json`: the comparison document with the ab's own record, to a file or `-`.
    pub json: Option<String>,
}

/// The side (0: A, 1: B) of run `k` (from 0) in the order A B B A, A B B A, ...
pub fn side_of(k: usize) -> usize {
    match k % 4 {
        0 | 3 => 0,
        _ => 1,
    }
}

/// Checks one side's command with `iolab run`'s registry (the workload's options parsed
/// and its plan checked: nothing is touched), and refuses the options `iolab ab` sets
/// itself. `which`: `A` or `B`.
pub fn check(reg: &Registry, which: &str, args: &[String]) -> Result<(), RunError> {
    let shown = format!("{which}'s command `iolab run {}`", args.join(" "));
    if args.is_empty() {
        return Err(RunError::usage(format!(
            "{which}'s command is empty: write `iolab ab [OPTIONS] WORKLOAD [ARGS] -- \
             WORKLOAD [ARGS]`"
        )));
    }
    if args[0].starts_with('-') {
        return Err(RunError::usage(format!(
            "{shown}: name the workload first (`cdm --size 64MiB`, not `--size 64MiB`), so \
             its options are not read as `iolab ab`'s"
        )));
    }
    let parsed = match reg.parse("iolab run", args) {
        Ok(p) => p,
        Err(ParseError::Usage(u)) => return Err(RunError::usage(format!("{shown}: {u}"))),
        Err(ParseError::Clap(e)) => {
            return Err(RunError::usage(format!(
                "{shown}: {}",
                crate::check::first_line(&e)
            )))
        }
    };
    let c = &parsed.common;
    let refused = [
        (
            c.label.is_some(),
            "--label",
            "give --label-a / --label-b to `iolab ab`",
        ),
        (c.db.is_some(), "--db", "give --db to `iolab ab`"),
        (c.json.is_some(), "--json", "give --json to `iolab ab`"),
        (c.no_store, "--no-store", "ab judges the runs it stores"),
        (
            c.repeat.is_some(),
            "--repeat",
            "ab repeats the runs itself, alternating (--max-runs)",
        ),
        (
            c.study.is_some(),
            "--study",
            "a study's runs are made by `iolab study`",
        ),
    ];
    for (given, opt, why) in refused {
        if given {
            return Err(RunError::usage(format!(
                "{shown}: {opt} is set by ab: {why}"
            )));
        }
    }
    Ok(())
}

/// The comparison of the runs so far: A's runs against B's, with the store's noise.
fn judge(
    store: &Store,
    o: &AbOptions,
    ids: &[Vec<i64>; 2],
) -> Result<(Comparison, Vec<bool>), RunError> {
    let load = |v: &[i64]| -> Result<Vec<iolab_measure::RunRecord>, RunError> {
        let mut out = Vec::new();
        for id in v {
            let r = store.load_run(*id)?;
            if r.failure().is_none() {
                out.push(r);
            }
        }
        Ok(out)
    };
    let mut set = RunSet::groups(vec![
        (format!("label {}", o.label_a), load(&ids[0])?),
        (format!("label {}", o.label_b), load(&ids[1])?),
    ]);
    set.margin_pct = o.margin_pct;
    set.set_noise(crate::run::store_noise(store, &set)?);
    let c = cmp::compare(&set);
    let primary = c
        .rows
        .iter()
        .map(|r| r.metric == primary_metric(set.aligned(&r.test).iter().flatten().copied()))
        .collect();
    Ok((c, primary))
}

/// Whether every test's primary line is *same*, or *different* without a load confound
/// (one that more alternated runs could balance).
fn decided(c: &Comparison, primary: &[bool]) -> bool {
    let mut any = false;
    for (r, _) in c.rows.iter().zip(primary).filter(|(_, p)| **p) {
        any = true;
        let Some(d) = r.cells.get(1).and_then(|cell| cell.decision.as_ref()) else {
            return false;
        };
        let settled = match d.call {
            Call::Same => true,
            Call::Different => !d
                .confounded_by
                .iter()
                .any(|x| LOAD_CONFOUNDS.contains(&x.code.as_str())),
            Call::Undecided => false,
        };
        if !settled {
            return false;
        }
    }
    any
}

/// The median runs a side the undecided primary lines need.
fn runs_needed(c: &Comparison, primary: &[bool]) -> Option<usize> {
    let mut v: Vec<usize> = c
        .rows
        .iter()
        .zip(primary)
        .filter(|(_, p)| **p)
        .filter_map(|(r, _)| r.cells.get(1)?.decision.as_ref())
        .filter(|d| d.call == Call::Undecided)
        .filter_map(|d| d.runs_needed)
        .collect();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// Runs A and B alternately until decided; prints the comparison and what more would buy.
/// Ends `Ok` when it ended (decided or not), `RunError::Interrupted` (exit 130) when
/// interrupted.
pub fn execute(o: &AbOptions) -> Result<(), RunError> {
    if let Some(d) = o.json.as_deref().filter(|d| *d != "-") {
        if std::fs::symlink_metadata(d).is_ok() {
            return Err(RunError::usage(format!(
                "--json {d}: the file exists (ab writes a new one; choose another name)"
            )));
        }
    }
    let stop = crate::run::install_signals()?;
    let store = Store::open(&o.db)?;
    let exe =
        std::env::current_exe().map_err(|e| RunError::caused("cannot find the iolab binary", e))?;
    let to_stdout = o.json.as_deref() == Some("-");
    // With the document on standard output, the progress goes to standard error.
    let say = |s: &str| {
        if to_stdout {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    };
    let labels = [o.label_a.as_str(), o.label_b.as_str()];
    let cmds = [&o.a, &o.b];
    say(&format!(
        "ab: A = iolab run {} (label {}), B = iolab run {} (label {}); order {ORDER} ..., \
         judged after every pair from {MIN_RUNS} runs a side (±{}), at most {} runs a side{}",
        o.a.join(" "),
        o.label_a,
        o.b.join(" "),
        o.label_b,
        cmp::pct(o.margin_pct),
        o.max_runs,
        o.budget.map_or(String::new(), |b| format!(
            ", budget {}",
            iolab_runner::progress::short_duration(b)
        ))
    ));
    let started = Instant::now();
    let mut ids: [Vec<i64>; 2] = [Vec::new(), Vec::new()];
    let mut failure: Option<String> = None;
    let mut interrupted = false;
    let mut judged: Option<(Comparison, Vec<bool>)> = None;
    let mut is_decided = false;
    let max = o.max_runs as usize;
    let total = 2 * max;
    let mut k = 0usize;
    let why: String = loop {
        if stop.load(Ordering::Relaxed) {
            interrupted = true;
            break "interrupted".into();
        }
        if k.is_multiple_of(2) {
            // At a pair's start: is there time and room for another pair?
            if ids[0].len() >= max && ids[1].len() >= max {
                break format!("{max} runs a side reached (--max-runs)");
            }
            if let Some(b) = o.budget {
                let pairs = k / 2;
                let per_pair = if pairs == 0 {
                    0.0
                } else {
                    started.elapsed().as_secs_f64() / pairs as f64
                };
                if started.elapsed().as_secs_f64() + per_pair > b.as_secs_f64() {
                    break format!(
                        "the budget ends (another pair would take about {:.0} s more)",
                        per_pair
                    );
                }
            }
        }
        let side = side_of(k);
        let letter = ["A", "B"][side];
        let mut cmd = Command::new(&exe);
        cmd.arg("run")
            .args(cmds[side])
            .arg(joined("--label", labels[side].as_ref()))
            .arg(joined("--db", o.db.as_os_str()));
        let who = format!("{letter} ({})", labels[side]);
        match crate::run::run_child(
            cmd,
            String::new(),
            None,
            &stop,
            &who,
            &cmds[side][0],
            (k + 1, total),
        ) {
            Ok(Some(r)) => {
                ids[side].push(r.id);
                let run = store.load_run(r.id)?;
                say(&format!(
                    "  [{}/{total}] {who}: run #{} ({:.1} s){}",
                    k + 1,
                    r.id,
                    r.secs,
                    crate::run::run_summary(&run)
                ));
                if let Some(msg) = r.integrity {
                    failure = Some(msg);
                    break "a run found an integrity failure".into();
                }
            }
            Ok(None) => {
                interrupted = true;
                break "interrupted".into();
            }
            Err(e) => {
                failure = Some(e.to_string());
                break "a run failed".into();
            }
        }
        k += 1;
        if k.is_multiple_of(2) && ids[0].len() >= MIN_RUNS && ids[1].len() >= MIN_RUNS {
            let (c, primary) = judge(&store, o, &ids)?;
            if c.rows.is_empty() {
                failure = Some(format!(
                    "A and B have no test in common ({}), so there is nothing to compare: \
                     `iolab compare` aligns tests by name",
                    c.partial
                        .iter()
                        .map(|(t, s)| format!("{t}: only on {}", s.join(", ")))
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
                judged = Some((c, primary));
                break "no test in common".into();
            }
            say(&format!("  after {} pairs: {}", k / 2, cmp::answer(&c, 1)));
            is_decided = decided(&c, &primary);
            judged = Some((c, primary));
            if is_decided {
                break "decided".into();
            }
        }
    };
    // What finished is judged, also when interrupted or cut short mid-pair.
    let last_judged = judged
        .as_ref()
        .is_some_and(|(c, _)| c.sides.iter().map(|s| s.run_ids.len()).sum::<usize>() == k);
    if !last_judged && !ids[0].is_empty() && !ids[1].is_empty() {
        judged = Some(judge(&store, o, &ids)?);
    }
    let elapsed = started.elapsed();
    let db_hint = if o.db_given {
        format!(" --db {}", store.path().display())
    } else {
        String::new()
    };
    let pairs = ids[0].len().min(ids[1].len());
    let per_pair = if pairs > 0 {
        Some(elapsed.as_secs_f64() / pairs as f64)
    } else {
        None
    };
    let need = judged
        .as_ref()
        .filter(|_| !is_decided)
        .and_then(|(c, p)| runs_needed(c, p));
    let batches = format!(
        "Batches are not an issue here: A's and B's runs alternated ({ORDER} ...), so both \
         sides span the same time and a drift of the machine touches them alike (no \
         `sequential` confound)."
    );
    let more = need.map(|n| {
        let extra = n.saturating_sub(pairs);
        let t = per_pair.map_or(String::new(), |p| {
            format!(
                ", about {} at this pace",
                iolab_runner::progress::short_duration(Duration::from_secs_f64(p * extra as f64))
            )
        });
        let m = cmp::pct(o.margin_pct);
        if n > MAX_RUNS as usize {
            // Beyond what --max-runs takes: say so rather than name a value it refuses.
            return format!(
                "the runs vary too much to decide a ±{m} change (about {n} runs a side, more \
                 than --max-runs takes: {MAX_RUNS}); see the warnings, or a wider --margin"
            );
        }
        format!(
            "about {n} runs a side would decide a ±{m} change at the noise measured: {extra} \
             more pair(s){t} (--max-runs {n}{})",
            o.budget
                .map_or(String::new(), |_| " and a larger --budget".into())
        )
    });
    if let Some(d) = &o.json {
        let mut doc = match &judged {
            Some((c, _)) => cmp::document(c, env!("CARGO_PKG_VERSION")),
            None => json!({}),
        };
        doc["ab"] = json!({
            "order": ORDER,
            "labels": {"a": o.label_a, "b": o.label_b},
            "commands": {"a": o.a, "b": o.b},
            "run_ids": {"a": ids[0], "b": ids[1]},
            "decided": is_decided,
            "stopped": why,
            "seconds": elapsed.as_secs_f64(),
            "margin_pct": o.margin_pct,
            "interleaved": true,
            "batches": batches,
            "runs_needed": need,
            "more_pairs": need.map(|n| n.saturating_sub(pairs)),
        });
        let text = serde_json::to_string_pretty(&doc).expect("a Value serialises") + "\n";
        if d == "-" {
            print!("{text}");
        } else {
            use std::io::Write;
            iolab_sys::files::create_new(std::path::Path::new(d))
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(|e| RunError::caused(format!("cannot write {d}"), e))?;
        }
    }
    if !to_stdout {
        if let Some((c, _)) = &judged {
            println!();
            print!(
                "{}",
                iolab_report::style::paint(&cmp::render_opts(
                    c,
                    iolab_report::Detail::Summary,
                    false
                ))
            );
        }
        println!();
    }
    say(&format!(
        "ab: {} run(s) of A (label {}), {} of B (label {}) in {:.0} s; stopped: {why}.",
        ids[0].len(),
        o.label_a,
        ids[1].len(),
        o.label_b,
        elapsed.as_secs_f64()
    ));
    say(&format!("ab: {batches}"));
    if let Some(m) = &more {
        say(&format!("ab: undecided; {m}."));
    }
    if judged.is_some() {
        say(&format!(
            "Again later: iolab compare --label {} --label {}{db_hint} (with any earlier runs \
             of these labels)",
            o.label_a, o.label_b
        ));
    }
    if let Some(f) = failure {
        return Err(RunError::Failed(f));
    }
    if interrupted {
        eprintln!("iolab: ab interrupted; the runs that finished are stored and judged above");
        return Err(RunError::Interrupted);
    }
    Ok(())
}

/// Options of a stored command line that `iolab ab` sets itself (with a value, and
/// switches): left out of the command it is handed.
const SET_BY_AB: &[&str] = &[
    "--label",
    "--db",
    "--json",
    "--repeat",
    "--study",
    "--config",
    "--study-meta",
];
const SWITCHES_SET_BY_AB: &[&str] = &["--quiet", "-q", "--no-store"];

/// The `iolab run` arguments a stored run was made with, as `iolab ab` takes them: the
/// options ab sets left out, the target made absolute (the stored one). `None` when the
/// run was not made by `iolab run`.
pub fn run_args(command_line: &[String], target_path: &str) -> Option<Vec<String>> {
    let mut words = command_line.iter().skip(1);
    if words.next().map(String::as_str) != Some("run") {
        return None;
    }
    let mut out = Vec::new();
    let mut target = false;
    let mut words = words.peekable();
    while let Some(w) = words.next() {
        let name = w.split('=').next().unwrap_or(w);
        if SWITCHES_SET_BY_AB.contains(&w.as_str()) {
            continue;
        }
        if SET_BY_AB.contains(&name) {
            if !w.contains('=') {
                words.next();
            }
            continue;
        }
        if name == "--target" || name == "-t" {
            if !w.contains('=') {
                words.next();
            }
            out.push("--target".into());
            out.push(target_path.to_string());
            target = true;
            continue;
        }
        out.push(w.clone());
    }
    if !target {
        out.push("--target".into());
        out.push(target_path.to_string());
    }
    Some(out)
}

/// A word as a POSIX shell reads it back: bare when it is only safe characters, else in
/// single quotes.
fn shell_word(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_=+./:,@%".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// The `iolab ab` command that runs the commands of runs `a` and `b` alternately under
/// new labels (`LABEL-ab`, or ab's own `a`/`b`), when both commands pass `iolab run`'s
/// registry; `db`: the `--db` to repeat.
pub fn suggestion(
    reg: &Registry,
    a: &iolab_measure::RunRecord,
    b: &iolab_measure::RunRecord,
    db: Option<&str>,
) -> Option<String> {
    let cmd_a = run_args(&a.command_line, &a.target.path)?;
    let cmd_b = run_args(&b.command_line, &b.target.path)?;
    command_text(
        reg,
        (cmd_a, a.label.as_deref()),
        (cmd_b, b.label.as_deref()),
        db,
    )
}

/// [`suggestion`] from each side's `iolab run` arguments and label.
fn command_text(
    reg: &Registry,
    (cmd_a, la): (Vec<String>, Option<&str>),
    (cmd_b, lb): (Vec<String>, Option<&str>),
    db: Option<&str>,
) -> Option<String> {
    check(reg, "A", &cmd_a).ok()?;
    check(reg, "B", &cmd_b).ok()?;
    let mut s = String::from("iolab ab");
    if let Some(d) = db {
        s.push_str(&format!(" --db {}", shell_word(d)));
    }
    if let (Some(la), Some(lb)) = (la, lb) {
        if la != lb {
            s.push_str(&format!(
                " --label-a {} --label-b {}",
                shell_word(&format!("{la}-ab")),
                shell_word(&format!("{lb}-ab"))
            ));
        }
    }
    for w in cmd_a {
        s.push(' ');
        s.push_str(&shell_word(&w));
    }
    s.push_str(" --");
    for w in cmd_b {
        s.push(' ');
        s.push_str(&shell_word(&w));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_command_becomes_the_ab_command_that_repeats_it() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let line = words(&[
            "/x/iolab",
            "run",
            "custom",
            "--rw",
            "read",
            "--size",
            "4MiB",
            "--label",
            "before",
            "--db=/tmp/r db",
            "-q",
            "--target",
            "d",
        ]);
        let a = run_args(&line, "/mnt/my disk").unwrap();
        assert_eq!(
            a,
            [
                "custom",
                "--rw",
                "read",
                "--size",
                "4MiB",
                "--target",
                "/mnt/my disk"
            ]
        );
        // No --target given: the stored (absolute) one is added.
        assert_eq!(
            run_args(&words(&["iolab", "run", "custom"]), "/d").unwrap(),
            ["custom", "--target", "/d"]
        );
        assert!(run_args(&words(&["iolab", "crosscheck"]), "/d").is_none());
        let mut b = a.clone();
        b[2] = "randread".into();
        let reg = iolab_workloads::registry();
        assert_eq!(
            command_text(
                &reg,
                (a.clone(), Some("before")),
                (b, Some("after")),
                Some("/tmp/r db")
            )
            .unwrap(),
            "iolab ab --db '/tmp/r db' --label-a before-ab --label-b after-ab custom --rw read \
             --size 4MiB --target '/mnt/my disk' -- custom --rw randread --size 4MiB --target \
             '/mnt/my disk'"
        );
        // A command the registry refuses is not suggested.
        let bad = words(&["custom", "--rw", "sideways"]);
        assert!(command_text(&reg, (a, None), (bad, None), None).is_none());
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }

    #[test]
    fn the_order_is_abba_and_every_pair_holds_both_sides() {
        let order: String = (0..8).map(|k| ["A", "B"][side_of(k)]).collect();
        assert_eq!(order, "ABBAABBA");
        for pair in 0..4 {
            assert_ne!(side_of(2 * pair), side_of(2 * pair + 1));
        }
        // Over every four runs both sides sit at the same mean position.
        let mean = |s: usize| -> f64 {
            let k: Vec<usize> = (0..4).filter(|&k| side_of(k) == s).collect();
            k.iter().sum::<usize>() as f64 / k.len() as f64
        };
        assert_eq!(mean(0), mean(1));
    }

    #[test]
    fn a_side_command_is_checked_before_anything_runs() {
        let reg = iolab_workloads::registry();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(check(&reg, "A", &s(&["custom", "--rw", "read", "--size", "4MiB"])).is_ok());
        let e = check(&reg, "B", &s(&["nosuch"])).unwrap_err().to_string();
        assert!(
            e.contains("B's command") && e.contains("unknown workload"),
            "{e}"
        );
        let e = check(&reg, "A", &s(&["custom", "--bogus"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("A's command") && e.contains("--bogus"), "{e}");
        let e = check(&reg, "A", &s(&["custom", "--label", "x"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--label is set by ab"), "{e}");
        let e = check(&reg, "A", &s(&["custom", "--repeat", "3"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--repeat"), "{e}");
        let e = check(&reg, "A", &s(&["--size", "4MiB"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("name the workload first"), "{e}");
        assert!(check(&reg, "A", &[]).is_err());
    }
}
