//! `iolab verify`: the check is iolab-workloads' (`verify::later`); this prints it.

use iolab_runner::ExitStatus;
use iolab_runner::RunError;
use iolab_workloads::verify::later::{check, LaterArgs};

pub fn verify(args: LaterArgs) -> Result<ExitStatus, RunError> {
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
        ExitStatus::Integrity
    } else {
        ExitStatus::Ok
    })
}
