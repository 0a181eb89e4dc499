//! Fuzzes the fio job-file reader (`iolab run fio JOBFILE`) over tests/corpus/fiojob/: no
//! input panics or allocates without bound, and every refusal names FILE:LINE of a line of
//! the file it is about and an option (or `[section]`, `include`, `${VAR}`, `JOBFILE`).

use std::path::Path;
use std::time::Duration;

use iolab_spec::fiojob::parse::Sources;
use iolab_spec::fiojob::{map_jobs, parse, FioError, Overrides};
use iolab_sys::input::InputError;
use iolab_testkit::fuzz::{limits, run, Alloc, Fuzz, Limits};

#[global_allocator]
static A: Alloc = Alloc;

/// The one file an `include` can find.
const INCLUDED: &str = "bs=8k\n[inc-job]\nrw=randwrite\nsize=1m\n";

fn check_error(e: &FioError, text: &str) -> Result<(), String> {
    let lines = match e.file.as_str() {
        "job.fio" => text.split('\n').count(),
        "inc.fio" => INCLUDED.split('\n').count(),
        _ => return Err(format!("the error names a file that was not read: {e}")),
    };
    if e.line == 0 || e.line > lines.max(1) {
        return Err(format!("line {} is not in {}: {e}", e.line, e.file));
    }
    if e.option.is_empty() || e.message.is_empty() {
        return Err(format!("the error names no option or no reason: {e:?}"));
    }
    Ok(())
}

#[test]
fn job_files() {
    // The engines job files name (the binary installs iolab-engine's registry).
    iolab_spec::engopt::testing::install();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/fiojob");
    let f = Fuzz {
        name: "fiojob",
        corpus: &corpus,
        cases: 6000,
        dictionary: &[
            "[global]\n",
            "[job]\n",
            "include inc.fio\n",
            "include job.fio\n",
            "${SIZE}",
            "${UNSET}",
            "${",
            "rw=randrw:8\n",
            "rw=read:-8k\n",
            "random_distribution=zipf:1.2\n",
            "random_distribution=zoned:60/10:40/\n",
            "blockalign=8k\n",
            "number_ios=3\n",
            "bs=4k,8k\n",
            "bssplit=4k/10:64k/90\n",
            "bsrange=1k-4k\n",
            "size=",
            "runtime=",
            "time_based\n",
            "rate=",
            "thinktime=",
            "ioengine=",
            "libaio",
            "rdma",
            "kb_base=1000\n",
            "stonewall\n",
            "wait_for=",
            "18446744073709551615",
            "99999999999g",
            "0x",
            "%",
            ";",
            "#",
            "=",
            "\n",
        ],
    };
    let read = |p: &Path, limit: u64| {
        if p == Path::new("inc.fio") {
            iolab_sys::input::read_bounded(INCLUDED.as_bytes(), limit)
        } else {
            Err(InputError::Io(std::io::ErrorKind::NotFound.into()))
        }
    };
    let var = |v: &str| (v == "SIZE").then(|| "4m".to_string());
    let src = Sources {
        read: &read,
        var: &var,
    };
    run(&f, |text| {
        let file = match parse("job.fio", text.as_bytes(), &src) {
            Ok(f) => f,
            Err(e) => return check_error(&e, text),
        };
        for ov in [
            Overrides::default(),
            Overrides {
                size: Some(4 << 20),
                duration: Some(Duration::from_millis(200)),
            },
        ] {
            match map_jobs(&file, ov) {
                Ok(plan) => {
                    if plan.jobs.is_empty() {
                        return Err("a plan without jobs".into());
                    }
                    for j in &plan.jobs {
                        j.job
                            .validate()
                            .map_err(|e| format!("a mapped job does not validate: {e}"))?;
                    }
                }
                Err(e) => check_error(&e, text)?,
            }
        }
        Ok(())
    });
}

#[test]
fn job_file_limits() {
    let l = Limits {
        name: "fiojob",
        limit: iolab_spec::fiojob::parse::MAX_FILE_BYTES as u64,
        max_alloc: 1 << 20,
        extra: vec![
            (
                "includes-zero",
                b"[j]\nsize=1m\ninclude /dev/zero\n".to_vec(),
            ),
            ("not-a-job-file", b"root:x:0:0::/root:/bin/sh\n".to_vec()),
        ],
    };
    limits(&l, |p| match iolab_spec::fiojob::parse_file(p) {
        Ok(_) => Err("accepted".into()),
        Err(e) if e.file != p.display().to_string() => Err(format!("names another file: {e}")),
        Err(e) if e.message.contains("root:") => Err(format!("shows the file: {e}")),
        Err(_) => Ok(()),
    });
}
