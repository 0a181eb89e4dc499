//! `iolab show N --series`: every test's throughput per interval, from the 100 ms series each
//! pass stores, summed into intervals of a chosen length (a multiple of the stored one), as
//! a table, CSV (one row per interval) or JSON (per test, with its cliff and stalls). Passes
//! stored with I/O counts and latencies per interval (block passes since those were added)
//! also give IOPS and the mean and largest latency of each interval; older ones give bytes.

use iolab_measure::{PassRecord, RunRecord, TestRecord, MB};
#[cfg(test)]
use iolab_spec::fiojob::logs::LogKind;
#[cfg(test)]
use iolab_stats::series::fio_log;
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
    /// I/Os completed, their mean and largest latency (µs); `None` for a series stored
    /// without them.
    pub io: Option<IoFigures>,
}

/// An interval's I/O figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IoFigures {
    pub ios: u64,
    pub iops: f64,
    /// `None` when no I/O completed in the interval.
    pub lat_mean_us: Option<f64>,
    pub lat_max_us: Option<f64>,
}

/// An `--interval` the stored series cannot be cut into.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--interval {interval_ms}ms: the series of test {test} is stored in {stored_ms} ms \
     intervals; give a multiple of {stored_ms}ms"
)]
pub struct IntervalError {
    pub interval_ms: u64,
    pub test: String,
    pub stored_ms: u64,
}

/// Why a series cannot be cut into intervals of the length asked for.
pub fn check_interval(run: &RunRecord, interval_ms: u64) -> Result<(), IntervalError> {
    for t in &run.tests {
        for p in &t.passes {
            let stored = p.timeseries.interval_ms as u64;
            if stored == 0 || p.timeseries.bytes.is_empty() {
                continue;
            }
            if interval_ms == 0 || !interval_ms.is_multiple_of(stored) {
                return Err(IntervalError {
                    interval_ms,
                    test: t.name.clone(),
                    stored_ms: stored,
                });
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
            let io = ts
                .io_span(i * per, i * per + chunk.len())
                .map(|(ios, sum, max)| IoFigures {
                    ios,
                    iops: if seconds > 0.0 {
                        ios as f64 / seconds
                    } else {
                        0.0
                    },
                    lat_mean_us: (ios > 0).then(|| sum as f64 / ios as f64 / 1000.0),
                    lat_max_us: (ios > 0).then(|| max as f64 / 1000.0),
                });
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
                io,
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

/// The CSV: `test,pass,start_s,seconds,bytes,mb_s,ios,iops,lat_mean_us,lat_max_us`, a
/// header row first; the last four are empty for a series stored without them (and the
/// latencies for an interval without a completion).
pub fn csv(run: &RunRecord, interval_ms: u64) -> String {
    let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    crate::csv::table(
        &[
            "test",
            "pass",
            "start_s",
            "seconds",
            "bytes",
            "mb_s",
            "ios",
            "iops",
            "lat_mean_us",
            "lat_max_us",
        ],
        rows(run, interval_ms).into_iter().map(|r| {
            vec![
                r.test,
                r.pass.to_string(),
                r.start_s.to_string(),
                r.seconds.to_string(),
                r.bytes.to_string(),
                r.mb_s.to_string(),
                r.io.map(|x| x.ios.to_string()).unwrap_or_default(),
                opt(r.io.map(|x| x.iops)),
                opt(r.io.and_then(|x| x.lat_mean_us)),
                opt(r.io.and_then(|x| x.lat_max_us)),
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
                    let mut v = json!({
                        "pass": p.index,
                        "start_s": r.iter().map(|x| x.start_s).collect::<Vec<_>>(),
                        "seconds": r.iter().map(|x| x.seconds).collect::<Vec<_>>(),
                        "bytes": r.iter().map(|x| x.bytes).collect::<Vec<_>>(),
                        "mb_s": r.iter().map(|x| x.mb_s).collect::<Vec<_>>(),
                    });
                    if r.iter().all(|x| x.io.is_some()) && !r.is_empty() {
                        let io: Vec<IoFigures> = r.iter().filter_map(|x| x.io).collect();
                        v["ios"] = json!(io.iter().map(|x| x.ios).collect::<Vec<_>>());
                        v["iops"] = json!(io.iter().map(|x| x.iops).collect::<Vec<_>>());
                        v["lat_mean_us"] =
                            json!(io.iter().map(|x| x.lat_mean_us).collect::<Vec<_>>());
                        v["lat_max_us"] =
                            json!(io.iter().map(|x| x.lat_max_us).collect::<Vec<_>>());
                    }
                    v
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
        let with_io = t
            .passes
            .iter()
            .any(|p| p.timeseries.io_span(0, 0).is_some());
        out.push_str("  pass   from s      MB/s        bytes");
        out.push_str(if with_io {
            "       IOPS  mean lat µs   max lat µs\n"
        } else {
            "\n"
        });
        let lat = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
        for p in &t.passes {
            for r in pass_rows(t, p, interval_ms) {
                out.push_str(&format!(
                    "  {:>4} {:>8.1} {:>9.1} {:>12}",
                    r.pass, r.start_s, r.mb_s, r.bytes
                ));
                if let Some(io) = r.io {
                    out.push_str(&format!(
                        " {:>10.0} {:>12} {:>12}",
                        io.iops,
                        lat(io.lat_mean_us),
                        lat(io.lat_max_us)
                    ));
                }
                out.push('\n');
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
pub(crate) mod tests {
    use super::*;
    use iolab_measure::{CpuUsage, TimeSeries};

    /// A pass of `seconds` with this 100 ms byte series (for the chart's tests too).
    pub(crate) fn pass(index: u32, seconds: f64, bytes: Vec<u64>) -> PassRecord {
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
                ..Default::default()
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
        assert!(
            r[0].io.is_none(),
            "a series stored with bytes only gives bytes"
        );
    }

    #[test]
    fn intervals_with_io_counts_give_iops_and_latency() {
        let mut p = pass(1, 0.25, vec![8192, 4096, 0]);
        let mut w = iolab_measure::DirSeries::default();
        w.add(0, 4096, 1_000_000);
        w.add(0, 4096, 3_000_000);
        w.add(1, 4096, 5_000_000);
        p.timeseries.write = Some(w);
        let t = TestRecord {
            name: "T".into(),
            group: "T".into(),
            job: iolab_spec::JobSpec::new(iolab_spec::Rw::Write, 4096, 1, 1),
            passes: vec![p],
            summary: Default::default(),
            extra: Value::Null,
        };
        let r = pass_rows(&t, &t.passes[0], 100);
        let io: Vec<IoFigures> = r.iter().map(|x| x.io.unwrap()).collect();
        assert_eq!(io.iter().map(|x| x.ios).collect::<Vec<_>>(), [2, 1, 0]);
        assert!((io[0].iops - 20.0).abs() < 1e-9);
        assert_eq!(io[0].lat_mean_us, Some(2000.0));
        assert_eq!(io[0].lat_max_us, Some(3000.0));
        assert_eq!(io[2].lat_mean_us, None);
        let r = pass_rows(&t, &t.passes[0], 200);
        assert_eq!(r[0].io.unwrap().ios, 3);
        assert_eq!(r[0].io.unwrap().lat_max_us, Some(5000.0));

        // fio's windowed logs: 200 ms windows, the last ending at the pass's end (250 ms).
        assert_eq!(
            fio_log(&t, LogKind::Bw, 200, None).unwrap(),
            "200, 60, 1, 0, 0\n"
        );
        assert_eq!(
            fio_log(&t, LogKind::Iops, 100, None).unwrap(),
            "100, 20, 1, 0, 0\n200, 10, 1, 0, 0\n"
        );
        assert_eq!(
            fio_log(&t, LogKind::Lat, 200, None).unwrap(),
            "200, 3000000, 1, 0, 0\n"
        );
        assert!(fio_log(&t, LogKind::Bw, 150, None).is_err());
    }
}
