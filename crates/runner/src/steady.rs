//! `--steady-state` (and a job file's `ss*` options): a test is one continuous pass whose
//! series is cut into rounds (consecutive stretches of `round`, after the first `skip`
//! unjudged); the pass ends once the last `window` rounds hold the rule, or at `limit`.
//! No idle time falls between two rounds, so a device that recovers when idle (an SSD's
//! cache) is judged at the rate it sustains. While the pass runs, a [`Watch`] judges the
//! rounds from the pass's ticks and ends it; `extra.steady_state` judges the stored
//! series again (its 100 ms intervals), and says what that shows.

use std::time::Duration;

use iolab_measure::PassRecord;
use iolab_stats::series::{pass_rounds, Round, SteadyRule, Window};

/// The series interval rounds are made of (the engine's 100 ms).
pub const INTERVAL: Duration = Duration::from_millis(100);

/// SNIA PTS: rounds in the measurement window, and most rounds.
pub const STEADY_WINDOW: u32 = 5;
pub const STEADY_MAX_ROUNDS: u32 = 25;

/// One test's steady-state rule and rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyPlan {
    pub rule: SteadyRule,
    /// Rounds in the window.
    pub window: u32,
    /// A round's length (a whole number of [`INTERVAL`]s).
    pub round: Duration,
    /// The start of the pass not judged (fio's `ss_ramp`; whole [`INTERVAL`]s).
    pub skip: Duration,
    /// The pass's longest run (the rounds' most time plus `skip`; a job's runtime).
    pub limit: Duration,
}

/// `--steady-state`: every test's rule, or (a job file's) each test's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Steady {
    #[default]
    Off,
    All(SteadyPlan),
    /// By the test's index in the plan.
    Each(Vec<Option<SteadyPlan>>),
}

impl Steady {
    /// The rule of the plan's test `i`.
    pub fn of(&self, i: usize) -> Option<SteadyPlan> {
        match self {
            Steady::Off => None,
            Steady::All(p) => Some(*p),
            Steady::Each(v) => v.get(i).copied().flatten(),
        }
    }

    /// Whether any test has one.
    pub fn any(&self) -> bool {
        match self {
            Steady::Off => false,
            Steady::All(_) => true,
            Steady::Each(v) => v.iter().any(Option::is_some),
        }
    }
}

/// Whether `d` is a whole number of series intervals (at least one unless `zero_ok`).
pub fn whole_intervals(d: Duration, zero_ok: bool) -> bool {
    let ms = d.as_nanos();
    let iv = INTERVAL.as_nanos();
    ms.is_multiple_of(iv) && (zero_ok || ms > 0)
}

impl SteadyPlan {
    /// `--steady-state`'s rounds: `max_rounds` of `round` with no unjudged start.
    pub fn rounds(rule: SteadyRule, window: u32, round: Duration, max_rounds: u32) -> Self {
        SteadyPlan {
            rule,
            window,
            round,
            skip: Duration::ZERO,
            limit: round * max_rounds,
        }
    }

    /// The most rounds the pass holds.
    pub fn max_rounds(&self) -> u32 {
        let judged = self.limit.saturating_sub(self.skip).as_secs_f64();
        (judged / self.round.as_secs_f64().max(1e-9) + 1e-9).floor() as u32
    }

    fn per(&self) -> usize {
        (self.round.as_nanos() / INTERVAL.as_nanos()).max(1) as usize
    }

    fn skipped(&self) -> usize {
        (self.skip.as_nanos() / INTERVAL.as_nanos()) as usize
    }

    /// The first window of rounds that holds the rule: its first round (0-based) and
    /// the window.
    fn first(&self, rounds: &[Round]) -> Option<(usize, Window)> {
        self.rule
            .first_window(rounds, self.window as usize, self.round.as_secs_f64())
    }

    /// `extra.steady_state` of a test from its pass (none: it was stopped before one).
    pub fn extra(&self, pass: Option<&PassRecord>) -> serde_json::Value {
        let rounds = pass.map_or_else(Vec::new, |p| pass_rounds(p, self.skipped(), self.per()));
        let n = rounds.len();
        let w = self.window as usize;
        let held = self.first(&rounds);
        // The window judged: the one that held, else the last rounds.
        let from = held.map_or(n.saturating_sub(w), |h| h.0);
        let last = &rounds[from..(from + w).min(n)];
        let mean = |f: fn(&Round) -> f64| {
            if last.is_empty() {
                0.0
            } else {
                last.iter().map(f).sum::<f64>() / last.len() as f64
            }
        };
        let window = Window::of(&last.iter().map(|r| r.mb_s).collect::<Vec<_>>());
        let round_s = self.round.as_secs_f64();
        let start = self.skip.as_secs_f64() + from as f64 * round_s;
        serde_json::json!({
            "rule": self.rule.text(),
            "attained": held.is_some(),
            "round": held.map(|h| h.0 + 1),
            "rounds": held.map_or(n, |h| h.0 + w),
            "window_rounds": self.window,
            "max_rounds": self.max_rounds(),
            "round_s": round_s,
            "skip_s": self.skip.as_secs_f64(),
            "window_start_s": (!last.is_empty()).then_some(start),
            "window_mean_mb_s": mean(|r| r.mb_s),
            "window_mean_iops": mean(|r| r.iops),
            "window_mean_lat_us": mean(|r| r.lat_us),
            "window_range": window.map(|x| x.range),
            "window_excursion": window.map(|x| x.excursion),
        })
    }

    /// The run note of a test's `extra.steady_state`.
    pub fn note(name: &str, ss: &serde_json::Value) -> String {
        let f = |k: &str| ss.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        let rule = ss["rule"].as_str().unwrap_or("");
        match ss.get("round").and_then(|v| v.as_u64()) {
            Some(r) => format!(
                "{name}: steady state ({rule}) attained in rounds {r}-{} (from {:.1} s into the \
                 pass): {:.1} MB/s, {:.0} IOPS (range {:.1}%, excursion {:.1}% of the mean)",
                f("rounds") as u64,
                f("window_start_s"),
                f("window_mean_mb_s"),
                f("window_mean_iops"),
                f("window_range") * 100.0,
                f("window_excursion") * 100.0
            ),
            None if f("rounds") < f("window_rounds") => format!(
                "{name}: steady state ({rule}) not attained: the pass held {} round(s) of {} s, \
                 fewer than the window's {}",
                f("rounds") as u64,
                f("round_s"),
                f("window_rounds") as u64
            ),
            None => format!(
                "{name}: steady state ({rule}) not attained in {} rounds; the last {} ran at \
                 {:.1} MB/s",
                f("rounds") as u64,
                f("window_rounds") as u64,
                f("window_mean_mb_s")
            ),
        }
    }
}

/// The observer of a steady-state test's pass: cuts the pass's ticks into rounds and ends
/// the pass (`pass_stop`) once a window of them holds the rule, or on a signal.
pub struct Watch<'a> {
    pub inner: &'a dyn iolab_engine::PassObserver,
    pub plan: SteadyPlan,
    pub signal: &'a std::sync::atomic::AtomicBool,
    pub pass_stop: &'a std::sync::atomic::AtomicBool,
    /// (seconds, bytes, I/Os, latency ns) so far at every tick, and the rounds judged.
    pub ticks: std::sync::Mutex<(Vec<[f64; 4]>, usize)>,
}

impl<'a> Watch<'a> {
    pub fn new(
        inner: &'a dyn iolab_engine::PassObserver,
        plan: SteadyPlan,
        signal: &'a std::sync::atomic::AtomicBool,
        pass_stop: &'a std::sync::atomic::AtomicBool,
    ) -> Self {
        Watch {
            inner,
            plan,
            signal,
            pass_stop,
            ticks: Default::default(),
        }
    }
}

/// The counts at `t` seconds, interpolated between the ticks around it.
fn at(ticks: &[[f64; 4]], t: f64) -> [f64; 3] {
    let i = ticks.partition_point(|x| x[0] < t);
    let hi = ticks
        .get(i)
        .copied()
        .unwrap_or(*ticks.last().unwrap_or(&[0.0; 4]));
    let lo = if i == 0 { [0.0; 4] } else { ticks[i - 1] };
    let f = if hi[0] > lo[0] {
        ((t - lo[0]) / (hi[0] - lo[0])).clamp(0.0, 1.0)
    } else {
        1.0
    };
    [1, 2, 3].map(|k| lo[k] + (hi[k] - lo[k]) * f)
}

/// The rounds whose end the ticks have passed.
fn tick_rounds(plan: &SteadyPlan, ticks: &[[f64; 4]]) -> Vec<Round> {
    let Some(last) = ticks.last() else {
        return Vec::new();
    };
    let (skip, round) = (plan.skip.as_secs_f64(), plan.round.as_secs_f64());
    let n = ((last[0] - skip) / round).floor().max(0.0) as usize;
    (0..n)
        .map(|k| {
            let a = at(ticks, skip + k as f64 * round);
            let b = at(ticks, skip + (k + 1) as f64 * round);
            Round::of(b[0] - a[0], b[1] - a[1], b[2] - a[2], round)
        })
        .collect()
}

impl iolab_engine::PassObserver for Watch<'_> {
    fn tick(&self, bytes: u64, elapsed: Duration) {
        self.tick_ios(bytes, 0, 0, elapsed);
    }

    fn tick_ios(&self, bytes: u64, ios: u64, lat_ns: u64, elapsed: Duration) {
        if handed_on(self.inner, self.signal, self.pass_stop, bytes, elapsed) {
            return;
        }
        let Ok(mut t) = self.ticks.lock() else {
            return;
        };
        t.0.push([
            elapsed.as_secs_f64(),
            bytes as f64,
            ios as f64,
            lat_ns as f64,
        ]);
        let rounds = tick_rounds(&self.plan, &t.0);
        if rounds.len() <= t.1 {
            return;
        }
        t.1 = rounds.len();
        if self.plan.first(&rounds).is_some() {
            self.pass_stop
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// What a watching observer does first at each tick: hands it on to `inner` (the progress
/// display) and, on a signal, ends the pass: true when it did (nothing more to judge).
pub(crate) fn handed_on(
    inner: &dyn iolab_engine::PassObserver,
    signal: &std::sync::atomic::AtomicBool,
    pass_stop: &std::sync::atomic::AtomicBool,
    bytes: u64,
    elapsed: Duration,
) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    inner.tick(bytes, elapsed);
    let stop = signal.load(Relaxed);
    if stop {
        pass_stop.store(true, Relaxed);
    }
    stop
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_become_rounds_by_interpolation() {
        let plan = SteadyPlan {
            rule: SteadyRule::Snia,
            window: 2,
            round: Duration::from_secs(1),
            skip: Duration::from_millis(500),
            limit: Duration::from_secs(10),
        };
        // 10 MB/s, 1000 IOPS at 100 µs, ticks every 70 ms up to 2.6 s: the rounds from
        // 0.5 s to 1.5 s and 1.5 s to 2.5 s.
        let ticks: Vec<[f64; 4]> = (1..=37)
            .map(|i| {
                let t = i as f64 * 0.07;
                [t, t * 10e6, t * 1000.0, t * 1000.0 * 100_000.0]
            })
            .collect();
        let r = tick_rounds(&plan, &ticks);
        assert_eq!(r.len(), 2, "{r:?}");
        for x in r {
            assert!((x.mb_s - 10.0).abs() < 1e-6, "{x:?}");
            assert!((x.iops - 1000.0).abs() < 1e-6, "{x:?}");
            assert!((x.lat_us - 100.0).abs() < 1e-6, "{x:?}");
        }
        assert_eq!(plan.max_rounds(), 9);
        assert!(whole_intervals(Duration::from_millis(300), false));
        assert!(!whole_intervals(Duration::from_millis(250), false));
        assert!(!whole_intervals(Duration::ZERO, false) && whole_intervals(Duration::ZERO, true));
    }
}
