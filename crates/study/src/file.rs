//! The study file: its TOML shape, its validation, and where in the file each problem is.

use std::ops::Range;
use std::path::PathBuf;

use serde::Deserialize;
use toml::{Spanned, Table, Value};

use iolab_testbed::{validate, DeviceConsent, Devices, Kind, TestbedError, TestbedSpec};

use crate::error::StudyError;
use crate::matrix::{expand, merge_tables, set_dotted, value_text};

/// `iolab run` options a study sets itself, so a workload table may not.
pub const RESERVED_OPTIONS: &[&str] = &[
    "target",
    "db",
    "no_store",
    "json",
    "study",
    "config",
    "study_meta",
    "quiet",
    "allow_destroy_device",
    "allow_overwrite_file",
];

/// The order of the visits (see [`crate::schedule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Interleaved,
    /// Interleaved, and each round starts one configuration later (A B C, B C A, C A B).
    Rotated,
    Grouped,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Interleaved => "interleaved",
            Order::Rotated => "rotated",
            Order::Grouped => "grouped",
        }
    }
}

/// A parsed, validated study.
#[derive(Debug, Clone)]
pub struct Study {
    /// The file as named to [`parse`].
    pub file: String,
    pub name: String,
    pub description: Option<String>,
    /// Visits per configuration.
    pub repeats: u32,
    pub order: Order,
    /// Drop the page cache before every workload run (root only).
    pub drop_caches: bool,
    /// Index into `configs` of the baseline.
    pub baseline: usize,
    pub configs: Vec<Config>,
    pub workloads: Vec<Workload>,
}

/// One configuration to build and measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Unique within the study: the `[[config]]` label, then the matrix values.
    pub label: String,
    pub description: Option<String>,
    pub testbed: TestbedSpec,
    /// The merged testbed table the spec was read from (for the results).
    pub testbed_table: Table,
    /// This configuration's matrix values, `(key, value as text)`, in axis order.
    pub matrix: Vec<(String, String)>,
    /// Line of the `[[config]]` it comes from (or of `[testbed]`/`[matrix]`).
    pub line: usize,
}

/// One workload run on every configuration.
#[derive(Debug, Clone)]
pub struct Workload {
    /// What `iolab run` runs: a preset (cdm, atto, custom, iometer...) or a workload
    /// (dbench, fsync, copy, streams, metadata...).
    pub kind: String,
    /// Unique within the study (default: the kind); stored as the run's label, and the
    /// prefix of its test names in the comparison when a study has several workloads.
    pub label: String,
    /// The options as given, `(key, value as text)`.
    pub options: Vec<(String, String)>,
    /// `iolab run` arguments after the kind: `--key value` per option.
    pub args: Vec<String>,
    /// `only = [...]`: the configurations it runs on (a label, or the label of a
    /// `[[config]]` before its matrix values); empty: every configuration.
    pub only: Vec<String>,
    pub line: usize,
}

impl Workload {
    /// Whether this workload runs on the configuration labelled `label`.
    pub fn applies_to(&self, label: &str) -> bool {
        self.only.is_empty()
            || self
                .only
                .iter()
                .any(|o| label == o || label.starts_with(&format!("{o}, ")))
    }
}

impl Study {
    /// Gives the `kind = "device"` configurations the command line's devices (`--device`,
    /// in order: all of them, or the first N where the file says `devices = N`; they replace
    /// a list in the file) and what it allows (`--allow-destroy-device`, `--wipe`), and
    /// checks each again. An error names the option or the configuration and key. With
    /// `require` false (a dry run) a configuration may stay without devices: its plan
    /// shows `<--device>`.
    pub fn use_devices(
        &mut self,
        devices: &[PathBuf],
        consent: &DeviceConsent,
        require: bool,
    ) -> Result<(), DeviceChoiceError> {
        let any = self.configs.iter().any(|c| c.testbed.kind == Kind::Device);
        if !any {
            for (given, opt) in [
                (!devices.is_empty(), "--device"),
                (!consent.allowed.is_empty(), "--allow-destroy-device"),
                (consent.wipe, "--wipe"),
            ] {
                if given {
                    return Err(DeviceChoiceError::NotWanted {
                        option: opt,
                        file: self.file.clone(),
                    });
                }
            }
            return Ok(());
        }
        for c in self
            .configs
            .iter_mut()
            .filter(|c| c.testbed.kind == Kind::Device)
        {
            let t = &mut c.testbed;
            let who = format!("{}: configuration '{}'", self.file, c.label);
            if devices.is_empty() && !require && !matches!(t.devices, Some(Devices::Paths(_))) {
                t.consent = consent.clone();
                continue;
            }
            let chosen = match &t.devices {
                Some(Devices::Count(n)) => {
                    let n = *n as usize;
                    if devices.len() < n {
                        return Err(DeviceChoiceError::TooFew {
                            who,
                            wanted: n,
                            given: devices.len(),
                        });
                    }
                    devices[..n].to_vec()
                }
                Some(Devices::Paths(p)) if devices.is_empty() => p.clone(),
                _ if devices.is_empty() => return Err(DeviceChoiceError::None { who }),
                _ => devices.to_vec(),
            };
            t.devices = Some(Devices::Paths(chosen));
            t.consent = consent.clone();
            validate(t).map_err(|source| DeviceChoiceError::Invalid { who, source })?;
        }
        if let Some(unused) = devices.iter().find(|d| {
            !self
                .configs
                .iter()
                .any(|c| c.testbed.device_paths().contains(d))
        }) {
            return Err(DeviceChoiceError::Unused {
                device: unused.clone(),
                file: self.file.clone(),
            });
        }
        Ok(())
    }

    /// How many runs the study makes: repeats x the (configuration, workload) pairs that
    /// apply.
    pub fn run_count(&self) -> usize {
        let pairs: usize = self
            .configs
            .iter()
            .map(|c| {
                self.workloads
                    .iter()
                    .filter(|w| w.applies_to(&c.label))
                    .count()
            })
            .sum();
        pairs * self.repeats as usize
    }
}

/// What a workload validator found wrong: the option (its TOML key), if it can tell which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadProblem {
    pub key: Option<String>,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: Option<Spanned<String>>,
    description: Option<String>,
    repeats: Option<Spanned<i64>>,
    order: Option<Spanned<String>>,
    drop_caches: Option<bool>,
    baseline: Option<Spanned<String>>,
    testbed: Option<Spanned<Table>>,
    #[serde(default)]
    config: Vec<Spanned<RawConfig>>,
    matrix: Option<Spanned<Table>>,
    #[serde(default)]
    workload: Vec<Spanned<Table>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    label: Option<Spanned<String>>,
    description: Option<String>,
    testbed: Option<Spanned<Table>>,
}

/// Where things are in the text.
struct Source<'a> {
    file: &'a str,
    text: &'a str,
}

impl Source<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .matches('\n')
            .count()
            + 1
    }

    fn err(&self, span: Option<Range<usize>>, key: &str, message: impl Into<String>) -> StudyError {
        StudyError {
            file: self.file.to_string(),
            // A problem of the whole file (no workload, say) is reported at its first line.
            line: Some(span.map_or(1, |s| self.line_of(s.start))),
            key: key.to_string(),
            message: message.into(),
        }
    }

    /// The text a table's span stands for: an inline table is its span; a `[header]` table
    /// runs from its header to the next header that is not one of its sub-tables.
    fn region(&self, span: &Range<usize>) -> Range<usize> {
        let head = &self.text[span.clone()];
        let line_start = self.text[..span.start].rfind('\n').map_or(0, |i| i + 1);
        let (start, name) = if head.starts_with('[') {
            let name = head
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
            (span.start, name)
        } else if self.text[line_start..span.start]
            .trim_start()
            .starts_with('[')
        {
            // A table opened only by a deeper header (`[config.testbed.emulated]` makes
            // `testbed`): its span is the key within that header; the table runs from the
            // header through the headers below the key.
            let name = self.text[line_start..span.end]
                .trim_start()
                .trim_start_matches('[')
                .trim()
                .to_string();
            (line_start, name)
        } else {
            return span.clone();
        };
        // From the end of the key (the rest of its header line included).
        let mut pos = span.end;
        for line in self.text[pos..].split_inclusive('\n') {
            let t = line.trim_start();
            if t.starts_with('[') {
                let other = t
                    .split(']')
                    .next()
                    .unwrap_or("")
                    .trim_matches(|c| c == '[' || c == ' ');
                if !other.starts_with(&format!("{name}.")) {
                    return start..pos;
                }
            }
            pos += line.len();
        }
        start..pos
    }

    /// The line where `key` is set or opened inside the table at `span`: a dotted key is
    /// followed part by part (`emulated.bogus`: the `bogus` after `emulated`'s own header
    /// or inline table), an index (`mkfs_options[2]`) is its array's line; failing that,
    /// the last part anywhere in the table, else the first.
    fn key_line(&self, span: &Range<usize>, key: &str) -> Option<usize> {
        let region = self.region(span);
        let hay = &self.text[region.clone()];
        let parts: Vec<&str> = key
            .split('.')
            .map(|p| p.split('[').next().unwrap_or(p))
            .filter(|p| !p.is_empty())
            .collect();
        let mut at = 0;
        let mut walked = true;
        for p in &parts {
            match find_key(&hay[at..], p) {
                Some(off) => at += off,
                None => {
                    walked = false;
                    break;
                }
            }
        }
        if walked && !parts.is_empty() {
            return Some(self.line_of(region.start + at));
        }
        let mut candidates: Vec<&str> = parts.last().copied().into_iter().collect();
        if let Some(first) = parts.first() {
            candidates.push(first);
        }
        for k in candidates {
            if let Some(off) = find_key(hay, k) {
                return Some(self.line_of(region.start + off));
            }
        }
        None
    }

    fn key_err(
        &self,
        span: &Range<usize>,
        key_in_table: &str,
        full_key: &str,
        message: impl Into<String>,
    ) -> StudyError {
        StudyError {
            file: self.file.to_string(),
            line: self
                .key_line(span, key_in_table)
                .or_else(|| Some(self.line_of(span.start))),
            key: full_key.to_string(),
            message: message.into(),
        }
    }
}

/// Offset of `key` used as a key in `hay`: `key =`, `"key" =`, `[x.key]` or `.key]`.
fn find_key(hay: &str, key: &str) -> Option<usize> {
    let bytes = hay.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    let mut from = 0;
    while let Some(i) = hay[from..].find(key) {
        let at = from + i;
        let end = at + key.len();
        let before_ok = at == 0 || !is_word(bytes[at - 1]);
        let mut j = end;
        if j < bytes.len() && bytes[j] == b'"' {
            j += 1;
        }
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        let after_ok = j < bytes.len() && (bytes[j] == b'=' || bytes[j] == b']');
        if before_ok && after_ok && (end >= bytes.len() || !is_word(bytes[end])) {
            return Some(at);
        }
        from = end;
    }
    None
}

/// Why `text` may not name something a study prints and passes on (a study name, a
/// configuration or workload label): a control character (ESC, a newline, ...) would reach
/// the terminal in the study's progress, or split a line of it.
fn control_char(text: &str) -> Option<String> {
    text.chars().find(|c| c.is_control()).map(|c| {
        format!(
            "contains the control character {:?}; names and labels are printed as they are",
            c
        )
    })
}

/// The name between the first pair of backticks of a serde message (`unknown field `x``).
fn quoted(message: &str) -> Option<&str> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(&message[start..start + len])
}

/// Reads and checks a study. `file` names it in errors; `check_workload` validates each
/// workload's `iolab run` arguments (the CLI parses them with its grammar).
pub fn parse(
    file: &str,
    text: &str,
    check_workload: &mut dyn FnMut(&Workload) -> Result<(), WorkloadProblem>,
) -> Result<Study, StudyError> {
    let src = Source { file, text };
    let raw: Raw = toml::from_str(text).map_err(|e| {
        // A syntax error has no key; a type error names the key on its line.
        let mut err = src.err(e.span(), "", e.message().trim().to_string());
        if text.parse::<Table>().is_ok() {
            let line = *err.line.get_or_insert(1);
            err.key = iolab_spec::tomlkey::key_at(e.message(), text, line)
                .unwrap_or_else(|| "study".to_string());
        } else if err.line.is_none() {
            err.line = Some(1);
        }
        err
    })?;

    let name = match &raw.name {
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(src.err(Some(n.span()), "name", "must not be empty"))
        }
        Some(n) if control_char(n.get_ref()).is_some() => {
            return Err(src.err(
                Some(n.span()),
                "name",
                control_char(n.get_ref()).unwrap_or_default(),
            ))
        }
        Some(n) => n.get_ref().clone(),
        None => std::path::Path::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "study".into()),
    };
    let repeats = match &raw.repeats {
        None => 1,
        Some(r) => match u32::try_from(*r.get_ref()) {
            Ok(n) if (1..=1000).contains(&n) => n,
            _ => {
                return Err(src.err(
                    Some(r.span()),
                    "repeats",
                    format!("{} is not a number of repeats (1 to 1000)", r.get_ref()),
                ))
            }
        },
    };
    let order = match raw.order.as_ref().map(|o| (o.get_ref().as_str(), o.span())) {
        None | Some(("interleaved", _)) => Order::Interleaved,
        Some(("grouped", _)) => Order::Grouped,
        Some(("rotated", _)) => Order::Rotated,
        Some((other, span)) => {
            return Err(src.err(
                Some(span),
                "order",
                format!("'{other}': expected \"interleaved\", \"rotated\" or \"grouped\""),
            ))
        }
    };

    let configs = configurations(&src, &raw)?;
    let baseline = match &raw.baseline {
        None => 0,
        Some(b) => configs
            .iter()
            .position(|c| c.label == *b.get_ref())
            .ok_or_else(|| {
                src.err(
                    Some(b.span()),
                    "baseline",
                    format!(
                        "no configuration is labelled '{}' (labels: {})",
                        b.get_ref(),
                        configs
                            .iter()
                            .map(|c| c.label.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?,
    };
    let workloads = workloads(&src, &raw, check_workload)?;
    for (i, w) in workloads.iter().enumerate() {
        for o in &w.only {
            if !configs
                .iter()
                .any(|c| c.label == *o || c.label.starts_with(&format!("{o}, ")))
            {
                return Err(src.key_err(
                    &raw.workload[i].span(),
                    "only",
                    &format!("workload[{}].only", i + 1),
                    format!(
                        "'{o}' is not a configuration (labels: {})",
                        configs
                            .iter()
                            .map(|c| c.label.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    // Corrupting members is allowed only on a filesystem the study builds: a directory
    // testbed may point into anyone's redundant filesystem.
    for (i, w) in workloads.iter().enumerate() {
        let corrupts = w
            .options
            .iter()
            .any(|(k, v)| k == "allow_corrupt_members" && v == "true");
        if !corrupts {
            continue;
        }
        if let Some(c) = configs
            .iter()
            .find(|c| w.applies_to(&c.label) && c.testbed.kind == Kind::Dir)
        {
            return Err(src.key_err(
                &raw.workload[i].span(),
                "allow_corrupt_members",
                &format!("workload[{}].allow_corrupt_members", i + 1),
                format!(
                    "configuration '{}' is a directory testbed: a study corrupts only the \
                     members of a filesystem it builds (kind = \"loop\"); give `iolab run \
                     scrub-test --target DIR --allow-corrupt-members` yourself to corrupt an \
                     existing filesystem's members",
                    c.label
                ),
            ));
        }
    }
    Ok(Study {
        file: file.to_string(),
        name,
        description: raw.description.clone(),
        repeats,
        order,
        drop_caches: raw.drop_caches.unwrap_or(false),
        baseline,
        configs,
        workloads,
    })
}

/// The configurations: each `[[config]]` (or the study's `[testbed]` alone) crossed with
/// every combination of the matrix, each with a validated testbed.
/// The most configurations a study may have (after its matrix is expanded).
pub const MAX_CONFIGS: usize = 1000;

fn configurations(src: &Source<'_>, raw: &Raw) -> Result<Vec<Config>, StudyError> {
    struct BaseConfig {
        label: String,
        description: Option<String>,
        table: Table,
        /// (span, key prefix) of each table that contributed, most specific first.
        sources: Vec<(Range<usize>, String)>,
        line: usize,
    }
    let mut bases: Vec<BaseConfig> = Vec::new();
    let base_sources: Vec<(Range<usize>, String)> = raw
        .testbed
        .iter()
        .map(|t| (t.span(), "testbed".to_string()))
        .collect();
    if raw.config.is_empty() {
        let Some(t) = &raw.testbed else {
            return Err(src.err(
                None,
                "config",
                "no configuration: add [[config]] entries (each with a label and a testbed), \
                 or a [testbed] with a [matrix]",
            ));
        };
        bases.push(BaseConfig {
            label: String::new(),
            description: None,
            table: t.get_ref().clone(),
            sources: base_sources.clone(),
            line: src.line_of(t.span().start),
        });
    }
    for (i, c) in raw.config.iter().enumerate() {
        let key = format!("config[{}]", i + 1);
        let rc = c.get_ref();
        let label = match &rc.label {
            Some(l) if !l.get_ref().trim().is_empty() => l.get_ref().trim().to_string(),
            Some(l) => return Err(src.err(Some(l.span()), &format!("{key}.label"), "is empty")),
            None => {
                return Err(src.err(
                    Some(c.span()),
                    &format!("{key}.label"),
                    "every [[config]] needs a label (it names the column in the comparison)",
                ))
            }
        };
        let mut table = raw
            .testbed
            .as_ref()
            .map(|t| t.get_ref().clone())
            .unwrap_or_default();
        let mut sources = Vec::new();
        match &rc.testbed {
            Some(t) => {
                merge_tables(&mut table, t.get_ref());
                sources.push((t.span(), format!("{key}.testbed")));
            }
            None if raw.testbed.is_none() => {
                return Err(src.err(
                    Some(c.span()),
                    &format!("{key}.testbed"),
                    "has no testbed, and the study has no [testbed] to inherit",
                ))
            }
            None => {}
        }
        sources.extend(base_sources.iter().cloned());
        bases.push(BaseConfig {
            label,
            description: rc.description.clone(),
            table,
            sources,
            line: src.line_of(c.span().start),
        });
    }

    // The matrix axes, in file order.
    let mut axes: Vec<(String, Vec<Value>)> = Vec::new();
    let matrix_span = raw.matrix.as_ref().map(|m| m.span());
    if let Some(m) = &raw.matrix {
        for (k, v) in m.get_ref() {
            let full = format!("matrix.{k}");
            let values = match v {
                Value::Array(a) if !a.is_empty() => a.clone(),
                Value::Array(_) => {
                    return Err(src.key_err(&m.span(), k, &full, "has no values"));
                }
                _ => {
                    return Err(src.key_err(
                        &m.span(),
                        k,
                        &full,
                        "must be an array of the values to compare, e.g. [0, 128, 2560]",
                    ))
                }
            };
            if k == "kind" {
                return Err(src.key_err(
                    &m.span(),
                    k,
                    &full,
                    "the testbed kind cannot be a matrix axis; write a [[config]] per kind",
                ));
            }
            axes.push((k.clone(), values));
        }
    }
    // Every configuration is built and torn down in turn: bound their number before the
    // product is expanded (a few axes of many values would exhaust memory otherwise).
    let count = axes
        .iter()
        .try_fold(bases.len(), |n, (_, v)| n.checked_mul(v.len()));
    if count.is_none_or(|n| n > MAX_CONFIGS) {
        let sizes: Vec<String> = axes.iter().map(|(_, v)| v.len().to_string()).collect();
        return Err(src.err(
            matrix_span.clone(),
            "matrix",
            format!(
                "{} configuration(s) crossed with axes of {} values make {}, more than the \
                 {MAX_CONFIGS} a study may have; split the study or drop values",
                bases.len(),
                sizes.join(" x "),
                count.map_or("too many to count".to_string(), |n| n.to_string()),
            ),
        ));
    }
    // Short axis names for labels unless two axes end alike.
    let short: Vec<String> = axes
        .iter()
        .map(|(k, _)| {
            let last = k.rsplit('.').next().unwrap_or(k).to_string();
            let clash = axes
                .iter()
                .filter(|(o, _)| o.rsplit('.').next() == Some(last.as_str()))
                .count()
                > 1;
            if clash {
                k.clone()
            } else {
                last
            }
        })
        .collect();

    let mut configs: Vec<Config> = Vec::new();
    for base in &bases {
        for combo in expand(&axes) {
            let mut table = base.table.clone();
            let mut matrix = Vec::new();
            let mut parts = Vec::new();
            for (i, (k, v)) in combo.iter().enumerate() {
                set_dotted(&mut table, k, v.clone()).map_err(|m| {
                    src.key_err(
                        matrix_span.as_ref().expect("axes come from [matrix]"),
                        k,
                        &format!("matrix.{k}"),
                        m.to_string(),
                    )
                })?;
                matrix.push((k.clone(), value_text(v)));
                parts.push(format!("{}={}", short[i], value_text(v)));
            }
            let label = match (base.label.is_empty(), parts.is_empty()) {
                (_, true) if base.label.is_empty() => "testbed".to_string(),
                (_, true) => base.label.clone(),
                (true, false) => parts.join(", "),
                (false, false) => format!("{}, {}", base.label, parts.join(", ")),
            };
            let in_matrix = |key: &str| {
                axes.iter()
                    .any(|(a, _)| key == a || key.starts_with(&format!("{a}.")))
            };
            let locate = |key: &str, message: String| -> StudyError {
                if in_matrix(key) {
                    if let Some(span) = &matrix_span {
                        return src.key_err(span, key, &format!("matrix.{key}"), message);
                    }
                }
                for (span, prefix) in &base.sources {
                    if src.key_line(span, key).is_some() {
                        return src.key_err(span, key, &format!("{prefix}.{key}"), message);
                    }
                }
                match base.sources.first() {
                    Some((span, prefix)) => {
                        src.key_err(span, key, &format!("{prefix}.{key}"), message)
                    }
                    None => src.err(None, key, message),
                }
            };
            let spec = testbed_spec(&table)
                .map_err(|(key, m)| locate(&key, format!("{m} (configuration '{label}')")))?;
            validate(&spec).map_err(|e| {
                let key = e.key().unwrap_or("").to_string();
                let message = match &e {
                    TestbedError::Invalid { message, .. }
                    | TestbedError::Unsupported { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                locate(&key, format!("{message} (configuration '{label}')"))
            })?;
            if let Some(why) = control_char(&label) {
                return Err(StudyError {
                    line: Some(base.line),
                    ..src.err(
                        None,
                        "config.label",
                        format!("'{}' {why}", label.escape_debug()),
                    )
                });
            }
            if let Some(prev) = configs.iter().find(|c| c.label == label) {
                return Err(StudyError {
                    line: Some(base.line),
                    ..src.err(
                        None,
                        "config.label",
                        format!(
                            "two configurations are labelled '{label}' (lines {} and {}); labels \
                         must be unique",
                            prev.line, base.line
                        ),
                    )
                });
            }
            configs.push(Config {
                label,
                description: base.description.clone(),
                testbed: spec,
                testbed_table: table,
                matrix,
                line: base.line,
            });
        }
    }
    Ok(configs)
}

/// Reads a testbed table; on failure names the key responsible.
fn testbed_spec(table: &Table) -> Result<TestbedSpec, (String, String)> {
    match Value::Table(table.clone()).try_into::<TestbedSpec>() {
        Ok(s) => Ok(s),
        Err(e) => {
            let message = e.message().trim().to_string();
            let named =
                message.starts_with("unknown field") || message.starts_with("missing field");
            if let Some(k) = quoted(&message).filter(|_| named) {
                // An unknown key of a nested table (`[testbed.emulated]`) is named by its
                // path in the testbed.
                let path = if table.contains_key(k) || message.starts_with("missing field") {
                    k.to_string()
                } else {
                    nested_key(table, k).unwrap_or_else(|| k.to_string())
                };
                return Err((path, message));
            }
            // The message does not say which key: try each key alone (with `kind`).
            for (k, v) in table {
                let mut one = Table::new();
                if let Some(kind) = table.get("kind") {
                    one.insert("kind".into(), kind.clone());
                }
                one.insert(k.clone(), v.clone());
                if let Err(e) = Value::Table(one).try_into::<TestbedSpec>() {
                    return Err((k.clone(), e.message().trim().to_string()));
                }
            }
            Err((String::new(), message))
        }
    }
}

/// The dotted path (`emulated.bogus`, `emulated.errors[1].bogus`) of the first key `name`
/// in a table nested in `table`.
fn nested_key(table: &Table, name: &str) -> Option<String> {
    for (k, v) in table {
        match v {
            Value::Table(t) if t.contains_key(name) => return Some(format!("{k}.{name}")),
            Value::Table(t) => {
                if let Some(p) = nested_key(t, name) {
                    return Some(format!("{k}.{p}"));
                }
            }
            Value::Array(a) => {
                for (i, item) in a.iter().enumerate() {
                    if let Value::Table(t) = item {
                        let found = if t.contains_key(name) {
                            Some(name.to_string())
                        } else {
                            nested_key(t, name)
                        };
                        if let Some(p) = found {
                            return Some(format!("{k}[{}].{p}", i + 1));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    None
}

/// The workloads with their `iolab run` arguments.
fn workloads(
    src: &Source<'_>,
    raw: &Raw,
    check: &mut dyn FnMut(&Workload) -> Result<(), WorkloadProblem>,
) -> Result<Vec<Workload>, StudyError> {
    if raw.workload.is_empty() {
        return Err(src.err(
            None,
            "workload",
            "no workload: add [[workload]] entries, e.g. kind = \"cdm\"",
        ));
    }
    let mut out: Vec<Workload> = Vec::new();
    for (i, w) in raw.workload.iter().enumerate() {
        let key = format!("workload[{}]", i + 1);
        let span = w.span();
        let t = w.get_ref();
        let kind = match t.get("kind") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(_) => {
                return Err(src.key_err(&span, "kind", &format!("{key}.kind"), "must be a name"))
            }
            None => {
                return Err(src.err(
                    Some(span),
                    &format!("{key}.kind"),
                    "every [[workload]] needs a kind (cdm, atto, custom, iometer, dbench, \
                     fsync, copy, streams, metadata, ...)",
                ))
            }
        };
        let label = match t.get("label") {
            None => kind.clone(),
            Some(Value::String(s)) if control_char(s).is_some() => {
                return Err(src.key_err(
                    &span,
                    "label",
                    &format!("{key}.label"),
                    control_char(s).unwrap_or_default(),
                ))
            }
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(_) => {
                return Err(src.key_err(
                    &span,
                    "label",
                    &format!("{key}.label"),
                    "must be a non-empty string",
                ))
            }
        };
        if let Some(prev) = out.iter().find(|o| o.label == label) {
            return Err(src.err(
                Some(span),
                &format!("{key}.label"),
                format!(
                    "label '{label}' is already used by the workload on line {}; give each \
                     workload of the same kind its own label",
                    prev.line
                ),
            ));
        }
        let only = match t.get("only") {
            None => Vec::new(),
            Some(Value::Array(a)) if !a.is_empty() && a.iter().all(|x| x.is_str()) => a
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            Some(_) => {
                return Err(src.key_err(
                    &span,
                    "only",
                    &format!("{key}.only"),
                    "must be a list of configuration labels",
                ))
            }
        };
        let mut args = Vec::new();
        let mut options = Vec::new();
        for (k, v) in t {
            if k == "kind" || k == "label" || k == "only" {
                continue;
            }
            let full = format!("{key}.{k}");
            // The key becomes `--KEY`: only an option's name, never `target=/etc` or a
            // second option in disguise.
            if k.is_empty()
                || !k
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                return Err(src.key_err(
                    &span,
                    k,
                    &format!("{key}.{}", k.escape_debug()),
                    "is not an option name (lowercase letters, digits and `_`)",
                ));
            }
            if RESERVED_OPTIONS.contains(&k.as_str()) {
                return Err(src.key_err(
                    &span,
                    k,
                    &full,
                    "is set by the study itself (the testbed is the target; runs go to the \
                     study's database)",
                ));
            }
            let flag = format!("--{}", k.replace('_', "-"));
            let text = match v {
                Value::Boolean(true) => {
                    args.push(flag);
                    options.push((k.clone(), "true".into()));
                    continue;
                }
                Value::Boolean(false) => {
                    options.push((k.clone(), "false".into()));
                    continue;
                }
                Value::String(s) => s.clone(),
                Value::Integer(n) => n.to_string(),
                Value::Float(f) => f.to_string(),
                Value::Array(a) => a
                    .iter()
                    .map(|x| match x {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                _ => {
                    return Err(src.key_err(
                        &span,
                        k,
                        &full,
                        "must be a string, number, boolean or array",
                    ))
                }
            };
            args.push(flag);
            args.push(text.clone());
            options.push((k.clone(), text));
        }
        let wl = Workload {
            kind,
            label,
            options,
            args,
            only,
            line: src.line_of(span.start),
        };
        check(&wl).map_err(|p| match &p.key {
            Some(k) => src.key_err(&span, k, &format!("{key}.{k}"), p.message.clone()),
            None => src.err(Some(span.clone()), &key, p.message.clone()),
        })?;
        out.push(wl);
    }
    Ok(out)
}

/// Why a study's devices cannot be chosen ([`Study::use_devices`]): `who` is `FILE:
/// configuration 'LABEL'`; a testbed the devices do not make valid keeps its
/// [`TestbedError`] as the source.
#[derive(Debug, thiserror::Error)]
pub enum DeviceChoiceError {
    #[error("{option}: {file} has no kind = \"device\" testbed (it builds its own devices)")]
    NotWanted { option: &'static str, file: String },
    #[error(
        "{who}: devices = {wanted} takes the first {wanted} devices of --device, and {given} \
         were given"
    )]
    TooFew {
        who: String,
        wanted: usize,
        given: usize,
    },
    #[error(
        "{who}: names no device; give --device DEV (once per device) or devices = \
         [\"/dev/sdX\"] in the file"
    )]
    None { who: String },
    #[error("{who}: {source}")]
    Invalid {
        who: String,
        #[source]
        source: TestbedError,
    },
    #[error(
        "--device {}: no configuration of {file} uses it (each takes the first `devices = N` \
         of them)",
        device.display()
    )]
    Unused { device: PathBuf, file: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(_: &Workload) -> Result<(), WorkloadProblem> {
        Ok(())
    }

    fn parse_ok(text: &str) -> Study {
        parse("s.toml", text, &mut ok).unwrap_or_else(|e| panic!("{e}"))
    }

    fn parse_err(text: &str) -> StudyError {
        parse("s.toml", text, &mut ok).expect_err("should fail")
    }

    #[test]
    fn devices_come_from_the_command_line() {
        let text = "name = \"d\"\n[[config]]\nlabel = \"ext4\"\ntestbed = { kind = \"device\", \
                    devices = 1, fs = \"ext4\" }\n[[config]]\nlabel = \"raid1\"\ntestbed = { kind = \
                    \"device\", fs = \"btrfs\", raid = \"raid1\" }\n[[workload]]\nkind = \"custom\"\n";
        let devs = [PathBuf::from("/dev/sdx9"), PathBuf::from("/dev/sdy9")];
        let consent = DeviceConsent {
            allowed: devs.to_vec(),
            wipe: true,
        };
        let mut s = parse_ok(text);
        s.use_devices(&devs, &consent, true).unwrap();
        assert_eq!(s.configs[0].testbed.device_paths(), &devs[..1]);
        assert_eq!(s.configs[1].testbed.device_paths(), &devs[..]);
        assert!(s.configs[1].testbed.consent.wipe);
        // One device is too few for raid1; none at all names the configuration.
        let e = parse_ok(text)
            .use_devices(&devs[..1], &consent, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("configuration 'raid1'") && e.contains("`raid`"),
            "{e}"
        );
        let e = parse_ok(text)
            .use_devices(&[], &DeviceConsent::default(), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("devices = 1 takes the first 1"), "{e}");
        // Only ext4 on one device: a second --device would be ignored.
        let one = "name = \"d\"\n[testbed]\nkind = \"device\"\ndevices = 1\nfs = \"ext4\"\n\
                   [[workload]]\nkind = \"custom\"\n";
        let e = parse_ok(one)
            .use_devices(&devs, &consent, true)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--device /dev/sdy9: no configuration"), "{e}");
        // A dry run may leave them out.
        parse_ok(text)
            .use_devices(&[], &DeviceConsent::default(), false)
            .unwrap();
        // --device for a study that builds its own devices.
        let e = parse_ok(BARRIERS)
            .use_devices(&devs, &DeviceConsent::default(), true)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--device: s.toml has no kind = \"device\""),
            "{e}"
        );
    }

    const BARRIERS: &str = r#"name = "barriers"
repeats = 2

[testbed]
kind = "loop"
size = "256MiB"
fs = "ext4"
[testbed.throttle]
write_iops = 150

[[config]]
label = "barrier=1"
testbed = { mount_options = "barrier=1" }

[[config]]
label = "barrier=0"
[config.testbed]
mount_options = "barrier=0"

[[workload]]
kind = "fsync"
sizes = ["4k", "8k"]
duration = "1s"

[[workload]]
kind = "dbench"
clients = 2
time = "5s"
sync = true
"#;

    #[test]
    fn configs_inherit_the_study_testbed() {
        let s = parse_ok(BARRIERS);
        assert_eq!(s.name, "barriers");
        assert_eq!(s.repeats, 2);
        assert_eq!(s.order, Order::Interleaved);
        assert_eq!(s.configs.len(), 2);
        let c = &s.configs[1];
        assert_eq!(c.label, "barrier=0");
        assert_eq!(c.line, 15);
        assert_eq!(c.testbed.mount_options.as_deref(), Some("barrier=0"));
        assert_eq!(c.testbed.throttle.as_ref().unwrap().write_iops, Some(150));
        assert_eq!(
            s.workloads[0].args,
            ["--sizes", "4k,8k", "--duration", "1s"]
        );
        assert_eq!(
            s.workloads[1].args,
            ["--clients", "2", "--time", "5s", "--sync"]
        );
    }

    #[test]
    fn matrix_crosses_every_config() {
        let text = r#"
[[config]]
label = "ext4"
testbed = { kind = "loop", size = "256MiB", fs = "ext4" }
[[config]]
label = "xfs"
testbed = { kind = "loop", size = "320MiB", fs = "xfs" }

[matrix]
read_ahead_kb = [0, 128, 2560]
"throttle.read_iops" = [150, 300]

[[workload]]
kind = "cdm"
"#;
        let s = parse_ok(text);
        assert_eq!(s.configs.len(), 12);
        assert_eq!(s.configs[0].label, "ext4, read_ahead_kb=0, read_iops=150");
        assert_eq!(s.configs[1].label, "ext4, read_ahead_kb=0, read_iops=300");
        assert_eq!(
            s.configs[11].label,
            "xfs, read_ahead_kb=2560, read_iops=300"
        );
        assert_eq!(s.configs[5].testbed.read_ahead_kb, Some(2560));
        assert_eq!(
            s.configs[5].testbed.throttle.as_ref().unwrap().read_iops,
            Some(300)
        );
        assert_eq!(
            s.configs[3].matrix,
            [
                ("read_ahead_kb".to_string(), "128".to_string()),
                ("throttle.read_iops".to_string(), "300".to_string())
            ]
        );
    }

    #[test]
    fn matrix_alone_over_a_testbed() {
        let text = "[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\nfs = \"ext4\"\n\
                    [matrix]\nread_ahead_kb = [0, 256]\n[[workload]]\nkind = \"atto\"\n";
        let s = parse_ok(text);
        let labels: Vec<&str> = s.configs.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["read_ahead_kb=0", "read_ahead_kb=256"]);
        assert_eq!(s.baseline, 0);
    }

    #[test]
    fn a_matrix_beyond_the_bound_is_refused_before_it_is_expanded() {
        // Nine axes of ten values: 10^9 configurations.
        let mut text = "[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\nfs = \"ext4\"\n\
                        [matrix]\n"
            .to_string();
        for i in 0..9 {
            text.push_str(&format!("knob{i} = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"));
        }
        text.push_str("[[workload]]\nkind = \"atto\"\n");
        let e = parse_err(&text);
        assert_eq!((e.line, e.key.as_str()), (Some(5), "matrix"), "{e}");
        assert!(
            e.message.contains("make 1000000000, more than the 1000"),
            "{e}"
        );
        // At the bound it is fine.
        let text = "[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\nfs = \"ext4\"\n\
                    [matrix]\nread_ahead_kb = [0, 256]\n[[workload]]\nkind = \"atto\"\n";
        assert_eq!(parse_ok(text).configs.len(), 2);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        // Unknown top-level key.
        let e = parse_err("name = \"x\"\nrepeat = 3\n");
        assert_eq!((e.line, e.key.as_str()), (Some(2), "repeat"), "{e}");
        assert!(
            e.to_string().starts_with("s.toml:2: repeat: unknown field"),
            "{e}"
        );

        // Unknown testbed key inside a config's sub-table.
        let bad = BARRIERS.replace("mount_options = \"barrier=0\"", "mount_opts = \"x\"");
        let e = parse_err(&bad);
        assert_eq!(e.line, Some(18), "{e}");
        assert_eq!(e.key, "config[2].testbed.mount_opts", "{e}");

        // A bad value in the study's [testbed.throttle] (validate says which key).
        let bad = BARRIERS.replace("write_iops = 150", "write_iops = 0");
        let e = parse_err(&bad);
        assert_eq!(e.line, Some(9), "{e}");
        assert!(e.key.ends_with("write_iops"), "{e}");

        // A bad enum value: the key is found by trying each key alone.
        let bad = BARRIERS.replace("fs = \"ext4\"", "fs = \"ext5\"");
        let e = parse_err(&bad);
        assert_eq!((e.line, e.key.as_str()), (Some(7), "testbed.fs"), "{e}");

        // A bad matrix value is reported on the matrix line.
        let text = "[testbed]\nkind = \"loop\"\nsize = \"64MiB\"\nfs = \"ext4\"\n\
                    [matrix]\nwrite_cache = [\"write back\", \"write sideways\"]\n\
                    [[workload]]\nkind = \"cdm\"\n";
        let e = parse_err(text);
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(6), "matrix.write_cache"),
            "{e}"
        );

        // Missing label, duplicate workload labels, reserved options, baseline.
        let e = parse_err("[[config]]\ntestbed = { kind = \"dir\", path = \"/tmp\" }\n");
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(1), "config[1].label"),
            "{e}"
        );
        let two = format!("{BARRIERS}\n[[workload]]\nkind = \"fsync\"\n");
        let e = parse_err(&two);
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(31), "workload[3].label"),
            "{e}"
        );
        let reserved = BARRIERS.replace("clients = 2", "target = \"/srv\"");
        let e = parse_err(&reserved);
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(27), "workload[2].target"),
            "{e}"
        );
        let base = BARRIERS.replace("repeats = 2", "repeats = 2\nbaseline = \"barrier=2\"");
        let e = parse_err(&base);
        assert_eq!((e.line, e.key.as_str()), (Some(3), "baseline"), "{e}");
        assert!(e.message.contains("barrier=1, barrier=0"), "{e}");
        let e = parse_err(&BARRIERS.replace("repeats = 2", "repeats = 0"));
        assert_eq!((e.line, e.key.as_str()), (Some(2), "repeats"), "{e}");
        let e = parse_err(&BARRIERS.replace("repeats = 2", "order = \"random\""));
        assert_eq!((e.line, e.key.as_str()), (Some(2), "order"), "{e}");
    }

    #[test]
    fn only_limits_a_workload_to_some_configurations() {
        let text = format!("{BARRIERS}\n[[workload]]\nkind = \"cdm\"\nonly = [\"barrier=0\"]\n");
        let s = parse_ok(&text);
        let w = &s.workloads[2];
        assert!(w.applies_to("barrier=0") && !w.applies_to("barrier=1"));
        assert!(s.workloads[0].applies_to("barrier=1"));
        assert_eq!(s.run_count(), 2 * (2 + 2 + 1));
        let e = parse_err(&text.replace("[\"barrier=0\"]", "[\"barrier=9\"]"));
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(33), "workload[3].only"),
            "{e}"
        );
        // A [[config]] label also names its matrix expansions.
        let m = "[[config]]\nlabel = \"ext4\"\ntestbed = { kind = \"loop\", size = \"64MiB\", \
                 fs = \"ext4\" }\n[matrix]\nread_ahead_kb = [0, 128]\n[[workload]]\n\
                 kind = \"cdm\"\nonly = [\"ext4\"]\n";
        assert_eq!(parse_ok(m).run_count(), 2);
    }

    #[test]
    fn duplicate_labels_after_expansion_are_refused() {
        let text = "[[config]]\nlabel = \"a\"\ntestbed = { kind = \"dir\", path = \"/tmp\" }\n\
                    [[config]]\nlabel = \"a\"\ntestbed = { kind = \"dir\", path = \"/var/tmp\" }\n\
                    [[workload]]\nkind = \"cdm\"\n";
        let e = parse_err(text);
        assert!(e.message.contains("lines 1 and 4"), "{e}");
    }

    #[test]
    fn the_validator_locates_the_option_it_names() {
        let mut check = |w: &Workload| {
            if w.kind == "dbench" {
                Err(WorkloadProblem {
                    key: Some("time".into()),
                    message: "bad time".into(),
                })
            } else {
                Ok(())
            }
        };
        let e = parse("b.toml", BARRIERS, &mut check).unwrap_err();
        assert_eq!(e.to_string(), "b.toml:28: workload[2].time: bad time");
    }

    #[test]
    fn schedule_orders() {
        let mut s = parse_ok(BARRIERS);
        let steps: Vec<(u32, usize)> = crate::schedule(&s)
            .iter()
            .map(|s| (s.round, s.config))
            .collect();
        assert_eq!(steps, [(0, 0), (0, 1), (1, 0), (1, 1)]);
        s.order = Order::Grouped;
        let steps: Vec<(u32, usize)> = crate::schedule(&s)
            .iter()
            .map(|s| (s.round, s.config))
            .collect();
        assert_eq!(steps, [(0, 0), (1, 0), (0, 1), (1, 1)]);
    }
}
