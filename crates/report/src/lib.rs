//! Reports: how runs are shown to people and programs — terminal tables, the JSON
//! documents, a self-contained HTML report with charts, Markdown and CSV exports, and the
//! comparison and history of several runs.
//!
//! One module per format, as in hyperfine's `export/`: [`terminal`] prints the tables a run
//! and a run listing get on screen, [`json`] builds the machine-readable documents
//! (`iolab.run/1`, described in `docs/json.md`, and `iolab.study/1`), [`html`] the HTML
//! report (charts from [`charts`], drawn with plotters' SVG backend), [`markdown`] and
//! [`csv`] the exports, [`compare`] and [`history`] the views of several runs. [`set`]
//! holds what they share: runs grouped into configurations, tests aligned by name, and the
//! metrics. `docs/reports.md` describes every format.
//!
//! Everything here reads [`iolab_measure::RunRecord`]s and returns a `String` or a
//! `serde_json::Value`; nothing writes to a file or a terminal.

use std::fmt;
use std::str::FromStr;

use iolab_measure::RunRecord;

pub mod charts;
pub mod compare;
pub mod csv;
mod facts;
pub mod history;
pub mod html;
pub mod json;
pub mod markdown;
pub mod set;
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
    /// The self-contained HTML report ([`html::render`]).
    Html,
    /// Markdown tables ([`markdown::render`]).
    Markdown,
    /// CSV, one row per pass ([`csv::render`]).
    Csv,
}

impl Format {
    /// Every format, in the order `--format` help lists them.
    pub const ALL: &'static [Format] = &[
        Format::Terminal,
        Format::Json,
        Format::Html,
        Format::Markdown,
        Format::Csv,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Terminal => "terminal",
            Format::Json => "json",
            Format::Html => "html",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
        }
    }

    /// The run rendered in this format, ending with a newline (ready for `print!`).
    pub fn render(self, run: &RunRecord) -> String {
        match self {
            Format::Terminal => render_run(run),
            Format::Json => to_json_string(run) + "\n",
            Format::Html => html::render(&set::RunSet::per_run(vec![run.clone()])),
            Format::Markdown => markdown::render(&set::RunSet::per_run(vec![run.clone()])),
            Format::Csv => csv::render_runs(std::slice::from_ref(run)),
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
            "html" => Ok(Format::Html),
            "markdown" | "md" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
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
        assert_eq!("md".parse::<Format>().unwrap(), Format::Markdown);
        let err = "yaml".parse::<Format>().unwrap_err();
        assert!(err.to_string().contains("terminal, json"));
    }
}
