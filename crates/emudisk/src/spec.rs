//! What an emulated disk is: [`EmuSpec`] as written in a study file (`[testbed.emulated]`)
//! or handed to the daemon as JSON, and [`validate`], which resolves it to [`Params`].

use std::collections::BTreeMap;
use std::time::Duration;

use iolab_spec::{parse_duration, parse_size};
use serde::{Deserialize, Serialize};

/// The device model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// Every read and every write takes a fixed time (or one drawn from given percentiles).
    Fixed,
    /// A hard disk: seek growing with distance, rotational latency, media rate, one queue.
    Hdd,
    /// A flash device: fixed read/program latency, parallel channels, an optional fast cache.
    Ssd,
}

/// The volatile write cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteCacheMode {
    /// A write is acknowledged once it is in the cache; a flush writes the cache to media.
    Back,
    /// A write is acknowledged once it is on media; nothing is ever volatile.
    Through,
}

/// An injected error: EIO for `op` on the sectors `sectors = "START-END"` (512-byte sectors,
/// END exclusive) or with `probability` per request.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorRule {
    /// "read", "write", "flush" or "any".
    pub op: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sectors: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probability: Option<f64>,
}

/// The emulated disk as written by a user. Durations are text ("2ms", "150us"), sizes and
/// rates binary sizes ("64MiB"; a rate is bytes per second).
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EmuSpec {
    pub model: Option<ModelKind>,
    /// fixed, ssd: service time of a read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency: Option<String>,
    /// fixed: service time of a write; ssd: program latency once the fast cache is used up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency: Option<String>,
    /// fixed: the service time as percentiles instead, e.g. { "50" = "1ms", "99" = "8ms" }
    /// (reads and writes; linear between the points).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub latency_percentiles: BTreeMap<String, String>,
    /// hdd: spindle speed (default 7200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// hdd: seek to the next track (default "1ms").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track_seek: Option<String>,
    /// hdd: seek across the whole disk (default "16ms").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_seek: Option<String>,
    /// hdd, ssd: media transfer rate in bytes per second (default 150MiB hdd, 1GiB ssd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_rate: Option<String>,
    /// fixed, ssd: requests served at once (default 1 fixed, 4 ssd; hdd is always 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// ssd: bytes written at `fast_write_latency` before writes fall to `write_latency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_cache: Option<String>,
    /// ssd: program latency while the fast cache lasts (default "20us").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_write_latency: Option<String>,
    /// ssd: bytes per second of idle time by which the used fast cache shrinks (default
    /// "0": it never recovers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_cache_recovery: Option<String>,
    /// "back" or "through" (default "through").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_cache: Option<WriteCacheMode>,
    /// write_cache = "back": its size (default "32MiB").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_size: Option<String>,
    /// A fixed cost of every honoured flush, on top of writing what the cache holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_latency: Option<String>,
    /// Acknowledge flushes without writing the cache (a drive that lies). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_flush: Option<bool>,
    /// Errors injected from the start (more can be switched on at run time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorRule>,
    /// Seed of the model's random numbers (rotational position, probabilities, tears).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// A refused key of an [`EmuSpec`]: `key` is its name inside the table.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecIssue {
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for SpecIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// A fault rule, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    pub op: FaultOp,
    /// Byte range [start, end); None: every offset.
    pub range: Option<(u64, u64)>,
    /// None: always (within the range).
    pub probability: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultOp {
    Read,
    Write,
    Flush,
    Any,
}

impl FaultOp {
    pub fn parse(text: &str) -> Option<FaultOp> {
        Some(match text {
            "read" => FaultOp::Read,
            "write" => FaultOp::Write,
            "flush" => FaultOp::Flush,
            "any" => FaultOp::Any,
            _ => return None,
        })
    }
}

/// The resolved parameters (what the stats file records).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub model: ModelKind,
    pub read_latency_s: f64,
    pub write_latency_s: f64,
    /// (percentile 0..100, seconds), ascending; empty: fixed values.
    pub latency_percentiles: Vec<(f64, f64)>,
    pub rpm: u32,
    pub track_seek_s: f64,
    pub full_seek_s: f64,
    pub transfer_rate: u64,
    pub parallelism: u32,
    pub fast_cache_bytes: u64,
    pub fast_write_latency_s: f64,
    /// Bytes of fast cache freed per second the device is idle (0: never).
    #[serde(default)]
    pub fast_cache_recovery: u64,
    pub write_cache: WriteCacheMode,
    pub cache_size: u64,
    pub flush_latency_s: f64,
    pub ignore_flush: bool,
    pub faults: Vec<Fault>,
    pub seed: u64,
}

/// Most requests served at once.
pub const MAX_PARALLELISM: u32 = 64;
/// Largest volatile cache (it lives in the daemon's memory).
pub const MAX_CACHE: u64 = 1 << 30;

fn issue(key: &str, message: impl Into<String>) -> SpecIssue {
    SpecIssue {
        key: key.into(),
        message: message.into(),
    }
}

/// The longest service time or flush cost a model takes: beyond it a disk hangs rather
/// than serves, and the kernel's timeouts would be what a study measured.
pub const MAX_LATENCY: Duration = Duration::from_secs(10);

fn dur(key: &str, v: &Option<String>, default: f64) -> Result<f64, SpecIssue> {
    match v {
        None => Ok(default),
        Some(t) => {
            let d: Duration = parse_duration(key, t).map_err(|e| issue(key, e.reason))?;
            if d > MAX_LATENCY {
                return Err(issue(
                    key,
                    format!("{t:?}: at most {} s", MAX_LATENCY.as_secs()),
                ));
            }
            Ok(d.as_secs_f64())
        }
    }
}

fn size(key: &str, v: &Option<String>, default: u64) -> Result<u64, SpecIssue> {
    match v {
        None => Ok(default),
        Some(t) => parse_size(key, t.trim_end_matches("/s")).map_err(|e| issue(key, e.reason)),
    }
}

/// Parses "START-END" (sectors, END exclusive) into a byte range.
pub fn parse_sectors(text: &str) -> Option<(u64, u64)> {
    let (a, b) = text.split_once('-')?;
    let a: u64 = a.trim().parse().ok()?;
    let b: u64 = b.trim().parse().ok()?;
    (a < b && b <= u64::MAX / 512).then_some((a * 512, b * 512))
}

/// Resolves one error rule (`key` names it in messages).
pub fn resolve_fault(key: &str, r: &ErrorRule) -> Result<Fault, SpecIssue> {
    let op = FaultOp::parse(&r.op)
        .ok_or_else(|| issue(key, format!("op {:?}: read, write, flush or any", r.op)))?;
    let range = match &r.sectors {
        None => None,
        Some(s) => Some(parse_sectors(s).ok_or_else(|| {
            issue(
                key,
                format!("sectors {s:?}: START-END in 512-byte sectors, START < END"),
            )
        })?),
    };
    if let Some(p) = r.probability {
        if !(p > 0.0 && p <= 1.0) {
            return Err(issue(key, format!("probability {p}: above 0, at most 1")));
        }
    }
    if range.is_none() && r.probability.is_none() {
        return Err(issue(key, "give sectors, probability or both"));
    }
    Ok(Fault {
        op,
        range,
        probability: r.probability,
    })
}

/// Checks an [`EmuSpec`] and resolves the defaults. No side effects.
pub fn validate(s: &EmuSpec) -> Result<Params, SpecIssue> {
    let model = s
        .model
        .ok_or_else(|| issue("model", "required: \"fixed\", \"hdd\" or \"ssd\""))?;
    let only = |key: &str, set: bool, models: &[ModelKind]| -> Result<(), SpecIssue> {
        if set && !models.contains(&model) {
            return Err(issue(
                key,
                format!(
                    "does not apply to model = {:?}",
                    format!("{model:?}").to_lowercase()
                ),
            ));
        }
        Ok(())
    };
    use ModelKind::*;
    only("read_latency", s.read_latency.is_some(), &[Fixed, Ssd])?;
    only("write_latency", s.write_latency.is_some(), &[Fixed, Ssd])?;
    only(
        "latency_percentiles",
        !s.latency_percentiles.is_empty(),
        &[Fixed],
    )?;
    only("rpm", s.rpm.is_some(), &[Hdd])?;
    only("track_seek", s.track_seek.is_some(), &[Hdd])?;
    only("full_seek", s.full_seek.is_some(), &[Hdd])?;
    only("transfer_rate", s.transfer_rate.is_some(), &[Hdd, Ssd])?;
    only("parallelism", s.parallelism.is_some(), &[Fixed, Ssd])?;
    only("fast_cache", s.fast_cache.is_some(), &[Ssd])?;
    only("fast_write_latency", s.fast_write_latency.is_some(), &[Ssd])?;
    only(
        "fast_cache_recovery",
        s.fast_cache_recovery.is_some(),
        &[Ssd],
    )?;
    let (rl, wl) = match model {
        Ssd => (100e-6, 1e-3),
        _ => (0.0, 0.0),
    };
    let read_latency_s = dur("read_latency", &s.read_latency, rl)?;
    let write_latency_s = dur("write_latency", &s.write_latency, wl)?;
    if !s.latency_percentiles.is_empty() && (s.read_latency.is_some() || s.write_latency.is_some())
    {
        return Err(issue(
            "latency_percentiles",
            "give either latency_percentiles or read_latency/write_latency",
        ));
    }
    let mut pct = Vec::new();
    for (k, v) in &s.latency_percentiles {
        let key = format!("latency_percentiles.{k}");
        let p: f64 = k
            .parse()
            .ok()
            .filter(|p: &f64| (0.0..=100.0).contains(p))
            .ok_or_else(|| issue(&key, "a percentile from 0 to 100"))?;
        let t = dur(&key, &Some(v.clone()), 0.0)?;
        pct.push((p, t));
    }
    pct.sort_by(|a, b| a.0.total_cmp(&b.0));
    if pct.windows(2).any(|w| w[1].1 < w[0].1) {
        return Err(issue(
            "latency_percentiles",
            "times must not fall as the percentile rises",
        ));
    }
    let rpm = s.rpm.unwrap_or(7200);
    if model == Hdd && !(1..=30_000).contains(&rpm) {
        return Err(issue("rpm", format!("{rpm}: from 1 to 30000")));
    }
    let track_seek_s = dur("track_seek", &s.track_seek, 1e-3)?;
    let full_seek_s = dur("full_seek", &s.full_seek, 16e-3)?;
    if full_seek_s < track_seek_s {
        return Err(issue("full_seek", "shorter than track_seek"));
    }
    let default_rate = if model == Ssd { 1 << 30 } else { 150 << 20 };
    let transfer_rate = size("transfer_rate", &s.transfer_rate, default_rate)?;
    if transfer_rate < 4096 {
        return Err(issue("transfer_rate", "at least 4KiB (per second)"));
    }
    let parallelism = match model {
        Hdd => 1,
        Ssd => s.parallelism.unwrap_or(4),
        Fixed => s.parallelism.unwrap_or(1),
    };
    if !(1..=MAX_PARALLELISM).contains(&parallelism) {
        return Err(issue(
            "parallelism",
            format!("{parallelism}: from 1 to {MAX_PARALLELISM}"),
        ));
    }
    let fast_cache_bytes = size("fast_cache", &s.fast_cache, 0)?;
    let fast_write_latency_s = dur("fast_write_latency", &s.fast_write_latency, 20e-6)?;
    let fast_cache_recovery = size("fast_cache_recovery", &s.fast_cache_recovery, 0)?;
    if fast_cache_recovery > 0 && fast_cache_bytes == 0 {
        return Err(issue(
            "fast_cache_recovery",
            "needs a fast_cache to recover (give fast_cache too)",
        ));
    }
    let write_cache = s.write_cache.unwrap_or(WriteCacheMode::Through);
    if write_cache == WriteCacheMode::Through && s.cache_size.is_some() {
        return Err(issue(
            "cache_size",
            "needs write_cache = \"back\" (a write-through disk holds nothing volatile)",
        ));
    }
    let cache_size = size("cache_size", &s.cache_size, 32 << 20)?;
    if write_cache == WriteCacheMode::Back && !(4096..=MAX_CACHE).contains(&cache_size) {
        return Err(issue("cache_size", "from 4KiB to 1GiB"));
    }
    let flush_latency_s = dur("flush_latency", &s.flush_latency, 0.0)?;
    let mut faults = Vec::new();
    for (i, r) in s.errors.iter().enumerate() {
        faults.push(resolve_fault(&format!("errors[{i}]"), r)?);
    }
    Ok(Params {
        model,
        read_latency_s,
        write_latency_s,
        latency_percentiles: pct,
        rpm,
        track_seek_s,
        full_seek_s,
        transfer_rate,
        parallelism,
        fast_cache_bytes,
        fast_write_latency_s,
        fast_cache_recovery,
        write_cache,
        cache_size: if write_cache == WriteCacheMode::Back {
            cache_size
        } else {
            0
        },
        flush_latency_s,
        ignore_flush: s.ignore_flush.unwrap_or(false),
        faults,
        seed: s.seed.unwrap_or(0x10_1ab),
    })
}

impl Params {
    /// One line for reports: "emulated hdd 7200 rpm, write cache back 32 MiB".
    pub fn summary(&self) -> String {
        let m = match self.model {
            ModelKind::Fixed if !self.latency_percentiles.is_empty() => {
                let pts: Vec<String> = self
                    .latency_percentiles
                    .iter()
                    .map(|(p, t)| format!("p{p}={:.3}ms", t * 1e3))
                    .collect();
                format!("fixed latency {}", pts.join(" "))
            }
            ModelKind::Fixed => format!(
                "fixed latency read {:.3} ms write {:.3} ms",
                self.read_latency_s * 1e3,
                self.write_latency_s * 1e3
            ),
            ModelKind::Hdd => format!("hdd {} rpm", self.rpm),
            ModelKind::Ssd if self.fast_cache_bytes > 0 => format!(
                "ssd x{}, fast cache {} MiB{}",
                self.parallelism,
                self.fast_cache_bytes >> 20,
                if self.fast_cache_recovery > 0 {
                    format!(
                        " recovering {} MiB/s idle",
                        self.fast_cache_recovery as f64 / (1u64 << 20) as f64
                    )
                } else {
                    String::new()
                }
            ),
            ModelKind::Ssd => format!("ssd x{}", self.parallelism),
        };
        let c = match self.write_cache {
            WriteCacheMode::Back => format!(
                "write-back cache {} MiB{}",
                self.cache_size >> 20,
                if self.ignore_flush {
                    ", flushes ignored"
                } else {
                    ""
                }
            ),
            WriteCacheMode::Through => "write-through".into(),
        };
        format!("emulated {m}, {c}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> EmuSpec {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn defaults_and_refusals() {
        let p = validate(&spec(r#"{"model":"hdd"}"#)).unwrap();
        assert_eq!((p.rpm, p.parallelism, p.cache_size), (7200, 1, 0));
        let e = validate(&spec(r#"{"model":"hdd","read_latency":"1ms"}"#)).unwrap_err();
        assert_eq!(e.key, "read_latency");
        let e = validate(&spec(r#"{"model":"fixed","cache_size":"1MiB"}"#)).unwrap_err();
        assert_eq!(e.key, "cache_size");
        let e = validate(&spec(r#"{}"#)).unwrap_err();
        assert_eq!(e.key, "model");
        let e = validate(&spec(
            r#"{"model":"fixed","errors":[{"op":"read","sectors":"9-3"}]}"#,
        ))
        .unwrap_err();
        assert_eq!(e.key, "errors[0]");
        let e = validate(&spec(
            r#"{"model":"fixed","latency_percentiles":{"50":"2ms","99":"1ms"}}"#,
        ))
        .unwrap_err();
        assert_eq!(e.key, "latency_percentiles");
        let e = validate(&spec(r#"{"model":"ssd","parallelism":0}"#)).unwrap_err();
        assert_eq!(e.key, "parallelism");
    }

    #[test]
    fn sectors_parse() {
        assert_eq!(parse_sectors("2-4"), Some((1024, 2048)));
        assert_eq!(parse_sectors("4-4"), None);
        assert_eq!(parse_sectors("x"), None);
    }
}
