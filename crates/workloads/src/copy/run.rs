//! `iolab run copy`: its options and how a copy runs as a stored run.

use clap::Args;
use iolab_runner::options::{BsArg, DropCachesArg, RunsArg, SizeArg};
use iolab_runner::space::Need;
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, Job, RunContext, RunError, RunStart, UsageError,
};

use super::CopyConfig;

/// The copy's entry in the registry.
pub static WORKLOAD: Def<CopyOptions> = Def::new(
    &["copy"],
    "copy a file or tree (--source, or a generated random file of --size) the way a user's \
     copy does; MB/s before and including the final fsync, verified identical",
    plan,
    &super::info::INFO,
);

/// Options of `iolab run copy`.
#[derive(Args, Debug, Clone)]
pub struct CopyOptions {
    /// What to copy (a file or a directory tree); default: a generated random file of
    /// --size.
    #[arg(long, value_name = "PATH")]
    pub source: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub size: SizeArg,
    #[command(flatten)]
    pub bs: BsArg,
    #[command(flatten)]
    pub runs: RunsArg,
    #[command(flatten)]
    pub drop_caches: DropCachesArg,
}

struct CopyJob {
    cfg: CopyConfig,
}

fn plan(_name: &str, a: CopyOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let mut cfg = CopyConfig::new(Default::default());
    if let Some(src) = &a.source {
        if a.size.size.is_some() {
            return Err(UsageError::option(
                "size",
                "--size sets the size of the generated file; with --source the source is copied \
                 as it is",
            ));
        }
        if !src.exists() {
            return Err(UsageError::option(
                "source",
                format!("--source {} does not exist", src.display()),
            ));
        }
        cfg.source = Some(std::path::absolute(src).unwrap_or_else(|_| src.clone()));
    }
    cfg.generate_size = a.size.get()?.unwrap_or(cfg.generate_size);
    if let Some(b) = a.bs.get()? {
        cfg.buffer_size =
            iolab_runner::options::bounded("bs", b, 1, super::MAX_BUFFER_SIZE as u64)? as usize;
    }
    cfg.runs = a.runs.get(cfg.runs)?;
    cfg.drop_caches = a.drop_caches.drop_caches;
    Ok(Box::new(CopyJob { cfg }))
}

impl Job for CopyJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let mut cfg = self.cfg;
        cfg.target = target_dir(&ctx.common, "copy")?;
        // One copy at a time is on the target, next to the generated source if any.
        let need = match &cfg.source {
            Some(src) => {
                let (bytes, files) = super::source_footprint(src)
                    .map_err(|e| RunError::Usage(UsageError::option("source", e.to_string())))?;
                Need::new("source", bytes, files)
            }
            None => Need::new("size", cfg.generate_size.saturating_mul(2), 3),
        };
        iolab_runner::space::check(&cfg.target, need)?;
        // Everything it creates there has iolab's unique name for this process.
        let recorded = ctx.will_create_target(&cfg.target);
        // The run state names each thing made exactly (device and inode) once it exists:
        // one put at its path during the run is never taken for it.
        let mut adopt = ctx.adopter(recorded);
        ctx.start(RunStart::in_dir(
            "copy",
            &cfg.target,
            cfg.generate_size,
            plain_settings(cfg.generate_size, Default::default(), cfg.runs, false),
        ))?;
        let tests = {
            let progress = &ctx.progress;
            super::run_with(
                &cfg,
                &ctx.stop,
                &mut |label, n| progress.phase(label, iolab_spec::format_bytes(n)),
                &mut adopt,
            )
            .map_err(RunError::from_error)?
        };
        let verdicts: Vec<String> = tests.iter().filter_map(verdict).collect();
        ctx.add_tests(tests)?;
        for v in verdicts {
            ctx.note(v);
        }
        Ok(())
    }
}

/// The verdict the help promises ("verified identical"), for a test whose every copy was
/// compared with its source: one line with what was compared.
fn verdict(t: &iolab_measure::TestRecord) -> Option<String> {
    let e = &t.extra;
    if e["verified"].as_bool() != Some(true) {
        return None;
    }
    let copies = e["passes"].as_array().map_or(t.passes.len(), Vec::len);
    let files = e["files"].as_u64().unwrap_or(0);
    Some(format!(
        "{}: verified identical: each of {copies} cop{} read back and compared with the \
         source ({} in {files} file{}, {})",
        t.name,
        if copies == 1 { "y" } else { "ies" },
        iolab_spec::format_bytes(e["bytes"].as_u64().unwrap_or(0)),
        if files == 1 { "" } else { "s" },
        e["hash"].as_str().unwrap_or("hashed"),
    ))
}
