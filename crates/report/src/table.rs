//! The table model the terminal, Markdown and HTML formats share where they show the same
//! table: columns with their alignment and rows of plain text cells. Each format escapes
//! and lays it out its own way (`text::Table` on the terminal, `markdown::table_of`,
//! `html::table`).
//!
//! Used for the tables whose content is the same in every format: an MPI run's per-host
//! figures (terminal, Markdown, HTML) and the workload facts tables of a comparison
//! (Markdown, HTML). The results, ratio and score tables are not built on it: each format
//! shows them differently (the terminal's directions and dropped columns, HTML's verdict
//! marks with their evidence in a title, bold best values), so a shared model would only
//! carry one format's choices into the others.

pub(crate) use crate::text::Align;

/// A table: a header per column with its alignment, and rows of cells (plain text, one
/// per column).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub columns: Vec<(String, Align)>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An MPI run's figures: per test, each host's rate and all hosts together.
    pub(crate) fn mpi_hosts(p: &crate::mpi::PerHost) -> Table {
        Table {
            columns: vec![
                ("Test".into(), Align::Left),
                ("Host".into(), Align::Left),
                ("Ranks".into(), Align::Right),
                (p.unit.clone(), Align::Right),
            ],
            rows: crate::mpi::rows(p).into_iter().map(Vec::from).collect(),
        }
    }

    /// A facts table of a comparison (space per small file, scrub counts): its row names,
    /// then one column per configuration.
    pub(crate) fn facts(set: &crate::set::RunSet, t: &crate::set::FactTable) -> Table {
        let mut columns = vec![(t.corner.clone(), Align::Left)];
        columns.extend(set.configs.iter().map(|c| (c.label.clone(), Align::Right)));
        let rows = t
            .rows
            .iter()
            .map(|(name, cells)| {
                let mut r = vec![name.clone()];
                r.extend(cells.iter().cloned());
                r
            })
            .collect();
        Table { columns, rows }
    }

    /// The terminal's layout of it.
    pub(crate) fn to_text(&self) -> crate::text::Table {
        use crate::text::Column;
        let mut t = crate::text::Table::new(
            self.columns
                .iter()
                .map(|(h, a)| match a {
                    Align::Left => Column::left(h),
                    Align::Right => Column::right(h),
                })
                .collect(),
        );
        for r in &self.rows {
            t.row(r.clone());
        }
        t
    }
}
