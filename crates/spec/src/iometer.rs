//! Iometer access specifications: the built-in patterns (file server, database,
//! workstation), specs read from TOML files, and their expansion into tests, optionally
//! over a queue-depth ladder (1, 2, 4, ... 64).

use serde::Deserialize;
use toml::Spanned;

use crate::job::{AccessLine, JobSpec, Rw, TestSpec};
use crate::units::{parse_size, SpecError};

const K: u64 = 1024;

fn line(share: u8, size: u64, read_pct: u8, random_pct: u8) -> AccessLine {
    AccessLine {
        share,
        size,
        read_pct,
        random_pct,
        align: size.min(4 * K),
    }
}

/// The most bytes an Iometer spec file (`--spec FILE`) may have.
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

/// Built-in access specifications and what they model.
pub const PATTERNS: &[(&str, &str)] = &[
    (
        "file-server",
        "Iometer's file server: 100% random, 80% read; 512 B 10%, 1 KiB 5%, 2 KiB 5%, \
         4 KiB 60%, 8 KiB 2%, 16 KiB 4%, 32 KiB 4%, 64 KiB 10%",
    ),
    ("database", "8 KiB transfers, 67% read, 100% random"),
    ("workstation", "8 KiB transfers, 80% read, 80% random"),
];

/// The lines of a built-in pattern.
pub fn pattern(name: &str) -> Option<Vec<AccessLine>> {
    Some(match name {
        "file-server" => vec![
            line(10, 512, 80, 100),
            line(5, K, 80, 100),
            line(5, 2 * K, 80, 100),
            line(60, 4 * K, 80, 100),
            line(2, 8 * K, 80, 100),
            line(4, 16 * K, 80, 100),
            line(4, 32 * K, 80, 100),
            line(10, 64 * K, 80, 100),
        ],
        "database" => vec![line(100, 8 * K, 67, 100)],
        "workstation" => vec![line(100, 8 * K, 80, 80)],
        _ => return None,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    #[serde(default)]
    name: Option<String>,
    line: Vec<LineFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LineFile {
    share: Spanned<u8>,
    size: Spanned<String>,
    read: Spanned<u8>,
    random: Spanned<u8>,
    #[serde(default)]
    align: Option<Spanned<String>>,
}

/// Parses a TOML access specification:
/// ```toml
/// name = "mail server"            # optional
/// [[line]]
/// share = 70                      # percent of I/Os
/// size = "4k"
/// read = 60                       # percent reads
/// random = 100                    # percent random
/// align = "4k"                    # optional, default min(size, 4 KiB)
/// ```
/// Errors name the file, the line and the key: `SpecError { field, value: "FILE:LINE" }`.
pub fn parse_spec(file: &str, text: &str) -> Result<(Option<String>, Vec<AccessLine>), SpecError> {
    let line_of = |offset: usize| {
        let end = offset.min(text.len());
        // A span may fall inside a multi-byte character of a lossy-decoded input.
        let end = (0..=end)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text[..end].matches('\n').count() + 1
    };
    let at = |offset: usize| format!("{file}:{}", line_of(offset));
    let parsed: SpecFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(s.start));
        let field = crate::tomlkey::key_at(e.message(), text, line)
            .map_or("spec".to_string(), |k| {
                k.rsplit('.').next().unwrap_or(&k).to_string()
            });
        SpecError::new(
            &field,
            format!("{file}:{line}"),
            e.message().trim().to_string(),
        )
    })?;
    let mut lines = Vec::new();
    for l in &parsed.line {
        let size = parse_size("size", l.size.get_ref())
            .map_err(|e| SpecError::new("size", at(l.size.span().start), e.reason))?;
        let align = match &l.align {
            Some(a) => parse_size("align", a.get_ref())
                .map_err(|e| SpecError::new("align", at(a.span().start), e.reason))?,
            None => size.min(4 * K),
        };
        for (key, v) in [
            ("read", &l.read),
            ("random", &l.random),
            ("share", &l.share),
        ] {
            if *v.get_ref() > 100 {
                return Err(SpecError::new(
                    key,
                    at(v.span().start),
                    format!("{} is not a percentage (0 to 100)", v.get_ref()),
                ));
            }
        }
        let al = AccessLine {
            share: *l.share.get_ref(),
            size,
            read_pct: *l.read.get_ref(),
            random_pct: *l.random.get_ref(),
            align,
        };
        let mut check = JobSpec::new(Rw::RandRw, size.max(512), 1, 1);
        check.access = vec![AccessLine { share: 100, ..al }];
        check.validate().map_err(|e| {
            let span = match e.field.as_str() {
                "align" => l.align.as_ref().map_or(l.size.span(), |a| a.span()),
                _ => l.size.span(),
            };
            let field = if e.field == "align" && l.align.is_some() {
                "align"
            } else {
                "size"
            };
            SpecError::new(field, at(span.start), e.reason)
        })?;
        lines.push(al);
    }
    let total: u32 = lines.iter().map(|l| l.share as u32).sum();
    if total != 100 {
        // Point at the first share (or the top of the file when there is no line).
        let first = parsed.line.first().map_or(0, |l| l.share.span().start);
        return Err(SpecError::new(
            "share",
            at(first),
            format!("the shares add up to {total}, not 100"),
        ));
    }
    Ok((parsed.name, lines))
}

/// Tests for a spec: one per queue depth of the ladder (or one at `iodepth`), `workers`
/// jobs each.
pub fn tests(
    name: &str,
    lines: &[AccessLine],
    workers: u32,
    iodepth: u32,
    ladder: bool,
) -> Vec<TestSpec> {
    let max = lines.iter().map(|l| l.size).max().unwrap_or(4 * K);
    let reads: u32 = lines
        .iter()
        .map(|l| l.share as u32 * l.read_pct as u32)
        .sum::<u32>()
        / 100;
    let depths: Vec<u32> = if ladder {
        (0..7).map(|i| 1 << i).collect()
    } else {
        vec![iodepth]
    };
    depths
        .into_iter()
        .map(|qd| {
            let mut job = JobSpec::new(Rw::RandRw, max, qd, workers);
            job.rwmixread = reads.min(100) as u8;
            job.access = lines.to_vec();
            TestSpec {
                name: format!("{name} Q{qd}W{workers}"),
                group: name.to_string(),
                job,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_add_up() {
        for (name, _) in PATTERNS {
            let l = pattern(name).unwrap();
            assert_eq!(l.iter().map(|x| x.share as u32).sum::<u32>(), 100, "{name}");
            let t = tests(name, &l, 1, 8, false);
            t[0].job.validate().unwrap();
        }
        let fs = pattern("file-server").unwrap();
        assert_eq!(fs[3], line(60, 4096, 80, 100));
        let ladder = tests("db", &pattern("database").unwrap(), 2, 1, true);
        let qds: Vec<u32> = ladder.iter().map(|t| t.job.iodepth).collect();
        assert_eq!(qds, [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(ladder[0].name, "db Q1W2");
    }

    #[test]
    fn toml_specs_and_their_errors() {
        let ok =
            "name = \"mail\"\n[[line]]\nshare = 70\nsize = \"4k\"\nread = 60\nrandom = 100\n\n\
                  [[line]]\nshare = 30\nsize = \"64k\"\nread = 0\nrandom = 0\nalign = \"64k\"\n";
        let (name, lines) = parse_spec("m.toml", ok).unwrap();
        assert_eq!(name.as_deref(), Some("mail"));
        assert_eq!(lines[1].align, 65536);
        assert_eq!(lines[0].align, 4096);
        let bad_share = ok.replace("share = 30", "share = 20");
        assert!(parse_spec("m.toml", &bad_share)
            .unwrap_err()
            .reason
            .contains("90"));
        let bad_size = ok.replace("size = \"64k\"", "size = \"64q\"");
        let e = parse_spec("m.toml", &bad_size).unwrap_err();
        // The field's own line, not the [[line]] header (line 8).
        assert_eq!((e.field.as_str(), e.value.as_str()), ("size", "m.toml:10"));
        let e = parse_spec("m.toml", &bad_share).unwrap_err();
        assert_eq!((e.field.as_str(), e.value.as_str()), ("share", "m.toml:3"));
        // Each field's refusal points at its own line.
        for (from, to, field, at) in [
            ("read = 0", "read = 300", "read", "m.toml:11"),
            ("random = 0", "random = 101", "random", "m.toml:12"),
            ("align = \"64k\"", "align = \"3\"", "align", "m.toml:13"),
            ("name = \"mail\"", "name = 3", "name", "m.toml:1"),
        ] {
            let e = parse_spec("m.toml", &ok.replace(from, to)).unwrap_err();
            assert_eq!((e.field.as_str(), e.value.as_str()), (field, at), "{to}");
        }
        let unknown = ok.replace("random = 0", "randum = 0");
        let e = parse_spec("m.toml", &unknown).unwrap_err();
        assert_eq!(e.value, "m.toml:12");
        assert!(e.reason.contains("randum"), "{e}");
    }
}
