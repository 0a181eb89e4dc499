//! The `iolab` command line: parses arguments, hands runs to iolab-runner (through the
//! workload registry) and stored results to iolab-report, and exits with the outcome's
//! status.

mod args;
mod commands;
mod crosscheck;
mod error;
mod report_cmd;
mod run_cmd;
mod study;
mod verify_cmd;

use clap::Parser;

fn main() {
    let cli = args::Cli::parse();
    let code = match commands::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("iolab: error: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
