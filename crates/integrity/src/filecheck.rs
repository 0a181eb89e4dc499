//! `--verify` for small files (the metadata workload). The content of file *i* of a run is
//! derived from the run id and *i* alone, so a read-back is compared byte for byte with
//! content regenerated on the spot: nothing is kept in memory per file. A file of at least
//! [`HEADER_LEN`] bytes starts with a header naming its run and index, which tells another
//! file's content (misdirected) and another run's file (foreign) from damage in place.
//!
//! Header (bytes 0..32 of the file, little-endian), present when the file holds 32 bytes or
//! more:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | [`MAGIC`] |
//! | 8..16 | run id |
//! | 16..24 | file index |
//! | 24..28 | file size (u32) |
//! | 28..32 | low 32 bits of XXH3-64 of bytes 0..28 |
//!
//! Everything else (all of a file shorter than the header) is a keystream: byte *p* is byte
//! *p* mod 8 of the little-endian word *p* / 8, word *k* = a SplitMix64 finalizer of
//! (seed + (k + 1) × 0x9E3779B97F4A7C15), seed = XXH3-64 of the index seeded with the run
//! id. Any range of it can be produced without the bytes before it.

use std::path::Path;

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::tally::{Failure, Tally, Unit};

/// First eight bytes of a verifiable small file.
pub const MAGIC: [u8; 8] = *b"IOLABSF1";
/// Bytes of the header; smaller files carry the keystream only.
pub const HEADER_LEN: usize = 32;

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

fn keystream_word(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_add(1).wrapping_mul(GAMMA));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What every file of one run holds: its content is a function of (run id, index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Content {
    run_id: u64,
    size: u64,
}

/// A header read back and found intact (magic and checksum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub run_id: u64,
    pub index: u64,
    pub size: u32,
}

impl Content {
    /// Files of `size` bytes (at most `u32::MAX`) written by run `run_id`.
    pub fn new(run_id: u64, size: u64) -> Content {
        assert!(size <= u32::MAX as u64, "small files only");
        Content { run_id, size }
    }

    pub fn run_id(&self) -> u64 {
        self.run_id
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the files are large enough to carry the header.
    pub fn has_header(&self) -> bool {
        self.size >= HEADER_LEN as u64
    }

    fn header(&self, index: u64) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..16].copy_from_slice(&self.run_id.to_le_bytes());
        h[16..24].copy_from_slice(&index.to_le_bytes());
        h[24..28].copy_from_slice(&(self.size as u32).to_le_bytes());
        let sum = xxh3_64(&h[..28]) as u32;
        h[28..32].copy_from_slice(&sum.to_le_bytes());
        h
    }

    /// Writes bytes `offset .. offset + buf.len()` of file `index` into `buf`.
    pub fn fill(&self, index: u64, buf: &mut [u8], offset: u64) {
        let seed = xxh3_64_with_seed(&index.to_le_bytes(), self.run_id);
        // A partial word up to the first multiple of 8, whole words, a partial word.
        let from = (offset % 8) as usize;
        let lead = ((8 - from) % 8).min(buf.len());
        let (head, rest) = buf.split_at_mut(lead);
        if lead > 0 {
            let word = keystream_word(seed, offset / 8).to_le_bytes();
            head.copy_from_slice(&word[from..from + lead]);
        }
        let mut k = (offset + lead as u64) / 8;
        let mut words = rest.chunks_exact_mut(8);
        for w in &mut words {
            w.copy_from_slice(&keystream_word(seed, k).to_le_bytes());
            k += 1;
        }
        let tail = words.into_remainder();
        let n = tail.len();
        tail.copy_from_slice(&keystream_word(seed, k).to_le_bytes()[..n]);
        if self.has_header() && offset < HEADER_LEN as u64 {
            let h = self.header(index);
            let n = (HEADER_LEN - offset as usize).min(buf.len());
            buf[..n].copy_from_slice(&h[offset as usize..offset as usize + n]);
        }
    }
}

/// The header at the start of `bytes`, if it is one (magic and checksum hold).
pub fn parse_header(bytes: &[u8]) -> Option<Header> {
    let h = bytes.get(..HEADER_LEN)?;
    let u64_at = |at: usize| u64::from_le_bytes(h[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| u32::from_le_bytes(h[at..at + 4].try_into().expect("4 bytes"));
    (h[..8] == MAGIC && u32_at(28) == xxh3_64(&h[..28]) as u32).then(|| Header {
        run_id: u64_at(8),
        index: u64_at(16),
        size: u32_at(24),
    })
}

/// What a file read back is, compared with what was written to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Exactly the bytes written.
    Ok,
    /// Fewer bytes than written; `first_diff` is the first of those present that differs.
    Short { found: u64, first_diff: Option<u64> },
    /// More bytes than written; `first_diff` is the first of the expected length that differs.
    Long { found: u64, first_diff: Option<u64> },
    /// The right length, every byte zero.
    Zeroed,
    /// An intact header of this run naming another file: that file's content is here.
    Misdirected { index: u64 },
    /// Not this run's content: an intact header of another run, or (no intact header) more
    /// than half of the bytes differ.
    Foreign {
        header: Option<Header>,
        first: u64,
        bytes: u64,
    },
    /// The bytes differ from what was written, the header (if any) still naming this file
    /// or too few bytes differing to call the file another's.
    Corrupt {
        first: u64,
        expected: u8,
        found: u8,
        bits: u64,
        bytes: u64,
    },
}

impl Verdict {
    pub fn is_ok(&self) -> bool {
        *self == Verdict::Ok
    }

    /// Short stable name of the class, as printed and stored.
    pub fn class(&self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Short { .. } => "short",
            Verdict::Long { .. } => "long",
            Verdict::Zeroed => "zeroed",
            Verdict::Misdirected { .. } => "misdirected",
            Verdict::Foreign { .. } => "foreign",
            Verdict::Corrupt { .. } => "corrupt",
        }
    }

    /// The byte offset in the file the verdict points at.
    pub fn offset(&self, size: u64) -> u64 {
        match self {
            Verdict::Ok | Verdict::Zeroed | Verdict::Misdirected { .. } => 0,
            Verdict::Short { found, .. } => *found,
            Verdict::Long { .. } => size,
            Verdict::Foreign { first, .. } | Verdict::Corrupt { first, .. } => *first,
        }
    }

    /// (expected, found), in a few words, for file `index` of `c`.
    fn expected_found(&self, c: &Content, index: u64) -> (String, String) {
        let this = format!("file {index} of run {:016x}", c.run_id);
        match self {
            Verdict::Ok => (this.clone(), this),
            Verdict::Short { found, .. } | Verdict::Long { found, .. } => {
                (format!("{} bytes", c.size), format!("{found} bytes"))
            }
            Verdict::Zeroed => (this, format!("{} zero bytes", c.size)),
            Verdict::Misdirected { index: other } => {
                (this, format!("file {other} of run {:016x}", c.run_id))
            }
            Verdict::Foreign {
                header: Some(h), ..
            } => (this, format!("file {} of run {:016x}", h.index, h.run_id)),
            Verdict::Foreign { header: None, .. } => (this, "other data, no header".into()),
            Verdict::Corrupt {
                expected, found, ..
            } => (format!("0x{expected:02x}"), format!("0x{found:02x}")),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prefix = |d: &Option<u64>| match d {
            None => "the bytes present match".to_string(),
            Some(at) => format!("they differ from byte {at}"),
        };
        match self {
            Verdict::Ok => write!(f, "ok"),
            Verdict::Short { found, first_diff } => {
                write!(f, "short: {found} bytes; {}", prefix(first_diff))
            }
            Verdict::Long { found, first_diff } => {
                write!(f, "long: {found} bytes; {}", prefix(first_diff))
            }
            Verdict::Zeroed => write!(f, "zeroed: every byte is zero"),
            Verdict::Misdirected { index } => write!(
                f,
                "misdirected: holds the intact header of file {index} of this run"
            ),
            Verdict::Foreign {
                header: Some(h), ..
            } => write!(
                f,
                "foreign: the header of file {} of another run ({:016x})",
                h.index, h.run_id
            ),
            Verdict::Foreign {
                header: None,
                first,
                bytes,
            } => write!(
                f,
                "foreign: no header of this file and {bytes} bytes differ, first at byte {first}"
            ),
            Verdict::Corrupt {
                first,
                expected,
                found,
                bits,
                bytes,
            } => write!(
                f,
                "corrupt: {bits} bit(s) in {bytes} byte(s) differ, first at byte {first} \
                 (expected 0x{expected:02x}, found 0x{found:02x})"
            ),
        }
    }
}

/// Compares one file at a time, fed in chunks as it is read, with its regenerated content.
pub struct Comparison {
    content: Content,
    index: u64,
    /// Bytes fed so far.
    at: u64,
    head: [u8; HEADER_LEN],
    nonzero: bool,
    /// First differing byte: (offset, expected, found).
    first: Option<(u64, u8, u8)>,
    bits: u64,
    bytes: u64,
    expected: Vec<u8>,
}

impl Comparison {
    pub fn new(content: Content) -> Comparison {
        Comparison {
            content,
            index: 0,
            at: 0,
            head: [0; HEADER_LEN],
            nonzero: false,
            first: None,
            bits: 0,
            bytes: 0,
            expected: Vec::new(),
        }
    }

    /// Starts the comparison of file `index`.
    pub fn begin(&mut self, index: u64) {
        self.index = index;
        self.at = 0;
        self.nonzero = false;
        self.first = None;
        self.bits = 0;
        self.bytes = 0;
    }

    /// The next `chunk` of the file.
    pub fn feed(&mut self, chunk: &[u8]) {
        let at = self.at;
        if at < HEADER_LEN as u64 {
            let n = (HEADER_LEN - at as usize).min(chunk.len());
            self.head[at as usize..at as usize + n].copy_from_slice(&chunk[..n]);
        }
        self.nonzero = self.nonzero || chunk.iter().any(|&b| b != 0);
        let n = self.content.size.saturating_sub(at).min(chunk.len() as u64) as usize;
        if n > 0 {
            if self.expected.len() < n {
                self.expected.resize(n, 0);
            }
            let want = &mut self.expected[..n];
            self.content.fill(self.index, want, at);
            if chunk[..n] != *want {
                for (j, (&e, &g)) in want.iter().zip(&chunk[..n]).enumerate() {
                    if e != g {
                        self.bytes += 1;
                        self.bits += u64::from((e ^ g).count_ones());
                        self.first.get_or_insert((at + j as u64, e, g));
                    }
                }
            }
        }
        self.at += chunk.len() as u64;
    }

    /// The verdict on the file fed since [`Comparison::begin`].
    pub fn finish(&self) -> Verdict {
        let size = self.content.size;
        let first_diff = self.first.map(|f| f.0);
        if self.at < size {
            return Verdict::Short {
                found: self.at,
                first_diff,
            };
        }
        if self.at > size {
            return Verdict::Long {
                found: self.at,
                first_diff,
            };
        }
        let Some((first, expected, found)) = self.first else {
            return Verdict::Ok;
        };
        if !self.nonzero {
            return Verdict::Zeroed;
        }
        let header = if self.content.has_header() {
            parse_header(&self.head)
        } else {
            None
        };
        let mine = match header {
            Some(h) if h.run_id != self.content.run_id => false,
            Some(h) if h.index != self.index => return Verdict::Misdirected { index: h.index },
            Some(_) => true,
            // Without a header of this file, a file most of whose bytes differ is another's.
            None => self.bytes * 2 <= size,
        };
        if mine {
            Verdict::Corrupt {
                first,
                expected,
                found,
                bits: self.bits,
                bytes: self.bytes,
            }
        } else {
            Verdict::Foreign {
                header,
                first,
                bytes: self.bytes,
            }
        }
    }
}

/// A tally of small files (`unit` files) of the run `c` in `dir`: `tally` with what was
/// checked named (run id, file size, header, directory) and its comparing time set.
pub fn describe(tally: Tally, c: &Content, dir: &Path) -> Tally {
    let mut t = tally.with_run_id(c.run_id);
    t.unit = Unit::Files;
    t.file_size = Some(c.size);
    t.header = Some(c.has_header());
    t.dir = Some(dir.to_string_lossy().into_owned());
    t.seconds = Some(t.seconds.unwrap_or(0.0));
    t
}

/// Counts the verdict on file `index` of `c`, whose path `file` gives, in `t` (a tally of
/// [`Unit::Files`], which keeps the failures of the lowest indexes).
pub fn record(t: &mut Tally, c: &Content, index: u64, file: impl FnOnce() -> String, v: &Verdict) {
    t.record(v.is_ok(), v.class(), || {
        let (expected, found) = v.expected_found(c, index);
        Failure {
            file: Some(file()),
            index: Some(index),
            offset: v.offset(c.size),
            class: v.class().into(),
            expected,
            found,
            detail: v.to_string(),
            ..Failure::default()
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: u64 = 0x1234_5678_9abc_def0;

    fn content_of(c: &Content, index: u64) -> Vec<u8> {
        let mut v = vec![0u8; c.size as usize];
        c.fill(index, &mut v, 0);
        v
    }

    fn verdict(c: &Content, index: u64, bytes: &[u8], chunk: usize) -> Verdict {
        let mut cmp = Comparison::new(*c);
        cmp.begin(index);
        for part in bytes.chunks(chunk.max(1)) {
            cmp.feed(part);
        }
        cmp.finish()
    }

    #[test]
    fn any_range_is_the_same_bytes_as_the_whole() {
        let c = Content::new(RUN, 1000);
        let whole = content_of(&c, 7);
        assert_eq!(
            parse_header(&whole).map(|h| (h.run_id, h.index, h.size)),
            Some((RUN, 7, 1000))
        );
        for (from, to) in [(0, 5), (3, 40), (31, 33), (100, 1000), (997, 1000)] {
            let mut part = vec![0u8; to - from];
            c.fill(7, &mut part, from as u64);
            assert_eq!(part, whole[from..to], "{from}..{to}");
        }
        assert_ne!(whole, content_of(&c, 8));
        assert_ne!(whole, content_of(&Content::new(RUN + 1, 1000), 7));
        // Too small for a header: keystream only.
        let tiny = Content::new(RUN, 20);
        assert!(parse_header(&content_of(&tiny, 7)).is_none());
        assert_ne!(content_of(&tiny, 7), content_of(&tiny, 8));
        assert!(content_of(&tiny, 7).iter().any(|&b| b != 0));
    }

    #[test]
    fn each_class_is_told_apart_whatever_the_chunking() {
        let c = Content::new(RUN, 100);
        let good = content_of(&c, 5);
        for chunk in [1, 7, 64, 4096] {
            assert_eq!(verdict(&c, 5, &good, chunk), Verdict::Ok);
            assert_eq!(
                verdict(&c, 5, &good[..60], chunk),
                Verdict::Short {
                    found: 60,
                    first_diff: None
                }
            );
            let mut longer = good.clone();
            longer.extend_from_slice(b"more");
            assert_eq!(
                verdict(&c, 5, &longer, chunk),
                Verdict::Long {
                    found: 104,
                    first_diff: None
                }
            );
            assert_eq!(verdict(&c, 5, &[0u8; 100], chunk), Verdict::Zeroed);
            assert_eq!(
                verdict(&c, 5, &content_of(&c, 9), chunk),
                Verdict::Misdirected { index: 9 }
            );
            let other = content_of(&Content::new(RUN ^ 1, 100), 5);
            assert!(matches!(
                verdict(&c, 5, &other, chunk),
                Verdict::Foreign { header: Some(h), .. } if h.run_id == RUN ^ 1
            ));
            let mut flipped = good.clone();
            flipped[57] ^= 0x10;
            assert_eq!(
                verdict(&c, 5, &flipped, chunk),
                Verdict::Corrupt {
                    first: 57,
                    expected: good[57],
                    found: good[57] ^ 0x10,
                    bits: 1,
                    bytes: 1
                }
            );
            // A damaged header with the rest intact is still this file, corrupted.
            let mut head = good.clone();
            head[0] = b'X';
            assert!(matches!(
                verdict(&c, 5, &head, chunk),
                Verdict::Corrupt { first: 0, .. }
            ));
            assert!(matches!(
                verdict(&c, 5, &[0xa5; 100], chunk),
                Verdict::Foreign {
                    header: None,
                    first: 0,
                    ..
                }
            ));
        }
    }

    #[test]
    fn files_without_a_header_compare_bytes_only() {
        let c = Content::new(RUN, 20);
        let good = content_of(&c, 3);
        assert_eq!(verdict(&c, 3, &good, 8), Verdict::Ok);
        // Another file's bytes: no header to name it, so foreign rather than misdirected.
        assert!(matches!(
            verdict(&c, 3, &content_of(&c, 4), 8),
            Verdict::Foreign { header: None, .. }
        ));
        let mut flipped = good.clone();
        flipped[19] ^= 1;
        assert!(matches!(
            verdict(&c, 3, &flipped, 8),
            Verdict::Corrupt {
                first: 19,
                bits: 1,
                ..
            }
        ));
        let empty = Content::new(RUN, 0);
        assert_eq!(verdict(&empty, 0, &[], 8), Verdict::Ok);
        assert!(matches!(
            verdict(&empty, 0, b"x", 8),
            Verdict::Long { found: 1, .. }
        ));
    }

    #[test]
    fn the_tally_keeps_the_lowest_indexes_and_counts_every_class() {
        let c = Content::new(RUN, 100);
        let mut a = Tally::new(Unit::Files);
        let mut b = Tally::new(Unit::Files);
        for i in 0..30u64 {
            let t = if i % 2 == 0 { &mut a } else { &mut b };
            let v = if i % 3 == 0 {
                Verdict::Zeroed
            } else {
                Verdict::Ok
            };
            record(t, &c, 100 - i, || format!("f{i}"), &v);
        }
        a.merge(b);
        assert_eq!((a.checked, a.ok, a.failures), (30, 20, 10));
        assert_eq!(a.classes["zeroed"], 10);
        let idx: Vec<u64> = a.failure_samples.iter().filter_map(|s| s.index).collect();
        assert_eq!(idx, [73, 76, 79, 82, 85, 88, 91, 94, 97, 100]);
        let j = serde_json::to_value(describe(a, &c, Path::new("/x"))).unwrap();
        assert_eq!(j["failure_samples"][0]["class"], "zeroed");
        assert_eq!(j["classes"]["ok"], 20);
    }
}
