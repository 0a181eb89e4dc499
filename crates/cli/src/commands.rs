//! Dispatch of the subcommands, and the small ones: `presets`, `show`, `env`.

use crate::args::{Cli, Command, EnvArgs, ShowArgs};
use crate::error::{open_store, Outcome};
use iolab_runner::{ExitStatus, RunError};

/// Runs the command and says how it ended; an error is printed here (`iolab: error: ...`).
pub fn dispatch(cli: Cli) -> ExitStatus {
    match cli.command {
        Command::Run(args) => crate::run_cmd::run(&args.args),
        Command::Presets => {
            print!("{}", presets_text());
            ExitStatus::Ok
        }
        Command::Results(args) => crate::listing::results(args).status(),
        Command::Show(args) => show(args).status(),
        Command::Env(args) => env_command(args).status(),
        Command::ExportFio(args) => crate::crosscheck::export_fio(&args.args),
        Command::Crosscheck(args) => crate::crosscheck::crosscheck(&args.args),
        Command::Report(args) => crate::report_cmd::report(args).status(),
        Command::Compare(args) => crate::report_cmd::compare(args).status(),
        Command::History(args) => crate::report_cmd::history(args).status(),
        Command::Study(args) => crate::study::study(args).status(),
        Command::Ab(args) => crate::ab_cmd::ab(args).status(),
        Command::Cleanup(args) => crate::study::cleanup(args).status(),
        Command::Verify(args) => crate::verify_cmd::verify(args).status(),
        Command::Record(args) => crate::record_cmd::record(args).status(),
        Command::Serve(args) => crate::serve_cmd::serve(args).status(),
        Command::Completions(args) => crate::shell::completions(args).status(),
        Command::Man(args) => crate::shell::man(args).status(),
        Command::Delete(args) => crate::delete::delete(args).status(),
        Command::Prune(args) => crate::delete::prune(args).status(),
        Command::Push(args) => crate::push::push(args).status(),
        Command::Emudisk(cmd) => emudisk(cmd).status(),
    }
}

/// `iolab emudisk serve|ctl` (hidden): the emulated disk's daemon and its control requests.
fn emudisk(cmd: crate::args::EmudiskCommand) -> Result<(), RunError> {
    use crate::args::EmudiskCommand;
    match cmd {
        EmudiskCommand::Serve { dir, backing, spec } => {
            let args = iolab_emudisk::ServeArgs { dir, backing, spec };
            iolab_emudisk::serve(&args).map_err(RunError::from_error)?;
            Ok(())
        }
        EmudiskCommand::Ctl { dir, request } => {
            let answer = iolab_emudisk::ctl::request(&dir.join("ctl.sock"), &request.join(" "))
                .map_err(RunError::from_error)?;
            if !answer.is_empty() {
                println!("{answer}");
            }
            Ok(())
        }
    }
}

/// `iolab presets`: the presets, then every other workload of the registry.
fn presets_text() -> String {
    let workloads: Vec<(&str, &str)> = iolab_workloads::WORKLOADS
        .iter()
        .flat_map(|w| w.names().iter().map(move |n| (*n, w.summary(n))))
        .collect();
    iolab_report::presets::text(&workloads)
}

fn show(args: ShowArgs) -> Result<(), RunError> {
    let store = open_store(&args.db)?;
    let id = args.run_id.resolve(&store)?;
    let run = store.load_run(id)?;
    if args.series {
        return show_series(&args, &run);
    }
    if args.json {
        println!("{}", iolab_report::to_json_string(&run));
    } else if args.warnings {
        print!(
            "{}",
            iolab_report::style::paint(&iolab_report::render_warnings(&run))
        );
    } else {
        let detail = if args.verbose {
            iolab_report::Detail::Full
        } else {
            iolab_report::Detail::Summary
        };
        print!(
            "{}",
            iolab_report::style::paint(&iolab_report::render_run_with(&run, detail))
        );
        if !run.env.is_null() {
            match serde_json::from_value::<iolab_env::Environment>(run.env.clone()) {
                Ok(env) => print!("\n{}", iolab_env::render(&env)),
                Err(e) => println!("\n(environment stored in an unreadable form: {e})"),
            }
        }
    }
    Ok(())
}

/// `show N --series --fio-log PREFIX`: fio's bw, iops and lat logs of every test, windows
/// of `ms`; the files written listed, the logs a test's record cannot give said on stderr.
fn write_fio_logs(run: &iolab_measure::RunRecord, prefix: &str, ms: u64) -> Result<(), RunError> {
    use iolab_workloads::fio::logs;
    let wanted = logs::for_run(run, prefix, ms);
    if let Some(why) = logs::unfit_prefix(prefix, &wanted) {
        return Err(RunError::usage(format!("--fio-log {prefix}: {why}")));
    }
    let w = logs::write(run, &wanted).map_err(|e| RunError::usage(e.to_string()))?;
    for f in &w.files {
        println!("{}", f.display());
    }
    for s in &w.skipped {
        eprintln!("iolab: not written: {s}");
    }
    if w.files.is_empty() {
        return Err(RunError::usage(format!(
            "--fio-log {prefix}: run {} has no series a log can be written from",
            run.uuid
        )));
    }
    Ok(())
}

/// `show N --series`: the run's per-interval throughput as a table, CSV or JSON.
fn show_series(args: &ShowArgs, run: &iolab_measure::RunRecord) -> Result<(), RunError> {
    let text = args.interval.as_deref().unwrap_or("1s");
    let interval = iolab_spec::parse_duration("interval", text)
        .map_err(|e| RunError::usage(format!("--interval {text}: {e}")))?;
    let ms = interval.as_millis() as u64;
    iolab_report::series::check_interval(run, ms).map_err(|e| RunError::usage(e.to_string()))?;
    use iolab_report::series;
    if let Some(prefix) = &args.fio_log {
        return write_fio_logs(run, prefix, ms);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&series::json(run, ms)).expect("JSON serialises")
        );
    } else if args.csv {
        print!("{}", series::csv(run, ms));
    } else {
        print!("{}", series::text(run, ms));
    }
    Ok(())
}

fn env_command(a: EnvArgs) -> Result<(), RunError> {
    if let Some(t) = &a.target {
        if !t.exists() {
            return Err(RunError::usage(format!(
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
    Ok(())
}
