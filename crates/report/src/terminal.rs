//! Terminal output: a run as plain-text tables (CrystalDiskMark-style rows for `cdm*`, ATTO's
//! size sweep for `atto`, one row per test otherwise), and a listing of stored runs.
//!
//! No colour and no cursor control here (the binary colours finished text with
//! [`crate::style::paint`]). Every line is at most [`crate::style::width`] characters:
//! [`MAX_WIDTH`] in a pipe or a file, the terminal's width (up to that) on a terminal.

use iolab_measure::workload::{self, view_of, View};
use iolab_measure::{
    DirResult, MetricSummary, PassRecord, RunRecord, TestRecord, Warning, WarningCode,
};
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

/// How a run's report prints its warnings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// One line per warning code, most meaningful first: the tests it concerns and the
    /// worst figure (the default; it keeps a run's report on one screen).
    Summary,
    /// Every warning with its test, its message and its fix (`--verbose`).
    Full,
}

/// The terminal report of one run: header, results table, then errors, notes and a
/// summary of the warnings (one line a code). Ends with a newline.
pub fn render_run(run: &RunRecord) -> String {
    render_run_with(run, Detail::Summary)
}

/// Every warning of a run in full (test, message, fix), most meaningful code first; what
/// `iolab show N --warnings` prints. Ends with a newline.
pub fn render_warnings(run: &RunRecord) -> String {
    let mut out = Vec::new();
    if run.warnings.is_empty() {
        out.push("No warnings.".to_string());
    } else {
        warnings_full(run, &mut out);
        out.drain(..2);
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// The lines a run's summary report aims to fit: a 100 x 40 terminal, less the line `iolab
/// run` prints under it (`stored as run N in ...`). Notes are shown whole when the report
/// fits in them, else cut to one line each (whole with `--verbose`).
const SCREEN_LINES: usize = 39;

/// The terminal report of one run with its warnings as `detail` asks.
pub fn render_run_with(run: &RunRecord, detail: Detail) -> String {
    let whole = render_run_notes(run, detail, true, usize::MAX);
    if detail != Detail::Summary || whole.lines().count() <= SCREEN_LINES {
        return whole;
    }
    let cut = render_run_notes(run, detail, false, usize::MAX);
    let over = cut.lines().count().saturating_sub(SCREEN_LINES);
    if over == 0 {
        return cut;
    }
    // Still too long (a busy machine adds codes): the least meaningful codes make room,
    // named in one line that points at the full list.
    let codes = warning_codes_in(run);
    if codes > 2 {
        let keep = codes.saturating_sub(over + 1).max(1);
        return render_run_notes(run, detail, false, keep);
    }
    cut
}

/// How many distinct warning codes a run has.
fn warning_codes_in(run: &RunRecord) -> usize {
    codes_in_order(run).len()
}

/// A run's warning codes, once each, in the order the summary lists them.
fn codes_in_order(run: &RunRecord) -> Vec<String> {
    let mut ws: Vec<&Warning> = run.warnings.iter().collect();
    ws.sort_by_key(|w| w.code.weight());
    let mut codes: Vec<String> = Vec::new();
    for w in ws {
        if !codes.iter().any(|c| c == w.code.as_str()) {
            codes.push(w.code.as_str().to_string());
        }
    }
    codes
}

/// The report with its notes whole, or cut to one line each (`whole_notes` false), and at
/// most `max_codes` warning codes in the summary (the rest named on one line).
fn render_run_notes(
    run: &RunRecord,
    detail: Detail,
    whole_notes: bool,
    max_codes: usize,
) -> String {
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
    notes(run, &mut out, whole_notes);
    match detail {
        Detail::Summary => warnings_summary(run, &mut out, max_codes),
        Detail::Full => warnings_full(run, &mut out),
    }
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
    if !iolab_measure::workload::of_run(run).is_some_and(|w| w.named_by_preset()) {
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
    if let Some(cdm) = against_crystaldiskmark(run) {
        out.extend(wrap(&cdm, crate::style::width(), "", ""));
    }
}

/// For a cdm preset's run: how its headline relates to CrystalDiskMark's (the best of 5
/// passes of 5 s), and the options that make it CrystalDiskMark's.
fn against_crystaldiskmark(run: &RunRecord) -> Option<String> {
    let is_cdm = view_of(run) == Some(View::CrystalDiskMark);
    if !is_cdm || run.tests.is_empty() {
        return None;
    }
    let best = run.tests.iter().all(is_best);
    let five_by_five = run.settings.runs == 5
        && run.settings.duration == std::time::Duration::from_secs(5)
        && run.tests.iter().all(|t| t.passes.len() == 5);
    Some(
        match (best, five_by_five) {
            (true, true) => "As CrystalDiskMark: the best of 5 passes of 5 s.",
            (true, false) => {
                "CrystalDiskMark: best of 5 × 5 s passes (--like-crystaldiskmark: its \
                          schedule too)"
            }
            (false, _) => {
                "CrystalDiskMark: best of 5 × 5 s passes (--score best: its statistic; \
                       --like-crystaldiskmark: both)"
            }
        }
        .to_string(),
    )
}

// ---------------------------------------------------------------------------------------
// Headline values

const DASH: &str = "-";

fn is_best(t: &TestRecord) -> bool {
    t.summary.score == Some(iolab_measure::Score::Best)
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
    let view = view_of(run);
    if view.is_none() {
        return Layout::PerTest;
    }
    match group_tests(run) {
        Some(groups) if view == Some(View::Atto) => {
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
        .all(|t| t.name.split_whitespace().any(|w| w == t.job.rw_name()));
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
        let rw = (!ops).then(|| t.job.rw_name());
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
    let table = crate::table::Table::mpi_hosts(&p).to_text();
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
        let Some(ops) = workload::of_test_in(run, t).and_then(|w| w.op_table(t)) else {
            continue;
        };
        if ops.rows.is_empty() {
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
        for o in &ops.rows {
            table.row(vec![
                o.op.clone(),
                o.count.to_string(),
                format!("{:.3}", o.avg_ms),
                format!("{:.3}", o.max_ms),
                format!("{:.3}", o.p99_ms),
                // dbench: expected statuses; replay: outcomes unlike the recording's.
                o.mismatches.to_string(),
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

/// Lines a note takes in a [`Detail::Summary`] report; a longer one ends with `…` there
/// (whole under `--verbose`, in `iolab show N --verbose` and in every other format).
const NOTE_LINES: usize = 1;

fn notes(run: &RunRecord, out: &mut Vec<String>, whole: bool) {
    if run.notes.is_empty() {
        return;
    }
    let width = crate::style::width();
    let wrapped: Vec<Vec<String>> = run
        .notes
        .iter()
        .map(|n| wrap(n, width, "  - ", "    "))
        .collect();
    let cut = !whole && wrapped.iter().any(|w| w.len() > NOTE_LINES);
    section(
        out,
        if cut {
            "Notes (one line each; whole with --verbose)"
        } else {
            "Notes"
        },
    );
    for mut lines in wrapped {
        if cut && lines.len() > NOTE_LINES {
            lines.truncate(NOTE_LINES);
            let last = lines.pop().unwrap_or_default();
            lines.push(text::truncate_end(&format!("{last} …"), width));
        }
        out.extend(lines);
    }
}

/// The run's warnings, most meaningful code first ([`WarningCode::weight`]), in the order
/// the run raised them within a code.
fn by_weight(run: &RunRecord) -> Vec<&Warning> {
    let mut ws: Vec<&Warning> = run.warnings.iter().collect();
    ws.sort_by_key(|w| w.code.weight());
    ws
}

/// Every warning on its own lines, with its test and fix.
fn warnings_full(run: &RunRecord, out: &mut Vec<String>) {
    if run.warnings.is_empty() {
        return;
    }
    section(out, "Warnings");
    for w in by_weight(run) {
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

/// One line per warning code, most meaningful first: the tests it concerns and its worst
/// figure, cut to the width; where to read them in full.
fn warnings_summary(run: &RunRecord, out: &mut Vec<String>, max_codes: usize) {
    if run.warnings.is_empty() {
        return;
    }
    let n = run.warnings.len();
    let full = match run.id {
        Some(id) => format!("`iolab show {id} --warnings`"),
        None => "--verbose".to_string(),
    };
    section(
        out,
        &format!(
            "Warnings ({n}{}; each with its fix: {full})",
            if n == 1 { "" } else { " in all" }
        ),
    );
    let mut lines = summarise(
        run.warnings.iter().collect(),
        run.tests.len(),
        "  ",
        |tests| busiest(&run.tests, tests),
    );
    if lines.len() > max_codes {
        let names = codes_in_order(run).split_off(max_codes);
        lines.truncate(max_codes);
        lines.push(text::truncate_end(
            &format!("  and {} more ({full}): {}", names.len(), names.join(", ")),
            crate::style::width(),
        ));
    }
    out.extend(lines);
}

/// One line per code of `warnings` (most meaningful code first, [`WarningCode::weight`]),
/// each after `lead`: the tests it concerns (of `n_tests`) and its worst figure, at most
/// [`crate::style::width`] columns. `busy` gives BUSY_CPU's figure from the passes of the
/// tests named, where the caller has them.
pub(crate) fn summarise(
    mut warnings: Vec<&Warning>,
    n_tests: usize,
    lead: &str,
    busy: impl Fn(&[&str]) -> Option<String>,
) -> Vec<String> {
    warnings.sort_by_key(|w| w.code.weight());
    let mut codes: Vec<Vec<&Warning>> = Vec::new();
    for w in warnings {
        match codes.iter_mut().find(|c| c[0].code == w.code) {
            Some(c) => c.push(w),
            None => codes.push(vec![w]),
        }
    }
    let width = crate::style::width();
    let mut out = Vec::new();
    for ws in &codes {
        let (head, gist, tail) = code_line(n_tests, ws, &busy);
        let head = format!("{lead}{head}");
        let whole = format!("{head}{gist}{tail}");
        out.push(if text::width(&whole) <= width {
            whole
        } else {
            fit(&head, &gist, width)
        });
    }
    out
}

/// `head` then `gist` on one line of at most `width` columns: the gist cut at the last
/// clause (`, ` or `; `) that fits, else at the width with `…`.
fn fit(head: &str, gist: &str, width: usize) -> String {
    let room = width.saturating_sub(text::width(head));
    if text::width(gist) <= room {
        return format!("{head}{gist}");
    }
    let cut = gist
        .match_indices([',', ';'])
        .map(|(i, _)| i)
        .rfind(|&i| text::width(&gist[..i]) < room);
    match cut {
        Some(i) => format!("{head}{}…", &gist[..i]),
        None => text::truncate_end(&format!("{head}{gist}"), width),
    }
}

/// A code's summary line: the lead (`[CODE] on K of N tests: `, `[CODE] TEST: ` for one
/// test, `[CODE] ` for the run), the worst figure, and the test it was worst in (` (worst:
/// TEST)`, the first part left out when the line is too long).
fn code_line(
    n_tests: usize,
    ws: &[&Warning],
    busy: &dyn Fn(&[&str]) -> Option<String>,
) -> (String, String, String) {
    let code = &ws[0].code;
    let mut tests: Vec<&str> = Vec::new();
    for w in ws {
        if let Some(t) = w.test.as_deref() {
            if !tests.contains(&t) {
                tests.push(t);
            }
        }
    }
    let of_tests = |k: usize| format!("[{code}] on {k} of {n_tests} tests: ");
    if *code == WarningCode::BusyCpu {
        if let Some(busy) = busy(&tests) {
            return match tests.len() {
                1 => (format!("[{code}] {}: ", tests[0]), busy, String::new()),
                k => (of_tests(k), busy, String::new()),
            };
        }
    }
    let worst = ws
        .iter()
        .copied()
        .max_by(|a, b| figure(code, &a.message).total_cmp(&figure(code, &b.message)))
        .expect("a code's group has a warning");
    let gist = match code {
        WarningCode::NotConverged => format!(
            "the 95% CI was still ±{}% when passes stopped",
            figure(code, &worst.message)
        ),
        _ => gist(&worst.message),
    };
    let worst_in = |t: &str| format!(" (worst: {t})");
    match (tests.len(), worst.test.as_deref()) {
        (_, None) if ws.len() == 1 => (format!("[{code}] "), gist, String::new()),
        (1, Some(t)) if ws.len() == 1 => (format!("[{code}] {t}: "), gist, String::new()),
        (k, Some(t)) if k > 1 => (of_tests(k), gist, worst_in(t)),
        (_, Some(t)) => (format!("[{code}] {} times: ", ws.len()), gist, worst_in(t)),
        (_, None) => (
            format!("[{code}] {} times: ", ws.len()),
            gist,
            String::new(),
        ),
    }
}

/// The finding of a message: up to its first `: ` (before the explanation), without
/// parenthesised asides.
fn gist(message: &str) -> String {
    let first = message.split(": ").next().unwrap_or(message);
    let mut out = String::new();
    let mut depth = 0usize;
    for c in first.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    // Asides leave a doubled space or a space before punctuation.
    let mut s = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for p in [",", ";", "."] {
        s = s.replace(&format!(" {p}"), p);
    }
    s.trim_end_matches(['.', ',']).to_string()
}

/// The figure a warning of `code` is ranked by in its code's summary (larger is worse): the
/// number after the code's own marker in the message (`±` for NOT_CONVERGED's interval,
/// "varied by" for HIGH_VARIATION), else the first number; 0 without one.
fn figure(code: &WarningCode, message: &str) -> f64 {
    let after = match code {
        WarningCode::NotConverged => message.find("at ±").map(|i| i + "at ±".len()),
        WarningCode::HighVariation => message.find("by ").map(|i| i + 3),
        _ => None,
    };
    let rest = &message[after.unwrap_or(0)..];
    let start = rest.find(|c: char| c.is_ascii_digit());
    start
        .map(|i| {
            let digits: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            digits.trim_end_matches('.').parse().unwrap_or(0.0)
        })
        .unwrap_or(0.0)
}

/// BUSY_CPU's worst figure from the passes of `tests`: the most CPU other processes used
/// during one pass, and the busiest of them with its pid.
pub(crate) fn busiest(all: &[TestRecord], tests: &[&str]) -> Option<String> {
    let pass = all
        .iter()
        .filter(|t| tests.contains(&t.name.as_str()))
        .flat_map(|t| &t.passes)
        .max_by(|a, b| {
            a.context
                .activity
                .other_cpu_pct
                .total_cmp(&b.context.activity.other_cpu_pct)
        })?;
    let a = &pass.context.activity;
    if a.other_cpu_pct <= 0.0 {
        return None;
    }
    let mut s = format!("up to {:.0}% of a CPU used by others", a.other_cpu_pct);
    if let Some(p) = a.top_processes.first() {
        s = format!(
            "up to {:.0}% of a CPU, most by `{}` (pid {})",
            a.other_cpu_pct,
            text::clean(&p.name),
            p.pid
        );
    }
    Some(s)
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
