//! The I/O engines, one file each, behind one small interface: open for a job, queue I/Os
//! into slots, then submit and reap completions. The job loop in `worker.rs` is generic over
//! [`Engine`], so the per-I/O path has no dynamic dispatch; the registry at the end of this
//! file (one line an engine) picks the concrete engine for a run's [`EngineKind`]. Each
//! engine's [`Desc`] (its name, fio names, capabilities and options) is in its own file;
//! [`install`] hands them all to iolab-spec's catalogue for the crates that cannot name an
//! engine.

pub mod e4defrag;
pub mod falloc;
pub mod filecreate;
pub mod filedelete;
pub mod fileset;
pub mod filestat;
pub mod ftruncate;
pub mod io_uring;
pub mod null;
pub mod psync;

use std::io;
use std::os::fd::RawFd;

use iolab_spec::engopt::{EngineOption, EngineOpts, Val};
use iolab_spec::{EngineKind, IoDir, RunSettings};

use crate::buffers::BufferPool;

/// `--engine` and every engine's own options. An engine's options are declared in its
/// file; giving one with another engine is refused.
#[derive(clap::Args, Debug, Clone)]
pub struct EngineArgs {
    /// I/O engine: io_uring, psync, or null (completes every I/O without touching the
    /// target: iolab's own overhead). Default io_uring, or psync with a note where the
    /// kernel refuses io_uring; asked for by name, io_uring is never replaced.
    #[arg(long, value_parser = names())]
    pub engine: Option<String>,
    #[command(flatten)]
    pub options: Options,
}

/// The engine chosen and its settings, resolved from [`EngineArgs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineChoice {
    pub kind: iolab_spec::EngineKind,
    /// Every engine's options: given, or their defaults (what the run records).
    pub opts: EngineOpts,
    /// `--engine` was given: the run uses this engine or fails, never another.
    pub named: bool,
}

/// Every engine's own options on `iolab run`'s command line, built from the options each
/// engine's [`Desc`] declares (one help heading an engine): the ones given, with their
/// engine.
#[derive(Debug, Clone, Default)]
pub struct Options {
    given: Vec<(EngineKind, &'static EngineOption, Val)>,
}

impl Options {
    /// Every engine option's clap argument id, with its engine and declaration.
    fn all() -> impl Iterator<Item = (EngineKind, &'static EngineOption)> {
        ENGINES
            .iter()
            .flat_map(|d| d.options.iter().map(move |o| (d.kind, o)))
    }

    /// The options of the engines `--engine` offers: `iolab run`'s, and the ones its runs
    /// record (the others' options, such as e4defrag's `inplace`, come from fio job files
    /// only; a key more in every run's settings would change every run's fingerprint).
    fn offered() -> impl Iterator<Item = (EngineKind, &'static EngineOption)> {
        Options::all().filter(|(k, _)| desc(*k).cli)
    }
}

impl clap::FromArgMatches for Options {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut o = Options::default();
        o.update_from_arg_matches(m)?;
        Ok(o)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (kind, o) in Options::offered() {
            let v = match o.default {
                Val::Flag(d) => m
                    .try_get_one::<bool>(o.cli)
                    .ok()
                    .flatten()
                    .is_some_and(|f| *f)
                    .then_some(Val::Flag(!d)),
                Val::Count(_) => m
                    .try_get_one::<u64>(o.cli)
                    .ok()
                    .flatten()
                    .map(|n| Val::Count(*n)),
            };
            if let Some(v) = v {
                self.given.retain(|(_, g, _)| g.key != o.key);
                self.given.push((kind, o, v));
            }
        }
        Ok(())
    }
}

impl clap::Args for Options {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for (kind, o) in Options::offered() {
            let arg = clap::Arg::new(o.cli)
                .long(o.cli)
                .help(o.help)
                .help_heading(format!("{} engine options", kind.as_str()));
            cmd = cmd.arg(match o.default {
                Val::Flag(_) => arg.action(clap::ArgAction::SetTrue),
                Val::Count(_) => arg
                    .value_name("N")
                    .value_parser(clap::value_parser!(u64).range(0..=o.max)),
            });
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// What an engine is, declared once in its own file (fio's `ioengine_ops`: its names,
/// flags and options); the registry at the end of this file lists them.
pub use iolab_spec::engopt::EngineDesc as Desc;

/// The engine `--engine NAME` names, or the refusal naming those it takes.
pub fn by_name(name: &str) -> Result<&'static Desc, iolab_spec::SpecError> {
    ENGINES.iter().find(|d| d.is_named(name)).ok_or_else(|| {
        let names: Vec<&str> = ENGINES
            .iter()
            .filter(|d| d.cli)
            .map(|d| d.kind.as_str())
            .collect();
        let list = iolab_spec::or_list(&names);
        iolab_spec::SpecError::new("engine", name, format!("expected {list}"))
    })
}

/// `--engine`'s values for clap (parsing, help, completions): each engine `--engine`
/// offers, by its name, with its aliases, as the registry's descriptions declare them.
fn names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        ENGINES
            .iter()
            .filter(|d| d.cli)
            .map(|d| clap::builder::PossibleValue::new(d.kind.as_str()).aliases(d.aliases)),
    )
}

/// The engine of `kind`.
pub fn desc(kind: EngineKind) -> &'static Desc {
    ENGINES
        .iter()
        .find(|d| d.kind == kind)
        .expect("an EngineKind is a registered engine's")
}

impl EngineArgs {
    /// The engine, or the option that does not apply to it and why.
    pub fn resolve(&self) -> Result<EngineChoice, (String, String)> {
        let kind = by_name(self.engine.as_deref().unwrap_or("io_uring"))
            .map_err(|e| ("engine".to_string(), format!("--{e}")))?
            .kind;
        if let Some((owner, o, _)) = self.options.given.iter().find(|(k, _, _)| *k != kind) {
            return Err((
                o.cli.to_string(),
                format!(
                    "--{} is an {} option and does not apply to --engine {}",
                    o.cli,
                    owner.as_str(),
                    kind.as_str()
                ),
            ));
        }
        let mut opts = EngineOpts::of(Options::offered().map(|(_, o)| (o.key, o.default)));
        for (_, o, v) in &self.options.given {
            opts.set(o.key, *v);
        }
        Ok(EngineChoice {
            kind,
            opts,
            named: self.engine.is_some(),
        })
    }
}

/// Installs every engine's description in iolab-spec's catalogue, for the code below this
/// crate that cannot name an engine (`EngineKind::named`, fio job files, reports). The
/// binary does first (`iolab_workloads::install`); so may any test.
pub fn install() {
    iolab_spec::engopt::install(ENGINES);
}

/// The engine a run uses, with what the run should note: `kind` where it can run here;
/// io_uring where the kernel refuses it falls back to psync (queue depth 1), unless it was
/// asked for by name (`named`: the error says why and what to do). `depths` are the queue
/// depths the run's tests ask for: a synchronous engine runs them all at 1, and the note
/// says so. The one place the fallback is decided, for every workload that takes an engine.
pub fn usable(
    kind: EngineKind,
    named: bool,
    depths: impl IntoIterator<Item = u32>,
) -> Result<(EngineKind, Vec<String>), String> {
    let mut notes = Vec::new();
    let mut engine = kind;
    if let (Err(e), Some(fallback)) = (open_check(kind), desc(kind).fallback) {
        let (k, f) = (kind.as_str(), fallback.as_str());
        if named {
            return Err(format!(
                "--engine {k}: {k} is not available here ({e}); use --engine {f}, or leave \
                 --engine out to fall back to {f}"
            ));
        }
        notes.push(format!(
            "{k} is not available here ({e}); fell back to {f} (queue depth 1)"
        ));
        engine = fallback;
    }
    if desc(engine).synchronous && depths.into_iter().any(|d| d > 1) {
        notes.push(format!(
            "{} is synchronous: every test ran at queue depth 1 whatever its queue depth says",
            engine.as_str()
        ));
    }
    Ok((engine, notes))
}

/// The queue depth a job of `kind` runs at, given `--iodepth` (a synchronous engine: 1).
pub fn effective_iodepth(kind: EngineKind, iodepth: u32) -> u32 {
    if desc(kind).synchronous {
        1
    } else {
        iodepth
    }
}

/// A completed I/O: the slot it used and the kernel's result (bytes, or -errno).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub slot: u32,
    pub result: i32,
}

/// What a job's engine is opened with.
pub struct Open<'a> {
    /// The job's file descriptor.
    pub fd: RawFd,
    /// The job's file (engines that work on other files beside it: filecreate...).
    pub path: &'a std::path::Path,
    /// The job's queue depth (after [`Engine::depth`]).
    pub iodepth: u32,
    /// The job's buffers (the engine may register them; it must not keep a reference).
    pub bufs: &'a BufferPool,
    pub settings: &'a RunSettings,
    /// The job's offsets are random (they cannot merge into larger requests).
    pub random: bool,
    /// The job's writes are trims ([`iolab_spec::JobSpec::trim`]): only psync, falloc and
    /// null take such a job (the fio mapping runs it on them).
    pub trim: bool,
}

/// One job's I/O engine, bound to one file descriptor and one buffer pool.
pub trait Engine {
    /// What the engine is: its names and flags.
    const DESC: Desc;

    /// Opens the engine for one job thread. The notes say what the settings asked for and
    /// the engine did another way (a registration the kernel refused); an error fails the
    /// pass.
    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String>
    where
        Self: Sized;

    /// Queues an I/O of `len` bytes at `offset` using buffer slot `slot`. The I/O may be
    /// executed here (psync) or at the next [`Engine::submit_and_reap`] (io_uring).
    fn queue(&mut self, bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32);

    /// Submits everything queued and waits until at least `min` I/Os have completed (or
    /// none are outstanding); appends every available completion to `out`.
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()>;

    /// The file descriptor, for synchronous flushes.
    fn fd(&self) -> RawFd;

    /// Whether the engine can run here at all (io_uring: a kernel that refuses it); where
    /// it cannot, a run that did not name it runs on its `Desc.fallback`.
    fn available() -> Result<(), String>
    where
        Self: Sized,
    {
        Ok(())
    }

    /// The I/O priority (Linux ioprio) of the I/Os queued from now on; 0: the thread's.
    /// Only engines that put a priority in each request take one (the fio mapping refuses
    /// per-I/O priorities on the others).
    fn set_prio(&mut self, _ioprio: u16) {}
}

/// Work on a job's engine whatever its type (the job loop, generic over [`Engine`]).
pub trait WithEngine {
    type Output;
    fn run<E: Engine>(self, engine: &mut E, bufs: &mut BufferPool) -> Self::Output;
}

/// The registry of engines: one engine type a line; its `Desc` (in its file) says the rest.
macro_rules! registry {
    ($($engine:ty),* $(,)?) => {
        /// Opens the engine of `kind` for one job and runs `work` on it; the engine's notes
        /// beside the output. The engine is closed before `bufs` can be dropped.
        #[allow(clippy::too_many_arguments)]
        pub fn open_and_run<W: WithEngine>(
            kind: EngineKind,
            fd: RawFd,
            path: &std::path::Path,
            iodepth: u32,
            bufs: &mut BufferPool,
            settings: &RunSettings,
            random: bool,
            trim: bool,
            work: W,
        ) -> Result<(W::Output, Vec<String>), String> {
            let o = Open { fd, path, iodepth, bufs: &*bufs, settings, random, trim };
            $(if kind == <$engine as Engine>::DESC.kind {
                let (mut engine, notes) = <$engine>::open(&o)?;
                return Ok((work.run(&mut engine, bufs), notes));
            })*
            Err(format!("engine {kind} is not in this iolab's registry"))
        }

        /// Whether the engine of `kind` can run here (io_uring: whether the kernel gives
        /// one); an engine that always can says nothing ([`Engine::available`]).
        fn open_check(kind: EngineKind) -> Result<(), String> {
            $(if kind == <$engine as Engine>::DESC.kind {
                return <$engine as Engine>::available();
            })*
            Ok(())
        }

        /// Every engine's description, in the registry's order.
        pub static ENGINES: &[Desc] = &[$(<$engine as Engine>::DESC),*];
    };
}

// Every engine, one line each (its `Desc`, with its name, is in its file; its `pub mod` is
// at the top of this file, outside the macro so that rustfmt formats its file).
registry! {
    io_uring::Uring,
    psync::Psync,
    null::Null,
    ftruncate::Ftruncate,
    filecreate::Filecreate,
    filestat::Filestat,
    filedelete::Filedelete,
    falloc::Falloc,
    e4defrag::E4defrag,
}
