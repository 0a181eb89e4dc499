//! The one tally of every integrity check: the counts of what was checked (blocks or
//! files), per class, the first failures described, and how long checking took. Every
//! `--verify` path fills one (the block tests' read-back, the fsync probe, metadata's
//! small files, dbench's model, streams), as do `iolab run verify` and `iolab verify`; its
//! JSON is what a test's `extra.verify` holds (see docs/integrity.md).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// Failures described by default; beyond this only the counts grow.
pub const MAX_SAMPLES: usize = 20;

/// What one check counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    #[default]
    Blocks,
    Files,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Blocks => "blocks",
            Unit::Files => "files",
        }
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One block or file that did not read back as written. Which optional fields are set
/// depends on the check: the block checks name the expected generation, the small-file
/// and dbench checks the file, the later checks what was expected and found as text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// dbench: the client whose file it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<u32>,
    /// The file, relative to the work directory (checks of many files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The small file's index in its run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// Byte offset of the block, or in the file of the first byte that is wrong.
    pub offset: u64,
    /// The verdict: stale, zeroed, torn, bit-corruption, misdirected, foreign, ...
    pub class: String,
    /// The generation that had to be there (0: never written, zeros).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_generation: Option<u64>,
    /// The generation found instead, when it is one of the same data's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_generation: Option<u64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expected: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub found: String,
    /// When the check happened: "inline pass 2", "after pass 2", "verify", "read-back",
    /// "ReadX line 8".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// A lost acknowledged write: seconds between the ack and the journal's last record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_before_end_s: Option<f64>,
}

impl Failure {
    /// One indented line: where, which class, what was found and expected, and when it
    /// was acknowledged (journal checks).
    pub fn line(&self) -> String {
        let mut line = format!(
            "  offset {} [{}] {}; expected {} ({})",
            self.offset, self.class, self.found, self.expected, self.phase
        );
        if let Some(s) = self.acked_before_end_s {
            line.push_str(&format!(
                "; acknowledged {s:.3} s before the journal's last record"
            ));
        }
        line
    }
}

/// dbench's counts besides the blocks: what its checks looked at during and after the
/// replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayCounts {
    /// Bytes compared (ReadX and read-back).
    pub checked_bytes: u64,
    /// ReadX calls whose bytes were compared with the model.
    pub reads_checked: u64,
    /// ReadX calls on files the model does not follow (not checked).
    pub reads_unchecked: u64,
    /// WriteX calls that wrote generated content.
    pub writes_stamped: u64,
    /// Files read back whole after the replay, and their bytes.
    pub read_back_files: u64,
    pub read_back_bytes: u64,
    /// Wall time of the final read-back (the longest client's; untimed, after the run).
    #[serde(serialize_with = "round6")]
    pub read_back_seconds: f64,
    /// Files the model stopped following because a write to them failed.
    pub untracked_files: u64,
    /// Clients that skipped the final read-back because the run was stopped.
    pub read_back_skipped: u64,
}

impl ReplayCounts {
    /// Adds another client's counts; the read-back time is the longest.
    fn merge(&mut self, o: &ReplayCounts) {
        self.checked_bytes += o.checked_bytes;
        self.reads_checked += o.reads_checked;
        self.reads_unchecked += o.reads_unchecked;
        self.writes_stamped += o.writes_stamped;
        self.read_back_files += o.read_back_files;
        self.read_back_bytes += o.read_back_bytes;
        self.read_back_seconds = self.read_back_seconds.max(o.read_back_seconds);
        self.untracked_files += o.untracked_files;
        self.read_back_skipped += o.read_back_skipped;
    }
}

/// Failures [`Tally::failure_lines`] prints one by one.
pub const PRINTED_FAILURES: usize = 20;

/// The counts of one or more checks. Serialized, this is `extra.verify`: `unit`,
/// `checked`, `ok`, `failures`, `classes` (count per class, `ok` included) and
/// `failure_samples`, then the timing and the optional fields that are set. A count left
/// out reads back as none (0, empty).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    #[serde(default)]
    pub unit: Unit,
    /// The run id stamped into the data, as 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(default)]
    pub checked: u64,
    #[serde(default)]
    pub ok: u64,
    #[serde(default)]
    pub failures: u64,
    #[serde(default)]
    pub classes: BTreeMap<String, u64>,
    /// The first failures (small files: those of the lowest indexes), at most
    /// `sample_limit`.
    #[serde(default)]
    pub failure_samples: Vec<Failure>,
    /// Checking time outside every measured operation (read-backs, comparisons after the
    /// operations).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "round6_opt"
    )]
    pub seconds: Option<f64>,
    /// Checking time inside the run (content generation and checks between operations,
    /// all threads summed): it lowers the throughput, not any operation's latency.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "round6_opt"
    )]
    pub inline_seconds: Option<f64>,
    /// Block tests: read-backs of the region done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_backs: Option<u64>,
    /// Block tests: blocks whose write had not completed when a pass ended (after an I/O
    /// error), not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_in_flight: Option<u64>,
    /// Blocks: their size, the bytes read, and whether with O_DIRECT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct: Option<bool>,
    /// Small files: their size, whether they carry a header, their directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// dbench's replay counts.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayCounts>,
    /// How many failures are described.
    #[serde(skip, default = "default_limit")]
    pub sample_limit: usize,
}

fn default_limit() -> usize {
    MAX_SAMPLES
}

fn round6<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((v * 1e6).round() / 1e6)
}

fn round6_opt<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_f64((v * 1e6).round() / 1e6),
        None => s.serialize_none(),
    }
}

impl Default for Tally {
    fn default() -> Tally {
        Tally::new(Unit::Blocks)
    }
}

impl Tally {
    pub fn new(unit: Unit) -> Tally {
        Tally {
            unit,
            run_id: None,
            checked: 0,
            ok: 0,
            failures: 0,
            classes: BTreeMap::new(),
            failure_samples: Vec::new(),
            seconds: None,
            inline_seconds: None,
            read_backs: None,
            skipped_in_flight: None,
            block_size: None,
            bytes: None,
            direct: None,
            file_size: None,
            header: None,
            dir: None,
            replay: None,
            sample_limit: MAX_SAMPLES,
        }
    }

    /// Describes up to `limit` failures instead of [`MAX_SAMPLES`].
    pub fn with_sample_limit(mut self, limit: usize) -> Tally {
        self.sample_limit = limit;
        self
    }

    /// Sets the run id (shown as 16 hex digits).
    pub fn with_run_id(mut self, run_id: u64) -> Tally {
        self.run_id = Some(format!("{run_id:016x}"));
        self
    }

    fn count(&mut self, class: &str, n: u64) {
        match self.classes.get_mut(class) {
            Some(c) => *c += n,
            None => {
                self.classes.insert(class.to_string(), n);
            }
        }
    }

    /// `n` more checked and found right.
    pub fn pass(&mut self, n: u64) {
        self.checked += n;
        self.ok += n;
        self.count("ok", n);
    }

    /// One more checked and found wrong; described while there is room.
    pub fn fail(&mut self, f: Failure) {
        self.checked += 1;
        self.failures += 1;
        self.count(&f.class, 1);
        if self.failure_samples.len() < self.sample_limit {
            self.failure_samples.push(f);
        }
    }

    /// `n` more checked and found wrong, all of class `class`: the first are described
    /// (`describe(i)` for the i-th) while there is room, the rest only counted, so a huge
    /// `n` costs no more than the room.
    pub fn fail_many(&mut self, n: u64, class: &str, describe: impl Fn(u64) -> Failure) {
        if n == 0 {
            return;
        }
        let room = self.sample_limit.saturating_sub(self.failure_samples.len()) as u64;
        for i in 0..n.min(room) {
            self.failure_samples.push(describe(i));
        }
        self.checked += n;
        self.failures += n;
        self.count(class, n);
    }

    /// One verdict of class `class`: `ok` counts a pass, anything else a failure, which
    /// `failure` describes only while there is room for it.
    pub fn record(&mut self, ok: bool, class: &str, failure: impl FnOnce() -> Failure) {
        if ok {
            self.pass(1);
        } else if self.failure_samples.len() < self.sample_limit {
            self.fail(failure());
        } else {
            self.checked += 1;
            self.failures += 1;
            self.count(class, 1);
        }
    }

    /// dbench's replay counts, created on first use.
    pub fn replay_mut(&mut self) -> &mut ReplayCounts {
        self.replay.get_or_insert_with(ReplayCounts::default)
    }

    /// Whether every check found what was written.
    pub fn all_ok(&self) -> bool {
        self.failures == 0
    }

    /// Adds the counts of `other` (another thread's, pass's or client's checks). Times
    /// and counts add up, except dbench's read-back time, the longest; small files keep
    /// the failures of the lowest indexes.
    pub fn merge(&mut self, other: Tally) {
        fn add<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        self.checked += other.checked;
        self.ok += other.ok;
        self.failures += other.failures;
        for (k, v) in other.classes {
            *self.classes.entry(k).or_default() += v;
        }
        if self.unit == Unit::Files {
            self.failure_samples.extend(other.failure_samples);
            self.failure_samples.sort_by_key(|s| s.index);
            self.failure_samples.truncate(self.sample_limit);
        } else {
            let room = self.sample_limit.saturating_sub(self.failure_samples.len());
            self.failure_samples
                .extend(other.failure_samples.into_iter().take(room));
        }
        self.seconds = add(self.seconds, other.seconds);
        self.inline_seconds = add(self.inline_seconds, other.inline_seconds);
        self.read_backs = add(self.read_backs, other.read_backs);
        self.skipped_in_flight = add(self.skipped_in_flight, other.skipped_in_flight);
        self.bytes = add(self.bytes, other.bytes);
        match (&mut self.replay, other.replay) {
            (Some(a), Some(b)) => a.merge(&b),
            (a @ None, b) => *a = b,
            (Some(_), None) => {}
        }
        self.run_id = self.run_id.take().or(other.run_id);
        self.block_size = self.block_size.or(other.block_size);
        self.direct = self.direct.or(other.direct);
        self.file_size = self.file_size.or(other.file_size);
        self.header = self.header.or(other.header);
        self.dir = self.dir.take().or(other.dir);
    }

    /// The failure classes with their counts (`ok` left out), as `class count` items.
    /// The first failures one per line (at most [`PRINTED_FAILURES`]), and how many more
    /// the JSON has.
    pub fn failure_lines(&self) -> String {
        let mut out = String::new();
        for f in self.failure_samples.iter().take(PRINTED_FAILURES) {
            out.push_str(&f.line());
            out.push('\n');
        }
        if self.failures > PRINTED_FAILURES as u64 {
            out.push_str(&format!(
                "  ... and {} more (see failure_samples in the JSON)\n",
                self.failures - PRINTED_FAILURES as u64
            ));
        }
        out
    }

    pub fn failed_classes(&self) -> Vec<String> {
        self.classes
            .iter()
            .filter(|(k, _)| k.as_str() != "ok")
            .map(|(k, v)| format!("{k} {v}"))
            .collect()
    }

    /// The one-line summary a run prints and keeps among its notes about the test
    /// `test`: what was checked, how long checking took, and `all ok` or the failures by
    /// class with the first places.
    pub fn summary_line(&self, test: &str) -> String {
        let mut line = format!("verify {test}: {} {}", self.checked, self.unit);
        if let Some(r) = &self.replay {
            line.push_str(&format!(
                " ({}) checked in {} ReadX and {} file(s) read back ({:.2} s untimed; {:.2} s \
                 of content and checks inside the run)",
                iolab_spec::format_bytes(r.checked_bytes),
                r.reads_checked,
                r.read_back_files,
                r.read_back_seconds,
                self.inline_seconds.unwrap_or(0.0),
            ));
        } else if let Some(n) = self.read_backs {
            line.push_str(&format!(
                " checked, {n} read-back(s), {:.2} s untimed",
                self.seconds.unwrap_or(0.0)
            ));
        } else {
            line.push_str(" checked");
            match (self.seconds, self.inline_seconds) {
                (Some(s), _) => line.push_str(&format!(", {s:.3} s comparing")),
                (None, Some(s)) => line.push_str(&format!(", {s:.2} s of checks inside the run")),
                (None, None) => {}
            }
        }
        line.push_str(": ");
        if self.failures == 0 {
            line.push_str("all ok");
            return line;
        }
        let first: Vec<String> = self
            .failure_samples
            .iter()
            .take(5)
            .map(|s| match &s.file {
                Some(f) => format!("{f} byte {}", s.offset),
                None => format!("offset {}", s.offset),
            })
            .collect();
        line.push_str(&format!(
            "{} MISMATCH(ES): {} (first at {})",
            self.failures,
            self.failed_classes().join(", "),
            first.join(", ")
        ));
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(offset: u64, class: &str) -> Failure {
        Failure {
            offset,
            class: class.into(),
            ..Failure::default()
        }
    }

    #[test]
    fn counts_classes_and_keeps_the_first_failures() {
        let mut t = Tally::new(Unit::Blocks).with_sample_limit(2);
        t.pass(3);
        for off in [4096, 8192, 12288] {
            t.fail(failure(off, "stale"));
        }
        assert_eq!((t.checked, t.ok, t.failures), (6, 3, 3));
        assert_eq!(t.classes["ok"], 3);
        assert_eq!(t.classes["stale"], 3);
        assert_eq!(t.failure_samples.len(), 2);
        assert_eq!(t.failed_classes(), ["stale 3"]);
    }

    #[test]
    fn merges_times_and_keeps_the_lowest_file_indexes() {
        let mut a = Tally::new(Unit::Files);
        a.seconds = Some(1.0);
        a.fail(Failure {
            index: Some(7),
            ..failure(0, "zeroed")
        });
        let mut b = Tally::new(Unit::Files);
        b.seconds = Some(0.5);
        b.fail(Failure {
            index: Some(2),
            ..failure(0, "short")
        });
        a.merge(b);
        assert_eq!(a.seconds, Some(1.5));
        assert_eq!(a.failure_samples[0].index, Some(2));
        let mut r = Tally {
            replay: Some(ReplayCounts {
                read_back_seconds: 2.0,
                ..ReplayCounts::default()
            }),
            ..Tally::default()
        };
        r.merge(Tally {
            replay: Some(ReplayCounts {
                read_back_seconds: 1.0,
                reads_checked: 4,
                ..ReplayCounts::default()
            }),
            ..Tally::default()
        });
        let rc = r.replay.unwrap();
        assert_eq!((rc.read_back_seconds, rc.reads_checked), (2.0, 4));
    }

    #[test]
    fn json_has_the_keys_reports_read_and_reads_back() {
        let mut t = Tally::new(Unit::Files).with_run_id(0xab);
        t.seconds = Some(0.123_456_78);
        t.fail(Failure {
            file: Some("d/f1".into()),
            ..failure(10, "zeroed")
        });
        let j = serde_json::to_value(&t).unwrap();
        assert_eq!(j["unit"], "files");
        assert_eq!(j["run_id"], "00000000000000ab");
        assert_eq!(j["failures"], 1);
        assert_eq!(j["classes"]["zeroed"], 1);
        assert_eq!(j["failure_samples"][0]["file"], "d/f1");
        assert_eq!(j["seconds"], 0.123457);
        assert!(j.get("read_backs").is_none() && j.get("reads_checked").is_none());
        let back: Tally = serde_json::from_value(j).unwrap();
        assert_eq!(back.failures, 1);
        assert_eq!(back.replay, None);
        let d = Tally {
            replay: Some(ReplayCounts::default()),
            ..Tally::default()
        };
        let j = serde_json::to_value(&d).unwrap();
        assert_eq!(j["reads_checked"], 0);
        let back: Tally = serde_json::from_value(j).unwrap();
        assert!(back.replay.is_some());
    }

    #[test]
    fn one_summary_line_for_every_check() {
        let mut b = Tally {
            read_backs: Some(2),
            seconds: Some(0.5),
            ..Tally::default()
        };
        b.pass(4);
        assert_eq!(
            b.summary_line("RND4K Q32T1"),
            "verify RND4K Q32T1: 4 blocks checked, 2 read-back(s), 0.50 s untimed: all ok"
        );
        let mut f = Tally::new(Unit::Files);
        f.pass(2);
        f.seconds = Some(0.25);
        f.fail(Failure {
            file: Some("t/f3".into()),
            ..failure(100, "short")
        });
        assert_eq!(
            f.summary_line("read"),
            "verify read: 3 files checked, 0.250 s comparing: 1 MISMATCH(ES): short 1 (first at \
             t/f3 byte 100)"
        );
        let mut d = Tally {
            inline_seconds: Some(1.5),
            replay: Some(ReplayCounts {
                checked_bytes: 32768,
                reads_checked: 3,
                read_back_files: 2,
                read_back_seconds: 0.25,
                ..ReplayCounts::default()
            }),
            ..Tally::default()
        };
        d.pass(8);
        assert_eq!(
            d.summary_line("dbench 2 clients"),
            "verify dbench 2 clients: 8 blocks (32 KiB) checked in 3 ReadX and 2 file(s) read \
             back (0.25 s untimed; 1.50 s of content and checks inside the run): all ok"
        );
    }
}
