//! The job loop: keeps `iodepth` I/Os in flight on one engine, picks offsets and directions,
//! times every I/O, flushes when asked, and stops at the deadline, the byte limit or a stop
//! request. Generic over the engine and the clock so the hot path is monomorphised.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use iolab_measure::{DirSeries, IoErrorRecord, LatencyHistogram};
use iolab_spec::{DataPattern, IoDir, JobSpec, SyncMode};

use crate::buffers::{stamp, BufferPool};
use crate::clock::Clock;
use crate::engines::{Completion, Engine};
use iolab_integrity::written::Written;

/// Resolution of the throughput time series.
pub const SERIES_INTERVAL: Duration = Duration::from_millis(100);

/// What one job thread is asked to do in one pass.
pub struct JobParams<'a> {
    pub job: &'a JobSpec,
    /// Index of this job among `job.numjobs`.
    pub index: u32,
    /// In-flight I/Os for this job (the job's iodepth, 1 for psync).
    pub iodepth: u32,
    pub region_start: u64,
    pub region_len: u64,
    pub duration: Duration,
    /// Run this long before measuring (fio's ramp_time): I/O completed in the ramp is not
    /// counted, so a device's or throttle's initial burst does not inflate the pass.
    pub ramp: Duration,
    /// Stop queuing once this job has issued this many bytes.
    pub byte_limit: Option<u64>,
    pub data: DataPattern,
    pub seed: u64,
    pub stop: &'a AtomicBool,
    /// What the job completed so far (counted I/O only), for the progress display and a
    /// pass's observer.
    pub progress: &'a Progress,
    /// `--verify`: the region's shared write state (writes are stamped and claimed).
    pub written: Option<&'a Written>,
}

/// A job thread's counted completions so far, updated as it reaps them.
#[derive(Debug, Default)]
pub struct Progress {
    pub bytes: AtomicU64,
    pub ios: AtomicU64,
    /// Their latencies summed, in ns.
    pub lat_ns: AtomicU64,
}

/// What one job thread measured in one pass.
pub struct JobResult {
    pub start: Instant,
    pub end: Instant,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_hist: LatencyHistogram,
    pub write_hist: LatencyHistogram,
    pub sync_hist: LatencyHistogram,
    /// Bytes completed per [`SERIES_INTERVAL`] since `start`.
    pub series: Vec<u64>,
    /// Reads and writes per [`SERIES_INTERVAL`]: bytes, I/Os and latency.
    pub dir_series: [DirSeries; 2],
    /// Counted I/Os per line of the job's access specification (empty without one).
    pub access_ios: Vec<u64>,
    pub errors: Vec<IoErrorRecord>,
    /// Bytes read and written that completed outside the counted window (ramp, drain).
    pub uncounted_bytes: [u64; 2],
    /// fio's latency-target search: the depth in flight it ended at.
    pub lat_depth: Option<u32>,
}

/// fio's latency-target search (its io_u.c `lat_target_*`): the depth in flight starts at
/// 1; after each window whose share of I/Os within the target meets the percentile it is
/// doubled (or, once a depth has failed, bisected toward that one), after one that fails
/// it is bisected down toward the last that met it; a depth that stays the same gets one
/// more window, and then the search is done. A 100% percentile judges each I/O at once.
struct LatSearch {
    t: iolab_spec::LatTarget,
    max: u32,
    qd: u32,
    low: u32,
    high: u32,
    since: Instant,
    ios: u64,
    failed: u64,
    end_run: bool,
}

/// What a completion or a window's end did to the search.
#[derive(PartialEq)]
enum LatStep {
    Go,
    /// Settled and judged once more: the job ends (fio's `done`).
    Done,
    /// A 100% target missed at depth 1: fio ends the job with an error.
    Fatal,
}

impl LatSearch {
    fn new(t: iolab_spec::LatTarget, max: u32, now: Instant) -> Self {
        LatSearch {
            t,
            max,
            qd: 1,
            low: 1,
            high: max,
            since: now,
            ios: 0,
            failed: 0,
            end_run: false,
        }
    }

    fn new_cycle(&mut self, now: Instant) {
        self.since = now;
        self.ios = 0;
        self.failed = 0;
    }

    fn failed(&mut self, now: Instant) -> LatStep {
        if self.qd == 1 {
            return LatStep::Fatal;
        }
        self.high = self.qd;
        if self.qd == self.low {
            self.low -= 1;
        }
        self.qd = (self.qd + self.low) / 2;
        self.new_cycle(now);
        LatStep::Go
    }

    fn success(&mut self, now: Instant) -> LatStep {
        let was = self.qd;
        self.low = self.qd;
        self.qd = if self.high != self.max {
            (self.qd + self.high) / 2
        } else {
            self.qd.saturating_mul(2)
        }
        .min(self.max);
        let mut step = LatStep::Go;
        if self.qd == was {
            if self.end_run && !self.t.run {
                step = LatStep::Done;
            }
            self.end_run = true;
        }
        self.new_cycle(now);
        step
    }

    /// One completion of `lat_ns`.
    fn complete(&mut self, lat_ns: u64, now: Instant) -> LatStep {
        self.ios += 1;
        if lat_ns > self.t.target_us.saturating_mul(1000) {
            if self.t.pct >= 100.0 {
                return self.failed(now);
            }
            self.failed += 1;
        }
        LatStep::Go
    }

    /// The end of a window, if it is over.
    fn check(&mut self, now: Instant) -> LatStep {
        if now.saturating_duration_since(self.since) < Duration::from_micros(self.t.window_us)
            || self.ios == 0
        {
            return LatStep::Go;
        }
        let ok = (self.ios - self.failed) as f64 / self.ios as f64 * 100.0;
        if ok >= self.t.pct {
            self.success(now)
        } else {
            // At depth 1 fio goes on there (the window's failure is not fatal).
            if self.failed(now) == LatStep::Fatal {
                self.new_cycle(now);
            }
            LatStep::Go
        }
    }
}

fn errno_record(errno: i32, dir: IoDir, offset: u64, len: u64) -> IoErrorRecord {
    IoErrorRecord {
        errno,
        message: std::io::Error::from_raw_os_error(errno).to_string(),
        dir,
        offset,
        len,
    }
}

fn do_sync(fd: i32, mode: SyncMode) -> Result<(), i32> {
    // SAFETY: plain syscalls on a descriptor the job owns.
    let rc = unsafe {
        match mode {
            SyncMode::Fsync => libc::fsync(fd),
            SyncMode::Fdatasync => libc::fdatasync(fd),
        }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

/// A unit of `0..units` (blocks or aligned slots) drawn by `zones`: zone i holds the
/// units from the sum of the sizes before it to the sum including it (in percent of
/// `units`, at least one unit) and gets its `access` percent of the draws.
fn zoned(rng: &mut fastrand::Rng, zones: &[iolab_spec::Zone], units: u64) -> u64 {
    let units = units.max(1);
    let pick = rng.u32(0..100);
    let (mut acc, mut before) = (0u32, 0u64);
    for (i, z) in zones.iter().enumerate() {
        let after = before + z.size as u64;
        acc += z.access as u32;
        if pick < acc || i + 1 == zones.len() {
            let start = (units * before / 100).min(units - 1);
            let end = if i + 1 == zones.len() {
                units
            } else {
                (units * after / 100).clamp(start + 1, units)
            };
            return start + rng.u64(0..end - start);
        }
        before = after;
    }
    rng.u64(0..units)
}

/// When a paced job may issue its next I/O, having issued `bytes` in `ios` I/Os since
/// `start` (the later of its rate and its IOPS limit); None when neither limits it.
fn pace_at(pace: &iolab_spec::Pace, start: Instant, bytes: u64, ios: u64) -> Option<Instant> {
    rate_at((pace.rate_bytes, pace.rate_iops), start, bytes, ios)
}

/// [`pace_at`] for limits of (bytes/s, IOPS).
fn rate_at(limits: (u64, u64), start: Instant, bytes: u64, ios: u64) -> Option<Instant> {
    let mut at: Option<Instant> = None;
    if limits.0 > 0 {
        let t = start + Duration::from_secs_f64(bytes as f64 / limits.0 as f64);
        at = Some(t);
    }
    if limits.1 > 0 {
        let t = start + Duration::from_secs_f64(ios as f64 / limits.1 as f64);
        at = Some(at.map_or(t, |a| a.max(t)));
    }
    at
}

/// fio's `rate_ddir` for a mixed job limited per direction: the direction drawn goes when
/// it is behind its rate; else the other one when it is (and the mix has it); else the job
/// waits until the sooner of the two may go, and that one goes. `next` is when each
/// direction ([read, write]) may go next (None: unlimited). The direction to issue now, or
/// when to wait until and the direction then.
fn rate_dir(
    drawn: IoDir,
    next: [Option<Instant>; 2],
    other_in_mix: bool,
    now: Instant,
) -> Result<IoDir, (Instant, IoDir)> {
    let idx = |d: IoDir| usize::from(d == IoDir::Write);
    let other = if drawn == IoDir::Read {
        IoDir::Write
    } else {
        IoDir::Read
    };
    let late = |d: IoDir| next[idx(d)].is_none_or(|t| t <= now);
    if late(drawn) {
        return Ok(drawn);
    }
    if other_in_mix && late(other) {
        return Ok(other);
    }
    let mine = next[idx(drawn)].expect("not late, so limited");
    match next[idx(other)] {
        Some(t) if other_in_mix && t < mine => Err((t, other)),
        _ => Err((mine, drawn)),
    }
}

/// The ioprio of an I/O of `len` bytes under a direction's per-I/O rules (fio's
/// cmdprio_percentage and cmdprio_bssplit), for a draw `u` in 0..100: the rules that apply
/// to its size take their shares in order; 0 (the thread's priority) past them.
fn cmd_prio(rules: &[iolab_spec::CmdPrio], len: u64, u: u8) -> u16 {
    let mut acc = 0u32;
    for r in rules.iter().filter(|r| r.size.is_none_or(|s| s == len)) {
        acc += r.pct as u32;
        if (u as u32) < acc {
            return r.ioprio;
        }
    }
    0
}

/// The working set's key when jobs share it (fio's `dedupe_global`).
const SHARED_WORKING_SET: u64 = 0x10_1AB5_EED5;

/// What a job's writes of fio's compressible and duplicate contents remember: the seed of
/// the last unique buffer (`dedupe_mode=repeat`) and the key of its working set.
struct ContentState {
    prev: Option<u64>,
    own_key: u64,
}

impl ContentState {
    fn new(seed: u64) -> Self {
        ContentState {
            prev: None,
            own_key: seed ^ 0xDED0_0000,
        }
    }

    /// Fills a write buffer as fio's `fill_io_buffer` does: a buffer is either a repeat
    /// (`dedupe_pct`% of writes: the previous unique one's contents, or a working-set
    /// block's) or new; its contents come from one seed, each `chunk` bytes being
    /// `100 - compress_pct`% random bytes and then zeros.
    fn fill(&mut self, buf: &mut [u8], c: &iolab_spec::Content, rng: &mut fastrand::Rng) {
        let dup = rng.u8(0..100) < c.dedupe_pct;
        let seed = match (dup, c.working_set, self.prev) {
            (true, Some(n), _) => {
                let key = if c.global {
                    SHARED_WORKING_SET
                } else {
                    self.own_key
                };
                // A block of the working set: the same seed for the same index.
                fastrand::Rng::with_seed(key ^ rng.u64(0..n.max(1))).u64(..)
            }
            (true, None, Some(p)) => p,
            _ => {
                let s = rng.u64(..);
                self.prev = Some(s);
                s
            }
        };
        let mut r = fastrand::Rng::with_seed(seed);
        let chunk = (c.chunk as usize).max(1);
        for part in buf.chunks_mut(chunk) {
            let random = (chunk * (100 - c.compress_pct as usize) / 100).min(part.len());
            crate::buffers::fill_random(&mut part[..random], &mut r);
            part[random..].fill(0);
        }
    }
}

/// fio's `zonemode=strided` over a region of `nblocks` blocks: I/O stays in a zone of
/// `range` blocks (sequential from its start, wrapping within it, or random in it) until
/// `size` bytes have been issued there, then moves `range + skip` blocks on (back to the
/// first zone past the region's end); the bytes skipped count towards the job's bytes, as
/// fio counts them.
struct Strided {
    size: u64,
    range: u64,
    step: u64,
    skip_bytes: u64,
    nblocks: u64,
    zone: u64,
    pos: u64,
    bytes: u64,
    skipped: u64,
}

impl Strided {
    fn new(z: &iolab_spec::Strided, bs: u64, nblocks: u64) -> Strided {
        let range = (z.range / bs).max(1);
        Strided {
            size: z.size,
            range,
            step: range + z.skip / bs,
            skip_bytes: z.skip,
            nblocks,
            zone: 0,
            pos: 0,
            bytes: 0,
            skipped: 0,
        }
    }

    /// The block of the next I/O in the zone.
    fn block(&mut self, random: bool, rng: &mut fastrand::Rng) -> u64 {
        let len = self.range.min(self.nblocks - self.zone).max(1);
        if self.pos >= self.zone + len {
            self.pos = self.zone;
        }
        if random {
            self.zone + rng.u64(0..len)
        } else {
            self.pos += 1;
            self.pos - 1
        }
    }

    /// An I/O of `bs` bytes went; once the zone has had its bytes, the next zone (so that
    /// the job's byte limit sees the skip before its next I/O).
    fn issued(&mut self, bs: u64) {
        self.bytes += bs;
        if self.bytes >= self.size {
            self.bytes = 0;
            self.zone += self.step;
            if self.zone >= self.nblocks {
                self.zone = 0;
            }
            self.pos = self.zone;
            self.skipped += self.skip_bytes;
        }
    }
}

/// What a job's writes carry, chosen once per job before its loop (under `--verify` the
/// write state stamps them instead).
enum Fill<'a> {
    /// The buffers as they are (`--data zeros`).
    Keep,
    /// iolab's data: unique per write, incompressible.
    Stamp,
    /// fio's compressible and duplicate buffers.
    Content(&'a iolab_spec::Content, ContentState),
    /// fio's `verify_pattern`, with the I/O's offset where it says `%o`.
    Pattern(&'a iolab_spec::Pattern),
}

impl<'a> Fill<'a> {
    fn of(job: &'a JobSpec, data: DataPattern, seed: u64) -> Fill<'a> {
        match (&job.pattern, &job.content) {
            (Some(p), _) => Fill::Pattern(p),
            (None, Some(c)) => Fill::Content(c, ContentState::new(seed)),
            (None, None) if data == DataPattern::Random => Fill::Stamp,
            (None, None) => Fill::Keep,
        }
    }

    /// Fills the first `len` bytes of buffer `slot`, the data of a write at `offset`.
    #[inline]
    fn write(
        &mut self,
        bufs: &mut BufferPool,
        slot: u32,
        len: u64,
        offset: u64,
        rng: &mut fastrand::Rng,
    ) {
        if let Fill::Keep = self {
            return;
        }
        let buf = &mut bufs.slot_mut(slot as usize)[..len as usize];
        match self {
            Fill::Keep => {}
            Fill::Stamp => stamp(buf, rng),
            Fill::Content(c, state) => state.fill(buf, c, rng),
            Fill::Pattern(p) => p.fill(buf, offset),
        }
    }
}

/// A read's data that is not the job's pattern, as an error naming the byte.
fn pattern_error(pattern: &iolab_spec::Pattern, buf: &[u8], offset: u64) -> Option<IoErrorRecord> {
    let m = pattern.mismatch(buf, offset)?;
    let mut rec = errno_record(libc::EILSEQ, IoDir::Read, offset, buf.len() as u64);
    rec.message = format!(
        "verify_pattern {}: the byte at offset {} is 0x{:02x}, expected 0x{:02x}",
        pattern.text,
        offset + m.at as u64,
        m.found,
        m.expected
    );
    Some(rec)
}

/// fio's `rate_process=poisson`: the gap before the next I/O, exponentially distributed
/// with the rate's mean gap (the slower of the IOPS and the byte rate for an I/O of
/// `len` bytes); `u` uniform in [0, 1).
fn poisson_gap(pace: &iolab_spec::Pace, len: u64, u: f64) -> f64 {
    let mut mean = 0.0f64;
    if pace.rate_iops > 0 {
        mean = 1.0 / pace.rate_iops as f64;
    }
    if pace.rate_bytes > 0 {
        mean = mean.max(len as f64 / pace.rate_bytes as f64);
    }
    // -ln(1 - u) is exponential with mean 1 (1 - u is in (0, 1]).
    -(1.0 - u).ln() * mean
}

/// Sleeps until `until` on `clock` in short steps (a stop request ends it early); returns
/// the time it ended.
fn idle_until<C: Clock>(clock: &C, until: Instant, stop: &AtomicBool) -> Instant {
    loop {
        let now = clock.now();
        if now >= until || stop.load(Ordering::Relaxed) {
            return now;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(10)));
    }
}

/// Consecutive completions of one direction that took the same time (I/Os queued in one
/// batch and reaped in one batch), recorded in the histogram in one step.
struct LatRun {
    dir: IoDir,
    ns: u64,
    n: u64,
}

impl LatRun {
    #[inline]
    fn add(&mut self, dir: IoDir, ns: u64, res: &mut JobResult) {
        if self.n > 0 && (dir != self.dir || ns != self.ns) {
            self.flush(res);
        }
        self.dir = dir;
        self.ns = ns;
        self.n += 1;
    }

    #[inline]
    fn flush(&mut self, res: &mut JobResult) {
        if self.n > 0 {
            match self.dir {
                IoDir::Read => res.read_hist.record_n(self.ns, self.n),
                IoDir::Write => res.write_hist.record_n(self.ns, self.n),
            }
            self.n = 0;
        }
    }
}

/// Tries to claim a random (or the next sequential) free offset this many times before
/// leaving a slot idle until a completion.
const CLAIM_TRIES: u32 = 64;

/// Runs one job for one pass on an engine whose buffers are `bufs`, reading the time from
/// `clock`; with `p.written`, writes are self-describing blocks and never overlap another
/// write in flight.
pub fn run_job<E: Engine, C: Clock>(
    eng: &mut E,
    bufs: &mut BufferPool,
    p: &JobParams,
    clock: &C,
) -> JobResult {
    match p.written {
        None => run_job_with::<E, C, false>(eng, bufs, p, clock),
        Some(_) => run_job_with::<E, C, true>(eng, bufs, p, clock),
    }
}

/// The job loop; `VERIFY` is decided once per job so the plain loop carries no verify code.
fn run_job_with<E: Engine, C: Clock, const VERIFY: bool>(
    eng: &mut E,
    bufs: &mut BufferPool,
    p: &JobParams,
    clock: &C,
) -> JobResult {
    let job = p.job;
    let bs = job.bs;
    let qd = p.iodepth.max(1) as usize;
    assert!(bs as usize <= bufs.slot_len() && qd <= bufs.count());
    let nblocks = (p.region_len / bs).max(1);
    let mut rng = fastrand::Rng::with_seed(p.seed);
    // Clones in a shared region start their sequential runs spread over it; a clone in
    // its own part (fio's offset_increment) starts at the part's start.
    let mut seq_block = match job.clones {
        Some(_) => 0,
        None => nblocks * p.index as u64 / job.numjobs.max(1) as u64,
    };
    let random = job.rw.is_random();
    let zipf = job.zipf.map(|theta| crate::zipf::Zipf::new(nblocks, theta));
    let mixed = job.rw.is_mixed();
    let fixed_dir = if job.rw.writes() {
        IoDir::Write
    } else {
        IoDir::Read
    };
    let mut fill = Fill::of(job, p.data, p.seed);
    let mut strided = job.strided.map(|z| Strided::new(&z, bs, nblocks));
    let check_reads = job.pattern.as_ref().filter(|p| p.check_reads);

    let mut free: Vec<u32> = (0..qd as u32).rev().collect();
    let mut slot_dir = vec![IoDir::Read; qd];
    let mut slot_off = vec![0u64; qd];
    // Transfer size and access line of each slot (they vary only with an access spec).
    let mut slot_len = vec![bs; qd];
    let mut slot_line = vec![0usize; qd];
    let mut slot_gen = vec![0u64; qd];
    let access = &job.access;
    // Per access line: cumulative share, and its sequential cursor.
    let mut cum_share: Vec<u8> = Vec::with_capacity(access.len());
    let mut acc = 0u8;
    for l in access {
        acc = acc.saturating_add(l.share);
        cum_share.push(acc);
    }
    let mut line_cursor: Vec<u64> = access.iter().map(|_| p.region_start).collect();
    let start = clock.now();
    let mut slot_t = vec![start; qd];
    let mut done: Vec<Completion> = Vec::with_capacity(qd);
    let measure_from = start + p.ramp;
    let cut_at_deadline = !job.end_fsync;
    let mut deadline_hit = false;
    let deadline = measure_from + p.duration;

    let mut res = JobResult {
        start: measure_from,
        end: measure_from,
        read_bytes: 0,
        write_bytes: 0,
        read_hist: LatencyHistogram::new(),
        write_hist: LatencyHistogram::new(),
        sync_hist: LatencyHistogram::new(),
        // Room for ten minutes of samples up front; a longer pass grows it as it goes.
        series: Vec::with_capacity((p.duration.as_millis() / 100 + 2).min(6000) as usize),
        dir_series: [DirSeries::default(), DirSeries::default()],
        access_ios: vec![0; job.access.len()],
        errors: Vec::new(),
        uncounted_bytes: [0, 0],
        lat_depth: None,
    };
    let mut search = job.lat_target.map(|t| LatSearch::new(t, qd as u32, start));
    let mut inflight = 0usize;
    let mut issued: u64 = 0;
    let mut stopping = false;
    let mut writes_since_sync = 0u32;
    let mut need_sync = false;
    let interval_ns = SERIES_INTERVAL.as_nanos() as u64;
    let pace = job.pace;
    let paced = !pace.is_none();
    let prio_per_io = job.prio.per_io.iter().any(|r| !r.is_empty());
    // A mixed job paced per direction: bytes and I/Os issued in each, and the direction
    // that goes once the wait for it is over.
    let mut dir_issued = [0u64; 2];
    let mut dir_ios = [0u64; 2];
    let mut forced_dir: Option<IoDir> = None;
    // Pacing: I/Os issued so far (rate_iops, thinktime) and when the next one may go.
    let mut issued_ios: u64 = 0;
    let mut think_count = 0u32;
    let mut thinking = false;
    let mut hold_until: Option<Instant> = None;
    // rate_process=poisson: when the next I/O arrives, in seconds from the start.
    let mut arrival_s = 0.0f64;

    loop {
        let mut busy = false;
        if !stopping && !need_sync && !thinking && !free.is_empty() {
            let t_queue = clock.now();
            while let Some(slot) = free.pop() {
                if search.as_ref().is_some_and(|l| inflight >= l.qd as usize) {
                    free.push(slot);
                    break;
                }
                if paced {
                    let at = if pace.poisson {
                        Some(start + Duration::from_secs_f64(arrival_s))
                    } else {
                        pace_at(&pace, start, issued, issued_ios)
                    };
                    if let Some(at) = at {
                        if t_queue < at {
                            free.push(slot);
                            hold_until = Some(at);
                            break;
                        }
                    }
                }
                if let Some(limit) = p.byte_limit {
                    if issued + strided.as_ref().map_or(0, |z| z.skipped) >= limit {
                        free.push(slot);
                        stopping = true;
                        break;
                    }
                }
                let (dir, len, line) = if access.is_empty() {
                    let dir = if mixed {
                        if rng.u8(0..100) < job.rwmixread {
                            IoDir::Read
                        } else {
                            IoDir::Write
                        }
                    } else {
                        fixed_dir
                    };
                    (dir, bs, 0)
                } else {
                    let pick = rng.u8(0..100);
                    let line = cum_share.iter().position(|&c| pick < c).unwrap_or(0);
                    let l = &access[line];
                    let dir = if rng.u8(0..100) < l.read_pct {
                        IoDir::Read
                    } else {
                        IoDir::Write
                    };
                    (dir, l.size, line)
                };
                let mut dir = dir;
                if let Some(rates) = pace.dir_rates {
                    let next = [0, 1].map(|i| rate_at(rates[i], start, dir_issued[i], dir_ios[i]));
                    let drawn = forced_dir.take().unwrap_or(dir);
                    let other_in_mix = match drawn {
                        IoDir::Read => job.rwmixread < 100,
                        IoDir::Write => job.rwmixread > 0,
                    };
                    match rate_dir(drawn, next, other_in_mix, t_queue) {
                        Ok(d) => dir = d,
                        Err((at, d)) => {
                            free.push(slot);
                            hold_until = Some(at);
                            forced_dir = Some(d);
                            break;
                        }
                    }
                }
                let mut tries = 0u32;
                let (off, gen) = loop {
                    let off = if access.is_empty() {
                        let block = if let Some(z) = strided.as_mut() {
                            z.block(random, &mut rng)
                        } else if random {
                            match &zipf {
                                Some(z) => z.block(&mut rng),
                                None if !job.zones.is_empty() => {
                                    zoned(&mut rng, &job.zones, nblocks)
                                }
                                None => rng.u64(0..nblocks),
                            }
                        } else {
                            let b = seq_block;
                            seq_block = if job.seq_skip == 0 {
                                if seq_block + 1 >= nblocks {
                                    0
                                } else {
                                    seq_block + 1
                                }
                            } else {
                                (seq_block as i128 + 1 + job.seq_skip as i128)
                                    .rem_euclid(nblocks as i128)
                                    as u64
                            };
                            b
                        };
                        p.region_start + block * bs
                    } else {
                        let l = &access[line];
                        let end = p.region_start + p.region_len;
                        let slots = ((p.region_len.saturating_sub(l.size)) / l.align) + 1;
                        if rng.u8(0..100) < l.random_pct {
                            let slot = if job.zones.is_empty() {
                                rng.u64(0..slots)
                            } else {
                                zoned(&mut rng, &job.zones, slots)
                            };
                            p.region_start + slot * l.align
                        } else {
                            let mut o = line_cursor[line];
                            if o + l.size > end {
                                o = p.region_start;
                            }
                            line_cursor[line] = o + l.size;
                            o
                        }
                    };
                    if !VERIFY || dir == IoDir::Read {
                        break (off, 0);
                    }
                    let w = p.written.expect("verify mode has the write state");
                    if let Some(g) = w.claim(off, len) {
                        w.stamp(&mut bufs.slot_mut(slot as usize)[..len as usize], off, g);
                        break (off, g);
                    }
                    tries += 1;
                    if tries == CLAIM_TRIES {
                        break (off, 0);
                    }
                };
                if VERIFY && dir == IoDir::Write && gen == 0 {
                    // Every offset tried has a write in flight: wait for a completion.
                    free.push(slot);
                    busy = true;
                    break;
                }
                if !VERIFY && dir == IoDir::Write {
                    fill.write(bufs, slot, len, off, &mut rng);
                }
                if prio_per_io {
                    let rules = &job.prio.per_io[usize::from(dir == IoDir::Write)];
                    eng.set_prio(cmd_prio(rules, len, rng.u8(0..100)));
                }
                eng.queue(bufs, slot, dir, off, len as u32);
                let s = slot as usize;
                slot_dir[s] = dir;
                slot_off[s] = off;
                slot_len[s] = len;
                slot_line[s] = line;
                if VERIFY {
                    slot_gen[s] = gen;
                }
                slot_t[s] = t_queue;
                inflight += 1;
                issued += len;
                if let Some(z) = strided.as_mut() {
                    z.issued(len);
                }
                issued_ios += 1;
                dir_issued[usize::from(dir == IoDir::Write)] += len;
                dir_ios[usize::from(dir == IoDir::Write)] += 1;
                if pace.poisson {
                    arrival_s += poisson_gap(&pace, len, rng.f64());
                }
                if pace.think_us > 0 {
                    think_count += 1;
                    if think_count >= pace.think_blocks.max(1) {
                        think_count = 0;
                        thinking = true;
                        break;
                    }
                }
            }
        }
        if inflight == 0 && (thinking || hold_until.is_some()) && !stopping && !need_sync {
            // Paced: idle until the next I/O may go (or the think time is over).
            let until = if thinking {
                thinking = false;
                clock.now() + Duration::from_micros(pace.think_us)
            } else {
                hold_until.take().expect("held")
            };
            if idle_until(clock, until.min(deadline), p.stop) >= deadline {
                stopping = true;
                deadline_hit = true;
            }
            if p.stop.load(Ordering::Relaxed) {
                stopping = true;
            }
            continue;
        }
        hold_until = None;
        if inflight == 0 {
            if need_sync {
                need_sync = false;
                let t0 = clock.now();
                if let Err(errno) = do_sync(eng.fd(), job.sync_mode) {
                    res.errors.push(errno_record(errno, IoDir::Write, 0, 0));
                    break;
                }
                let t1 = clock.now();
                res.sync_hist.record((t1 - t0).as_nanos() as u64);
                if t1 >= deadline || p.stop.load(Ordering::Relaxed) {
                    stopping = true;
                }
                continue;
            }
            if VERIFY && busy {
                // Other jobs hold every block this job tried; let them complete.
                if clock.now() >= deadline || p.stop.load(Ordering::Relaxed) {
                    stopping = true;
                }
                std::thread::yield_now();
                continue;
            }
            break;
        }
        if let Err(e) = eng.submit_and_reap(1, &mut done) {
            let errno = e.raw_os_error().unwrap_or(libc::EIO);
            res.errors.push(errno_record(errno, IoDir::Read, 0, 0));
            break;
        }
        let t_done = clock.now();
        // Outside the counted window: the ramp, and (for time-based passes without a final
        // flush) I/Os drained after the deadline, which a throttle or a queue can hold back
        // for much longer than they took to issue.
        let ramping = t_done < measure_from || (cut_at_deadline && t_done > deadline);
        let mut batch_bytes = 0u64;
        let (mut batch_ios, mut batch_lat) = (0u64, 0u64);
        let mut lats = LatRun {
            dir: IoDir::Read,
            ns: 0,
            n: 0,
        };
        let bucket = if ramping {
            0
        } else {
            (t_done.saturating_duration_since(measure_from).as_nanos() as u64 / interval_ns)
                as usize
        };
        for c in done.drain(..) {
            let s = c.slot as usize;
            let lat = (t_done - slot_t[s]).as_nanos() as u64;
            let dir = slot_dir[s];
            inflight -= 1;
            free.push(c.slot);
            let len = slot_len[s];
            if VERIFY && dir == IoDir::Write {
                let w = p.written.expect("verify mode has the write state");
                w.complete(slot_off[s], len, slot_gen[s], c.result as i64 == len as i64);
            }
            if c.result as i64 != len as i64 {
                let mut rec = if c.result < 0 {
                    errno_record(-c.result, dir, slot_off[s], len)
                } else {
                    let mut r = errno_record(0, dir, slot_off[s], len);
                    r.message = format!("short transfer: {} of {} bytes", c.result, len);
                    r
                };
                if rec.errno == 0 && c.result == 0 && dir == IoDir::Read {
                    rec.message = format!("read returned end of file at offset {}", slot_off[s]);
                }
                res.errors.push(rec);
                stopping = true;
                continue;
            }
            if let Some(l) = search.as_mut() {
                if l.complete(lat, t_done) == LatStep::Fatal {
                    let mut rec = errno_record(libc::ETIMEDOUT, dir, slot_off[s], len);
                    rec.message = format!(
                        "latency of {} us exceeds latency_target={} us at queue depth 1 (fio \
                         ends the job so)",
                        lat / 1000,
                        l.t.target_us
                    );
                    res.errors.push(rec);
                    stopping = true;
                    continue;
                }
            }
            if let (IoDir::Read, Some(pat)) = (dir, check_reads) {
                if let Some(rec) = pattern_error(pat, &bufs.slot(s)[..len as usize], slot_off[s]) {
                    res.errors.push(rec);
                    stopping = true;
                    continue;
                }
            }
            if ramping {
                res.uncounted_bytes[(dir == IoDir::Write) as usize] += len;
                continue;
            }
            batch_bytes += len;
            batch_ios += 1;
            batch_lat += lat;
            res.dir_series[(dir == IoDir::Write) as usize].add(bucket, len, lat);
            if !access.is_empty() {
                res.access_ios[slot_line[s]] += 1;
            }
            match dir {
                IoDir::Read => {
                    res.read_bytes += len;
                    lats.add(dir, lat, &mut res);
                }
                IoDir::Write => {
                    res.write_bytes += len;
                    lats.add(dir, lat, &mut res);
                    if job.fsync_every > 0 {
                        writes_since_sync += 1;
                        if writes_since_sync >= job.fsync_every {
                            writes_since_sync = 0;
                            need_sync = true;
                        }
                    }
                }
            }
        }
        lats.flush(&mut res);
        if let Some(l) = search.as_mut() {
            if l.check(t_done) == LatStep::Done {
                stopping = true;
            }
        }
        if batch_bytes > 0 {
            if res.series.len() <= bucket {
                res.series.resize(bucket + 1, 0);
            }
            res.series[bucket] += batch_bytes;
            p.progress.bytes.fetch_add(batch_bytes, Ordering::Relaxed);
            p.progress.ios.fetch_add(batch_ios, Ordering::Relaxed);
            p.progress.lat_ns.fetch_add(batch_lat, Ordering::Relaxed);
        }
        if t_done >= deadline {
            stopping = true;
            deadline_hit = true;
        }
        if p.stop.load(Ordering::Relaxed) {
            stopping = true;
        }
    }

    if job.end_fsync && res.write_bytes > 0 && res.errors.is_empty() {
        let t0 = clock.now();
        match do_sync(eng.fd(), job.sync_mode) {
            Ok(()) => res.sync_hist.record((clock.now() - t0).as_nanos() as u64),
            Err(errno) => res.errors.push(errno_record(errno, IoDir::Write, 0, 0)),
        }
    }
    res.end = if deadline_hit && cut_at_deadline {
        deadline
    } else {
        clock.now()
    };
    res.lat_depth = search.map(|l| l.qd);
    res
}

#[cfg(test)]
mod poisson_tests {
    use super::{cmd_prio, poisson_gap, rate_dir, ContentState};

    /// fio's rate_ddir: the drawn direction if it is behind its rate, else the other one
    /// if it is and the mix has it, else a wait for the sooner one.
    #[test]
    fn a_mixed_job_paced_per_direction_goes_where_the_rate_allows() {
        use iolab_spec::IoDir::{Read, Write};
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let at = |ms| Some(t0 + Duration::from_millis(ms));
        let now = t0 + Duration::from_millis(10);
        assert_eq!(rate_dir(Read, [at(5), at(20)], true, now), Ok(Read));
        assert_eq!(rate_dir(Read, [at(15), at(5)], true, now), Ok(Write));
        assert_eq!(rate_dir(Read, [at(15), None], true, now), Ok(Write));
        assert_eq!(
            rate_dir(Read, [at(30), at(20)], true, now),
            Err((t0 + Duration::from_millis(20), Write))
        );
        assert_eq!(
            rate_dir(Read, [at(20), at(30)], true, now),
            Err((t0 + Duration::from_millis(20), Read))
        );
        // rwmixread=100: never a write.
        assert_eq!(
            rate_dir(Read, [at(15), None], false, now),
            Err((t0 + Duration::from_millis(15), Read))
        );
    }

    /// dedupe-global.fio's buffers: half of every 512-byte chunk zeros, and of 400 writes
    /// about half new and the rest copies of 8 working-set blocks, shared between jobs.
    #[test]
    fn buffers_compress_and_deduplicate_as_fio_makes_them() {
        use std::collections::HashSet;
        let c = iolab_spec::Content {
            compress_pct: 50,
            chunk: 512,
            dedupe_pct: 50,
            working_set: Some(8),
            global: true,
        };
        let mut rng = fastrand::Rng::with_seed(7);
        let mut distinct = |state: &mut ContentState, n: usize| {
            let mut seen = HashSet::new();
            let mut buf = vec![1u8; 4096];
            for _ in 0..n {
                state.fill(&mut buf, &c, &mut rng);
                for part in buf.chunks(512) {
                    assert!(part[256..].iter().all(|&b| b == 0));
                    assert!(part[..256].iter().any(|&b| b != 0));
                }
                seen.insert(buf.clone());
            }
            seen
        };
        let a = distinct(&mut ContentState::new(1), 400);
        // 400 writes: the new ones (about 200) and at most the 8 blocks of the working set.
        assert!(a.len() > 100 && a.len() < 300, "{}", a.len());
        // Another job (another seed) meets the same working set: dedupe_global.
        let b = distinct(&mut ContentState::new(2), 400);
        assert!(
            a.intersection(&b).count() >= 4,
            "{}",
            a.intersection(&b).count()
        );
        // Repeat mode: a repeat is the previous new buffer.
        let r = iolab_spec::Content {
            working_set: None,
            global: false,
            ..c
        };
        let mut state = ContentState::new(3);
        let mut last = vec![0u8; 4096];
        let (mut buf, mut repeats) = (vec![0u8; 4096], 0);
        for i in 0..200 {
            state.fill(&mut buf, &r, &mut rng);
            if i > 0 && buf == last {
                repeats += 1;
            }
            last.copy_from_slice(&buf);
        }
        assert!((50..150).contains(&repeats), "{repeats}");
    }

    #[test]
    fn cmdprio_shares_go_to_the_sizes_they_name() {
        use iolab_spec::CmdPrio;
        let rt = |l: u16| (1u16 << 13) | l;
        let rules = [
            CmdPrio {
                size: Some(65536),
                pct: 25,
                ioprio: rt(1),
            },
            CmdPrio {
                size: Some(65536),
                pct: 75,
                ioprio: 3 << 13,
            },
            CmdPrio {
                size: None,
                pct: 10,
                ioprio: rt(0),
            },
        ];
        let count = |len: u64, p: u16| {
            (0..100u8)
                .filter(|&u| cmd_prio(&rules, len, u) == p)
                .count()
        };
        assert_eq!((count(65536, rt(1)), count(65536, 3 << 13)), (25, 75));
        // A size the split does not name: only the rule of any size, 10 of 100 draws.
        assert_eq!((count(4096, rt(0)), count(4096, 0)), (10, 90));
    }

    #[test]
    fn poisson_gaps_average_the_rates_mean_gap() {
        let pace = iolab_spec::Pace {
            rate_iops: 100,
            rate_bytes: 200 * 4096,
            poisson: true,
            ..Default::default()
        };
        // u over [0, 1) in even steps: the mean of -ln(1 - u) tends to 1.
        let n = 100_000;
        let mean: f64 = (0..n)
            .map(|i| poisson_gap(&pace, 4096, i as f64 / n as f64))
            .sum::<f64>()
            / n as f64;
        assert!((mean - 0.01).abs() < 0.0002, "{mean}");
        // The slower of the two limits sets the mean: 64 KiB at 800 KiB/s is 80 ms.
        let big: f64 = (0..n)
            .map(|i| poisson_gap(&pace, 65536, i as f64 / n as f64))
            .sum::<f64>()
            / n as f64;
        assert!((big - 0.08).abs() < 0.002, "{big}");
    }
}

#[cfg(test)]
mod lat_search_tests {
    use super::{LatSearch, LatStep};
    use std::time::{Duration, Instant};

    /// fio's steps: doubled while windows meet the target, bisected down after one that
    /// misses and up toward it after the next that meets it, then one more window at the
    /// depth that stays, and done; a 100% target missed at depth 1 is fatal.
    #[test]
    fn depth_doubles_bisects_and_settles_as_fios() {
        let t = iolab_spec::LatTarget {
            target_us: 100,
            window_us: 1000,
            pct: 90.0,
            run: false,
        };
        let mut now = Instant::now();
        let mut s = LatSearch::new(t, 16, now);
        // One window at the current depth: I/Os under the target, or (`miss`) all over it.
        let mut window = |s: &mut LatSearch, miss: bool| {
            for _ in 0..10 {
                s.complete(if miss { 200_000 } else { 50_000 }, now);
            }
            now += Duration::from_millis(2);
            s.check(now)
        };
        let mut depths = vec![s.qd];
        for miss in [false, false, false, true, false, false] {
            assert!(window(&mut s, miss) == LatStep::Go);
            depths.push(s.qd);
        }
        // 1 -> 2 -> 4 -> 8 (met), 8 misses -> (8 + 4) / 2 = 6, met -> (6 + 8) / 2 = 7,
        // met -> (7 + 8) / 2 = 7: the same depth, one more window.
        assert_eq!(depths, [1, 2, 4, 8, 6, 7, 7]);
        assert!(window(&mut s, false) == LatStep::Done);
        // A 100% target: one I/O over it at depth 1 ends the job.
        let mut s = LatSearch::new(iolab_spec::LatTarget { pct: 100.0, ..t }, 16, now);
        assert!(s.complete(50_000, now) == LatStep::Go);
        assert!(s.complete(200_000, now) == LatStep::Fatal);
    }
}
