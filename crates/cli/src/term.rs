//! Where stdout goes, once per process: the width terminal text is laid out at and whether
//! it is coloured (`--color auto|always|never`, `NO_COLOR`), handed to iolab-report's
//! `style`.

use iolab_runner::RunError;
use std::ffi::OsString;
use std::io::IsTerminal;

use crate::args::ColorChoice;

/// `args` without `--color WHEN` / `--color=WHEN` (anywhere: `iolab run cdm --color never`
/// hands the rest to the workload registry, which does not know it), and the last WHEN.
pub fn take_color(args: Vec<OsString>) -> Result<(Vec<OsString>, ColorChoice), RunError> {
    let mut kept = Vec::with_capacity(args.len());
    let mut choice = ColorChoice::Auto;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let value = match a.to_str() {
            Some("--color") => {
                Some(it.next().ok_or_else(|| {
                    RunError::usage("--color needs a value: auto, always or never")
                })?)
            }
            Some(s) if s.starts_with("--color=") => Some(OsString::from(&s["--color=".len()..])),
            // Everything after `--` is an operand.
            Some("--") => {
                kept.push(a);
                kept.extend(it.by_ref());
                break;
            }
            _ => None,
        };
        match value {
            Some(v) => {
                choice = match v.to_str() {
                    Some("auto") => ColorChoice::Auto,
                    Some("always") => ColorChoice::Always,
                    Some("never") => ColorChoice::Never,
                    _ => {
                        return Err(RunError::usage(format!(
                            "--color '{}': use auto, always or never",
                            v.to_string_lossy()
                        )))
                    }
                }
            }
            None => kept.push(a),
        }
    }
    Ok((kept, choice))
}

/// Whether `NO_COLOR` asks for no colour (set and not empty, as no-color.org says).
fn no_color_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// Sets the report's width and colour from stdout and `choice`: on a terminal its width
/// (the report caps and floors it) and colour unless `NO_COLOR`; otherwise the stable
/// 100-column layout and no colour. `--color always|never` wins over both.
pub fn setup(choice: ColorChoice) {
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    let width = if tty {
        terminal_size::terminal_size_of(&stdout)
            .map(|(w, _)| w.0 as usize)
            .filter(|w| *w > 0)
            .unwrap_or(iolab_report::MAX_WIDTH)
    } else {
        iolab_report::MAX_WIDTH
    };
    let color = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => tty && !no_color_env(),
    };
    iolab_report::style::set_output(width, color);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn color_is_taken_from_anywhere_but_after_double_dash() {
        let (rest, c) =
            take_color(args(&["iolab", "run", "cdm", "--color", "never", "-q"])).unwrap();
        assert_eq!(rest, args(&["iolab", "run", "cdm", "-q"]));
        assert!(matches!(c, ColorChoice::Never));
        let (rest, c) = take_color(args(&["iolab", "--color=always", "results"])).unwrap();
        assert_eq!(rest, args(&["iolab", "results"]));
        assert!(matches!(c, ColorChoice::Always));
        let (rest, c) = take_color(args(&["iolab", "x", "--", "--color", "never"])).unwrap();
        assert_eq!(rest, args(&["iolab", "x", "--", "--color", "never"]));
        assert!(matches!(c, ColorChoice::Auto));
        assert!(take_color(args(&["iolab", "--color", "sometimes"])).is_err());
        assert!(take_color(args(&["iolab", "results", "--color"])).is_err());
    }
}
