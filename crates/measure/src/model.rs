//! Passes, tests and runs: the records every workload produces and every consumer reads.

use iolab_spec::{EngineKind, IoDir, JobSpec, RunSettings};
use serde::{Deserialize, Serialize};

use crate::activity::Activity;
use crate::cpu::CpuUsage;
use crate::histogram::LatencyHistogram;
use crate::warning::Warning;

/// Bytes in a megabyte as iolab prints MB/s: 10^6 (CrystalDiskMark's and fio's MB/s).
pub const MB: f64 = 1_000_000.0;

/// Latency percentiles of a set of I/Os, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatSummary {
    pub mean: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
}

/// One direction (reads or writes) of a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirResult {
    pub bytes: u64,
    pub ios: u64,
    pub mb_s: f64,
    pub iops: f64,
    pub lat_us: LatSummary,
    /// Full latency histogram (nanoseconds); serialised compactly.
    pub histogram: LatencyHistogram,
}

impl DirResult {
    pub fn from_histogram(bytes: u64, seconds: f64, histogram: LatencyHistogram) -> Self {
        let ios = histogram.count();
        let secs = seconds.max(1e-9);
        DirResult {
            bytes,
            ios,
            mb_s: bytes as f64 / MB / secs,
            iops: ios as f64 / secs,
            lat_us: histogram.summary_us(),
            histogram,
        }
    }
}

/// Flushes issued by the job (`--fsync N`, `--end-fsync`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncStats {
    pub count: u64,
    pub lat_us: LatSummary,
}

/// Bytes completed per interval since the start of the pass, and (for block passes stored
/// since the series gained them) each direction's completions and latency per interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSeries {
    pub interval_ms: u32,
    pub bytes: Vec<u64>,
    /// Reads per interval; absent in older records and in passes without reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<DirSeries>,
    /// Writes per interval; absent in older records and in passes without writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<DirSeries>,
    /// Milliseconds the pass's threads waited for a CPU in each interval (the scheduler's
    /// run delay, summed over its threads); empty in older records and where the kernel
    /// does not keep it. A rate that falls while this rises fell for want of CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_wait_ms: Vec<u32>,
    /// Milliseconds of each interval the hypervisor took from the machine's CPUs (their
    /// mean steal time); empty in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steal_ms: Vec<u32>,
    /// Milliseconds of CPU time the machine's other work used in each interval, over all
    /// its CPUs (its busy time less iolab's own: 200 is two CPUs busy with it throughout);
    /// empty in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others_cpu_ms: Vec<u32>,
    /// Milliseconds of CPU time left idle in each interval (idle and iowait), over all
    /// CPUs; empty in older records.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_cpu_ms: Vec<u32>,
    /// Each job thread's own series (bytes, `read`, `write`), in thread order, where the
    /// job asked for them (`JobSpec::thread_series`: fio's per-job logs); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<TimeSeries>,
}

/// One direction's completions per interval: bytes, I/Os, their latencies summed (for the
/// mean) and the largest. All four have one entry per interval of the series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirSeries {
    pub bytes: Vec<u64>,
    pub ios: Vec<u64>,
    pub lat_sum_ns: Vec<u64>,
    pub lat_max_ns: Vec<u64>,
}

impl DirSeries {
    /// Room for `n` intervals.
    pub fn with_capacity(n: usize) -> DirSeries {
        DirSeries {
            bytes: Vec::with_capacity(n),
            ios: Vec::with_capacity(n),
            lat_sum_ns: Vec::with_capacity(n),
            lat_max_ns: Vec::with_capacity(n),
        }
    }

    /// Intervals held.
    pub fn len(&self) -> usize {
        self.ios.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ios.iter().all(|&n| n == 0)
    }

    /// Itself, or `None` when it holds no completion.
    pub fn non_empty(self) -> Option<DirSeries> {
        (!self.is_empty()).then_some(self)
    }

    fn grow(&mut self, n: usize) {
        if self.ios.len() < n {
            self.bytes.resize(n, 0);
            self.ios.resize(n, 0);
            self.lat_sum_ns.resize(n, 0);
            self.lat_max_ns.resize(n, 0);
        }
    }

    /// One completion of `bytes` after `lat_ns` in interval `i`.
    #[inline]
    pub fn add(&mut self, i: usize, bytes: u64, lat_ns: u64) {
        self.grow(i + 1);
        self.bytes[i] += bytes;
        self.ios[i] += 1;
        self.lat_sum_ns[i] += lat_ns;
        if lat_ns > self.lat_max_ns[i] {
            self.lat_max_ns[i] = lat_ns;
        }
    }

    /// `other`'s intervals added to this one's, `shift` intervals later (another job or
    /// rank of the same pass).
    pub fn merge_at(&mut self, other: &DirSeries, shift: usize) {
        self.grow(other.len() + shift);
        for i in 0..other.len() {
            let j = i + shift;
            self.bytes[j] += other.bytes.get(i).copied().unwrap_or(0);
            self.ios[j] += other.ios[i];
            self.lat_sum_ns[j] += other.lat_sum_ns.get(i).copied().unwrap_or(0);
            self.lat_max_ns[j] =
                self.lat_max_ns[j].max(other.lat_max_ns.get(i).copied().unwrap_or(0));
        }
    }

    /// Intervals `from..to` taken together: (bytes, I/Os, latency sum ns, latency max ns).
    pub fn span(&self, from: usize, to: usize) -> (u64, u64, u64, u64) {
        let to = to.min(self.len());
        let from = from.min(to);
        let sum = |v: &[u64]| v.get(from..to).map_or(0, |s| s.iter().sum());
        let max = self
            .lat_max_ns
            .get(from..to)
            .and_then(|s| s.iter().max().copied())
            .unwrap_or(0);
        (sum(&self.bytes), sum(&self.ios), sum(&self.lat_sum_ns), max)
    }
}

impl TimeSeries {
    /// Intervals `from..to` of both directions taken together: (I/Os, latency sum ns, latency
    /// max ns); `None` for a series stored without them.
    pub fn io_span(&self, from: usize, to: usize) -> Option<(u64, u64, u64)> {
        if self.read.is_none() && self.write.is_none() {
            return None;
        }
        let mut out = (0, 0, 0);
        for d in [&self.read, &self.write].into_iter().flatten() {
            let (_, n, sum, max) = d.span(from, to);
            out.0 += n;
            out.1 += sum;
            out.2 = out.2.max(max);
        }
        Some(out)
    }

    /// MB/s of each interval (the last one may be partial and is scaled by its true length
    /// only when `seconds` says how long the pass was).
    pub fn mb_s(&self, seconds: f64) -> Vec<f64> {
        let iv = self.interval_ms as f64 / 1000.0;
        let n = self.bytes.len();
        self.bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                let len = if i + 1 == n {
                    (seconds - iv * i as f64).clamp(iv * 0.01, iv)
                } else {
                    iv
                };
                b as f64 / MB / len
            })
            .collect()
    }
}

/// An I/O error, never swallowed: errno, where and how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoErrorRecord {
    pub errno: i32,
    pub message: String,
    pub dir: IoDir,
    pub offset: u64,
    pub len: u64,
}

/// One measured pass of one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassRecord {
    /// 1-based number of the measured pass.
    pub index: u32,
    pub bytes: u64,
    pub ios: u64,
    pub seconds: f64,
    pub mb_s: f64,
    pub iops: f64,
    /// Latency of all I/Os of the pass.
    pub lat_us: LatSummary,
    pub read: Option<DirResult>,
    pub write: Option<DirResult>,
    /// Trims (fio's third direction: a job file's `rw=trim`, `randtrim`): holes punched or
    /// ranges discarded, counted in `bytes`, `ios` and `lat_us` with the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trim: Option<DirResult>,
    pub sync: Option<SyncStats>,
    pub cpu: CpuUsage,
    pub timeseries: TimeSeries,
    pub errors: Vec<IoErrorRecord>,
    /// What surrounded the pass: page-cache residency, device and CPU activity.
    #[serde(default)]
    pub context: PassContext,
}

/// Conditions around a pass that decide whether its numbers can be trusted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PassContext {
    /// Fraction (0..1) of the test region in the page cache before the pass (mincore).
    pub cache_resident_before: Option<f64>,
    /// The same after the pass.
    pub cache_resident_after: Option<f64>,
    /// Device bytes and other processes' CPU during the pass.
    pub activity: Activity,
}

impl PassRecord {
    /// Builds a pass from per-direction results; totals and combined latency derive from them.
    /// Errors, if any, are added to `errors` afterwards.
    pub fn new(
        index: u32,
        seconds: f64,
        read: Option<DirResult>,
        write: Option<DirResult>,
        sync: Option<SyncStats>,
        cpu: CpuUsage,
        timeseries: TimeSeries,
    ) -> Self {
        let mut all = LatencyHistogram::new();
        let mut bytes = 0;
        for d in read.iter().chain(write.iter()) {
            all.merge(&d.histogram);
            bytes += d.bytes;
        }
        let ios = all.count();
        let secs = seconds.max(1e-9);
        PassRecord {
            index,
            bytes,
            ios,
            seconds,
            mb_s: bytes as f64 / MB / secs,
            iops: ios as f64 / secs,
            lat_us: all.summary_us(),
            read,
            write,
            trim: None,
            sync,
            cpu,
            timeseries,
            errors: Vec::new(),
            context: PassContext::default(),
        }
    }
}

/// Statistics of one metric over the passes of a test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    pub n: u32,
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
    /// Coefficient of variation, stddev / mean (0 for a single pass).
    pub cv: f64,
    /// 95% confidence interval of the headline value.
    pub ci_low: f64,
    pub ci_high: f64,
}

/// How a test's headline value is chosen from its passes (`--score`); stored and shown as
/// "median" or "best".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Score {
    /// The median of the passes (iolab's default).
    Median,
    /// The best pass (CrystalDiskMark's "best of N"): highest MB/s.
    Best,
}

impl Score {
    pub fn as_str(self) -> &'static str {
        match self {
            Score::Median => "median",
            Score::Best => "best",
        }
    }
}

impl std::fmt::Display for Score {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `TestSummary::score` as its stored text: the score's name, or "" before the passes are
/// summarised (what a run killed mid-test left in the store).
mod score_text {
    use super::Score;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(score: &Option<Score>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(score.map_or("", Score::as_str))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Score>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(None);
        }
        Score::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&text)).map(Some)
    }
}

/// `RunRecord::engine` as its stored text: the engine's name, or "" for a run that used
/// none.
mod engine_text {
    use super::EngineKind;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(engine: &Option<EngineKind>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(engine.map_or("", EngineKind::as_str))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<EngineKind>, D::Error> {
        super::engine_of_text(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// The engine a run stored as `text` used: `None` for "" (no engine), an error naming
/// the text for a name this version does not know.
pub fn engine_of_text(text: &str) -> Result<Option<EngineKind>, serde_json::Error> {
    if text.is_empty() {
        return Ok(None);
    }
    serde_json::from_value(serde_json::Value::String(text.to_string())).map(Some)
}

impl RunRecord {
    /// The engine the run used as stored and shown: its name, or "" for none.
    pub fn engine_text(&self) -> &'static str {
        self.engine.map_or("", EngineKind::as_str)
    }
}

/// A test's headline numbers over its passes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestSummary {
    pub passes: u32,
    /// MB/s (10^6 bytes/s): the headline value (median of passes unless `score` says best).
    pub mb_s: f64,
    pub iops: f64,
    pub lat_mean_us: f64,
    pub lat_p99_us: f64,
    /// How the headline was chosen: stored as "median" or "best"; `None` (stored as "")
    /// while the test's passes are not summarised yet.
    #[serde(with = "score_text")]
    pub score: Option<Score>,
    pub stats_mb_s: MetricSummary,
    pub stats_iops: MetricSummary,
    pub stats_lat_mean_us: MetricSummary,
    pub stats_lat_p99_us: MetricSummary,
    /// How the confidence intervals were computed.
    pub ci_method: String,
    /// With `--until-stable`: whether the interval reached the target before the limits.
    #[serde(default)]
    pub converged: Option<bool>,
}

impl TestSummary {
    /// The score as stored and shown: "median", "best", or "" before the summary.
    pub fn score_text(&self) -> &'static str {
        self.score.map_or("", Score::as_str)
    }
}

/// One test of a run with its passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    pub name: String,
    pub group: String,
    pub job: JobSpec,
    pub passes: Vec<PassRecord>,
    pub summary: TestSummary,
    /// Workload-specific data (dbench's operation table, copy phases...); null for block tests.
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// What a target is. Serialised as "dir", "file" or "device" (what runs have always
/// stored); any other string (a run stored by another version of iolab) loads as
/// [`TargetKind::Other`] and is printed as it was.
#[derive(Debug, Clone)]
pub enum TargetKind {
    /// A directory: iolab created, and removed again, its own test file in it.
    Dir,
    /// A regular file.
    File,
    /// A block device.
    Device,
    /// A kind this build does not know, kept as it was read.
    Other(String),
}

impl TargetKind {
    /// The stored string: "dir", "file", "device", or an unknown kind as it was.
    pub fn as_str(&self) -> &str {
        match self {
            TargetKind::Dir => "dir",
            TargetKind::File => "file",
            TargetKind::Device => "device",
            TargetKind::Other(s) => s,
        }
    }

    /// The kind a string names.
    pub fn parse(s: &str) -> TargetKind {
        match s {
            "dir" => TargetKind::Dir,
            "file" => TargetKind::File,
            "device" => TargetKind::Device,
            other => TargetKind::Other(other.to_string()),
        }
    }
}

// Equal when the strings are; prints and (de)serialises as the string.
string_enum_impls!(TargetKind);

/// What was measured: the path given, what it is, and the file or device actually used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// The `--target` as the user gave it (absolute).
    pub path: String,
    /// A directory (iolab made its own test file in it), a file or a block device.
    pub kind: TargetKind,
    /// The file or device the I/O went to.
    pub io_path: String,
    /// Filesystem type holding the target ("ext4", "xfs", "tmpfs", ... or "unknown").
    pub fs_type: String,
    /// Size of the test region in bytes.
    pub size: u64,
}

/// A whole run: what was asked, where, when, and every test's passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Store row id (None until stored, or with --no-store).
    pub id: Option<i64>,
    pub uuid: String,
    pub iolab_version: String,
    pub preset: String,
    /// Workload family: "block" for cdm/atto/custom; later "dbench", "copy", ...
    pub workload: String,
    pub target: TargetInfo,
    pub settings: RunSettings,
    /// The engine actually used (after any fallback); `None` when the run used none (JSON
    /// null; stored as "").
    #[serde(with = "engine_text")]
    pub engine: Option<EngineKind>,
    pub command_line: Vec<String>,
    pub label: Option<String>,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub finished_at: Option<String>,
    /// False when the run was interrupted; it then holds the passes it finished.
    pub complete: bool,
    /// Remarks on how the run went (fallbacks, adjustments).
    pub notes: Vec<String>,
    pub warnings: Vec<Warning>,
    /// Captured environment (kernel, CPU, device chain); null when not captured.
    #[serde(default)]
    pub env: serde_json::Value,
    pub study: Option<String>,
    pub config_label: Option<String>,
    /// For runs of a study: the invocation, the configuration's matrix values, its testbed
    /// spec and what the build reported (knobs, mount, devices); null otherwise.
    #[serde(default)]
    pub study_meta: serde_json::Value,
    pub tests: Vec<TestRecord>,
}

/// The start of the note a run that failed carries (an I/O error or a tool ended it); the
/// rest is the error.
pub const FAILED_NOTE: &str = "failed: ";

impl RunRecord {
    /// Why the run failed, when it did: such a run is stored, but its figures (if it has
    /// any) are not results and are never ranked or compared.
    pub fn failure(&self) -> Option<&str> {
        self.notes.iter().find_map(|n| n.strip_prefix(FAILED_NOTE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_stores_its_score_as_the_same_text() {
        for (score, text) in [
            (Some(Score::Median), "median"),
            (Some(Score::Best), "best"),
            (None, ""),
        ] {
            let summary = TestSummary {
                score,
                ..TestSummary::default()
            };
            let json = serde_json::to_value(&summary).unwrap();
            assert_eq!(json["score"], text);
            assert_eq!(summary.score_text(), text);
            let back: TestSummary = serde_json::from_value(json).unwrap();
            assert_eq!(back.score, score);
        }
        let mut odd = serde_json::to_value(TestSummary::default()).unwrap();
        odd["score"] = "mean".into();
        assert!(serde_json::from_value::<TestSummary>(odd).is_err());
    }

    #[test]
    fn target_kinds_keep_their_strings() {
        for (kind, s) in [
            (TargetKind::Dir, "dir"),
            (TargetKind::File, "file"),
            (TargetKind::Device, "device"),
        ] {
            assert_eq!(serde_json::to_value(&kind).unwrap(), s);
            assert_eq!(
                serde_json::from_value::<TargetKind>(s.into()).unwrap(),
                kind
            );
            assert!(!matches!(TargetKind::parse(s), TargetKind::Other(_)));
        }
        let odd: TargetKind = serde_json::from_value("pipe".into()).unwrap();
        assert_eq!(odd, TargetKind::Other("pipe".into()));
        assert_eq!(odd.to_string(), "pipe");
        assert_eq!(serde_json::to_value(&odd).unwrap(), "pipe");
    }
}
