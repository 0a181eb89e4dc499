//! `iolab verify`: the check is iolab-workloads' (`verify::later`); this prints it.

use iolab_runner::ExitStatus;
use iolab_workloads::verify::later::{check, LaterArgs};

use crate::error::CliError;

pub fn verify(args: LaterArgs) -> Result<i32, CliError> {
    let checked = check(&args)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&checked.doc).expect("report serializes")
        );
    } else {
        print!("{}", checked.text);
    }
    Ok(if checked.mismatch {
        ExitStatus::Integrity.code()
    } else {
        0
    })
}
