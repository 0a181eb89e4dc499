//! Running fio on one job file and reading the figures crosscheck compares from its JSON.

use std::process::Command;

use iolab_measure::crosscheck::ToolSample;
use iolab_runner::RunError;

/// Whether fio can be started at all.
pub fn installed() -> bool {
    Command::new("fio").arg("--version").output().is_ok()
}

/// Runs fio on `job_file` (text) and reads its JSON: read and write summed (mixed tests).
/// IOPS are fio's bandwidth over `bs` when the test has one block size: fio's own `iops`
/// field is computed over another interval when `ramp_time` is set and then disagrees with
/// its bandwidth. `bs` 0 (mixed sizes) takes fio's `iops`.
pub fn run(job_file: &str, bs: u64) -> Result<ToolSample, RunError> {
    let dir = std::env::temp_dir().join(format!("iolab-crosscheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| RunError::caused(format!("cannot create {}", dir.display()), e))?;
    let path = dir.join("job.fio");
    let out = std::fs::write(&path, job_file)
        .map_err(|e| RunError::caused(format!("cannot write {}", path.display()), e))
        .and_then(|()| {
            Command::new("fio")
                .arg("--output-format=json")
                .arg(&path)
                .output()
                .map_err(|e| RunError::caused("cannot run fio", e))
        });
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    if !out.status.success() {
        return Err(RunError::Failed(format!(
            "fio failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse(&String::from_utf8_lossy(&out.stdout), bs)
}

/// The least CPU time (ms) of a fio job whose CPU per I/O is kept: fio counts user and
/// system time in whole milliseconds each, so at 10 ms the truncation (up to 2 ms) is at
/// most a fifth of the figure, well inside the half that crosscheck needs before it says
/// one tool spent more CPU per I/O.
const FIO_CPU_MS_LEAST: f64 = 10.0;

/// The figures of fio's first job in its JSON output (which fio may precede with notes).
pub fn parse(text: &str, bs: u64) -> Result<ToolSample, RunError> {
    let start = text.find('{').unwrap_or(0);
    let doc: serde_json::Value = serde_json::from_str(&text[start..])
        .map_err(|e| RunError::caused("cannot parse fio's JSON", e))?;
    let job = &doc["jobs"][0];
    if job.is_null() {
        return Err(RunError::Failed("fio's JSON has no job".into()));
    }
    let mut s = ToolSample::default();
    let mut lat_sum = 0.0;
    let mut ios = 0.0;
    for dir in ["read", "write", "trim"] {
        let d = &job[dir];
        let n = d["total_ios"].as_f64().unwrap_or(0.0);
        // fio's file engines (filecreate, filestat, filedelete) time their call on each file
        // apart from the I/O, which does nothing: only `clat_ns` holds those times (no
        // `lat_ns` samples), and the job's bandwidth leaves them out. One call at a time
        // from the job's thread: its rate is one over their mean.
        let clat = &d["clat_ns"];
        if d["lat_ns"]["N"].as_f64() == Some(0.0) && clat["N"].as_f64().unwrap_or(0.0) > 0.0 {
            let us = clat["mean"].as_f64().unwrap_or(0.0) / 1000.0;
            let iops = if us > 0.0 { 1e6 / us } else { 0.0 };
            s.iops += iops;
            s.mb_s += iops * bs as f64 / 1e6;
            lat_sum += us * n;
            ios += n;
            continue;
        }
        let bw = d["bw_bytes"].as_f64().unwrap_or(0.0);
        s.mb_s += bw / 1e6;
        s.iops += if bs > 0 {
            bw / bs as f64
        } else {
            d["iops"].as_f64().unwrap_or(0.0)
        };
        lat_sum += d["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0 * n;
        ios += n;
    }
    s.lat_mean_us = if ios > 0.0 { lat_sum / ios } else { 0.0 };
    // fio's usr_cpu/sys_cpu are percent of one CPU over the job's runtime, from user and
    // system times fio counts in whole milliseconds (each truncated). Below
    // FIO_CPU_MS_LEAST of them the truncation may be more than a fifth of the figure (a
    // job of a few I/Os reads 0): no figure then, rather than a wrong one.
    let cpu_pct = job["usr_cpu"].as_f64().unwrap_or(0.0) + job["sys_cpu"].as_f64().unwrap_or(0.0);
    let runtime_s = job["job_runtime"].as_f64().unwrap_or(0.0) / 1000.0;
    let cpu_ms = cpu_pct / 100.0 * runtime_s * 1e3;
    if ios > 0.0 && cpu_ms >= FIO_CPU_MS_LEAST && job["usr_cpu"].is_number() {
        s.cpu_us_per_io = Some(cpu_ms * 1e3 / ios);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mixed_job_sums_both_directions_and_weights_latency_by_ios() {
        let text = r#"note: something first
{"jobs":[{"read":{"bw_bytes":4096000,"iops":1000,"total_ios":1000,"lat_ns":{"mean":2000}},
"write":{"bw_bytes":4096000,"iops":1000,"total_ios":3000,"lat_ns":{"mean":6000}}}]}"#;
        let s = parse(text, 4096).unwrap();
        assert_eq!(s.mb_s, 8.192);
        assert_eq!(s.iops, 2000.0);
        assert_eq!(s.lat_mean_us, 5.0);
        assert_eq!(s.cpu_us_per_io, None);
        // usr_cpu + sys_cpu: percent of one CPU over job_runtime (ms), per I/O.
        let text = r#"{"jobs":[{"usr_cpu":10.0,"sys_cpu":30.0,"job_runtime":2000,
"read":{"bw_bytes":4096000,"iops":1000,"total_ios":2000,"lat_ns":{"mean":2000}}}]}"#;
        let s = parse(text, 4096).unwrap();
        assert_eq!(s.cpu_us_per_io, Some(400.0));
        // A 300 ms job of 6 I/Os: fio's whole milliseconds read 0, and 3% (9 ms) is
        // below what they resolve well: no figure.
        for (usr, sys) in [(0.0, 0.0), (1.0, 2.0)] {
            let text = format!(
                r#"{{"jobs":[{{"usr_cpu":{usr},"sys_cpu":{sys},"job_runtime":300,
"read":{{"bw_bytes":89043,"iops":21.7,"total_ios":6,"lat_ns":{{"mean":196035458}}}}}}]}}"#
            );
            assert_eq!(parse(&text, 4096).unwrap().cpu_us_per_io, None, "{text}");
        }
    }

    /// filestat-ioengine.fio's job under fio 3.33: the stats in `clat_ns` only, the bandwidth
    /// over the no-op I/Os (200 of them in 1 ms).
    #[test]
    fn a_file_engines_rate_is_from_its_timed_calls() {
        let text = r#"{"jobs":[{"read":{"bw_bytes":819200000,"iops":200000.0,"total_ios":200,
"lat_ns":{"N":0,"mean":0.0},"clat_ns":{"N":200,"mean":2000.0}},
"write":{"bw_bytes":0,"iops":0.0,"total_ios":0,"lat_ns":{"N":0,"mean":0.0},
"clat_ns":{"N":0,"mean":0.0}}}]}"#;
        let s = parse(text, 4096).unwrap();
        assert_eq!((s.iops, s.lat_mean_us), (500_000.0, 2.0));
        assert_eq!(s.mb_s, 2048.0);
    }

    #[test]
    fn output_without_a_job_is_an_error() {
        assert!(parse("{\"jobs\":[]}", 4096).is_err());
        assert!(parse("garbage", 4096).is_err());
    }
}
