//! The `iolab` command line: parses arguments, hands runs to iolab-runner (through the
//! workload registry) and stored results to iolab-report, and exits with the outcome's
//! status.

mod ab_cmd;
mod args;
mod commands;
mod crosscheck;
mod delete;
mod error;
mod listing;
mod push;
mod record_cmd;
mod report_cmd;
mod run_cmd;
mod serve_cmd;
mod shell;
mod study;
mod term;
mod verify_cmd;

use std::io::Write;

use clap::Parser;

fn main() {
    error::quiet_broken_pipe();
    iolab_workloads::install();
    let (argv, color) = match term::take_color(std::env::args_os().collect()) {
        Ok(v) => v,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "iolab: error: {e}");
            std::process::exit(e.status().code());
        }
    };
    term::setup(color);
    let cli = args::Cli::parse_from(argv);
    let outcome =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| commands::dispatch(cli)));
    let code = match outcome {
        Ok(status) => status.code(),
        Err(panic) => error::end_after_panic(panic),
    };
    std::process::exit(code);
}
