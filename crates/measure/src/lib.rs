//! Measurement: what a pass produced (bytes, I/Os, latency histograms, a throughput time
//! series, CPU use) and the test and run records that carry passes to statistics, the
//! store and the reports.
//!
//! Mostly plain data with serde derives (the engine fills it, `iolab-stats` summarises it,
//! `iolab-store` keeps it and `iolab-report` prints it); `activity` and `cpu` read /proc for
//! the samples a pass takes, `workload` holds the descriptors the binary installs, and `extra`
//! the typed keys the runner writes into a test's `extra`.

/// The trait impls of an enum that stands for a stable string (a warning code, a target
/// kind): given its `as_str` and `parse` (which keeps an unknown string in a variant of
/// its own), equality and hashing follow the string, it prints and (de)serialises as the
/// string, and converts from one.
macro_rules! string_enum_impls {
    ($t:ty) => {
        impl From<&str> for $t {
            fn from(s: &str) -> Self {
                <$t>::parse(s)
            }
        }

        impl From<String> for $t {
            fn from(s: String) -> Self {
                <$t>::parse(&s)
            }
        }

        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl Eq for $t {}

        impl std::hash::Hash for $t {
            fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
                self.as_str().hash(state);
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <String as serde::Deserialize>::deserialize(d).map(|s| <$t>::parse(&s))
            }
        }
    };
}

mod activity;
mod cpu;
pub mod crosscheck;
pub mod extra;
mod histogram;
mod model;
mod warning;
pub mod workload;

pub use activity::{count_as_ours, Activity, ActivitySample, DeviceIo, ProcessCpu, EMUDISK_DAEMON};
pub use cpu::{CpuLossSampler, CpuSample, CpuUsage};
pub use histogram::{HistogramError, LatencyHistogram};
pub use model::{
    engine_of_text, DirResult, DirSeries, IoErrorRecord, LatSummary, MetricSummary, PassContext,
    PassRecord, RunRecord, Score, SyncStats, TargetInfo, TargetKind, TestRecord, TestSummary,
    TimeSeries, FAILED_NOTE, MB,
};
pub use warning::{Caveat, CodeDoc, Warning, WarningCode, Weight, DOCS_BEGIN, DOCS_END};
