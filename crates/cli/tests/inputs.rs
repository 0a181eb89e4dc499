//! Every input file is bounded and read only when it is a regular file: a job file, an
//! include, a trace, a loadfile, a study and an Iometer spec given as /dev/zero, a FIFO
//! with no writer, a file one byte over its limit or a gzip bomb are refused with exit 2
//! before anything runs, and a file that is not the expected format (a password file) is
//! refused without any of its content in the message.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use iolab_testkit::{Out, Sandbox};

/// A line no refusal may print.
const SECRET: &str = "root:SECRET-MARK-24x:19000:0:99999:7:::\n";

/// One command reading one input: the arguments around the input's path.
struct Reader {
    what: &'static str,
    /// `iolab ARGS...` with `{}` where the input goes.
    args: &'static [&'static str],
    /// The limit on the file's bytes.
    limit: u64,
}

const MIB: u64 = 1 << 20;

fn readers() -> Vec<Reader> {
    vec![
        Reader {
            what: "fio job file",
            args: &["run", "fio", "{}", "--target", "T"],
            limit: MIB,
        },
        Reader {
            what: "fio include",
            args: &["run", "fio", "INCLUDER", "--target", "T"],
            limit: MIB,
        },
        Reader {
            what: "trace",
            args: &["run", "replay", "--trace", "{}", "--target", "T"],
            limit: 256 * MIB,
        },
        Reader {
            what: "loadfile",
            args: &["run", "dbench", "--loadfile", "{}", "--target", "T"],
            limit: 256 * MIB,
        },
        Reader {
            what: "study",
            args: &["study", "--dry-run", "{}"],
            limit: MIB,
        },
        Reader {
            what: "iometer spec",
            args: &["run", "iometer", "--spec", "{}", "--target", "T"],
            limit: MIB,
        },
        Reader {
            what: "iometer icf",
            args: &["run", "iometer", "--icf", "{}", "--target", "T"],
            limit: MIB,
        },
    ]
}

/// Runs `iolab` on `input` the way `r` reads it; an include is named by a job file that
/// includes it. Fails (rather than hangs) if the command blocks.
fn run(sb: &Sandbox, r: &Reader, input: &Path) -> Out {
    let includer = sb.path("includer.fio");
    std::fs::write(
        &includer,
        format!("[j]\nsize=1m\ninclude {}\n", input.display()),
    )
    .unwrap();
    let args: Vec<String> = r
        .args
        .iter()
        .map(|a| match *a {
            "{}" => input.display().to_string(),
            "T" => sb.target.display().to_string(),
            "INCLUDER" => includer.display().to_string(),
            a => a.to_string(),
        })
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = sb
        .cmd(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A blocked read never ends: give up after a generous while and say so.
    let mut waited = 0;
    while child.try_wait().unwrap().is_none() {
        if waited > 3000 {
            child.kill().unwrap();
            panic!("{} {}: blocked", r.what, input.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        waited += 1;
    }
    Out::new(&args, child.wait_with_output().unwrap(), Default::default())
}

fn refused(sb: &Sandbox, r: &Reader, input: &Path, why: &[&str]) {
    let out = run(sb, r, input);
    assert_eq!(out.code, Some(2), "{}: {out}", r.what);
    out.stderr_has(&[&input.display().to_string()]);
    out.stderr_has(why);
    assert!(!out.stderr.contains("panicked"), "{out}");
    assert!(sb.result_rows().is_empty(), "{}: a run was stored", r.what);
    assert!(sb.target_entries().is_empty(), "{}", r.what);
}

fn fifo(p: &Path) -> PathBuf {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is NUL-terminated.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p.to_path_buf()
}

#[test]
fn devices_fifos_and_oversized_files_are_refused_unread() {
    let sb = Sandbox::new();
    // No writer ever opens it: reading it would block forever.
    let fifo = fifo(&sb.path("fifo"));
    for r in readers() {
        refused(&sb, &r, Path::new("/dev/zero"), &["a character device"]);
        refused(&sb, &r, &fifo, &["a FIFO"]);
        // One byte over the limit (sparse: only its size is ever looked at).
        let big = sb.path("big");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(r.limit + 1).unwrap();
        let why = match r.what {
            // What is left of the job file's bytes, all of them here but the job file's.
            "fio include" => format!("may have {} bytes together", r.limit),
            _ => format!("more than the {} bytes", r.limit),
        };
        refused(&sb, &r, &big, &[&why]);
        std::fs::remove_file(&big).unwrap();
    }
}

#[test]
fn content_of_a_file_in_the_wrong_format_is_not_printed() {
    let sb = Sandbox::new();
    let secret = sb.path("shadow");
    std::fs::write(&secret, SECRET).unwrap();
    for r in readers() {
        let out = run(&sb, &r, &secret);
        assert_eq!(out.code, Some(2), "{}: {out}", r.what);
        out.stderr_has(&[&format!("{}:1", secret.display())]);
        assert!(
            !out.stderr.contains("SECRET-MARK"),
            "{}: the refusal prints the file: {out}",
            r.what
        );
    }
}

#[test]
fn includes_count_together() {
    let sb = Sandbox::new();
    // 100 KiB of comments, included 11 times: each file is small, together 1.1 MiB.
    let piece = sb.path("piece.inc");
    std::fs::write(&piece, format!("; {}\n", "x".repeat(100 << 10))).unwrap();
    let mut text = String::from("[j]\nrw=read\nsize=1m\n");
    for _ in 0..11 {
        text.push_str(&format!("include {}\n", piece.display()));
    }
    let f = sb.path("many.fio");
    std::fs::write(&f, text).unwrap();
    let out = sb.run(&["fio", f.to_str().unwrap(), "--no-store"]).code(2);
    out.stderr_has(&[
        &format!("{}:14: include:", f.display()),
        "1048576 bytes together",
    ]);
}

/// `members` gzip members of `chunk` each: a small file that unpacks to much more.
fn gzip_bomb(path: &Path, chunk: &[u8], members: usize) {
    let mut one = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    one.write_all(chunk).unwrap();
    let one = one.finish().unwrap();
    let mut f = std::fs::File::create(path).unwrap();
    for _ in 0..members {
        f.write_all(&one).unwrap();
    }
}

#[test]
fn gzip_bombs_stop_at_the_limit() {
    let sb = Sandbox::new();
    // 257 MiB once unpacked, in lines a parser would otherwise go through.
    let mut chunk = Vec::new();
    while chunk.len() < MIB as usize {
        chunk.extend_from_slice(format!("# {}\n", "z".repeat(1000)).as_bytes());
    }
    chunk.truncate(MIB as usize - 1);
    chunk.push(b'\n');
    let bomb = sb.path("bomb.gz");
    gzip_bomb(&bomb, &chunk, 257);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 8 * MIB);
    for r in readers() {
        if matches!(r.what, "trace" | "loadfile") {
            refused(&sb, &r, &bomb, &["once gunzipped"]);
        }
    }
}
