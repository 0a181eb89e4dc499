//! The bounded readers of `--loadfile` and `--trace` over the inputs no reader may take
//! whole (iolab_testkit::fuzz::limits): empty, binary, one byte over the limit, /dev/zero, a
//! FIFO with no writer, a directory, a gzip bomb, an endless line. Each is refused naming
//! the file, without blocking and without a large allocation.

use std::io::Write;

use iolab_testkit::fuzz::{limits, Alloc, Limits};
use iolab_workloads::dbench::{parse_loadfile, MAX_LOADFILE_BYTES, MAX_LOADFILE_LINE};
use iolab_workloads::replay::read_trace;

#[global_allocator]
static A: Alloc = Alloc;

/// `members` gzip members of `chunk`: a small file that unpacks to much more.
fn bomb(chunk: &[u8], members: usize) -> Vec<u8> {
    let mut one = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    one.write_all(chunk).unwrap();
    one.finish().unwrap().repeat(members)
}

/// One test: the allocation record is global, and the bomb is made outside the loop.
#[test]
fn loadfile_and_trace_limits() {
    loadfile_limits();
    trace_limits();
}

fn loadfile_limits() {
    // Comment lines past the limit once unpacked; one line past the longest.
    let mut comments = Vec::new();
    while comments.len() < 1 << 20 {
        comments.extend_from_slice(format!("# {}\n", "z".repeat(1000)).as_bytes());
    }
    comments.truncate(1 << 20);
    let members = (MAX_LOADFILE_BYTES >> 20) as usize + 1;
    let l = Limits {
        name: "loadfile",
        limit: MAX_LOADFILE_BYTES,
        max_alloc: 1 << 20,
        extra: vec![
            ("bomb.gz", bomb(&comments, members)),
            ("long-line", vec![b'x'; MAX_LOADFILE_LINE as usize + 10]),
        ],
    };
    limits(&l, |p| match parse_loadfile(p) {
        Ok(_) => Err("accepted".into()),
        Err(e) if e.file != p => Err(format!("names another file: {e}")),
        Err(_) => Ok(()),
    });
}

fn trace_limits() {
    let l = Limits {
        name: "trace",
        limit: iolab_spec::trace::MAX_TEXT,
        max_alloc: 1 << 20,
        extra: vec![("not-a-trace", b"root:x:0:0::/root:/bin/sh\n".to_vec())],
    };
    limits(&l, |p| match read_trace(p) {
        Ok(_) => Err("accepted".into()),
        Err(e) if e.file != p.display().to_string() => Err(format!("names another file: {e}")),
        Err(_) => Ok(()),
    });
}
