//! The database file before SQLite opens it, and the file SQLite then holds: a regular file
//! or nothing.
//!
//! Given a block device, SQLite would read the zeros at its start as an empty database and
//! write one over the filesystem there; given a FIFO it would block; given a character
//! device, merely opening it can act (a tape rewinds, a watchdog arms). So before anything
//! is opened, [`check`] looks at the path (following symlinks, opening nothing) and refuses
//! anything but a regular file; then it takes an `O_PATH` descriptor of what the path names
//! (which opens nothing either) and checks that again, and SQLite is given the file's own
//! path with every symlink resolved, opened with `SQLITE_OPEN_NOFOLLOW`. Once SQLite has
//! opened it, [`verify_opened`] checks that SQLite's descriptor is that very file (device
//! and inode), before anything is read from or written to it: a path swapped in between is
//! refused, not written.
//!
//! SQLite's own files next to the database (`-wal`, `-shm`, `-journal`) are opened by
//! SQLite with `O_NOFOLLOW`, so a symlink planted there makes it fail rather than write
//! through it; [`check`] refuses such a file up front, with its name, when it is not a
//! regular file or not owned by the database file's owner.
//!
//! A database iolab creates is created here, `O_CREAT | O_EXCL | O_NOFOLLOW` with mode 0600
//! whatever the umask (SQLite gives its `-wal` and `-shm` files the database's mode), in
//! directories created 0700.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rusqlite::{ffi, Connection};

use crate::error::StoreError;

/// The suffixes of the files SQLite keeps next to a database.
const SIDECARS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// A database file that was checked to be a regular file.
#[derive(Debug)]
pub(crate) struct DbFile {
    /// An `O_PATH` descriptor of it, held while the store is open. Closing an `O_PATH`
    /// descriptor releases none of the POSIX locks SQLite holds on the file.
    fd: OwnedFd,
    /// Its path with every symlink resolved: what SQLite is given.
    pub real: PathBuf,
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
}

fn refused(path: &Path, detail: impl Into<String>) -> StoreError {
    StoreError::Refused {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// What a file that is not a regular file is, in words.
fn kind(ft: &fs::FileType) -> &'static str {
    if ft.is_block_device() {
        "a block device"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symlink"
    } else {
        "not a regular file"
    }
}

/// The regular file at `path`, or `None` when nothing is there; anything else is refused
/// (see the module docs). Opens nothing but an `O_PATH` descriptor.
pub(crate) fn check(path: &Path) -> Result<Option<DbFile>, StoreError> {
    let link = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refused(path, format!("cannot look at it: {e}"))),
    };
    let through = if link.file_type().is_symlink() {
        let target = fs::read_link(path)
            .map(|t| format!(" {}", t.display()))
            .unwrap_or_default();
        match fs::metadata(path) {
            Ok(m) if !m.is_file() => {
                return Err(refused(
                    path,
                    format!(
                        "it is a symlink to{target}, which is {}; the result database must \
                         be a regular file",
                        kind(&m.file_type())
                    ),
                ))
            }
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refused(
                    path,
                    format!(
                        "it is a symlink to{target}, which does not exist; iolab does not \
                         create a database through a symlink"
                    ),
                ))
            }
            Err(e) => return Err(refused(path, format!("cannot look at it: {e}"))),
        }
    } else {
        link
    };
    if !through.is_file() {
        return Err(refused(
            path,
            format!(
                "it is {}; the result database must be a regular file",
                kind(&through.file_type())
            ),
        ));
    }
    // An O_PATH descriptor runs no driver's open and follows the symlinks once: from here
    // on the checks are on the file itself.
    let fd = open_path(path).map_err(|e| refused(path, format!("cannot open it: {e}")))?;
    let st = fstat(&fd).map_err(|e| refused(path, format!("cannot look at it: {e}")))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(refused(
            path,
            "it changed while being checked and is no longer a regular file",
        ));
    }
    let (dev, ino) = (st.st_dev, st.st_ino);
    let real = fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .or_else(|_| fs::canonicalize(path))
        .map_err(|e| refused(path, format!("cannot resolve its path: {e}")))?;
    // The resolved path must name the same file without following anything, as SQLite
    // (opening it O_NOFOLLOW) will.
    match fs::symlink_metadata(&real) {
        Ok(m) if m.is_file() && m.dev() == dev && m.ino() == ino => {}
        _ => {
            return Err(refused(
                path,
                format!(
                    "its resolved path {} does not name the same file (it changed while \
                     being checked)",
                    real.display()
                ),
            ))
        }
    }
    check_sidecars(path, &real, st.st_uid)?;
    let file = DbFile {
        fd,
        real,
        dev,
        ino,
        len: st.st_size as u64,
    };
    if let Err(e) = reopen(&file) {
        if e.kind() == io::ErrorKind::PermissionDenied {
            return Err(refused(
                path,
                "it cannot be read (permission denied): give --db a database you may read",
            ));
        }
    }
    Ok(Some(file))
}

/// Refuses a `-wal`, `-shm` or `-journal` file next to the database that is not a regular
/// file (a symlink, a FIFO, a device) or is owned by someone other than the database's
/// owner: SQLite would read it as the database's own (a log it replays into the file) or
/// write to it.
fn check_sidecars(path: &Path, real: &Path, owner: u32) -> Result<(), StoreError> {
    for suffix in SIDECARS {
        let mut side = real.as_os_str().to_owned();
        side.push(suffix);
        let side = PathBuf::from(side);
        let m = match fs::symlink_metadata(&side) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(refused(
                    path,
                    format!("cannot look at {}: {e}", side.display()),
                ))
            }
        };
        if !m.is_file() {
            return Err(refused(
                path,
                format!(
                    "{} is {}, not SQLite's own file; remove it (when nothing has the \
                     database open) or give --db another file",
                    side.display(),
                    kind(&m.file_type())
                ),
            ));
        }
        if m.uid() != owner {
            return Err(refused(
                path,
                format!(
                    "{} belongs to uid {}, not to the database's owner (uid {owner}); \
                     SQLite would take it for the database's own file: remove it (when \
                     nothing has the database open) or give --db another file",
                    side.display(),
                    m.uid()
                ),
            ));
        }
    }
    Ok(())
}

/// `open(path, O_PATH | O_CLOEXEC)`.
fn open_path(path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn fstat(fd: impl AsFd) -> io::Result<rustix::fs::Stat> {
    Ok(rustix::fs::fstat(fd)?)
}

/// Creates a new, empty database file at `path` (and the directories it needs, 0700), mode
/// 0600 whatever the umask, refusing anything already there. A read-only filesystem is
/// refused here, before anything is created.
pub(crate) fn create(path: &Path) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The nearest directory that exists says whether anything can be created.
    if let Some(existing) = dir.ancestors().find(|d| d.exists()) {
        let probe = if existing.as_os_str().is_empty() {
            Path::new(".")
        } else {
            existing
        };
        if iolab_sys::statvfs(probe).is_ok_and(|s| s.read_only) {
            return Err(read_only(path, probe));
        }
    }
    create_dirs(dir).map_err(|source| match source.raw_os_error() {
        Some(libc::EROFS) => read_only(path, dir),
        _ => StoreError::CreateDir {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
            source,
        },
    })?;
    // SQLite's files next to it are checked before the database is made, too.
    check_sidecars(path, path, rustix::process::geteuid().as_raw())?;
    let made = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path);
    match made {
        Ok(f) => f
            .set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(|e| refused(path, format!("cannot set its mode: {e}"))),
        // Made by another iolab at the same moment: checked like any existing file.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EROFS) => Err(read_only(path, dir)),
        Err(e) => Err(refused(path, format!("cannot create it: {e}"))),
    }
}

/// The missing directories of `dir`, each made 0700 whatever the umask.
fn create_dirs(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent)?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => fs::set_permissions(dir, fs::Permissions::from_mode(0o700)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The refusal of a database that cannot be written where it is.
pub(crate) fn read_only(path: &Path, on: &Path) -> StoreError {
    refused(
        path,
        format!(
            "{} is on a read-only filesystem, so nothing can be stored there; give --db a \
             database on a writable filesystem",
            on.display()
        ),
    )
}

/// Whether the filesystem holding the checked file is mounted read-only.
pub(crate) fn on_read_only_fs(file: &DbFile) -> bool {
    iolab_sys::statvfs(&file.real).is_ok_and(|s| s.read_only)
}

/// Checks that the main database file `conn` has open is `file` (device and inode, a
/// regular file): called right after the open, before SQLite reads or writes anything
/// through it beyond its header.
pub(crate) fn verify_opened(
    conn: &Connection,
    path: &Path,
    file: &DbFile,
) -> Result<(), StoreError> {
    let fd = sqlite_fd(conn).ok_or_else(|| {
        refused(
            path,
            "cannot tell which file SQLite opened (not SQLite's unix VFS)",
        )
    })?;
    // SAFETY: `fd` is the descriptor SQLite holds open for the connection's main file; it
    // stays open while `conn` is borrowed, and is only looked at (fstat), never closed.
    let sqlite_file = unsafe { BorrowedFd::borrow_raw(fd) };
    let ok = fstat(sqlite_file).is_ok_and(|st| {
        st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_dev == file.dev && st.st_ino == file.ino
    });
    if !ok {
        return Err(refused(
            path,
            "the file SQLite opened is not the one checked (the path changed while it was \
             being opened); nothing was written",
        ));
    }
    Ok(())
}

/// The descriptor of the main database file of `conn`, from SQLite's unix VFS.
fn sqlite_fd(conn: &Connection) -> Option<i32> {
    /// The start of SQLite's `struct unixFile` (os_unix.c), the same since SQLite 3.7:
    /// the methods, the VFS that opened it, its inode record, the descriptor.
    #[repr(C)]
    struct UnixFileHead {
        methods: *const ffi::sqlite3_io_methods,
        vfs: *const ffi::sqlite3_vfs,
        inode: *const std::ffi::c_void,
        h: std::ffi::c_int,
    }
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: the connection's handle is valid while `conn` is borrowed; FILE_POINTER
    // writes one `sqlite3_file *` to the pointer given.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast(),
        )
    };
    if rc != ffi::SQLITE_OK || file.is_null() {
        return None;
    }
    // SAFETY: the default VFS is looked up by SQLite; its name is a C string it owns.
    let unix = unsafe {
        let vfs = ffi::sqlite3_vfs_find(std::ptr::null());
        if vfs.is_null() || (*vfs).zName.is_null() {
            return None;
        }
        let name = std::ffi::CStr::from_ptr((*vfs).zName).to_bytes();
        (name == b"unix").then_some(vfs as *const ffi::sqlite3_vfs)
    }?;
    // SAFETY: every file the unix VFS opens is a `unixFile`, which starts as
    // `UnixFileHead`; the `vfs` field is compared with the unix VFS before `h` is used.
    let head = unsafe { &*(file as *const UnixFileHead) };
    (!head.methods.is_null() && head.vfs == unix && head.h >= 0).then_some(head.h)
}

/// Opens `file` again, read-only and without blocking, to read its header: through its
/// `O_PATH` descriptor (`/proc/self/fd/N` reopens that very file), else by its resolved
/// path; either way checked to be the same file.
pub(crate) fn reopen(file: &DbFile) -> io::Result<File> {
    let flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(format!("/proc/self/fd/{}", file.fd.as_raw_fd()))
        .or_else(|_| {
            OpenOptions::new()
                .read(true)
                .custom_flags(flags | libc::O_NOFOLLOW)
                .open(&file.real)
        })?;
    let st = fstat(&f)?;
    if st.st_dev != file.dev || st.st_ino != file.ino {
        return Err(io::Error::other("the file changed while being checked"));
    }
    Ok(f)
}
