//! The run context every workload runs in (stop flag, progress, store, environment, the
//! run record) and the lifecycle around a job: start the record, keep the store in step,
//! then finish: warnings, completeness, the integrity verdict and the exit status.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use iolab_env::Environment;
use iolab_measure::{PassRecord, RunRecord, TargetInfo, TestRecord, Warning};
use iolab_spec::RunSettings;
use iolab_stats::warnings::TargetFacts;
use iolab_store::Store;
use iolab_testbed::runstate::{self, RunResource, RunState};

use crate::coord::Coordinator;
use crate::options::CommonArgs;
use crate::progress::Progress;
use crate::status::{ExitStatus, RunError};
use crate::workload::Parsed;

/// What a run record starts with.
pub struct RunStart {
    /// The name the run was asked for (`cdm`, `dbench`).
    pub preset: String,
    /// The family (`block` for the presets, else the workload's name).
    pub workload: String,
    pub target: TargetInfo,
    pub settings: RunSettings,
    pub notes: Vec<String>,
    /// Where the environment (mount, device chain) is read.
    pub env_path: PathBuf,
}

impl RunStart {
    /// The start of workload `name` working in directory `dir` (`size`: what it writes or
    /// uses, for the target's description).
    pub fn in_dir(name: &str, dir: &Path, size: u64, settings: RunSettings) -> RunStart {
        RunStart {
            preset: name.to_string(),
            workload: name.to_string(),
            target: dir_info(dir, size),
            settings,
            notes: Vec::new(),
            env_path: dir.to_path_buf(),
        }
    }
}

/// The context of one `iolab run`.
pub struct RunContext {
    pub common: CommonArgs,
    /// Raised by Ctrl-C, SIGTERM or SIGHUP; every loop polls it.
    pub stop: Arc<AtomicBool>,
    pub progress: Progress,
    store: Option<Store>,
    db_path: Option<PathBuf>,
    run: Option<RunRecord>,
    env: Option<Environment>,
    facts: Option<TargetFacts>,
    status: ExitStatus,
    epilogue: String,
    /// What the run creates, recorded before it is created (None: detached, or no state
    /// directory, which `state_note` says).
    state: Option<RunState>,
    /// The run state file is made on the first thing recorded (a run that creates nothing
    /// leaves no file, even when it is killed); false once tried, and for detached contexts.
    state_wanted: bool,
    state_note: Option<String>,
    /// Notes made before the run record exists.
    pending: Vec<String>,
    /// The other ranks of a multi-process run (MPI); None for an ordinary run.
    coord: Option<Box<dyn Coordinator>>,
}

/// How a run ended, for the binary to print and exit with.
pub struct Finished {
    /// The run record, when the run got as far as starting one.
    pub run: Option<RunRecord>,
    /// Where it was stored: run id and database.
    pub stored: Option<(i64, PathBuf)>,
    pub status: ExitStatus,
    /// The error that ended the run early, if any.
    pub error: Option<RunError>,
    /// Lines a workload prints after the run's report.
    pub epilogue: String,
    /// What failed an integrity check, in one sentence.
    pub integrity: Option<String>,
    /// A rank of a multi-process run: the other ranks, met one last time by
    /// [`Finished::part`] once the run is printed, and whether a signal stopped the run.
    pub coordinator: Option<(Box<dyn Coordinator>, bool)>,
}

impl Finished {
    /// For a rank of a multi-process run, after the run is stored and printed: the last
    /// meeting of the ranks, so that no rank exits (mpirun ends the whole job when a rank
    /// exits with a non-zero status) before rank 0 has printed. Nothing for an ordinary run.
    pub fn part(&mut self) {
        if let Some((mut c, stopped)) = self.coordinator.take() {
            c.after_store(stopped);
        }
    }
}

impl RunContext {
    /// Installs the signal handlers and opens the store (unless `--no-store`) before
    /// anything is touched.
    pub fn new(common: CommonArgs) -> Result<RunContext, RunError> {
        let stop = crate::signals::install().map_err(|e| RunError::caused("signals", e))?;
        RunContext::with_stop(common, stop)
    }

    /// Like [`RunContext::new`] with handlers already installed for `stop` (the runs of
    /// `--repeat` share one flag).
    pub fn with_stop(common: CommonArgs, stop: Arc<AtomicBool>) -> Result<RunContext, RunError> {
        let (store, db_path) = if common.no_store {
            (None, None)
        } else {
            let path = common
                .db
                .clone()
                .unwrap_or_else(iolab_store::default_db_path);
            // Named as the store names itself (a URL without its password).
            let store = Store::open(&path)?;
            let shown = store.path().to_path_buf();
            (Some(store), Some(shown))
        };
        let quiet = common.quiet;
        Ok(RunContext {
            progress: Progress::new(Duration::ZERO, quiet),
            store,
            db_path,
            state_wanted: true,
            ..RunContext::detached(common, stop)
        })
    }

    /// A context that stores nothing and has its own stop flag (for tests and tools).
    pub fn detached(common: CommonArgs, stop: Arc<AtomicBool>) -> RunContext {
        RunContext {
            progress: Progress::new(Duration::ZERO, true),
            common,
            stop,
            store: None,
            db_path: None,
            run: None,
            env: None,
            facts: None,
            status: ExitStatus::Ok,
            epilogue: String::new(),
            state: None,
            state_wanted: false,
            state_note: None,
            pending: Vec::new(),
            coord: None,
        }
    }

    /// The other ranks of a multi-process run, if this is one.
    pub fn coordinator(&mut self) -> Option<&mut (dyn Coordinator + 'static)> {
        self.coord.as_deref_mut()
    }

    /// The progress display and the coordinator together (a pass's observer needs both).
    pub fn progress_and_coordinator(
        &mut self,
    ) -> (&Progress, Option<&mut (dyn Coordinator + 'static)>) {
        (&self.progress, self.coord.as_deref_mut())
    }

    /// Records, before the run creates it, something `iolab cleanup` removes if the run is
    /// killed (and a second Ctrl-C removes at once); its id for [`Self::created`]. None
    /// when nothing is recorded.
    pub fn will_create(&mut self, resource: RunResource) -> Option<u64> {
        // A file or tree that is already there is not this run's to create: recording it
        // would let `iolab cleanup` (or the run's own removal) delete someone else's data
        // after a refusal (a sidecar path or a dbench client directory someone else holds).
        if let RunResource::File { path } | RunResource::Tree { path } = &resource {
            if std::fs::symlink_metadata(path).is_ok() {
                return None;
            }
        }
        if std::mem::take(&mut self.state_wanted) {
            match open_run_state() {
                Ok(s) => {
                    crate::signals::set_teardown(s.clone());
                    self.state = Some(s);
                }
                Err(e) => {
                    self.state_note = Some(format!(
                        "what this run creates is not recorded for `iolab cleanup` ({e}): a \
                         kill -9 leaves it in place"
                    ));
                }
            }
        }
        let st = self.state.as_ref()?;
        match st.intent(resource) {
            Ok(id) => Some(id),
            Err(e) => {
                self.state_note = Some(format!(
                    "could not record what this run creates in {} ({e}): a kill -9 leaves it \
                     in place",
                    st.path().display()
                ));
                None
            }
        }
    }

    /// Records what the file or tree of [`Self::will_create`]'s `id` is, now it exists.
    pub fn created(&mut self, id: Option<u64>) {
        if let (Some(st), Some(id)) = (&self.state, id) {
            let _ = st.created(id);
        }
    }

    /// Records the exact file (device and inode) the run made for [`Self::will_create`]'s
    /// `id` at `path`, in place of what `id` stood for.
    pub fn adopt(&mut self, id: Option<u64>, path: &Path, identity: Option<(u64, u64)>) {
        if let Some((dev, ino)) = identity {
            self.adopter(id)(path, (dev, ino));
        }
    }

    /// [`Self::adopt`] for `id` as a function of the path and identity, to be called where
    /// the context is borrowed (as soon as a file is created, before it is filled), once
    /// for each thing made for `id` (a directory made again for every replay). Does
    /// nothing when nothing is recorded.
    pub fn adopter(&self, id: Option<u64>) -> impl FnMut(&Path, (u64, u64)) {
        let st = self.state.clone();
        move |path, (dev, ino)| {
            if let (Some(st), Some(i)) = (&st, id) {
                let p = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
                let _ = st.adopt(i, &p, dev, ino);
            }
        }
    }

    /// Records the test file a block run creates for `target`: in a directory, a file with
    /// iolab's unique name for this process; a path that does not exist, that file.
    pub fn will_create_target(&mut self, target: &Path) -> Option<u64> {
        let p = std::path::absolute(target).unwrap_or_else(|_| target.to_path_buf());
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => self.will_create(RunResource::Named {
                dir: p,
                pid: std::process::id() as i32,
            }),
            Ok(_) => None,
            Err(_) => self.will_create(RunResource::File { path: p }),
        }
    }

    /// Removes what killed iolab runs left at or under `path` (their processes are gone),
    /// so a run there does not take it for someone else's; says what in a note.
    pub fn clear_leftovers_under(&mut self, path: &Path) -> Vec<String> {
        let Ok(dir) = iolab_testbed::StateFile::default_dir() else {
            return Vec::new();
        };
        let r = runstate::clear_leftovers_under(&dir, path);
        for f in &r.failures {
            eprintln!("iolab: warning: leftovers of a killed run: {f}");
        }
        if !r.removed.is_empty() {
            let line = format!(
                "removed what a killed iolab run left: {}",
                r.removed.join(", ")
            );
            self.progress.println(&line);
            self.pending.push(line);
        }
        r.removed
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Captures the environment at `start.env_path` and starts the run record (stored at
    /// once, so an interrupted run keeps what it finished). A target whose `fs_type` is
    /// empty gets the filesystem the capture found.
    pub fn start(&mut self, mut start: RunStart) -> Result<&Environment, RunError> {
        // Only the workloads that say how their ranks add up run as the ranks of an MPI run
        // (docs/mpi.md); the others refuse.
        let mpi = iolab_measure::workload::named(&start.workload).and_then(|w| w.mpi());
        if self.coord.is_some() && mpi.is_none() {
            return Err(RunError::Usage(crate::status::UsageError::general(
                format!(
                    "{} does not run under MPI yet: only the block presets (cdm, atto, iometer, \
                 custom), metadata and dbench run on several ranks",
                    start.preset
                ),
            )));
        }
        let env = iolab_env::capture(Some(&start.env_path));
        if start.target.fs_type.is_empty() {
            start.target.fs_type = env
                .target
                .as_ref()
                .and_then(|t| t.fs_type.clone())
                .unwrap_or_else(|| "unknown".into());
        }
        let (study, config_label, study_meta) = study_fields(&self.common);
        let mut run = RunRecord {
            id: None,
            uuid: uuid::Uuid::new_v4().to_string(),
            iolab_version: env!("CARGO_PKG_VERSION").to_string(),
            preset: start.preset,
            workload: start.workload,
            target: start.target,
            engine: start.settings.engine,
            settings: start.settings,
            command_line: std::env::args().collect(),
            label: self.common.label.clone(),
            started_at: now_rfc3339(),
            finished_at: None,
            complete: false,
            notes: start.notes,
            warnings: Vec::new(),
            env: serde_json::to_value(&env).unwrap_or(serde_json::Value::Null),
            study,
            config_label,
            study_meta,
            tests: Vec::new(),
        };
        run.notes.append(&mut self.pending);
        if let Some(s) = &mut self.store {
            run.id = Some(s.begin_run(&run)?);
        }
        self.run = Some(run);
        Ok(self.env.insert(env))
    }

    /// The run record; panics before [`RunContext::start`] (a workload bug).
    /// Whether [`RunContext::start`] has made the run record.
    pub fn has_run(&self) -> bool {
        self.run.is_some()
    }

    pub fn run(&mut self) -> &mut RunRecord {
        self.run.as_mut().expect("RunContext::start comes first")
    }

    /// The environment captured by [`RunContext::start`].
    pub fn env(&self) -> Option<&Environment> {
        self.env.as_ref()
    }

    /// Adds a run note once.
    pub fn note(&mut self, line: String) {
        let run = self.run();
        if !run.notes.contains(&line) {
            run.notes.push(line);
        }
    }

    /// Something the run created and could not remove (a read-only or failing
    /// filesystem): said on stderr at once and kept as a run note.
    pub fn left_behind(&mut self, what: String) {
        let line = format!("left behind: {what}");
        if self.run.as_ref().is_some_and(|r| r.notes.contains(&line)) {
            return;
        }
        eprintln!("iolab: warning: {line}");
        if self.run.is_some() {
            self.note(line);
        }
    }

    /// Adds a warning a workload found itself (the rest come from the analysis at the end).
    pub fn warn(&mut self, w: Warning) {
        self.run().warnings.push(w);
    }

    /// The facts the warnings are computed from, when the workload gathered them itself
    /// (the block presets probe their target before removing it).
    pub fn set_facts(&mut self, facts: TargetFacts) {
        self.facts = Some(facts);
    }

    /// Raises the exit status (a workload's own finding, e.g. a miscounted scrub).
    pub fn raise(&mut self, status: ExitStatus) {
        self.status = self.status.worst(status);
    }

    /// Text printed after the run's report.
    pub fn epilogue(&mut self, text: &str) {
        self.epilogue.push_str(text);
    }

    /// Stores a test row before its passes are measured: its id for [`Self::store_pass`].
    pub fn begin_test(&mut self, index: u32, t: &TestRecord) -> Result<Option<i64>, RunError> {
        let run_id = self.run().id;
        match (&mut self.store, run_id) {
            (Some(st), Some(id)) => Ok(Some(st.add_test(id, index, t)?)),
            _ => Ok(None),
        }
    }

    pub fn store_pass(&mut self, test_id: Option<i64>, p: &PassRecord) -> Result<(), RunError> {
        if let (Some(st), Some(tid)) = (&mut self.store, test_id) {
            st.add_pass(tid, p)?;
        }
        Ok(())
    }

    /// Stores a test's summary and `extra` once its passes are in.
    pub fn store_summary(&mut self, test_id: Option<i64>, t: &TestRecord) -> Result<(), RunError> {
        if let (Some(st), Some(tid)) = (&mut self.store, test_id) {
            st.update_test_summary(tid, &t.summary, &t.extra)?;
        }
        Ok(())
    }

    /// Stores whole tests of a workload that produces them at the end and adds them to the
    /// run, with a note for each one's `--verify` counts.
    pub fn add_tests(&mut self, tests: Vec<TestRecord>) -> Result<(), RunError> {
        let first = self.run().tests.len() as u32;
        for (i, t) in tests.into_iter().enumerate() {
            let tid = self.begin_test(first + i as u32, &t)?;
            for p in &t.passes {
                self.store_pass(tid, p)?;
            }
            self.store_summary(tid, &t)?;
            if let Some(line) = crate::verify::note(&t) {
                self.note(line);
            }
            self.run().tests.push(t);
        }
        Ok(())
    }

    /// Ends the run: warnings, completeness, the store, the exit status.
    pub fn finish(mut self, outcome: Result<(), RunError>) -> Finished {
        self.progress.finish();
        let stopped = self.stopped();
        let mut coord = self.coord.take();
        let outcome = match coord.as_mut() {
            None => outcome,
            Some(c) => {
                let ended = c.end(&outcome, self.run.as_mut(), stopped);
                if outcome.is_err() || ended.is_err() || stopped {
                    // What a rank that was killed left here (its process is gone).
                    self.clear_leftovers_under(&self.common.target_abs());
                }
                match (outcome, ended) {
                    // Stopped waiting for a rank that is gone: its end is what happened
                    // (mpirun's stop is only the consequence), and the note names it.
                    (Err(RunError::Interrupted), Err(e)) => Err(e),
                    (outcome, ended) => outcome.and(ended),
                }
            }
        };
        let mut finished = self.finish_run(outcome, stopped);
        finished.coordinator = coord.map(|c| (c, stopped));
        finished
    }

    fn finish_run(mut self, outcome: Result<(), RunError>, stopped: bool) -> Finished {
        // Everything the workload created is gone by now, or it said what it could not
        // remove: what is still there stays recorded for `iolab cleanup`.
        let finish = self.state.take().map(|s| (s.finish(), s.path()));
        let left = finish.map(|(f, path)| {
            for p in &f.replaced {
                let note = runstate::replaced_note(p);
                eprintln!("iolab: warning: {note}");
                if self.run.is_some() {
                    self.note(note);
                }
            }
            (f.left, f.unsure, path)
        });
        if let Some((left, unsure, path)) = left {
            if !left.is_empty() {
                self.left_behind(format!(
                    "{} (recorded in {}; `iolab cleanup` removes it once it can)",
                    left.join(", "),
                    path.display()
                ));
            }
            if !unsure.is_empty() {
                self.left_behind(format!(
                    "maybe {}: not there now, but the filesystem turned read-only during the \
                     run, so removing or renaming it may not have reached the disk (recorded \
                     in {}; `iolab cleanup` removes it once the filesystem is repaired, if it \
                     is back)",
                    unsure.join(", "),
                    path.display()
                ));
            }
        }
        if let (Some(n), Some(_)) = (self.state_note.take(), &self.run) {
            self.note(n);
        }
        let Some(mut run) = self.run.take() else {
            let (status, error) = match outcome {
                Ok(()) if stopped => (ExitStatus::Interrupted, Some(RunError::Interrupted)),
                Ok(()) => (self.status, None),
                Err(e) => (e.status(), Some(e)),
            };
            return Finished {
                run: None,
                stored: None,
                status,
                error,
                epilogue: self.epilogue,
                integrity: None,
                coordinator: None,
            };
        };
        run.finished_at = Some(now_rfc3339());
        run.complete = outcome.is_ok() && !stopped;
        let facts = match self.facts.take() {
            Some(f) => f,
            None => match &self.env {
                Some(env) => crate::facts::facts(env, None, run.settings.direct),
                None => TargetFacts::default(),
            },
        };
        let mut found = iolab_stats::warnings::analyze(&run, &facts);
        run.warnings.append(&mut found);
        let mut error = outcome.err();
        if let Some(e) = error.as_ref().filter(|e| e.is_failure()) {
            // Stored as failed: its figures (if any) are not results, and studies and
            // reports do not rank them.
            run.notes.push(format!("{}{e}", iolab_measure::FAILED_NOTE));
        }
        if let (Some(s), Some(id)) = (&mut self.store, run.id) {
            if let Err(e) = s.finish_run(id, &run) {
                error.get_or_insert(RunError::from(e));
            }
        }
        let integrity = crate::verify::failures(&run);
        let mut status = self.status;
        if integrity.is_some() {
            status = status.worst(ExitStatus::Integrity);
        }
        match &error {
            Some(e) => status = status.worst(e.status()),
            None if !run.complete => {
                status = status.worst(ExitStatus::Interrupted);
                error = Some(RunError::Interrupted);
            }
            None => {}
        }
        let stored = run.id.zip(self.db_path.clone());
        Finished {
            run: Some(run),
            stored,
            status,
            error,
            epilogue: self.epilogue,
            integrity,
            coordinator: None,
        }
    }
}

/// Runs a parsed command line's job through the whole lifecycle.
pub fn execute(parsed: Parsed) -> Finished {
    run_parsed(parsed, None, None)
}

/// [`execute`] as one rank of a multi-process run, with handlers installed for `stop`:
/// `coord` reaches the other ranks.
pub fn execute_with(
    parsed: Parsed,
    stop: Arc<AtomicBool>,
    coord: Box<dyn Coordinator>,
) -> Finished {
    run_parsed_with(parsed, Some(stop), None, Some(coord))
}

/// [`execute`] with an installed stop flag (or new handlers) and, for a repetition of
/// `--repeat`, the tag its progress shows and the note its run gets.
pub(crate) fn run_parsed(
    parsed: Parsed,
    stop: Option<Arc<AtomicBool>>,
    round: Option<(String, String)>,
) -> Finished {
    run_parsed_with(parsed, stop, round, None)
}

fn run_parsed_with(
    parsed: Parsed,
    stop: Option<Arc<AtomicBool>>,
    round: Option<(String, String)>,
    coord: Option<Box<dyn Coordinator>>,
) -> Finished {
    let ctx = match stop {
        Some(stop) => RunContext::with_stop(parsed.common, stop),
        None => RunContext::new(parsed.common),
    };
    let mut ctx = match ctx {
        Ok(c) => RunContext { coord, ..c },
        Err(e) => {
            if let Some(mut c) = coord {
                let _ = c.end(&Err(RunError::Failed(e.to_string())), None, false);
                c.after_store(false);
            }
            return Finished {
                run: None,
                stored: None,
                status: e.status(),
                error: Some(e),
                epilogue: String::new(),
                integrity: None,
                coordinator: None,
            };
        }
    };
    let note = round.map(|(tag, note)| {
        ctx.progress.set_tag(tag);
        note
    });
    let outcome = parsed.job.run(&mut ctx);
    if let Some(note) = note.filter(|_| ctx.run.is_some()) {
        ctx.note(note);
    }
    ctx.finish(outcome)
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The study fields of a run started by `iolab study` (hidden options), or none.
fn study_fields(a: &CommonArgs) -> (Option<String>, Option<String>, serde_json::Value) {
    let meta = a
        .study_meta
        .as_ref()
        .and_then(|p| {
            // Written by iolab study (stdin, "-", the deliberate pipe); bounded all the same.
            const MAX_META: u64 = 1 << 20;
            if p.as_os_str() == "-" {
                iolab_sys::input::read_stdin(MAX_META).ok()
            } else {
                iolab_sys::input::read_input(p, MAX_META).ok()
            }
        })
        .and_then(|t| serde_json::from_slice(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (a.study.clone(), a.config.clone(), meta)
}

/// The target description of a directory a workload works in; its filesystem is filled in
/// by [`RunContext::start`] from the environment it captures.
pub fn dir_info(dir: &Path, size: u64) -> TargetInfo {
    TargetInfo {
        path: dir.to_string_lossy().into_owned(),
        kind: iolab_measure::TargetKind::Dir,
        io_path: dir.to_string_lossy().into_owned(),
        fs_type: String::new(),
        size,
    }
}

/// The directory a workload works in: `--target` must be an existing directory.
pub fn target_dir(common: &CommonArgs, workload: &str) -> Result<PathBuf, RunError> {
    let p = common.target_abs();
    if !p.is_dir() {
        return Err(RunError::Usage(crate::status::UsageError::option(
            "target",
            format!(
                "--target {}: workload {workload} needs an existing directory",
                p.display()
            ),
        )));
    }
    Ok(p)
}

/// Run settings of a workload that has no block-engine settings of its own: no engine and
/// none of an engine's options.
pub fn plain_settings(size: u64, duration: Duration, runs: u32, direct: bool) -> RunSettings {
    RunSettings {
        size,
        duration,
        runs,
        warmup_passes: 0,
        warmup_duration: Duration::ZERO,
        ramp: Duration::ZERO,
        engine: None,
        direct,
        data: iolab_spec::DataPattern::Random,
        engine_opts: Default::default(),
    }
}

/// Why a run's state file could not be made: the state directory is not known, or the file
/// could not be created in it (the error kept as the source).
#[derive(Debug, thiserror::Error)]
enum RunStateError {
    #[error("{0}")]
    Dir(#[source] iolab_testbed::TestbedError),
    #[error("{}: {source}", dir.display())]
    Create {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The run state of this run, in the directory testbeds record theirs in.
fn open_run_state() -> Result<RunState, RunStateError> {
    let dir = iolab_testbed::StateFile::default_dir().map_err(RunStateError::Dir)?;
    RunState::create(&dir).map_err(|source| RunStateError::Create { dir, source })
}
