//! Fuzzes the spec crate's user-text parsers (sizes, durations, Iometer specs) over the
//! corpus in tests/corpus/: no input panics or allocates without bound, and every rejection
//! names what it refuses (the option and value; for a spec file FILE:LINE and the field,
//! on the line that holds it).

use std::path::Path;

use iolab_spec::iometer::parse_spec;
use iolab_spec::{parse_duration, parse_size, SpecError, MAX_DURATION, MAX_SIZE};
use iolab_testkit::fuzz::{run, Alloc, Fuzz};

#[global_allocator]
static A: Alloc = Alloc;

fn corpus(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name)
}

const UNIT_WORDS: &[&str] = &[
    "k", "KiB", "MB", "g", "t", "TiB", "b", "ms", "us", "s", "m", "min", "h", "sec", ".", " ", "0",
    "9", "e9", "-", "+", "\u{0660}",
];

/// Fuzzes one option's parser: a refusal names the option and the value as given, and
/// what is taken passes `within` (the option's bound).
fn option<T>(
    name: &str,
    option: &str,
    parse: fn(&str, &str) -> Result<T, SpecError>,
    within: fn(&T) -> bool,
) {
    let f = Fuzz {
        name,
        corpus: &corpus(name),
        cases: 20000,
        dictionary: UNIT_WORDS,
    };
    run(&f, |text| match parse(option, text) {
        Ok(v) if within(&v) => Ok(()),
        Ok(_) => Err("taken beyond the bound every value of the option keeps".into()),
        Err(e) if e.field == option && e.value == text && !e.reason.is_empty() => Ok(()),
        Err(e) => Err(format!(
            "the error does not name the option and value: {e:?}"
        )),
    });
}

#[test]
fn sizes() {
    // At most MAX_SIZE: a size times a count or rounded to a block never overflows.
    option("size", "--size", parse_size, |b| *b <= MAX_SIZE);
}

#[test]
fn durations() {
    option("duration", "--duration", parse_duration, |d| {
        *d <= MAX_DURATION
    });
}

/// Whether `line` sets `key` (`key = ...`, possibly quoted) or opens it (`[key]`).
fn sets(line: &str, key: &str) -> bool {
    let t = line.trim_start();
    let header = t.trim_start_matches('[').trim();
    if t.starts_with('[') && header.strip_prefix(key).is_some_and(|r| r.starts_with(']')) {
        return true;
    }
    let t = t.trim_start_matches('"');
    t.strip_prefix(key)
        .map(|rest| rest.trim_start_matches('"').trim_start().starts_with('='))
        .unwrap_or(false)
}

#[test]
fn iometer_specs() {
    let f = Fuzz {
        name: "iometer",
        corpus: &corpus("iometer"),
        cases: 8000,
        dictionary: &[
            "[[line]]\n",
            "share = ",
            "size = ",
            "read = ",
            "random = ",
            "align = ",
            "name = ",
            "\"4k\"",
            "\"1t\"",
            "100",
            "256",
            "\n",
            "[",
            "]",
            "\"",
            "=",
            "{",
            "}",
            "#",
        ],
    };
    run(&f, |text| {
        let Err(e) = parse_spec("spec.toml", text) else {
            return Ok(());
        };
        let line: usize = e
            .value
            .strip_prefix("spec.toml:")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("the error names no FILE:LINE: {e:?}"))?;
        let lines: Vec<&str> = text.split('\n').collect();
        if line == 0 || line > lines.len() {
            return Err(format!("line {line} is not in the file: {e:?}"));
        }
        if e.field.is_empty() || e.reason.is_empty() {
            return Err(format!("the error names no field: {e:?}"));
        }
        // A well-formed TOML document is refused for a field: name it, on its own line
        // when the field is written in the file.
        if text.parse::<toml::Table>().is_ok() {
            if e.field == "spec" {
                return Err(format!(
                    "a valid TOML document refused without a field: {e:?}"
                ));
            }
            // (A missing field points at its table.)
            let written =
                !e.reason.starts_with("missing field") && lines.iter().any(|l| sets(l, &e.field));
            // The line, or the key line above it whose value continues onto it.
            let holder = lines[..line]
                .iter()
                .rev()
                .find(|l| l.contains('=') || l.trim_start().starts_with('['))
                .unwrap_or(&lines[line - 1]);
            if written && !sets(holder, &e.field) {
                return Err(format!("line {line} does not set '{}': {e:?}", e.field));
            }
        }
        Ok(())
    });
}

#[test]
fn icf_files() {
    use iolab_spec::icf;
    let f = Fuzz {
        name: "icf",
        corpus: &corpus("icf"),
        cases: 6000,
        dictionary: &[
            "'TEST SETUP\n",
            "'END test setup\n",
            "'ACCESS SPECIFICATIONS\n",
            "'END access specifications\n",
            "'MANAGER LIST\n",
            "'END manager list\n",
            "'Access specification name,default assignment\n",
            "'Worker\n",
            "'End worker\n",
            "'Assigned access specs\n",
            "'Test Type\n",
            "CYCLE_OUTSTANDING_IOS\n",
            "CYCLE_WORKERS\n",
            "'Queue Depth Cycling\n",
            "EXPONENTIAL",
            "4096,100,50,50,0,1,0,0\n",
            ",",
            "\t",
            "\r\n",
            "'",
            "4294967296",
            "18446744073709551616",
            "-1",
        ],
    };
    run(&f, |text| match icf::parse("c.icf", text) {
        Ok(c) => {
            let tests = icf::tests(&c, c.workers, c.iodepth);
            if tests.is_empty() {
                return Err("taken, with no test to run".into());
            }
            for t in &tests {
                t.job
                    .validate()
                    .map_err(|e| format!("test '{}' does not validate: {e}", t.name))?;
            }
            Ok(())
        }
        Err(e) => {
            let lines = text.split('\n').count().max(1);
            if e.line == 0 || e.line > lines {
                return Err(format!("line {} is not a line of the input: {e}", e.line));
            }
            if e.field.is_empty() || e.message.is_empty() {
                return Err(format!("no field or no reason: {e:?}"));
            }
            if !e
                .to_string()
                .starts_with(&format!("c.icf:{}: {}: ", e.line, e.field))
            {
                return Err(format!("not FILE:LINE: FIELD: {e}"));
            }
            Ok(())
        }
    });
}
