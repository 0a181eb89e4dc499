//! The off-device journal of a verified-write run: an append-only file of fixed-size
//! records, kept on another filesystem than the data, that says which writes were intended
//! and which were acknowledged (written, covered by an fsync of the target, and the ack
//! itself made durable by an fdatasync of the journal). After a crash, `Journal::read`
//! replays it into what every block must hold.
//!
//! Record (32 bytes, little-endian): `IOJ`, kind (one ASCII letter), crc32c of the other
//! 28 bytes, then three u64: `a`, `b`, and the time in ns since the Unix epoch.
//!
//! | kind | `a` | `b` |
//! |---|---|---|
//! | `H` header | run id | block size |
//! | `R` region | region size in bytes | fsync interval in blocks |
//! | `T` target | st_dev of the data file | st_ino of the data file |
//! | `I` intent | block offset | generation about to be written |
//! | `A` ack | block offset | generation now durable |
//! | `E` end | passes completed | 0 |

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::IntegrityError;

/// Bytes per record.
pub const RECORD_LEN: usize = 32;
/// The largest journal `iolab verify` reads (a regular file only).
pub const MAX_JOURNAL_BYTES: u64 = 2 << 30;
const PREFIX: &[u8; 3] = b"IOJ";

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Header,
    Region,
    Target,
    Intent,
    Ack,
    End,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Header => b'H',
            Kind::Region => b'R',
            Kind::Target => b'T',
            Kind::Intent => b'I',
            Kind::Ack => b'A',
            Kind::End => b'E',
        }
    }

    fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            b'H' => Kind::Header,
            b'R' => Kind::Region,
            b'T' => Kind::Target,
            b'I' => Kind::Intent,
            b'A' => Kind::Ack,
            b'E' => Kind::End,
            _ => return None,
        })
    }
}

/// One decoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub a: u64,
    pub b: u64,
    pub time_ns: u64,
}

fn record_crc(r: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&r[..4]), &r[8..RECORD_LEN])
}

impl Record {
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut r = [0u8; RECORD_LEN];
        r[..3].copy_from_slice(PREFIX);
        r[3] = self.kind.byte();
        r[8..16].copy_from_slice(&self.a.to_le_bytes());
        r[16..24].copy_from_slice(&self.b.to_le_bytes());
        r[24..32].copy_from_slice(&self.time_ns.to_le_bytes());
        let crc = record_crc(&r);
        r[4..8].copy_from_slice(&crc.to_le_bytes());
        r
    }

    /// The record in `r`, if its prefix, kind and checksum hold.
    pub fn decode(r: &[u8]) -> Option<Record> {
        if r.len() != RECORD_LEN || &r[..3] != PREFIX {
            return None;
        }
        let crc = u32::from_le_bytes(r[4..8].try_into().ok()?);
        if crc != record_crc(r) {
            return None;
        }
        let u = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().expect("8 bytes"));
        Some(Record {
            kind: Kind::from_byte(r[3])?,
            a: u(8),
            b: u(16),
            time_ns: u(24),
        })
    }
}

/// Nanoseconds since the Unix epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The filesystem holding `path` (or its parent directory when it does not exist yet), as
/// a device number. st_dev is not enough: every btrfs subvolume has its own st_dev, so a
/// journal in another subvolume of the target's filesystem would pass. The device number
/// of the mount the path is on (`/proc/self/mountinfo`, found through the mount id in
/// fdinfo) names the filesystem itself; st_dev is the fallback when /proc does not answer.
fn device_of_path(path: &Path) -> io::Result<u64> {
    let existing = match std::fs::symlink_metadata(path) {
        Ok(_) => path,
        Err(e) if e.kind() == io::ErrorKind::NotFound => path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new(".")),
        Err(e) => return Err(e),
    };
    let dev = std::fs::metadata(existing)?.dev();
    Ok(mount_device(existing).unwrap_or(dev))
}

/// The device number /proc/self/mountinfo gives the mount that holds `path`.
fn mount_device(path: &Path) -> Option<u64> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .ok()?;
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", f.as_raw_fd())).ok()?;
    let mnt_id = fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))?
        .trim()
        .to_string();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let line = mountinfo
        .lines()
        .find(|l| l.split(' ').next() == Some(mnt_id.as_str()))?;
    let (major, minor) = line.split(' ').nth(2)?.split_once(':')?;
    Some(libc::makedev(major.parse().ok()?, minor.parse().ok()?))
}

/// Refuses a journal on the filesystem that holds the target: it must outlive what the
/// target loses. Both paths may be files that do not exist yet.
pub fn check_separate_filesystems(journal: &Path, target: &Path) -> Result<(), IntegrityError> {
    let jd = device_of_path(journal).map_err(|e| {
        IntegrityError::io(
            format!("--journal {}: cannot inspect", journal.display()),
            e,
        )
    })?;
    let td = device_of_path(target).map_err(|e| {
        IntegrityError::io(format!("--target {}: cannot inspect", target.display()), e)
    })?;
    if jd == td {
        return Err(IntegrityError::Invalid(format!(
            "--journal {}: on the same filesystem as the target {} (device {}:{}); a journal \
             must survive what the target loses: put it on another filesystem (e.g. /dev/shm \
             for process kills, another disk for power cuts)",
            journal.display(),
            target.display(),
            libc::major(jd),
            libc::minor(jd)
        )));
    }
    Ok(())
}

/// Appends records; nothing counts as written until `commit` has written and fdatasynced
/// them.
pub struct JournalWriter {
    file: File,
    path: PathBuf,
    pending: Vec<u8>,
    records: u64,
    /// Number of `commit` calls and the time spent in them (write + fdatasync).
    pub commits: u64,
    pub commit_time: Duration,
}

impl JournalWriter {
    /// Creates the journal (it must not exist) and makes its header durable.
    pub fn create(
        path: &Path,
        run_id: u64,
        block_size: u64,
        region: u64,
        fsync_every: u64,
        target: &std::fs::Metadata,
    ) -> io::Result<JournalWriter> {
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(path)?;
        let mut j = JournalWriter {
            file,
            path: path.to_path_buf(),
            pending: Vec::with_capacity(RECORD_LEN * 256),
            records: 0,
            commits: 0,
            commit_time: Duration::ZERO,
        };
        j.push(Kind::Header, run_id, block_size);
        j.push(Kind::Region, region, fsync_every);
        j.push(Kind::Target, target.dev(), target.ino());
        j.commit()?;
        // The new directory entry must survive too.
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(j)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records written so far (committed or pending).
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Queues a record stamped with the current time.
    pub fn push(&mut self, kind: Kind, a: u64, b: u64) {
        let r = Record {
            kind,
            a,
            b,
            time_ns: now_ns(),
        };
        self.pending.extend_from_slice(&r.encode());
        self.records += 1;
    }

    /// Writes the queued records and fdatasyncs the journal.
    pub fn commit(&mut self) -> io::Result<()> {
        let t = Instant::now();
        self.file.write_all(&self.pending)?;
        self.pending.clear();
        self.file.sync_data()?;
        self.commits += 1;
        self.commit_time += t.elapsed();
        Ok(())
    }
}

/// What the journal says about one block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockHistory {
    /// Latest acknowledged generation (0: never acknowledged).
    pub acked: u64,
    /// When that ack was recorded (ns since the epoch).
    pub acked_ns: u64,
    /// Latest generation an intent was recorded for (0: never).
    pub intended: u64,
}

impl BlockHistory {
    /// An intent without its ack: the write may or may not have reached the block.
    pub fn in_flight(&self) -> bool {
        self.intended > self.acked
    }
}

/// A journal replayed.
#[derive(Debug, Clone)]
pub struct Journal {
    pub path: PathBuf,
    pub run_id: u64,
    pub block_size: u64,
    pub region: u64,
    pub fsync_every: u64,
    pub target_dev: u64,
    pub target_ino: u64,
    pub records: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    /// Passes the run completed, when it ended normally (an `E` record).
    pub ended: Option<u64>,
    /// Bytes after the last valid record (a record cut by the crash), ignored.
    pub torn_tail: usize,
    /// Per block (offset / block size).
    pub blocks: Vec<BlockHistory>,
}

impl Journal {
    /// One line saying what the journal holds, for `iolab verify`.
    pub fn describe(&self) -> String {
        let j = self;
        format!(
            "Journal:  {}: run {:016x}, {} blocks, {} records over {:.3} s, {}{}\n",
            j.path.display(),
            j.run_id,
            iolab_spec::format_bytes(j.block_size),
            j.records,
            j.last_ns.saturating_sub(j.first_ns) as f64 / 1e9,
            match j.ended {
                Some(n) => format!("ended normally after {n} pass(es)"),
                None => "no end record (the writer stopped or crashed)".into(),
            },
            if j.torn_tail > 0 {
                format!(
                    "; {} byte(s) after the last whole record ignored (an append cut by the crash)",
                    j.torn_tail
                )
            } else {
                String::new()
            }
        )
    }

    /// Reads and replays the journal at `path`. A damaged record before the last one is an
    /// error; a damaged or partial last record is what a crash during an append leaves, and
    /// is ignored (counted in `torn_tail`).
    pub fn read(path: &Path) -> Result<Journal, IntegrityError> {
        let fail =
            |what: String| IntegrityError::Invalid(format!("--journal {}: {what}", path.display()));
        let data = iolab_sys::input::read_input(path, MAX_JOURNAL_BYTES).map_err(|source| {
            IntegrityError::Input {
                context: format!("--journal {}", path.display()),
                source,
            }
        })?;
        let chunks: Vec<&[u8]> = data.chunks(RECORD_LEN).collect();
        let mut records = Vec::with_capacity(chunks.len());
        let mut torn_tail = 0;
        for (i, c) in chunks.iter().enumerate() {
            let rest = &data[i * RECORD_LEN..];
            match Record::decode(c) {
                Some(r) => records.push(r),
                None if i + 1 == chunks.len() => torn_tail = c.len(),
                // A crash after the file grew but before its new data reached the disk
                // (e.g. XFS, or ext4 with delayed allocation) leaves zeros at the end: the
                // unsynced part of the last append, not damage.
                None if rest.iter().all(|&b| b == 0) => {
                    torn_tail = rest.len();
                    break;
                }
                None => {
                    return Err(fail(format!(
                        "record {i} (byte {}) is damaged; the journal cannot be trusted",
                        i * RECORD_LEN
                    )))
                }
            }
        }
        let header = |k: Kind, i: usize| -> Result<Record, IntegrityError> {
            records
                .get(i)
                .filter(|r| r.kind == k)
                .copied()
                .ok_or_else(|| fail("not an iolab journal (no header records)".into()))
        };
        let h = header(Kind::Header, 0)?;
        let r = header(Kind::Region, 1)?;
        let t = header(Kind::Target, 2)?;
        if h.b == 0 || !r.a.is_multiple_of(h.b) {
            return Err(fail(format!(
                "header says block size {} and region {}, which do not fit",
                h.b, r.a
            )));
        }
        let mut blocks = vec![BlockHistory::default(); (r.a / h.b) as usize];
        let mut ended = None;
        for (i, rec) in records.iter().enumerate().skip(3) {
            match rec.kind {
                Kind::Intent | Kind::Ack => {
                    let b = rec
                        .a
                        .is_multiple_of(h.b)
                        .then(|| blocks.get_mut((rec.a / h.b) as usize))
                        .flatten()
                        .ok_or_else(|| {
                            fail(format!(
                                "record {i} names offset {}, outside the region",
                                rec.a
                            ))
                        })?;
                    if rec.kind == Kind::Intent {
                        b.intended = b.intended.max(rec.b);
                    } else if rec.b >= b.acked {
                        b.acked = rec.b;
                        b.acked_ns = rec.time_ns;
                        b.intended = b.intended.max(rec.b);
                    }
                }
                Kind::End => ended = Some(rec.a),
                _ => return Err(fail(format!("record {i}: a second header record"))),
            }
        }
        Ok(Journal {
            path: path.to_path_buf(),
            run_id: h.a,
            block_size: h.b,
            region: r.a,
            fsync_every: r.b,
            target_dev: t.a,
            target_ino: t.b,
            records: records.len() as u64,
            first_ns: h.time_ns,
            last_ns: records.last().map_or(h.time_ns, |r| r.time_ns),
            ended,
            torn_tail,
            blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_seen() {
        let r = Record {
            kind: Kind::Ack,
            a: 4096,
            b: 7,
            time_ns: 123,
        };
        let mut e = r.encode();
        assert_eq!(Record::decode(&e), Some(r));
        e[12] ^= 1;
        assert_eq!(Record::decode(&e), None);
    }

    #[test]
    fn replay_tracks_acks_intents_and_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::write(&data, b"x").unwrap();
        let meta = std::fs::metadata(&data).unwrap();
        let p = dir.path().join("j");
        let mut j = JournalWriter::create(&p, 99, 4096, 4 * 4096, 2, &meta).unwrap();
        for off in [0u64, 4096] {
            j.push(Kind::Intent, off, 1);
        }
        j.commit().unwrap();
        for off in [0u64, 4096] {
            j.push(Kind::Ack, off, 1);
        }
        j.push(Kind::Intent, 0, 2);
        j.commit().unwrap();
        drop(j);
        // A crash in the middle of an append leaves part of a record.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(
            &Record {
                kind: Kind::Ack,
                a: 0,
                b: 2,
                time_ns: 1,
            }
            .encode()[..20],
        )
        .unwrap();
        let r = Journal::read(&p).unwrap();
        assert_eq!((r.run_id, r.block_size, r.region), (99, 4096, 4 * 4096));
        assert_eq!((r.target_dev, r.target_ino), (meta.dev(), meta.ino()));
        assert_eq!(r.torn_tail, 20);
        assert_eq!(r.blocks[0].acked, 1);
        assert!(r.blocks[0].in_flight());
        assert_eq!(r.blocks[1].acked, 1);
        assert!(!r.blocks[1].in_flight());
        assert_eq!(r.blocks[2], BlockHistory::default());
        assert_eq!(r.ended, None);
    }

    #[test]
    fn zeros_after_the_last_record_are_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j");
        let meta = std::fs::metadata(dir.path()).unwrap();
        let mut j = JournalWriter::create(&p, 1, 512, 1024, 1, &meta).unwrap();
        j.push(Kind::Intent, 0, 1);
        j.push(Kind::Ack, 0, 1);
        j.commit().unwrap();
        drop(j);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[0u8; 3 * RECORD_LEN + 7]).unwrap();
        let r = Journal::read(&p).unwrap();
        assert_eq!((r.records, r.torn_tail), (5, 3 * RECORD_LEN + 7));
        assert_eq!(r.blocks[0].acked, 1);
        // A damaged record with a valid one after it is still an error.
        f.write_all(
            &Record {
                kind: Kind::Ack,
                a: 512,
                b: 1,
                time_ns: 1,
            }
            .encode(),
        )
        .unwrap();
        assert!(Journal::read(&p)
            .unwrap_err()
            .to_string()
            .contains("damaged"));
    }

    #[test]
    fn damage_before_the_end_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j");
        let meta = std::fs::metadata(dir.path()).unwrap();
        let mut j = JournalWriter::create(&p, 1, 512, 512, 1, &meta).unwrap();
        j.push(Kind::Intent, 0, 1);
        j.push(Kind::Ack, 0, 1);
        j.commit().unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[3 * RECORD_LEN + 9] ^= 4;
        std::fs::write(&p, &bytes).unwrap();
        let e = Journal::read(&p).unwrap_err().to_string();
        assert!(e.contains("record 3") && e.contains("damaged"), "{e}");
    }

    #[test]
    fn same_filesystem_is_refused_naming_the_option() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_separate_filesystems(&dir.path().join("j"), &dir.path().join("t"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--journal") && e.contains("same filesystem"),
            "{e}"
        );
        let shm = Path::new("/dev/shm");
        if shm.is_dir() && device_of_path(shm).unwrap() != device_of_path(dir.path()).unwrap() {
            check_separate_filesystems(&shm.join("iolab-j"), &dir.path().join("t")).unwrap();
        } else {
            println!("skipped the two-filesystem case: /dev/shm is not a separate filesystem");
        }
    }
}
