//! What `run streams` says of itself to the crates below iolab-workloads
//! (`iolab_measure::workload`): bytes, no MPI, its streams and files in the
//! header, fixes through `--same-file`, `--stagger`, `--drop-caches`, `--bs` and `--size`.

use iolab_measure::workload::{About, Counts, FixContext, HeaderParts, WorkloadInfo};
use iolab_measure::{RunRecord, TestRecord, WarningCode};
use iolab_spec::{format_bytes, format_bytes_exact, format_duration};
use serde_json::Value;

use crate::describe::{extra, extra_bool, extra_f64, extra_u64, flag, plural};

/// The streams, described.
pub struct Info;

/// The streams's descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "streams",
            counts: Counts::Bytes,
            mpi: None,
        }
    }

    fn facts(&self, run: &RunRecord, header: &HeaderParts) -> Option<Vec<(&'static str, String)>> {
        Some(facts(run, header))
    }

    fn test_what(&self, _run: &RunRecord, t: &TestRecord) -> Option<String> {
        let calls = format!(
            "{}() calls of {}",
            t.job.rw.as_str(),
            format_bytes(t.job.bs)
        );
        Some(match t.extra.get("streams").and_then(Value::as_u64) {
            Some(k) => format!("{calls}, {} together", plural(k, "stream", "streams")),
            None => calls,
        })
    }

    fn fix(&self, code: WarningCode, run: &RunRecord, ctx: &FixContext) -> Option<String> {
        let same_file = flag(run, "same_file");
        match code {
            WarningCode::PageCache if same_file => Some(
                "drop --same-file (every stream reads its own file) to measure the device: a \
                 later reader of a shared file reads what the first one cached"
                    .into(),
            ),
            WarningCode::PageCache => {
                Some("--drop-caches, so that every pass starts from an empty page cache".into())
            }
            // Prepared files are evicted before the streams start, so they read cold; only
            // the later readers of a shared file read what an earlier one left, and only a
            // stagger that long lets it go idle.
            WarningCode::IdleReclaim if same_file => {
                let stagger = extra_f64(run, "stagger_s").unwrap_or(0.0);
                let streams = extra_f64(run, "streams").unwrap_or(1.0);
                let span = std::time::Duration::from_secs_f64((stagger * (streams - 1.0)).max(0.0));
                let idle = ctx.idle_reclaim_after.unwrap_or_default();
                (stagger > 0.0 && span >= idle).then(|| {
                    format!(
                        "a --stagger that starts the last reader within {} of the first, \
                         before the kernel pages out what the first one read",
                        iolab_stats::warnings::secs(idle)
                    )
                })
            }
            WarningCode::FewIos => Some(format!(
                "a smaller --bs or a larger --size: every stream covers its file once, and 100 \
                 calls of {} need {}",
                ctx.block, ctx.need
            )),
            // Workloads of one pass never have a first of three.
            _ => None,
        }
    }
}

fn facts(run: &RunRecord, _header: &HeaderParts) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    let streams = extra_u64(run, "streams").unwrap_or_else(|| {
        run.tests
            .iter()
            .filter(|t| t.extra.get("stream").is_some())
            .count() as u64
    });
    let rw = extra(run, "rw")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| run.tests.first().map(|t| t.job.rw.as_str().to_string()))
        .unwrap_or_default();
    let bs = extra_u64(run, "bs").or_else(|| run.tests.first().map(|t| t.job.bs));
    let size = extra_u64(run, "file_size").unwrap_or(run.settings.size);
    let calls = bs.map_or(String::new(), |b| {
        format!(
            " in {}() calls of {}",
            if rw == "write" { "write" } else { "read" },
            format_bytes(b)
        )
    });
    let files = if extra_bool(run, "same_file") {
        let stagger = extra(run, "stagger_s")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let start = if stagger > 0.0 {
            format!(
                "started {} apart",
                format_duration(std::time::Duration::from_secs_f64(stagger))
            )
        } else {
            "started together".to_string()
        };
        format!("all on one {} file, {start}", format_bytes_exact(size))
    } else {
        format!(
            "each on its own {} file, started together",
            format_bytes_exact(size)
        )
    };
    v.push((
        "Streams",
        format!(
            "{} of sequential {rw}s{calls}, {files}",
            plural(streams, "stream", "streams")
        ),
    ));
    let mut io = vec![if extra_bool(run, "direct") {
        "direct (O_DIRECT)".to_string()
    } else {
        "buffered (page cache)".to_string()
    }];
    if extra_bool(run, "drop_caches") {
        io.push("page cache dropped before the streams".into());
    } else if extra_bool(run, "evicted_after_prepare") {
        io.push("the prepared files evicted from the page cache before the streams".into());
    }
    if extra_bool(run, "end_fsync") {
        io.push("fsync at the end of every stream, counted".into());
    }
    v.push(("I/O", io.join(" · ")));
    let mut pass = "1: every stream covers its file once".to_string();
    if let Some(d) = extra(run, "duration_limit_s").and_then(Value::as_f64) {
        pass.push_str(&format!(
            ", or stops after {}",
            format_duration(std::time::Duration::from_secs_f64(d))
        ));
    }
    v.push(("Passes", pass));
    v
}
