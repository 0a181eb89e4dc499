//! `iolab export-fio` and `iolab crosscheck`: the same tests as fio job files, and run by
//! iolab and fio alternately on the same file with both results side by side.

use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iolab_engine::run_pass;
use iolab_spec::fio;
use iolab_stats::median;

use crate::args::{ExportFioArgs, RunArgs};
use crate::commands::CliError;
use crate::progress::Progress;
use crate::run::{plan, prepare_target, target_error};
use crate::signals;

/// `iolab export-fio`: prints (or writes) the fio job file of a preset.
pub fn export_fio(a: ExportFioArgs) -> Result<i32, CliError> {
    let plan = plan(&a.run)?;
    let filename = export_filename(&a.run);
    let text = fio::job_file(&plan.tests, &plan.settings, &filename);
    match &a.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| CliError::Failed(format!("cannot write {}: {e}", path.display())))?,
        None => print!("{text}"),
    }
    Ok(0)
}

/// The file fio should use: the target itself, or a file in the target directory.
fn export_filename(a: &RunArgs) -> String {
    let p = std::path::absolute(&a.target).unwrap_or_else(|_| a.target.clone());
    if p.is_dir() {
        p.join("iolab-fio.dat").to_string_lossy().into_owned()
    } else {
        p.to_string_lossy().into_owned()
    }
}

/// One measurement of one tool.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    mb_s: f64,
    iops: f64,
    lat_mean_us: f64,
}

/// Runs fio on one test and reads its JSON: read and write summed (mixed tests). IOPS are
/// derived from fio's bandwidth and the block size: fio's own `iops` field is computed over
/// a different interval when `ramp_time` is set and then disagrees with its bandwidth.
fn run_fio(job_file: &str, bs: u64) -> Result<Sample, CliError> {
    let dir = std::env::temp_dir().join(format!("iolab-crosscheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join("job.fio");
    std::fs::write(&path, job_file)
        .map_err(|e| CliError::Failed(format!("cannot write {}: {e}", path.display())))?;
    let out = Command::new("fio")
        .arg("--output-format=json")
        .arg(&path)
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| CliError::Failed(format!("cannot run fio: {e}")))?;
    if !out.status.success() {
        return Err(CliError::Failed(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let start = text.find('{').unwrap_or(0);
    let doc: serde_json::Value = serde_json::from_str(&text[start..])
        .map_err(|e| CliError::Failed(format!("cannot parse fio's JSON: {e}")))?;
    let job = &doc["jobs"][0];
    let mut s = Sample::default();
    let mut lat_sum = 0.0;
    let mut ios = 0.0;
    for dir in ["read", "write"] {
        let d = &job[dir];
        let bw = d["bw_bytes"].as_f64().unwrap_or(0.0);
        s.mb_s += bw / 1e6;
        s.iops += bw / bs as f64;
        let n = d["total_ios"].as_f64().unwrap_or(0.0);
        lat_sum += d["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0 * n;
        ios += n;
    }
    s.lat_mean_us = if ios > 0.0 { lat_sum / ios } else { 0.0 };
    Ok(s)
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `iolab crosscheck`: every test of the preset, iolab and fio alternately.
pub fn crosscheck(a: RunArgs) -> Result<i32, CliError> {
    if Command::new("fio").arg("--version").output().is_err() {
        return Err(CliError::Failed(
            "fio is not installed (Debian: apt-get install fio)".into(),
        ));
    }
    let mut plan = plan(&a)?;
    let stop = signals::install().map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    let s = plan.settings.clone();
    let per_test = (s.warmup_duration * s.warmup_passes + s.duration * s.runs) * 2;
    let progress = Progress::new(per_test * plan.tests.len() as u32, a.quiet);
    let target = prepare_target(&mut plan, &a, &stop, &progress)?;
    let s = plan.settings.clone();
    let io_path = target.info.io_path.clone();

    let mut rows = Vec::new();
    let mut elapsed = Duration::ZERO;
    for test in &plan.tests {
        let job = format!(
            "{}\n{}",
            fio::global_section(&s, &io_path),
            fio::job_section(test, s.duration.as_secs_f64())
        );
        let warm_job = format!(
            "{}\n{}",
            fio::global_section(&s, &io_path),
            fio::job_section(test, s.warmup_duration.as_secs_f64())
        );
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for p in 0..s.warmup_passes + s.runs {
            if stop.load(Ordering::Relaxed) {
                return Err(CliError::Interrupted);
            }
            let warm = p < s.warmup_passes;
            let dur = if warm { s.warmup_duration } else { s.duration };
            let obs = progress.pass(format!("{} iolab", test.name), elapsed, dur);
            let out =
                run_pass(&target, test, &s, p + 1, dur, &stop, &obs, None).map_err(target_error)?;
            elapsed += dur;
            if let Some(e) = out.record.errors.first() {
                return Err(CliError::Failed(format!(
                    "{}: {} (errno {}) at offset {}",
                    test.name, e.message, e.errno, e.offset
                )));
            }
            let _ = progress.pass(format!("{} fio", test.name), elapsed, dur);
            let f = run_fio(if warm { &warm_job } else { &job }, test.job.bs)?;
            elapsed += dur;
            if !warm {
                let r = &out.record;
                ours.push(Sample {
                    mb_s: r.mb_s,
                    iops: r.iops,
                    lat_mean_us: r.lat_us.mean,
                });
                theirs.push(f);
            }
        }
        let med =
            |v: &[Sample], f: fn(&Sample) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
        rows.push((
            test.name.clone(),
            [
                med(&ours, |x| x.mb_s),
                med(&theirs, |x| x.mb_s),
                med(&ours, |x| x.iops),
                med(&theirs, |x| x.iops),
                med(&ours, |x| x.lat_mean_us),
                med(&theirs, |x| x.lat_mean_us),
            ],
        ));
    }
    progress.finish();
    drop(target);

    let mut out = format!(
        "iolab vs fio on {io_path} · {} · {} · median of {} pass(es) of {:.1} s each, \
         alternating\nMB/s = 10^6 bytes/s; ratio = iolab / fio\n\n",
        s.engine.as_str(),
        if s.direct { "O_DIRECT" } else { "buffered" },
        s.runs,
        s.duration.as_secs_f64()
    );
    out.push_str(&format!(
        "{:<22} {:>9} {:>9} {:>6} {:>9} {:>9} {:>6} {:>9} {:>9}\n",
        "Test",
        "iolab MB/s",
        "fio MB/s",
        "ratio",
        "iolab IOPS",
        "fio IOPS",
        "ratio",
        "iolab µs",
        "fio µs"
    ));
    let mut doc = Vec::new();
    for (name, v) in &rows {
        let r1 = if v[1] > 0.0 { v[0] / v[1] } else { f64::NAN };
        let r2 = if v[3] > 0.0 { v[2] / v[3] } else { f64::NAN };
        out.push_str(&format!(
            "{:<22} {:>9} {:>9} {:>6.3} {:>9} {:>9} {:>6.3} {:>9} {:>9}\n",
            name,
            fmt(v[0]),
            fmt(v[1]),
            r1,
            fmt(v[2]),
            fmt(v[3]),
            r2,
            fmt(v[4]),
            fmt(v[5])
        ));
        doc.push(serde_json::json!({
            "test": name,
            "iolab": {"mb_s": v[0], "iops": v[2], "lat_mean_us": v[4]},
            "fio": {"mb_s": v[1], "iops": v[3], "lat_mean_us": v[5]},
            "ratio_mb_s": r1,
            "ratio_iops": r2,
        }));
    }
    match a.json.as_deref() {
        Some("-") => println!("{}", serde_json::Value::Array(doc)),
        Some(path) => {
            print!("{out}");
            std::fs::write(path, serde_json::Value::Array(doc).to_string())
                .map_err(|e| CliError::Failed(format!("cannot write {path}: {e}")))?;
        }
        None => print!("{out}"),
    }
    Ok(0)
}
