//! The comparison of configurations: its heading, the CrystalDiskMark-style tiles, grouped
//! bars, the ratio-to-baseline table, the ranked score, the facts tables and the warnings
//! of the runs compared.

use super::*;

pub(super) fn comparison_anchor(i: usize) -> String {
    if i == 0 {
        "comparison".to_string()
    } else {
        format!("comparison-{}", i + 1)
    }
}

/// `Study NAME`, `Comparison`, or `Comparison: cdm runs` when there are several.
pub(super) fn comparison_heading(set: &RunSet, families: usize) -> String {
    match &set.study {
        Some(s) => format!("Study {s}"),
        None if families > 1 => {
            let preset = set
                .runs()
                .next()
                .map(|r| r.preset.clone())
                .unwrap_or_default();
            format!("Comparison: {preset} runs")
        }
        None => "Comparison".to_string(),
    }
}

pub(super) fn comparison(set: &RunSet, index: usize, families: usize, h: &mut String) {
    let _ = writeln!(
        h,
        "<section class=\"comparison\"><h2 id=\"{}\">{}</h2>",
        comparison_anchor(index),
        esc(&comparison_heading(set, families))
    );
    let base = &set.configs[set.baseline];
    let _ = writeln!(
        h,
        "<p>{} configurations; baseline <b>{}</b>; runs sharing a configuration have their \
         passes pooled.</p>",
        set.configs.len(),
        esc(&base.label)
    );

    h.push_str("<div class=\"cols\">");
    let tiles = cdm_compare_panel(set);
    if let Some(view) = &tiles {
        let _ = write!(h, "<div class=\"view\">{view}</div>");
    }
    h.push_str("<div>");
    ratio_table(set, h);
    h.push_str("</div></div>\n");
    if tiles.is_some() {
        // The tiles hold the same numbers: their bars wait behind a click.
        h.push_str(
            "<details data-panel=\"study-bars\"><summary>Bars by configuration, with the \
             95% confidence interval of each</summary>",
        );
        comparison_bars(set, h);
        h.push_str("</details>\n");
    } else {
        comparison_bars(set, h);
    }
    // Ranked score.
    let ranking = set.ranking();
    let s = &ranking.score;
    let _ = writeln!(
        h,
        "<h3>Score</h3><p class=\"muted\">Each test's headline (the geometric mean of a \
         configuration's runs) as a ratio to the best configuration for that test; the \
         geometric mean of those ratios over the random tests, the sequential tests and all \
         tests, divided by the best configuration's, so the best scores 1.00 in each column. \
         Ranked by total; a rank range (1-2) means the repeats cannot separate those \
         configurations. {}</p>\
         <table data-table=\"score\"><tr><th class=\"n\">Rank</th><th>Configuration</th>\
         <th class=\"n\">Random</th><th class=\"n\">Sequential</th><th class=\"n\">Total</th>\
         <th>Caveats</th></tr>",
        esc(&ranking.basis())
    );
    let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for (c, range) in s.ranked.iter().zip(&ranking.ranges) {
        let _ = writeln!(
            h,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\"><b>{}</b></td><td>{}</td></tr>",
            iolab_stats::noise::rank_text(*range),
            esc(&set.configs[c.config].label),
            f(c.random),
            f(c.sequential),
            f(c.total),
            match set.configs[c.config].caveat_text() {
                t if t.is_empty() => "-".to_string(),
                t => format!("⚠ {}", esc(&t)),
            }
        );
    }
    h.push_str("</table>\n");
    if !s.excluded.is_empty() {
        let _ = writeln!(
            h,
            "<p class=\"muted\">Not scored (missing in some configuration): {}</p>",
            esc(&s.excluded.join(", "))
        );
    }
    // Facts some workloads record besides speed (space per file, scrub counts).
    for t in set.fact_tables() {
        let _ = write!(h, "<h3>{}</h3>", esc(&t.title));
        table(h, "facts", &Table::facts(set, &t), "\n");
    }
    // Warnings of every configuration, linked to their runs.
    let warned: Vec<(&str, &RunRecord)> = set
        .configs
        .iter()
        .flat_map(|c| c.runs.iter().map(move |r| (c.label.as_str(), r)))
        .filter(|(_, r)| !r.warnings.is_empty())
        .collect();
    if !warned.is_empty() {
        h.push_str("<aside class=\"warnings\"><h3>Warnings in these runs</h3><ul>");
        for (label, r) in warned {
            let mut codes: Vec<&str> = r.warnings.iter().map(|w| w.code.as_str()).collect();
            codes.sort_unstable();
            codes.dedup();
            let _ = write!(
                h,
                "<li><b>{}</b>: <a href=\"#{}\">{} warning{}</a> ({})</li>",
                esc(label),
                run_anchor(r),
                r.warnings.len(),
                if r.warnings.len() == 1 { "" } else { "s" },
                esc(&codes.join(", "))
            );
        }
        h.push_str("</ul></aside>\n");
    }
    h.push_str("</section>\n");
}

/// Grouped bars: one panel per row of the results table.
pub(super) fn comparison_bars(set: &RunSet, h: &mut String) {
    h.push_str(
        "<h3>By configuration</h3><p class=\"muted\">Each test's headline, with the 95% \
         confidence interval of the mean as an error bar.</p>",
    );
    let names = set.test_names();
    let unique: Vec<&TestRecord> = names
        .iter()
        .filter_map(|n| set.aligned(n).into_iter().flatten().next())
        .collect();
    let (rows, kinds) = set::rows_and_kinds(&unique);
    h.push_str("<div class=\"grid\">");
    for row in &rows {
        let in_row: Vec<&str> = kinds
            .iter()
            .filter(|k| set::test_at(&unique, row, k).is_some())
            .map(String::as_str)
            .collect();
        let tests_of = |k: &str| -> Vec<Option<&TestRecord>> {
            set.configs
                .iter()
                .map(|c| {
                    let ts: Vec<&TestRecord> = c.tests.iter().collect();
                    set::test_at(&ts, row, k)
                })
                .collect()
        };
        let all: Vec<&TestRecord> = in_row.iter().flat_map(|k| tests_of(k)).flatten().collect();
        let configs_in_row = (0..set.configs.len())
            .filter(|&c| in_row.iter().any(|k| tests_of(k)[c].is_some()))
            .count();
        if configs_in_row < 2 {
            continue;
        }
        let m = set::primary_metric(all.iter().copied());
        let label = facts::metric_label(m, all.iter().copied());
        let clusters: Vec<String> = in_row
            .iter()
            .map(|k| {
                if k.is_empty() {
                    label.to_string()
                } else {
                    k.to_string()
                }
            })
            .collect();
        let series: Vec<BarSeries> = set
            .configs
            .iter()
            .enumerate()
            .map(|(ci_, c)| {
                let ts: Vec<&TestRecord> = c.tests.iter().collect();
                let picked: Vec<Option<&TestRecord>> =
                    in_row.iter().map(|k| set::test_at(&ts, row, k)).collect();
                BarSeries {
                    name: c.label.clone(),
                    // A configuration keeps its colour in every panel.
                    color: charts::color(ci_),
                    values: picked
                        .iter()
                        .map(|t| t.and_then(|t| m.headline(t)))
                        .collect(),
                    ci: picked
                        .iter()
                        .map(|t| {
                            t.filter(|t| t.passes.len() >= 2).map(|t| {
                                let s = m.stats(t);
                                (s.ci_low, s.ci_high)
                            })
                        })
                        .collect(),
                }
            })
            .filter(|s: &BarSeries| s.values.iter().any(Option::is_some))
            .collect();
        let svg = charts::vbars(&chart_title(row, &[]), &clusters, &series, label);
        let _ = write!(
            h,
            "<figure data-chart=\"study-bars\">{svg}<figcaption>{} by configuration, 95% CI \
             error bars</figcaption></figure>",
            esc(label)
        );
    }
    h.push_str("</div>\n");
}

/// A comparison of CrystalDiskMark runs in CrystalDiskMark's layout: one tile per test,
/// read and write side by side, each configuration's MB/s in it with its change against
/// the baseline and the verdict. `None` for other presets or more than four
/// configurations (the ratio table is their view).
pub(super) fn cdm_compare_panel(set: &RunSet) -> Option<String> {
    let cdm = set.runs().all(|r| {
        iolab_measure::workload::view_of(r) == Some(iolab_measure::workload::View::CrystalDiskMark)
    });
    if !cdm || !(2..=4).contains(&set.configs.len()) {
        return None;
    }
    let names = set.shared_test_names();
    let unique: Vec<&TestRecord> = names
        .iter()
        .filter_map(|n| set.aligned(n).into_iter().flatten().next())
        .collect();
    let (rows, kinds) = set::rows_and_kinds(&unique);
    if !kinds.iter().any(|k| k == "Read" || k == "Write") {
        return None;
    }
    let m = set::Metric::MbS;
    let value = |c: usize, name: &str| set.run_values(c, name, m).geo_mean();
    let decided: Vec<_> = (0..set.configs.len())
        .map(|i| (i != set.baseline).then(|| set.decisions(set.baseline, i)))
        .collect();
    let max = names
        .iter()
        .flat_map(|n| (0..set.configs.len()).filter_map(|c| value(c, n)))
        .fold(0.0, f64::max);
    let mut h = String::new();
    let _ = write!(
        h,
        "<h3>CrystalDiskMark view</h3><div class=\"cdm\" data-chart=\"cdm-compare\" \
         style=\"grid-template-columns:max-content repeat({},minmax(170px,1fr))\"><div></div>",
        kinds.len()
    );
    for k in &kinds {
        let _ = write!(h, "<div class=\"hd\">{} (MB/s)</div>", esc(k));
    }
    for row in &rows {
        let _ = write!(
            h,
            "<div class=\"lbl\">{}</div>",
            esc(&row.replacen(' ', "\n", 1))
        );
        for k in &kinds {
            let Some(t) = set::test_at(&unique, row, k) else {
                h.push_str("<div class=\"tile empty\">-</div>");
                continue;
            };
            let base = value(set.baseline, &t.name);
            let top = (0..set.configs.len())
                .filter_map(|c| value(c, &t.name))
                .fold(0.0, f64::max);
            let fill = if max > 0.0 { 100.0 * top / max } else { 0.0 };
            let _ = write!(
                h,
                "<div class=\"tile {}\" style=\"--fill:{fill:.1}%\">",
                kind_class(k)
            );
            for (c, conf) in set.configs.iter().enumerate() {
                let Some(v) = value(c, &t.name) else {
                    let _ = write!(
                        h,
                        "<span class=\"cmp\"><span class=\"cfg\">{}</span>-</span>",
                        esc(&conf.label)
                    );
                    continue;
                };
                let _ = write!(
                    h,
                    "<span class=\"cmp\"><span class=\"cfg\">{}</span><b>{}</b></span>",
                    esc(&conf.label),
                    num(v)
                );
                if c == set.baseline {
                    continue;
                }
                let change = base
                    .and_then(|b| set::change_pct(b, v))
                    .map_or(String::new(), |p| format!("{p:+.0}% "));
                let d = decided[c]
                    .as_ref()
                    .and_then(|d| d.get(&(t.name.clone(), m)));
                let verdict = match (set.judge(&t.name, m, set.baseline, c), d) {
                    (set::Judgement::Tested(_), Some(d)) if d.call == set::Call::Different => {
                        let star = if d.confounded_by.is_empty() { "" } else { "*" };
                        if v >= base.unwrap_or(v) {
                            format!("<span class=\"sig\">● better{star}</span>")
                        } else {
                            format!("<span class=\"worse\">● worse{star}</span>")
                        }
                    }
                    (set::Judgement::Tested(_), Some(d)) if d.call == set::Call::Same => {
                        format!("= same within ±{}", crate::compare::pct(set.margin_pct))
                    }
                    (set::Judgement::Tested(x), d) => format!(
                        "○ undecided ({}{})",
                        esc(&p_text(x.test.p)),
                        d.and_then(|d| d.runs_needed)
                            .map_or(String::new(), |n| format!("; {n} runs a side"))
                    ),
                    (set::Judgement::NoNoise { .. }, _) => "? cannot tell (1 run)".to_string(),
                    _ => String::new(),
                };
                let _ = write!(h, "<span class=\"small\">{change}{verdict}</span>");
            }
            h.push_str(&badges_of_test(set, &t.name));
            h.push_str("</div>");
        }
    }
    h.push_str("</div>\n");
    Some(h)
}

/// One mark for the warning codes any run of `set` raised about `test`: `⚠ CODE +2`,
/// every code in its title.
pub(super) fn badges_of_test(set: &RunSet, test: &str) -> String {
    let mut codes: Vec<&iolab_measure::WarningCode> = Vec::new();
    for w in set.runs().flat_map(|r| r.warnings.iter()) {
        if w.test.as_deref() == Some(test) && !codes.contains(&&w.code) {
            codes.push(&w.code);
        }
    }
    codes.sort_by_key(|c| warngroup::severity(c));
    let Some(first) = codes.first() else {
        return String::new();
    };
    let all: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
    format!(
        " <span class=\"badge\" title=\"{}\">⚠ {}{}</span>",
        esc(&all.join(", ")),
        esc(first.as_str()),
        if codes.len() > 1 {
            format!(" +{}", codes.len() - 1)
        } else {
            String::new()
        }
    )
}

/// The ratio-to-baseline table: each configuration's value, its ratio and the verdict.
pub(super) fn ratio_table(set: &RunSet, h: &mut String) {
    let base = &set.configs[set.baseline];
    let _ = writeln!(
        h,
        "<h3>Ratio to the baseline ({})</h3><p class=\"muted\">Headline values (MB/s, or \
         IOPS for tests that move no bytes) and their ratio to the baseline. \
         <span class=\"sig\">●</span> different (a configuration's tests and metrics \
         against the baseline corrected together, Holm, 95%, and not within the margin), = the \
         same within the margin, ○ undecided, ? cannot be told from run-to-run noise (a single run and no other stored run of its command): judged on \
         runs, not passes (t-test on ln of each run's value, two-sided; see \
         docs/statistics.md); bold: the best configuration for the test.</p>\
         <div class=\"wide\">\
         <table data-table=\"ratio\"><tr><th>Test</th><th>Metric</th>",
        esc(&base.label)
    );
    for c in &set.configs {
        let _ = write!(h, "<th class=\"n\">{}</th>", esc(&c.label));
    }
    h.push_str("</tr>\n");
    let decided: Vec<_> = (0..set.configs.len())
        .map(|i| (i != set.baseline).then(|| set.decisions(set.baseline, i)))
        .collect();
    for name in set.shared_test_names() {
        let tests = set.aligned(&name);
        let m = set::primary_metric(tests.iter().flatten().copied());
        // A configuration's value: the geometric mean of its runs' headlines.
        let vals: Vec<Option<f64>> = (0..tests.len())
            .map(|i| set.run_values(i, &name, m).geo_mean())
            .collect();
        let best = vals.iter().flatten().copied().reduce(|a, b| {
            if m.higher_is_better() {
                a.max(b)
            } else {
                a.min(b)
            }
        });
        let _ = write!(h, "<tr><td>{}</td><td>{}</td>", esc(&name), esc(m.label()));
        for i in 0..tests.len() {
            let Some(v) = vals[i] else {
                h.push_str("<td class=\"n\">-</td>");
                continue;
            };
            let is_best = Some(v) == best;
            let mut cell = num(v);
            if let Some(bv) = vals[set.baseline].filter(|x| *x > 0.0) {
                let _ = write!(cell, " <span class=\"ci\">{:.2}×</span>", v / bv);
                if i != set.baseline {
                    match set.judge(&name, m, set.baseline, i) {
                        set::Judgement::Tested(x) => {
                            let d = decided[i].as_ref().and_then(|d| d.get(&(name.clone(), m)));
                            let (class, mark, word) = match d.map(|d| d.call) {
                                Some(set::Call::Different) => ("sig", "●", "different"),
                                Some(set::Call::Same) => ("ci", "=", "same within the margin"),
                                _ => ("ci", "○", "undecided"),
                            };
                            let _ = write!(
                                cell,
                                " <span class=\"{class}\" title=\"{}\">{mark}</span>",
                                esc(&format!(
                                    "{word}, {}; {} vs {} run(s){}",
                                    p_text(x.test.p),
                                    x.test.n_b,
                                    x.test.n_a,
                                    if x.test.noise_runs > 0 {
                                        format!(
                                            "; noise from {} other runs of the command",
                                            x.test.noise_runs
                                        )
                                    } else {
                                        String::new()
                                    }
                                ))
                            );
                        }
                        set::Judgement::NoNoise { .. } => {
                            cell.push_str(
                                " <span class=\"ci\" title=\"cannot be told from run-to-run \
                                 noise: a single run and no other stored run of its \
                                 command\">?</span>",
                            );
                        }
                        _ => {}
                    }
                }
            }
            let style = if is_best {
                " style=\"font-weight:700\""
            } else {
                ""
            };
            let _ = write!(h, "<td class=\"n\"{style}>{cell}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
}
