//! One run's section: its facts, the results table with warning badges, the warnings
//! panel, per-host (MPI) figures, workload tables and details, errors and the captured
//! environment.

use super::*;
use iolab_measure::workload::{self, View};

pub(super) fn run_section(r: &RunRecord, in_set: bool, config: &str, h: &mut String) {
    let _ = writeln!(
        h,
        "<section class=\"run\" id=\"{}\"><h2>{}</h2>",
        run_anchor(r),
        esc(&run_title(r))
    );
    if in_set {
        let _ = writeln!(h, "<p class=\"muted\">Configuration: {}</p>", esc(config));
    }
    // The familiar view first (the CrystalDiskMark panel, ATTO's chart, or else the
    // results table) with the warnings, one line per code, beside it; then the facts.
    let tests: Vec<&TestRecord> = r.tests.iter().filter(|t| !t.passes.is_empty()).collect();
    let (rows, kinds) = set::rows_and_kinds(&tests);
    let mut view = String::new();
    match iolab_measure::workload::view_of(r) {
        Some(View::Atto) => atto_chart(r, &tests, &rows, &mut view),
        Some(View::CrystalDiskMark) if kinds.iter().any(|k| k == "Read" || k == "Write") => {
            cdm_panel(r, &tests, &rows, &kinds, &mut view)
        }
        _ => {}
    }
    let results = |h: &mut String| {
        if r.tests.is_empty() {
            h.push_str("<p>No test finished a pass.</p>");
        } else {
            results_table(r, h);
        }
    };
    if view.is_empty() {
        results(h);
        warnings_panel(r, h);
    } else {
        let _ = write!(h, "<div class=\"cols\"><div class=\"view\">{view}</div>");
        warnings_panel(r, h);
        h.push_str("</div>\n");
    }
    h.push_str("<dl class=\"facts\">");
    for (k, v) in facts::run_facts(r) {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(&v));
    }
    h.push_str("</dl>\n");
    if !view.is_empty() {
        results(h);
    }
    mpi_hosts(r, h);
    ops_tables(r, h);
    let verdicts = facts::durability(r);
    if !verdicts.is_empty() {
        h.push_str("<h3>Durability, per sync method</h3><ul data-panel=\"durability\">");
        for v in &verdicts {
            let _ = write!(h, "<li>{}</li>", inline(v));
        }
        h.push_str("</ul>\n");
    }
    workload_details(r, h);
    latency_curves(&tests, &rows, &kinds, h);
    throughput_over_time(&tests, &rows, &kinds, h);
    h.push_str(&crate::series_chart::run_section(&r.tests));
    errors(r, h);
    if !r.notes.is_empty() {
        h.push_str("<h3>Notes</h3><ul>");
        for n in &r.notes {
            let _ = write!(h, "<li>{}</li>", inline(n));
        }
        h.push_str("</ul>\n");
    }
    environment(r, h);
    h.push_str("</section>\n");
}

/// One small mark for the warnings about `test`: `⚠ CODE` for one code, `⚠ CODE +2` for
/// more, every code and first message in its title; it links to the first code's line in
/// the warnings panel.
pub(super) fn badges(r: &RunRecord, test: &str) -> String {
    let mut codes: Vec<(&str, &str)> = Vec::new();
    for w in r
        .warnings
        .iter()
        .filter(|w| w.test.as_deref() == Some(test))
    {
        if !codes.iter().any(|(c, _)| *c == w.code.as_str()) {
            codes.push((w.code.as_str(), &w.message));
        }
    }
    codes.sort_by_key(|(c, _)| warngroup::severity(&iolab_measure::WarningCode::parse(c)));
    let Some((first, _)) = codes.first() else {
        return String::new();
    };
    let title: Vec<String> = codes
        .iter()
        .map(|(c, m)| format!("{c}: {}", m.replace('`', "")))
        .collect();
    format!(
        "<a class=\"badge\" href=\"#{}\" title=\"{}\">⚠ {}{}</a>",
        group_anchor(r, first),
        esc(&title.join("\n")),
        esc(first),
        if codes.len() > 1 {
            format!(" +{}", codes.len() - 1)
        } else {
            String::new()
        }
    )
}

/// Selects one direction of a pass (`|p| p.read.as_ref()`).
pub(super) type PickDir = fn(&PassRecord) -> Option<&DirResult>;

pub(super) fn dir_median(t: &TestRecord, pick: PickDir) -> Option<[f64; 4]> {
    let d: Vec<&DirResult> = t.passes.iter().filter_map(pick).collect();
    if d.is_empty() {
        return None;
    }
    let col =
        |f: fn(&DirResult) -> f64| iolab_stats::median(&d.iter().map(|x| f(x)).collect::<Vec<_>>());
    Some([
        col(|x| x.mb_s),
        col(|x| x.iops),
        col(|x| x.lat_us.mean),
        col(|x| x.lat_us.p99),
    ])
}

pub(super) fn results_table(r: &RunRecord, h: &mut String) {
    // Block presets describe a test by its I/O pattern; the other workloads by what they
    // did (a replay's clients, a probe's write size), never a block size they do not have.
    let block = iolab_measure::workload::of_run(r).is_some_and(|w| w.tests_are_io_patterns());
    let ops = facts::run_counts_operations(r);
    h.push_str("<div class=\"wide\"><table data-table=\"results\"><tr><th>Test</th>");
    if block {
        h.push_str("<th>rw</th><th class=\"n\">bs</th><th class=\"n\">QD×T</th>");
    } else {
        h.push_str("<th>What</th>");
    }
    h.push_str("<th class=\"n\">Passes</th>");
    if ops {
        h.push_str("<th class=\"n\">ops/s</th>");
    } else {
        h.push_str("<th class=\"n\">MB/s</th><th class=\"n\">IOPS</th>");
    }
    h.push_str(
        "<th class=\"n\">mean µs</th><th class=\"n\">p99 µs</th><th class=\"n\">p99.9 µs</th>\
         <th class=\"n\">max µs</th><th class=\"n\">CPU usr/sys %</th><th>Warnings</th></tr>\n",
    );
    let rates = if ops { 1 } else { 2 };
    let shape_cols = if block { 3 } else { 1 };
    for (i, t) in r.tests.iter().enumerate() {
        let j = &t.job;
        let _ = write!(
            h,
            "<tr id=\"{}\"><td class=\"name\">{}</td>",
            test_anchor(r, i),
            esc(&t.name)
        );
        if block {
            let _ = write!(
                h,
                "<td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}×{}</td>",
                esc(j.rw_name()),
                esc(&format_size_short(j.bs)),
                j.iodepth,
                j.numjobs
            );
        } else {
            let _ = write!(h, "<td>{}</td>", esc(&facts::test_what(r, t)));
        }
        let _ = write!(h, "<td class=\"n\">{}</td>", t.passes.len());
        if t.passes.is_empty() {
            h.push_str(&"<td class=\"n\">-</td>".repeat(rates + 5));
        } else {
            let s = &t.summary;
            let p999 =
                iolab_stats::median(&t.passes.iter().map(|p| p.lat_us.p999).collect::<Vec<_>>());
            let max = t.passes.iter().map(|p| p.lat_us.max).fold(0.0, f64::max);
            let usr =
                iolab_stats::median(&t.passes.iter().map(|p| p.cpu.usr_pct).collect::<Vec<_>>());
            let sys =
                iolab_stats::median(&t.passes.iter().map(|p| p.cpu.sys_pct).collect::<Vec<_>>());
            if ops {
                let _ = write!(
                    h,
                    "<td class=\"n\">{}<span class=\"ci\">{}</span></td>",
                    num(s.iops),
                    esc(&ci(&s.stats_iops))
                );
            } else {
                let _ = write!(
                    h,
                    "<td class=\"n\">{}<span class=\"ci\">{}</span></td><td class=\"n\">{}</td>",
                    num(s.mb_s),
                    esc(&ci(&s.stats_mb_s)),
                    num(s.iops)
                );
            }
            let _ = write!(
                h,
                "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}/{}</td>",
                lat(s.lat_mean_us),
                lat(s.lat_p99_us),
                lat(p999),
                lat(max),
                pct1(usr),
                pct1(sys)
            );
        }
        let _ = writeln!(h, "<td>{}</td></tr>", badges(r, &t.name));
        if j.rw.is_mixed() && !ops {
            let mix = j.rwmixread.min(100);
            let dirs: [(&str, u8, PickDir); 2] = [
                ("read", mix, |p| p.read.as_ref()),
                ("write", 100 - mix, |p| p.write.as_ref()),
            ];
            for (name, share, pick) in dirs {
                if let Some([mb, iops, mean, p99]) = dir_median(t, pick) {
                    let _ = writeln!(
                        h,
                        "<tr><td class=\"sub-row\" colspan=\"{}\">{name} ({share}%)</td>\
                         <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                         <td class=\"n\">{}</td><td colspan=\"4\"></td></tr>",
                        shape_cols + 2,
                        num(mb),
                        num(iops),
                        lat(mean),
                        lat(p99)
                    );
                }
            }
        }
    }
    h.push_str("</table></div>\n");
}

pub(super) fn warnings_panel(r: &RunRecord, h: &mut String) {
    if r.warnings.is_empty() {
        h.push_str(
            "<aside class=\"warnings none\" data-panel=\"warnings\"><h3>Warnings</h3>\
             <p>None: no cache, compression, throttle, flush or noise condition was detected.</p></aside>",
        );
        return;
    }
    let groups = warngroup::group(&r.warnings);
    let _ = write!(
        h,
        "<aside class=\"warnings\" data-panel=\"warnings\"><h3>Warnings: {1} kind{2} ({0} in all)</h3>\
         <p class=\"muted\">Most serious first; one line per code, the details under it.</p><ul>",
        r.warnings.len(),
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    for g in &groups {
        let code = g.code.as_str();
        let first = g.items[0].1;
        let _ = write!(
            h,
            "<li id=\"{}\" data-code=\"{}\"><span class=\"code\">{}</span> {}: {}",
            group_anchor(r, code),
            esc(code),
            esc(code),
            esc(&warngroup::scope(g, r.tests.len())),
            inline(&headline_of(g))
        );
        let _ = write!(
            h,
            "<details><summary>{} — details{}</summary><ul>",
            match g.items.len() {
                1 => "1 warning".to_string(),
                n => format!("{n} warnings"),
            },
            if first.fix.is_empty() { "" } else { " and fix" }
        );
        for (i, w) in &g.items {
            let _ = write!(h, "<li id=\"{}\">", warning_anchor(r, *i));
            if let Some(t) = &w.test {
                match r.tests.iter().position(|x| &x.name == t) {
                    Some(k) => {
                        let _ = write!(h, "<a href=\"#{}\">{}</a>: ", test_anchor(r, k), esc(t));
                    }
                    None => {
                        let _ = write!(h, "{}: ", esc(t));
                    }
                }
            }
            h.push_str(&inline(&w.message));
            if !w.fix.is_empty() {
                let _ = write!(h, " <i>Fix: {}</i>", inline(&w.fix));
            }
            h.push_str("</li>");
        }
        h.push_str("</ul></details></li>");
    }
    h.push_str("</ul></aside>");
}

/// The anchor of a run's group of warnings of one code.
pub(super) fn group_anchor(r: &RunRecord, code: &str) -> String {
    format!("{}-w-{}", run_anchor(r), esc(code))
}

/// A group's one line: its message, marked as an example when the warnings of the code
/// say different things (each is in the details).
pub(super) fn headline_of(g: &warngroup::Group<'_>) -> String {
    let first = &g.items[0].1.message;
    if g.items.iter().all(|(_, w)| &w.message == first) {
        first.clone()
    } else {
        format!("e.g. {first}")
    }
}

pub(super) fn kind_class(kind: &str) -> &'static str {
    match kind {
        "Read" => "read",
        "Write" => "write",
        _ => "mix",
    }
}

/// An MPI run: a bar chart of each host's MB/s per test beside the aggregate, and the
/// same figures as a table.
pub(super) fn mpi_hosts(r: &RunRecord, h: &mut String) {
    let Some(p) = crate::mpi::per_host(r) else {
        return;
    };
    let tests: Vec<String> = p.tests.iter().map(|t| t.test.clone()).collect();
    let none = vec![None; tests.len()];
    let mut series: Vec<BarSeries> = p
        .hosts
        .iter()
        .enumerate()
        .map(|(i, (host, ranks))| BarSeries {
            name: format!(
                "{host} ({ranks} rank{})",
                if *ranks == 1 { "" } else { "s" }
            ),
            color: charts::color(i % (charts::PALETTE.len() - 1)),
            values: p.tests.iter().map(|t| t.hosts[i]).collect(),
            ci: none.clone(),
        })
        .collect();
    series.push(BarSeries {
        name: crate::mpi::ALL_HOSTS.to_string(),
        color: charts::PALETTE[charts::PALETTE.len() - 1],
        values: p.tests.iter().map(|t| t.aggregate).collect(),
        ci: none,
    });
    let u = &p.unit;
    let axis = match u.as_str() {
        "ops/s" => "operations per second",
        _ => "throughput (MB/s)",
    };
    let svg = charts::hbars(&format!("{u} per host"), &tests, &series, axis);
    let _ = writeln!(
        h,
        "<h3>Per host (MPI)</h3><figure data-chart=\"mpi-hosts\">{svg}<figcaption>Each \
         host's {u} per test, and all hosts together (black): {}.</figcaption></figure>",
        esc(&crate::mpi::explained(&p))
    );
    table(h, "mpi-hosts", &Table::mpi_hosts(&p), "");
}

/// The tables of operations a workload keeps for its tests (dbench's, a replay's): the
/// operation and its count first, the other columns in the order of their keys.
pub(super) fn ops_tables(r: &RunRecord, h: &mut String) {
    /// A cell: a number (milliseconds with three decimals, as dbench prints its table),
    /// or none.
    enum Cell {
        Count(u64),
        Ms(f64),
        Text(String),
        None,
    }
    for t in &r.tests {
        let Some(ops) = workload::of_test_in(r, t).and_then(|w| w.op_table(t)) else {
            continue;
        };
        if ops.rows.is_empty() {
            continue;
        }
        type Get = Box<dyn Fn(&workload::OpRow) -> Cell>;
        let mut cols: Vec<(&str, Get)> = vec![
            ("avg_ms", Box::new(|o| Cell::Ms(o.avg_ms))),
            ("max_ms", Box::new(|o| Cell::Ms(o.max_ms))),
            ("p99_ms", Box::new(|o| Cell::Ms(o.p99_ms))),
            (ops.mismatch_key, Box::new(|o| Cell::Count(o.mismatches))),
        ];
        if ops.rows.iter().any(|o| o.recorded.is_some()) {
            cols.push((
                "recorded",
                Box::new(|o| o.recorded.map_or(Cell::None, Cell::Count)),
            ));
        }
        cols.sort_by_key(|c| c.0);
        cols.insert(0, ("count", Box::new(|o| Cell::Count(o.count))));
        cols.insert(0, ("op", Box::new(|o| Cell::Text(o.op.clone()))));
        let _ = write!(
            h,
            "<h3>Operations: {}</h3><div class=\"wide\"><table data-table=\"ops\"><tr>",
            esc(&t.name)
        );
        for (k, _) in &cols {
            let _ = write!(h, "<th>{}</th>", esc(&pretty_key(k)));
        }
        h.push_str("</tr>\n");
        for o in &ops.rows {
            h.push_str("<tr>");
            for (_, get) in &cols {
                let (class, text) = match get(o) {
                    Cell::Count(n) => (" class=\"n\"", n.to_string()),
                    Cell::Ms(ms) => (" class=\"n\"", format!("{ms:.3}")),
                    Cell::Text(s) => ("", esc(&s)),
                    Cell::None => ("", "-".into()),
                };
                let _ = write!(h, "<td{class}>{text}</td>");
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table></div>\n");
    }
}

pub(super) fn pretty_key(k: &str) -> String {
    let k = k
        .replace("_ms", " ms")
        .replace("_us", " µs")
        .replace("_pct", " %")
        .replace("_s", " s")
        .replace('_', " ");
    if k == "p99 ms" {
        "p99 ms".into()
    } else {
        k
    }
}

/// A JSON scalar as escaped HTML text; arrays and objects as compact JSON.
pub(super) fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => num(f),
            _ => n.to_string(),
        },
        Value::String(s) => esc(s),
        other => esc(&other.to_string()),
    }
}

/// The scalar facts workloads keep in `extra` (copy phases, stream offsets, metadata
/// counts...), keys as rows and tests as columns.
pub(super) fn workload_details(r: &RunRecord, h: &mut String) {
    let tests: Vec<&TestRecord> = r.tests.iter().filter(|t| t.extra.is_object()).collect();
    if tests.is_empty() {
        return;
    }
    let mut keys: Vec<&str> = Vec::new();
    for t in &tests {
        for (k, v) in t.extra.as_object().expect("checked") {
            if !(v.is_array() || v.is_object() || keys.contains(&k.as_str())) {
                keys.push(k);
            }
        }
    }
    if keys.is_empty() {
        return;
    }
    h.push_str(
        "<details data-table=\"workload\"><summary>Workload details (what each test \
         recorded besides its passes)</summary><div class=\"wide\"><table class=\"kv\"><tr><th></th>",
    );
    for t in &tests {
        let _ = write!(h, "<th>{}</th>", esc(&t.name));
    }
    h.push_str("</tr>\n");
    for k in keys {
        let _ = write!(h, "<tr><td>{}</td>", esc(k));
        for t in &tests {
            let _ = write!(
                h,
                "<td>{}</td>",
                scalar(t.extra.get(k).unwrap_or(&Value::Null))
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div></details>\n");
}

pub(super) fn errors(r: &RunRecord, h: &mut String) {
    let errs: Vec<(&TestRecord, u32, &iolab_measure::IoErrorRecord)> = r
        .tests
        .iter()
        .flat_map(|t| {
            t.passes
                .iter()
                .flat_map(move |p| p.errors.iter().map(move |e| (t, p.index, e)))
        })
        .collect();
    if errs.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h3>I/O errors ({})</h3><div class=\"wide\"><table data-table=\"errors\"><tr><th>Test</th>\
         <th class=\"n\">Pass</th><th class=\"n\">errno</th><th>Message</th><th>Dir</th>\
         <th class=\"n\">Offset</th><th class=\"n\">Length</th></tr>",
        errs.len()
    );
    for (t, pass, e) in errs.iter().take(200) {
        let dir = match e.dir {
            iolab_spec::IoDir::Read => "read",
            iolab_spec::IoDir::Write => "write",
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{pass}</td><td class=\"n\">{}</td><td>{}</td>\
             <td>{dir}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&t.name),
            e.errno,
            esc(&e.message),
            e.offset,
            e.len
        );
    }
    h.push_str("</table></div>\n");
    if errs.len() > 200 {
        let _ = write!(
            h,
            "<p>… and {} more (all are in the JSON export).</p>",
            errs.len() - 200
        );
    }
}

pub(super) fn environment(r: &RunRecord, h: &mut String) {
    h.push_str("<h3>Environment</h3>");
    if !r.env.is_object() {
        h.push_str("<p class=\"muted\">Not captured for this run.</p>\n");
        return;
    }
    h.push_str("<dl class=\"facts\" data-panel=\"environment\">");
    for (k, v) in facts::env_summary(&r.env) {
        let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", esc(&k), esc(&v));
    }
    h.push_str("</dl><details><summary>Everything captured</summary>");
    json_html(&r.env, h);
    h.push_str("</details>\n");
}

/// Nested key/value tables for a JSON value; nulls and empty collections are left out.
pub(super) fn json_html(v: &Value, h: &mut String) {
    match v {
        Value::Object(map) => {
            h.push_str("<table class=\"kv\">");
            for (k, x) in map {
                let empty = match x {
                    Value::Null => true,
                    Value::Array(a) => a.is_empty(),
                    Value::Object(o) => o.is_empty(),
                    Value::String(s) => s.is_empty(),
                    _ => false,
                };
                if empty {
                    continue;
                }
                let _ = write!(h, "<tr><td>{}</td><td>", esc(k));
                json_html(x, h);
                h.push_str("</td></tr>");
            }
            h.push_str("</table>");
        }
        Value::Array(a) if a.iter().all(|x| !(x.is_object() || x.is_array())) => {
            let parts: Vec<String> = a.iter().map(scalar).collect();
            h.push_str(&parts.join(", "));
        }
        Value::Array(a) => {
            for x in a {
                json_html(x, h);
            }
        }
        other => h.push_str(&scalar(other)),
    }
}
