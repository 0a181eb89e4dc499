//! `iolab run metadata`: its options and how the phases run as a stored run.

use clap::Args;
use iolab_runner::options::{opt_size, VerifyArg};
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, Job, RunContext, RunError, RunStart, UsageError,
};

use super::MetadataConfig;
use crate::common::WorkloadError;
use iolab_runner::coord::Phases;
use iolab_runner::space::Need;

/// The metadata workload's entry in the registry.
pub static WORKLOAD: Def<MetadataOptions> = Def::new(
    &["metadata"],
    "mdtest-shaped: create, stat, read, rename, delete of --files N in --dirs M with --threads \
     T; ops/s per phase and the space each small file really uses; --verify compares every \
     file read with what was written (exit 3 on a mismatch)",
    plan,
    &super::info::INFO,
);

/// Options of `iolab run metadata`.
#[derive(Args, Debug, Clone)]
pub struct MetadataOptions {
    /// Number of files.
    #[arg(long, value_name = "N")]
    pub files: Option<u64>,
    /// Number of directories the files are spread over.
    #[arg(long, value_name = "N")]
    pub dirs: Option<u64>,
    /// Worker threads.
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Bytes written into each file.
    #[arg(long, value_name = "SIZE")]
    pub file_size: Option<String>,
    /// fsync every file after writing it.
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub verify: VerifyArg,
}

struct MetadataJob {
    cfg: MetadataConfig,
}

fn plan(_name: &str, a: MetadataOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let mut cfg = MetadataConfig::new(Default::default());
    if a.files == Some(0) {
        return Err(UsageError::option("files", "--files must be at least 1"));
    }
    cfg.files = a.files.unwrap_or(cfg.files);
    if let Some(d) = a.dirs {
        cfg.dirs = u32::try_from(d)
            .map_err(|_| UsageError::option("dirs", format!("--dirs {d}: too many")))?;
    }
    if a.threads == Some(0) {
        return Err(UsageError::option(
            "threads",
            "--threads must be at least 1",
        ));
    }
    cfg.threads = a.threads.unwrap_or(cfg.threads);
    cfg.file_size = opt_size("file-size", &a.file_size)?.unwrap_or(cfg.file_size);
    cfg.fsync = a.fsync;
    cfg.verify = a.verify.verify.then(|| fastrand::u64(1..));
    super::check_config(&cfg).map_err(|e| match e {
        WorkloadError::Invalid { option, reason } => {
            UsageError::option(&option, format!("--{option}: {reason}"))
        }
        other => UsageError::general(other.to_string()),
    })?;
    Ok(Box::new(MetadataJob { cfg }))
}

impl Job for MetadataJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let mut cfg = self.cfg;
        cfg.dir = target_dir(&ctx.common, "metadata")?;
        let bytes = cfg
            .file_size
            .next_multiple_of(4096)
            .saturating_mul(cfg.files);
        let need = Need::new("files", bytes, cfg.files + cfg.dirs as u64 + 1);
        iolab_runner::space::check(&cfg.dir, need)?;
        // Everything it creates there has iolab's unique name for this process.
        let recorded = ctx.will_create_target(&cfg.dir);
        ctx.start(RunStart::in_dir(
            "metadata",
            &cfg.dir,
            cfg.file_size * cfg.files,
            plain_settings(cfg.file_size, Default::default(), 1, false),
        ))?;
        let stop = std::sync::Arc::clone(&ctx.stop);
        // The run state names the work directory exactly (device and inode) once it is
        // made: one put at its path during the run is never taken for it.
        let mut adopt = ctx.adopter(recorded);
        let tests = {
            let (progress, coord) = ctx.progress_and_coordinator();
            let mut phases = Phases::new(coord, &stop);
            let many = phases.ranks() > 1;
            let tests = super::run_with(
                &cfg,
                &mut |label, n| progress.phase(label, format!("{n} ops")),
                &mut phases,
                &mut adopt,
            );
            match tests {
                Ok(t) => (t, many),
                Err(WorkloadError::Ranks(e)) => return Err(e),
                Err(e) => return Err(RunError::from_error(e)),
            }
        };
        if tests.1 {
            ctx.note(
                "mpi: each phase's ops/s is all ranks' operations over (last end − first \
                 start); the space per file is not measured (the other ranks' files land on \
                 the filesystem too) and ops_series is empty (per-rank series are not \
                 gathered)"
                    .into(),
            );
        }
        let space = tests.0.iter().find_map(|t| space_line(t, cfg.file_size));
        ctx.add_tests(tests.0)?;
        if let Some(line) = space {
            ctx.note(line);
        }
        Ok(())
    }
}

/// The space per file the help promises, from the create phase's `extra.space`: what the
/// filesystem's used space and inodes grew by per file, and st_blocks per file.
fn space_line(t: &iolab_measure::TestRecord, file_size: u64) -> Option<String> {
    if let Some(why) = t.extra.get("space_unmeasured").and_then(|w| w.as_str()) {
        return Some(format!("space: {why}"));
    }
    let s = t.extra.get("space").filter(|s| s.is_object())?;
    let per_file = s["bytes_per_file"].as_f64()?;
    let mut line = format!(
        "space: each {} file takes {} on the filesystem (statvfs used space grew by {:.0} \
         bytes per file",
        iolab_spec::format_bytes_exact(file_size),
        iolab_spec::format_bytes(per_file.max(0.0) as u64),
        per_file
    );
    if let Some(r) = s["overhead_ratio"].as_f64() {
        line.push_str(&format!(", {r:.1}x its size"));
    }
    if let Some(i) = s["inodes_per_file"].as_f64() {
        line.push_str(&format!("; {i:.2} inodes per file"));
    }
    if let Some(a) = s["allocated_bytes_per_file"].as_f64() {
        line.push_str(&format!("; st_blocks: {a:.0} bytes allocated per file"));
    }
    line.push(')');
    Some(line)
}
