//! Options an engine declares in its own file (fio's per-engine option tables): what one
//! option is ([`EngineOption`]), the values a run records ([`EngineOpts`], stored in the
//! run's settings under each option's key), and the catalogue of every engine's options
//! the binary installs once (`iolab_workloads::install`) for the code that cannot name an
//! engine: fio job files read and written here, every output format's header and JSON.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize};

use crate::EngineKind;

/// A value of an engine option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Val {
    /// On or off: `--NAME` flips the default, fio's `NAME=0|1`.
    Flag(bool),
    /// A whole number: `--NAME N`, fio's `NAME=N`.
    Count(u64),
}

/// One option of an engine, declared in the engine's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOption {
    /// Its key in the run's settings (as stored and in the JSON document).
    pub key: &'static str,
    /// `iolab run`'s long option (`--no-fixedbufs`: a flag given turns the default over).
    pub cli: &'static str,
    /// The option's help line.
    pub help: &'static str,
    /// Its value when `iolab run` is not given it; its type is this value's
    /// (a [`Val::Count`] is bounded by `max`).
    pub default: Val,
    /// The largest value of a [`Val::Count`] option (unused for a flag).
    pub max: u64,
    /// fio's name for it in a job file (export-fio writes it, `run fio` reads it), with
    /// fio's default when a job file leaves it out; `None`: fio has no such option.
    pub fio: Option<(&'static str, Val)>,
    /// What a run's header says when it is on (a flag) or before its value (a count).
    pub header: &'static str,
}

/// The options a run recorded, by key (every engine option `iolab run` resolved, or the
/// ones a fio job file gave); serialised flat into the run's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineOpts(BTreeMap<String, Val>);

impl EngineOpts {
    /// The options with these values.
    pub fn of<'a>(pairs: impl IntoIterator<Item = (&'a str, Val)>) -> Self {
        EngineOpts(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// The value recorded for `key`.
    pub fn get(&self, key: &str) -> Option<Val> {
        self.0.get(key).copied()
    }

    /// Whether the flag `key` was recorded on (false when it was not recorded).
    pub fn flag(&self, key: &str) -> bool {
        self.get(key) == Some(Val::Flag(true))
    }

    /// The count `key` was recorded with.
    pub fn count(&self, key: &str) -> Option<u64> {
        match self.get(key) {
            Some(Val::Count(n)) => Some(n),
            _ => None,
        }
    }

    pub fn set(&mut self, key: &str, v: Val) {
        self.0.insert(key.to_string(), v);
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, Val)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// Reads the keys of the settings no other field took: those with a flag or a count are
/// engine options; anything else a newer or older iolab stored there is passed over.
impl<'de> Deserialize<'de> for EngineOpts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Any {
            Val(Val),
            #[allow(dead_code)]
            Other(serde::de::IgnoredAny),
        }
        let all = BTreeMap::<String, Any>::deserialize(d)?;
        Ok(EngineOpts(
            all.into_iter()
                .filter_map(|(k, v)| match v {
                    Any::Val(v) => Some((k, v)),
                    Any::Other(_) => None,
                })
                .collect(),
        ))
    }
}

/// Every engine's options, installed once.
static CATALOGUE: OnceLock<Vec<(EngineKind, &'static [EngineOption])>> = OnceLock::new();

/// Installs every engine's options (the binary does, from the engine registry, before
/// anything else). The first call wins; later ones are ignored, so every test may call it.
pub fn install(all: impl IntoIterator<Item = (EngineKind, &'static [EngineOption])>) {
    CATALOGUE.get_or_init(|| all.into_iter().collect());
}

/// Every engine option installed, with its engine, in the registry's order.
pub fn catalogue() -> impl Iterator<Item = (EngineKind, &'static EngineOption)> {
    CATALOGUE
        .get()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .flat_map(|(k, opts)| opts.iter().map(move |o| (*k, o)))
}

/// The options of `engine`.
pub fn of(engine: EngineKind) -> impl Iterator<Item = &'static EngineOption> {
    catalogue()
        .filter(move |(k, _)| *k == engine)
        .map(|(_, o)| o)
}

/// The engine option a fio job file names `fio_name`, with its engine.
pub fn by_fio_name(fio_name: &str) -> Option<(EngineKind, &'static EngineOption)> {
    catalogue().find(|(_, o)| o.fio.is_some_and(|(n, _)| n == fio_name))
}

/// What a run's header says of `engine`'s options as `opts` recorded them
/// (`["fixed buffers", "registered files"]`).
pub fn header(engine: EngineKind, opts: &EngineOpts) -> Vec<String> {
    of(engine)
        .filter_map(|o| match opts.get(o.key)? {
            Val::Flag(true) => Some(o.header.to_string()),
            Val::Flag(false) => None,
            Val::Count(n) => Some(format!("{} {n}", o.header)),
        })
        .collect()
}

/// fio's job-file lines for `engine`'s options as `opts` recorded them (a flag only when on).
pub fn fio_lines(engine: EngineKind, opts: &EngineOpts) -> String {
    let mut out = String::new();
    for o in of(engine) {
        let (Some((name, _)), Some(v)) = (o.fio, opts.get(o.key)) else {
            continue;
        };
        match v {
            Val::Flag(true) => out.push_str(&format!("{name}=1\n")),
            Val::Flag(false) => {}
            Val::Count(n) => out.push_str(&format!("{name}={n}\n")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_read_back_and_pass_over_other_keys() {
        #[derive(Deserialize)]
        struct S {
            #[allow(dead_code)]
            size: u64,
            #[serde(flatten)]
            opts: EngineOpts,
        }
        let s: S =
            toml::from_str("size = 1\nfixedbufs = true\nnote = \"x\"\ndepth = 4\n").expect("reads");
        assert_eq!(
            s.opts,
            EngineOpts::of([("fixedbufs", Val::Flag(true)), ("depth", Val::Count(4))])
        );
        assert!(s.opts.flag("fixedbufs"));
        assert_eq!(s.opts.count("depth"), Some(4));
    }

    /// Settings stored before runs without an engine recorded none (a metadata run said
    /// psync, with io_uring's options off) read as they were; newer ones read as no engine.
    #[test]
    fn old_and_engineless_settings_read() {
        let base = "size = 1\nruns = 1\nwarmup_passes = 0\ndirect = false\ndata = \"random\"\n\
                    duration = { secs = 0, nanos = 0 }\nwarmup_duration = { secs = 0, nanos = 0 }\n";
        let old: crate::RunSettings = toml::from_str(&format!(
            "{base}engine = \"psync\"\nfixedbufs = false\nregisterfiles = false\n"
        ))
        .expect("old settings read");
        assert_eq!(old.engine, Some(EngineKind::Psync));
        assert_eq!(old.engine_opts.get("fixedbufs"), Some(Val::Flag(false)));
        let none: crate::RunSettings = toml::from_str(base).expect("no engine reads");
        assert_eq!(none.engine, None);
        assert_eq!(none.engine_opts, EngineOpts::default());
    }
}
