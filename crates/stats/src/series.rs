//! Rates within a test, from the per-interval byte series every pass stores: a cliff (the
//! rate drops beyond its noise and stays down: a cache filled), stalls (intervals with no
//! completions at a rate that makes an empty interval implausible).
//!
//! A test's series is its passes' series one after another (what came before the first
//! measured interval: preparation, warm-ups and ramps, is not in it, and the gaps between
//! passes are left out). A pass's last interval is partial; it counts with its true length
//! when it is at least half an interval, and is dropped otherwise.

use iolab_measure::{DirSeries, PassRecord, TestRecord, MB};
use iolab_spec::fiojob::logs::LogKind;

/// A cliff: the rate after is at most this share of the rate before (caches fall 2× and
/// more: an SSD's SLC cache 3-10×; a level shift of a busy machine's CPU-bound I/O, which
/// looks the same, rarely halves the rate).
pub const CLIFF_RATIO: f64 = 0.5;
/// A cliff: the fewest intervals before the drop (a second: shorter bursts are mostly a
/// start-up transient on a busy machine).
pub const CLIFF_MIN_SIDE: usize = 10;
/// A cliff: the fewest intervals after the drop (it stays down for a second at least).
pub const CLIFF_MIN_AFTER: usize = 10;
/// A cliff: the share of intervals on each side that may lie on the other side of the
/// midway rate (dips or spikes the noise allows), one interval more than this share.
pub const CLIFF_STRAY: f64 = 0.2;
/// A cliff: the drop is at least this many robust standard deviations (1.4826 × MAD) of
/// the noisier side.
pub const CLIFF_SIGMAS: f64 = 2.0;
/// A cliff: not one if the rate comes back after it, [`CLIFF_BACK_RUN`] intervals in a row
/// at this share of the median before or more (a full cache under load stays full; a busy
/// machine's slow spell ends).
pub const CLIFF_BACK: f64 = 0.75;
/// A cliff: the intervals in a row that make a return (three: an emulated or real SSD that
/// got a moment idle while the host stalled regains a little cache, a fraction of a second
/// of it at the burst rate, not 300 ms).
pub const CLIFF_BACK_RUN: usize = 3;
/// A cliff's return: the intervals at the start of each later pass that do not count (the
/// device was idle while iolab set the pass up).
pub const CLIFF_PASS_START: usize = 5;
/// A cliff: not one when the share of each interval the pass lost of the CPU (its threads'
/// wait for one, and the hypervisor's steal) is this much higher after the drop than
/// before it on average: the rate fell because iolab (or the machine) ran less, which a
/// busy machine's other work does at any moment, not because the device slowed.
pub const CLIFF_CPU_LOSS: f64 = 0.15;
/// A cliff: not one when the machine's other work used this many CPUs more after the drop
/// than before it on average, and more than the machine left idle after it: the other
/// work took CPU the I/O needed (a program that started on a machine whose I/O is
/// CPU-bound, such as a loop device over a tmpfs file, whose kernel threads are not
/// iolab's, so their wait is not in `cpu_wait_ms`).
pub const CLIFF_OTHERS_CPU: f64 = 0.2;
/// A stall: an empty interval counts only in a pass that completed at least this many I/Os
/// per interval on average (fewer, and an empty interval is just the gap between I/Os).
pub const STALL_MIN_IOS_PER_INTERVAL: f64 = 10.0;

/// One interval of a test's series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The pass it belongs to (its 1-based index).
    pub pass: u32,
    pub bytes: u64,
    /// Its length in seconds (a full interval, or a pass's partial last one).
    pub seconds: f64,
    /// Seconds of CPU the pass lost in it (its threads' wait for a CPU plus the machine's
    /// stolen time: `TimeSeries::cpu_wait_ms` and `steal_ms`), where recorded.
    pub cpu_lost_s: Option<f64>,
    /// CPU seconds the machine's other work used in it, over all CPUs
    /// (`TimeSeries::others_cpu_ms`), where recorded.
    pub others_cpu_s: Option<f64>,
    /// CPU seconds left idle in it, over all CPUs (`TimeSeries::idle_cpu_ms`).
    pub idle_cpu_s: Option<f64>,
}

impl Sample {
    pub fn mb_s(&self) -> f64 {
        self.bytes as f64 / MB / self.seconds.max(1e-9)
    }
}

/// The intervals of one pass (a partial last one shorter than half an interval dropped).
pub fn pass_samples(p: &PassRecord) -> Vec<Sample> {
    let ts = &p.timeseries;
    if ts.interval_ms == 0 {
        return Vec::new();
    }
    let iv = ts.interval_ms as f64 / 1000.0;
    let n = ts.bytes.len();
    let mut out = Vec::with_capacity(n);
    for (i, &b) in ts.bytes.iter().enumerate() {
        let len = if i + 1 == n {
            (p.seconds - iv * i as f64).min(iv)
        } else {
            iv
        };
        if len < iv / 2.0 {
            continue;
        }
        let lost = |v: &[u32]| v.get(i).map(|&ms| f64::from(ms) / 1000.0);
        let cpu_lost_s = match (lost(&ts.cpu_wait_ms), lost(&ts.steal_ms)) {
            (None, None) => None,
            (w, st) => Some(w.unwrap_or(0.0) + st.unwrap_or(0.0)),
        };
        out.push(Sample {
            pass: p.index,
            bytes: b,
            seconds: len,
            cpu_lost_s,
            others_cpu_s: lost(&ts.others_cpu_ms),
            idle_cpu_s: lost(&ts.idle_cpu_ms),
        });
    }
    out
}

/// A test's series: its passes' intervals one after another.
pub fn test_samples(t: &TestRecord) -> Vec<Sample> {
    t.passes.iter().flat_map(pass_samples).collect()
}

/// A drop in the rate that stays.
#[derive(Debug, Clone, PartialEq)]
pub struct Cliff {
    /// The pass in which the rate dropped.
    pub pass: u32,
    /// Bytes and seconds of the series before the drop.
    pub bytes_before: u64,
    pub seconds_before: f64,
    /// Median rates (MB/s) before and after it.
    pub before_mb_s: f64,
    pub after_mb_s: f64,
    /// Seconds of the series after the drop.
    pub seconds_after: f64,
    /// Whether the series examined was one pass (false: the test's passes in a row).
    pub within_pass: bool,
}

fn median(v: &[f64]) -> f64 {
    crate::median(v)
}

/// Robust standard deviation: 1.4826 × the median absolute deviation.
fn robust_sd(v: &[f64]) -> f64 {
    let m = median(v);
    let dev: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    1.4826 * median(&dev)
}

/// Whether the CPU explains a fall of the rate from `before` to `after` (where every
/// interval recorded it): the pass lost [`CLIFF_CPU_LOSS`] more of each interval to
/// waiting for a CPU and to steal, or the machine's other work took [`CLIFF_OTHERS_CPU`]
/// more CPUs, and more than it left idle after.
fn cpu_explains(before: &[Sample], after: &[Sample]) -> bool {
    let lost = |v| share(v, |s: &Sample| s.cpu_lost_s);
    if let (Some(b), Some(a)) = (lost(before), lost(after)) {
        if a - b >= CLIFF_CPU_LOSS {
            return true;
        }
    }
    let others = |v| share(v, |s: &Sample| s.others_cpu_s);
    if let (Some(b), Some(a)) = (others(before), others(after)) {
        let idle_after = share(after, |s| s.idle_cpu_s).unwrap_or(0.0);
        if a - b >= CLIFF_OTHERS_CPU && idle_after < a - b {
            return true;
        }
    }
    false
}

/// CPU seconds per second over `v` (of what `f` gives each interval: CPU the pass lost, or
/// the other work's), where every interval recorded it.
fn share(v: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    let sum = v.iter().map(f).sum::<Option<f64>>()?;
    let secs: f64 = v.iter().map(|s| s.seconds).sum();
    (secs > 0.0).then(|| sum / secs)
}

/// The cliff in `samples`, if one is there: the split that best separates a higher level
/// before from a lower one after (most between-segment variance), accepted only if
/// [`CLIFF_MIN_SIDE`] intervals come before it and [`CLIFF_MIN_AFTER`] after, the median
/// after is at most [`CLIFF_RATIO`] of the median before, at most one interval more than
/// [`CLIFF_STRAY`] of each side lies on the other side of the midway rate (the series'
/// first interval, the start-up, aside), the drop is [`CLIFF_SIGMAS`] robust deviations
/// of the noisier side, it lies inside a pass (not at a boundary between two), the rate
/// does not come back after it ([`CLIFF_BACK_RUN`] intervals at [`CLIFF_BACK`] of the rate
/// before), the pass did not lose [`CLIFF_CPU_LOSS`] more of the CPU after it than
/// before, and the machine's other work did not take [`CLIFF_OTHERS_CPU`] more CPUs than
/// before, and more than it left idle after.
pub fn find_cliff(samples: &[Sample]) -> Option<Cliff> {
    let n = samples.len();
    if n < CLIFF_MIN_SIDE + CLIFF_MIN_AFTER {
        return None;
    }
    let r: Vec<f64> = samples.iter().map(Sample::mb_s).collect();
    let total: f64 = r.iter().sum();
    let mut best: Option<(f64, usize)> = None;
    let mut before = 0.0;
    for k in 1..n {
        before += r[k - 1];
        if k < CLIFF_MIN_SIDE || n - k < CLIFF_MIN_AFTER {
            continue;
        }
        let (m1, m2) = (before / k as f64, (total - before) / (n - k) as f64);
        if m1 <= m2 {
            continue;
        }
        let score = (k * (n - k)) as f64 / n as f64 * (m1 - m2) * (m1 - m2);
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, k));
        }
    }
    let (_, k) = best?;
    // Inside a pass: two of its intervals before the drop and one after. A drop at a pass
    // boundary is one pass slower than the one before (HIGH_VARIATION's business); a cache
    // fills at a byte count, not between passes.
    let p = samples[k].pass;
    if k < 2 || samples[k - 2].pass != p || samples.get(k + 1).is_none_or(|s| s.pass != p) {
        return None;
    }
    let (hi, lo) = (&r[..k], &r[k..]);
    let (m1, m2) = (median(hi), median(lo));
    if m1 <= 0.0 || m2 > CLIFF_RATIO * m1 {
        return None;
    }
    let mid = (m1 + m2) / 2.0;
    let consistent = |v: &[f64], above: bool| {
        let stray = v.iter().filter(|&&x| (x > mid) != above).count();
        stray <= (v.len() as f64 * CLIFF_STRAY) as usize + 1
    };
    // The series' first interval is the start-up (queues filling): not held against it.
    if !consistent(&hi[1..], true) || !consistent(lo, false) {
        return None;
    }
    if m1 - m2 < CLIFF_SIGMAS * robust_sd(hi).max(robust_sd(lo)) {
        return None;
    }
    // Not counted: a later pass's first half second, after the gap between passes in
    // which a device that recovers when idle (an SSD's cache) really did regain some.
    let mut since_start = 0usize;
    let fresh: Vec<bool> = samples[k..]
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if i > 0 && s.pass != samples[k + i - 1].pass {
                since_start = 0;
            }
            since_start += 1;
            s.pass != p && since_start <= CLIFF_PASS_START
        })
        .collect();
    let back = |i: usize| !fresh[i] && lo[i] >= CLIFF_BACK * m1;
    if (0..lo.len().saturating_sub(CLIFF_BACK_RUN - 1)).any(|i| (i..i + CLIFF_BACK_RUN).all(back)) {
        return None;
    }
    if cpu_explains(&samples[..k], &samples[k..]) {
        return None;
    }
    // The rates: bytes over seconds of each side without the intervals next to the drop
    // (partly each, or the transition) and the series' first (start-up), so that a rate is
    // not one of a few whole I/Os an interval can hold. Where the drop was: where the
    // cumulative bytes' line before it (through the end of its kept part) meets the line
    // after it (through the end of the interval after the drop, at the rate of the next
    // second: near the drop, not the rate a long test drifts to).
    let (b0, b1) = (usize::from(k > CLIFF_MIN_SIDE), k - 1);
    let (a0, a1) = (k + ((n - k) / 4).max(1), n);
    let rate = |v: &[Sample]| {
        let secs: f64 = v.iter().map(|s| s.seconds).sum();
        v.iter().map(|s| s.bytes).sum::<u64>() as f64 / secs.max(1e-9)
    };
    let (r1, r2) = (rate(&samples[b0..b1]), rate(&samples[a0..a1]));
    let near = rate(&samples[k + 1..n.min(k + 11)]);
    let cum = |to: usize| -> (f64, f64) {
        let v = &samples[..to];
        (
            v.iter().map(|s| s.seconds).sum(),
            v.iter().map(|s| s.bytes).sum::<u64>() as f64,
        )
    };
    let (t1, c1) = cum(b1);
    let (ta, ca) = cum(k + 1);
    let tn = cum(n).0;
    let t = if r1 > near {
        ((ca - c1 - near * ta + r1 * t1) / (r1 - near)).clamp(t1, ta)
    } else {
        cum(k).0
    };
    let bytes = (c1 + r1 * (t - t1)).clamp(0.0, ca);
    Some(Cliff {
        pass: samples[k].pass,
        bytes_before: bytes.round() as u64,
        seconds_before: t,
        before_mb_s: r1 / MB,
        after_mb_s: r2 / MB,
        seconds_after: tn - t,
        within_pass: samples[0].pass == samples[n - 1].pass,
    })
}

/// A test's cliff: in its passes in a row. (Not within one pass alone: a drop at the end
/// of one pass that the next pass does not share did not stay down.)
pub fn test_cliff(t: &TestRecord) -> Option<Cliff> {
    let mut c = find_cliff(&test_samples(t))?;
    c.within_pass = t.passes.len() == 1;
    Some(c)
}

/// SNIA PTS steady state: the window's range (max - min) at most this share of its mean.
pub const SNIA_RANGE: f64 = 0.20;
/// SNIA PTS steady state: the best-fit line's excursion over the window at most this share
/// of its mean.
pub const SNIA_SLOPE: f64 = 0.10;
/// SNIA PTS steady state: rounds in the measurement window.
pub const SNIA_WINDOW: usize = 5;

/// A measurement window judged for steady state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Mean of the window's values.
    pub mean: f64,
    /// max - min, as a share of the mean.
    pub range: f64,
    /// The least-squares line's rise or fall over the window (slope × (rounds - 1)), as a
    /// share of the mean (signed).
    pub excursion: f64,
}

impl Window {
    /// The window of `values` (at least two).
    pub fn of(values: &[f64]) -> Option<Window> {
        let n = values.len();
        if n < 2 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        if mean <= 0.0 {
            return None;
        }
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        let xm = (n - 1) as f64 / 2.0;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (i, v) in values.iter().enumerate() {
            let dx = i as f64 - xm;
            sxy += dx * (v - mean);
            sxx += dx * dx;
        }
        let slope = sxy / sxx;
        Some(Window {
            mean,
            range: (max - min) / mean,
            excursion: slope * (n - 1) as f64 / mean,
        })
    }

    /// The SNIA rule: range within 20% and excursion within 10% of the mean.
    pub fn snia_steady(&self) -> bool {
        self.range <= SNIA_RANGE && self.excursion.abs() <= SNIA_SLOPE
    }
}

/// What one of fio's steady-state criteria judges, round by round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteadyMetric {
    Iops,
    /// MB/s.
    Bw,
    /// The round's mean latency (reads and writes together).
    Lat,
}

impl SteadyMetric {
    fn name(self) -> &'static str {
        match self {
            SteadyMetric::Iops => "iops",
            SteadyMetric::Bw => "bw",
            SteadyMetric::Lat => "lat",
        }
    }
}

/// A steady-state rule over a test's passes (rounds): the SNIA PTS window, or one of
/// fio's `steadystate` criteria.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SteadyRule {
    /// Range within 20% and excursion within 10% of the window's mean (MB/s).
    Snia,
    /// fio's `iops`/`bw`/`lat` (`slope` false: every value within `limit` × the mean of it)
    /// or `iops_slope`/`bw_slope`/`lat_slope` (`slope`: the least-squares slope, per
    /// second, within `limit` × the mean).
    Fio {
        metric: SteadyMetric,
        slope: bool,
        limit: f64,
    },
}

/// The rounds a steady-state rule judges: each one's MB/s, IOPS and mean latency (µs).
#[derive(Debug, Clone, Copy)]
pub struct Rounds<'a> {
    pub mb_s: &'a [f64],
    pub iops: &'a [f64],
    pub lat_us: &'a [f64],
}

/// A `--steady-state` (fio's `steadystate`) rule that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SteadyRuleError {
    #[error(
        "'{0}': give snia, or iops, bw, lat, iops_slope, bw_slope or lat_slope with :P% \
         (e.g. iops:20%)"
    )]
    Form(String),
    #[error("'{text}': unknown criterion '{criterion}'")]
    Criterion { text: String, criterion: String },
    #[error("'{text}': the limit is a percentage of the mean, e.g. {name}:10%")]
    Limit { text: String, name: String },
}

impl SteadyRule {
    /// `snia`, or fio's `iops:P%`, `bw:P%`, `lat:P%`, `iops_slope:P%`, `bw_slope:P%`,
    /// `lat_slope:P%`.
    pub fn parse(text: &str) -> Result<SteadyRule, SteadyRuleError> {
        let t = text.trim();
        if t.eq_ignore_ascii_case("snia") {
            return Ok(SteadyRule::Snia);
        }
        let (name, limit) = t
            .split_once(':')
            .ok_or_else(|| SteadyRuleError::Form(text.to_string()))?;
        let (metric, slope) = match name.trim() {
            "iops" => (SteadyMetric::Iops, false),
            "bw" => (SteadyMetric::Bw, false),
            "lat" => (SteadyMetric::Lat, false),
            "iops_slope" => (SteadyMetric::Iops, true),
            "bw_slope" => (SteadyMetric::Bw, true),
            "lat_slope" => (SteadyMetric::Lat, true),
            other => {
                return Err(SteadyRuleError::Criterion {
                    text: text.to_string(),
                    criterion: other.to_string(),
                })
            }
        };
        let pct = limit
            .trim()
            .strip_suffix('%')
            .and_then(|p| p.trim().parse::<f64>().ok())
            .filter(|p| p.is_finite() && *p > 0.0 && *p <= 100.0)
            .ok_or_else(|| SteadyRuleError::Limit {
                text: text.to_string(),
                name: name.to_string(),
            })?;
        Ok(SteadyRule::Fio {
            metric,
            slope,
            limit: pct / 100.0,
        })
    }

    /// Its text, as `parse` takes it.
    pub fn text(&self) -> String {
        match self {
            SteadyRule::Snia => "snia".into(),
            SteadyRule::Fio {
                metric,
                slope,
                limit,
            } => format!(
                "{}{}:{}%",
                metric.name(),
                if *slope { "_slope" } else { "" },
                limit * 100.0
            ),
        }
    }

    /// Whether the window's rounds (of `round_s` seconds each) hold, with the window of the
    /// value the rule judges.
    pub fn holds(&self, r: Rounds<'_>, round_s: f64) -> Option<Window> {
        match *self {
            SteadyRule::Snia => Window::of(r.mb_s).filter(Window::snia_steady),
            SteadyRule::Fio {
                metric,
                slope,
                limit,
            } => {
                let v = match metric {
                    SteadyMetric::Iops => r.iops,
                    SteadyMetric::Bw => r.mb_s,
                    SteadyMetric::Lat => r.lat_us,
                };
                let w = Window::of(v)?;
                let ok = if slope {
                    // excursion is slope × (n - 1) / mean; per second: / ((n - 1) × round)
                    let per_s = w.excursion / ((v.len() - 1) as f64 * round_s.max(1e-9));
                    per_s.abs() <= limit
                } else {
                    v.iter().all(|x| (x - w.mean).abs() <= limit * w.mean)
                };
                ok.then_some(w)
            }
        }
    }
}

/// One steady-state round: a stretch of one pass's series, its rate, IOPS and mean
/// latency (µs; 0 without I/O).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    pub mb_s: f64,
    pub iops: f64,
    pub lat_us: f64,
}

impl Round {
    /// A round of `seconds` in which `bytes` and `ios` completed with latencies summing
    /// to `lat_ns`.
    pub fn of(bytes: f64, ios: f64, lat_ns: f64, seconds: f64) -> Round {
        let s = seconds.max(1e-9);
        Round {
            mb_s: bytes / MB / s,
            iops: ios / s,
            lat_us: if ios > 0.0 {
                lat_ns / ios / 1000.0
            } else {
                0.0
            },
        }
    }
}

/// A pass's series in rounds of `per` intervals after its first `skip` (fio's `ss_ramp`),
/// one after another; a round the pass did not finish (its series ends, or the pass did,
/// within it) is left out.
pub fn pass_rounds(p: &PassRecord, skip: usize, per: usize) -> Vec<Round> {
    let ts = &p.timeseries;
    if ts.interval_ms == 0 || per == 0 {
        return Vec::new();
    }
    let iv = f64::from(ts.interval_ms) / 1000.0;
    // Intervals the pass ran to their end.
    let whole = ((p.seconds / iv) + 1e-6).floor() as usize;
    let n = whole.min(ts.bytes.len());
    let sum = |v: &[u64], a: usize, b: usize| v.get(a..b).map_or(0, |x| x.iter().sum::<u64>());
    let dirs: Vec<&DirSeries> = [&ts.read, &ts.write].into_iter().flatten().collect();
    let mut out = Vec::new();
    let mut a = skip;
    while a + per <= n {
        let b = a + per;
        let bytes = sum(&ts.bytes, a, b);
        let ios: u64 = dirs.iter().map(|d| sum(&d.ios, a, b)).sum();
        let lat: u64 = dirs.iter().map(|d| sum(&d.lat_sum_ns, a, b)).sum();
        out.push(Round::of(
            bytes as f64,
            ios as f64,
            lat as f64,
            per as f64 * iv,
        ));
        a = b;
    }
    out
}

impl SteadyRule {
    /// The first window of `window` rounds in a row (of `round_s` seconds each) that holds
    /// the rule: the index of its first round, with its window.
    pub fn first_window(
        &self,
        rounds: &[Round],
        window: usize,
        round_s: f64,
    ) -> Option<(usize, Window)> {
        if window < 2 {
            return None;
        }
        rounds.windows(window).enumerate().find_map(|(i, w)| {
            let mb: Vec<f64> = w.iter().map(|r| r.mb_s).collect();
            let iops: Vec<f64> = w.iter().map(|r| r.iops).collect();
            let lat: Vec<f64> = w.iter().map(|r| r.lat_us).collect();
            let on = Rounds {
                mb_s: &mb,
                iops: &iops,
                lat_us: &lat,
            };
            self.holds(on, round_s).map(|x| (i, x))
        })
    }
}

/// A decline: the least-squares line through the rate falls by at least this share of its
/// starting value over the test.
pub const DECLINE_MIN_FALL: f64 = 0.3;
/// A decline: the line explains at least this share of the rate's variance (R²): a steady
/// fall, not noise around a level.
pub const DECLINE_MIN_R2: f64 = 0.6;
/// A decline: the fewest intervals judged (3 s).
pub const DECLINE_MIN_INTERVALS: usize = 30;

/// A steady decline of the rate within a test (not a step: a cliff is reported as such).
#[derive(Debug, Clone, PartialEq)]
pub struct Decline {
    /// The fitted line's rate at the series' start and end (MB/s).
    pub from_mb_s: f64,
    pub to_mb_s: f64,
    /// Seconds of the series judged.
    pub seconds: f64,
    /// The share of the rate's variance the line explains.
    pub r2: f64,
}

/// The least squared error of `ys` split into two levels (each side its mean), each side at
/// least a tenth of the values.
fn best_step_sse(ys: &[f64]) -> f64 {
    let n = ys.len();
    let (total, total_sq): (f64, f64) = ys.iter().fold((0.0, 0.0), |a, y| (a.0 + y, a.1 + y * y));
    let side = (n / 10).max(1);
    let (mut sum, mut sq) = (0.0, 0.0);
    let mut best = f64::INFINITY;
    for (k, y) in ys.iter().enumerate().take(n - side) {
        sum += y;
        sq += y * y;
        let left = k + 1;
        if left < side {
            continue;
        }
        let right = (n - left) as f64;
        let sse_l = sq - sum * sum / left as f64;
        let (rs, rq) = (total - sum, total_sq - sq);
        let sse_r = rq - rs * rs / right;
        best = best.min(sse_l + sse_r);
    }
    best
}

/// A test's steady decline: its passes' intervals in a row (each pass's first interval, the
/// start-up, aside), at least [`DECLINE_MIN_INTERVALS`], a least-squares line through MB/s
/// over time that falls by [`DECLINE_MIN_FALL`] or more of its starting value and explains
/// [`DECLINE_MIN_R2`] or more of the variance, and fits better than any step between two
/// levels; none where the test has a cliff, or where the CPU explains the fall between the
/// series' first half and its second (as it does a cliff's).
pub fn test_decline(t: &TestRecord) -> Option<Decline> {
    if test_cliff(t).is_some() {
        return None;
    }
    // A fall the CPU explains (its first half against its second): a busy machine.
    let all = test_samples(t);
    if cpu_explains(&all[..all.len() / 2], &all[all.len() / 2..]) {
        return None;
    }
    let mut pts: Vec<(f64, f64)> = Vec::new();
    let mut at = 0.0;
    for p in &t.passes {
        for (i, s) in pass_samples(p).iter().enumerate() {
            if i > 0 {
                pts.push((at + s.seconds / 2.0, s.mb_s()));
            }
            at += s.seconds;
        }
    }
    let n = pts.len();
    if n < DECLINE_MIN_INTERVALS {
        return None;
    }
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = pts.iter().map(|p| (p.1 - my).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= 0.0 || syy <= 0.0 || my <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let r2 = sxy * sxy / (sxx * syy);
    // A step (two levels) that fits better than the line is a level shift, not a decline.
    let line_sse = syy * (1.0 - r2);
    let ys: Vec<f64> = pts.iter().map(|p| p.1).collect();
    if best_step_sse(&ys) < line_sse {
        return None;
    }
    let (x0, x1) = (pts[0].0, pts[n - 1].0);
    let from = my + slope * (x0 - mx);
    let to = my + slope * (x1 - mx);
    let fall = (from - to) / from;
    (slope < 0.0 && from > 0.0 && fall >= DECLINE_MIN_FALL && r2 >= DECLINE_MIN_R2).then(|| {
        Decline {
            from_mb_s: from,
            to_mb_s: to.max(0.0),
            seconds: at,
            r2,
        }
    })
}

/// Intervals with no completions in a test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stalls {
    /// Empty intervals, over all passes.
    pub intervals: usize,
    /// The longest run of empty intervals, in seconds.
    pub longest_s: f64,
    /// The passes they were in.
    pub passes: Vec<u32>,
}

/// The empty intervals of a test's passes, counted only in passes busy enough
/// ([`STALL_MIN_IOS_PER_INTERVAL`]) that an empty interval means nothing completed for
/// its whole length, not the gap between two slow I/Os. Empty intervals at the start of a
/// pass (its first I/Os still in flight) or at its end (it was ending) do not count.
pub fn stalls(t: &TestRecord) -> Stalls {
    let mut s = Stalls::default();
    for p in &t.passes {
        let samples = pass_samples(p);
        let secs: f64 = samples.iter().map(|x| x.seconds).sum();
        let iv = p.timeseries.interval_ms as f64 / 1000.0;
        if samples.is_empty() || secs <= 0.0 {
            continue;
        }
        let per_interval = p.ios as f64 / (p.seconds.max(1e-9) / iv);
        if per_interval < STALL_MIN_IOS_PER_INTERVAL {
            continue;
        }
        let first_busy = samples.iter().position(|x| x.bytes > 0);
        let last_busy = samples.iter().rposition(|x| x.bytes > 0);
        let (Some(first_busy), Some(last_busy)) = (first_busy, last_busy) else {
            continue;
        };
        let (mut run, mut here) = (0.0f64, 0usize);
        for x in &samples[first_busy..last_busy] {
            if x.bytes == 0 {
                here += 1;
                run += x.seconds;
                s.longest_s = s.longest_s.max(run);
            } else {
                run = 0.0;
            }
        }
        if here > 0 {
            s.intervals += here;
            s.passes.push(p.index);
        }
    }
    s
}

/// Why [`fio_log`] cannot give a log of a test.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FioLogError {
    #[error(
        "test {test} pass {pass} kept no series of its thread {thread} (only the threads' sum)"
    )]
    NoThread {
        test: String,
        pass: u32,
        thread: usize,
    },
    #[error("test {test}: a window of {avg_ms} ms is not a multiple of its {stored} ms intervals")]
    Window {
        test: String,
        avg_ms: u64,
        stored: u64,
    },
    #[error(
        "test {test} was stored without per-interval I/O counts{}: only the bandwidth log of a \
         test of one direction can be written from it",
        if *mixed { " and mixes reads and writes" } else { "" }
    )]
    NoCounts { test: String, mixed: bool },
}

/// fio's log of `kind` for test `t` (`time_ms, value, ddir, 0, 0` lines, as fio writes
/// windowed logs: `log_avg_msec` = `avg_ms`, a multiple of the stored interval), its passes
/// one after another (a later pass's times continue from the end of the one before). Each
/// window gives a line per direction that completed I/O in it, stamped at the window's end
/// (a pass's last window at the pass's end); bandwidth in KiB/s and IOPS over the window's
/// true length, latency the mean in nanoseconds, each truncated to an integer as fio does.
/// A series stored without I/O counts (older runs) gives a bandwidth log for a test of one
/// direction only; the rest is refused with the reason. `thread`: job thread N's own series
/// (0-based; fio's per-job log of a `numjobs` job), which the test must have kept
/// (`TimeSeries::threads`); `None`: the threads' sum.
pub fn fio_log(
    t: &TestRecord,
    kind: LogKind,
    avg_ms: u64,
    thread: Option<usize>,
) -> Result<String, FioLogError> {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut offset_ms = 0.0;
    for p in &t.passes {
        let ts = match thread {
            None => &p.timeseries,
            Some(i) => p
                .timeseries
                .threads
                .get(i)
                .ok_or_else(|| FioLogError::NoThread {
                    test: t.name.clone(),
                    pass: p.index,
                    thread: i + 1,
                })?,
        };
        let stored = ts.interval_ms as u64;
        let pass_ms = p.seconds * 1000.0;
        if stored == 0 || ts.bytes.is_empty() {
            offset_ms += pass_ms;
            continue;
        }
        if avg_ms == 0 || !avg_ms.is_multiple_of(stored) {
            return Err(FioLogError::Window {
                test: t.name.clone(),
                avg_ms,
                stored,
            });
        }
        // Each direction's series; an older record's bytes stand for the one direction of
        // a test that does only one.
        let bytes_only;
        let dirs: [Option<&DirSeries>; 2] = if ts.read.is_none() && ts.write.is_none() {
            let (r, w) = (t.job.rw.reads(), t.job.rw.writes());
            if kind != LogKind::Bw || (r && w) {
                return Err(FioLogError::NoCounts {
                    test: t.name.clone(),
                    mixed: r && w,
                });
            }
            bytes_only = DirSeries {
                bytes: ts.bytes.clone(),
                ..Default::default()
            };
            if w {
                [None, Some(&bytes_only)]
            } else {
                [Some(&bytes_only), None]
            }
        } else {
            [ts.read.as_ref(), ts.write.as_ref()]
        };
        let per = (avg_ms / stored) as usize;
        let n = ts.bytes.len();
        for from in (0..n).step_by(per) {
            let to = (from + per).min(n);
            let end_ms = ((to as u64 * stored) as f64).min(pass_ms);
            let len_ms = end_ms - (from as u64 * stored) as f64;
            if len_ms <= 0.0 {
                continue;
            }
            for (ddir, d) in dirs.iter().enumerate() {
                let Some(d) = d else { continue };
                let bytes: u64 = d
                    .bytes
                    .get(from..to.min(d.bytes.len()))
                    .map_or(0, |s| s.iter().sum());
                let (_, ios, lat_sum, _) = d.span(from, to);
                let value = match kind {
                    LogKind::Bw if bytes > 0 => bytes as f64 * 1000.0 / len_ms / 1024.0,
                    LogKind::Iops if ios > 0 => ios as f64 * 1000.0 / len_ms,
                    LogKind::Lat if ios > 0 => lat_sum as f64 / ios as f64,
                    _ => continue,
                };
                let time = (offset_ms + end_ms).round() as u64;
                let _ = writeln!(out, "{time}, {}, {ddir}, 0, 0", value as u64);
            }
        }
        offset_ms += pass_ms;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(rates: &[f64]) -> Vec<Sample> {
        rates
            .iter()
            .map(|&r| Sample {
                pass: 1,
                bytes: (r * MB * 0.1) as u64,
                seconds: 0.1,
                cpu_lost_s: None,
                others_cpu_s: None,
                idle_cpu_s: None,
            })
            .collect()
    }

    #[test]
    fn a_drop_that_stays_is_a_cliff_with_its_bytes_and_rates() {
        let mut r = vec![400.0; 12];
        r.extend([100.0; 20]);
        let c = find_cliff(&samples(&r)).expect("a cliff");
        assert_eq!(c.bytes_before, 12 * 40_000_000);
        assert!((c.seconds_before - 1.2).abs() < 1e-9);
        assert!((c.before_mb_s - 400.0).abs() < 1e-9 && (c.after_mb_s - 100.0).abs() < 1e-9);
        assert!((c.seconds_after - 2.0).abs() < 1e-9);
        // An interval partly before and after the drop: the drop is placed within it, where
        // the two rates' lines meet (400 MB/s for 1.25 s: 500 MB).
        let mut r = vec![400.0; 12];
        r.push(250.0);
        r.extend([100.0; 20]);
        let c = find_cliff(&samples(&r)).expect("a cliff");
        assert!((c.seconds_before - 1.25).abs() < 1e-6, "{c:?}");
        assert!(c.bytes_before.abs_diff(500_000_000) < 1000, "{c:?}");
        // A slow first interval (queues filling) and a short burst: still the cliff.
        let mut r = vec![250.0];
        r.extend([400.0; 9]);
        r.extend([100.0; 15]);
        assert!(find_cliff(&samples(&r)).is_some());
    }

    #[test]
    fn noise_dips_rises_and_small_drops_are_not_cliffs() {
        // Flat with a dip of two intervals: the after side would be too short, and does not
        // stay down.
        let mut r = vec![100.0; 20];
        r[10] = 20.0;
        r[11] = 20.0;
        assert_eq!(find_cliff(&samples(&r)), None);
        // A rise.
        let mut up = vec![100.0; 10];
        up.extend([300.0; 10]);
        assert_eq!(find_cliff(&samples(&up)), None);
        // A drop to 60%: beyond CLIFF_RATIO.
        let mut small = vec![100.0; 10];
        small.extend([60.0; 10]);
        assert_eq!(find_cliff(&samples(&small)), None);
        // A drop that comes back for 300 ms at the rate before (bench/cliffs.sh's (f): 166
        // MB/s for 1 s, then 73 with three intervals at 186-255 among them): a slow spell.
        let mut back = vec![166.0; 10];
        back.extend([73.0; 12]);
        back.extend([186.0, 255.0, 243.0]);
        back.extend([73.0; 8]);
        assert_eq!(find_cliff(&samples(&back)), None);
        back[23] = 100.0;
        assert!(find_cliff(&samples(&back)).is_some(), "two intervals back");
        // Back at the start of a later pass (a device that regained cache while idle
        // between passes, as --steady-state's rounds are): still the cliff.
        let mut rounds = samples(&[166.0; 10]);
        rounds.extend(samples(&[73.0; 10]));
        for pass in 2..=4 {
            let mut r = vec![166.0; 3];
            r.extend([73.0; 7]);
            rounds.extend(samples(&r).into_iter().map(|s| Sample { pass, ..s }));
        }
        assert!(find_cliff(&rounds).is_some());
        // Alternating levels (a bursty throttle): no side is consistent.
        let alt: Vec<f64> = (0..30)
            .map(|i| if i % 2 == 0 { 100.0 } else { 30.0 })
            .collect();
        assert_eq!(find_cliff(&samples(&alt)), None);
        // A drop at a pass boundary: a slower pass, not a cliff.
        let mut passes = samples(&[400.0; 10]);
        passes.extend(
            samples(&[100.0; 20])
                .into_iter()
                .map(|s| Sample { pass: 2, ..s }),
        );
        assert_eq!(find_cliff(&passes), None);
        // Too short a series.
        assert_eq!(
            find_cliff(&samples(&[100.0, 100.0, 100.0, 10.0, 10.0])),
            None
        );
    }

    #[test]
    fn a_drop_while_the_pass_lost_the_cpu_is_not_a_cliff() {
        // 833 MB/s for 2.9 s, then under half for 1.1 s (bench/cliffs.sh's false positive on a
        // CPU-bound loop device), with the pass's threads waiting for a CPU 10% of the
        // time before and 40% after: the machine's other work, not a cache.
        let mut r = vec![833.0; 29];
        r.extend([410.0; 11]);
        let mut v = samples(&r);
        assert!(
            find_cliff(&v).is_some(),
            "without the CPU's record, a cliff"
        );
        for (i, s) in v.iter_mut().enumerate() {
            s.cpu_lost_s = Some(if i < 29 { 0.01 } else { 0.04 });
        }
        assert_eq!(find_cliff(&v), None);
        // The same loss on both sides (a busy machine throughout): the cliff stands.
        for s in &mut v {
            s.cpu_lost_s = Some(0.04);
        }
        assert!(find_cliff(&v).is_some());
        // Stolen time counts as lost: a pass's intervals read back with it.
        let mut t = test_of(r.iter().map(|&x| (x * 1e5) as u64).collect());
        let ts = &mut t.passes[0].timeseries;
        ts.cpu_wait_ms = vec![1; 40];
        ts.steal_ms = (0..40).map(|i| if i < 29 { 0 } else { 30 }).collect();
        assert_eq!(test_cliff(&t), None);
        t.passes[0].timeseries.steal_ms = vec![30; 40];
        assert!(test_cliff(&t).is_some());
        // Another program that took a CPU at the drop (the loop device's kernel threads
        // starved, not iolab's own): 40 ms of other work an interval, then 100.
        t.passes[0].timeseries.others_cpu_ms =
            (0..40).map(|i| if i < 29 { 40 } else { 100 }).collect();
        assert_eq!(test_cliff(&t), None);
        // ... unless the CPU it took was idle before (30 ms of each interval left idle).
        t.passes[0].timeseries.idle_cpu_ms = vec![70; 40];
        assert!(test_cliff(&t).is_some());
        t.passes[0].timeseries.idle_cpu_ms = vec![30; 40];
        assert_eq!(test_cliff(&t), None);
        t.passes[0].timeseries.others_cpu_ms = vec![100; 40];
        assert!(test_cliff(&t).is_some());
    }

    #[test]
    fn the_snia_window_judges_range_and_slope() {
        let w = Window::of(&[100.0, 101.0, 99.0, 100.0, 100.0]).unwrap();
        assert!(w.snia_steady() && w.range < 0.021 && w.excursion.abs() < 0.01);
        // Within 20% but rising 15% over the window: not steady.
        let rising = Window::of(&[92.0, 96.0, 100.0, 104.0, 108.0]).unwrap();
        assert!((rising.excursion - 0.16).abs() < 1e-9 && !rising.snia_steady());
        // Flat but with a 25% range.
        assert!(!Window::of(&[100.0, 88.0, 112.0, 100.0, 100.0])
            .unwrap()
            .snia_steady());
        assert_eq!(Window::of(&[1.0]), None);
    }

    fn test_of(bytes: Vec<u64>) -> TestRecord {
        let secs = bytes.len() as f64 / 10.0;
        TestRecord {
            name: "T".into(),
            group: "T".into(),
            job: iolab_spec::JobSpec::new(iolab_spec::Rw::Write, 65536, 1, 1),
            passes: vec![PassRecord::new(
                1,
                secs,
                None,
                None,
                None,
                Default::default(),
                iolab_measure::TimeSeries {
                    interval_ms: 100,
                    bytes,
                    ..Default::default()
                },
            )],
            summary: Default::default(),
            extra: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_steady_fall_is_a_decline_and_steps_and_noise_are_not() {
        // 100 MB/s falling to 40 MB/s over 5 s, with ±5% wobble.
        let fall: Vec<u64> = (0..50)
            .map(|i| {
                let wob = if i % 2 == 0 { 1.05 } else { 0.95 };
                ((100.0 - 60.0 * i as f64 / 49.0) * wob * 100_000.0) as u64
            })
            .collect();
        let mut t = test_of(fall);
        let d = test_decline(&t).expect("a decline");
        assert!(
            (d.from_mb_s - 100.0).abs() < 8.0 && (d.to_mb_s - 40.0).abs() < 8.0,
            "{d:?}"
        );
        // The same fall while other work took a CPU more as it went: a busy machine.
        t.passes[0].timeseries.others_cpu_ms = (0..50).map(|i| 2 * i).collect();
        assert!(test_decline(&t).is_none());
        // A step is a cliff, or a level shift, not a decline.
        let mut step = vec![10_000_000u64; 25];
        step.extend(vec![2_000_000u64; 25]);
        assert!(test_decline(&test_of(step)).is_none());
        let mut shift = vec![10_000_000u64; 20];
        shift.extend(vec![5_500_000u64; 20]);
        assert!(test_decline(&test_of(shift)).is_none());
        // Noise around a level, and a mild fall (20%), are not.
        let noisy: Vec<u64> = (0..50u64)
            .map(|i| 5_000_000 + (i * 7919 % 13) * 200_000)
            .collect();
        assert!(test_decline(&test_of(noisy)).is_none());
        let mild: Vec<u64> = (0..50)
            .map(|i| ((100.0 - 20.0 * i as f64 / 49.0) * 1e5) as u64)
            .collect();
        assert!(test_decline(&test_of(mild)).is_none());
        // Too short to judge.
        let short: Vec<u64> = (0..20)
            .map(|i| ((100.0 - 3.0 * i as f64) * 1e5) as u64)
            .collect();
        assert!(test_decline(&test_of(short)).is_none());
    }

    #[test]
    fn steady_rules_parse_and_judge() {
        assert_eq!(SteadyRule::parse("snia"), Ok(SteadyRule::Snia));
        let r = SteadyRule::parse("iops:10%").unwrap();
        assert_eq!(r.text(), "iops:10%");
        let mb = [1.0; 5];
        let on = |mb_s, iops, lat_us| Rounds { mb_s, iops, lat_us };
        assert!(r
            .holds(on(&mb, &[100.0, 105.0, 95.0, 100.0, 100.0], &mb), 1.0)
            .is_some());
        assert!(r
            .holds(on(&mb, &[100.0, 115.0, 95.0, 100.0, 100.0], &mb), 1.0)
            .is_none());
        // bw_slope:1%: a rise of 1 MB/s a round of 1 s on a mean of 100 is 1% a second.
        let s = SteadyRule::parse("bw_slope:1.5%").unwrap();
        let rising = [98.0, 99.0, 100.0, 101.0, 102.0];
        assert!(s.holds(on(&rising, &mb, &mb), 1.0).is_some());
        assert!(s.holds(on(&rising, &mb, &mb), 0.5).is_none(), "2% a second");
        // fio's latency criteria judge the rounds' mean latency.
        let l = SteadyRule::parse("lat:10%").unwrap();
        assert_eq!(l.text(), "lat:10%");
        let lat = [500.0, 520.0, 480.0, 500.0, 500.0];
        assert!(l.holds(on(&rising, &rising, &lat), 1.0).is_some());
        let jumpy = [500.0, 620.0, 480.0, 500.0, 500.0];
        assert!(l.holds(on(&mb, &mb, &jumpy), 1.0).is_none());
        let ls = SteadyRule::parse("lat_slope:1.5%").unwrap();
        assert!(ls.holds(on(&mb, &mb, &rising), 1.0).is_some());
        assert!(ls.holds(on(&mb, &mb, &rising), 0.5).is_none());
        for bad in ["iops", "iops:10", "lat", "xyz:5%", "bw:0%"] {
            assert!(SteadyRule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn one_pass_in_rounds_and_the_first_window_after_a_cliff() {
        // 100 MB/s for 1 s, then 20 MB/s for 3.45 s (a partial last interval), 1000
        // writes a second at 50 µs each.
        let mut bytes = vec![10_000_000u64; 10];
        bytes.extend([2_000_000u64; 35]);
        let mut t = test_of(bytes);
        let p = &mut t.passes[0];
        p.seconds = 4.45;
        let n = p.timeseries.bytes.len();
        p.timeseries.write = Some(DirSeries {
            bytes: p.timeseries.bytes.clone(),
            ios: vec![100; n],
            lat_sum_ns: vec![100 * 50_000; n],
            lat_max_ns: vec![50_000; n],
        });
        // Rounds of 0.5 s after the first 0.2 s: 8 whole ones (the pass ends in the 9th).
        let r = pass_rounds(p, 2, 5);
        assert_eq!(r.len(), 8);
        assert!((r[0].mb_s - 100.0).abs() < 1e-9 && (r[1].mb_s - 68.0).abs() < 1e-9);
        assert!((r[2].mb_s - 20.0).abs() < 1e-9, "{r:?}");
        assert!(r
            .iter()
            .all(|x| (x.iops - 1000.0).abs() < 1e-9 && (x.lat_us - 50.0).abs() < 1e-9));
        // The SNIA window of 3 holds first from the third round, after the drop.
        let (i, w) = SteadyRule::Snia.first_window(&r, 3, 0.5).unwrap();
        assert_eq!(i, 2);
        assert!((w.mean - 20.0).abs() < 1e-9 && w.range.abs() < 1e-9);
        assert!(SteadyRule::Snia.first_window(&r[..4], 3, 0.5).is_none());
    }

    #[test]
    fn a_noisy_drop_is_a_cliff_only_beyond_its_noise() {
        // ±5% noise around 200 then 60: a cliff.
        let r: Vec<f64> = (0..40)
            .map(|i| {
                let base = if i < 15 { 200.0 } else { 60.0 };
                base * (1.0 + 0.05 * ((i * 7 % 5) as f64 - 2.0) / 2.0)
            })
            .collect();
        let c = find_cliff(&samples(&r)).expect("a cliff");
        assert!((c.seconds_before - 1.5).abs() < 0.05, "{c:?}");
    }

    /// The refusal of a log an older record cannot give reads as one sentence (it had a run
    /// of spaces in the middle).
    #[test]
    fn a_log_without_counts_is_refused_in_one_sentence() {
        let e = FioLogError::NoCounts {
            test: "seq".into(),
            mixed: true,
        };
        assert_eq!(
            e.to_string(),
            "test seq was stored without per-interval I/O counts and mixes reads and writes: \
             only the bandwidth log of a test of one direction can be written from it"
        );
    }
}
