//! fio's file engines in a job file (`filecreate`, `filestat`, `filedelete`): one file an
//! I/O, `nrfiles` of them, and the options that describe such a set of files
//! (`create_on_open`, `openfiles`, `unlink`, `stat_type`, `fallocate`), mapped for those
//! engines and refused or noted for the others (docs/fio.md).

use super::map::{err, val};
use super::parse::RawOption;
use super::values;
use super::FioError;
use crate::engopt;
use crate::job::Rw;

/// The most files a job's set may have (as iolab's engines take: `iolab_engine`'s
/// `fileset::MAX_FILES`).
pub const MAX_FILES: u64 = 10_000_000;

/// The engines that work on a set of files, one file an I/O (their `EngineDesc::file_set`).
pub fn is_file_engine(name: &str) -> bool {
    files(name).is_some()
}

/// How the engine fio's `ioengine=name` runs on works on its set of files.
fn files(name: &str) -> Option<engopt::Files> {
    engopt::by_fio(name).and_then(|d| d.file_set)
}

/// The engine (its name) whose own fio option `key` is (`EngineDesc::fio_options`), unless
/// it is the job's `engine` (a fio name).
fn foreign_owner(engine: &str, key: &str) -> Option<&'static str> {
    let owner = engopt::engines()
        .iter()
        .find(|d| d.fio_options.contains(&key))?;
    (!owner.fio.contains(&engine)).then(|| owner.kind.as_str())
}

/// A job's lookup of its options in force (it records what the mapping read).
pub type Get<'g, 'a> = &'g dyn Fn(&'static str) -> Option<&'a RawOption>;

/// The region of a job on a file engine: `nrfiles` files of one I/O of `bs` each (fio's
/// filecreate gives each file the smallest block size whatever `filesize` says; filestat
/// and filedelete lay out files of `filesize`, of which iolab's engine runs one I/O a
/// file, so the two must agree), with the option that set it; and what the run notes.
pub fn region<'a>(
    engine: &str,
    get: Get<'_, 'a>,
    kb_base: u64,
    bs: u64,
    mixed_sizes: bool,
    rw: Rw,
) -> Result<((u64, &'a RawOption), Vec<String>), FioError> {
    let mut notes = Vec::new();
    let at = get("ioengine").expect("a file engine is named");
    let set = files(engine).expect("a file engine");
    for k in ["bssplit", "bsrange"] {
        if let Some(o) = get(k).filter(|_| mixed_sizes) {
            return Err(err(
                o,
                format!(
                    "ioengine={engine} makes each I/O one file of the block size; a mix of \
                     block sizes is not run"
                ),
            ));
        }
    }
    let files = match get("nrfiles") {
        Some(o) => values::int(val(o)?, 1, MAX_FILES).map_err(|e| err(o, e))?,
        None => 1,
    };
    let sz = |o: &RawOption| values::size(val(o)?, kb_base).map_err(|e| err(o, e));
    if let Some(o) = get("filesize") {
        let f = sz(o)?;
        if !set.laid_out {
            notes.push(format!(
                "ioengine={engine}: each file is one I/O of the block size ({bs} bytes), as \
                 fio's {engine} sizes its files whatever filesize says ({f} bytes); the \
                 files are created empty"
            ));
        } else if f != bs {
            return Err(err(
                o,
                format!(
                    "{f} bytes: fio's {engine} does filesize/bs I/Os a file and one {} of it; \
                     iolab's engine runs one I/O a file, so give bs={f} (here bs is {bs})",
                    set.call
                ),
            ));
        }
    }
    let region = files.saturating_mul(bs);
    if let Some(o) = get("size") {
        if sz(o)? != region {
            return Err(err(
                o,
                format!(
                    "ioengine={engine} runs nrfiles x bs = {files} x {bs} bytes ({region}); give \
                     that size or leave size out"
                ),
            ));
        }
    }
    let timed = match get("time_based") {
        Some(o) => values::boolean(o.value.as_deref()).map_err(|e| err(o, e))?,
        None => false,
    };
    if set.once && (timed || rw.is_random()) {
        let o = get("time_based")
            .filter(|_| timed)
            .or(get("rw"))
            .unwrap_or(at);
        return Err(err(
            o,
            format!(
                "ioengine={engine} deletes each file once; a time-based or random job would \
                 meet a deleted file again (fio fails that I/O with ENOENT)"
            ),
        ));
    }
    let o = get("nrfiles")
        .or(get("filesize"))
        .or(get("size"))
        .unwrap_or(at);
    Ok(((region, o), notes))
}

/// `create_on_open`, `openfiles`, `unlink`, `stat_type` and `fallocate` for a job whose
/// ioengine is `engine`: what the run notes, or the option refused.
pub fn set_options(engine: &str, get: Get<'_, '_>) -> Result<Vec<String>, FioError> {
    let mut notes = Vec::new();
    let file_engine = is_file_engine(engine);
    // The engine makes each file at its I/O (filecreate).
    let creates = files(engine).is_some_and(|f| !f.laid_out);
    let flag = |o: &RawOption| values::boolean(o.value.as_deref()).map_err(|e| err(o, e));
    // Other engines' create_on_open is noted with the job's other options (fiojob::map).
    if let Some(o) = get("create_on_open").filter(|_| file_engine) {
        if flag(o)? {
            notes.push(if creates {
                format!(
                    "create_on_open=1: iolab's {engine} creates each file at its I/O, timed, as \
                     fio does with it"
                )
            } else {
                format!(
                    "create_on_open=1 (ioengine={engine}): iolab makes a job's files before \
                     the pass starts, outside the measurement"
                )
            });
        } else if creates {
            notes.push(format!(
                "create_on_open=0: fio creates a {engine} job's files when the job opens them \
                 at its start (each create still timed); iolab creates each at its I/O"
            ));
        }
    }
    if let Some(o) = get("openfiles") {
        let n = values::int(val(o)?, 1, MAX_FILES).map_err(|e| err(o, e))?;
        if !file_engine && n != 1 {
            return Err(err(
                o,
                "iolab runs a job on one file (nrfiles=1), held open",
            ));
        }
        if file_engine {
            notes.push(format!(
                "openfiles={n}: iolab's {engine} holds none of its files open (filecreate \
                 closes each one right after creating it)"
            ));
        }
    }
    if let Some(o) = get("unlink") {
        let u = flag(o)?;
        notes.push(format!(
            "unlink={}: iolab removes the files it made when the run (for the file engines: \
             the pass) ends, and never one it did not make",
            u8::from(u)
        ));
    }
    if let Some(o) = get("stat_type") {
        match val(o)? {
            _ if foreign_owner(engine, "stat_type").is_some() => {
                let owner = foreign_owner(engine, "stat_type").unwrap_or_default();
                return Err(err(
                    o,
                    format!("a {owner} option, and the job's ioengine is {engine}"),
                ));
            }
            "stat" => {}
            v @ ("lstat" | "statx") => {
                return Err(err(
                    o,
                    format!(
                        "'{v}': iolab's filestat engine times stat(2); fio's {v} (statx after \
                         a realpath of the name) is not run"
                    ),
                ))
            }
            v => return Err(err(o, format!("'{v}': expected stat, lstat or statx"))),
        }
    }
    let donor = engopt::by_fio(engine).is_some_and(|d| d.donor);
    match get("donorname") {
        Some(o) if foreign_owner(engine, "donorname").is_some() => {
            let owner = foreign_owner(engine, "donorname").unwrap_or_default();
            return Err(err(
                o,
                format!("an {owner} option, and the job's ioengine is {engine}"),
            ));
        }
        Some(o) => notes.push(format!(
            "donorname={}: iolab's e4defrag moves extents with a donor file of its own, new \
             beside the test file and removed after the pass, never a file the job names",
            val(o)?
        )),
        None if donor => {
            return Err(err(
                get("ioengine").expect("named"),
                format!("ioengine={engine} needs donorname (fio refuses the job without it)"),
            ))
        }
        None => {}
    }
    // Other engines' fallocate is noted with the job's other options (fiojob::map).
    if let Some(o) = get("fallocate").filter(|_| file_engine) {
        let v = val(o)?;
        match v {
            "none" | "0" => notes.push(format!(
                "fallocate={v}: iolab's {engine} makes its files without preallocating them \
                 (filestat, filedelete write one block into each)"
            )),
            _ => {
                return Err(err(
                    o,
                    format!(
                        "'{v}': iolab's {engine} makes its files without preallocating them \
                         (fallocate=none only)"
                    ),
                ))
            }
        }
    }
    Ok(notes)
}
