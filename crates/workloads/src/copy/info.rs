//! What `run copy` says of itself to the crates below iolab-workloads
//! (`iolab_measure::workload`): bytes, no MPI, its source and buffer in the
//! header, fixes through `--drop-caches`, `--runs` and `--bs`.

use iolab_measure::workload::{About, Counts, FixContext, HeaderParts, WorkloadInfo};
use iolab_measure::{RunRecord, TestRecord, WarningCode};
use iolab_spec::{format_bytes, format_bytes_exact};
use serde_json::Value;

use crate::describe::{extra, extra_bool, extra_u64, flag, plural};

/// The copy, described.
pub struct Info;

/// The copy's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "copy",
            counts: Counts::Bytes,
            mpi: None,
        }
    }

    fn facts(&self, run: &RunRecord, header: &HeaderParts) -> Option<Vec<(&'static str, String)>> {
        Some(facts(run, header))
    }

    fn test_what(&self, _run: &RunRecord, t: &TestRecord) -> Option<String> {
        Some(format!("read()/write() of {}", format_bytes(t.job.bs)))
    }

    fn fix(&self, code: WarningCode, run: &RunRecord, ctx: &FixContext) -> Option<String> {
        // A copy whose every pass reads its source cold (a generated source is evicted
        // before each pass; `--drop-caches` empties the page cache).
        let cold = flag(run, "drop_caches") || flag(run, "source_evicted_before_each_pass");
        let text = match code {
            WarningCode::PageCache => {
                "--drop-caches, so that every pass starts from an empty page cache".into()
            }
            WarningCode::SlowFirstPass if !cold => "--drop-caches: every copy then reads its \
                source from the device, as the first one did"
                .into(),
            WarningCode::SlowFirstPass => {
                "more passes (--runs), so that the median rests on the steady ones".into()
            }
            WarningCode::HighVariation if !cold => "run more passes (--runs) on a quiet \
                machine; --drop-caches makes every pass start alike"
                .into(),
            WarningCode::HighVariation => "run more passes (--runs) on a quiet machine".into(),
            WarningCode::FewIos => format!(
                "a smaller --bs (the copy buffer) or a larger source: 100 writes of {} need {}",
                ctx.block, ctx.need
            ),
            _ => return None,
        };
        Some(text)
    }
}

fn facts(run: &RunRecord, header: &HeaderParts) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let bytes = extra_u64(run, "bytes");
    let source = if extra_bool(run, "source_generated") {
        let size = extra_u64(run, "generated_size").or(bytes);
        Some(format!(
            "a generated random file of {}, evicted from the page cache before every pass",
            size.map_or("unknown size".into(), format_bytes_exact)
        ))
    } else {
        extra(run, "source").and_then(Value::as_str).map(|s| {
            let mut parts = Vec::new();
            if let Some(b) = bytes {
                parts.push(format_bytes(b));
            }
            if let Some(f) = extra_u64(run, "files") {
                parts.push(plural(f, "file", "files"));
            }
            if let Some(d) = extra_u64(run, "dirs").filter(|&d| d > 0) {
                parts.push(plural(d, "directory", "directories"));
            }
            if let Some(l) = extra_u64(run, "symlinks").filter(|&l| l > 0) {
                parts.push(plural(l, "symlink", "symlinks"));
            }
            if parts.is_empty() {
                s.to_string()
            } else {
                format!("{s} ({})", parts.join(", "))
            }
        })
    };
    v.push((
        "Source",
        source.unwrap_or_else(|| "unknown (no copy finished)".into()),
    ));
    let buffer =
        extra_u64(run, "buffer_size").map_or(String::new(), |b| format!(" of {}", format_bytes(b)));
    let mut how = format!(
        "read()/write(){buffer} through the page cache, then fsync of every file and \
         directory, counted in the time"
    );
    if extra_bool(run, "drop_caches") {
        how.push_str("; page cache dropped before every pass");
    }
    v.push(("Copy", how));
    let n = header.most_passes as u64;
    v.push(("Passes", plural(n, "copy", "copies")));
    v
}
