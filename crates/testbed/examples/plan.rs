//! Prints what building a testbed would run: `plan SPEC.toml` (the TOML is one testbed
//! table, as in docs/testbeds.md). Exits 2 if the spec does not parse or validate.

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: plan SPEC.toml");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{}: {e}", path.to_string_lossy());
            std::process::exit(2);
        }
    };
    let spec: iolab_testbed::TestbedSpec = match toml::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}: {e}", path.to_string_lossy());
            std::process::exit(2);
        }
    };
    if let Err(e) = iolab_testbed::validate(&spec) {
        eprintln!("{e}");
        std::process::exit(2);
    }
    for line in iolab_testbed::plan(&spec) {
        println!("{line}");
    }
}
