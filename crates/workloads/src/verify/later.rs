//! `iolab verify`: the later check of data `iolab run verify` wrote, from the sidecar or,
//! after a crash, from the journal. It only reads. Its options are declared here, with the
//! check; the binary parses them, calls [`check`] and prints.

use std::path::PathBuf;
use std::time::Duration;

use iolab_integrity::journal::Journal;
use iolab_integrity::verified::{
    self, check_file, check_with_journal, expectation, CheckError, Given,
};
use iolab_runner::progress::Progress;
use iolab_runner::{RunError, UsageError};
use iolab_spec::{format_bytes, parse_size};

use super::run::block_size;

/// The options of `iolab verify`.
#[derive(clap::Args, Debug)]
pub struct LaterArgs {
    /// The data file or device the run wrote.
    #[arg(long, short = 't', value_name = "PATH")]
    pub target: PathBuf,
    /// The run's journal: every acknowledged block is checked, blocks in flight are
    /// reported separately.
    #[arg(long, value_name = "PATH")]
    pub journal: Option<PathBuf>,
    /// Run id (hex, as the run printed it); checked against the sidecar or journal, needed
    /// without either when the first block is damaged.
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    /// Block size, when there is neither a sidecar nor a readable first block.
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<String>,
    /// Expect every block at this generation (default: the sidecar's).
    #[arg(long, value_name = "N")]
    pub generation: Option<u64>,
    /// Bytes to check from the start (default: the sidecar's region, else the whole file
    /// or device).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// What the check found: the text to print, the JSON document, and whether a block does
/// not hold what was written (or an acknowledged write was lost).
pub struct Checked {
    pub text: String,
    pub doc: serde_json::Value,
    pub mismatch: bool,
}

fn usage(option: &str, message: String) -> RunError {
    RunError::Usage(UsageError::option(option, message))
}

/// Bad input is a usage error (exit 2), a read error of the target a failure (exit 1).
fn check_error(e: CheckError) -> RunError {
    match e {
        CheckError::Input(e) => RunError::usage(e.to_string()),
        CheckError::Io(e) => RunError::from_error(e),
    }
}

fn parse_run_id(text: &str) -> Result<u64, RunError> {
    let t = text.trim_start_matches("0x");
    u64::from_str_radix(t, 16).map_err(|_| {
        usage(
            "run-id",
            format!("--run-id '{text}': expected a hexadecimal run id"),
        )
    })
}

/// Checks `args.target` against its sidecar, first block or journal.
pub fn check(args: &LaterArgs) -> Result<Checked, RunError> {
    let path = std::path::absolute(&args.target).unwrap_or_else(|_| args.target.clone());
    if !path.exists() {
        return Err(usage(
            "target",
            format!("--target {} does not exist", path.display()),
        ));
    }
    let run_id = args.run_id.as_deref().map(parse_run_id).transpose()?;
    let bs = args
        .bs
        .as_deref()
        .map(|b| block_size("bs", b))
        .transpose()?;
    let stop = iolab_runner::signals::install().map_err(|e| RunError::caused("signals", e))?;
    let progress = Progress::new(Duration::ZERO, args.quiet || args.json);
    let mut on_progress = |n: u64| progress.phase("verify", format_bytes(n));
    let mut text = format!("iolab verify · {}\n", path.display());
    let (report, source, expected_run, block) = match &args.journal {
        Some(jp) => {
            // The journal says what every block must hold and which blocks to read.
            for (given, name) in [
                (args.generation.is_some(), "generation"),
                (args.size.is_some(), "size"),
            ] {
                if given {
                    return Err(usage(
                        name,
                        format!(
                            "--{name}: not with --journal, which says what every block must hold"
                        ),
                    ));
                }
            }
            let j = Journal::read(jp).map_err(|e| RunError::usage(e.to_string()))?;
            if let Some(r) = run_id.filter(|r| *r != j.run_id) {
                return Err(usage(
                    "run-id",
                    format!("--run-id {r:016x}: the journal is of run {:016x}", j.run_id),
                ));
            }
            if let Some(b) = bs.filter(|b| *b != j.block_size) {
                return Err(usage(
                    "bs",
                    format!(
                        "--bs {b}: the journal says blocks of {} bytes",
                        j.block_size
                    ),
                ));
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
                .transpose()
                .map_err(|e| RunError::Usage(e.into()))?;
            let given = Given {
                run_id,
                bs,
                generation: args.generation,
                size,
            };
            let e = expectation(&path, given).map_err(|e| RunError::usage(e.to_string()))?;
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
        return Err(RunError::Interrupted);
    }
    let mismatch = report.tally.failures > 0 || report.appended > 0;
    let doc = serde_json::json!({
        "format": "iolab.verify-check/1",
        "target": path,
        "source": source,
        "run_id": format!("{expected_run:016x}"),
        "block_size": block,
        "journal": args.journal,
        "report": report,
        "exit": if mismatch { iolab_runner::ExitStatus::Integrity.code() } else { 0 },
    });
    text.push_str(&report.render(args.journal.is_some()));
    Ok(Checked {
        text,
        doc,
        mismatch,
    })
}
