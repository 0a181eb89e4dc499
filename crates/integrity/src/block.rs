//! The self-describing block: a header in the first sector, a tag at the end of every
//! 512-byte sector, and incompressible payload everywhere else. `stamp` writes one, `check`
//! classifies what was read back. The byte layout is documented in docs/integrity.md.
//!
//! Header (bytes 0..64 of the block, little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | `MAGIC` |
//! | 8..16 | offset of the block in its file or device |
//! | 16..24 | run id |
//! | 24..32 | generation (1 for the first write of the block, +1 per rewrite) |
//! | 32..40 | write time, ns since the Unix epoch |
//! | 40..44 | block length |
//! | 44..48 | crc32c of bytes 0..44 (header sanity) |
//! | 48..52 | crc32c of the whole block except these four bytes |
//! | 52..64 | zero |
//!
//! Sector tag (the last 16 bytes of every 512-byte sector, header sector included):
//! generation (u64), sector index in the block (u32), crc32c of the sector's first 496
//! bytes seeded with (run id, offset, generation, index). A sector is therefore checkable
//! on its own, which is what tells a torn write (every sector intact, generations differ)
//! from bit corruption (a sector whose own checksum fails).

/// First eight bytes of every block iolab stamps.
pub const MAGIC: [u8; 8] = *b"IOLABVB1";
/// Bytes of the header at the start of a block.
pub const HEADER_LEN: usize = 64;
/// Granularity of the per-sector tags; block sizes are multiples of it.
pub const SECTOR: usize = 512;
/// Bytes of the tag at the end of each sector.
pub const TAG_LEN: usize = 16;

const SECTOR_DATA: usize = SECTOR - TAG_LEN;
const HEADER_CRC_AT: usize = 44;
const BLOCK_CRC_AT: usize = 48;

/// The decoded header of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub offset: u64,
    pub run_id: u64,
    pub generation: u64,
    pub written_ns: u64,
    pub len: u32,
    /// crc32c of header bytes 0..44.
    pub header_crc: u32,
    /// crc32c of the block except the four bytes holding it.
    pub block_crc: u32,
}

/// What a block read back is, compared with what was expected at its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Intact, written by this run for this offset; `generation` is what it holds.
    Ok { generation: u64 },
    /// A sector's own checksum fails: bits changed after the write. `first_byte` is the
    /// first byte (from the start of the block) that differs from what the block's
    /// generation should hold, `bits` how many bits differ in the damaged sectors.
    BitCorruption {
        first_byte: u64,
        bits: u64,
        generation: Option<u64>,
    },
    /// An intact block of an older generation than expected: a lost or stale write.
    Stale { found: u64, expected: u64 },
    /// An intact block of a later generation than expected (a write the caller did not
    /// know about, e.g. one in flight when a journal ended).
    Newer { found: u64, expected: u64 },
    /// An intact block of this run written for another offset: a misdirected write.
    Misdirected { header_offset: u64, generation: u64 },
    /// Every byte is zero: never written, or trimmed/zeroed since.
    Zeroed,
    /// Every sector is intact on its own but they disagree: the block changes at byte `at`
    /// from generation `before` to `after` (`None` = zero-filled sectors).
    Torn {
        at: u64,
        before: Option<u64>,
        after: Option<u64>,
    },
    /// Not an iolab block of this run: no valid header or sector of this run.
    Foreign,
}

impl Verdict {
    pub fn is_ok(&self) -> bool {
        matches!(self, Verdict::Ok { .. })
    }

    /// Short stable name of the class, as printed and stored.
    pub fn class(&self) -> &'static str {
        match self {
            Verdict::Ok { .. } => "ok",
            Verdict::BitCorruption { .. } => "bit-corruption",
            Verdict::Stale { .. } => "stale",
            Verdict::Newer { .. } => "newer",
            Verdict::Misdirected { .. } => "misdirected",
            Verdict::Zeroed => "zeroed",
            Verdict::Torn { .. } => "torn",
            Verdict::Foreign => "foreign",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gen = |g: &Option<u64>| match g {
            Some(g) => format!("generation {g}"),
            None => "zeros".to_string(),
        };
        match self {
            Verdict::Ok { generation } => write!(f, "ok (generation {generation})"),
            Verdict::BitCorruption {
                first_byte,
                bits,
                generation,
            } => write!(
                f,
                "bit corruption: {bits} bit(s) differ from {}, first at byte {first_byte} \
                 of the block",
                gen(generation)
            ),
            Verdict::Stale { found, expected } => write!(
                f,
                "stale: found generation {found}, expected {expected} (a lost write)"
            ),
            Verdict::Newer { found, expected } => {
                write!(f, "newer: found generation {found}, expected {expected}")
            }
            Verdict::Misdirected {
                header_offset,
                generation,
            } => write!(
                f,
                "misdirected: holds the block written for offset {header_offset} \
                 (generation {generation})"
            ),
            Verdict::Zeroed => write!(f, "zeroed: every byte is zero"),
            Verdict::Torn { at, before, after } => write!(
                f,
                "torn: {} up to byte {at} of the block, {} from there",
                gen(before),
                gen(after)
            ),
            Verdict::Foreign => write!(f, "foreign: not a block of this run"),
        }
    }
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

fn get_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// splitmix64: one step of the payload generator and the seed mixer.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn sector_seed(run_id: u64, offset: u64, generation: u64, index: u32) -> u64 {
    mix(mix(mix(run_id ^ 0x494F_4C41_4256_4231) ^ offset) ^ generation) ^ u64::from(index)
}

/// One step of the payload generator (xorshift64*): advances `s`, returns the next word.
#[inline(always)]
fn next_word(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Fills `out` with the payload of one sector: xorshift64* output, incompressible.
fn fill_payload(out: &mut [u8], seed: u64) {
    let mut s = mix(seed) | 1;
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&next_word(&mut s).to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let last = mix(s).to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&last[..n]);
}

// The interleaved fill below writes whole words only.
const _: () = assert!(SECTOR_DATA.is_multiple_of(8));

/// Every sector's payload of `buf`, byte for byte what [`fill_payload`] writes with
/// `seed(index)`, four sectors at a time: each generator step waits on the one before, so
/// one sector's chain leaves the CPU idle between steps; four independent chains overlap.
fn fill_payloads(buf: &mut [u8], seed: impl Fn(u32) -> u64) {
    const LANES: usize = 4;
    let sectors = buf.len() / SECTOR;
    let grouped = sectors - sectors % LANES;
    for first in (0..grouped).step_by(LANES) {
        let mut s: [u64; LANES] = std::array::from_fn(|k| mix(seed((first + k) as u32)) | 1);
        let group = &mut buf[first * SECTOR..(first + LANES) * SECTOR];
        for w in (0..SECTOR_DATA).step_by(8) {
            for (k, state) in s.iter_mut().enumerate() {
                let at = k * SECTOR + w;
                group[at..at + 8].copy_from_slice(&next_word(state).to_le_bytes());
            }
        }
    }
    for i in grouped..sectors {
        let at = i * SECTOR;
        fill_payload(&mut buf[at..at + SECTOR_DATA], seed(i as u32));
    }
}

fn sector_crc(sector: &[u8], run_id: u64, offset: u64, generation: u64, index: u32) -> u32 {
    let mut seed = [0u8; 28];
    seed[0..8].copy_from_slice(&run_id.to_le_bytes());
    seed[8..16].copy_from_slice(&offset.to_le_bytes());
    seed[16..24].copy_from_slice(&generation.to_le_bytes());
    seed[24..28].copy_from_slice(&index.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(&seed), &sector[..SECTOR_DATA])
}

fn block_crc(buf: &[u8]) -> u32 {
    crc32c::crc32c_append(
        crc32c::crc32c(&buf[..BLOCK_CRC_AT]),
        &buf[BLOCK_CRC_AT + 4..],
    )
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Panics unless `len` is a usable block size.
fn assert_block_len(len: usize) {
    assert!(
        len >= SECTOR && len.is_multiple_of(SECTOR) && len <= u32::MAX as usize,
        "block length {len} is not a multiple of {SECTOR} bytes"
    );
}

/// Makes `buf` the block written for `offset` by run `run_id` at `generation`, stamped with
/// the current time. `buf.len()` is the block size: a multiple of 512, at least 512.
pub fn stamp(buf: &mut [u8], offset: u64, run_id: u64, generation: u64) {
    stamp_at(buf, offset, run_id, generation, now_ns());
}

/// `stamp` with a given write time (what `check` rebuilds a damaged block from).
pub fn stamp_at(buf: &mut [u8], offset: u64, run_id: u64, generation: u64, written_ns: u64) {
    assert_block_len(buf.len());
    fill_payloads(buf, |index| sector_seed(run_id, offset, generation, index));
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        let index = i as u32;
        if i == 0 {
            sector[..HEADER_LEN].fill(0);
            sector[..8].copy_from_slice(&MAGIC);
            put_u64(sector, 8, offset);
            put_u64(sector, 16, run_id);
            put_u64(sector, 24, generation);
            put_u64(sector, 32, written_ns);
        }
        put_u64(sector, SECTOR_DATA, generation);
        put_u32(sector, SECTOR_DATA + 8, index);
    }
    let len = buf.len() as u32;
    put_u32(buf, 40, len);
    let hcrc = crc32c::crc32c(&buf[..HEADER_CRC_AT]);
    put_u32(buf, HEADER_CRC_AT, hcrc);
    put_u32(buf, BLOCK_CRC_AT, 0);
    // Sector tags cover the finished header, so they come after it.
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        let c = sector_crc(sector, run_id, offset, generation, i as u32);
        put_u32(sector, SECTOR_DATA + 12, c);
    }
    // Sector 0's tag was computed with the block checksum field still zero (the block
    // checksum covers that tag, so the other order would be circular).
    let bcrc = block_crc(buf);
    put_u32(buf, BLOCK_CRC_AT, bcrc);
}

/// The header at the start of `buf` if the magic and the header checksum hold.
pub fn parse_header(buf: &[u8]) -> Option<Header> {
    if buf.len() < HEADER_LEN || buf[..8] != MAGIC {
        return None;
    }
    if crc32c::crc32c(&buf[..HEADER_CRC_AT]) != get_u32(buf, HEADER_CRC_AT) {
        return None;
    }
    let len = get_u32(buf, 40);
    if (len as usize) < SECTOR || !(len as usize).is_multiple_of(SECTOR) {
        return None;
    }
    Some(Header {
        offset: get_u64(buf, 8),
        run_id: get_u64(buf, 16),
        generation: get_u64(buf, 24),
        written_ns: get_u64(buf, 32),
        len,
        header_crc: get_u32(buf, HEADER_CRC_AT),
        block_crc: get_u32(buf, BLOCK_CRC_AT),
    })
}

/// What one sector holds on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SectorState {
    Zero,
    Valid(u64),
    Bad,
}

fn sector_state(sector: &[u8], run_id: u64, offset: u64, index: u32) -> SectorState {
    if sector.iter().all(|&b| b == 0) {
        return SectorState::Zero;
    }
    let generation = get_u64(sector, SECTOR_DATA);
    let tagged_index = get_u32(sector, SECTOR_DATA + 8);
    let stored = get_u32(sector, SECTOR_DATA + 12);
    if tagged_index != index {
        return SectorState::Bad;
    }
    let crc = if index == 0 {
        // Sector 0 was tagged with the block checksum field still zero.
        let mut copy = [0u8; SECTOR];
        copy.copy_from_slice(sector);
        put_u32(&mut copy, BLOCK_CRC_AT, 0);
        sector_crc(&copy, run_id, offset, generation, index)
    } else {
        sector_crc(sector, run_id, offset, generation, index)
    };
    if crc == stored {
        SectorState::Valid(generation)
    } else {
        SectorState::Bad
    }
}

/// Classifies the block `buf` read from `expected_offset`, for run `run_id`.
/// `expected_generation`: the generation that should be there, if known; `None` accepts any.
pub fn check(
    buf: &[u8],
    expected_offset: u64,
    run_id: u64,
    expected_generation: Option<u64>,
) -> Verdict {
    assert_block_len(buf.len());
    if buf.iter().all(|&b| b == 0) {
        return Verdict::Zeroed;
    }
    let header = parse_header(buf).filter(|h| h.len as usize == buf.len());
    if let Some(h) = header {
        if h.run_id != run_id {
            return Verdict::Foreign;
        }
        if h.block_crc == block_crc(buf) {
            if h.offset != expected_offset {
                return Verdict::Misdirected {
                    header_offset: h.offset,
                    generation: h.generation,
                };
            }
            return match expected_generation {
                Some(e) if h.generation < e => Verdict::Stale {
                    found: h.generation,
                    expected: e,
                },
                Some(e) if h.generation > e => Verdict::Newer {
                    found: h.generation,
                    expected: e,
                },
                _ => Verdict::Ok {
                    generation: h.generation,
                },
            };
        }
    }
    // The block checksum fails (or there is no usable header): look at each sector.
    let offset = header.map_or(expected_offset, |h| h.offset);
    let states: Vec<SectorState> = buf
        .chunks_exact(SECTOR)
        .enumerate()
        .map(|(i, s)| sector_state(s, run_id, offset, i as u32))
        .collect();
    let reference = header.map(|h| h.generation).or_else(|| {
        states.iter().find_map(|s| match s {
            SectorState::Valid(g) => Some(*g),
            _ => None,
        })
    });
    if states.contains(&SectorState::Bad) {
        let Some(generation) = reference else {
            // No sector of this block: perhaps the block is here, displaced by whole
            // sectors (a write that landed 512 bytes off).
            return displaced(buf, run_id).unwrap_or(Verdict::Foreign);
        };
        return bit_corruption(buf, &states, offset, run_id, generation);
    }
    // Every sector is zero or intact on its own: find where the block changes.
    let first = states[0];
    match states.iter().position(|s| *s != first) {
        Some(i) => {
            let gen = |s: SectorState| match s {
                SectorState::Valid(g) => Some(g),
                _ => None,
            };
            Verdict::Torn {
                at: (i * SECTOR) as u64,
                before: gen(first),
                after: gen(states[i]),
            }
        }
        // All sectors intact and of one generation, yet the block checksum failed: only
        // possible when the checksum field itself was hit.
        None => Verdict::BitCorruption {
            first_byte: BLOCK_CRC_AT as u64,
            bits: u64::from((get_u32(buf, BLOCK_CRC_AT) ^ block_crc(buf)).count_ones()),
            generation: reference,
        },
    }
}

/// A header of this run at a later sector of `buf`: the block it starts was written whole
/// sectors away from where it belongs, so this location holds misdirected data.
fn displaced(buf: &[u8], run_id: u64) -> Option<Verdict> {
    (1..buf.len() / SECTOR).find_map(|k| {
        let h = parse_header(&buf[k * SECTOR..])?;
        (h.run_id == run_id && h.len as usize == buf.len()).then_some(Verdict::Misdirected {
            header_offset: h.offset,
            generation: h.generation,
        })
    })
}

/// The write time the block was stamped with. It cannot be rebuilt like the other header
/// fields, so when the header checksum fails the recorded time may be the damaged field:
/// the time within two flipped bits of it whose header checksum matches is the original.
/// Falls back to the recorded time (then the checksum itself was hit).
fn original_time(buf: &[u8], offset: u64, run_id: u64, generation: u64) -> u64 {
    let recorded = get_u64(buf, 32);
    let stored = get_u32(buf, HEADER_CRC_AT);
    let mut hdr = [0u8; HEADER_CRC_AT];
    hdr[..8].copy_from_slice(&MAGIC);
    hdr[8..16].copy_from_slice(&offset.to_le_bytes());
    hdr[16..24].copy_from_slice(&run_id.to_le_bytes());
    hdr[24..32].copy_from_slice(&generation.to_le_bytes());
    hdr[40..44].copy_from_slice(&(buf.len() as u32).to_le_bytes());
    let mut matches = |t: u64| {
        hdr[32..40].copy_from_slice(&t.to_le_bytes());
        crc32c::crc32c(&hdr) == stored
    };
    if matches(recorded) {
        return recorded;
    }
    for i in 0..64 {
        if matches(recorded ^ (1 << i)) {
            return recorded ^ (1 << i);
        }
        for j in i + 1..64 {
            let t = recorded ^ (1 << i) ^ (1 << j);
            if matches(t) {
                return t;
            }
        }
    }
    recorded
}

/// Locates the damage by rebuilding the block of `generation` (with its original write
/// time) and comparing the sectors whose own checksum failed.
fn bit_corruption(
    buf: &[u8],
    states: &[SectorState],
    offset: u64,
    run_id: u64,
    generation: u64,
) -> Verdict {
    let mut expected = vec![0u8; buf.len()];
    let time = original_time(buf, offset, run_id, generation);
    stamp_at(&mut expected, offset, run_id, generation, time);
    let mut first_byte = None;
    let mut bits = 0u64;
    for (i, state) in states.iter().enumerate() {
        if *state != SectorState::Bad {
            continue;
        }
        let range = i * SECTOR..(i + 1) * SECTOR;
        for (j, (a, b)) in buf[range.clone()]
            .iter()
            .zip(&expected[range.clone()])
            .enumerate()
        {
            let d = (a ^ b).count_ones();
            if d > 0 {
                bits += u64::from(d);
                first_byte.get_or_insert((range.start + j) as u64);
            }
        }
    }
    Verdict::BitCorruption {
        first_byte: first_byte.unwrap_or(0),
        bits,
        generation: Some(generation),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_payloads_are_the_one_sector_payloads() {
        for sectors in 1..=9 {
            let mut fast = vec![0u8; sectors * SECTOR];
            let mut slow = vec![0u8; sectors * SECTOR];
            let seed = |i: u32| sector_seed(7, 4096 * sectors as u64, 3, i);
            fill_payloads(&mut fast, seed);
            for (i, sector) in slow.chunks_exact_mut(SECTOR).enumerate() {
                fill_payload(&mut sector[..SECTOR_DATA], seed(i as u32));
            }
            assert_eq!(fast, slow, "{sectors} sectors");
        }
    }

    const RUN: u64 = 0xA11CE;

    fn block(len: usize, offset: u64, generation: u64) -> Vec<u8> {
        let mut b = vec![0u8; len];
        stamp(&mut b, offset, RUN, generation);
        b
    }

    #[test]
    fn round_trip_at_several_sizes() {
        for len in [512, 4096, 65536] {
            let b = block(len, 8 * len as u64, 3);
            assert_eq!(
                check(&b, 8 * len as u64, RUN, Some(3)),
                Verdict::Ok { generation: 3 }
            );
            assert_eq!(
                check(&b, 8 * len as u64, RUN, None),
                Verdict::Ok { generation: 3 }
            );
            let h = parse_header(&b).unwrap();
            assert_eq!(
                (h.offset, h.run_id, h.generation, h.len),
                (8 * len as u64, RUN, 3, len as u32)
            );
        }
    }

    #[test]
    fn payload_depends_on_offset_generation_and_run() {
        let a = block(4096, 0, 1);
        let b = block(4096, 4096, 1);
        let c = block(4096, 0, 2);
        let mut d = vec![0u8; 4096];
        stamp(&mut d, 0, RUN + 1, 1);
        for other in [&b, &c, &d] {
            let same = payload(&a)
                .iter()
                .zip(&payload(other))
                .filter(|(x, y)| x == y)
                .count();
            // Random bytes agree about 1 time in 256.
            assert!(same < 4096 / 64, "{same} equal bytes");
        }
    }

    /// The payload bytes of a block: everything but the header and the sector tags.
    fn payload(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, s) in b.chunks_exact(SECTOR).enumerate() {
            out.extend_from_slice(&s[if i == 0 { HEADER_LEN } else { 0 }..SECTOR_DATA]);
        }
        out
    }

    fn gzip_ratio(data: &[u8]) -> f64 {
        use std::io::Write;
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        z.write_all(data).unwrap();
        z.finish().unwrap().len() as f64 / data.len() as f64
    }

    #[test]
    fn payload_is_incompressible() {
        let blocks: Vec<Vec<u8>> = (0..256u64).map(|i| block(4096, i * 4096, 1)).collect();
        let payload: Vec<u8> = blocks.iter().flat_map(|b| payload(b)).collect();
        let ratio = gzip_ratio(&payload);
        assert!(ratio > 0.999, "gzip shrank the payload to {ratio:.4}");
        // Whole blocks: only parts of the header and of the sector tags (192 bytes of 4096)
        // are predictable.
        let ratio = gzip_ratio(&blocks.concat());
        assert!(ratio > 0.96, "gzip shrank 1 MiB of blocks to {ratio:.4}");
    }

    #[test]
    fn flipped_bit_is_located() {
        for at in [3usize, 40, 100, 511, 600, 4000, 4095] {
            let mut b = block(4096, 4096, 2);
            b[at] ^= 0x10;
            match check(&b, 4096, RUN, Some(2)) {
                Verdict::BitCorruption {
                    first_byte, bits, ..
                } => assert_eq!((first_byte, bits), (at as u64, 1), "flip at {at}"),
                v => panic!("flip at {at}: {v:?}"),
            }
        }
    }

    #[test]
    fn flipped_bit_in_a_one_sector_block_outside_the_header() {
        let mut b = block(512, 0, 1);
        b[300] ^= 1;
        assert!(matches!(
            check(&b, 0, RUN, Some(1)),
            Verdict::BitCorruption {
                first_byte: 300,
                bits: 1,
                ..
            }
        ));
    }

    #[test]
    fn older_generation_is_stale_and_later_is_newer() {
        let b = block(4096, 0, 1);
        assert_eq!(
            check(&b, 0, RUN, Some(2)),
            Verdict::Stale {
                found: 1,
                expected: 2
            }
        );
        let b = block(4096, 0, 5);
        assert_eq!(
            check(&b, 0, RUN, Some(2)),
            Verdict::Newer {
                found: 5,
                expected: 2
            }
        );
    }

    #[test]
    fn block_at_the_wrong_offset_is_misdirected() {
        let b = block(4096, 8192, 1);
        assert_eq!(
            check(&b, 4096, RUN, Some(1)),
            Verdict::Misdirected {
                header_offset: 8192,
                generation: 1
            }
        );
    }

    #[test]
    fn zeros_are_zeroed_and_other_data_foreign() {
        assert_eq!(check(&[0u8; 4096], 0, RUN, Some(1)), Verdict::Zeroed);
        let mut junk = vec![0u8; 4096];
        fill_payload(&mut junk, 42);
        assert_eq!(check(&junk, 0, RUN, Some(1)), Verdict::Foreign);
        let other_run = {
            let mut b = vec![0u8; 4096];
            stamp(&mut b, 0, RUN + 1, 1);
            b
        };
        assert_eq!(check(&other_run, 0, RUN, Some(1)), Verdict::Foreign);
    }

    #[test]
    fn half_new_half_old_is_torn_at_the_boundary() {
        let old = block(8192, 0, 1);
        let mut b = block(8192, 0, 2);
        b[4096..].copy_from_slice(&old[4096..]);
        assert_eq!(
            check(&b, 0, RUN, Some(2)),
            Verdict::Torn {
                at: 4096,
                before: Some(2),
                after: Some(1)
            }
        );
        // New first sectors over a never-written block.
        let mut b = block(8192, 0, 1);
        b[1536..].fill(0);
        assert_eq!(
            check(&b, 0, RUN, Some(1)),
            Verdict::Torn {
                at: 1536,
                before: Some(1),
                after: None
            }
        );
        // Old header sector, new rest.
        let mut b = block(4096, 0, 1);
        b[512..].copy_from_slice(&block(4096, 0, 2)[512..]);
        assert_eq!(
            check(&b, 0, RUN, Some(2)),
            Verdict::Torn {
                at: 512,
                before: Some(1),
                after: Some(2)
            }
        );
    }

    #[test]
    fn a_corrupted_sector_tag_is_corruption_not_a_tear() {
        let mut b = block(4096, 0, 1);
        b[1024 + SECTOR_DATA] ^= 0x01; // generation field of sector 2's tag
        assert!(matches!(
            check(&b, 0, RUN, Some(1)),
            Verdict::BitCorruption {
                first_byte: 1520,
                bits: 1,
                generation: Some(1)
            }
        ));
    }

    #[test]
    fn a_corrupted_header_still_locates_the_damage() {
        let mut b = block(4096, 0, 7);
        b[0] ^= 0x80; // magic
        assert!(matches!(
            check(&b, 0, RUN, Some(7)),
            Verdict::BitCorruption {
                first_byte: 0,
                bits: 1,
                generation: Some(7)
            }
        ));
    }
}
