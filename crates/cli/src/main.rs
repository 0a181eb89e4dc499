//! The `iolab` command line: parses arguments and dispatches to the run, listing and
//! display commands. Measuring lives in iolab-engine, keeping in iolab-store, printing in
//! iolab-report.

mod args;
mod commands;
mod crosscheck;
mod environment;
mod progress;
mod report_cmd;
mod run;
mod scrub_cmd;
mod signals;
mod study;
mod verify_cmd;
mod workloads;

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
