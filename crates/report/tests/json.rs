//! The JSON document: every key of schema iolab.run/1, with the record's values.

mod common;

use common::*;
use iolab_measure::{DirResult, LatSummary, MetricSummary, RunRecord};
use iolab_report::{render_run, run_document, to_json_string, SCHEMA};
use serde_json::{json, Value};

const RUN_KEYS: &[&str] = &[
    "schema",
    "iolab_version",
    "run_id",
    "uuid",
    "preset",
    "workload",
    "target",
    "target_kind",
    "io_path",
    "fs_type",
    "size_bytes",
    "started_at",
    "finished_at",
    "complete",
    "label",
    "study",
    "config_label",
    "study_meta",
    "engine",
    "settings",
    "command_line",
    "notes",
    "warnings",
    "env",
    "tests",
];
const TEST_KEYS: &[&str] = &[
    "name",
    "group",
    "rw",
    "bs",
    "iodepth",
    "numjobs",
    "rwmixread",
    "fsync_every",
    "sync_mode",
    "end_fsync",
    "io_limit_bytes",
    "passes",
    "summary",
    "extra",
    "engine",
    "direct",
    "engine_options",
];
const PASS_KEYS: &[&str] = &[
    "index",
    "bytes",
    "ios",
    "seconds",
    "mb_s",
    "iops",
    "lat_us",
    "read",
    "write",
    "trim",
    "sync",
    "cpu",
    "timeseries",
    "errors",
    "context",
];

/// Parses the pretty string back, so every check also covers serialisation.
fn parsed(run: &RunRecord) -> Value {
    let text = to_json_string(run);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v, run_document(run));
    v
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

fn assert_keys(v: &Value, want: &[&str], what: &str) {
    let mut want = want.to_vec();
    want.sort_unstable();
    assert_eq!(keys(v), want, "{what}");
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn assert_lat(v: &Value, l: &LatSummary) {
    assert_keys(
        v,
        &["mean", "min", "p50", "p90", "p99", "p999", "p9999", "max"],
        "lat_us",
    );
    let want = [l.mean, l.min, l.p50, l.p90, l.p99, l.p999, l.p9999, l.max];
    let got = ["mean", "min", "p50", "p90", "p99", "p999", "p9999", "max"].map(|k| f(&v[k]));
    assert_eq!(got, want);
}

fn assert_dir(v: &Value, d: Option<&DirResult>) {
    match d {
        None => assert!(v.is_null(), "{v}"),
        Some(d) => {
            assert_keys(v, &["bytes", "ios", "mb_s", "iops", "lat_us"], "dir");
            assert_eq!(v["bytes"], d.bytes);
            assert_eq!(v["ios"], d.ios);
            assert_eq!(f(&v["mb_s"]), d.mb_s);
            assert_eq!(f(&v["iops"]), d.iops);
            assert_lat(&v["lat_us"], &d.lat_us);
        }
    }
}

fn assert_metric(v: &Value, m: &MetricSummary) {
    assert_keys(
        v,
        &[
            "n", "median", "mean", "min", "max", "stddev", "cv", "ci_low", "ci_high", "ci_pct",
        ],
        "metric",
    );
    assert_eq!(v["n"], m.n);
    let got = [
        "median", "mean", "min", "max", "stddev", "cv", "ci_low", "ci_high",
    ]
    .map(|k| f(&v[k]));
    assert_eq!(
        got,
        [m.median, m.mean, m.min, m.max, m.stddev, m.cv, m.ci_low, m.ci_high]
    );
    assert_eq!(f(&v["ci_pct"]), iolab_stats::ci_pct(m));
}

/// Checks the whole document against the record it came from.
fn assert_document(run: &RunRecord) {
    let v = parsed(run);
    assert_keys(&v, RUN_KEYS, "run");
    assert_eq!(v["schema"], "iolab.run/1");
    assert_eq!(SCHEMA, "iolab.run/1");
    assert_eq!(v["iolab_version"], run.iolab_version);
    assert_eq!(v["run_id"], json!(run.id));
    assert_eq!(v["uuid"], run.uuid);
    assert_eq!(v["preset"], run.preset);
    assert_eq!(v["workload"], run.workload);
    assert_eq!(v["target"], run.target.path);
    assert_eq!(v["target_kind"], run.target.kind.as_str());
    assert_eq!(v["io_path"], run.target.io_path);
    assert_eq!(v["fs_type"], run.target.fs_type);
    assert_eq!(v["size_bytes"], run.target.size);
    assert_eq!(v["started_at"], run.started_at);
    assert_eq!(v["finished_at"], json!(run.finished_at));
    assert_eq!(v["complete"], run.complete);
    assert_eq!(v["label"], json!(run.label));
    assert_eq!(v["engine"], run.engine_text());
    assert_eq!(v["command_line"], json!(run.command_line));
    assert_eq!(v["notes"], json!(run.notes));
    assert_eq!(v["env"], run.env);

    let s = &run.settings;
    let vs = &v["settings"];
    assert_keys(
        vs,
        &[
            "size_bytes",
            "duration_s",
            "runs",
            "warmup_passes",
            "warmup_duration_s",
            "ramp_s",
            "engine",
            "direct",
            "data",
            "fixedbufs",
            "registerfiles",
            // e4defrag's, which a run on another engine does not record: null.
            "inplace",
        ],
        "settings",
    );
    assert_eq!(vs["size_bytes"], s.size);
    assert_eq!(f(&vs["duration_s"]), s.duration.as_secs_f64());
    assert_eq!(vs["runs"], s.runs);
    assert_eq!(vs["warmup_passes"], s.warmup_passes);
    assert_eq!(f(&vs["warmup_duration_s"]), s.warmup_duration.as_secs_f64());
    assert_eq!(vs["engine"], s.engine.unwrap().as_str());
    assert_eq!(vs["direct"], s.direct);
    assert_eq!(vs["fixedbufs"], s.engine_opts.flag("fixedbufs"));
    assert_eq!(vs["registerfiles"], s.engine_opts.flag("registerfiles"));
    assert_eq!(vs["inplace"], Value::Null);

    let ws = v["warnings"].as_array().unwrap();
    assert_eq!(ws.len(), run.warnings.len());
    for (vw, w) in ws.iter().zip(&run.warnings) {
        assert_keys(vw, &["code", "message", "fix", "test"], "warning");
        assert_eq!(vw["code"], w.code.as_str());
        assert_eq!(vw["message"], w.message);
        assert_eq!(vw["fix"], w.fix);
        assert_eq!(vw["test"], json!(w.test));
    }

    let ts = v["tests"].as_array().unwrap();
    assert_eq!(ts.len(), run.tests.len());
    for (vt, t) in ts.iter().zip(&run.tests) {
        assert_keys(vt, TEST_KEYS, "test");
        assert_eq!(vt["name"], t.name);
        assert_eq!(vt["group"], t.group);
        assert_eq!(vt["rw"], t.job.rw.as_str());
        assert_eq!(vt["bs"], t.job.bs);
        assert_eq!(vt["iodepth"], t.job.iodepth);
        assert_eq!(vt["numjobs"], t.job.numjobs);
        if t.job.rw.is_mixed() {
            assert_eq!(vt["rwmixread"], t.job.rwmixread);
        } else {
            assert!(vt["rwmixread"].is_null());
        }
        assert_eq!(vt["fsync_every"], t.job.fsync_every);
        assert_eq!(vt["end_fsync"], t.job.end_fsync);
        assert_eq!(vt["io_limit_bytes"], json!(t.job.io_limit));
        assert_eq!(vt["extra"], t.extra);

        let ps = vt["passes"].as_array().unwrap();
        assert_eq!(ps.len(), t.passes.len());
        for (vp, p) in ps.iter().zip(&t.passes) {
            assert_keys(vp, PASS_KEYS, "pass");
            assert_eq!(vp["index"], p.index);
            assert_eq!(vp["bytes"], p.bytes);
            assert_eq!(vp["ios"], p.ios);
            assert_eq!(f(&vp["seconds"]), p.seconds);
            assert_eq!(f(&vp["mb_s"]), p.mb_s);
            assert_eq!(f(&vp["iops"]), p.iops);
            assert_lat(&vp["lat_us"], &p.lat_us);
            assert_dir(&vp["read"], p.read.as_ref());
            assert_dir(&vp["write"], p.write.as_ref());
            match &p.sync {
                None => assert!(vp["sync"].is_null()),
                Some(sy) => {
                    assert_keys(&vp["sync"], &["count", "lat_us"], "sync");
                    assert_eq!(vp["sync"]["count"], sy.count);
                    assert_lat(&vp["sync"]["lat_us"], &sy.lat_us);
                }
            }
            let c = &vp["cpu"];
            assert_keys(
                c,
                &[
                    "usr_pct",
                    "sys_pct",
                    "system_usr_pct",
                    "system_sys_pct",
                    "iowait_pct",
                    "cpu_us_per_io",
                ],
                "cpu",
            );
            assert_eq!(f(&c["usr_pct"]), p.cpu.usr_pct);
            assert_eq!(f(&c["sys_pct"]), p.cpu.sys_pct);
            assert_eq!(f(&c["system_usr_pct"]), p.cpu.system_usr_pct);
            assert_eq!(f(&c["system_sys_pct"]), p.cpu.system_sys_pct);
            assert_eq!(f(&c["iowait_pct"]), p.cpu.iowait_pct);
            assert_eq!(f(&c["cpu_us_per_io"]), p.cpu.cpu_us_per_io);
            let tsr = &vp["timeseries"];
            assert_keys(tsr, &["interval_ms", "bytes", "mb_s"], "timeseries");
            assert_eq!(tsr["interval_ms"], p.timeseries.interval_ms);
            assert_eq!(tsr["bytes"], json!(p.timeseries.bytes));
            let mb: Vec<f64> = tsr["mb_s"].as_array().unwrap().iter().map(f).collect();
            assert_eq!(mb, p.timeseries.mb_s(p.seconds));
            let es = vp["errors"].as_array().unwrap();
            assert_eq!(es.len(), p.errors.len());
            for (ve, e) in es.iter().zip(&p.errors) {
                assert_keys(ve, &["errno", "message", "dir", "offset", "len"], "error");
                assert_eq!(ve["errno"], e.errno);
                assert_eq!(ve["message"], e.message);
                assert_eq!(ve["offset"], e.offset);
                assert_eq!(ve["len"], e.len);
            }
        }

        let su = &vt["summary"];
        let s = &t.summary;
        assert_keys(
            su,
            &[
                "passes",
                "mb_s",
                "iops",
                "lat_mean_us",
                "lat_p99_us",
                "score",
                "ci_method",
                "converged",
                "stats",
            ],
            "summary",
        );
        assert_eq!(su["passes"], s.passes);
        assert_eq!(f(&su["mb_s"]), s.mb_s);
        assert_eq!(f(&su["iops"]), s.iops);
        assert_eq!(f(&su["lat_mean_us"]), s.lat_mean_us);
        assert_eq!(f(&su["lat_p99_us"]), s.lat_p99_us);
        assert_eq!(su["score"], s.score_text());
        assert_eq!(su["ci_method"], s.ci_method);
        assert_keys(
            &su["stats"],
            &["mb_s", "iops", "lat_mean_us", "lat_p99_us"],
            "stats",
        );
        assert_metric(&su["stats"]["mb_s"], &s.stats_mb_s);
        assert_metric(&su["stats"]["iops"], &s.stats_iops);
        assert_metric(&su["stats"]["lat_mean_us"], &s.stats_lat_mean_us);
        assert_metric(&su["stats"]["lat_p99_us"], &s.stats_lat_p99_us);
    }
}

#[test]
fn cdm_document_has_every_key_and_value() {
    let run = cdm_run();
    assert_document(&run);
    let v = run_document(&run);
    // Spot checks with literal values.
    assert_eq!(v["run_id"], 42);
    assert_eq!(v["size_bytes"], 1u64 << 30);
    assert_eq!(v["settings"]["duration_s"], 5.0);
    assert_eq!(v["settings"]["data"], "random");
    let t0 = &v["tests"][0];
    assert_eq!(t0["name"], "SEQ1M Q8T1 Read");
    assert_eq!(t0["rw"], "read");
    assert_eq!(t0["bs"], 1 << 20);
    assert_eq!(t0["iodepth"], 8);
    assert_eq!(t0["passes"][0]["ios"], 3000);
    assert_eq!(t0["passes"][0]["mb_s"], 3145.728);
    // Latencies spread evenly over 2000..3000 µs (integer ns steps, so just under 2500).
    assert!((f(&t0["passes"][0]["lat_us"]["mean"]) - 2500.0).abs() < 0.01);
    assert!(t0["passes"][0]["write"].is_null());
    assert_eq!(t0["passes"][0]["timeseries"]["interval_ms"], 500);
    assert_eq!(
        t0["passes"][0]["timeseries"]["mb_s"],
        json!([3145.728, 3145.728])
    );
    assert_eq!(t0["summary"]["mb_s"], 3145.728);
    assert_eq!(t0["summary"]["iops"], 3000.0);
    assert_eq!(t0["summary"]["score"], "median");
    assert_eq!(t0["summary"]["stats"]["iops"]["n"], 3);
    assert_eq!(t0["summary"]["stats"]["iops"]["stddev"], 9.0);
    let mix = v["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "RND4K Q32T1 Mix")
        .unwrap();
    assert_eq!(mix["rw"], "randrw");
    assert_eq!(mix["rwmixread"], 70);
    assert_eq!(mix["passes"][0]["read"]["ios"], 70_000);
    assert_eq!(mix["passes"][0]["write"]["ios"], 30_000);
    assert_eq!(mix["passes"][0]["ios"], 100_000);
    assert_eq!(v["warnings"][0]["code"], "CACHE_SMALL_REGION");
    assert_eq!(v["warnings"][0]["test"], "SEQ1M Q8T1 Write");
    assert_eq!(v["env"]["kernel"], "6.8.0");
}

#[test]
fn atto_and_custom_documents() {
    let atto = atto_run();
    assert_document(&atto);
    let v = run_document(&atto);
    assert_eq!(v["settings"]["data"], "zeros");
    assert_eq!(v["tests"].as_array().unwrap().len(), 10);
    assert_eq!(v["tests"][0]["name"], "512 Write");
    assert_eq!(v["tests"][0]["io_limit_bytes"], 256 << 20);
    assert_eq!(v["tests"][0]["passes"][0]["mb_s"], 51.2);

    let custom = custom_run();
    assert_document(&custom);
    let v = run_document(&custom);
    assert!(v["run_id"].is_null());
    assert!(v["finished_at"].is_null());
    assert!(v["label"].is_null());
    assert_eq!(v["complete"], false);
    assert_eq!(v["engine"], "psync");
    assert_eq!(v["settings"]["engine"], "io_uring");
    assert_eq!(v["settings"]["direct"], false);
    let t = &v["tests"][0];
    assert_eq!(t["fsync_every"], 16);
    assert_eq!(t["sync_mode"], "fsync");
    assert_eq!(t["summary"]["score"], "best");
    let p = &t["passes"][1];
    assert_eq!(p["sync"]["count"], 3);
    assert_eq!(p["sync"]["lat_us"]["mean"], 2000.0);
    assert_eq!(
        p["errors"],
        json!([{
            "errno": 5,
            "message": "Input/output error",
            "dir": "write",
            "offset": 1048576,
            "len": 4096
        }])
    );
    assert_eq!(v["warnings"][0]["test"], Value::Null);
    assert_eq!(v["tests"][1]["passes"].as_array().unwrap().len(), 1);
    // One pass: the interval is the value itself and its relative width 0.
    assert_eq!(v["tests"][1]["summary"]["stats"]["mb_s"]["ci_pct"], 0.0);
}

fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.iter().any(|(k, x)| k == key || has_key(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        _ => false,
    }
}

#[test]
fn no_histograms_in_the_document() {
    let run = cdm_run();
    let text = to_json_string(&run);
    assert!(!has_key(&run_document(&run), "histogram"));
    let encoded = run.tests[0].passes[0]
        .read
        .as_ref()
        .unwrap()
        .histogram
        .encode();
    let b64 = encoded.split_once(':').unwrap().1;
    assert!(!text.contains(b64));
    // The record itself does carry them: the document really leaves them out.
    assert!(serde_json::to_string(&run).unwrap().contains(b64));
}

#[test]
fn non_finite_numbers_become_null_and_format_renders() {
    let mut run = custom_run();
    run.tests[0].passes[0].mb_s = f64::NAN;
    run.tests[0].summary.stats_mb_s.cv = f64::INFINITY;
    let v = parsed(&run);
    assert!(v["tests"][0]["passes"][0]["mb_s"].is_null());
    assert!(v["tests"][0]["summary"]["stats"]["mb_s"]["cv"].is_null());

    let text = to_json_string(&run);
    assert!(text.ends_with('}'));
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    assert!(render_run(&run).contains("incomplete (interrupted or failed)"));
}

#[test]
fn the_study_document_says_what_ranks_and_verdicts_rest_on() {
    use iolab_report::json::study_document;
    use iolab_report::set::RunSet;
    // Three repeats a configuration, ±1% between runs (see markdown.rs for the numbers).
    let set = RunSet::study("strip size", common::study_runs_repeated());
    let doc = study_document(&set);
    assert_eq!(doc["schema"], "iolab.study/2");
    let ranked = doc["score"]["ranked"].as_array().unwrap();
    let ranks: Vec<(&str, &str, u64)> = ranked
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap(),
                r["rank_text"].as_str().unwrap(),
                r["repeats"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ranks,
        [("32KB", "1", 3), ("64KB", "2-3", 3), ("16KB", "2-3", 3)]
    );
    assert_eq!(
        (
            ranked[1]["rank_low"].as_u64(),
            ranked[1]["rank_high"].as_u64()
        ),
        (Some(2), Some(3))
    );
    assert!(doc["score"]["ranks_basis"]
        .as_str()
        .unwrap()
        .contains("3 repeat(s) per configuration"));
    // The neighbours of the ranking, each with a three-way verdict.
    let adjacent = doc["score"]["adjacent"].as_array().unwrap();
    assert_eq!(adjacent.len(), 2, "{adjacent:?}");
    assert_eq!(adjacent[0]["better"], ranked[0]["config"]);
    assert_eq!(adjacent[1]["worse"], ranked[2]["config"]);
    for p in adjacent {
        let v = p["verdict"].as_str().unwrap();
        assert!(["different", "same", "undecided"].contains(&v), "{p}");
    }
    // Three pairs, each tested with Welch on the per-repeat scores.
    let pairs = doc["score"]["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 3);
    for p in pairs {
        assert_eq!(p["test"]["method"], "welch-log-runs", "{p}");
        assert_eq!(
            (p["test"]["runs_a"].as_u64(), p["test"]["runs_b"].as_u64()),
            (Some(3), Some(3))
        );
    }
    // Per test: the runs behind each value and the verdict against the baseline (16KB).
    let t = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "RND4K Q1T1 Read")
        .unwrap();
    let v = &t["values"][1];
    assert_eq!(v["runs"], 3);
    assert_eq!(v["run_values"].as_array().unwrap().len(), 3);
    assert!(
        (v["ratio_to_baseline"].as_f64().unwrap() - 1.0 / 0.9).abs() < 1e-3,
        "{v}"
    );
    let vs = &v["vs_baseline"];
    assert_eq!(vs["significant"], true, "{vs}");
    assert_eq!(vs["method"], "welch-log-runs");
    let ci = vs["ratio_ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() < 1.0 / 0.9 && ci[1].as_f64().unwrap() > 1.0 / 0.9);
    assert_eq!(t["values"][0]["vs_baseline"], Value::Null);
    // One repeat: no verdict, and the reason.
    let one = study_document(&RunSet::study("strip size", common::study_runs()));
    let vs = &one["tests"][0]["values"][1]["vs_baseline"];
    assert_eq!(vs["significant"], Value::Null);
    assert!(vs["reason"]
        .as_str()
        .unwrap()
        .contains("cannot be told from run-to-run noise"));
    assert_eq!(one["score"]["ranked"][0]["rank_text"], "1-3");
}
