//! The block pass loop every block preset runs: target preparation, warm-ups, measured
//! passes with ramp, `--until-stable`, the `--verify` read-back after each pass, page-cache
//! and device-activity sampling around each pass, and each pass stored as it finishes.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use iolab_engine::{prepare, run_pass, Target, TargetError, TargetRequest};
use iolab_integrity::written::{granule_of, Written};
use iolab_integrity::Tally;
use iolab_measure::{ActivitySample, PassContext, TestRecord, TestSummary};
use iolab_spec::{RunSettings, TestSpec};
use iolab_stats::{summarize, Score};

use crate::context::{RunContext, RunStart};
use crate::progress::Progress;
use crate::status::{RunError, UsageError};

/// `--until-stable`: the target CI half-width (% of the median), most passes, most time.
#[derive(Debug, Clone, Copy)]
pub struct UntilStable {
    pub pct: f64,
    pub max_runs: u32,
    pub max_time: Duration,
}

/// A block run, resolved and checked before anything is touched.
#[derive(Debug, Clone)]
pub struct BlockPlan {
    pub preset: String,
    pub until_stable: Option<UntilStable>,
    pub settings: RunSettings,
    pub tests: Vec<TestSpec>,
    pub score: Score,
    pub notes: Vec<String>,
    /// `--verify`: stamp every write and read the region back after every pass.
    pub verify: bool,
    /// `--size` was given (a file or device target is then used up to it).
    pub size_given: bool,
    pub allow_destroy_device: bool,
    pub allow_overwrite_file: bool,
}

impl BlockPlan {
    /// The planned time of every pass, warm-ups included.
    pub fn planned(&self) -> Duration {
        let s = &self.settings;
        (s.warmup_duration * s.warmup_passes + s.duration * s.runs) * self.tests.len() as u32
    }

    /// `--verify` on block tests: something must write, in blocks of whole sectors.
    pub fn check_verify(&self) -> Result<(), UsageError> {
        let writers: Vec<&TestSpec> = self.tests.iter().filter(|t| t.job.rw.writes()).collect();
        if writers.is_empty() {
            return Err(UsageError::option(
                "verify",
                format!(
                    "--verify checks what the tests write, and every test of {} only reads; \
                     give a write or mixed --rw",
                    self.preset
                ),
            ));
        }
        for t in writers {
            let g = granule_of(&t.job);
            if g == 0 || !g.is_multiple_of(iolab_integrity::block::SECTOR as u64) {
                return Err(UsageError::option(
                    "verify",
                    format!(
                        "--verify writes self-describing blocks of whole 512-byte sectors: --bs \
                         (and every write size and alignment of an access specification) must \
                         be a multiple of 512, and test {} writes in blocks of {g} bytes",
                        t.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What a block test carries in `extra`: an Iometer access specification's lines and the
/// I/Os each one got, and the `--verify` counts.
#[derive(Debug, serde::Serialize)]
struct BlockExtra {
    #[serde(skip_serializing_if = "Option::is_none")]
    access: Option<Vec<iolab_spec::AccessLine>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    access_ios: Option<Vec<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<Tally>,
}

impl BlockExtra {
    fn new(test: &TestSpec, access_ios: Vec<u64>, verify: Option<Tally>) -> BlockExtra {
        let counted = !access_ios.is_empty();
        BlockExtra {
            access: counted.then(|| test.job.access.clone()),
            access_ios: counted.then_some(access_ios),
            verify,
        }
    }

    /// The JSON of `extra`: null when there is nothing to carry.
    fn to_value(&self) -> serde_json::Value {
        if self.access.is_none() && self.verify.is_none() {
            return serde_json::Value::Null;
        }
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// A target error as the run reports it: refusals are usage errors.
pub fn target_error(e: TargetError) -> RunError {
    match e {
        TargetError::Interrupted => RunError::Interrupted,
        TargetError::Safety(_)
        | TargetError::NotFound(_)
        | TargetError::Unsupported(..)
        | TargetError::TooSmall { .. } => {
            RunError::Usage(UsageError::option("target", e.to_string()))
        }
        other => RunError::Failed(other.to_string()),
    }
}

/// Prepares the target for a plan and drops the tests it cannot run (ATTO sizes that do
/// not fit the region or the device's logical block), or refuses the plan.
pub fn prepare_target(
    plan: &mut BlockPlan,
    path: PathBuf,
    stop: &AtomicBool,
    progress: &Progress,
) -> Result<Target, RunError> {
    let writes = plan.tests.iter().any(|t| t.job.rw.writes());
    let req = TargetRequest {
        path,
        size: plan.size_given.then_some(plan.settings.size),
        default_size: plan.settings.size,
        writes,
        direct: plan.settings.direct,
        data: plan.settings.data,
        allow_destroy_device: plan.allow_destroy_device,
        allow_overwrite_file: plan.allow_overwrite_file,
    };
    crate::space::check_target(&req.path, req.size, req.default_size, writes)?;
    if plan.verify {
        crate::options::check_verify_map(&plan.tests, &req.path, req.size, req.default_size)?;
    }
    let target = prepare(&req, stop, &mut |d, t| progress.preparing(d, t)).map_err(target_error)?;
    plan.settings.size = target.info.size;

    // ATTO sweeps block sizes up to 64 MiB; one larger than the region cannot be placed in it.
    if plan.preset == "atto" {
        let region = target.info.size;
        let too_big: Vec<String> = plan
            .tests
            .iter()
            .filter(|t| t.job.bs > region)
            .map(|t| t.name.clone())
            .collect();
        if !too_big.is_empty() {
            plan.tests.retain(|t| t.job.bs <= region);
            plan.notes.push(format!(
                "skipped block sizes larger than the {} test region (give a larger --size to \
                 run them): {}",
                iolab_spec::format_bytes(region),
                too_big.join(", ")
            ));
        }
    }

    // O_DIRECT needs block-aligned I/O: skip (ATTO) or refuse (others) what cannot work.
    if plan.settings.direct {
        let lb = target.logical_block;
        let too_small: Vec<String> = plan
            .tests
            .iter()
            .filter(|t| {
                t.job.bs % lb != 0
                    || t.job
                        .access
                        .iter()
                        .any(|l| l.size % lb != 0 || l.align % lb != 0)
            })
            .map(|t| t.name.clone())
            .collect();
        if !too_small.is_empty() {
            if plan.preset == "atto" {
                plan.tests.retain(|t| t.job.bs % lb == 0);
                plan.notes.push(format!(
                    "skipped block sizes below the device's {lb}-byte logical block (O_DIRECT \
                     cannot do them): {}",
                    too_small.join(", ")
                ));
            } else {
                return Err(RunError::Usage(UsageError::option(
                    "bs",
                    format!(
                        "O_DIRECT needs I/O aligned to the device's logical block size ({lb} \
                         bytes) under {}; test(s) {} use a block size that is not a multiple of \
                         it. Use a larger --bs or --buffered.",
                        target.info.io_path,
                        too_small.join(", ")
                    ),
                )));
            }
        }
    }
    Ok(target)
}

/// Runs a block plan in `ctx`: prepares the target, starts the run, runs every test's
/// passes and gathers the facts for the warnings before the target is removed.
pub fn run(mut plan: BlockPlan, ctx: &mut RunContext) -> Result<(), RunError> {
    ctx.progress.set_total(plan.planned());
    let recorded = ctx.will_create_target(&ctx.common.target.clone());
    let target = prepare_target(
        &mut plan,
        ctx.common.target.clone(),
        &ctx.stop,
        &ctx.progress,
    )?;
    if target.created() {
        ctx.created(recorded);
    }
    let env = ctx.start(RunStart {
        preset: plan.preset.clone(),
        workload: "block".into(),
        target: target.info.clone(),
        settings: plan.settings.clone(),
        notes: plan.notes.clone(),
        env_path: PathBuf::from(&target.io_path),
    })?;
    let watch = crate::facts::top_devices(env);
    let verify = plan.verify.then(|| fastrand::u64(1..));
    let outcome = execute(&plan, &target, &watch, verify, ctx);
    let facts = crate::facts::facts(
        ctx.env().expect("started"),
        Some(&target),
        plan.settings.direct,
    );
    ctx.set_facts(facts);
    drop(target);
    outcome
}

/// Reads the region back after a pass of a `--verify` test and adds the counts to `tally`.
fn verify_pass(
    target: &Target,
    written: &Written,
    direct: bool,
    stop: &AtomicBool,
    tally: &mut Tally,
) -> Result<(), RunError> {
    let t = target
        .read_back(written, direct, stop)
        .map_err(target_error)?;
    tally.merge(t);
    Ok(())
}

/// Runs every test; stores each pass as soon as it is measured.
fn execute(
    plan: &BlockPlan,
    target: &Target,
    watch: &[String],
    verify: Option<u64>,
    ctx: &mut RunContext,
) -> Result<(), RunError> {
    let s = &plan.settings;
    let mut elapsed_plan = Duration::ZERO;
    for (ti, test) in plan.tests.iter().enumerate() {
        if ctx.stopped() {
            return Ok(());
        }
        let mut record = TestRecord {
            name: test.name.clone(),
            group: test.group.clone(),
            job: test.job.clone(),
            passes: Vec::new(),
            summary: TestSummary::default(),
            extra: serde_json::Value::Null,
        };
        let test_id = ctx.begin_test(ti as u32, &record)?;
        // `--verify`: one write state per test (its own block size), counts over its passes.
        let written = verify
            .filter(|_| test.job.rw.writes())
            .and_then(|id| Written::new(id, granule_of(&test.job), 0, target.info.size));
        let mut tally = Tally::default();
        let mut access_ios: Vec<u64> = Vec::new();
        let mut p = 0u32;
        let mut converged = None;
        let mut measuring_since = Instant::now();
        loop {
            if ctx.stopped() {
                break;
            }
            let warm = p < s.warmup_passes;
            let measured = record.passes.len() as u32;
            if !warm {
                if measured == 0 {
                    measuring_since = Instant::now();
                }
                match plan.until_stable {
                    None if measured >= s.runs => break,
                    None => {}
                    Some(u) => {
                        let mbs: Vec<f64> = record.passes.iter().map(|p| p.mb_s).collect();
                        if measured >= s.runs && iolab_stats::is_stable(&mbs, u.pct) {
                            converged = Some(true);
                            break;
                        }
                        if measured >= u.max_runs || measuring_since.elapsed() >= u.max_time {
                            converged = Some(false);
                            break;
                        }
                    }
                }
            }
            let dur = if warm { s.warmup_duration } else { s.duration };
            let label = if warm {
                format!("{} warm-up", test.name)
            } else if plan.until_stable.is_some() {
                format!("{} {}", test.name, measured + 1)
            } else {
                format!("{} {}/{}", test.name, measured + 1, s.runs)
            };
            let index = if warm { 0 } else { measured + 1 };
            let check_cache = !s.direct && test.job.rw.reads();
            let cache_before = if check_cache {
                target.resident_fraction()
            } else {
                None
            };
            let activity = ActivitySample::now();
            let out = {
                let obs = ctx.progress.pass(label, elapsed_plan, dur);
                run_pass(
                    target,
                    test,
                    s,
                    index,
                    dur,
                    &ctx.stop,
                    &obs,
                    written.as_ref(),
                )
                .map_err(target_error)?
            };
            let activity = activity.until(&ActivitySample::now(), watch);
            if let Some(w) = &written {
                // After the pass's clock stopped: read-back time is not part of the pass.
                verify_pass(target, w, s.direct, &ctx.stop, &mut tally)?;
            }
            elapsed_plan += dur;
            p += 1;
            for n in out.notes {
                ctx.note(n);
            }
            if out.interrupted {
                // A pass cut short by Ctrl-C is not a measurement.
                break;
            }
            if !warm && !out.access_ios.is_empty() {
                access_ios.resize(out.access_ios.len(), 0);
                for (sum, n) in access_ios.iter_mut().zip(&out.access_ios) {
                    *sum += n;
                }
            }
            let mut pass = out.record;
            pass.context = PassContext {
                cache_resident_before: cache_before,
                cache_resident_after: if check_cache {
                    target.resident_fraction()
                } else {
                    None
                },
                activity,
            };
            let errors = pass.errors.clone();
            if !warm || !errors.is_empty() {
                ctx.store_pass(test_id, &pass)?;
                record.passes.push(pass);
            }
            if let Some(e) = errors.first() {
                let mut msg = format!(
                    "{}: I/O error during {}: {} (errno {}) at offset {} length {}",
                    target.info.io_path, test.name, e.message, e.errno, e.offset, e.len
                );
                if e.errno == libc::EINVAL && s.direct {
                    msg.push_str(
                        "; O_DIRECT refused this I/O: the block size or offset is not aligned \
                         to what the device or filesystem needs, or direct I/O is not \
                         supported here. Use a larger --bs or --buffered.",
                    );
                }
                record.extra = BlockExtra::new(test, access_ios, None).to_value();
                record.summary = summarize(&record.passes, plan.score);
                ctx.run().tests.push(record);
                return Err(RunError::Failed(msg));
            }
        }
        if written.is_some() {
            let line = tally.summary_line(&record.name);
            ctx.progress.println(&line);
            ctx.note(line);
        }
        let checked = written.is_some().then_some(tally);
        record.extra = BlockExtra::new(test, access_ios, checked).to_value();
        record.summary = summarize(&record.passes, plan.score);
        record.summary.converged = converged;
        ctx.store_summary(test_id, &record.summary)?;
        if !record.passes.is_empty() {
            ctx.progress.println(&format!(
                "{:<28} {:>10.2} MB/s {:>12.0} IOPS",
                record.name, record.summary.mb_s, record.summary.iops
            ));
            ctx.run().tests.push(record);
        }
    }
    Ok(())
}
