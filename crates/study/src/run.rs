//! Running a study: for each step of the schedule, build the configuration's testbed
//! (iolab-testbed), run every workload on it as a child `iolab run` inside the testbed's
//! throttle cgroup (reading the child's run document from its standard output), tear it
//! down, and print the comparison of the stored runs (iolab-report). Teardown happens on
//! success, on error, on Ctrl-C and on SIGTERM; what a kill -9 leaves, `iolab cleanup`
//! removes.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iolab_report::formats::{self, Format, View};
use iolab_report::set::RunSet;
use iolab_runner::RunError;
use iolab_store::Store;
use iolab_testbed::{StateFile, Testbed, TestbedError};

use crate::{schedule, Study, Workload};

/// Where and how a study is run.
pub struct RunOptions {
    /// The result database the runs are stored in.
    pub db: PathBuf,
    /// Whether `--db` was given (repeated in the "again later" hint).
    pub db_given: bool,
    /// Also write these reports (`--html FILE`): each format with its file.
    pub reports: Vec<(&'static dyn Format, PathBuf)>,
    /// `--until-decided`: add rounds until the ranking is decided.
    pub until_decided: Option<UntilDecided>,
}

/// `--until-decided [--budget TIME] [--margin PCT]`: after the first rounds (the file's
/// `repeats`), more rounds visit only the configurations of an adjacent pair
/// of the ranking that is still *undecided* (racing: a configuration *different* from its
/// neighbours, or *same* as them, is not measured again), until every adjacent pair is
/// *different* or *same within the margin*, the budget ends, or `max_rounds` is reached.
#[derive(Debug, Clone, Copy)]
pub struct UntilDecided {
    /// Wall time the whole study may take (builds included); `None`: no limit but the
    /// rounds.
    pub budget: Option<Duration>,
    /// The margin, in percent, inside which two configurations are *same*.
    pub margin_pct: f64,
    /// The most rounds a configuration gets.
    pub max_rounds: u32,
}

/// How many rounds `--until-decided` gives a configuration at most.
pub const MAX_ROUNDS: u32 = 30;

/// Ctrl-C, SIGTERM and SIGHUP (a closed terminal) only raise the flag: a study always tears
/// down what it built, so a second signal does not cut that short (a kill -9 does; then
/// `iolab cleanup`).
pub(crate) fn install_signals() -> Result<Arc<AtomicBool>, RunError> {
    let stop = Arc::new(AtomicBool::new(false));
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| RunError::caused("signals", e))?;
    }
    Ok(stop)
}

/// What happened to one visit's runs.
struct Outcome {
    run_ids: Vec<i64>,
    failures: Vec<String>,
    interrupted: bool,
}

/// A study being run: what every visit needs, and what the visits so far did.
struct Session<'a> {
    study: &'a Study,
    store: &'a Store,
    state_dir: PathBuf,
    exe: PathBuf,
    db_path: PathBuf,
    invocation: String,
    stop: Arc<AtomicBool>,
    started: Instant,
    out: Outcome,
    done: usize,
    total: usize,
    /// Rounds announced (the file's repeats, or more with `--until-decided`).
    rounds: u32,
    /// Where the time went: visits made, and the time spent building and tearing down
    /// testbeds, in the child runs, and judging the ranking (`--until-decided`).
    time: Spent,
    /// What judging the ranking after every visit keeps rather than reads again: the
    /// runs of this invocation, each run's fingerprint, and the other stored runs of each
    /// fingerprint (earlier runs: the ones this invocation adds are its own).
    cache: JudgeCache,
}

#[derive(Default)]
struct JudgeCache {
    runs: std::collections::HashMap<i64, iolab_measure::RunRecord>,
    fingerprints: std::collections::HashMap<i64, String>,
    like: std::collections::HashMap<String, Vec<iolab_measure::RunRecord>>,
}

/// Where a study's time went (printed by `--until-decided`).
#[derive(Default)]
struct Spent {
    visits: usize,
    testbeds: Duration,
    runs: Duration,
    judging: Duration,
}

impl Session<'_> {
    /// Builds configuration `step.config`, runs its workloads, tears it down. `Ok(false)`
    /// when the study was interrupted.
    fn visit(&mut self, step: schedule::Step) -> Result<bool, RunError> {
        let study = self.study;
        if self.stop.load(Ordering::Relaxed) {
            self.out.interrupted = true;
            return Ok(false);
        }
        let cfg = &study.configs[step.config];
        println!(
            "round {}/{} · {}: building",
            step.round + 1,
            self.rounds,
            cfg.label
        );
        self.time.visits += 1;
        let building = Instant::now();
        let state = StateFile::create(&self.state_dir).map_err(RunError::from_error)?;
        let built = iolab_testbed::build(&cfg.testbed, &state, &self.stop);
        self.time.testbeds += building.elapsed();
        let tb = match built {
            Ok(tb) => tb,
            Err(TestbedError::Interrupted) => {
                self.out.interrupted = true;
                return Ok(false);
            }
            Err(e) => {
                let msg = format!("{}: building the testbed failed: {e}", cfg.label);
                eprintln!("iolab: {msg}");
                self.out.failures.push(msg);
                self.done += study
                    .workloads
                    .iter()
                    .filter(|w| w.applies_to(&cfg.label))
                    .count();
                return Ok(true);
            }
        };
        let visit = Visit {
            study,
            step_round: step.round,
            config: step.config,
            invocation: &self.invocation,
            exe: &self.exe,
            db: &self.db_path,
            stop: &self.stop,
        };
        for w in study.workloads.iter().filter(|w| w.applies_to(&cfg.label)) {
            if self.stop.load(Ordering::Relaxed) {
                self.out.interrupted = true;
                break;
            }
            self.done += 1;
            let (done, total) = (self.done, self.total);
            let running = Instant::now();
            let ran = visit.run_workload(&tb, w, done, total);
            self.time.runs += running.elapsed();
            match ran {
                Ok(Some(r)) => {
                    let run = self.store.load_run(r.id)?;
                    println!(
                        "  [{done}/{total}] {} · {}: run #{} ({:.1} s){}{}",
                        cfg.label,
                        w.label,
                        r.id,
                        r.secs,
                        run_summary(&run),
                        eta(self.started.elapsed(), done, total)
                    );
                    self.out.run_ids.push(r.id);
                    self.cache.runs.insert(r.id, run);
                    if let Some(msg) = r.integrity {
                        eprintln!("iolab: {msg}");
                        self.out.failures.push(msg);
                    }
                }
                Ok(None) => self.out.interrupted = true,
                Err(e) => {
                    eprintln!("iolab: {e}");
                    self.out.failures.push(e.to_string());
                }
            }
        }
        let tearing = Instant::now();
        let torn = tb.teardown();
        self.time.testbeds += tearing.elapsed();
        if let Err(e) = torn {
            let msg = format!(
                "{}: teardown left something behind ({e}); run `iolab cleanup`",
                cfg.label
            );
            eprintln!("iolab: {msg}");
            self.out.failures.push(msg);
        }
        Ok(!self.out.interrupted)
    }

    /// The runs stored so far, as the study's set (failed runs left out), with the noise
    /// the final report judges them with: earlier runs of the same configurations (earlier
    /// invocations of the study) measure a configuration that has one repeat so far.
    fn set(&mut self) -> Result<RunSet, RunError> {
        let mut runs = Vec::new();
        for id in &self.out.run_ids {
            let r = match self.cache.runs.get(id) {
                Some(r) => r.clone(),
                None => self.store.load_run(*id)?,
            };
            if r.failure().is_none() {
                runs.push(r);
            }
        }
        let mut set = RunSet::study(&self.study.name, runs);
        // As `store_noise`, each fingerprint's other runs read once: the runs stored since
        // are this invocation's own, which the noise leaves out anyway.
        let store = self.store;
        let (fps, like) = (&mut self.cache.fingerprints, &mut self.cache.like);
        let noise = iolab_report::set::Noise::load(
            &set.run_ids(),
            |id| match fps.get(&id) {
                Some(fp) => Ok(fp.clone()),
                None => {
                    let fp = store.fingerprint(id)?;
                    fps.insert(id, fp.clone());
                    Ok::<_, iolab_store::StoreError>(fp)
                }
            },
            |fp, n| {
                if let Some(runs) = like.get(fp) {
                    return Ok(runs.clone());
                }
                let runs = store.runs_like(fp, n, &mut |id, e| {
                    eprintln!("iolab: warning: run {id} left out of the noise: {e}")
                })?;
                like.insert(fp.to_string(), runs.clone());
                Ok(runs)
            },
        )?;
        set.set_noise(noise);
        Ok(set)
    }

    /// Workload runs one visit of configuration `c` makes.
    fn runs_per_visit(&self, c: usize) -> usize {
        let label = &self.study.configs[c].label;
        self.study
            .workloads
            .iter()
            .filter(|w| w.applies_to(label))
            .count()
    }

    /// The ranking of the runs so far, its adjacent pairs decided as the final report
    /// decides them (with the store's noise), in the study's configuration numbers (the
    /// set numbers configurations in the order their runs came, which a failed build
    /// changes).
    fn judge(&mut self, margin_pct: f64) -> Result<Judged, RunError> {
        let judging = Instant::now();
        let set = self.set()?;
        let ranking = set.ranking();
        let configs = &self.study.configs;
        let number = |i: usize| {
            set.configs
                .get(i)
                .and_then(|c| configs.iter().position(|s| s.label == c.label))
        };
        let mut judged = Judged {
            pairs: Vec::new(),
            repeats: vec![0; configs.len()],
            spread: vec![None; configs.len()],
            unlike_earlier: vec![false; configs.len()],
        };
        for mut p in ranking.adjacent(margin_pct) {
            if let (Some(better), Some(worse)) = (number(p.better), number(p.worse)) {
                (p.better, p.worse) = (better, worse);
                judged.pairs.push(p);
            }
        }
        for i in 0..set.configs.len() {
            if let Some(c) = number(i) {
                judged.repeats[c] = ranking.repeats.get(i).copied().unwrap_or(0);
                judged.spread[c] = ranking.spread.get(i).copied().flatten();
                judged.unlike_earlier[c] = ranking.unlike_earlier.get(i).copied().unwrap_or(false);
            }
        }
        self.time.judging += judging.elapsed();
        Ok(judged)
    }

    /// `--until-decided`: more rounds over the undecided configurations (see
    /// [`UntilDecided`]), judged again after every visit; prints what it decided and what
    /// it could not.
    fn race(&mut self, u: UntilDecided, first_rounds: u32) -> Result<(), RunError> {
        use iolab_report::set::Call;
        let study = self.study;
        let label = |c: usize| study.configs[c].label.as_str();
        let names = |cs: &[usize]| cs.iter().map(|&c| label(c)).collect::<Vec<_>>().join(", ");
        // The configurations of the undecided pairs (every one while nothing is scored),
        // and those whose one repeat is unlike their earlier runs: a verdict on the earlier
        // runs' spread would not hold for it, so it gets a spread of its own first.
        let open = |j: &Judged| -> Vec<usize> {
            if j.pairs.is_empty() {
                return (0..study.configs.len()).collect();
            }
            let mut cs: Vec<usize> = (0..study.configs.len())
                .filter(|&c| j.unlike_earlier[c])
                .collect();
            for p in j
                .pairs
                .iter()
                .filter(|p| p.decision.call == Call::Undecided)
            {
                for c in [p.better, p.worse] {
                    if !cs.contains(&c) {
                        cs.push(c);
                    }
                }
            }
            cs.sort_unstable();
            cs
        };
        let mut round = first_rounds;
        let why_stopped;
        loop {
            let judged = self.judge(u.margin_pct)?;
            let pairs = &judged.pairs;
            let active = open(&judged);
            if active.is_empty() {
                why_stopped = "every adjacent pair of the ranking is decided".to_string();
                print_race(study, pairs, u.margin_pct, round, self.started.elapsed());
                break;
            }
            let per_visit = self.started.elapsed().as_secs_f64() / self.time.visits.max(1) as f64;
            let next: usize = active.iter().map(|&c| self.runs_per_visit(c)).sum();
            // Two rounds are the least that measure a spread of a configuration's own: the
            // budget never stops the second (one round decides only with earlier runs).
            let over_budget = round >= 2
                && u.budget.is_some_and(|b| {
                    self.started.elapsed().as_secs_f64() + per_visit * active.len() as f64
                        > b.as_secs_f64()
                });
            if round >= u.max_rounds || over_budget {
                why_stopped = if over_budget {
                    format!(
                        "the budget ends (another round of {} would take about {:.0} s more)",
                        names(&active),
                        per_visit * active.len() as f64
                    )
                } else {
                    format!("{} rounds reached", u.max_rounds)
                };
                print_race(study, pairs, u.margin_pct, round, self.started.elapsed());
                break;
            }
            println!(
                "until decided: round {} for {} (undecided: {})",
                round + 1,
                names(&active),
                pairs
                    .iter()
                    .filter(|p| p.decision.call == Call::Undecided)
                    .map(|p| format!("{} vs {}", label(p.better), label(p.worse)))
                    .chain(
                        active
                            .iter()
                            .filter(|&&c| judged.unlike_earlier[c])
                            .map(|&c| format!(
                                "{}'s one repeat, unlike its earlier runs",
                                label(c)
                            ))
                    )
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            self.rounds = round + 1;
            self.total += next;
            let order = race_order(&active, &judged, study.order, round);
            for (k, &c) in order.iter().enumerate() {
                if k > 0 {
                    // Judged again after every visit: a configuration whose pairs the
                    // visits before it decided is not measured again.
                    let still = open(&self.judge(u.margin_pct)?);
                    if !still.contains(&c) {
                        println!(
                            "until decided: {} is decided{}, not visited in round {}",
                            label(c),
                            if still.is_empty() {
                                " (every pair is)".to_string()
                            } else {
                                String::new()
                            },
                            round + 1
                        );
                        self.total -= self.runs_per_visit(c);
                        continue;
                    }
                }
                if !self.visit(schedule::Step { round, config: c })? {
                    return Ok(());
                }
            }
            round += 1;
        }
        println!("until decided: stopped because {why_stopped}");
        let t = &self.time;
        println!(
            "until decided: the time went to {} visit(s): building and tearing down the \
             testbeds {:.1} s, the runs {:.1} s, judging the ranking {:.1} s",
            t.visits,
            t.testbeds.as_secs_f64(),
            t.runs.as_secs_f64(),
            t.judging.as_secs_f64()
        );
        Ok(())
    }
}

/// The ranking of the runs so far, in the study's configuration numbers.
struct Judged {
    /// The adjacent pairs of the ranking, best first, each decided.
    pairs: Vec<iolab_report::set::AdjacentPair>,
    /// Per configuration: its repeats with every scored test.
    repeats: Vec<usize>,
    /// Per configuration: the standard deviation of ln of its per-repeat scores.
    spread: Vec<Option<f64>>,
    /// Per configuration: its one repeat is unlike its earlier runs (outside their 95%
    /// prediction interval), so it needs a spread of its own before its pairs are decided.
    unlike_earlier: Vec<bool>,
}

/// The order a race round visits `active` in: rotated like the file's rounds with
/// `order = "rotated"`; else the configurations with the fewest repeats first (one repeat
/// has no spread of its own yet), then the most scattered (the repeat most likely to
/// decide its pairs, and with them whether its neighbours need one), then as written.
fn race_order(
    active: &[usize],
    judged: &Judged,
    order: crate::file::Order,
    round: u32,
) -> Vec<usize> {
    if order == crate::file::Order::Rotated {
        return schedule::rotated(active.len(), round)
            .map(|i| active[i])
            .collect();
    }
    let mut v = active.to_vec();
    v.sort_by(|&a, &b| {
        let reps = |c: usize| judged.repeats.get(c).copied().unwrap_or(0);
        let spread = |c: usize| judged.spread.get(c).copied().flatten().unwrap_or(0.0);
        reps(a)
            .cmp(&reps(b))
            .then(spread(b).total_cmp(&spread(a)))
            .then(a.cmp(&b))
    });
    v
}

/// The racing's result: each adjacent pair's verdict, and for undecided ones what more
/// repeats would buy.
fn print_race(
    study: &Study,
    pairs: &[iolab_report::set::AdjacentPair],
    margin_pct: f64,
    rounds: u32,
    elapsed: Duration,
) {
    use iolab_report::set::Call;
    let label = |c: usize| study.configs[c].label.as_str();
    println!(
        "until decided: {rounds} round(s), {:.0} s; adjacent pairs of the ranking (±{}):",
        elapsed.as_secs_f64(),
        iolab_report::compare::pct(margin_pct)
    );
    for p in pairs {
        let (a, b) = (label(p.better), label(p.worse));
        let text = match p.decision.call {
            Call::Different => format!("  {a} > {b}: different"),
            Call::Same => format!(
                "  {a} = {b}: same within ±{}",
                iolab_report::compare::pct(margin_pct)
            ),
            Call::Undecided => match p.decision.runs_needed {
                Some(n) => format!(
                    "  {a} ? {b}: undecided; about {n} repeats each would decide a {} \
                     difference",
                    iolab_report::compare::pct(margin_pct)
                ),
                None => format!("  {a} ? {b}: undecided"),
            },
        };
        println!("{text}");
    }
}

/// Runs every step of `study`; exit status 0 when every run was stored.
pub fn execute(study: &Study, opts: &RunOptions) -> Result<(), RunError> {
    let stop = install_signals()?;
    // Open (and migrate) the database before building anything.
    let store = Store::open(&opts.db)?;
    // What the child runs are given (a URL with its password, if it has one); the store
    // names itself without it.
    let db_path = opts.db.clone();
    let db_shown = store.path().display().to_string();
    let state_dir = StateFile::default_dir().map_err(RunError::from_error)?;
    let exe =
        std::env::current_exe().map_err(|e| RunError::caused("cannot find the iolab binary", e))?;
    let invocation = uuid::Uuid::new_v4().to_string();
    // Until decided: one round, interleaved, then one repeat at a time of the
    // configurations the ranking still needs (the file's `repeats` is the fixed schedule's
    // count, which the race replaces). One round decides only where earlier invocations
    // of the study measured the configurations' spread; otherwise every pair is undecided
    // after it and every configuration gets a second round (a spread of its own).
    let mut first = study.clone();
    if opts.until_decided.is_some() {
        first.repeats = 1;
        if first.order == crate::file::Order::Grouped {
            first.order = crate::file::Order::Interleaved;
        }
    }
    let steps = schedule(&first);
    let total = first.run_count();
    println!(
        "Study {} ({}): {} configuration(s), {} workload(s), {} repeat(s){}: {total} runs, \
         {} order{}",
        study.name,
        study.file,
        study.configs.len(),
        study.workloads.len(),
        first.repeats,
        if first.repeats != study.repeats {
            format!(
                " (the file's repeats = {} is the fixed schedule's)",
                study.repeats
            )
        } else {
            String::new()
        },
        first.order.as_str(),
        match &opts.until_decided {
            Some(u) => format!(
                "; then more rounds of the undecided configurations until decided (±{}{})",
                iolab_report::compare::pct(u.margin_pct),
                u.budget.map_or(String::new(), |b| format!(
                    ", budget {}",
                    iolab_runner::progress::short_duration(b)
                ))
            ),
            None => String::new(),
        }
    );
    let mut session = Session {
        study,
        store: &store,
        state_dir,
        exe,
        db_path: db_path.clone(),
        invocation,
        stop,
        started: Instant::now(),
        out: Outcome {
            run_ids: Vec::new(),
            failures: Vec::new(),
            interrupted: false,
        },
        done: 0,
        total,
        rounds: first.repeats,
        time: Spent::default(),
        cache: JudgeCache::default(),
    };
    for step in &steps {
        if !session.visit(*step)? {
            break;
        }
    }
    if let Some(u) = opts.until_decided {
        if !session.out.interrupted {
            session.race(u, first.repeats)?;
        }
    }
    let started = session.started;
    let out = session.out;
    if out.interrupted {
        eprintln!("iolab: study interrupted; everything it built has been torn down");
    }
    println!(
        "{} run(s) stored in {} in {:.0} s",
        out.run_ids.len(),
        db_shown,
        started.elapsed().as_secs_f64()
    );
    if !out.run_ids.is_empty() {
        let mut runs = Vec::new();
        for id in &out.run_ids {
            runs.push(store.load_run(*id)?);
        }
        let mut set = RunSet::study(&study.name, runs);
        // Earlier runs of the same configurations measure the noise of a single repeat.
        set.set_noise(store_noise(&store, &set)?);
        if let Some(u) = opts.until_decided {
            set.margin_pct = u.margin_pct;
        }
        let base = &study.configs[study.baseline].label;
        if set.set_baseline(base).is_err() {
            println!("(the baseline '{base}' has no runs; comparing with the first configuration)");
        }
        println!();
        // Coloured on a terminal (unsafe caveats, significant changes), as the binary set.
        let view = View::Runs(&set);
        let render = |f: &dyn Format| f.render(&view).expect("a study's formats render runs");
        print!("{}", iolab_report::style::paint(&render(formats::SCREEN)));
        for (f, path) in &opts.reports {
            std::fs::write(path, render(*f))
                .map_err(|e| RunError::caused(format!("cannot write {}", path.display()), e))?;
            println!("{} report written to {}", f.title(), path.display());
        }
        println!(
            "Again later: iolab report --study '{}'{} [--html FILE]",
            study.name,
            if opts.db_given {
                format!(" --db {db_shown}")
            } else {
                String::new()
            }
        );
    }
    for f in &out.failures {
        eprintln!("iolab: failed: {f}");
    }
    if out.interrupted {
        Err(RunError::Interrupted)
    } else if !out.failures.is_empty() {
        Err(RunError::Failed(format!(
            "{} of the study's steps failed (see above)",
            out.failures.len()
        )))
    } else {
        Ok(())
    }
}

/// The noise of `set`'s commands: the other stored runs of each (the store's fingerprint).
pub(crate) fn store_noise(
    store: &Store,
    set: &RunSet,
) -> Result<iolab_report::set::Noise, RunError> {
    Ok(iolab_report::set::Noise::load(
        &set.run_ids(),
        |id| store.fingerprint(id),
        |fp, n| {
            store.runs_like(fp, n, &mut |id, e| {
                eprintln!("iolab: warning: run {id} left out of the noise: {e}")
            })
        },
    )?)
}

/// A run that finished and was stored; `integrity` says what failed when it exited 3 or 4.
pub(crate) struct Stored {
    pub(crate) id: i64,
    pub(crate) secs: f64,
    pub(crate) integrity: Option<String>,
}

/// ` · ETA 12m 30s`: the time left if the remaining runs take as long as the finished ones
/// did on average (builds included); empty when all are done.
fn eta(elapsed: std::time::Duration, done: usize, total: usize) -> String {
    if done == 0 || done >= total {
        return String::new();
    }
    let left = elapsed.mul_f64((total - done) as f64 / done as f64);
    format!(" · ETA {}", iolab_runner::progress::short_duration(left))
}

/// One configuration built for one round.
struct Visit<'a> {
    study: &'a Study,
    step_round: u32,
    config: usize,
    invocation: &'a str,
    exe: &'a Path,
    db: &'a Path,
    stop: &'a AtomicBool,
}

impl Visit<'_> {
    /// What is stored with the run: which invocation, round and configuration, the matrix
    /// values, the testbed as written and as built.
    fn meta(&self, tb: &Testbed, w: &Workload) -> serde_json::Value {
        let cfg = &self.study.configs[self.config];
        let matrix: serde_json::Map<String, serde_json::Value> = cfg
            .matrix
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        serde_json::json!({
            "invocation": self.invocation,
            "file": self.study.file,
            "round": self.step_round + 1,
            "repeats": self.study.repeats,
            "order": self.study.order.as_str(),
            "baseline": self.study.configs[self.study.baseline].label,
            "workload": {"kind": w.kind, "label": w.label, "options": w.options},
            "matrix": matrix,
            "testbed": serde_json::to_value(&cfg.testbed_table).unwrap_or_default(),
            "built": serde_json::to_value(tb.describe()).unwrap_or_default(),
        })
    }

    /// Runs workload `w` on `tb` as a child `iolab run`: `Ok(Some(run id))`, `Ok(None)` when
    /// interrupted, `Err` with what went wrong.
    fn run_workload(
        &self,
        tb: &Testbed,
        w: &Workload,
        n: usize,
        total: usize,
    ) -> Result<Option<Stored>, ChildError> {
        let cfg = &self.study.configs[self.config];
        let who = format!("{} · {}", cfg.label, w.label);
        let (target, extra): (PathBuf, Vec<&str>) = match tb.work_dir() {
            Some(d) => (d.to_path_buf(), vec![]),
            None => match tb.devices().first() {
                Some(d) => (d.path.clone(), vec!["--allow-destroy-device"]),
                None => {
                    return Err(ChildError::Failed(format!(
                        "{who}: the testbed has no directory or device"
                    )))
                }
            },
        };
        if self.study.drop_caches {
            iolab_sys::drop_caches()
                .map_err(|e| ChildError::io(&who, "cannot drop the page cache", e))?;
        }
        // The description goes through the child's standard input: no file to leave behind
        // if the study is killed.
        let meta = self.meta(tb, w).to_string();
        let mut cmd = Command::new(self.exe);
        cmd.arg("run")
            .arg(&w.kind)
            .args(&w.args)
            .arg(joined("--target", target.as_os_str()))
            .args(extra)
            .arg(joined("--db", self.db.as_os_str()))
            .arg(joined("--label", w.label.as_ref()))
            .arg(joined("--study", self.study.name.as_ref()))
            .arg(joined("--config", cfg.label.as_ref()))
            .arg("--study-meta")
            .arg("-");
        let procs = match tb.cgroup() {
            Some(dir) => Some(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
                    .map_err(|e| ChildError::io(&who, "cannot open the throttle cgroup", e))?,
            ),
            None => None,
        };
        run_child(cmd, meta, procs, self.stop, &who, &w.kind, (n, total))
    }
}

/// `--opt=VALUE`: every value a study or an ab sets is joined to its option, so a label,
/// name or path can never be read as an option of its own.
pub(crate) fn joined(opt: &str, v: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut s = std::ffi::OsString::from(format!("{opt}="));
    s.push(v);
    s
}

/// Starts the child `iolab run` of `cmd` (`--json - --quiet` added, its output piped;
/// `stdin` written to it), in the
/// cgroup whose `cgroup.procs` is open as `procs`, and waits for it, forwarding a stop:
/// `Ok(Some(stored))`, `Ok(None)` when it was interrupted, `Err` with what went wrong.
/// `(n, total)` number it in the progress lines.
pub(crate) fn run_child(
    mut cmd: Command,
    stdin: String,
    procs: Option<std::fs::File>,
    stop: &AtomicBool,
    who: &str,
    kind: &str,
    (n, total): (usize, usize),
) -> Result<Option<Stored>, ChildError> {
    cmd.arg("--json")
        .arg("-")
        .arg("--quiet")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group: a Ctrl-C reaches the study, which stops the run once.
        .process_group(0);
    let procs_fd = procs.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    // SAFETY: between fork and exec only prctl(2) and write(2) are called, both
    // async-signal-safe. PR_SET_PDEATHSIG: if the study is killed (even with SIGKILL),
    // the run gets SIGTERM, stores what it finished and leaves the testbed, so
    // `iolab cleanup` finds nothing busy. Writing "0" to cgroup.procs moves the calling
    // process (the child) into the throttle cgroup before it opens anything.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(fd) = procs_fd {
                if libc::write(fd, b"0\n".as_ptr().cast(), 2) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let child = cmd.spawn().map_err(|e| {
        ChildError::io(
            who,
            format!("cannot start {}", cmd.get_program().to_string_lossy()),
            e,
        )
    });
    drop(procs);
    let result = child.and_then(|mut c| {
        // From a thread, so a description larger than the pipe never blocks the study;
        // a child that exits before reading it makes the write fail harmlessly.
        if let Some(mut pipe) = c.stdin.take() {
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = pipe.write_all(stdin.as_bytes());
            });
        }
        wait_forwarding(c, stop, who)
    });
    let (status, stdout, stderr) = result?;
    let secs = t0.elapsed().as_secs_f64();
    // With `--json -` the child's standard output is its run document alone.
    let run_id = serde_json::from_str::<serde_json::Value>(stdout.trim())
        .ok()
        .and_then(|doc| doc["run_id"].as_i64());
    match status.code() {
        Some(0) => run_id
            .map(|id| {
                Some(Stored {
                    id,
                    secs,
                    integrity: None,
                })
            })
            .ok_or_else(|| {
                ChildError::Failed(format!(
                    "{who}: the run finished but did not say where it was stored"
                ))
            }),
        // An integrity failure is a result: the run is stored and compared, and the
        // study reports the failure.
        Some(code @ (3 | 4)) if run_id.is_some() => Ok(Some(Stored {
            id: run_id.expect("checked"),
            secs,
            integrity: Some(format!(
                "{who}: `iolab run {}` found an integrity failure (exit {code}; see its \
                 warnings)",
                kind
            )),
        })),
        Some(130) => {
            println!("  [{n}/{total}] {who}: interrupted");
            Ok(None)
        }
        _ => Err(ChildError::Failed(format!(
            "{who}: `iolab run {}` {}",
            kind,
            child_failure(status, &stderr)
        ))),
    }
}

/// The first tests' headlines and the run's warning codes, for the progress line.
pub(crate) fn run_summary(run: &iolab_measure::RunRecord) -> String {
    let mut parts: Vec<String> = run
        .tests
        .iter()
        .take(2)
        .map(|t| {
            if t.summary.mb_s > 0.0 {
                format!("{} {:.1} MB/s", t.name, t.summary.mb_s)
            } else {
                format!("{} {:.0} IOPS", t.name, t.summary.iops)
            }
        })
        .collect();
    if run.tests.len() > 2 {
        parts.push("...".into());
    }
    let mut codes: Vec<&str> = Vec::new();
    for w in &run.warnings {
        if !codes.contains(&w.code.as_str()) {
            codes.push(w.code.as_str());
        }
    }
    let mut s = format!(": {}", parts.join(", "));
    if !codes.is_empty() {
        s.push_str(&format!(" — ⚠ {}", codes.join(", ")));
    }
    s
}

type ChildOutput = (ExitStatus, String, String);

/// Why a child `iolab run` did not give a stored run: a system call around it failed (the
/// error kept), or the run itself failed (its exit status and the end of its stderr).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChildError {
    #[error("{who}: {what}: {source}")]
    Io {
        /// The configuration and workload (`ext4 · seqread`), or the side of an ab.
        who: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Failed(String),
}

impl ChildError {
    fn io(who: &str, what: impl Into<String>, source: std::io::Error) -> Self {
        ChildError::Io {
            who: who.to_string(),
            what: what.into(),
            source,
        }
    }
}

/// Waits for the child, collecting its output; when the stop flag rises, sends it one
/// SIGTERM (it then stores what it finished and exits 130).
fn wait_forwarding(
    mut child: Child,
    stop: &AtomicBool,
    who: &str,
) -> Result<ChildOutput, ChildError> {
    let collect = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = collect(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = collect(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let mut forwarded = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(ChildError::io(who, "waiting for the run", e)),
        }
        if stop.load(Ordering::Relaxed) && !forwarded {
            forwarded = true;
            if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok((status, stdout, stderr))
}

/// How a child run ended badly, and the end of what it said on stderr.
fn child_failure(status: std::process::ExitStatus, stderr: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    let how = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(sig)) => format!("was killed by {}", signal_name(sig)),
        (None, None) => format!("ended without an exit status ({status})"),
    };
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    if tail.is_empty() {
        format!("{how}; it printed nothing on stderr")
    } else {
        format!("{how}: {}", tail.join(" / "))
    }
}

/// A signal's name and number, as `kill -l` would name it ("SIGKILL (9)").
fn signal_name(sig: i32) -> String {
    match signal_hook::low_level::signal_name(sig) {
        Some(name) => format!("{name} ({sig})"),
        None => format!("signal {sig}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_killed_by_a_signal_is_named_with_it() {
        // A raw wait status of 9: killed by signal 9.
        let m = child_failure(std::process::ExitStatus::from_raw(9), "");
        assert_eq!(m, "was killed by SIGKILL (9); it printed nothing on stderr");
        let m = child_failure(std::process::ExitStatus::from_raw(1 << 8), "a\nb\n");
        assert_eq!(m, "exited with status 1: a / b");
        let m = child_failure(std::process::ExitStatus::from_raw(64), "");
        assert!(m.starts_with("was killed by signal 64"), "{m}");
    }
}
