//! Removes what testbeds of dead processes left behind: `cleanup_all [STATE_DIR]` (default:
//! /run/iolab for root, else $XDG_RUNTIME_DIR/iolab). Prints the report; exits 1 if something
//! could not be removed.

fn main() {
    let dir = match std::env::args_os().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => match iolab_testbed::StateFile::default_dir() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
    };
    let report = iolab_testbed::cleanup_all(&dir);
    print!("{report}");
    if !report.is_clean() {
        std::process::exit(1);
    }
}
