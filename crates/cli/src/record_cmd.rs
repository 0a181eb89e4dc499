//! `iolab record`: runs a command under strace and writes the trace of its file I/O
//! (the work is `iolab_workloads::replay::record`'s).

use iolab_runner::RunError;
use iolab_workloads::replay::record::{record as run_record, RecordConfig, RecordError};

use crate::args::RecordArgs;

pub fn record(a: RecordArgs) -> Result<(), RunError> {
    let cfg = RecordConfig {
        output: a.output,
        roots: a.root,
        command: a.command,
    };
    let r = run_record(&cfg).map_err(|e| match e {
        RecordError::Usage(m) => RunError::usage(m),
        RecordError::Failed(m) => RunError::Failed(m),
        e @ RecordError::Io { .. } => RunError::from_error(e),
        RecordError::Interrupted => RunError::Interrupted,
    })?;
    let t = &r.trace;
    let skipped: u64 = t.skipped.iter().map(|(_, n)| n).sum();
    println!(
        "recorded {} calls of {} thread(s) in {:.3} s (under strace) to {}",
        t.events.len(),
        t.threads().len(),
        r.seconds,
        cfg.output.display()
    );
    if skipped > 0 {
        let why: Vec<String> = t
            .skipped
            .iter()
            .map(|(k, n)| match k.as_str() {
                "outside" => format!("{n} outside the --root directories"),
                _ => format!("{n} {k}"),
            })
            .collect();
        println!("left out {skipped} calls: {}", why.join(", "));
        for line in &r.left_out {
            println!("  {line}");
        }
    }
    match r.exit {
        Some(0) => Ok(()),
        Some(c) => Err(RunError::Failed(format!(
            "the command exited with status {c} (the trace of what it did is written)"
        ))),
        None => Err(RunError::Failed(
            "the command was killed by a signal (the trace of what it did is written)".into(),
        )),
    }
}
