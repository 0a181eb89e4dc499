//! Short descriptions of a run and of its captured environment, shared by the terminal,
//! Markdown and HTML reports: (label, value) pairs of plain text, escaped by whoever prints
//! them.
//!
//! Every fact says what was measured: a block preset's region, passes and engine, or what
//! the run's workload says of itself (`iolab_measure::workload`: a copy's source and
//! buffer, the streams, files, replay or probe of the others); the pass counts that actually ran (with
//! `--until-stable` they differ from what was asked); the throttles on the target, a
//! study's own marked as its configuration.

use iolab_measure::workload::{self, HeaderParts};
use iolab_measure::{RunRecord, TestRecord};
use iolab_spec::{format_bytes, format_bytes_exact, format_size_short, DataPattern};
use serde_json::Value;

use crate::text;

/// Whether a test's rate is counted in operations rather than bytes: its workload says so
/// (the fsync probe: durable writes per second; metadata: file operations per second).
/// Their MB/s is a by-product (0.29 MB/s of flushed 4 KiB writes says nothing a reader
/// wants).
pub fn counts_operations(t: &TestRecord) -> bool {
    workload::test_counts_operations(t)
}

/// The heading of a metric over `tests`: `ops/s` for IOPS of tests that count operations.
pub(crate) fn metric_label<'a>(
    m: crate::set::Metric,
    mut tests: impl Iterator<Item = &'a TestRecord>,
) -> &'static str {
    if m == crate::set::Metric::Iops && tests.any(counts_operations) {
        "ops/s"
    } else {
        m.label()
    }
}

/// Whether a run's rates are counted in operations (see [`counts_operations`]).
pub(crate) fn run_counts_operations(run: &RunRecord) -> bool {
    workload::run_counts_operations(run)
}

/// The legend line under a header: the units and what a headline is.
pub(crate) fn legend(run: &RunRecord) -> String {
    let unit = if run_counts_operations(run) {
        "ops/s = operations per second"
    } else {
        "MB/s = 10^6 bytes/s"
    };
    let score = run
        .tests
        .first()
        .and_then(|t| t.summary.score)
        .unwrap_or(iolab_measure::Score::Median);
    let (lo, hi) = pass_range(run);
    if hi <= 1 {
        format!("{unit}; headline = {score} of 1 pass (no confidence interval with a single pass)")
    } else {
        let n = if lo == hi {
            format!("{hi} passes")
        } else {
            format!("each test's passes ({lo}–{hi})")
        };
        format!("{unit}; headline = {score} of {n} (±x% = 95% CI half-width, Student t)")
    }
}

/// Fewest and most measured passes of the run's tests (what was asked when no test has
/// any).
fn pass_range(run: &RunRecord) -> (usize, usize) {
    let counts = run.tests.iter().map(|t| t.passes.len()).filter(|&n| n > 0);
    let lo = counts.clone().min();
    let hi = counts.max();
    match (lo, hi) {
        (Some(lo), Some(hi)) => (lo, hi),
        _ => {
            let asked = run.settings.runs as usize;
            (asked, asked)
        }
    }
}

/// The passes the tests measured, as counted: `3 × 5s measured (+1 warm-up × 5s)`,
/// `5–10 × 1s measured per test; until stable: 2 of 3 tests converged`.
pub(crate) fn passes(run: &RunRecord) -> String {
    let s = &run.settings;
    let (lo, hi) = pass_range(run);
    let n = if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    };
    let per_test = if lo == hi || run.tests.len() < 2 {
        ""
    } else {
        " per test"
    };
    let mut out = if s.duration.is_zero() {
        // Workloads that run to completion (copy, streams, metadata) have no pass length.
        format!("{n} pass{}{per_test}", if hi == 1 { "" } else { "es" })
    } else if run
        .tests
        .iter()
        .any(|t| t.runner_extra().steady_state.is_some())
    {
        // A steady-state pass runs up to its rounds' most and ends when the window holds.
        format!(
            "{n} × up to {} measured{per_test}, ended once steady state holds",
            text::duration(s.duration)
        )
    } else {
        format!("{n} × {} measured{per_test}", text::duration(s.duration))
    };
    if s.warmup_passes > 0 {
        out.push_str(&format!(
            " (+{} warm-up × {})",
            s.warmup_passes,
            text::duration(s.warmup_duration)
        ));
    }
    if !s.ramp.is_zero() {
        out.push_str(&format!(
            "; the first {} of every pass is not measured",
            text::duration(s.ramp)
        ));
    }
    let converged: Vec<bool> = run
        .tests
        .iter()
        .filter_map(|t| t.summary.converged)
        .collect();
    if !converged.is_empty() {
        out.push_str(&format!(
            "; until stable: {} of {} test{} converged",
            converged.iter().filter(|c| **c).count(),
            converged.len(),
            if converged.len() == 1 { "" } else { "s" }
        ));
    }
    if let Some(limit) = run.tests.iter().find_map(|t| t.job.io_limit) {
        if workload::of_run(run).is_some_and(|w| w.io_limit_ends_passes()) {
            out.push_str(&format!(
                "; a pass also ends after {} of I/O",
                format_bytes(limit)
            ));
        }
    }
    out
}

/// `io_uring, fixed buffers · direct (O_DIRECT) · data random (incompressible)`.
pub(crate) fn io(run: &RunRecord) -> String {
    let s = &run.settings;
    if run.tests.iter().any(|t| t.job.io.is_some()) {
        return per_test_io(run);
    }
    let mut engine = run
        .engine
        .map_or_else(|| "no engine".to_string(), |e| e.as_str().to_string());
    if run.engine != s.engine {
        engine.push_str(&format!(
            " (asked for {})",
            s.engine.map_or("none", |e| e.as_str())
        ));
    }
    let extras = s
        .engine
        .map(|e| iolab_spec::engopt::header(e, &s.engine_opts))
        .unwrap_or_default();
    if !extras.is_empty() {
        engine.push_str(&format!(", {}", extras.join(", ")));
    }
    let direct = if s.direct {
        "direct (O_DIRECT)"
    } else {
        "buffered (page cache)"
    };
    let data = match s.data {
        DataPattern::Random => "data random (incompressible)",
        DataPattern::Zeros => "data zeros (all 0x00)",
    };
    format!("{engine} · {direct} · {data}")
}

/// A run whose tests ran each on its own engine or direct/buffered (a fio job file's
/// jobs): `per test: e4defrag buffered (a, b); io_uring direct (c) · data random ...`.
fn per_test_io(run: &RunRecord) -> String {
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for t in &run.tests {
        let s = run.settings.for_job(&t.job);
        let mut what = s
            .engine
            .map_or_else(|| "no engine".into(), |e| e.as_str().to_string());
        what.push_str(if s.direct { " direct" } else { " buffered" });
        if let Some(e) = s.engine {
            for x in iolab_spec::engopt::header(e, &s.engine_opts) {
                what.push_str(&format!(", {x}"));
            }
        }
        match groups.iter_mut().find(|g| g.0 == what) {
            Some(g) => g.1.push(&t.name),
            None => groups.push((what, vec![&t.name])),
        }
    }
    let each: Vec<String> = groups
        .iter()
        .map(|(what, names)| format!("{what} ({})", names.join(", ")))
        .collect();
    let data = match run.settings.data {
        DataPattern::Random => "data random (incompressible)",
        DataPattern::Zeros => "data zeros (all 0x00)",
    };
    format!("per test: {} · {data}", each.join("; "))
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

/// What a workload measured, as (label, value) lines in the header's order: the
/// workload's own facts ([`WorkloadInfo::facts`](iolab_measure::workload::WorkloadInfo::facts)),
/// else the region, passes and engine (a block preset).
pub(crate) fn workload_facts(run: &RunRecord) -> Vec<(&'static str, String)> {
    let parts = || HeaderParts {
        passes: passes(run),
        most_passes: pass_range(run).1,
    };
    if let Some(own) = workload::of_run(run).and_then(|w| w.facts(run, &parts())) {
        return own;
    }
    let mut v = Vec::new();
    let size = if run.target.size > 0 {
        run.target.size
    } else {
        run.settings.size
    };
    if size > 0 {
        v.push(("Region", format_bytes_exact(size)));
    }
    v.push(("Passes", passes(run)));
    v.push(("Engine", io(run)));
    v
}

/// What one test did, for a results table's "What" column: the workload's own words
/// (`loadfile replay, 2 clients`, `4K writes, one at a time`), else its job's shape.
pub(crate) fn test_what(run: &RunRecord, t: &TestRecord) -> String {
    workload::of_run(run)
        .and_then(|w| w.test_what(run, t))
        .unwrap_or_else(|| {
            format!(
                "{} {} Q{}T{}",
                t.job.rw_name(),
                format_size_short(t.job.bs),
                t.job.iodepth,
                t.job.numjobs
            )
        })
}

/// The blkio throttles on the target's devices, from the captured environment: `loop3
/// read_bps = 20 MiB/s (the study's testbed)`. A throttle the run's study set up is its
/// configuration, marked so; any other is what `BLKIO_THROTTLE` warns about.
pub(crate) fn throttles(run: &RunRecord) -> Vec<String> {
    let Some(all) = run.env.get("blkio_throttles").and_then(Value::as_array) else {
        return Vec::new();
    };
    let devices: Vec<&str> = run.env["target"]["devices"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["dev"].as_str()).collect())
        .unwrap_or_default();
    let study_cgroup = run.study_meta["built"]["cgroup"]
        .as_str()
        .map(|c| c.trim_end_matches('/'));
    all.iter()
        .filter(|t| t["device"].as_str().is_some_and(|d| devices.contains(&d)))
        .map(|t| {
            let kind = t["kind"].as_str().unwrap_or("?");
            let limit = t["limit"].as_u64().unwrap_or(0);
            let value = if kind.ends_with("bps") {
                format!("{}/s", format_bytes(limit))
            } else {
                format!("{limit} IOPS")
            };
            let cgroup = t["cgroup"].as_str().unwrap_or("");
            let dev = t["device_name"]
                .as_str()
                .or(t["device"].as_str())
                .unwrap_or("?");
            let whose = if study_cgroup.is_some_and(|c| c == cgroup.trim_end_matches('/')) {
                "set by the study's testbed: the configuration measured".to_string()
            } else {
                format!("cgroup {cgroup}")
            };
            format!("{dev} {kind} = {value} ({whose})")
        })
        .collect()
}

/// The fsync probe's verdict per sync method, in the order measured: `METHOD: VERDICT —
/// EVIDENCE`, from the weakest verdict over the method's write sizes (each test's
/// `extra.durability`). Empty for other runs.
pub(crate) fn durability(run: &RunRecord) -> Vec<String> {
    let mut methods: Vec<(&str, workload::Judgement)> = Vec::new();
    for t in &run.tests {
        let Some(d) = workload::of_test_in(run, t).and_then(|w| w.durability(t)) else {
            continue;
        };
        match methods.iter_mut().find(|(m, _)| *m == t.group) {
            // The weakest verdict over the method's sizes.
            Some((_, best)) => {
                if d.verdict < best.verdict {
                    *best = d;
                }
            }
            None => methods.push((&t.group, d)),
        }
    }
    methods
        .iter()
        .map(|(m, d)| {
            let evidence = if d.evidence.is_empty() {
                "no evidence recorded"
            } else {
                &d.evidence
            };
            format!("{m}: {} — {evidence}", d.verdict.text())
        })
        .collect()
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
            if workload::of_run(run).is_some_and(|w| w.named_by_preset()) {
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
    v.extend(workload_facts(run));
    // The general job options whose declaration has header words, where a test has a
    // value other than the default.
    let options: Vec<String> = iolab_spec::JOB_OPTIONS
        .iter()
        .flat_map(|o| o.header_words(run.tests.iter().map(|t| &t.job)))
        .collect();
    if !options.is_empty() {
        v.push(("Options", options.join(", ")));
    }
    for t in throttles(run) {
        v.push(("Throttle", t));
    }
    let mut when = run.started_at.clone();
    if let Some(f) = &run.finished_at {
        when.push_str(&format!(" · finished {f}"));
    }
    v.push(("Started", when));
    if !run.complete {
        v.push((
            "Status",
            "incomplete (interrupted or failed): only the passes that finished".to_string(),
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
                // A loop device over iolab's emulated disk: say which disk it was.
                if let Some(x) = d.get("emulated_disk").and_then(|e| s(e, "summary")) {
                    parts.push(format!("on an {x}"));
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
