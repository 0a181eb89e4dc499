//! `--steady-state` (and a job file's `ss*` options): a test is one continuous pass whose
//! series is cut into rounds (consecutive stretches of `round`, after the first `skip`
//! unjudged); the pass ends once the last `window` rounds hold the rule, or at `limit`.
//! No idle time falls between two rounds, so a device that recovers when idle (an SSD's
//! cache) is judged at the rate it sustains. While the pass runs, a [`Watch`] judges the
//! rounds from the pass's ticks and ends it; `extra.steady_state` judges the stored
//! series again (its 100 ms intervals), and says what that shows.

use std::time::Duration;

use iolab_measure::extra::SteadyState;
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
    pub fn extra(&self, pass: Option<&PassRecord>) -> SteadyState {
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
        SteadyState {
            rule: self.rule.text(),
            attained: held.is_some(),
            round: held.map(|h| h.0 + 1),
            rounds: held.map_or(n, |h| h.0 + w),
            window_rounds: self.window,
            max_rounds: self.max_rounds(),
            round_s,
            skip_s: self.skip.as_secs_f64(),
            window_start_s: (!last.is_empty()).then_some(start),
            window_mean_mb_s: mean(|r| r.mb_s),
            window_mean_iops: mean(|r| r.iops),
            window_mean_lat_us: mean(|r| r.lat_us),
            window_range: window.map(|x| x.range),
            window_excursion: window.map(|x| x.excursion),
        }
    }

    /// The run note of a test's `extra.steady_state`.
    pub fn note(name: &str, ss: &SteadyState) -> String {
        let rule = &ss.rule;
        match ss.round {
            Some(r) => format!(
                "{name}: steady state ({rule}) attained in rounds {r}-{} (from {:.1} s into the \
                 pass): {:.1} MB/s, {:.0} IOPS (range {:.1}%, excursion {:.1}% of the mean)",
                ss.rounds,
                ss.window_start_s.unwrap_or(0.0),
                ss.window_mean_mb_s,
                ss.window_mean_iops,
                ss.window_range.unwrap_or(0.0) * 100.0,
                ss.window_excursion.unwrap_or(0.0) * 100.0
            ),
            None if ss.rounds < ss.window_rounds as usize => format!(
                "{name}: steady state ({rule}) not attained: the pass held {} round(s) of {} s, \
                 fewer than the window's {}",
                ss.rounds, ss.round_s, ss.window_rounds
            ),
            None => format!(
                "{name}: steady state ({rule}) not attained in {} rounds; the last {} ran at \
                 {:.1} MB/s",
                ss.rounds, ss.window_rounds, ss.window_mean_mb_s
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

/// How many rounds the ticks have passed the end of.
fn rounds_done(plan: &SteadyPlan, ticks: &[[f64; 4]]) -> usize {
    let (skip, round) = (plan.skip.as_secs_f64(), plan.round.as_secs_f64());
    ticks.last().map_or(0, |last| {
        ((last[0] - skip) / round).floor().max(0.0) as usize
    })
}

/// Whether every boundary of rounds `from..to` lies between two ticks at most 0.6 of a
/// round apart (the pass's start counts as a tick of nothing): between sparse ticks (a
/// loaded machine delays the ticking thread by hundreds of milliseconds) interpolation
/// makes the rounds look evener than the pass's own series shows, so such a window is not
/// judged live; the recorded series judges it after the pass.
fn bracketed(plan: &SteadyPlan, ticks: &[[f64; 4]], from: usize, to: usize) -> bool {
    let (skip, round) = (plan.skip.as_secs_f64(), plan.round.as_secs_f64());
    (from..=to).all(|k| {
        let t = skip + k as f64 * round;
        let i = ticks.partition_point(|x| x[0] < t);
        let Some(hi) = ticks.get(i) else {
            return false;
        };
        let lo = if i == 0 { 0.0 } else { ticks[i - 1][0] };
        hi[0] - lo <= 0.6 * round
    })
}

/// Rounds `from..to` (0-based) from the ticks.
fn tick_rounds(plan: &SteadyPlan, ticks: &[[f64; 4]], from: usize, to: usize) -> Vec<Round> {
    let (skip, round) = (plan.skip.as_secs_f64(), plan.round.as_secs_f64());
    (from..to)
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
        // Judged once a round ends: the window of the last rounds (the earlier windows
        // were judged when their last round ended).
        let n = rounds_done(&self.plan, &t.0);
        if n <= t.1 {
            return;
        }
        t.1 = n;
        let w = self.plan.window as usize;
        if n >= w
            && bracketed(&self.plan, &t.0, n - w, n)
            && self
                .plan
                .first(&tick_rounds(&self.plan, &t.0, n - w, n))
                .is_some()
        {
            self.pass_stop
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // The next window starts a round later: the ticks before it are not needed again
        // (the last one before it is, to interpolate at its start).
        let (skip, round) = (self.plan.skip.as_secs_f64(), self.plan.round.as_secs_f64());
        let keep = skip + (n + 1).saturating_sub(w) as f64 * round;
        let i = t.0.partition_point(|x| x[0] < keep);
        if i > 1 {
            t.0.drain(..i - 1);
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
    use iolab_engine::PassObserver;
    use std::sync::atomic::{AtomicBool, Ordering};

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
        assert_eq!(rounds_done(&plan, &ticks), 2);
        let r = tick_rounds(&plan, &ticks, 0, 2);
        assert_eq!(r.len(), 2, "{r:?}");
        for x in r {
            assert!((x.mb_s - 10.0).abs() < 1e-6, "{x:?}");
            assert!((x.iops - 1000.0).abs() < 1e-6, "{x:?}");
            assert!((x.lat_us - 100.0).abs() < 1e-6, "{x:?}");
        }
        assert_eq!(plan.max_rounds(), 9);

        // The watch: 100 MB/s for 0.8 s, then 20: the window of two 0.5 s rounds holds
        // first in rounds 3-4 (1 s to 2 s: round 2 holds the drop), so the pass is ended
        // at the first tick past 2 s, not before; old ticks are let go.
        let plan = SteadyPlan {
            round: Duration::from_millis(500),
            skip: Duration::ZERO,
            ..plan
        };
        let (signal, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        let w = Watch::new(&(), plan, &signal, &stop);
        let mut stopped_at = None;
        for i in 1..=80 {
            let t = i as f64 * 0.05;
            let bytes = if t <= 0.8 {
                t * 100e6
            } else {
                80e6 + (t - 0.8) * 20e6
            };
            w.tick_ios(bytes as u64, 0, 0, Duration::from_secs_f64(t));
            if stop.load(Ordering::Relaxed) {
                stopped_at = Some(t);
                break;
            }
        }
        let at = stopped_at.expect("the window held");
        assert!((2.0..2.06).contains(&at), "{at}");
        assert!(w.ticks.lock().unwrap().0.len() < 30);
        // Ticks 300 ms apart (a loaded machine) around 100 ms rounds: an even rate by
        // interpolation, but not judged live; ticks 50 ms apart are.
        let plan = SteadyPlan {
            round: Duration::from_millis(100),
            ..plan
        };
        let sparse: Vec<[f64; 4]> = (1..=3).map(|i| [i as f64 * 0.3, 1.0, 0.0, 0.0]).collect();
        assert!(!bracketed(&plan, &sparse, 0, 3));
        let dense: Vec<[f64; 4]> = (1..=8).map(|i| [i as f64 * 0.05, 1.0, 0.0, 0.0]).collect();
        assert!(bracketed(&plan, &dense, 0, 3));
        let (signal, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        let w = Watch::new(&(), plan, &signal, &stop);
        for t in [0.3, 0.6, 0.9, 1.2] {
            w.tick_ios((t * 1e8) as u64, 0, 0, Duration::from_secs_f64(t));
        }
        assert!(
            !stop.load(Ordering::Relaxed),
            "judged between ticks 300 ms apart"
        );
        // A signal ends the pass at the next tick.
        let (signal, stop) = (AtomicBool::new(true), AtomicBool::new(false));
        Watch::new(&(), plan, &signal, &stop).tick_ios(1, 1, 1, Duration::from_millis(50));
        assert!(stop.load(Ordering::Relaxed));
        assert!(whole_intervals(Duration::from_millis(300), false));
        assert!(!whole_intervals(Duration::from_millis(250), false));
        assert!(!whole_intervals(Duration::ZERO, false) && whole_intervals(Duration::ZERO, true));
    }
}
