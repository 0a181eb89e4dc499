//! Prints what `iolab_env::capture` sees: `cargo run -p iolab-env --example env -- [--json] [PATH]`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let target = args
        .iter()
        .find(|a| *a != "--json")
        .map(std::path::PathBuf::from);
    let env = iolab_env::capture(target.as_deref());
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&env).expect("serialisable")
        );
    } else {
        print!("{}", iolab_env::render(&env));
    }
}
