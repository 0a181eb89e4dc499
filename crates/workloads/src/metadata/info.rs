//! What `run metadata` says of itself to the crates below iolab-workloads
//! (`iolab_measure::workload`): operations, its ranks time phases under
//! MPI, its files and phases in the header, fixes through `--files`.

use iolab_measure::workload::{
    About, Counts, FixContext, HeaderParts, MpiPass, OpSeries, SpacePerFile, WorkloadInfo,
};
use iolab_measure::{RunRecord, TestRecord, WarningCode};
use iolab_spec::format_bytes_exact;
use serde_json::Value;

use crate::describe::{extra_bool, extra_u64, plural};

/// The metadata workload, described.
pub struct Info;

/// The metadata workload's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "metadata",
            counts: Counts::Operations,
            mpi: Some(MpiPass::Phase),
        }
    }

    fn op_series(&self, t: &TestRecord) -> Option<OpSeries> {
        let x = super::PhaseRead::of(t)?;
        Some(OpSeries {
            interval_ms: x.ops_interval_ms?,
            ops: x.ops_series?,
        })
    }

    fn space_per_file(&self, t: &TestRecord) -> Option<SpacePerFile> {
        let s = super::PhaseRead::of(t)?.space?;
        Some(SpacePerFile {
            used: s.bytes_per_file,
            allocated: s.allocated_bytes_per_file,
        })
    }

    fn facts(&self, run: &RunRecord, header: &HeaderParts) -> Option<Vec<(&'static str, String)>> {
        Some(facts(run, header))
    }

    fn test_what(&self, _run: &RunRecord, t: &TestRecord) -> Option<String> {
        let e = &t.extra;
        let n = |key: &str| e.get(key).and_then(Value::as_u64);
        Some(format!(
            "{} {}, {}",
            n("ops").unwrap_or(0),
            e.get("phase").and_then(Value::as_str).unwrap_or(&t.name),
            plural(
                n("threads").unwrap_or(u64::from(t.job.numjobs)),
                "thread",
                "threads"
            )
        ))
    }

    fn fix(&self, code: WarningCode, _run: &RunRecord, _ctx: &FixContext) -> Option<String> {
        match code {
            WarningCode::FewIos => {
                Some("--files 100 or more: every phase does one operation per file".into())
            }
            // It reads only what it wrote moments before, in one pass.
            _ => None,
        }
    }
}

fn facts(run: &RunRecord, _header: &HeaderParts) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    if let Some(files) = extra_u64(run, "files") {
        let size = extra_u64(run, "file_size").unwrap_or(run.settings.size);
        let mut what = format!(
            "{} of {} in {}, {}",
            plural(files, "file", "files"),
            format_bytes_exact(size),
            plural(
                extra_u64(run, "dirs").unwrap_or(0),
                "directory",
                "directories"
            ),
            plural(extra_u64(run, "threads").unwrap_or(1), "thread", "threads"),
        );
        if extra_bool(run, "fsync") {
            what.push_str("; every file fsynced after its write, inside the create");
        }
        v.push(("Files", what));
    }
    let phases: Vec<&str> = run.tests.iter().map(|t| t.name.as_str()).collect();
    v.push((
        "Phases",
        if phases.is_empty() {
            "none finished".to_string()
        } else {
            format!("{}, each timed once", phases.join(", "))
        },
    ));
    v
}
