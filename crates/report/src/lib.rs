//! Reports: how a run is shown to people and programs — terminal tables and the JSON document.
//!
//! One module per format, as in hyperfine's `export/`: [`terminal`] prints the tables a run
//! and a run listing get on screen, [`json`] builds the machine-readable document
//! (`schema = "iolab.run/1"`, keys described in `docs/json.md`). Further formats (HTML,
//! Markdown, CSV) go beside them as new modules and new [`Format`] variants.
//!
//! Everything here reads a [`iolab_measure::RunRecord`] and returns a `String` or a
//! `serde_json::Value`; nothing writes to a file or a terminal.

use std::fmt;
use std::str::FromStr;

use iolab_measure::RunRecord;

pub mod json;
pub mod terminal;
mod text;

pub use json::{run_document, to_json_string, SCHEMA};
pub use terminal::{render_list, render_run, ListRow, MAX_WIDTH};

/// An output format for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain-text tables, at most [`MAX_WIDTH`] characters wide.
    Terminal,
    /// The pretty-printed JSON document of [`run_document`].
    Json,
}

impl Format {
    /// Every format, in the order `--format` help lists them.
    pub const ALL: &'static [Format] = &[Format::Terminal, Format::Json];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Terminal => "terminal",
            Format::Json => "json",
        }
    }

    /// The run rendered in this format, ending with a newline (ready for `print!`).
    pub fn render(self, run: &RunRecord) -> String {
        match self {
            Format::Terminal => render_run(run),
            Format::Json => to_json_string(run) + "\n",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown format name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
        write!(
            f,
            "unknown format '{}' (known: {})",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownFormat {}

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "terminal" | "text" | "table" => Ok(Format::Terminal),
            "json" => Ok(Format::Json),
            _ => Err(UnknownFormat(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), *f);
        }
        assert_eq!("TEXT".parse::<Format>().unwrap(), Format::Terminal);
        let err = "yaml".parse::<Format>().unwrap_err();
        assert!(err.to_string().contains("terminal, json"));
    }
}
