//! The workload interface: what `iolab run NAME` needs from a workload (its names, its
//! options, how to check them and how to run), and the registry that turns the command
//! line into a checked, runnable job.

use std::marker::PhantomData;

use clap::{ArgMatches, Args, Command, FromArgMatches};
use iolab_measure::workload::WorkloadInfo;

use crate::context::RunContext;
use crate::options::CommonArgs;
use crate::status::{RunError, UsageError};

/// A workload, or a family of presets sharing one implementation (the block presets).
pub trait Workload: Sync {
    /// The names `iolab run` accepts for it; the first is the canonical one.
    fn names(&self) -> &'static [&'static str];
    /// One line for `iolab run --help` and `iolab presets`.
    fn summary(&self, name: &str) -> &'static str;
    /// What it says of itself to the crates below iolab-workloads (what it counts, MPI,
    /// its header's facts, its warnings' fixes): what the binary installs for them.
    fn info(&self) -> &'static dyn WorkloadInfo;
    /// Adds the options of `iolab run NAME` (the runner adds the common ones).
    fn args(&self, name: &str, cmd: Command) -> Command;
    /// Checks the options and resolves everything that can be resolved without touching
    /// the target; the result runs with [`Job::run`].
    fn plan(
        &self,
        name: &str,
        matches: &ArgMatches,
        common: &CommonArgs,
    ) -> Result<Box<dyn Job>, UsageError>;
}

/// A checked workload, ready to run.
pub trait Job {
    /// Runs it: prepares the target, starts the run record with [`RunContext::start`],
    /// measures, and hands tests to the context. Errors after `start` still leave a stored,
    /// incomplete run.
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError>;

    /// The block plan, for the block presets: what `export-fio` writes as a fio job file
    /// and `crosscheck` runs with both tools.
    fn block(&self) -> Option<&crate::block::BlockPlan> {
        None
    }

    /// The time its passes are planned to take, where the plan fixes it (the block
    /// presets: [`BlockPlan::planned`](crate::block::BlockPlan::planned)); `None` where
    /// the work decides (a copy, a metadata tree, a verify pass).
    fn planned(&self) -> Option<std::time::Duration> {
        self.block().map(|b| b.planned())
    }
}

/// The plan function of a workload with one options struct.
pub type PlanFn<O> =
    fn(name: &str, options: O, common: &CommonArgs) -> Result<Box<dyn Job>, UsageError>;

/// A workload defined by an options struct (clap `Args`) and a plan function: most
/// workloads are one `static` of this.
pub struct Def<O> {
    pub names: &'static [&'static str],
    pub summary: &'static str,
    pub plan: PlanFn<O>,
    pub info: &'static dyn WorkloadInfo,
    options: PhantomData<fn() -> O>,
}

impl<O> Def<O> {
    pub const fn new(
        names: &'static [&'static str],
        summary: &'static str,
        plan: PlanFn<O>,
        info: &'static dyn WorkloadInfo,
    ) -> Self {
        Def {
            names,
            summary,
            plan,
            info,
            options: PhantomData,
        }
    }
}

impl<O: Args + FromArgMatches> Workload for Def<O> {
    fn names(&self) -> &'static [&'static str] {
        self.names
    }

    fn summary(&self, _name: &str) -> &'static str {
        self.summary
    }

    fn info(&self) -> &'static dyn WorkloadInfo {
        self.info
    }

    fn args(&self, _name: &str, cmd: Command) -> Command {
        O::augment_args(cmd)
    }

    fn plan(
        &self,
        name: &str,
        matches: &ArgMatches,
        common: &CommonArgs,
    ) -> Result<Box<dyn Job>, UsageError> {
        let options =
            O::from_arg_matches(matches).map_err(|e| UsageError::general(e.to_string()))?;
        (self.plan)(name, options, common)
    }
}

/// A command line, checked: which workload, the common options and the job.
pub struct Parsed {
    pub name: String,
    pub common: CommonArgs,
    pub job: Box<dyn Job>,
}

/// Why a command line was not accepted.
#[derive(Debug)]
pub enum ParseError {
    /// From the argument parser: also `--help` and `--version`, which are not failures
    /// (print it with `print()`, exit with `exit_code()`).
    Clap(clap::Error),
    /// Refused by iolab's own checks, naming the option.
    Usage(UsageError),
}

/// Every workload `iolab run` knows, in the order `iolab run --help` lists them.
pub struct Registry {
    pub workloads: &'static [&'static dyn Workload],
    /// The workload to run when none is named, from the options given.
    pub default: fn(args: &[String]) -> &'static str,
}

impl Registry {
    /// The workload called `name`.
    pub fn find(&self, name: &str) -> Option<&'static dyn Workload> {
        self.workloads
            .iter()
            .copied()
            .find(|w| w.names().contains(&name))
    }

    /// What every workload says of itself, in the registry's order (one each).
    pub fn infos(&self) -> impl Iterator<Item = &'static dyn WorkloadInfo> + '_ {
        self.workloads.iter().map(|w| w.info())
    }

    /// Every name `iolab run` accepts.
    pub fn names(&self) -> Vec<&'static str> {
        self.workloads
            .iter()
            .flat_map(|w| w.names().iter().copied())
            .collect()
    }

    /// The command of `iolab run NAME`: the common options and the workload's own.
    pub fn workload_command(&self, bin: &str, w: &dyn Workload, name: &str) -> Command {
        let cmd = Command::new(name.to_string())
            .bin_name(format!("{bin} {name}"))
            .next_line_help(false);
        let cmd = CommonArgs::augment_args(cmd);
        // After the options: deriving them sets the command's text from their structs' docs.
        w.args(name, cmd)
            .about(w.summary(name))
            .long_about(None::<&str>)
    }

    /// The command of `iolab run` with one subcommand per name (for `--help`).
    pub fn command(&self, bin: &str) -> Command {
        let mut cmd = Command::new(bin.to_string())
            .about(
                "Run a workload on a target and store the result. Without a NAME: cdm, or \
                 custom when --rw, --bs, --iodepth or --numjobs is given.",
            )
            .subcommand_value_name("NAME")
            .disable_help_subcommand(true)
            .subcommand_help_heading("Workloads");
        for w in self.workloads {
            for name in w.names() {
                cmd = cmd.subcommand(self.workload_command(bin, *w, name));
            }
        }
        cmd
    }

    /// The workloads whose command takes the long option `--flag`.
    pub fn takers(&self, bin: &str, flag: &str) -> Vec<&'static str> {
        let mut out = Vec::new();
        for w in self.workloads {
            for name in w.names() {
                let cmd = self.workload_command(bin, *w, name);
                let takes = cmd.get_arguments().any(|a| {
                    a.get_long() == Some(flag)
                        || a.get_all_aliases().into_iter().flatten().any(|x| x == flag)
                });
                if takes {
                    out.push(*name);
                }
            }
        }
        out
    }

    /// Parses `iolab run`'s arguments (everything after `run`) and plans the job. `bin` is
    /// how the command is named in messages ("iolab run").
    pub fn parse(&self, bin: &str, args: &[String]) -> Result<Parsed, ParseError> {
        let mut args: Vec<String> = args.to_vec();
        let named = args.first().is_some_and(|a| !a.starts_with('-'));
        let help = args.first().is_some_and(|a| a == "-h" || a == "--help");
        if help {
            let err = self
                .command(bin)
                .try_get_matches_from(std::iter::once(bin.to_string()).chain(args))
                .expect_err("--help always ends parsing");
            return Err(ParseError::Clap(err));
        }
        if !named {
            args.insert(0, (self.default)(&args).to_string());
        }
        let name = args[0].clone();
        let Some(w) = self.find(&name) else {
            return Err(ParseError::Usage(UsageError {
                option: None,
                message: format!(
                    "unknown workload '{name}' (known: {}; see `{bin} --help`)",
                    self.names().join(", ")
                ),
            }));
        };
        let cmd = self.workload_command(bin, w, &name);
        let matches = cmd
            .try_get_matches_from(&args)
            .map_err(|e| self.explain(bin, &name, e))?;
        let common = CommonArgs::from_arg_matches(&matches)
            .map_err(|e| ParseError::Clap(e.format(&mut self.workload_command(bin, w, &name))))?;
        common.repeat().map_err(ParseError::Usage)?;
        let job = w
            .plan(&name, &matches, &common)
            .map_err(ParseError::Usage)?;
        Ok(Parsed { name, common, job })
    }

    /// An unknown option becomes an error naming the option and the workloads that take
    /// it; other parser errors stay as they are.
    fn explain(&self, bin: &str, name: &str, e: clap::Error) -> ParseError {
        if let Some(refusal) = invalid_value(&e) {
            return ParseError::Usage(refusal);
        }
        let Some(flag) = unknown_flag(&e) else {
            return ParseError::Clap(e);
        };
        let takers = self.takers(bin, &flag);
        if takers.is_empty() {
            return ParseError::Clap(e);
        }
        ParseError::Usage(UsageError::option(
            &flag,
            format!(
                "--{flag} does not apply to `{bin} {name}`; it is an option of: {} (see `{bin} \
                 {name} --help`)",
                takers.join(", ")
            ),
        ))
    }
}

/// A value an enumerated option does not take (its clap `ValueEnum` or list of values), said
/// the way iolab says other bad values: `--OPTION 'VALUE': expected A, B, C` (exit 2).
pub fn invalid_value(e: &clap::Error) -> Option<UsageError> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidValue {
        return None;
    }
    let arg = e.get(ContextKind::InvalidArg)?.to_string();
    let flag = arg
        .strip_prefix("--")?
        .split([' ', '='])
        .next()?
        .to_string();
    let value = e.get(ContextKind::InvalidValue)?.to_string();
    let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) else {
        return None;
    };
    Some(UsageError::option(
        &flag,
        format!("--{flag} '{value}': expected {}", valid.join(", ")),
    ))
}

/// The long option (without dashes) a parser error says is unknown, if that is the error.
pub fn unknown_flag(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let arg = e.get(ContextKind::InvalidArg)?.to_string();
    let flag = arg
        .trim_start_matches('-')
        .split(['=', ' '])
        .next()
        .unwrap_or("")
        .to_string();
    (arg.starts_with("--") && !flag.is_empty()).then_some(flag)
}
