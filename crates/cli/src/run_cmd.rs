//! `iolab run`: the command line parsed through the workload registry (iolab-workloads),
//! the job run by iolab-runner, and what the run ends with printed.

use std::io::Write;

use iolab_report::Detail;
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
    if let Some(var) = launched_by_mpi() {
        return run_mpi(args, var);
    }
    let reg = registry();
    match parse("iolab run", &reg, args) {
        Ok(parsed) => {
            let json = parsed.common.json.clone();
            let detail = detail(&parsed);
            // Registry::parse has checked --repeat.
            match parsed.common.repeat().unwrap_or(1) {
                1 => print_finished(
                    &execute(parsed),
                    json.as_deref(),
                    json.as_deref() == Some("-"),
                    detail,
                ),
                n => repeat(&reg, args, parsed, n, json.as_deref()),
            }
        }
        Err(status) => status,
    }
}

/// `--repeat N`: every repetition printed as it finishes (its JSON only inside the
/// series' document), then the summary across the runs and the series' document.
fn repeat(
    reg: &Registry,
    args: &[String],
    first: Parsed,
    n: u32,
    json: Option<&str>,
) -> ExitStatus {
    let to_stdout = json == Some("-");
    let detail = detail(&first);
    let series = iolab_runner::repeat::run(
        first,
        n,
        || match reg.parse("iolab run", args) {
            Ok(p) => Ok(p),
            Err(ParseError::Usage(u)) => Err(u),
            Err(ParseError::Clap(e)) => Err(iolab_runner::UsageError::general(e.to_string())),
        },
        |i, f| {
            let head = format!("=== run {i} of {n} ===\n");
            if to_stdout {
                eprint!("{head}");
            } else {
                print!("{head}");
            }
            print_finished(f, None, to_stdout, detail);
        },
    );
    let text = series.render();
    if to_stdout {
        eprint!("{text}");
    } else {
        print!("{}", iolab_report::style::paint(&text));
    }
    let mut status = series.status;
    if let Some(dest) = json {
        let docs = series
            .runs
            .iter()
            .filter_map(|f| f.run.as_ref())
            .map(iolab_report::run_document)
            .collect();
        let doc = serde_json::to_string_pretty(&series.document(docs))
            .expect("a serde_json::Value always serialises");
        if dest == "-" {
            println!("{doc}");
        } else if let Err(e) = std::fs::write(dest, doc + "\n") {
            eprintln!("iolab: error: cannot write JSON to {dest}: {e}");
            status = status.worst(ExitStatus::Failed);
        }
    }
    if let Some(e) = &series.error {
        eprintln!("iolab: error: {e}");
    }
    let _ = std::io::stdout().flush();
    status
}

/// Prints a finished run (its report, where it was stored, the JSON document, what the
/// workload adds, the integrity verdict and the error) and returns its status; the text
/// goes to stderr when stdout carries JSON.
fn print_finished(
    f: &Finished,
    json: Option<&str>,
    text_to_stderr: bool,
    detail: Detail,
) -> ExitStatus {
    let text_out = |t: &str| {
        if text_to_stderr {
            eprint!("{t}");
        } else {
            print!("{}", iolab_report::style::paint(t));
        }
    };
    let mut status = f.status;
    if let Some(run) = &f.run {
        text_out(&iolab_report::render_run_with(run, detail));
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

/// How much of a finished run's warnings to print: every one with `--verbose`, else one
/// line a code.
fn detail(parsed: &Parsed) -> Detail {
    if parsed.common.verbose {
        Detail::Full
    } else {
        Detail::Summary
    }
}

/// The variable an MPI launcher (Open MPI's mpirun, MPICH's hydra, Slurm's srun with PMI)
/// gives the processes it starts, when one is set.
fn launched_by_mpi() -> Option<&'static str> {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMIX_RANK",
        "PMI_RANK",
        "PMI_SIZE",
        "MPI_LOCALNRANKS",
    ]
    .into_iter()
    .find(|v| std::env::var_os(v).is_some())
}

/// Started by an MPI launcher, without MPI built in: every rank would run alone and store
/// its own run.
#[cfg(not(feature = "mpi"))]
fn run_mpi(_args: &[String], var: &str) -> ExitStatus {
    eprintln!(
        "iolab: error: started by an MPI launcher ({var} is set), and this iolab is built \
         without MPI, so each rank would run alone; rebuild with `cargo build --release \
         --features mpi` (docs/mpi.md), or run iolab without mpirun/srun"
    );
    ExitStatus::Usage
}

/// One rank of a multi-host run (docs/mpi.md): every rank parses the same command line and
/// runs rank 0's plan; rank 0 stores and prints the run, the other ranks print only their
/// own errors.
#[cfg(feature = "mpi")]
fn run_mpi(args: &[String], _var: &str) -> ExitStatus {
    use iolab_runner::mpi::Rank;
    let mut rank = match Rank::init() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("iolab: error: MPI: {e}");
            return ExitStatus::Failed;
        }
    };
    let me = rank.rank();
    let reg = registry();
    let mut parsed = match reg.parse("iolab run", args) {
        Ok(p) => p,
        Err(e) => {
            // Every rank parses the same command line: rank 0 says why.
            let status = match me {
                0 => report_parse_error(e),
                _ => ExitStatus::Usage,
            };
            rank.refuse("its command line was refused".into());
            return status;
        }
    };
    if parsed.common.repeat().unwrap_or(1) > 1 {
        if me == 0 {
            eprintln!("iolab: error: --repeat: does not run under MPI yet; give one run");
        }
        rank.refuse("--repeat does not run under MPI".into());
        return ExitStatus::Usage;
    }
    let json = parsed.common.json.clone();
    let detail = detail(&parsed);
    if me != 0 {
        parsed.common.no_store = true;
        parsed.common.quiet = true;
        parsed.common.json = None;
    }
    let stop = match iolab_runner::signals::install() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("iolab: error: signals: {e}");
            rank.refuse(format!("signals: {e}"));
            return ExitStatus::Failed;
        }
    };
    rank.watch(std::sync::Arc::clone(&stop));
    let host = iolab_runner::Coordinator::host(&rank).to_string();
    let mut finished = iolab_runner::execute_with(parsed, stop, Box::new(rank));
    let status = if me == 0 {
        print_finished(
            &finished,
            json.as_deref(),
            json.as_deref() == Some("-"),
            detail,
        )
    } else {
        if let Some(e) = &finished.error {
            eprintln!("iolab: rank {me} on {host}: error: {e}");
        }
        finished.status
    };
    // Every rank waits here until rank 0 has printed: a rank that exits early with a
    // non-zero status makes mpirun end rank 0 mid-print.
    finished.part();
    status
}
