//! CSV export: read back with the csv crate, one row per pass with exactly the stored
//! values, empty cells for what a pass does not have.

mod common;

use std::collections::HashMap;

use iolab_report::csv::{render, render_runs, COLUMNS};
use iolab_report::set::RunSet;

fn read(text: &str) -> (Vec<String>, Vec<HashMap<String, String>>) {
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| {
            let rec = rec.unwrap();
            header
                .iter()
                .cloned()
                .zip(rec.iter().map(String::from))
                .collect()
        })
        .collect();
    (header, rows)
}

fn num(row: &HashMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?}", row[key]))
}

#[test]
fn one_row_per_pass_with_the_exact_stored_values() {
    let mut runs = vec![common::cdm_run(), common::atto_run(), common::custom_run()];
    runs.extend(common::workload_runs());
    runs[1].id = Some(43);
    let text = render_runs(&runs);
    let (header, rows) = read(&text);
    assert_eq!(header, COLUMNS);
    let passes: usize = runs
        .iter()
        .flat_map(|r| &r.tests)
        .map(|t| t.passes.len())
        .sum();
    assert_eq!(rows.len(), passes);
    // Walk the records in order: every pass is a row with its values, bit for bit.
    let mut i = 0;
    for run in &runs {
        for t in &run.tests {
            for p in &t.passes {
                let row = &rows[i];
                i += 1;
                assert_eq!(row["test"], t.name);
                assert_eq!(row["group"], t.group);
                assert_eq!(row["rw"], t.job.rw.as_str());
                assert_eq!(row["preset"], run.preset);
                assert_eq!(row["workload"], run.workload);
                assert_eq!(row["pass"], p.index.to_string());
                assert_eq!(row["bytes"], p.bytes.to_string());
                assert_eq!(
                    row["run_id"],
                    run.id.map(|i| i.to_string()).unwrap_or_default()
                );
                assert_eq!(num(row, "mb_s"), p.mb_s);
                assert_eq!(num(row, "iops"), p.iops);
                assert_eq!(num(row, "seconds"), p.seconds);
                assert_eq!(num(row, "lat_mean_us"), p.lat_us.mean);
                assert_eq!(num(row, "lat_p99_us"), p.lat_us.p99);
                assert_eq!(num(row, "cpu_usr_pct"), p.cpu.usr_pct);
                assert_eq!(row["errors"], p.errors.len().to_string());
                match &p.read {
                    Some(d) => assert_eq!(num(row, "read_mb_s"), d.mb_s),
                    None => assert_eq!(row["read_mb_s"], ""),
                }
                match &p.write {
                    Some(d) => assert_eq!(num(row, "write_lat_p99_us"), d.lat_us.p99),
                    None => assert_eq!(row["write_lat_p99_us"], ""),
                }
                match &p.sync {
                    Some(s) => assert_eq!(row["sync_count"], s.count.to_string()),
                    None => assert_eq!(row["sync_count"], ""),
                }
                let mix = if t.job.rw.is_mixed() {
                    t.job.rwmixread.to_string()
                } else {
                    String::new()
                };
                assert_eq!(row["rwmixread"], mix);
            }
        }
    }
    // The custom run has a pass with an I/O error and one with flushes.
    assert!(rows.iter().any(|r| r["errors"] == "1"));
    assert!(rows.iter().any(|r| r["sync_count"] == "3"));
    // Medians recomputed from the CSV give the stored headline.
    let seq: Vec<f64> = rows
        .iter()
        .filter(|r| r["test"] == "SEQ1M Q8T1 Read")
        .map(|r| num(r, "mb_s"))
        .collect();
    assert_eq!(iolab_stats::median(&seq), runs[0].tests[0].summary.mb_s);
}

#[test]
fn study_rows_carry_their_configuration() {
    let set = RunSet::study("strip size", common::study_runs());
    let (_, rows) = read(&render(&set));
    assert_eq!(rows.len(), 3 * 9 * 3);
    for label in ["16KB", "32KB", "64KB"] {
        let n = rows.iter().filter(|r| r["config"] == label).count();
        assert_eq!(n, 27, "{label}");
    }
    assert!(rows.iter().all(|r| r["study"] == "strip size"));
}

#[test]
fn text_with_commas_quotes_and_newlines_round_trips() {
    let mut run = common::cdm_run();
    run.label = Some("a, \"quoted\"\nlabel".into());
    run.tests[0].name = "name, with comma".into();
    let (_, rows) = read(&render_runs(&[run]));
    assert_eq!(rows[0]["label"], "a, \"quoted\"\nlabel");
    assert_eq!(rows[0]["test"], "name, with comma");
}
