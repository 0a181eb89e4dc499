//! filestat: each I/O is one `stat` of a file of the job's set (`fstatat` in the set's
//! directory, following links as stat(2) does), from the job's thread, one at a time; no
//! data moves. fio's `ioengine=filestat` with its default `stat_type=stat`, which times one
//! stat per file and lays the files out before the job starts: iolab makes them (a
//! block of zeros each, not synced: a stat does not depend on it) when the engine opens, file `offset / bs` of the region
//! ([`super::fileset`]).

use std::ffi::CStr;
use std::os::fd::BorrowedFd;

use iolab_spec::engopt::Files;
use iolab_spec::EngineKind;
use rustix::fs::AtFlags;

use super::fileset::{desc, FileEngine, FileOp};
use super::Desc;

pub type Filestat = FileEngine<Stat>;

#[derive(Default)]
pub struct Stat;

impl FileOp for Stat {
    const DESC: Desc = Desc {
        fio_options: &["stat_type"],
        ..desc(
            EngineKind::declare("filestat"),
            &["filestat"],
            Files::laid_out("stat"),
        )
    };

    #[inline]
    fn call(&mut self, _: u64, dir: BorrowedFd<'_>, name: &CStr) -> rustix::io::Result<()> {
        rustix::fs::statat(dir, name, AtFlags::empty()).map(|_| ())
    }
}
