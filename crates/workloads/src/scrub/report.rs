//! What the scrub test concludes: the counts a correct filesystem reports for the injected
//! corruptions (in the filesystem's own units), the verdict, the table, and the test records.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use iolab_measure::{CpuUsage, DirResult, LatencyHistogram, PassRecord, TestRecord, TimeSeries};
use iolab_spec::{format_bytes, JobSpec, Rw};
use serde::{Deserialize, Serialize};

use super::dataset::{Class, DataFile, ReadOutcome, VerifyOutcome, WriteOutcome};
use super::{FsKind, Injection, Redundancy, ScrubConfig, ScrubRun, ScrubTarget, BLOCK};

/// Scrub results in the filesystem's units; `None` where nothing is compared or reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub detected: Option<u64>,
    pub repaired: Option<u64>,
    pub uncorrectable: Option<u64>,
    /// zfs: bytes the scrub rewrote (sum of the members' "repaired").
    pub repaired_bytes: Option<u64>,
    /// Injections whose overwritten copies read back intact from the members after the
    /// scrub (read raw by iolab, not reported by the filesystem).
    pub restored: Option<u64>,
}

/// Per counter of one member: (expected, reported).
pub type DeviceExpectation = BTreeMap<String, (u64, u64)>;

/// Everything the scrub test found.
#[derive(Debug, Clone)]
pub struct ScrubReport {
    pub target: ScrubTarget,
    pub cfg: ScrubConfig,
    /// The seed that chose file sizes and places (rerun with it to repeat the choice).
    pub seed: u64,
    /// Per class: files, bytes.
    pub classes: BTreeMap<Class, (u64, u64)>,
    pub written: WriteSummary,
    pub injections: Vec<Injection>,
    /// What the counts mean (btrfs sectors, zfs records).
    pub units: String,
    pub expected: Counts,
    pub reported: Counts,
    /// Per member: counter -> (expected, reported); only counters with an expectation.
    pub device_expectations: Vec<(PathBuf, DeviceExpectation)>,
    pub scrub: ScrubRun,
    /// With a foreground reader: a second scrub of the repaired data without it.
    pub scrub_alone: Option<ScrubRun>,
    pub baseline: Option<ReadSummary>,
    pub during: Option<ReadSummary>,
    pub verify: VerifyOutcome,
    /// Dataset offsets where iolab's read must fail with EIO (all copies corrupted).
    pub expected_read_errors: Vec<u64>,
    /// Where the data is not what a correct filesystem leaves (a copy not restored, a bad
    /// block read back, a read error missing or unexpected): exit status 3.
    pub problems: Vec<String>,
    /// Where the filesystem's own counts differ from what was injected, while the data is
    /// as it should be: exit status 4.
    pub miscounts: Vec<String>,
    pub notes: Vec<String>,
}

/// Dataset write totals.
#[derive(Debug, Clone)]
pub struct WriteSummary {
    pub bytes: u64,
    pub seconds: f64,
    writes: LatencyHistogram,
    fsyncs: LatencyHistogram,
}

/// A sequential read.
#[derive(Debug, Clone)]
pub struct ReadSummary {
    pub bytes: u64,
    pub seconds: f64,
    pub passes: u64,
    pub mb_s: f64,
    reads: LatencyHistogram,
}

impl From<ReadOutcome> for ReadSummary {
    fn from(r: ReadOutcome) -> Self {
        ReadSummary {
            mb_s: r.mb_s(),
            bytes: r.bytes,
            seconds: r.seconds,
            passes: r.passes,
            reads: r.reads,
        }
    }
}

pub(crate) struct Inputs<'a> {
    pub target: ScrubTarget,
    pub cfg: ScrubConfig,
    pub files: &'a [DataFile],
    pub written: WriteOutcome,
    pub injections: Vec<Injection>,
    pub restored: u64,
    pub scrub: ScrubRun,
    pub scrub_alone: Option<ScrubRun>,
    pub baseline: Option<ReadOutcome>,
    pub during: Option<ReadOutcome>,
    pub verify: VerifyOutcome,
    pub notes: Vec<String>,
}

/// The btrfs checksum unit: the filesystem's sector size (statfs `f_bsize`), 4 KiB here.
fn btrfs_sector(target: &ScrubTarget) -> u64 {
    iolab_sys::statvfs(&target.mount)
        .ok()
        .map(|s| s.block_size)
        .filter(|&b| b > 0)
        .unwrap_or(BLOCK as u64)
}

pub(crate) fn build(i: Inputs<'_>) -> ScrubReport {
    let mut classes: BTreeMap<Class, (u64, u64)> = BTreeMap::new();
    for f in i.files {
        let e = classes.entry(f.class).or_default();
        e.0 += 1;
        e.1 += f.size;
    }
    let n = i.injections.len() as u64;
    let all = i.cfg.all_copies;
    // Data copies overwritten per injection (raid5 parity holds no checksummed data).
    let data_copies =
        |inj: &Injection| inj.overwrites.iter().filter(|o| o.checked_content).count() as u64;
    let mut device_expectations = Vec::new();
    let mut expected_read_errors = Vec::new();
    let (units, mut expected, mut reported) = match &i.target.kind {
        FsKind::Btrfs => {
            let sector = btrfs_sector(&i.target);
            let per = i.cfg.corrupt_size.div_ceil(sector);
            let bad: u64 = i.injections.iter().map(|j| per * data_copies(j)).sum();
            let expected = Counts {
                detected: Some(bad),
                repaired: Some(if all { 0 } else { bad }),
                uncorrectable: Some(if all { bad } else { 0 }),
                repaired_bytes: None,
                restored: None,
            };
            let r = &i.scrub.btrfs;
            let g = |k: &str| r.get(k).copied().unwrap_or(0);
            let reported = Counts {
                detected: Some(g("csum_errors") + g("verify_errors") + g("read_errors")),
                repaired: Some(g("corrected_errors")),
                uncorrectable: Some(g("uncorrectable_errors")),
                repaired_bytes: None,
                restored: None,
            };
            for (m, c) in &i.scrub.devices {
                let want: u64 = i
                    .injections
                    .iter()
                    .flat_map(|j| &j.overwrites)
                    .filter(|o| o.checked_content && o.member == *m)
                    .count() as u64
                    * per;
                let got = c.get("corruption_errs").copied().unwrap_or(0);
                let mut e = BTreeMap::new();
                e.insert("corruption_errs".to_string(), (want, got));
                device_expectations.push((m.clone(), e));
            }
            if all {
                for j in &i.injections {
                    expected_read_errors
                        .extend((0..j.len / BLOCK as u64).map(|b| j.offset + b * BLOCK as u64));
                }
            }
            (
                format!(
                    "btrfs checksum errors, one per {} sector per copy read",
                    format_bytes(sector)
                ),
                expected,
                reported,
            )
        }
        FsKind::Zfs { .. } => {
            let z = i.scrub.zfs.clone().unwrap_or_default();
            let leaf = |m: &PathBuf, k: &str| {
                i.scrub
                    .devices
                    .iter()
                    .find(|(d, _)| d == m)
                    .and_then(|(_, c)| c.get(k).copied())
                    .unwrap_or(0)
            };
            let victim = &i.target.members[0];
            let record_bytes: u64 = i
                .injections
                .iter()
                .filter_map(|j| j.record.map(|r| r.1))
                .sum();
            let mirror = i.target.redundancy == Redundancy::Mirror;
            let expected = Counts {
                // Each corruption lies in its own record: one checksum error on the victim.
                // With every copy bad, the count per copy is not fixed (zfs retries), so only
                // the uncorrectable records are compared.
                detected: (!all).then_some(n),
                repaired: None,
                uncorrectable: Some(if all { n } else { 0 }),
                // A mirror rewrites the whole bad record; raidz only the bad column.
                // Compared as zpool status rounds it (3 significant digits).
                repaired_bytes: mirror.then_some(if all {
                    0
                } else {
                    super::tools::zfs_displayed(record_bytes)
                }),
                restored: None,
            };
            let detected: u64 = if all {
                i.target.members.iter().map(|m| leaf(m, "cksum")).sum()
            } else {
                leaf(victim, "cksum")
            };
            let reported = Counts {
                detected: Some(detected),
                // zfs counts no repaired records: "repaired bytes" and iolab's own reading of
                // the member say what was rewritten.
                repaired: None,
                uncorrectable: z.scrub_errors,
                repaired_bytes: Some(
                    i.target
                        .members
                        .iter()
                        .map(|m| leaf(m, "repaired_bytes"))
                        .sum(),
                ),
                restored: None,
            };
            if !all {
                for m in &i.target.members {
                    let want = if m == victim { n } else { 0 };
                    let mut e = BTreeMap::new();
                    e.insert("cksum".to_string(), (want, leaf(m, "cksum")));
                    device_expectations.push((m.clone(), e));
                }
            } else {
                // zfs fails the whole record: every block of it reads as EIO.
                for j in &i.injections {
                    if let Some((rec, size)) = j.record {
                        let file_base = j.offset - j.file_offset;
                        let start = rec * size;
                        expected_read_errors
                            .extend((start..start + size).step_by(BLOCK).map(|o| file_base + o));
                    }
                }
            }
            (
                "zfs records: checksum errors on the member's CKSUM column, records the scrub \
                 could not repair (\"with N errors\"), bytes repaired"
                    .to_string(),
                expected,
                reported,
            )
        }
    };
    expected.restored = Some(if all { 0 } else { n });
    reported.restored = Some(i.restored);
    expected_read_errors.sort_unstable();
    expected_read_errors.dedup();
    // Data problems: what iolab itself reads differs from what a correct filesystem leaves.
    let mut problems = Vec::new();
    // Report problems: the filesystem's own counts differ from what was injected.
    let mut miscounts = Vec::new();
    if n < u64::from(i.cfg.corrupt) {
        problems.push(format!("injected {n} of {} corruptions", i.cfg.corrupt));
    }
    if let Some(f) = &i.scrub.failure {
        problems.push(format!("the scrub failed: {f}"));
    }
    if expected.restored != reported.restored {
        problems.push(format!(
            "{} of {} corrupted copies read back intact from the members after the scrub \
             ({} expected)",
            i.restored,
            n,
            expected.restored.unwrap_or(0)
        ));
    }
    for (what, e, r) in [
        ("detected", expected.detected, reported.detected),
        ("repaired", expected.repaired, reported.repaired),
        (
            "uncorrectable",
            expected.uncorrectable,
            reported.uncorrectable,
        ),
        (
            "repaired bytes",
            expected.repaired_bytes,
            reported.repaired_bytes,
        ),
    ] {
        if let Some(e) = e {
            if r != Some(e) {
                miscounts.push(format!(
                    "{what}: expected {e}, the filesystem reported {}",
                    r.map_or("nothing".to_string(), |r| r.to_string())
                ));
            }
        }
    }
    for (m, e) in &device_expectations {
        for (k, (want, got)) in e {
            if want != got {
                miscounts.push(format!(
                    "{}: {k} expected {want}, reported {got}",
                    m.display()
                ));
            }
        }
    }
    let v = &i.verify;
    if !v.mismatches.is_empty() {
        let first = &v.mismatches[0];
        problems.push(format!(
            "iolab's verify found {} bad block(s) after the scrub; first: {} at {}: {}",
            v.mismatches.len(),
            first.file.display(),
            first.file_offset,
            first.detail
        ));
    }
    if !v.other_errors.is_empty() {
        problems.push(format!(
            "iolab's verify: {} read error(s) other than EIO; first at dataset offset {}: {}",
            v.other_errors.len(),
            v.other_errors[0].0,
            v.other_errors[0].1
        ));
    }
    let got: BTreeSet<u64> = v.read_errors.iter().copied().collect();
    let want: BTreeSet<u64> = expected_read_errors.iter().copied().collect();
    if got != want {
        let missing = want.difference(&got).count();
        let extra: Vec<u64> = got.difference(&want).copied().collect();
        problems.push(format!(
            "iolab's verify: {} read error(s) (EIO) where {} were expected: {missing} expected \
             one(s) missing, {} unexpected{}",
            got.len(),
            want.len(),
            extra.len(),
            extra
                .first()
                .map(|o| format!(" (first at dataset offset {o})"))
                .unwrap_or_default()
        ));
    }
    ScrubReport {
        target: i.target,
        cfg: i.cfg,
        seed: 0,
        classes,
        written: WriteSummary {
            bytes: i.written.bytes,
            seconds: i.written.seconds,
            writes: i.written.writes,
            fsyncs: i.written.fsyncs,
        },
        injections: i.injections,
        units,
        expected,
        reported,
        device_expectations,
        scrub: i.scrub,
        scrub_alone: i.scrub_alone,
        baseline: i.baseline.map(ReadSummary::from),
        during: i.during.map(ReadSummary::from),
        verify: i.verify,
        expected_read_errors,
        problems,
        miscounts,
        notes: i.notes,
    }
}

impl ScrubReport {
    /// True when the filesystem detected (and, with a good copy left, repaired) exactly what
    /// was injected and iolab's verify agrees.
    pub fn passed(&self) -> bool {
        self.problems.is_empty() && self.miscounts.is_empty()
    }

    /// 0 passed, 3 a data problem ([`ScrubReport::problems`]), 4 only the filesystem's
    /// counts are wrong ([`ScrubReport::miscounts`]).
    pub fn exit_code(&self) -> i32 {
        if !self.problems.is_empty() {
            3
        } else if !self.miscounts.is_empty() {
            4
        } else {
            0
        }
    }

    /// Scrub rate in MB/s (10^6 bytes/s) of the bytes the scrub read.
    pub fn scrub_mb_s(&self) -> Option<f64> {
        self.scrub
            .bytes
            .map(|b| b as f64 / 1e6 / self.scrub.seconds.max(1e-9))
    }

    /// How much slower the foreground reader was during the scrub, in percent.
    pub fn slowdown_pct(&self) -> Option<f64> {
        let (b, d) = (self.baseline.as_ref()?, self.during.as_ref()?);
        (b.mb_s > 0.0 && d.seconds > 0.0).then(|| 100.0 * (1.0 - d.mb_s / b.mb_s))
    }

    fn injected_per_class(&self) -> BTreeMap<Class, u64> {
        let mut m = BTreeMap::new();
        for j in &self.injections {
            *m.entry(j.class).or_default() += 1;
        }
        m
    }

    /// The terminal table.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let t = &self.target;
        let members: Vec<String> = t.members.iter().map(|m| m.display().to_string()).collect();
        let _ = writeln!(
            s,
            "scrub test: {} {} on {} ({})",
            t.fs_name(),
            t.profile,
            members.join(" "),
            if t.members_created_by_iolab {
                "iolab testbed"
            } else {
                "existing filesystem"
            }
        );
        let classes: Vec<String> = self
            .classes
            .iter()
            .map(|(c, (n, b))| format!("{n} {} files ({})", c.name(), format_bytes(*b)))
            .collect();
        let _ = writeln!(
            s,
            "{:<18}{} in {:.2} s ({:.1} MB/s): {}",
            "write dataset",
            format_bytes(self.written.bytes),
            self.written.seconds,
            self.written.bytes as f64 / 1e6 / self.written.seconds.max(1e-9),
            classes.join(", ")
        );
        let per_class: Vec<String> = self
            .injected_per_class()
            .iter()
            .map(|(c, n)| format!("{n} in {} files", c.name()))
            .collect();
        let on: BTreeSet<String> = self
            .injections
            .iter()
            .flat_map(|j| &j.overwrites)
            .map(|o| o.member.display().to_string())
            .collect();
        let _ = writeln!(
            s,
            "{:<18}{} x {} on {} ({}){}",
            "corrupted",
            self.injections.len(),
            format_bytes(self.cfg.corrupt_size),
            on.into_iter().collect::<Vec<_>>().join(" + "),
            per_class.join(", "),
            if self.cfg.all_copies {
                ", every copy"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "{:<18}{:.2} s, {}{}",
            "scrub",
            self.scrub.seconds,
            match (self.scrub.bytes, self.scrub_mb_s()) {
                (Some(b), Some(r)) => format!("{} read, {r:.1} MB/s", format_bytes(b)),
                _ => "bytes read unknown".into(),
            },
            if self.scrub.bytes_source.contains("estimate") {
                " (bytes estimated from zpool list)"
            } else {
                ""
            }
        );
        if let Some(a) = &self.scrub_alone {
            let _ = writeln!(
                s,
                "{:<18}{:.2} s: a second scrub, without the foreground reader ({:.2} s with it)",
                "scrub alone", a.seconds, self.scrub.seconds
            );
        }
        let _ = writeln!(s, "\n{:<16}{:>10}{:>10}", "", "expected", "reported");
        let cell = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
        for (name, e, r) in [
            ("detected", self.expected.detected, self.reported.detected),
            ("repaired", self.expected.repaired, self.reported.repaired),
            (
                "uncorrectable",
                self.expected.uncorrectable,
                self.reported.uncorrectable,
            ),
            (
                "repaired bytes",
                self.expected.repaired_bytes,
                self.reported.repaired_bytes,
            ),
            (
                "restored (iolab)",
                self.expected.restored,
                self.reported.restored,
            ),
        ] {
            if e.is_none() && r.is_none() {
                continue;
            }
            let mark = match (e, r) {
                (Some(e), r) if Some(e) != r => "  <- differs",
                _ => "",
            };
            let _ = writeln!(s, "{name:<16}{:>10}{:>10}{mark}", cell(e), cell(r));
        }
        let _ = writeln!(s, "units: {}", self.units);
        if let Some(z) = &self.scrub.zfs {
            let errors = if z.error_files.is_empty() {
                z.errors.clone()
            } else {
                format!("permanent errors in {} file(s)", z.error_files.len())
            };
            let _ = writeln!(s, "zpool status: {}; errors: {errors}", z.scan);
        }
        // Per-device counters.
        let keys: BTreeSet<&String> = self
            .scrub
            .devices
            .iter()
            .flat_map(|(_, c)| c.keys())
            .collect();
        if !keys.is_empty() {
            let _ = write!(s, "\n{:<24}", "device (change)");
            for k in &keys {
                let _ = write!(s, "{:>16}", k);
            }
            s.push('\n');
            for (m, c) in &self.scrub.devices {
                let _ = write!(s, "{:<24}", m.display());
                for k in &keys {
                    let _ = write!(s, "{:>16}", c.get(*k).copied().unwrap_or(0));
                }
                s.push('\n');
            }
        }
        let v = &self.verify;
        let _ = writeln!(
            s,
            "\n{:<18}{} blocks: {} ok, {} bad, {} read errors (EIO; {} expected)",
            "verify (iolab)",
            v.blocks,
            v.ok,
            v.mismatches.len(),
            v.read_errors.len(),
            self.expected_read_errors.len()
        );
        if let (Some(b), Some(d)) = (&self.baseline, &self.during) {
            let _ = writeln!(
                s,
                "{:<18}{:.1} MB/s without a scrub, {:.1} MB/s during it ({:.2} s of {:.2} s): \
                 {:.0}% slower",
                "foreground read",
                b.mb_s,
                d.mb_s,
                d.seconds,
                self.scrub.seconds,
                self.slowdown_pct().unwrap_or(0.0)
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        if self.passed() {
            let _ = writeln!(
                s,
                "result: PASS: {}",
                if self.cfg.all_copies {
                    "every corruption reported uncorrectable, and iolab's reads fail exactly there"
                } else {
                    "every corruption detected and repaired; iolab reads every block intact"
                }
            );
        } else {
            if self.problems.is_empty() {
                let _ = writeln!(
                    s,
                    "result: MISCOUNTED: the data is as it should be, but the filesystem's \
                     report differs"
                );
            } else {
                let _ = writeln!(s, "result: FAIL");
            }
            for p in self.problems.iter().chain(&self.miscounts) {
                let _ = writeln!(s, "  - {p}");
            }
        }
        s
    }

    /// The run's tests: writing the dataset, the scrub, the foreground reads, the verify.
    pub fn tests(&self) -> Vec<TestRecord> {
        let mut out = Vec::new();
        let w = &self.written;
        out.push(record(
            "write dataset",
            Rw::Write,
            1 << 20,
            PassRecord::new(
                1,
                w.seconds,
                None,
                Some(DirResult::from_histogram(
                    w.bytes,
                    w.seconds,
                    w.writes.clone(),
                )),
                Some(iolab_measure::SyncStats {
                    count: w.fsyncs.count(),
                    lat_us: w.fsyncs.summary_us(),
                }),
                CpuUsage::default(),
                TimeSeries::default(),
            ),
            &WriteExtra {
                classes: self
                    .classes
                    .iter()
                    .map(|(c, &(files, bytes))| ClassExtra {
                        class: c.name(),
                        files,
                        bytes,
                    })
                    .collect(),
                block_size: BLOCK,
                seed: self.seed,
            },
        ));
        let sc = &self.scrub;
        out.push(record(
            "scrub",
            Rw::Read,
            BLOCK as u64,
            read_pass(sc.bytes.unwrap_or(0), sc.seconds, LatencyHistogram::new()),
            &self.scrub_extra(),
        ));
        if let Some(a) = &self.scrub_alone {
            out.push(record(
                "scrub (no foreground)",
                Rw::Read,
                BLOCK as u64,
                read_pass(a.bytes.unwrap_or(0), a.seconds, LatencyHistogram::new()),
                &ScrubAloneExtra {
                    seconds: a.seconds,
                    bytes_scrubbed: a.bytes,
                    bytes_source: &a.bytes_source,
                    failure: a.failure.as_deref(),
                    scrub_slowdown_factor: self.scrub.seconds / a.seconds.max(1e-9),
                },
            ));
        }
        for (name, r) in [
            ("foreground read (during scrub)", &self.during),
            ("foreground read (no scrub)", &self.baseline),
        ] {
            if let Some(r) = r {
                out.push(record(
                    name,
                    Rw::Read,
                    1 << 20,
                    read_pass(r.bytes, r.seconds, r.reads.clone()),
                    &ForegroundExtra {
                        passes_over_file: r.passes,
                        slowdown_pct: name
                            .contains("during")
                            .then(|| self.slowdown_pct())
                            .flatten(),
                    },
                ));
            }
        }
        let v = &self.verify;
        out.push(record(
            "verify",
            Rw::Read,
            1 << 20,
            read_pass(v.bytes, v.seconds, v.reads.clone()),
            &VerifyExtra {
                blocks: v.blocks,
                ok: v.ok,
                mismatches: v
                    .mismatches
                    .iter()
                    .map(|m| MismatchExtra {
                        offset: m.offset,
                        file: &m.file,
                        file_offset: m.file_offset,
                        class: &m.class,
                        detail: &m.detail,
                    })
                    .collect(),
                read_errors: &v.read_errors,
                expected_read_errors: &self.expected_read_errors,
                other_errors: v
                    .other_errors
                    .iter()
                    .map(|(offset, error)| OtherErrorExtra {
                        offset: *offset,
                        error,
                    })
                    .collect(),
            },
        ));
        out
    }

    fn scrub_extra(&self) -> ScrubExtra<'_> {
        let t = &self.target;
        let sc = &self.scrub;
        ScrubExtra {
            workload: "scrub-test",
            fs: t.fs_name(),
            profile: &t.profile,
            members: &t.members,
            members_created_by_iolab: t.members_created_by_iolab,
            all_copies: self.cfg.all_copies,
            corrupt_size: self.cfg.corrupt_size,
            injected: self.injections.len(),
            injected_per_class: self
                .injected_per_class()
                .into_iter()
                .map(|(c, n)| (c.name(), n))
                .collect(),
            injections: self
                .injections
                .iter()
                .map(|j| InjectionExtra {
                    offset: j.offset,
                    len: j.len,
                    file: &j.file,
                    file_offset: j.file_offset,
                    class: j.class.name(),
                    record: j.record.map(|(index, bytes)| RecordExtra { index, bytes }),
                    overwrites: j
                        .overwrites
                        .iter()
                        .map(|o| OverwriteExtra {
                            member: &o.member,
                            offset: o.member_offset,
                            len: o.len,
                            content_checked: o.checked_content,
                        })
                        .collect(),
                })
                .collect(),
            units: &self.units,
            expected: CountsExtra::from(&self.expected),
            reported: CountsExtra::from(&self.reported),
            seconds: sc.seconds,
            bytes_scrubbed: sc.bytes,
            bytes_source: &sc.bytes_source,
            mb_s: self.scrub_mb_s(),
            btrfs_counters: &sc.btrfs,
            btrfs_exit_code: sc.exit_code,
            failure: sc.failure.as_deref(),
            zpool_status: sc.zfs.as_ref().map(|z| ZpoolExtra {
                scan: &z.scan,
                scrub_errors: z.scrub_errors,
                errors: &z.errors,
                error_files: &z.error_files,
            }),
            devices: sc
                .devices
                .iter()
                .map(|(member, counters)| DeviceExtra { member, counters })
                .collect(),
            slowdown_pct: self.slowdown_pct(),
            passed: self.passed(),
            problems: &self.problems,
            miscounts: &self.miscounts,
            notes: &self.notes,
        }
    }
}

/// The "write dataset" test's `extra`: the dataset per class.
#[derive(Debug, Serialize)]
struct WriteExtra {
    classes: Vec<ClassExtra>,
    block_size: usize,
    /// Rerun with it to repeat the choice of file sizes and places.
    seed: u64,
}

/// One class of files of the dataset.
#[derive(Debug, Serialize)]
struct ClassExtra {
    class: &'static str,
    files: u64,
    bytes: u64,
}

/// The "scrub" test's `extra` (docs/scrub-test.md): the target, what was injected, the
/// expected and reported counts, the scrub's own output and the verdict. Times and rates
/// are not rounded.
#[derive(Debug, Serialize)]
struct ScrubExtra<'a> {
    workload: &'static str,
    fs: &'static str,
    profile: &'a str,
    members: &'a [PathBuf],
    members_created_by_iolab: bool,
    all_copies: bool,
    corrupt_size: u64,
    /// Injections (the reports find scrub tests by it, through the descriptor: `ScrubRead`).
    injected: usize,
    /// Per class name: injections.
    injected_per_class: BTreeMap<&'static str, u64>,
    injections: Vec<InjectionExtra<'a>>,
    /// What the counts mean (btrfs sectors, zfs records).
    units: &'a str,
    expected: CountsExtra,
    reported: CountsExtra,
    seconds: f64,
    bytes_scrubbed: Option<u64>,
    bytes_source: &'a str,
    mb_s: Option<f64>,
    btrfs_counters: &'a BTreeMap<String, u64>,
    btrfs_exit_code: Option<i32>,
    failure: Option<&'a str>,
    zpool_status: Option<ZpoolExtra<'a>>,
    devices: Vec<DeviceExtra<'a>>,
    slowdown_pct: Option<f64>,
    passed: bool,
    problems: &'a [String],
    miscounts: &'a [String],
    notes: &'a [String],
}

/// One injected corruption.
#[derive(Debug, Serialize)]
struct InjectionExtra<'a> {
    /// Dataset offset of the first corrupted block.
    offset: u64,
    len: u64,
    file: &'a Path,
    file_offset: u64,
    class: &'static str,
    /// zfs: the record holding the range; null elsewhere.
    record: Option<RecordExtra>,
    overwrites: Vec<OverwriteExtra<'a>>,
}

/// zfs: the record (index in the file) and its size.
#[derive(Debug, Serialize)]
struct RecordExtra {
    index: u64,
    bytes: u64,
}

/// One range of a member overwritten for an injection.
#[derive(Debug, Serialize)]
struct OverwriteExtra<'a> {
    member: &'a Path,
    /// Offset in the member.
    offset: u64,
    len: u64,
    content_checked: bool,
}

/// The keys of [`ScrubExtra`] its descriptor reads back (`run.rs`): what was injected, the
/// counts and the verdict.
#[derive(Debug, Deserialize)]
pub(crate) struct ScrubRead {
    pub injected: Option<u64>,
    #[serde(default)]
    pub passed: bool,
    #[serde(default)]
    pub expected: CountsExtra,
    #[serde(default)]
    pub reported: CountsExtra,
    #[serde(default)]
    pub problems: Vec<String>,
    #[serde(default)]
    pub miscounts: Vec<String>,
}

impl ScrubRead {
    /// A test's `extra`, when it reads as the scrub test's.
    pub(crate) fn of(t: &TestRecord) -> Option<ScrubRead> {
        ScrubRead::deserialize(&t.extra).ok()
    }
}

/// [`Counts`] as the extra names them (a count left out reads back as none).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct CountsExtra {
    detected: Option<u64>,
    repaired: Option<u64>,
    uncorrectable: Option<u64>,
    repaired_bytes: Option<u64>,
    restored_on_member: Option<u64>,
}

impl From<CountsExtra> for iolab_measure::workload::ScrubCounts {
    fn from(c: CountsExtra) -> Self {
        iolab_measure::workload::ScrubCounts {
            detected: c.detected,
            repaired: c.repaired,
            repaired_bytes: c.repaired_bytes,
            uncorrectable: c.uncorrectable,
            restored_on_member: c.restored_on_member,
        }
    }
}

impl From<&Counts> for CountsExtra {
    fn from(c: &Counts) -> Self {
        CountsExtra {
            detected: c.detected,
            repaired: c.repaired,
            uncorrectable: c.uncorrectable,
            repaired_bytes: c.repaired_bytes,
            restored_on_member: c.restored,
        }
    }
}

/// zfs: the parts of `zpool status` kept.
#[derive(Debug, Serialize)]
struct ZpoolExtra<'a> {
    scan: &'a str,
    scrub_errors: Option<u64>,
    errors: &'a str,
    error_files: &'a [String],
}

/// One member's counters, after minus before.
#[derive(Debug, Serialize)]
struct DeviceExtra<'a> {
    member: &'a Path,
    counters: &'a BTreeMap<String, u64>,
}

/// The "scrub (no foreground)" test's `extra`: the second scrub, without the reader.
#[derive(Debug, Serialize)]
struct ScrubAloneExtra<'a> {
    seconds: f64,
    bytes_scrubbed: Option<u64>,
    bytes_source: &'a str,
    failure: Option<&'a str>,
    /// The first scrub's time over this one's.
    scrub_slowdown_factor: f64,
}

/// The foreground read tests' `extra`.
#[derive(Debug, Serialize)]
struct ForegroundExtra {
    passes_over_file: u64,
    /// The read during the scrub: its slowdown against the read without (null otherwise).
    slowdown_pct: Option<f64>,
}

/// The "verify" test's `extra`: reading every block of the dataset back.
#[derive(Debug, Serialize)]
struct VerifyExtra<'a> {
    blocks: u64,
    ok: u64,
    mismatches: Vec<MismatchExtra<'a>>,
    /// Dataset offsets whose read failed with EIO.
    read_errors: &'a [u64],
    /// Dataset offsets whose read must fail (all copies corrupted).
    expected_read_errors: &'a [u64],
    other_errors: Vec<OtherErrorExtra<'a>>,
}

/// A block read back with the wrong content.
#[derive(Debug, Serialize)]
struct MismatchExtra<'a> {
    offset: u64,
    file: &'a Path,
    file_offset: u64,
    class: &'a str,
    detail: &'a str,
}

/// A read error other than EIO.
#[derive(Debug, Serialize)]
struct OtherErrorExtra<'a> {
    offset: u64,
    error: &'a str,
}

/// A one-pass read of `bytes` in `seconds`.
fn read_pass(bytes: u64, seconds: f64, hist: LatencyHistogram) -> PassRecord {
    PassRecord::new(
        1,
        seconds,
        Some(DirResult::from_histogram(bytes, seconds, hist)),
        None,
        None,
        CpuUsage::default(),
        TimeSeries::default(),
    )
}

fn record(name: &str, rw: Rw, bs: u64, pass: PassRecord, extra: &impl Serialize) -> TestRecord {
    let passes = vec![pass];
    TestRecord {
        name: name.to_string(),
        group: "scrub-test".to_string(),
        job: JobSpec::new(rw, bs, 1, 1),
        summary: iolab_stats::summarize(&passes, iolab_stats::Score::Median),
        passes,
        extra: serde_json::to_value(extra).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Mismatch, Overwrite, PoolStatusFacts, ScrubRun};
    use super::*;
    use crate::common::assert_keys;

    fn report() -> ScrubReport {
        let member = PathBuf::from("/tmp/m0.img");
        let scrub = ScrubRun {
            seconds: 2.5,
            bytes: Some(64 << 20),
            bytes_source: "zpool status".into(),
            btrfs: BTreeMap::new(),
            exit_code: None,
            failure: None,
            zfs: Some(PoolStatusFacts {
                scan: "scrub repaired 4K".into(),
                scrub_errors: Some(0),
                errors: "No known data errors".into(),
                error_files: Vec::new(),
            }),
            devices: vec![(member.clone(), BTreeMap::from([("CKSUM".to_string(), 1)]))],
        };
        let read = ReadSummary {
            bytes: 8 << 20,
            seconds: 0.5,
            passes: 2,
            mb_s: 16.777216,
            reads: LatencyHistogram::new(),
        };
        let counts = Counts {
            detected: Some(1),
            repaired: Some(1),
            uncorrectable: Some(0),
            repaired_bytes: Some(4096),
            restored: Some(1),
        };
        ScrubReport {
            target: ScrubTarget {
                kind: FsKind::Zfs {
                    pool: "p".into(),
                    dataset: "p/d".into(),
                },
                work_dir: "/p/d".into(),
                mount: "/p".into(),
                members: vec![member.clone(), "/tmp/m1.img".into()],
                redundancy: Redundancy::Mirror,
                profile: "mirror".into(),
                members_created_by_iolab: true,
            },
            cfg: ScrubConfig::default(),
            seed: 42,
            classes: BTreeMap::from([
                (Class::Large, (4, 32 << 20)),
                (Class::Small, (100, 1 << 20)),
            ]),
            written: WriteSummary {
                bytes: 33 << 20,
                seconds: 1.0,
                writes: LatencyHistogram::new(),
                fsyncs: LatencyHistogram::new(),
            },
            injections: vec![Injection {
                offset: 8192,
                len: 4096,
                file: "/p/d/large-1".into(),
                file_offset: 8192,
                class: Class::Large,
                record: Some((0, 131072)),
                overwrites: vec![Overwrite {
                    member: member.clone(),
                    member_offset: 1 << 22,
                    len: 4096,
                    checked_content: true,
                }],
            }],
            units: "zfs records".into(),
            expected: counts,
            reported: counts,
            device_expectations: Vec::new(),
            scrub: scrub.clone(),
            scrub_alone: Some(ScrubRun {
                seconds: 2.0,
                ..scrub
            }),
            baseline: Some(read.clone()),
            during: Some(ReadSummary {
                mb_s: 8.388608,
                seconds: 1.0,
                ..read
            }),
            verify: VerifyOutcome {
                blocks: 8448,
                ok: 8447,
                read_errors: Vec::new(),
                other_errors: vec![(4096, "EINVAL".into())],
                mismatches: vec![Mismatch {
                    offset: 0,
                    file: "/p/d/small-1".into(),
                    file_offset: 0,
                    class: "stale".into(),
                    detail: "generation 1, expected 2".into(),
                }],
                bytes: 33 << 20,
                seconds: 0.25,
                reads: LatencyHistogram::new(),
            },
            expected_read_errors: Vec::new(),
            problems: Vec::new(),
            miscounts: Vec::new(),
            notes: vec!["a note".into()],
        }
    }

    #[test]
    fn the_descriptor_reads_back_the_scrub_tests_verdict_and_counts() {
        use iolab_measure::workload::WorkloadInfo;
        let tests = report().tests();
        let info = &super::super::run::INFO;
        let s = &tests[1];
        let x = &s.extra;
        assert!(info.owns_extra(x));
        let i = info.injection(s).unwrap();
        assert_eq!(Some(i.injected), x["injected"].as_u64());
        assert_eq!(Some(i.passed), x["passed"].as_bool());
        assert_eq!(i.reported.detected, x["reported"]["detected"].as_u64());
        assert_eq!(i.expected.repaired, x["expected"]["repaired"].as_u64());
        let v = info.scrub_verdict(s).unwrap();
        let list = |k: &str| -> Vec<String> { serde_json::from_value(x[k].clone()).unwrap() };
        assert_eq!(
            (v.problems, v.miscounts),
            (list("problems"), list("miscounts"))
        );
        // The other tests carry no injection.
        assert!(info.injection(&tests[0]).is_none());
    }

    #[test]
    fn extras_keep_the_keys_of_the_json_document() {
        let tests = report().tests();
        assert_eq!(tests.len(), 6);
        let x: Vec<&serde_json::Value> = tests.iter().map(|t| &t.extra).collect();
        // In the order of tests/scrub.rs's list of names.
        assert_eq!(tests[2].name, "scrub (no foreground)");
        assert_eq!(tests[3].name, "foreground read (during scrub)");

        assert_keys(x[0], &["classes", "block_size", "seed"]);
        assert_keys(&x[0]["classes"][0], &["class", "files", "bytes"]);
        assert_eq!(x[0]["classes"][1]["class"], "small");
        assert_eq!(x[0]["block_size"], 4096);

        assert_keys(
            x[1],
            &[
                "workload",
                "fs",
                "profile",
                "members",
                "members_created_by_iolab",
                "all_copies",
                "corrupt_size",
                "injected",
                "injected_per_class",
                "injections",
                "units",
                "expected",
                "reported",
                "seconds",
                "bytes_scrubbed",
                "bytes_source",
                "mb_s",
                "btrfs_counters",
                "btrfs_exit_code",
                "failure",
                "zpool_status",
                "devices",
                "slowdown_pct",
                "passed",
                "problems",
                "miscounts",
                "notes",
            ],
        );
        let s = x[1];
        // What crates/report reads to find scrub tests.
        assert_eq!(s["injected"].as_u64(), Some(1));
        assert_eq!(s["fs"], "zfs");
        assert_eq!(s["members"][1], "/tmp/m1.img");
        assert_eq!(s["injected_per_class"], serde_json::json!({"large": 1}));
        assert_keys(
            &s["injections"][0],
            &[
                "offset",
                "len",
                "file",
                "file_offset",
                "class",
                "record",
                "overwrites",
            ],
        );
        assert_eq!(
            s["injections"][0]["record"],
            serde_json::json!({"index": 0, "bytes": 131072})
        );
        assert_keys(
            &s["injections"][0]["overwrites"][0],
            &["member", "offset", "len", "content_checked"],
        );
        assert_eq!(s["injections"][0]["overwrites"][0]["offset"], 1 << 22);
        for c in ["expected", "reported"] {
            assert_keys(
                &s[c],
                &[
                    "detected",
                    "repaired",
                    "uncorrectable",
                    "repaired_bytes",
                    "restored_on_member",
                ],
            );
        }
        assert_keys(
            &s["zpool_status"],
            &["scan", "scrub_errors", "errors", "error_files"],
        );
        assert_keys(&s["devices"][0], &["member", "counters"]);
        assert_eq!(s["devices"][0]["counters"]["CKSUM"], 1);
        assert!(s["failure"].is_null() && s["btrfs_exit_code"].is_null());
        assert_eq!(s["btrfs_counters"], serde_json::json!({}));
        // Not rounded: the old extra did not round these.
        assert_eq!(s["mb_s"].as_f64(), Some((64 << 20) as f64 / 1e6 / 2.5));
        assert_eq!(s["slowdown_pct"].as_f64(), Some(50.0));
        assert_eq!(s["passed"], true);

        assert_keys(
            x[2],
            &[
                "seconds",
                "bytes_scrubbed",
                "bytes_source",
                "failure",
                "scrub_slowdown_factor",
            ],
        );
        assert_eq!(x[2]["scrub_slowdown_factor"], 1.25);
        assert_keys(x[3], &["passes_over_file", "slowdown_pct"]);
        assert_eq!(x[3]["slowdown_pct"], 50.0);
        assert_keys(x[4], &["passes_over_file", "slowdown_pct"]);
        assert!(x[4]["slowdown_pct"].is_null());

        assert_keys(
            x[5],
            &[
                "blocks",
                "ok",
                "mismatches",
                "read_errors",
                "expected_read_errors",
                "other_errors",
            ],
        );
        assert_keys(
            &x[5]["mismatches"][0],
            &["offset", "file", "file_offset", "class", "detail"],
        );
        assert_eq!(
            x[5]["other_errors"],
            serde_json::json!([{"offset": 4096, "error": "EINVAL"}])
        );
    }
}
