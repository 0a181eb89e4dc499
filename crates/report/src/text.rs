//! Plain-text building blocks shared by the text formats: number formatting, word wrapping
//! and a column table that fits a width.

use iolab_measure::MetricSummary;

/// Width of a string as printed: characters, not bytes (`µ` and `±` are one column each).
pub(crate) fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` with control characters (newlines, tabs, terminal escapes) replaced by spaces, so
/// that user-supplied names cannot break a table row or drive the terminal.
pub(crate) fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A number that stays readable from 0.001 to 10^7 and beyond: at least three significant
/// digits, no exponent between 0.001 and 10^15, no thousands separators.
/// `1234567`, `3512`, `123`, `45.6`, `1.23`, `0.0123`; non-finite values print as `-`.
pub(crate) fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let a = x.abs();
    if a == 0.0 {
        return "0".to_string();
    }
    if a >= 100.0 {
        return format!("{x:.0}");
    }
    if a < 0.001 {
        return format!("{x:.2e}");
    }
    let magnitude = a.log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    let s = format!("{x:.decimals$}");
    // 0.99996 rounds up to "1.0000" and 99.96 to "100.0": one decimal fewer keeps three
    // significant digits.
    let rounded_up = s
        .trim_start_matches('-')
        .parse::<f64>()
        .is_ok_and(|v| v >= 10f64.powi(magnitude + 1));
    if rounded_up && decimals > 0 {
        let d = decimals - 1;
        format!("{x:.d$}")
    } else {
        s
    }
}

/// A latency given in microseconds, for a cell whose column header names the unit
/// (`p99 µs`): the number alone, in µs at any size, so that a cell never brings a second
/// unit of its own ("p99 µs" over "11.8 ms").
pub(crate) fn lat(us: f64) -> String {
    num(us)
}

/// A latency given in microseconds with its unit, for text outside a µs column: `812 µs`
/// below 10 ms, `11.8 ms` below 10 s, then `12.3 s`.
pub(crate) fn lat_unit(us: f64) -> String {
    if !us.is_finite() {
        "-".to_string()
    } else if us >= 10_000_000.0 {
        format!("{} s", num(us / 1e6))
    } else if us >= 10_000.0 {
        format!("{} ms", num(us / 1000.0))
    } else {
        format!("{} µs", num(us))
    }
}

/// `±0.4%`: the 95% confidence interval's half-width relative to the mean; empty with
/// fewer than two passes (no interval).
pub(crate) fn ci(m: &MetricSummary) -> String {
    if m.n < 2 {
        return String::new();
    }
    let p = iolab_stats::ci_pct(m);
    if !p.is_finite() {
        String::new()
    } else if p < 9.95 {
        format!("±{p:.1}%")
    } else {
        format!("±{p:.0}%")
    }
}

/// A percentage with one decimal.
pub(crate) fn pct1(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "-".to_string()
    }
}

/// A duration in the units people type: `5s`, `1.5s`, `250ms`, `2m`, `90s`.
pub(crate) fn duration(d: std::time::Duration) -> String {
    iolab_spec::format_duration(d)
}

/// Cuts `s` to `w` columns, marking the cut with `…` at the end.
pub(crate) fn truncate_end(s: &str, w: usize) -> String {
    if width(s) <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(w - 1).collect();
    out.push('…');
    out
}

/// Cuts `s` to `w` columns, keeping its end (for paths): `…/deep/dir/file`.
pub(crate) fn truncate_start(s: &str, w: usize) -> String {
    let n = width(s);
    if n <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - (w - 1)));
    out
}

/// A shell command laid out in lines of at most `max` columns, each but the last ended by
/// ` \\` so that the whole still pastes as one command; lines after the first start with
/// `indent` more spaces. Words are split at spaces outside single quotes only (the quoting
/// `iolab ab`'s suggestion uses), so a quoted path stays one word; a word longer
/// than a line gets a line of its own.
pub fn shell_lines(cmd: &str, max: usize, first: &str, indent: &str) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in clean(cmd).chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                cur.push(c);
            }
            ' ' if !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    let rest = format!("{first}{indent}");
    let mut lines: Vec<String> = Vec::new();
    let mut line = first.to_string();
    let mut has_word = false;
    for w in words {
        // Room for " WORD" and the continuation " \\" (2 columns).
        if has_word && width(&line) + 1 + width(&w) + 2 > max {
            lines.push(std::mem::replace(&mut line, rest.clone()));
            has_word = false;
        }
        if has_word {
            line.push(' ');
        }
        line.push_str(&w);
        has_word = true;
    }
    lines.push(line);
    lines.join(" \\\n")
}

/// Wraps `text` into lines of at most `max` columns. The first line starts with `first`,
/// the following ones with `rest`; words longer than a line are split.
pub(crate) fn wrap(text: &str, max: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut has_word = false;
    let mut new_line = |line: &mut String, has_word: &mut bool| {
        lines.push(
            std::mem::replace(line, rest.to_string())
                .trim_end()
                .to_string(),
        );
        *has_word = false;
    };
    for word in clean(text).split_whitespace() {
        let mut chars: Vec<char> = word.chars().collect();
        while !chars.is_empty() {
            let cur = width(&line);
            let sep = usize::from(has_word);
            if cur + sep + chars.len() <= max {
                if has_word {
                    line.push(' ');
                }
                line.extend(chars.drain(..));
                has_word = true;
                break;
            }
            if has_word && width(rest) + chars.len() <= max {
                new_line(&mut line, &mut has_word);
                continue;
            }
            // Longer than a whole line: fill what is left of this one and go on.
            let avail = max.saturating_sub(cur + sep);
            if avail == 0 && has_word {
                new_line(&mut line, &mut has_word);
                continue;
            }
            if has_word {
                line.push(' ');
            }
            let take = avail.clamp(1, chars.len());
            line.extend(chars.drain(..take));
            new_line(&mut line, &mut has_word);
        }
    }
    if has_word || lines.is_empty() {
        lines.push(line.trim_end().to_string());
    }
    lines
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// Space before a column: the normal gap, a tight one (a value's `±` beside it) or a wider
/// one that starts a new block of columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gap {
    Normal,
    Tight,
    Block,
}

impl Gap {
    fn cols(self, compact: bool) -> usize {
        match (self, compact) {
            (Gap::Tight, _) => 1,
            (Gap::Normal, false) => 2,
            (Gap::Normal, true) => 1,
            (Gap::Block, false) => 4,
            (Gap::Block, true) => 2,
        }
    }
}

/// How a column gives up width when the table is too wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shrink {
    /// Never cut.
    Fixed,
    /// Cut the end of the text, down to this many columns.
    End(usize),
    /// Cut the start of the text (paths), down to this many columns.
    Start(usize),
}

/// Drop rank of columns given up before gaps are tightened.
const DROP_EARLY: u8 = u8::MAX;

#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub header: String,
    pub align: Align,
    pub gap: Gap,
    /// 0: always shown; otherwise dropped when the table does not fit, highest first.
    pub drop_rank: u8,
    pub shrink: Shrink,
    /// Left out when no row has anything in it.
    pub hide_empty: bool,
}

impl Column {
    pub fn left(header: &str) -> Self {
        Column {
            header: header.to_string(),
            align: Align::Left,
            gap: Gap::Normal,
            drop_rank: 0,
            shrink: Shrink::Fixed,
            hide_empty: false,
        }
    }
    pub fn right(header: &str) -> Self {
        Column {
            align: Align::Right,
            ..Column::left(header)
        }
    }
    pub fn gap(mut self, gap: Gap) -> Self {
        self.gap = gap;
        self
    }
    /// Dropped when the table does not fit even with tight gaps; higher ranks go first.
    pub fn droppable(mut self, rank: u8) -> Self {
        self.drop_rank = rank.min(DROP_EARLY - 1);
        self
    }
    /// Dropped before gaps are tightened: for columns that repeat what another one says.
    pub fn droppable_early(mut self) -> Self {
        self.drop_rank = DROP_EARLY;
        self
    }
    pub fn shrink(mut self, shrink: Shrink) -> Self {
        self.shrink = shrink;
        self
    }
    pub fn hide_empty(mut self) -> Self {
        self.hide_empty = true;
        self
    }
}

/// A label over a run of columns (`---- Read ----`).
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub label: String,
    pub first: usize,
    pub last: usize,
}

/// Columns, optional spanning labels above the headers, and rows of cells.
#[derive(Debug, Clone, Default)]
pub(crate) struct Table {
    pub columns: Vec<Column>,
    pub spans: Vec<Span>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(columns: Vec<Column>) -> Self {
        Table {
            columns,
            spans: Vec::new(),
            rows: Vec::new(),
        }
    }

    pub fn span(&mut self, label: &str, first: usize, last: usize) {
        self.spans.push(Span {
            label: label.to_string(),
            first,
            last,
        });
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells.iter().map(|c| clean(c)).collect());
    }

    fn natural_width(&self, i: usize) -> usize {
        let cells = self.rows.iter().map(|r| r.get(i).map_or(0, |c| width(c)));
        cells.fold(width(&self.columns[i].header), usize::max)
    }

    fn total(&self, shown: &[usize], widths: &[usize], compact: bool) -> usize {
        shown
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                widths[i]
                    + if k == 0 {
                        0
                    } else {
                        self.columns[i].gap.cols(compact)
                    }
            })
            .sum()
    }

    /// The table as lines of at most `max` columns (unless even its fixed columns alone are
    /// wider). To fit, it drops redundant columns, then tightens the gaps, then drops
    /// optional columns, then cuts shrinkable cells, stopping as soon as it fits.
    pub fn render(&self, max: usize) -> Vec<String> {
        let n = self.columns.len();
        let mut widths: Vec<usize> = (0..n).map(|i| self.natural_width(i)).collect();
        let mut shown: Vec<usize> = (0..n)
            .filter(|&i| {
                !self.columns[i].hide_empty
                    || self
                        .rows
                        .iter()
                        .any(|r| r.get(i).is_some_and(|c| !c.is_empty()))
            })
            .collect();
        // Columns that merely repeat what another one says go before anything is tightened.
        self.drop_while_too_wide(&mut shown, &widths, false, max, DROP_EARLY);
        let compact = self.total(&shown, &widths, false) > max;
        self.drop_while_too_wide(&mut shown, &widths, compact, max, 1);
        // Cut shrinkable columns one character at a time, always the widest, so that long
        // cells share the room left.
        let mut excess = self.total(&shown, &widths, compact).saturating_sub(max);
        while excess > 0 {
            let widest = shown
                .iter()
                .copied()
                .filter(|&i| match self.columns[i].shrink {
                    Shrink::Fixed => false,
                    Shrink::End(min) | Shrink::Start(min) => {
                        widths[i] > min.max(width(&self.columns[i].header)).max(2)
                    }
                })
                .max_by_key(|&i| widths[i]);
            match widest {
                Some(i) => {
                    widths[i] -= 1;
                    excess -= 1;
                }
                None => break,
            }
        }

        let mut out = Vec::new();
        let positions = {
            let mut pos = Vec::with_capacity(shown.len());
            let mut x = 0;
            for (k, &i) in shown.iter().enumerate() {
                if k > 0 {
                    x += self.columns[i].gap.cols(compact);
                }
                pos.push(x);
                x += widths[i];
            }
            pos
        };
        if !self.spans.is_empty() {
            let total = self.total(&shown, &widths, compact);
            let mut line: Vec<char> = vec![' '; total];
            for span in &self.spans {
                let ks: Vec<usize> = shown
                    .iter()
                    .enumerate()
                    .filter(|(_, &i)| i >= span.first && i <= span.last)
                    .map(|(k, _)| k)
                    .collect();
                let (Some(&a), Some(&b)) = (ks.first(), ks.last()) else {
                    continue;
                };
                let start = positions[a];
                let end = positions[b] + widths[shown[b]];
                let w = end - start;
                let label = truncate_end(&format!(" {} ", span.label), w);
                let lw = width(&label);
                let left = (w - lw) / 2;
                for (j, c) in line[start..end].iter_mut().enumerate() {
                    *c = '-';
                    if j >= left && j < left + lw {
                        *c = label.chars().nth(j - left).unwrap_or('-');
                    }
                }
            }
            out.push(line.into_iter().collect::<String>().trim_end().to_string());
        }
        let header: Vec<String> = self.columns.iter().map(|c| c.header.clone()).collect();
        out.push(self.line(&header, &shown, &widths, compact));
        out.push("-".repeat(self.total(&shown, &widths, compact)));
        for row in &self.rows {
            out.push(self.line(row, &shown, &widths, compact));
        }
        out
    }

    /// Drops droppable columns of at least `min_rank`, highest rank first (the rightmost of
    /// equal ranks), until the table fits or none is left.
    fn drop_while_too_wide(
        &self,
        shown: &mut Vec<usize>,
        widths: &[usize],
        compact: bool,
        max: usize,
        min_rank: u8,
    ) {
        while self.total(shown, widths, compact) > max {
            let victim = shown
                .iter()
                .enumerate()
                .filter(|(_, &i)| self.columns[i].drop_rank >= min_rank)
                .max_by_key(|(k, &i)| (self.columns[i].drop_rank, *k))
                .map(|(k, _)| k);
            match victim {
                Some(k) => {
                    shown.remove(k);
                }
                None => break,
            }
        }
    }

    fn line(&self, cells: &[String], shown: &[usize], widths: &[usize], compact: bool) -> String {
        let mut line = String::new();
        for (k, &i) in shown.iter().enumerate() {
            let col = &self.columns[i];
            if k > 0 {
                line.push_str(&" ".repeat(col.gap.cols(compact)));
            }
            let w = widths[i];
            let raw = cells.get(i).map(String::as_str).unwrap_or("");
            let cell = match col.shrink {
                Shrink::Start(_) => truncate_start(raw, w),
                _ => truncate_end(raw, w),
            };
            let pad = " ".repeat(w - width(&cell));
            match col.align {
                Align::Left => {
                    line.push_str(&cell);
                    line.push_str(&pad);
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(&cell);
                }
            }
        }
        line.trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_three_significant_digits() {
        let cases = [
            (0.0, "0"),
            (0.01, "0.0100"),
            (0.0123, "0.0123"),
            (0.123, "0.123"),
            (1.234, "1.23"),
            (12.34, "12.3"),
            (99.99, "100"),
            (0.99999, "1.00"),
            (9.9999, "10.0"),
            (123.4, "123"),
            (3512.6, "3513"),
            (1_234_567.0, "1234567"),
            (10_000_000.0, "10000000"),
            (f64::NAN, "-"),
        ];
        for (x, want) in cases {
            assert_eq!(num(x), want, "{x}");
        }
        assert_eq!(num(0.00012), "1.20e-4");
        // In a µs column a latency is µs, however large.
        assert_eq!(lat(9_999.0), "9999");
        assert_eq!(lat(12_345.0), "12345");
        assert_eq!(lat(1_234_567.0), "1234567");
        // Outside one it carries exactly one unit.
        assert_eq!(lat_unit(812.4), "812 µs");
        assert_eq!(lat_unit(12_345.0), "12.3 ms");
        assert_eq!(lat_unit(1_234_567.0), "1235 ms");
        assert_eq!(lat_unit(12_345_678.0), "12.3 s");
        assert_eq!(lat_unit(f64::NAN), "-");
    }

    #[test]
    fn durations_read_like_input() {
        use std::time::Duration;
        assert_eq!(duration(Duration::from_secs(5)), "5s");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration(Duration::from_millis(250)), "250ms");
        assert_eq!(duration(Duration::from_secs(120)), "2m");
        assert_eq!(duration(Duration::from_secs(90)), "90s");
        assert_eq!(duration(Duration::ZERO), "0s");
    }

    #[test]
    fn a_shell_command_wraps_at_spaces_outside_quotes_and_stays_one_command() {
        let cmd = "iolab ab --label-a before-ab cdm --target '/mnt/my disk/x' --size 8MiB -- \
                   cdm --target '/mnt/my disk/x' --size 8MiB";
        let out = shell_lines(cmd, 30, "  ", "  ");
        for l in out.lines() {
            assert!(width(l) <= 30, "{l}");
        }
        // Joined back (continuations removed) it is the same command, quotes intact.
        let joined: Vec<&str> = out
            .lines()
            .map(|l| l.trim().trim_end_matches('\\').trim_end())
            .collect();
        assert_eq!(joined.join(" "), cmd);
        assert!(out.contains("'/mnt/my disk/x'"));
        assert!(out.lines().next().unwrap().starts_with("  iolab ab"));
        assert!(out.lines().nth(1).unwrap().starts_with("    "));
        // A short command is one line, no continuation.
        assert_eq!(
            shell_lines("iolab ab a -- b", 80, "", "  "),
            "iolab ab a -- b"
        );
    }

    #[test]
    fn wrap_respects_width_and_splits_long_words() {
        let text = "a b ".repeat(60) + &"x".repeat(250);
        let lines = wrap(&text, 40, "- ", "  ");
        assert!(lines.iter().all(|l| width(l) <= 40), "{lines:#?}");
        assert!(lines[0].starts_with("- a b"));
        assert!(lines[1..].iter().all(|l| l.starts_with("  ")));
        let joined: String = lines.concat().chars().filter(|c| *c == 'x').collect();
        assert_eq!(joined.len(), 250);
        assert_eq!(wrap("", 10, "> ", "  "), vec![">"]);
        assert_eq!(wrap("µµµµ µµ", 6, "", ""), vec!["µµµµ", "µµ"]);
        assert_eq!(wrap("a\x1b[31mb\nc", 20, "", ""), vec!["a [31mb c"]);
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_end("abcdef", 4), "abc…");
        assert_eq!(truncate_start("/a/b/c/d", 5), "…/c/d");
        assert_eq!(truncate_end("abc", 4), "abc");
    }

    #[test]
    fn table_fits_by_tightening_dropping_and_cutting() {
        let mut t = Table::new(vec![
            Column::left("Name").shrink(Shrink::End(6)),
            Column::right("A"),
            Column::right("B").droppable(1),
        ]);
        t.row(vec!["x".repeat(30), "1".into(), "22".into()]);
        t.row(vec!["two\nlines".into(), "\t".into(), String::new()]);
        let wide = t.render(100);
        assert_eq!(wide.len(), 4);
        assert!(wide[3].starts_with("two lines"));
        assert!(wide[2].ends_with("1  22"));
        let narrow = t.render(20);
        assert!(narrow.iter().all(|l| width(l) <= 20), "{narrow:#?}");
        assert!(!narrow[0].contains('B'));
        assert!(narrow[2].contains('…'));
    }

    #[test]
    fn spans_label_their_columns() {
        let mut t = Table::new(vec![
            Column::left("T"),
            Column::right("MB/s"),
            Column::right("IOPS"),
        ]);
        t.span("Read", 1, 2);
        t.row(vec!["x".into(), "1".into(), "2".into()]);
        let lines = t.render(100);
        assert!(lines[0].contains("Read"), "{lines:#?}");
        assert!(lines[0].starts_with("   -"));
    }
}
