//! Rank 0's view of what the ranks measured: each pass's aggregate (bytes and I/Os summed,
//! latency histograms merged, the rate over the span from the first rank's start to the last
//! rank's end), every rank's own figures, per-host sums, and what goes into the run record
//! at the end (`env.mpi`, the notes, the straggler warning).

use std::collections::BTreeMap;

use iolab_measure::{
    DirResult, LatSummary, PassContext, PassRecord, RunRecord, SyncStats, TimeSeries, Warning,
    WarningCode,
};
use serde::Serialize;

use super::Member;

/// A host whose median rate per rank is below this fraction of the other hosts' median is a
/// straggler.
pub const STRAGGLER_FRACTION: f64 = 0.5;

/// The measured passes of every rank, as rank 0 gathers them.
#[derive(Debug, Default)]
pub struct Ranks {
    rows: Vec<Row>,
}

/// One measured pass of one test on every rank.
#[derive(Debug, Clone, Serialize)]
struct Row {
    test: String,
    index: u32,
    /// All ranks' bytes / (last end − first start).
    mb_s: f64,
    /// The ranks' rate while all of them ran: each rank's bytes up to the first rank's end
    /// (its bytes prorated over its own counted time) over (first end − first start).
    first_done_mb_s: f64,
    /// The same as `mb_s`: the rate when the last rank is done.
    last_done_mb_s: f64,
    bytes: u64,
    /// Last end − first start, seconds.
    seconds: f64,
    /// Latest start − earliest start, seconds (the barrier's skew and start-up).
    start_skew_s: f64,
    ranks: Vec<RankPass>,
}

/// One rank's own figures of a pass.
#[derive(Debug, Clone, Serialize)]
struct RankPass {
    rank: u32,
    host: String,
    bytes: u64,
    ios: u64,
    seconds: f64,
    mb_s: f64,
    iops: f64,
    lat_p99_us: f64,
    /// The counted part of its pass, seconds after the barrier released it (its own clock).
    start_s: f64,
    end_s: f64,
}

/// One rank's pass as it arrives: test, warm-up, record, counted start and end.
pub type Arrived = (String, bool, PassRecord, f64, f64);

impl Ranks {
    /// Adds one pass of every rank (in rank order) and returns its aggregate.
    pub fn add(&mut self, members: &[Member], passes: Vec<Arrived>) -> PassRecord {
        let first_start = fold(&passes, |p| p.3, f64::min);
        let first_end = fold(&passes, |p| p.4, f64::min);
        let last_end = fold(&passes, |p| p.4, f64::max);
        let last_start = fold(&passes, |p| p.3, f64::max);
        let span = (last_end - first_start).max(1e-9);
        let records: Vec<&PassRecord> = passes.iter().map(|p| &p.2).collect();
        let read = merge_dir(records.iter().map(|p| p.read.as_ref()), span);
        let write = merge_dir(records.iter().map(|p| p.write.as_ref()), span);
        let sync = merge_sync(records.iter().map(|p| p.sync.as_ref()));
        let first = records[0];
        let mut agg = PassRecord::new(
            first.index,
            span,
            read,
            write,
            sync,
            first.cpu,
            sum_series(&records),
        );
        // Other ranks' I/O and CPU are not someone else's: activity is not judged here.
        agg.context = PassContext {
            cache_resident_before: first.context.cache_resident_before,
            cache_resident_after: first.context.cache_resident_after,
            ..PassContext::default()
        };
        let (test, warm) = (passes[0].0.clone(), passes[0].1);
        if !warm {
            let until_first: f64 = passes
                .iter()
                .map(|(_, _, p, s, e)| {
                    let own = (e - s).max(1e-9);
                    p.bytes as f64 * ((first_end - s) / own).clamp(0.0, 1.0)
                })
                .sum();
            let host = |r: usize| members.get(r).map(|m| m.host.clone()).unwrap_or_default();
            self.rows.push(Row {
                test,
                index: agg.index,
                mb_s: agg.mb_s,
                first_done_mb_s: until_first / 1e6 / (first_end - first_start).max(1e-9),
                last_done_mb_s: agg.mb_s,
                bytes: agg.bytes,
                seconds: span,
                start_skew_s: last_start - first_start,
                ranks: passes
                    .iter()
                    .enumerate()
                    .map(|(r, (_, _, p, s, e))| RankPass {
                        rank: r as u32,
                        host: host(r),
                        bytes: p.bytes,
                        ios: p.ios,
                        seconds: p.seconds,
                        mb_s: p.mb_s,
                        iops: p.iops,
                        lat_p99_us: p.lat_us.p99,
                        start_s: *s,
                        end_s: *e,
                    })
                    .collect(),
            });
        }
        agg
    }

    /// Puts what the ranks measured in the run: `env.mpi`, a note on the ranks and hosts,
    /// a per-host line per test, and a STRAGGLER_HOST warning per slow host.
    pub fn record(&self, members: &[Member], run: &mut RunRecord, stopped: bool) {
        let hosts = hosts(members);
        let per_host = self.per_host(&hosts);
        let doc = serde_json::json!({
            "ranks": members,
            "hosts": hosts.iter().map(|(h, r)| serde_json::json!({"host": h, "ranks": r}))
                .collect::<Vec<_>>(),
            "passes": self.rows,
            "host_mb_s": per_host
                .iter()
                .map(|(t, h)| serde_json::json!({"test": t, "hosts": h}))
                .collect::<Vec<_>>(),
            "stopped_by_signal": stopped,
        });
        if let serde_json::Value::Object(env) = &mut run.env {
            env.insert("mpi".into(), doc);
        } else {
            run.env = serde_json::json!({ "mpi": doc });
        }
        let host_list: Vec<String> = hosts
            .iter()
            .map(|(h, r)| format!("{h} (ranks {})", list(r)))
            .collect();
        run.notes.push(format!(
            "mpi: {} ranks on {} host(s): {}; each pass's MB/s is all ranks' bytes / (last \
             end − first start), every rank timing its own pass from the barrier before it; \
             device activity and other processes' CPU are not judged (the other ranks' I/O \
             and CPU would count as someone else's)",
            members.len(),
            hosts.len(),
            host_list.join(", ")
        ));
        for (test, by_host) in &per_host {
            let cells: Vec<String> = by_host
                .iter()
                .map(|(h, v)| format!("{h} {v:.2} MB/s"))
                .collect();
            run.notes
                .push(format!("mpi per host, {test}: {}", cells.join(", ")));
        }
        run.warnings.extend(stragglers(&per_host, &hosts));
    }

    /// For every test (in the order they ran), each host's median over passes of its
    /// ranks' summed MB/s.
    fn per_host(&self, hosts: &[(String, Vec<u32>)]) -> Vec<(String, BTreeMap<String, f64>)> {
        let mut tests: Vec<String> = Vec::new();
        for r in &self.rows {
            if !tests.contains(&r.test) {
                tests.push(r.test.clone());
            }
        }
        tests
            .into_iter()
            .map(|t| {
                let rows: Vec<&Row> = self.rows.iter().filter(|r| r.test == t).collect();
                let by_host = hosts
                    .iter()
                    .map(|(h, _)| {
                        let sums: Vec<f64> = rows
                            .iter()
                            .map(|r| {
                                r.ranks
                                    .iter()
                                    .filter(|p| &p.host == h)
                                    .map(|p| p.mb_s)
                                    .sum()
                            })
                            .collect();
                        (h.clone(), iolab_stats::median(&sums))
                    })
                    .collect();
                (t, by_host)
            })
            .collect()
    }
}

/// The hosts in the order of their first rank, each with its ranks.
fn hosts(members: &[Member]) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for m in members {
        match out.iter_mut().find(|(h, _)| *h == m.host) {
            Some((_, r)) => r.push(m.rank),
            None => out.push((m.host.clone(), vec![m.rank])),
        }
    }
    out
}

/// "0-3", "0, 2, 5".
fn list(ranks: &[u32]) -> String {
    let contiguous = ranks.windows(2).all(|w| w[1] == w[0] + 1);
    match ranks {
        [a, .., b] if contiguous => format!("{a}-{b}"),
        _ => ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// A host whose rate per rank is below [`STRAGGLER_FRACTION`] of the median of the other
/// hosts' (per rank, so a host with fewer ranks is not a straggler for that).
fn stragglers(
    per_host: &[(String, BTreeMap<String, f64>)],
    hosts: &[(String, Vec<u32>)],
) -> Vec<Warning> {
    let mut out = Vec::new();
    if hosts.len() < 2 {
        return out;
    }
    for (test, by_host) in per_host {
        let per_rank: Vec<(&str, f64)> = hosts
            .iter()
            .map(|(h, r)| {
                (
                    h.as_str(),
                    by_host.get(h).copied().unwrap_or(0.0) / r.len() as f64,
                )
            })
            .collect();
        for (h, v) in &per_rank {
            let others: Vec<f64> = per_rank
                .iter()
                .filter(|(o, _)| o != h)
                .map(|(_, v)| *v)
                .collect();
            let typical = iolab_stats::median(&others);
            if typical > 0.0 && *v < STRAGGLER_FRACTION * typical {
                out.push(Warning {
                    code: WarningCode::StragglerHost,
                    message: format!(
                        "host {h}: {v:.2} MB/s per rank, under {:.0}% of the other hosts' \
                         {typical:.2} MB/s per rank (median)",
                        STRAGGLER_FRACTION * 100.0
                    ),
                    fix: format!(
                        "look at host {h}: its network link, its mount options, other load \
                         on it; the aggregate waits for its ranks"
                    ),
                    test: Some(test.clone()),
                });
            }
        }
    }
    out
}

fn fold(passes: &[Arrived], f: impl Fn(&Arrived) -> f64, g: fn(f64, f64) -> f64) -> f64 {
    passes.iter().map(f).reduce(g).unwrap_or(0.0)
}

/// One direction of every rank: bytes summed and histograms merged, the rate over `span`.
fn merge_dir<'a>(
    dirs: impl Iterator<Item = Option<&'a DirResult>>,
    span: f64,
) -> Option<DirResult> {
    let mut out: Option<(u64, iolab_measure::LatencyHistogram)> = None;
    for d in dirs.flatten() {
        let (bytes, hist) = out.get_or_insert_with(Default::default);
        *bytes += d.bytes;
        hist.merge(&d.histogram);
    }
    out.map(|(bytes, hist)| DirResult::from_histogram(bytes, span, hist))
}

/// Flushes of every rank: counts summed; the mean weighted by count; min, max and each
/// percentile the worst of the ranks' (an upper bound: percentiles of summaries do not
/// merge).
fn merge_sync<'a>(syncs: impl Iterator<Item = Option<&'a SyncStats>>) -> Option<SyncStats> {
    let all: Vec<&SyncStats> = syncs.flatten().collect();
    if all.is_empty() {
        return None;
    }
    let count: u64 = all.iter().map(|s| s.count).sum();
    let worst = |f: fn(&LatSummary) -> f64| all.iter().map(|s| f(&s.lat_us)).fold(0.0, f64::max);
    let mean = if count == 0 {
        0.0
    } else {
        all.iter()
            .map(|s| s.lat_us.mean * s.count as f64)
            .sum::<f64>()
            / count as f64
    };
    Some(SyncStats {
        count,
        lat_us: LatSummary {
            mean,
            min: all
                .iter()
                .map(|s| s.lat_us.min)
                .fold(f64::INFINITY, f64::min),
            p50: worst(|l| l.p50),
            p90: worst(|l| l.p90),
            p99: worst(|l| l.p99),
            p999: worst(|l| l.p999),
            p9999: worst(|l| l.p9999),
            max: worst(|l| l.max),
        },
    })
}

/// The ranks' bytes per interval summed (the passes start together after the barrier);
/// empty when their intervals differ.
fn sum_series(records: &[&PassRecord]) -> TimeSeries {
    let interval = records[0].timeseries.interval_ms;
    if records.iter().any(|p| p.timeseries.interval_ms != interval) {
        return TimeSeries::default();
    }
    let len = records
        .iter()
        .map(|p| p.timeseries.bytes.len())
        .max()
        .unwrap_or(0);
    let mut bytes = vec![0u64; len];
    for p in records {
        for (sum, b) in bytes.iter_mut().zip(&p.timeseries.bytes) {
            *sum += b;
        }
    }
    TimeSeries {
        interval_ms: interval,
        bytes,
    }
}
