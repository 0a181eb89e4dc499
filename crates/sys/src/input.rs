//! Input files read with a bound: every file a user names (a job file, an include, a trace,
//! a loadfile, a study, a spec) is opened without blocking, must be a regular file (a FIFO
//! or device could block or never end), and is refused when larger than the caller's limit
//! before any of it is read; at most `limit + 1` bytes are ever read, so a file that grows
//! while it is read is refused too. [`Bounded`] caps a stream (what a decompressor makes of
//! a file) the same way.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why an input was not read.
#[derive(Debug)]
pub enum InputError {
    /// It could not be opened or read.
    Io(io::Error),
    /// It is not a regular file: what it is ("a FIFO", "a directory", ...).
    NotRegular(&'static str),
    /// It holds more than `limit` bytes (`size`: as fstat says, when known before reading).
    TooLarge { size: Option<u64>, limit: u64 },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Io(e) => write!(f, "cannot read: {e}"),
            InputError::NotRegular(kind) => {
                write!(
                    f,
                    "{kind}, not a regular file (inputs are read from files only)"
                )
            }
            InputError::TooLarge {
                size: Some(s),
                limit,
            } => write!(f, "{s} bytes, more than the {limit} bytes allowed"),
            InputError::TooLarge { size: None, limit } => {
                write!(f, "more than the {limit} bytes allowed")
            }
        }
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InputError::Io(e) => Some(e),
            InputError::NotRegular(_) | InputError::TooLarge { .. } => None,
        }
    }
}

impl From<io::Error> for InputError {
    /// A read error, or the refusal [`Bounded`] returned through `io::Read`.
    fn from(e: io::Error) -> Self {
        if let Some(InputError::TooLarge { size, limit }) =
            e.get_ref().and_then(|i| i.downcast_ref::<InputError>())
        {
            return InputError::TooLarge {
                size: *size,
                limit: *limit,
            };
        }
        InputError::Io(e)
    }
}

/// What a file type is, in words, for [`InputError::NotRegular`].
fn kind_of(t: std::fs::FileType) -> Option<&'static str> {
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    }
}

/// Opens the regular file at `path` (symlinks followed: users may name their files through
/// links) for reading, refusing anything else and a file of more than `limit` bytes. The
/// path is looked at first, so a device or FIFO is never opened; the open itself is
/// non-blocking and checked again on the open file, so a FIFO swapped in between cannot
/// block. The file's size is returned with it.
pub fn open_input(path: &Path, limit: u64) -> Result<(File, u64), InputError> {
    let meta = std::fs::metadata(path).map_err(InputError::Io)?;
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(InputError::NotRegular(kind));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(InputError::Io)?;
    let meta = file.metadata().map_err(InputError::Io)?;
    if let Some(kind) = kind_of(meta.file_type()) {
        return Err(InputError::NotRegular(kind));
    }
    if meta.len() > limit {
        return Err(InputError::TooLarge {
            size: Some(meta.len()),
            limit,
        });
    }
    Ok((file, meta.len()))
}

/// Reads all of `r`, refusing more than `limit` bytes (at most `limit + 1` are read).
pub fn read_bounded(r: impl Read, limit: u64) -> Result<Vec<u8>, InputError> {
    let mut out = Vec::new();
    Bounded::new(r, limit).read_to_end(&mut out)?;
    Ok(out)
}

/// The bytes of the regular file at `path`, at most `limit` of them ([`open_input`]).
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let (file, size) = open_input(path, limit)?;
    let mut out = Vec::with_capacity(size as usize);
    Bounded::new(file, limit).read_to_end(&mut out)?;
    Ok(out)
}

/// Standard input, at most `limit` bytes (for an input deliberately given as `-`).
pub fn read_stdin(limit: u64) -> Result<Vec<u8>, InputError> {
    read_bounded(io::stdin().lock(), limit)
}

/// A reader that passes on at most `limit` bytes and then fails (an `io::Error` that
/// converts back into [`InputError::TooLarge`]) if its source has more.
pub struct Bounded<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Bounded<R> {
    pub fn new(inner: R, limit: u64) -> Self {
        Bounded {
            inner,
            left: limit,
            limit,
        }
    }

    /// Bytes passed on so far.
    pub fn count(&self) -> u64 {
        self.limit - self.left
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            // One byte more than the limit says the source is too large.
            let mut one = [0u8; 1];
            return match self.inner.read(&mut one)? {
                0 => Ok(0),
                _ => Err(io::Error::other(InputError::TooLarge {
                    size: None,
                    limit: self.limit,
                })),
            };
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_within_the_limit_is_read_whole() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"hello").unwrap();
        assert_eq!(read_input(f.path(), 5).unwrap(), b"hello");
        let e = read_input(f.path(), 4).unwrap_err();
        assert!(matches!(
            e,
            InputError::TooLarge {
                size: Some(5),
                limit: 4
            }
        ));
        assert_eq!(e.to_string(), "5 bytes, more than the 4 bytes allowed");
    }

    #[test]
    fn devices_fifos_and_directories_are_refused_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        // No writer: an open that blocked would hang this test.
        assert!(matches!(
            read_input(&fifo, 100),
            Err(InputError::NotRegular("a FIFO"))
        ));
        assert!(matches!(
            read_input(Path::new("/dev/zero"), 100),
            Err(InputError::NotRegular("a character device"))
        ));
        assert!(matches!(
            read_input(dir.path(), 100),
            Err(InputError::NotRegular("a directory"))
        ));
        assert!(matches!(
            read_input(&dir.path().join("missing"), 100),
            Err(InputError::Io(_))
        ));
    }

    #[test]
    fn a_stream_is_cut_one_byte_past_its_limit() {
        let zeros = io::repeat(0);
        let e = read_bounded(zeros, 1000).unwrap_err();
        assert!(matches!(
            e,
            InputError::TooLarge {
                size: None,
                limit: 1000
            }
        ));
        assert_eq!(read_bounded(&b"abc"[..], 3).unwrap(), b"abc");
        let mut b = Bounded::new(&b"abcdef"[..], 4);
        let mut buf = [0u8; 3];
        assert_eq!(b.read(&mut buf).unwrap(), 3);
        assert_eq!(b.count(), 3);
    }
}
