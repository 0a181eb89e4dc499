//! JSON output: one self-describing document per run (`"schema": "iolab.run/1"`).
//!
//! The document is built by hand rather than derived from the model so that its keys stay
//! stable when the model changes, and so that raw histograms (large, only useful to iolab
//! itself) stay out of it. Every key is described in `docs/json.md`.

use iolab_measure::{
    CpuUsage, DirResult, IoErrorRecord, LatSummary, MetricSummary, PassRecord, RunRecord,
    SyncStats, TestRecord, TestSummary, Warning,
};
use iolab_spec::{IoDir, JobSpec, RunSettings, SyncMode};
use serde_json::{json, Value};

/// Identifies the layout of [`run_document`]; bumped when a key changes meaning or goes.
pub const SCHEMA: &str = "iolab.run/1";

/// The JSON document of one run. Non-finite numbers become `null`.
pub fn run_document(run: &RunRecord) -> Value {
    json!({
        "schema": SCHEMA,
        "iolab_version": run.iolab_version,
        "run_id": run.id,
        "uuid": run.uuid,
        "preset": run.preset,
        "workload": run.workload,
        "target": run.target.path,
        "target_kind": run.target.kind,
        "io_path": run.target.io_path,
        "fs_type": run.target.fs_type,
        "size_bytes": run.target.size,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "complete": run.complete,
        "label": run.label,
        "study": run.study,
        "config_label": run.config_label,
        "study_meta": run.study_meta,
        "engine": run.engine.map(|e| e.as_str()),
        "settings": settings(run),
        "command_line": run.command_line,
        "notes": run.notes,
        "warnings": run.warnings.iter().map(warning).collect::<Vec<_>>(),
        "env": run.env,
        "tests": run.tests.iter().map(|t| test(t, &run.settings)).collect::<Vec<_>>(),
    })
}

/// [`run_document`] pretty-printed, without a trailing newline (print it with `println!`).
pub fn to_json_string(run: &RunRecord) -> String {
    serde_json::to_string_pretty(&run_document(run)).expect("a serde_json::Value always serialises")
}

fn settings(run: &RunRecord) -> Value {
    let s = &run.settings;
    // Tests on engines of their own: direct is null unless they all agree.
    let direct = match run.tests.iter().any(|t| t.job.io.is_some()) {
        false => Some(s.direct),
        true => {
            let d: Vec<bool> = run.tests.iter().map(|t| s.for_job(&t.job).direct).collect();
            d.first().copied().filter(|f| d.iter().all(|x| x == f))
        }
    };
    let mut v = json!({
        "size_bytes": s.size,
        "duration_s": s.duration.as_secs_f64(),
        "runs": s.runs,
        "warmup_passes": s.warmup_passes,
        "warmup_duration_s": s.warmup_duration.as_secs_f64(),
        "ramp_s": s.ramp.as_secs_f64(),
        "engine": s.engine.map(|e| e.as_str()),
        "direct": direct,
        "data": s.data,
    });
    // Every engine's options (io_uring's fixedbufs, registerfiles...), each under its key:
    // as the run recorded it, else null.
    let m = v.as_object_mut().expect("an object");
    for (_, o) in iolab_spec::engopt::catalogue() {
        m.insert(o.key.to_string(), Value::Null);
    }
    for (k, val) in s.engine_opts.iter() {
        m.insert(k.to_string(), json!(val));
    }
    v
}

fn warning(w: &Warning) -> Value {
    json!({
        "code": w.code,
        "message": w.message,
        "fix": w.fix,
        "test": w.test,
    })
}

fn test(t: &TestRecord, run: &RunSettings) -> Value {
    let j: &JobSpec = &t.job;
    // The engine, its options and direct this test ran with (its own, or the run's).
    let own = run.for_job(j);
    let engine_options: serde_json::Map<String, Value> = own
        .engine
        .into_iter()
        .flat_map(iolab_spec::engopt::of)
        .filter_map(|o| Some((o.key.to_string(), json!(own.engine_opts.get(o.key)?))))
        .collect();
    let mut v = json!({
        "engine": own.engine.map(|e| e.as_str()),
        "direct": own.direct,
        "engine_options": engine_options,
        "name": t.name,
        "group": t.group,
        "rw": j.rw_name(),
        "bs": j.bs,
        "fsync_every": j.fsync_every,
        "sync_mode": match j.sync_mode {
            SyncMode::Fsync => "fsync",
            SyncMode::Fdatasync => "fdatasync",
        },
        "end_fsync": j.end_fsync,
        "io_limit_bytes": j.io_limit,
        "passes": t.passes.iter().map(pass).collect::<Vec<_>>(),
        "summary": summary(&t.summary),
        "extra": t.extra,
    });
    // The general job options declared once (`iodepth`, `numjobs`, `rwmixread`: null
    // where it does not apply).
    let m = v.as_object_mut().expect("an object");
    for o in iolab_spec::JOB_OPTIONS {
        m.insert(o.name.to_string(), json!((o.get)(j)));
    }
    v
}

fn lat(l: &LatSummary) -> Value {
    json!({
        "mean": l.mean,
        "min": l.min,
        "p50": l.p50,
        "p90": l.p90,
        "p99": l.p99,
        "p999": l.p999,
        "p9999": l.p9999,
        "max": l.max,
    })
}

fn dir(d: &DirResult) -> Value {
    json!({
        "bytes": d.bytes,
        "ios": d.ios,
        "mb_s": d.mb_s,
        "iops": d.iops,
        "lat_us": lat(&d.lat_us),
    })
}

fn sync(s: &SyncStats) -> Value {
    json!({
        "count": s.count,
        "lat_us": lat(&s.lat_us),
    })
}

fn cpu(c: &CpuUsage) -> Value {
    json!({
        "usr_pct": c.usr_pct,
        "sys_pct": c.sys_pct,
        "system_usr_pct": c.system_usr_pct,
        "system_sys_pct": c.system_sys_pct,
        "iowait_pct": c.iowait_pct,
        "cpu_us_per_io": c.cpu_us_per_io,
    })
}

fn error(e: &IoErrorRecord) -> Value {
    json!({
        "errno": e.errno,
        "message": e.message,
        "dir": match e.dir {
            IoDir::Read => "read",
            IoDir::Write => "write",
        },
        "offset": e.offset,
        "len": e.len,
    })
}

fn pass(p: &PassRecord) -> Value {
    let mut v = json!({
        "index": p.index,
        "bytes": p.bytes,
        "ios": p.ios,
        "seconds": p.seconds,
        "mb_s": p.mb_s,
        "iops": p.iops,
        "lat_us": lat(&p.lat_us),
        "read": p.read.as_ref().map(dir),
        "write": p.write.as_ref().map(dir),
        "trim": p.trim.as_ref().map(dir),
        "sync": p.sync.as_ref().map(sync),
        "cpu": cpu(&p.cpu),
        "timeseries": {
            "interval_ms": p.timeseries.interval_ms,
            "bytes": p.timeseries.bytes,
            "mb_s": p.timeseries.mb_s(p.seconds),
        },
        "errors": p.errors.iter().map(error).collect::<Vec<_>>(),
        "context": serde_json::to_value(&p.context).unwrap_or(Value::Null),
    });
    let ts = &p.timeseries;
    for (key, ms) in [
        ("cpu_wait_ms", &ts.cpu_wait_ms),
        ("steal_ms", &ts.steal_ms),
        ("others_cpu_ms", &ts.others_cpu_ms),
        ("idle_cpu_ms", &ts.idle_cpu_ms),
    ] {
        if !ms.is_empty() {
            v["timeseries"][key] = json!(ms);
        }
    }
    v
}

fn metric(m: &MetricSummary) -> Value {
    json!({
        "n": m.n,
        "median": m.median,
        "mean": m.mean,
        "min": m.min,
        "max": m.max,
        "stddev": m.stddev,
        "cv": m.cv,
        "ci_low": m.ci_low,
        "ci_high": m.ci_high,
        "ci_pct": iolab_stats::ci_pct(m),
    })
}

fn summary(s: &TestSummary) -> Value {
    json!({
        "passes": s.passes,
        "mb_s": s.mb_s,
        "iops": s.iops,
        "lat_mean_us": s.lat_mean_us,
        "lat_p99_us": s.lat_p99_us,
        "score": s.score_text(),
        "ci_method": s.ci_method,
        "converged": s.converged,
        "stats": {
            "mb_s": metric(&s.stats_mb_s),
            "iops": metric(&s.stats_iops),
            "lat_mean_us": metric(&s.stats_lat_mean_us),
            "lat_p99_us": metric(&s.stats_lat_p99_us),
        },
    })
}

/// Identifies the layout of [`study_document`].
pub const STUDY_SCHEMA: &str = "iolab.study/2";

fn finite(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

/// A judgement on runs for JSON: `significant` (`null` when it cannot be told), `p`, the
/// method, runs per side and the noise's origin, or the reason there is no test.
pub fn judgement_json(j: &crate::set::Judgement) -> Value {
    use crate::set::Judgement;
    match j {
        Judgement::Tested(t) => json!({
            "significant": t.test.significant(),
            "p": finite(Some(t.test.p)),
            "t": finite(Some(t.test.t)),
            "df": finite(Some(t.test.df)),
            "ratio": finite(Some(t.test.ratio)),
            "ratio_ci95": [finite(Some(t.test.ratio_low)), finite(Some(t.test.ratio_high))],
            "method": t.test.method.key(),
            "runs_a": t.test.n_a,
            "runs_b": t.test.n_b,
            "noise_runs": t.test.noise_runs,
            "noise_run_ids": t.noise_ids,
        }),
        Judgement::NoNoise { runs_a, runs_b, .. } => json!({
            "significant": Value::Null,
            "runs_a": runs_a,
            "runs_b": runs_b,
            "reason": "a side has a single run (or repeat) and no other stored run of its \
                       command: the difference cannot be told from run-to-run noise",
        }),
        Judgement::NotPositive => json!({
            "significant": Value::Null,
            "reason": "a run's value is 0 or not finite: no ratio to test",
        }),
        Judgement::Missing => json!({
            "significant": Value::Null,
            "reason": "a side has no run with the test",
        }),
    }
}

/// [`judgement_json`] with the line's three-way verdict: `verdict` (`different`, `same`,
/// `undecided`), `direction`, `ratio`, `ratio_ci95`, `runs_needed`, `confounded_by`.
pub fn decided_json(j: &crate::set::Judgement, d: Option<&crate::set::Decision>) -> Value {
    let mut v = judgement_json(j);
    if let (Some(d), Some(o)) = (d, v.as_object_mut()) {
        let t = j.tested();
        o.insert("verdict".into(), json!(d.call.key()));
        o.insert(
            "direction".into(),
            match (d.call, d.higher) {
                (crate::set::Call::Different, true) => json!("higher"),
                (crate::set::Call::Different, false) => json!("lower"),
                _ => Value::Null,
            },
        );
        o.insert("ratio".into(), finite(t.map(|t| t.test.ratio)));
        o.insert(
            "ratio_ci95".into(),
            t.map_or(Value::Null, |t| {
                json!([
                    finite(Some(t.test.ratio_low)),
                    finite(Some(t.test.ratio_high))
                ])
            }),
        );
        o.insert("runs_needed".into(), json!(d.runs_needed));
        o.insert(
            "confounded_by".into(),
            d.confounded_by
                .iter()
                .map(|x| json!({ "code": x.code, "fact": x.fact }))
                .collect(),
        );
        // Significant now means *different*: kept by the family's correction.
        if t.is_some() {
            o.insert(
                "significant".into(),
                json!(d.call == crate::set::Call::Different),
            );
        }
    }
    v
}

/// The JSON document of several runs shown together (`"schema": "iolab.study/1"`): the
/// configurations, each test's values per configuration with its ratio to the baseline
/// and to the best configuration and its significance against the baseline (judged on
/// runs), the ranked score with rank ranges, the warnings, and every run's own document.
/// Described in `docs/reports.md`.
pub fn study_document(set: &crate::set::RunSet) -> Value {
    use crate::set::{self, Metric};
    let ranking = set.ranking();
    let score = &ranking.score;
    let configs: Vec<Value> = set
        .configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "index": i,
                "label": c.label,
                "baseline": i == set.baseline,
                "run_ids": c.run_ids(),
            })
        })
        .collect();
    let decided: Vec<_> = (0..set.configs.len())
        .map(|i| (i != set.baseline).then(|| set.decisions(set.baseline, i)))
        .collect();
    let tests: Vec<Value> = set
        .test_names()
        .iter()
        .map(|name| {
            let aligned = set.aligned(name);
            let first = aligned.iter().flatten().next().copied();
            let m = set::primary_metric(aligned.iter().flatten().copied());
            let base = aligned[set.baseline];
            // A configuration's value: the geometric mean of its runs' headlines.
            let value: Vec<Option<f64>> = (0..aligned.len())
                .map(|i| set.run_values(i, name, m).geo_mean())
                .collect();
            let best = value
                .iter()
                .flatten()
                .copied()
                .filter(|v| *v > 0.0)
                .reduce(|a, b| {
                    if m.higher_is_better() {
                        a.max(b)
                    } else {
                        a.min(b)
                    }
                });
            let values: Vec<Value> = aligned
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let Some(t) = t else {
                        return json!({ "config": i, "present": false });
                    };
                    let metrics: serde_json::Map<String, Value> = Metric::ALL
                        .iter()
                        .map(|mm| {
                            let s = mm.stats(t);
                            (
                                mm.key().to_string(),
                                json!({
                                    "headline": finite(mm.headline(t)),
                                    "median": finite(mm.median(t)),
                                    "mean": s.mean,
                                    "ci_low": s.ci_low,
                                    "ci_high": s.ci_high,
                                    "ci_pct": iolab_stats::ci_pct(&s),
                                }),
                            )
                        })
                        .collect();
                    let v = value[i];
                    let ratio_baseline = value[set.baseline]
                        .filter(|b| *b > 0.0)
                        .zip(v)
                        .map(|(b, v)| v / b);
                    let ratio_best = best.zip(v).map(|(b, v)| {
                        if m.higher_is_better() {
                            v / b
                        } else if v > 0.0 {
                            b / v
                        } else {
                            f64::NAN
                        }
                    });
                    let runs = set.run_values(i, name, m);
                    let vs = (i != set.baseline && base.is_some())
                        .then(|| set.judge(name, m, set.baseline, i));
                    json!({
                        "config": i,
                        "present": true,
                        "passes": t.passes.len(),
                        "runs": runs.runs.len(),
                        "run_values": runs.values(),
                        "value": finite(v),
                        "metrics": metrics,
                        "ratio_to_baseline": finite(ratio_baseline),
                        "ratio_to_best": finite(ratio_best),
                        "vs_baseline": vs.map(|j| {
                            let d = decided[i]
                                .as_ref()
                                .and_then(|d| d.get(&(name.clone(), m)));
                            decided_json(&j, d)
                        }),
                    })
                })
                .collect();
            json!({
                "name": name,
                "group": first.map(|t| t.group.clone()),
                "rw": first.map(|t| t.job.rw_name()),
                "access": first.map(|t| set::access(t).as_str()),
                "metric": m.key(),
                "values": values,
            })
        })
        .collect();
    let warnings: Vec<Value> = set
        .configs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.runs.iter().flat_map(move |r| {
                r.warnings.iter().map(move |w| {
                    json!({
                        "config": i,
                        "run_id": r.id,
                        "code": w.code,
                        "message": w.message,
                        "fix": w.fix,
                        "test": w.test,
                    })
                })
            })
        })
        .collect();
    json!({
        "schema": STUDY_SCHEMA,
        "iolab_version": set.runs().next().map(|r| r.iolab_version.clone()),
        "study": set.study,
        "baseline": set.baseline,
        "configurations": configs,
        "significance": iolab_stats::noise::METHOD,
        "tests": tests,
        "score": {
            "method": "geometric mean of each test's ratio to the best configuration, over \
                       the random tests, the sequential tests and all tests, divided by the \
                       best configuration's mean (best = 1)",
            "ranks": crate::set::RANK_METHOD,
            "ranks_basis": ranking.basis(),
            "ranked": score.ranked.iter().zip(&ranking.ranges).map(|(c, r)| json!({
                "rank": c.rank,
                "rank_low": r.0,
                "rank_high": r.1,
                "rank_text": iolab_stats::noise::rank_text(*r),
                "config": c.config,
                "label": set.configs[c.config].label,
                "random": finite(c.random),
                "sequential": finite(c.sequential),
                "total": finite(c.total),
                "repeats": ranking.repeats[c.config],
                "noise_repeats": ranking.noise_repeats[c.config],
            })).collect::<Vec<_>>(),
            "pairs": ranking.pairs.iter().map(|(a, b, j)| json!({
                "a": a,
                "b": b,
                "test": judgement_json(j),
            })).collect::<Vec<_>>(),
            "adjacent": ranking.adjacent(set.margin_pct).iter().map(|p| json!({
                "better": p.better,
                "worse": p.worse,
                "verdict": p.decision.call.key(),
                "runs_needed": p.decision.runs_needed,
            })).collect::<Vec<_>>(),
            "margin_pct": set.margin_pct,
            "excluded": score.excluded,
        },
        "warnings": warnings,
        "runs": set.runs().map(run_document).collect::<Vec<_>>(),
    })
}

/// JSON: the run or study document (`iolab report --json`), the comparison document
/// (`compare --json`) and the history document (`history --json`), pretty-printed.
pub struct Json;

static ABOUT: super::About = super::About {
    name: "json",
    title: "JSON",
    extension: "json",
    runs: Some(
        "Write JSON to FILE (\"-\" or no FILE: standard output): the run document for one run, \
         the study document (iolab.study/2) for several or a study",
    ),
    comparison: Some(
        "Print the comparison document (iolab.comparison/2) instead of the table, or write it \
         to FILE",
    ),
    history: Some(
        "Print the history document (iolab.history/2) instead of the tables, or write it to \
         FILE",
    ),
};

impl super::Format for Json {
    fn about(&self) -> &'static super::About {
        &ABOUT
    }
    fn render(&self, view: &super::View<'_>) -> Option<String> {
        let doc = match view {
            super::View::Runs(set) => {
                let runs: Vec<&RunRecord> = set.runs().collect();
                if runs.len() == 1 && set.study.is_none() {
                    run_document(runs[0])
                } else {
                    study_document(set)
                }
            }
            super::View::Comparison {
                comparison,
                iolab_version,
            } => crate::compare::document(comparison, iolab_version),
            super::View::History {
                runs,
                noise,
                iolab_version,
                margin_pct,
            } => crate::history::document_at(runs, noise, iolab_version, *margin_pct),
        };
        let mut text = serde_json::to_string_pretty(&doc).expect("a Value serialises");
        text.push('\n');
        Some(text)
    }
}
