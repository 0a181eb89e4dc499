//! Files and directories iolab creates where someone else may have put a name first (a
//! shared `/tmp`, the directory of an output path): created `O_CREAT|O_EXCL|O_NOFOLLOW`
//! (a directory with mkdir, which never follows or reuses a name) under an unpredictable
//! name, with a fixed mode (0600 files, 0700 directories, set through the new descriptor:
//! not the umask's), and removed only while the name is still the file that was created.
//! [`NewFile`] is the write-then-rename of an output file: the data goes to a new private
//! file in the output's directory, which `renameat` puts in place (rename never follows a
//! link at its target name: it replaces the link itself).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::loopdev::FileId;

/// `iolab-WORD-PID-RANDOM`: iolab's unique name for something of this process.
pub fn unique_name(word: &str) -> String {
    format!(
        "iolab-{word}-{}-{:016x}",
        std::process::id(),
        fastrand::u64(..)
    )
}

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_identity(fd: libc::c_int) -> io::Result<FileId> {
    // SAFETY: an all-zero stat is a valid value to be overwritten by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open descriptor and st a valid out-pointer.
    check(unsafe { libc::fstat(fd, &mut st) })?;
    Ok(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// What `name` in directory `dir` is now, without following a link: its identity and
/// `st_mode`; None when there is nothing by that name.
fn lstat_at(dir: libc::c_int, name: &CString) -> io::Result<Option<(FileId, u32)>> {
    // SAFETY: as in fd_identity.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: dir is an open descriptor, name a NUL-terminated string, st an out-pointer.
    let r = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::NotFound {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok(Some((
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        st.st_mode,
    )))
}

/// `openat(dir, name, O_CREAT|O_EXCL|O_NOFOLLOW|O_WRONLY|O_CLOEXEC)`, then mode 0600 set
/// on the descriptor (the umask left out).
fn create_at(dir: libc::c_int, name: &CString) -> io::Result<File> {
    let flags = libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_WRONLY | libc::O_CLOEXEC;
    // SAFETY: dir is an open descriptor (or AT_FDCWD), name NUL-terminated.
    let fd = check(unsafe { libc::openat(dir, name.as_ptr(), flags, 0o600 as libc::c_uint) })?;
    // SAFETY: fd was just returned by openat and is owned by nothing else.
    let f = unsafe { File::from_raw_fd(fd) };
    // SAFETY: f's descriptor is open.
    check(unsafe { libc::fchmod(f.as_raw_fd(), 0o600) })?;
    Ok(f)
}

/// Creates the file `path`, which must not exist (a link there is refused too), mode 0600
/// whatever the umask, open for writing.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    create_at(libc::AT_FDCWD, &cstr(path.as_os_str().as_bytes())?)
}

/// Creates the directory `path`, which must not exist, mode 0700 whatever the umask;
/// returns what it is (for a record that deletes it later only while it is still this).
pub fn create_private_dir(path: &Path) -> io::Result<FileId> {
    create_dir_with_mode(path, 0o700)
}

/// Creates the directory `path`, which must not exist, with `mode` whatever the umask (for
/// what others must read, such as man pages: 0755); returns what it is.
pub fn create_dir_with_mode(path: &Path, mode: libc::mode_t) -> io::Result<FileId> {
    let c = cstr(path.as_os_str().as_bytes())?;
    // SAFETY: c is NUL-terminated.
    check(unsafe { libc::mkdir(c.as_ptr(), mode & 0o700) })?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: as above.
    let fd = check(unsafe { libc::open(c.as_ptr(), flags) })?;
    // SAFETY: fd was just opened and is owned here only.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fd is open.
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode) })?;
    fd_identity(fd.as_raw_fd())
}

/// Removes `path` (a file, or a directory with everything in it, links not followed) if it
/// is still `id`; Ok(false) when it is gone or is something else now (then left alone).
pub fn remove_if_same(path: &Path, id: FileId) -> io::Result<bool> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if FileId::from_meta(&m) != id {
        return Ok(false);
    }
    if m.is_dir() {
        std::fs::remove_dir_all(path)?;
    } else {
        std::fs::remove_file(path)?;
    }
    Ok(true)
}

/// An output file written under a private temporary name in its directory and renamed into
/// place once complete; dropped without [`NewFile::commit`], the temporary file is removed.
#[derive(Debug)]
pub struct NewFile {
    /// The output's directory, held open: the temporary file and the rename are in it
    /// whatever happens to the path leading there.
    dir: OwnedFd,
    name: CString,
    tmp: CString,
    tmp_path: PathBuf,
    created: Option<FileId>,
}

impl NewFile {
    /// Opens `path`'s directory and picks the temporary name there (`iolab-WORD-PID-…`);
    /// creates nothing yet (record [`Self::temp_path`] first where a kill -9 must not leave it
    /// unknown). Refuses a `path` that exists and is not a regular file (a link, a directory,
    /// a device, a FIFO, a socket): [`Self::commit`] replaces a regular file only.
    pub fn plan(path: &Path, word: &str) -> io::Result<NewFile> {
        let name = path
            .file_name()
            .filter(|n| *n != OsStr::new("..") && *n != OsStr::new("."))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let c = cstr(parent.as_os_str().as_bytes())?;
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: c is NUL-terminated.
        let fd = check(unsafe { libc::open(c.as_ptr(), flags) })?;
        // SAFETY: fd was just opened and is owned here only.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let tmp_name = format!("{}.partial", unique_name(word));
        let f = NewFile {
            dir,
            name: cstr(name.as_bytes())?,
            tmp: cstr(tmp_name.as_bytes())?,
            tmp_path: parent.join(&tmp_name),
            created: None,
        };
        f.check_target()?;
        Ok(f)
    }

    /// Whatever is at the output's name now is a regular file or nothing.
    fn check_target(&self) -> io::Result<()> {
        match lstat_at(self.dir.as_raw_fd(), &self.name)? {
            Some((_, mode)) if mode & libc::S_IFMT != libc::S_IFREG => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a regular file (a link, a directory, a device, a FIFO \
                 or a socket is never replaced)",
            )),
            _ => Ok(()),
        }
    }

    /// The temporary file's path.
    pub fn temp_path(&self) -> &Path {
        &self.tmp_path
    }

    /// Creates the temporary file (0600, `O_CREAT|O_EXCL|O_NOFOLLOW`) and returns it.
    pub fn create(&mut self) -> io::Result<File> {
        let f = create_at(self.dir.as_raw_fd(), &self.tmp)?;
        self.created = Some(fd_identity(f.as_raw_fd())?);
        Ok(f)
    }

    /// Puts the temporary file (written and synced by the caller) in place of the output.
    pub fn commit(mut self) -> io::Result<()> {
        let Some(id) = self.created else {
            return Err(io::Error::other("nothing was written"));
        };
        // Still ours (nobody can replace it in a directory only they and we may write,
        // but a shared sticky one is checked too), and the output still a file or nothing.
        match lstat_at(self.dir.as_raw_fd(), &self.tmp)? {
            Some((now, _)) if now == id => {}
            _ => return Err(io::Error::other("the temporary file was replaced")),
        }
        self.check_target()?;
        let d = self.dir.as_raw_fd();
        // SAFETY: d is open, both names NUL-terminated.
        check(unsafe { libc::renameat(d, self.tmp.as_ptr(), d, self.name.as_ptr()) })?;
        self.created = None;
        Ok(())
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        let Some(id) = self.created.take() else {
            return;
        };
        let d = self.dir.as_raw_fd();
        if let Ok(Some((now, _))) = lstat_at(d, &self.tmp) {
            if now == id {
                // SAFETY: d is open, tmp NUL-terminated.
                unsafe { libc::unlinkat(d, self.tmp.as_ptr(), 0) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_file_replaces_a_file_never_a_link_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        let e = NewFile::plan(&out, "t").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        std::fs::remove_file(&out).unwrap();
        std::fs::write(&out, "old").unwrap();
        let mut n = NewFile::plan(&out, "t").unwrap();
        // A link planted at the temporary name is refused, not followed.
        std::os::unix::fs::symlink(&victim, n.temp_path()).unwrap();
        assert_eq!(n.create().unwrap_err().raw_os_error(), Some(libc::EEXIST));
        std::fs::remove_file(n.temp_path()).unwrap();
        let mut f = n.create().unwrap();
        f.write_all(b"new").unwrap();
        let m = f.metadata().unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o600);
        n.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        // Dropped uncommitted: nothing left.
        let mut n = NewFile::plan(&out, "t").unwrap();
        n.create().unwrap();
        let tmp = n.temp_path().to_path_buf();
        assert!(tmp.exists());
        drop(n);
        assert!(!tmp.exists());
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn a_private_dir_is_0700_and_removed_only_while_it_is_the_same() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(unique_name("t"));
        let id = create_private_dir(&p).unwrap();
        assert!(create_private_dir(&p).is_err());
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o700);
        std::fs::write(p.join("x"), "x").unwrap();
        std::fs::rename(&p, d.path().join("moved")).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(!remove_if_same(&p, id).unwrap());
        assert!(p.exists());
        assert!(remove_if_same(&d.path().join("moved"), id).unwrap());
        assert!(!d.path().join("moved").exists());
    }
}
