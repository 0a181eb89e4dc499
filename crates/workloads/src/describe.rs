//! What the workloads' descriptors (`iolab_measure::workload::WorkloadInfo`, one in each
//! workload's `info.rs`) share: their tests' `extra` read back for a header or a fix.

use iolab_measure::{RunRecord, WarningCode};
use serde_json::Value;

/// A key of the first test's `extra` that has it (not null).
pub(crate) fn extra<'a>(run: &'a RunRecord, key: &str) -> Option<&'a Value> {
    run.tests
        .iter()
        .find_map(|t| t.extra.get(key).filter(|v| !v.is_null()))
}

pub(crate) fn extra_u64(run: &RunRecord, key: &str) -> Option<u64> {
    extra(run, key).and_then(Value::as_u64)
}

pub(crate) fn extra_bool(run: &RunRecord, key: &str) -> bool {
    extra(run, key).and_then(Value::as_bool).unwrap_or(false)
}

/// A number in the first test's `extra` that has one at `key`.
pub(crate) fn extra_f64(run: &RunRecord, key: &str) -> Option<f64> {
    run.tests
        .iter()
        .find_map(|t| t.extra.get(key).and_then(Value::as_f64))
}

/// A true/false in the first test's `extra` that has one at `key` (false when none has).
pub(crate) fn flag(run: &RunRecord, key: &str) -> bool {
    run.tests
        .iter()
        .find_map(|t| t.extra.get(key).and_then(Value::as_bool))
        .unwrap_or(false)
}

pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The fixes of a workload of timed passes that takes `--runs` and `--duration` (fsync,
/// dbench): more or longer passes. `None` for the other codes.
pub(crate) fn timed_passes_fix(code: WarningCode) -> Option<String> {
    match code {
        WarningCode::HighVariation => {
            Some("run more or longer passes (--runs, --duration) on a quiet machine".into())
        }
        WarningCode::FewIos => Some("longer passes (--duration)".into()),
        _ => None,
    }
}
