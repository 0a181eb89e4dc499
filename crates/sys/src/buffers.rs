//! Page-aligned memory for O_DIRECT I/O, in slots, and random bytes to fill it with
//! (incompressible data).

/// Alignment of every buffer: a page, enough for any device's logical block size.
pub const BUF_ALIGN: usize = 4096;

/// A transparent huge page (x86-64, arm64 with 4 KiB pages).
const HUGE: usize = 2 << 20;

/// One contiguous, page-aligned allocation split into `count` slots of `slot_len` bytes.
///
/// Pools of 1 MiB or more are mapped 2 MiB-aligned and asked for transparent huge pages
/// (`MADV_HUGEPAGE`; taken where THP is `always` or `madvise`): a 1 MiB block then lies
/// in physically contiguous memory, which the block layer passes as one segment. From
/// 4 KiB pages it is 256 segments, more than a virtio disk's 254 per request, so every
/// 1 MiB direct I/O was split into two requests (docs/benchmarks.md, engine grid).
pub struct BufferPool {
    ptr: *mut u8,
    /// Length of the mapping at `ptr`.
    mapped: usize,
    slot_len: usize,
    count: usize,
}

// SAFETY: the pool owns its memory exclusively; each job thread owns its own pool.
unsafe impl Send for BufferPool {}

impl BufferPool {
    /// Allocates `count` zeroed slots of `slot_len` bytes each, every page touched (so no
    /// page fault lands in a timed pass).
    pub fn new(count: usize, slot_len: usize) -> Self {
        Self::with_pages(count, slot_len, true)
    }

    /// As [`BufferPool::new`]; without `huge` the pool is ordinary pages whatever its size
    /// (no huge-page alignment or advice), as a plain `malloc` gives: fio's default
    /// `mem=malloc`.
    pub fn with_pages(count: usize, slot_len: usize, huge: bool) -> Self {
        let stride = slot_len.div_ceil(BUF_ALIGN) * BUF_ALIGN;
        let size = (stride * count).max(BUF_ALIGN);
        let huge = huge && size >= HUGE / 2;
        let mapped = if huge {
            size.div_ceil(HUGE) * HUGE
        } else {
            size
        };
        // Over-map by a huge page to align the start, then give the extra back.
        let over = if huge { mapped + HUGE } else { mapped };
        // SAFETY: an anonymous private mapping; no pointer is passed in.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            panic!(
                "cannot map {over} bytes of I/O buffers: {}",
                std::io::Error::last_os_error()
            );
        }
        let raw = raw as usize;
        let start = if huge { raw.div_ceil(HUGE) * HUGE } else { raw };
        if huge {
            // SAFETY: unmapping the parts of our own mapping before `start` and after
            // `start + mapped`, both inside [raw, raw + over).
            unsafe {
                if start > raw {
                    libc::munmap(raw as *mut libc::c_void, start - raw);
                }
                let end = start + mapped;
                if raw + over > end {
                    libc::munmap(end as *mut libc::c_void, raw + over - end);
                }
                // Advice only: without THP the pool is ordinary pages.
                libc::madvise(start as *mut libc::c_void, mapped, libc::MADV_HUGEPAGE);
            }
        }
        let ptr = start as *mut u8;
        for off in (0..mapped).step_by(BUF_ALIGN) {
            // SAFETY: inside the mapping; writing the zero it already holds faults it in.
            unsafe { ptr.add(off).write_volatile(0) };
        }
        BufferPool {
            ptr,
            mapped,
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
        // SAFETY: mapped in new() with this length.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.mapped) };
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
