//! A run's warnings grouped by code, one group per code, ordered by how much the code
//! changes what the numbers mean: wrong data first, then unsafe and cache-bound numbers
//! (NO_BARRIER, PAGE_CACHE...), then the environment, noise last. Every format that
//! summarises warnings (the HTML report's panel; the details stay one line each) uses it.

use iolab_measure::{Warning, WarningCode};

/// The warnings of one code.
#[derive(Debug, Clone)]
pub struct Group<'a> {
    pub code: &'a WarningCode,
    /// The warnings of this code, in the run's order, with their index in the run's list.
    pub items: Vec<(usize, &'a Warning)>,
    /// The tests named, each once, in order of appearance.
    pub tests: Vec<&'a str>,
    /// Whether a warning of this code is about the whole run.
    pub run_wide: bool,
}

/// How far up a code's group goes: [`WarningCode::weight`] (declared once, with the codes;
/// the terminal's summary orders by it too): data wrong, unsafe, cache, setup, noise last.
pub fn severity(code: &WarningCode) -> iolab_measure::Weight {
    code.weight()
}

/// `warnings` grouped by code, most serious first (codes of one severity in the order
/// docs/warnings.md lists them; unknown codes after the known ones of their class).
pub fn group(warnings: &[Warning]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    for (i, w) in warnings.iter().enumerate() {
        let g = match groups.iter_mut().position(|g| *g.code == w.code) {
            Some(k) => &mut groups[k],
            None => {
                groups.push(Group {
                    code: &w.code,
                    items: Vec::new(),
                    tests: Vec::new(),
                    run_wide: false,
                });
                groups.last_mut().expect("just pushed")
            }
        };
        g.items.push((i, w));
        match &w.test {
            Some(t) if !g.tests.contains(&t.as_str()) => g.tests.push(t),
            Some(_) => {}
            None => g.run_wide = true,
        }
    }
    let order = |c: &WarningCode| {
        (
            severity(c),
            WarningCode::ALL
                .iter()
                .position(|k| k == c)
                .unwrap_or(usize::MAX),
        )
    };
    groups.sort_by_key(|g| order(g.code));
    groups
}

/// Where a group applies: `the run`, `SEQ1M Q8T1 Read`, `2 of 8 tests: A, B`, `5 of 8
/// tests` (the details name them), `all 8 tests`.
pub fn scope(g: &Group<'_>, tests_in_run: usize) -> String {
    let mut parts = Vec::new();
    if g.run_wide {
        parts.push("the run".to_string());
    }
    match g.tests.as_slice() {
        [] => {}
        [t] => parts.push((*t).to_string()),
        ts if ts.len() >= tests_in_run => parts.push(format!("all {} tests", ts.len())),
        ts if ts.len() > 3 => parts.push(format!("{} of {} tests", ts.len(), tests_in_run)),
        ts => parts.push(format!(
            "{} of {} tests: {}",
            ts.len(),
            tests_in_run.max(ts.len()),
            ts.join(", ")
        )),
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(code: WarningCode, test: Option<&str>) -> Warning {
        Warning {
            code,
            message: "m".into(),
            fix: String::new(),
            test: test.map(str::to_string),
        }
    }

    #[test]
    fn one_group_per_code_most_serious_first() {
        let ws = vec![
            w(WarningCode::NotConverged, Some("A")),
            w(WarningCode::BusyCpu, Some("A")),
            w(WarningCode::NotConverged, Some("B")),
            w(WarningCode::PageCache, None),
            w(WarningCode::NotConverged, Some("A")),
        ];
        let g = group(&ws);
        let codes: Vec<&str> = g.iter().map(|g| g.code.as_str()).collect();
        assert_eq!(codes, ["PAGE_CACHE", "BUSY_CPU", "NOT_CONVERGED"]);
        assert_eq!(g[2].items.len(), 3);
        assert_eq!(g[2].tests, ["A", "B"]);
        assert_eq!(scope(&g[2], 8), "2 of 8 tests: A, B");
        assert_eq!(scope(&g[2], 2), "all 2 tests");
        assert_eq!(scope(&g[0], 8), "the run");
        assert_eq!(scope(&g[1], 8), "A");
    }
}
