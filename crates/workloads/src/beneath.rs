//! Paths resolved beneath the run directory without following any symbolic link: every
//! dbench loadfile or replayed trace path (and every removal) goes through `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)` from a descriptor of the run directory, so a link swapped into a
//! client's directory during the run makes that operation fail (ELOOP / EXDEV) instead of
//! reaching outside the target. Names are then created, removed and renamed with the `*at`
//! calls relative to a parent resolved the same way; those never follow the last component.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};

/// How links are refused: beneath the root, no symlink anywhere, no /proc magic links.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// The run directory, as a descriptor every path is resolved beneath.
#[derive(Debug)]
pub(crate) struct Beneath {
    root: OwnedFd,
}

fn os(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

impl Beneath {
    /// Opens `dir` (which may itself be reached through links: it is the user's choice).
    /// Fails with a clear message on a kernel without openat2 (before 5.6).
    pub fn open(dir: &Path) -> io::Result<Beneath> {
        let root = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        let b = Beneath { root };
        // Probe openat2 once, so an old kernel is reported before anything runs.
        match b.at(
            Path::new("."),
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel has no openat2(2) (Linux 5.6 or later is needed to keep every \
                 loadfile path inside the run directory)",
            )),
            Err(e) => Err(e),
            Ok(_) => Ok(b),
        }
    }

    /// openat2 beneath the root; retried while a concurrent rename makes the kernel answer
    /// EAGAIN.
    fn at(&self, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(&self.root, rel, flags | OFlags::CLOEXEC, mode, RESOLVE) {
                Err(rustix::io::Errno::AGAIN) if tries < 100 => tries += 1,
                r => return r.map_err(os),
            }
        }
    }

    /// The parent directory of `rel` (resolved beneath) and its last component.
    fn parent<'p>(&self, rel: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
        let name = rel.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "a path without a last name")
        })?;
        let dir = rel.parent().unwrap_or(Path::new(""));
        Ok((
            self.at(dir, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?,
            name,
        ))
    }

    /// Opens `rel` with `flags` (O_CREAT etc.), never through a link.
    pub fn open_file(&self, rel: &Path, flags: OFlags, mode: u32) -> io::Result<File> {
        // openat2 refuses a mode without O_CREAT (EINVAL), where open(2) ignores it.
        let mode = if flags.contains(OFlags::CREATE) {
            Mode::from_raw_mode(mode)
        } else {
            Mode::empty()
        };
        let fd = self.at(rel, flags | OFlags::NOFOLLOW, mode)?;
        Ok(File::from(fd))
    }

    pub fn mkdir(&self, rel: &Path, mode: u32) -> io::Result<()> {
        let (p, name) = self.parent(rel)?;
        rustix::fs::mkdirat(&p, name, Mode::from_raw_mode(mode)).map_err(os)
    }

    pub fn unlink(&self, rel: &Path) -> io::Result<()> {
        let (p, name) = self.parent(rel)?;
        rustix::fs::unlinkat(&p, name, AtFlags::empty()).map_err(os)
    }

    pub fn rmdir(&self, rel: &Path) -> io::Result<()> {
        let (p, name) = self.parent(rel)?;
        rustix::fs::unlinkat(&p, name, AtFlags::REMOVEDIR).map_err(os)
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.rename_with(from, to, false)
    }

    /// Renames `from` to `to`; with `noreplace`, EEXIST when `to` exists
    /// (RENAME_NOREPLACE).
    pub fn rename_with(&self, from: &Path, to: &Path, noreplace: bool) -> io::Result<()> {
        let (pa, a) = self.parent(from)?;
        let (pb, b) = self.parent(to)?;
        let flags = if noreplace {
            rustix::fs::RenameFlags::NOREPLACE
        } else {
            rustix::fs::RenameFlags::empty()
        };
        rustix::fs::renameat_with(&pa, a, &pb, b, flags).map_err(os)
    }

    /// A hard link `to` of `from`; neither is followed if it is a link.
    pub fn link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (pa, a) = self.parent(from)?;
        let (pb, b) = self.parent(to)?;
        rustix::fs::linkat(&pa, a, &pb, b, AtFlags::empty()).map_err(os)
    }

    /// A symbolic link at `at` holding `target` (nothing here ever follows it).
    pub fn symlink(&self, target: &[u8], at: &Path) -> io::Result<()> {
        let (p, name) = self.parent(at)?;
        rustix::fs::symlinkat(OsStr::from_bytes(target), &p, name).map_err(os)
    }

    /// The type of `rel` itself (a link is reported as a link, not followed).
    pub fn file_type(&self, rel: &Path) -> io::Result<FileType> {
        if rel.as_os_str().is_empty() {
            return Ok(FileType::Directory);
        }
        let (p, name) = self.parent(rel)?;
        let st = rustix::fs::statat(&p, name, AtFlags::SYMLINK_NOFOLLOW).map_err(os)?;
        Ok(FileType::from_raw_mode(st.st_mode))
    }

    /// The names in directory `rel` (without `.` and `..`).
    pub fn list(&self, rel: &Path) -> io::Result<Vec<Vec<u8>>> {
        let fd = self.at(rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        names(fd)
    }

    /// Removes `rel` and, if it is a directory, everything in it; never follows a link
    /// (a link is removed, not what it points to). Missing is fine.
    pub fn remove_tree(&self, rel: &Path) -> io::Result<()> {
        let (p, name) = match self.parent(rel) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        remove_at(&p, name.as_bytes())
    }
}

/// The entries of an open directory, `.` and `..` left out.
fn names(fd: OwnedFd) -> io::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for e in Dir::new(fd).map_err(os)? {
        let e = e.map_err(os)?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(n.to_vec());
        }
    }
    Ok(out)
}

/// Removes `name` in directory `dir`, recursively, with `*at` calls only.
fn remove_at(dir: &impl AsFd, name: &[u8]) -> io::Result<()> {
    let name = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    let name: &CStr = &name;
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(os(e)),
    };
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        let sub = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os)?;
        let dup = sub.try_clone()?;
        for child in names(dup)? {
            remove_at(&sub, &child)?;
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(os(e)),
        }
    } else {
        match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(os(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), "keep").unwrap();
        let root = d.path().join("run");
        std::fs::create_dir_all(root.join("clients/client0")).unwrap();
        // A link in place of a directory and one in place of a file.
        symlink(outside.path(), root.join("clients/client0/dir")).unwrap();
        symlink(
            outside.path().join("victim"),
            root.join("clients/client0/file"),
        )
        .unwrap();
        let b = Beneath::open(&root).unwrap();
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC;
        let through_dir = b.open_file(Path::new("clients/client0/dir/victim"), flags, 0o600);
        assert!(through_dir.is_err());
        let the_link = b.open_file(Path::new("clients/client0/file"), flags, 0o600);
        assert!(the_link.is_err());
        assert!(b
            .mkdir(Path::new("clients/client0/dir/new"), 0o700)
            .is_err());
        assert!(b.unlink(Path::new("clients/client0/dir/victim")).is_err());
        assert!(b.list(Path::new("clients/client0/dir")).is_err());
        assert!(b.open_file(Path::new("../x"), flags, 0o600).is_err());
        // Removing the tree removes the links themselves, nothing they point to.
        b.remove_tree(Path::new("clients")).unwrap();
        assert!(!root.join("clients").exists());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("victim")).unwrap(),
            "keep"
        );
        b.remove_tree(Path::new("clients")).unwrap();
    }
}
