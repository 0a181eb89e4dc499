//! filecreate: each I/O creates one file of the job's set (`openat(O_CREAT|O_EXCL|
//! O_NOFOLLOW|O_RDWR)`, mode 0600, then closed), from the job's thread, one at a time; no
//! data moves. fio's `ioengine=filecreate`, which times one `open(O_CREAT|O_RDWR)` per file
//! and gives each file one I/O of the block size: file `offset / bs` of the region
//! ([`super::fileset`]). A file the job made already (a second loop over the region) is
//! opened again without `O_CREAT`, as fio's open of an existing file is.

use std::ffi::CStr;
use std::os::fd::BorrowedFd;

use iolab_spec::engopt::Files;
use iolab_spec::EngineKind;
use rustix::fs::{Mode, OFlags};

use super::fileset::{desc, FileEngine, FileOp, FileSet};
use super::Desc;

pub type Filecreate = FileEngine<Create>;

#[derive(Default)]
pub struct Create {
    /// Which of the set's files this job made.
    made: Vec<bool>,
    /// The umask takes bits from 0600: each new file gets its mode through its descriptor.
    chmod: bool,
}

impl FileOp for Create {
    const DESC: Desc = desc(
        EngineKind::declare("filecreate"),
        &["filecreate"],
        Files::made("create"),
    );

    fn prepare(&mut self, set: &FileSet) -> Result<(), String> {
        self.chmod = !set
            .umask_keeps_mode()
            .map_err(|e| format!("filecreate: cannot make a file in its directory: {e}"))?;
        self.made = vec![false; set.count() as usize];
        Ok(())
    }

    #[inline]
    fn call(&mut self, i: u64, dir: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<()> {
        let again = self.made[i as usize];
        let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let flags = if again {
            flags
        } else {
            flags | OFlags::CREATE | OFlags::EXCL
        };
        let mode = Mode::from_raw_mode(iolab_sys::files::FILE_MODE as _);
        let fd = rustix::fs::openat(dir, name, flags, mode)?;
        if self.chmod && !again {
            rustix::fs::fchmod(&fd, mode)?;
        }
        self.made[i as usize] = true;
        Ok(())
    }
}
