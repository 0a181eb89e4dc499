//! `--verify` for the block tests: which blocks of the test region hold which generation.
//! Writers (the engine's job threads) claim every block of a transfer before queuing it (so
//! two writes to one block are never in flight together, across all job threads), stamp it
//! with [`crate::block::stamp`], and record the generation when the write completes;
//! [`Written::check_file`] then reads the region back and checks every written block
//! against its expected generation.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use iolab_sys::buffers::BufferPool;

use crate::block;
use crate::tally::{Failure, Tally};

/// Per-block state: bit 0 = a write is in flight, bits 1.. = generation of the last completed
/// write (0 = never written by this test, or unknown after a failed write).
const IN_FLIGHT: u64 = 1;
/// Bytes read per call while checking.
const READ_CHUNK: u64 = 1 << 20;

/// The shared write state of one test's region.
pub struct Written {
    run_id: u64,
    granule: u64,
    region_start: u64,
    next_generation: AtomicU64,
    blocks: Vec<AtomicU64>,
    /// fio's `verify_pattern`: blocks carry it (its `%o` each block's offset) in place of
    /// the self-describing format, and the check compares every byte.
    pattern: Option<iolab_spec::Pattern>,
}

/// The block size `--verify` stamps and checks for `job`: its `bs`, or with an access
/// specification the largest size dividing every transfer size and alignment.
pub fn granule_of(job: &iolab_spec::JobSpec) -> u64 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    // Clones placed by fio's offset and offset_increment start where those say.
    let placed = |g: u64| job.clones.map_or(g, |c| gcd(gcd(g, c.offset), c.increment));
    if job.access.is_empty() {
        return placed(job.bs);
    }
    placed(
        job.access
            .iter()
            .filter(|l| l.read_pct < 100)
            .fold(0, |g, l| gcd(gcd(g, l.size), l.align)),
    )
}

impl Written {
    /// State for `region_len` bytes from `region_start` in blocks of `granule` bytes (a
    /// multiple of [`block::SECTOR`]); `None` when the granule is not.
    pub fn new(run_id: u64, granule: u64, region_start: u64, region_len: u64) -> Option<Written> {
        if granule == 0 || !granule.is_multiple_of(block::SECTOR as u64) {
            return None;
        }
        let n = region_len / granule;
        Some(Written {
            run_id,
            granule,
            region_start,
            next_generation: AtomicU64::new(1),
            blocks: (0..n).map(|_| AtomicU64::new(0)).collect(),
            pattern: None,
        })
    }

    /// Blocks written with `pattern` (fio's `verify_pattern`) rather than stamped.
    pub fn with_pattern(mut self, pattern: Option<iolab_spec::Pattern>) -> Written {
        self.pattern = pattern;
        self
    }

    /// Starts the generation counter at `first` instead of 1: for a caller whose tests
    /// share one run id and one file, so that a block left by an earlier test never carries
    /// the generation a later test expects there.
    pub fn starting_at(self, first: u64) -> Written {
        self.next_generation.store(first.max(1), Ordering::Relaxed);
        self
    }

    /// The generation the next claim gets.
    pub fn next_generation(&self) -> u64 {
        self.next_generation.load(Ordering::Relaxed)
    }

    pub fn granule(&self) -> u64 {
        self.granule
    }

    fn range(&self, offset: u64, len: u64) -> std::ops::Range<usize> {
        let first = ((offset - self.region_start) / self.granule) as usize;
        first..first + (len / self.granule) as usize
    }

    /// Claims every block of the write `offset..offset+len` and returns its generation, or
    /// `None` (claiming nothing) when one of them has a write in flight.
    pub fn claim(&self, offset: u64, len: u64) -> Option<u64> {
        let r = self.range(offset, len);
        for i in r.clone() {
            let prev = self.blocks[i].fetch_or(IN_FLIGHT, Ordering::Acquire);
            if prev & IN_FLIGHT != 0 {
                for j in r.start..i {
                    self.blocks[j].fetch_and(!IN_FLIGHT, Ordering::Release);
                }
                return None;
            }
        }
        Some(self.next_generation.fetch_add(1, Ordering::Relaxed))
    }

    /// Stamps `buf` (the write of `offset`) as generation `generation`, block by block.
    pub fn stamp(&self, buf: &mut [u8], offset: u64, generation: u64) {
        let g = self.granule as usize;
        for (i, b) in buf.chunks_exact_mut(g).enumerate() {
            match &self.pattern {
                Some(p) => p.fill(b, offset + (i * g) as u64),
                None => block::stamp(b, offset + (i * g) as u64, self.run_id, generation),
            }
        }
    }

    /// The write claimed by [`Written::claim`] ended: it completed (the blocks now hold
    /// `generation`) or failed (their content is unknown and they are not checked).
    pub fn complete(&self, offset: u64, len: u64, generation: u64, ok: bool) {
        let v = if ok { generation << 1 } else { 0 };
        for i in self.range(offset, len) {
            self.blocks[i].store(v, Ordering::Release);
        }
    }

    /// Reads the region of `file` back once no write is running and checks every written
    /// block against the generation last completed there: one read-back, timed. The
    /// region's offsets are offsets in `file`; the error is the read that failed.
    pub fn check_file(&self, file: &File, stop: &AtomicBool) -> io::Result<Tally> {
        let t0 = Instant::now();
        let g = self.granule;
        let per_chunk = (READ_CHUNK / g).max(1) as usize;
        let mut pool = BufferPool::new(1, per_chunk * g as usize);
        let mut tally = Tally {
            read_backs: Some(1),
            ..Tally::default()
        };
        let mut skipped = 0;
        for (c, states) in self.blocks.chunks(per_chunk).enumerate() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let expected: Vec<u64> = states
                .iter()
                .map(|s| {
                    let v = s.load(Ordering::Acquire);
                    if v & IN_FLIGHT != 0 {
                        // Left in flight by a job that stopped on an error: unknown now.
                        s.store(0, Ordering::Release);
                        skipped += 1;
                        0
                    } else {
                        v >> 1
                    }
                })
                .collect();
            let (Some(first), Some(last)) = (
                expected.iter().position(|&e| e != 0),
                expected.iter().rposition(|&e| e != 0),
            ) else {
                continue;
            };
            let chunk_off = self.region_start + (c * per_chunk) as u64 * g;
            let from = first as u64 * g;
            let len = (last + 1 - first) as u64 * g;
            let buf = &mut pool.slot_mut(0)[..len as usize];
            file.read_exact_at(buf, chunk_off + from)?;
            for (i, &e) in expected
                .iter()
                .enumerate()
                .skip(first)
                .take(last + 1 - first)
            {
                if e == 0 {
                    continue;
                }
                let at = (i - first) * g as usize;
                let offset = chunk_off + i as u64 * g;
                let data = &buf[at..at + g as usize];
                if let Some(p) = &self.pattern {
                    let m = p.mismatch(data, offset);
                    tally.record(m.is_none(), "pattern", || Failure {
                        offset: offset + m.map_or(0, |m| m.at as u64),
                        class: "pattern".into(),
                        expected: m
                            .map(|m| format!("0x{:02x}", m.expected))
                            .unwrap_or_default(),
                        found: m.map(|m| format!("0x{:02x}", m.found)).unwrap_or_default(),
                        detail: format!("not verify_pattern {}", p.text),
                        ..Failure::default()
                    });
                    continue;
                }
                let v = block::check(data, offset, self.run_id, Some(e));
                tally.record(v.is_ok(), v.class(), || Failure {
                    offset,
                    class: v.class().into(),
                    expected_generation: Some(e),
                    detail: v.to_string(),
                    ..Failure::default()
                });
            }
        }
        tally.skipped_in_flight = Some(skipped);
        tally.seconds = Some(t0.elapsed().as_secs_f64());
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_exclude_each_other_and_generations_grow() {
        let w = Written::new(7, 4096, 0, 8 * 4096).unwrap();
        let g1 = w.claim(0, 8192).unwrap();
        assert!(w.claim(4096, 4096).is_none(), "block 1 is in flight");
        let g3 = w.claim(3 * 4096, 4096).unwrap();
        // Blocks 2..4: block 2 is free, block 3 busy; the failed claim must release 2.
        assert!(w.claim(2 * 4096, 2 * 4096).is_none());
        let g2 = w.claim(2 * 4096, 4096).expect("block 2 released");
        assert!(g1 < g3 && g3 < g2);
        w.complete(0, 8192, g1, true);
        assert_eq!(w.blocks[1].load(Ordering::Relaxed), g1 << 1);
        assert!(w.claim(4096, 4096).is_some());
        w.complete(3 * 4096, 4096, g3, false);
        assert_eq!(w.blocks[3].load(Ordering::Relaxed), 0);
        assert!(Written::new(1, 1000, 0, 4096).is_none());
    }

    #[test]
    fn generations_can_continue_from_an_earlier_test() {
        let w = Written::new(7, 512, 0, 4 * 512).unwrap().starting_at(40);
        assert_eq!(w.claim(0, 512), Some(40));
        assert_eq!(w.next_generation(), 41);
        assert_eq!(
            Written::new(7, 512, 0, 512)
                .unwrap()
                .starting_at(0)
                .claim(0, 512),
            Some(1)
        );
    }
}
