//! Fuzzes dbench loadfile parsing over the corpus in tests/corpus/loadfile: no input panics
//! or allocates without bound, and every refusal names FILE:LINE (the line it could not
//! take, shown as written) and what on it is wrong.

use std::path::Path;

use iolab_testkit::fuzz::{run, Alloc, Fuzz};
use iolab_workloads::dbench::Loadfile;

#[global_allocator]
static A: Alloc = Alloc;

#[test]
fn loadfiles() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/loadfile");
    let f = Fuzz {
        name: "loadfile",
        corpus: &corpus,
        cases: 20000,
        dictionary: &[
            "NTCreateX ",
            "ReadX ",
            "WriteX ",
            "Close ",
            "Rename ",
            "Unlink ",
            "Deltree ",
            "Find ",
            "LockX ",
            "Sleep ",
            "Qfsinfo ",
            "\"\\clients\\client1\\",
            "\\..",
            "\\.",
            "\"",
            " ",
            "\t",
            "\n",
            "0x",
            "NT_STATUS_OK",
            "NT_STATUS_NO_SUCH_FILE",
            "65536 ",
            "4294967295 ",
            "1e308 ",
            "#",
        ],
    };
    run(&f, |text| {
        let Err(e) = Loadfile::parse_str("lf.txt", text) else {
            return Ok(());
        };
        let lines = text.lines().count().max(1);
        match e.line {
            Some(l) if (1..=lines as u32).contains(&l) => {}
            _ => return Err(format!("the error names no line of the file: {e:?}")),
        }
        let shown = e.to_string();
        if !shown.starts_with(&format!("lf.txt:{}: ", e.line.unwrap())) || e.reason.is_empty() {
            return Err(format!(
                "the error does not read FILE:LINE: reason: {shown}"
            ));
        }
        Ok(())
    });
}
