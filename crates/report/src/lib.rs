//! Reports: how runs are shown to people and programs — terminal tables, the JSON
//! documents, a self-contained HTML report with charts, Markdown and CSV exports, and the
//! comparison and history of several runs.
//!
//! One file per format under [`formats`], as in hyperfine's `export/`, each a
//! [`formats::Format`] in the [`formats::FORMATS`] registry the binary builds its options
//! from: [`json`] builds the machine-readable documents (`iolab.run/1`, described in
//! `docs/json.md`, and `iolab.study/2`), [`html`] the HTML report (split by page part;
//! charts from [`charts`], drawn with plotters' SVG backend), [`markdown`] and [`csv`] the
//! exports. [`terminal`] prints the tables a run and a run listing get on screen,
//! [`compare`] and [`history`] the views of several runs. [`set`]
//! holds what they share: runs grouped into configurations, tests aligned by name, and the
//! metrics. `docs/reports.md` describes every format.
//!
//! Everything here reads [`iolab_measure::RunRecord`]s and returns a `String` or a
//! `serde_json::Value`; nothing writes to a file or a terminal. [`mpi`] reads an MPI run's per-host figures for every format; [`warngroup`] groups a run's warnings by code. [`style`] holds the width
//! terminal text is laid out at and its colouring, set once by the binary.

pub mod charts;
pub mod compare;
pub mod crosscheck;
mod facts;
pub mod formats;
pub mod history;
pub mod mpi;
pub mod presets;
pub mod series;
pub mod series_chart;
pub mod set;
pub mod style;
mod table;
pub mod terminal;
mod text;
pub mod warngroup;

pub use formats::{csv, html, json, markdown};
pub use json::{run_document, to_json_string, SCHEMA};
pub use terminal::{
    render_list, render_run, render_run_with, render_warnings, Detail, ListRow, MAX_WIDTH,
};
pub use text::shell_lines;
