//! Rank 0's view of what the ranks measured: each pass's aggregate (bytes and I/Os summed,
//! latency histograms merged, the rate over the span from the first rank's start to the last
//! rank's end), every rank's own figures, per-host sums, and what goes into the run record
//! at the end (`env.mpi`, the notes, the straggler warning).

use std::collections::BTreeMap;

use iolab_integrity::Tally;
use iolab_measure::{
    Activity, DirResult, LatSummary, PassContext, PassRecord, RunRecord, SyncStats, TimeSeries,
    Warning, WarningCode,
};
use iolab_spec::format_bytes;
use iolab_stats::warnings::{foreign_share, BUSY_CPU_PCT, FOREIGN_IO_SHARE};
use serde::Serialize;

use super::Member;

/// A host whose median rate per rank is below this fraction of the other hosts' median is a
/// straggler.
pub const STRAGGLER_FRACTION: f64 = 0.5;

/// The measured passes of every rank, as rank 0 gathers them.
#[derive(Debug, Default)]
pub struct Ranks {
    rows: Vec<Row>,
    /// `--shared-file`, `--stonewall`, as rank 0 ran them.
    pub mode: crate::coord::MpiMode,
    /// `--shared-file`: the file's path.
    pub shared_file: Option<String>,
    /// The other ranks' `--verify` counts per test (rank, [(test, extra.verify)]), added
    /// to rank 0's in the stored run.
    pub verify: Vec<(u32, Vec<(String, serde_json::Value)>)>,
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
    /// All ranks' operations (I/Os; metadata's and dbench's operations).
    ios: u64,
    /// All ranks' operations / (last end − first start), and the same two rates as for
    /// bytes.
    iops: f64,
    first_done_iops: f64,
    last_done_iops: f64,
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
    /// Device traffic and other processes' CPU around the rank's pass, as it sampled them
    /// (kept for the per-machine BUSY_DEVICE/BUSY_CPU judgement, not in `env.mpi`).
    #[serde(skip)]
    activity: Activity,
    bytes: u64,
    ios: u64,
    seconds: f64,
    mb_s: f64,
    iops: f64,
    lat_p99_us: f64,
    /// The counted part of its pass, seconds after the barrier released it (its own clock).
    start_s: f64,
    end_s: f64,
    /// Seconds it spent in exchanges with the other ranks since its last pass (waiting at
    /// the barrier included).
    coord_s: f64,
    /// `--stonewall`: another rank's end ended this rank's pass.
    stonewalled: bool,
}

/// One rank's pass as it arrives.
#[derive(Debug)]
pub struct Arrived {
    pub test: String,
    pub warm: bool,
    pub pass: PassRecord,
    /// The counted part of the pass, seconds after the barrier released the rank.
    pub start_s: f64,
    pub end_s: f64,
    /// Seconds the rank spent in exchanges since its last pass (the barrier included).
    pub coord_s: f64,
    pub stonewalled: bool,
}

impl Ranks {
    /// Adds one pass of every rank (in rank order) and returns its aggregate.
    pub fn add(&mut self, members: &[Member], passes: Vec<Arrived>) -> PassRecord {
        let first_start = fold(&passes, |p| p.start_s, f64::min);
        let first_end = fold(&passes, |p| p.end_s, f64::min);
        let last_end = fold(&passes, |p| p.end_s, f64::max);
        let last_start = fold(&passes, |p| p.start_s, f64::max);
        let span = (last_end - first_start).max(1e-9);
        let records: Vec<&PassRecord> = passes.iter().map(|p| &p.pass).collect();
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
        let (test, warm) = (passes[0].test.clone(), passes[0].warm);
        if !warm {
            // Each rank's count up to the first rank's end, prorated over its own counted
            // time, over (first end − first start).
            let until_first = |count: fn(&PassRecord) -> u64| -> f64 {
                let sum: f64 = passes
                    .iter()
                    .map(|a| {
                        let own = (a.end_s - a.start_s).max(1e-9);
                        count(&a.pass) as f64 * ((first_end - a.start_s) / own).clamp(0.0, 1.0)
                    })
                    .sum();
                sum / (first_end - first_start).max(1e-9)
            };
            let host = |r: usize| members.get(r).map(|m| m.host.clone()).unwrap_or_default();
            self.rows.push(Row {
                test,
                index: agg.index,
                mb_s: agg.mb_s,
                first_done_mb_s: until_first(|p| p.bytes) / 1e6,
                last_done_mb_s: agg.mb_s,
                bytes: agg.bytes,
                ios: agg.ios,
                iops: agg.iops,
                first_done_iops: until_first(|p| p.ios),
                last_done_iops: agg.iops,
                seconds: span,
                start_skew_s: last_start - first_start,
                ranks: passes
                    .iter()
                    .enumerate()
                    .map(|(r, a)| RankPass {
                        rank: r as u32,
                        host: host(r),
                        activity: a.pass.context.activity.clone(),
                        bytes: a.pass.bytes,
                        ios: a.pass.ios,
                        seconds: a.pass.seconds,
                        mb_s: a.pass.mb_s,
                        iops: a.pass.iops,
                        lat_p99_us: a.pass.lat_us.p99,
                        start_s: a.start_s,
                        end_s: a.end_s,
                        coord_s: a.coord_s,
                        stonewalled: a.stonewalled,
                    })
                    .collect(),
            });
        }
        agg
    }

    /// Puts what the ranks measured in the run: `env.mpi`, a note on the ranks and hosts,
    /// a per-host line per test, and a STRAGGLER_HOST warning per slow host. A metadata
    /// run's figures are operations per second, the others' MB/s.
    pub fn record(&self, members: &[Member], run: &mut RunRecord, stopped: bool) {
        let hosts = hosts(members);
        let unit = Unit::of(&run.workload);
        let per_host_mb = self.per_host(&hosts, |p| p.mb_s);
        let per_host_ops = self.per_host(&hosts, |p| p.iops);
        let by_test = |rows: &[(String, BTreeMap<String, f64>)]| {
            rows.iter()
                .map(|(t, h)| serde_json::json!({"test": t, "hosts": h}))
                .collect::<Vec<_>>()
        };
        let doc = serde_json::json!({
            "ranks": members,
            "hosts": hosts.iter().map(|(h, r)| serde_json::json!({"host": h, "ranks": r}))
                .collect::<Vec<_>>(),
            "passes": self.rows,
            "host_mb_s": by_test(&per_host_mb),
            "host_ops_s": by_test(&per_host_ops),
            "host_unit": unit.name(),
            "stopped_by_signal": stopped,
            "shared_file": self.shared_file,
            "stonewall": self.mode.stonewall,
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
            "mpi: {} ranks on {} host(s): {}; {}, every rank timing its own {} from the \
             barrier before it; device traffic and other processes' CPU are judged per \
             machine, with every rank's I/O and CPU there counted as the run's own",
            members.len(),
            hosts.len(),
            host_list.join(", "),
            unit.rule(),
            unit.pass(),
        ));
        let bound: Vec<String> = members
            .iter()
            .filter(|m| m.cpus[0] > 0 && m.cpus[0] < m.cpus[1])
            .map(|m| format!("rank {} ({} of {})", m.rank, m.cpus[0], m.cpus[1]))
            .collect();
        if !bound.is_empty() {
            run.notes.push(format!(
                "mpi: ranks bound to fewer CPUs than the host has: {}; on a busy host a rank \
                 bound to a loaded CPU completes its I/O late (mpirun binds by default: \
                 `--bind-to none` unless that is what you measure)",
                bound.join(", ")
            ));
        }
        let per_host = match unit {
            Unit::Ops => &per_host_ops,
            _ => &per_host_mb,
        };
        for (test, by_host) in per_host {
            let cells: Vec<String> = by_host
                .iter()
                .map(|(h, v)| format!("{h} {v:.2} {}", unit.name()))
                .collect();
            run.notes
                .push(format!("mpi per host, {test}: {}", cells.join(", ")));
        }
        self.add_verify(members, run);
        run.warnings.extend(stragglers(per_host, &hosts, unit));
        run.warnings
            .extend(busy(&self.rows, members, run.settings.direct));
    }

    /// For every test (in the order they ran), each host's median over passes of its
    /// ranks' summed `rate`.
    fn per_host(
        &self,
        hosts: &[(String, Vec<u32>)],
        rate: fn(&RankPass) -> f64,
    ) -> Vec<(String, BTreeMap<String, f64>)> {
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
                            .map(|r| r.ranks.iter().filter(|p| &p.host == h).map(rate).sum())
                            .collect();
                        (h.clone(), iolab_stats::median(&sums))
                    })
                    .collect();
                (t, by_host)
            })
            .collect()
    }
}

/// What a run's per-host figures and headline are: MB/s (block presets, dbench) or
/// operations per second (metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Mb,
    Ops,
    Replay,
}

impl Unit {
    /// What the workload stored as `workload` says one rank times.
    fn of(workload: &str) -> Unit {
        use iolab_measure::workload::{named, MpiPass};
        match named(workload).and_then(|w| w.mpi()) {
            Some(MpiPass::Phase) => Unit::Ops,
            Some(MpiPass::Replay) => Unit::Replay,
            Some(MpiPass::Pass) | None => Unit::Mb,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Ops => "ops/s",
            _ => "MB/s",
        }
    }

    /// How the aggregate is made.
    fn rule(self) -> &'static str {
        match self {
            Unit::Mb => "each pass's MB/s is all ranks' bytes / (last end − first start)",
            Unit::Ops => "each phase's ops/s is all ranks' operations / (last end − first start)",
            Unit::Replay => {
                "each replay's MB/s is all ranks' bytes of the measured part / (last end − \
                 first start)"
            }
        }
    }

    /// What one rank times.
    fn pass(self) -> &'static str {
        match self {
            Unit::Mb => "pass",
            Unit::Ops => "phase",
            Unit::Replay => "replay",
        }
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

impl Ranks {
    /// Adds the other ranks' `--verify` counts to each test's in `run` (so a mismatch any
    /// rank found is the stored run's), with a note per rank that found one.
    fn add_verify(&self, members: &[Member], run: &mut RunRecord) {
        for (rank, tests) in &self.verify {
            let host = members.get(*rank as usize).map_or("?", |m| m.host.as_str());
            for (name, counts) in tests {
                let Ok(theirs) = serde_json::from_value::<Tally>(counts.clone()) else {
                    run.notes.push(format!(
                        "mpi: rank {rank} on {host} sent --verify counts for {name} this \
                         build cannot read"
                    ));
                    continue;
                };
                let Some(t) = run.tests.iter_mut().find(|t| &t.name == name) else {
                    continue;
                };
                if theirs.failures > 0 {
                    run.notes.push(format!(
                        "mpi: rank {rank} on {host}: --verify found {} of {} {} not as \
                         written in {name}",
                        theirs.failures,
                        theirs.checked,
                        theirs.unit.as_str()
                    ));
                }
                let mut ours: Tally = t.runner_extra().verify.unwrap_or_default();
                ours.merge(theirs);
                iolab_measure::extra::RunnerExtra {
                    verify: Some(ours),
                    ..Default::default()
                }
                .put(&mut t.extra);
            }
        }
    }
}

/// The ranks on each machine (one kernel: one /proc/diskstats, one process table), named
/// by their hosts; a rank that did not say its kernel is a machine of its own.
fn machines(members: &[Member]) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>, Vec<String>)> = Vec::new();
    for m in members {
        let key = match m.kernel.is_empty() {
            true => format!("rank {}", m.rank),
            false => m.kernel.clone(),
        };
        match out.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, r, h)) => {
                r.push(m.rank);
                if !h.contains(&m.host) {
                    h.push(m.host.clone());
                }
            }
            None => out.push((key, vec![m.rank], vec![m.host.clone()])),
        }
    }
    out.into_iter().map(|(_, r, h)| (h.join(", "), r)).collect()
}

/// BUSY_DEVICE and BUSY_CPU judged per machine, named by its hosts: a device's traffic
/// beyond what every rank on that machine moved (counted or not), with direct I/O only, as
/// for a single process; and other processes' CPU, which each rank samples without the
/// other ranks on its kernel (`count_as_ours`). One warning per test and machine, from its
/// worst pass.
fn busy(rows: &[Row], members: &[Member], direct: bool) -> Vec<Warning> {
    let mut out = Vec::new();
    let machines = machines(members);
    let mut tests: Vec<&str> = Vec::new();
    for r in rows {
        if !tests.contains(&r.test.as_str()) {
            tests.push(&r.test);
        }
    }
    for test in tests {
        for (hosts, ranks) in &machines {
            let mut worst_dev: Option<(f64, u64, u64, String)> = None;
            let mut worst_cpu: Option<(f64, u32, &Activity)> = None;
            for row in rows.iter().filter(|r| r.test == test) {
                let here: Vec<&RankPass> = row
                    .ranks
                    .iter()
                    .filter(|p| ranks.contains(&p.rank))
                    .collect();
                let mut devices: Vec<&str> = Vec::new();
                for p in &here {
                    for d in &p.activity.devices {
                        if !devices.contains(&d.device.as_str()) {
                            devices.push(&d.device);
                        }
                    }
                }
                for dev in devices {
                    // Each rank saw the machine's whole traffic (plus back its own uncounted
                    // bytes); the largest window is the one that holds every rank's pass.
                    let mut seen = 0;
                    let mut ours = 0;
                    for p in &here {
                        if let Some(d) = p.activity.devices.iter().find(|d| d.device == dev) {
                            let own = p.activity.own_uncounted_bytes;
                            seen = seen.max(d.read_bytes + d.write_bytes + own);
                            ours += p.bytes + own;
                        }
                    }
                    let foreign = seen.saturating_sub(ours);
                    let share = foreign as f64 / ours.max(1) as f64;
                    if direct
                        && foreign > 1 << 20
                        && share > FOREIGN_IO_SHARE
                        && worst_dev.as_ref().is_none_or(|(s, _, _, _)| share > *s)
                    {
                        worst_dev = Some((share, foreign, ours, dev.to_string()));
                    }
                }
                for p in &here {
                    let a = &p.activity;
                    if a.other_cpu_pct > BUSY_CPU_PCT
                        && worst_cpu.is_none_or(|(c, _, _)| a.other_cpu_pct > c)
                    {
                        worst_cpu = Some((a.other_cpu_pct, row.index, a));
                    }
                }
            }
            if let Some((_, foreign, ours, dev)) = worst_dev {
                out.push(Warning {
                    code: WarningCode::BusyDevice,
                    message: format!(
                        "on {hosts}: {dev} moved {} more than the ranks there did during a \
                         pass ({}): the device was shared",
                        format_bytes(foreign),
                        foreign_share(foreign, ours, "their")
                    ),
                    fix: format!("stop other I/O on {dev} on {hosts} and rerun"),
                    test: Some(test.to_string()),
                });
            }
            if let Some((pct, index, a)) = worst_cpu {
                let who: Vec<String> = a
                    .top_processes
                    .iter()
                    .map(|p| format!("{} {:.0}%", p.name, p.cpu_pct))
                    .collect();
                out.push(Warning {
                    code: WarningCode::BusyCpu,
                    message: format!(
                        "on {hosts}: other processes used {pct:.0}% of a CPU during pass \
                         {index} ({})",
                        if who.is_empty() {
                            "many small ones".into()
                        } else {
                            who.join(", ")
                        }
                    ),
                    fix: format!(
                        "close other programs on {hosts}, or accept the number as measured \
                         under load"
                    ),
                    test: Some(test.to_string()),
                });
            }
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
    unit: Unit,
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
                        "host {h}: {v:.2} {u} per rank, under {:.0}% of the other hosts' \
                         {typical:.2} {u} per rank (median)",
                        STRAGGLER_FRACTION * 100.0,
                        u = unit.name()
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
    let dir = |f: fn(&TimeSeries) -> &Option<iolab_measure::DirSeries>| {
        let mut sum = iolab_measure::DirSeries::default();
        for p in records {
            if let Some(d) = f(&p.timeseries) {
                sum.merge_at(d, 0);
            }
        }
        sum.non_empty()
    };
    TimeSeries {
        interval_ms: interval,
        bytes,
        read: dir(|t| &t.read),
        write: dir(|t| &t.write),
        ..TimeSeries::default()
    }
}

#[cfg(test)]
mod tests {
    use iolab_measure::{CpuUsage, LatencyHistogram};

    use super::*;

    fn member(rank: u32, host: &str) -> Member {
        Member {
            rank,
            host: host.into(),
            pid: 100 + rank,
            kernel: String::new(),
            cpus: [2, 2],
            version: "0".into(),
        }
    }

    fn arrived(warm: bool, pass: PassRecord, start_s: f64, end_s: f64) -> Arrived {
        Arrived {
            test: "T".into(),
            warm,
            pass,
            start_s,
            end_s,
            coord_s: 0.001,
            stonewalled: false,
        }
    }

    /// A read pass of `bytes` over `seconds` with `ios` latencies of `lat_ns`.
    fn pass(bytes: u64, seconds: f64, ios: u64, lat_ns: u64) -> PassRecord {
        let mut h = LatencyHistogram::new();
        for _ in 0..ios {
            h.record(lat_ns);
        }
        let read = DirResult::from_histogram(bytes, seconds, h);
        PassRecord::new(
            1,
            seconds,
            Some(read),
            None,
            None,
            CpuUsage::default(),
            TimeSeries {
                interval_ms: 100,
                bytes: vec![bytes / 2, bytes / 2],
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_pass_adds_bytes_and_ios_merges_latencies_and_spans_first_start_to_last_end() {
        let members = [member(0, "a"), member(1, "b")];
        let mut ranks = Ranks::default();
        let agg = ranks.add(
            &members,
            vec![
                arrived(false, pass(10_000_000, 1.0, 10, 1_000), 0.1, 1.1),
                arrived(false, pass(30_000_000, 1.0, 30, 9_000), 0.3, 1.3),
            ],
        );
        assert_eq!(agg.bytes, 40_000_000);
        assert_eq!(agg.ios, 40);
        // 40 MB over 1.2 s (0.1 .. 1.3).
        assert!((agg.seconds - 1.2).abs() < 1e-9);
        assert!((agg.mb_s - 40.0 / 1.2).abs() < 1e-9);
        assert_eq!(agg.read.as_ref().unwrap().histogram.count(), 40);
        assert!(
            agg.lat_us.max >= 8.9 && agg.lat_us.min <= 1.01,
            "{:?}",
            agg.lat_us
        );
        assert_eq!(agg.timeseries.bytes, vec![20_000_000, 20_000_000]);
        let row = &ranks.rows[0];
        // By the first end (1.1 s) rank 0 did all 10 MB and rank 1 80% of its 30: 34 MB
        // over 1.0 s.
        assert!(
            (row.first_done_mb_s - 34.0).abs() < 1e-9,
            "{}",
            row.first_done_mb_s
        );
        assert!((row.start_skew_s - 0.2).abs() < 1e-9);
        // The same for operations: 40 over 1.2 s, and 10 + 24 by the first end.
        assert_eq!(row.ios, 40);
        assert!((row.iops - 40.0 / 1.2).abs() < 1e-9, "{}", row.iops);
        assert!(
            (row.first_done_iops - 34.0).abs() < 1e-9,
            "{}",
            row.first_done_iops
        );
        assert_eq!(row.last_done_iops, row.iops);
        // Warm-ups are aggregated for the ranks but not kept.
        ranks.add(
            &members,
            vec![
                arrived(true, pass(1, 1.0, 1, 1), 0.0, 1.0),
                arrived(true, pass(1, 1.0, 1, 1), 0.0, 1.0),
            ],
        );
        assert_eq!(ranks.rows.len(), 1);
    }

    fn run_of(ranks: &Ranks, members: &[Member]) -> RunRecord {
        run_of_workload(ranks, members, "block")
    }

    /// A workload whose ranks time phases of operations, as metadata's do (the real
    /// descriptors are iolab-workloads', above this crate).
    struct Phases;

    impl iolab_measure::workload::WorkloadInfo for Phases {
        fn about(&self) -> iolab_measure::workload::About {
            iolab_measure::workload::About {
                name: "metadata",
                counts: iolab_measure::workload::Counts::Operations,
                mpi: Some(iolab_measure::workload::MpiPass::Phase),
            }
        }
    }

    fn run_of_workload(ranks: &Ranks, members: &[Member], workload: &str) -> RunRecord {
        static PHASES: Phases = Phases;
        iolab_measure::workload::install([&PHASES as &dyn iolab_measure::workload::WorkloadInfo]);
        iolab_engine::engines::install();
        let mut run: RunRecord = serde_json::from_value(serde_json::json!({
            "id": null, "uuid": "u", "iolab_version": "0", "preset": "custom",
            "workload": workload,
            "target": {"path": "/t", "kind": "dir", "io_path": "/t", "fs_type": "ext4",
                       "size": 1},
            "settings": crate::context::plain_settings(1, std::time::Duration::from_secs(1), 1,
                                                       true),
            "engine": "psync", "command_line": [], "label": null, "started_at": "",
            "finished_at": null, "complete": true, "notes": [], "warnings": [],
            "env": {}, "study": null, "config_label": null, "study_meta": null, "tests": []
        }))
        .unwrap();
        ranks.record(members, &mut run, false);
        run
    }

    /// A pass of `mb` MB whose rank saw `dev_mb` MB on `dev` (after taking off its own
    /// `own_mb` uncounted MB) and other processes at `cpu` % of a CPU.
    fn seen(mb: u64, dev: &str, dev_mb: u64, own_mb: u64, cpu: f64) -> Arrived {
        let mut p = pass(mb * 1_000_000, 1.0, 1, 1);
        p.context.activity = Activity {
            devices: vec![iolab_measure::DeviceIo {
                device: dev.into(),
                read_bytes: dev_mb * 1_000_000,
                write_bytes: 0,
                read_requests: 0,
                write_requests: 0,
            }],
            other_cpu_pct: cpu,
            top_processes: vec![iolab_measure::ProcessCpu {
                pid: 9,
                name: "make".into(),
                cpu_pct: cpu,
            }],
            cpu_resolution_pct: 1.25,
            own_uncounted_bytes: own_mb * 1_000_000,
        };
        arrived(false, p, 0.0, 1.0)
    }

    fn on(rank: u32, host: &str, kernel: &str) -> Member {
        Member {
            kernel: kernel.into(),
            ..member(rank, host)
        }
    }

    #[test]
    fn busy_device_and_cpu_are_judged_per_machine_with_every_rank_there_counted_as_ours() {
        // Ranks 0 and 1 share machine k1 (hosts a and a2, two namespaces on one kernel) and
        // loop7: 10 MB each plus 1 MB of ramp each; each saw 22 MB raw, 21 after its own
        // ramp. Rank 2 alone on k2 moved 10 MB and saw 20 MB on vdb.
        let members = [on(0, "a", "k1"), on(1, "a2", "k1"), on(2, "b", "k2")];
        let mut ranks = Ranks::default();
        ranks.add(
            &members,
            vec![
                seen(10, "loop7", 21, 1, 3.0),
                seen(10, "loop7", 21, 1, 40.0),
                seen(10, "vdb", 20, 0, 0.0),
            ],
        );
        let run = run_of(&ranks, &members);
        let mut w: Vec<(&str, &str)> = run
            .warnings
            .iter()
            .map(|w| (w.code.as_str(), w.message.as_str()))
            .collect();
        w.sort();
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[1].0, "BUSY_DEVICE");
        assert!(
            w[1].1
                .starts_with("on b: vdb moved 9.54 MiB more than the ranks there did")
                && w[1].1.contains("(100% on top"),
            "{}",
            w[1].1
        );
        assert_eq!(w[0].0, "BUSY_CPU");
        assert!(
            w[0].1
                .starts_with("on a, a2: other processes used 40% of a CPU during pass 1")
                && w[0].1.contains("make 40%"),
            "{}",
            w[0].1
        );
        assert!(run.notes.iter().any(|n| n.contains("judged per machine")));

        // Buffered I/O: device traffic is not iolab's alone to judge (as for one process).
        let mut run = run_of(&ranks, &members);
        run.warnings.clear();
        run.settings.direct = false;
        ranks.record(&members, &mut run, false);
        assert!(
            run.warnings
                .iter()
                .all(|w| w.code.as_str() != "BUSY_DEVICE"),
            "{:?}",
            run.warnings
        );
    }

    #[test]
    fn every_ranks_verify_counts_are_the_stored_runs() {
        let members = [member(0, "a"), member(1, "b"), member(2, "c")];
        let mut ranks = Ranks::default();
        let counts = |checked: u64, failures: u64| {
            serde_json::json!({"unit": "blocks", "checked": checked, "ok": checked - failures,
                "failures": failures,
                "classes": {"ok": checked - failures, "zeroed": failures},
                "failure_samples": []})
        };
        ranks.verify = vec![
            (1, vec![("T".into(), counts(8, 0))]),
            (2, vec![("T".into(), counts(8, 3))]),
        ];
        let mut run = run_of(&Ranks::default(), &members);
        run.tests.push(iolab_measure::TestRecord {
            name: "T".into(),
            group: "T".into(),
            job: iolab_spec::JobSpec::new(iolab_spec::Rw::Write, 4096, 1, 1),
            passes: Vec::new(),
            summary: Default::default(),
            extra: serde_json::json!({"verify": counts(8, 0)}),
        });
        ranks.record(&members, &mut run, false);
        let v = &run.tests[0].extra["verify"];
        assert_eq!(v["checked"], 24, "{v}");
        assert_eq!(v["failures"], 3, "{v}");
        assert_eq!(v["classes"]["zeroed"], 3, "{v}");
        assert!(
            run.notes
                .iter()
                .any(|n| n == "mpi: rank 2 on c: --verify found 3 of 8 blocks not as written in T"),
            "{:?}",
            run.notes
        );
        // The run's integrity verdict sees them.
        assert!(crate::verify::failures(&run).is_some());
    }

    #[test]
    fn a_host_far_slower_per_rank_is_a_straggler_and_fewer_ranks_are_not() {
        // Hosts a and b run two ranks at 10 MB/s each; c one rank at 10 (not slow per
        // rank), d one at 2 (slow).
        let members = [
            member(0, "a"),
            member(1, "a"),
            member(2, "b"),
            member(3, "b"),
            member(4, "c"),
            member(5, "d"),
        ];
        let mut ranks = Ranks::default();
        let rates = [10, 10, 10, 10, 10, 2];
        ranks.add(
            &members,
            rates
                .iter()
                .map(|&r| arrived(false, pass(r * 1_000_000, 1.0, 1, 1), 0.0, 1.0))
                .collect(),
        );
        let run = run_of(&ranks, &members);
        let w: Vec<&Warning> = run.warnings.iter().collect();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].code.as_str(), "STRAGGLER_HOST");
        assert!(
            w[0].message.starts_with("host d: 2.00 MB/s per rank"),
            "{}",
            w[0].message
        );
        assert_eq!(w[0].test.as_deref(), Some("T"));
        let mpi = &run.env["mpi"];
        assert_eq!(mpi["hosts"].as_array().unwrap().len(), 4);
        assert_eq!(mpi["host_mb_s"][0]["hosts"]["a"], 20.0);
        let notes = run.notes.join("\n");
        assert!(
            notes.contains(
                "6 ranks on 4 host(s): a (ranks 0-1), b (ranks 2-3), c (ranks 4), d (ranks 5)"
            ),
            "{notes}"
        );
        // One host alone: no straggler whatever its ranks do.
        let one = [member(0, "a"), member(1, "a")];
        let mut ranks = Ranks::default();
        ranks.add(
            &one,
            vec![
                arrived(false, pass(10_000_000, 1.0, 1, 1), 0.0, 1.0),
                arrived(false, pass(1_000_000, 1.0, 1, 1), 0.0, 1.0),
            ],
        );
        assert!(run_of(&ranks, &one).warnings.is_empty());
    }

    #[test]
    fn a_metadata_run_is_judged_per_host_in_operations_per_second() {
        // A stat phase: no bytes; host a does 1000 operations in 1 s, host b 100.
        let members = [member(0, "a"), member(1, "b")];
        let mut ranks = Ranks::default();
        ranks.add(
            &members,
            vec![
                arrived(false, pass(0, 1.0, 1000, 1), 0.0, 1.0),
                arrived(false, pass(0, 1.0, 100, 1), 0.0, 1.0),
            ],
        );
        let run = run_of_workload(&ranks, &members, "metadata");
        let mpi = &run.env["mpi"];
        assert_eq!(mpi["host_unit"], "ops/s");
        assert_eq!(mpi["host_ops_s"][0]["hosts"]["a"], 1000.0);
        assert_eq!(mpi["host_mb_s"][0]["hosts"]["a"], 0.0);
        assert_eq!(mpi["passes"][0]["ios"], 1100);
        let w: Vec<&Warning> = run.warnings.iter().collect();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].message.starts_with("host b: 100.00 ops/s per rank"),
            "{}",
            w[0].message
        );
        let notes = run.notes.join("\n");
        assert!(
            notes.contains("mpi per host, T: a 1000.00 ops/s, b 100.00 ops/s"),
            "{notes}"
        );
        assert!(
            notes.contains("each phase's ops/s is all ranks' operations"),
            "{notes}"
        );
    }
}
