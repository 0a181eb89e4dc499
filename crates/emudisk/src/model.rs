//! Service times. Each model turns one request into the time the medium is busy with it;
//! `device` queues requests on the model's lanes (one for a hard disk).
//!
//! - fixed: `read_latency` / `write_latency`, or a time drawn from `latency_percentiles`
//!   (inverse CDF, linear between the given points, the first point below it, the last above).
//! - hdd: a request that starts where the previous one ended costs only its transfer
//!   (`len / transfer_rate`). Any other pays a seek, `track_seek + (full_seek - track_seek)
//!   * sqrt(distance / capacity)`, plus a rotational delay drawn uniformly from one
//!   revolution (`60 / rpm` s; the mean is half of it), plus the transfer.
//! - ssd: `read_latency` or the program latency, plus `len / transfer_rate`; writes take
//!   `fast_write_latency` until `fast_cache` bytes have been written, `write_latency` after
//!   (the cache never recovers: the cliff stays).

use crate::spec::{ModelKind, Params};

/// The mutable part of a model: the head position and how much fast cache is used.
#[derive(Debug, Default)]
pub struct ModelState {
    pub head: u64,
    pub fast_used: u64,
}

/// Seconds the medium spends on one read (`write` false) or write of `len` bytes at `off`.
pub fn service(
    p: &Params,
    st: &mut ModelState,
    rng: &mut fastrand::Rng,
    capacity: u64,
    off: u64,
    len: u64,
    write: bool,
) -> f64 {
    let xfer = len as f64 / p.transfer_rate as f64;
    match p.model {
        ModelKind::Fixed => {
            if p.latency_percentiles.is_empty() {
                if write {
                    p.write_latency_s
                } else {
                    p.read_latency_s
                }
            } else {
                draw(&p.latency_percentiles, rng.f64() * 100.0)
            }
        }
        ModelKind::Hdd => {
            let t = if off == st.head {
                xfer
            } else {
                let dist = off.abs_diff(st.head) as f64 / capacity.max(1) as f64;
                let seek = p.track_seek_s + (p.full_seek_s - p.track_seek_s) * dist.min(1.0).sqrt();
                let rev = 60.0 / p.rpm as f64;
                seek + rng.f64() * rev + xfer
            };
            st.head = off + len;
            t
        }
        ModelKind::Ssd => {
            if !write {
                p.read_latency_s + xfer
            } else if st.fast_used < p.fast_cache_bytes {
                st.fast_used += len;
                p.fast_write_latency_s + xfer
            } else {
                p.write_latency_s + xfer
            }
        }
    }
}

/// The time at percentile `u` (0..100) of the piecewise-linear distribution `pts`.
pub fn draw(pts: &[(f64, f64)], u: f64) -> f64 {
    let Some(first) = pts.first() else {
        return 0.0;
    };
    if u <= first.0 {
        return first.1;
    }
    for w in pts.windows(2) {
        let ((p0, t0), (p1, t1)) = (w[0], w[1]);
        if u <= p1 {
            if p1 == p0 {
                return t1;
            }
            return t0 + (t1 - t0) * (u - p0) / (p1 - p0);
        }
    }
    pts.last().map(|l| l.1).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{validate, EmuSpec};

    #[test]
    fn percentiles_interpolate() {
        let pts = [(0.0, 1.0), (50.0, 2.0), (100.0, 4.0)];
        assert_eq!(draw(&pts, 25.0), 1.5);
        assert_eq!(draw(&pts, 75.0), 3.0);
        assert_eq!(draw(&[(50.0, 2.0)], 10.0), 2.0);
    }

    #[test]
    fn hdd_sequential_is_transfer_only_and_random_pays_seek() {
        let s: EmuSpec =
            serde_json::from_str(r#"{"model":"hdd","transfer_rate":"100MiB"}"#).unwrap();
        let p = validate(&s).unwrap();
        let mut st = ModelState::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let cap = 1 << 30;
        let a = service(&p, &mut st, &mut rng, cap, 0, 1 << 20, false);
        assert!((a - 0.01).abs() < 1e-9, "{a}");
        let b = service(&p, &mut st, &mut rng, cap, 1 << 29, 4096, true);
        // seek over half the disk: 1 + 15 * sqrt(0.5) ms, plus up to 8.33 ms of rotation
        assert!(b > 0.0116 && b < 0.0116 + 0.00834 + 1e-4, "{b}");
    }
}
