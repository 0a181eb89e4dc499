//! `iolab completions SHELL` and `iolab man [DIR]`: generated from the clap definitions,
//! with `run`, `export-fio` and `crosscheck` replaced by the workload registry's command
//! (one subcommand per workload with its options), which the fixed grammar cannot know.

use iolab_runner::RunError;
use std::io::Write;
use std::path::Path;

use clap::{Command, CommandFactory};

use crate::args::{Cli, CompletionsArgs, ManArgs};

/// The whole command tree: the fixed commands, and the registry's workloads under the
/// commands that take a workload.
pub fn full_command() -> Command {
    let reg = iolab_workloads::registry();
    let mut cmd = Cli::command();
    for name in ["run", "export-fio", "crosscheck"] {
        let about = cmd
            .find_subcommand(name)
            .and_then(|c| c.get_about().cloned());
        let mut sub = reg.command(&format!("iolab {name}")).name(name);
        if let Some(about) = about {
            sub = sub.about(about);
        }
        cmd = cmd.mut_subcommand(name, |_| sub);
    }
    cmd
}

pub fn completions(args: CompletionsArgs) -> Result<(), RunError> {
    let mut cmd = full_command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "iolab", &mut out);
    write_stdout(&out)?;
    Ok(())
}

/// The page of `cmd` called `name` (`iolab`, `iolab-run`, `iolab-run-cdm`).
fn page(cmd: &Command, name: &str) -> Result<Vec<u8>, RunError> {
    let cmd = cmd
        .clone()
        .name(name.to_string())
        .display_name(name.to_string());
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .section("1")
        .source(format!("iolab {}", env!("CARGO_PKG_VERSION")))
        .manual("iolab manual")
        .render(&mut out)
        .map_err(|e| RunError::caused(format!("cannot render the man page {name}"), e))?;
    Ok(out)
}

/// Every page: the top one, one per subcommand and one per workload under `run`.
fn pages() -> Result<Vec<(String, Vec<u8>)>, RunError> {
    let mut cmd = full_command();
    cmd.build();
    let mut out = vec![("iolab".to_string(), page(&cmd, "iolab")?)];
    // Hidden commands (the emudisk daemon the tests and studies start) get no page.
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        let name = format!("iolab-{}", sub.get_name());
        out.push((name.clone(), page(sub, &name)?));
        if sub.get_name() == "run" {
            for w in sub.get_subcommands() {
                let wname = format!("{name}-{}", w.get_name());
                out.push((wname.clone(), page(w, &wname)?));
            }
        }
    }
    Ok(out)
}

pub fn man(args: ManArgs) -> Result<(), RunError> {
    let pages = pages()?;
    let Some(dir) = args.dir else {
        write_stdout(&pages[0].1)?;
        return Ok(());
    };
    make_dir(&dir)?;
    for (name, text) in &pages {
        let path = dir.join(format!("{name}.1"));
        write_file(&path, text)?;
    }
    println!("wrote {} man pages to {}", pages.len(), dir.display());
    Ok(())
}

/// `iolab man DIR`'s directory: an existing one is used as it is; a missing one (and its
/// missing parents) is made mode 0755 whatever the umask, since man pages are for every user
/// of the machine to read.
fn make_dir(dir: &Path) -> Result<(), RunError> {
    match std::fs::symlink_metadata(dir) {
        Ok(_) if dir.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(RunError::usage(format!(
                "{} exists and is not a directory",
                dir.display()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(RunError::usage(format!("{}: {e}", dir.display())));
        }
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        make_dir(parent)?;
    }
    match iolab_sys::files::create_dir_with_mode(dir, 0o755) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(RunError::caused(
            format!("cannot create the directory {}", dir.display()),
            e,
        )),
    }
}

fn write_file(path: &Path, text: &[u8]) -> Result<(), RunError> {
    std::fs::write(path, text)
        .map_err(|e| RunError::caused(format!("cannot write {}", path.display()), e))
}

/// Prints `bytes` (UTF-8: clap writes text); a closed pipe ends the process as it ends
/// `cat` (see `error::end_after_panic`).
fn write_stdout(bytes: &[u8]) -> Result<(), RunError> {
    print!("{}", String::from_utf8_lossy(bytes));
    let _ = std::io::stdout().flush();
    Ok(())
}
