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
        "engine": run.engine,
        "settings": settings(&run.settings),
        "command_line": run.command_line,
        "notes": run.notes,
        "warnings": run.warnings.iter().map(warning).collect::<Vec<_>>(),
        "env": run.env,
        "tests": run.tests.iter().map(test).collect::<Vec<_>>(),
    })
}

/// [`run_document`] pretty-printed, without a trailing newline (print it with `println!`).
pub fn to_json_string(run: &RunRecord) -> String {
    serde_json::to_string_pretty(&run_document(run)).expect("a serde_json::Value always serialises")
}

fn settings(s: &RunSettings) -> Value {
    json!({
        "size_bytes": s.size,
        "duration_s": s.duration.as_secs_f64(),
        "runs": s.runs,
        "warmup_passes": s.warmup_passes,
        "warmup_duration_s": s.warmup_duration.as_secs_f64(),
        "engine": s.engine.as_str(),
        "direct": s.direct,
        "data": s.data,
        "fixedbufs": s.fixedbufs,
        "registerfiles": s.registerfiles,
    })
}

fn warning(w: &Warning) -> Value {
    json!({
        "code": w.code,
        "message": w.message,
        "fix": w.fix,
        "test": w.test,
    })
}

fn test(t: &TestRecord) -> Value {
    let j: &JobSpec = &t.job;
    json!({
        "name": t.name,
        "group": t.group,
        "rw": j.rw.as_str(),
        "bs": j.bs,
        "iodepth": j.iodepth,
        "numjobs": j.numjobs,
        "rwmixread": if j.rw.is_mixed() { Some(j.rwmixread) } else { None },
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
    })
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
    json!({
        "index": p.index,
        "bytes": p.bytes,
        "ios": p.ios,
        "seconds": p.seconds,
        "mb_s": p.mb_s,
        "iops": p.iops,
        "lat_us": lat(&p.lat_us),
        "read": p.read.as_ref().map(dir),
        "write": p.write.as_ref().map(dir),
        "sync": p.sync.as_ref().map(sync),
        "cpu": cpu(&p.cpu),
        "timeseries": {
            "interval_ms": p.timeseries.interval_ms,
            "bytes": p.timeseries.bytes,
            "mb_s": p.timeseries.mb_s(p.seconds),
        },
        "errors": p.errors.iter().map(error).collect::<Vec<_>>(),
        "context": serde_json::to_value(&p.context).unwrap_or(Value::Null),
    })
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
        "score": s.score,
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
