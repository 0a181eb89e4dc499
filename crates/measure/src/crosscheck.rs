//! What `iolab crosscheck` measured: each test's passes by iolab and by fio, run
//! alternately, kept pair by pair so the ratio's interval can be taken over the pairs.

/// One pass of one tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSample {
    pub mb_s: f64,
    pub iops: f64,
    pub lat_mean_us: f64,
    /// Requests the target's device completed per I/O of the job's block size during the
    /// pass (/proc/diskstats: requests × bs / bytes); None off a block device or with mixed
    /// sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_io: Option<f64>,
    /// Requests the device's queue merged, per I/O of the block size, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merges_per_io: Option<f64>,
    /// The tool's own CPU time (user + system) per I/O, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_io: Option<f64>,
    /// Fraction (0..1) of the region in the page cache before the pass (mincore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_before: Option<f64>,
}

/// One test: its measured passes, `iolab[i]` run right before `fio[i]`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossRow {
    pub test: String,
    pub iolab: Vec<ToolSample>,
    pub fio: Vec<ToolSample>,
}
