//! Files and directories iolab creates: never reached through a link someone planted, never
//! over a file that is already there (`O_CREAT|O_EXCL|O_NOFOLLOW`, a directory with mkdir),
//! with fixed modes whatever the caller's umask (0600 files, 0700 directories, set through
//! the new descriptor), under unpredictable names where someone else may have put a name
//! first, and removed only while the name is still what was created ([`remove_if_same`]).
//! A file rewritten while others may read it ([`replace_file`]) and an output file
//! ([`NewFile`]) are written under an unpredictable name in their directory and renamed
//! into place (rename never follows a link at its target name: it replaces the entry).

use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::loopdev::FileId;

/// The mode of every file iolab creates.
pub const FILE_MODE: u32 = 0o600;
/// The mode of every directory iolab creates.
pub const DIR_MODE: u32 = 0o700;

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Held by a writer while it makes a file that a run records by name and replaces during
/// the run (a sidecar's temporary file, made and renamed), so that a second signal's
/// teardown, which takes the gate for good first ([`stop_making`]), never removes what the
/// run recorded while another thread is making one of those files again behind it.
static MAKING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The gate a writer holds while it makes (and renames) a file a run records by name.
pub fn making() -> std::sync::RwLockReadGuard<'static, ()> {
    MAKING.read().unwrap_or_else(|p| p.into_inner())
}

/// Waits for the files being made to be done, then lets no other be made until the process
/// exits: the second signal's teardown, before it removes what the run recorded.
pub fn stop_making() {
    std::mem::forget(MAKING.write().unwrap_or_else(|p| p.into_inner()));
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

/// Makes a regular file for `path` that has no name yet (`O_TMPFILE` in its directory,
/// write only, with `O_DIRECT` when `direct`), mode 0600 whatever the umask: its identity is
/// known, and can be recorded, before anyone can see or replace it at `path`; a process
/// killed before [`link_unnamed`] leaves nothing behind. `Ok(None)` when the filesystem
/// cannot make unnamed files, or not with these flags (the caller creates it by name).
fn create_unnamed(path: &Path, direct: bool) -> io::Result<Option<File>> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    if direct {
        flags |= OFlags::DIRECT;
    }
    let mode = Mode::from_raw_mode(FILE_MODE as _);
    let fd = match rustix::fs::open(dir, flags, mode) {
        Ok(fd) => fd,
        // No O_TMPFILE on this filesystem (EOPNOTSUPP; EISDIR from a kernel that predates
        // it), or not with O_DIRECT (EINVAL): the named way tells which.
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    rustix::fs::fchmod(&fd, mode)?;
    Ok(Some(File::from(fd)))
}

/// Gives the unnamed file `file` ([`create_unnamed`]) the name `path` and holds it there
/// ([`Made`], which can tell where it went if it is moved); fails when anything, even a
/// dangling link, is at `path` already (link(2) never replaces an entry or follows a link at
/// its new name).
fn link_unnamed(file: &File, path: &Path) -> io::Result<Made> {
    let from = format!("/proc/self/fd/{}", file.as_raw_fd());
    let to = cstring(path.as_os_str().as_bytes())?;
    rustix::fs::linkat(
        rustix::fs::CWD,
        from.as_str(),
        rustix::fs::CWD,
        &to,
        AtFlags::SYMLINK_FOLLOW,
    )?;
    // The descriptor of the unnamed file keeps its anonymous entry: the name is held anew.
    let made = Made::hold(path)?;
    if made.id != fd_identity(file)? {
        return Err(io::Error::other("replaced as it was named"));
    }
    Ok(made)
}

/// Makes the new file `path` (write only; `O_DIRECT` when `direct`), mode 0600 whatever the
/// umask, and tells `record` its identity (device, inode) before anyone can see it at
/// `path`: made unnamed ([`create_unnamed`]) and linked after `record`, so nothing is ever at
/// `path` that a record does not name exactly, even after a stop or kill -9 at any moment.
/// On a filesystem without unnamed files it is created by name (`O_CREAT|O_EXCL|
/// O_NOFOLLOW`) and recorded right after. An EINVAL is that filesystem refusing `O_DIRECT`.
pub fn create_recorded(
    path: &Path,
    direct: bool,
    record: &mut dyn FnMut(&Path, (u64, u64)),
) -> io::Result<(File, Made)> {
    if let Some(file) = create_unnamed(path, direct)? {
        let id = fd_identity(&file)?;
        record(path, (id.dev, id.ino));
        let made = link_unnamed(&file, path)?;
        return Ok((file, made));
    }
    let mut flags = libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if direct {
        flags |= libc::O_DIRECT;
    }
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(flags)
        .open(path)?;
    // The umask may have taken bits away; a fixed mode is set on the descriptor.
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    let made = Made::of_file(path, &file)?;
    record(path, (made.id.dev, made.id.ino));
    Ok((file, made))
}

/// Creates the new directory `path` (an existing one or a link there is an error), mode 0700
/// whatever the umask, and returns what it is (for a record that removes it later only while
/// it is still this one). The mode is set through a descriptor of the directory just made,
/// opened without following a link.
pub fn create_dir(path: &Path) -> io::Result<FileId> {
    create_dir_with_mode(path, DIR_MODE)
}

/// Creates the directory `path` (which must not exist) with `mode` whatever the umask, for
/// what others must read (man pages: 0755); returns what it is. Made 0700 at first (never
/// open to others while it is being set up), then given `mode` through a descriptor of the
/// directory just made, opened without following a link.
pub fn create_dir_with_mode(path: &Path, mode: u32) -> io::Result<FileId> {
    std::fs::DirBuilder::new().mode(DIR_MODE).create(path)?;
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    dir.set_permissions(Permissions::from_mode(mode))?;
    fd_identity(&dir)
}

/// An unpredictable name for a temporary file: 16 bytes from getrandom(2) in hex (the
/// process's own random generator if the kernel has none to give).
pub fn random_name(prefix: &str) -> String {
    let mut buf = [0u8; 16];
    let n = rustix::rand::getrandom(&mut buf, rustix::rand::GetRandomFlags::empty());
    if n != Ok(buf.len()) {
        for b in &mut buf {
            *b = fastrand::u8(..);
        }
    }
    let hex: String = buf.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{hex}")
}

fn open_dir(dir: &Path) -> io::Result<OwnedFd> {
    let c = cstring(dir.as_os_str().as_bytes())?;
    Ok(rustix::fs::open(
        &c,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
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
        let mut file = match create_at(&dirfd, &tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        };
        let written = file.write_all(contents);
        drop(file);
        let renamed =
            written.and_then(|()| Ok(rustix::fs::renameat(&dirfd, &tmp, &dirfd, &target)?));
        if renamed.is_err() {
            // The temporary name is ours (created with O_EXCL).
            let _ = rustix::fs::unlinkat(&dirfd, &tmp, AtFlags::empty());
        }
        return renamed;
    }
}

/// Whether `mode` (of a file or directory) lets anyone but its owner write to it.
pub fn writable_by_others(mode: u32) -> bool {
    mode & 0o022 != 0
}

/// `iolab-WORD-PID-RANDOM`: iolab's unique name for something of this process.
pub fn unique_name(word: &str) -> String {
    random_name(&format!("iolab-{word}-{}-", std::process::id()))
}

fn fd_identity(fd: impl AsFd) -> io::Result<FileId> {
    let st = rustix::fs::fstat(fd)?;
    Ok(FileId {
        dev: st.st_dev,
        ino: st.st_ino,
    })
}

/// What `name` in directory `dir` is now, without following a link: its identity and
/// `st_mode`; None when there is nothing by that name.
fn lstat_at(dir: impl AsFd, name: &CString) -> io::Result<Option<(FileId, u32)>> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
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
fn create_at(dir: impl AsFd, name: &CString) -> io::Result<File> {
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::WRONLY | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(FILE_MODE as _);
    let f = File::from(rustix::fs::openat(dir, name, flags, mode)?);
    rustix::fs::fchmod(&f, mode)?;
    Ok(f)
}

/// Creates the new file `name` in the directory `dir` (`O_CREAT|O_EXCL|O_NOFOLLOW`, write
/// only), mode 0600 whatever the umask: a file among many iolab makes in a private directory
/// it holds open (fio's file engines' file sets).
pub fn create_in(dir: impl AsFd, name: &std::ffi::CStr) -> io::Result<File> {
    create_at(dir, &CString::from(name))
}

/// Removes `path` (a file, or a directory with everything in it, links not followed) if it
/// is still `id`; Ok(false) when it is gone or is something else now (then left alone).
pub fn remove_if_same(path: &Path, id: FileId) -> io::Result<bool> {
    remove_same(path, id, true)
}

/// [`remove_if_same`] for one entry: a file (or link) unlinked, a directory removed only
/// when empty (rmdir), so a directory that holds anything else stays (an error says so).
pub fn remove_one_if_same(path: &Path, id: FileId) -> io::Result<bool> {
    remove_same(path, id, false)
}

fn remove_same(path: &Path, id: FileId, tree: bool) -> io::Result<bool> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if FileId::from_meta(&m) != id {
        return Ok(false);
    }
    if m.is_dir() && tree {
        std::fs::remove_dir_all(path)?;
    } else if m.is_dir() {
        std::fs::remove_dir(path)?;
    } else {
        std::fs::remove_file(path)?;
    }
    Ok(true)
}

/// Something iolab made at `path` (a file, or a directory and what it holds), held open by
/// a descriptor from the moment it was made: it is removed only while `path` still is it
/// (device and inode), and when it was moved away, where it is now can be told.
#[derive(Debug)]
pub struct Made {
    path: PathBuf,
    fd: OwnedFd,
    id: FileId,
}

/// What [`Made::check`] and [`Made::remove`] found at the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// The path still held what was made (for `remove`: it is removed now).
    Same,
    /// Nothing is at the path any more.
    Gone,
    /// Something else is at the path (it was moved away and replaced): left alone.
    /// `moved_to`: where what iolab made is now, when it still has a name.
    Replaced { moved_to: Option<PathBuf> },
}

impl Made {
    /// Holds what is at `path` now, not following a link: call it right after making it
    /// (mkdir), so what is held is what was made.
    pub fn hold(path: &Path) -> io::Result<Made> {
        let c = cstring(path.as_os_str().as_bytes())?;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&c, flags, Mode::empty())?;
        let id = fd_identity(&fd)?;
        Ok(Made {
            path: path.to_path_buf(),
            fd,
            id,
        })
    }

    /// Holds `file`, just created at `path` (its own descriptor, duplicated: no race).
    pub fn of_file(path: &Path, file: &File) -> io::Result<Made> {
        let fd = OwnedFd::from(file.try_clone()?);
        let id = fd_identity(&fd)?;
        Ok(Made {
            path: path.to_path_buf(),
            fd,
            id,
        })
    }

    /// A directory made private (0700, see [`create_dir`]) and held.
    pub fn private_dir(path: &Path) -> io::Result<Made> {
        let id = create_dir(path)?;
        let m = Made::hold(path)?;
        if m.id != id {
            return Err(io::Error::other("replaced as it was made"));
        }
        Ok(m)
    }

    pub fn id(&self) -> FileId {
        self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where what was made is now, when it still has a name and it is not `path`.
    pub fn moved_to(&self) -> Option<PathBuf> {
        let p = std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).ok()?;
        let deleted = p.to_string_lossy().ends_with(" (deleted)");
        (!deleted && p != self.path).then_some(p)
    }

    /// Whether `path` still holds what was made.
    pub fn check(&self) -> io::Result<Found> {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if FileId::from_meta(&m) == self.id => Ok(Found::Same),
            Ok(_) => Ok(Found::Replaced {
                moved_to: self.moved_to(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Found::Gone),
            Err(e) => Err(e),
        }
    }

    /// Removes it (a directory with everything in it) while `path` still is it
    /// ([`remove_if_same`]); something else there is left alone.
    pub fn remove(self) -> io::Result<Found> {
        if remove_if_same(&self.path, self.id)? {
            return Ok(Found::Same);
        }
        match self.check()? {
            Found::Same => Err(io::Error::other("still there after removal")),
            other => Ok(other),
        }
    }
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
        let c = cstring(parent.as_os_str().as_bytes())?;
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir = rustix::fs::open(&c, flags, Mode::empty())?;
        let tmp_name = format!("{}.partial", unique_name(word));
        let f = NewFile {
            dir,
            name: cstring(name.as_bytes())?,
            tmp: cstring(tmp_name.as_bytes())?,
            tmp_path: parent.join(&tmp_name),
            created: None,
        };
        f.check_target()?;
        Ok(f)
    }

    /// Whatever is at the output's name now is a regular file or nothing.
    fn check_target(&self) -> io::Result<()> {
        match lstat_at(&self.dir, &self.name)? {
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
        let f = create_at(&self.dir, &self.tmp)?;
        self.created = Some(fd_identity(&f)?);
        Ok(f)
    }

    /// Puts the temporary file (written and synced by the caller) in place of the output.
    pub fn commit(mut self) -> io::Result<()> {
        let Some(id) = self.created else {
            return Err(io::Error::other("nothing was written"));
        };
        // Still ours (nobody can replace it in a directory only they and we may write,
        // but a shared sticky one is checked too), and the output still a file or nothing.
        match lstat_at(&self.dir, &self.tmp)? {
            Some((now, _)) if now == id => {}
            _ => return Err(io::Error::other("the temporary file was replaced")),
        }
        self.check_target()?;
        rustix::fs::renameat(&self.dir, &self.tmp, &self.dir, &self.name)?;
        self.created = None;
        Ok(())
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        let Some(id) = self.created.take() else {
            return;
        };
        if let Ok(Some((now, _))) = lstat_at(&self.dir, &self.tmp) {
            if now == id {
                let _ = rustix::fs::unlinkat(&self.dir, &self.tmp, AtFlags::empty());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// Runs `f` with the umask set to `mask`, then restores it.
    fn with_umask<T>(mask: libc::mode_t, f: impl FnOnce() -> T) -> T {
        let old = rustix::process::umask(Mode::from_raw_mode(mask));
        let out = f();
        rustix::process::umask(old);
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
    fn an_unnamed_file_is_seen_only_once_linked_and_never_over_anything() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.dat");
        let names = || std::fs::read_dir(d.path()).unwrap().count();
        let f = with_umask(0, || create_unnamed(&p, false))
            .unwrap()
            .expect("the test's filesystem makes unnamed files");
        let id = fd_identity(&f).unwrap();
        assert_eq!(names(), 0, "an unnamed file has a name");
        let made = link_unnamed(&f, &p).unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(FileId::from_meta(&m), id);
        assert_eq!(made.id(), id);
        assert_eq!(m.mode() & 0o7777, 0o600);
        // Moved away, it can be found.
        let q = d.path().join("moved.dat");
        std::fs::rename(&p, &q).unwrap();
        assert_eq!(made.moved_to(), Some(q.clone()));
        std::fs::rename(&q, &p).unwrap();
        // Nothing is replaced: not a file, not a dangling link (its target is not made).
        let e = link_unnamed(&f, &p).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST), "{e}");
        let g = create_unnamed(&d.path().join("x"), false).unwrap().unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(d.path().join("target"), &link).unwrap();
        assert!(link_unnamed(&g, &link).is_err());
        assert!(!d.path().join("target").exists());
        // One dropped without a name leaves nothing.
        drop(create_unnamed(&d.path().join("y"), false).unwrap().unwrap());
        assert_eq!(
            names(),
            2,
            "{:?}",
            std::fs::read_dir(d.path()).unwrap().collect::<Vec<_>>()
        );
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
    fn what_was_made_is_removed_only_while_it_is_there() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("made");
        let m = Made::private_dir(&p).unwrap();
        assert_eq!(m.check().unwrap(), Found::Same);
        let moved = d.path().join("moved");
        std::fs::rename(&p, &moved).unwrap();
        assert_eq!(m.check().unwrap(), Found::Gone);
        std::fs::write(&p, "theirs").unwrap();
        let r = m.remove().unwrap();
        assert_eq!(
            r,
            Found::Replaced {
                moved_to: Some(moved.clone())
            }
        );
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "theirs");
        let f = create_new(&d.path().join("f")).unwrap();
        let m = Made::of_file(&d.path().join("f"), &f).unwrap();
        assert_eq!(m.remove().unwrap(), Found::Same);
        assert!(!d.path().join("f").exists());
    }

    #[test]
    fn a_private_dir_is_0700_and_removed_only_while_it_is_the_same() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(unique_name("t"));
        let id = create_dir(&p).unwrap();
        assert!(create_dir(&p).is_err());
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
