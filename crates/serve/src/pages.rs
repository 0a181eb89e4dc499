//! The pages: runs (filtered, paged), a run (the HTML report), compare, history of a
//! command with its chart, studies and a study (its ranking, from the HTML report). Each
//! reads the store through `Store`'s public read methods only.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use iolab_measure::RunRecord;
use iolab_report::charts::{self, BarSeries, Line, Scale, XLabels};
use iolab_report::compare::{self as cmp, Verdict};
use iolab_report::history::{self, Move};
use iolab_report::html::{self, esc};
use iolab_report::set::{Metric, Noise, RunSet};
use iolab_store::{RunFilter, RunListing, Store, StoreError};

use crate::http::{Request, Response};
use crate::layout::{message_page, page, with_nav};
use crate::query::{encode, Query, QueryError};

/// Runs a page of the runs list shows unless `per` says otherwise.
pub const PER_PAGE: u64 = 50;
/// The most runs one side of a compare loads (the newest of a label).
pub const MAX_SIDE_RUNS: usize = 200;
/// The most sides of one compare.
pub const MAX_SIDES: usize = 12;
/// The most runs a history shows.
pub const MAX_HISTORY: u64 = 1000;

/// Why a page is not shown.
#[derive(Debug)]
pub enum PageError {
    /// A query value the page cannot use: 400 with the message.
    Bad(String),
    /// Nothing by that name or id: 404.
    NotFound(String),
    Store(StoreError),
}

impl From<QueryError> for PageError {
    fn from(e: QueryError) -> PageError {
        PageError::Bad(e.to_string())
    }
}

impl From<StoreError> for PageError {
    fn from(e: StoreError) -> PageError {
        match e {
            StoreError::RunNotFound { id, .. } => {
                PageError::NotFound(format!("run {id} is not stored"))
            }
            e => PageError::Store(e),
        }
    }
}

type Page = Result<String, PageError>;

/// The response to `req` (already authorised), reading `store`.
pub fn route(store: &Store, req: &Request) -> Response {
    let q = req.query();
    let result = match req.path() {
        "/" => {
            return Response::text(302, "see /runs").with_header("Location", "/runs");
        }
        "/runs" => runs(store, q),
        "/compare" => compare(store, q),
        "/history" => history_page(store, q),
        "/studies" => studies(store, q),
        "/study" => study(store, q),
        p if p.starts_with("/run/") => run(store, &p[5..], q),
        p => Err(PageError::NotFound(format!("no page {p}"))),
    };
    match result {
        Ok(body) => Response::html(200, body),
        Err(PageError::Bad(m)) => Response::html(400, message_page("Bad request", &esc(&m))),
        Err(PageError::NotFound(m)) => Response::html(404, message_page("Not found", &esc(&m))),
        Err(PageError::Store(e)) => Response::html(
            500,
            message_page("The store could not be read", &esc(&e.to_string())),
        ),
    }
}

fn no_params(q: &str) -> Result<(), QueryError> {
    Query::parse(q, &[]).map(|_| ())
}

/// The date part of a stored start time.
fn day(started_at: &str) -> &str {
    started_at.get(..10).unwrap_or(started_at)
}

fn short_time(t: &str) -> String {
    match (t.get(..10), t.get(11..16)) {
        (Some(d), Some(h)) if t.as_bytes().get(10) == Some(&b'T') => format!("{d} {h}"),
        _ => t.to_string(),
    }
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn field(name: &str, label: &str, value: &Option<String>, kind: &str) -> String {
    format!(
        "<label>{label}<input type=\"{kind}\" name=\"{name}\" value=\"{}\"></label>",
        esc(value.as_deref().unwrap_or(""))
    )
}

/// `?k=v&...` of the set pairs.
fn query_of(pairs: &[(&str, Option<String>)]) -> String {
    let s: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", encode(v.as_deref()?))))
        .collect();
    if s.is_empty() {
        String::new()
    } else {
        format!("?{}", s.join("&"))
    }
}

// --- runs ---------------------------------------------------------------------------------

fn in_dates(runs: &mut Vec<RunListing>, from: &Option<String>, to: &Option<String>) {
    runs.retain(|r| {
        let d = day(&r.started_at);
        from.as_deref().is_none_or(|f| d >= f) && to.as_deref().is_none_or(|t| d <= t)
    });
}

fn check_dates(from: &Option<String>, to: &Option<String>) -> Result<(), QueryError> {
    match (from, to) {
        (Some(f), Some(t)) if f > t => Err(QueryError::Dates {
            from: f.clone(),
            to: t.clone(),
        }),
        _ => Ok(()),
    }
}

fn runs(store: &Store, q: &str) -> Page {
    let q = Query::parse(
        q,
        &[
            "host", "label", "preset", "study", "from", "to", "page", "per",
        ],
    )?;
    let (host, label, preset, study) = (
        q.one("host")?,
        q.one("label")?,
        q.one("preset")?,
        q.one("study")?,
    );
    let (from, to) = (q.date("from")?, q.date("to")?);
    check_dates(&from, &to)?;
    let page_no = q.number("page", 1, 1_000_000)?.unwrap_or(1);
    let per = q.number("per", 1, 500)?.unwrap_or(PER_PAGE);
    let filter = RunFilter {
        preset: preset.clone(),
        label: label.clone(),
        study: study.clone(),
        host: host.clone(),
        ..RunFilter::default()
    };
    let mut skipped = Vec::new();
    let unfiltered = filter == RunFilter::default() && from.is_none() && to.is_none();
    let (runs, total) = if unfiltered {
        // Only the newest runs up to this page are listed (one indexed, limited query),
        // and counted apart: a page of 10,000 runs costs what a page of 100 does.
        let total = store.count_runs()?;
        let mut runs = store.list_runs_skipping(
            &RunFilter {
                limit: Some((page_no * per) as usize),
                ..RunFilter::default()
            },
            &mut |id, _| skipped.push(id),
        )?;
        runs.reverse();
        (runs, total)
    } else {
        let mut runs = store.list_runs_skipping(&filter, &mut |id, _| skipped.push(id))?;
        in_dates(&mut runs, &from, &to);
        runs.reverse();
        let total = runs.len();
        (runs, total)
    };
    let pages = total.div_ceil(per as usize).max(1);
    if page_no as usize > pages {
        return Err(PageError::Bad(format!(
            "page {page_no} is past the last page ({pages}) of these {total} runs"
        )));
    }
    let start = ((page_no as usize - 1) * per as usize).min(runs.len());
    let shown = &runs[start..(start + per as usize).min(runs.len())];

    let mut h = String::new();
    h.push_str("<h1>Runs</h1>\n<form class=\"filters\" method=\"get\" action=\"/runs\">");
    h.push_str(&field("host", "host", &host, "text"));
    h.push_str(&field("label", "label", &label, "text"));
    h.push_str(&field("preset", "preset or workload", &preset, "text"));
    h.push_str(&field("study", "study", &study, "text"));
    h.push_str(&field("from", "from", &from, "date"));
    h.push_str(&field("to", "to", &to, "date"));
    h.push_str("<button type=\"submit\">Filter</button> <a href=\"/runs\">clear</a></form>\n");
    let base = |p: u64| {
        query_of(&[
            ("host", host.clone()),
            ("label", label.clone()),
            ("preset", preset.clone()),
            ("study", study.clone()),
            ("from", from.clone()),
            ("to", to.clone()),
            ("page", Some(p.to_string())),
            ("per", (per != PER_PAGE).then(|| per.to_string())),
        ])
    };
    let mut pager = String::from("<div class=\"pager\">");
    if total == 0 {
        pager.push_str("<span>No runs match.</span>");
    } else {
        let _ = write!(
            pager,
            "<span data-total=\"{total}\">runs {}–{} of {total} (newest first)</span>",
            start + 1,
            start + shown.len()
        );
    }
    if page_no > 1 {
        let _ = write!(
            pager,
            "<a href=\"/runs{}\" rel=\"prev\">← newer</a>",
            esc(&base(page_no - 1))
        );
    }
    if (page_no as usize) < pages {
        let _ = write!(
            pager,
            "<a href=\"/runs{}\" rel=\"next\">older →</a>",
            esc(&base(page_no + 1))
        );
    }
    pager.push_str("</div>\n");
    h.push_str(&pager);
    if !skipped.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"error\">{} run(s) left out: their stored rows cannot be read (ids {}).</p>",
            skipped.len(),
            esc(&iolab_report::set::id_ranges(&skipped))
        );
    }
    h.push_str(
        "<form method=\"get\" action=\"/compare\">\n<table data-table=\"runs\">\n<tr><th></th>\
         <th class=\"n\">run</th><th>started (UTC)</th><th>host</th><th>preset</th>\
         <th>target</th><th>label</th><th>study · config</th><th>state</th>\
         <th class=\"n\">tests</th></tr>\n",
    );
    for r in shown {
        let state = if r.complete {
            "complete".to_string()
        } else {
            match store.writer(r.id)? {
                Some(pid) => format!("running (pid {pid})"),
                None => "incomplete".into(),
            }
        };
        let study = match (&r.study, &r.config_label) {
            (Some(s), Some(c)) => format!(
                "<a href=\"/study?name={}\">{}</a> · {}",
                encode(s),
                esc(s),
                esc(c)
            ),
            (Some(s), None) => format!("<a href=\"/study?name={}\">{}</a>", encode(s), esc(s)),
            _ => String::new(),
        };
        let _ = writeln!(
            h,
            "<tr><td><input type=\"checkbox\" name=\"run\" value=\"{id}\" aria-label=\"compare run {id}\"></td>\
             <td class=\"n\"><a href=\"/run/{id}\">{id}</a></td><td class=\"nw\">{}</td><td class=\"nw\">{}</td><td>{}</td>\
             <td>{} <span class=\"muted\">({})</span></td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"n\">{}</td></tr>",
            esc(&short_time(&r.started_at)),
            esc(r.host.as_deref().unwrap_or("")),
            esc(&r.preset),
            esc(&r.target),
            esc(&r.fs_type),
            esc(r.label.as_deref().unwrap_or("")),
            study,
            esc(&state),
            r.tests,
            id = r.id,
        );
    }
    h.push_str("</table>\n<button type=\"submit\">Compare the runs ticked</button></form>\n");
    h.push_str(&pager);
    Ok(page("Runs", &h))
}

// --- a run --------------------------------------------------------------------------------

fn noise(store: &Store, ids: &[i64]) -> Result<Noise, StoreError> {
    Noise::load(
        ids,
        |id| store.fingerprint(id),
        |fp, n| store.runs_like(fp, n, &mut |_, _| {}),
    )
}

fn run(store: &Store, id: &str, q: &str) -> Page {
    no_params(q)?;
    let id: i64 = id
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| PageError::Bad(format!("'{id}' is not a run id")))?;
    let run = store.load_run(id)?;
    let mut set = RunSet::per_run(vec![run]);
    set.set_noise(noise(store, &[id])?);
    let links = format!(
        "<p style=\"margin:10px 24px 0;font-size:13px\"><a href=\"/history?run={id}\">History of \
         this run's command</a> · <a href=\"/runs\">all runs</a></p>\n"
    );
    Ok(with_nav(html::render(&set), &links))
}

// --- compare ------------------------------------------------------------------------------

fn compare_form(runs: &str, labels: &[String]) -> String {
    let mut h = String::from(
        "<form class=\"filters\" method=\"get\" action=\"/compare\">\
         <label>run ids (the first is A)<input type=\"text\" name=\"run\" size=\"24\" value=\"",
    );
    h.push_str(&esc(runs));
    h.push_str("\"></label><span class=\"muted\">or labels:</span>");
    for i in 0..4 {
        let v = labels.get(i).cloned();
        h.push_str(&field(
            "label",
            &format!("label {}", (b'A' + i as u8) as char),
            &v,
            "text",
        ));
    }
    h.push_str("<button type=\"submit\">Compare</button></form>\n");
    h
}

fn compare(store: &Store, q: &str) -> Page {
    let q = Query::parse(q, &["run", "label"])?;
    let mut ids = Vec::new();
    for v in q.all("run") {
        for part in v.split([' ', ',']).filter(|p| !p.is_empty()) {
            ids.push(part.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                PageError::Bad(format!("'run' must be run ids (numbers), not '{part}'"))
            })?);
        }
    }
    let labels = q.all("label");
    let run_text = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
    let mut h = String::from("<h1>Compare</h1>\n");
    h.push_str(&compare_form(&run_text, &labels));
    if ids.is_empty() && labels.is_empty() {
        h.push_str(
            "<p class=\"muted\">Give two or more run ids (or tick runs on the Runs page), or \
             two or more labels: the runs sharing a label are one side, each run one sample.</p>",
        );
        return Ok(page("Compare", &h));
    }
    if !ids.is_empty() && !labels.is_empty() {
        return Err(PageError::Bad(
            "give run ids or labels to compare, not both".into(),
        ));
    }
    let sides = ids.len() + labels.len();
    if sides < 2 {
        return Err(PageError::Bad(
            "compare needs at least two sides: two or more run ids, or two labels".into(),
        ));
    }
    if sides > MAX_SIDES {
        return Err(PageError::Bad(format!(
            "at most {MAX_SIDES} sides can be compared (given {sides})"
        )));
    }
    let mut notes = Vec::new();
    let groups: Vec<(String, Vec<RunRecord>)> = if labels.is_empty() {
        ids.iter()
            .map(|&id| {
                let r = store.load_run(id)?;
                let mut name = format!("run {id}");
                if let Some(l) = r.config_label.as_ref().or(r.label.as_ref()) {
                    name.push_str(&format!(" ({l})"));
                }
                Ok((name, vec![r]))
            })
            .collect::<Result<_, PageError>>()?
    } else {
        let mut g = Vec::new();
        for label in &labels {
            let listed = store.list_runs(&RunFilter {
                label: Some(label.clone()),
                ..RunFilter::default()
            })?;
            if listed.is_empty() {
                return Err(PageError::Bad(format!(
                    "label '{label}': no stored run carries it"
                )));
            }
            let skip = listed.len().saturating_sub(MAX_SIDE_RUNS);
            if skip > 0 {
                notes.push(format!(
                    "label '{label}' has {} runs: its newest {MAX_SIDE_RUNS} are compared",
                    listed.len()
                ));
            }
            let runs = listed[skip..]
                .iter()
                .map(|l| store.load_run(l.id))
                .collect::<Result<Vec<_>, _>>()?;
            g.push((format!("label {label}"), runs));
        }
        g
    };
    let mut set = RunSet::groups(groups);
    set.set_noise(noise(store, &set.run_ids())?);
    let c = cmp::compare(&set);
    for n in &notes {
        let _ = writeln!(h, "<p class=\"error\">{}</p>", esc(n));
    }
    comparison_html(&c, &mut h);
    Ok(page("Compare", &h))
}

fn verdict_html(cell: &cmp::Cell, margin_pct: f64) -> String {
    let class = match &cell.verdict {
        Verdict::Better(_) => "better",
        Verdict::Worse(_) => "worse",
        _ => "muted",
    };
    format!(
        "<span class=\"{class}\">{}</span>",
        esc(&cell.verdict_text(margin_pct))
    )
}

fn comparison_html(c: &cmp::Comparison, h: &mut String) {
    h.push_str("<h2>Sides</h2>\n<table data-table=\"sides\"><tr><th></th><th>side</th><th>runs</th></tr>\n");
    for s in &c.sides {
        let runs: Vec<String> = s
            .run_ids
            .iter()
            .map(|id| format!("<a href=\"/run/{id}\">{id}</a>"))
            .collect();
        let _ = writeln!(
            h,
            "<tr><td><b>{}</b></td><td>{}</td><td>{}<div class=\"muted\">{}</div></td></tr>",
            esc(&s.letter),
            esc(&s.label),
            runs.join(" "),
            esc(&match s.runs.len() {
                0..=4 => s.runs.join("; "),
                n => format!("{}; … and {} more", s.runs[..3].join("; "), n - 3),
            })
        );
    }
    h.push_str("</table>\n");
    // The chart: every test's most common metric, one bar per side.
    let mut counts: HashMap<Metric, usize> = HashMap::new();
    for r in &c.rows {
        *counts.entry(r.metric).or_default() += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    // Ties go to the first of `Metric::ALL`: throughput before latency.
    if let Some(m) = Metric::ALL
        .iter()
        .copied()
        .find(|m| counts.get(m).copied().unwrap_or(0) == most)
    {
        let rows: Vec<&cmp::Row> = c.rows.iter().filter(|r| r.metric == m).collect();
        if !rows.is_empty() {
            let clusters: Vec<String> = rows.iter().map(|r| r.test.clone()).collect();
            let series: Vec<BarSeries> = c
                .sides
                .iter()
                .enumerate()
                .map(|(k, s)| BarSeries {
                    name: format!("{} = {}", s.letter, s.label),
                    color: charts::color(k),
                    values: rows.iter().map(|r| r.cells[k].value).collect(),
                    ci: vec![None; rows.len()],
                })
                .collect();
            let _ = writeln!(
                h,
                "<figure data-chart=\"compare\">{}</figure>",
                charts::vbars(
                    &format!("{} by side", m.label()),
                    &clusters,
                    &series,
                    m.label()
                )
            );
        }
    }
    h.push_str("<h2>Tests</h2>\n<table data-table=\"compare\"><tr><th>test</th><th>metric</th>");
    for s in &c.sides {
        let _ = write!(h, "<th class=\"n\">{}</th>", esc(&s.letter));
        if s.letter != c.sides[0].letter {
            let _ = write!(h, "<th class=\"n\">change</th><th>beyond noise?</th>");
        }
    }
    h.push_str("</tr>\n");
    for r in &c.rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td>",
            esc(&r.test),
            r.metric.label()
        );
        for (k, cell) in r.cells.iter().enumerate() {
            let _ = write!(
                h,
                "<td class=\"n\">{}</td>",
                cell.value.map(num).unwrap_or_default()
            );
            if k > 0 {
                let _ = write!(
                    h,
                    "<td class=\"n\">{}</td><td>{}</td>",
                    esc(&cmp::change_text(cell.change_pct)),
                    verdict_html(cell, c.margin_pct)
                );
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
    for (t, letters) in &c.partial {
        let _ = writeln!(
            h,
            "<p class=\"muted\">{} is only on {}.</p>",
            esc(t),
            esc(&letters.join(", "))
        );
    }
    for k in 1..c.sides.len() {
        let ev = cmp::evidence(c, k);
        if !ev.is_empty() {
            let _ = writeln!(
                h,
                "<h2>What {} against A rests on</h2><ul>",
                esc(&c.sides[k].letter)
            );
            for e in ev {
                let _ = writeln!(h, "<li>{}</li>", html::inline(&e));
            }
            h.push_str("</ul>\n");
        }
    }
    if !c.warnings.is_empty() {
        h.push_str("<h2>Warnings</h2>\n<ul>");
        for (side, w) in &c.warnings {
            let _ = writeln!(
                h,
                "<li><b>{}</b> <code>{}</code> {}{}</li>",
                esc(side),
                esc(&w.code.to_string()),
                w.test
                    .as_deref()
                    .map(|t| format!("{}: ", esc(t)))
                    .unwrap_or_default(),
                html::inline(&w.message)
            );
        }
        h.push_str("</ul>\n");
    }
}

// --- history ------------------------------------------------------------------------------

fn history_page(store: &Store, q: &str) -> Page {
    let q = Query::parse(
        q,
        &[
            "run", "preset", "target", "label", "host", "from", "to", "limit",
        ],
    )?;
    let limit = q.number("limit", 1, MAX_HISTORY)?.unwrap_or(50) as usize;
    let of_run = q.ids("run")?;
    let (preset, target, label, host) = (
        q.one("preset")?,
        q.one("target")?,
        q.one("label")?,
        q.one("host")?,
    );
    let (from, to) = (q.date("from")?, q.date("to")?);
    check_dates(&from, &to)?;
    let mut h = String::from("<h1>History</h1>\n");
    let runs: Vec<RunRecord> = match of_run.as_slice() {
        [id] => {
            if [&preset, &target, &label, &host, &from, &to]
                .iter()
                .any(|v| v.is_some())
            {
                return Err(PageError::Bad(
                    "'run' shows the history of that run's command: give no other filter".into(),
                ));
            }
            let fp = store.fingerprint(*id)?;
            let _ = writeln!(
                h,
                "<p>The runs of the command of <a href=\"/run/{id}\">run {id}</a> (same \
                 workload, options, target, label and host), newest {limit}.</p>"
            );
            let mut runs = store.runs_like(&fp, limit, &mut |_, _| {})?;
            if !runs.iter().any(|r| r.id == Some(*id)) {
                runs.push(store.load_run_summaries(*id)?);
                runs.sort_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
            }
            runs
        }
        [] => {
            h.push_str("<form class=\"filters\" method=\"get\" action=\"/history\">");
            h.push_str(&field("preset", "preset or workload", &preset, "text"));
            h.push_str(&field("target", "target path", &target, "text"));
            h.push_str(&field("label", "label", &label, "text"));
            h.push_str(&field("host", "host", &host, "text"));
            h.push_str(&field("from", "from", &from, "date"));
            h.push_str(&field("to", "to", &to, "date"));
            h.push_str(&format!(
                "<label>newest<input type=\"number\" name=\"limit\" min=\"1\" max=\"{MAX_HISTORY}\" value=\"{limit}\"></label>"
            ));
            h.push_str("<button type=\"submit\">Show</button></form>\n");
            let mut listed = store.list_runs(&RunFilter {
                preset,
                target,
                label,
                host: host.clone(),
                ..RunFilter::default()
            })?;
            in_dates(&mut listed, &from, &to);
            let skip = listed.len().saturating_sub(limit);
            listed[skip..]
                .iter()
                .map(|l| store.load_run_summaries(l.id))
                .collect::<Result<_, _>>()?
        }
        _ => return Err(PageError::Bad("'run' is given more than once".into())),
    };
    if runs.is_empty() {
        h.push_str("<p>No runs match.</p>");
        return Ok(page("History", &h));
    }
    let ids: Vec<i64> = runs.iter().filter_map(|r| r.id).collect();
    let noise = noise(store, &ids)?;
    let _ = writeln!(h, "<p class=\"muted\">{}</p>", esc(history::MARKS));
    for (si, s) in history::series(&runs, &noise).iter().enumerate() {
        let _ = writeln!(
            h,
            "<h2>{} on {} <span class=\"muted\">({} runs)</span></h2>",
            esc(&s.preset),
            esc(&s.target),
            s.runs.len()
        );
        // One chart per metric: the tests' headlines over the runs, oldest first.
        let mut by_metric: BTreeMap<&str, Vec<Line>> = BTreeMap::new();
        for (ti, t) in s.tests.iter().enumerate() {
            let m = s.metric(t);
            let points: Vec<(f64, f64)> = (0..s.runs.len())
                .filter_map(|i| Some(((i + 1) as f64, s.point(i, t)?.0)))
                .collect();
            if !points.is_empty() {
                by_metric.entry(m.label()).or_default().push(Line {
                    name: t.clone(),
                    color: charts::color(ti),
                    points,
                });
            }
        }
        for (unit, lines) in &by_metric {
            let _ = writeln!(
                h,
                "<figure data-chart=\"history-{si}\">{}</figure>",
                charts::lines(
                    &format!("{} on {}: {unit} per run", s.preset, s.target),
                    lines,
                    "run (oldest first)",
                    unit,
                    Scale::Linear,
                    XLabels::Plain
                )
            );
        }
        h.push_str("<table data-table=\"history\"><tr><th class=\"n\">#</th><th class=\"n\">run</th><th>started (UTC)</th><th>label</th>");
        for t in &s.tests {
            let _ = write!(
                h,
                "<th class=\"n\">{} <span class=\"muted\">{}</span></th>",
                esc(t),
                s.metric(t).label()
            );
        }
        h.push_str("</tr>\n");
        for (i, r) in s.runs.iter().enumerate() {
            let id = r.id.unwrap_or(0);
            let _ = write!(
                h,
                "<tr><td class=\"n\">{}</td><td class=\"n\"><a href=\"/run/{id}\">{id}</a></td><td>{}</td><td>{}</td>",
                i + 1,
                esc(&short_time(&r.started_at)),
                esc(r.label.as_deref().unwrap_or(""))
            );
            for t in &s.tests {
                let cell = match s.point(i, t) {
                    None => String::new(),
                    Some((v, mv)) => {
                        let (mark, class) = match mv {
                            Move::Up(..) => ("↑", "better"),
                            Move::Down(..) => ("↓", "worse"),
                            Move::Steady(..) => ("=", "muted"),
                            Move::Unknown(_) => ("?", "muted"),
                            Move::First | Move::Untested => ("", "muted"),
                        };
                        format!("{} <span class=\"{class}\">{mark}</span>", num(v))
                    }
                };
                let _ = write!(h, "<td class=\"n\">{cell}</td>");
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    Ok(page("History", &h))
}

// --- studies ------------------------------------------------------------------------------

fn studies(store: &Store, q: &str) -> Page {
    no_params(q)?;
    let runs = store.list_runs(&RunFilter::default())?;
    // name -> (runs, configurations, first, last)
    let mut by: BTreeMap<String, (usize, Vec<String>, String, String)> = BTreeMap::new();
    for r in &runs {
        let Some(s) = &r.study else { continue };
        let e = by
            .entry(s.clone())
            .or_insert_with(|| (0, Vec::new(), r.started_at.clone(), r.started_at.clone()));
        e.0 += 1;
        if let Some(c) = &r.config_label {
            if !e.1.contains(c) {
                e.1.push(c.clone());
            }
        }
        e.3 = r.started_at.clone();
    }
    let mut h = String::from("<h1>Studies</h1>\n");
    if by.is_empty() {
        h.push_str("<p>No study is stored (<code>iolab study FILE</code> runs one).</p>");
        return Ok(page("Studies", &h));
    }
    h.push_str("<table data-table=\"studies\"><tr><th>study</th><th class=\"n\">runs</th><th>configurations</th><th>first run</th><th>last run</th></tr>\n");
    for (name, (n, configs, first, last)) in &by {
        let _ = writeln!(
            h,
            "<tr><td><a href=\"/study?name={}\">{}</a></td><td class=\"n\">{n}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            encode(name),
            esc(name),
            esc(&configs.join(", ")),
            esc(&short_time(first)),
            esc(&short_time(last))
        );
    }
    h.push_str("</table>\n");
    Ok(page("Studies", &h))
}

fn study(store: &Store, q: &str) -> Page {
    let q = Query::parse(q, &["name"])?;
    let name = q
        .one("name")?
        .ok_or_else(|| PageError::Bad("'name' (the study's) is needed".into()))?;
    let listed = store.list_runs(&RunFilter {
        study: Some(name.clone()),
        ..RunFilter::default()
    })?;
    if listed.is_empty() {
        return Err(PageError::NotFound(format!(
            "no stored run belongs to study '{name}'"
        )));
    }
    let runs = listed
        .iter()
        .map(|l| store.load_run(l.id))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut set, failed) =
        RunSet::stored_study(&name, runs, false).map_err(|e| PageError::Bad(e.to_string()))?;
    set.set_noise(noise(store, &set.run_ids())?);
    let mut links = String::from(
        "<p style=\"margin:10px 24px 0;font-size:13px\"><a href=\"/studies\">all studies</a>",
    );
    for r in &failed {
        let _ = write!(
            links,
            " · run {} ({}) is left out: it failed: {}",
            r.id.unwrap_or(0),
            esc(r.config_label.as_deref().unwrap_or(&r.preset)),
            esc(r.failure().unwrap_or(""))
        );
    }
    links.push_str("</p>\n");
    Ok(with_nav(html::render(&set), &links))
}
