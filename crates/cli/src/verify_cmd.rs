//! `iolab verify`: the later check of data `iolab run verify` wrote, from the sidecar or,
//! after a crash, from the journal; it only reads.

use std::time::Duration;

use iolab_integrity::journal::Journal;
use iolab_integrity::verified::{
    self, check_file, check_with_journal, expectation, CheckError, Given,
};
use iolab_runner::progress::Progress;
use iolab_runner::ExitStatus;
use iolab_spec::{format_bytes, parse_size};
use iolab_workloads::verify::run::block_size;

use crate::args::VerifyArgs;
use crate::error::CliError;

/// Exit status when a block does not hold what was written (or an acknowledged write
/// was lost).
const EXIT_INTEGRITY: i32 = ExitStatus::Integrity.code();

fn usage(e: String) -> CliError {
    CliError::Usage(e)
}

/// Bad input exits 2, a read error of the target 1 (docs/integrity.md, exit status).
fn check_error(e: CheckError) -> CliError {
    match e {
        CheckError::Input(m) => CliError::Usage(m),
        CheckError::Io(m) => CliError::Failed(m),
    }
}

fn parse_run_id(text: &str) -> Result<u64, CliError> {
    let t = text.trim_start_matches("0x");
    u64::from_str_radix(t, 16)
        .map_err(|_| usage(format!("--run-id '{text}': expected a hexadecimal run id")))
}

pub fn verify(args: VerifyArgs) -> Result<i32, CliError> {
    let path = std::path::absolute(&args.target).unwrap_or_else(|_| args.target.clone());
    if !path.exists() {
        return Err(usage(format!("--target {} does not exist", path.display())));
    }
    let run_id = args.run_id.as_deref().map(parse_run_id).transpose()?;
    let bs = args
        .bs
        .as_deref()
        .map(|b| block_size("bs", b))
        .transpose()?;
    let stop =
        iolab_runner::signals::install().map_err(|e| CliError::Failed(format!("signals: {e}")))?;
    let progress = Progress::new(Duration::ZERO, args.quiet || args.json);
    let mut on_progress = |n: u64| progress.phase("verify", format_bytes(n));
    let mut text = format!("iolab verify · {}\n", path.display());
    let (report, source, expected_run, block) = match &args.journal {
        Some(jp) => {
            // The journal says what every block must hold and which blocks to read.
            for (given, name) in [
                (args.generation.is_some(), "--generation"),
                (args.size.is_some(), "--size"),
            ] {
                if given {
                    return Err(usage(format!(
                        "{name}: not with --journal, which says what every block must hold"
                    )));
                }
            }
            let j = Journal::read(jp).map_err(usage)?;
            if let Some(r) = run_id.filter(|r| *r != j.run_id) {
                return Err(usage(format!(
                    "--run-id {r:016x}: the journal is of run {:016x}",
                    j.run_id
                )));
            }
            if let Some(b) = bs.filter(|b| *b != j.block_size) {
                return Err(usage(format!(
                    "--bs {b}: the journal says blocks of {} bytes",
                    j.block_size
                )));
            }
            text.push_str(&j.describe());
            let r = check_with_journal(&path, &j, &stop, &mut on_progress).map_err(check_error)?;
            (
                r,
                format!("journal {}", jp.display()),
                j.run_id,
                j.block_size,
            )
        }
        None => {
            let size = args
                .size
                .as_deref()
                .map(|s| parse_size("size", s))
                .transpose()?;
            let given = Given {
                run_id,
                bs,
                generation: args.generation,
                size,
            };
            let e = expectation(&path, given).map_err(usage)?;
            text.push_str(&format!(
                "Expected: run {:016x}, {} blocks, {} (from {})\n",
                e.run_id,
                format_bytes(e.block_size),
                match e.generations {
                    Some((lo, hi)) => verified::expected_text(lo, hi),
                    None => "any generation of the run".into(),
                },
                e.source
            ));
            let r = check_file(&path, &e, &stop, &mut on_progress).map_err(check_error)?;
            (r, e.source, e.run_id, e.block_size)
        }
    };
    progress.finish();
    if report.interrupted {
        return Err(CliError::Interrupted);
    }
    let code = if report.tally.failures > 0 || report.appended > 0 {
        EXIT_INTEGRITY
    } else {
        0
    };
    if args.json {
        let doc = serde_json::json!({
            "format": "iolab.verify-check/1",
            "target": path,
            "source": source,
            "run_id": format!("{expected_run:016x}"),
            "block_size": block,
            "journal": args.journal,
            "report": report,
            "exit": code,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("report serializes")
        );
    } else {
        text.push_str(&report.render(args.journal.is_some()));
        print!("{text}");
    }
    Ok(code)
}
