//! I/O buffers of 1 MiB and more are 2 MiB-aligned and asked for transparent huge pages,
//! so a 1 MiB direct I/O is one physically contiguous segment (docs/benchmarks.md).

use iolab_engine::buffers::BufferPool;

/// `AnonHugePages` (kB) of the mapping holding `addr`, from /proc/self/smaps.
fn anon_huge_kb(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = a <= addr && addr < b;
                    continue;
                }
            }
        }
        if inside {
            if let Some(v) = line.strip_prefix("AnonHugePages:") {
                return v.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
    }
    None
}

#[test]
fn large_pools_are_huge_page_aligned_and_small_ones_page_aligned() {
    let big = BufferPool::new(4, 1 << 20);
    assert_eq!(big.slot_ptr(0) as usize % (2 << 20), 0);
    assert_eq!(big.slot_ptr(1) as usize - big.slot_ptr(0) as usize, 1 << 20);
    assert!(big.slot(3).iter().all(|&b| b == 0));
    let small = BufferPool::new(3, 6000);
    assert_eq!(small.slot_len(), 8192);
    assert_eq!(small.slot_ptr(0) as usize % 4096, 0);
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    // Where THP can be had, the kernel decides at fault time; say what it gave.
    println!(
        "THP {}: {:?} kB of the 4 MiB pool in huge pages",
        thp.trim(),
        anon_huge_kb(big.slot_ptr(0) as usize)
    );
}
