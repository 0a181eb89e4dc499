//! Page-aligned memory for O_DIRECT I/O, in slots, and random bytes to fill it with
//! (incompressible data).

use std::alloc::{alloc_zeroed, dealloc, Layout};

/// Alignment of every buffer: a page, enough for any device's logical block size.
pub const BUF_ALIGN: usize = 4096;

/// One contiguous, page-aligned allocation split into `count` slots of `slot_len` bytes.
pub struct BufferPool {
    ptr: *mut u8,
    layout: Layout,
    slot_len: usize,
    count: usize,
}

// SAFETY: the pool owns its memory exclusively; each job thread owns its own pool.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Allocates `count` zeroed slots of `slot_len` bytes each.
    pub fn new(count: usize, slot_len: usize) -> Self {
        let stride = slot_len.div_ceil(BUF_ALIGN) * BUF_ALIGN;
        let size = (stride * count).max(BUF_ALIGN);
        let layout = Layout::from_size_align(size, BUF_ALIGN).expect("valid buffer layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        BufferPool {
            ptr,
            layout,
            slot_len: stride,
            count,
        }
    }

    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn slot_ptr(&self, slot: usize) -> *mut u8 {
        assert!(slot < self.count);
        // SAFETY: slot < count, so the offset is inside the allocation.
        unsafe { self.ptr.add(slot * self.slot_len) }
    }

    pub fn slot(&self, slot: usize) -> &[u8] {
        // SAFETY: the slot lies inside the allocation; no &mut alias exists while borrowed.
        unsafe { std::slice::from_raw_parts(self.slot_ptr(slot), self.slot_len) }
    }

    pub fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusivity.
        unsafe { std::slice::from_raw_parts_mut(self.slot_ptr(slot), self.slot_len) }
    }

    /// iovecs of every slot, for io_uring buffer registration.
    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count)
            .map(|i| libc::iovec {
                iov_base: self.slot_ptr(i) as *mut libc::c_void,
                iov_len: self.slot_len,
            })
            .collect()
    }

    /// Fills every slot with random bytes.
    pub fn fill_random(&mut self, rng: &mut fastrand::Rng) {
        for i in 0..self.count {
            fill_random(self.slot_mut(i), rng);
        }
    }
}

impl Drop for BufferPool {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Fills a buffer with random bytes, 8 at a time.
pub fn fill_random(buf: &mut [u8], rng: &mut fastrand::Rng) {
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&rng.u64(..).to_ne_bytes());
    }
    for b in chunks.into_remainder() {
        *b = rng.u8(..);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_filled() {
        let mut pool = BufferPool::new(4, 6000);
        assert_eq!(pool.slot_len(), 8192);
        for i in 0..4 {
            assert_eq!(pool.slot_ptr(i) as usize % BUF_ALIGN, 0);
        }
        assert!(pool.slot(3).iter().all(|&b| b == 0));
        pool.fill_random(&mut fastrand::Rng::with_seed(1));
        assert_ne!(pool.slot(0), pool.slot(1));
    }
}
