//! Measurement: what a pass produced (bytes, I/Os, latency histograms, a throughput time
//! series, CPU use) and the test and run records that carry passes to statistics, the
//! store and the reports.
//!
//! Everything here is plain data with serde derives; the engine fills it, `iolab-stats`
//! summarises it, `iolab-store` keeps it and `iolab-report` prints it.

mod activity;
mod cpu;
mod histogram;
mod model;
mod warning;

pub use activity::{Activity, ActivitySample, DeviceIo, ProcessCpu};
pub use cpu::{CpuSample, CpuUsage};
pub use histogram::LatencyHistogram;
pub use model::{
    DirResult, IoErrorRecord, LatSummary, MetricSummary, PassContext, PassRecord, RunRecord,
    SyncStats, TargetInfo, TargetKind, TestRecord, TestSummary, TimeSeries, MB,
};
pub use warning::{Caveat, CodeDoc, Warning, WarningCode, DOCS_BEGIN, DOCS_END};
