//! Terminal output: a run as plain-text tables (CrystalDiskMark-style rows for `cdm*`, ATTO's
//! size sweep for `atto`, one row per test otherwise), and a listing of stored runs.
//!
//! No colour and no cursor control here (the binary colours finished text with
//! [`crate::style::paint`]). Every line is at most [`crate::style::width`] characters:
//! [`MAX_WIDTH`] in a pipe or a file, the terminal's width (up to that) on a terminal.

use iolab_measure::{DirResult, MetricSummary, PassRecord, RunRecord, TestRecord};
use iolab_spec::format_bytes;
use iolab_stats::{median, metric};

use crate::facts;
use crate::text::{self, ci, lat, num, pct1, wrap, Column, Gap, Shrink, Table};

/// Widest line the terminal report prints, in characters, and the stable width used when
/// stdout is not a terminal.
pub const MAX_WIDTH: usize = 100;

/// I/O errors printed per test before the rest are counted.
const MAX_ERRORS_PER_TEST: usize = 10;

/// Width of the `Key:` column of the header.
const KEY_WIDTH: usize = 10;

/// The full terminal report of one run: header, results table, then errors, notes and
/// warnings. Ends with a newline.
pub fn render_run(run: &RunRecord) -> String {
    let mut out = Vec::new();
    header(run, &mut out);
    out.push(String::new());
    if run.tests.is_empty() {
        out.push("No test finished a pass.".to_string());
    } else {
        let table = match layout(run) {
            Layout::Cdm(groups) => cdm_table(&groups),
            Layout::Atto(groups) => atto_table(&groups),
            Layout::PerTest => test_table(run),
        };
        out.extend(table.render(crate::style::width()));
    }
    per_host(run, &mut out);
    op_tables(run, &mut out);
    durability(run, &mut out);
    short_tests(run, &mut out);
    errors(run, &mut out);
    notes(run, &mut out);
    warnings(run, &mut out);
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// One stored run in a listing of runs; the CLI fills it from the store's listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRow {
    /// Store id.
    pub id: i64,
    /// RFC 3339 UTC.
    pub started_at: String,
    pub preset: String,
    /// The target path as given.
    pub target: String,
    pub fs_type: String,
    pub label: Option<String>,
    /// For a study's run: the configuration it measured.
    pub config: Option<String>,
    pub complete: bool,
    /// Number of tests in the run.
    pub tests: usize,
}

/// A table of stored runs, oldest first as given. Ends with a newline.
pub fn render_list(rows: &[ListRow]) -> String {
    if rows.is_empty() {
        return "No runs stored.\n".to_string();
    }
    let mut table = Table::new(vec![
        Column::right("ID"),
        Column::left("Started (UTC)"),
        Column::left("Preset"),
        Column::left("Target").shrink(Shrink::Start(12)),
        Column::left("FS").shrink(Shrink::End(6)),
        Column::right("Tests"),
        Column::left("Status"),
        Column::left("Config").shrink(Shrink::End(8)).hide_empty(),
        Column::left("Label").shrink(Shrink::End(8)).hide_empty(),
    ]);
    for r in rows {
        table.row(vec![
            r.id.to_string(),
            compact_time(&r.started_at),
            r.preset.clone(),
            r.target.clone(),
            r.fs_type.clone(),
            r.tests.to_string(),
            if r.complete { "ok" } else { "incomplete" }.to_string(),
            r.config.clone().unwrap_or_default(),
            r.label.clone().unwrap_or_default(),
        ]);
    }
    let mut out = table.render(crate::style::width());
    out.push(format!(
        "{} run{}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" }
    ));
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// `2025-01-31T10:20:30.123Z` as `2025-01-31 10:20:30`; anything else unchanged.
fn compact_time(t: &str) -> String {
    let b = t.as_bytes();
    if b.len() >= 19 && b[10] == b'T' && t.is_char_boundary(19) {
        format!("{} {}", &t[..10], &t[11..19])
    } else {
        t.to_string()
    }
}

// ---------------------------------------------------------------------------------------
// Header

fn key_line(out: &mut Vec<String>, key: &str, value: &str) {
    let first = format!("{:<KEY_WIDTH$}", format!("{key}:"));
    out.extend(wrap(
        value,
        crate::style::width(),
        &first,
        &" ".repeat(KEY_WIDTH),
    ));
}

fn header(run: &RunRecord, out: &mut Vec<String>) {
    let mut title = format!("iolab {} · preset {}", run.iolab_version, run.preset);
    if run.workload != "block" && !run.workload.is_empty() {
        title.push_str(&format!(" ({})", run.workload));
    }
    out.extend(wrap(&title, crate::style::width(), "", "  "));
    // The facts every format shows, less what the title says; the file or device the I/O
    // went to goes on the target's line.
    let all = facts::run_facts(run);
    let io_on = all.iter().find(|(k, _)| *k == "I/O on").map(|(_, v)| v);
    for (key, value) in &all {
        match *key {
            "Preset" | "iolab" | "Command" | "I/O on" => {}
            "Target" => match io_on {
                Some(io) => key_line(out, key, &format!("{value}; I/O on {io}")),
                None => key_line(out, key, value),
            },
            "Configuration" => key_line(out, "Config", value),
            _ => key_line(out, key, value),
        }
    }
    out.push(String::new());
    out.extend(wrap(&facts::legend(run), crate::style::width(), "", ""));
}

// ---------------------------------------------------------------------------------------
// Headline values

const DASH: &str = "-";

fn is_best(t: &TestRecord) -> bool {
    t.summary.score == "best"
}

/// The pass a "best of N" headline comes from: the highest MB/s.
fn best_pass(t: &TestRecord) -> Option<&PassRecord> {
    t.passes.iter().max_by(|a, b| a.mb_s.total_cmp(&b.mb_s))
}

/// A per-pass value as the headline shows it: from the best pass under "best", else the
/// median over the passes. None without passes.
fn headline(t: &TestRecord, f: impl Fn(&PassRecord) -> f64) -> Option<f64> {
    if t.passes.is_empty() {
        return None;
    }
    if is_best(t) {
        return best_pass(t).map(f);
    }
    Some(median(&t.passes.iter().map(f).collect::<Vec<_>>()))
}

/// Worst latency seen in any pass (a maximum is not averaged away).
fn worst(t: &TestRecord, f: impl Fn(&PassRecord) -> f64) -> Option<f64> {
    t.passes.iter().map(f).reduce(f64::max)
}

/// Selects one direction of a pass (`|p| p.read.as_ref()`).
type PickDir = fn(&PassRecord) -> Option<&DirResult>;

/// The headline numbers of one direction (or of a whole single-direction test).
#[derive(Debug, Clone, Copy)]
struct Head {
    mb_s: f64,
    stats_mb_s: MetricSummary,
    iops: f64,
    stats_iops: MetricSummary,
    mean: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

impl Head {
    /// A test as a whole, from its summary.
    fn of_test(t: &TestRecord) -> Option<Head> {
        if t.passes.is_empty() {
            return None;
        }
        let s = &t.summary;
        Some(Head {
            mb_s: s.mb_s,
            stats_mb_s: s.stats_mb_s,
            iops: s.iops,
            stats_iops: s.stats_iops,
            mean: s.lat_mean_us,
            p99: s.lat_p99_us,
            p999: headline(t, |p| p.lat_us.p999)?,
            max: worst(t, |p| p.lat_us.max)?,
        })
    }

    /// One direction of a (mixed) test: the median over its passes of that direction, or
    /// the best pass's direction under "best".
    fn of_dir(t: &TestRecord, pick: PickDir) -> Option<Head> {
        let dirs: Vec<&DirResult> = t.passes.iter().filter_map(pick).collect();
        if dirs.is_empty() {
            return None;
        }
        let col = |f: fn(&DirResult) -> f64| dirs.iter().map(|d| f(d)).collect::<Vec<f64>>();
        let stats_mb_s = metric(&col(|d| d.mb_s));
        let stats_iops = metric(&col(|d| d.iops));
        let max = col(|d| d.lat_us.max).into_iter().fold(0.0, f64::max);
        if is_best(t) {
            if let Some(d) = best_pass(t).and_then(pick) {
                return Some(Head {
                    mb_s: d.mb_s,
                    stats_mb_s,
                    iops: d.iops,
                    stats_iops,
                    mean: d.lat_us.mean,
                    p99: d.lat_us.p99,
                    p999: d.lat_us.p999,
                    max,
                });
            }
        }
        Some(Head {
            mb_s: median(&col(|d| d.mb_s)),
            stats_mb_s,
            iops: median(&col(|d| d.iops)),
            stats_iops,
            mean: median(&col(|d| d.lat_us.mean)),
            p99: median(&col(|d| d.lat_us.p99)),
            p999: median(&col(|d| d.lat_us.p999)),
            max,
        })
    }
}

/// MB/s, ±CI, IOPS, mean, p99 cells of a CrystalDiskMark direction block.
fn dir_cells(h: Option<Head>) -> [String; 5] {
    match h {
        Some(h) => [
            num(h.mb_s),
            ci(&h.stats_mb_s),
            num(h.iops),
            lat(h.mean),
            lat(h.p99),
        ],
        None => [
            DASH.into(),
            String::new(),
            DASH.into(),
            DASH.into(),
            DASH.into(),
        ],
    }
}

// ---------------------------------------------------------------------------------------
// Layouts

/// The tests of one table row: a read, a write and any mixed tests sharing a `group`.
struct Group<'a> {
    name: &'a str,
    read: Option<&'a TestRecord>,
    write: Option<&'a TestRecord>,
    mixed: Vec<&'a TestRecord>,
}

enum Layout<'a> {
    Cdm(Vec<Group<'a>>),
    Atto(Vec<Group<'a>>),
    PerTest,
}

/// Tests grouped by `group`, in order of first appearance; None when a group has two
/// reads or two writes (then it is not a CrystalDiskMark/ATTO-shaped run).
fn group_tests(run: &RunRecord) -> Option<Vec<Group<'_>>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for t in &run.tests {
        let k = match groups.iter().position(|g| g.name == t.group) {
            Some(k) => k,
            None => {
                groups.push(Group {
                    name: &t.group,
                    read: None,
                    write: None,
                    mixed: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[k];
        let rw = t.job.rw;
        if rw.is_mixed() {
            g.mixed.push(t);
        } else if rw.reads() {
            if g.read.replace(t).is_some() {
                return None;
            }
        } else if g.write.replace(t).is_some() {
            return None;
        }
    }
    Some(groups)
}

fn layout(run: &RunRecord) -> Layout<'_> {
    let is_cdm = run.preset == "cdm" || run.preset.starts_with("cdm-");
    if run.preset != "atto" && !is_cdm {
        return Layout::PerTest;
    }
    match group_tests(run) {
        Some(groups) if run.preset == "atto" => {
            if groups.iter().all(|g| g.mixed.is_empty()) {
                Layout::Atto(groups)
            } else {
                Layout::PerTest
            }
        }
        Some(groups) => Layout::Cdm(groups),
        None => Layout::PerTest,
    }
}

fn dir_block(first: Gap) -> [Column; 5] {
    [
        Column::right("MB/s").gap(first),
        Column::left("±CI").gap(Gap::Tight).hide_empty(),
        Column::right("IOPS"),
        Column::right("mean µs"),
        Column::right("p99 µs"),
    ]
}

/// CrystalDiskMark's table: one row per group, read block then write block; each mixed
/// test on its own row with its read and write directions.
fn cdm_table(groups: &[Group<'_>]) -> Table {
    let mut columns = vec![Column::left("Test").shrink(Shrink::End(10))];
    columns.extend(dir_block(Gap::Normal));
    columns.extend(dir_block(Gap::Block));
    let mut table = Table::new(columns);
    table.span("Read", 1, 5);
    table.span("Write", 6, 10);
    for g in groups {
        if g.read.is_some() || g.write.is_some() || g.mixed.is_empty() {
            let mut row = vec![g.name.to_string()];
            row.extend(dir_cells(g.read.and_then(Head::of_test)));
            row.extend(dir_cells(g.write.and_then(Head::of_test)));
            table.row(row);
        }
        for m in &g.mixed {
            let mut row = vec![format!("{} Mix r/w", g.name)];
            row.extend(dir_cells(Head::of_dir(m, |p| p.read.as_ref())));
            row.extend(dir_cells(Head::of_dir(m, |p| p.write.as_ref())));
            table.row(row);
        }
    }
    table
}

/// ATTO's table: one row per block size, write before read as ATTO shows it.
fn atto_table(groups: &[Group<'_>]) -> Table {
    let mut table = Table::new(vec![
        Column::left("Size"),
        Column::right("Write MB/s"),
        Column::left("±CI").gap(Gap::Tight).hide_empty(),
        Column::right("Read MB/s"),
        Column::left("±CI").gap(Gap::Tight).hide_empty(),
        Column::right("Write IOPS"),
        Column::right("Read IOPS"),
        Column::right("Write mean µs").droppable(1),
        Column::right("Read mean µs").droppable(1),
    ]);
    for g in groups {
        let bs = g.write.or(g.read).map(|t| t.job.bs);
        let size = bs.map_or_else(|| g.name.to_string(), format_bytes);
        let w = g.write.and_then(Head::of_test);
        let r = g.read.and_then(Head::of_test);
        let cell = |h: Option<Head>, f: fn(&Head) -> String| h.as_ref().map_or(DASH.into(), f);
        table.row(vec![
            size,
            cell(w, |h| num(h.mb_s)),
            w.map(|h| ci(&h.stats_mb_s)).unwrap_or_default(),
            cell(r, |h| num(h.mb_s)),
            r.map(|h| ci(&h.stats_mb_s)).unwrap_or_default(),
            cell(w, |h| num(h.iops)),
            cell(r, |h| num(h.iops)),
            cell(w, |h| lat(h.mean)),
            cell(r, |h| lat(h.mean)),
        ]);
    }
    table
}

/// One row per test (custom runs and anything without a dedicated layout); a mixed test
/// gets a row per direction under it. Workloads whose rate is operations (the fsync probe,
/// metadata) lead with ops/s and its interval instead of MB/s and I/O direction.
fn test_table(run: &RunRecord) -> Table {
    let ops = facts::run_counts_operations(run);
    // Custom test names end with their rw; then the column may go first when space is short.
    let rw_in_names = run
        .tests
        .iter()
        .all(|t| t.name.split_whitespace().any(|w| w == t.job.rw.as_str()));
    let rw = Column::left("rw");
    let rw = if rw_in_names {
        rw.droppable_early()
    } else {
        rw.droppable(1)
    };
    let mut columns = vec![Column::left("Test").shrink(Shrink::End(12))];
    if ops {
        columns.extend([
            Column::right("ops/s"),
            Column::left("±CI").gap(Gap::Tight).hide_empty(),
        ]);
    } else {
        columns.extend([
            rw,
            Column::right("MB/s"),
            Column::left("±CI").gap(Gap::Tight).hide_empty(),
            Column::right("IOPS"),
        ]);
    }
    columns.extend([
        Column::right("mean µs"),
        Column::right("p99 µs"),
        Column::right("p99.9 µs"),
        Column::right("max µs"),
        Column::right("CPU usr/sys %").droppable(2),
    ]);
    let mut table = Table::new(columns);
    for t in &run.tests {
        let cpu = match (
            headline(t, |p| p.cpu.usr_pct),
            headline(t, |p| p.cpu.sys_pct),
        ) {
            (Some(u), Some(s)) => format!("{}/{}", pct1(u), pct1(s)),
            _ => DASH.into(),
        };
        let rw = (!ops).then(|| t.job.rw.as_str());
        table.row(test_cells(&t.name, rw, Head::of_test(t), cpu));
        if t.job.rw.is_mixed() && !ops {
            let mix = t.job.rwmixread.min(100);
            let dirs: [(&str, u8, PickDir); 2] = [
                ("read", mix, |p| p.read.as_ref()),
                ("write", 100 - mix, |p| p.write.as_ref()),
            ];
            for (name, share, pick) in dirs {
                let label = format!("  {name} ({share}%)");
                table.row(test_cells(
                    &label,
                    Some(""),
                    Head::of_dir(t, pick),
                    String::new(),
                ));
            }
        }
    }
    table
}

/// A row of [`test_table`]: with `rw` the MB/s layout, without it the ops/s one.
fn test_cells(label: &str, rw: Option<&str>, h: Option<Head>, cpu: String) -> Vec<String> {
    let mut row = vec![label.to_string()];
    match (h, rw) {
        (Some(h), Some(rw)) => {
            row.extend([rw.to_string(), num(h.mb_s), ci(&h.stats_mb_s), num(h.iops)])
        }
        (Some(h), None) => row.extend([num(h.iops), ci(&h.stats_iops)]),
        (None, Some(rw)) => row.extend([rw.to_string(), DASH.into(), String::new(), DASH.into()]),
        (None, None) => row.extend([DASH.to_string(), String::new()]),
    }
    match h {
        Some(h) => row.extend([lat(h.mean), lat(h.p99), lat(h.p999), lat(h.max)]),
        None => row.extend(std::iter::repeat_n(DASH.to_string(), 4)),
    }
    row.push(cpu);
    row
}

// ---------------------------------------------------------------------------------------
// Under the table

fn section(out: &mut Vec<String>, title: &str) {
    out.push(String::new());
    out.push(format!("{title}:"));
}

/// An MPI run: each host's MB/s per test, and the aggregate.
fn per_host(run: &RunRecord, out: &mut Vec<String>) {
    let Some(p) = crate::mpi::per_host(run) else {
        return;
    };
    section(out, "Per host (MPI)");
    let mut table = Table::new(vec![
        Column::left("Test"),
        Column::left("Host"),
        Column::right("Ranks"),
        Column::right(&p.unit),
    ]);
    for r in crate::mpi::rows(&p) {
        table.row(r.to_vec());
    }
    out.extend(table.render(crate::style::width()));
    out.extend(wrap(
        &crate::mpi::explained(&p),
        crate::style::width(),
        "  ",
        "  ",
    ));
}

/// Per-operation tables a workload keeps in `extra.ops` (dbench: Count, AvgLat, MaxLat,
/// P99Lat in ms, status mismatches), from the last measured pass.
fn op_tables(run: &RunRecord, out: &mut Vec<String>) {
    for t in &run.tests {
        let Some(ops) = t.extra.get("ops").and_then(|v| v.as_array()) else {
            continue;
        };
        if ops.is_empty() {
            continue;
        }
        section(out, &format!("{}: operations (latencies in ms)", t.name));
        let mut table = Table::new(vec![
            Column::left("Operation"),
            Column::right("Count"),
            Column::right("AvgLat"),
            Column::right("MaxLat"),
            Column::right("P99Lat"),
            Column::right("Mismatch"),
        ]);
        let num = |o: &serde_json::Value, k: &str| o.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
        for o in ops {
            table.row(vec![
                o.get("op")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
                    .to_string(),
                format!("{:.0}", num(o, "count")),
                format!("{:.3}", num(o, "avg_ms")),
                format!("{:.3}", num(o, "max_ms")),
                format!("{:.3}", num(o, "p99_ms")),
                // dbench: expected statuses; replay: outcomes unlike the recording's.
                format!(
                    "{:.0}",
                    num(o, "status_mismatches").max(num(o, "mismatches"))
                ),
            ]);
        }
        out.extend(table.render(crate::style::width()));
    }
}

/// The fsync probe's verdict per sync method, with its evidence.
fn durability(run: &RunRecord, out: &mut Vec<String>) {
    let lines = facts::durability(run);
    if lines.is_empty() {
        return;
    }
    section(out, "Durability, per sync method");
    for l in &lines {
        out.extend(wrap(l, crate::style::width(), "  - ", "    "));
    }
}

/// Tests with fewer measured passes than asked (interrupted runs).
fn short_tests(run: &RunRecord, out: &mut Vec<String>) {
    let want = run.settings.runs as usize;
    let short: Vec<String> = run
        .tests
        .iter()
        .filter(|t| t.passes.len() < want)
        .map(|t| format!("{} ({} of {want})", t.name, t.passes.len()))
        .collect();
    if short.is_empty() {
        return;
    }
    section(out, "Tests with fewer passes than asked");
    out.extend(wrap(&short.join(", "), crate::style::width(), "  ", "  "));
}

fn errors(run: &RunRecord, out: &mut Vec<String>) {
    let total: usize = run
        .tests
        .iter()
        .flat_map(|t| &t.passes)
        .map(|p| p.errors.len())
        .sum();
    if total == 0 {
        return;
    }
    section(out, &format!("I/O errors ({total})"));
    for t in &run.tests {
        let errs: Vec<_> = t
            .passes
            .iter()
            .flat_map(|p| p.errors.iter().map(move |e| (p.index, e)))
            .collect();
        for (pass, e) in errs.iter().take(MAX_ERRORS_PER_TEST) {
            let dir = match e.dir {
                iolab_spec::IoDir::Read => "read",
                iolab_spec::IoDir::Write => "write",
            };
            let mut line = format!("{}, pass {pass}: ", t.name);
            if e.errno != 0 {
                line.push_str(&format!("errno {} ", e.errno));
            }
            line.push_str(&format!("({}) on {dir}", e.message));
            // Flush and submission failures are not tied to one I/O: no offset or length.
            if e.len > 0 {
                line.push_str(&format!(
                    " at offset {} ({}), length {} ({})",
                    e.offset,
                    format_bytes(e.offset),
                    e.len,
                    format_bytes(e.len),
                ));
            }
            out.extend(wrap(&line, crate::style::width(), "  ", "      "));
        }
        if errs.len() > MAX_ERRORS_PER_TEST {
            out.push(format!(
                "  … and {} more in {} (all are in the JSON output)",
                errs.len() - MAX_ERRORS_PER_TEST,
                text::truncate_end(&text::clean(&t.name), 40),
            ));
        }
    }
}

fn notes(run: &RunRecord, out: &mut Vec<String>) {
    if run.notes.is_empty() {
        return;
    }
    section(out, "Notes");
    for n in &run.notes {
        out.extend(wrap(n, crate::style::width(), "  - ", "    "));
    }
}

fn warnings(run: &RunRecord, out: &mut Vec<String>) {
    if run.warnings.is_empty() {
        return;
    }
    section(out, "Warnings");
    for w in &run.warnings {
        let mut line = format!("[{}] ", w.code);
        if let Some(test) = &w.test {
            line.push_str(&format!("{test}: "));
        }
        line.push_str(&w.message);
        if !w.fix.is_empty() {
            line.push_str(&format!(" — fix: {}", w.fix));
        }
        out.extend(wrap(&line, crate::style::width(), "  ", "    "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_shortened_for_the_list() {
        assert_eq!(
            compact_time("2025-01-31T10:20:30.123Z"),
            "2025-01-31 10:20:30"
        );
        assert_eq!(compact_time("yesterday"), "yesterday");
    }
}
