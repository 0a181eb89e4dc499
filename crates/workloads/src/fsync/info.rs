//! What `run fsync` says of itself to the crates below iolab-workloads
//! (`iolab_measure::workload`): durable writes (operations), no MPI, its
//! methods and sizes in the header, fixes through `--duration` and `--runs`.

use iolab_measure::workload::{About, Counts, FixContext, HeaderParts, Judgement, WorkloadInfo};
use iolab_measure::{RunRecord, TestRecord, WarningCode};
use iolab_spec::{format_bytes, format_size_short};
use serde_json::Value;

/// The sync-method probe, described.
pub struct Info;

/// The sync-method probe's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "fsync",
            counts: Counts::Operations,
            mpi: None,
        }
    }

    fn owns_extra(&self, extra: &Value) -> bool {
        match extra.get("workload").and_then(Value::as_str) {
            Some(w) => w == self.name(),
            // Tests stored before their extra named the workload.
            None => extra.get("open_flags").is_some() && extra.get("method").is_some(),
        }
    }

    fn durability(&self, t: &TestRecord) -> Option<Judgement> {
        super::FsyncRead::of(t)?.durability
    }

    fn facts(&self, run: &RunRecord, header: &HeaderParts) -> Option<Vec<(&'static str, String)>> {
        Some(facts(run, header))
    }

    fn test_what(&self, _run: &RunRecord, t: &TestRecord) -> Option<String> {
        Some(format!(
            "{} writes, one at a time",
            format_size_short(t.job.bs)
        ))
    }

    fn fix(&self, code: WarningCode, run: &RunRecord, _ctx: &FixContext) -> Option<String> {
        let text = match code {
            WarningCode::SlowFirstPass => format!(
                "longer passes (--duration, now {}), so that start-up costs weigh less",
                iolab_stats::warnings::secs(run.settings.duration)
            ),
            // It reads only what it wrote moments before (no IDLE_RECLAIM).
            _ => return crate::describe::timed_passes_fix(code),
        };
        Some(text)
    }
}

fn facts(run: &RunRecord, header: &HeaderParts) -> Vec<(&'static str, String)> {
    let mut methods: Vec<&str> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    for t in &run.tests {
        if !methods.contains(&t.group.as_str()) {
            methods.push(&t.group);
        }
        if !sizes.contains(&t.job.bs) {
            sizes.push(t.job.bs);
        }
    }
    let sizes: Vec<String> = sizes.into_iter().map(format_size_short).collect();
    vec![
        (
            "Probe",
            format!(
                "{} × write sizes {}, each rewriting a {} file in place, one write at a time",
                if methods.is_empty() {
                    "no method finished".to_string()
                } else {
                    methods.join(", ")
                },
                sizes.join(", "),
                format_bytes(run.settings.size)
            ),
        ),
        ("Passes", format!("{} per method and size", header.passes)),
    ]
}
