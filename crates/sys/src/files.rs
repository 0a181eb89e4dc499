//! Files and directories iolab creates: never reached through a link someone planted, never
//! over a file that is already there, and with fixed modes whatever the caller's umask
//! (0600 files, 0700 directories). A file that is rewritten while others may read it
//! ([`replace_file`]) is written under an unpredictable name and renamed over the old one.

use std::ffi::CString;
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The mode of every file iolab creates.
pub const FILE_MODE: u32 = 0o600;
/// The mode of every directory iolab creates.
pub const DIR_MODE: u32 = 0o700;

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Creates the new file `path` for reading and writing (`O_CREAT|O_EXCL|O_NOFOLLOW`: an
/// existing file or a link at `path`, even a dangling one, is an error), mode 0600 whatever
/// the umask.
pub fn create_new(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    // The umask may have taken bits away; a fixed mode is set on the descriptor.
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// Creates the new directory `path` (an existing one or a link there is an error), mode 0700
/// whatever the umask. The mode is set through a descriptor of the directory just made,
/// opened without following a link.
pub fn create_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(DIR_MODE).create(path)?;
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    dir.set_permissions(Permissions::from_mode(DIR_MODE))
}

/// An unpredictable name for a temporary file: 16 bytes from getrandom(2) in hex (the
/// process's own random generator if the kernel has none to give).
pub fn random_name(prefix: &str) -> String {
    let mut buf = [0u8; 16];
    // SAFETY: the buffer is ours and its length is passed.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n != buf.len() as isize {
        for b in &mut buf {
            *b = fastrand::u8(..);
        }
    }
    let hex: String = buf.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let c = cstring(dir.as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path; the descriptor returned is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Writes `contents` as `dir/name`, replacing what is there: the bytes go to a new file of an
/// unpredictable name in `dir` (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600), which is then
/// renamed over `name` (renameat(2) replaces the entry itself: a link at `name` is replaced,
/// not followed). On failure the temporary file is removed again.
pub fn replace_file(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{name}' is not a file name"),
        ));
    }
    let dirfd = open_dir(dir)?;
    let target = cstring(name.as_bytes())?;
    loop {
        let tmp = cstring(random_name(&format!(".{name}.")).as_bytes())?;
        // SAFETY: dirfd is open, tmp is NUL-terminated; the descriptor is owned below.
        let fd = unsafe {
            libc::openat(
                dirfd.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                FILE_MODE as libc::c_uint,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::AlreadyExists {
                continue;
            }
            return Err(e);
        }
        // SAFETY: fd was just opened and is not owned elsewhere.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let written = file
            .set_permissions(Permissions::from_mode(FILE_MODE))
            .and_then(|()| file.write_all(contents));
        drop(file);
        // SAFETY: both names are NUL-terminated and relative to the open directory.
        let renamed = written.and_then(|()| {
            if unsafe {
                libc::renameat(
                    dirfd.as_raw_fd(),
                    tmp.as_ptr(),
                    dirfd.as_raw_fd(),
                    target.as_ptr(),
                )
            } == 0
            {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
        if renamed.is_err() {
            // SAFETY: as above; the temporary name is ours (created with O_EXCL).
            unsafe { libc::unlinkat(dirfd.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        return renamed;
    }
}

/// Whether `mode` (of a file or directory) lets anyone but its owner write to it.
pub fn writable_by_others(mode: u32) -> bool {
    mode & 0o022 != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Runs `f` with the umask set to `mask`, then restores it.
    fn with_umask<T>(mask: libc::mode_t, f: impl FnOnce() -> T) -> T {
        // SAFETY: umask cannot fail.
        let old = unsafe { libc::umask(mask) };
        let out = f();
        unsafe { libc::umask(old) };
        out
    }

    #[test]
    fn modes_are_fixed_whatever_the_umask() {
        let d = tempfile::tempdir().unwrap();
        for (i, mask) in [0o000, 0o077, 0o002].into_iter().enumerate() {
            let f = d.path().join(format!("f{i}"));
            let sub = d.path().join(format!("d{i}"));
            with_umask(mask, || {
                create_new(&f).unwrap();
                create_dir(&sub).unwrap();
                replace_file(&sub, "stats.json", b"{}").unwrap();
            });
            assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o600);
            assert_eq!(std::fs::metadata(&sub).unwrap().mode() & 0o7777, 0o700);
            let s = std::fs::metadata(sub.join("stats.json")).unwrap();
            assert_eq!(s.mode() & 0o7777, 0o600);
        }
    }

    #[test]
    fn links_are_never_followed_and_files_never_reused() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_new(&link).is_err());
        assert!(create_new(&victim).is_err());
        assert!(create_dir(&link).is_err());
        // replace_file replaces the link itself; the file it pointed at is untouched.
        replace_file(d.path(), "link", b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 2);
        assert!(replace_file(d.path(), "a/b", b"x").is_err());
        assert_ne!(random_name("x"), random_name("x"));
    }
}
