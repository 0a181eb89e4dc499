//! `iolab show N --series`: every test's throughput per interval, from the 100 ms series each
//! pass stores, summed into intervals of a chosen length (a multiple of the stored one), as
//! a table, CSV (one row per interval) or JSON (per test, with its cliff and stalls).

use iolab_measure::{PassRecord, RunRecord, TestRecord, MB};
use iolab_stats::series::{stalls, test_cliff};
use serde_json::{json, Value};

/// One interval of one pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub test: String,
    pub pass: u32,
    /// Seconds since the start of the pass's measured part.
    pub start_s: f64,
    /// Its length (a pass's last interval may be shorter).
    pub seconds: f64,
    pub bytes: u64,
    pub mb_s: f64,
}

/// Why a series cannot be cut into intervals of the length asked for.
pub fn check_interval(run: &RunRecord, interval_ms: u64) -> Result<(), String> {
    for t in &run.tests {
        for p in &t.passes {
            let stored = p.timeseries.interval_ms as u64;
            if stored == 0 || p.timeseries.bytes.is_empty() {
                continue;
            }
            if interval_ms == 0 || !interval_ms.is_multiple_of(stored) {
                return Err(format!(
                    "--interval {interval_ms}ms: the series of test {} is stored in {stored} ms \
                     intervals; give a multiple of {stored}ms",
                    t.name
                ));
            }
        }
    }
    Ok(())
}

/// The rows of one pass: its stored intervals summed `interval_ms` at a time.
fn pass_rows(t: &TestRecord, p: &PassRecord, interval_ms: u64) -> Vec<Row> {
    let ts = &p.timeseries;
    let stored = ts.interval_ms as u64;
    if stored == 0 {
        return Vec::new();
    }
    let per = (interval_ms / stored).max(1) as usize;
    let iv = interval_ms as f64 / 1000.0;
    ts.bytes
        .chunks(per)
        .enumerate()
        .map(|(i, chunk)| {
            let start = i as f64 * iv;
            let seconds = (p.seconds - start).clamp(0.0, iv);
            let bytes: u64 = chunk.iter().sum();
            Row {
                test: t.name.clone(),
                pass: p.index,
                start_s: start,
                seconds,
                bytes,
                mb_s: if seconds > 0.0 {
                    bytes as f64 / MB / seconds
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// Every interval of every measured pass of the run, test by test.
pub fn rows(run: &RunRecord, interval_ms: u64) -> Vec<Row> {
    run.tests
        .iter()
        .flat_map(|t| {
            t.passes
                .iter()
                .flat_map(move |p| pass_rows(t, p, interval_ms))
        })
        .collect()
}

/// The CSV: `test,pass,start_s,seconds,bytes,mb_s`, a header row first.
pub fn csv(run: &RunRecord, interval_ms: u64) -> String {
    crate::csv::table(
        &["test", "pass", "start_s", "seconds", "bytes", "mb_s"],
        rows(run, interval_ms).into_iter().map(|r| {
            vec![
                r.test,
                r.pass.to_string(),
                r.start_s.to_string(),
                r.seconds.to_string(),
                r.bytes.to_string(),
                r.mb_s.to_string(),
            ]
        }),
    )
}

/// The JSON: per test its intervals by pass, its cliff (RATE_CLIFF's figures, or null) and
/// its stalls (100 ms intervals with no completion).
pub fn json(run: &RunRecord, interval_ms: u64) -> Value {
    let tests: Vec<Value> = run
        .tests
        .iter()
        .map(|t| {
            let passes: Vec<Value> = t
                .passes
                .iter()
                .map(|p| {
                    let r = pass_rows(t, p, interval_ms);
                    json!({
                        "pass": p.index,
                        "start_s": r.iter().map(|x| x.start_s).collect::<Vec<_>>(),
                        "seconds": r.iter().map(|x| x.seconds).collect::<Vec<_>>(),
                        "bytes": r.iter().map(|x| x.bytes).collect::<Vec<_>>(),
                        "mb_s": r.iter().map(|x| x.mb_s).collect::<Vec<_>>(),
                    })
                })
                .collect();
            let cliff = test_cliff(t).map(|c| {
                json!({
                    "pass": c.pass,
                    "bytes_before": c.bytes_before,
                    "seconds_before": c.seconds_before,
                    "before_mb_s": c.before_mb_s,
                    "after_mb_s": c.after_mb_s,
                    "seconds_after": c.seconds_after,
                })
            });
            let s = stalls(t);
            json!({
                "test": t.name,
                "interval_ms": interval_ms,
                "passes": passes,
                "cliff": cliff,
                "stalls": { "intervals": s.intervals, "longest_s": s.longest_s, "passes": s.passes },
            })
        })
        .collect();
    json!({ "run_uuid": run.uuid, "interval_ms": interval_ms, "tests": tests })
}

/// A plain table: one line per interval, the test and pass named where they change, and a
/// line under a test with its cliff.
pub fn text(run: &RunRecord, interval_ms: u64) -> String {
    let mut out = String::new();
    for t in &run.tests {
        out.push_str(&format!("{}\n", t.name));
        out.push_str("  pass   from s      MB/s        bytes\n");
        for p in &t.passes {
            for r in pass_rows(t, p, interval_ms) {
                out.push_str(&format!(
                    "  {:>4} {:>8.1} {:>9.1} {:>12}\n",
                    r.pass, r.start_s, r.mb_s, r.bytes
                ));
            }
        }
        if let Some(c) = test_cliff(t) {
            out.push_str(&format!(
                "  cliff in pass {}: {:.1} MB/s for {:.1} s, then {:.1} MB/s\n",
                c.pass, c.before_mb_s, c.seconds_before, c.after_mb_s
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iolab_measure::{CpuUsage, TimeSeries};

    fn pass(index: u32, seconds: f64, bytes: Vec<u64>) -> PassRecord {
        PassRecord::new(
            index,
            seconds,
            None,
            None,
            None,
            CpuUsage::default(),
            TimeSeries {
                interval_ms: 100,
                bytes,
            },
        )
    }

    #[test]
    fn intervals_sum_the_stored_ones_and_the_last_keeps_its_length() {
        let t = TestRecord {
            name: "T".into(),
            group: "T".into(),
            job: iolab_spec::JobSpec::new(iolab_spec::Rw::Write, 4096, 1, 1),
            passes: vec![pass(1, 0.25, vec![1_000_000, 2_000_000, 500_000])],
            summary: Default::default(),
            extra: Value::Null,
        };
        let r = pass_rows(&t, &t.passes[0], 200);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].bytes, r[0].seconds), (3_000_000, 0.2));
        assert!((r[0].mb_s - 15.0).abs() < 1e-9);
        assert_eq!(r[1].bytes, 500_000);
        assert!((r[1].seconds - 0.05).abs() < 1e-9 && (r[1].mb_s - 10.0).abs() < 1e-6);
    }
}
