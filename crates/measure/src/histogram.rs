//! Latency histogram in nanoseconds (hdrhistogram, 3 significant digits), with an exact mean
//! kept beside it and a compact serialised form for the store.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer as SerdeDe, Serialize, Serializer as SerdeSer};

use crate::model::LatSummary;

/// Latencies of one direction of one pass, in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    /// Exact sum of recorded values (the histogram's own mean is bucket-rounded).
    sum_ns: u128,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.sum_ns == other.sum_ns && self.hist == other.hist
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        // From 1 ns, 3 significant digits, growing on demand to the largest value recorded:
        // 16 KiB to start (values below 2 µs) and 8 KiB per doubling after that, where a
        // fixed 60 s range would be 216 KiB whether used or not (three per job: read, write
        // and sync; a 64-job run held 41 MiB of them).
        let mut hist = Histogram::new_with_bounds(1, 2, 3).expect("valid bounds");
        hist.auto(true);
        LatencyHistogram { hist, sum_ns: 0 }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records `n` latencies of `ns` each: what `n` calls of [`LatencyHistogram::record`]
    /// would, in one step (a batch of I/Os queued and reaped together took the same time).
    #[inline]
    pub fn record_n(&mut self, ns: u64, n: u64) {
        let v = ns.max(1);
        // With auto-resize on, recording cannot fail.
        let _ = self.hist.record_n(v, n);
        self.sum_ns += v as u128 * n as u128;
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        let _ = self.hist.add(&other.hist);
        self.sum_ns += other.sum_ns;
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Value at a quantile (0..=1) in nanoseconds.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }

    pub fn mean_ns(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.sum_ns as f64 / self.hist.len() as f64
        }
    }

    /// Mean, percentiles and extremes in microseconds.
    pub fn summary_us(&self) -> LatSummary {
        if self.hist.is_empty() {
            return LatSummary::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        LatSummary {
            mean: self.mean_ns() / 1000.0,
            min: us(self.hist.min()),
            p50: us(self.hist.value_at_quantile(0.50)),
            p90: us(self.hist.value_at_quantile(0.90)),
            p99: us(self.hist.value_at_quantile(0.99)),
            p999: us(self.hist.value_at_quantile(0.999)),
            p9999: us(self.hist.value_at_quantile(0.9999)),
            max: us(self.hist.max()),
        }
    }

    /// Serialised form: the sum, a colon, and base64 of hdrhistogram's V2 encoding.
    pub fn encode(&self) -> String {
        let mut buf = Vec::new();
        V2Serializer::new()
            .serialize(&self.hist, &mut buf)
            .expect("serialising to memory cannot fail");
        format!(
            "{}:{}",
            self.sum_ns,
            base64::engine::general_purpose::STANDARD.encode(buf)
        )
    }

    pub fn decode(text: &str) -> Result<Self, HistogramError> {
        let (sum, b64) = text.split_once(':').ok_or(HistogramError::MissingSum)?;
        let sum_ns: u128 = sum.parse().map_err(HistogramError::BadSum)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(HistogramError::Base64)?;
        let mut hist: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(HistogramError::Decode)?;
        hist.auto(true);
        Ok(LatencyHistogram { hist, sum_ns })
    }
}

/// Why a stored histogram (`SUM:BASE64`) does not decode.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram: missing sum")]
    MissingSum,
    #[error("histogram: bad sum")]
    BadSum(#[source] std::num::ParseIntError),
    #[error("histogram: {0}")]
    Base64(#[source] base64::DecodeError),
    #[error("histogram: {0:?}")]
    Decode(#[source] hdrhistogram::serialization::DeserializeError),
}

impl Serialize for LatencyHistogram {
    fn serialize<S: SerdeSer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: SerdeDe<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LatencyHistogram::decode(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_roundtrip() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary_us();
        assert!((s.mean - 5000.5).abs() < 1e-9);
        assert!((s.p50 - 5000.0).abs() / 5000.0 < 0.002);
        assert!((s.p99 - 9900.0).abs() / 9900.0 < 0.002);
        assert_eq!(s.min, 1.0);
        let back = LatencyHistogram::decode(&h.encode()).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.summary_us(), s);
        let mut m = LatencyHistogram::new();
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.count(), 20_000);
    }

    #[test]
    fn record_n_is_n_records() {
        let (mut one, mut many) = (LatencyHistogram::new(), LatencyHistogram::new());
        for (v, n) in [(0u64, 3u64), (1500, 1), (1500, 32), (7_000_000, 5)] {
            for _ in 0..n {
                one.record(v);
            }
            many.record_n(v, n);
        }
        assert_eq!(one, many);
        assert_eq!(many.count(), 41);
    }
}
