//! The output formats, one file each, and [`FORMATS`], the registry the binary builds its
//! format options from (`iolab report --NAME [FILE]`, `compare`, `history`) and a study
//! writes its reports through.
//!
//! A format is a [`Format`]: its name (the option), its file extension, which views it
//! renders ([`Kind`]: a set of runs, a comparison, a history) with the option's help for
//! each, and `render`. Adding one is its file here and one line in [`FORMATS`] (see "How to
//! add" in ARCHITECTURE.md). The terminal tables are not a format: they are what
//! `compare`, `history` and `show` print when no format is asked for, with their own
//! options (`--verbose`, `--all`).

use iolab_measure::RunRecord;

use crate::compare::Comparison;
use crate::set::{Noise, RunSet};

pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;

/// The formats, in the order their options are listed in `--help`.
pub static FORMATS: &[&dyn Format] = &[
    &html::Html,         // --html: the self-contained page with charts
    &markdown::Markdown, // --markdown: paste-ready tables (report's default)
    &csv::Csv,           // --csv: one row per pass
    &json::Json,         // --json: the run, study, comparison and history documents
];

/// What `iolab report` writes when no format is asked for (to standard output), and what a
/// study prints when it ends.
pub static SCREEN: &dyn Format = &markdown::Markdown;

/// What is rendered: the three views of stored runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `iolab report` and a study's report: runs grouped into configurations.
    Runs,
    /// `iolab compare`.
    Comparison,
    /// `iolab history`.
    History,
}

/// One view, with what rendering it needs.
pub enum View<'a> {
    /// Runs grouped into configurations (one run is a set of one).
    Runs(&'a RunSet),
    /// A comparison of sides, and the iolab version its runs were measured with.
    Comparison {
        comparison: &'a Comparison,
        iolab_version: &'a str,
    },
    /// Runs over time, judged against the noise of their commands.
    History {
        runs: &'a [RunRecord],
        noise: &'a Noise,
        /// The version of the binary that renders it.
        iolab_version: &'a str,
        margin_pct: f64,
    },
}

impl<'a> View<'a> {
    /// The set of runs of a [`View::Runs`].
    pub fn runs(&self) -> Option<&'a RunSet> {
        match self {
            View::Runs(set) => Some(set),
            _ => None,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            View::Runs(_) => Kind::Runs,
            View::Comparison { .. } => Kind::Comparison,
            View::History { .. } => Kind::History,
        }
    }
}

/// What a format is called and which views it renders, with the option's help for each
/// (one paragraph, no final full stop; `None`: it does not render that view).
#[derive(Debug)]
pub struct About {
    /// The option `--NAME [FILE]`, lower case.
    pub name: &'static str,
    /// Its name in a sentence ("HTML report written to ...").
    pub title: &'static str,
    /// The usual file extension, without the dot.
    pub extension: &'static str,
    pub runs: Option<&'static str>,
    pub comparison: Option<&'static str>,
    pub history: Option<&'static str>,
}

/// An output format.
pub trait Format: Sync {
    fn about(&self) -> &'static About;
    /// `view` in this format, ending with a newline; `None` for a kind [`About`] gives no
    /// help for.
    fn render(&self, view: &View<'_>) -> Option<String>;

    fn name(&self) -> &'static str {
        self.about().name
    }
    fn title(&self) -> &'static str {
        self.about().title
    }
    fn extension(&self) -> &'static str {
        self.about().extension
    }
    /// The option's help for a command that renders `kind`, or `None` when this format
    /// does not render `kind`.
    fn help(&self, kind: Kind) -> Option<&'static str> {
        let a = self.about();
        match kind {
            Kind::Runs => a.runs,
            Kind::Comparison => a.comparison,
            Kind::History => a.history,
        }
    }
}

impl std::fmt::Debug for dyn Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The format named `name`.
pub fn find(name: &str) -> Option<&'static dyn Format> {
    FORMATS.iter().copied().find(|f| f.name() == name)
}

/// The formats that render `kind`, with their help for it, in registry order.
pub fn rendering(kind: Kind) -> impl Iterator<Item = (&'static dyn Format, &'static str)> {
    FORMATS
        .iter()
        .filter_map(move |f| f.help(kind).map(|h| (*f, h)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_options_and_every_format_renders_what_it_offers() {
        let mut names: Vec<&str> = FORMATS.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FORMATS.len());
        for f in FORMATS {
            assert!(f
                .name()
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
            assert!(!f.extension().starts_with('.'));
            for k in [Kind::Runs, Kind::Comparison, Kind::History] {
                if let Some(h) = f.help(k) {
                    assert!(!h.ends_with('.'), "{}: {h}", f.name());
                }
            }
        }
        let set = RunSet::per_run(Vec::new());
        for (f, _) in rendering(Kind::Runs) {
            let out = f.render(&View::Runs(&set)).expect("it offers runs");
            assert!(out.ends_with('\n'), "{}", f.name());
        }
        assert!(SCREEN.help(Kind::Runs).is_some());
    }
}
