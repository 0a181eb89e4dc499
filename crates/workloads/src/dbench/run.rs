//! `iolab run dbench`: its options and how loadfile replays run as a stored run (one pass
//! per replay).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use iolab_measure::{
    CpuSample, DirResult, LatencyHistogram, PassRecord, SyncStats, TestRecord, TimeSeries,
};
use iolab_runner::options::{bounded, opt_duration, DurationArg, RunsArg, VerifyArg};
use iolab_runner::{
    plain_settings, target_dir, CommonArgs, Def, Job, RunContext, RunError, RunStart, UsageError,
};

use iolab_integrity::Tally;
use iolab_testbed::runstate::RunResource;

use serde::{Deserialize, Serialize};

use super::{DbenchConfig, MismatchSample, OpKind};
use iolab_runner::coord::Phases;

/// Debian's dbench package installs its client loadfile here.
pub const DEFAULT_LOADFILE: &str = "/usr/share/dbench/client.txt";

/// dbench's entry in the registry.
pub static WORKLOAD: Def<DbenchOptions> = Def::new(
    &["dbench"],
    "replay of a dbench loadfile (default Debian's client.txt): --clients N --duration T \
     [--warmup T] [--sync] [--fsync-every-write] [--verify]; dbench's throughput and its \
     operation table with p99, expected statuses checked; --verify checks every read and the \
     files against what was written (exit 3 on a mismatch)",
    plan,
    &super::info::INFO,
);

/// Options of `iolab run dbench`.
#[derive(Args, Debug, Clone)]
pub struct DbenchOptions {
    /// Number of clients, each replaying the loadfile in its own directory.
    #[arg(long, value_name = "N")]
    pub clients: Option<u32>,
    #[command(flatten)]
    pub duration: DurationArg,
    /// Warm-up time before the measured time (default: a fifth of it).
    #[arg(long, value_name = "TIME")]
    pub warmup: Option<String>,
    /// The loadfile (default /usr/share/dbench/client.txt; .gz accepted).
    #[arg(long, value_name = "FILE")]
    pub loadfile: Option<PathBuf>,
    /// Open files with O_SYNC.
    #[arg(long)]
    pub sync: bool,
    /// fsync after every write.
    #[arg(long)]
    pub fsync_every_write: bool,
    #[command(flatten)]
    pub runs: RunsArg,
    #[command(flatten)]
    pub verify: VerifyArg,
}

struct DbenchJob {
    cfg: DbenchConfig,
    runs: u32,
    verify: bool,
}

fn plan(_name: &str, a: DbenchOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let loadfile = a
        .loadfile
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_LOADFILE));
    if a.loadfile.is_some() && !loadfile.exists() {
        return Err(UsageError::option(
            "loadfile",
            format!("--loadfile {} not found", loadfile.display()),
        ));
    }
    let time = a.duration.get()?.unwrap_or(Duration::from_secs(60));
    let clients = bounded("clients", a.clients.unwrap_or(1), 1, super::MAX_CLIENTS)?;
    let mut cfg = DbenchConfig::new(PathBuf::new(), loadfile, clients, time);
    if let Some(w) = opt_duration("warmup", &a.warmup)? {
        cfg.warmup = w;
    }
    cfg.sync_open = a.sync;
    cfg.fsync_every_write = a.fsync_every_write;
    Ok(Box::new(DbenchJob {
        cfg,
        runs: a.runs.get(1)?,
        verify: a.verify.verify,
    }))
}

impl Job for DbenchJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let DbenchJob {
            mut cfg,
            runs,
            verify,
        } = *self;
        cfg.dir = target_dir(&ctx.common, "dbench")?;
        if !cfg.loadfile.exists() {
            return Err(RunError::Usage(UsageError::option(
                "loadfile",
                format!(
                    "loadfile {} not found (Debian: apt-get install dbench, or give --loadfile)",
                    cfg.loadfile.display()
                ),
            )));
        }
        let parsed = super::parse_loadfile(&cfg.loadfile)
            .map_err(|e| RunError::Usage(UsageError::option("loadfile", e.to_string())))?;
        let target = cfg.dir.clone();
        // A rank of an MPI run replays in its own directory in the target.
        let Some(name) = ctx
            .coordinator()
            .map(|c| iolab_runner::coord::rank_name(&*c))
        else {
            return replays(cfg, &target, &parsed, runs, verify, ctx);
        };
        let mine = target.join(name);
        if std::fs::symlink_metadata(&mine).is_ok() {
            return Err(RunError::Usage(UsageError::general(format!(
                "dbench: {} is in the way: this rank's directory goes there; remove it or \
                 choose another directory",
                mine.display()
            ))));
        }
        let id = ctx.will_create(RunResource::Tree { path: mine.clone() });
        std::fs::create_dir(&mine)
            .map_err(|e| RunError::caused(format!("cannot create {}", mine.display()), e))?;
        ctx.created(id);
        cfg.dir = mine.clone();
        let outcome = replays(cfg, &target, &parsed, runs, verify, ctx);
        // The replays removed what they made in it.
        if let Err(e) = std::fs::remove_dir(&mine) {
            if e.kind() != std::io::ErrorKind::NotFound {
                ctx.left_behind(format!("{}: {e}", mine.display()));
            }
        }
        outcome
    }
}

/// The replays of a dbench run in `cfg.dir` (in `target`, or this rank's directory in it):
/// the run started, one pass per replay, the test added.
fn replays(
    cfg: DbenchConfig,
    target: &std::path::Path,
    parsed: &super::Loadfile,
    runs: u32,
    verify: bool,
    ctx: &mut RunContext,
) -> Result<(), RunError> {
    let clients = cfg.clients;
    let name = format!(
        "dbench {clients} client{}",
        if clients == 1 { "" } else { "s" }
    );
    // What killed iolab runs left in clients/ is removed (it would look foreign), then
    // what this run creates is recorded before it exists.
    let clients_dir = cfg.dir.join("clients");
    ctx.clear_leftovers_under(&clients_dir);
    // Something else where `clients/` or a client's directory goes: refused before the run
    // starts (nothing stored, nothing created).
    super::check_clients_dir(&clients_dir, clients)
        .map_err(|e| RunError::Usage(UsageError::general(e.to_string())))?;
    super::footprint::check(parsed, &cfg.dir, clients, verify)?;
    let mut recorded = None;
    if clients_dir.is_dir() {
        for id in 0..clients {
            ctx.will_create(RunResource::Tree {
                path: clients_dir.join(format!("client{id}")),
            });
        }
    } else {
        recorded = ctx.will_create(RunResource::Tree { path: clients_dir });
    }
    // The run state names `clients/` exactly (device and inode) once a replay makes it:
    // one put at its path during the run is never taken for it.
    let mut adopt = ctx.adopter(recorded);
    ctx.start(RunStart::in_dir(
        "dbench",
        target,
        0,
        plain_settings(0, cfg.time, runs, false),
    ))?;
    let mut verified: Option<Tally> = None;
    let mut passes = Vec::new();
    let mut extra: Option<DbenchExtra> = None;
    for index in 1..=runs {
        // `--verify`: a new run id for every replay, so no replay's data passes for
        // another's.
        let cfg = DbenchConfig {
            verify: verify.then(|| fastrand::u64(1..)),
            ..cfg.clone()
        };
        let cpu0 = CpuSample::now();
        let stop = std::sync::Arc::clone(&ctx.stop);
        let r = {
            let (progress, coord) = ctx.progress_and_coordinator();
            let mut phases = Phases::new(coord, &stop);
            let r = super::run_with(
                &cfg,
                parsed,
                &mut |p| {
                    progress.phase(
                        &format!("dbench {index}/{runs} {:?}", p.phase).to_lowercase(),
                        format!("{:.1} MB/s", p.mb_s),
                    )
                },
                &mut phases,
                &mut adopt,
            );
            match r {
                Ok(r) => r,
                Err(super::DbenchError::Ranks(e)) => return Err(e),
                Err(e) => return Err(RunError::from_error(e)),
            }
        };
        for n in &r.notes {
            if let Some(what) = n.strip_prefix("cleanup: ") {
                ctx.left_behind(what.to_string());
            }
        }
        if let Some(f) = &r.failure {
            // The replay's figures measured a failing filesystem: no speed is reported.
            return Err(RunError::Failed(format!(
                "dbench: {f}; a replay whose I/O fails reports no throughput"
            )));
        }
        if r.interrupted {
            break;
        }
        if let Some(v) = &r.verify {
            verified
                .get_or_insert_with(Default::default)
                .merge(v.clone());
        }
        let hist = |k: OpKind| -> LatencyHistogram {
            r.ops
                .iter()
                .find(|o| o.op == k)
                .map(|o| o.histogram.clone())
                .unwrap_or_default()
        };
        let secs = r.measured_seconds;
        let read = (r.bytes_read > 0)
            .then(|| DirResult::from_histogram(r.bytes_read, secs, hist(OpKind::ReadX)));
        let write = (r.bytes_written > 0)
            .then(|| DirResult::from_histogram(r.bytes_written, secs, hist(OpKind::WriteX)));
        let flush = hist(OpKind::Flush);
        let sync = (!flush.is_empty()).then(|| SyncStats {
            count: flush.count(),
            lat_us: flush.summary_us(),
        });
        let series = TimeSeries {
            interval_ms: 1000,
            bytes: r.per_second_mb_s.iter().map(|m| (m * 1e6) as u64).collect(),
            ..Default::default()
        };
        let cpu = cpu0.usage_until(&CpuSample::now(), 0);
        let pass = PassRecord::new(index, secs, read, write, sync, cpu, series);
        // With other ranks: the aggregate of every rank's measured part.
        let started = r.measure_started.unwrap_or_else(std::time::Instant::now);
        let (_, coord) = ctx.progress_and_coordinator();
        let pass = match Phases::new(coord, &stop).after(&name, false, pass, started) {
            Ok(p) => p,
            Err(RunError::Interrupted) => break,
            Err(e) => return Err(e),
        };
        let mb_s = pass.mb_s;
        passes.push(pass);
        // The operation table of every rank's replay (rank 0 adds them up; another rank
        // and a run without ranks keep their own).
        let own = serde_json::to_value(RankTable::of(&r)).expect("a table serialises");
        let (_, coord) = ctx.progress_and_coordinator();
        let tables = match Phases::new(coord, &stop).gather(own.clone()) {
            Ok(t) if t.is_empty() => vec![own],
            Ok(t) => t,
            Err(RunError::Interrupted) => break,
            Err(e) => return Err(e),
        };
        let table = RankTable::merge(tables)?;
        extra = Some(DbenchExtra {
            loadfile: cfg.loadfile.clone(),
            clients,
            throughput_mb_s: if ctx.coordinator().is_some() {
                mb_s
            } else {
                r.mb_s
            },
            warmup_seconds: r.warmup_seconds,
            loops_completed: table.loops,
            status_mismatches: table.status_mismatches,
            mismatch_samples: table.mismatches.clone(),
            short_reads: table.short_reads,
            notes: r.notes.clone(),
            ops: table.rows(),
            verify: None,
        });
    }
    if ctx.coordinator().is_some() {
        ctx.note(
            "mpi: each replay's pass is every rank's measured part (bytes and ReadX/WriteX \
             summed, latencies merged, over last end − first start), which starts at a \
             barrier once every rank has warmed up; the operation table (counts summed, \
             latencies merged), loops, short reads and status mismatches in extra are every \
             rank's"
                .into(),
        );
    }
    let Some(mut extra) = extra.filter(|_| !passes.is_empty()) else {
        return Ok(());
    };
    // The summary line is the run's note (from `extra.verify`); what follows the report is
    // only the detail behind a failure or a skipped read-back.
    if let Some(text) = verified.as_ref().map(verify_text).filter(|t| !t.is_empty()) {
        ctx.epilogue(&text);
    }
    extra.verify = verified;
    let mut job = iolab_spec::JobSpec::new(iolab_spec::Rw::Rw, 4096, 1, clients);
    // The share of ReadX bytes, so the mixed-test rows read like dbench's traffic.
    let (rb, wb) = passes.iter().fold((0u64, 0u64), |(r, w), p| {
        (
            r + p.read.as_ref().map_or(0, |d| d.bytes),
            w + p.write.as_ref().map_or(0, |d| d.bytes),
        )
    });
    job.rwmixread = (100 * rb / (rb + wb).max(1)) as u8;
    job.fsync_every = u32::from(cfg.fsync_every_write);
    let summary = iolab_stats::summarize(&passes, iolab_stats::Score::Median);
    ctx.add_tests(vec![TestRecord {
        name,
        group: "dbench".into(),
        job,
        passes,
        summary,
        extra: serde_json::to_value(&extra).unwrap_or_default(),
    }])
}

/// What a dbench test carries in `extra` (docs/dbench.md); read back by its descriptor
/// (`super::info`), a key left out as its default.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct DbenchExtra {
    loadfile: PathBuf,
    clients: u32,
    /// dbench's own figure: bytes of the last replay over its measured time.
    throughput_mb_s: f64,
    warmup_seconds: f64,
    loops_completed: u64,
    pub(super) status_mismatches: u64,
    mismatch_samples: Vec<MismatchSample>,
    short_reads: u64,
    notes: Vec<String>,
    pub(super) ops: Vec<OpRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verify: Option<Tally>,
}

impl DbenchExtra {
    /// A test's `extra`, when it reads as dbench's.
    pub(super) fn of(t: &TestRecord) -> Option<DbenchExtra> {
        DbenchExtra::deserialize(&t.extra).ok()
    }

    /// Its operation table, as the reports show it.
    pub(super) fn op_table(&self) -> iolab_measure::workload::OpTable {
        iolab_measure::workload::OpTable {
            mismatch_key: "status_mismatches",
            rows: self
                .ops
                .iter()
                .map(|o| iolab_measure::workload::OpRow {
                    op: o.op.clone(),
                    count: o.count,
                    recorded: None,
                    avg_ms: o.avg_ms,
                    max_ms: o.max_ms,
                    p99_ms: o.p99_ms,
                    mismatches: o.status_mismatches,
                })
                .collect(),
        }
    }
}

/// One replay's operation table as a rank sends it to rank 0: the latency histograms
/// travel, so the merged table's mean and p99 are those of every rank's operations.
#[derive(Debug, Serialize, Deserialize)]
struct RankTable {
    loops: u64,
    status_mismatches: u64,
    short_reads: u64,
    mismatches: Vec<MismatchSample>,
    ops: Vec<RankOp>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RankOp {
    op: OpKind,
    max_ms: f64,
    status_mismatches: u64,
    histogram: LatencyHistogram,
}

impl RankTable {
    fn of(r: &super::DbenchResult) -> RankTable {
        RankTable {
            loops: r.loops_completed,
            status_mismatches: r.status_mismatches,
            short_reads: r.short_reads,
            mismatches: r.mismatches.clone(),
            ops: r
                .ops
                .iter()
                .map(|o| RankOp {
                    op: o.op,
                    max_ms: o.max_ms,
                    status_mismatches: o.status_mismatches,
                    histogram: o.histogram.clone(),
                })
                .collect(),
        }
    }

    /// Every rank's table added up: counts and mismatches summed, histograms merged, the
    /// highest maximum; the first mismatch samples of the ranks in rank order.
    fn merge(tables: Vec<serde_json::Value>) -> Result<RankTable, RunError> {
        let mut out = RankTable {
            loops: 0,
            status_mismatches: 0,
            short_reads: 0,
            mismatches: Vec::new(),
            ops: Vec::new(),
        };
        for (rank, v) in tables.into_iter().enumerate() {
            let t: RankTable = serde_json::from_value(v).map_err(|e| {
                RunError::caused(
                    format!("dbench: rank {rank}'s operation table cannot be read"),
                    e,
                )
            })?;
            out.loops += t.loops;
            out.status_mismatches += t.status_mismatches;
            out.short_reads += t.short_reads;
            let room = super::MAX_SAMPLES.saturating_sub(out.mismatches.len());
            out.mismatches.extend(t.mismatches.into_iter().take(room));
            for o in t.ops {
                match out.ops.iter_mut().find(|m| m.op == o.op) {
                    Some(m) => {
                        m.max_ms = m.max_ms.max(o.max_ms);
                        m.status_mismatches += o.status_mismatches;
                        m.histogram.merge(&o.histogram);
                    }
                    None => out.ops.push(o),
                }
            }
        }
        out.ops.sort_by_key(|o| o.op.index());
        Ok(out)
    }

    /// The table as `extra.ops` shows it.
    fn rows(&self) -> Vec<OpRow> {
        self.ops
            .iter()
            .map(|o| {
                let (avg_ms, p99_ms) = super::latency_ms(&o.histogram);
                OpRow {
                    op: o.op.name().to_string(),
                    count: o.histogram.count(),
                    avg_ms,
                    max_ms: o.max_ms,
                    p99_ms,
                    status_mismatches: o.status_mismatches,
                }
            })
            .collect()
    }
}

/// One row of dbench's operation table.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct OpRow {
    op: String,
    count: u64,
    avg_ms: f64,
    max_ms: f64,
    p99_ms: f64,
    status_mismatches: u64,
}

/// The lines `run dbench --verify` prints after the report, below its verdict (the run's
/// note): the first failures, and whether the files were read back.
fn verify_text(v: &Tally) -> String {
    let mut out = String::new();
    if v.failures > 0 {
        out.push_str("dbench --verify: the first failures:\n");
    }
    for f in v.failure_samples.iter().take(5) {
        out.push_str(&format!(
            "  {} offset {} [{}] {} ({})\n",
            f.file.as_deref().unwrap_or(""),
            f.offset,
            f.class,
            f.detail,
            f.phase
        ));
    }
    if v.replay.as_ref().is_some_and(|r| r.read_back_skipped > 0) {
        out.push_str("  (stopped: the files were not read back)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use iolab_measure::workload::{OpRow as Row, WorkloadInfo};
    use iolab_spec::{JobSpec, Rw};

    use super::*;

    #[test]
    fn the_descriptor_reads_back_what_a_test_writes() {
        let extra = DbenchExtra {
            clients: 2,
            status_mismatches: 3,
            ops: vec![OpRow {
                op: "ReadX".into(),
                count: 10,
                avg_ms: 0.5,
                max_ms: 2.0,
                p99_ms: 1.5,
                status_mismatches: 3,
            }],
            ..Default::default()
        };
        let t = TestRecord {
            name: "dbench 2 clients".into(),
            group: "dbench".into(),
            job: JobSpec::new(Rw::Rw, 4096, 1, 2),
            passes: Vec::new(),
            summary: Default::default(),
            extra: serde_json::to_value(&extra).unwrap(),
        };
        let info = &super::super::info::INFO;
        // Its extra names no workload: its status count is what tells it apart.
        assert!(info.owns_extra(&t.extra));
        assert_eq!(info.status_mismatches(&t), Some(3));
        let table = info.op_table(&t).unwrap();
        assert_eq!(table.mismatch_key, "status_mismatches");
        assert_eq!(
            table.rows,
            [Row {
                op: "ReadX".into(),
                count: 10,
                recorded: None,
                avg_ms: 0.5,
                max_ms: 2.0,
                p99_ms: 1.5,
                mismatches: 3
            }]
        );
    }
}
