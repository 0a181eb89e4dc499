//! How terminal text is laid out and marked: the width lines wrap at, and colour.
//!
//! The binary sets both once ([`set_output`]) from where stdout goes: the terminal's width
//! (at most [`MAX_WIDTH`](crate::MAX_WIDTH)) and colour on a terminal, or the stable layout
//! (100 columns, no colour) in a pipe or a file. [`paint`] colours finished text, so layout
//! never counts escape sequences: the `[CODE]` of a warning and the `Warnings:` heading in
//! yellow, clean *different* verdicts (`different, better` green, `different, worse`
//! red; a confounded `different*` stays plain) and unsafe caveats (`⚠`, `unsafe: ...`) in
//! red.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::terminal::MAX_WIDTH;

/// The narrowest layout: below it tables cannot show a test's name and one value.
pub const MIN_WIDTH: usize = 40;

static WIDTH: AtomicUsize = AtomicUsize::new(MAX_WIDTH);
static COLOR: AtomicBool = AtomicBool::new(false);

/// Lays text out at `width` columns (clamped to [`MIN_WIDTH`]..=[`MAX_WIDTH`]) and colours
/// it with [`paint`] when `color`.
pub fn set_output(width: usize, color: bool) {
    WIDTH.store(clamped(width), Ordering::Relaxed);
    COLOR.store(color, Ordering::Relaxed);
}

fn clamped(width: usize) -> usize {
    width.clamp(MIN_WIDTH, MAX_WIDTH)
}

/// The width terminal text is laid out at.
pub fn width() -> usize {
    WIDTH.load(Ordering::Relaxed)
}

/// Whether [`paint`] colours.
pub fn color() -> bool {
    COLOR.load(Ordering::Relaxed)
}

const YELLOW: &str = "\x1b[33m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const BOLD_RED: &str = "\x1b[1;31m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// `text` with warnings, significant changes and unsafe caveats coloured, when colour is
/// on ([`set_output`]); unchanged otherwise.
pub fn paint(text: &str) -> String {
    if !color() {
        return text.to_string();
    }
    paint_always(text)
}

/// [`paint`] whatever the setting.
pub fn paint_always(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&paint_line(line));
    }
    out
}

fn paint_line(line: &str) -> String {
    let t = line.trim_start();
    if t == "Warnings:" || t.starts_with("Warnings ") {
        return format!("{BOLD}{YELLOW}{line}{RESET}");
    }
    let mut s = line.to_string();
    // The code of a warning: `  [PAGE_CACHE] ...` or `  A: [PAGE_CACHE] ...`.
    if let Some(open) = s.find('[') {
        let before = &s[..open];
        let lead_ok = before.trim().is_empty()
            || (before.trim_end().ends_with(':') && before.trim().len() <= 4);
        if let Some(close) = s[open..].find(']').map(|c| open + c) {
            let code = &s[open + 1..close];
            let is_code = code.len() >= 3
                && code
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
            if lead_ok && is_code {
                s = format!(
                    "{}{YELLOW}{}{RESET}{}",
                    &s[..open],
                    &s[open..=close],
                    &s[close + 1..]
                );
            }
        }
    }
    for (word, colour) in [
        ("different, better", GREEN),
        ("different, worse", RED),
        ("⚠ unsafe", BOLD_RED),
        ("unsafe:", BOLD_RED),
    ] {
        s = s.replace(word, &format!("{colour}{word}{RESET}"));
    }
    if !s.contains("⚠ unsafe") {
        s = s.replace('⚠', &format!("{RED}⚠{RESET}"));
    }
    s
}

/// `s` without terminal escape sequences (colours, a progress bar's line clearing): what
/// a reader sees, for measuring and comparing.
pub fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, c) if c.is_ascii_alphabetic() => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_warnings_changes_and_caveats_and_nothing_else() {
        let text =
            "Test  MB/s\nWarnings:\n  [PAGE_CACHE] SEQ1M read: cached [x]\n  A: [BUSY_DEVICE] \
                    vda\n  MB/s  1.0  different, better (p=0.01)\n  IOPS  different, worse (p=0.02)\n| 1 | \
                    barrier=0 | ⚠ unsafe: NO_BARRIER |\n| 2 | ⚠ FAIL |\nplain [lower] text";
        let painted = paint_always(text);
        assert_eq!(plain(&painted), text);
        let lines: Vec<&str> = painted.lines().collect();
        assert_eq!(lines[0], "Test  MB/s");
        assert!(lines[1].starts_with(BOLD));
        assert!(lines[2].starts_with(&format!("  {YELLOW}[PAGE_CACHE]{RESET}")));
        assert!(lines[2].ends_with("[x]"));
        assert!(lines[3].contains(&format!("{YELLOW}[BUSY_DEVICE]")));
        assert!(lines[4].contains(&format!("{GREEN}different, better{RESET}")));
        assert!(lines[5].contains(&format!("{RED}different, worse{RESET}")));
        assert!(lines[6].contains(&format!("{BOLD_RED}⚠ unsafe{RESET}")));
        assert!(lines[7].contains(&format!("{RED}⚠{RESET}")));
        assert_eq!(lines[8], "plain [lower] text");
    }

    #[test]
    fn width_is_clamped_and_colour_off_by_default() {
        assert_eq!(clamped(10), MIN_WIDTH);
        assert_eq!(clamped(80), 80);
        assert_eq!(clamped(300), MAX_WIDTH);
        // No test changes the process-wide setting: the others render at the default.
        assert_eq!(width(), MAX_WIDTH);
        assert_eq!(paint("[PAGE_CACHE]"), "[PAGE_CACHE]");
    }
}
