//! Where a block of the dataset lives on a member device, and overwriting it there.
//!
//! btrfs: FIEMAP (what `filefrag -v` prints) gives a file range's btrfs *logical* address;
//! `btrfs-map-logical -l LOGICAL -b LEN DEV` gives each copy's device and physical offset
//! (raid1: one line per mirror; raid5: mirror 1 is the data strip, mirror 2 the parity).
//! zfs has no such tool, so the member is read raw and every 512-byte-aligned intact block of
//! this run is indexed by the dataset offset in its header. A block the ZFS intent log also
//! holds can appear twice; such ambiguous blocks are never chosen.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::dataset::DataFile;
use super::tools::{self, MirrorLocation};
use super::{ScrubError, BLOCK};
use iolab_integrity::block;
use iolab_sys::buffers::BufferPool;

/// One extent of a file as FIEMAP reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: u32,
}

const FIEMAP_FLAG_SYNC: u32 = 0x1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
/// Extents whose physical address is not a plain location of the data: unknown, delayed
/// allocation, encoded (compressed), encrypted, not aligned, inline, packed in a tail.
const FIEMAP_EXTENT_NOT_PLAIN: u32 = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400;
/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_HEADER: usize = 32;
const FIEMAP_EXTENT: usize = 56;

/// The extents of `path` (FIEMAP with FIEMAP_FLAG_SYNC), as `filefrag -v` lists them.
pub(crate) fn fiemap(path: &Path) -> Result<Vec<Extent>, ScrubError> {
    let file = File::open(path)
        .map_err(|e| ScrubError::Failed(format!("{}: open: {e}", path.display())))?;
    let mut out = Vec::new();
    let mut start = 0u64;
    const BATCH: usize = 128;
    loop {
        let mut buf = vec![0u64; (FIEMAP_HEADER + BATCH * FIEMAP_EXTENT) / 8];
        buf[0] = start;
        buf[1] = u64::MAX - start;
        // fm_flags (u32 at byte 16), fm_extent_count (u32 at byte 24).
        buf[2] = u64::from(FIEMAP_FLAG_SYNC);
        buf[3] = BATCH as u64;
        // SAFETY: buf is a properly sized, 8-byte-aligned struct fiemap with room for BATCH
        // extents; the kernel writes within it.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, buf.as_mut_ptr()) };
        if rc != 0 {
            return Err(ScrubError::Failed(format!(
                "{}: FIEMAP: {}",
                path.display(),
                std::io::Error::last_os_error()
            )));
        }
        let mapped = (buf[2] >> 32) as usize;
        let mut last = false;
        for i in 0..mapped.min(BATCH) {
            let w = (FIEMAP_HEADER + i * FIEMAP_EXTENT) / 8;
            let e = Extent {
                logical: buf[w],
                physical: buf[w + 1],
                length: buf[w + 2],
                flags: buf[w + 5] as u32,
            };
            last |= e.flags & FIEMAP_EXTENT_LAST != 0;
            start = e.logical + e.length;
            out.push(e);
        }
        if mapped == 0 || last {
            return Ok(out);
        }
    }
}

/// The btrfs logical address of `[offset, offset+len)` of a file with these extents, when
/// the range lies inside one plain extent.
pub(crate) fn logical_of(extents: &[Extent], offset: u64, len: u64) -> Option<u64> {
    let e = extents
        .iter()
        .find(|e| e.logical <= offset && offset + len <= e.logical + e.length)?;
    (e.flags & FIEMAP_EXTENT_NOT_PLAIN == 0).then(|| e.physical + (offset - e.logical))
}

/// Why `btrfs-map-logical` gave no locations: it could not be run (the error kept), or it
/// failed (its status and what it said).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MapError {
    #[error(transparent)]
    Run(ScrubError),
    #[error("{command}: {status}{}", said(why))]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        why: String,
    },
}

/// What a failed tool said, as `: WORDS`, or that it said nothing.
fn said(why: &str) -> String {
    if why.is_empty() {
        " (no output)".to_string()
    } else {
        format!(": {why}")
    }
}

/// Every copy of btrfs logical range `[logical, logical+len)`: one location per mirror
/// number; `Ok(None)` when the range is split (crosses a stripe); `Err` with the tool's
/// message when `btrfs-map-logical` fails.
///
/// `btrfs-map-logical` reads the trees through the members' buffer cache while the
/// filesystem is mounted, so the cache is flushed first (BLKFLSBUF): after a transaction
/// commit (an atime update is enough) a cached old superblock points at freed tree blocks.
pub(crate) fn btrfs_copies(
    logical: u64,
    len: u64,
    members: &[PathBuf],
) -> Result<Option<Vec<MirrorLocation>>, MapError> {
    for m in members {
        flush_buffers(m);
    }
    let l = logical.to_string();
    let b = len.to_string();
    let dev = members[0].to_string_lossy();
    let out =
        tools::output(&["btrfs-map-logical", "-l", &l, "-b", &b, &dev]).map_err(MapError::Run)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let locs = tools::parse_map_logical(&text);
    if !out.status.success() || locs.is_empty() {
        let why = String::from_utf8_lossy(&out.stderr);
        let why = why.trim();
        let why = if why.is_empty() { text.trim() } else { why };
        return Err(MapError::Failed {
            command: format!("btrfs-map-logical -l {l} -b {b} {dev}"),
            status: out.status,
            why: why.to_string(),
        });
    }
    let mut mirrors: Vec<u32> = locs.iter().map(|m| m.mirror).collect();
    mirrors.sort_unstable();
    let n = mirrors.len();
    mirrors.dedup();
    if mirrors.len() != n {
        return Ok(None);
    }
    Ok(Some(locs))
}

/// Drops the buffer cache of a block device (the BLKFLSBUF ioctl of `blockdev --flushbufs`).
fn flush_buffers(dev: &Path) {
    const BLKFLSBUF: libc::c_ulong = 0x1261;
    if let Ok(f) = File::open(dev) {
        // SAFETY: an argument-less ioctl on our own descriptor; failure (not a block
        // device) leaves the cache as it was.
        unsafe { libc::ioctl(f.as_raw_fd(), BLKFLSBUF as _, 0) };
    }
}

/// Where intact blocks of run `run_id` sit on one member: dataset offset -> member offsets
/// (512-byte aligned).
pub(crate) type ContentIndex = HashMap<u64, Vec<u64>>;

/// Reads `member` from start to end with O_DIRECT and indexes every intact block of
/// `block_len` bytes of run `run_id` whose dataset offset is below `dataset_end`.
pub(crate) fn scan_member(
    member: &Path,
    run_id: u64,
    dataset_end: u64,
    stop: &AtomicBool,
) -> Result<ContentIndex, ScrubError> {
    const CHUNK: usize = 4 << 20;
    let err = |what: &str, e: std::io::Error| {
        ScrubError::Failed(format!("{}: {what}: {e}", member.display()))
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(member)
        .map_err(|e| err("open for reading", e))?;
    let size = device_size(&file).map_err(|e| err("size", e))?;
    // buf[..BLOCK] carries the previous chunk's last BLOCK bytes, so a block starting near
    // the end of one chunk is seen whole.
    let mut buf = BufferPool::new(1, BLOCK + CHUNK);
    let mut index = ContentIndex::new();
    let mut pos = 0u64;
    while pos < size {
        if stop.load(Ordering::Relaxed) {
            return Err(ScrubError::Interrupted);
        }
        let n = ((size - pos) as usize).min(CHUNK);
        let b = &mut buf.slot_mut(0)[..BLOCK + CHUNK];
        b.copy_within(CHUNK..CHUNK + BLOCK, 0);
        let got = file
            .read_at(&mut b[BLOCK..BLOCK + n], pos)
            .map_err(|e| err("read", e))?;
        if got == 0 {
            break;
        }
        // Positions in buf: BLOCK corresponds to `pos`. Look at starts from pos - BLOCK (the
        // carried-over tail) up to pos + got - BLOCK.
        let first = if pos == 0 { BLOCK } else { 0 };
        let mut at = first;
        while at + BLOCK <= BLOCK + got {
            let blk = &b[at..at + BLOCK];
            if blk[..8] == block::MAGIC {
                if let Some(h) = block::parse_header(blk) {
                    if h.run_id == run_id
                        && h.len as usize == BLOCK
                        && h.offset < dataset_end
                        && block::check(blk, h.offset, run_id, None).is_ok()
                    {
                        let member_pos = pos + at as u64 - BLOCK as u64;
                        index.entry(h.offset).or_default().push(member_pos);
                    }
                }
            }
            at += block::SECTOR;
        }
        // Keep the last BLOCK bytes of this chunk at CHUNK..CHUNK+BLOCK for the next round.
        if got < CHUNK {
            break;
        }
        pos += got as u64;
    }
    for v in index.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    Ok(index)
}

/// Size of a block device or regular file.
fn device_size(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::End(0))
}

/// The one place `len` bytes of the dataset from `offset` sit contiguously on the member
/// indexed by `idx`, when every block is there exactly once.
pub(crate) fn zfs_location(idx: &ContentIndex, offset: u64, len: u64) -> Option<u64> {
    let mut start = None;
    for (i, o) in (offset..offset + len).step_by(BLOCK).enumerate() {
        let places = idx.get(&o)?;
        if places.len() != 1 {
            return None;
        }
        match start {
            None => start = Some(places[0]),
            Some(s) if places[0] == s + (i * BLOCK) as u64 => {}
            Some(_) => return None,
        }
    }
    start
}

/// One range of one member overwritten with random bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overwrite {
    pub member: PathBuf,
    pub member_offset: u64,
    pub len: u64,
    /// The range held this run's blocks for the expected dataset offsets before the write
    /// (false for a btrfs raid5 parity strip, which holds parity, not blocks).
    pub checked_content: bool,
}

/// Overwrites `len` bytes at `offset` of `member` with random bytes, written through
/// (O_DIRECT | O_SYNC) so they reach the image before the scrub. When `expect` is given, the
/// range must first read back as this run's intact blocks for those dataset offsets;
/// otherwise nothing is written and an error says so.
pub(crate) fn overwrite(
    member: &Path,
    offset: u64,
    len: u64,
    expect: Option<(u64, u64)>,
    rng: &mut fastrand::Rng,
) -> Result<Overwrite, ScrubError> {
    let err = |what: &str, e: std::io::Error| {
        ScrubError::Failed(format!(
            "{} at {offset} (+{len}): {what}: {e}",
            member.display()
        ))
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT | libc::O_SYNC)
        .open(member)
        .map_err(|e| err("open for writing", e))?;
    let mut pool = BufferPool::new(1, len as usize);
    let buf = &mut pool.slot_mut(0)[..len as usize];
    if let Some((dataset_offset, run_id)) = expect {
        file.read_exact_at(buf, offset)
            .map_err(|e| err("read", e))?;
        for (i, blk) in buf.chunks_exact(BLOCK).enumerate() {
            let want = dataset_offset + (i * BLOCK) as u64;
            let v = block::check(blk, want, run_id, None);
            if !v.is_ok() {
                return Err(ScrubError::Failed(format!(
                    "{} at {}: expected this run's block for dataset offset {want}, found: \
                     {v}; not overwriting",
                    member.display(),
                    offset + (i * BLOCK) as u64
                )));
            }
        }
    }
    rng.fill(buf);
    file.write_all_at(buf, offset)
        .map_err(|e| err("write", e))?;
    file.sync_all().map_err(|e| err("fsync", e))?;
    Ok(Overwrite {
        member: member.to_path_buf(),
        member_offset: offset,
        len,
        checked_content: expect.is_some(),
    })
}

/// How many injections have every overwritten data copy back intact: read raw (O_DIRECT)
/// from the members after the scrub, so this counts what the scrub really rewrote, whatever
/// it reported. Parity strips are not checked (they hold no blocks).
pub(crate) fn restored(injections: &[super::Injection], run_id: u64) -> Result<u64, ScrubError> {
    let mut n = 0;
    for j in injections {
        let mut all = true;
        for o in j.overwrites.iter().filter(|o| o.checked_content) {
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_DIRECT)
                .open(&o.member)
                .map_err(|e| ScrubError::Failed(format!("{}: open: {e}", o.member.display())))?;
            let mut pool = BufferPool::new(1, o.len as usize);
            let buf = &mut pool.slot_mut(0)[..o.len as usize];
            file.read_exact_at(buf, o.member_offset)
                .map_err(|e| ScrubError::Failed(format!("{}: read: {e}", o.member.display())))?;
            all &= buf
                .chunks_exact(BLOCK)
                .enumerate()
                .all(|(i, b)| block::check(b, j.offset + (i * BLOCK) as u64, run_id, None).is_ok());
        }
        n += u64::from(all);
    }
    Ok(n)
}

/// Candidate places to corrupt, in the order they are tried: `len`-byte ranges aligned to
/// `len`, at most one per (file, `unit`-sized region), large and small files alternating,
/// files and places shuffled by `rng`.
pub(crate) fn candidates(
    files: &[DataFile],
    len: u64,
    unit: u64,
    rng: &mut fastrand::Rng,
) -> Vec<(usize, u64)> {
    use super::dataset::Class;
    let mut per_class: [Vec<(usize, u64)>; 2] = [Vec::new(), Vec::new()];
    for (i, f) in files.iter().enumerate() {
        if f.size < len {
            continue;
        }
        let regions = f.size.div_ceil(unit);
        for r in 0..regions {
            let lo = r * unit;
            let hi = ((r + 1) * unit).min(f.size);
            if hi - lo < len {
                continue;
            }
            let slots = (hi - lo) / len;
            let at = lo + rng.u64(0..slots) * len;
            let class = usize::from(f.class == Class::Small);
            per_class[class].push((i, at));
        }
    }
    for v in &mut per_class {
        rng.shuffle(v);
    }
    let [large, small] = per_class;
    let mut out = Vec::with_capacity(large.len() + small.len());
    let (mut a, mut b) = (large.into_iter(), small.into_iter());
    loop {
        match (a.next(), b.next()) {
            (None, None) => break,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scrub::dataset::{self, Class};

    #[test]
    fn logical_inside_one_plain_extent() {
        let ext = [
            Extent {
                logical: 0,
                physical: 1 << 30,
                length: 1 << 20,
                flags: 0,
            },
            Extent {
                logical: 1 << 20,
                physical: 5 << 30,
                length: 1 << 20,
                flags: 0x8 | FIEMAP_EXTENT_LAST,
            },
        ];
        assert_eq!(logical_of(&ext, 8192, 4096), Some((1 << 30) + 8192));
        // Crossing into the next extent, or inside an encoded one: no single location.
        assert_eq!(logical_of(&ext, (1 << 20) - 4096, 8192), None);
        assert_eq!(logical_of(&ext, (1 << 20) + 4096, 4096), None);
    }

    #[test]
    fn zfs_location_needs_one_contiguous_copy() {
        let mut idx = ContentIndex::new();
        idx.insert(0, vec![8192]);
        idx.insert(4096, vec![12288]);
        idx.insert(8192, vec![65536, 70000]);
        idx.insert(12288, vec![90112]);
        assert_eq!(zfs_location(&idx, 0, 8192), Some(8192));
        assert_eq!(zfs_location(&idx, 0, 4096), Some(8192));
        // Two copies (one of them in the intent log): ambiguous.
        assert_eq!(zfs_location(&idx, 8192, 4096), None);
        // Not contiguous on the member.
        assert_eq!(zfs_location(&idx, 4096, 8192), None);
        assert_eq!(zfs_location(&idx, 1 << 20, 4096), None);
    }

    #[test]
    fn scan_finds_blocks_at_unaligned_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("member.img");
        let size = 9u64 << 20;
        let f = OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&img)
            .unwrap();
        f.set_len(size).unwrap();
        let mut blk = vec![0u8; BLOCK];
        // One block straddling the 4 MiB chunk boundary at a 512-byte offset, one at the
        // very end, one ordinary, one of another run.
        let places = [(4u64 << 20) - 1536, size - BLOCK as u64, 12288];
        for (i, p) in places.iter().enumerate() {
            block::stamp(&mut blk, i as u64 * BLOCK as u64, 9, 1);
            f.write_all_at(&blk, *p).unwrap();
        }
        block::stamp(&mut blk, 0, 10, 1);
        f.write_all_at(&blk, 1 << 20).unwrap();
        f.sync_all().unwrap();
        let stop = AtomicBool::new(false);
        let idx = match scan_member(&img, 9, 1 << 30, &stop) {
            Ok(i) => i,
            // tmpfs has no O_DIRECT.
            Err(e) if e.to_string().contains("Invalid argument") => {
                println!("skipped: the temporary directory's filesystem has no O_DIRECT");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(idx.len(), 3, "{idx:?}");
        for (i, p) in places.iter().enumerate() {
            assert_eq!(idx[&(i as u64 * BLOCK as u64)], vec![*p]);
        }
    }

    #[test]
    fn candidates_alternate_classes_one_per_region() {
        let mut rng = fastrand::Rng::with_seed(1);
        let files = dataset::plan(Path::new("/x"), 16 << 20, 25, &mut rng);
        let c = candidates(&files, 4096, 128 << 10, &mut rng);
        assert_eq!(files[c[0].0].class, Class::Large);
        assert_eq!(files[c[1].0].class, Class::Small);
        let mut regions: Vec<(usize, u64)> = c.iter().map(|(f, o)| (*f, o / (128 << 10))).collect();
        let n = regions.len();
        regions.sort_unstable();
        regions.dedup();
        assert_eq!(regions.len(), n);
        for (f, o) in &c {
            assert!(o + 4096 <= files[*f].size);
            assert_eq!(o % 4096, 0);
        }
    }
}
