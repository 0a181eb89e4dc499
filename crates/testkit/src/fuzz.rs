//! A bounded, dependency-free fuzz loop for iolab's text parsers, run by plain `cargo test`.
//!
//! [`run`] reads a corpus directory (seed files kept in the repository), then feeds the
//! parser a fixed number of inputs: every seed as it is, then mutations of the seeds (bytes
//! flipped, inserted, deleted, duplicated, lines swapped, seeds spliced, tokens from the
//! caller's dictionary inserted). The generator is seeded, so a run is reproducible: a failing
//! case prints its seed, case number and input, and `IOLAB_FUZZ_SEED=S IOLAB_FUZZ_CASES=N`
//! replays or extends it. The check function sees each input and returns `Err(why)` when a
//! property is broken; a panic in the parser is caught and reported the same way.
//!
//! [`Alloc`] is a global allocator for fuzz test binaries: it records the largest single
//! request, and [`run`] fails a case whose parser asked for more than [`ALLOC_LIMIT`].
//!
//! [`limits`] feeds a reader of input files what must be refused or taken without reading
//! past its limit: empty and binary files, a file one byte over the limit, `/dev/zero`, a
//! FIFO nobody writes to, a directory, and the caller's own (a gzip bomb).

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest single allocation a parser may make for one input (inputs are a few KiB).
pub const ALLOC_LIMIT: usize = 64 << 20;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// One loop ([`run`] or [`limits`]) at a time per test binary: the allocation record and
/// the panic hook are global.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The system allocator, remembering the largest request since [`run`] last reset it.
/// Install it in a fuzz test file: `#[global_allocator] static A: Alloc = Alloc;`.
pub struct Alloc;

// SAFETY: every call is handed to the system allocator unchanged; only a size is noted.
unsafe impl GlobalAlloc for Alloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

/// A small xorshift generator: reproducible, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// What to fuzz: the corpus, the number of cases, and the tokens mutations may insert.
pub struct Fuzz<'a> {
    pub name: &'a str,
    /// The directory of seed files (every file in it, sorted by name).
    pub corpus: &'a Path,
    /// Inputs in all, seeds included (`IOLAB_FUZZ_CASES` overrides).
    pub cases: usize,
    /// Words and fragments of the format that random bytes rarely produce.
    pub dictionary: &'a [&'a str],
}

/// The seed files of a corpus directory, sorted by name.
pub fn corpus(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "corpus {} is empty", dir.display());
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, bytes)
        })
        .collect()
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, seeds: &[(String, Vec<u8>)], dict: &[&str]) {
    let rounds = 1 + rng.below(4);
    for _ in 0..rounds {
        let len = input.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                input.insert(i, rng.next_u64() as u8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                input.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                let piece = input[i..i + n].to_vec();
                let at = rng.below(len + 1);
                input.splice(at..at, piece);
            }
            4 | 5 if !dict.is_empty() => {
                let word = dict[rng.below(dict.len())].as_bytes();
                let at = rng.below(len + 1);
                input.splice(at..at, word.iter().copied());
            }
            6 => {
                // Splice: the head of this input, the tail of another seed.
                let other = &seeds[rng.below(seeds.len())].1;
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            7 => {
                // Swap two lines, or replace a number with an extreme one.
                let text = String::from_utf8_lossy(input).into_owned();
                let mut lines: Vec<&str> = text.split('\n').collect();
                if lines.len() > 1 {
                    let a = rng.below(lines.len());
                    let b = rng.below(lines.len());
                    lines.swap(a, b);
                    *input = lines.join("\n").into_bytes();
                }
            }
            _ => {
                const EXTREMES: [&str; 8] = [
                    "0",
                    "-1",
                    "18446744073709551616",
                    "99999999999999999999999999",
                    "4294967296",
                    "1.5",
                    "nan",
                    "\"\"",
                ];
                let at = input
                    .iter()
                    .position(|c| c.is_ascii_digit())
                    .map(|first| first + rng.below(len - first))
                    .unwrap_or(len);
                let word = EXTREMES[rng.below(EXTREMES.len())].as_bytes();
                input.splice(at..at, word.iter().copied());
            }
        }
    }
    input.truncate(64 << 10);
}

/// Runs the loop; panics naming the first case that broke a property (or panicked, or
/// allocated more than [`ALLOC_LIMIT`]). `check` gets the input as text (invalid UTF-8 is
/// replaced, as the parsers read text) and returns `Err(why)` for a broken property.
/// Returns the number of cases run.
pub fn run(f: &Fuzz<'_>, mut check: impl FnMut(&str) -> Result<(), String>) -> usize {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let seeds = corpus(f.corpus);
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("IOLAB_FUZZ_SEED").unwrap_or(0x10_1ab);
    let cases = env("IOLAB_FUZZ_CASES").map_or(f.cases, |n| n as usize);
    let mut rng = Rng::new(seed);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    for case in 0..cases.max(seeds.len()) {
        let input = if case < seeds.len() {
            seeds[case].1.clone()
        } else {
            let mut m = seeds[rng.below(seeds.len())].1.clone();
            mutate(&mut rng, &mut m, &seeds, f.dictionary);
            m
        };
        let text = String::from_utf8_lossy(&input).into_owned();
        LARGEST.store(0, Ordering::Relaxed);
        let outcome = catch_unwind(AssertUnwindSafe(|| check(&text)));
        let largest = LARGEST.load(Ordering::Relaxed);
        let why = match outcome {
            Ok(Ok(())) if largest > ALLOC_LIMIT => {
                Some(format!("allocated {largest} bytes at once"))
            }
            Ok(Ok(())) => None,
            Ok(Err(why)) => Some(why),
            Err(p) => Some(format!(
                "panicked: {}",
                p.downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            )),
        };
        if let Some(why) = why {
            let from = if case < seeds.len() {
                format!("seed file {}", seeds[case].0)
            } else {
                format!("a mutation (IOLAB_FUZZ_SEED={seed}, case {case})")
            };
            failure = Some(format!(
                "fuzz {}: {from}: {why}\n--- input ---\n{text}\n--- end ---",
                f.name
            ));
            break;
        }
    }
    std::panic::set_hook(quiet);
    if let Some(msg) = failure {
        panic!("{msg}");
    }
    cases
}

/// What a reader of input files is fed by [`limits`]: where the files go and the reader's
/// byte limit.
pub struct Limits<'a> {
    pub name: &'a str,
    /// The reader's documented limit on a file's bytes.
    pub limit: u64,
    /// The largest single allocation the reader may make for any of these files (a
    /// reader that refuses an oversized file before reading it allocates little).
    pub max_alloc: usize,
    /// More files the caller makes (a gzip bomb, a format's own hostile case), by name.
    pub extra: Vec<(&'a str, Vec<u8>)>,
}

/// Feeds a file reader the inputs no reader may take whole or choke on: an empty file,
/// binary bytes, a (sparse) file one byte over the limit, `/dev/zero`, a FIFO nobody writes
/// to, a directory, and the caller's extra files. `read` gets each path and returns
/// `Err(why)` when the reader broke a property (accepted what it must refuse, named no
/// file); a panic, a blocked read (none ends within a minute) or an allocation over
/// `max_alloc` fails the case too. Panics naming the first failure; returns the number of
/// inputs.
pub fn limits<F>(l: &Limits<'_>, read: F) -> usize
where
    F: Fn(&Path) -> Result<(), String> + Send + Sync + 'static,
{
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("a scratch directory");
    let mut inputs: Vec<(String, std::path::PathBuf)> = Vec::new();
    let mut file = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        inputs.push((name.to_string(), p));
    };
    file("empty", b"");
    let mut rng = Rng::new(l.limit);
    let binary: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
    file("binary", &binary);
    for (name, bytes) in &l.extra {
        file(name, bytes);
    }
    let over = dir.path().join("over-limit");
    std::fs::File::create(&over)
        .and_then(|f| f.set_len(l.limit + 1))
        .unwrap();
    inputs.push(("over-limit".into(), over));
    inputs.push(("/dev/zero".into(), "/dev/zero".into()));
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is NUL-terminated.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    inputs.push(("fifo".into(), fifo));
    inputs.push(("directory".into(), dir.path().to_path_buf()));

    let read = std::sync::Arc::new(read);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    for (name, path) in &inputs {
        LARGEST.store(0, Ordering::Relaxed);
        let (tx, rx) = std::sync::mpsc::channel();
        let (r, p) = (read.clone(), path.clone());
        std::thread::spawn(move || {
            let outcome = catch_unwind(AssertUnwindSafe(|| r(&p)));
            let _ = tx.send(outcome);
        });
        let why = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Err(_) => Some("blocked: no answer within a minute".to_string()),
            Ok(Err(_)) => Some("panicked".to_string()),
            Ok(Ok(Err(why))) => Some(why),
            Ok(Ok(Ok(()))) => {
                let largest = LARGEST.load(Ordering::Relaxed);
                (largest > l.max_alloc).then(|| format!("allocated {largest} bytes at once"))
            }
        };
        if let Some(why) = why {
            failure = Some(format!("limits {}: input {name}: {why}", l.name));
            break;
        }
    }
    std::panic::set_hook(quiet);
    if let Some(msg) = failure {
        panic!("{msg}");
    }
    inputs.len()
}
