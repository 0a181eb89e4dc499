//! Property-style checks of `block::check` over many positions: every bit of the header,
//! every sector tag, payload bytes, tears at every sector boundary, partial zeroing,
//! another run's block and a block shifted by a sector each get their class and offset.

use iolab_integrity::block::{check, stamp_at, Verdict};

const RUN: u64 = 0x1234_5678_9abc_def0;
const GEN: u64 = 3;

fn block(len: usize, offset: u64, generation: u64) -> Vec<u8> {
    let mut b = vec![0u8; len];
    stamp_at(&mut b, offset, RUN, generation, 1_700_000_000_000_000_000);
    b
}

fn corruption_at(v: &Verdict) -> Option<(u64, u64)> {
    match v {
        Verdict::BitCorruption {
            first_byte, bits, ..
        } => Some((*first_byte, *bits)),
        _ => None,
    }
}

#[test]
fn every_header_and_tag_bit_and_sampled_payload_bits_are_bit_corruption_at_their_byte() {
    for len in [1024usize, 4096, 16384] {
        let off = 7 * len as u64;
        let good = block(len, off, GEN);
        let mut positions: Vec<usize> = (0..64).collect();
        for s in 0..len / 512 {
            positions.extend(s * 512 + 496..s * 512 + 512);
        }
        positions.extend((64..len).step_by(37).filter(|p| p % 512 < 496));
        for p in positions {
            for bit in 0..8 {
                let mut b = good.clone();
                b[p] ^= 1 << bit;
                let v = check(&b, off, RUN, Some(GEN));
                let want = if (48..52).contains(&p) { 48 } else { p as u64 };
                let got = corruption_at(&v);
                assert_eq!(
                    got.map(|c| c.0),
                    Some(want),
                    "len {len} byte {p} bit {bit}: {v:?}"
                );
                if !(48..52).contains(&p) {
                    assert_eq!(
                        got.map(|c| c.1),
                        Some(1),
                        "len {len} byte {p} bit {bit}: {v:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_tear_at_every_sector_boundary_is_torn_there() {
    for len in [1024usize, 4096, 16384] {
        let off = 3 * len as u64;
        let (old, new) = (block(len, off, GEN), block(len, off, GEN + 1));
        for k in 1..len / 512 {
            let mut b = new.clone();
            b[k * 512..].copy_from_slice(&old[k * 512..]);
            assert_eq!(
                check(&b, off, RUN, Some(GEN + 1)),
                Verdict::Torn {
                    at: (k * 512) as u64,
                    before: Some(GEN + 1),
                    after: Some(GEN)
                },
                "len {len} tear at sector {k}"
            );
            let mut b = old.clone();
            b[k * 512..].copy_from_slice(&new[k * 512..]);
            assert_eq!(
                check(&b, off, RUN, Some(GEN + 1)),
                Verdict::Torn {
                    at: (k * 512) as u64,
                    before: Some(GEN),
                    after: Some(GEN + 1)
                },
                "len {len} old head, new tail from sector {k}"
            );
        }
    }
}

#[test]
fn partial_zeroing_is_torn_at_a_sector_boundary_and_corruption_inside_one() {
    let len = 4096;
    let good = block(len, 0, GEN);
    for k in 1..8 {
        let mut b = good.clone();
        b[k * 512..].fill(0);
        assert_eq!(
            check(&b, 0, RUN, Some(GEN)),
            Verdict::Torn {
                at: (k * 512) as u64,
                before: Some(GEN),
                after: None
            }
        );
        let mut b = good.clone();
        b[..k * 512].fill(0);
        assert_eq!(
            check(&b, 0, RUN, Some(GEN)),
            Verdict::Torn {
                at: (k * 512) as u64,
                before: None,
                after: Some(GEN)
            }
        );
    }
    let mut b = good.clone();
    b[1000..1100].fill(0);
    assert_eq!(
        corruption_at(&check(&b, 0, RUN, Some(GEN))).map(|c| c.0),
        Some(1000)
    );
}

#[test]
fn a_flip_in_the_write_time_is_located_at_its_byte() {
    let good = block(4096, 0, GEN);
    for p in 32..40 {
        let mut b = good.clone();
        b[p] ^= 1;
        let v = check(&b, 0, RUN, Some(GEN));
        assert_eq!(corruption_at(&v), Some((p as u64, 1)), "byte {p}: {v:?}");
    }
}

#[test]
fn another_runs_block_is_foreign() {
    let len = 4096;
    let off = 10 * len as u64;
    let mut other = vec![0u8; len];
    stamp_at(&mut other, off, RUN ^ 1, GEN, 1);
    assert_eq!(check(&other, off, RUN, Some(GEN)), Verdict::Foreign);
}

#[test]
fn a_block_shifted_by_a_sector_is_misdirected() {
    let len = 4096;
    let off = 10 * len as u64;
    // Two neighbouring blocks written 512 bytes too far: at `off` the device holds the
    // previous block's last sector, then the first seven sectors of this block.
    let prev = block(len, off - len as u64, GEN);
    let this = block(len, off, GEN);
    let mut shifted = prev[len - 512..].to_vec();
    shifted.extend_from_slice(&this[..len - 512]);
    let v = check(&shifted, off, RUN, Some(GEN));
    assert!(
        matches!(v, Verdict::Misdirected { .. }),
        "a block shifted by 512 bytes: {v:?}"
    );
}
