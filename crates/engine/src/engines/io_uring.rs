//! io_uring: one ring per job, submissions batched (one io_uring_enter per batch; random
//! direct I/O at depth > 1 goes one I/O per call instead, see `Engine::open`), with the
//! job's file and buffers optionally registered with the kernel.
//!
//! SQPOLL is deliberately not used: on small machines its polling thread competes with the
//! job threads and distorts latencies.

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types, IoUring};
use iolab_spec::engopt::{EngineOption, Val};
use iolab_spec::{EngineKind, IoDir};

use super::psync::Psync;
use super::{Completion, Desc, Engine, Open};
use crate::buffers::BufferPool;

/// The options only io_uring has (fio's io_uring options of the same names): `iolab run`'s
/// `--no-fixedbufs` and `--no-registerfiles`, the keys a run's settings store, fio's job-file
/// options, and what a run's header says of them.
const OPTIONS: &[EngineOption] = &[
    EngineOption {
        key: "fixedbufs",
        cli: "no-fixedbufs",
        help: "io_uring: do not register buffers with the kernel",
        default: Val::Flag(true),
        max: 0,
        fio: Some(("fixedbufs", Val::Flag(false))),
        header: "fixed buffers",
    },
    EngineOption {
        key: "registerfiles",
        cli: "no-registerfiles",
        help: "io_uring: do not register the file with the kernel",
        default: Val::Flag(true),
        max: 0,
        fio: Some(("registerfiles", Val::Flag(false))),
        header: "registered files",
    },
];

/// Whether this kernel lets us create a ring at all (io_uring_disabled, seccomp, old kernel).
pub fn available() -> Result<(), io::Error> {
    IoUring::new(2).map(|_| ())
}

/// What registration actually succeeded, reported back to the run's notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub fixed_file: bool,
    pub fixed_bufs: bool,
}

pub struct Uring {
    ring: IoUring,
    fd: RawFd,
    reg: Registration,
    /// Submit every I/O as soon as it is queued instead of the round's batch at once.
    each: bool,
    /// The ioprio of the next I/Os (0: the submitting thread's).
    prio: u16,
}

fn build_ring(entries: u32) -> io::Result<IoUring> {
    // Single issuer + deferred task running: completions are processed only when we enter
    // the kernel to wait for them, which is exactly the job loop's rhythm. No SQ index array
    // (6.6+): the kernel takes submissions in ring order, one indirection less per I/O.
    // Each kernel gets the first set it accepts.
    for no_sqarray in [true, false] {
        let mut b = IoUring::builder();
        b.setup_single_issuer()
            .setup_defer_taskrun()
            .setup_coop_taskrun();
        if no_sqarray {
            b.setup_no_sqarray();
        }
        if let Ok(r) = b.build(entries) {
            return Ok(r);
        }
    }
    IoUring::builder().build(entries)
}

impl Uring {
    /// Creates a ring sized for `iodepth` and registers what was asked (and works).
    pub fn new(
        fd: RawFd,
        iodepth: u32,
        bufs: &BufferPool,
        register_file: bool,
        register_bufs: bool,
    ) -> io::Result<Self> {
        let entries = iodepth.next_power_of_two().max(2);
        let ring = build_ring(entries)?;
        let mut reg = Registration {
            fixed_file: false,
            fixed_bufs: false,
        };
        if register_file && ring.submitter().register_files(&[fd]).is_ok() {
            reg.fixed_file = true;
        }
        if register_bufs {
            let iov = bufs.iovecs();
            // SAFETY: the buffers outlive the ring: the worker drops the ring before the pool.
            if unsafe { ring.submitter().register_buffers(&iov) }.is_ok() {
                reg.fixed_bufs = true;
            }
        }
        Ok(Uring {
            ring,
            fd,
            reg,
            each: false,
            prio: 0,
        })
    }

    fn sqe(&self, ptr: *mut u8, slot: u32, dir: IoDir, offset: u64, len: u32) -> squeue::Entry {
        macro_rules! build {
            ($target:expr) => {
                match (dir, self.reg.fixed_bufs) {
                    (IoDir::Read, true) => opcode::ReadFixed::new($target, ptr, len, slot as u16)
                        .offset(offset)
                        .ioprio(self.prio)
                        .build(),
                    (IoDir::Write, true) => opcode::WriteFixed::new($target, ptr, len, slot as u16)
                        .offset(offset)
                        .ioprio(self.prio)
                        .build(),
                    (IoDir::Read, false) => opcode::Read::new($target, ptr, len)
                        .offset(offset)
                        .ioprio(self.prio)
                        .build(),
                    (IoDir::Write, false) => opcode::Write::new($target, ptr, len)
                        .offset(offset)
                        .ioprio(self.prio)
                        .build(),
                }
            };
        }
        let e = if self.reg.fixed_file {
            build!(types::Fixed(0))
        } else {
            build!(types::Fd(self.fd))
        };
        e.user_data(slot as u64)
    }
}

impl Engine for Uring {
    const DESC: Desc = Desc {
        aliases: &["iouring", "uring"],
        // libaio: as io_uring with direct=1 (buffered, Linux AIO completes each request
        // inside io_submit: the mapping runs it on psync).
        fio: &["io_uring", "libaio"],
        // fio's io_uring and libaio engines issue a trim synchronously (do_io_u_trim), as
        // its sync engines do; so does a kernel without io_uring.
        fallback: Some(Psync::DESC.kind),
        buffered_fallback: &["libaio"],
        per_io_prio: true,
        options: OPTIONS,
        ..Desc::of(EngineKind::declare("io_uring"))
    };

    fn open(o: &Open<'_>) -> Result<(Self, Vec<String>), String> {
        let opts = &o.settings.engine_opts;
        let (file, bufs) = (opts.flag("registerfiles"), opts.flag("fixedbufs"));
        let mut ring = Uring::new(o.fd, o.iodepth, o.bufs, file, bufs)
            .map_err(|e| format!("io_uring setup failed: {e}"))?;
        // Random direct I/O cannot merge in the block layer: each I/O goes to the device as
        // soon as it is queued, so the device starts on the first one while the job
        // prepares the rest (4K randread QD32 on a virtio disk: 92k instead of 77k IOPS).
        // At queue depth 1 the wait submits the one I/O anyway. Sequential and buffered I/O
        // keep the round's batch: sequential requests merge while a batch is plugged, and
        // buffered reads complete inside the submit call.
        ring.each = o.settings.direct && o.random && o.iodepth > 1;
        let mut notes = Vec::new();
        if bufs && !ring.reg.fixed_bufs {
            notes.push("io_uring buffer registration failed; used plain buffers".into());
        }
        if file && !ring.reg.fixed_file {
            notes.push("io_uring file registration failed; used the plain fd".into());
        }
        Ok((ring, notes))
    }

    #[inline]
    fn queue(&mut self, bufs: &BufferPool, slot: u32, dir: IoDir, offset: u64, len: u32) {
        if self.each && !self.ring.submission().is_empty() {
            // The I/O queued before this one goes now; this one waits for the next queue()
            // or goes with submit_and_reap's wait, so a round of k I/Os takes k system
            // calls in all, and a round of one takes one. Errors surface at that
            // submit_and_reap, which submits whatever is left.
            let _ = self.ring.submit();
        }
        let sqe = self.sqe(bufs.slot_ptr(slot as usize), slot, dir, offset, len);
        // SAFETY: the buffer stays valid and untouched until the completion is reaped. The
        // ring has at least iodepth entries and never more than iodepth I/Os in flight, so
        // the queue cannot be full.
        unsafe {
            self.ring
                .submission()
                .push(&sqe)
                .expect("submission queue sized for iodepth");
        }
    }

    #[inline]
    fn submit_and_reap(&mut self, min: u32, out: &mut Vec<Completion>) -> io::Result<()> {
        loop {
            match self.ring.submit_and_wait(min as usize) {
                Ok(_) => break,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // Completion queue full: drain it below and try again.
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        for cqe in self.ring.completion() {
            out.push(Completion {
                slot: cqe.user_data() as u32,
                result: cqe.result(),
            });
        }
        Ok(())
    }

    fn fd(&self) -> RawFd {
        self.fd
    }

    fn available() -> Result<(), String> {
        available().map_err(|e| e.to_string())
    }

    fn set_prio(&mut self, ioprio: u16) {
        self.prio = ioprio;
    }
}
