//! Short descriptions of a run and of its captured environment, shared by the Markdown and
//! HTML reports: (label, value) pairs of plain text, escaped by whoever prints them.

use iolab_measure::RunRecord;
use iolab_spec::{format_bytes, DataPattern};
use serde_json::Value;

use crate::text;

/// `3 × 5s measured (+1 warm-up × 5s)`.
pub(crate) fn passes(run: &RunRecord) -> String {
    let s = &run.settings;
    if s.duration.is_zero() {
        // Workloads that run to completion (copy, streams, metadata) have no pass length.
        return format!("{} pass{}", s.runs, if s.runs == 1 { "" } else { "es" });
    }
    let mut out = format!("{} × {} measured", s.runs, text::duration(s.duration));
    if s.warmup_passes > 0 {
        out.push_str(&format!(
            " (+{} warm-up × {})",
            s.warmup_passes,
            text::duration(s.warmup_duration)
        ));
    }
    out
}

/// `io_uring · direct (O_DIRECT) · data random`.
pub(crate) fn io(run: &RunRecord) -> String {
    let s = &run.settings;
    let mut engine = run.engine.clone();
    if run.engine != s.engine.as_str() {
        engine.push_str(&format!(" (asked for {})", s.engine.as_str()));
    }
    let direct = if s.direct {
        "direct (O_DIRECT)"
    } else {
        "buffered (page cache)"
    };
    let data = match s.data {
        DataPattern::Random => "data random",
        DataPattern::Zeros => "data zeros",
    };
    format!("{engine} · {direct} · {data}")
}

/// `/mnt/x (dir, ext4)`.
pub(crate) fn target(run: &RunRecord) -> String {
    let t = &run.target;
    let what: Vec<&str> = [t.kind.as_str(), t.fs_type.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    if what.is_empty() {
        t.path.clone()
    } else {
        format!("{} ({})", t.path, what.join(", "))
    }
}

/// The facts of a run as (label, value) lines.
pub(crate) fn run_facts(run: &RunRecord) -> Vec<(&'static str, String)> {
    let mut v = vec![
        (
            "Run",
            match run.id {
                Some(id) => format!("#{id} · {}", run.uuid),
                None => format!("{} (not stored)", run.uuid),
            },
        ),
        (
            "Preset",
            if run.workload.is_empty() || run.workload == "block" {
                run.preset.clone()
            } else {
                format!("{} ({})", run.preset, run.workload)
            },
        ),
        ("Target", target(run)),
    ];
    if !run.target.io_path.is_empty() && run.target.io_path != run.target.path {
        v.push(("I/O on", run.target.io_path.clone()));
    }
    let size = if run.target.size > 0 {
        run.target.size
    } else {
        run.settings.size
    };
    if size > 0 {
        v.push(("Region", format_bytes(size)));
    }
    v.push(("Passes", passes(run)));
    v.push(("Engine", io(run)));
    let mut when = run.started_at.clone();
    if let Some(f) = &run.finished_at {
        when.push_str(&format!(" → {f}"));
    }
    v.push(("Started", when));
    if !run.complete {
        v.push((
            "Status",
            "incomplete (interrupted): only finished passes".to_string(),
        ));
    }
    if let Some(l) = &run.label {
        v.push(("Label", l.clone()));
    }
    if let Some(s) = &run.study {
        let mut s = s.clone();
        if let Some(c) = &run.config_label {
            s.push_str(&format!(" · configuration {c}"));
        }
        v.push(("Study", s));
    } else if let Some(c) = &run.config_label {
        v.push(("Configuration", c.clone()));
    }
    v.push(("iolab", run.iolab_version.clone()));
    if !run.command_line.is_empty() {
        v.push(("Command", run.command_line.join(" ")));
    }
    v
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The few environment facts a reader of a results table wants beside it: kernel, CPU,
/// memory, the device under the target and the filesystem's mount options. Empty when
/// nothing was captured; an environment of another layout gives its top-level values.
pub(crate) fn env_summary(env: &Value) -> Vec<(String, String)> {
    let v = known_env(env);
    if !v.is_empty() {
        return v;
    }
    let Some(map) = env.as_object() else {
        return v;
    };
    map.iter()
        .filter_map(|(k, x)| match x {
            Value::String(s) if !s.is_empty() => Some((k.clone(), s.clone())),
            Value::Number(n) => Some((k.clone(), n.to_string())),
            Value::Bool(b) => Some((k.clone(), b.to_string())),
            _ => None,
        })
        .take(12)
        .collect()
}

fn known_env(env: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = Vec::new();
    if !env.is_object() {
        return v;
    }
    if let Some(k) = s(env, "kernel_release") {
        v.push(("Kernel".into(), format!("Linux {k}")));
    }
    if let Some(c) = s(env, "cpu_model") {
        let mut c = c.to_string();
        if let Some(n) = env.get("cpu_cores").and_then(Value::as_u64) {
            c.push_str(&format!(" · {n} CPUs"));
        }
        v.push(("CPU".into(), c));
    }
    if let Some(m) = env.get("memory_total_bytes").and_then(Value::as_u64) {
        v.push(("Memory".into(), format_bytes(m)));
    }
    let target = env.get("target").unwrap_or(&Value::Null);
    if let Some(devs) = target.get("devices").and_then(Value::as_array) {
        let d: Vec<String> = devs
            .iter()
            .map(|d| {
                let mut parts: Vec<String> = Vec::new();
                for key in ["name", "model", "bus", "kind"] {
                    if let Some(x) = s(d, key) {
                        parts.push(x.to_string());
                    }
                }
                if let Some(r) = d.get("rotational").and_then(Value::as_bool) {
                    parts.push(if r { "rotational" } else { "non-rotational" }.into());
                }
                if let Some(x) = s(d, "scheduler") {
                    parts.push(format!("scheduler {x}"));
                }
                if let Some(x) = s(d, "write_cache") {
                    parts.push(format!("cache {x}"));
                }
                parts.join(", ")
            })
            .filter(|s| !s.is_empty())
            .collect();
        if !d.is_empty() {
            v.push(("Devices".into(), d.join(" → ")));
        }
    }
    if let Some(fs) = s(target, "fs_type") {
        let mut f = fs.to_string();
        if let Some(m) = s(target, "mount_point") {
            f.push_str(&format!(" on {m}"));
        }
        if let Some(o) = s(target, "mount_options") {
            f.push_str(&format!(" ({o})"));
        }
        v.push(("Filesystem".into(), f));
    }
    v
}
