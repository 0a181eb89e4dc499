//! One timed pass of one test: opens the target once per job, starts `numjobs` threads
//! (each with its own engine and buffers) together, and merges what they measured into a
//! [`PassRecord`].

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use iolab_measure::{
    CpuLossSampler, CpuSample, DirResult, DirSeries, IoErrorRecord, LatencyHistogram, PassRecord,
    SyncStats, TimeSeries,
};
use iolab_spec::{format_bytes, DataPattern, RunSettings, TestSpec};

use crate::buffers::BufferPool;
use crate::clock::{Clock, Monotonic};
pub use crate::engines::effective_iodepth;
use crate::engines::{open_and_run, Engine, WithEngine};
use crate::target::{Target, TargetError};
use crate::worker::{run_job, JobParams, JobResult, SERIES_INTERVAL};

/// A job's loop, handed to whichever engine the run uses: it starts when every job's
/// engine is open (the barrier).
struct JobWork<'a, C> {
    params: &'a JobParams<'a>,
    clock: &'a C,
    barrier: &'a Barrier,
}

impl<C: Clock> WithEngine for JobWork<'_, C> {
    type Output = JobResult;
    fn run<E: Engine>(self, engine: &mut E, bufs: &mut BufferPool) -> JobResult {
        self.barrier.wait();
        run_job(engine, bufs, self.params, self.clock)
    }
}
use iolab_integrity::written::Written;

/// Largest buffer memory a test may pin (iodepth x bs x numjobs).
pub const MAX_BUFFER_BYTES: u64 = 4 << 30;

/// What the caller sees while a pass runs.
pub trait PassObserver: Sync {
    /// Called about every 100 ms with the bytes completed so far in this pass.
    fn tick(&self, bytes: u64, elapsed: Duration);

    /// [`tick`](Self::tick) with the I/Os completed so far and their latencies summed (ns);
    /// what the pass calls. An observer that judges more than bytes takes this one.
    fn tick_ios(&self, bytes: u64, ios: u64, lat_ns: u64, elapsed: Duration) {
        let _ = (ios, lat_ns);
        self.tick(bytes, elapsed);
    }
}

impl PassObserver for () {
    fn tick(&self, _: u64, _: Duration) {}
}

/// A finished pass and remarks on how it ran (engine fallbacks and the like).
pub struct PassOutcome {
    pub record: PassRecord,
    pub notes: Vec<String>,
    /// The pass ended early because of a stop request.
    pub interrupted: bool,
    /// Counted I/Os per line of the job's access specification (empty without one).
    pub access_ios: Vec<u64>,
    /// Bytes read and written outside the counted part of the pass (in the ramp, and
    /// drained after the deadline): the device moved them, the pass does not count them.
    pub uncounted_bytes: [u64; 2],
}

/// Runs one pass of `test` for `duration` on `target` with the engine of `settings`. With
/// `written` (`--verify`) writes are self-describing blocks whose generations are recorded
/// there for a later [`Written::check`] (its granule must divide the test's transfer sizes
/// and alignments).
#[allow(clippy::too_many_arguments)]
pub fn run_pass(
    target: &Target,
    test: &TestSpec,
    settings: &RunSettings,
    index: u32,
    duration: Duration,
    stop: &AtomicBool,
    observer: &dyn PassObserver,
    written: Option<&Written>,
) -> Result<PassOutcome, TargetError> {
    run_pass_with_clock(
        target, test, settings, index, duration, stop, observer, written, &Monotonic,
    )
}

/// [`run_pass`] with the job loop reading the time from `clock` (deadlines, latencies,
/// time-series buckets, the pass's length). The ramp wait, the CPU sample and the observer's
/// ticks stay on the real clock. With a [`StepClock`](crate::clock::StepClock), the `null`
/// engine and one job, a pass is exactly reproducible.
#[allow(clippy::too_many_arguments)]
pub fn run_pass_with_clock<C: Clock>(
    target: &Target,
    test: &TestSpec,
    settings: &RunSettings,
    index: u32,
    duration: Duration,
    stop: &AtomicBool,
    observer: &dyn PassObserver,
    written: Option<&Written>,
    clock: &C,
) -> Result<PassOutcome, TargetError> {
    let job = &test.job;
    // The test's own engine and direct where it has them.
    let settings = &settings.for_job(job);
    let Some(engine) = settings.engine else {
        return Err(TargetError::Unsupported(
            target.io_path.clone(),
            "the run's settings name no engine to run a block test on".into(),
        ));
    };
    let numjobs = job.numjobs.max(1);
    let iodepth = effective_iodepth(engine, job.iodepth);
    let mem = job.bs * iodepth as u64 * numjobs as u64;
    if mem > MAX_BUFFER_BYTES {
        return Err(TargetError::Unsupported(
            target.io_path.clone(),
            format!(
                "the job asks to pin {} of buffers (bs x iodepth x numjobs), above the {} limit",
                format_bytes(mem),
                format_bytes(MAX_BUFFER_BYTES)
            ),
        ));
    }
    if target.info.size < job.bs {
        return Err(TargetError::TooSmall {
            path: target.io_path.clone(),
            have: target.info.size,
            want: job.bs,
        });
    }
    let files = (0..numjobs)
        .map(|_| target.open(job.rw.writes(), settings.direct))
        .collect::<Result<Vec<_>, _>>()?;
    if job.invalidate && !settings.direct {
        // fio's invalidate=1: the pass starts without the file's clean pages in the cache.
        if let Err(e) = rustix::fs::fadvise(&files[0], 0, None, rustix::fs::Advice::DontNeed) {
            return Err(TargetError::Unsupported(
                target.io_path.clone(),
                format!(
                    "cannot drop the file's cached pages (invalidate): {}",
                    std::io::Error::from(e)
                ),
            ));
        }
    }
    // Each job's share, rounded up to whole blocks; a limit so large the rounding would
    // overflow is no limit (sizes are bounded at parse time, so this is a last guard: a
    // wrapped product would end the pass before its first I/O).
    let byte_limit = job.io_limit.map(|l| {
        l.div_ceil(numjobs as u64)
            .div_ceil(job.bs)
            .saturating_mul(job.bs)
    });
    let progress: Vec<crate::worker::Progress> = (0..numjobs).map(|_| Default::default()).collect();
    let barrier = Barrier::new(numjobs as usize + 1);
    // Random offsets (an access specification's random lines included) never merge.
    let random = job.rw.is_random() || job.access.iter().any(|l| l.random_pct > 0);
    let seed_base = fastrand::u64(..);

    // fio's offset and offset_increment: where clone j's own part of the region starts.
    let clone_start = |j: usize| job.clones.map_or(0, |c| c.offset + j as u64 * c.increment);
    let (results, notes, cpu_start, cpu_end, lost) = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (j, file) in files.iter().enumerate() {
            let params = JobParams {
                job,
                index: j as u32,
                iodepth,
                region_start: target.region_offset + clone_start(j),
                region_len: job.clones.map_or(target.info.size, |c| {
                    c.len.min(target.info.size.saturating_sub(clone_start(j)))
                }),
                duration,
                ramp: settings.ramp,
                byte_limit,
                data: settings.data,
                seed: seed_base.wrapping_add((j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                stop,
                progress: &progress[j],
                written,
            };
            let barrier = &barrier;
            handles.push(
                s.spawn(move || -> Result<(JobResult, Vec<String>), String> {
                    let fd = file.as_raw_fd();
                    if let Some(n) = &job.numa {
                        place_thread(n).inspect_err(|_| {
                            barrier.wait();
                        })?;
                    }
                    if let Some(p) = job.prio.thread {
                        set_thread_ioprio(p).inspect_err(|_| {
                            // The others and the pass wait for every job to be ready.
                            barrier.wait();
                        })?;
                    }
                    let mut bufs = BufferPool::with_pages(
                        iodepth as usize,
                        job.bs as usize,
                        !job.page_buffers,
                    );
                    if settings.data == DataPattern::Random {
                        bufs.fill_random(&mut fastrand::Rng::with_seed(params.seed ^ 0x5555));
                    }
                    let work = JobWork {
                        params: &params,
                        clock,
                        barrier,
                    };
                    open_and_run(
                        engine,
                        fd,
                        &target.io_path,
                        iodepth,
                        &mut bufs,
                        settings,
                        random,
                        job.trim,
                        work,
                    )
                    .inspect_err(|_| {
                        // The others and the pass wait for every job to be ready.
                        barrier.wait();
                    })
                }),
            );
        }
        barrier.wait();
        // CPU use is measured over the counted part of the pass only. The ramp is waited
        // out in short steps so a stop request ends it at once.
        let ramp_end = Instant::now() + settings.ramp;
        while !stop.load(Ordering::Relaxed) {
            let left = ramp_end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(20)));
        }
        let cpu_start = CpuSample::now();
        let t0 = Instant::now();
        let mut lost = CpuLossSampler::start(SERIES_INTERVAL);
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            let sum = |f: fn(&crate::worker::Progress) -> &AtomicU64| -> u64 {
                progress.iter().map(|p| f(p).load(Ordering::Relaxed)).sum()
            };
            observer.tick_ios(
                sum(|p| &p.bytes),
                sum(|p| &p.ios),
                sum(|p| &p.lat_ns),
                t0.elapsed(),
            );
            lost.tick(t0.elapsed());
        }
        let cpu_end = CpuSample::now();
        let mut results = Vec::new();
        let mut notes = Vec::new();
        for h in handles {
            match h.join() {
                Ok(Ok((r, n))) => {
                    results.push(r);
                    notes.extend(n);
                }
                Ok(Err(msg)) => notes.push(msg),
                Err(_) => notes.push("a job thread panicked".into()),
            }
        }
        (results, notes, cpu_start, cpu_end, lost)
    });

    if results.len() != numjobs as usize {
        return Err(TargetError::Unsupported(
            target.io_path.clone(),
            notes.join("; "),
        ));
    }
    let mut record = merge(index, &results, cpu_start, cpu_end, job.thread_series);
    let ts = &mut record.timeseries;
    [
        ts.cpu_wait_ms,
        ts.steal_ms,
        ts.others_cpu_ms,
        ts.idle_cpu_ms,
    ] = lost.finish(ts.bytes.len());
    let mut access_ios = vec![0u64; job.access.len()];
    for r in &results {
        for (total, n) in access_ios.iter_mut().zip(&r.access_ios) {
            *total += n;
        }
    }
    let uncounted_bytes = results.iter().fold([0, 0], |[r, w], j| {
        [r + j.uncounted_bytes[0], w + j.uncounted_bytes[1]]
    });
    let interrupted = stop.load(Ordering::Relaxed);
    let mut notes = notes;
    let depths: Vec<String> = results
        .iter()
        .filter_map(|r| r.lat_depth)
        .map(|d| d.to_string())
        .collect();
    if !depths.is_empty() {
        notes.push(format!(
            "{}: latency_target: the search ended at queue depth {} (of iodepth={})",
            test.name,
            depths.join(", "),
            job.iodepth
        ));
    }
    notes.sort();
    notes.dedup();
    if job.trim {
        // The job's writes were trims: fio's third direction, counted under its name (its
        // series is the pass's total; the per-direction ones are reads' and writes').
        record.trim = record.write.take();
        record.timeseries.write = None;
    }
    Ok(PassOutcome {
        record,
        notes,
        interrupted,
        access_ios,
        uncounted_bytes,
    })
}

/// The pass's record from its job threads' results (`threads`: each thread's series kept
/// too, in `TimeSeries::threads`).
fn merge(
    index: u32,
    results: &[JobResult],
    cpu0: CpuSample,
    cpu1: CpuSample,
    threads: bool,
) -> PassRecord {
    let start = results
        .iter()
        .map(|r| r.start)
        .min()
        .expect("at least one job");
    let end = results
        .iter()
        .map(|r| r.end)
        .max()
        .expect("at least one job");
    let seconds = (end - start).as_secs_f64();
    let mut rh = LatencyHistogram::new();
    let mut wh = LatencyHistogram::new();
    let mut sh = LatencyHistogram::new();
    let (mut rb, mut wb) = (0u64, 0u64);
    let mut series: Vec<u64> = Vec::new();
    let mut dirs = [DirSeries::default(), DirSeries::default()];
    let mut errors: Vec<IoErrorRecord> = Vec::new();
    let mut own: Vec<TimeSeries> = Vec::new();
    for r in results {
        rh.merge(&r.read_hist);
        wh.merge(&r.write_hist);
        sh.merge(&r.sync_hist);
        rb += r.read_bytes;
        wb += r.write_bytes;
        // Align each job's series to the earliest start.
        let shift = ((r.start - start).as_nanos() / SERIES_INTERVAL.as_nanos()) as usize;
        if series.len() < r.series.len() + shift {
            series.resize(r.series.len() + shift, 0);
        }
        for (i, b) in r.series.iter().enumerate() {
            series[i + shift] += b;
        }
        for (d, rd) in dirs.iter_mut().zip(&r.dir_series) {
            d.merge_at(rd, shift);
        }
        if threads && results.len() > 1 {
            let mut bytes = vec![0; shift];
            bytes.extend_from_slice(&r.series);
            let dir = |i: usize| {
                let mut d = DirSeries::default();
                d.merge_at(&r.dir_series[i], shift);
                d.non_empty()
            };
            own.push(TimeSeries {
                interval_ms: SERIES_INTERVAL.as_millis() as u32,
                bytes,
                read: dir(0),
                write: dir(1),
                ..TimeSeries::default()
            });
        }
        errors.extend(r.errors.iter().cloned());
    }
    let ios = rh.count() + wh.count();
    let read = (!rh.is_empty()).then(|| DirResult::from_histogram(rb, seconds, rh));
    let write = (!wh.is_empty()).then(|| DirResult::from_histogram(wb, seconds, wh));
    let sync = (!sh.is_empty()).then(|| SyncStats {
        count: sh.count(),
        lat_us: sh.summary_us(),
    });
    let mut record = PassRecord::new(
        index,
        seconds,
        read,
        write,
        sync,
        cpu0.usage_until(&cpu1, ios),
        TimeSeries {
            interval_ms: SERIES_INTERVAL.as_millis() as u32,
            bytes: series,
            read: std::mem::take(&mut dirs[0]).non_empty(),
            write: std::mem::take(&mut dirs[1]).non_empty(),
            threads: own,
            ..TimeSeries::default()
        },
    );
    record.errors = errors;
    record
}

/// Sets the calling thread's I/O priority (fio's prioclass and prio): `ioprio_set` of
/// IOPRIO_WHO_PROCESS for itself; the I/Os it issues without a priority of their own take it.
fn set_thread_ioprio(ioprio: u16) -> Result<(), String> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    // SAFETY: a system call with integer arguments only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            ioprio as libc::c_long,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!(
            "ioprio_set(class {}, level {}): {}",
            ioprio >> 13,
            ioprio & 7,
            std::io::Error::last_os_error()
        ))
    }
}

/// Places the calling job thread as fio's numa_cpu_nodes and numa_mem_policy ask, before
/// its buffers are mapped (so the policy places them).
fn place_thread(n: &iolab_spec::Numa) -> Result<(), String> {
    use iolab_sys::numa;
    if !n.cpu_nodes.is_empty() {
        numa::bind_thread_cpus(&n.cpu_nodes)?;
    }
    if let Some((mode, nodes)) = &n.mem_policy {
        let m = numa::mem_mode(mode).ok_or_else(|| format!("memory policy '{mode}'"))?;
        numa::set_mem_policy(m, nodes)?;
    }
    Ok(())
}
