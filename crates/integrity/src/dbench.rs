//! `--verify` for the dbench replay: every WriteX writes content that says which file and
//! which write it belongs to, each client keeps a shadow model of what its files must hold,
//! and every ReadX, then a final read-back of every file, is compared with that model.
//!
//! Content. The byte at file position `p` written by write generation `g` of a file is byte
//! `p % 8` of the little-endian word `base(key, i) ^ rotl(g·M, i % 64)`, `i = p / 8`: `key`
//! comes from the run id and the file's identity (given when the file is created, kept
//! across renames), `base` is a step of wyrand (one 64×64→128-bit multiply per word). The
//! content is a pure function of its position, so writes at any offset and size fit
//! together, and the generation can be recovered from any whole word read back (`M` is odd,
//! hence invertible), which is how an older write's data is recognised as such.
//!
//! Model. Per file: its size and a map of non-overlapping byte ranges to the generation of
//! the last completed write there and the generation it replaced (0: a hole, zeros). Clients
//! work in separate directories, so each client's model is its own and needs no lock.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use crate::tally::{Failure, ReplayCounts, Tally};

/// Checks are counted per block: the part of a 4 KiB-aligned stretch of a file that one
/// write (or one hole) covers, within what was read.
pub const BLOCK: u64 = 4096;
/// Read size of the final read-back.
const READ_BACK_CHUNK: usize = 1 << 20;

const PHI: u64 = 0x9E37_79B9_7F4A_7C15;
/// wyrand's constants.
const WY0: u64 = 0xa076_1d64_78bd_642f;
const WY1: u64 = 0xe703_7ed1_a0b4_28db;
/// Odd, so `g·GEN_MUL` can be undone.
const GEN_MUL: u64 = 0xD6E8_FEB8_6659_FD93;
const GEN_MUL_INV: u64 = inverse(GEN_MUL);

/// The multiplicative inverse of an odd number modulo 2^64 (Newton's iteration: each step
/// doubles the correct low bits, from 3).
const fn inverse(odd: u64) -> u64 {
    let mut x = odd;
    let mut i = 0;
    while i < 5 {
        x = x.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(x)));
        i += 1;
    }
    x
}

/// splitmix64's output function.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The content key of file `uid` in run `run_id`.
fn file_key(run_id: u64, uid: u64) -> u64 {
    mix(run_id ^ mix(uid.wrapping_add(PHI)))
}

/// The position-dependent part of word `i`: wyrand's step, one 64×64→128-bit multiply.
#[inline]
fn base(key: u64, i: u64) -> u64 {
    let s = key.wrapping_add(i.wrapping_mul(WY0));
    let t = u128::from(s) * u128::from(s ^ WY1);
    (t >> 64) as u64 ^ t as u64
}

#[inline]
fn word(key: u64, gen_term: u64, i: u64) -> u64 {
    base(key, i) ^ gen_term.rotate_left((i & 63) as u32)
}

/// Fills `buf` with what generation `gen` of the file with `key` holds from position `pos`.
fn fill(key: u64, gen: u64, pos: u64, buf: &mut [u8]) {
    let g = gen.wrapping_mul(GEN_MUL);
    let mut i = pos / 8;
    let skip = (pos % 8) as usize;
    let mut rest = buf;
    if skip != 0 {
        let w = word(key, g, i).to_le_bytes();
        let n = (8 - skip).min(rest.len());
        rest[..n].copy_from_slice(&w[skip..skip + n]);
        rest = &mut rest[n..];
        i += 1;
    }
    let mut words = rest.chunks_exact_mut(8);
    for c in &mut words {
        c.copy_from_slice(&word(key, g, i).to_le_bytes());
        i += 1;
    }
    let tail = words.into_remainder();
    if !tail.is_empty() {
        let n = tail.len();
        tail.copy_from_slice(&word(key, g, i).to_le_bytes()[..n]);
    }
}

/// The generation a whole word `found` at word index `i` of the file with `key` was written
/// by, if it was written by one (otherwise a meaningless number).
fn decode(key: u64, i: u64, found: u64) -> u64 {
    (found ^ base(key, i))
        .rotate_right((i & 63) as u32)
        .wrapping_mul(GEN_MUL_INV)
}

/// A stretch of a file written by one generation, and the generation it replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ext {
    end: u64,
    gen: u64,
    prev: u64,
}

/// A stretch of a file as the model sees it (gen 0: a hole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    start: u64,
    end: u64,
    gen: u64,
    prev: u64,
}

/// What one file must hold.
#[derive(Debug)]
struct FileModel {
    key: u64,
    /// Its name relative to the client directory (the last one, once unlinked).
    name: String,
    linked: bool,
    size: u64,
    /// The last generation handed out; every write takes the next.
    last_gen: u64,
    extents: BTreeMap<u64, Ext>,
}

impl FileModel {
    fn truncate(&mut self) {
        self.extents.clear();
        self.size = 0;
    }

    /// A completed write of generation `gen` to `[a, b)`.
    fn record(&mut self, a: u64, b: u64, gen: u64) {
        if a >= b {
            return;
        }
        // The parts of [a, b) that held data, with the generation they held.
        let mut covered: Vec<(u64, u64, u64)> = Vec::new();
        if let Some((&s, &e)) = self.extents.range(..a).next_back() {
            if e.end > a {
                self.extents.insert(s, Ext { end: a, ..e });
                covered.push((a, e.end.min(b), e.gen));
                if e.end > b {
                    self.extents.insert(b, e);
                }
            }
        }
        let inside: Vec<u64> = self.extents.range(a..b).map(|(&s, _)| s).collect();
        for s in inside {
            let e = self.extents.remove(&s).expect("listed just now");
            covered.push((s, e.end.min(b), e.gen));
            if e.end > b {
                self.extents.insert(b, e);
            }
        }
        let mut at = a;
        let put = |s: u64, e: u64, prev: u64, ext: &mut BTreeMap<u64, Ext>| {
            // Adjacent parts that replaced the same generation become one extent.
            if let Some((_, last)) = ext.range_mut(..s).next_back() {
                if last.end == s && last.gen == gen && last.prev == prev {
                    last.end = e;
                    return;
                }
            }
            ext.insert(s, Ext { end: e, gen, prev });
        };
        for (s, e, prev) in covered {
            if s > at {
                put(at, s, 0, &mut self.extents);
            }
            put(s, e, prev, &mut self.extents);
            at = e;
        }
        if at < b {
            put(at, b, 0, &mut self.extents);
        }
        self.size = self.size.max(b);
    }

    /// The model's view of `[a, b)`, holes included, in order.
    fn segments(&self, a: u64, b: u64, out: &mut Vec<Seg>) {
        out.clear();
        let mut at = a;
        let push = |s: u64, e: u64, gen: u64, prev: u64, out: &mut Vec<Seg>| {
            out.push(Seg {
                start: s,
                end: e,
                gen,
                prev,
            })
        };
        if let Some((_, e)) = self.extents.range(..=a).next_back() {
            if e.end > a {
                at = e.end.min(b);
                push(a, at, e.gen, e.prev, out);
            }
        }
        if at < b {
            for (&s, e) in self.extents.range(a + 1..b) {
                if s > at {
                    push(at, s, 0, 0, out);
                }
                at = e.end.min(b);
                push(s, at, e.gen, e.prev, out);
                if at >= b {
                    break;
                }
            }
        }
        if at < b {
            push(at, b, 0, 0, out);
        }
    }

    fn at(&self, offset: u64) -> Option<Seg> {
        if offset >= self.size {
            return None;
        }
        let mut v = Vec::new();
        self.segments(offset, offset + 1, &mut v);
        v.first().copied()
    }
}

/// Blocks `[a, b)` touches.
fn blocks(a: u64, b: u64) -> u64 {
    if a >= b {
        0
    } else {
        (b - 1) / BLOCK - a / BLOCK + 1
    }
}

/// What a block that is not what the model expects holds instead.
struct Verdict {
    class: &'static str,
    offset: u64,
    found_gen: Option<u64>,
    detail: String,
}

/// Classifies `found`, the bytes at `pos` that should be `expected` (generation `seg.gen`,
/// zeros for 0) and are not.
fn classify(
    f: &FileModel,
    seg: &Seg,
    pos: u64,
    found: &[u8],
    expected: &[u8],
    other: &mut Vec<u8>,
) -> Verdict {
    let len = found.len();
    let differs: Vec<usize> = (0..len).filter(|&i| found[i] != expected[i]).collect();
    let first = differs[0];
    let d = differs.len();
    let bits: u32 = differs
        .iter()
        .map(|&i| (found[i] ^ expected[i]).count_ones())
        .sum();
    let at = pos + first as u64;
    let gen = seg.gen;
    if gen > 0 && differs.iter().all(|&i| found[i] == 0) && (d >= 8 || d == len) {
        return Verdict {
            class: "zeroed",
            offset: at,
            found_gen: None,
            detail: if found.iter().all(|&b| b == 0) {
                format!("all {len} bytes from offset {pos} read as zeros where generation {gen} was written")
            } else {
                format!("{d} byte(s) read as zeros, the first at offset {at}, where generation {gen} was written")
            },
        };
    }
    // Another write of this file: decoded from the first whole word that differs, or the
    // generation the last write there replaced.
    let mut decoded = None;
    let mut w = pos.next_multiple_of(8);
    while w + 8 <= pos + len as u64 {
        let lo = (w - pos) as usize;
        if found[lo..lo + 8] != expected[lo..lo + 8] {
            let word = u64::from_le_bytes(found[lo..lo + 8].try_into().expect("8 bytes"));
            decoded =
                Some(decode(f.key, w / 8, word)).filter(|&g| g >= 1 && g <= f.last_gen && g != gen);
            break;
        }
        w += 8;
    }
    let prev = Some(seg.prev).filter(|&p| p >= 1 && p != gen && Some(p) != decoded);
    for cand in [decoded, prev].into_iter().flatten() {
        other.resize(len, 0);
        fill(f.key, cand, pos, &mut other[..len]);
        if differs.iter().all(|&i| found[i] == other[i]) {
            let newer = gen > 0 && cand > gen;
            return Verdict {
                class: if newer { "newer" } else { "stale" },
                offset: at,
                found_gen: Some(cand),
                detail: format!(
                    "{d} byte(s) from offset {at} hold generation {cand} of this file, {} \
                     than the expected {}",
                    if newer { "newer" } else { "older" },
                    if gen == 0 {
                        "zeros (nothing written there since the file was truncated)".to_string()
                    } else {
                        format!("generation {gen}")
                    }
                ),
            };
        }
    }
    let what = if gen == 0 {
        "zeros".to_string()
    } else {
        format!("generation {gen}")
    };
    if d * 2 <= len || bits <= 2 {
        Verdict {
            class: "corrupt",
            offset: at,
            found_gen: None,
            detail: format!(
                "{d} of {len} byte(s) ({bits} bit(s)) differ from {what}, the first at offset {at}"
            ),
        }
    } else {
        Verdict {
            class: "foreign",
            offset: at,
            found_gen: None,
            detail: format!(
                "{d} of {len} byte(s) from offset {pos} match neither {what} nor another \
                 write of this file"
            ),
        }
    }
}

/// Where a check happens, for the failure record.
#[derive(Clone, Copy)]
enum Phase {
    Read(u32),
    ReadBack,
}

impl Phase {
    fn text(self) -> String {
        match self {
            Phase::Read(line) => format!("ReadX line {line}"),
            Phase::ReadBack => "read-back".into(),
        }
    }
}

/// Reusable buffers of the checks.
#[derive(Default)]
struct Scratch {
    segs: Vec<Seg>,
    expected: Vec<u8>,
    other: Vec<u8>,
}

/// A write about to be issued: which file and generation its buffer holds.
#[derive(Debug, Clone, Copy)]
pub struct Stamp {
    uid: u64,
    gen: u64,
}

/// One client's shadow model of its files, and what its checks found.
pub struct Model {
    run_id: u64,
    client: u32,
    next_uid: u64,
    /// Linked files by name relative to the client directory.
    by_path: HashMap<String, u64>,
    files: HashMap<u64, FileModel>,
    /// Open handles (fnum) of followed files.
    handles: HashMap<u32, u64>,
    scratch: Scratch,
    pub tally: Tally,
}

impl Model {
    pub fn new(run_id: u64, client: u32) -> Model {
        Model {
            run_id,
            client,
            next_uid: u64::from(client + 1) << 40,
            by_path: HashMap::new(),
            files: HashMap::new(),
            handles: HashMap::new(),
            scratch: Scratch::default(),
            tally: Tally {
                inline_seconds: Some(0.0),
                replay: Some(ReplayCounts::default()),
                ..Tally::default()
            },
        }
    }

    /// An open that succeeded. `rel` is the name in the client directory (None for paths
    /// outside it, which are never files); `fnum` the handle it is bound to, if it is kept.
    pub fn opened(
        &mut self,
        rel: Option<&str>,
        fnum: Option<u32>,
        is_file: bool,
        size: u64,
        truncated: bool,
    ) {
        if let Some(f) = fnum {
            self.release(f);
        }
        let Some(rel) = rel.filter(|_| is_file) else {
            return;
        };
        let uid = match self.by_path.get(rel) {
            Some(&uid) => {
                if truncated {
                    self.files.get_mut(&uid).expect("linked").truncate();
                }
                uid
            }
            // A new file (O_CREAT made it, or O_TRUNC emptied one the model lost); a file
            // with data the model knows nothing of is not followed.
            None if size == 0 => {
                let uid = self.next_uid;
                self.next_uid += 1;
                self.files.insert(
                    uid,
                    FileModel {
                        key: file_key(self.run_id, uid),
                        name: rel.to_string(),
                        linked: true,
                        size: 0,
                        last_gen: 0,
                        extents: BTreeMap::new(),
                    },
                );
                self.by_path.insert(rel.to_string(), uid);
                uid
            }
            None => return,
        };
        if let Some(f) = fnum {
            self.handles.insert(f, uid);
        }
    }

    /// A handle goes away (Close, or the end of a pass).
    pub fn release(&mut self, fnum: u32) {
        if let Some(uid) = self.handles.remove(&fnum) {
            self.forget_if_gone(uid);
        }
    }

    pub fn release_all(&mut self) {
        let uids: Vec<u64> = self.handles.drain().map(|(_, u)| u).collect();
        for uid in uids {
            self.forget_if_gone(uid);
        }
    }

    /// Drops a file that has neither a name nor an open handle.
    fn forget_if_gone(&mut self, uid: u64) {
        let linked = self.files.get(&uid).is_some_and(|f| f.linked);
        if !linked && !self.handles.values().any(|&u| u == uid) {
            self.files.remove(&uid);
        }
    }

    fn unlink_uid(&mut self, uid: u64) {
        if let Some(f) = self.files.get_mut(&uid) {
            f.linked = false;
        }
        self.forget_if_gone(uid);
    }

    /// Unlink succeeded.
    pub fn unlinked(&mut self, rel: &str) {
        if let Some(uid) = self.by_path.remove(rel) {
            self.unlink_uid(uid);
        }
    }

    /// Deltree ran (successfully or not: whatever was under `rel` is no longer followed).
    pub fn removed_tree(&mut self, rel: &str) {
        let gone: Vec<String> = self
            .by_path
            .keys()
            .filter(|k| under(k, rel))
            .cloned()
            .collect();
        for k in gone {
            self.unlinked(&k);
        }
    }

    /// Rename succeeded: a file, or a directory with everything under it.
    pub fn renamed(&mut self, from: &str, to: &str) {
        if from == to {
            return;
        }
        // Whatever `to` named is replaced.
        self.removed_tree(to);
        let moving: Vec<String> = if self.by_path.contains_key(from) {
            vec![from.to_string()]
        } else {
            self.by_path
                .keys()
                .filter(|k| under(k, from))
                .cloned()
                .collect()
        };
        for old in moving {
            let uid = self.by_path.remove(&old).expect("listed just now");
            let new = format!("{to}{}", &old[from.len()..]);
            if let Some(f) = self.files.get_mut(&uid) {
                f.name = new.clone();
            }
            self.by_path.insert(new, uid);
        }
    }

    /// Prepares a WriteX through `fnum`: fills `buf` with the next generation's content for
    /// `offset`. None when the file is not followed (the caller writes zeros).
    pub fn stamp(&mut self, fnum: u32, offset: u64, buf: &mut [u8]) -> Option<Stamp> {
        let uid = *self.handles.get(&fnum)?;
        let f = self.files.get_mut(&uid)?;
        f.last_gen += 1;
        fill(f.key, f.last_gen, offset, buf);
        self.tally.replay_mut().writes_stamped += 1;
        Some(Stamp {
            uid,
            gen: f.last_gen,
        })
    }

    /// The stamped write wrote `wrote` bytes at `offset` (None: it failed, so what the file
    /// holds there is unknown and the file is no longer followed).
    pub fn wrote(&mut self, s: Stamp, offset: u64, wrote: Option<usize>) {
        match wrote {
            Some(n) => {
                if let Some(f) = self.files.get_mut(&s.uid) {
                    f.record(offset, offset + n as u64, s.gen);
                }
            }
            None => {
                self.tally.replay_mut().untracked_files += 1;
                self.by_path.retain(|_, u| *u != s.uid);
                self.handles.retain(|_, u| *u != s.uid);
                self.files.remove(&s.uid);
            }
        }
    }

    /// Checks a ReadX through `fnum` that asked for `asked` bytes at `offset` and got `found`.
    pub fn check_read(&mut self, fnum: u32, offset: u64, asked: u64, found: &[u8], line: u32) {
        let Some(f) = self.handles.get(&fnum).and_then(|u| self.files.get(u)) else {
            self.tally.replay_mut().reads_unchecked += 1;
            return;
        };
        self.tally.replay_mut().reads_checked += 1;
        let expect = asked.min(f.size.saturating_sub(offset));
        check_span(
            f,
            self.client,
            offset,
            found,
            expect,
            Phase::Read(line),
            &mut self.scratch,
            &mut self.tally,
        );
    }

    /// Reads every linked file back whole (after flushing it and asking the kernel to drop
    /// its cached pages, so the data comes from the storage where the kernel allows) and
    /// checks it against the model.
    pub fn read_back(&mut self, root: &Path) {
        let t0 = Instant::now();
        let mut names: Vec<(&String, &u64)> = self.by_path.iter().collect();
        names.sort();
        let mut buf = vec![0u8; READ_BACK_CHUNK];
        for (rel, uid) in names {
            let f = &self.files[uid];
            self.tally.replay_mut().read_back_files += 1;
            let client = self.client;
            let missing = |detail: String| Failure {
                client: Some(client),
                file: Some(client_path(client, rel)),
                offset: 0,
                class: "missing".into(),
                expected_generation: Some(0),
                found_generation: None,
                phase: Phase::ReadBack.text(),
                detail,
                ..Failure::default()
            };
            let file = match File::open(root.join(rel)) {
                Ok(file) => file,
                Err(e) => {
                    self.tally
                        .fail(missing(format!("cannot open the file: {e}")));
                    continue;
                }
            };
            let size = match drop_cache(&file) {
                Ok(size) => size,
                Err(e) => {
                    self.tally
                        .fail(missing(format!("cannot read the file: {e}")));
                    continue;
                }
            };
            // Up to the size the model expects; a shorter file shows as `truncated`.
            let mut offset = 0u64;
            while offset < f.size {
                let want = (f.size - offset).min(READ_BACK_CHUNK as u64);
                let n = match read_full(&file, &mut buf[..want as usize], offset) {
                    Ok(n) => n,
                    Err(e) => {
                        self.tally.fail(Failure {
                            offset,
                            ..missing(format!("read error: {e}"))
                        });
                        break;
                    }
                };
                self.tally.replay_mut().read_back_bytes += n as u64;
                check_span(
                    f,
                    self.client,
                    offset,
                    &buf[..n],
                    want,
                    Phase::ReadBack,
                    &mut self.scratch,
                    &mut self.tally,
                );
                offset += n as u64;
                if (n as u64) < want {
                    break;
                }
            }
            if size > f.size {
                self.tally.fail(Failure {
                    offset: f.size,
                    class: "extended".into(),
                    detail: format!(
                        "the file is {size} bytes long; the last write ended at offset {}",
                        f.size
                    ),
                    ..missing(String::new())
                });
            }
        }
        self.tally.replay_mut().read_back_seconds = t0.elapsed().as_secs_f64();
    }

    /// For the test seam: (generation, the generation it replaced) at `offset` of `rel`.
    fn generation_at(&self, rel: &str, offset: u64) -> Option<(u64, u64)> {
        let f = self.files.get(self.by_path.get(rel)?)?;
        f.at(offset).map(|s| (s.gen, s.prev))
    }

    fn content(&self, rel: &str, gen: u64, offset: u64, len: usize) -> Option<Vec<u8>> {
        let f = self.files.get(self.by_path.get(rel)?)?;
        let mut v = vec![0u8; len];
        fill(f.key, gen, offset, &mut v);
        Some(v)
    }
}

/// fdatasync, then POSIX_FADV_DONTNEED: the read-back then reads from the storage unless
/// the file system keeps its pages anyway (tmpfs). Returns the file's size.
fn drop_cache(file: &File) -> io::Result<u64> {
    file.sync_data()?;
    // Advice only: a refusal costs the read-back its accuracy, not its correctness.
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed);
    Ok(file.metadata()?.len())
}

/// pread until `buf` is full or the end of the file.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Whether `path` is `dir` or lies under it ("" is the client directory: everything).
fn under(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path == dir
        || (path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/')
}

fn client_path(client: u32, rel: &str) -> String {
    format!("clients/client{client}/{rel}")
}

/// Checks `found`, read at `offset`, against the model; `expect` is how many bytes the model
/// says the read should have returned.
#[allow(clippy::too_many_arguments)]
fn check_span(
    f: &FileModel,
    client: u32,
    offset: u64,
    found: &[u8],
    expect: u64,
    phase: Phase,
    sc: &mut Scratch,
    tally: &mut Tally,
) {
    let n = found.len() as u64;
    let failure = |offset: u64, v: Verdict, gen: u64| Failure {
        client: Some(client),
        file: Some(client_path(client, &f.name)),
        offset,
        class: v.class.into(),
        expected_generation: Some(gen),
        found_generation: v.found_gen,
        phase: phase.text(),
        detail: v.detail,
        ..Failure::default()
    };
    if n != expect {
        let at = offset + n.min(expect);
        let (class, detail) = if n < expect {
            (
                "truncated",
                format!(
                    "the file ends at offset {at}; {} byte(s) were written up to offset {}",
                    expect - n,
                    f.size
                ),
            )
        } else {
            (
                "extended",
                format!(
                    "{} byte(s) beyond offset {at}, where the last write ended",
                    n - expect
                ),
            )
        };
        let gen = f.at(at).map_or(0, |s| s.gen);
        let v = Verdict {
            class,
            offset: at,
            found_gen: None,
            detail,
        };
        tally.fail(failure(at, v, gen));
    }
    let end = offset + n.min(expect);
    tally.replay_mut().checked_bytes += end - offset;
    f.segments(offset, end, &mut sc.segs);
    for seg in &sc.segs {
        let got = &found[(seg.start - offset) as usize..(seg.end - offset) as usize];
        let len = got.len();
        sc.expected.clear();
        sc.expected.resize(len, 0);
        if seg.gen > 0 {
            fill(f.key, seg.gen, seg.start, &mut sc.expected);
        }
        if got == &sc.expected[..] {
            tally.pass(blocks(seg.start, seg.end));
            continue;
        }
        // Block by block, so each failure is placed and classified on its own.
        let mut s = seg.start;
        while s < seg.end {
            let e = ((s / BLOCK + 1) * BLOCK).min(seg.end);
            let (lo, hi) = ((s - seg.start) as usize, (e - seg.start) as usize);
            if got[lo..hi] == sc.expected[lo..hi] {
                tally.pass(1);
            } else {
                let v = classify(f, seg, s, &got[lo..hi], &sc.expected[lo..hi], &mut sc.other);
                tally.fail(failure(v.offset, v, seg.gen));
            }
            s = e;
        }
    }
}

/// The test seam's view of one client, handed to the hook of [`the dbench workload's `run_with_seam``]
/// before every operation (`line`: its loadfile line) and once after the replay, before the
/// final read-back (`line` None). Not part of the API.
#[doc(hidden)]
pub struct Tamper<'a> {
    pub client: u32,
    /// The client's directory.
    pub root: &'a Path,
    pub line: Option<u32>,
    model: &'a Model,
}

impl<'a> Tamper<'a> {
    /// The seam's view of client `client` (directory `root`) before the operation on
    /// loadfile line `line` (None: before the final read-back).
    pub fn new(client: u32, root: &'a Path, line: Option<u32>, model: &'a Model) -> Tamper<'a> {
        Tamper {
            client,
            root,
            line,
            model,
        }
    }

    /// (generation, generation it replaced) the model expects at `offset` of the file named
    /// `rel` in the client directory; None beyond its end or when the file is not followed.
    pub fn generation_at(&self, rel: &str, offset: u64) -> Option<(u64, u64)> {
        self.model.generation_at(rel, offset)
    }

    /// The bytes generation `gen` of that file holds at `[offset, offset + len)`.
    pub fn content(&self, rel: &str, gen: u64, offset: u64, len: usize) -> Option<Vec<u8>> {
        self.model.content(rel, gen, offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_round_trips_through_a_word() {
        assert_eq!(GEN_MUL.wrapping_mul(GEN_MUL_INV), 1);
        let key = file_key(0x1234, 77);
        for gen in [1u64, 2, 3, 1000, u32::MAX as u64] {
            let mut b = [0u8; 64];
            fill(key, gen, 800, &mut b);
            for k in 0..8 {
                let w = u64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().unwrap());
                assert_eq!(decode(key, 100 + k as u64, w), gen);
            }
        }
        // Content depends on position only: a fill at an odd offset is a slice of an
        // aligned one.
        let mut whole = [0u8; 64];
        fill(key, 5, 0, &mut whole);
        for start in 0..20 {
            for len in 0..40 {
                let mut part = vec![0u8; len];
                fill(key, 5, start as u64, &mut part);
                assert_eq!(part[..], whole[start..start + len]);
            }
        }
        // Other files and generations differ in every word.
        let mut other = [0u8; 64];
        fill(file_key(0x1234, 78), 5, 0, &mut other);
        let mut older = [0u8; 64];
        fill(key, 4, 0, &mut older);
        for k in 0..8 {
            assert_ne!(whole[k * 8..k * 8 + 8], other[k * 8..k * 8 + 8]);
            assert_ne!(whole[k * 8..k * 8 + 8], older[k * 8..k * 8 + 8]);
        }
    }

    #[test]
    fn content_does_not_compress() {
        use std::io::Write;
        let mut data = vec![0u8; 1 << 20];
        for (k, c) in data.chunks_mut(64 << 10).enumerate() {
            fill(file_key(3, k as u64), 1 + k as u64, 4096 * k as u64, c);
        }
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(&data).unwrap();
        let packed = z.finish().unwrap().len();
        assert!(packed as f64 > 0.999 * data.len() as f64, "{packed}");
    }

    fn model_file() -> FileModel {
        FileModel {
            key: file_key(9, 1),
            name: "f".into(),
            linked: true,
            size: 0,
            last_gen: 0,
            extents: BTreeMap::new(),
        }
    }

    #[test]
    fn extent_map_matches_a_byte_by_byte_model() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _round in 0..50 {
            let mut f = model_file();
            let mut bytes: Vec<(u64, u64)> = Vec::new(); // (gen, prev) per byte
            for gen in 1..=40u64 {
                let a = rng.u64(0..3000);
                let b = a + rng.u64(1..700);
                if bytes.len() < b as usize {
                    bytes.resize(b as usize, (0, 0));
                }
                for x in &mut bytes[a as usize..b as usize] {
                    *x = (gen, x.0);
                }
                f.record(a, b, gen);
                f.last_gen = gen;
                if rng.u8(..) < 20 {
                    f.truncate();
                    bytes.clear();
                }
            }
            assert_eq!(f.size, bytes.len() as u64);
            let mut segs = Vec::new();
            f.segments(0, f.size, &mut segs);
            let mut at = 0;
            for s in &segs {
                assert_eq!(s.start, at);
                for p in s.start..s.end {
                    assert_eq!(bytes[p as usize], (s.gen, s.prev), "byte {p}");
                }
                at = s.end;
            }
            assert_eq!(at, f.size);
            // No two touching extents that could have been one.
            let v: Vec<(&u64, &Ext)> = f.extents.iter().collect();
            for w in v.windows(2) {
                assert!(w[0].1.end <= *w[1].0);
                assert!(
                    !(w[0].1.end == *w[1].0
                        && w[0].1.gen == w[1].1.gen
                        && w[0].1.prev == w[1].1.prev)
                );
            }
        }
    }

    fn class_of(f: &FileModel, offset: u64, found: &[u8]) -> (&'static str, u64, Option<u64>) {
        let s = f.at(offset).unwrap();
        let mut expected = vec![0u8; found.len()];
        if s.gen > 0 {
            fill(f.key, s.gen, offset, &mut expected);
        }
        let v = classify(f, &s, offset, found, &expected, &mut Vec::new());
        (v.class, v.offset, v.found_gen)
    }

    #[test]
    fn classes() {
        let mut f = model_file();
        f.record(0, 8192, 1);
        f.record(100, 5000, 2);
        f.record(6000, 6001, 3);
        f.last_gen = 3;
        let gen2 = |len: usize| {
            let mut v = vec![0u8; len];
            fill(f.key, 2, 100, &mut v);
            v
        };
        let mut b = gen2(3996);
        b[10] ^= 0x10;
        assert_eq!(class_of(&f, 100, &b), ("corrupt", 110, None));
        let mut b = gen2(3996);
        b[40..140].fill(0);
        assert_eq!(class_of(&f, 100, &b), ("zeroed", 140, None));
        assert_eq!(class_of(&f, 100, &[0u8; 3996]), ("zeroed", 100, None));
        // Generation 1 where 2 belongs, whole or in part: stale, found by decoding.
        let mut old = vec![0u8; 3996];
        fill(f.key, 1, 100, &mut old);
        assert_eq!(class_of(&f, 100, &old), ("stale", 100, Some(1)));
        let mut b = gen2(3996);
        b[1000..1100].copy_from_slice(&old[1000..1100]);
        assert_eq!(class_of(&f, 100, &b).0, "stale");
        // A one-byte write has no whole word: the replaced generation is tried.
        let mut one = [0u8; 1];
        fill(f.key, 1, 6000, &mut one);
        let mut three = [0u8; 1];
        fill(f.key, 3, 6000, &mut three);
        if one != three {
            assert_eq!(class_of(&f, 6000, &one), ("stale", 6000, Some(1)));
        }
        // Another file's data, random bytes.
        let mut b = vec![0u8; 3996];
        fill(file_key(9, 2), 2, 100, &mut b);
        assert_eq!(class_of(&f, 100, &b).0, "foreign");
        let mut rng = fastrand::Rng::with_seed(3);
        let b: Vec<u8> = (0..3996).map(|_| rng.u8(..)).collect();
        assert_eq!(class_of(&f, 100, &b).0, "foreign");
        // A later generation than the model has: newer.
        f.last_gen = 5;
        let mut b = vec![0u8; 3996];
        fill(f.key, 5, 100, &mut b);
        assert_eq!(class_of(&f, 100, &b), ("newer", 100, Some(5)));
    }

    #[test]
    fn renames_move_files_and_directories() {
        let mut m = Model::new(1, 0);
        m.opened(Some("d/a"), Some(1), true, 0, false);
        m.opened(Some("d/sub/b"), None, true, 0, false);
        m.opened(Some("dx"), None, true, 0, false);
        m.renamed("d", "e");
        let mut names: Vec<&str> = m.by_path.keys().map(|s| s.as_str()).collect();
        names.sort();
        assert_eq!(names, ["dx", "e/a", "e/sub/b"]);
        // Replacing a file that is still open keeps it until the handle goes.
        m.renamed("e/sub/b", "e/a");
        assert_eq!(m.files.len(), 3);
        m.release(1);
        assert_eq!(m.files.len(), 2);
        m.removed_tree("e");
        assert_eq!(m.by_path.keys().collect::<Vec<_>>(), ["dx"]);
        m.removed_tree("");
        assert!(m.files.is_empty());
        // A file with data the model does not know is not followed.
        m.opened(Some("x"), Some(2), true, 10, false);
        assert!(m.handles.is_empty());
        m.opened(Some("x"), Some(2), true, 0, true);
        assert_eq!(m.handles.len(), 1);
    }
}
