//! dbench loadfile replay: the file-server load of dbench (the `[timestamp] Op args... STATUS`
//! loadfiles, such as Debian's `/usr/share/dbench/client.txt`, plain or gzipped) replayed by
//! N client threads, each in its own `clients/clientN` directory, looping over the file until
//! the time is up. Operations map to POSIX calls the way dbench's fileio backend maps them;
//! every outcome is checked against the status the loadfile expects and mismatches are
//! counted. Throughput is dbench's: the bytes ReadX and WriteX ask for after the warm-up,
//! over the measured time. See docs/dbench.md.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use iolab_workloads::dbench::{parse_loadfile, run, DbenchConfig};
//!
//! let cfg = DbenchConfig::new("/mnt/test", "/usr/share/dbench/client.txt", 2, Duration::from_secs(60));
//! let lf = parse_loadfile(&cfg.loadfile)?;
//! let stop = AtomicBool::new(false);
//! let res = run(&cfg, &lf, &stop, &mut |p| eprintln!("{:>4.0}s {:?} {:.1} MB/s", p.elapsed.as_secs_f64(), p.phase, p.mb_s))?;
//! println!("Throughput {:.2} MB/sec\n{}", res.mb_s, res.op_table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod client;
pub mod footprint;
pub mod info;
mod loadfile;
pub mod run;

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use iolab_measure::{LatencyHistogram, MB};
use iolab_runner::coord::Phases;
use serde::{Deserialize, Serialize};

#[doc(hidden)]
pub use iolab_integrity::dbench::Tamper;
pub use iolab_integrity::dbench::BLOCK as VERIFY_BLOCK;
use iolab_integrity::Tally;
pub use loadfile::{
    parse_loadfile, Loadfile, LoadfileError, OpKind, MAX_LOADFILE_BYTES, MAX_LOADFILE_LINE,
};

/// The test seam of [`run_with_seam`]. Not part of the API.
#[doc(hidden)]
pub type Seam<'s> = dyn Fn(&Tamper<'_>) + Sync + 's;

use client::{Gate, Live, Outcome, Shared};

/// The most clients a replay runs (each is a thread with its own buffers and directory).
pub const MAX_CLIENTS: u32 = 1024;

/// What to replay, where, and for how long.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbenchConfig {
    /// The directory to work in; everything happens in `dir/clients/`.
    pub dir: PathBuf,
    /// The loadfile (kept for the record; `run` replays the parsed [`Loadfile`] it is given).
    pub loadfile: PathBuf,
    /// Concurrent clients (threads), each in `clients/clientN`, N = 0..clients.
    pub clients: u32,
    /// Measured time, after the warm-up.
    pub time: Duration,
    /// Warm-up before measuring (dbench's default: time / 5).
    pub warmup: Duration,
    /// Open files with O_SYNC (dbench `--sync`).
    pub sync_open: bool,
    /// fsync after every WriteX (dbench `--fsync`).
    pub fsync_every_write: bool,
    /// Stop each client after this many complete passes over the loadfile, even if time is
    /// left (Some(1) is later dbench's `--run-once`); None: loop until the time is up.
    #[serde(default)]
    pub max_loops: Option<u64>,
    /// `--verify` with this run id: WriteX writes content generated from the run id, the
    /// file and the write, every ReadX and a final read-back of every file are checked
    /// against a model of what each file must hold. None: WriteX writes zeros, as dbench.
    #[serde(default)]
    pub verify: Option<u64>,
}

impl DbenchConfig {
    /// dbench's defaults for everything else: warm-up time / 5, no O_SYNC, no fsync per write.
    pub fn new(
        dir: impl Into<PathBuf>,
        loadfile: impl Into<PathBuf>,
        clients: u32,
        time: Duration,
    ) -> DbenchConfig {
        DbenchConfig {
            dir: dir.into(),
            loadfile: loadfile.into(),
            clients,
            time,
            warmup: time / 5,
            sync_open: false,
            fsync_every_write: false,
            max_loops: None,
            verify: None,
        }
    }
}

/// The phase a progress report belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Measure,
}

/// About once a second during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Since the clients were released.
    pub elapsed: Duration,
    pub phase: Phase,
    /// Since the start of this phase.
    pub phase_elapsed: Duration,
    /// MB/s (10^6 bytes) of ReadX + WriteX over the last second.
    pub mb_s: f64,
    /// MB/s since the start of this phase (the figure dbench prints each second).
    pub avg_mb_s: f64,
    /// Operations all clients have executed since the start.
    pub ops: u64,
}

/// One row of the operation table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpStats {
    pub op: OpKind,
    /// Operations completed in the measured phase.
    pub count: u64,
    /// Mean latency in milliseconds (exact).
    pub avg_ms: f64,
    /// Highest latency in milliseconds (exact).
    pub max_ms: f64,
    /// 99th percentile latency in milliseconds (histogram, 3 significant digits).
    pub p99_ms: f64,
    /// Outcomes that disagreed with the loadfile's status, over the whole run (warm-up
    /// included: any of them means the replay diverged from the recorded session).
    pub status_mismatches: u64,
    /// Latencies of the measured operations (nanoseconds); not serialised.
    #[serde(skip)]
    pub histogram: LatencyHistogram,
}

/// One operation whose outcome disagreed with the loadfile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MismatchSample {
    pub client: u32,
    /// 1-based line of the loadfile.
    pub line: u32,
    pub op: OpKind,
    /// The (first) path as the loadfile wrote it.
    pub path: Option<String>,
    pub fnum: Option<u32>,
    /// The status the loadfile expects.
    pub expected: String,
    /// What happened instead.
    pub got: String,
}

/// An operation whose outcome says the storage failed (EIO, a read-only, full or over-quota
/// filesystem, a short write) where the loadfile expected something else: it ends the
/// replay, and the run reports no speed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoFailure {
    pub client: u32,
    pub loadfile: PathBuf,
    /// 1-based line of the loadfile.
    pub line: u32,
    pub op: OpKind,
    /// The path as the loadfile wrote it (for handle operations: the one the handle was
    /// opened with).
    pub loadfile_path: Option<String>,
    /// The file it is on disk.
    pub file: Option<PathBuf>,
    pub fnum: Option<u32>,
    /// The errno, when the failure was one (a short write has none).
    pub errno: Option<i32>,
    /// What happened (`ENOSPC (No space left on device)`).
    pub error: String,
    /// The status the loadfile expects.
    pub expected: String,
}

impl fmt::Display for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = &self.file {
            write!(f, "{}: ", p.display())?;
        }
        write!(
            f,
            "{} failed with {} at {}:{} (client {}",
            self.op,
            self.error,
            self.loadfile.display(),
            self.line,
            self.client
        )?;
        if let Some(n) = self.fnum {
            write!(f, ", fnum {n}")?;
        }
        write!(f, "; the loadfile expects {})", self.expected)
    }
}

/// What a replay measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbenchResult {
    /// dbench's throughput: (bytes_read + bytes_written) / 10^6 / measured_seconds.
    pub mb_s: f64,
    /// From the end of the warm-up to the end of the run (or to the stop).
    pub measured_seconds: f64,
    pub warmup_seconds: f64,
    pub clients: u32,
    /// Bytes ReadX asked for in the measured phase.
    pub bytes_read: u64,
    /// Bytes WriteX asked for in the measured phase.
    pub bytes_written: u64,
    /// Complete passes over the loadfile, all clients together, warm-up included.
    pub loops_completed: u64,
    /// MB/s of each second of the measured phase (a final partial second scaled by its length).
    pub per_second_mb_s: Vec<f64>,
    /// Every operation kind of the loadfile, in dbench's table order (count 0 when it did
    /// not come up in the measured phase).
    pub ops: Vec<OpStats>,
    /// All status mismatches of the run.
    pub status_mismatches: u64,
    /// The first few of them.
    pub mismatches: Vec<MismatchSample>,
    /// ReadX calls that returned fewer bytes than the loadfile recorded.
    pub short_reads: u64,
    /// True when the stop flag ended the run early.
    pub interrupted: bool,
    /// Remarks: cleanup problems, short reads.
    pub notes: Vec<String>,
    /// The first I/O failure that ended the replay (then no figure of it is a result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<IoFailure>,
    /// What `--verify` found (None without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Tally>,
    /// When the measured part started, on this process's clock (None: it did not).
    #[serde(skip)]
    pub measure_started: Option<Instant>,
}

impl DbenchResult {
    /// The operation table as dbench prints it, plus the p99 and mismatch columns.
    pub fn op_table(&self) -> String {
        let mut s = String::new();
        s.push_str(" Operation      Count    AvgLat    MaxLat    P99Lat  Mismatch\n");
        s.push_str(" ------------------------------------------------------------\n");
        for o in &self.ops {
            s.push_str(&format!(
                " {:<12} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9}\n",
                o.op.name(),
                o.count,
                o.avg_ms,
                o.max_ms,
                o.p99_ms,
                o.status_mismatches
            ));
        }
        s
    }
}

/// Why a replay could not run.
#[derive(Debug)]
pub enum DbenchError {
    /// A setting that makes no sense (no clients, no time).
    Config(String),
    /// The directory cannot be used.
    Dir { path: PathBuf, source: io::Error },
    /// `clients/` or a client's directory holds something iolab did not create.
    Occupied {
        path: PathBuf,
        reason: client::Occupation,
    },
    /// A client thread could not be started or panicked.
    Client(String),
    /// The other ranks of an MPI run: one of them failed (which, and why).
    Ranks(iolab_runner::RunError),
}

impl fmt::Display for DbenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbenchError::Config(m) => write!(f, "dbench: {m}"),
            DbenchError::Dir { path, source } => write!(f, "dbench: {}: {source}", path.display()),
            DbenchError::Occupied { path, reason } => write!(
                f,
                "dbench: {} is in the way: {reason}; remove it or choose another directory",
                path.display()
            ),
            DbenchError::Client(m) => write!(f, "dbench: {m}"),
            DbenchError::Ranks(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DbenchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DbenchError::Dir { source, .. } => Some(source),
            DbenchError::Occupied { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

/// How many mismatch samples a result keeps.
pub(crate) const MAX_SAMPLES: usize = 20;

/// The mean and 99th percentile of an operation's latencies, in milliseconds (0 without
/// any).
pub(crate) fn latency_ms(h: &LatencyHistogram) -> (f64, f64) {
    let ms = |ns: f64| ns / 1e6;
    match h.is_empty() {
        true => (0.0, 0.0),
        false => (ms(h.mean_ns()), ms(h.quantile_ns(0.99) as f64)),
    }
}

/// Replays `loadfile` with `cfg.clients` clients in `cfg.dir/clients/`: warm-up, then
/// `cfg.time` measured, calling `progress` about once a second. Ends early (with
/// `interrupted`) when `stop` is set. Whatever the run created is removed before it returns,
/// in every case.
pub fn run(
    cfg: &DbenchConfig,
    loadfile: &Loadfile,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<DbenchResult, DbenchError> {
    run_inner(
        cfg,
        loadfile,
        progress,
        None,
        &mut Phases::new(None, stop),
        &mut |_, _| {},
    )
}

/// [`run`] as one rank of an MPI run: the replay starts at a barrier with the other ranks
/// (the clients are set up and waiting), and the measured part starts at a second one,
/// when every rank has warmed up for `cfg.warmup` at least (the clients go on replaying
/// while their rank waits, still warming up). The result's `measure_started` is when it
/// started, on this rank's clock.
/// `created` is told `clients/`'s path and identity (device, inode) as soon as the replay
/// makes it (for a record that must never take another directory at its path for it).
pub fn run_with(
    cfg: &DbenchConfig,
    loadfile: &Loadfile,
    progress: &mut dyn FnMut(&Progress),
    phases: &mut Phases<'_>,
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<DbenchResult, DbenchError> {
    run_inner(cfg, loadfile, progress, None, phases, created)
}

/// [`run`] with a test seam: with `cfg.verify`, `seam` is called in every client before
/// every operation and once after the replay, before the final read-back, so a test can
/// change the client's files behind the model's back. Not part of the API.
#[doc(hidden)]
pub fn run_with_seam(
    cfg: &DbenchConfig,
    loadfile: &Loadfile,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
    seam: &Seam<'_>,
) -> Result<DbenchResult, DbenchError> {
    let mut alone = Phases::new(None, stop);
    run_inner(
        cfg,
        loadfile,
        progress,
        Some(seam),
        &mut alone,
        &mut |_, _| {},
    )
}

fn run_inner(
    cfg: &DbenchConfig,
    loadfile: &Loadfile,
    progress: &mut dyn FnMut(&Progress),
    seam: Option<&Seam<'_>>,
    phases: &mut Phases<'_>,
    created: &mut dyn FnMut(&Path, (u64, u64)),
) -> Result<DbenchResult, DbenchError> {
    let stop = phases.stop();
    // With other ranks and a warm-up, the measured part starts when every rank is done
    // warming up.
    let meet_after_warmup = phases.ranks() > 1 && !cfg.warmup.is_zero();
    if cfg.clients == 0 || cfg.clients > MAX_CLIENTS {
        return Err(DbenchError::Config(format!(
            "--clients {}: must be between 1 and {MAX_CLIENTS}",
            cfg.clients
        )));
    }
    if cfg.time.is_zero() {
        return Err(DbenchError::Config("--time must be more than 0".into()));
    }
    let dir = cfg.dir.clone();
    match fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(DbenchError::Dir {
                path: dir,
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            })
        }
        Err(source) => return Err(DbenchError::Dir { path: dir, source }),
    }
    let clients_dir = dir.join(client::CLIENTS);
    let existed = check_clients_dir(&clients_dir, cfg.clients)?;
    // `clients/` made here (0700: nothing in it is anyone else's) and held, or the one
    // found (iolab's or dbench's, checked above) held: the end removes what is in it only
    // while its path still is it. One that cannot be made (a read-only or full
    // filesystem) is left to the replay, whose failure names the errno and the loadfile
    // line.
    let clients = match existed {
        true => iolab_sys::files::Made::hold(&clients_dir).ok(),
        false => match iolab_sys::files::Made::private_dir(&clients_dir) {
            Ok(m) => Some(m),
            // Something is at its path that the run does not hold as made (another
            // directory put there as it was made): not the run's to work in or remove.
            Err(source) if fs::symlink_metadata(&clients_dir).is_ok() => {
                return Err(DbenchError::Dir {
                    path: clients_dir,
                    source,
                })
            }
            Err(_) => None,
        },
    };
    if let (false, Some(c)) = (existed, &clients) {
        created(&clients_dir, (c.id().dev, c.id().ino));
    }
    let beneath = crate::beneath::Beneath::open(&dir).map_err(|source| DbenchError::Dir {
        path: dir.clone(),
        source,
    })?;
    let fs_dir = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| DbenchError::Config(format!("{}: path contains a NUL byte", dir.display())))?;
    let max_write = loadfile
        .entries
        .iter()
        .filter_map(|e| match e.action {
            loadfile::Action::Write { size, .. } => Some(size as usize),
            _ => None,
        })
        .max()
        .unwrap_or(0);

    let shared = Shared {
        lf: loadfile,
        clients_dir: clients_dir.clone(),
        clients,
        run_dir: dir.clone(),
        beneath,
        fs_dir,
        sync_open: cfg.sync_open,
        fsync_every_write: cfg.fsync_every_write,
        max_loops: cfg.max_loops,
        time: cfg.time,
        measure_at: AtomicU64::new(match meet_after_warmup {
            true => client::NOT_YET,
            false => cfg.warmup.as_nanos().min(u64::MAX as u128 - 1) as u64,
        }),
        stop,
        abort: AtomicBool::new(false),
        gate: Gate::default(),
        live: (0..cfg.clients).map(|_| Live::default()).collect(),
        finished: AtomicU32::new(0),
        zeros: vec![0u8; max_write],
        verify: cfg.verify,
        seam,
    };

    let mut interrupted_at: Option<Instant> = None;
    let mut ranks_failed: Option<iolab_runner::RunError> = None;
    let joined: Vec<std::thread::Result<Outcome>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for id in 0..cfg.clients {
            let sh = &shared;
            match std::thread::Builder::new()
                .name(format!("dbench-client{id}"))
                .spawn_scoped(s, move || client::run_client(sh, id))
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // The clients already started leave at once, cleaning up after themselves.
                    shared.gate.open(None);
                    for h in handles {
                        let _ = h.join();
                    }
                    return vec![Err(
                        Box::new(format!("could not start a client thread: {e}"))
                            as Box<dyn std::any::Any + Send>,
                    )];
                }
            }
        }
        shared.gate.wait_ready(cfg.clients);
        // Every client is set up: the other ranks' barrier, then the start.
        let met = phases.before();
        let start = Instant::now();
        match met {
            Ok(()) => {
                shared.gate.open(Some(start));
                let meet = meet_after_warmup.then_some(&mut *phases);
                match monitor(&shared, cfg, start, progress, meet) {
                    Ok(at) => interrupted_at = at,
                    Err(e) => ranks_failed = Some(e),
                }
            }
            Err(e) => {
                // The clients go home, cleaning up after themselves.
                shared.gate.open(None);
                ranks_failed = Some(e);
            }
        }
        handles.into_iter().map(|h| h.join()).collect()
    });

    // Safety net: client directories of clients that panicked, then `clients/` itself;
    // nothing in a `clients/` put in place of the run's during the run.
    let mut notes = Vec::new();
    let replaced = match shared.clients.as_ref().map(|c| c.check()) {
        Some(Ok(iolab_sys::files::Found::Replaced { moved_to })) => Some(moved_to),
        _ => None,
    };
    if let Some(moved_to) = replaced {
        let mut note = format!(
            "{} is not the directory this run {} (it was replaced during the run): left \
             alone, nothing in it removed",
            clients_dir.display(),
            if existed { "used" } else { "created" }
        );
        if let Some(m) = moved_to {
            note.push_str(&format!("; the run's own was moved to {}", m.display()));
        }
        eprintln!("iolab: warning: {note}");
        notes.push(note);
    } else {
        remove_clients(&shared, cfg.clients, existed, &clients_dir, &mut notes);
    }

    let mut outcomes = Vec::new();
    for j in joined {
        match j {
            Ok(o) => outcomes.push(o),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a client thread panicked".into());
                return Err(DbenchError::Client(msg));
            }
        }
    }
    match ranks_failed {
        Some(iolab_runner::RunError::Interrupted) => interrupted_at = Some(Instant::now()),
        Some(e) => return Err(DbenchError::Ranks(e)),
        None => {}
    }
    let Some(start) = shared.gate.start() else {
        // Stopped at the barrier before the start: nothing ran.
        return Ok(merge(
            cfg,
            Instant::now(),
            None,
            interrupted_at,
            Vec::new(),
            notes,
        ));
    };
    let measure_start = shared.measure_start(start);
    Ok(merge(
        cfg,
        start,
        measure_start,
        interrupted_at,
        outcomes,
        notes,
    ))
}

/// Removes the client directories a replay used and, when it made it, `clients/`.
fn remove_clients(
    shared: &Shared<'_>,
    clients: u32,
    existed: bool,
    clients_dir: &Path,
    notes: &mut Vec<String>,
) {
    for id in 0..clients {
        if let Err(e) = shared.beneath.remove_tree(&client::client_dir(id)) {
            let p = clients_dir.join(format!("client{id}"));
            notes.push(format!("cleanup: could not remove {}: {e}", p.display()));
        }
    }
    // `clients/` only when the run made and holds it (checked above to be still at its
    // path): never by its name alone.
    if !existed && shared.clients.is_some() {
        match shared.beneath.rmdir(Path::new(client::CLIENTS)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => notes.push(format!(
                "cleanup: could not remove {}: {e}",
                clients_dir.display()
            )),
        }
    }
}

/// The progress loop on the calling thread: one report per second until the measured phase
/// ends or the stop flag is set. Returns when the stop flag was seen. With `meet` (an MPI
/// rank), at the end of the warm-up it waits for the other ranks and starts the measured
/// part when they are all there: an error when one of them failed (the clients are told to
/// stop).
fn monitor(
    shared: &Shared<'_>,
    cfg: &DbenchConfig,
    start: Instant,
    progress: &mut dyn FnMut(&Progress),
    mut meet: Option<&mut Phases<'_>>,
) -> Result<Option<Instant>, iolab_runner::RunError> {
    let mut measure_start = start + cfg.warmup;
    let mut end = measure_start + cfg.time;
    let total_bytes = || -> u64 {
        shared
            .live
            .iter()
            .map(|l| l.bytes.load(Ordering::Relaxed))
            .sum()
    };
    let total_ops = || -> u64 {
        shared
            .live
            .iter()
            .map(|l| l.ops.load(Ordering::Relaxed))
            .sum()
    };
    let mut next_tick = start + Duration::from_secs(1);
    let mut last_bytes = 0u64;
    let mut last_tick = start;
    let mut phase_bytes: Option<u64> = if cfg.warmup.is_zero() { Some(0) } else { None };
    let mut interrupted = None;
    loop {
        let now = Instant::now();
        if shared.stop.load(Ordering::Relaxed) && interrupted.is_none() {
            interrupted = Some(now);
        }
        if shared.finished.load(Ordering::SeqCst) as usize == shared.live.len() {
            break;
        }
        if phase_bytes.is_none() && now >= measure_start {
            if let Some(m) = meet.take() {
                if let Err(e) = m.before() {
                    shared.abort.store(true, Ordering::SeqCst);
                    return Err(e);
                }
                let at = Instant::now();
                shared
                    .measure_at
                    .store((at - start).as_nanos() as u64, Ordering::Release);
                measure_start = at;
                end = measure_start + cfg.time;
                continue;
            }
            phase_bytes = Some(total_bytes());
        }
        if now >= next_tick && now < end && interrupted.is_none() {
            let bytes = total_bytes();
            let secs = (now - last_tick).as_secs_f64().max(1e-9);
            // A tick that falls on the end of the warm-up still reports the warm-up.
            let (phase, phase_start, base) = match phase_bytes {
                Some(b) if now >= measure_start + Duration::from_millis(100) => {
                    (Phase::Measure, measure_start, b)
                }
                _ => (Phase::Warmup, start, 0),
            };
            let phase_elapsed = now - phase_start;
            progress(&Progress {
                elapsed: now - start,
                phase,
                phase_elapsed,
                mb_s: (bytes - last_bytes) as f64 / MB / secs,
                avg_mb_s: (bytes - base) as f64 / MB / phase_elapsed.as_secs_f64().max(1e-9),
                ops: total_ops(),
            });
            last_bytes = bytes;
            last_tick = now;
            while next_tick <= now {
                next_tick += Duration::from_secs(1);
            }
        }
        let mut wake = next_tick.min(now + Duration::from_millis(100));
        if phase_bytes.is_none() {
            wake = wake.min(measure_start);
        }
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
    }
    Ok(interrupted)
}

/// Combines the clients' outcomes into the result.
fn merge(
    cfg: &DbenchConfig,
    start: Instant,
    measure_start: Option<Instant>,
    interrupted_at: Option<Instant>,
    outcomes: Vec<Outcome>,
    mut notes: Vec<String>,
) -> DbenchResult {
    // Stopped before an MPI rank's measured part started: it is empty, at the stop.
    let measure_start = measure_start.or(interrupted_at).unwrap_or(start);
    // The measured phase ends at its time, at the stop, or when the last client finished
    // its passes (max_loops), whichever came first.
    let mut measure_end = measure_start + cfg.time;
    if let Some(t) = interrupted_at {
        measure_end = measure_end.min(t);
    }
    if let Some(t) = outcomes.iter().map(|o| o.finished_at).max() {
        measure_end = measure_end.min(t);
    }
    let measured_seconds = measure_end
        .saturating_duration_since(measure_start)
        .as_secs_f64();

    let mut per_kind: Vec<Option<(LatencyHistogram, u64, u64)>> =
        (0..OpKind::ALL.len()).map(|_| None).collect();
    let (mut bytes_read, mut bytes_written, mut loops, mut short_reads) = (0, 0, 0, 0);
    let mut buckets: Vec<u64> = Vec::new();
    let mut samples = Vec::new();
    let mut verify: Option<Tally> = None;
    let mut failure: Option<(Duration, IoFailure)> = None;
    for o in outcomes {
        if let Some((at, f)) = o.failure {
            if failure.as_ref().is_none_or(|(t, _)| at < *t) {
                failure = Some((at, f));
            }
        }
        if let Some(v) = o.verify {
            match &mut verify {
                Some(t) => t.merge(v),
                None => verify = Some(v),
            }
        }
        bytes_read += o.bytes_read;
        bytes_written += o.bytes_written;
        loops += o.loops;
        short_reads += o.short_reads;
        if buckets.len() < o.buckets.len() {
            buckets.resize(o.buckets.len(), 0);
        }
        for (b, v) in buckets.iter_mut().zip(&o.buckets) {
            *b += v;
        }
        samples.extend(o.samples);
        if let Some(e) = o.cleanup_error {
            notes.push(format!("cleanup: {e}"));
        }
        for (slot, acc) in per_kind.iter_mut().zip(o.ops) {
            if let Some(acc) = acc {
                let (h, max, mis) = slot.get_or_insert_with(|| (LatencyHistogram::new(), 0, 0));
                h.merge(&acc.hist);
                *max = (*max).max(acc.max_ns);
                *mis += acc.mismatches;
            }
        }
    }
    let ms = |ns: f64| ns / 1e6;
    let ops: Vec<OpStats> = OpKind::ALL
        .iter()
        .filter_map(|&k| {
            let (h, max, mis) = per_kind[k.index()].take()?;
            let (avg_ms, p99_ms) = latency_ms(&h);
            Some(OpStats {
                op: k,
                count: h.count(),
                avg_ms,
                max_ms: ms(max as f64),
                p99_ms,
                status_mismatches: mis,
                histogram: h,
            })
        })
        .collect();
    let status_mismatches = ops.iter().map(|o| o.status_mismatches).sum();
    samples.sort_by_key(|(at, s)| (*at, s.client));
    let mismatches: Vec<MismatchSample> = samples
        .into_iter()
        .take(MAX_SAMPLES)
        .map(|(_, s)| s)
        .collect();
    if short_reads > 0 {
        notes.push(format!(
            "{short_reads} ReadX calls returned fewer bytes than the loadfile recorded \
             (files shorter than in the recorded session)"
        ));
    }

    let whole = measured_seconds.floor() as usize;
    let mut per_second_mb_s = Vec::new();
    for i in 0..buckets.len().max(whole) {
        let len = (measured_seconds - i as f64).clamp(0.0, 1.0);
        if len < 0.05 {
            break;
        }
        per_second_mb_s.push(buckets.get(i).copied().unwrap_or(0) as f64 / MB / len);
    }
    let total = bytes_read + bytes_written;
    DbenchResult {
        mb_s: if measured_seconds > 0.0 {
            total as f64 / MB / measured_seconds
        } else {
            0.0
        },
        measured_seconds,
        warmup_seconds: cfg.warmup.as_secs_f64(),
        clients: cfg.clients,
        bytes_read,
        bytes_written,
        loops_completed: loops,
        per_second_mb_s,
        ops,
        status_mismatches,
        mismatches,
        short_reads,
        interrupted: interrupted_at.is_some(),
        measure_started: (measure_start >= start).then_some(measure_start),
        notes,
        failure: failure.map(|(_, f)| f),
        verify,
    }
}

/// `clients/` must be a real directory if it exists, and each client directory this run will
/// use may hold nothing but directories. Returns whether `clients/` existed.
pub(crate) fn check_clients_dir(clients_dir: &Path, clients: u32) -> Result<bool, DbenchError> {
    match fs::symlink_metadata(clients_dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(DbenchError::Dir {
            path: clients_dir.to_path_buf(),
            source,
        }),
        Ok(m) if !m.is_dir() => Err(DbenchError::Occupied {
            path: clients_dir.to_path_buf(),
            reason: client::Occupation::ClientsNotDir,
        }),
        Ok(_) => {
            for id in 0..clients {
                let p = clients_dir.join(format!("client{id}"));
                client::only_directories(&p)
                    .map_err(|reason| DbenchError::Occupied { path: p, reason })?;
            }
            Ok(true)
        }
    }
}
