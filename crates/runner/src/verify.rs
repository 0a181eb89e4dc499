//! What the runner says about `--verify` counts a test carries in `extra.verify`: one
//! note per test, and the run's integrity verdict.

use iolab_measure::{RunRecord, TestRecord};

/// The run's note about a test whose `extra.verify` holds the counts of a check.
pub fn note(t: &TestRecord) -> Option<String> {
    let tally = t.runner_extra().verify?;
    Some(tally.summary_line(&t.name))
}

/// One sentence when a test of the run counted `--verify` failures, else `None`.
pub fn failures(run: &RunRecord) -> Option<String> {
    let mut n = 0u64;
    let mut unit = "block";
    for t in &run.tests {
        if let Some(v) = t.runner_extra().verify {
            n += v.failures;
            if v.failures > 0 && v.unit == iolab_integrity::Unit::Files {
                unit = "file";
            }
        }
    }
    (n > 0).then(|| {
        format!(
            "{n} {unit}(s) did not read back as written (what and where in the tests' \
             extra.verify.failure_samples)"
        )
    })
}
