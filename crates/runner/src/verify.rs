//! What the runner says about `--verify` counts a test carries in `extra.verify`: one
//! note per test, and the run's integrity verdict.

use iolab_measure::{RunRecord, TestRecord};

/// The run's note about a test whose `extra.verify` holds the counts of a check (`unit`:
/// what was checked, blocks unless it says otherwise).
pub fn note(t: &TestRecord) -> Option<String> {
    let v = t.extra.get("verify").filter(|v| v.is_object())?;
    let checked = v["checked"].as_u64()?;
    let failures = v["failures"].as_u64().unwrap_or(0);
    // How long the checking took, as the check reports it: read back after the passes
    // (block presets, fsync), comparing after the operations (metadata, streams), or
    // generating and comparing inside the run (dbench).
    let took = match (
        v["seconds"].as_f64(),
        v["inline_seconds"].as_f64(),
        v["read_backs"].as_u64(),
    ) {
        (Some(s), _, Some(n)) => format!(", {n} read-back(s), {s:.2} s untimed"),
        (Some(s), _, None) => format!(", {s:.3} s comparing"),
        (None, Some(s), _) => format!(", {s:.2} s of checks inside the run"),
        (None, None, _) => String::new(),
    };
    let mut line = format!(
        "verify {}: {checked} {} checked{took}: ",
        t.name,
        v["unit"].as_str().unwrap_or("blocks"),
    );
    if failures == 0 {
        line.push_str("all ok");
        return Some(line);
    }
    let classes: Vec<String> = v["classes"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, n)| *k != "ok" && n.as_u64() != Some(0))
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let first: Vec<String> = v["failure_samples"]
        .as_array()
        .into_iter()
        .flatten()
        .take(5)
        .map(|s| match s["file"].as_str() {
            Some(f) => format!("{f} byte {}", s["offset"]),
            None => format!("offset {}", s["offset"]),
        })
        .collect();
    line.push_str(&format!(
        "{failures} MISMATCH(ES): {} (first at {})",
        classes.join(", "),
        first.join(", ")
    ));
    Some(line)
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
