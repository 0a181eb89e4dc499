//! Multi-host runs on MPI (the `mpi` feature): one `iolab run` as many ranks (`mpirun -np N
//! iolab run ...`), rank 0's plan on every rank, a barrier before every pass, each pass's
//! aggregate, and how a failure on one rank ends the run on all of them. Plugs into the run
//! through the [`Coordinator`] trait, which ordinary runs leave unset.

mod aggregate;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::coord::{Coordinator, MpiMode};
use crate::status::RunError;
use iolab_measure::{PassRecord, RunRecord};
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::request::StaticScope;
use mpi::topology::Communicator;
use serde::{Deserialize, Serialize};

pub use aggregate::{Arrived, Ranks};

/// Messages from a rank to rank 0.
const TAG_UP: i32 = 1;
/// Rank 0's answer to every rank.
const TAG_DOWN: i32 = 2;
/// Parting after a signal: a rank's "my files are gone", rank 0's goodbye.
const TAG_PART: i32 = 3;
/// `--stonewall`: a rank to rank 0, "I finished pass K by myself" (K as 8 bytes).
const TAG_WALL: i32 = 4;
/// `--stonewall`: rank 0 to every rank, "stop pass K".
const TAG_STOP: i32 = 5;
/// How long rank 0 waits for the other ranks' parting word after a signal (mpirun kills
/// what is left a second after its SIGTERM by default anyway).
const PART_WAIT: Duration = Duration::from_millis(1500);
/// How long a parting word is offered.
const PART_SEND: Duration = Duration::from_millis(200);

/// Where a rank runs, as rank 0 learns it when the ranks start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Member {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
    /// The kernel it runs on (boot id and pid namespace): ranks with the same one can see
    /// each other's processes.
    pub kernel: String,
    /// CPUs it may run on, and CPUs online: fewer when the launcher bound it.
    pub cpus: [usize; 2],
    /// The iolab version it runs: every rank must run the same.
    pub version: String,
}

/// What a rank tells rank 0 at each step.
#[derive(Debug, Serialize, Deserialize)]
enum Up {
    Hello(Member),
    Plan(serde_json::Value),
    Ready,
    Pass {
        test: String,
        warm: bool,
        pass: Box<PassRecord>,
        /// The counted part of the pass, in seconds after the barrier released the rank.
        start_s: f64,
        end_s: f64,
        /// Seconds this rank spent in exchanges since its last pass (the barrier included).
        coord_s: f64,
        /// `--stonewall`: another rank's end ended this pass.
        #[serde(default)]
        stonewalled: bool,
    },
    /// The rank's job ended well; with each test's `--verify` counts (test name and its
    /// `extra.verify`), which rank 0 adds to the stored run's.
    Done {
        #[serde(default)]
        verify: Vec<(String, serde_json::Value)>,
    },
    Failed(String),
    Stored,
    /// A workload's own tally for rank 0 to add up ([`Coordinator::gather`]).
    Gather(serde_json::Value),
}

impl Up {
    fn step(&self) -> &'static str {
        match self {
            Up::Hello(_) => "start",
            Up::Plan(_) => "plan",
            Up::Ready => "barrier before a pass",
            Up::Pass { .. } => "end of a pass",
            Up::Done { .. } => "end of the run",
            Up::Failed(_) => "failure",
            Up::Stored => "after storing",
            Up::Gather(_) => "gathering a workload's tally",
        }
    }
}

/// Rank 0's answer, the same to every rank.
#[derive(Debug, Serialize, Deserialize)]
enum Down {
    Members(Vec<Member>),
    Plan(serde_json::Value),
    Go,
    Pass(Box<PassRecord>),
    /// The run ends on every rank: which rank failed first and why.
    Abort {
        rank: u32,
        host: String,
        why: String,
    },
}

/// This process as one rank of an MPI run.
pub struct Rank {
    /// Dropping it finalises MPI; forgotten instead when a rank may be gone.
    universe: Option<mpi::environment::Universe>,
    rank: u32,
    size: u32,
    me: Member,
    members: Vec<Member>,
    /// Set once rank 0 answered Abort: no further messages.
    over: Option<RunError>,
    /// When the last barrier released this rank.
    released: Instant,
    /// Time spent in exchanges since the last pass was sent.
    waited: Duration,
    /// Rank 0: what every rank measured.
    ranks: Ranks,
    /// Rank 0: every rank's value of the last [`Coordinator::gather`].
    gathered: Vec<serde_json::Value>,
    /// Rank 0: ranks found gone when the stop flag went up.
    gone: Arc<Mutex<Option<Vec<u32>>>>,
    /// Rank 0's `--shared-file` and `--stonewall`.
    mode: MpiMode,
    /// Passes begun (barriers passed): the number `--stonewall`'s messages carry.
    pass_no: u64,
    /// `--stonewall`: this pass was ended by another rank's end; rank 0: the stop is sent.
    walled: bool,
    stop_sent: bool,
}

/// Why a rank could not join the run ([`Rank::init`]): the exchange's error kept as the
/// source.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("MPI was initialised already")]
    Again,
    /// Rank 0's answer to the hello, as it reads (`Debug`).
    #[error("unexpected answer from rank 0: {0}")]
    Unexpected(String),
    #[error("{0}")]
    Exchange(#[source] RunError),
}

impl Rank {
    /// Initialises MPI and learns where every rank runs.
    pub fn init() -> Result<Rank, InitError> {
        let universe = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .map(|(u, _)| u)
            .ok_or(InitError::Again)?;
        let world = universe.world();
        let me = Member {
            rank: world.rank() as u32,
            host: rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned(),
            pid: std::process::id(),
            kernel: kernel_id(),
            cpus: cpus(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        };
        let mut r = Rank {
            rank: world.rank() as u32,
            size: world.size() as u32,
            universe: Some(universe),
            me: me.clone(),
            members: Vec::new(),
            over: None,
            released: Instant::now(),
            waited: Duration::ZERO,
            ranks: Ranks::default(),
            gathered: Vec::new(),
            gone: Arc::new(Mutex::new(None)),
            mode: MpiMode::default(),
            pass_no: 0,
            walled: false,
            stop_sent: false,
        };
        let never = AtomicBool::new(false);
        match r.exchange(Up::Hello(me), &never) {
            Ok(Down::Members(m)) => r.members = m,
            Ok(other) => return Err(InitError::Unexpected(format!("{other:?}"))),
            Err(e) => return Err(InitError::Exchange(e)),
        }
        // The other ranks on this kernel are the run, not other processes competing for
        // the CPU (BUSY_CPU).
        let mine = &r.me.kernel;
        iolab_measure::count_as_ours(
            r.members
                .iter()
                .filter(|m| m.rank != r.rank && &m.kernel == mine && !mine.is_empty())
                .map(|m| m.pid)
                .collect(),
        );
        Ok(r)
    }

    pub fn rank(&self) -> u32 {
        self.rank
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The rank refused the command line (the others learn it at their next step): says
    /// so and waits for them, then exits.
    pub fn refuse(&mut self, why: String) {
        let never = AtomicBool::new(false);
        let _ = self.exchange(Up::Failed(why), &never);
        self.after_store(false);
    }

    /// Watches `stop` (rank 0): when it goes up, notes which ranks on this kernel are
    /// already gone (killed: mpirun then stops the others with SIGTERM), before the
    /// others, stopping too, exit.
    pub fn watch(&self, stop: Arc<AtomicBool>) {
        if self.rank != 0 {
            return;
        }
        let gone = Arc::clone(&self.gone);
        let peers = self.peers_here();
        let _ = std::thread::Builder::new()
            .name("iolab-mpi-watch".into())
            .spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    let mut seen = gone.lock().unwrap_or_else(|p| p.into_inner());
                    if seen.is_none() {
                        *seen = Some(dead(&peers));
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            });
    }

    /// The other ranks on this kernel, (rank, pid): those whose end rank 0 can see.
    fn peers_here(&self) -> Vec<(u32, u32)> {
        let mine = &self.me.kernel;
        self.members
            .iter()
            .filter(|m| m.rank != self.rank && &m.kernel == mine && !mine.is_empty())
            .map(|m| (m.rank, m.pid))
            .collect()
    }

    /// One step: every rank sends `up` to rank 0, which answers every rank the same. Gives
    /// up once `stop` is raised (a rank may be gone; mpirun then ends the job).
    fn exchange(&mut self, up: Up, stop: &AtomicBool) -> Result<Down, RunError> {
        if let Some(e) = &self.over {
            return Err(e.clone_error());
        }
        let began = Instant::now();
        let down = self.exchange_now(up, stop);
        self.waited += began.elapsed();
        down
    }

    fn exchange_now(&mut self, up: Up, stop: &AtomicBool) -> Result<Down, RunError> {
        let world = self
            .universe
            .as_ref()
            .expect("MPI is finalised only at the end")
            .world();
        let down = if self.rank == 0 {
            let mut ups = Vec::with_capacity(self.size as usize);
            ups.push(up);
            for r in 1..self.size {
                let bytes = receive(&world.process_at_rank(r as i32), TAG_UP, Until::Stop(stop))?;
                // What rank 0 cannot read ends the run on every rank like a failure.
                let up = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                    Up::Failed(format!(
                        "it sent what rank 0 cannot read (another iolab version?): {e}"
                    ))
                });
                ups.push(up);
            }
            let down = self.decide(ups);
            let bytes = serde_json::to_vec(&down).expect("an answer always serialises");
            for r in 1..self.size {
                send(
                    &world.process_at_rank(r as i32),
                    bytes.clone(),
                    TAG_DOWN,
                    Until::Stop(stop),
                )?;
            }
            down
        } else {
            let bytes = serde_json::to_vec(&up).expect("a message always serialises");
            send(&world.process_at_rank(0), bytes, TAG_UP, Until::Stop(stop))?;
            let bytes = receive(&world.process_at_rank(0), TAG_DOWN, Until::Stop(stop))?;
            serde_json::from_slice(&bytes)
                .map_err(|e| RunError::caused("rank 0 answered what this build cannot read", e))?
        };
        self.released = Instant::now();
        if let Down::Abort { rank, host, why } = &down {
            let e = RunError::Failed(format!("rank {rank} on {host} failed: {why}"));
            self.over = Some(e.clone_error());
            return Err(e);
        }
        Ok(down)
    }

    /// Rank 0: the answer to one step from what every rank sent.
    fn decide(&mut self, ups: Vec<Up>) -> Down {
        let host = |r: usize| {
            self.members
                .get(r)
                .map(|m| m.host.clone())
                .unwrap_or_else(|| "?".into())
        };
        if let Some((r, why)) = ups.iter().enumerate().find_map(|(r, u)| match u {
            Up::Failed(why) => Some((r, why.clone())),
            _ => None,
        }) {
            return Down::Abort {
                rank: r as u32,
                host: host(r),
                why,
            };
        }
        let step = ups[0].step();
        if let Some((r, u)) = ups.iter().enumerate().find(|(_, u)| u.step() != step) {
            return Down::Abort {
                rank: r as u32,
                host: host(r),
                why: format!(
                    "out of step: at the {} while rank 0 is at the {step}",
                    u.step()
                ),
            };
        }
        if let Up::Hello(first) = &ups[0] {
            if let Some(other) = ups.iter().find_map(|u| match u {
                Up::Hello(m) if m.version != first.version => Some(m),
                _ => None,
            }) {
                return Down::Abort {
                    rank: other.rank,
                    host: other.host.clone(),
                    why: format!(
                        "it runs iolab {} and rank 0 iolab {}: every rank must run the same",
                        other.version, first.version
                    ),
                };
            }
        }
        let mut ups = ups;
        match &ups[0] {
            Up::Hello(_) => Down::Members(
                ups.into_iter()
                    .filter_map(|u| match u {
                        Up::Hello(m) => Some(m),
                        _ => None,
                    })
                    .collect(),
            ),
            Up::Plan(p) => Down::Plan(p.clone()),
            Up::Pass { .. } => {
                let passes = ups
                    .drain(..)
                    .filter_map(|u| match u {
                        Up::Pass {
                            test,
                            warm,
                            pass,
                            start_s,
                            end_s,
                            coord_s,
                            stonewalled,
                        } => Some(Arrived {
                            test,
                            warm,
                            pass: *pass,
                            start_s,
                            end_s,
                            coord_s,
                            stonewalled,
                        }),
                        _ => None,
                    })
                    .collect();
                Down::Pass(Box::new(self.ranks.add(&self.members, passes)))
            }
            Up::Gather(_) => {
                self.gathered = ups
                    .into_iter()
                    .filter_map(|u| match u {
                        Up::Gather(v) => Some(v),
                        _ => None,
                    })
                    .collect();
                Down::Go
            }
            Up::Done { .. } => {
                self.ranks.verify = ups
                    .into_iter()
                    .enumerate()
                    .skip(1)
                    .filter_map(|(r, u)| match u {
                        Up::Done { verify } if !verify.is_empty() => Some((r as u32, verify)),
                        _ => None,
                    })
                    .collect();
                Down::Go
            }
            _ => Down::Go,
        }
    }

    /// Stopped by a signal (Ctrl-C on mpirun, or mpirun ending the job because a rank is
    /// gone): once one rank exits, mpirun kills the others at once, so rank 0 exits last.
    /// Each other rank, its files removed, says so and waits for rank 0's goodbye; rank 0
    /// waits for them (not for ranks found gone), then says goodbye. Every wait is
    /// bounded: a rank may be gone unnoticed.
    fn part_after_signal(&mut self) {
        let Some(u) = self.universe.as_ref() else {
            return;
        };
        let world = u.world();
        if self.rank == 0 {
            let gone = self.gone();
            let deadline = Instant::now() + PART_WAIT;
            for r in (1..self.size).filter(|r| !gone.contains(r)) {
                let _ = receive(
                    &world.process_at_rank(r as i32),
                    TAG_PART,
                    Until::Deadline(deadline),
                );
            }
            let sent = Instant::now() + PART_SEND;
            for r in 1..self.size {
                let to = world.process_at_rank(r as i32);
                let _ = send(&to, vec![0], TAG_PART, Until::Deadline(sent));
            }
        } else {
            let now = Instant::now();
            let to = world.process_at_rank(0);
            let _ = send(&to, vec![0], TAG_PART, Until::Deadline(now + PART_SEND));
            let _ = receive(&to, TAG_PART, Until::Deadline(now + PART_WAIT * 2));
        }
    }

    /// `--stonewall`, rank 0: tells every other rank to stop the current pass (once).
    fn send_stops(&mut self) {
        if self.stop_sent {
            return;
        }
        self.stop_sent = true;
        let Some(u) = self.universe.as_ref() else {
            return;
        };
        let world = u.world();
        for r in 1..self.size {
            let until = Until::Deadline(Instant::now() + PART_SEND);
            let to = world.process_at_rank(r as i32);
            let _ = send(&to, self.pass_no.to_le_bytes().to_vec(), TAG_STOP, until);
        }
    }

    /// `--stonewall`: the pass numbers waiting from `from` under `tag` (taken, never
    /// waited for).
    fn pending(&self, tag: i32) -> Vec<u64> {
        let Some(u) = self.universe.as_ref() else {
            return Vec::new();
        };
        let world = u.world();
        let mut got = Vec::new();
        loop {
            let probed = match self.rank {
                0 => world.any_process().immediate_matched_probe_with_tag(tag),
                _ => world
                    .process_at_rank(0)
                    .immediate_matched_probe_with_tag(tag),
            };
            let Some(probed) = probed else {
                return got;
            };
            let (bytes, _) = probed.matched_receive_vec::<u8>();
            let mut k = [0u8; 8];
            if bytes.len() == 8 {
                k.copy_from_slice(&bytes);
                got.push(u64::from_le_bytes(k));
            }
        }
    }

    /// Rank 0, stopped by a signal: the ranks found gone when the signal came. The watch
    /// looks within a millisecond of it, and the run can end sooner (a rank waiting at a
    /// barrier gives up at once): then they are looked for here, before any rank that
    /// stopped cleanly could have exited.
    fn gone(&self) -> Vec<u32> {
        if self.rank != 0 {
            return Vec::new();
        }
        let mut seen = self.gone.lock().unwrap_or_else(|p| p.into_inner());
        seen.get_or_insert_with(|| dead(&self.peers_here())).clone()
    }
}

impl Coordinator for Rank {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn host(&self) -> &str {
        &self.me.host
    }

    fn ranks(&self) -> u32 {
        self.size
    }

    fn set_mode(&mut self, mode: MpiMode, shared_file: Option<&str>) {
        self.mode = mode;
        self.ranks.mode = mode;
        self.ranks.shared_file = shared_file.map(str::to_string);
    }

    fn stonewalled(&mut self) -> bool {
        if !self.mode.stonewall || self.walled {
            return self.walled;
        }
        let now = self.pass_no;
        if self.rank == 0 {
            if self.pending(TAG_WALL).contains(&now) {
                self.walled = true;
                self.send_stops();
            }
        } else if self.pending(TAG_STOP).contains(&now) {
            self.walled = true;
        }
        self.walled
    }

    fn pass_ended(&mut self, first: bool) {
        if !self.mode.stonewall || !first {
            return;
        }
        if self.rank == 0 {
            self.send_stops();
        } else if let Some(u) = self.universe.as_ref() {
            let world = u.world();
            let to = world.process_at_rank(0);
            let until = Until::Deadline(Instant::now() + PART_SEND);
            let _ = send(&to, self.pass_no.to_le_bytes().to_vec(), TAG_WALL, until);
        }
    }

    fn agree(
        &mut self,
        plan: serde_json::Value,
        stop: &AtomicBool,
    ) -> Result<serde_json::Value, RunError> {
        let mine = if self.rank == 0 {
            plan
        } else {
            serde_json::Value::Null
        };
        match self.exchange(Up::Plan(mine), stop)? {
            Down::Plan(p) => Ok(p),
            other => Err(RunError::Failed(format!(
                "unexpected answer from rank 0: {other:?}"
            ))),
        }
    }

    fn gather(
        &mut self,
        what: serde_json::Value,
        stop: &AtomicBool,
    ) -> Result<Vec<serde_json::Value>, RunError> {
        self.exchange(Up::Gather(what), stop)?;
        Ok(std::mem::take(&mut self.gathered))
    }

    fn before_pass(&mut self, stop: &AtomicBool) -> Result<(), RunError> {
        self.exchange(Up::Ready, stop)?;
        self.pass_no += 1;
        self.walled = false;
        self.stop_sent = false;
        Ok(())
    }

    fn after_pass(
        &mut self,
        test: &str,
        warm: bool,
        pass: PassRecord,
        started: Instant,
        ramp: Duration,
        stop: &AtomicBool,
    ) -> Result<PassRecord, RunError> {
        let start_s = started
            .saturating_duration_since(self.released)
            .as_secs_f64()
            + ramp.as_secs_f64();
        let up = Up::Pass {
            test: test.to_string(),
            warm,
            start_s,
            end_s: start_s + pass.seconds,
            coord_s: std::mem::take(&mut self.waited).as_secs_f64(),
            pass: Box::new(pass),
            stonewalled: self.walled,
        };
        match self.exchange(up, stop)? {
            Down::Pass(p) => Ok(*p),
            other => Err(RunError::Failed(format!(
                "unexpected answer from rank 0: {other:?}"
            ))),
        }
    }

    fn end(
        &mut self,
        outcome: &Result<(), RunError>,
        run: Option<&mut RunRecord>,
        stopped: bool,
    ) -> Result<(), RunError> {
        let ended = if stopped {
            // A signal: mpirun may be ending the job because a rank is gone, and a step
            // with a rank that is gone never ends.
            let gone = self.gone();
            match gone.first() {
                Some(&r) => {
                    let m = &self.members[r as usize];
                    Err(RunError::Failed(format!(
                        "rank {r} on {} (pid {}) ended during the run, and mpirun stopped \
                         the other ranks",
                        m.host, m.pid
                    )))
                }
                None => Ok(()),
            }
        } else {
            let up = match outcome {
                Ok(()) => Up::Done {
                    verify: run.as_deref().map(verify_counts).unwrap_or_default(),
                },
                Err(e) => Up::Failed(e.to_string()),
            };
            let never = AtomicBool::new(false);
            self.exchange(up, &never).map(|_| ())
        };
        if let (0, Some(run)) = (self.rank, run) {
            self.ranks.record(&self.members, run, stopped);
        }
        ended
    }

    fn after_store(&mut self, stopped: bool) {
        if stopped {
            self.part_after_signal();
            // Some rank may be gone: finalising would wait for it.
            std::mem::forget(self.universe.take());
            return;
        }
        let never = AtomicBool::new(false);
        self.over = None;
        let _ = self.exchange(Up::Stored, &never);
        if self.mode.stonewall {
            // `--stonewall`'s messages no pass took (a stop for a rank that had ended by
            // itself): taken, so MPI ends with none left over.
            let _ = (self.pending(TAG_WALL), self.pending(TAG_STOP));
        }
    }
}

/// When a polling loop gives up.
#[derive(Clone, Copy)]
enum Until<'a> {
    /// When the stop flag goes up.
    Stop(&'a AtomicBool),
    /// At a deadline.
    Deadline(Instant),
}

impl Until<'_> {
    fn reached(self) -> bool {
        match self {
            Until::Stop(stop) => stop.load(Ordering::Relaxed),
            Until::Deadline(d) => Instant::now() >= d,
        }
    }
}

/// Sends `bytes` to `to`, polling until it is sent or `until` (then the buffer stays with
/// MPI, which may still read it: leaked).
fn send(
    to: &mpi::topology::Process<'_>,
    bytes: Vec<u8>,
    tag: i32,
    until: Until<'_>,
) -> Result<(), RunError> {
    let buf: &'static mut [u8] = Box::leak(bytes.into_boxed_slice());
    let ptr: *mut [u8] = buf;
    // SAFETY: `ptr` comes from the leaked box; MPI only reads it until the request ends.
    let mut req = to.immediate_send_with_tag(StaticScope, unsafe { &*ptr }, tag);
    let mut pause = Pause::new();
    loop {
        match req.test() {
            Ok(_) => {
                // SAFETY: the send is complete, so MPI no longer reads the buffer, and
                // nothing else refers to it.
                drop(unsafe { Box::from_raw(ptr) });
                return Ok(());
            }
            Err(r) => req = r,
        }
        if until.reached() {
            std::mem::forget(req);
            return Err(RunError::Interrupted);
        }
        pause.wait();
    }
}

/// How a polling loop waits: spins for the first millisecond (a barrier's skew), then
/// sleeps a little between polls.
struct Pause(Instant);

impl Pause {
    fn new() -> Pause {
        Pause(Instant::now())
    }

    fn wait(&mut self) {
        if self.0.elapsed() > Duration::from_millis(1) {
            std::thread::sleep(Duration::from_micros(100));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Polls for the message `tag` from `from` until it comes or `until`.
fn receive(
    from: &mpi::topology::Process<'_>,
    tag: i32,
    until: Until<'_>,
) -> Result<Vec<u8>, RunError> {
    let mut pause = Pause::new();
    loop {
        if let Some(probed) = from.immediate_matched_probe_with_tag(tag) {
            let (bytes, _) = probed.matched_receive_vec::<u8>();
            return Ok(bytes);
        }
        if until.reached() {
            return Err(RunError::Interrupted);
        }
        pause.wait();
    }
}

/// The boot id and pid namespace of this process: equal on ranks that see each other's
/// processes ("" when unreadable).
fn kernel_id() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    if boot.is_empty() || ns.is_empty() {
        return String::new();
    }
    format!("{} {ns}", boot.trim())
}

/// [CPUs this process may run on, CPUs online] (0 when unknown).
fn cpus() -> [usize; 2] {
    // SAFETY: a zeroed cpu_set_t is a valid empty set, filled in by the kernel.
    let allowed = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        match libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) {
            0 => libc::CPU_COUNT(&set) as usize,
            _ => 0,
        }
    };
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(0) as usize;
    [allowed, online]
}

/// The ranks of `peers` (rank, pid) whose process has ended.
fn dead(peers: &[(u32, u32)]) -> Vec<u32> {
    peers
        .iter()
        .filter(|(_, pid)| !alive(*pid))
        .map(|(r, _)| *r)
        .collect()
}

/// Whether process `pid` still runs (a zombie counts as gone).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// RunError is not Clone: the same error again, for every later step.
trait CloneError {
    fn clone_error(&self) -> RunError;
}

impl CloneError for RunError {
    fn clone_error(&self) -> RunError {
        match self {
            RunError::Interrupted => RunError::Interrupted,
            other => RunError::Failed(other.to_string()),
        }
    }
}

/// Each test's `--verify` counts in `run`: (test name, its `extra.verify`).
fn verify_counts(run: &RunRecord) -> Vec<(String, serde_json::Value)> {
    run.tests
        .iter()
        .filter_map(|t| {
            let v = serde_json::to_value(t.runner_extra().verify?).ok()?;
            Some((t.name.clone(), v))
        })
        .collect()
}
