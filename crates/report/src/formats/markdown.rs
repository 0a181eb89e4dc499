//! Markdown export: paste-ready tables shaped like the field reports' hand-typed ones —
//! tests as rows, configurations (and directions) as columns — with the spread, the
//! warnings and a line of environment under them.
//!
//! Cells hold the headline value with three significant digits and, with two or more passes,
//! the 95% confidence interval as `±x%`: `1095 ±3.5%`. A missing value is `-`.

use iolab_measure::TestRecord;

use crate::facts;
use crate::set::{self, Metric, RunSet};
use crate::table::{Align, Table};
use crate::text::{ci, num};

/// Most value columns a metric table gets before its directions are split into tables of
/// their own.
const MAX_COLUMNS: usize = 12;

/// Escapes text for a Markdown table cell or line: the table's `|`, emphasis and code
/// markers, and a `<` that could open an HTML tag or an autolink (`<b`, `</`, `<!`, `<?`)
/// with a backslash, which reads the same as text and renders as the character (never an
/// entity such as `&gt;`, which shows literally in a terminal); newlines become spaces. A
/// `>` needs nothing: nothing here starts a line with user text, so it cannot open a
/// quote.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '|' | '\\' | '*' | '`' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '<' if chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')) =>
            {
                out.push_str("\\<");
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A shared [`Table`]: its header and cells escaped, columns aligned as it says.
fn table_of(out: &mut String, t: &Table) {
    let header: Vec<String> = t.columns.iter().map(|(h, _)| escape(h)).collect();
    let seps: Vec<&str> = t
        .columns
        .iter()
        .map(|(_, a)| match a {
            Align::Left => ":--",
            Align::Right => "--:",
        })
        .collect();
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| r.iter().map(|c| escape(c)).collect())
        .collect();
    lines(out, &header, &seps, &rows);
}

fn table(out: &mut String, header: &[String], align_right_from: usize, rows: &[Vec<String>]) {
    let seps: Vec<&str> = (0..header.len())
        .map(|i| if i < align_right_from { ":--" } else { "--:" })
        .collect();
    lines(out, header, &seps, rows);
}

fn lines(out: &mut String, header: &[String], seps: &[&str], rows: &[Vec<String>]) {
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}|\n", seps.join("|")));
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out.push('\n');
}

/// `1095 ±3.5%`, or `-`.
fn cell(t: Option<&TestRecord>, m: Metric) -> String {
    match t.and_then(|t| m.headline(t).map(|v| (t, v))) {
        Some((t, v)) => {
            let c = ci(&m.stats(t));
            if c.is_empty() {
                num(v)
            } else {
                format!("{} {c}", num(v))
            }
        }
        None => "-".to_string(),
    }
}

/// A table row's name: ATTO's transfer sizes with their unit (`512 B`, `4 KiB`, `64 MiB`),
/// other tests as named.
fn row_label(set: &RunSet, row: &str) -> String {
    let atto = set.runs().next().is_some()
        && set.runs().all(|r| {
            iolab_measure::workload::view_of(r) == Some(iolab_measure::workload::View::Atto)
        });
    match atto
        .then(|| iolab_spec::parse_size("bs", row).ok())
        .flatten()
    {
        Some(bytes) => iolab_spec::format_bytes(bytes),
        None => row.to_string(),
    }
}

fn title(set: &RunSet) -> String {
    if let Some(s) = &set.study {
        return format!("Study {}", escape(s));
    }
    let runs: Vec<_> = set.runs().collect();
    match runs.as_slice() {
        [r] => format!("{} on {}", escape(&r.preset), escape(&facts::target(r))),
        _ => format!("{} runs compared", runs.len()),
    }
}

/// The title of a metric's table over `tests`: operations per second where the tests count
/// operations (the fsync probe, metadata) rather than I/Os.
fn metric_title(m: Metric, tests: &[&TestRecord]) -> &'static str {
    let ops = tests.iter().filter(|t| facts::counts_operations(t)).count();
    match m {
        Metric::MbS => "Throughput, MB/s",
        Metric::Iops if ops > 0 && ops == tests.len() => "Operations per second",
        Metric::Iops if ops > 0 => {
            "Operations per second (I/Os; the operations of fsync and metadata tests)"
        }
        Metric::Iops => "I/O operations per second",
        Metric::LatMean => "Mean latency, µs",
        Metric::LatP99 => "99th-percentile latency, µs",
    }
}

/// The Markdown report of a set of runs (one run is a set of one). Runs of different
/// presets outside a study get a section each. Ends with a newline.
pub fn render(set: &RunSet) -> String {
    let mut out = String::new();
    out.push_str(&format!("## iolab: {}\n\n", title(set)));
    let families = set.families();
    if families.len() == 1 {
        body(set, &mut out);
    } else {
        for f in &families {
            let preset = f
                .runs()
                .next()
                .map(|r| r.preset.clone())
                .unwrap_or_default();
            out.push_str(&format!("### {}\n\n", escape(&preset)));
            body(f, &mut out);
        }
    }
    let version = set
        .runs()
        .next()
        .map(|r| r.iolab_version.clone())
        .unwrap_or_default();
    out.push_str(&format!("_Measured with iolab {}._\n", escape(&version)));
    out
}

fn body(set: &RunSet, out: &mut String) {
    let multi = set.configs.len() > 1;

    // What was measured.
    if multi {
        for c in &set.configs {
            let runs: Vec<String> = c
                .runs
                .iter()
                .map(|r| {
                    let id =
                        r.id.map_or("unstored run".to_string(), |i| format!("run #{i}"));
                    format!(
                        "{id} ({}, {}, {}, {})",
                        escape(&r.preset),
                        escape(&facts::target(r)),
                        escape(&facts::passes(r)),
                        escape(&r.started_at)
                    )
                })
                .collect();
            let base = if set.configs.len() > 1 && std::ptr::eq(c, &set.configs[set.baseline]) {
                " (baseline)"
            } else {
                ""
            };
            out.push_str(&format!(
                "- **{}**{base}: {}\n",
                escape(&c.label),
                runs.join("; ")
            ));
        }
        out.push('\n');
    } else if let Some(r) = set.runs().next() {
        let facts = facts::run_facts(r);
        // The title names the preset and target; the footer the version.
        let skip = ["Preset", "Target", "I/O on", "iolab", "Command"];
        let line: Vec<String> = facts
            .iter()
            .filter(|(k, _)| !skip.contains(k))
            .map(|(k, v)| format!("{k}: {}", escape(v)))
            .collect();
        out.push_str(&line.join(" · "));
        out.push_str("\n\n");
    }

    let names = set.test_names();
    let all: Vec<&TestRecord> = set.configs.iter().flat_map(|c| c.tests.iter()).collect();
    // Rows and columns from every configuration's tests, in order of appearance.
    let mut unique: Vec<&TestRecord> = Vec::new();
    for n in &names {
        if let Some(t) = all.iter().find(|t| &t.name == n) {
            unique.push(t);
        }
    }
    let (rows, kinds) = set::rows_and_kinds(&unique);
    // Tests that count operations are left out of the MB/s table: their bytes are a
    // by-product.
    let in_bytes = |t: &TestRecord| !facts::counts_operations(t);
    let moves_bytes = all
        .iter()
        .any(|t| in_bytes(t) && t.passes.iter().any(|p| p.mb_s > 0.0));
    let metrics: Vec<Metric> = [Metric::MbS, Metric::Iops, Metric::LatP99]
        .into_iter()
        .filter(|m| *m != Metric::MbS || moves_bytes)
        .collect();
    if unique.is_empty() {
        out.push_str("No test finished a pass.\n\n");
    }
    // Directions side by side while the table stays narrow; with many configurations one
    // table per direction, so a row never runs to kinds x configurations columns.
    let groups: Vec<Vec<&String>> = if multi && kinds.len() * set.configs.len() > MAX_COLUMNS {
        kinds.iter().map(|k| vec![k]).collect()
    } else {
        vec![kinds.iter().collect()]
    };
    for m in metrics.iter().copied().filter(|_| !unique.is_empty()) {
        for group in &groups {
            let title = metric_title(m, &unique);
            match group.as_slice() {
                // The tests that are rows of their own have no direction to name.
                [k] if groups.len() > 1 && k.is_empty() => {
                    out.push_str(&format!("**{title}, other tests**\n\n"))
                }
                [k] if groups.len() > 1 => out.push_str(&format!("**{title}, {}**\n\n", escape(k))),
                _ => out.push_str(&format!("**{title}**\n\n")),
            }
            let split = groups.len() > 1;
            let mut header = vec!["Test".to_string()];
            for k in group {
                for c in &set.configs {
                    let h = match (k.is_empty() || split, multi) {
                        (true, false) => facts::metric_label(m, unique.iter().copied()).to_string(),
                        (true, true) => escape(&c.label),
                        (false, false) => escape(k),
                        (false, true) => format!("{} {}", escape(k), escape(&c.label)),
                    };
                    header.push(h);
                }
            }
            let body: Vec<Vec<String>> = rows
                .iter()
                .filter(|row| {
                    // A per-direction table leaves out tests with nothing in that direction;
                    // the MB/s table, tests that count operations.
                    let tests_here = || {
                        set.configs.iter().flat_map(|c| {
                            let tests: Vec<&TestRecord> = c.tests.iter().collect();
                            group
                                .iter()
                                .filter_map(|k| set::test_at(&tests, row, k))
                                .collect::<Vec<_>>()
                        })
                    };
                    let bytes_ok = m != Metric::MbS || tests_here().any(in_bytes);
                    let dir_ok = !split
                        || set.configs.iter().any(|c| {
                            let tests: Vec<&TestRecord> = c.tests.iter().collect();
                            set::test_at(&tests, row, group[0]).is_some()
                        });
                    bytes_ok && dir_ok
                })
                .map(|row| {
                    let mut r = vec![escape(&row_label(set, row))];
                    for k in group {
                        for c in &set.configs {
                            let tests: Vec<&TestRecord> = c.tests.iter().collect();
                            r.push(cell(set::test_at(&tests, row, k), m));
                        }
                    }
                    r
                })
                .collect();
            table(out, &header, 1, &body);
        }
    }
    if !multi {
        if let Some(r) = set.runs().next() {
            let verdicts = facts::durability(r);
            if !verdicts.is_empty() {
                out.push_str("**Durability, per sync method**\n\n");
                for v in &verdicts {
                    out.push_str(&format!("- {}\n", escape(v)));
                }
                out.push('\n');
            }
            if let Some(p) = crate::mpi::per_host(r) {
                out.push_str("**Per host (MPI)**\n\n");
                table_of(out, &Table::mpi_hosts(&p));
                out.push_str(&format!("{}\n\n", escape(&crate::mpi::explained(&p))));
            }
            if !r.notes.is_empty() {
                out.push_str("**Notes**\n\n");
                for n in &r.notes {
                    out.push_str(&format!("- {}\n", escape(n)));
                }
                out.push('\n');
            }
        }
    }
    if !unique.is_empty() {
        let score = all
            .iter()
            .filter_map(|t| t.summary.score)
            .find(|s| *s == iolab_measure::Score::Best)
            .unwrap_or(iolab_measure::Score::Median);
        let ops = all.iter().any(|t| facts::counts_operations(t));
        let units = match (moves_bytes, ops) {
            (true, true) => " MB/s = 10^6 bytes/s; ops/s = operations per second.",
            (false, true) => " ops/s = operations per second.",
            _ => " MB/s = 10^6 bytes/s.",
        };
        // A test of one pass has no interval: then the legend says so instead of
        // explaining a ±x% that no cell shows.
        if all.iter().any(|t| t.passes.len() >= 2) {
            out.push_str(&format!(
                "Headline = {score} of the passes; ±x% = half-width of the 95% confidence \
                 interval of the mean (Student t) over the passes.{units}\n\n"
            ));
        } else {
            out.push_str(&format!(
                "Headline = the single measured pass of each test (no confidence interval \
                 from one pass).{units}\n\n"
            ));
        }
    }

    if multi && !set.shared_test_names().is_empty() {
        ratio_table(set, out);
        score_table(set, out);
    }
    if multi {
        fact_tables(set, out);
    }

    // Warnings, next to the tables they qualify.
    let mut warnings = Vec::new();
    for c in &set.configs {
        let runs = c.runs.len();
        for (w, n) in c.warnings() {
            {
                let mut line = String::from("- ⚠ ");
                if multi {
                    line.push_str(&format!("{}: ", escape(&c.label)));
                }
                line.push_str(&format!("`{}` ", w.code.as_str().replace('`', "'")));
                if let Some(t) = &w.test {
                    line.push_str(&format!("{}: ", escape(t)));
                }
                line.push_str(&escape(&w.message));
                if !w.fix.is_empty() {
                    line.push_str(&format!(" — fix: {}", escape(&w.fix)));
                }
                if runs > 1 {
                    line.push_str(&format!(" ({n} of {runs} runs)"));
                }
                warnings.push(line);
            }
        }
    }
    if !warnings.is_empty() {
        out.push_str("**Warnings**\n\n");
        out.push_str(&warnings.join("\n"));
        out.push_str("\n\n");
    }

    // The environment in one line per configuration.
    for c in &set.configs {
        let Some(r) = c.runs.first() else { continue };
        let env = facts::env_summary(&r.env);
        if env.is_empty() {
            continue;
        }
        let parts: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{k} {}", escape(v)))
            .collect();
        let who = if multi {
            format!(" ({})", escape(&c.label))
        } else {
            String::new()
        };
        out.push_str(&format!("Environment{who}: {}\n\n", parts.join(" · ")));
    }
}

/// The workload facts tables (space per small file, scrub counts): configurations as
/// columns.
fn fact_tables(set: &RunSet, out: &mut String) {
    for t in set.fact_tables() {
        out.push_str(&format!("**{}**\n\n", escape(&t.title)));
        table_of(out, &Table::facts(set, &t));
    }
}

fn ratio_table(set: &RunSet, out: &mut String) {
    let base = &set.configs[set.baseline];
    out.push_str(&format!(
        "**Ratio to the baseline ({})** on each test's headline MB/s (IOPS where no bytes \
         move; the geometric mean of a configuration's runs); `*` = different (every test and \
         metric of a configuration against the baseline corrected together, Holm, 95%, and \
         not within ±{}), `*?` = different but measured under other conditions (a warning \
         such as BUSY_DEVICE on one side only, another kernel or filesystem, runs hours \
         apart), `?` = cannot be told from run-to-run noise (a single run and no other \
         stored run of its command): judged on runs, not passes (t-test on ln of each run's \
         value, two-sided; docs/statistics.md)\n\n",
        escape(&base.label),
        crate::compare::pct(set.margin_pct)
    ));
    let decided: Vec<_> = (0..set.configs.len())
        .map(|i| (i != set.baseline).then(|| set.decisions(set.baseline, i)))
        .collect();
    let mut header = vec!["Test".to_string()];
    header.extend(set.configs.iter().map(|c| escape(&c.label)));
    let rows: Vec<Vec<String>> = set
        .shared_test_names()
        .iter()
        .map(|name| {
            let tests = set.aligned(name);
            let m = set::primary_metric(tests.iter().flatten().copied());
            let vals: Vec<Option<f64>> = (0..tests.len())
                .map(|i| set.run_values(i, name, m).geo_mean())
                .collect();
            let mut r = vec![escape(name)];
            for (i, v) in vals.iter().enumerate() {
                r.push(match (vals[set.baseline], v) {
                    (Some(bv), Some(tv)) if bv > 0.0 => {
                        let mark = if i == set.baseline {
                            ""
                        } else {
                            match (
                                set.judge(name, m, set.baseline, i),
                                decided[i].as_ref().and_then(|d| d.get(&(name.clone(), m))),
                            ) {
                                (_, Some(d)) if d.call == set::Call::Different => {
                                    if d.confounded_by.is_empty() {
                                        "\\*"
                                    } else {
                                        "\\*?"
                                    }
                                }
                                (set::Judgement::NoNoise { .. }, _) => " ?",
                                _ => "",
                            }
                        };
                        format!("{:.2}{mark}", tv / bv)
                    }
                    _ => "-".into(),
                });
            }
            r
        })
        .collect();
    table(out, &header, 1, &rows);
}

fn score_table(set: &RunSet, out: &mut String) {
    let ranking = set.ranking();
    let s = &ranking.score;
    out.push_str(&format!(
        "**Score**: each test's ratio to the best configuration, geometric mean over the \
         random tests, the sequential tests and all of them; best = 1.00. Rank: a range \
         (1-2) means the repeats cannot separate those configurations. {} Caveats: warnings \
         that change what the numbers mean (unsafe = flushes do not reach stable storage; \
         cache = served from a cache or compressed)\n\n",
        escape(&ranking.basis())
    ));
    let header: Vec<String> = [
        "Rank",
        "Configuration",
        "Random",
        "Sequential",
        "Total",
        "Caveats",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    let rows: Vec<Vec<String>> = s
        .ranked
        .iter()
        .zip(&ranking.ranges)
        .map(|(c, range)| {
            vec![
                iolab_stats::noise::rank_text(*range),
                escape(&set.configs[c.config].label),
                f(c.random),
                f(c.sequential),
                f(c.total),
                match set.configs[c.config].caveat_text() {
                    t if t.is_empty() => "-".to_string(),
                    t => format!("⚠ {}", escape(&t)),
                },
            ]
        })
        .collect();
    table(out, &header, 2, &rows);
    if !s.excluded.is_empty() {
        out.push_str(&format!(
            "Not scored (missing in some configuration): {}\n\n",
            s.excluded
                .iter()
                .map(|n| escape(n))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// Markdown: `iolab report --markdown` (the default) and what a study prints.
pub struct Markdown;

static ABOUT: super::About = super::About {
    name: "markdown",
    title: "Markdown",
    extension: "md",
    runs: Some(
        "Write Markdown tables to FILE (\"-\" or no FILE: standard output; the default format)",
    ),
    comparison: None,
    history: None,
};

impl super::Format for Markdown {
    fn about(&self) -> &'static super::About {
        &ABOUT
    }
    fn render(&self, view: &super::View<'_>) -> Option<String> {
        view.runs().map(render)
    }
}
