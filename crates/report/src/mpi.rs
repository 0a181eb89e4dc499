//! MPI runs (docs/mpi.md): each host's MB/s per test beside the aggregate, read from the
//! run's `env.mpi`, in the form every format shows it (terminal, Markdown and HTML rows, the
//! HTML bar chart).

use iolab_measure::RunRecord;
use serde_json::Value;

/// Each host's MB/s per test of an MPI run, and the run's aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct PerHost {
    /// Every host in the order of its first rank, with its number of ranks.
    pub hosts: Vec<(String, usize)>,
    /// Every test in the order run.
    pub tests: Vec<TestHosts>,
    /// What the figures are: "MB/s", or "ops/s" for a metadata run.
    pub unit: String,
}

/// One test: the aggregate headline and each host's rate (in the order of
/// [`PerHost::hosts`]; None when a host has none).
#[derive(Debug, Clone, PartialEq)]
pub struct TestHosts {
    pub test: String,
    /// The test's headline MB/s (over all ranks' bytes; ops/s over all ranks' operations
    /// for a metadata run), if the run has the test.
    pub aggregate: Option<f64>,
    /// The median over the test's passes of the host's ranks' summed MB/s.
    pub hosts: Vec<Option<f64>>,
}

/// What `env.mpi` says per host, for a run made by MPI ranks; None for any other run.
pub fn per_host(run: &RunRecord) -> Option<PerHost> {
    let mpi = run.env.get("mpi")?;
    let hosts: Vec<(String, usize)> = mpi
        .get("hosts")?
        .as_array()?
        .iter()
        .filter_map(|h| {
            let name = h.get("host")?.as_str()?.to_string();
            let ranks = h.get("ranks").and_then(Value::as_array).map_or(0, Vec::len);
            Some((name, ranks))
        })
        .collect();
    // Runs stored before `host_unit` are in MB/s.
    let unit = mpi
        .get("host_unit")
        .and_then(Value::as_str)
        .unwrap_or("MB/s");
    let ops = unit == "ops/s";
    let tests: Vec<TestHosts> = mpi
        .get(if ops { "host_ops_s" } else { "host_mb_s" })?
        .as_array()?
        .iter()
        .filter_map(|row| {
            let test = row.get("test")?.as_str()?.to_string();
            let by_host = row.get("hosts")?;
            Some(TestHosts {
                aggregate: run
                    .tests
                    .iter()
                    .find(|t| t.name == test && !t.passes.is_empty())
                    .map(|t| if ops { t.summary.iops } else { t.summary.mb_s }),
                hosts: hosts
                    .iter()
                    .map(|(h, _)| by_host.get(h).and_then(Value::as_f64))
                    .collect(),
                test,
            })
        })
        .collect();
    (!hosts.is_empty() && !tests.is_empty()).then_some(PerHost {
        hosts,
        tests,
        unit: unit.to_string(),
    })
}

/// The rows of the per-host table: test, host, ranks, MB/s (or ops/s); each test's hosts, then its
/// aggregate ("all hosts").
pub fn rows(p: &PerHost) -> Vec<[String; 4]> {
    let all: usize = p.hosts.iter().map(|(_, r)| r).sum();
    let mb = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
    let mut out = Vec::new();
    for t in &p.tests {
        for ((host, ranks), v) in p.hosts.iter().zip(&t.hosts) {
            out.push([t.test.clone(), host.clone(), ranks.to_string(), mb(*v)]);
        }
        out.push([
            t.test.clone(),
            ALL_HOSTS.to_string(),
            all.to_string(),
            mb(t.aggregate),
        ]);
    }
    out
}

/// The aggregate's row label.
pub const ALL_HOSTS: &str = "all hosts";

/// What the per-host figures are, under their table.
pub fn explained(p: &PerHost) -> String {
    let what = match p.unit.as_str() {
        "ops/s" => "operations",
        _ => "bytes",
    };
    format!(
        "each host: the median over the test's passes of its ranks' summed {u}; all hosts: \
         the test's headline, all ranks' {what} over (last end − first start) of each pass",
        u = p.unit
    )
}
