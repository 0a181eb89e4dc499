//! `iolab run streams`: its options and how the streams run as a stored run.

use std::sync::Arc;
use std::time::Duration;

use super::StreamsConfig;
use clap::Args;
use iolab_runner::options::{BsArg, DropCachesArg, DurationArg, EndFsyncArg, SizeArg, VerifyArg};
use iolab_runner::space::Need;
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, Job, RunContext, RunError, RunStart, UsageError,
};

/// The streams' entry in the registry.
pub static WORKLOAD: Def<StreamsOptions> = Def::new(
    &["streams"],
    "dd-shaped sequential streams: --streams N --bs --rw read|write, one file with --same-file \
     --stagger TIME, or one file each; per-stream and aggregate MB/s",
    plan,
    &super::info::INFO,
);

/// Options of `iolab run streams`.
#[derive(Args, Debug, Clone)]
pub struct StreamsOptions {
    /// Number of concurrent sequential streams.
    #[arg(long, value_name = "N")]
    pub streams: Option<u32>,
    #[command(flatten)]
    pub bs: BsArg,
    /// Direction: read (default) or write.
    #[arg(long)]
    pub rw: Option<iolab_spec::IoDir>,
    /// All streams use one file (readers started --stagger apart).
    #[arg(long)]
    pub same_file: bool,
    /// Delay between stream starts; requires --same-file (e.g. 10s).
    #[arg(long, value_name = "TIME")]
    pub stagger: Option<String>,
    #[command(flatten)]
    pub size: SizeArg,
    #[command(flatten)]
    pub duration: DurationArg,
    #[command(flatten)]
    pub drop_caches: DropCachesArg,
    #[command(flatten)]
    pub end_fsync: EndFsyncArg,
    #[command(flatten)]
    pub verify: VerifyArg,
}

struct StreamsJob {
    cfg: StreamsConfig,
}

fn plan(_name: &str, a: StreamsOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let mut cfg = StreamsConfig::new(Default::default());
    if a.streams == Some(0) {
        return Err(UsageError::option(
            "streams",
            "--streams must be at least 1",
        ));
    }
    cfg.streams = a.streams.unwrap_or(cfg.streams);
    cfg.bs =
        a.bs.get()?
            .map_or(cfg.bs, |b| usize::try_from(b).unwrap_or(usize::MAX));
    cfg.rw = match a.rw {
        None | Some(iolab_spec::IoDir::Read) => iolab_spec::Rw::Read,
        Some(iolab_spec::IoDir::Write) => iolab_spec::Rw::Write,
    };
    cfg.same_file = a.same_file;
    if a.stagger.is_some() && !a.same_file {
        return Err(UsageError::option(
            "stagger",
            "--stagger applies with --same-file",
        ));
    }
    if let Some(st) = iolab_runner::options::opt_duration("stagger", &a.stagger)? {
        cfg.stagger = st;
    }
    cfg.file_size = a.size.get()?.unwrap_or(cfg.file_size);
    cfg.duration = a.duration.get()?;
    cfg.drop_caches = a.drop_caches.drop_caches;
    cfg.end_fsync = a.end_fsync.end_fsync;
    if a.verify.verify {
        streams_verify(&mut cfg)?;
    }
    // Counts and sizes out of range are refused here (exit 2), not when the run starts.
    iolab_runner::options::bounded("streams", cfg.streams, 1, super::MAX_STREAMS)?;
    iolab_runner::options::bounded("bs", cfg.bs, 1, super::MAX_BS)?;
    Ok(Box::new(StreamsJob { cfg }))
}

impl Job for StreamsJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let mut cfg = self.cfg;
        cfg.dir = target_dir(&ctx.common, "streams")?;
        let files = if cfg.same_file { 1 } else { cfg.streams as u64 };
        let need = Need::new("size", cfg.file_size.saturating_mul(files), files);
        iolab_runner::space::check(&cfg.dir, need)?;
        // Everything it creates there has iolab's unique name for this process.
        ctx.will_create_target(&cfg.dir);
        ctx.start(RunStart::in_dir(
            "streams",
            &cfg.dir,
            cfg.file_size,
            plain_settings(
                cfg.file_size,
                cfg.duration.unwrap_or(Duration::ZERO),
                1,
                false,
            ),
        ))?;
        let tests = {
            let progress = &ctx.progress;
            super::run(&cfg, &ctx.stop, &mut |label, n| {
                progress.phase(label, iolab_spec::format_bytes(n))
            })
            .map_err(RunError::from_error)?
        };
        let note = overlap(&tests, cfg.stagger.as_secs_f64());
        ctx.add_tests(tests)?;
        if let Some(n) = note {
            ctx.note(n);
        }
        Ok(())
    }
}

/// The run's note when streams did not overlap (`super::overlap_note`), from the streams'
/// own tests.
fn overlap(tests: &[iolab_measure::TestRecord], stagger: f64) -> Option<String> {
    let streams: Vec<&serde_json::Value> = tests
        .iter()
        .map(|t| &t.extra)
        .filter(|e| e.get("stream").is_some())
        .collect();
    let spans: Vec<(f64, f64)> = streams
        .iter()
        .map(|e| {
            (
                e["start_s"].as_f64().unwrap_or(0.0),
                e["end_s"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    let rates: Vec<f64> = streams
        .iter()
        .map(|e| e["mb_s"].as_f64().unwrap_or(0.0))
        .collect();
    super::overlap_note(&spans, &rates, stagger)
}

/// `--verify` on `run streams --rw write`: the streams write verified blocks and every
/// file is checked before removal (the counts land in each test's `extra.verify`).
pub fn streams_verify(cfg: &mut StreamsConfig) -> Result<(), UsageError> {
    if cfg.rw != iolab_spec::Rw::Write {
        return Err(UsageError::option(
            "verify",
            "--verify checks what streams write: give --rw write",
        ));
    }
    let st =
        iolab_integrity::verified::Stamper::new(fastrand::u64(1..), cfg.bs as u64, cfg.file_size)
            .ok_or_else(|| {
            UsageError::option(
                "verify",
                format!(
                    "--verify: --bs ({}) and --size ({}) must be multiples of 512 bytes",
                    cfg.bs, cfg.file_size
                ),
            )
        })?;
    cfg.verify = Some(super::VerifyHook {
        fill: Arc::new(move |buf, offset| st.fill(buf, offset)),
        check: Arc::new(move |path| st.check(path)),
    });
    Ok(())
}
