//! `iolab run verify` (verified writes, stored like any workload) and `iolab verify` (the
//! later check from the sidecar or, after a crash, from the journal; it only reads).

use std::sync::Arc;
use std::time::Duration;

use iolab_integrity::journal::{check_separate_filesystems, Journal};
use iolab_integrity::verified::{
    self, check_file, check_with_journal, expectation, CheckError, CheckReport, Given,
};
use iolab_integrity::Failure;
use iolab_measure::TargetInfo;
use iolab_spec::{format_bytes, parse_size};
use iolab_workloads::verify::{DataTarget, VerifyConfig, VerifyMode};

use clap::Args;
use iolab_runner::options::{BsArg, BufferedArg, RunsArg, SafetyArgs, SizeArg};
use iolab_runner::progress::Progress;
use iolab_runner::{
    plain_settings, CommonArgs, Def, ExitStatus, Job, RunContext, RunError, RunStart, UsageError,
};

use crate::args::VerifyArgs;
use crate::commands::CliError;

/// Exit status when a block does not hold what was written (or an acknowledged write
/// was lost).
pub const EXIT_INTEGRITY: i32 = 3;

/// `run verify`'s entry in the registry.
pub static WORKLOAD: Def<VerifyOptions> = Def::new(
    &["verify"],
    "verified writes: self-describing blocks (offset, run id, generation, crc32c) over --size \
     in --bs blocks, --rw write|randwrite, --runs passes, read back --verify-mode \
     inline|after|both|none; --journal PATH for `iolab verify` after a crash; exit 3 on any \
     mismatch",
    plan,
);

/// Options of `iolab run verify`.
#[derive(Args, Debug, Clone)]
pub struct VerifyOptions {
    #[command(flatten)]
    pub size: SizeArg,
    #[command(flatten)]
    pub bs: BsArg,
    /// How the blocks are written: write (sequential, default) or randwrite.
    #[arg(long)]
    pub rw: Option<String>,
    #[command(flatten)]
    pub runs: RunsArg,
    /// When blocks are read back: inline (every --verify-every blocks as they are written),
    /// after (the whole region after each pass; default), both, none.
    #[arg(long, value_name = "MODE")]
    pub verify_mode: Option<String>,
    /// Read back every Nth block written (inline mode; default 16).
    #[arg(long, value_name = "N")]
    pub verify_every: Option<u64>,
    /// fdatasync every N blocks (default 64 with --journal, else none).
    #[arg(long, value_name = "N", alias = "fsync")]
    pub fsync_every: Option<u64>,
    /// Keep the data file and its sidecar for a later `iolab verify`.
    #[arg(long)]
    pub keep: bool,
    /// Intent/ack journal, on another filesystem than the target, for `iolab verify
    /// --journal` after a crash (see docs/integrity.md).
    #[arg(long, value_name = "PATH")]
    pub journal: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub buffered: BufferedArg,
    #[command(flatten)]
    pub safety: SafetyArgs,
}

struct VerifyJob {
    cfg: VerifyConfig,
    keep: bool,
    size_given: bool,
    safety: SafetyArgs,
}

fn plan(_name: &str, a: VerifyOptions, _c: &CommonArgs) -> Result<Box<dyn Job>, UsageError> {
    let cfg = config(&a)?;
    Ok(Box::new(VerifyJob {
        cfg,
        keep: a.keep,
        size_given: a.size.size.is_some(),
        safety: a.safety,
    }))
}
/// Default region and block size of `iolab run verify`.
const DEFAULT_SIZE: u64 = 256 << 20;
const DEFAULT_BS: u64 = 4096;
/// Default blocks between fdatasyncs when a journal is kept.
const DEFAULT_JOURNAL_FSYNC_EVERY: u64 = 64;
/// Failures printed one by one.
const PRINTED_FAILURES: usize = 20;

fn usage(e: String) -> CliError {
    CliError::Usage(e)
}

fn block_size(field: &str, text: &str) -> Result<u64, UsageError> {
    let bs = parse_size(field, text)?;
    if bs < 512 || bs % 512 != 0 || bs > 64 << 20 {
        return Err(UsageError::option(
            field,
            format!(
                "--{field} {text}: verified blocks are a multiple of 512 bytes, 512 B .. 64 MiB"
            ),
        ));
    }
    Ok(bs)
}

/// The resolved configuration of `iolab run verify`, before anything is created.
fn config(a: &VerifyOptions) -> Result<VerifyConfig, UsageError> {
    let bs = match &a.bs.bs {
        Some(b) => block_size("bs", b)?,
        None => DEFAULT_BS,
    };
    let size = a.size.get()?.unwrap_or(DEFAULT_SIZE);
    if size < bs || size % bs != 0 {
        return Err(UsageError::option(
            "size",
            format!("--size {size}: must be a positive multiple of --bs ({bs} bytes)"),
        ));
    }
    let random = match a.rw.as_deref() {
        None | Some("write") => false,
        Some("randwrite") => true,
        Some(other) => {
            return Err(UsageError::option(
                "rw",
                format!("--rw '{other}': verify writes: write or randwrite"),
            ))
        }
    };
    let passes = a.runs.get(1)?;
    let mode = match (a.verify_mode.as_deref(), a.verify_every) {
        (Some(m), _) => VerifyMode::parse(m).ok_or_else(|| {
            UsageError::option(
                "verify-mode",
                format!("--verify-mode '{m}': expected inline, after, both or none"),
            )
        })?,
        // Asking for a read-back interval asks for inline checks.
        (None, Some(_)) => VerifyMode::Both,
        (None, None) => VerifyMode::After,
    };
    if a.verify_every == Some(0) {
        return Err(UsageError::option(
            "verify-every",
            "--verify-every must be at least 1",
        ));
    }
    if let Some(j) = &a.journal {
        if j.exists() {
            return Err(UsageError::option(
                "journal",
                format!(
                    "--journal {}: already exists; iolab creates a new journal for every run",
                    j.display()
                ),
            ));
        }
    }
    let fsync_every = match a.fsync_every {
        Some(n) => n,
        None if a.journal.is_some() => DEFAULT_JOURNAL_FSYNC_EVERY,
        None => 0,
    };
    if a.journal.is_some() && fsync_every == 0 {
        return Err(UsageError::option(
            "fsync-every",
            "--fsync-every 0 with --journal: acknowledgements need fsyncs",
        ));
    }
    Ok(VerifyConfig {
        size,
        bs: bs as usize,
        random,
        passes,
        mode,
        verify_every: a.verify_every.unwrap_or(16),
        fsync_every,
        journal: a
            .journal
            .as_ref()
            .map(|j| std::path::absolute(j).unwrap_or_else(|_| j.clone())),
        direct: !a.buffered.buffered,
        run_id: fastrand::u64(1..),
    })
}

fn failure_line(f: &Failure) -> String {
    let mut line = format!(
        "  offset {} [{}] {}; expected {} ({})",
        f.offset, f.class, f.found, f.expected, f.phase
    );
    if let Some(s) = f.acked_before_end_s {
        line.push_str(&format!(
            "; acknowledged {s:.3} s before the journal's last record"
        ));
    }
    line
}

fn print_failures(out: &mut String, count: u64, failures: &[Failure]) {
    for f in failures.iter().take(PRINTED_FAILURES) {
        out.push_str(&failure_line(f));
        out.push('\n');
    }
    if count > PRINTED_FAILURES as u64 {
        out.push_str(&format!(
            "  ... and {} more (see failure_samples in the JSON)\n",
            count - PRINTED_FAILURES as u64
        ));
    }
}

impl Job for VerifyJob {
    fn run(self: Box<Self>, ctx: &mut RunContext) -> Result<(), RunError> {
        let VerifyJob {
            mut cfg,
            keep,
            size_given,
            safety,
        } = *self;
        let target_path = ctx.common.target.clone();
        if let Some(j) = &cfg.journal {
            check_separate_filesystems(j, &target_path)
                .map_err(|m| RunError::Usage(UsageError::option("journal", m)))?;
        }
        let mut target = DataTarget::prepare(
            &target_path,
            cfg.size,
            size_given,
            safety.allow_overwrite_file,
            safety.allow_destroy_device,
        )
        .map_err(|m| RunError::Usage(UsageError::option("target", m)))?;
        // A journal describes the data: both stay for `iolab verify --journal`.
        target.keep = keep || cfg.journal.is_some() || !target.created;
        cfg.size = target.size - target.size % cfg.bs as u64;
        let info = TargetInfo {
            path: ctx.common.target_abs().to_string_lossy().into_owned(),
            // As the engine names targets: what the user gave, not what iolab made in it.
            kind: if target_path.is_dir() {
                iolab_measure::TargetKind::Dir
            } else {
                target.kind.clone()
            },
            io_path: target.path.to_string_lossy().into_owned(),
            fs_type: iolab_env::capture(Some(&target.path))
                .target
                .and_then(|t| t.fs_type)
                .unwrap_or_else(|| "unknown".into()),
            size: cfg.size,
        };
        ctx.start(RunStart {
            preset: "verify".into(),
            workload: "verify".into(),
            target: info,
            settings: plain_settings(cfg.size, Duration::ZERO, cfg.passes, cfg.direct),
            notes: Vec::new(),
            env_path: target.path.clone(),
        })?;
        let out = {
            let progress = &ctx.progress;
            iolab_workloads::verify::run(&cfg, &target, &ctx.stop, &mut |label, n| {
                progress.phase(label, format_bytes(n))
            })
            .map_err(RunError::Failed)?
        };
        let tally = out.tally;
        // Stopped before a pass finished: nothing was measured.
        if !out.test.passes.is_empty() {
            ctx.add_tests(vec![out.test])?;
        }
        let mut text = String::new();
        if target.created && target.keep {
            text.push_str(&format!(
                "data kept: {} (run id {:016x}); check it later with `iolab verify --target {}{}`\n",
                target.path.display(),
                cfg.run_id,
                target.path.display(),
                cfg.journal
                    .as_ref()
                    .map(|j| format!(" --journal {}", j.display()))
                    .unwrap_or_default()
            ));
        }
        if tally.failures > 0 {
            text.push_str(&format!(
                "integrity: {} of {} checked blocks do not hold what was written:\n",
                tally.failures, tally.checked
            ));
            print_failures(&mut text, tally.failures, &tally.failure_samples);
            ctx.raise(ExitStatus::Integrity);
        }
        ctx.epilogue(&text);
        Ok(())
    }
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
            text.push_str(&journal_lines(&j));
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
    let code = if report.tally.failures > 0 {
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
        text.push_str(&report_lines(&report, args.journal.is_some()));
        print!("{text}");
    }
    Ok(code)
}

fn journal_lines(j: &Journal) -> String {
    format!(
        "Journal:  {}: run {:016x}, {} blocks, {} records over {:.3} s, {}{}\n",
        j.path.display(),
        j.run_id,
        format_bytes(j.block_size),
        j.records,
        j.last_ns.saturating_sub(j.first_ns) as f64 / 1e9,
        match j.ended {
            Some(n) => format!("ended normally after {n} pass(es)"),
            None => "no end record (the writer stopped or crashed)".into(),
        },
        if j.torn_tail > 0 {
            format!(
                "; {} byte(s) after the last whole record ignored (an append cut by the crash)",
                j.torn_tail
            )
        } else {
            String::new()
        }
    )
}

fn report_lines(r: &CheckReport, journal: bool) -> String {
    let t = &r.tally;
    let mut out = r
        .note
        .as_ref()
        .map(|n| format!("Note:     {n}\n"))
        .unwrap_or_default();
    out.push_str(&format!(
        "Read:     {} in {:.3} s ({:.0} MB/s){}\n",
        format_bytes(r.bytes),
        r.seconds,
        r.bytes as f64 / 1e6 / r.seconds.max(1e-9),
        if r.direct {
            ", O_DIRECT"
        } else {
            ", buffered (the filesystem refused O_DIRECT)"
        }
    ));
    let classes = t.failed_classes();
    out.push_str(&format!(
        "Checked:  {} blocks: {} ok, {} failed{}\n",
        t.checked,
        t.ok,
        t.failures,
        if classes.is_empty() {
            String::new()
        } else {
            format!(" ({})", classes.join(", "))
        }
    ));
    if journal {
        out.push_str(&format!(
            "Acked:    {} acknowledged blocks checked; {} lost acknowledged write(s)\n",
            r.acked, r.lost_acked
        ));
        out.push_str(&format!(
            "In flight: {} blocks with an intent but no ack (old or new, not failures): {} \
             new, {} old, {} torn between them\n",
            r.in_flight, r.in_flight_new, r.in_flight_old, r.in_flight_torn
        ));
    }
    if t.failures > 0 {
        out.push_str("Failures:\n");
        print_failures(&mut out, t.failures, &t.failure_samples);
        out.push_str(&format!(
            "Result:   FAILED: {} block(s) do not hold what was written{} (exit {EXIT_INTEGRITY})\n",
            t.failures,
            if r.lost_acked > 0 {
                format!(", {} of them lost acknowledged writes", r.lost_acked)
            } else {
                String::new()
            }
        ));
    } else {
        out.push_str("Result:   OK: every checked block holds what was written\n");
    }
    out
}

/// `--verify` on `run streams --rw write`: the streams write verified blocks and every
/// file is checked before removal (the counts land in each test's `extra.verify`).
pub fn streams_verify(cfg: &mut iolab_workloads::streams::StreamsConfig) -> Result<(), UsageError> {
    if cfg.rw != iolab_spec::Rw::Write {
        return Err(UsageError::option(
            "verify",
            "--verify checks what streams write: give --rw write",
        ));
    }
    let st = verified::Stamper::new(fastrand::u64(1..), cfg.bs as u64, cfg.file_size).ok_or_else(
        || {
            UsageError::option(
                "verify",
                format!(
                    "--verify: --bs ({}) and --size ({}) must be multiples of 512 bytes",
                    cfg.bs, cfg.file_size
                ),
            )
        },
    )?;
    cfg.verify = Some(iolab_workloads::streams::VerifyHook {
        fill: Arc::new(move |buf, offset| st.fill(buf, offset)),
        check: Arc::new(move |path| st.check(path)),
    });
    Ok(())
}
