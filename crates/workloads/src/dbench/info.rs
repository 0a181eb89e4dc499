//! What `run dbench` says of itself to the crates below iolab-workloads
//! (`iolab_measure::workload`): bytes, its ranks time replays under MPI, its
//! loadfile and clients in the header, fixes through `--warmup`, `--runs` and `--duration`.

use iolab_measure::workload::{
    About, Counts, FixContext, HeaderParts, MpiPass, OpTable, WorkloadInfo,
};
use iolab_measure::{RunRecord, TestRecord, WarningCode};
use iolab_spec::format_duration;
use serde_json::Value;

use crate::describe::{extra, extra_f64, extra_u64, plural};

/// The dbench replay, described.
pub struct Info;

/// The dbench replay's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "dbench",
            counts: Counts::Bytes,
            mpi: Some(MpiPass::Replay),
        }
    }

    /// A dbench test's `extra` names no workload: it is the one with a
    /// `status_mismatches` count.
    fn owns_extra(&self, extra: &Value) -> bool {
        match iolab_measure::extra::workload_name(extra) {
            Some(w) => w == self.name(),
            None => extra.get("status_mismatches").is_some(),
        }
    }

    fn status_mismatches(&self, t: &TestRecord) -> Option<u64> {
        super::run::DbenchExtra::of(t).map(|x| x.status_mismatches)
    }

    fn op_table(&self, t: &TestRecord) -> Option<OpTable> {
        super::run::DbenchExtra::of(t).map(|x| x.op_table())
    }

    fn facts(&self, run: &RunRecord, header: &HeaderParts) -> Option<Vec<(&'static str, String)>> {
        Some(facts(run, header))
    }

    fn test_what(&self, _run: &RunRecord, t: &TestRecord) -> Option<String> {
        let clients = t.extra.get("clients").and_then(Value::as_u64);
        Some(format!(
            "loadfile replay, {}",
            plural(
                clients.unwrap_or(u64::from(t.job.numjobs)),
                "client",
                "clients"
            )
        ))
    }

    fn fix(&self, code: WarningCode, run: &RunRecord, _ctx: &FixContext) -> Option<String> {
        let text = match code {
            WarningCode::SlowFirstPass => {
                let warm = extra_f64(run, "warmup_seconds").unwrap_or(0.0);
                format!(
                    "a longer --warmup (this run warmed up for {})",
                    iolab_stats::warnings::secs(std::time::Duration::from_secs_f64(warm.max(0.0)))
                )
            }
            // It reads only what it wrote moments before (no IDLE_RECLAIM).
            _ => return crate::describe::timed_passes_fix(code),
        };
        Some(text)
    }
}

fn facts(run: &RunRecord, header: &HeaderParts) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let clients = extra_u64(run, "clients")
        .or_else(|| run.tests.first().map(|t| u64::from(t.job.numjobs)))
        .unwrap_or(0);
    let loadfile = extra(run, "loadfile")
        .and_then(Value::as_str)
        .unwrap_or("the loadfile");
    v.push((
        "Replay",
        format!(
            "{loadfile}, {}, each in its own directory",
            plural(clients, "client", "clients")
        ),
    ));
    let mut p = header.passes.clone();
    if let Some(w) = extra(run, "warmup_seconds").and_then(Value::as_f64) {
        if w > 0.0 {
            p.push_str(&format!(
                ", each after {} of warm-up",
                format_duration(std::time::Duration::from_secs_f64(w))
            ));
        }
    }
    v.push(("Passes", p));
    v
}
