//! `iolab run replay`: its options and how a trace replay runs as a stored run (one pass
//! per replay).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use iolab_measure::{
    CpuSample, DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord, TimeSeries,
};
use iolab_runner::options::RunsArg;
use iolab_runner::space::Need;
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, ExitStatus, Job, RunContext, RunError, RunStart,
    UsageError,
};
use iolab_spec::trace::Trace;
use iolab_testbed::runstate::RunResource;
use serde::{Deserialize, Serialize};

use super::{OpStats, ReplayResult, Speed};

/// The replay's entry in the registry.
/// What a replay says of itself to the crates below iolab-workloads
/// (`iolab_measure::workload`): bytes, no MPI, the generic header and fixes.
pub struct Info;

/// The replay's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl iolab_measure::workload::WorkloadInfo for Info {
    fn about(&self) -> iolab_measure::workload::About {
        iolab_measure::workload::About {
            name: "replay",
            counts: iolab_measure::workload::Counts::Bytes,
            mpi: None,
        }
    }

    fn op_table(&self, t: &TestRecord) -> Option<iolab_measure::workload::OpTable> {
        let x = ReplayOps::deserialize(&t.extra).ok()?;
        Some(iolab_measure::workload::OpTable {
            mismatch_key: "mismatches",
            rows: x
                .ops
                .into_iter()
                .map(|o| iolab_measure::workload::OpRow {
                    op: o.op,
                    count: o.count,
                    recorded: Some(o.recorded),
                    avg_ms: o.avg_ms,
                    max_ms: o.max_ms,
                    p99_ms: o.p99_ms,
                    mismatches: o.mismatches,
                })
                .collect(),
        })
    }
}

pub static WORKLOAD: Def<ReplayOptions> = Def::new(
    &["replay"],
    "replay of a recorded I/O trace (`iolab record`, or fio's iolog v2/v3): --trace FILE \
     [--speed recorded|max|xN] [--verify]; each recorded thread as a thread, recorded order, \
     sizes and offsets, in a directory of its own under --target; throughput, an op table \
     with p99, outcomes compared with the recording",
    plan,
    &INFO,
);

/// Options of `iolab run replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayOptions {
    /// The trace (`iolab record` output, .gz accepted, or a fio iolog).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// max (default): as fast as the recorded order allows; recorded: honour the recorded
    /// gaps; xN: the gaps divided by N (x2 twice as fast).
    #[arg(long, value_name = "recorded|max|xN")]
    pub speed: Option<String>,
    #[command(flatten)]
    pub runs: RunsArg,
    /// Every call must return what it returned in the recording (count, offset, errno);
    /// exit 3 when one does not. (Not the data check other workloads' --verify makes: a
    /// trace holds no contents.)
    #[arg(long)]
    pub verify: bool,
}

struct ReplayJob {
    trace: Arc<Trace>,
    path: PathBuf,
    speed: Speed,
    speed_text: String,
    runs: u32,
    verify: bool,
}

/// A `--speed` value that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--speed {0:?}: recorded, max or xN (N between 0.001 and 1000000)")]
pub struct SpeedError(pub String);

/// `--speed` → Speed.
pub fn parse_speed(s: &str) -> Result<Speed, SpeedError> {
    match s {
        "max" => Ok(Speed::Max),
        "recorded" => Ok(Speed::Scaled(1.0)),
        _ => {
            let f: f64 = s
                .strip_prefix('x')
                .and_then(|n| n.parse().ok())
                .filter(|f: &f64| f.is_finite() && *f >= 0.001 && *f <= 1e6)
                .ok_or_else(|| SpeedError(s.to_string()))?;
            Ok(Speed::Scaled(f))
        }
    }
}

fn plan(_name: &str, a: ReplayOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let path = a
        .trace
        .clone()
        .ok_or_else(|| UsageError::option("trace", "replay needs --trace FILE"))?;
    let speed_text = a.speed.clone().unwrap_or_else(|| "max".into());
    let speed = parse_speed(&speed_text).map_err(|e| UsageError::option("speed", e.to_string()))?;
    let trace = super::read_trace(&path).map_err(|e| UsageError::option("trace", e.to_string()))?;
    if trace.events.is_empty() {
        return Err(UsageError::option(
            "trace",
            format!("{}: the trace holds no call to replay", path.display()),
        ));
    }
    super::check_bounds(&trace)
        .map_err(|e| UsageError::option("trace", format!("{}: {e}", path.display())))?;
    Ok(Box::new(ReplayJob {
        trace: Arc::new(trace),
        path: std::path::absolute(&path).unwrap_or(path),
        speed,
        speed_text,
        runs: a.runs.get(1)?,
        verify: a.verify,
    }))
}

/// What a replay test carries in `extra` (docs/workloads.md).
#[derive(Debug, Serialize)]
struct ReplayExtra {
    trace: PathBuf,
    format: String,
    command: Option<String>,
    speed: String,
    threads: usize,
    recorded_seconds: f64,
    replay_seconds: f64,
    throughput_mb_s: f64,
    calls: u64,
    recorded_calls: u64,
    bytes_read: u64,
    bytes_written: u64,
    recorded_bytes_read: u64,
    recorded_bytes_written: u64,
    /// Calls the recorder left out, by reason.
    skipped_in_recording: Vec<(String, u64)>,
    mismatches: u64,
    mismatch_samples: Vec<super::Mismatch>,
    notes: Vec<String>,
    ops: Vec<OpStats>,
}

/// The operation table of [`ReplayExtra`] (its `ops`, rows of [`OpStats`]), read back.
#[derive(Debug, Deserialize)]
struct ReplayOps {
    ops: Vec<ReplayOp>,
}

/// One row of [`ReplayOps`].
#[derive(Debug, Deserialize)]
struct ReplayOp {
    op: String,
    count: u64,
    recorded: u64,
    avg_ms: f64,
    max_ms: f64,
    p99_ms: f64,
    mismatches: u64,
}

fn hist(r: &ReplayResult, names: &[&str]) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    for o in r.ops.iter().filter(|o| names.contains(&o.op)) {
        h.merge(&o.histogram);
    }
    h
}

impl Job for ReplayJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let dir = target_dir(&ctx.common, "replay")?;
        let (bytes, names) = super::footprint(&self.trace);
        iolab_runner::space::check(&dir, Need::new("trace", bytes, names))
            .map_err(RunError::Usage)?;
        let pid = std::process::id();
        ctx.will_create(RunResource::Named {
            dir: dir.clone(),
            pid: pid as i32,
        });
        ctx.start(RunStart::in_dir(
            "replay",
            &dir,
            bytes,
            plain_settings(bytes, Duration::ZERO, self.runs, false),
        ))?;
        let mut passes = Vec::new();
        let mut extra = None;
        let mut mismatches = 0u64;
        for index in 1..=self.runs {
            let name = (0..)
                .map(|n| format!("iolab-replay-{pid}-{n}"))
                .find(|n| std::fs::symlink_metadata(dir.join(n)).is_err())
                .expect("a free name");
            let cpu0 = CpuSample::now();
            let r = {
                let progress = &ctx.progress;
                let runs = self.runs;
                super::replay(
                    &self.trace,
                    &dir,
                    &name,
                    self.speed,
                    &ctx.stop,
                    &mut |s, b| {
                        progress.phase(
                            &format!("replay {index}/{runs}"),
                            format!("{s:.0} s, {:.1} MB", b as f64 / 1e6),
                        )
                    },
                )
                .map_err(RunError::from_error)?
            };
            for n in &r.notes {
                if let Some(what) = n.strip_prefix("cleanup: ") {
                    ctx.left_behind(what.to_string());
                }
            }
            if let Some(f) = &r.failure {
                return Err(RunError::Failed(format!(
                    "replay: {f}; a replay whose I/O fails reports no throughput"
                )));
            }
            if r.interrupted {
                break;
            }
            mismatches += r.mismatches;
            let secs = r.seconds;
            let read = (r.bytes_read > 0).then(|| {
                DirResult::from_histogram(
                    r.bytes_read,
                    secs,
                    hist(&r, &["read", "readv", "pread", "preadv"]),
                )
            });
            let write = (r.bytes_written > 0).then(|| {
                DirResult::from_histogram(
                    r.bytes_written,
                    secs,
                    hist(&r, &["write", "writev", "pwrite", "pwritev"]),
                )
            });
            let flush = hist(&r, &["fsync", "fdatasync", "sync_file_range"]);
            let sync = (!flush.is_empty()).then(|| SyncStats {
                count: flush.count(),
                lat_us: flush.summary_us(),
            });
            let series = TimeSeries {
                interval_ms: 1000,
                bytes: r.per_second_bytes.clone(),
                ..Default::default()
            };
            let cpu = cpu0.usage_until(&CpuSample::now(), 0);
            passes.push(PassRecord::new(index, secs, read, write, sync, cpu, series));
            extra = Some(ReplayExtra {
                trace: self.path.clone(),
                format: self.trace.format.clone(),
                command: self.trace.command.clone(),
                speed: self.speed_text.clone(),
                threads: r.threads,
                recorded_seconds: r.recorded_seconds,
                replay_seconds: r.seconds,
                throughput_mb_s: r.mb_s(),
                calls: r.calls,
                recorded_calls: r.recorded_calls,
                bytes_read: r.bytes_read,
                bytes_written: r.bytes_written,
                recorded_bytes_read: r.recorded_bytes_read,
                recorded_bytes_written: r.recorded_bytes_written,
                skipped_in_recording: self.trace.skipped.clone(),
                mismatches: r.mismatches,
                mismatch_samples: r.mismatch_samples.clone(),
                notes: r.notes.clone(),
                ops: r.ops.clone(),
            });
            ctx.epilogue(&format!(
                "replay {index}: {} calls of {} threads in {:.3} s (recorded {:.3} s), {} \
                 bytes read, {} written (recorded: {} calls, {} bytes read, {} written), {} \
                 outcomes differ from the recording\n",
                r.calls,
                r.threads,
                r.seconds,
                r.recorded_seconds,
                r.bytes_read,
                r.bytes_written,
                r.recorded_calls,
                r.recorded_bytes_read,
                r.recorded_bytes_written,
                r.mismatches,
            ));
            if r.mismatches > 0 {
                ctx.epilogue(&format!(
                    "  {}\n",
                    differ_why(&r, &self.trace.skipped, self.verify)
                ));
            }
        }
        let Some(extra) = extra.filter(|_| !passes.is_empty()) else {
            return Ok(());
        };
        if self.verify && mismatches > 0 {
            ctx.epilogue(&format!(
                "replay --verify: {mismatches} call(s) did not return what they returned in \
                 the recording (first: {})\n",
                extra
                    .mismatch_samples
                    .first()
                    .map(|m| format!(
                        "trace line {}: {} returned {}, recorded {}",
                        m.line, m.op, m.got, m.expected
                    ))
                    .unwrap_or_default()
            ));
            ctx.raise(ExitStatus::Integrity);
        }
        let threads = extra.threads as u32;
        let mut job = iolab_spec::JobSpec::new(iolab_spec::Rw::Rw, 4096, 1, threads.max(1));
        let (rb, wb) = (extra.bytes_read, extra.bytes_written);
        job.rwmixread = (100 * rb / (rb + wb).max(1)) as u8;
        let summary = iolab_stats::summarize(&passes, iolab_stats::Score::Median);
        ctx.add_tests(vec![TestRecord {
            name: format!(
                "replay {} thread{}",
                threads,
                if threads == 1 { "" } else { "s" }
            ),
            group: "replay".into(),
            job,
            passes,
            summary,
            extra: serde_json::to_value(&extra).unwrap_or_default(),
        }])
    }
}

/// Why a replay's outcomes differ from the recording, in one line: which operations (with
/// the first difference) and the likeliest cause, from what the recording left out and the
/// bytes the reads returned.
fn differ_why(r: &super::ReplayResult, skipped: &[(String, u64)], verify: bool) -> String {
    let which: Vec<String> = r
        .ops
        .iter()
        .filter(|o| o.mismatches > 0)
        .map(|o| format!("{} {}", o.mismatches, o.op))
        .collect();
    let mut line = format!("differ: {}", which.join(", "));
    if let Some(m) = r.mismatch_samples.first() {
        line.push_str(&format!(
            " (first: trace line {}: {} returned {}, recorded {})",
            m.line, m.op, m.got, m.expected
        ));
    }
    let left: u64 = skipped
        .iter()
        .filter(|(why, _)| why != "outside")
        .map(|(_, n)| n)
        .sum();
    let cause = if left > 0 {
        format!(
            "the recording left out {left} calls beneath its roots (`iolab record` lists \
             them: untracked or unsupported), so the files did not hold what the application's \
             held; record again once nothing is left out"
        )
    } else if r.bytes_read < r.recorded_bytes_read {
        format!(
            "the reads returned {} bytes where the recording read {}: a file was shorter or \
             missing (the trace holds the sizes of the files that existed before, not what \
             was written to them from outside its roots)",
            r.bytes_read, r.recorded_bytes_read
        )
    } else {
        "the replay met another state than the recording (threads interleaved differently, \
         another filesystem's limits or errors)"
            .to_string()
    };
    line.push_str(&format!("; why: {cause}"));
    if !verify {
        line.push_str(
            "; the replay did not repeat the recorded work exactly (--verify makes this exit 3)",
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use iolab_measure::workload::{OpRow, WorkloadInfo};
    use iolab_spec::{JobSpec, Rw};

    use super::*;

    #[test]
    fn the_descriptor_reads_back_the_operation_table() {
        let row = OpStats {
            op: "pread",
            count: 7,
            recorded: 9,
            avg_ms: 0.25,
            max_ms: 1.0,
            p99_ms: 0.75,
            mismatches: 2,
            histogram: LatencyHistogram::new(),
        };
        let t = TestRecord {
            name: "replay".into(),
            group: "replay".into(),
            job: JobSpec::new(Rw::Read, 4096, 1, 1),
            passes: Vec::new(),
            summary: Default::default(),
            extra: serde_json::json!({ "ops": [row], "mismatches": 2 }),
        };
        let table = INFO.op_table(&t).unwrap();
        assert_eq!(table.mismatch_key, "mismatches");
        assert_eq!(
            table.rows,
            [OpRow {
                op: "pread".into(),
                count: 7,
                recorded: Some(9),
                avg_ms: 0.25,
                max_ms: 1.0,
                p99_ms: 0.75,
                mismatches: 2
            }]
        );
    }
}
