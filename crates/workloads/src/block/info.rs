//! What the block presets (and the workloads that run through the block pass loop: fio,
//! sustained) say of themselves to the crates below iolab-workloads
//! (`iolab_measure::workload`): bytes, one pass per rank under MPI, a pass that also ends
//! at `--io-size`, and fixes through `--buffered`, `--warmup`, `--runs`, `--duration`,
//! `--until-stable`, `--size` and `--io-size`. The header's facts are the generic ones
//! (region, passes, engine).

use iolab_measure::workload::{About, Counts, FixContext, MpiPass, View, WorkloadInfo};
use iolab_measure::{RunRecord, TestRecord, WarningCode};

/// The block presets, described.
pub struct Info;

/// The block presets' descriptor, which their registry entry carries.
pub static INFO: Info = Info;

/// `PAGE_CACHE` of a run that read a test file it prepared (block, verify).
pub(crate) const PAGE_CACHE_FIX: &str =
    "drop --buffered (O_DIRECT), or use a test file larger than RAM";

/// `IDLE_RECLAIM` of a run whose test file was written when the target was prepared and
/// read in later passes (block, verify).
pub(crate) const IDLE_RECLAIM_FIX: &str = "drop --buffered (O_DIRECT) to measure the device, \
     or drop the page cache before every run (as root: sync; echo 3 > \
     /proc/sys/vm/drop_caches) so that each starts cold";

impl WorkloadInfo for Info {
    fn about(&self) -> About {
        About {
            name: "block",
            counts: Counts::Bytes,
            mpi: Some(MpiPass::Pass),
        }
    }

    /// Runs stored before the family was recorded have none.
    fn stored_as(&self, workload: &str) -> bool {
        workload == self.name() || workload.is_empty()
    }

    fn view(&self, preset: &str) -> Option<View> {
        if preset == "atto" {
            Some(View::Atto)
        } else if preset == "cdm" || preset.starts_with("cdm-") {
            Some(View::CrystalDiskMark)
        } else {
            None
        }
    }

    fn tests_are_io_patterns(&self) -> bool {
        true
    }

    fn named_by_preset(&self) -> bool {
        true
    }

    fn reads_one_test_file(&self) -> bool {
        true
    }

    fn io_limit_ends_passes(&self) -> bool {
        true
    }

    /// `run sustained`'s tests carry their burst and sustained rates (`extra.sustained`)
    /// or their recovery (`extra.recovery`).
    fn reports_own_cliff(&self, t: &TestRecord) -> bool {
        let r = t.runner_extra();
        r.sustained.is_some() || r.recovery.is_some()
    }

    fn fix(&self, code: WarningCode, run: &RunRecord, ctx: &FixContext) -> Option<String> {
        let s = &run.settings;
        let secs = iolab_stats::warnings::secs;
        let text = match code {
            WarningCode::PageCache => PAGE_CACHE_FIX.into(),
            WarningCode::IdleReclaim => IDLE_RECLAIM_FIX.into(),
            WarningCode::SlowFirstPass if s.warmup_passes == 0 => {
                "add a warm-up pass (--warmup 1)".into()
            }
            WarningCode::SlowFirstPass => format!(
                "warm up longer: --warmup {} or a --warmup-time above {} (this run warmed up \
                 with {} pass{} of {})",
                s.warmup_passes + 1,
                secs(s.warmup_duration),
                s.warmup_passes,
                if s.warmup_passes == 1 { "" } else { "es" },
                secs(s.warmup_duration),
            ),
            WarningCode::HighVariation => "run more or longer passes (--runs, --duration, \
                --until-stable) on a quiet machine"
                .into(),
            // ATTO: every pass moves the region once.
            WarningCode::FewIos if ctx.byte_limited && run.preset == "atto" => format!(
                "a larger --size: every pass moves the region once, so 100 I/Os of {} need \
                 --size {} (and a --duration long enough to move it)",
                ctx.block, ctx.need
            ),
            WarningCode::FewIos if ctx.byte_limited => format!(
                "a larger --io-size: 100 I/Os of {} need {}",
                ctx.block, ctx.need
            ),
            WarningCode::FewIos => "longer passes (--duration)".into(),
            _ => return None,
        };
        Some(text)
    }
}
