//! The device: requests queued on the model's lanes, the volatile write cache, injected
//! errors, power loss, and the counts of what it served.
//!
//! Timing: a request arriving at `now` starts on the lane that frees first (`max(now,
//! busy_until)`), keeps it busy for its service time, and is answered when it ends (the
//! serving thread sleeps until then). One lane is a queue served in arrival order.
//!
//! Data: the backing file holds what is on the medium; the cache holds acknowledged writes
//! not yet on it, in write order, and reads see them. A write-back write is acknowledged
//! once cached (when the cache is full the oldest entries are written to the medium first,
//! at the model's cost, inside that request); a write-through write once on the medium. An
//! honoured flush writes the whole cache to the medium and costs `flush_latency` plus the
//! model's time for every entry, in cache order. A power loss drops the cache (the list of
//! dropped byte ranges is the answer), optionally writes a torn prefix of the oldest dropped
//! entry, and leaves the device off: every request fails with EIO until power-on.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::model::{self, ModelState};
use crate::spec::{Fault, FaultOp, Params, WriteCacheMode};

/// I/O counts, in the stats file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Counts {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub flushes_ignored: u64,
    /// Bytes written from the cache to the medium (by flushes and by a full cache).
    pub destaged_bytes: u64,
    pub errors_read: u64,
    pub errors_write: u64,
    pub errors_flush: u64,
    /// Requests refused because the power was off.
    pub errors_power_off: u64,
    pub power_losses: u64,
    pub dropped_writes: u64,
    pub dropped_bytes: u64,
    /// Sum of the service times (seconds the medium was busy), and of flushes alone.
    pub busy_s: f64,
    pub flush_s: f64,
}

/// A distribution of times in microseconds, summarised.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TimesUs {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// What the device's own clock saw since it started (or since `reset-served`): for each
/// served read and honoured flush, the model's time from its arrival to its planned
/// completion (queueing on the lanes included: what a perfect host would measure) and the
/// time until the daemon actually answered it (`*_answered`: the model's time plus how late
/// the daemon's thread woke); and for every request the daemon waited on, that lateness
/// alone (`late`: the scheduling delay of the moment, measured where it happened).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Served {
    pub reads: TimesUs,
    pub reads_answered: TimesUs,
    pub flushes: TimesUs,
    pub flushes_answered: TimesUs,
    pub late: TimesUs,
}

/// The stats file's content.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    pub summary: String,
    pub capacity: u64,
    pub params: Params,
    pub counts: Counts,
    #[serde(default)]
    pub served: Served,
    pub cached_bytes: u64,
    pub powered: bool,
}

/// The histograms behind [`Served`]: microseconds, 3 significant digits, up to an hour.
struct ServedHist {
    reads: Histogram<u64>,
    reads_answered: Histogram<u64>,
    flushes: Histogram<u64>,
    flushes_answered: Histogram<u64>,
    late: Histogram<u64>,
}

impl ServedHist {
    fn new() -> ServedHist {
        let h = || Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        ServedHist {
            reads: h(),
            reads_answered: h(),
            flushes: h(),
            flushes_answered: h(),
            late: h(),
        }
    }

    fn summary(h: &Histogram<u64>) -> TimesUs {
        if h.is_empty() {
            return TimesUs::default();
        }
        let q = |p: f64| h.value_at_quantile(p) as f64;
        TimesUs {
            count: h.len(),
            mean: h.mean(),
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: h.max() as f64,
        }
    }
}

/// A time in whole microseconds for a histogram (at least 1, at most its bound).
fn us(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 3_600_000_000)
}

/// What a power loss dropped: byte ranges `(offset, len)` of acknowledged writes that never
/// reached the medium, in write order, and the torn write, if any (`(offset, bytes written)`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PowerLoss {
    pub dropped: Vec<(u64, u64)>,
    pub torn: Option<(u64, u64)>,
}

struct Entry {
    off: u64,
    data: Vec<u8>,
}

struct State {
    params: Params,
    model: ModelState,
    rng: fastrand::Rng,
    lanes: Vec<Instant>,
    cache: Vec<Entry>,
    cache_bytes: u64,
    powered: bool,
    counts: Counts,
    served: ServedHist,
}

/// The emulated device over a backing file.
pub struct Device {
    backing: File,
    /// Time 0 of the model (the platter's angle is a function of time).
    epoch: Instant,
    capacity: u64,
    state: Mutex<State>,
}

/// An I/O error from the device (always EIO to the kernel).
#[derive(Debug)]
pub struct Eio;

enum Op {
    Read,
    Write,
    Flush,
}

impl Device {
    pub fn new(backing: File, params: Params) -> std::io::Result<Device> {
        let capacity = backing.metadata()?.len();
        let now = Instant::now();
        Ok(Device {
            epoch: now,
            backing,
            capacity,
            state: Mutex::new(State {
                rng: fastrand::Rng::with_seed(params.seed),
                lanes: vec![now; params.parallelism as usize],
                params,
                model: ModelState::default(),
                cache: Vec::new(),
                cache_bytes: 0,
                powered: true,
                counts: Counts::default(),
                served: ServedHist::new(),
            }),
        })
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Serves a read of `len` bytes at `off` (clipped to the capacity).
    pub fn read(&self, off: u64, len: u64) -> Result<Vec<u8>, Eio> {
        let len = len.min(self.capacity.saturating_sub(off));
        let arrived = Instant::now();
        let (data, until) = {
            let mut st = self.lock();
            self.admit(&mut st, Op::Read, off, len)?;
            let mut buf = vec![0u8; len as usize];
            read_full(&self.backing, &mut buf, off).map_err(|_| Eio)?;
            for e in &st.cache {
                overlay(&mut buf, off, e);
            }
            st.counts.reads += 1;
            st.counts.read_bytes += len;
            let until = self.occupy(&mut st, 0.0, &[(off, len, false)]);
            let _ = st
                .served
                .reads
                .record(us(until.saturating_duration_since(arrived)));
            (buf, until)
        };
        self.wait_until(until);
        let answered = us(arrived.elapsed());
        let _ = self.lock().served.reads_answered.record(answered);
        Ok(data)
    }

    /// Serves a write; the data is acknowledged when this returns Ok.
    pub fn write(&self, off: u64, data: &[u8]) -> Result<(), Eio> {
        if off.saturating_add(data.len() as u64) > self.capacity {
            return Err(Eio);
        }
        let len = data.len() as u64;
        let mut st = self.lock();
        self.admit(&mut st, Op::Write, off, len)?;
        st.counts.writes += 1;
        st.counts.write_bytes += len;
        let back = st.params.write_cache == WriteCacheMode::Back && len <= st.params.cache_size;
        let until = if back {
            let mut out = Vec::new();
            if st.cache_bytes + len > st.params.cache_size {
                // Full: the oldest entries go to the medium until half the cache is free.
                let keep = st.params.cache_size / 2;
                let mut n = 0;
                let mut freed = 0;
                while st.cache_bytes - freed + len > keep.max(len) && n < st.cache.len() {
                    freed += st.cache[n].data.len() as u64;
                    n += 1;
                }
                let old: Vec<Entry> = st.cache.drain(..n).collect();
                st.cache_bytes -= freed;
                out = self.destage(&mut st, &old)?;
            }
            st.cache_bytes += len;
            st.cache.push(Entry {
                off,
                data: data.to_vec(),
            });
            if out.is_empty() {
                // Into the cache: no medium time.
                return Ok(());
            }
            self.occupy(&mut st, 0.0, &out)
        } else {
            let until = self.occupy(&mut st, 0.0, &[(off, len, true)]);
            // A write-through write reaches the medium when it is acknowledged; a cached
            // entry inside the same bytes is older and must not shadow it.
            st.cache.retain(|e| {
                let end = e.off + e.data.len() as u64;
                !(e.off >= off && end <= off + len)
            });
            st.cache_bytes = st.cache.iter().map(|e| e.data.len() as u64).sum();
            self.backing.write_all_at(data, off).map_err(|_| Eio)?;
            until
        };
        drop(st);
        self.wait_until(until);
        let mut st = self.lock();
        if !st.powered {
            // The power went while it was in flight: never acknowledged.
            st.counts.errors_power_off += 1;
            return Err(Eio);
        }
        Ok(())
    }

    /// Serves a flush (cache flush / FUA barrier).
    pub fn flush(&self) -> Result<(), Eio> {
        let arrived = Instant::now();
        let mut st = self.lock();
        self.admit(&mut st, Op::Flush, 0, 0)?;
        st.counts.flushes += 1;
        if st.params.ignore_flush {
            st.counts.flushes_ignored += 1;
            return Ok(());
        }
        let entries = std::mem::take(&mut st.cache);
        st.cache_bytes = 0;
        let ios = self.destage(&mut st, &entries)?;
        let fixed = st.params.flush_latency_s;
        let before = st.counts.busy_s;
        let until = self.occupy(&mut st, fixed, &ios);
        st.counts.flush_s += st.counts.busy_s - before;
        let _ = st
            .served
            .flushes
            .record(us(until.saturating_duration_since(arrived)));
        drop(st);
        self.wait_until(until);
        let answered = us(arrived.elapsed());
        let _ = self.lock().served.flushes_answered.record(answered);
        Ok(())
    }

    /// Writes cache entries to the backing file in the order they were written (so a later
    /// write wins where two overlap); returns the medium accesses they cost, in elevator
    /// order: ascending offsets from the head, then from the start (C-SCAN), as a disk
    /// orders its cache when it writes it out.
    fn destage(&self, st: &mut State, entries: &[Entry]) -> Result<Vec<(u64, u64, bool)>, Eio> {
        let mut ios = Vec::with_capacity(entries.len());
        for e in entries {
            let len = e.data.len() as u64;
            self.backing.write_all_at(&e.data, e.off).map_err(|_| Eio)?;
            st.counts.destaged_bytes += len;
            ios.push((e.off, len, true));
        }
        let head = st.model.head;
        ios.sort_by_key(|&(off, _, _)| (off < head, off));
        Ok(ios)
    }

    /// Keeps the lane that frees first busy for `pre` seconds and then the medium accesses
    /// `ios` (offset, length, write) one after another; returns when the last one ends.
    fn occupy(&self, st: &mut State, pre: f64, ios: &[(u64, u64, bool)]) -> Instant {
        let now = Instant::now();
        let s = &mut *st;
        let lane = s
            .lanes
            .iter_mut()
            .min()
            .expect("a device has at least one lane");
        let start = (*lane).max(now);
        let mut t = start.duration_since(self.epoch).as_secs_f64() + pre.max(0.0);
        let mut busy = pre.max(0.0);
        for &(off, len, write) in ios {
            let d = model::service(
                &s.params,
                &mut s.model,
                &mut s.rng,
                self.capacity,
                off,
                len,
                write,
                t,
            );
            t += d;
            busy += d;
        }
        s.counts.busy_s += busy;
        let end = start + Duration::from_secs_f64(busy);
        *lane = end;
        end
    }

    /// Power, then the fault rules; counts what it refuses.
    fn admit(&self, st: &mut State, op: Op, off: u64, len: u64) -> Result<(), Eio> {
        if !st.powered {
            st.counts.errors_power_off += 1;
            return Err(Eio);
        }
        let fop = match op {
            Op::Read => FaultOp::Read,
            Op::Write => FaultOp::Write,
            Op::Flush => FaultOp::Flush,
        };
        let mut hit = false;
        for f in &st.params.faults {
            if f.op != fop && f.op != FaultOp::Any {
                continue;
            }
            let in_range = match (f.range, fop) {
                (None, _) => true,
                (Some(_), FaultOp::Flush) => true,
                (Some((a, b)), _) => off < b && off + len.max(1) > a,
            };
            if in_range && f.probability.is_none_or(|p| st.rng.f64() < p) {
                hit = true;
                break;
            }
        }
        if hit {
            match fop {
                FaultOp::Read => st.counts.errors_read += 1,
                FaultOp::Write => st.counts.errors_write += 1,
                _ => st.counts.errors_flush += 1,
            }
            return Err(Eio);
        }
        Ok(())
    }

    /// Cuts the power: drops the cache (tearing the oldest entry when `tear`), device off.
    pub fn power_loss(&self, tear: bool) -> PowerLoss {
        let mut st = self.lock();
        st.powered = false;
        st.counts.power_losses += 1;
        let entries = std::mem::take(&mut st.cache);
        st.cache_bytes = 0;
        let mut out = PowerLoss::default();
        for e in &entries {
            out.dropped.push((e.off, e.data.len() as u64));
            st.counts.dropped_writes += 1;
            st.counts.dropped_bytes += e.data.len() as u64;
        }
        if tear {
            if let Some(e) = entries.first() {
                let sectors = (e.data.len() / 512) as u64;
                if sectors > 1 {
                    let n = st.rng.u64(1..sectors) * 512;
                    if self
                        .backing
                        .write_all_at(&e.data[..n as usize], e.off)
                        .is_ok()
                    {
                        out.torn = Some((e.off, n));
                    }
                }
            }
        }
        out
    }

    /// Power back on, empty cache, head at 0.
    pub fn power_on(&self) {
        let mut st = self.lock();
        st.powered = true;
        st.model = ModelState::default();
        let now = Instant::now();
        for l in st.lanes.iter_mut() {
            *l = now;
        }
    }

    pub fn set_ignore_flush(&self, on: bool) {
        self.lock().params.ignore_flush = on;
    }

    pub fn add_fault(&self, f: Fault) {
        self.lock().params.faults.push(f);
    }

    pub fn clear_faults(&self) {
        self.lock().params.faults.clear();
    }

    pub fn stats(&self) -> Stats {
        let st = self.lock();
        Stats {
            summary: st.params.summary(),
            capacity: self.capacity,
            params: st.params.clone(),
            counts: st.counts.clone(),
            served: Served {
                reads: ServedHist::summary(&st.served.reads),
                reads_answered: ServedHist::summary(&st.served.reads_answered),
                flushes: ServedHist::summary(&st.served.flushes),
                flushes_answered: ServedHist::summary(&st.served.flushes_answered),
                late: ServedHist::summary(&st.served.late),
            },
            cached_bytes: st.cache_bytes,
            powered: st.powered,
        }
    }

    /// Starts [`Served`] afresh (the `reset-served` request), so that a measurement can be
    /// set beside exactly the requests it made.
    pub fn reset_served(&self) {
        self.lock().served = ServedHist::new();
    }

    /// Sleeps until the planned completion `t`, then records how late the thread woke
    /// (only when it had to sleep: a completion already due is not a wake-up).
    fn wait_until(&self, t: Instant) {
        let now = Instant::now();
        if t > now {
            std::thread::sleep(t - now);
            let late = Instant::now().saturating_duration_since(t);
            let _ = self.lock().served.late.record(us(late));
        }
    }
}

/// Fills `buf` from `off`; past the end of the file reads zeros.
fn read_full(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let n = f.read_at(&mut buf[done..], off + done as u64)?;
        if n == 0 {
            buf[done..].fill(0);
            break;
        }
        done += n;
    }
    Ok(())
}

/// Copies the part of a cached entry that falls in `buf` (which starts at `off`).
fn overlay(buf: &mut [u8], off: u64, e: &Entry) {
    let end = off + buf.len() as u64;
    let e_end = e.off + e.data.len() as u64;
    let a = off.max(e.off);
    let b = end.min(e_end);
    if a < b {
        buf[(a - off) as usize..(b - off) as usize]
            .copy_from_slice(&e.data[(a - e.off) as usize..(b - e.off) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{validate, EmuSpec};

    fn dev(json: &str) -> (Device, tempfile_like::Tmp) {
        let tmp = tempfile_like::Tmp::new(1 << 20);
        let p = validate(&serde_json::from_str::<EmuSpec>(json).unwrap()).unwrap();
        (Device::new(tmp.file(), p).unwrap(), tmp)
    }

    mod tempfile_like {
        use std::fs::{File, OpenOptions};
        use std::path::PathBuf;
        pub struct Tmp(PathBuf);
        impl Tmp {
            pub fn new(size: u64) -> Tmp {
                let p = std::env::temp_dir().join(format!(
                    "emudisk-unit-{}-{}",
                    std::process::id(),
                    fastrand::u64(..)
                ));
                File::create(&p).unwrap().set_len(size).unwrap();
                Tmp(p)
            }
            pub fn file(&self) -> File {
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&self.0)
                    .unwrap()
            }
        }
        impl Drop for Tmp {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn write_back_reads_see_cache_and_power_loss_drops_it() {
        let (d, _t) = dev(r#"{"model":"fixed","write_cache":"back","cache_size":"8KiB"}"#);
        d.write(0, &[1u8; 4096]).unwrap();
        d.write(8192, &[2u8; 4096]).unwrap();
        assert_eq!(d.read(0, 4096).unwrap(), vec![1u8; 4096]);
        d.flush().unwrap();
        d.write(4096, &[3u8; 4096]).unwrap();
        let pl = d.power_loss(false);
        assert_eq!(pl.dropped, vec![(4096, 4096)]);
        assert!(d.read(0, 512).is_err());
        d.power_on();
        assert_eq!(d.read(0, 4096).unwrap(), vec![1u8; 4096]);
        assert_eq!(d.read(4096, 4096).unwrap(), vec![0u8; 4096]);
        assert_eq!(d.read(8192, 4096).unwrap(), vec![2u8; 4096]);
    }

    #[test]
    fn full_cache_destages_oldest_and_ignored_flush_keeps_data_volatile() {
        let (d, _t) = dev(
            r#"{"model":"fixed","write_cache":"back","cache_size":"8KiB","ignore_flush":true}"#,
        );
        for i in 0..3u64 {
            d.write(i * 4096, &[i as u8 + 1; 4096]).unwrap();
        }
        d.flush().unwrap();
        // The third write found the cache full: the oldest went to the medium until half of
        // it (4 KiB) was enough for the new one.
        let pl = d.power_loss(false);
        assert_eq!(pl.dropped, vec![(8192, 4096)]);
        d.power_on();
        assert_eq!(d.read(0, 4096).unwrap(), vec![1u8; 4096]);
        assert_eq!(d.read(4096, 4096).unwrap(), vec![2u8; 4096]);
        assert_eq!(d.read(8192, 4096).unwrap(), vec![0u8; 4096]);
        let s = d.stats();
        assert_eq!((s.counts.flushes, s.counts.flushes_ignored), (1, 1));
    }

    #[test]
    fn faults_by_range_and_op() {
        let (d, _t) = dev(r#"{"model":"fixed","errors":[{"op":"read","sectors":"8-16"}]}"#);
        assert!(d.read(0, 4096).is_ok());
        assert!(d.read(4096, 512).is_err());
        assert!(d.write(4096, &[0u8; 512]).is_ok());
        d.clear_faults();
        assert!(d.read(4096, 512).is_ok());
        assert_eq!(d.stats().counts.errors_read, 1);
    }
}
