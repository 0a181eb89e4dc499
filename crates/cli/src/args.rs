//! Command-line grammar. Job-shape options use fio's names (`--rw --bs --iodepth
//! --numjobs --rwmixread`); test names follow CrystalDiskMark.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use iolab_report::formats::{self, Format, Kind};

#[derive(Parser, Debug)]
#[command(
    name = "iolab",
    version,
    about = "A storage I/O lab: CrystalDiskMark/ATTO/fio-style benchmarks with every result kept",
    after_help = "MB/s is 10^6 bytes per second everywhere. Results are stored in \
                  $XDG_DATA_HOME/iolab/results.db unless --no-store or --db is given."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Colour warnings, significant changes and unsafe caveats: auto (on a terminal, unless
    /// NO_COLOR is set), always or never. Taken anywhere on the line, also after `run NAME`.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    pub color: ColorChoice,
}

/// `--color`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a workload (default: the cdm preset) on a target and store the result; `iolab run
    /// NAME --help` lists NAME's options.
    Run(WorkloadArgs),
    /// List the presets and the tests each one runs.
    Presets,
    /// List stored runs.
    Results(ResultsArgs),
    /// Print a stored run again.
    Show(ShowArgs),
    /// Show what iolab records about the machine and a target's device stack.
    Env(EnvArgs),
    /// Write the fio job file equivalent to a preset's tests (see docs/fio.md).
    ExportFio(WorkloadArgs),
    /// Run a preset's tests with iolab and with fio alternately on the same file and
    /// compare them.
    Crosscheck(WorkloadArgs),
    /// Write a report of stored runs or of a study: HTML with charts, Markdown tables, CSV
    /// (one row per pass), JSON (see docs/reports.md).
    Report(ReportArgs),
    /// Stored runs side by side: each metric's value, the change and whether it stands out
    /// from run-to-run noise (judged on runs, not passes; see docs/statistics.md).
    Compare(CompareArgs),
    /// Stored runs over time with their headline numbers, marking changes beyond the
    /// run-to-run noise of the same command.
    History(HistoryArgs),
    /// Build the configurations a study file describes, run its workloads on each
    /// (interleaved), tear them down, and print the ranked comparison (see docs/studies.md).
    Study(StudyArgs),
    /// Run two `iolab run` commands alternately (A B B A ...), each run stored under its
    /// side's label, until their comparison is decided or a budget ends:
    /// `iolab ab [OPTIONS] WORKLOAD [ARGS] -- WORKLOAD [ARGS]` (docs/statistics.md).
    Ab(AbArgs),
    /// Remove what killed studies and runs left behind: mounts, loop devices, images,
    /// cgroups, zfs-fuse daemons, emulated disks, test files, verify data, dbench's
    /// clients/, metadata trees (from the state files in /run/iolab).
    Cleanup(CleanupArgs),
    /// Check data written by `iolab run verify --keep` (or, with --journal, what survived a
    /// crash); reads only. Exit 3 when a block does not hold what was written.
    Verify(iolab_workloads::verify::later::LaterArgs),
    // ux: completions, man pages and removing stored runs.
    /// Print the shell completion script for SHELL (every command, workload and option).
    Completions(CompletionsArgs),
    /// Write the man pages (iolab.1, iolab-COMMAND.1, iolab-run-WORKLOAD.1) to DIR, or print
    /// iolab.1 when no DIR is given.
    Man(ManArgs),
    /// Delete stored runs (their tests and passes) by id; asks first on a terminal.
    Delete(DeleteArgs),
    /// Delete the stored runs older than an age, optionally only those matching filters;
    /// asks first on a terminal.
    Prune(PruneArgs),
    /// Copy stored runs into another store (a shared PostgreSQL database, or a file), once
    /// each: a run already there (by its uuid) is skipped.
    Push(PushArgs),
    /// Run a command and record its file I/O beneath --root into a trace for `iolab run
    /// replay` (through strace; no file contents are recorded; see docs/workloads.md).
    Record(RecordArgs),
    /// Browse the result store in a web browser, read-only: runs, a run's report, compare,
    /// history, studies (loopback only unless --token; see docs/serve.md).
    Serve(ServeArgs),
    /// The emulated disk's daemon and control requests (used by testbeds and tests; see
    /// docs/testbeds.md).
    #[command(hide = true, subcommand)]
    Emudisk(EmudiskCommand),
}

#[derive(Subcommand, Debug)]
pub enum EmudiskCommand {
    /// Serve the emulated disk: mount DIR/mnt (one image file over --backing), answer
    /// DIR/ctl.sock, until stopped.
    Serve {
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        #[arg(long, value_name = "FILE")]
        backing: PathBuf,
        /// The disk model as JSON (the keys of `[testbed.emulated]`).
        #[arg(long, value_name = "JSON")]
        spec: String,
    },
    /// Send one control request (stats, fault ..., clear-faults, ignore-flush on|off,
    /// power-loss [tear], power-on, stop) to the disk served in DIR.
    Ctl {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        #[arg(value_name = "REQUEST", num_args = 1.., required = true)]
        request: Vec<String>,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Address and port to listen on; an address other than loopback needs --token (one is
    /// generated and printed when none is given). Port 0 takes a free one.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// The token every request must carry (a `?token=` link, then a cookie, or
    /// `Authorization: Bearer`): 16 to 256 letters, digits or -._~.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace to write (gzipped when it ends in .gz).
    #[arg(long, short = 'o', value_name = "TRACE")]
    pub output: PathBuf,
    /// A directory whose files are recorded (repeatable; default: the current directory).
    /// Calls on anything outside the roots are counted and left out.
    #[arg(long, value_name = "DIR")]
    pub root: Vec<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(value_name = "COMMAND", trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Args, Debug)]
pub struct StudyArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The study file (TOML; see docs/studies.md and studies/).
    #[arg(value_name = "FILE", required_unless_present = "list_testbeds")]
    pub file: Option<PathBuf>,
    /// Check the file, expand the matrix and print the plan (configurations, the commands
    /// each build runs, the order of the runs); build and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// List the testbed kinds and knobs, and which of them this machine can build.
    #[arg(long, conflicts_with_all = ["file", "dry_run"])]
    pub list_testbeds: bool,
    /// Compare against this configuration instead of the file's baseline.
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// Also write the HTML report of the study to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// The devices of the study's kind = "device" testbeds, in order (repeat per device;
    /// they replace the file's `devices`).
    #[arg(long, value_name = "DEV")]
    pub device: Vec<PathBuf>,
    /// Let a device testbed format DEV, destroying everything on it (repeat per device).
    #[arg(long, value_name = "DEV")]
    pub allow_destroy_device: Vec<PathBuf>,
    /// Erase the signatures already on the devices before a device testbed builds.
    #[arg(long)]
    pub wipe: bool,
    /// One round (interleaved; replaces the file's repeats), then one repeat at a time of
    /// the configurations whose place in the ranking is undecided, judged after every
    /// visit, until every adjacent pair is different or the same within --margin
    /// (docs/statistics.md).
    #[arg(long, conflicts_with = "dry_run")]
    pub until_decided: bool,
    /// Rounds already alternate the configurations (order = "interleaved", the default);
    /// this also rotates the order within each round (A B C, B C A, C A B), so every
    /// configuration takes every place in a round (order = "rotated"; overrides the file's
    /// order).
    #[arg(long)]
    pub interleave: bool,
    /// With --until-decided: the most wall time the study may take (30m, 2h).
    #[arg(long, value_name = "TIME", requires = "until_decided", value_parser = parse_budget)]
    pub budget: Option<std::time::Duration>,
    /// With --until-decided: two configurations whose 95% interval lies inside ±PCT
    /// percent are the same (default 5).
    #[arg(long, value_name = "PCT", requires = "until_decided", value_parser = parse_margin)]
    pub margin: Option<f64>,
}

/// A `--budget` or `--margin` value clap's parser refuses (its message after clap's
/// "invalid value 'V' for '--OPTION'").
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error(transparent)]
    Duration(#[from] iolab_spec::SpecError),
    #[error("'{0}': the budget must be above 0")]
    ZeroBudget(String),
    #[error("'{0}' is not a percentage (for example 5 or 2.5)")]
    NotPercent(String),
    #[error("'{0}': the margin is a percentage above 0 and below 100")]
    Margin(String),
}

/// `--budget TIME`: a duration, above 0.
pub fn parse_budget(s: &str) -> Result<std::time::Duration, ValueError> {
    let d = iolab_spec::parse_duration("--budget", s)?;
    if d.is_zero() {
        return Err(ValueError::ZeroBudget(s.to_string()));
    }
    Ok(d)
}

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// Where the state files are (default: $IOLAB_STATE_DIR if set, else /run/iolab as root,
    /// else $XDG_RUNTIME_DIR/iolab).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct EnvArgs {
    /// A directory, file or block device whose device stack to describe.
    #[arg(long, short = 't', value_name = "PATH")]
    pub target: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The arguments of a command whose options depend on the workload named first (`run`,
/// `export-fio`, `crosscheck`): parsed by the workload registry, which knows each
/// workload's options.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct WorkloadArgs {
    #[arg(
        value_name = "NAME [OPTIONS]",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..
    )]
    pub args: Vec<String>,
}

#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Result database: a file, or a postgresql://USER@HOST/DB URL (default: $IOLAB_DB if
    /// set, else $XDG_DATA_HOME/iolab/results.db).
    #[arg(long, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PushArgs {
    /// The local store the runs are read from.
    #[command(flatten)]
    pub db: DbArgs,
    /// The store to copy into: a postgresql:// URL (or a file).
    #[arg(long, value_name = "URL", required = true)]
    pub to: PathBuf,
    /// Runs to push, as listed by `iolab results` ("last" for the newest).
    #[arg(value_name = "RUN_ID", required_unless_present_any = ["label", "all"])]
    pub run_ids: Vec<crate::error::RunRef>,
    /// Push the runs with this label.
    #[arg(long, conflicts_with_all = ["run_ids", "all"])]
    pub label: Option<String>,
    /// Push every stored run.
    #[arg(long, conflicts_with = "run_ids")]
    pub all: bool,
    /// Print nothing but errors.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct ResultsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Only runs of this preset.
    #[arg(long)]
    pub preset: Option<String>,
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs on this target path.
    #[arg(long)]
    pub target: Option<String>,
    /// Only runs of this study (every invocation).
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
    /// Only runs measured on this host: its name or its machine id.
    #[arg(long)]
    pub host: Option<String>,
    /// Show at most this many (the newest).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print the runs as a JSON array (one object per run; see docs/cli.md).
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the runs as CSV with a header row (see docs/cli.md).
    #[arg(long)]
    pub csv: bool,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Run id as listed by `iolab results` ("last" for the newest).
    pub run_id: crate::error::RunRef,
    /// Print the JSON document instead of the table.
    #[arg(long, conflicts_with_all = ["warnings", "verbose"])]
    pub json: bool,
    /// Print only the run's warnings, each in full (its test, message and fix).
    #[arg(long, conflicts_with = "verbose")]
    pub warnings: bool,
    /// Print every warning in full and every note whole under the report, instead of one
    /// line per warning code and note.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Print each test's throughput per interval (the stored 100 ms series) instead of the
    /// report: a table, or CSV with --csv, JSON with --json (see docs/reports.md).
    #[arg(long, conflicts_with_all = ["warnings", "verbose"])]
    pub series: bool,
    /// With --series: the interval, a multiple of 100ms (default 1s).
    #[arg(long, requires = "series", value_name = "TIME")]
    pub interval: Option<String>,
    /// With --series: CSV, one row per interval, with a header row.
    #[arg(long, requires = "series", conflicts_with = "json")]
    pub csv: bool,
    /// With --series: write fio's bw, iops and lat logs of every test instead
    /// (PREFIX_bw.N.log ..., test N; windows of --interval).
    #[arg(long, requires = "series", conflicts_with_all = ["json", "csv"], value_name = "PREFIX")]
    pub fio_log: Option<String>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Runs to report on, as listed by `iolab results` ("last" for the newest). Give them
    /// before the format options.
    #[arg(
        value_name = "RUN_ID",
        required_unless_present = "study",
        conflicts_with = "study"
    )]
    pub run_ids: Vec<crate::error::RunRef>,
    /// The runs of this study's newest invocation, one configuration per config label.
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
    /// With --study: pool the runs of every invocation of the study, not just the newest.
    #[arg(long, requires = "study")]
    pub all_invocations: bool,
    /// The configuration the others are compared with (default: the first).
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// `--html`, `--markdown`, `--csv`, `--json`: one option per format of the registry.
    #[command(flatten)]
    pub formats: Outputs<ForRuns>,
    /// A change whose 95% interval lies inside ±PCT percent is called "same" (default 5).
    #[arg(long, value_name = "PCT", value_parser = parse_margin)]
    pub margin: Option<f64>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Runs to compare; the first is the reference (A).
    #[arg(value_name = "RUN_ID")]
    pub run_ids: Vec<crate::error::RunRef>,
    /// Compare the runs carrying these labels instead (repeat: --label before --label
    /// after); the runs sharing a label are one side, each run one sample.
    #[arg(long, value_name = "LABEL", conflicts_with = "run_ids")]
    pub label: Vec<String>,
    /// Compare the runs measured on these hosts (name or machine id; repeat: --host A
    /// --host B), each host one side; with one --label, only that label's runs. Once, with
    /// --label twice: only that host's runs.
    #[arg(long, value_name = "HOST", conflicts_with = "run_ids")]
    pub host: Vec<String>,
    /// `--json`: the formats of the registry that render a comparison.
    #[command(flatten)]
    pub formats: Outputs<ForComparison>,
    /// Print every warning of every side in full instead of one line per code and side.
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Show every line (every metric of every test) and the full evidence, not only the
    /// lines that matter.
    #[arg(long)]
    pub all: bool,
    /// A change whose 95% interval lies inside ±PCT percent is called "same" (default 5;
    /// docs/statistics.md).
    #[arg(long, value_name = "PCT", value_parser = parse_margin)]
    pub margin: Option<f64>,
}

/// `--margin PCT`: a percentage above 0 and below 100.
pub fn parse_margin(s: &str) -> Result<f64, ValueError> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| ValueError::NotPercent(s.to_string()))?;
    if v.is_finite() && v > 0.0 && v < 100.0 {
        Ok(v)
    } else {
        Err(ValueError::Margin(s.to_string()))
    }
}

#[derive(Args, Debug)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Only runs on this target path.
    #[arg(long, value_name = "PATH")]
    pub target: Option<String>,
    /// Only runs of this preset or workload.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs measured on this host (name or machine id).
    #[arg(long)]
    pub host: Option<String>,
    /// Only the newest N runs.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// `--json`: the formats of the registry that render a history.
    #[command(flatten)]
    pub formats: Outputs<ForHistory>,
    /// A change whose 95% interval lies inside ±PCT percent is called "same" (default 5).
    #[arg(long, value_name = "PCT", value_parser = parse_margin)]
    pub margin: Option<f64>,
}

// ux: completions and man pages.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// The directory to write the pages to, made (0755) when missing, e.g.
    /// /usr/local/share/man/man1.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

// ux: removing stored runs.
#[derive(Args, Debug)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Runs to delete, as listed by `iolab results` ("last" for the newest).
    #[arg(value_name = "RUN_ID", required = true)]
    pub run_ids: Vec<crate::error::RunRef>,
    /// Do not ask (needed when standard input is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Args, Debug)]
pub struct PruneArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Delete the runs started longer ago than AGE: a whole number and s, m, h, d or w
    /// (90d, 2w, 12h).
    #[arg(long, value_name = "AGE", required = true)]
    pub older_than: String,
    /// Only runs with this label.
    #[arg(long)]
    pub label: Option<String>,
    /// Only runs of this preset or workload.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Only runs on this target path.
    #[arg(long, value_name = "PATH")]
    pub target: Option<String>,
    /// Only runs of this study.
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
    /// Do not ask (needed when standard input is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

#[derive(Args, Debug)]
pub struct AbArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// The label A's runs are stored under.
    #[arg(long, value_name = "LABEL", default_value = "a")]
    pub label_a: String,
    /// The label B's runs are stored under.
    #[arg(long, value_name = "LABEL", default_value = "b")]
    pub label_b: String,
    /// A change whose 95% interval lies inside ±PCT percent is "same" (default 5).
    #[arg(long, value_name = "PCT", value_parser = parse_margin)]
    pub margin: Option<f64>,
    /// The most wall time the ab may take (10m, 1h); no new pair starts past it.
    #[arg(long, value_name = "TIME", value_parser = parse_budget)]
    pub budget: Option<std::time::Duration>,
    /// The most runs a side (2 to 1000; default 10).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=iolab_study::ab::MAX_RUNS as i64))]
    pub max_runs: Option<u32>,
    /// Print the comparison document with the ab's record (`ab`) instead of the table, or
    /// write it to a new FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<String>,
    /// A's `iolab run` arguments, `--`, then B's: `cdm --size 64MiB --target /mnt/x --
    /// cdm --size 64MiB --target /mnt/y`.
    #[arg(value_name = "CMD_A -- CMD_B", trailing_var_arg = true, allow_hyphen_values = true, num_args = 1.., required = true)]
    pub command: Vec<String>,
}

// Output formats: the options come from iolab-report's registry of formats.

/// The view a command renders, for [`Outputs`].
pub trait OutputKind {
    const KIND: Kind;
}
#[derive(Debug, Clone)]
pub struct ForRuns;
impl OutputKind for ForRuns {
    const KIND: Kind = Kind::Runs;
}
#[derive(Debug, Clone)]
pub struct ForComparison;
impl OutputKind for ForComparison {
    const KIND: Kind = Kind::Comparison;
}
#[derive(Debug, Clone)]
pub struct ForHistory;
impl OutputKind for ForHistory {
    const KIND: Kind = Kind::History;
}

/// `--NAME [FILE]` for every format of `iolab_report::formats::FORMATS` that renders
/// `K`'s view: what was asked for, in registry order, with its destination ("-" for
/// standard output).
#[derive(Debug, Clone)]
pub struct Outputs<K> {
    pub chosen: Vec<(&'static dyn Format, String)>,
    kind: std::marker::PhantomData<K>,
}

impl<K: OutputKind> clap::FromArgMatches for Outputs<K> {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let chosen = formats::rendering(K::KIND)
            .filter_map(|(f, _)| m.get_one::<String>(f.name()).map(|d| (f, d.clone())))
            .collect();
        Ok(Outputs {
            chosen,
            kind: std::marker::PhantomData,
        })
    }
    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<K: OutputKind> Args for Outputs<K> {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        formats::rendering(K::KIND).fold(cmd, |cmd, (f, help)| {
            cmd.arg(
                clap::Arg::new(f.name())
                    .long(f.name())
                    .value_name("FILE")
                    .num_args(0..=1)
                    .default_missing_value("-")
                    .value_parser(clap::value_parser!(String))
                    .action(clap::ArgAction::Set)
                    .help(help),
            )
        })
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}
