//! What `iolab crosscheck` measured: each test's passes by iolab and by fio, run
//! alternately, kept pair by pair so the ratio's interval can be taken over the pairs.

/// One pass of one tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSample {
    pub mb_s: f64,
    pub iops: f64,
    pub lat_mean_us: f64,
}

/// One test: its measured passes, `iolab[i]` run right before `fio[i]`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CrossRow {
    pub test: String,
    pub iolab: Vec<ToolSample>,
    pub fio: Vec<ToolSample>,
}
