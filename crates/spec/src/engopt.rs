//! What an engine says of itself in its own file (fio's `ioengine_ops`: names, capability
//! flags, its own option table): the description ([`EngineDesc`]), what one option is
//! ([`EngineOption`]), the values a run records ([`EngineOpts`], stored in the run's
//! settings under each option's key), and the catalogue of every engine the binary installs
//! once (`iolab_engine::engines::install`, through `iolab_workloads::install`) for the code
//! that cannot name an engine: `EngineKind`'s names, fio job files read and written here,
//! every output format's header and JSON.

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

/// How an engine takes a trim (a job of fio's `rw=trim`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trims {
    /// It does not (the fio mapping runs the job on its `fallback` if that trims, else
    /// refuses it).
    No,
    /// BLKDISCARD, which only a block device takes (fio's os_trim).
    Discard,
    /// Its own way, on any target (falloc punches a hole; null does nothing).
    Own,
}

/// How an engine that makes each I/O one call on one file of a set works on its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Files {
    /// Its files are made (of `filesize`) before the pass, as fio does (filestat,
    /// filedelete); false: each I/O makes its own file (filecreate).
    pub laid_out: bool,
    /// Each I/O removes its file, so a file is met once: a time-based or random job would
    /// meet a removed one (fio fails it with ENOENT) and is refused.
    pub once: bool,
    /// The call each I/O makes on its file, as the run's notes say it ("stat", "unlink").
    pub call: &'static str,
}

impl Files {
    /// Files made before the pass, each I/O one `call` on its file.
    pub const fn laid_out(call: &'static str) -> Files {
        Files {
            laid_out: true,
            once: false,
            call,
        }
    }

    /// Each I/O makes its file with `call`.
    pub const fn made(call: &'static str) -> Files {
        Files {
            laid_out: false,
            once: false,
            call,
        }
    }

    /// And each I/O removes its file: a file is met once.
    pub const fn once(self) -> Files {
        Files { once: true, ..self }
    }
}

/// What an engine is, declared once in its own file (iolab-engine's `engines/`, fio's
/// `ioengine_ops`: its names, capability flags and options); everything that cannot name
/// an engine reads these from the installed catalogue ([`engines`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineDesc {
    /// The engine (its name, `EngineKind::as_str`, is what runs store).
    pub kind: EngineKind,
    /// Other names `--engine` takes for it.
    pub aliases: &'static [&'static str],
    /// fio's `ioengine=` names a job file runs on it.
    pub fio: &'static [&'static str],
    /// Offered by `--engine` (false: only a fio job file chooses it).
    pub cli: bool,
    /// One I/O at a time from the job's thread: any queue depth runs at 1 (fio's
    /// FIO_SYNCIO).
    pub synchronous: bool,
    /// Its I/O reaches the target (false: it completes I/O without touching it, fio's
    /// FIO_DISKLESSIO: the figures are iolab's own overhead).
    pub touches_device: bool,
    /// Its writes are writes of the job's buffers (false: each makes another call,
    /// ftruncate, a file's create...: there is no data to verify or pattern to write).
    pub moves_data: bool,
    /// Each I/O is a call on one file of a set in a directory (fio's filecreate, filestat,
    /// filedelete: a job file gives `nrfiles`), and how; `None`: it works on the job's file.
    pub file_set: Option<Files>,
    /// Why fio's engine of this name fails reads (a job file's reading job is refused with
    /// it), or `None`: it reads.
    pub refuses_reads: Option<&'static str>,
    /// How it trims.
    pub trims: Trims,
    /// The synchronous engine its jobs run on where it cannot run them itself: where the
    /// kernel refuses it (unless named), a trim, and the fio names in `buffered_fallback`
    /// without direct=1.
    pub fallback: Option<EngineKind>,
    /// fio names of it that run as `fallback` without direct=1 (libaio: Linux AIO completes
    /// buffered requests inside io_submit, one at a time).
    pub buffered_fallback: &'static [&'static str],
    /// It puts a priority in each request (fio's `cmdprio_*` take it).
    pub per_io_prio: bool,
    /// fio options of its own that the job-file reader reads itself (a job on another
    /// engine naming one is refused): e4defrag's `donorname`, filestat's `stat_type`.
    pub fio_options: &'static [&'static str],
    /// It needs a donor file, named by fio's `donorname` (e4defrag).
    pub donor: bool,
    /// Its own options (fio's per-engine option table): `iolab run`'s options, the run's
    /// record, fio job files and every report's header read them from here.
    pub options: &'static [EngineOption],
}

impl EngineDesc {
    /// An engine of this name that moves the job's data to the target, asynchronously,
    /// offered by `--engine`, with no fio names, no options and no other capability: an
    /// engine's file states what differs (`EngineDesc { fio: &[...], ..EngineDesc::of(K) }`).
    pub const fn of(kind: EngineKind) -> EngineDesc {
        EngineDesc {
            kind,
            aliases: &[],
            fio: &[],
            cli: true,
            synchronous: false,
            touches_device: true,
            moves_data: true,
            file_set: None,
            refuses_reads: None,
            trims: Trims::No,
            fallback: None,
            buffered_fallback: &[],
            per_io_prio: false,
            fio_options: &[],
            donor: false,
            options: &[],
        }
    }

    /// Whether `--engine NAME` names this engine.
    pub fn is_named(&self, name: &str) -> bool {
        self.cli && (self.kind.as_str() == name || self.aliases.contains(&name))
    }
}

/// Every engine, installed once.
static CATALOGUE: OnceLock<&'static [EngineDesc]> = OnceLock::new();

/// Installs every engine's description (the binary does, from the engine registry, before
/// anything else). The first call wins; later ones are ignored, so every test may call it.
pub fn install(all: &'static [EngineDesc]) {
    CATALOGUE.get_or_init(|| all);
}

/// Every engine installed, in the registry's order (none before [`install`]).
pub fn engines() -> &'static [EngineDesc] {
    CATALOGUE.get().copied().unwrap_or(&[])
}

/// The engine a fio job file's `ioengine=NAME` runs on.
pub fn by_fio(name: &str) -> Option<&'static EngineDesc> {
    engines().iter().find(|d| d.fio.contains(&name))
}

/// Every engine option installed, with its engine, in the registry's order.
pub fn catalogue() -> impl Iterator<Item = (EngineKind, &'static EngineOption)> {
    engines()
        .iter()
        .flat_map(|d| d.options.iter().map(move |o| (d.kind, o)))
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

/// For the tests of the crates iolab-engine depends on, which cannot install its
/// registry: the engines as their files declare them, without their options.
/// iolab-engine's tests check that each agrees with its engine's `DESC` (a new engine need
/// not be here).
#[doc(hidden)]
pub mod testing {
    use super::{EngineDesc, Files, Trims};
    use crate::EngineKind;

    const fn file_set(name: &'static str, fio: &'static [&'static str], f: Files) -> EngineDesc {
        EngineDesc {
            fio,
            cli: false,
            synchronous: true,
            moves_data: false,
            file_set: Some(f),
            ..EngineDesc::of(EngineKind::declare(name))
        }
    }

    const PSYNC: EngineDesc = EngineDesc {
        aliases: &["sync"],
        fio: &["psync", "sync", "pvsync", "pvsync2", "vsync"],
        synchronous: true,
        trims: Trims::Discard,
        ..EngineDesc::of(EngineKind::declare("psync"))
    };

    pub static ENGINES: &[EngineDesc] = &[
        EngineDesc {
            aliases: &["iouring", "uring"],
            fio: &["io_uring", "libaio"],
            fallback: Some(PSYNC.kind),
            buffered_fallback: &["libaio"],
            per_io_prio: true,
            ..EngineDesc::of(EngineKind::declare("io_uring"))
        },
        PSYNC,
        EngineDesc {
            fio: &["null", "cpp_null"],
            touches_device: false,
            trims: Trims::Own,
            ..EngineDesc::of(EngineKind::declare("null"))
        },
        EngineDesc {
            fio: &["ftruncate"],
            cli: false,
            synchronous: true,
            moves_data: false,
            refuses_reads: Some(
                "turns each write into ftruncate(offset) and fails reads (EINVAL), as fio's does",
            ),
            ..EngineDesc::of(EngineKind::declare("ftruncate"))
        },
        file_set("filecreate", &["filecreate"], Files::made("create")),
        EngineDesc {
            fio_options: &["stat_type"],
            ..file_set("filestat", &["filestat"], Files::laid_out("stat"))
        },
        file_set(
            "filedelete",
            &["filedelete"],
            Files::laid_out("unlink").once(),
        ),
        EngineDesc {
            fio: &["falloc"],
            cli: false,
            synchronous: true,
            moves_data: false,
            refuses_reads: Some(
                "turns a read into fallocate(KEEP_SIZE), which allocates blocks; iolab allows \
                 reads where it may not write, so a falloc job that reads is refused",
            ),
            trims: Trims::Own,
            ..EngineDesc::of(EngineKind::declare("falloc"))
        },
        EngineDesc {
            fio: &["e4defrag"],
            cli: false,
            synchronous: true,
            moves_data: false,
            refuses_reads: Some(
                "moves extents on writes only and fails reads (EINVAL), as fio's does",
            ),
            donor: true,
            fio_options: &["donorname"],
            ..EngineDesc::of(EngineKind::declare("e4defrag"))
        },
    ];

    /// Installs [`ENGINES`] (a test's process installs one catalogue: the first wins).
    pub fn install() {
        super::install(ENGINES);
    }

    /// The engine of this name in the catalogue installed.
    pub fn kind(name: &str) -> EngineKind {
        install();
        EngineKind::named(name).expect("an engine of the catalogue")
    }
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
        testing::install();
        let base = "size = 1\nruns = 1\nwarmup_passes = 0\ndirect = false\ndata = \"random\"\n\
                    duration = { secs = 0, nanos = 0 }\nwarmup_duration = { secs = 0, nanos = 0 }\n";
        let old: crate::RunSettings = toml::from_str(&format!(
            "{base}engine = \"psync\"\nfixedbufs = false\nregisterfiles = false\n"
        ))
        .expect("old settings read");
        assert_eq!(old.engine, Some(testing::kind("psync")));
        assert_eq!(old.engine_opts.get("fixedbufs"), Some(Val::Flag(false)));
        let none: crate::RunSettings = toml::from_str(base).expect("no engine reads");
        assert_eq!(none.engine, None);
        assert_eq!(none.engine_opts, EngineOpts::default());
    }
}
