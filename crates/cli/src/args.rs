//! Command-line grammar. Job-shape options use fio's names (`--rw --bs --iodepth
//! --numjobs --rwmixread`); test names follow CrystalDiskMark.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a benchmark preset (default: cdm) on a target and store the result.
    Run(Box<RunArgs>),
    /// List the presets and the tests each one runs.
    Presets,
    /// List stored runs.
    Results(ResultsArgs),
    /// Print a stored run again.
    Show(ShowArgs),
    /// Show what iolab records about the machine and a target's device stack.
    Env(EnvArgs),
    /// Write the fio job file equivalent to a preset's tests (see docs/fio.md).
    ExportFio(Box<ExportFioArgs>),
    /// Run a preset's tests with iolab and with fio alternately on the same file and
    /// compare them.
    Crosscheck(Box<RunArgs>),
    /// Write a report of stored runs or of a study: HTML with charts, Markdown tables, CSV
    /// (one row per pass), JSON (see docs/reports.md).
    Report(ReportArgs),
    /// Stored runs side by side: each metric's medians, the change and whether it is
    /// significant given the passes.
    Compare(CompareArgs),
    /// Stored runs over time with their headline numbers, marking changes beyond the noise.
    History(HistoryArgs),
    /// Build the configurations a study file describes, run its workloads on each
    /// (interleaved), tear them down, and print the ranked comparison (see docs/studies.md).
    Study(StudyArgs),
    /// Remove what killed studies left behind: mounts, loop devices, images, cgroups,
    /// zfs-fuse daemons (from the state files in /run/iolab).
    Cleanup(CleanupArgs),
    /// Check data written by `iolab run verify --keep` (or, with --journal, what survived a
    /// crash); reads only. Exit 3 when a block does not hold what was written.
    Verify(VerifyArgs),
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
}

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// Accepted for uniformity with the other commands; `cleanup` stores nothing.
    #[command(flatten)]
    pub db: DbArgs,
    /// Where the state files are (default: /run/iolab as root, else $XDG_RUNTIME_DIR/iolab).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// Accepted for uniformity with the other commands; `verify` stores nothing.
    #[command(flatten)]
    pub db: DbArgs,
    /// The data file or device the run wrote.
    #[arg(long, short = 't', value_name = "PATH")]
    pub target: PathBuf,
    /// The run's journal: every acknowledged block is checked, blocks in flight are
    /// reported separately.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Run id (hex, as the run printed it); checked against the sidecar or journal, needed
    /// without either when the first block is damaged.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Block size, when there is neither a sidecar nor a readable first block.
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<String>,
    /// Expect every block at this generation (default: the sidecar's).
    #[arg(long, value_name = "N")]
    pub generation: Option<u64>,
    /// Bytes to check from the start (default: the sidecar's region, else the whole file
    /// or device).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

#[derive(Args, Debug)]
pub struct EnvArgs {
    /// Accepted for uniformity with the other commands; `env` stores nothing.
    #[command(flatten)]
    pub db: DbArgs,
    /// A directory, file or block device whose device stack to describe.
    #[arg(long, short = 't', value_name = "PATH")]
    pub target: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ExportFioArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Write the job file here instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Result database (default: $XDG_DATA_HOME/iolab/results.db).
    #[arg(long, value_name = "PATH", global = true)]
    pub db: Option<PathBuf>,
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
    /// Show at most this many (the newest).
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Run id as listed by `iolab results` ("last" for the newest).
    pub run_id: String,
    /// Print the JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// cdm (default), cdm-nvme, cdm-peak, cdm-real, atto, iometer, custom, or a workload:
    /// fsync, copy, streams, metadata, dbench, verify (see `iolab presets`). Giving --rw, --bs,
    /// --iodepth or --numjobs without a preset means custom.
    #[arg(value_name = "PRESET")]
    pub preset_arg: Option<String>,
    /// Directory (iolab makes and removes its own test file), regular file, or block device.
    #[arg(long, short = 't', value_name = "PATH", default_value = ".")]
    pub target: PathBuf,
    /// Test region size, e.g. 1GiB, 256m (preset default otherwise).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Measured passes per test.
    #[arg(long, value_name = "N", alias = "passes")]
    pub runs: Option<u32>,
    /// Length of each pass, e.g. 5s, 500ms.
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Unscored warm-up passes before the measured ones (dbench: warm-up time, default
    /// --time/5).
    #[arg(long, value_name = "N|TIME")]
    pub warmup: Option<String>,
    /// Length of each warm-up pass (default: --duration).
    #[arg(long, value_name = "TIME")]
    pub warmup_time: Option<String>,
    /// Unmeasured time at the start of every pass, e.g. 500ms (fio's ramp_time): lets a
    /// device, cache or throttle settle before counting.
    #[arg(long, value_name = "TIME")]
    pub ramp: Option<String>,
    /// I/O engine: io_uring (default), psync, or null (completes I/O without touching the target).
    #[arg(long, default_value = "io_uring")]
    pub engine: String,
    /// Go through the page cache (no O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// Write data: random (incompressible, default) or zeros.
    #[arg(long, default_value = "random")]
    pub data: String,
    /// Free-text label stored with the run.
    #[arg(long)]
    pub label: Option<String>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Do not store the run.
    #[arg(long)]
    pub no_store: bool,
    /// Also write the run as JSON to PATH ("-" for stdout, which then carries only JSON).
    #[arg(long, value_name = "PATH|-")]
    pub json: Option<String>,
    /// Access pattern (custom): read, write, randread, randwrite, rw, randrw.
    #[arg(long)]
    pub rw: Option<String>,
    /// Block size (custom), e.g. 4k, 1m.
    #[arg(long)]
    pub bs: Option<String>,
    /// I/Os in flight per job (custom).
    #[arg(long)]
    pub iodepth: Option<u32>,
    /// Parallel jobs, each with its own thread and ring (custom).
    #[arg(long)]
    pub numjobs: Option<u32>,
    /// Percentage of reads in a mixed job (default 50; cdm's --mix uses 70).
    #[arg(long)]
    pub rwmixread: Option<u8>,
    /// fsync after every N writes of each job (verify: fdatasync every N blocks).
    #[arg(long, value_name = "N", alias = "fsync-every")]
    pub fsync: Option<u32>,
    /// fdatasync after every N writes of each job.
    #[arg(long, value_name = "N", conflicts_with = "fsync")]
    pub fdatasync: Option<u32>,
    /// fsync at the end of every write pass (counted in the pass).
    #[arg(long)]
    pub end_fsync: bool,
    /// Add CrystalDiskMark's 70/30 read/write mix test to each cdm row.
    #[arg(long)]
    pub mix: bool,
    /// Keep adding passes until the 95% CI half-width is within PCT% of the median
    /// (default 3%); --runs is then the minimum (at least 3).
    #[arg(long, value_name = "PCT", num_args = 0..=1, default_missing_value = "3")]
    pub until_stable: Option<f64>,
    /// With --until-stable: most measured passes per test.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max_runs: u32,
    /// With --until-stable: most time spent on one test's measured passes.
    #[arg(long, value_name = "TIME", default_value = "2m")]
    pub max_time: String,
    /// Headline value: median of passes (default) or best (CrystalDiskMark's best of N).
    #[arg(long, default_value = "median")]
    pub score: String,
    /// Allow writing to a block device (destroys its contents; refused if it is mounted,
    /// in use, or carries a filesystem or partition table).
    #[arg(long)]
    pub allow_destroy_device: bool,
    /// Allow writing into an existing regular file iolab did not create.
    #[arg(long)]
    pub allow_overwrite_file: bool,
    /// io_uring: do not register buffers with the kernel.
    #[arg(long)]
    pub no_fixedbufs: bool,
    /// io_uring: do not register the file with the kernel.
    #[arg(long)]
    pub no_registerfiles: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// iometer: built-in access specification: file-server (default), database,
    /// workstation.
    #[arg(long, value_name = "NAME", help_heading = "Workload options")]
    pub pattern: Option<String>,
    /// iometer: access specification from a TOML file (see docs/iometer.md).
    #[arg(long, value_name = "FILE", help_heading = "Workload options")]
    pub spec: Option<PathBuf>,
    /// iometer: run the queue-depth ladder 1, 2, 4, ... 64 outstanding I/Os per worker.
    #[arg(long, help_heading = "Workload options")]
    pub qd_ladder: bool,
    /// fsync probe: write sizes, comma-separated (default 512,4k,8k,16k).
    #[arg(long, value_name = "LIST", help_heading = "Workload options")]
    pub sizes: Option<String>,
    /// fsync probe: methods, comma-separated, from none, fdatasync, fsync, O_DSYNC,
    /// O_SYNC, O_DIRECT+O_DSYNC (default all).
    #[arg(long, value_name = "LIST", help_heading = "Workload options")]
    pub methods: Option<String>,
    /// dbench: number of clients, each replaying the loadfile in its own directory.
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub clients: Option<u32>,
    /// dbench: measured time (default 60s).
    #[arg(long, value_name = "TIME", help_heading = "Workload options")]
    pub time: Option<String>,
    /// dbench: the loadfile (default /usr/share/dbench/client.txt; .gz accepted).
    #[arg(long, value_name = "FILE", help_heading = "Workload options")]
    pub loadfile: Option<PathBuf>,
    /// dbench: open files with O_SYNC.
    #[arg(long, help_heading = "Workload options")]
    pub sync: bool,
    /// dbench: fsync after every write.
    #[arg(long, help_heading = "Workload options")]
    pub fsync_every_write: bool,
    /// copy: what to copy (a file or a directory tree); default: a generated random file of
    /// --size.
    #[arg(long, value_name = "PATH", help_heading = "Workload options")]
    pub source: Option<PathBuf>,
    /// streams: number of concurrent sequential streams.
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub streams: Option<u32>,
    /// streams: all streams use one file (readers started --stagger apart).
    #[arg(long, help_heading = "Workload options")]
    pub same_file: bool,
    /// streams: delay between stream starts with --same-file (e.g. 10s).
    #[arg(long, value_name = "TIME", help_heading = "Workload options")]
    pub stagger: Option<String>,
    /// streams, copy: empty the page cache before measuring (root).
    #[arg(long, help_heading = "Workload options")]
    pub drop_caches: bool,
    /// metadata: number of files.
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub files: Option<u64>,
    /// metadata: number of directories the files are spread over.
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub dirs: Option<u64>,
    /// metadata: worker threads.
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub threads: Option<u32>,
    /// metadata: bytes written into each file.
    #[arg(long, value_name = "SIZE", help_heading = "Workload options")]
    pub file_size: Option<String>,
    /// Set by `iolab study` for the runs it starts: the study's name.
    #[arg(long, hide = true, requires = "config")]
    pub study: Option<String>,
    /// Set by `iolab study`: the configuration's label.
    #[arg(long, hide = true, requires = "study")]
    pub config: Option<String>,
    /// Set by `iolab study`: a JSON file describing the configuration (stored with the run);
    /// "-" reads it from standard input.
    #[arg(long, hide = true, value_name = "FILE", requires = "study")]
    pub study_meta: Option<PathBuf>,
    /// verify: when blocks are read back: inline (every --verify-every blocks as they are
    /// written), after (the whole region after each pass; default), both, none.
    #[arg(long, value_name = "MODE", help_heading = "Workload options")]
    pub verify_mode: Option<String>,
    /// verify: read back every Nth block written (inline mode; default 16).
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub verify_every: Option<u64>,
    /// Write self-describing blocks and check them: block presets (cdm, atto, custom, iometer)
    /// read the region back after every pass, streams --rw write every file before removal,
    /// fsync every test's writes after every pass, dbench every ReadX and every file at the
    /// end; metadata writes verifiable small files and compares each in its read phase; exit
    /// 3 on a mismatch (`run copy` always
    /// verifies; see docs/integrity.md).
    #[arg(long, help_heading = "Workload options")]
    pub verify: bool,
    /// verify: keep the data file and its sidecar for a later `iolab verify`.
    #[arg(long, help_heading = "Workload options")]
    pub keep: bool,
    /// verify: intent/ack journal, on another filesystem than the target, for `iolab verify
    /// --journal` after a crash (see docs/integrity.md).
    #[arg(long, value_name = "PATH", help_heading = "Workload options")]
    pub journal: Option<PathBuf>,
    /// scrub-test: build this loop testbed, run on it and remove it (root): btrfs-raid1,
    /// btrfs-raid5, zfs-mirror, zfs-raidz. Without it, --target must be a directory on a
    /// redundant btrfs or zfs.
    #[arg(long, value_name = "LAYOUT", help_heading = "Workload options")]
    pub testbed: Option<String>,
    /// scrub-test: size of each loop device of --testbed (default 512MiB).
    #[arg(long, value_name = "SIZE", help_heading = "Workload options")]
    pub device_size: Option<String>,
    /// scrub-test: bytes of verified blocks to write (default 128MiB).
    #[arg(long, value_name = "SIZE", help_heading = "Workload options")]
    pub dataset_size: Option<String>,
    /// scrub-test: percent of the dataset in small files of 4-64 KiB (default 25; 0 or 100
    /// for one class only, e.g. to compare their scrub rates).
    #[arg(long, value_name = "PCT", help_heading = "Workload options")]
    pub small_files: Option<u8>,
    /// scrub-test: corruptions to inject on one member (default 32).
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub corrupt: Option<u32>,
    /// scrub-test: bytes per corruption, a multiple of 4KiB up to 64KiB (default 4KiB).
    #[arg(long, value_name = "SIZE", help_heading = "Workload options")]
    pub corrupt_size: Option<String>,
    /// scrub-test: corrupt the same data on every member holding it (must be uncorrectable).
    #[arg(long, help_heading = "Workload options")]
    pub all_copies: bool,
    /// scrub-test: measure a sequential reader on other data during the scrub against the
    /// same reader without one.
    #[arg(long, help_heading = "Workload options")]
    pub foreground: bool,
    /// scrub-test: with --target on an existing filesystem, allow overwriting blocks of
    /// iolab's own files directly on its member devices.
    #[arg(long, help_heading = "Workload options")]
    pub allow_corrupt_members: bool,
    /// scrub-test: seed for file sizes and the blocks chosen (printed in the results).
    #[arg(long, value_name = "N", help_heading = "Workload options")]
    pub seed: Option<u64>,
}

impl RunArgs {
    /// The preset or workload to run: as given, else `custom` when a job shape was given,
    /// else `cdm`.
    pub fn preset(&self) -> &str {
        match &self.preset_arg {
            Some(p) => p,
            None if self.rw.is_some()
                || self.bs.is_some()
                || self.iodepth.is_some()
                || self.numjobs.is_some() =>
            {
                "custom"
            }
            None => "cdm",
        }
    }
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
    pub run_ids: Vec<String>,
    /// The runs of this study's newest invocation, one configuration per config label.
    #[arg(long, value_name = "NAME")]
    pub study: Option<String>,
    /// With --study: pool the runs of every invocation of the study, not just the newest.
    #[arg(long, requires = "study")]
    pub all_invocations: bool,
    /// The configuration the others are compared with (default: the first).
    #[arg(long, value_name = "LABEL")]
    pub baseline: Option<String>,
    /// Write the self-contained HTML report to FILE ("-" or no FILE: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub html: Option<String>,
    /// Write Markdown tables to FILE ("-" or no FILE: standard output; the default format).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub markdown: Option<String>,
    /// Write CSV, one row per pass, to FILE ("-" or no FILE: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub csv: Option<String>,
    /// Write JSON to FILE ("-" or no FILE: standard output): the run document for one
    /// run, the study document (iolab.study/1) for several or a study.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<String>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Runs to compare; the first is the reference (A).
    #[arg(value_name = "RUN_ID")]
    pub run_ids: Vec<String>,
    /// Compare the runs carrying these labels instead (repeat: --label before --label
    /// after); runs sharing a label have their passes pooled.
    #[arg(long, value_name = "LABEL", conflicts_with = "run_ids")]
    pub label: Vec<String>,
    /// Print the comparison document (iolab.comparison/1) instead of the table, or write
    /// it to FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<String>,
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
    /// Only the newest N runs.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Print the history document (iolab.history/1) instead of the tables, or write it to
    /// FILE.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-")]
    pub json: Option<String>,
}
