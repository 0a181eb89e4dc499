//! What `run verify` says of itself to the crates below iolab-workloads
//! (`iolab_measure::workload`): bytes, no MPI, the generic header, its tests' verification
//! counts at the top of their `extra`, fixes through `--buffered`, `--runs`, `--size` and
//! `--bs`.

use iolab_integrity::Tally;
use iolab_measure::workload::{About, Counts, FixContext, WorkloadInfo};
use iolab_measure::TestRecord;
use iolab_measure::{RunRecord, WarningCode};
use serde::Deserialize;

use crate::block::info::{IDLE_RECLAIM_FIX, PAGE_CACHE_FIX};

/// The verified-write workload, described.
pub struct Info;

/// Its descriptor, which its registry entry carries.
pub static INFO: Info = Info;

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "verify",
            counts: Counts::Bytes,
            mpi: None,
        }
    }

    fn tests_are_io_patterns(&self) -> bool {
        true
    }

    fn verify_counts(&self, t: &TestRecord) -> Option<Tally> {
        Tally::deserialize(&t.extra).ok()
    }

    fn fix(&self, code: WarningCode, _run: &RunRecord, ctx: &FixContext) -> Option<String> {
        let text = match code {
            WarningCode::PageCache => PAGE_CACHE_FIX.into(),
            // The test file was written when the target was prepared, read in later passes.
            WarningCode::IdleReclaim => IDLE_RECLAIM_FIX.into(),
            WarningCode::SlowFirstPass => {
                "more passes (--runs), so that the median rests on the steady ones".into()
            }
            WarningCode::HighVariation => "run more passes (--runs) on a quiet machine".into(),
            WarningCode::FewIos => format!(
                "a larger --size or a smaller --bs: 100 I/Os of {} need {}",
                ctx.block, ctx.need
            ),
            _ => return None,
        };
        Some(text)
    }
}
