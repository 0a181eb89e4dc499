//! Fuzzes trace parsing (`iolab run replay --trace`: iolab's trace format and fio's iolog)
//! over the corpus in tests/corpus/trace: no input panics or allocates without bound, and
//! every refusal names FILE:LINE of a line of the input (or the file alone, for a file
//! without any usable line) and what is wrong.

use std::path::Path;

use iolab_spec::trace::parse;
use iolab_testkit::fuzz::{run, Alloc, Fuzz};

#[global_allocator]
static A: Alloc = Alloc;

#[test]
fn traces() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/trace");
    let f = Fuzz {
        name: "trace",
        corpus: &corpus,
        cases: 20000,
        dictionary: &[
            "iolab-trace 1\n",
            "fio version 3 iolog\n",
            "root 0 /x\n",
            "root 1 ",
            "file 0:a ",
            "dir 0:a\n",
            " open ",
            " close ",
            " pread ",
            " pwritev ",
            " lseek ",
            " rename ",
            " symlink ",
            " = ",
            " = ENOENT",
            " h1 ",
            " h4294967295 ",
            " - ",
            "0:..",
            "0:.",
            "0:/",
            "%00",
            "%2",
            "rw+creat+excl",
            "18446744073709551615",
            "1099511627777",
            "0.0000001",
            " add\n",
            " write 0 ",
            "\n",
            " ",
        ],
    };
    run(&f, |text| {
        let Err(e) = parse("t.trace", text) else {
            return Ok(());
        };
        let lines = text.split('\n').count().max(1);
        let shown = e.to_string();
        match e.line {
            Some(l)
                if (1..=lines as u32).contains(&l)
                    && !shown.starts_with(&format!("t.trace:{l}: ")) =>
            {
                return Err(format!(
                    "the error does not read FILE:LINE: reason: {shown}"
                ))
            }
            Some(l) if !(1..=lines as u32).contains(&l) => {
                return Err(format!("line {l} is not a line of the input: {shown}"))
            }
            None if !shown.starts_with("t.trace: ") => {
                return Err(format!("the error names no file: {shown}"))
            }
            _ => {}
        }
        if e.reason.to_string().is_empty() {
            return Err("an empty reason".into());
        }
        Ok(())
    });
}

#[test]
fn every_seed_parses() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/trace");
    for (name, bytes) in iolab_testkit::fuzz::corpus(&corpus) {
        let text = String::from_utf8(bytes).unwrap();
        let t = parse(&name, &text).unwrap_or_else(|e| panic!("{e}"));
        assert!(!t.events.is_empty(), "{name}");
    }
}
