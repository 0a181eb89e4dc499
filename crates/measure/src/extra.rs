//! The keys of a test's `extra` that the runner writes whatever the workload: the
//! `--verify` tally (`verify`), how adaptive passes ended (`adaptive`), the steady-state
//! judgement (`steady_state`), what preconditioning did (`precondition`) and `run
//! sustained`'s burst and recovery (`sustained`, `recovery`). Each is one typed struct,
//! serialised as the JSON documented in docs/ and read back through
//! [`TestRecord::runner_extra`]; the keys only one workload writes are read through its
//! descriptor ([`crate::workload::WorkloadInfo`]). Code below `iolab-workloads` reads
//! `extra` through these types only (a test in `iolab-workloads` checks it).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

pub use iolab_integrity::Tally;

use crate::TestRecord;

/// The keys the runner writes into a test's `extra`; the ones it did not write (or that
/// do not read as their type: a run stored by another version) are `None`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunnerExtra {
    /// The `--verify` counts of the test's read-backs.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub verify: Option<Tally>,
    /// How its adaptive passes ended.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub adaptive: Option<Adaptive>,
    /// `--steady-state`'s judgement of its one pass.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub steady_state: Option<SteadyState>,
    /// What `--precondition` did before the first test.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub precondition: Option<Precondition>,
    /// `run sustained`: the first test of a pair, its burst and sustained rates.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub sustained: Option<Sustained>,
    /// `run sustained`: the second test of a pair, how much of the burst came back.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub recovery: Option<Recovery>,
}

/// A key's value as its type, or `None` when it does not read as one.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

impl RunnerExtra {
    /// The runner's keys of a test's `extra`.
    pub fn of(extra: &Value) -> RunnerExtra {
        if !extra.is_object() {
            return RunnerExtra::default();
        }
        RunnerExtra::deserialize(extra).unwrap_or_default()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.verify.is_none()
            && self.adaptive.is_none()
            && self.steady_state.is_none()
            && self.precondition.is_none()
            && self.sustained.is_none()
            && self.recovery.is_none()
    }

    /// Writes the keys it holds into `extra` (an object then, if it was not), leaving the
    /// others as they are.
    pub fn put(&self, extra: &mut Value) {
        if self.is_empty() {
            return;
        }
        let Ok(Value::Object(keys)) = serde_json::to_value(self) else {
            return;
        };
        if !extra.is_object() {
            *extra = Value::Object(Map::new());
        }
        if let Some(obj) = extra.as_object_mut() {
            obj.extend(keys);
        }
    }
}

impl TestRecord {
    /// The keys the runner wrote into the test's `extra`.
    pub fn runner_extra(&self) -> RunnerExtra {
        RunnerExtra::of(&self.extra)
    }
}

/// The workload a test's `extra` names (`workload`), if it names one.
pub fn workload_name(extra: &Value) -> Option<&str> {
    extra.get("workload").and_then(Value::as_str)
}

/// `extra.adaptive` of a test run with adaptive passes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Adaptive {
    /// The CI half-width aimed for, % of the mean.
    pub target_pct: f64,
    /// Why its passes ended.
    pub stopped: Stopped,
    /// How many times the run came to the test (more than 1: it got time other tests left).
    pub visits: u32,
    /// Wall time of its passes, warm-ups and read-backs included, in seconds.
    pub seconds: f64,
}

/// Why a test's passes ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stopped {
    /// Its fixed number of passes ran.
    Runs,
    /// Adaptive: the interval reached its target.
    Stable,
    /// Adaptive: `--max-runs` passes ran first.
    MaxRuns,
    /// Adaptive: `--max-time` of measured passes went by first.
    MaxTime,
    /// Adaptive: its share of the run's budget was used first.
    Budget,
    /// A stop request (Ctrl-C, SIGTERM, SIGHUP).
    Interrupted,
}

/// `extra.steady_state`: the rounds of a `--steady-state` pass and the window judged (the
/// one that held the rule, else the last rounds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SteadyState {
    /// The rule, as `--steady-state` said it.
    pub rule: String,
    pub attained: bool,
    /// The window's first round (1-based) when it held.
    pub round: Option<usize>,
    /// The rounds the pass held up to the window's end (all of them when none held).
    pub rounds: usize,
    pub window_rounds: u32,
    pub max_rounds: u32,
    pub round_s: f64,
    pub skip_s: f64,
    /// Where the window starts, seconds into the pass (none: no round was judged).
    pub window_start_s: Option<f64>,
    pub window_mean_mb_s: f64,
    pub window_mean_iops: f64,
    pub window_mean_lat_us: f64,
    /// Its range and largest excursion, fractions of its mean.
    pub window_range: Option<f64>,
    pub window_excursion: Option<f64>,
}

/// `extra.precondition` of every test after `--precondition` wrote the region.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Precondition {
    /// As asked (`2x`, `4 GiB`).
    pub asked: String,
    pub bytes: u64,
    pub region_bytes: u64,
    pub block_bytes: u64,
    pub seconds: f64,
    pub mb_s: f64,
}

/// Why a sustained test's rounds ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SustainedEnd {
    /// First test: steady after any cliff. Second: the cliff came again.
    Steady,
    /// Second test: 1.5 × the first burst's bytes with no cliff: the burst came back whole.
    Recovered,
    /// `max_time` of rounds went by first.
    MaxTime,
}

/// `extra.sustained`: a pair's first test, its burst before a cliff and its sustained rate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sustained {
    pub burst_mb_s: Option<f64>,
    pub burst_bytes: Option<u64>,
    pub burst_seconds: Option<f64>,
    pub sustained_mb_s: Option<f64>,
    pub steady: bool,
    pub steady_from_round: Option<usize>,
    pub window_rounds: usize,
    pub window_mean_mb_s: Option<f64>,
    pub window_range: Option<f64>,
    pub window_excursion: Option<f64>,
    pub bytes: u64,
    /// Why its rounds ended (none: an end this version does not know).
    #[serde(deserialize_with = "lenient")]
    pub stopped: Option<SustainedEnd>,
    /// The steady window is the one the pass was ended on, judged on its progress ticks:
    /// the stored 100 ms series (each I/O in the interval it completed in) shows none.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub judged_on_ticks: bool,
}

/// `extra.recovery`: a pair's second test, after its idle time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Recovery {
    pub first_burst_bytes: Option<u64>,
    pub idle_s: f64,
    pub burst_bytes: Option<u64>,
    pub burst_seconds: Option<f64>,
    pub share: Option<f64>,
    pub recovered_within_idle: bool,
    pub recovery_s: Option<f64>,
    pub recovery_mb_s: Option<f64>,
    /// Why its rounds ended (none: an end this version does not know).
    #[serde(deserialize_with = "lenient")]
    pub stopped: Option<SustainedEnd>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_keys_read_back_as_written_and_leave_the_others() {
        let mut extra = serde_json::json!({"workload": "x", "n": 3});
        let keys = RunnerExtra {
            adaptive: Some(Adaptive {
                target_pct: 5.0,
                stopped: Stopped::MaxRuns,
                visits: 2,
                seconds: 1.5,
            }),
            ..Default::default()
        };
        keys.put(&mut extra);
        assert_eq!(extra["adaptive"]["stopped"], "max-runs");
        assert_eq!(extra["n"], 3);
        let back = RunnerExtra::of(&extra);
        assert_eq!(back.adaptive, keys.adaptive);
        assert!(back.verify.is_none() && back.steady_state.is_none());
        // A key that does not read as its type is none; the others still read.
        extra["steady_state"] = "garbage".into();
        assert!(RunnerExtra::of(&extra).steady_state.is_none());
        assert_eq!(RunnerExtra::of(&extra).adaptive, keys.adaptive);
        // Nothing to write leaves a null `extra` null.
        let mut null = Value::Null;
        RunnerExtra::default().put(&mut null);
        assert!(null.is_null());
        assert!(RunnerExtra::of(&Value::Null).is_empty());
    }
}
