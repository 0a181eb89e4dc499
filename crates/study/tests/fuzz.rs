//! Fuzzes study files over the corpus in tests/corpus/study (the shipped studies and known
//! bad files), with the workloads checked by `iolab run`'s own registry as `iolab study`
//! does: no input panics or allocates without bound, and every refusal names FILE:LINE and
//! the key (a TOML syntax error names the line only).

use std::path::Path;

use iolab_study::{check_workload, parse, StudyError};
use iolab_testkit::fuzz::{run, Alloc, Fuzz};

#[global_allocator]
static A: Alloc = Alloc;

fn study(text: &str) -> Result<iolab_study::Study, StudyError> {
    let reg = iolab_workloads::registry();
    parse("s.toml", text, &mut |w| check_workload(&reg, w))
}

#[test]
fn study_files() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/study");
    let f = Fuzz {
        name: "study",
        corpus: &corpus,
        cases: 2500,
        dictionary: &[
            "[testbed]\n",
            "[[config]]\n",
            "[matrix]\n",
            "[[workload]]\n",
            "[testbed.throttle]\n",
            "kind = ",
            "label = ",
            "size = ",
            "fs = ",
            "repeats = ",
            "order = ",
            "baseline = ",
            "only = ",
            "buffered = ",
            "\"loop\"",
            "\"cdm\"",
            "\"custom\"",
            "\"ext4\"",
            "true",
            "[0, 1]",
            "{ fs = \"xfs\" }",
            "\"yes\"",
            "\"1s\"",
            "\n",
            "=",
            "\"",
            "[",
            "]",
            ".",
        ],
    };
    run(&f, |text| {
        let Err(e) = study(text) else {
            return Ok(());
        };
        if e.file != "s.toml" || e.message.is_empty() {
            return Err(format!("the error names no file or reason: {e:?}"));
        }
        let lines = text.split('\n').count();
        match e.line {
            Some(l) if (1..=lines).contains(&l) => {}
            _ => return Err(format!("the error names no line of the file: {e:?}")),
        }
        if e.key.is_empty() && text.parse::<toml::Table>().is_ok() {
            return Err(format!(
                "a well-formed TOML file refused without a key: {e:?}"
            ));
        }
        Ok(())
    });
}

/// The refusals issue 13 found without a key or with the wrong one.
#[test]
fn known_bad_files_name_their_key() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/study");
    let expect = [
        ("bad-top-type.toml", 2, "repeats"),
        ("bad-no-kind.toml", 1, "testbed.kind"),
        ("bad-buffered.toml", 7, "workload[1].buffered"),
    ];
    for (file, line, key) in expect {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let e = study(&text).expect_err(file);
        assert_eq!((e.line, e.key.as_str()), (Some(line), key), "{file}: {e}");
    }
}
