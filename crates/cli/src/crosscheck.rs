//! `iolab export-fio` and `iolab crosscheck`: their own arguments (`--output`, `--job`), the
//! work in iolab-workloads (`crosscheck`), the table and JSON in iolab-report.

use iolab_runner::{ExitStatus, RunError};
use iolab_workloads::crosscheck::{export_fio as job_text, Crosscheck};

use crate::error::Outcome;
use crate::run_cmd::report_parse_error;

/// Takes `FLAG VALUE` or `FLAG=VALUE` out of `args`: Ok(None) when absent, Err when the
/// value is missing.
fn take_value(args: &mut Vec<String>, flags: &[&str], what: &str) -> Result<Option<String>, ()> {
    let missing = || eprintln!("iolab: error: {} needs {what}", flags[0]);
    for (i, a) in args.iter().enumerate() {
        let value = if let Some(v) = flags.iter().find_map(|f| a.strip_prefix(&format!("{f}="))) {
            let v = v.to_string();
            args.remove(i);
            v
        } else if flags.contains(&a.as_str()) && i + 1 < args.len() {
            args.remove(i);
            args.remove(i)
        } else if flags.contains(&a.as_str()) {
            String::new()
        } else {
            continue;
        };
        if value.is_empty() {
            missing();
            return Err(());
        }
        return Ok(Some(value));
    }
    Ok(None)
}

/// `iolab export-fio`: prints (or writes with `--output`) the fio job file of a preset.
pub fn export_fio(args: &[String]) -> ExitStatus {
    let mut args = args.to_vec();
    let Ok(output) = take_value(&mut args, &["--output", "-o"], "a FILE") else {
        return ExitStatus::Usage;
    };
    let text = match job_text(&args) {
        Ok(t) => t,
        Err(e) => return report_parse_error(e),
    };
    match &output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("iolab: error: cannot write {path}: {e}");
                return ExitStatus::Failed;
            }
        }
        None => print!("{text}"),
    }
    ExitStatus::Ok
}

/// `iolab crosscheck PRESET [options]` or `iolab crosscheck --job FILE [options]`.
pub fn crosscheck(args: &[String]) -> ExitStatus {
    let mut args = args.to_vec();
    let Ok(job) = take_value(&mut args, &["--job"], "a JOBFILE") else {
        return ExitStatus::Usage;
    };
    let check = match &job {
        Some(file) => Crosscheck::job_file(file, &args),
        None => Crosscheck::preset(&args),
    };
    let check = match check {
        Ok(c) => c,
        Err(e) => return report_parse_error(e),
    };
    let json = check.common.json.clone();
    let result = check.run().and_then(|(rows, heading)| {
        let text = iolab_report::crosscheck::text(&heading, &rows);
        let doc = iolab_report::crosscheck::json(&rows).to_string();
        match json.as_deref() {
            Some("-") => println!("{doc}"),
            Some(path) => {
                print!("{text}");
                std::fs::write(path, doc)
                    .map_err(|e| RunError::caused(format!("cannot write {path}"), e))?;
            }
            None => print!("{text}"),
        }
        Ok(())
    });
    result.status()
}
