//! docs/warnings.md and `WarningCode` never disagree: the file's codes section is what
//! `WarningCode::docs_markdown` renders. After changing a code, its text or its caveat, run
//! `IOLAB_UPDATE_DOCS=1 cargo test -p iolab-measure --test warning_docs` to rewrite it.

use iolab_measure::{WarningCode, DOCS_BEGIN, DOCS_END};
use std::path::PathBuf;

fn warnings_md() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/warnings.md")
}

#[test]
fn docs_warnings_md_lists_every_code_as_the_enum_says() {
    let path = warnings_md();
    let text = std::fs::read_to_string(&path).expect("docs/warnings.md");
    let begin = text
        .find(DOCS_BEGIN)
        .expect("docs/warnings.md has the generated codes section's first line");
    let end = text[begin..]
        .find(DOCS_END)
        .map(|i| begin + i + DOCS_END.len())
        .expect("docs/warnings.md has the generated codes section's last line");
    // The section as rendered ends with a newline after DOCS_END.
    let end = end + usize::from(text[end..].starts_with('\n'));
    let want = WarningCode::docs_markdown();
    if text[begin..end] == want {
        return;
    }
    if std::env::var_os("IOLAB_UPDATE_DOCS").is_some() {
        let new = format!("{}{want}{}", &text[..begin], &text[end..]);
        // Replaced whole, so the other test here never reads half a file.
        let tmp = path.with_extension("md.new");
        std::fs::write(&tmp, new).expect("write docs/warnings.md.new");
        std::fs::rename(&tmp, &path).expect("replace docs/warnings.md");
        return;
    }
    let got: Vec<&str> = text[begin..end].lines().collect();
    let first_diff = got
        .iter()
        .zip(want.lines())
        .position(|(a, b)| *a != b)
        .unwrap_or(got.len().min(want.lines().count()));
    panic!(
        "docs/warnings.md's codes section differs from WarningCode (first at line {} of the \
         section: {:?} vs {:?}); run IOLAB_UPDATE_DOCS=1 cargo test -p iolab-measure --test \
         warning_docs",
        first_diff + 1,
        got.get(first_diff),
        want.lines().nth(first_diff)
    );
}

#[test]
fn every_code_the_docs_name_is_known() {
    // A heading per code, each a code of the enum, none twice.
    let text = std::fs::read_to_string(warnings_md()).expect("docs/warnings.md");
    let named: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let known: Vec<&str> = WarningCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(named, known);
}
