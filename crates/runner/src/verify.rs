//! What the runner says about `--verify` counts a test carries in `extra.verify`: one
//! note per test, and the run's integrity verdict.

use iolab_measure::{RunRecord, TestRecord};

/// The run's note about a test whose `extra.verify` holds the counts of a check.
pub fn note(t: &TestRecord) -> Option<String> {
    let v = t.extra.get("verify").filter(|v| v.is_object())?;
    let tally: iolab_integrity::Tally = serde_json::from_value(v.clone()).ok()?;
    Some(tally.summary_line(&t.name))
}

/// One sentence when a test of the run counted `--verify` failures, else `None`.
pub fn failures(run: &RunRecord) -> Option<String> {
    let mut n = 0u64;
    let mut unit = "block";
    for t in &run.tests {
        let v = &t.extra["verify"];
        if let Some(f) = v["failures"].as_u64() {
            n += f;
            if f > 0 && v["unit"].as_str() == Some("files") {
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
