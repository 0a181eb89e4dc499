//! An MPI run (docs/mpi.md) in every format: each host's MB/s per test beside the aggregate,
//! from `env.mpi` (terminal and Markdown rows, the HTML chart and table); other runs show
//! none of it.

mod common;

use iolab_report::html::render;
use iolab_report::set::RunSet;

/// The cdm run as three ranks on two hosts made it: host-a's ranks summing to 2000 MB/s on
/// SEQ1M Q8T1 Read, host-b's to 1146.
fn mpi_run() -> iolab_measure::RunRecord {
    let mut run = common::cdm_run();
    run.env["mpi"] = serde_json::json!({
        "ranks": [],
        "hosts": [{"host": "host-a", "ranks": [0, 1]}, {"host": "host<b>", "ranks": [2]}],
        "passes": [],
        "host_mb_s": [{"test": "SEQ1M Q8T1 Read", "hosts": {"host-a": 2000.0, "host<b>": 1146.0}}],
        "stopped_by_signal": false,
        "shared_file": null,
        "stonewall": false,
    });
    run
}

#[test]
fn the_terminal_shows_a_row_per_host_and_the_aggregate() {
    let out = iolab_report::render_run(&mpi_run());
    let part = out
        .split("Per host (MPI):")
        .nth(1)
        .unwrap_or_else(|| panic!("no per-host section:\n{out}"));
    let rows: Vec<Vec<&str>> = part
        .lines()
        .filter(|l| l.contains("SEQ1M Q8T1 Read"))
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 3, "{part}");
    assert_eq!(rows[0][1..], ["host-a", "2", "2000.00"], "{part}");
    assert_eq!(rows[1][1..], ["host<b>", "1", "1146.00"], "{part}");
    // The aggregate is the test's headline: 3146 MB/s in the cdm run.
    let agg: f64 = rows[2][3].parse().unwrap();
    assert_eq!(rows[2][1..3], ["all hosts", "3"], "{part}");
    assert!((agg - 3145.73).abs() < 0.01, "{agg}");
    let plain = iolab_report::render_run(&common::cdm_run());
    assert!(!plain.contains("Per host"), "not an MPI run");
}

#[test]
fn markdown_and_html_carry_the_hosts_and_the_aggregate() {
    let md = iolab_report::markdown::render(&RunSet::per_run(vec![mpi_run()]));
    assert!(md.contains("**Per host (MPI)**"), "{md}");
    assert!(
        md.contains("| SEQ1M Q8T1 Read | host-a | 2 | 2000.00 |"),
        "{md}"
    );
    assert!(
        md.contains("| SEQ1M Q8T1 Read | all hosts | 3 | 3145.73 |"),
        "{md}"
    );

    let html = render(&RunSet::per_run(vec![mpi_run()]));
    let fig = html
        .split("<figure data-chart=\"mpi-hosts\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no per-host chart"));
    let fig = fig.split("</figure>").next().unwrap();
    // One bar per host and the aggregate's: the legend names all three, the host name
    // escaped.
    for name in ["host-a (2 ranks)", "host&lt;b&gt; (1 rank)", "all hosts"] {
        assert!(fig.contains(name), "{name} missing");
    }
    assert!(!fig.contains("host<b>"));
    let table = html
        .split("<table data-table=\"mpi-hosts\">")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap();
    assert_eq!(table.matches("<tr>").count(), 4, "{table}");
    assert!(table.contains("<td class=\"n\">3145.73</td>"), "{table}");
    let plain = render(&RunSet::per_run(vec![common::cdm_run()]));
    assert!(!plain.contains("mpi-hosts"));
}

#[test]
fn a_metadata_run_shows_operations_per_second_per_host() {
    // The same hosts' figures, as a metadata run's ops/s: the table's column and the
    // aggregate (the test's IOPS headline) follow `host_unit`.
    let mut run = mpi_run();
    let mpi = &mut run.env["mpi"];
    mpi["host_ops_s"] = mpi["host_mb_s"].clone();
    mpi["host_mb_s"] = serde_json::json!([]);
    mpi["host_unit"] = "ops/s".into();
    let iops = run
        .tests
        .iter()
        .find(|t| t.name == "SEQ1M Q8T1 Read")
        .unwrap()
        .summary
        .iops;
    let out = iolab_report::render_run(&run);
    let part = out
        .split("Per host (MPI):")
        .nth(1)
        .expect("per-host section");
    assert!(
        part.contains("ops/s") && part.contains("summed ops/s"),
        "{part}"
    );
    assert!(
        part.contains("2000.00") && part.contains(&format!("{iops:.2}")),
        "{part}"
    );
    let md = iolab_report::markdown::render(&RunSet::per_run(vec![run.clone()]));
    assert!(md.contains("| Test | Host | Ranks | ops/s |"), "{md}");
    let html = render(&RunSet::per_run(vec![run]));
    assert!(html.contains("<th class=\"n\">ops/s</th>"));
}
