//! Translation of iolab tests into fio job files (`iolab export-fio`, `iolab crosscheck`).
//! Every option iolab uses has an fio equivalent; docs/fio.md lists the mapping.

use std::fmt::Write as _;

use crate::job::{DataPattern, RunSettings, SyncMode, TestSpec};

/// fio's section name for a test: its iolab name with spaces and slashes replaced.
pub fn section_name(test: &TestSpec) -> String {
    test.name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The `[global]` section shared by all tests of a run.
pub fn global_section(settings: &RunSettings, filename: &str) -> String {
    let mut g = String::from("[global]\n");
    if let Some(engine) = settings.engine {
        let _ = writeln!(g, "ioengine={}", engine.as_str());
        g.push_str(&crate::engopt::fio_lines(engine, &settings.engine_opts));
    }
    let _ = writeln!(g, "direct={}", u8::from(settings.direct));
    // iolab drops the region's cached pages before an O_DIRECT test (and never before a
    // buffered one); fio does the same with these values.
    let _ = writeln!(g, "invalidate={}", u8::from(settings.direct));
    let _ = writeln!(g, "filename={}", filename.replace(':', "\\:"));
    let _ = writeln!(g, "size={}", settings.size);
    match settings.data {
        DataPattern::Zeros => g.push_str("zero_buffers=1\n"),
        DataPattern::Random => {
            g.push_str("scramble_buffers=1\nbuffer_compress_percentage=0\n");
        }
    }
    if !settings.ramp.is_zero() {
        let _ = writeln!(g, "ramp_time={}ms", settings.ramp.as_millis());
    }
    g.push_str("group_reporting=1\nrandrepeat=0\nnorandommap=1\n");
    g
}

/// One job section for `test`, a pass of `seconds`, to run after the previous one.
pub fn job_section(test: &TestSpec, seconds: f64) -> String {
    let j = &test.job;
    let mut s = String::new();
    let _ = writeln!(s, "[{}]", section_name(test));
    s.push_str("stonewall\n");
    let _ = writeln!(s, "rw={}", j.rw.as_str());
    let _ = writeln!(s, "bs={}", j.bs);
    // A test on an engine of its own (a job file's job): its engine, options and direct
    // in place of the [global] section's.
    if let Some(io) = &j.io {
        let _ = writeln!(s, "ioengine={}", io.engine.as_str());
        s.push_str(&crate::engopt::fio_lines(io.engine, &io.engine_opts));
        let _ = writeln!(s, "direct={}", u8::from(io.direct));
        let _ = writeln!(s, "invalidate={}", u8::from(io.direct));
    }
    for o in crate::JOB_OPTIONS {
        if let Some(v) = (o.get)(j) {
            let _ = writeln!(s, "{}={v}", o.name);
        }
    }
    if j.iodepth > 1 {
        let _ = writeln!(s, "iodepth_batch_submit={}", j.iodepth);
        let _ = writeln!(s, "iodepth_batch_complete_max={}", j.iodepth);
    }
    if j.fsync_every > 0 {
        let key = match j.sync_mode {
            SyncMode::Fsync => "fsync",
            SyncMode::Fdatasync => "fdatasync",
        };
        let _ = writeln!(s, "{key}={}", j.fsync_every);
    }
    if j.end_fsync {
        s.push_str("end_fsync=1\n");
    }
    let ms = (seconds * 1000.0).round() as u64;
    match j.io_limit {
        // ATTO-style: cover the region once, but no longer than the pass.
        Some(limit) => {
            let _ = writeln!(s, "io_size={limit}\nruntime={ms}ms");
        }
        None => {
            let _ = writeln!(s, "time_based=1\nruntime={ms}ms");
        }
    }
    s
}

/// A complete job file: the global section and every test in order.
pub fn job_file(tests: &[TestSpec], settings: &RunSettings, filename: &str) -> String {
    let mut f = String::from("; written by iolab export-fio; see docs/fio.md for the mapping\n");
    f.push_str(&global_section(settings, filename));
    for t in tests {
        f.push('\n');
        f.push_str(&job_section(t, settings.duration.as_secs_f64()));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::expand_preset;
    use std::time::Duration;

    fn settings() -> RunSettings {
        RunSettings {
            size: 1 << 30,
            duration: Duration::from_secs(5),
            runs: 3,
            warmup_passes: 1,
            warmup_duration: Duration::from_secs(5),
            ramp: Duration::ZERO,
            engine: Some(crate::engopt::testing::kind("io_uring")),
            direct: true,
            data: DataPattern::Random,
            engine_opts: Default::default(),
        }
    }

    #[test]
    fn cdm_job_file() {
        let tests = expand_preset("cdm", None, false, 1 << 30).unwrap();
        let f = job_file(&tests, &settings(), "/mnt/x/test.dat");
        assert!(f.contains("[global]\nioengine=io_uring\n"));
        assert!(f.contains("direct=1\n"));
        assert!(f.contains("size=1073741824\n"));
        assert!(f.contains("[SEQ1M_Q8T1_Read]\nstonewall\nrw=read\nbs=1048576\niodepth=8\n"));
        assert!(f.contains("[RND4K_Q1T1_Write]\nstonewall\nrw=randwrite\nbs=4096\niodepth=1\n"));
        assert_eq!(f.matches("time_based=1\nruntime=5000ms").count(), 8);
    }

    #[test]
    fn atto_uses_io_size() {
        let tests = expand_preset("atto", None, false, 256 << 20).unwrap();
        let s = job_section(&tests[0], 5.0);
        assert!(s.contains("io_size=268435456\nruntime=5000ms"));
        assert!(!s.contains("time_based"));
    }
}
