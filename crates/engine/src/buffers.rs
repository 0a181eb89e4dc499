//! I/O buffers: page-aligned memory for O_DIRECT (from iolab-sys), filled with
//! incompressible data and re-stamped before each write so no two written blocks are alike.

pub use iolab_sys::buffers::{fill_random, BufferPool, BUF_ALIGN};

/// Granule at which written data is made unique: every 4 KiB (or the whole block if
/// smaller) gets fresh random bytes at its start before each write.
pub const STAMP_GRANULE: usize = 4096;

/// Makes a block unique before it is written: overwrites the first 16 bytes of every 4 KiB
/// granule with fresh random bytes. The rest stays random from the initial fill, so the
/// block is incompressible and no two blocks deduplicate.
#[inline]
pub fn stamp(block: &mut [u8], rng: &mut fastrand::Rng) {
    let mut off = 0;
    while off + 16 <= block.len() {
        block[off..off + 8].copy_from_slice(&rng.u64(..).to_ne_bytes());
        block[off + 8..off + 16].copy_from_slice(&rng.u64(..).to_ne_bytes());
        off += STAMP_GRANULE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamping_makes_every_granule_unique() {
        let mut pool = BufferPool::new(1, 8192);
        let mut rng = fastrand::Rng::with_seed(1);
        pool.fill_random(&mut rng);
        let before = pool.slot(0).to_vec();
        stamp(pool.slot_mut(0), &mut rng);
        let after = pool.slot(0);
        assert_ne!(&before[..16], &after[..16]);
        assert_ne!(&before[4096..4112], &after[4096..4112]);
        assert_eq!(&before[16..4096], &after[16..4096]);
    }
}
