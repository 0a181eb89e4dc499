//! Dispatch of the subcommands, and the small ones: `presets`, `show`, `env`.

use iolab_spec::{expand_preset, format_bytes, JobSpec, Rw, PRESETS};

use crate::args::{Cli, Command, EnvArgs, ShowArgs};
use crate::error::{open_store, CliError};

pub fn dispatch(cli: Cli) -> Result<i32, CliError> {
    match cli.command {
        Command::Run(args) => Ok(crate::run_cmd::run(&args.args).code()),
        Command::Presets => {
            print!("{}", presets_text());
            Ok(0)
        }
        Command::Results(args) => crate::listing::results(args),
        Command::Show(args) => show(args),
        Command::Env(args) => env_command(args),
        Command::ExportFio(args) => Ok(crate::crosscheck::export_fio(&args.args).code()),
        Command::Crosscheck(args) => Ok(crate::crosscheck::crosscheck(&args.args).code()),
        Command::Report(args) => crate::report_cmd::report(args),
        Command::Compare(args) => crate::report_cmd::compare(args),
        Command::History(args) => crate::report_cmd::history(args),
        Command::Study(args) => crate::study::study(args),
        Command::Cleanup(args) => crate::study::cleanup(args),
        Command::Verify(args) => crate::verify_cmd::verify(args),
        Command::Record(args) => crate::record_cmd::record(args),
        Command::Completions(args) => crate::shell::completions(args),
        Command::Man(args) => crate::shell::man(args),
        Command::Delete(args) => crate::delete::delete(args),
        Command::Prune(args) => crate::delete::prune(args),
        Command::Emudisk(cmd) => emudisk(cmd),
    }
}

/// `iolab emudisk serve|ctl` (hidden): the emulated disk's daemon and its control requests.
fn emudisk(cmd: crate::args::EmudiskCommand) -> Result<i32, CliError> {
    use crate::args::EmudiskCommand;
    match cmd {
        EmudiskCommand::Serve { dir, backing, spec } => {
            let args = iolab_emudisk::ServeArgs { dir, backing, spec };
            iolab_emudisk::serve(&args).map_err(CliError::Failed)?;
            Ok(0)
        }
        EmudiskCommand::Ctl { dir, request } => {
            let answer = iolab_emudisk::ctl::request(&dir.join("ctl.sock"), &request.join(" "))
                .map_err(CliError::Failed)?;
            if !answer.is_empty() {
                println!("{answer}");
            }
            Ok(0)
        }
    }
}

/// The widest line `presets` prints: the report's width (the terminal's, or 100 in a pipe)
/// less a margin of two.
fn presets_width() -> usize {
    iolab_report::style::width() - 2
}

/// `text` word-wrapped to [`presets_width`] columns, every line indented by two spaces.
fn indented(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(" ");
    for word in text.split_whitespace() {
        if line.chars().count() + word.chars().count() + 1 > presets_width() {
            out.push_str(&line);
            out.push('\n');
            line = String::from(" ");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

fn presets_text() -> String {
    let mut out = String::new();
    for p in PRESETS {
        out.push_str(&format!("{}\n", p.name));
        out.push_str(&indented(p.summary));
        out.push_str(&format!(
            "  defaults: size {}, {} measured pass(es) of {} s, {} warm-up pass(es)\n",
            format_bytes(p.defaults.size),
            p.defaults.runs,
            p.defaults.duration.as_secs_f64(),
            p.defaults.warmup_passes
        ));
        let example = JobSpec::new(Rw::RandRead, 4096, 1, 1);
        let tests = expand_preset(p.name, Some(&example), false, p.defaults.size)
            .expect("built-in presets expand");
        if p.name != "custom" {
            let mut line = String::from("  tests:");
            for t in &tests {
                let item = format!(
                    " {} ({} bs={} iodepth={} numjobs={});",
                    t.name,
                    t.job.rw,
                    iolab_spec::format_size_short(t.job.bs),
                    t.job.iodepth,
                    t.job.numjobs
                );
                if line.chars().count() + item.chars().count() > presets_width() {
                    out.push_str(&line);
                    out.push('\n');
                    line = String::from("        ");
                }
                line.push_str(&item);
            }
            out.push_str(&line);
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str("Options: --mix adds CrystalDiskMark's 70/30 read/write mix test to cdm rows.\n");
    out.push_str("\nWorkloads (iolab run NAME --target DIR; see docs/workloads.md):\n");
    for w in iolab_workloads::WORKLOADS {
        // The presets are listed above.
        for name in w
            .names()
            .iter()
            .filter(|n| iolab_spec::preset_info(n).is_none())
        {
            out.push_str(&format!("{name}\n"));
            out.push_str(&indented(w.summary(name)));
        }
    }
    out
}

fn show(args: ShowArgs) -> Result<i32, CliError> {
    let store = open_store(&args.db)?;
    let id = if args.run_id == "last" {
        store
            .latest_run_id()?
            .ok_or_else(|| CliError::Failed("no runs stored yet".into()))?
    } else {
        args.run_id.parse::<i64>().map_err(|_| {
            CliError::Usage(format!(
                "run id '{}' is not a number (see `iolab results`)",
                args.run_id
            ))
        })?
    };
    let run = store.load_run(id)?;
    if args.json {
        println!("{}", iolab_report::to_json_string(&run));
    } else {
        print!(
            "{}",
            iolab_report::style::paint(&iolab_report::render_run(&run))
        );
        if !run.env.is_null() {
            match serde_json::from_value::<iolab_env::Environment>(run.env.clone()) {
                Ok(env) => print!("\n{}", iolab_env::render(&env)),
                Err(e) => println!("\n(environment stored in an unreadable form: {e})"),
            }
        }
    }
    Ok(0)
}

fn env_command(a: EnvArgs) -> Result<i32, CliError> {
    if let Some(t) = &a.target {
        if !t.exists() {
            return Err(CliError::Usage(format!(
                "target {} does not exist",
                t.display()
            )));
        }
    }
    let env = iolab_env::capture(a.target.as_deref());
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&env).expect("environment serialises")
        );
    } else {
        print!("{}", iolab_env::render(&env));
    }
    Ok(0)
}
