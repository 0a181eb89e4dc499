//! filedelete: each I/O unlinks one file of the job's set (`unlinkat` in the set's
//! directory), from the job's thread, one at a time; no data moves. fio's
//! `ioengine=filedelete`, which times one unlink per file and lays the files out before the
//! job starts: iolab makes them (a block of zeros each, synced) when the engine opens, file
//! `offset / bs` of the region ([`super::fileset`]). A file met again (a second loop) is
//! gone, and the I/O fails with ENOENT as fio's does; the mapping refuses what would loop.

use std::ffi::CStr;
use std::os::fd::BorrowedFd;

use iolab_spec::engopt::Files;
use iolab_spec::EngineKind;
use rustix::fs::AtFlags;

use super::fileset::{desc, FileEngine, FileOp};
use super::Desc;

pub type Filedelete = FileEngine<Delete>;

#[derive(Default)]
pub struct Delete;

impl FileOp for Delete {
    const DESC: Desc = desc(
        EngineKind::declare("filedelete"),
        &["filedelete"],
        Files::laid_out("unlink").once(),
    );
    const SYNCED: bool = true;

    /// Every name in the set's private directory (0700, held open) is one this engine
    /// made with `O_EXCL`; the directory is checked by device and inode when it goes.
    #[inline]
    fn call(&mut self, _: u64, dir: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<()> {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())
    }
}
