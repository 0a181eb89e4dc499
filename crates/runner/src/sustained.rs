//! Sustained writes (`iolab run sustained`): when the block pass loop ends a test's one
//! pass (at most `max_time` long, no ramp, no warm-up; one pass, so that the device never
//! idles between rounds), and what each test reports.
//!
//! Tests come in pairs. The first writes until the per-second rates of its series (rounds
//! of ten 100 ms intervals) have been steady after any cliff (`iolab_stats::series`): the
//! SNIA window of `window` rounds whose range is within 20% and whose best-fit line's
//! excursion is within 10% of their mean, all after the cliff, once `min_write` bytes are
//! written. It reports the burst (rate, bytes, seconds before the cliff) and the sustained
//! rate (the window's mean). The second waits `idle`, then writes until its rate falls
//! below the midway between the first's burst and sustained rates for a second
//! ([`regained`]), or 1.5 × the first burst's bytes go by at the burst rate (the burst
//! came back whole): the bytes regained over the device's idle time (from the first's last
//! write to the second's first) are the recovery rate, and the first burst's bytes at that
//! rate the time to recover wholly. While a pass runs, a [`Watch`] builds the series from
//! the pass's ticks and ends it; the reported figures come from the stored series.

use std::time::{Duration, Instant};

use iolab_measure::TestRecord;
use iolab_stats::series::{find_cliff, test_samples, Cliff, Sample, Window};

/// The name suffix of a pair's second test.
pub const AFTER_IDLE: &str = "after idle";

/// What `run sustained` asks of the pass loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SustainedPlan {
    /// Rounds in the steady-state window.
    pub window: usize,
    /// Most round time of one test.
    pub max_time: Duration,
    /// The pause before a pair's second test.
    pub idle: Duration,
    /// Fewest bytes the first test writes before steady state may end it.
    pub min_write: u64,
}

/// What the loop keeps between the tests of a pair: the first test's burst.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub burst_bytes: Option<u64>,
    /// When the first test's last write completed (its pass ended).
    pub ended: Option<Instant>,
    /// The second test: the device's idle time before it (from `ended` to its start).
    pub idled: Option<Duration>,
    /// The first test's burst and sustained rates (bytes per second): the levels the
    /// second test's writes are judged between.
    pub levels: Option<(f64, f64)>,
    /// The steady window the pass was ended on, judged on its progress ticks (first round,
    /// window), when a [`Watch`] ended it as steady.
    pub ended_on: Option<(usize, Window)>,
}

/// Whether `name` is a pair's second test.
pub fn is_recovery(name: &str) -> bool {
    name.ends_with(AFTER_IDLE)
}

/// Why a sustained test's rounds ended.
pub use iolab_measure::extra::SustainedEnd as End;

/// The series in rounds of `ROUND` intervals (1 s), each round's MB/s and its start
/// (seconds into the series); a last partial round is left out.
fn rounds(samples: &[Sample]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut at = 0.0;
    for chunk in samples.chunks(ROUND) {
        let secs: f64 = chunk.iter().map(|s| s.seconds).sum();
        let bytes: u64 = chunk.iter().map(|s| s.bytes).sum();
        if chunk.len() == ROUND {
            out.push((at, bytes as f64 / iolab_measure::MB / secs.max(1e-9)));
        }
        at += secs;
    }
    out
}

/// The burst a second test got back.
#[derive(Debug, Clone, PartialEq)]
pub struct Regained {
    pub bytes: u64,
    pub seconds: f64,
    /// Seconds of the series after the burst ended.
    pub seconds_after: f64,
}

/// Where a second test's burst ended, judged between the first test's levels (`burst`,
/// `sustained` in bytes per second): the first interval below the midway rate whose next
/// second (at least half a second of it) is below it too; the burst's bytes are those
/// before it plus that interval's share at the burst rate.
pub fn regained(samples: &[Sample], (burst, sustained): (f64, f64)) -> Option<Regained> {
    if burst <= sustained {
        return None;
    }
    let mid = (burst + sustained) / 2.0;
    let rate = |v: &[Sample]| {
        let secs: f64 = v.iter().map(|s| s.seconds).sum();
        v.iter().map(|s| s.bytes).sum::<u64>() as f64 / secs.max(1e-9)
    };
    let n = samples.len();
    let i = (0..n).find(|&i| {
        let next = &samples[i..n.min(i + ROUND)];
        next.len() * 2 >= ROUND && rate(&samples[i..=i]) < mid && rate(next) < mid
    })?;
    let before: u64 = samples[..i].iter().map(|s| s.bytes).sum();
    let t: f64 = samples[..i].iter().map(|s| s.seconds).sum();
    let x = &samples[i];
    let f = ((x.mb_s() * iolab_measure::MB - sustained) / (burst - sustained)).clamp(0.0, 1.0);
    let total: f64 = samples.iter().map(|s| s.seconds).sum();
    Some(Regained {
        bytes: before + (burst * f * x.seconds) as u64,
        seconds: t + f * x.seconds,
        seconds_after: total - t - f * x.seconds,
    })
}

/// Intervals of the series in a round.
pub const ROUND: usize = 10;

/// The steady window of a first test: its last `window` rounds, all after the cliff;
/// with the window's first round (1-based).
fn steady_window(
    plan: &SustainedPlan,
    samples: &[Sample],
    cliff: Option<&Cliff>,
) -> Option<(usize, Window)> {
    let r = rounds(samples);
    let n = r.len();
    if n < plan.window {
        return None;
    }
    let from = n - plan.window;
    if cliff.is_some_and(|c| r[from].0 < c.seconds_before - 1e-9) {
        return None;
    }
    let v: Vec<f64> = r[from..].iter().map(|x| x.1).collect();
    Window::of(&v)
        .filter(Window::snia_steady)
        .map(|w| (from + 1, w))
}

/// The steady window a first test is reported with, and whether it comes from the pass's
/// progress ticks rather than its stored series: that of its whole series; or, when it
/// ended as steady ([`SustainedPlan::judge`]) and the rounds the pass still ran while it
/// stopped (on a busy host, a round or more) moved its last window out of steadiness, the
/// latest window of the series that was steady; or, when the stored series shows none (its
/// intervals hold each I/O by its completion time, the ticks the pass judged come late on
/// a busy host and spread the bytes between them), `ended_on`: the window the pass was
/// ended on. Never a window for a test that did not end as steady and is not steady at
/// its end.
fn judged_window(
    plan: &SustainedPlan,
    samples: &[Sample],
    cliff: Option<&Cliff>,
    end: Option<End>,
    ended_on: Option<(usize, Window)>,
) -> Option<((usize, Window), bool)> {
    if let Some(w) = steady_window(plan, samples, cliff) {
        return Some((w, false));
    }
    if end != Some(End::Steady) {
        return None;
    }
    let n = rounds(samples).len();
    (plan.window..n)
        .rev()
        .find_map(|k| steady_window(plan, &samples[..k * ROUND], cliff))
        .map(|w| (w, false))
        .or_else(|| ended_on.map(|w| (w, true)))
}

impl SustainedPlan {
    /// Whether a test's writes may end with the series so far (the pass's own length,
    /// `max_time`, ends them otherwise).
    pub fn judge(&self, samples: &[Sample], recovery: bool, state: &State) -> Option<End> {
        let bytes: u64 = samples.iter().map(|s| s.bytes).sum();
        if recovery {
            return match (state.burst_bytes, state.levels) {
                (Some(b), Some(levels)) => {
                    // A second of the lower rate after the burst ended, so that the stored
                    // series (judged again when the test is reported) shows it too.
                    if regained(samples, levels).is_some_and(|r| r.seconds_after >= 1.0) {
                        Some(End::Steady)
                    } else {
                        (bytes as f64 >= 1.5 * b as f64).then_some(End::Recovered)
                    }
                }
                // No burst to come back: a window's look is enough.
                _ => (rounds(samples).len() >= self.window).then_some(End::Steady),
            };
        }
        let cliff = find_cliff(samples);
        (bytes >= self.min_write && steady_window(self, samples, cliff.as_ref()).is_some())
            .then_some(End::Steady)
    }

    /// `extra.sustained` of a pair's first test, or `extra.recovery` of its second, set in
    /// `out`, and what the second needs from the first in `state`.
    pub fn extra(
        &self,
        t: &TestRecord,
        end: Option<End>,
        state: &mut State,
        out: &mut RunnerExtra,
    ) {
        let samples = test_samples(t);
        let cliff = find_cliff(&samples);
        let mb = iolab_measure::MB;
        if is_recovery(&t.name) {
            let idle = state.idled.unwrap_or(self.idle).as_secs_f64();
            let first = state.burst_bytes;
            let back = state.levels.and_then(|l| regained(&samples, l));
            let regained = match (end, &back) {
                (_, Some(r)) => Some(r.bytes),
                (Some(End::Recovered), None) => first,
                _ => None,
            };
            let whole =
                matches!((regained, first), (Some(r), Some(f)) if r as f64 >= 0.9 * f as f64);
            let recovery_s = match (regained, first) {
                (Some(r), Some(f)) if r > 0 && !whole => Some(idle * f as f64 / r as f64),
                _ => None,
            };
            let v = Recovery {
                first_burst_bytes: first,
                idle_s: idle,
                burst_bytes: regained,
                burst_seconds: back.as_ref().map(|r| r.seconds),
                share: match (regained, first) {
                    (Some(r), Some(f)) if f > 0 => Some(r as f64 / f as f64),
                    _ => None,
                },
                recovered_within_idle: whole,
                recovery_s,
                recovery_mb_s: regained.map(|r| r as f64 / mb / idle.max(1e-9)),
                stopped: end,
            };
            out.recovery = Some(v);
            return;
        }
        let judged = judged_window(self, &samples, cliff.as_ref(), end, state.ended_on);
        let steady = judged.map(|j| j.0);
        let window = steady.map(|s| s.1).or_else(|| {
            let r: Vec<f64> = rounds(&samples).iter().map(|x| x.1).collect();
            Window::of(&r[r.len().saturating_sub(self.window)..])
        });
        state.burst_bytes = cliff.as_ref().map(|c| c.bytes_before);
        state.levels = cliff
            .as_ref()
            .map(|c| (c.before_mb_s * mb, c.after_mb_s * mb));
        let v = Sustained {
            burst_mb_s: cliff.as_ref().map(|c| c.before_mb_s),
            burst_bytes: cliff.as_ref().map(|c| c.bytes_before),
            burst_seconds: cliff.as_ref().map(|c| c.seconds_before),
            sustained_mb_s: match (steady, &cliff) {
                (Some((_, w)), _) => Some(w.mean),
                (None, Some(c)) => Some(c.after_mb_s),
                (None, None) => window.map(|w| w.mean),
            },
            steady: steady.is_some(),
            steady_from_round: steady.map(|s| s.0),
            window_rounds: self.window,
            window_mean_mb_s: window.map(|w| w.mean),
            window_range: window.map(|w| w.range),
            window_excursion: window.map(|w| w.excursion),
            bytes: t.passes.iter().map(|p| p.bytes).sum(),
            stopped: end,
            judged_on_ticks: judged.is_some_and(|j| j.1),
        };
        out.sustained = Some(v);
    }

    /// One line for the run's notes from a test's `extra`.
    pub fn note(name: &str, extra: &RunnerExtra) -> Option<String> {
        if let Some(s) = &extra.sustained {
            let sustained = s.sustained_mb_s?;
            let steady = if s.judged_on_ticks {
                "steady as the pass saw it; its stored 100 ms series spreads more, on a busy \
                 host"
            } else if s.steady {
                "steady"
            } else {
                "not steady before --max-time"
            };
            return Some(match (s.burst_mb_s, s.burst_bytes) {
                (Some(b), Some(bytes)) => format!(
                    "{name}: burst {b:.1} MB/s for the first {} ({:.1} s), then sustained \
                     {sustained:.1} MB/s ({steady})",
                    iolab_spec::format_bytes(bytes),
                    s.burst_seconds.unwrap_or(0.0)
                ),
                _ => format!("{name}: no cliff; {sustained:.1} MB/s throughout ({steady})"),
            });
        }
        let r = extra.recovery.as_ref()?;
        let idle = r.idle_s;
        if r.first_burst_bytes.is_none() {
            return Some(format!(
                "{name}: no cliff in the writes before it: no burst to come back"
            ));
        }
        let back = match r.burst_bytes {
            Some(b) => format!("the burst came back for {}", iolab_spec::format_bytes(b)),
            None => "no burst came back".into(),
        };
        let verdict = if r.recovered_within_idle {
            format!("the cache recovered wholly within {idle:.1} s idle")
        } else if let Some(t) = r.recovery_s {
            format!("at that rate the cache recovers wholly in {t:.1} s idle")
        } else {
            "the recovery time is unknown".into()
        };
        Some(format!("{name}: after {idle:.1} s idle {back}; {verdict}"))
    }
}

use iolab_measure::extra::{Recovery, RunnerExtra, Sustained};

/// Waits `d` unless `stop` is set first.
pub fn idle(d: Duration, stop: &std::sync::atomic::AtomicBool) {
    let t0 = Instant::now();
    while t0.elapsed() < d && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep((d - t0.elapsed()).min(Duration::from_millis(50)));
    }
}

/// The observer of a sustained test's pass: builds the series from the ticks and ends the
/// pass (`pass_stop`) once [`SustainedPlan::judge`] says so, or on a signal.
pub struct Watch<'a> {
    pub inner: &'a dyn iolab_engine::PassObserver,
    pub plan: SustainedPlan,
    pub recovery: bool,
    pub state: State,
    pub signal: &'a std::sync::atomic::AtomicBool,
    pub pass_stop: &'a std::sync::atomic::AtomicBool,
    /// (seconds, bytes so far) of every tick, and why it ended the pass.
    pub ticks: std::sync::Mutex<Ticks>,
}

/// The ticks a [`Watch`] saw ((seconds, bytes so far) each), and why it ended the pass.
/// With the steady window it ended on (see [`State::ended_on`]).
pub type Ticks = (Vec<(f64, u64)>, Option<End>, Option<(usize, Window)>);

impl Watch<'_> {
    /// Why it ended the pass, if it did.
    pub fn ended(&self) -> Option<End> {
        self.ticks.lock().ok().and_then(|t| t.1)
    }

    /// The steady window it ended the pass on, judged on the ticks.
    pub fn ended_on(&self) -> Option<(usize, Window)> {
        self.ticks.lock().ok().and_then(|t| t.2)
    }
}

/// 100 ms intervals from cumulative (seconds, bytes) ticks: the bytes at each boundary
/// are interpolated between the ticks around it (ticks come about every 50 ms, later on a
/// busy machine).
fn from_ticks(ticks: &[(f64, u64)]) -> Vec<Sample> {
    let Some(&(last, _)) = ticks.last() else {
        return Vec::new();
    };
    let iv = 0.1;
    let n = (last / iv).floor() as usize;
    let mut out = Vec::with_capacity(n);
    let (mut j, mut prev) = (0usize, 0.0f64);
    let mut lo = (0.0f64, 0u64);
    for k in 1..=n {
        let b = k as f64 * iv;
        while j < ticks.len() && ticks[j].0 < b {
            lo = ticks[j];
            j += 1;
        }
        let hi = ticks.get(j).copied().unwrap_or(lo);
        let at = if hi.0 > lo.0 {
            lo.1 as f64 + (hi.1 as f64 - lo.1 as f64) * (b - lo.0) / (hi.0 - lo.0)
        } else {
            hi.1 as f64
        };
        out.push(Sample {
            pass: 1,
            bytes: (at - prev).max(0.0).round() as u64,
            seconds: iv,
            cpu_lost_s: None,
            others_cpu_s: None,
            idle_cpu_s: None,
        });
        prev = prev.max(at);
    }
    out
}

impl iolab_engine::PassObserver for Watch<'_> {
    fn tick(&self, bytes: u64, elapsed: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        if crate::steady::handed_on(self.inner, self.signal, self.pass_stop, bytes, elapsed) {
            return;
        }
        let Ok(mut t) = self.ticks.lock() else {
            return;
        };
        t.0.push((elapsed.as_secs_f64(), bytes));
        // Judged every half second of ticks (about ten).
        if t.1.is_some() || t.0.len() % 10 != 0 {
            return;
        }
        let samples = from_ticks(&t.0);
        if let Some(end) = self.plan.judge(&samples, self.recovery, &self.state) {
            if end == End::Steady && !self.recovery {
                t.2 = steady_window(&self.plan, &samples, find_cliff(&samples).as_ref());
            }
            t.1 = Some(end);
            self.pass_stop.store(true, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_become_intervals_by_interpolation() {
        // 10 MB/s, ticks every 70 ms: every 100 ms interval holds 1 MB.
        let ticks: Vec<(f64, u64)> = (1..=30)
            .map(|i| (i as f64 * 0.07, (i as f64 * 700_000.0) as u64))
            .collect();
        let s = from_ticks(&ticks);
        assert_eq!(s.len(), 21);
        for x in &s {
            assert!(x.bytes.abs_diff(1_000_000) <= 1, "{s:?}");
        }
    }

    fn series(rates: &[f64]) -> Vec<Sample> {
        rates
            .iter()
            .map(|&r| Sample {
                pass: 1,
                bytes: (r * 1e5) as u64,
                seconds: 0.1,
                cpu_lost_s: None,
                others_cpu_s: None,
                idle_cpu_s: None,
            })
            .collect()
    }

    #[test]
    fn the_regained_burst_is_judged_between_the_first_tests_levels() {
        let mut r = vec![400.0; 5];
        r.push(250.0);
        r.extend([100.0; 10]);
        let g = regained(&series(&r), (400e6, 100e6)).unwrap();
        // 200 MB in 0.5 s, then half of the transition interval: 220 MB in 0.55 s.
        assert!(g.bytes.abs_diff(220_000_000) < 6_000_000, "{g:?}");
        assert!((g.seconds_after - 1.05).abs() < 0.06, "{g:?}");
        // Still at the burst rate: no end yet; a dip that comes back up: not the end.
        assert_eq!(regained(&series(&[400.0; 12]), (400e6, 100e6)), None);
        let mut dip = vec![400.0; 12];
        dip[4] = 90.0;
        assert_eq!(regained(&series(&dip), (400e6, 100e6)), None);
    }

    #[test]
    fn a_test_that_ended_steady_is_reported_with_the_window_it_ended_on() {
        let plan = SustainedPlan {
            window: 3,
            max_time: Duration::from_secs(60),
            idle: Duration::from_secs(1),
            min_write: 0,
        };
        // Steady at 100 MB/s for 4 rounds, then a round at 60 while the pass stopped.
        let mut r = vec![100.0; 40];
        r.extend([60.0; 10]);
        let s = series(&r);
        assert_eq!(judged_window(&plan, &s, None, None, None), None);
        let ((from, w), ticks) = judged_window(&plan, &s, None, Some(End::Steady), None).unwrap();
        assert_eq!(from, 2);
        assert!(!ticks);
        assert!((w.mean - 100.0).abs() < 1e-6, "{w:?}");
        // Not steady anywhere: no window, however it ended.
        let ragged: Vec<f64> = (0..50)
            .map(|i| if i / 10 % 2 == 0 { 100.0 } else { 50.0 })
            .collect();
        assert_eq!(
            judged_window(&plan, &series(&ragged), None, Some(End::Steady), None),
            None
        );
        // Unless the pass was ended on a window its ticks showed steady: that one, said to
        // come from the ticks; a test that did not end as steady never takes it.
        let live = (3, Window::of(&[80.0, 82.0, 81.0]).unwrap());
        let ragged = series(&ragged);
        assert_eq!(
            judged_window(&plan, &ragged, None, Some(End::Steady), Some(live)),
            Some((live, true))
        );
        assert_eq!(
            judged_window(&plan, &ragged, None, Some(End::MaxTime), Some(live)),
            None
        );
        // A stored series that is steady wins over the ticks.
        assert_eq!(
            judged_window(&plan, &s, None, Some(End::Steady), Some(live)).map(|j| j.1),
            Some(false)
        );
    }

    #[test]
    fn the_first_test_ends_steady_after_the_cliff_and_the_second_at_the_cliff() {
        let plan = SustainedPlan {
            window: 3,
            max_time: Duration::from_secs(60),
            idle: Duration::from_secs(1),
            min_write: 0,
        };
        let st = State::default();
        // 2 s at 400 MB/s, then 100 MB/s: not steady until three whole rounds after it.
        let mut r = vec![400.0; 20];
        r.extend([100.0; 29]);
        assert_eq!(plan.judge(&series(&r), false, &st), None);
        r.push(100.0);
        assert_eq!(plan.judge(&series(&r), false, &st), Some(End::Steady));
        // A flat series is steady after the window, unless --min-write wants more.
        let flat = series(&[100.0; 30]);
        assert_eq!(plan.judge(&flat, false, &st), Some(End::Steady));
        let more = SustainedPlan {
            min_write: 1 << 30,
            ..plan
        };
        assert_eq!(more.judge(&flat, false, &st), None);
        // The second test: ends at the cliff, or when 1.5 × the burst passed without one.
        let st = State {
            burst_bytes: Some(400_000_000),
            levels: Some((400e6, 100e6)),
            ..State::default()
        };
        let mut r = vec![400.0; 8];
        r.extend([100.0; 9]);
        assert_eq!(plan.judge(&series(&r), true, &st), None);
        r.push(100.0);
        assert_eq!(plan.judge(&series(&r), true, &st), Some(End::Steady));
        assert_eq!(plan.judge(&series(&[400.0; 14]), true, &st), None);
        assert_eq!(
            plan.judge(&series(&[400.0; 15]), true, &st),
            Some(End::Recovered)
        );
    }
}
