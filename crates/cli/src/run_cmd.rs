//! `iolab run`: the command line parsed through the workload registry (iolab-workloads),
//! the job run by iolab-runner, and what the run ends with printed.

use std::io::Write;

use iolab_runner::{execute, ExitStatus, Finished, ParseError, Parsed, Registry};

/// The registry `iolab run` (and `iolab study`) parse workloads with.
pub fn registry() -> Registry {
    iolab_workloads::registry()
}

/// Parses `args` (after `run`) as `bin` does; prints and maps a refusal to its status.
pub fn parse(bin: &str, reg: &Registry, args: &[String]) -> Result<Parsed, ExitStatus> {
    reg.parse(bin, args).map_err(report_parse_error)
}

/// Prints why a command line was not accepted; the status to exit with.
pub fn report_parse_error(e: ParseError) -> ExitStatus {
    match e {
        ParseError::Clap(e) => {
            let _ = e.print();
            if e.exit_code() == 0 {
                ExitStatus::Ok
            } else {
                ExitStatus::Usage
            }
        }
        ParseError::Usage(u) => {
            eprintln!("iolab: error: {u}");
            ExitStatus::Usage
        }
    }
}

pub fn run(args: &[String]) -> ExitStatus {
    let reg = registry();
    match parse("iolab run", &reg, args) {
        Ok(parsed) => {
            let json = parsed.common.json.clone();
            report(execute(parsed), json.as_deref())
        }
        Err(status) => status,
    }
}

/// Prints a finished run (its report, where it was stored, the JSON document, what the
/// workload adds, the integrity verdict and the error) and returns its status.
pub fn report(f: Finished, json: Option<&str>) -> ExitStatus {
    let to_stdout = json == Some("-");
    let text_out = |t: &str| {
        if to_stdout {
            eprint!("{t}");
        } else {
            print!("{t}");
        }
    };
    let mut status = f.status;
    if let Some(run) = &f.run {
        text_out(&iolab_report::render_run(run));
        if let Some((id, path)) = &f.stored {
            text_out(&format!("stored as run {id} in {}\n", path.display()));
        }
        if let Some(dest) = json {
            let doc = iolab_report::to_json_string(run);
            if dest == "-" {
                println!("{doc}");
            } else if let Err(e) = std::fs::write(dest, doc + "\n") {
                eprintln!("iolab: error: cannot write JSON to {dest}: {e}");
                status = status.worst(ExitStatus::Failed);
            }
        }
    }
    text_out(&f.epilogue);
    let _ = std::io::stdout().flush();
    if let Some(msg) = &f.integrity {
        eprintln!("iolab: integrity: {msg}");
    }
    if let Some(e) = &f.error {
        eprintln!("iolab: error: {e}");
    }
    status
}
