//! A parsed job file onto iolab's engine: each job section becomes one test (its
//! [`JobSpec`]), and what iolab keeps once per run (region size, runtime, ramp, write
//! data) must agree between jobs unless `--size`/`--duration` replace it; jobs that differ
//! in engine, its options or direct run each on its own (`JobSpec::io`), and only the
//! jobs that set verify are read back. Every option is either mapped, accepted as report-only (listed in a note),
//! or refused by name at its line; nothing is dropped unsaid.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::options::{self, Kind};
use super::parse::{JobFile, RawOption, Section};
use super::values;
use super::FioError;
use crate::engopt::{self, EngineOpts, Trims, Val};
use crate::job::{AccessLine, DataPattern, EngineKind, JobSpec, Pace, Rw, SyncMode};
use crate::pattern::Pattern;
use crate::units::{format_bytes, MAX_DURATION};

/// What the command line replaces in every job.
#[derive(Debug, Clone, Copy, Default)]
pub struct Overrides {
    /// `--size`: the region, in place of size/filesize.
    pub size: Option<u64>,
    /// `--duration`: the runtime of every job.
    pub duration: Option<Duration>,
}

/// One job section as an iolab test.
#[derive(Debug, Clone, PartialEq)]
pub struct FioJob {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub job: JobSpec,
    /// fio's `steadystate`: the job's pass is judged in rounds until its rule holds.
    pub steady: Option<FioSteady>,
    /// A trim job's `rw` option (its file and line), for a refusal that needs the target.
    pub trim_at: Option<(String, usize)>,
}

/// A job file resolved for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct FioPlan {
    pub jobs: Vec<FioJob>,
    /// The region every job works in (None: the job file gives none).
    pub size: Option<u64>,
    /// Where the job file sets that size (`FILE:LINE: size`), when `--size` does not.
    pub size_at: Option<String>,
    /// How long each job's pass may last (its runtime; the pass ends sooner when a job
    /// that is not time_based has done its bytes).
    pub duration: Duration,
    /// Whether a runtime (or --duration) bounds the passes; else they end by bytes only.
    pub timed: bool,
    pub ramp: Duration,
    pub engine: EngineKind,
    /// The ioengines as the file names them, in order (jobs may name several that run as
    /// one of iolab's engines).
    pub engine_name: String,
    pub direct: bool,
    pub data: DataPattern,
    pub verify: bool,
    /// Every engine option fio names (`fixedbufs`...), as the first job sets it or fio's
    /// default.
    pub engine_opts: EngineOpts,
    /// The jobs differ in engine, its options or direct: each test carries its own
    /// (`JobSpec::io`), and `engine`, `direct` and `engine_opts` above are the first job's.
    pub per_test: bool,
    /// What the run should say about the mapping.
    pub notes: Vec<String>,
}

/// fio's steady-state detection as iolab's `--steady-state`: the job's one pass, after its
/// first `skip` (fio's `ss_ramp`), in rounds of `round` (fio's `ss_interval`, 1 s by
/// default) until the last `window` of them (`ss_dur` / `round`) hold `rule` (fio's
/// criterion, e.g. `iops:10%`), at most `max_rounds` (those the runtime holds after
/// `skip`; fewer than the window: never attained, as in fio).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FioSteady {
    pub rule: String,
    pub round: Duration,
    pub window: u32,
    pub max_rounds: u32,
    /// fio's `ss_ramp`: run this long, unjudged, before the first round.
    pub skip: Duration,
}

pub(super) fn err(o: &RawOption, msg: impl Into<String>) -> FioError {
    FioError::new(&o.file, o.line, o.key.clone(), msg)
}

pub(super) fn val(o: &RawOption) -> Result<&str, FioError> {
    match o.value.as_deref() {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(err(o, "needs a value (key=value)")),
    }
}

/// fio's ioengine when a job names none.
const FIO_DEFAULT_ENGINE: &str = "psync";

/// The engine whose option fio's `key` is (io_uring's `fixedbufs`, e4defrag's `donorname`).
fn engine_of_option(key: &str) -> Option<EngineKind> {
    engopt::engines()
        .iter()
        .find(|d| d.fio_options.contains(&key))
        .map(|d| d.kind)
        .or_else(|| engopt::by_fio_name(key).map(|(owner, _)| owner))
}

/// What one job runs with: its engine (after libaio's buffered fallback), direct, every
/// engine option (its owner, key and value, fio's default where the job sets none) and
/// verify (None: the job does not write).
struct PerJob {
    engine: EngineKind,
    direct: bool,
    opts: Vec<(EngineKind, &'static str, Val)>,
    verify: Option<bool>,
}

/// Where a value was first set: the value, its job, and the option's file and line.
type First<T> = (T, String, Option<(String, usize)>);

/// A value that must be the same for every job: the first job's, or an error at the
/// option that differs.
struct Agree<T> {
    what: &'static str,
    hint: &'static str,
    first: Option<First<T>>,
}

impl<T: PartialEq + std::fmt::Debug + Clone> Agree<T> {
    fn new(what: &'static str, hint: &'static str) -> Self {
        Agree {
            what,
            hint,
            first: None,
        }
    }

    fn put(
        &mut self,
        v: T,
        job: &Section,
        at: Option<&RawOption>,
        show: impl Fn(&T) -> String,
    ) -> Result<(), FioError> {
        match &self.first {
            None => {
                let loc = at.map(|o| (o.file.clone(), o.line));
                self.first = Some((v, job.name.clone(), loc));
                Ok(())
            }
            Some((f, fname, floc)) if *f != v => {
                let (file, line) = at
                    .map(|o| (o.file.clone(), o.line))
                    .unwrap_or((job.file.clone(), job.line));
                let first_at = floc
                    .as_ref()
                    .map(|(f, l)| format!(" ({f}:{l})"))
                    .unwrap_or_default();
                Err(FioError::new(
                    &file,
                    line,
                    self.what,
                    format!(
                        "job {} has {} and job {fname}{first_at} {}; iolab runs the jobs of one \
                         file with one {}{}",
                        job.name,
                        show(&v),
                        show(f),
                        self.what,
                        self.hint
                    ),
                ))
            }
            Some(_) => Ok(()),
        }
    }

    fn get(self) -> Option<T> {
        self.first.map(|(v, _, _)| v)
    }
}

/// The effective options of job `idx`: every [global] before it, then its own; a later
/// setting of the same option wins.
pub(super) fn effective(sections: &[Section], idx: usize) -> HashMap<&str, &RawOption> {
    let mut m = HashMap::new();
    for (i, s) in sections.iter().enumerate() {
        if i == idx || (i < idx && s.is_global()) {
            for o in &s.options {
                m.insert(options::canonical(&o.key), o);
            }
        }
    }
    m
}

/// Refuses every option iolab does not take, at its line, with a near miss named.
fn check_known(file: &JobFile) -> Result<Vec<String>, FioError> {
    // An engine iolab cannot emulate is what blocks a job file, whatever its other options.
    for o in file.sections.iter().flat_map(|s| &s.options) {
        if o.key == "ioengine" {
            if let Some(v) = o.value.as_deref().map(str::trim) {
                if unemulable(v) {
                    return Err(err(o, refuse_engine(v)));
                }
            }
        }
    }
    // So is a zoned device's mode, before the options only it takes.
    for o in file.sections.iter().flat_map(|s| &s.options) {
        if o.key == "zonemode" && o.value.as_deref().map(str::trim) == Some("zbd") {
            return Err(err(o, options::ZBD));
        }
    }
    if let Some(e) = &file.unset {
        return Err(e.clone());
    }
    let mut report_only = Vec::new();
    for s in &file.sections {
        for o in &s.options {
            let key = options::canonical(&o.key);
            match options::kind(key) {
                Kind::Mapped => {}
                Kind::ReportOnly => {
                    if !report_only.iter().any(|k| k == key) {
                        report_only.push(key.to_string());
                    }
                }
                Kind::Unsupported(why) => return Err(err(o, why)),
                Kind::Unknown => {
                    let hint = options::suggest(&o.key)
                        .map(|s| format!("; did you mean {s}?"))
                        .unwrap_or_default();
                    return Err(err(o, format!("not an fio option iolab knows{hint}")));
                }
            }
        }
    }
    Ok(report_only)
}

/// Maps every job of `file` onto iolab tests and the run's shared settings.
pub fn map_jobs(file: &JobFile, ov: Overrides) -> Result<FioPlan, FioError> {
    let report_only = check_known(file)?;
    let job_names: Vec<&str> = file
        .sections
        .iter()
        .filter(|s| !s.is_global())
        .map(|s| s.name.as_str())
        .collect();
    let mut size = Agree::new("size", ": make them equal or give --size");
    let mut size_at: Option<String> = None;
    let mut runtime = Agree::new("runtime", ": make them equal or give --duration");
    let mut ramp = Agree::new("ramp_time", "");
    // Each job's engine, direct, engine options and verify: one run-wide setting when the
    // jobs agree, else each test's own (`JobSpec::io`).
    let mut per_job: Vec<PerJob> = Vec::new();
    let mut data = Agree::new("zero_buffers", "");
    // Every engine's options a job file can name (`engopt`'s catalogue).
    let engine_opts: Vec<_> = engopt::catalogue()
        .filter_map(|(k, o)| o.fio.map(|(name, default)| (k, o, name, default)))
        .collect();
    let mut engine_names: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let mut note = |n: String| {
        if !notes.contains(&n) {
            notes.push(n);
        }
    };
    let mut jobs = Vec::new();
    let mut replaced_paths = Vec::new();
    let mut concurrent: Vec<String> = Vec::new();
    for (idx, sec) in file.sections.iter().enumerate() {
        if sec.is_global() {
            continue;
        }
        let mut m = effective(&file.sections, idx);
        // An engine's option from a [global] section does not reach a job that loads
        // another engine: fio frees the old engine's options when a job changes ioengine.
        let ioengine_name = m
            .get("ioengine")
            .and_then(|o| o.value.as_deref())
            .map_or(FIO_DEFAULT_ENGINE, str::trim)
            .to_string();
        let foreign: Vec<&str> = m
            .iter()
            .filter(|(_, o)| !sec.options.iter().any(|x| std::ptr::eq(x, **o)))
            .filter(|(k, _)| {
                engine_of_option(k).is_some_and(|owner| owner.as_str() != ioengine_name)
            })
            .map(|(k, _)| *k)
            .collect();
        for k in foreign {
            let o = m.remove(k).expect("listed");
            note(format!(
                "{k} ({}:{}) is an {} option, and job {}'s ioengine is {ioengine_name}: not \
                 applied to it, as fio drops an engine's options when a job loads another",
                o.file,
                o.line,
                engine_of_option(k).expect("listed").as_str(),
                sec.name
            ));
        }
        // Every option the mapping looks at, so that none in force goes unread (below).
        let read: RefCell<HashSet<&str>> = RefCell::default();
        let get = |k: &'static str| {
            read.borrow_mut().insert(k);
            m.get(k).copied()
        };
        let flag = |k: &'static str| -> Result<Option<bool>, FioError> {
            get(k)
                .map(|o| values::boolean(o.value.as_deref()).map_err(|e| err(o, e)))
                .transpose()
        };
        let kb_base = match get("kb_base") {
            None => 1024,
            Some(o) => match val(o)? {
                "1024" => 1024,
                "1000" => 1000,
                v => return Err(err(o, format!("'{v}': expected 1024 or 1000"))),
            },
        };
        let sz = |o: &RawOption| values::size(val(o)?, kb_base).map_err(|e| err(o, e));
        let int =
            |o: &RawOption, lo: u64, hi: u64| values::int(val(o)?, lo, hi).map_err(|e| err(o, e));
        let secs =
            |o: &RawOption, unit_us: u64| values::time(val(o)?, unit_us).map_err(|e| err(o, e));

        // Access pattern.
        let trim = get("rw")
            .and_then(|o| o.value.as_deref())
            .map(|v| v.split(':').next().unwrap_or("").trim())
            .is_some_and(|b| b == "trim" || b == "randtrim");
        let (rw, rw_suffix) = match get("rw") {
            None => (Rw::Read, None),
            Some(o) => {
                let v = val(o)?;
                let (base, suffix) = match v.split_once(':') {
                    Some((b, s)) => (b.trim(), Some(s.trim())),
                    None => (v, None),
                };
                // Trims: the job's writes are trims (JobSpec::trim).
                let rw: Rw = match base {
                    "trim" => Rw::Write,
                    "randtrim" => Rw::RandWrite,
                    "trimwrite" | "randtrimwrite" => {
                        return Err(err(
                            o,
                            format!(
                                "rw={base}: fio trims each block and then writes it, two kinds \
                                 of I/O at one offset; iolab's trim jobs only trim (rw=trim, \
                                 randtrim)"
                            ),
                        ))
                    }
                    _ => base
                        .parse()
                        .map_err(|e: crate::SpecError| err(o, format!("'{base}': {}", e.reason)))?,
                };
                (rw, suffix.map(|s| (s, o)))
            }
        };

        // Block sizes: bs (one value, or read,write), bsrange, bssplit.
        let pick = |o: &RawOption, text: &str| -> Result<String, FioError> {
            // "r,w[,t]": the part for the directions this job does.
            let parts: Vec<&str> = text.split(',').map(str::trim).collect();
            if parts.len() > 3 {
                return Err(err(o, format!("'{text}': at most read,write,trim values")));
            }
            let r = parts[0];
            let w = match parts.get(1) {
                Some(w) if !w.is_empty() => *w,
                Some(_) => "",
                None => r,
            };
            // A trim job's size is the third value, else the write one.
            let w = match parts.get(2) {
                Some(t) if trim && !t.is_empty() => *t,
                _ => w,
            };
            match (rw.reads(), rw.writes()) {
                (true, true) if r != w => Err(err(
                    o,
                    format!(
                        "'{text}': different values for reads and writes of a mixed job are not \
                         supported"
                    ),
                )),
                (false, true) => Ok(w.to_string()),
                _ => Ok(r.to_string()),
            }
        };
        let mut bs: u64 = 4096;
        if let Some(o) = get("bs") {
            let t = pick(o, val(o)?)?;
            if !t.is_empty() {
                bs = values::size(&t, kb_base).map_err(|e| err(o, e))?;
            }
            check_bs(o, bs)?;
        }
        // (size lines of a weighted split: size, percent)
        let mut split: Vec<(u64, u8)> = Vec::new();
        if let Some(o) = get("bsrange") {
            let t = pick(o, val(o)?)?;
            let (lo, hi) = t
                .split_once('-')
                .ok_or_else(|| err(o, format!("'{t}': expected MIN-MAX, e.g. 4k-64k")))?;
            let lo = values::size(lo, kb_base).map_err(|e| err(o, e))?;
            let hi = values::size(hi, kb_base).map_err(|e| err(o, e))?;
            check_bs(o, lo)?;
            check_bs(o, hi)?;
            if hi < lo || hi % lo != 0 {
                return Err(err(
                    o,
                    format!(
                        "'{t}': the maximum must be a multiple of the minimum and not below it"
                    ),
                ));
            }
            let n = hi / lo;
            if n == 1 {
                bs = lo;
            } else if 100 % n == 0 {
                // fio draws a multiple of the minimum, uniformly: n sizes of 100/n % each.
                split = (1..=n).map(|k| (k * lo, (100 / n) as u8)).collect();
            } else {
                return Err(err(
                    o,
                    format!(
                        "'{t}' spans {n} sizes; iolab weighs sizes in whole percent, so a range \
                         works when its number of sizes divides 100 (give bssplit instead)"
                    ),
                ));
            }
        }
        // A mixed job's reads and writes may split differently (r,w): then `split` is the
        // reads' and `wsplit` the writes'.
        let mut wsplit: Vec<(u64, u8)> = Vec::new();
        if let Some(o) = get("bssplit") {
            if get("bsrange").is_some() {
                return Err(err(o, "bssplit and bsrange both set; give one"));
            }
            let text = val(o)?;
            let parts: Vec<&str> = text.split(',').map(str::trim).collect();
            match parts.as_slice() {
                [r, w] | [r, w, _] if rw.is_mixed() && !w.is_empty() && r != w => {
                    split = bssplit(o, r, kb_base)?;
                    wsplit = bssplit(o, w, kb_base)?;
                }
                _ => {
                    let t = pick(o, text)?;
                    split = bssplit(o, &t, kb_base)?;
                }
            }
        }
        // blockalign: the offsets of random I/O are multiples of it (an access line's
        // alignment); the default is the smallest block size.
        let mut align_at = None;
        if let Some(o) = get("ba") {
            let t = pick(o, val(o)?)?;
            let a = values::size(&t, kb_base).map_err(|e| err(o, e))?;
            if a == 0 || !a.is_multiple_of(512) || a > 64 << 20 {
                return Err(err(
                    o,
                    format!("{a} bytes: an alignment is a multiple of 512 bytes up to 64 MiB"),
                ));
            }
            let min = split.iter().map(|l| l.0).min().unwrap_or(bs);
            if a != min {
                align_at = Some((a, o));
            }
        }
        let mut job = JobSpec::new(rw, bs, 1, 1);
        // The general job options (`crate::JOB_OPTIONS`), each read by its declaration.
        for jo in crate::JOB_OPTIONS {
            if let Some(o) = get(jo.name) {
                (jo.set)(&mut job, int(o, jo.min, jo.max)?);
            }
        }
        let numjobs = job.numjobs;
        job.trim = trim;

        // rw suffix: sequential skip, or random offsets per N I/Os (only N=1 is fio's default).
        if let Some((s, o)) = rw_suffix {
            if rw.is_random() {
                match values::int(s, 0, u64::MAX) {
                    Ok(0 | 1) => {}
                    _ => {
                        return Err(err(
                            o,
                            format!(
                                "'{s}': a new random offset every N I/Os is not supported \
                                 (only every I/O, :1)"
                            ),
                        ))
                    }
                }
            } else {
                let (neg, mag) = match s.strip_prefix('-') {
                    Some(m) => (true, m),
                    None => (false, s),
                };
                let skip = values::size(mag, kb_base).map_err(|e| err(o, e))?;
                if skip % bs != 0 || !split.is_empty() {
                    return Err(err(
                        o,
                        format!("'{s}': the skip must be a whole number of blocks of a single bs ({bs})"),
                    ));
                }
                let blocks = (skip / bs) as i64;
                job.seq_skip = if neg { -blocks } else { blocks };
            }
        }

        // Mixes: rwmixwrite is the other side of the read share (a job option, read above);
        // the one written later wins, as in fio.
        if let Some(w) = get("rwmixwrite") {
            let r = get(crate::RWMIXREAD.name);
            if r.is_none_or(|r| (&w.file, w.line) > (&r.file, r.line)) {
                (crate::RWMIXREAD.set)(&mut job, 100 - int(w, 0, 100)?);
            }
        }
        let mut random_pct = if rw.is_random() { 100 } else { 0 };
        if let Some(o) = get("percentage_random") {
            let t = pick(o, val(o)?)?;
            random_pct = values::int(&t, 0, 100).map_err(|e| err(o, e))? as u8;
        }
        let mut zipf_at = None;
        if let Some(o) = get("random_distribution") {
            let v = val(o)?;
            if let Some(t) = v.strip_prefix("zipf:") {
                let theta: f64 = t
                    .trim()
                    .parse()
                    .ok()
                    .filter(|t: &f64| *t > 0.0 && *t <= 100.0 && *t != 1.0)
                    .ok_or_else(|| {
                        err(o, format!("'{v}': zipf's exponent is a number above 0, other than 1, up to 100"))
                    })?;
                job.zipf = Some(theta);
                zipf_at = Some(o);
            } else if let Some(z) = v.strip_prefix("zoned:") {
                job.zones = zones(o, z)?;
            } else if v != "random" {
                return Err(err(
                    o,
                    format!(
                        "'{v}': iolab draws random offsets uniformly (random), Zipf-distributed \
                         (zipf:THETA) or by zones of the region (zoned:A/S:...); pareto, normal \
                         and zoned_abs distributions are not supported"
                    ),
                ));
            }
        }
        let mixed_pct = if rw.is_mixed() {
            job.rwmixread
        } else if rw.reads() {
            100
        } else {
            0
        };
        let seq_with_random = random_pct != 0 && random_pct != 100;
        let random_as_seq =
            !rw.is_random() && random_pct == 100 || rw.is_random() && random_pct == 0;
        if !split.is_empty() || seq_with_random || random_as_seq || align_at.is_some() {
            if let Some(o) = zipf_at {
                return Err(err(
                    o,
                    "a Zipf distribution cannot be combined with bssplit, bsrange, blockalign \
                     or percentage_random",
                ));
            }
            if job.seq_skip != 0 {
                return Err(err(
                    get("rw").expect("a skip comes from rw"),
                    "a sequential skip cannot be combined with bssplit, bsrange, blockalign or \
                     percentage_random",
                ));
            }
            if split.is_empty() {
                split.push((bs, 100));
            }
            let align = match align_at {
                Some((a, _)) => a,
                None => split.iter().map(|l| l.0).min().unwrap_or(bs),
            };
            let align = match align_at {
                Some(_) => align,
                None => align.min(wsplit.iter().map(|l| l.0).min().unwrap_or(align)),
            };
            if wsplit.is_empty() {
                job.access = split
                    .iter()
                    .map(|&(size, share)| AccessLine {
                        share,
                        size,
                        read_pct: mixed_pct,
                        random_pct,
                        align,
                    })
                    .collect();
            } else {
                // fio picks the direction by rwmixread, then a size from its split: the same
                // I/Os as lines of one direction each, weighted by both.
                let o = get("bssplit").expect("a split per direction comes from bssplit");
                for (lines, dir_pct, read_pct) in [
                    (&split, mixed_pct as u32, 100u8),
                    (&wsplit, 100 - mixed_pct as u32, 0),
                ] {
                    for &(size, pct) in lines.iter() {
                        let w = dir_pct * pct as u32;
                        if !w.is_multiple_of(100) {
                            return Err(err(
                                o,
                                format!(
                                    "{} at {pct}% of the {} ({dir_pct}% of the I/Os) is {}.{:02}% \
                                     of all I/Os; iolab weighs sizes in whole percent",
                                    format_bytes(size),
                                    if read_pct == 100 { "reads" } else { "writes" },
                                    w / 100,
                                    w % 100
                                ),
                            ));
                        }
                        if w > 0 {
                            job.access.push(AccessLine {
                                share: (w / 100) as u8,
                                size,
                                read_pct,
                                random_pct,
                                align,
                            });
                        }
                    }
                }
            }
            job.bs = split
                .iter()
                .chain(wsplit.iter())
                .map(|l| l.0)
                .max()
                .unwrap_or(bs);
        }

        // fio's strided zones: zonesize bytes in a zone of zonerange, then zoneskip on.
        let zone_keys = ["zonesize", "zonerange", "zoneskip"].map(&get);
        let strided = match get("zonemode") {
            None => zone_keys[0].is_some(),
            Some(o) => match val(o)? {
                "strided" => true,
                "none" => {
                    if let Some(z) = zone_keys[0] {
                        return Err(err(
                            z,
                            "zonemode=none and zonesize do not go together (fio \
                                           refuses them too)",
                        ));
                    }
                    false
                }
                "zbd" => return Err(err(o, options::ZBD)),
                v => return Err(err(o, format!("'{v}': expected none, strided or zbd"))),
            },
        };
        if strided {
            let mut v = [0u64; 3];
            for (i, o) in zone_keys.iter().enumerate() {
                if let Some(o) = o {
                    v[i] = sz(o)?;
                    if !v[i].is_multiple_of(job.bs) || (i < 2 && v[i] == 0) {
                        return Err(err(
                            o,
                            format!(
                                "{}: iolab moves through zones in whole blocks, so this is a \
                                 multiple of bs ({}){}",
                                format_bytes(v[i]),
                                format_bytes(job.bs),
                                if i < 2 { ", not 0" } else { "" }
                            ),
                        ));
                    }
                }
            }
            let Some(at) = zone_keys[0] else {
                let o = get("zonemode").expect("strided is set by zonemode or zonesize");
                return Err(err(
                    o,
                    "zonemode=strided needs zonesize (the bytes done in a zone)",
                ));
            };
            let blocker = [
                (
                    !job.access.is_empty(),
                    "bssplit, bsrange, blockalign or percentage_random",
                ),
                (
                    job.zipf.is_some() || !job.zones.is_empty(),
                    "random_distribution",
                ),
                (job.seq_skip != 0, "a sequential skip (rw=...:N)"),
            ];
            if let Some((_, what)) = blocker.iter().find(|b| b.0) {
                return Err(err(
                    at,
                    format!("strided zones with {what} are not supported"),
                ));
            }
            job.strided = Some(crate::job::Strided {
                size: v[0],
                range: if v[1] == 0 { v[0] } else { v[1] },
                skip: v[2],
            });
        } else if let Some(o) = zone_keys.iter().flatten().next() {
            note(format!(
                "{} (job {}): not applied without zonemode=strided, as in fio",
                o.key, sec.name
            ));
        }

        // Syncs.
        let fsync = get("fsync")
            .map(|o| int(o, 0, u32::MAX as u64))
            .transpose()?;
        let fdatasync = get("fdatasync")
            .map(|o| int(o, 0, u32::MAX as u64))
            .transpose()?;
        match (fsync.unwrap_or(0), fdatasync.unwrap_or(0)) {
            (0, 0) => {}
            (n, 0) => job.fsync_every = n as u32,
            (0, n) => {
                job.fsync_every = n as u32;
                job.sync_mode = SyncMode::Fdatasync;
            }
            _ => {
                return Err(err(
                    get("fdatasync").expect("set"),
                    "fsync and fdatasync both set; give one",
                ))
            }
        }
        job.end_fsync = flag("end_fsync")?.unwrap_or(false);
        if let Some(o) = get("sync") {
            let v = o.value.as_deref().unwrap_or("1");
            if !matches!(v, "0" | "none") {
                return Err(err(
                    o,
                    format!(
                        "'{v}': O_SYNC/O_DSYNC writes are not supported; fsync=1 or fdatasync=1 \
                         flush after every write instead"
                    ),
                ));
            }
        }
        if (job.fsync_every > 0 || job.end_fsync) && !rw.writes() {
            note(format!(
                "job {}: fsync, fdatasync and end_fsync flush writes, and the job only reads",
                sec.name
            ));
            job.fsync_every = 0;
            job.end_fsync = false;
        }

        // Pacing.
        let mut pace = Pace::default();
        // A mixed job: fio limits its reads and its writes separately (r,w; one value for
        // both), and so does iolab.
        let mut dir_rates = [(0u64, 0u64); 2];
        for (key, slot) in [("rate", 0usize), ("rate_iops", 1)] {
            let Some(o) = get(key) else { continue };
            if rw.is_mixed() {
                let text = val(o)?;
                let parts: Vec<&str> = text.split(',').map(str::trim).collect();
                if parts.len() > 3 {
                    return Err(err(o, format!("'{text}': at most read,write,trim values")));
                }
                // One value limits each direction; `r,` only reads, `,w` only writes.
                let both = [parts[0], parts.get(1).copied().unwrap_or(parts[0])];
                for (d, t) in both.into_iter().enumerate() {
                    if t.is_empty() {
                        continue;
                    }
                    let v = if slot == 0 {
                        values::size(t, kb_base).map_err(|e| err(o, e))?
                    } else {
                        values::int(t, 0, 10_000_000).map_err(|e| err(o, e))?
                    };
                    if slot == 0 {
                        dir_rates[d].0 = v;
                    } else {
                        dir_rates[d].1 = v;
                    }
                }
                if !job.access.is_empty() {
                    return Err(err(
                        o,
                        "a mixed job limited per direction draws its sizes from bssplit or \
                         bsrange lines of both directions; iolab paces such a job per \
                         direction only with one block size",
                    ));
                }
                continue;
            }
            let t = pick(o, val(o)?)?;
            let v = if slot == 0 {
                values::size(&t, kb_base).map_err(|e| err(o, e))?
            } else {
                values::int(&t, 0, 10_000_000).map_err(|e| err(o, e))?
            };
            if slot == 0 {
                pace.rate_bytes = v;
            } else {
                pace.rate_iops = v;
            }
        }
        if let Some(o) = get("thinktime") {
            let t = secs(o, 1)?;
            pace.think_us = t.as_micros() as u64;
            pace.think_blocks = get("thinktime_blocks")
                .map(|b| int(b, 1, 1 << 20))
                .transpose()?
                .unwrap_or(1) as u32;
            if let Some(s) = get("thinktime_spin") {
                if secs(s, 1)? != Duration::ZERO {
                    return Err(err(
                        s,
                        "spinning through part of the think time is not supported",
                    ));
                }
            }
        } else if let Some(o) = get("thinktime_blocks").or(get("thinktime_spin")) {
            return Err(err(o, "given without thinktime"));
        }
        if dir_rates != [(0, 0); 2] {
            pace.dir_rates = Some(dir_rates);
        }
        if let Some(o) = get("rate_process") {
            match val(o)? {
                "linear" => {}
                "poisson" if pace.dir_rates.is_some() => {
                    return Err(err(
                        o,
                        "Poisson arrivals per direction of a mixed job are not supported (fio \
                         draws them per direction; iolab for the job's I/Os as one stream)",
                    ))
                }
                "poisson" if pace.rate_bytes > 0 || pace.rate_iops > 0 => pace.poisson = true,
                "poisson" => note(format!(
                    "rate_process=poisson (job {}): paces nothing without rate or rate_iops",
                    sec.name
                )),
                v => return Err(err(o, format!("'{v}': expected linear or poisson"))),
            }
        }
        job.pace = pace;

        // Region and how long: size, filesize, io_size, loops, runtime, time_based.
        // A value is checked even when --size or --duration replaces it: a job file
        // iolab accepts is one it could run as written.
        // fio's file engines: nrfiles files, one I/O each (fiojob::filejobs).
        let ioengine = get("ioengine")
            .and_then(|o| o.value.as_deref())
            .map_or(FIO_DEFAULT_ENGINE, str::trim);
        let file_engine = Some(ioengine).filter(|v| super::filejobs::is_file_engine(v));
        for n in super::filejobs::set_options(ioengine, &get)? {
            note(n);
        }
        let file_set = match file_engine {
            Some(e) => {
                let mixed = !split.is_empty() || !wsplit.is_empty();
                let (r, n) = super::filejobs::region(e, &get, kb_base, bs, mixed, rw)?;
                n.into_iter().for_each(&mut note);
                Some(r)
            }
            None => None,
        };
        let job_size = match get("size").or(get("filesize")) {
            _ if file_set.is_some() => file_set,
            Some(o) => {
                let v = val(o)?;
                let replaced = ov.size.is_some();
                if v.ends_with('%') {
                    if !replaced {
                        return Err(err(
                            o,
                            format!("'{v}': a share of the file or device; give a size or --size"),
                        ));
                    }
                    None
                } else if v.contains('-') && !v.starts_with('-') {
                    if !replaced {
                        return Err(err(o, format!("'{v}': size ranges are not supported")));
                    }
                    None
                } else {
                    Some((sz(o)?, o))
                }
            }
            None => None,
        };
        if let (Some(s), Some(f), None) = (get("size"), get("filesize"), file_engine) {
            if ov.size.is_none() && sz(s)? != sz(f)? {
                return Err(err(
                    f,
                    "filesize differs from size; iolab runs a job on one file of size bytes",
                ));
            }
        }
        let job_size = job_size.filter(|_| ov.size.is_none());
        if let (None, Some((_, o))) = (&size_at, job_size) {
            size_at = Some(format!("{}:{}: {}", o.file, o.line, o.key));
        }
        let region = ov.size.or(job_size.map(|(v, _)| v));
        size.put(region, sec, job_size.map(|(_, o)| o), |v| match v {
            Some(b) => format!("size={}", format_bytes(*b)),
            None => "no size".into(),
        })?;
        // offset, offset_increment: clone i works from offset + i x offset_increment.
        let at_offset = get("offset").map(|o| sz(o).map(|v| (v, o))).transpose()?;
        let step = get("offset_increment")
            .map(|o| sz(o).map(|v| (v, o)))
            .transpose()?;
        if let Some(c) = clone_layout(at_offset, step, region, numjobs, &job, ov.size.is_some())? {
            if c.increment != step.map_or(0, |s| s.0) {
                note(format!(
                    "offset_increment (job {}): {} clones {} apart from {} do not fit in the \
                     region ({}, --size); each clone gets {} of it, from {} + i x {} (aligned as \
                     the job file's increment)",
                    sec.name,
                    numjobs,
                    format_bytes(step.map_or(0, |s| s.0)),
                    format_bytes(c.offset),
                    format_bytes(region.unwrap_or(0)),
                    format_bytes(c.len),
                    format_bytes(c.offset),
                    format_bytes(c.increment)
                ));
            }
            job.clones = Some(c);
        }
        if let Some(o) = get("nrfiles").filter(|_| file_engine.is_none()) {
            if int(o, 1, u32::MAX as u64)? != 1 {
                return Err(err(o, "iolab runs a job on one file (nrfiles=1)"));
            }
        }
        for k in ["filename", "directory"] {
            if let Some(o) = get(k) {
                let shown = format!("{}={}", k, o.value.as_deref().unwrap_or(""));
                if !replaced_paths.contains(&shown) {
                    replaced_paths.push(shown);
                }
            }
        }
        let loops = get("loops")
            .map(|o| int(o, 1, 1_000_000))
            .transpose()?
            .unwrap_or(1);
        let time_based = flag("time_based")?.unwrap_or(false);
        let rt = match get("runtime") {
            Some(o) => Some((secs(o, 1_000_000)?, o)),
            None => None,
        };
        if let Some((d, o)) = rt {
            if d < Duration::from_millis(100) {
                return Err(err(o, "iolab passes last at least 100ms"));
            }
        }
        let rt = rt.filter(|_| ov.duration.is_none());
        let run_for = ov.duration.or(rt.map(|(d, _)| d));
        runtime.put(run_for, sec, rt.map(|(_, o)| o), |v| match v {
            Some(d) => format!("runtime={}s", d.as_secs_f64()),
            None => "no runtime".into(),
        })?;
        if time_based {
            if run_for.is_none() {
                let o = get("time_based").expect("set");
                return Err(err(
                    o,
                    "without runtime fio runs until it is stopped; give runtime or --duration",
                ));
            }
        } else {
            let io = match get("io_size") {
                Some(o) => sz(o)?,
                None => match region {
                    Some(r) => r.saturating_mul(loops),
                    None => {
                        return Err(FioError::new(
                            &sec.file,
                            sec.line,
                            "size",
                            format!(
                                "job {} sets no size (fio would use the whole file or device); \
                                 give size or --size",
                                sec.name
                            ),
                        ))
                    }
                },
            };
            if io < job.bs {
                let o = get("io_size").or(get("size")).or(get("filesize"));
                let (file, line) = o.map_or((sec.file.as_str(), sec.line), |o| (&o.file, o.line));
                return Err(FioError::new(
                    file,
                    line,
                    o.map_or("size", |o| o.key.as_str()),
                    format!("{io} bytes: less than one block of {} bytes", job.bs),
                ));
            }
            job.io_limit = Some(io.saturating_mul(numjobs as u64));
        }
        // Steady state: the rule, the window, the round and the unjudged start (ss_ramp).
        let ss = get("steadystate");
        let ss_dur = get("steadystate_duration");
        let ss_ramp = get("steadystate_ramp_time");
        let ss_interval = get("steadystate_check_interval");
        let ss_dur_v = ss_dur.map(|o| secs(o, 1_000_000)).transpose()?;
        let ss_ramp_v = ss_ramp
            .map(|o| secs(o, 1_000_000))
            .transpose()?
            .unwrap_or_default();
        let round = ss_interval
            .map(|o| secs(o, 1_000_000))
            .transpose()?
            .unwrap_or(Duration::from_secs(1));
        let job_steady = match (ss, ss_dur_v) {
            (Some(o), Some(dur)) if !dur.is_zero() => {
                let rule = steady_rule(o, val(o)?)?;
                let at = ss_dur.expect("set");
                // Rounds are whole 100 ms intervals of the pass's series.
                let whole = |d: Duration| d.as_nanos().is_multiple_of(100_000_000);
                if round < Duration::from_millis(100) || !whole(round) {
                    return Err(err(
                        ss_interval.unwrap_or(at),
                        "a round (ss_interval) is a multiple of 100ms in iolab (its series' \
                         interval)",
                    ));
                }
                if !whole(ss_ramp_v) {
                    return Err(err(
                        ss_ramp.expect("set"),
                        "iolab starts the rounds on its series' 100 ms intervals: give a \
                         multiple of 100ms",
                    ));
                }
                let window = (dur.as_secs_f64() / round.as_secs_f64()).round() as u64;
                let Some(limit) = run_for else {
                    return Err(err(
                        o,
                        "steady-state detection runs until the runtime at most; give runtime or \
                         --duration",
                    ));
                };
                let judged = limit.saturating_sub(ss_ramp_v).as_secs_f64();
                let max_rounds = (judged / round.as_secs_f64() + 1e-9).floor() as u64;
                if !(2..=1000).contains(&window) {
                    return Err(err(
                        at,
                        format!(
                            "the window is {window} rounds of {}s (ss_interval); iolab judges 2 \
                             to 1000",
                            round.as_secs_f64()
                        ),
                    ));
                }
                if max_rounds < window {
                    note(format!(
                        "steadystate (job {}): the runtime ({}s) holds {max_rounds} round(s) \
                         of {}s after ss_ramp, fewer than the window's {window}: steady state \
                         cannot be attained (fio runs such a job for its runtime and reports \
                         it not attained; so does iolab)",
                        sec.name,
                        limit.as_secs_f64(),
                        round.as_secs_f64()
                    ));
                }
                Some(FioSteady {
                    rule,
                    round,
                    window: window as u32,
                    max_rounds: max_rounds.min(1_000_000) as u32,
                    skip: ss_ramp_v,
                })
            }
            (Some(_), _) => {
                note(format!(
                    "steadystate (job {}): without ss_dur fio does not detect steady state (its \
                     default 0 turns it off); not applied",
                    sec.name
                ));
                None
            }
            (None, _) => None,
        };
        if let Some(o) = get("ramp_time") {
            ramp.put(secs(o, 1_000_000)?, sec, Some(o), |d| {
                format!("ramp_time={}s", d.as_secs_f64())
            })?;
        } else {
            ramp.put(Duration::ZERO, sec, None, |_| "no ramp_time".into())?;
        }

        // Engine and buffers: the installed engine that runs fio's name (its description,
        // in its own file, says what it takes).
        let (kind, ename) = {
            let (v, at) = match get("ioengine") {
                None => (FIO_DEFAULT_ENGINE, None),
                Some(o) => (val(o)?, Some(o)),
            };
            let refuse = |msg: String| match at {
                Some(o) => err(o, msg),
                None => FioError::new(&sec.file, sec.line, "ioengine", msg),
            };
            let Some(d) = engopt::by_fio(v) else {
                if unemulable(v) {
                    return Err(refuse(refuse_engine(v)));
                }
                let known: Vec<&str> = engopt::engines()
                    .iter()
                    .flat_map(|d| d.fio.iter().copied())
                    .collect();
                return Err(refuse(format!(
                    "'{v}': not an ioengine iolab knows ({})",
                    known.join(", ")
                )));
            };
            if let Some(why) = d.refuses_reads.filter(|_| rw.reads()) {
                return Err(refuse(format!(
                    "ioengine={v} {why}, and job {} reads (rw={})",
                    sec.name,
                    rw.as_str()
                )));
            }
            (d.kind, v.to_string())
        };
        let mut opts = Vec::with_capacity(engine_opts.len());
        for &(owner, opt, k, default) in &engine_opts {
            let v = match (get(k), opt.default) {
                (None, _) => default,
                (Some(_), Val::Flag(_)) => Val::Flag(flag(k)?.unwrap_or(false)),
                (Some(o), Val::Count(_)) => Val::Count(int(o, 0, opt.max)?),
            };
            if v != default && kind != owner {
                return Err(err(
                    get(k).expect("set"),
                    format!(
                        "an {0} option, and the job's ioengine is not {0}",
                        owner.as_str()
                    ),
                ));
            }
            opts.push((owner, opt.key, v));
        }
        // direct and buffered say the same thing; the later one wins.
        let d = match (get("direct"), get("buffered")) {
            (Some(d), Some(b)) if (&b.file, b.line) > (&d.file, d.line) => {
                (!flag("buffered")?.unwrap_or(true), Some(b))
            }
            (Some(d), _) => (flag("direct")?.unwrap_or(false), Some(d)),
            (None, Some(b)) => (!flag("buffered")?.unwrap_or(true), Some(b)),
            (None, None) => (false, None),
        };
        // Jobs may name different engines that run as the same one of iolab's (libaio
        // without direct=1 runs as psync: Linux AIO completes buffered requests inside
        // io_submit, one at a time).
        let desc = kind.desc();
        let buffered_aio = desc.buffered_fallback.contains(&ename.as_str()) && !d.0;
        let kind = match desc.fallback {
            Some(f) if buffered_aio => f,
            _ => kind,
        };
        // Trims: fio's io_uring and libaio engines issue each one synchronously (its
        // do_io_u_trim, BLKDISCARD), as its sync engines do (the engine's `fallback`);
        // falloc punches a hole; null does nothing.
        let kind = match (kind.desc().trims, kind.desc().fallback) {
            _ if !trim => kind,
            (Trims::Discard | Trims::Own, _) => kind,
            (Trims::No, Some(f)) if f.desc().trims != Trims::No => {
                note(format!(
                    "job {} trims: fio's {ename} engine issues a trim synchronously, one at a \
                     time, so the job runs on iolab's {f} engine",
                    sec.name
                ));
                f
            }
            (Trims::No, _) => {
                let trimming: Vec<&str> = engopt::engines()
                    .iter()
                    .filter(|d| {
                        d.trims != Trims::No
                            || d.fallback.is_some_and(|f| f.desc().trims != Trims::No)
                    })
                    .flat_map(|d| d.fio.iter().copied())
                    .collect();
                return Err(err(
                    get("rw").expect("a trim job names rw"),
                    format!(
                        "ioengine={ename} (iolab's {kind}) does not trim; fio's trims run on {}",
                        crate::or_list(&trimming)
                    ),
                ));
            }
        };
        if trim {
            note(format!(
                "job {}: each I/O is a trim, as fio's: with ioengine=falloc a hole punched \
                 with fallocate(PUNCH_HOLE|KEEP_SIZE), else BLKDISCARD on a block device (a \
                 device iolab may write only), counted as trims (the passes' `trim`)",
                sec.name
            ));
        }
        per_job.push(PerJob {
            engine: kind,
            direct: d.0,
            opts,
            verify: None,
        });
        if buffered_aio {
            note(format!(
                "ioengine={ename} without direct=1: Linux AIO completes buffered requests \
                 inside io_submit, one at a time, so the job runs on iolab's {kind} engine"
            ));
        } else if ename != kind.as_str() {
            note(format!(
                "ioengine={ename} runs as iolab's {} engine",
                kind.as_str()
            ));
        }
        if !engine_names.contains(&ename) {
            engine_names.push(ename.clone());
        }
        let invalidate = flag("invalidate")?.unwrap_or(true);
        // fio's file engines open no file to invalidate.
        job.invalidate = !d.0 && invalidate && file_engine.is_none();
        if job.invalidate {
            note(
                "buffered jobs start by dropping the file's clean cached pages, as fio does \
                 (invalidate=1, its default)"
                    .into(),
            );
        }
        let zero = flag("zero_buffers")?.unwrap_or(false);
        // Partly compressible and duplicate write data, made as fio makes it.
        let mut compress = 0u8;
        if let Some(o) = get("buffer_compress_percentage") {
            compress = int(o, 0, 100)? as u8;
            if zero && compress != 0 && compress != 100 {
                return Err(err(
                    o,
                    "zero_buffers writes zeros, which compress entirely; give one of them",
                ));
            }
        }
        let chunk = match get("buffer_compress_chunk") {
            Some(o) => {
                let c = sz(o)?;
                if c == 0 || c > job.bs {
                    return Err(err(o, format!("{c} bytes: from 1 byte to the block size")));
                }
                c as u32
            }
            None => 512,
        };
        let dedupe = get("dedupe_percentage")
            .map(|o| int(o, 0, 100))
            .transpose()?
            .unwrap_or(0) as u8;
        let working = match get("dedupe_mode") {
            None => false,
            Some(o) => match val(o)? {
                "repeat" => false,
                "working_set" => true,
                v => return Err(err(o, format!("'{v}': expected repeat or working_set"))),
            },
        };
        let ws_pct = get("dedupe_working_set_percentage")
            .map(|o| int(o, 0, 100))
            .transpose()?
            .unwrap_or(5);
        let global = flag("dedupe_global")?.unwrap_or(false);
        if global && !working {
            return Err(err(
                get("dedupe_global").expect("set"),
                "dedupe_global shares a working set, and dedupe_mode is not working_set (as \
                 fio requires)",
            ));
        }
        if (compress != 0 && !(compress == 100 && zero)) || dedupe != 0 {
            let min_bs = job.access.iter().map(|l| l.size).min().unwrap_or(job.bs);
            let working_set = if working {
                let blocks = region.unwrap_or(0).saturating_mul(ws_pct) / 100 / min_bs;
                Some(blocks.max(1))
            } else {
                None
            };
            job.content = Some(crate::job::Content {
                compress_pct: compress,
                chunk,
                dedupe_pct: dedupe,
                working_set,
                global,
            });
            note(format!(
                "job {}: each {chunk}-byte chunk of a write is {}% random bytes then zeros \
                 (buffer_compress_percentage={compress}); {dedupe}% of writes repeat {} \
                 (dedupe_percentage), as fio makes its buffers",
                sec.name,
                100 - compress as u32,
                match working_set {
                    Some(n) if global => format!("one of {n} blocks shared by every job"),
                    Some(n) => format!("one of {n} blocks of the job's own"),
                    None => "the previous unique write".into(),
                }
            ));
        }
        let refill = flag("refill_buffers")?.unwrap_or(false);
        if zero && refill {
            return Err(err(
                get("refill_buffers").expect("set"),
                "zero_buffers and refill_buffers both set",
            ));
        }
        let dp = if zero {
            DataPattern::Zeros
        } else {
            DataPattern::Random
        };
        data.put(dp, sec, get("zero_buffers"), |d| {
            format!("{d:?}").to_lowercase()
        })?;
        // I/O priorities: the job thread's (prioclass, prio) and per I/O (cmdprio_*).
        let class_of = |o: &RawOption, t: &str| -> Result<u8, FioError> {
            values::int(t, 1, 3).map(|v| v as u8).map_err(|e| err(o, e))
        };
        let level_of = |o: &RawOption, t: &str| -> Result<u8, FioError> {
            values::int(t, 0, 7).map(|v| v as u8).map_err(|e| err(o, e))
        };
        if get("prioclass").is_some() || get("prio").is_some() {
            // fio: a level without a class is best effort; a class without a level is 0.
            let class = match get("prioclass") {
                Some(o) => class_of(o, val(o)?)?,
                None => 2,
            };
            let level = match get("prio") {
                Some(o) => level_of(o, val(o)?)?,
                None => 0,
            };
            job.prio.thread = Some(crate::job::Prio::value(class, level));
        }
        let per_dir = |k: &'static str| -> Result<Option<[String; 2]>, FioError> {
            let Some(o) = get(k) else { return Ok(None) };
            let t = val(o)?;
            let parts: Vec<&str> = t.split(',').map(str::trim).collect();
            if parts.len() > 2 {
                return Err(err(o, format!("'{t}': a value, or read,write values")));
            }
            let w = parts
                .get(1)
                .copied()
                .filter(|w| !w.is_empty())
                .unwrap_or(parts[0]);
            Ok(Some([parts[0].to_string(), w.to_string()]))
        };
        let cmd_class = per_dir("cmdprio_class")?;
        let cmd_level = per_dir("cmdprio")?;
        let pct = per_dir("cmdprio_percentage")?;
        let bsp = per_dir("cmdprio_bssplit")?;
        if pct.is_some() || bsp.is_some() {
            let o = get("cmdprio_bssplit")
                .or(get("cmdprio_percentage"))
                .expect("set");
            if pct.is_some() && bsp.is_some() {
                return Err(err(
                    o,
                    "cmdprio_percentage and cmdprio_bssplit both set; give one",
                ));
            }
            if !kind.desc().per_io_prio {
                return Err(err(
                    o,
                    format!(
                        "a priority per I/O goes in each request, which fio's libaio and \
                         io_uring engines and iolab's io_uring do; this job runs on {} (libaio \
                         without direct=1 runs as psync)",
                        kind.as_str()
                    ),
                ));
            }
            for d in 0..2 {
                // fio's defaults: the highest class (realtime), level 0.
                let class = match (&cmd_class, get("cmdprio_class")) {
                    (Some(c), Some(co)) => class_of(co, &c[d])?,
                    _ => 1,
                };
                let level = match (&cmd_level, get("cmdprio")) {
                    (Some(l), Some(lo)) => level_of(lo, &l[d])?,
                    _ => 0,
                };
                let ioprio = crate::job::Prio::value(class, level);
                let rules = &mut job.prio.per_io[d];
                if let Some(p) = &pct {
                    let po = get("cmdprio_percentage").expect("set");
                    let pc = values::int(&p[d], 0, 100).map_err(|e| err(po, e))? as u8;
                    if pc > 0 {
                        rules.push(crate::job::CmdPrio {
                            size: None,
                            pct: pc,
                            ioprio,
                        });
                    }
                }
                if let Some(b) = &bsp {
                    let bo = get("cmdprio_bssplit").expect("set");
                    *rules = cmdprio_bssplit(bo, &b[d], kb_base, ioprio)?;
                }
            }
            note(format!(
                "cmdprio (job {}): each I/O's priority is set in its request as fio sets it; \
                 iolab's latencies are per direction, not split by priority as fio reports them",
                sec.name
            ));
        } else if let Some(o) = get("cmdprio_class").or(get("cmdprio")) {
            // fio's engines ignore a class or level without a share of I/Os to give it to.
            note(format!(
                "{} (job {}): without cmdprio_percentage or cmdprio_bssplit no I/O takes it, as \
                 in fio",
                o.key, sec.name
            ));
        }
        if let Some(o) = get("log_prio") {
            if flag("log_prio")?.unwrap_or(false) {
                note(format!(
                    "log_prio (line {}): fio logs each I/O with its priority; iolab's logs are \
                     windows over a direction's I/Os of every priority, so the last column is 0",
                    o.line
                ));
            }
        }
        // NUMA: the nodes' CPUs for the job's threads, a policy for their buffers; nodes
        // this machine does not have are refused.
        let nodes_of = |o: &RawOption, t: &str| -> Result<Vec<u32>, FioError> {
            let nodes = iolab_sys::numa::parse_list(t).map_err(|e| err(o, e))?;
            let online = iolab_sys::numa::online_nodes();
            if let Some(n) = nodes.iter().find(|n| !online.contains(n)) {
                return Err(err(
                    o,
                    format!(
                        "NUMA node {n} does not exist on this machine (its nodes: {})",
                        online
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                ));
            }
            Ok(nodes)
        };
        let mut numa = crate::job::Numa::default();
        if let Some(o) = get("numa_cpu_nodes") {
            numa.cpu_nodes = nodes_of(o, val(o)?)?;
        }
        if let Some(o) = get("numa_mem_policy") {
            let v = val(o)?;
            let (mode, list) = match v.split_once(':') {
                Some((m, l)) => (m.trim(), Some(l)),
                None => (v.trim(), None),
            };
            if iolab_sys::numa::mem_mode(mode).is_none() {
                return Err(err(
                    o,
                    format!("'{mode}': expected default, prefer, bind, interleave or local"),
                ));
            }
            let nodes = match list {
                Some(l) => nodes_of(o, l)?,
                None => Vec::new(),
            };
            let needs = matches!(mode, "prefer" | "bind" | "interleave");
            if needs == nodes.is_empty() || (mode == "prefer" && nodes.len() != 1) {
                return Err(err(
                    o,
                    format!(
                        "'{v}': prefer takes one node, bind and interleave a list, default \
                         and local none"
                    ),
                ));
            }
            numa.mem_policy = Some((mode.to_string(), nodes));
        }
        if numa != crate::job::Numa::default() {
            job.numa = Some(numa);
        }
        // fio's buffers (mem=): malloc, its default, and the other plain kinds are ordinary
        // pages; the huge kinds are iolab's huge-page pool.
        job.page_buffers = match get("mem") {
            None => true,
            Some(o) => {
                let v = val(o)?;
                match v.split_once(':').map_or(v, |(k, _)| k) {
                    "malloc" | "shm" | "mmap" | "mmapshared" => true,
                    "shmhuge" | "mmaphuge" => {
                        note(format!(
                            "mem={v} (job {}): iolab's buffers are 2 MiB-aligned and asked for \
                             transparent huge pages (madvise), where fio takes hugetlbfs pages",
                            sec.name
                        ));
                        false
                    }
                    _ => {
                        return Err(err(
                            o,
                            format!(
                                "'{v}': iolab's buffers are host memory (malloc, shm, mmap, \
                                 mmapshared: ordinary pages; shmhuge, mmaphuge: huge pages), \
                                 not device memory"
                            ),
                        ))
                    }
                }
            }
        };
        let v = match get("verify") {
            None => false,
            Some(o) => {
                let v = val(o)?;
                let on = !matches!(v, "0" | "null" | "none");
                if on
                    && !matches!(
                        v,
                        "md5"
                            | "crc64"
                            | "crc32c"
                            | "crc32c-intel"
                            | "crc32"
                            | "crc16"
                            | "crc7"
                            | "xxhash"
                            | "sha512"
                            | "sha256"
                            | "sha1"
                            | "sha3-224"
                            | "sha3-256"
                            | "sha3-384"
                            | "sha3-512"
                            | "meta"
                            | "1"
                    )
                    && !(v == "pattern" && get("verify_pattern").is_some())
                {
                    return Err(err(
                        o,
                        format!("'{v}': iolab verifies with its own self-describing blocks, in place of a checksum; 'pattern' and unknown methods are not supported"),
                    ));
                }
                on
            }
        };
        // fio's verify_pattern: writes carry it (with verify set; alone it sets
        // verify=pattern, as in fio), and a job that verifies and only reads checks each
        // read against it.
        let pattern = get("verify_pattern")
            .map(|o| {
                Pattern::parse(val(o)?)
                    .map_err(|e| err(o, e))
                    .map(|p| (p, o))
            })
            .transpose()?;
        let pattern = match (pattern, get("verify")) {
            (Some(_), Some(vo)) if !v => {
                note(format!(
                    "verify_pattern (job {}): not applied with verify={}, as in fio",
                    sec.name,
                    vo.value.as_deref().unwrap_or("")
                ));
                None
            }
            (p, _) => p,
        };
        let v = v || pattern.is_some();
        let do_verify = flag("do_verify")?.unwrap_or(true);
        if let Some((mut pat, o)) = pattern {
            if job.content.is_some() {
                return Err(err(
                    o,
                    "fio fills a verifying job's buffers with the pattern, so compressible or                      duplicate buffers cannot be written as well",
                ));
            }
            if !kind.moves_data() {
                return Err(err(
                    o,
                    format!("ioengine={kind} writes no data, so there is no pattern to write"),
                ));
            }
            if !pat.offsets.is_empty() && !job.access.is_empty() && rw.writes() && do_verify {
                return Err(err(
                    o,
                    "%o with bssplit or bsrange: iolab reads a writing job's region back in \
                     blocks of the smallest size, so the offset it would find is each block's, \
                     not each I/O's as fio writes it",
                ));
            }
            let method = get("verify").and_then(|o| o.value.clone());
            if let Some(m) = method.filter(|m| m != "pattern") {
                note(format!(
                    "verify={m} with verify_pattern: fio also writes its verify header (offset, \
                     time, checksum) every verify_interval bytes; iolab writes the pattern alone \
                     and checks every byte of it, as fio's verify=pattern"
                ));
            }
            if do_verify && rw.reads() && !rw.writes() {
                pat.check_reads = true;
                note(format!(
                    "job {}: every read is checked against verify_pattern {} (fio's verify of a \
                     job that reads); the first byte that differs ends the job, naming its offset",
                    sec.name, pat.text
                ));
            }
            if rw.writes() || pat.check_reads {
                job.pattern = Some(pat);
            }
        }
        if let Some(o) = get("verify_interval") {
            let n = sz(o)?;
            if job.pattern.is_none() {
                return Err(err(
                    o,
                    "iolab checks whole blocks of the job's block size; a smaller verify unit is \
                     not supported (with verify_pattern every byte is checked)",
                ));
            }
            if n == 0 || n > job.bs {
                return Err(err(
                    o,
                    format!("{n} bytes: a verify interval is 1 byte up to the block size"),
                ));
            }
            note(format!(
                "verify_interval={n} (job {}): fio puts a verify header every {n} bytes; iolab \
                 writes no header with verify_pattern and checks every byte",
                sec.name
            ));
        }
        let v = v && do_verify;
        if v && rw.writes() && job.content.is_some() {
            return Err(err(
                get("verify").expect("set"),
                "iolab verifies its own self-describing blocks, so it cannot write fio's \
                 compressible or duplicate buffers and check them",
            ));
        }
        if v && trim {
            return Err(err(
                get("verify").expect("set"),
                "a trim job writes no data, so there is nothing to verify",
            ));
        }
        if v && rw.writes() && !kind.moves_data() {
            return Err(err(
                get("verify").expect("set"),
                format!(
                    "ioengine={} writes no data, so there is nothing to verify",
                    kind.as_str()
                ),
            ));
        }
        if v && rw.writes() && job.pattern.is_some() {
            note(format!(
                "job {}: iolab reads the region back after every pass (its --verify) and \
                 checks every block written against verify_pattern",
                sec.name
            ));
            per_job.last_mut().expect("this job's").verify = Some(true);
        } else if v && rw.writes() {
            note(format!(
                "verify={}: iolab writes self-describing blocks and reads the region back after \
                 every pass (its --verify), in place of fio's checksums",
                get("verify")
                    .and_then(|o| o.value.clone())
                    .unwrap_or_default()
            ));
            per_job.last_mut().expect("this job's").verify = Some(true);
        } else if v && job.pattern.is_none() {
            note(format!(
                "job {}: verify checks what a job writes, and the job only reads",
                sec.name
            ));
        } else if rw.writes() {
            per_job.last_mut().expect("this job's").verify = Some(false);
        }

        // Options accepted with what differs said (docs/fio.md).
        // fio's latency-target search for the depth (engine's worker, as fio's io_u.c).
        if let Some(o) = get("latency_target") {
            let target = secs(o, 1)?;
            let us = |d: Duration| d.as_micros().min(u64::MAX as u128) as u64;
            if target.is_zero() || target > MAX_DURATION {
                return Err(err(o, "from 1us up to a week"));
            }
            let window = match get("latency_window") {
                Some(w) => {
                    let d = secs(w, 1)?;
                    if d < Duration::from_millis(1) || d > MAX_DURATION {
                        return Err(err(w, "from 1ms up to a week"));
                    }
                    d
                }
                // fio's default window is 0: each depth judged at its first check.
                None => Duration::from_millis(1),
            };
            let pct = match get("latency_percentile") {
                Some(p) => {
                    let t = val(p)?;
                    match t.parse::<f64>() {
                        Ok(v) if v > 0.0 && v <= 100.0 => v,
                        _ => return Err(err(p, format!("'{t}': a percentage above 0, up to 100"))),
                    }
                }
                None => 100.0,
            };
            let run = flag("latency_run")?.unwrap_or(false);
            job.lat_target = Some(crate::job::LatTarget {
                target_us: us(target),
                window_us: us(window),
                pct,
                run,
            });
            note(format!(
                "latency_target (job {}): the depth in flight is searched as fio does it: from 1, \
                 doubled while {pct}% of a {}us window's I/Os take at most {}us, bisected \
                 between the last depth that met it and the first that did not, up to \
                 iodepth={}; {}; the pass's figures include the search (fio reports the last \
                 window only) and a note gives the depth found",
                sec.name,
                us(window),
                us(target),
                job.iodepth,
                if run {
                    "with latency_run the depth keeps adjusting to the pass's end"
                } else {
                    "the job ends after one window at the depth found"
                }
            ));
        } else {
            for k in ["latency_window", "latency_percentile", "latency_run"] {
                if let Some(o) = get(k) {
                    note(format!(
                        "{k} (line {}): without latency_target fio searches for no depth; not \
                         applied",
                        o.line
                    ));
                }
            }
        }
        if let Some(o) = get("number_ios") {
            let n = int(o, 1, u64::MAX)?;
            if !job.access.is_empty() && job.access.iter().any(|l| l.size != job.bs) {
                return Err(err(
                    o,
                    "a count of I/Os of mixed sizes; iolab ends a pass after a number of bytes",
                ));
            }
            let bytes = n.saturating_mul(job.bs).saturating_mul(numjobs as u64);
            job.io_limit = Some(job.io_limit.map_or(bytes, |l| l.min(bytes)));
        }
        for k in ["rate_min", "rate_iops_min"] {
            if get(k).is_some() {
                note(format!(
                    "{k} (job {}): fio ends a job that runs slower than this; iolab runs it to \
                     its end (compare the stored MB/s or IOPS with it)",
                    sec.name
                ));
            }
        }
        for k in ["continue_on_error", "ignore_error"] {
            if let Some(o) = get(k) {
                if !matches!(o.value.as_deref(), Some("none" | "0" | "")) {
                    note(format!(
                        "{k}: iolab ends a job at its first I/O error and stores the run as \
                         failed (fio's continue_on_error=none); a run without errors is the same"
                    ));
                }
            }
        }
        if ["exitall", "exitall_on_error", "exit_what"]
            .map(|k| get(k).is_some())
            .contains(&true)
        {
            note(
                "exitall: fio stops the jobs running together when one ends; iolab runs the jobs \
                 one after another, each to its own end"
                    .into(),
            );
        }
        if ["flow", "flow_id", "flow_sleep"]
            .map(|k| get(k).is_some())
            .contains(&true)
        {
            note(
                "flow: fio balances the I/O of jobs that run at the same time; iolab runs the \
                 jobs one after another, so there is nothing to balance"
                    .into(),
            );
        }
        if let Some(o) = get("io_submit_mode") {
            match val(o)? {
                "inline" => {}
                "offload" => note(
                    "io_submit_mode=offload: fio submits from helper threads; iolab submits \
                     from each job's own thread (inline)"
                        .into(),
                ),
                v => return Err(err(o, format!("'{v}': expected inline or offload"))),
            }
        }
        if let Some(o) = get("random_generator") {
            match val(o)? {
                "tausworthe" | "tausworthe64" => {}
                "lfsr" => note(
                    "random_generator=lfsr visits every block once per loop; iolab draws each \
                     offset independently (as fio does with norandommap)"
                        .into(),
                ),
                v => {
                    return Err(err(
                        o,
                        format!("'{v}': expected tausworthe, lfsr or tausworthe64"),
                    ))
                }
            }
        }
        if flag("fill_device")?.unwrap_or(false) {
            note(format!(
                "fill_device (job {}): fio writes until the device or filesystem is full; \
                 iolab writes its region (size or --size) and stops at its end",
                sec.name
            ));
        }
        // A file engine's own files take these in fiojob::filejobs.
        if let Some(o) = get("fallocate").filter(|_| file_engine.is_none()) {
            match val(o)? {
                "none" | "posix" | "keep" | "native" | "truncate" | "0" | "1" => note(format!(
                    "fallocate={}: fio lays out a file it creates this way (with none, the \
                     first writes allocate its blocks); iolab writes its whole test file before \
                     the first test, so every write overwrites allocated blocks",
                    val(o)?
                )),
                v => {
                    return Err(err(
                        o,
                        format!("'{v}': expected none, posix, keep, native, truncate, 0 or 1"),
                    ))
                }
            }
        }
        if file_engine.is_none() && flag("create_on_open")?.unwrap_or(false) {
            note(
                "create_on_open: iolab creates and opens its test file before the first test"
                    .into(),
            );
        }
        if flag("verify_fatal")?.unwrap_or(false) {
            note(
                "verify_fatal: fio ends a job at its first bad block; iolab's read-back checks \
                 every block and counts them all (a job checking verify_pattern on reads ends at \
                 the first)"
                    .into(),
            );
        }
        if let Some(o) = get("verify_async") {
            if int(o, 0, 1024)? > 0 {
                note(
                    "verify_async: fio checks in helper threads while the job runs; iolab reads \
                     the region back after the pass"
                        .into(),
                );
            }
        }
        if get("create_serialize").is_some() {
            note(
                "create_serialize: iolab lays out its one test file before the first job, so \
                 there is no creation to serialize"
                    .into(),
            );
        }
        if flag("verify_dump")?.unwrap_or(false) {
            note(
                "verify_dump: fio writes a failed block's data to files; iolab records each \
                 failure's offset, and what was expected and found, in the run"
                    .into(),
            );
        }
        if get("verify_backlog").is_some() || get("verify_backlog_batch").is_some() {
            note(
                "verify_backlog: fio reads blocks back while it writes; iolab reads the whole \
                 region back after each pass (the same blocks checked, at another time)"
                    .into(),
            );
        }
        let group_reporting = flag("group_reporting")?.unwrap_or(false);
        if numjobs > 1 && !group_reporting {
            note(format!(
                "job {}: fio reports each of its {numjobs} clones on its own without \
                 group_reporting; iolab reports them together as one test",
                sec.name
            ));
        }
        let scramble = flag("scramble_buffers")?;
        if !zero && !refill && scramble == Some(false) {
            note(
                "scramble_buffers=0: fio would write the same buffer contents again; iolab \
                 writes unique incompressible data every write (as with refill_buffers)"
                    .into(),
            );
        }

        // Order and reporting.
        if let Some(o) = get("wait_for") {
            let w = val(o)?;
            if !job_names.contains(&w) || w == sec.name {
                return Err(err(o, format!("'{w}': no other job of that name")));
            }
        }
        // (a [global] stonewall applies to every job after it, as in fio)
        let separated = ["stonewall", "new_group", "wait_for"]
            .map(|k| get(k).is_some_and(|o| o.value.as_deref() != Some("0")))
            .contains(&true);
        if !jobs.is_empty() && !separated {
            concurrent.push(sec.name.clone());
        }
        if let Some(o) = get("startdelay") {
            let d = o.value.as_deref().unwrap_or("");
            if d.contains('-') {
                return Err(err(
                    o,
                    format!("'{d}': random start delays are not supported"),
                ));
            }
            if secs(o, 1_000_000)? > Duration::ZERO {
                note(format!(
                    "startdelay (job {}): not applied; iolab runs the jobs one after another, so \
                     a delay would only leave the device idle",
                    sec.name
                ));
            }
        }
        let norandommap = flag("norandommap")?.unwrap_or(false);
        let randrepeat = flag("randrepeat")?.unwrap_or(true);
        if rw.is_random() || random_pct > 0 {
            if !norandommap {
                note(
                    "iolab draws every random offset independently, as fio does with \
                     norandommap; fio's default random map visits each block once per loop and \
                     shortens I/Os that would overlap blocks already done (with bssplit or \
                     bsrange its transfers then come out smaller than the weights say)"
                        .into(),
                );
            }
            if randrepeat {
                note("random offsets differ from run to run (fio's randrepeat=0)".into());
            }
        }
        let trim_at = get("rw").filter(|_| trim).map(|o| (o.file.clone(), o.line));
        // A row of the table that maps or notes an option is read by the code above: one
        // in force that it did not look at would be silently ignored.
        // The log options are read by `logs::plan` over the same effective options.
        for k in super::logs::KEYS {
            get(k);
        }
        let read = read.into_inner();
        for (key, o) in &m {
            if options::kind(key) == Kind::Mapped && !read.contains(key) {
                return Err(err(
                    o,
                    "listed as mapped, but job mapping did not read it (an iolab bug: please \
                     report it)",
                ));
            }
        }
        job.validate().map_err(|e| {
            FioError::new(
                &sec.file,
                sec.line,
                e.field.clone(),
                format!("'{}': {}", e.value, e.reason),
            )
        })?;
        jobs.push(FioJob {
            name: sec.name.clone(),
            file: sec.file.clone(),
            line: sec.line,
            job,
            steady: job_steady,
            trim_at,
        });
    }
    if !concurrent.is_empty() {
        note(format!(
            "fio starts job(s) {} together with the job before (no stonewall, new_group or \
             wait_for); iolab runs every job on its own, one after another",
            concurrent.join(", ")
        ));
    }
    if !replaced_paths.is_empty() {
        note(format!(
            "the run's --target replaces the job file's {}",
            replaced_paths.join(", ")
        ));
    }
    if !report_only.is_empty() {
        note(format!(
            "not applied, as they change only fio's own report: {}",
            report_only.join(", ")
        ));
    }
    let Some(first) = per_job.first() else {
        let name = file.sources.first().map_or("JOBFILE", |(n, _)| n.as_str());
        return Err(FioError::new(
            name,
            1,
            "[section]",
            "no job section: nothing to run",
        ));
    };
    let (engine, direct) = (first.engine, first.direct);
    let verify = per_job.iter().any(|p| p.verify == Some(true));
    let per_test = per_job
        .iter()
        .any(|p| (p.engine, p.direct, &p.opts) != (engine, direct, &first.opts));
    let run_opts = EngineOpts::of(first.opts.iter().map(|&(_, k, v)| (k, v)));
    for (j, p) in jobs.iter_mut().zip(&per_job) {
        // A writing job without verify in a run that verifies is not read back.
        j.job.unverified = verify && p.verify == Some(false);
        if per_test {
            j.job.io = Some(crate::job::TestIo {
                engine: p.engine,
                direct: p.direct,
                engine_opts: EngineOpts::of(
                    p.opts
                        .iter()
                        .filter(|(owner, _, _)| *owner == p.engine)
                        .map(|&(_, k, v)| (k, v)),
                ),
            });
        }
    }
    if per_test {
        let each: Vec<String> = jobs
            .iter()
            .zip(&per_job)
            .map(|(j, p)| {
                format!(
                    "{} {} {}",
                    j.name,
                    p.engine.as_str(),
                    if p.direct { "direct" } else { "buffered" }
                )
            })
            .collect();
        note(format!(
            "the jobs differ in engine or direct: each test runs on its own ({})",
            each.join(", ")
        ));
    }
    if verify && per_job.iter().any(|p| p.verify == Some(false)) {
        note(
            "verify: only the jobs that set it are read back; the other writing jobs are not"
                .into(),
        );
    }
    let engine_name = engine_names.join(", ");
    let run_for = runtime.get().flatten();
    Ok(FioPlan {
        jobs,
        size: size.get().flatten(),
        size_at,
        duration: run_for.unwrap_or(MAX_DURATION),
        timed: run_for.is_some(),
        ramp: ramp.get().unwrap_or_default(),
        engine,
        engine_name,
        direct,
        data: data.get().unwrap_or(DataPattern::Random),
        verify,
        engine_opts: run_opts,
        per_test,
        notes,
    })
}

/// Where each clone of a job works (fio's `offset` and `offset_increment`): clone i from
/// `offset + i x increment`, `increment` bytes long (without one, to the region's end);
/// None when both are 0. A layout that does not fit in the region is refused, or, when
/// `--size` replaced the region (`scaled`), its increment is made the region's share per
/// clone, rounded down to the largest power of two dividing the job file's increment.
fn clone_layout(
    offset: Option<(u64, &RawOption)>,
    step: Option<(u64, &RawOption)>,
    region: Option<u64>,
    numjobs: u32,
    job: &JobSpec,
    scaled: bool,
) -> Result<Option<crate::job::Clones>, FioError> {
    let (start, inc) = (offset.map_or(0, |o| o.0), step.map_or(0, |s| s.0));
    let Some((_, o)) = step.filter(|s| s.0 > 0).or(offset.filter(|o| o.0 > 0)) else {
        return Ok(None);
    };
    for (v, at) in [offset, step].into_iter().flatten() {
        if !v.is_multiple_of(512) {
            return Err(err(
                at,
                format!(
                    "{v} bytes: iolab places clones on 512-byte boundaries (its verify blocks \
                     and O_DIRECT need them)"
                ),
            ));
        }
    }
    let Some(r) = region else {
        return Err(err(
            o,
            "an offset needs the region's size to place the job in: give size or --size",
        ));
    };
    let n = numjobs as u64;
    let fits = |inc: u64| {
        inc.checked_mul(n - 1)
            .and_then(|x| x.checked_add(start))
            .and_then(|x| x.checked_add(job.bs))
            .is_some_and(|end| end <= r)
    };
    let mut inc2 = inc;
    if !fits(inc) {
        let per = r / n;
        if scaled && inc > 0 && per > 0 {
            let mut unit = 1u64 << (63 - per.leading_zeros());
            while unit > 512 && !inc.is_multiple_of(unit) {
                unit >>= 1;
            }
            inc2 = per / unit * unit;
        }
        if !scaled || inc2 < job.bs || !fits(inc2) {
            let last = start.saturating_add(inc.saturating_mul(n - 1));
            return Err(err(
                o,
                format!(
                    "clone {n} of {n} would work from {} with blocks of {}, beyond the region \
                     of {}: give a larger size{}",
                    format_bytes(last),
                    format_bytes(job.bs),
                    format_bytes(r),
                    if scaled {
                        ""
                    } else {
                        " (or --size, which scales the clones into it)"
                    }
                ),
            ));
        }
    }
    Ok(Some(crate::job::Clones {
        offset: start,
        increment: inc2,
        len: if inc2 > 0 { inc2 } else { r - start },
    }))
}

/// fio's `steadystate` criterion as iolab's rule text: `iops`, `bw`, `iops_slope` or
/// `bw_slope` with a percentage of the mean.
fn steady_rule(o: &RawOption, v: &str) -> Result<String, FioError> {
    let (name, limit) = v
        .split_once(':')
        .ok_or_else(|| err(o, format!("'{v}': expected CRITERION:LIMIT, e.g. iops:10%")))?;
    let name = name.trim();
    if name.starts_with("lat") {
        return Err(err(
            o,
            format!("'{v}': latency criteria are not judged by iolab's --steady-state"),
        ));
    }
    if !matches!(name, "iops" | "bw" | "iops_slope" | "bw_slope") {
        return Err(err(
            o,
            format!("'{name}': expected iops, bw, iops_slope or bw_slope"),
        ));
    }
    let pct = limit.trim().strip_suffix('%').ok_or_else(|| {
        let what = if limit.trim().parse::<f64>().is_ok() {
            "an absolute limit"
        } else {
            "not a limit"
        };
        err(
            o,
            format!(
                "'{v}': {what}; iolab's --steady-state takes a percentage of the mean (e.g. \
                 {name}:10%)"
            ),
        )
    })?;
    match pct.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p > 0.0 && p <= 100.0 => Ok(format!("{name}:{}%", pct.trim())),
        _ => Err(err(
            o,
            format!("'{v}': the limit is a percentage above 0, up to 100"),
        )),
    }
}

/// An engine that does something else than file or block I/O on this machine, or that
/// iolab does not emulate (unless an installed engine runs that fio name: an engine's file
/// is all it takes to add one).
fn unemulable(engine: &str) -> bool {
    engopt::by_fio(engine).is_none()
        && (options::UNEMULABLE_ENGINES.contains(&engine)
            || engine.starts_with("external")
            || engine.contains('/'))
}

fn refuse_engine(engine: &str) -> String {
    if matches!(engine, "dircreate" | "dirstat" | "dirdelete") {
        return format!(
            "ioengine={engine} times one operation per directory; iolab's `run metadata` \
             workload does that work on files (create, stat, delete in phases), and its \
             filecreate, filestat and filedelete engines run fio's file engines, but \
             directories are not"
        );
    }
    let why = match engine {
        "rdma" | "net" | "netsplice" | "http" | "nbd" | "nfs" | "libiscsi" | "rados" | "rbd"
        | "gfapi" | "gfapi_async" | "libhdfs" | "dfs" => {
            "its I/O goes to a network, object-store or cluster service, not a local file or \
             device"
        }
        _ if engine.starts_with("librpma") || engine.starts_with("ime_") => {
            "its I/O goes to a remote or cluster service (RDMA persistent memory, DDN IME), \
             not a local file or device"
        }
        "libcufile" | "gpudirect" => "its I/O moves data to and from GPU memory (cuFile)",
        "dev-dax" | "libpmem" | "pmemblk" => {
            "it maps persistent memory (DAX) and copies with CPU instructions, no block I/O"
        }
        "sg" | "io_uring_cmd" | "xnvme" | "libzbc" => {
            "it sends SCSI or NVMe commands through a passthrough interface (or a zoned \
             device's zone commands), which iolab's engines do not issue"
        }
        "mtd" => "it drives raw flash (MTD) devices",
        "cpuio" => "it burns CPU and does no I/O",
        "exec" => "it runs another program",
        "mmap" | "splice" | "posixaio" | "guasi" | "binject" => {
            "it moves data through another interface (memory maps, splice, POSIX AIO...) that \
             iolab's engines do not implement"
        }
        "windowsaio" | "solarisaio" => "it exists on another operating system",
        _ => "it is an external engine loaded from a library",
    };
    format!(
        "ioengine={engine}: {why} (iolab runs io_uring, libaio as io_uring, psync, sync, \
         pvsync, pvsync2, vsync as psync, null, cpp_null as null, ftruncate, filecreate, \
         filestat, filedelete, falloc and e4defrag)"
    )
}

fn check_bs(o: &RawOption, bs: u64) -> Result<(), FioError> {
    if !(512..=64 << 20).contains(&bs) || !bs.is_multiple_of(512) {
        return Err(err(
            o,
            format!("{bs} bytes: block sizes are multiples of 512 bytes up to 64 MiB"),
        ));
    }
    Ok(())
}

/// fio's `zoned:A/S:A/S...` (percent of random I/Os / percent of the region; a size left
/// blank takes what the others leave).
fn zones(o: &RawOption, text: &str) -> Result<Vec<crate::job::Zone>, FioError> {
    let mut out = Vec::new();
    let mut blank = None;
    for part in text.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, sz) = part
            .split_once('/')
            .ok_or_else(|| err(o, format!("'{part}': expected ACCESS%/SIZE%")))?;
        let a = values::int(a.trim(), 0, 100).map_err(|e| err(o, e))? as u8;
        let sz = match sz.trim() {
            "" if blank.is_none() => {
                blank = Some(out.len());
                0
            }
            "" => return Err(err(o, "two zones without a size")),
            v => values::int(v, 1, 100).map_err(|e| err(o, e))? as u8,
        };
        if out.len() == 100 {
            return Err(err(o, "more than 100 zones"));
        }
        out.push(crate::job::Zone {
            access: a,
            size: sz,
        });
    }
    let used: u32 = out.iter().map(|z| z.size as u32).sum();
    if let Some(i) = blank {
        if used >= 100 {
            return Err(err(
                o,
                "the zone without a size has nothing left of the region",
            ));
        }
        out[i].size = (100 - used) as u8;
    }
    let access: u32 = out.iter().map(|z| z.access as u32).sum();
    let size: u32 = out.iter().map(|z| z.size as u32).sum();
    if access != 100 || size != 100 {
        return Err(err(
            o,
            format!(
                "zoned:{text}: the zones take {access}% of the I/Os over {size}% of the \
                 region; both must add up to 100"
            ),
        ));
    }
    Ok(out)
}

/// fio's `cmdprio_bssplit` for one direction: `size/percent` (that share of the I/Os of
/// that size take `ioprio`, the cmdprio_class and cmdprio values) or
/// `size/percent/class/level`, joined by `:`. A size's shares add up to at most 100.
fn cmdprio_bssplit(
    o: &RawOption,
    text: &str,
    kb_base: u64,
    ioprio: u16,
) -> Result<Vec<crate::job::CmdPrio>, FioError> {
    let mut out: Vec<crate::job::CmdPrio> = Vec::new();
    for part in text.split(':').map(str::trim).filter(|p| !p.is_empty()) {
        if out.len() == 64 {
            return Err(err(o, "more than 64 entries"));
        }
        let f: Vec<&str> = part.split('/').map(str::trim).collect();
        let bad = || {
            err(
                o,
                format!("'{part}': expected size/percent or size/percent/class/level"),
            )
        };
        let (size, pct, ioprio) = match f.as_slice() {
            [s, p] => (*s, *p, ioprio),
            [s, p, c, l] => {
                let c =
                    values::int(c, 1, 3).map_err(|e| err(o, format!("'{part}': class: {e}")))?;
                let l =
                    values::int(l, 0, 7).map_err(|e| err(o, format!("'{part}': level: {e}")))?;
                (*s, *p, crate::job::Prio::value(c as u8, l as u8))
            }
            _ => return Err(bad()),
        };
        let size = values::size(size, kb_base).map_err(|e| err(o, e))?;
        let pct = values::int(pct, 0, 100).map_err(|e| err(o, e))? as u8;
        let total: u32 = out
            .iter()
            .filter(|r| r.size == Some(size))
            .map(|r| r.pct as u32)
            .sum::<u32>()
            + pct as u32;
        if total > 100 {
            return Err(err(
                o,
                format!("the shares of {} add up to {total}%", format_bytes(size)),
            ));
        }
        if pct > 0 {
            out.push(crate::job::CmdPrio {
                size: Some(size),
                pct,
                ioprio,
            });
        }
    }
    Ok(out)
}

/// `size/percent:size/percent...`; entries without a percent share what is left equally.
fn bssplit(o: &RawOption, text: &str, kb_base: u64) -> Result<Vec<(u64, u8)>, FioError> {
    let mut lines: Vec<(u64, Option<u64>)> = Vec::new();
    for part in text.split(':') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        if lines.len() == 64 {
            return Err(err(o, "more than 64 block sizes"));
        }
        let (s, p) = match part.split_once('/') {
            Some((s, p)) if !p.trim().is_empty() => {
                (s, Some(values::int(p, 0, 100).map_err(|e| err(o, e))?))
            }
            Some((s, _)) => (s, None),
            None => (part, None),
        };
        let size = values::size(s, kb_base).map_err(|e| err(o, e))?;
        check_bs(o, size)?;
        lines.push((size, p));
    }
    if lines.is_empty() {
        return Err(err(o, "no block sizes (size/percent:size/percent...)"));
    }
    let given: u64 = lines.iter().filter_map(|l| l.1).sum();
    let open = lines.iter().filter(|l| l.1.is_none()).count() as u64;
    if given > 100 || (open == 0 && given != 100) {
        return Err(err(
            o,
            format!("the percentages add up to {given}, not 100"),
        ));
    }
    let mut left = 100 - given;
    let mut out = Vec::new();
    let mut k = open;
    for (size, p) in lines {
        let share = match p {
            Some(p) => p,
            None => {
                let s = left / k;
                left -= s;
                k -= 1;
                s
            }
        };
        if share > 0 {
            out.push((size, share as u8));
        }
    }
    if out.is_empty() {
        return Err(err(o, "every block size has 0%"));
    }
    // (a share left over by integer division goes to the last open entry above)
    Ok(out)
}

/// The options in force for job `name` (every [global] before it, then its own), in file
/// order, a later setting of an option replacing an earlier one; None when no such job.
pub fn job_options<'a>(file: &'a JobFile, name: &str) -> Option<Vec<&'a RawOption>> {
    let idx = file
        .sections
        .iter()
        .position(|s| !s.is_global() && s.name == name)?;
    let mut out: Vec<&RawOption> = Vec::new();
    for (i, s) in file.sections.iter().enumerate() {
        if i == idx || (i < idx && s.is_global()) {
            for o in &s.options {
                let key = options::canonical(&o.key);
                out.retain(|p| options::canonical(&p.key) != key);
                out.push(o);
            }
        }
    }
    Some(out)
}

/// fio's own job file for job `name` alone, as `iolab crosscheck --job` runs it: the
/// job's options as written (variables and includes resolved), less where and when it
/// runs (filename, directory, the order and start options), with `extra` lines (the file
/// iolab prepared, the region, the pass length) appended.
pub fn single_job_file(file: &JobFile, name: &str, extra: &[String]) -> Option<String> {
    const DROPPED: &[&str] = &[
        "filename",
        "directory",
        "nrfiles",
        "filesize",
        "stonewall",
        "wait_for",
        "new_group",
        "startdelay",
    ];
    let opts = job_options(file, name)?;
    let mut text = format!("[{name}]\n");
    for o in opts {
        let key = options::canonical(&o.key);
        if DROPPED.contains(&key) || extra.iter().any(|e| e.split('=').next() == Some(key)) {
            continue;
        }
        match &o.value {
            Some(v) => text.push_str(&format!("{}={v}\n", o.key)),
            None => text.push_str(&format!("{}\n", o.key)),
        }
    }
    for e in extra {
        text.push_str(e);
        text.push('\n');
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fiojob::parse::{parse, Sources};

    use crate::engopt::testing::kind;

    fn plan(text: &str, ov: Overrides) -> Result<FioPlan, FioError> {
        crate::engopt::testing::install();
        let src = Sources {
            read: &|_, _| {
                Err(iolab_sys::input::InputError::Io(
                    std::io::ErrorKind::NotFound.into(),
                ))
            },
            var: &|_| None,
        };
        map_jobs(&parse("j.fio", text.as_bytes(), &src)?, ov)
    }

    #[test]
    fn zoned_blockalign_and_options_said_to_differ() {
        // jesd219.fio's shape: sizes from 512 B, offsets on 4 KiB, zoned offsets.
        let p = plan(
            "[j]\nrw=randrw\nsize=16m\nbssplit=512/4:4k/86:64k/10\nblockalign=4k\n\
             random_distribution=zoned:50/5:30/15:20/\nnumjobs=2\n",
            Overrides::default(),
        )
        .unwrap();
        let job = &p.jobs[0].job;
        assert!(job.access.iter().all(|l| l.align == 4096), "{job:?}");
        let z: Vec<(u8, u8)> = job.zones.iter().map(|z| (z.access, z.size)).collect();
        assert_eq!(z, [(50, 5), (30, 15), (20, 80)]);
        assert!(
            p.notes.iter().any(|n| n.contains("2 clones")),
            "{:?}",
            p.notes
        );
        // blockalign on a single size makes an aligned access line.
        let p = plan(
            "[j]\nrw=randread\nsize=1m\nbs=4k\nba=8k\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(p.jobs[0].job.access[0].align, 8192);
        // number_ios ends the pass after that many I/Os.
        let p = plan(
            "[j]\nrw=read\nsize=1m\nbs=4k\nnumber_ios=10\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(p.jobs[0].job.io_limit, Some(40960));
        // Accepted with a note each.
        let p = plan(
            "[j]\nrw=read\nsize=1m\nratemin=1k\nflow=2\nflow_sleep=100\nexitall\n\
             continue_on_error=all\nio_submit_mode=offload\nrandom_generator=lfsr\n\
             verify_backlog=16\n",
            Overrides::default(),
        )
        .unwrap();
        for k in [
            "rate_min",
            "flow:",
            "exitall",
            "continue_on_error",
            "offload",
            "lfsr",
            "verify_backlog",
        ] {
            assert!(p.notes.iter().any(|n| n.contains(k)), "{k}: {:?}", p.notes);
        }
        // libaio is asynchronous only with O_DIRECT.
        let aio = "[j]\nrw=randread\nsize=1m\nioengine=libaio\niodepth=16\n";
        let p = plan(aio, Overrides::default()).unwrap();
        assert_eq!(p.engine, kind("psync"));
        assert!(
            p.notes.iter().any(|n| n.contains("Linux AIO")),
            "{:?}",
            p.notes
        );
        let p = plan(&format!("{aio}direct=1\n"), Overrides::default()).unwrap();
        assert_eq!(p.engine, kind("io_uring"));
        // Refusals name the option and why.
        for (text, key, why) in [
            (
                "random_distribution=zoned:50/5:30/15",
                "random_distribution",
                "80% of the",
            ),
            (
                "random_distribution=zoned:50/:30/:20/80",
                "random_distribution",
                "two zones",
            ),
            ("verify_pattern=0xzz", "verify_pattern", "hex digits"),
            ("fallocate=sparse", "fallocate", "expected none, posix"),
            ("zonemode=zbd", "zonemode", "zoned block device"),
            (
                "io_submit_mode=later",
                "io_submit_mode",
                "inline or offload",
            ),
            ("cmdprio_percentage=20", "cmdprio_percentage", "priority"),
            ("ba=1000", "ba", "multiple of 512"),
        ] {
            let e = plan(
                &format!("[j]\nrw=randread\nsize=1m\n{text}\n"),
                Overrides::default(),
            )
            .unwrap_err();
            assert_eq!((e.line, e.option.as_str()), (4, key), "{e}");
            assert!(e.message.contains(why), "{e}");
        }
    }

    /// verify_pattern alone is fio's verify=pattern, and not applied with verify=0;
    /// zonesize alone is strided zones (zonerange defaulting to it); cross-stripe-verify's
    /// 30 clones 124 GiB apart are scaled into a 4 MiB --size on 128 KiB boundaries.
    #[test]
    fn patterns_strided_zones_and_clone_parts() {
        let p = |t: &str| plan(&format!("[j]\nsize=1m\n{t}\n"), Overrides::default());
        let f = p("rw=write\nverify_pattern=0xff").unwrap();
        assert_eq!(f.jobs[0].job.pattern.as_ref().unwrap().bytes, [0xff]);
        let f = p("rw=write\nverify=0\nverify_pattern=0xff").unwrap();
        assert!(f.jobs[0].job.pattern.is_none());
        assert!(f
            .notes
            .iter()
            .any(|n| n.contains("not applied with verify=0")));
        let f = p("rw=read\nbs=4k\nzonesize=64k\nzoneskip=4k").unwrap();
        assert_eq!(
            f.jobs[0].job.strided,
            Some(crate::job::Strided {
                size: 64 << 10,
                range: 64 << 10,
                skip: 4 << 10
            })
        );
        let e = p("rw=read\nzonemode=none\nzonesize=64k").unwrap_err();
        assert_eq!(e.option, "zonesize", "{e}");
        let text =
            "[j]\nrw=write\nbs=16k\nnumjobs=30\noffset=120k\noffset_increment=124g\nsize=1m\n";
        let scaled = Overrides {
            size: Some(4 << 20),
            duration: None,
        };
        let f = plan(text, scaled).unwrap();
        assert_eq!(
            f.jobs[0].job.clones,
            Some(crate::job::Clones {
                offset: 120 << 10,
                increment: 128 << 10,
                len: 128 << 10
            })
        );
        assert_eq!(
            plan(text, Overrides::default()).unwrap_err().option,
            "offset_increment"
        );
    }

    /// Every row of the table that maps an option or accepts it with a note is read by
    /// the mapping: set to its sample, in a job and in a [global], it is never reported as
    /// unread (the check `map_jobs` makes after each job). And read means used: each such
    /// row, and each general job option (`JOB_OPTIONS`), set in a job changes what runs
    /// (the plan, its notes or its logs), or, for a row that only checks a value, a value
    /// it does not take is refused at its line; a row listed as mapped whose value is
    /// ignored (as `group_reporting` and `scramble_buffers` once were) fails here. A
    /// refusal row is refused at its line, a report-only row named in a note.
    #[test]
    fn every_mapped_row_is_read() {
        use super::options::{Does, OPTIONS};
        let mut names = std::collections::HashSet::new();
        for r in OPTIONS {
            assert!(names.insert(r.name), "{} has two rows", r.name);
            if !matches!(r.does, Does::Maps(_) | Does::Notes(_)) {
                continue;
            }
            assert!(!r.sample.is_empty(), "{} has no sample", r.name);
            for rw in ["randrw", "read", "write"] {
                let job = format!("rw={rw}\nsize=1m\n{}={}\n", r.name, r.sample);
                for text in [
                    format!("[a]\nsize=1m\n[j]\n{job}"),
                    format!("[a]\nsize=1m\n[global]\n{job}[j]\n"),
                ] {
                    if let Err(e) = plan(&text, Overrides::default()) {
                        assert!(!e.message.contains("did not read"), "{}: {e}", r.name);
                    }
                }
            }
        }
        // Read and used: the row's effect.
        let mut mapped: Vec<(&str, String)> = OPTIONS
            .iter()
            .filter(|r| matches!(r.does, Does::Maps(_) | Does::Notes(_)))
            .map(|r| (r.name, r.sample.to_string()))
            .collect();
        for o in crate::JOB_OPTIONS {
            assert!(
                super::options::row(o.name).is_none(),
                "{} is a general job option (`crate::JOB_OPTIONS`): delete its row in fio's \
                 option table (fiojob/options.rs)",
                o.name
            );
        }
        mapped.extend(crate::JOB_OPTIONS.iter().map(|o| {
            let v = if o.default < o.max {
                o.default + 1
            } else {
                o.default - 1
            };
            (o.name, v.to_string())
        }));
        let mut ignored = Vec::new();
        for (name, sample) in mapped {
            let (context, value, refused) = EFFECTS
                .iter()
                .find(|e| e.0 == name)
                .map_or(("size=1m\nrw=randrw\n", sample.as_str(), false), |e| {
                    (e.1, e.2, e.3)
                });
            let base = format!("[j]\n{context}");
            let outcome = |text: &str| {
                let src = Sources {
                    read: &|_, _| {
                        Err(iolab_sys::input::InputError::Io(
                            std::io::ErrorKind::NotFound.into(),
                        ))
                    },
                    var: &|_| None,
                };
                let file = parse("j.fio", text.as_bytes(), &src)?;
                let p = map_jobs(&file, Overrides::default())?;
                let logs = super::super::logs::plan(&file, &p)?;
                Ok::<_, FioError>((p, logs))
            };
            let without = outcome(&base).unwrap_or_else(|e| panic!("{name}: {e}"));
            let with = outcome(&format!("{base}{name}={value}\n"));
            match (refused, with) {
                (true, Err(e)) if e.option == name => {}
                (false, Ok(with)) if with != without => {}
                (_, Ok(_)) => ignored.push(format!(
                    "{name}={value} after {context:?} changed nothing: listed as mapped, but \
                     ignored"
                )),
                (_, Err(e)) => ignored.push(format!("{name}={value} after {context:?}: {e}")),
            }
        }
        assert!(ignored.is_empty(), "{}", ignored.join("\n"));
        // The other rows: a refusal is refused at its line, a report-only option is named
        // in a note.
        for r in OPTIONS {
            let p = plan(
                &format!("[j]\nrw=read\nsize=1m\n{}=1\n", r.name),
                Overrides::default(),
            );
            match r.does {
                Does::Refused(why) => {
                    let e = p.expect_err(r.name);
                    assert_eq!((e.line, e.option.as_str()), (4, r.name), "{e}");
                    assert!(e.message.contains(why), "{e}");
                }
                Does::ReportOnly => {
                    let p = p.unwrap_or_else(|e| panic!("{}: {e}", r.name));
                    assert!(p.notes.iter().any(|n| n.contains(r.name)), "{}", r.name);
                }
                Does::Maps(_) | Does::Notes(_) => {}
            }
        }
        // An option in force but unread is refused, not ignored: the check itself.
        for k in [
            "group_reporting",
            "scramble_buffers",
            "norandommap",
            "exit_what",
        ] {
            let p = plan(
                &format!("[j]\nrw=read\nsize=1m\nzero_buffers\nexitall\n{k}=1\n"),
                Overrides::default(),
            );
            assert!(p.is_ok(), "{k}: {p:?}");
        }
    }

    /// Where a row's sample alone changes nothing (it needs another option, or it is the
    /// default a row checks for): the job's other lines, the value set, and whether that
    /// value is refused (a row that only checks) rather than changing what runs.
    const STEADY: &str =
        "size=1m\nrw=read\nruntime=10s\ntime_based=1\nsteadystate=iops:10%\nss_dur=2s\n";
    const EFFECTS: &[(&str, &str, &str, bool)] = &[
        ("size", "size=1m\nrw=read\n", "2m", false),
        ("filesize", "size=1m\nrw=read\n", "2m", true),
        ("io_size", "size=1m\nrw=read\n", "512k", false),
        ("offset", "size=1m\nrw=read\nnumjobs=2\n", "64k", false),
        ("nrfiles", "size=1m\nrw=read\n", "2", true),
        ("ioengine", "size=1m\nrw=read\n", "null", false),
        ("time_based", "size=1m\nrw=read\nruntime=1s\n", "1", false),
        ("sync", "size=1m\nrw=write\n", "1", true),
        (
            "stonewall",
            "size=1m\nrw=read\n[k]\nrw=read\nsize=1m\n",
            "1",
            false,
        ),
        (
            "new_group",
            "size=1m\nrw=read\n[k]\nrw=read\nsize=1m\n",
            "1",
            false,
        ),
        (
            "wait_for",
            "size=1m\nrw=read\n[k]\nrw=read\nsize=1m\n",
            "j",
            false,
        ),
        (
            "refill_buffers",
            "size=1m\nrw=write\nzero_buffers=1\n",
            "1",
            true,
        ),
        (
            "buffer_compress_chunk",
            "size=1m\nrw=write\nbuffer_compress_percentage=50\n",
            "4k",
            false,
        ),
        (
            "dedupe_mode",
            "size=1m\nrw=write\ndedupe_percentage=50\n",
            "working_set",
            false,
        ),
        (
            "dedupe_working_set_percentage",
            "size=1m\nrw=write\ndedupe_percentage=50\ndedupe_mode=working_set\n",
            "10",
            false,
        ),
        (
            "dedupe_global",
            "size=1m\nrw=write\ndedupe_percentage=50\ndedupe_mode=working_set\n",
            "1",
            false,
        ),
        ("do_verify", "size=1m\nrw=write\nverify=md5\n", "0", false),
        ("steadystate_duration", STEADY, "3s", false),
        ("steadystate_ramp_time", STEADY, "1s", false),
        ("steadystate_check_interval", STEADY, "500ms", false),
        (
            "thinktime_blocks",
            "size=1m\nrw=read\nthinktime=1ms\n",
            "2",
            false,
        ),
        (
            "thinktime_spin",
            "size=1m\nrw=read\nthinktime=1ms\n",
            "1ms",
            true,
        ),
        ("invalidate", "size=1m\nrw=read\n", "0", false),
        ("mem", "size=1m\nrw=read\n", "mmaphuge", false),
        (
            "cmdprio_percentage",
            "size=1m\nrw=read\nioengine=io_uring\n",
            "20",
            false,
        ),
        (
            "cmdprio_bssplit",
            "size=1m\nrw=read\nioengine=io_uring\n",
            "64k/50:1m/0",
            false,
        ),
        (
            "group_reporting",
            "size=1m\nrw=read\nnumjobs=2\n",
            "1",
            false,
        ),
        ("zonemode", "size=1m\nrw=read\nzonesize=64k\n", "zbd", true),
        ("verify_interval", "size=1m\nrw=write\n", "512", true),
        (
            "log_avg_msec",
            "size=1m\nrw=read\nwrite_bw_log=bw\n",
            "500",
            false,
        ),
        ("openfiles", "size=1m\nrw=read\n", "2", true),
        (
            "per_job_logs",
            "size=1m\nrw=read\nnumjobs=2\nwrite_bw_log=bw\n",
            "0",
            false,
        ),
        ("stat_type", "rw=read\nioengine=filestat\n", "lstat", true),
        ("donorname", "size=1m\nrw=write\n", "x.def", true),
        (
            "log_offset",
            "size=1m\nrw=read\nwrite_bw_log=bw\n",
            "1",
            false,
        ),
    ];

    /// fio's buffers are malloc'd ordinary pages unless `mem=` asks for huge ones; iolab's
    /// are then the same kind (a 256 KiB direct read from huge pages merged into 4x fewer
    /// requests on a virtio disk: fio-seq-read.fio ran 4.7x faster on iolab).
    #[test]
    fn buffers_are_ordinary_pages_unless_mem_asks_for_huge_ones() {
        let p = |m: &str| {
            plan(
                &format!("[j]\nrw=read\nsize=1m\n{m}\n"),
                Overrides::default(),
            )
        };
        assert!(p("").unwrap().jobs[0].job.page_buffers);
        assert!(p("mem=malloc").unwrap().jobs[0].job.page_buffers);
        assert!(p("iomem=mmap").unwrap().jobs[0].job.page_buffers);
        let huge = p("mem=mmaphuge:/hugetlbfs/f").unwrap();
        assert!(!huge.jobs[0].job.page_buffers);
        assert!(huge
            .notes
            .iter()
            .any(|n| n.contains("transparent huge pages")));
        let e = p("mem=cudamalloc").unwrap_err();
        assert_eq!((e.line, e.option.as_str()), (4, "mem"), "{e}");
    }

    /// cmdprio-bssplit.fio's jobs: reads and writes split sizes differently, and shares of
    /// a size's I/Os take a priority (the cmdprio_class and cmdprio, or their own).
    #[test]
    fn priorities_and_a_split_per_direction() {
        use crate::job::{CmdPrio, Prio};
        let p = plan(
            "[global]\nrw=randrw\nioengine=libaio\ndirect=1\nsize=4m\n\
             bssplit=64k/40:1024k/60,1024k/100\n[a]\ncmdprio_bssplit=64k/100:1024k/0,1024k/0\n\
             cmdprio_class=1\ncmdprio=0\n[b]\nprioclass=2\nprio=7\n\
             cmdprio_bssplit=64k/25/1/1:64k/75/3/2:1024k/0,1024k/0\n",
            Overrides::default(),
        )
        .unwrap();
        let lines: Vec<(u8, u64, u8)> = p.jobs[0]
            .job
            .access
            .iter()
            .map(|l| (l.share, l.size, l.read_pct))
            .collect();
        assert_eq!(
            lines,
            [(20, 64 << 10, 100), (30, 1 << 20, 100), (50, 1 << 20, 0)]
        );
        // A trim split after them changes nothing (iolab issues no trims).
        let t = plan(
            "[j]\nrw=randrw\nsize=4m\nbssplit=4k/50:8k/50,16k,4k\n",
            Overrides::default(),
        )
        .unwrap();
        let lines: Vec<(u8, u64, u8, u64)> = t.jobs[0]
            .job
            .access
            .iter()
            .map(|l| (l.share, l.size, l.read_pct, l.align))
            .collect();
        assert_eq!(
            lines,
            [
                (25, 4096, 100, 4096),
                (25, 8192, 100, 4096),
                (50, 16384, 0, 4096)
            ]
        );
        let rt0 = Prio::value(1, 0);
        assert_eq!(p.jobs[0].job.prio.thread, None);
        assert_eq!(
            p.jobs[0].job.prio.per_io,
            [
                vec![CmdPrio {
                    size: Some(64 << 10),
                    pct: 100,
                    ioprio: rt0
                }],
                vec![]
            ]
        );
        let b = &p.jobs[1].job.prio;
        assert_eq!(b.thread, Some(Prio::value(2, 7)));
        assert_eq!(
            b.per_io[0],
            [
                CmdPrio {
                    size: Some(64 << 10),
                    pct: 25,
                    ioprio: Prio::value(1, 1)
                },
                CmdPrio {
                    size: Some(64 << 10),
                    pct: 75,
                    ioprio: Prio::value(3, 2)
                },
            ]
        );
        // cmdprio-percentage.fio: 20% of the reads realtime, the thread idle.
        let q = plan(
            "[j]\nrw=randread\nsize=4m\nioengine=libaio\ndirect=1\nprioclass=3\n\
             cmdprio_percentage=20\ncmdprio_class=1\nlog_prio=1\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(q.jobs[0].job.prio.thread, Some(3 << 13));
        assert_eq!(
            q.jobs[0].job.prio.per_io[0],
            [CmdPrio {
                size: None,
                pct: 20,
                ioprio: 1 << 13
            }]
        );
        assert!(
            q.notes.iter().any(|n| n.contains("log_prio")),
            "{:?}",
            q.notes
        );
        // Only an engine that puts a priority in each request; shares that do not fit.
        let e = plan(
            "[j]\nrw=read\nsize=4m\ncmdprio_percentage=5\n",
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("psync"), "{e}");
        let e = plan(
            "[j]\nrw=randrw\nrwmixread=33\nsize=4m\nbssplit=4k/50:8k/50,4k\n",
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("16.50%"), "{e}");
        let e = plan(
            "[j]\nrw=read\nsize=4m\nioengine=io_uring\ncmdprio_bssplit=4k/60:4k/50/1/0\n",
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("110%"), "{e}");
    }

    /// exitwhat.fio's `rate=300,300,300` on a randrw job: a limit per direction (one value
    /// is both directions' limit); sizes by direction or Poisson arrivals with it refused.
    #[test]
    fn a_mixed_jobs_rates_are_per_direction() {
        let p = |x: &str| {
            plan(
                &format!("[j]\nrw=randrw\nsize=4m\n{x}\n"),
                Overrides::default(),
            )
        };
        let dr = |x: &str| p(x).unwrap().jobs[0].job.pace.dir_rates;
        assert_eq!(dr("rate=300,300,300"), Some([(300, 0), (300, 0)]));
        assert_eq!(dr("rate=1m"), Some([(1 << 20, 0), (1 << 20, 0)]));
        assert_eq!(
            dr("rate=,500k\nrate_iops=10"),
            Some([(0, 10), (500 << 10, 10)])
        );
        assert_eq!(dr("rate_iops=10,"), Some([(0, 10), (0, 0)]));
        assert_eq!(p("rate=1m").unwrap().jobs[0].job.pace.rate_bytes, 0);
        assert!(p("rate=1m\nbssplit=4k/50:8k/50")
            .unwrap_err()
            .message
            .contains("one block size"));
        assert!(p("rate=1m\nrate_process=poisson")
            .unwrap_err()
            .message
            .contains("per direction"));
        // A job of one direction keeps its one limit.
        let w = plan("[j]\nrw=write\nsize=4m\nrate=1m,2m\n", Overrides::default()).unwrap();
        assert_eq!(
            (w.jobs[0].job.pace.rate_bytes, w.jobs[0].job.pace.dir_rates),
            (2 << 20, None)
        );
    }

    /// dedupe-global.fio: compressible, duplicate buffers from a working set every job
    /// shares; with verify, or dedupe_global without a working set, refused.
    #[test]
    fn compressible_and_duplicate_buffers() {
        let p = |x: &str| {
            plan(
                &format!("[j]\nrw=write\nsize=1m\n{x}\n"),
                Overrides::default(),
            )
        };
        let c = p(
            "dedupe_mode=working_set\ndedupe_global=1\ndedupe_percentage=50\n\
                   buffer_compress_percentage=50\ndedupe_working_set_percentage=50",
        )
        .unwrap()
        .jobs[0]
            .job
            .content
            .unwrap();
        assert_eq!(
            (
                c.compress_pct,
                c.chunk,
                c.dedupe_pct,
                c.working_set,
                c.global
            ),
            (50, 512, 50, Some(128), true)
        );
        let r = p("dedupe_percentage=10").unwrap().jobs[0]
            .job
            .content
            .unwrap();
        assert_eq!((r.compress_pct, r.working_set), (0, None));
        assert!(p("").unwrap().jobs[0].job.content.is_none());
        assert!(p("zero_buffers\nbuffer_compress_percentage=100")
            .unwrap()
            .jobs[0]
            .job
            .content
            .is_none());
        assert!(p("dedupe_global=1\ndedupe_percentage=5")
            .unwrap_err()
            .message
            .contains("working_set"));
        assert!(p("dedupe_percentage=5\nverify=md5")
            .unwrap_err()
            .message
            .contains("duplicate"));
    }

    /// numa.fio: a node this machine has binds; one it lacks is refused, named.
    #[test]
    fn numa_nodes_that_exist() {
        let first = iolab_sys::numa::online_nodes()[0];
        let p = plan(
            &format!("[j]\nsize=1m\nnuma_cpu_nodes={first}\nnuma_mem_policy=bind:{first}\n"),
            Overrides::default(),
        )
        .unwrap();
        let n = p.jobs[0].job.numa.clone().unwrap();
        assert_eq!(
            (n.cpu_nodes, n.mem_policy),
            (vec![first], Some(("bind".into(), vec![first])))
        );
        let e = plan(
            "[j]\nsize=1m\nnuma_cpu_nodes=0-1023\n",
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("does not exist on this machine"), "{e}");
        let e = plan(
            "[j]\nsize=1m\nnuma_mem_policy=prefer\n",
            Overrides::default(),
        )
        .unwrap_err();
        assert!(e.message.contains("prefer takes one node"), "{e}");
    }

    #[test]
    fn steady_state_poisson_and_ftruncate() {
        let p = plan(
            "[j]\nrw=write\nsize=1m\ntime_based\nruntime=3\nss=bw_slope:1%\nss_dur=1s\n\
             ss_interval=200ms\nss_ramp=600ms\nioengine=ftruncate\nrate_iops=50\n\
             rate_process=poisson\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            p.jobs[0].steady,
            Some(FioSteady {
                rule: "bw_slope:1%".into(),
                round: Duration::from_millis(200),
                window: 5,
                max_rounds: 12,
                skip: Duration::from_millis(600),
            })
        );
        assert_eq!(p.engine, kind("ftruncate"));
        assert!(p.jobs[0].job.pace.poisson);
        let e = |t: &str| plan(t, Overrides::default()).unwrap_err().to_string();
        let base = "[j]\nrw=write\nsize=1m\ntime_based\nruntime=3\n";
        assert!(e(&format!("{base}ss=iops:5\nss_dur=1s\n")).contains("absolute limit"));
        assert!(e(&format!("{base}ss=iops:abc\nss_dur=1s\n")).contains("not a limit"));
        assert!(e(&format!("{base}ss=lat:5%\nss_dur=1s\n")).contains("latency"));
        assert!(e(&format!("{base}ss=iops:5%\nss_dur=1s\nss_interval=250ms\n")).contains("100ms"));
        assert!(e(&format!("{base}ss=iops:5%\nss_dur=1s\nss_ramp=50ms\n")).contains("100ms"));
        // A window longer than the runtime: run, never attained (as fio), and noted; jobs
        // with different rules each keep their own.
        let p = plan(
            "[global]\nsize=1m\ntime_based\nruntime=3\n[j]\nrw=write\nss=iops:5%\nss_dur=10s\n\
             [k]\nrw=read\nss=bw_slope:1%\nss_dur=2s\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(
            p.jobs[0].steady.as_ref().map(|s| (s.window, s.max_rounds)),
            Some((10, 3))
        );
        assert_eq!(
            p.jobs[1].steady.as_ref().map(|s| s.rule.as_str()),
            Some("bw_slope:1%")
        );
        assert!(
            p.notes.iter().any(|n| n.contains("cannot be attained")),
            "{:?}",
            p.notes
        );
        assert!(e("[j]\nrw=randrw\nsize=1m\nioengine=ftruncate\n").contains("fails reads"));
        assert!(e(&format!("{base}ioengine=ftruncate\nverify=md5\n")).contains("nothing to verify"));
        assert!(e(&format!("{base}rate_process=normal\n")).contains("linear or poisson"));
        // Without ss_dur fio does not detect steady state: noted, not applied.
        let p = plan(&format!("{base}ss=iops:5%\n"), Overrides::default()).unwrap();
        assert!(p.jobs[0].steady.is_none() && p.notes.iter().any(|n| n.contains("ss_dur")));
    }

    #[test]
    fn globals_apply_to_the_jobs_after_them() {
        let p = plan(
            "[a]\nsize=1m\n[global]\nbs=64k\nrw=randrw\nrwmixwrite=30\n[b]\nsize=1m\n\
             [c]\nsize=1m\nrw=write:128k\n",
            Overrides::default(),
        )
        .unwrap();
        let j: Vec<&JobSpec> = p.jobs.iter().map(|j| &j.job).collect();
        assert_eq!((j[0].bs, j[0].rw), (4096, Rw::Read));
        assert_eq!((j[1].bs, j[1].rw, j[1].rwmixread), (65536, Rw::RandRw, 70));
        assert_eq!((j[2].rw, j[2].seq_skip), (Rw::Write, 2));
        assert_eq!(j[0].io_limit, Some(1 << 20));
        let z = plan(
            "[z]\nrw=randread\nsize=1m\nrandom_distribution=zipf:1.2\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(z.jobs[0].job.zipf, Some(1.2));
        assert!(!p.timed);
        assert!(
            p.notes.iter().any(|n| n.contains("b, c together")),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn weighted_sizes_pacing_and_engines() {
        let p = plan(
            "[global]\nioengine=libaio\ndirect=1\nsize=8m\nruntime=2\ntime_based\n\
             [a]\nrw=randread\nbssplit=4k/50:64k/:1m/\nrate_iops=100\nthinktime=2ms\n",
            Overrides::default(),
        )
        .unwrap();
        let a = &p.jobs[0].job;
        let shares: Vec<(u64, u8)> = a.access.iter().map(|l| (l.size, l.share)).collect();
        assert_eq!(shares, [(4096, 50), (65536, 25), (1 << 20, 25)]);
        assert_eq!(a.bs, 1 << 20);
        assert_eq!(a.io_limit, None);
        assert_eq!(
            (a.pace.rate_iops, a.pace.think_us, a.pace.think_blocks),
            (100, 2000, 1)
        );
        assert_eq!(
            (p.engine, p.duration),
            (kind("io_uring"), Duration::from_secs(2))
        );
        assert!(p
            .notes
            .iter()
            .any(|n| n.contains("ioengine=libaio runs as iolab's io_uring")));
    }

    #[test]
    fn refusals() {
        let e = |t: &str| plan(t, Overrides::default()).unwrap_err().to_string();
        assert_eq!(
            e("[a]\nsize=1m\niodpeth=4\n"),
            "j.fio:3: iodpeth: not an fio option iolab knows; did you mean iodepth?"
        );
        // An unset variable refuses the file, naming it; but an engine iolab cannot run is
        // the reason given first, wherever the variable is.
        assert_eq!(
            e("[a]\nsize=${NOPE}\n"),
            "j.fio:2: ${NOPE}: the environment variable NOPE is not set"
        );
        assert!(e("[a]\nhostname=${H}\nioengine=rdma\n").starts_with("j.fio:3: ioengine:"));
        // The engine is named even when another unsupported option comes first.
        assert!(
            e("[a]\nhostname=x\nioengine=rdma\n").starts_with("j.fio:3: ioengine: ioengine=rdma")
        );
        assert!(e("[a]\nsize=1m\nruntime=1\n[b]\nsize=1m\nruntime=2\n")
            .starts_with("j.fio:6: runtime: job b"));
        assert!(e("[a]\ntime_based\nsize=1m\n").starts_with("j.fio:2: time_based:"));
        assert!(e("[a]\nrw=randread:8\nsize=1m\n").starts_with("j.fio:2: rw:"));
        assert!(e("[a]\nsize=1m\nsync=1\n").starts_with("j.fio:3: sync:"));
        assert!(e("[a]\nrw=rw\nsize=1m\nrate=1m\nbs=4k,8k\n").starts_with("j.fio:5: bs:"));
        assert!(e("[a]\nsize=1m\nbsrange=4k-12k\n").contains("divides 100"));
        assert!(
            e("[a]\nrw=randread\nsize=1m\nrandom_distribution=pareto:0.9\n").contains("pareto")
        );
        assert!(
            e("[a]\nrw=randread\nsize=1m\nrandom_distribution=zipf:1\n").contains("other than 1")
        );
        assert!(e("[a]\nrw=read\n").starts_with("j.fio:1: size:"));
        // A value --size or --duration replaces is still checked.
        let ov = Overrides {
            size: Some(1 << 20),
            duration: Some(Duration::from_millis(500)),
        };
        let e = plan("[a]\nsize=1m\nruntime=-1\n", ov)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("j.fio:3: runtime:"), "{e}");
        let e = plan("[a]\nsize=-1\n", ov).unwrap_err().to_string();
        assert!(e.starts_with("j.fio:2: size:"), "{e}");
        assert!(plan("[a]\nsize=50%\n", ov).is_ok());
        // --size and --duration replace what differs.
        let ov = Overrides {
            size: Some(1 << 20),
            duration: Some(Duration::from_millis(500)),
        };
        let p = plan("[a]\nsize=1g\nruntime=1\n[b]\nsize=2g\nruntime=2\n", ov).unwrap();
        assert_eq!(
            (p.size, p.duration),
            (Some(1 << 20), Duration::from_millis(500))
        );
    }

    #[test]
    fn single_job_files_keep_the_options_and_replace_the_place() {
        let src = Sources {
            read: &|_, _| {
                Err(iolab_sys::input::InputError::Io(
                    std::io::ErrorKind::NotFound.into(),
                ))
            },
            var: &|_| None,
        };
        let f = parse(
            "j.fio",
            b"[global]\nbs=8k\nfilename=/dev/sda\nsize=1g\n[a]\nrw=write\nbs=16k\n[b]\nstonewall\n",
            &src,
        )
        .unwrap();
        let t = single_job_file(&f, "a", &["filename=/t/f".into(), "size=4096".into()]).unwrap();
        assert_eq!(t, "[a]\nrw=write\nbs=16k\nfilename=/t/f\nsize=4096\n");
        assert_eq!(
            single_job_file(&f, "b", &[]).unwrap(),
            "[b]\nbs=8k\nsize=1g\n"
        );
        assert!(single_job_file(&f, "zz", &[]).is_none());
    }
}
