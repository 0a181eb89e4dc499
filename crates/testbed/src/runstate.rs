//! Run state: what one `iolab run` creates in its target (test files, verify data and
//! sidecars, dbench's `clients/`, the metadata tree), recorded before it is created in a
//! `run-PID-N.jsonl` file next to the testbeds' state files (same directory, same
//! header and lock rules), so that a run killed at any moment leaves a record from which
//! [`cleanup_runs`] (`iolab cleanup`) removes exactly that, and a later run recognises its
//! leftovers ([`clear_leftovers_under`]). A second Ctrl-C removes the recorded things at
//! once through [`RunState::remove_all`].
//!
//! Lines: `{"event":"header","version":1,"pid":P,"start_time":T,"created_unix":S}`, then
//! `{"event":"intent","id":N,"at_unix":S,"resource":{...}}` before resource N is created,
//! `{"event":"done","id":N,"dev":D,"ino":I}` once it exists (what it is then), and
//! `{"event":"removed","id":N}` once it is gone. A resource is removed only while it is
//! still what was recorded: the same device and inode once `done` was written; before that,
//! something changed no earlier than the intent.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::journal::{self, now_unix, Header, Skip, Writer};
use crate::trust::TrustError;

/// Version of the run-state format.
pub const RUN_STATE_VERSION: u32 = 1;

/// Something a run creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunResource {
    /// A file (or an empty directory) at exactly this path.
    File { path: PathBuf },
    /// A directory and everything in it (removed without following links).
    Tree { path: PathBuf },
    /// Whatever the run creates in `dir` under iolab's unique names for process `pid`
    /// (`iolab-PID-…`, `iolab-WHAT-PID-…`): files, and directories with their contents.
    Named { dir: PathBuf, pid: i32 },
}

impl RunResource {
    /// One line for reports.
    pub fn describe(&self) -> String {
        match self {
            RunResource::File { path } => format!("file {}", path.display()),
            RunResource::Tree { path } => format!("directory tree {}", path.display()),
            RunResource::Named { dir, pid } => {
                format!("iolab's files of process {pid} in {}", dir.display())
            }
        }
    }

    /// The paths it stands for that exist now.
    fn present(&self) -> Vec<PathBuf> {
        match self {
            RunResource::File { path } | RunResource::Tree { path } => {
                if fs::symlink_metadata(path).is_ok() {
                    vec![path.clone()]
                } else {
                    Vec::new()
                }
            }
            RunResource::Named { dir, pid } => {
                let Ok(rd) = fs::read_dir(dir) else {
                    return Vec::new();
                };
                rd.flatten()
                    .filter(|e| is_named_for(&e.file_name().to_string_lossy(), *pid))
                    .map(|e| e.path())
                    .collect()
            }
        }
    }

    /// Whether `path` is this resource or inside it.
    fn covers(&self, path: &Path) -> bool {
        match self {
            RunResource::File { path: p } | RunResource::Tree { path: p } => {
                path.starts_with(p) || p.starts_with(path)
            }
            RunResource::Named { dir, .. } => path.starts_with(dir),
        }
    }
}

/// Whether `name` is one of iolab's unique names for process `pid`: `iolab-PID-…` or
/// `iolab-WORD-PID-…`.
pub fn is_named_for(name: &str, pid: i32) -> bool {
    let Some(rest) = name.strip_prefix("iolab-") else {
        return false;
    };
    let pid = format!("{pid}-");
    rest.starts_with(&pid)
        || rest
            .split_once('-')
            .is_some_and(|(word, tail)| !word.is_empty() && tail.starts_with(&pid))
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Line {
    Header(Header),
    Intent {
        id: u64,
        at_unix: u64,
        resource: RunResource,
    },
    Done {
        id: u64,
        dev: u64,
        ino: u64,
    },
    Removed {
        id: u64,
    },
}

/// One recorded resource: what, when, and what it was once created.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    resource: RunResource,
    at_unix: u64,
    identity: Option<(u64, u64)>,
    /// Whether the filesystem it goes on took writes when the intent was recorded (known
    /// only in the process that recorded it).
    writable_at_intent: Option<bool>,
}

/// Whether the filesystem that holds `path` (or, for a path not there, its nearest
/// existing ancestor) is mounted read-only now; `None` when that cannot be told.
fn read_only(path: &Path) -> Option<bool> {
    let mut at = Some(path);
    while let Some(p) = at {
        if fs::symlink_metadata(p).is_ok() {
            return iolab_sys::statvfs(p).ok().map(|s| s.read_only);
        }
        at = p.parent();
    }
    None
}

impl RunResource {
    /// Where it lives: the path itself, or the directory holding the named files.
    fn location(&self) -> &Path {
        match self {
            RunResource::File { path } | RunResource::Tree { path } => path,
            RunResource::Named { dir, .. } => dir,
        }
    }
}

#[derive(Debug, Default)]
struct Journal {
    version: Option<u32>,
    pid: Option<i32>,
    start_time: Option<u64>,
    open: BTreeMap<u64, Entry>,
}

impl Journal {
    fn parse(text: &str) -> Journal {
        let mut j = Journal::default();
        // A line cut short by a kill is the last one, and ignored.
        for l in journal::parse_lines::<Line>(text).0 {
            match l {
                Line::Header(h) => {
                    j.version = Some(h.version);
                    j.pid = Some(h.pid);
                    j.start_time = h.start_time;
                }
                Line::Intent {
                    id,
                    at_unix,
                    resource,
                } => {
                    j.open.insert(
                        id,
                        Entry {
                            resource,
                            at_unix,
                            identity: None,
                            writable_at_intent: None,
                        },
                    );
                }
                Line::Done { id, dev, ino } => {
                    if let Some(e) = j.open.get_mut(&id) {
                        e.identity = Some((dev, ino));
                    }
                }
                Line::Removed { id } => {
                    j.open.remove(&id);
                }
            }
        }
        j
    }
}

/// The run state of this process. Cheap to clone (shared with the signal handler).
#[derive(Debug, Clone)]
pub struct RunState {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    journal: Writer,
    next_id: u64,
    open: BTreeMap<u64, Entry>,
}

fn is_run_state_name(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("run-") && n.ends_with(".jsonl"))
}

impl RunState {
    /// Creates `run-PID-N.jsonl` in `dir` (created 0700 if missing), locks it and writes
    /// the header.
    pub fn create(dir: &Path) -> io::Result<RunState> {
        journal::make_dir(dir)?;
        let journal =
            Writer::create(dir, "run", RUN_STATE_VERSION, Line::Header).map_err(|(_, e)| e)?;
        let st = RunState {
            inner: Arc::new(Mutex::new(Inner {
                journal,
                next_id: 1,
                open: BTreeMap::new(),
            })),
        };
        Ok(st)
    }

    pub fn path(&self) -> PathBuf {
        self.lock().journal.path().to_path_buf()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `resource` is about to be created; its id for [`Self::created`] and
    /// [`Self::removed`].
    pub fn intent(&self, resource: RunResource) -> io::Result<u64> {
        let writable_at_intent = read_only(resource.location()).map(|ro| !ro);
        let mut i = self.lock();
        let id = i.next_id;
        let at_unix = now_unix();
        append_locked(
            &mut i,
            &Line::Intent {
                id,
                at_unix,
                resource: resource.clone(),
            },
        )?;
        i.next_id += 1;
        i.open.insert(
            id,
            Entry {
                resource,
                at_unix,
                identity: None,
                writable_at_intent,
            },
        );
        Ok(id)
    }

    /// Records what resource `id` is now that it exists (its device and inode), for a
    /// file or tree; a `Named` resource has no single identity.
    pub fn created(&self, id: u64) -> io::Result<()> {
        let mut i = self.lock();
        let Some(e) = i.open.get(&id) else {
            return Ok(());
        };
        let (RunResource::File { path } | RunResource::Tree { path }) = &e.resource else {
            return Ok(());
        };
        let m = fs::symlink_metadata(path)?;
        let (dev, ino) = (m.dev(), m.ino());
        append_locked(&mut i, &Line::Done { id, dev, ino })?;
        if let Some(e) = i.open.get_mut(&id) {
            e.identity = Some((dev, ino));
        }
        Ok(())
    }

    /// Records the exact file or directory `path` (device `dev`, inode `ino`) that the run
    /// made for resource `id` (a `Named` one: iolab's unique name in a directory; or the
    /// path itself, its identity known from the moment it was made), in its place: from
    /// now on only that file is removed, by [`Self::remove_all`] or `iolab cleanup`, and a
    /// file put at its path during the run is not taken for it.
    pub fn adopt(&self, id: u64, path: &Path, dev: u64, ino: u64) -> io::Result<()> {
        // A directory is recorded as the tree it is (removed with what it holds).
        let path = path.to_path_buf();
        let exact = self.intent(match fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => RunResource::Tree { path },
            _ => RunResource::File { path },
        })?;
        {
            let mut i = self.lock();
            append_locked(
                &mut i,
                &Line::Done {
                    id: exact,
                    dev,
                    ino,
                },
            )?;
            if let Some(e) = i.open.get_mut(&exact) {
                e.identity = Some((dev, ino));
            }
        }
        self.removed(id)
    }

    /// Records that resource `id` is gone (removed by the run, or kept on purpose).
    pub fn removed(&self, id: u64) -> io::Result<()> {
        let mut i = self.lock();
        if !i.open.contains_key(&id) {
            return Ok(());
        }
        append_locked(&mut i, &Line::Removed { id })?;
        i.open.remove(&id);
        Ok(())
    }

    /// At the end of the run: every resource the run removed itself is marked gone, and so
    /// is one whose path now holds another file (replaced during the run: not the run's to
    /// remove); the file is deleted when nothing recorded is left, else it stays for `iolab
    /// cleanup`. Returns what is left and the paths found replaced.
    ///
    /// A resource that is not there on a filesystem that turned read-only during the run
    /// stays recorded: the filesystem stopped writing when it did (ext4 aborts its journal
    /// on an error with `errors=remount-ro`), so a removal or rename the run saw may never
    /// have reached the disk, and the name comes back once the filesystem is repaired and
    /// mounted again (a sidecar's temporary file did).
    pub fn finish(&self) -> Finish {
        let mut i = self.lock();
        let ids: Vec<u64> = i.open.keys().copied().collect();
        let mut out = Finish::default();
        for id in ids {
            let e = &i.open[&id];
            let present = e.resource.present();
            let replaced = match (&e.resource, e.identity) {
                (RunResource::File { path } | RunResource::Tree { path }, Some(id)) => {
                    fs::symlink_metadata(path).is_ok_and(|m| (m.dev(), m.ino()) != id)
                }
                _ => false,
            };
            let turned_read_only = present.is_empty()
                && e.writable_at_intent == Some(true)
                && read_only(e.resource.location()) == Some(true);
            if turned_read_only {
                out.unsure.push(e.resource.location().display().to_string());
                continue;
            }
            if present.is_empty() || replaced {
                if replaced {
                    out.replaced.extend(present);
                }
                if append_locked(&mut i, &Line::Removed { id }).is_ok() {
                    i.open.remove(&id);
                }
            } else {
                out.left
                    .extend(present.iter().map(|p| p.display().to_string()));
            }
        }
        if i.open.is_empty() {
            i.journal.delete();
        }
        out
    }

    /// Removes everything recorded that still is what was recorded (a second Ctrl-C);
    /// returns (what was removed, what could not be).
    pub fn remove_all(&self) -> (Vec<String>, Vec<String>) {
        let mut i = self.lock();
        let entries: Vec<(u64, Entry)> =
            i.open.iter().rev().map(|(k, v)| (*k, v.clone())).collect();
        let (mut removed, mut failed) = (Vec::new(), Vec::new());
        let dir = i.journal.path().parent().map(Path::to_path_buf);
        for (id, e) in entries {
            let r = remove_entry(&e, dir.as_deref());
            removed.extend(r.removed);
            failed.extend(r.failed.iter().cloned());
            if r.failed.is_empty() && append_locked(&mut i, &Line::Removed { id }).is_ok() {
                i.open.remove(&id);
            }
        }
        if i.open.is_empty() {
            i.journal.delete();
        }
        (removed, failed)
    }
}

fn append_locked(i: &mut Inner, line: &Line) -> io::Result<()> {
    i.journal.append(line)
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.open.is_empty() {
            self.journal.delete();
        }
    }
}

/// What [`RunState::finish`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Finish {
    /// What the run created and is still there (recorded for `iolab cleanup`).
    pub left: Vec<String>,
    /// Paths of things the run created that hold another file now (moved away and
    /// replaced during the run): left alone, no longer recorded.
    pub replaced: Vec<PathBuf>,
    /// What is not there now on a filesystem that turned read-only during the run: its
    /// removal may not have reached the disk, so it stays recorded for `iolab cleanup`.
    pub unsure: Vec<String>,
}

/// The note for a file iolab created that was replaced during the run.
pub fn replaced_note(path: &Path) -> String {
    format!(
        "{} is not the file this run created (it was replaced during the run): left alone, \
         not removed",
        path.display()
    )
}

/// What removing one entry did.
#[derive(Default)]
struct Removal {
    removed: Vec<String>,
    failed: Vec<String>,
}

/// Removes what entry `e` stands for, if it is still what was recorded. Never touches the
/// state directory itself.
fn remove_entry(e: &Entry, state_dir: Option<&Path>) -> Removal {
    let mut out = Removal::default();
    for p in e.resource.present() {
        if state_dir.is_some_and(|d| p.starts_with(d) || d.starts_with(&p)) {
            out.failed.push(format!(
                "{}: inside the state directory; not removed",
                p.display()
            ));
            continue;
        }
        let Ok(m) = fs::symlink_metadata(&p) else {
            continue;
        };
        let same = match e.identity {
            Some(id) => (m.dev(), m.ino()) == id,
            // Killed between the intent and the record: it must have changed since.
            None => {
                matches!(e.resource, RunResource::Named { .. })
                    || (m.ctime() >= 0 && m.ctime() as u64 + 1 >= e.at_unix)
            }
        };
        if !same {
            out.failed.push(format!(
                "{}: not what iolab recorded (replaced since); left alone",
                p.display()
            ));
            continue;
        }
        match remove_path(&p, m.is_dir()) {
            Ok(()) => out.removed.push(p.display().to_string()),
            Err(err) => out.failed.push(format!("{}: {err}", p.display())),
        }
    }
    out
}

/// Removes a file or a directory tree. The run's own threads may still be creating or
/// removing entries in it (a second Ctrl-C does not wait for them): a failure is retried
/// while the tree keeps changing, and what is gone counts as removed.
fn remove_path(p: &Path, dir: bool) -> io::Result<()> {
    let mut last = None;
    for _ in 0..20 {
        let r = if dir {
            fs::remove_dir_all(p)
        } else {
            fs::remove_file(p)
        };
        match r {
            Ok(()) => return Ok(()),
            Err(_) if fs::symlink_metadata(p).is_err() => return Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::DirectoryNotEmpty
                ) =>
            {
                last = Some(e)
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("still there")))
}

/// What [`cleanup_runs`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunCleanup {
    /// Run-state files looked at.
    pub examined: Vec<PathBuf>,
    /// Files of runs still going (left alone), with the run's pid.
    pub live: Vec<(PathBuf, Option<i32>)>,
    /// Files fully cleaned and deleted.
    pub cleaned: Vec<PathBuf>,
    /// Files not acted on, and why.
    pub skipped: Vec<(PathBuf, String)>,
    /// Paths removed.
    pub removed: Vec<String>,
    /// What could not be removed (it stays recorded).
    pub failures: Vec<String>,
}

/// A dead run's state file, locked by the cleaner.
struct Foreign {
    file: File,
    journal: Journal,
}

/// Opens `path` if its owner is gone: the lock is free and the pid is not alive with the
/// recorded start time. The file must belong to this user and be writable by no one
/// else, in a directory no one else can write.
fn open_foreign(path: &Path) -> Result<Foreign, (bool, Option<i32>, String)> {
    let owner = |text: &str| {
        let j = Journal::parse(text);
        journal::Owner {
            version: j.version,
            pid: j.pid,
            start_time: j.start_time,
        }
    };
    let format = journal::Format {
        name: "run-state",
        version: RUN_STATE_VERSION,
        owner: &owner,
        trust: &trusted,
    };
    match journal::open_foreign(path, &format) {
        Ok((file, text)) => Ok(Foreign {
            file,
            journal: Journal::parse(&text),
        }),
        Err(Skip::Live(pid)) => Err((true, pid, String::new())),
        Err(Skip::Unreadable(why) | Skip::Untrusted(why)) => Err((false, None, why)),
    }
}

/// The state file (`meta`, from its descriptor) and its directory must be this user's and
/// writable by no one else.
fn trusted(path: &Path, meta: &fs::Metadata) -> Result<(), TrustError> {
    crate::trust::check_file(meta).map_err(|e| TrustError::StateFile {
        path: path.to_path_buf(),
        source: Box::new(e),
    })?;
    if let Some(d) = path.parent() {
        crate::trust::check_dir(d).map_err(|e| TrustError::StateDir {
            path: d.to_path_buf(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

/// Cleans one dead run's file: removes what it records (newest first) and deletes it
/// when nothing is left.
fn clean_one(path: &Path, mut f: Foreign, report: &mut RunCleanup) {
    let state_dir = path.parent();
    let entries: Vec<(u64, Entry)> = f
        .journal
        .open
        .iter()
        .rev()
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    for (id, e) in entries {
        let r = remove_entry(&e, state_dir);
        report.removed.extend(r.removed);
        if !r.failed.is_empty() {
            report.failures.extend(
                r.failed
                    .into_iter()
                    .map(|x| format!("{}: {x}", path.display())),
            );
            continue;
        }
        if let Err(e) = journal::write_line(&mut f.file, &Line::Removed { id }) {
            report
                .failures
                .push(format!("{}: writing: {e}", path.display()));
        }
        f.journal.open.remove(&id);
    }
    if f.journal.open.is_empty() {
        match fs::remove_file(path) {
            Ok(()) => report.cleaned.push(path.to_path_buf()),
            Err(e) => report
                .failures
                .push(format!("{}: not deleted: {e}", path.display())),
        }
    }
}

/// The run-state files in `state_dir`, sorted.
fn run_files(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(dir) = fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_run_state_name(p))
        .collect();
    files.sort();
    files
}

/// Removes what runs of dead processes left behind, from their run-state files in
/// `state_dir` (what `iolab cleanup` does besides the testbeds).
pub fn cleanup_runs(state_dir: &Path) -> RunCleanup {
    clean_matching(state_dir, |_| true)
}

/// Cleans the files of dead runs that recorded something at or under `path` (a rerun in
/// the same directory recognising iolab's own leftovers); other files are left for
/// `iolab cleanup`.
pub fn clear_leftovers_under(state_dir: &Path, path: &Path) -> RunCleanup {
    clean_matching(state_dir, |j| {
        j.open.values().any(|e| e.resource.covers(path))
    })
}

fn clean_matching(state_dir: &Path, wanted: impl Fn(&Journal) -> bool) -> RunCleanup {
    let mut report = RunCleanup::default();
    for path in run_files(state_dir) {
        // A cheap look first: files about something else are not even locked.
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        if !wanted(&Journal::parse(&text)) {
            continue;
        }
        report.examined.push(path.clone());
        match open_foreign(&path) {
            Ok(f) => clean_one(&path, f, &mut report),
            Err((true, pid, _)) => report.live.push((path, pid)),
            Err((false, _, why)) => report.skipped.push((path, why)),
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_state_file_of_the_format_before_the_shared_journal_loads() {
        let text = r#"{"event":"header","version":1,"pid":42,"start_time":7,"created_unix":1}
{"event":"intent","id":1,"at_unix":5,"resource":{"type":"file","path":"/t/iolab-42-a.dat"}}
{"event":"done","id":1,"dev":3,"ino":9}
{"event":"intent","id":2,"at_unix":6,"resource":{"type":"tree","path":"/t/clients"}}
{"event":"removed","id":2}
{"event":"intent","id":3,"at_unix":6,"resource":{"type":"named","dir":"/t","pid":42}}
{"event":"inte"#;
        let j = Journal::parse(text);
        assert_eq!(
            (j.version, j.pid, j.start_time),
            (Some(1), Some(42), Some(7))
        );
        assert_eq!(j.open.len(), 2);
        assert_eq!(j.open[&1].identity, Some((3, 9)));
        assert_eq!(j.open[&1].at_unix, 5);
        assert_eq!(
            j.open[&3].resource,
            RunResource::Named {
                dir: "/t".into(),
                pid: 42
            }
        );
        // And what is written now reads back the same way.
        let line = serde_json::to_string(&Line::Header(Header {
            version: 1,
            pid: 42,
            start_time: Some(7),
            created_unix: 1,
        }))
        .unwrap();
        assert_eq!(line, text.lines().next().unwrap());
    }

    #[test]
    fn unique_names_of_a_process() {
        assert!(is_named_for("iolab-123-0000abcd.dat", 123));
        assert!(is_named_for("iolab-md-123-0000abcd", 123));
        assert!(is_named_for(
            "iolab-verify-123-0000abcd.dat.iolab-verify",
            123
        ));
        assert!(!is_named_for("iolab-1234-0000abcd.dat", 123));
        assert!(!is_named_for("iolab-md-1234-0000abcd", 123));
        assert!(!is_named_for("mine-123-x", 123));
        assert!(!is_named_for("iolab--123-x", 123));
    }

    #[test]
    fn a_dead_runs_leftovers_are_removed_and_nothing_else() {
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let st = RunState::create(state.path()).unwrap();
        let tree = work.path().join("clients");
        let id = st.intent(RunResource::Tree { path: tree.clone() }).unwrap();
        fs::create_dir_all(tree.join("client0/sub")).unwrap();
        fs::write(tree.join("client0/sub/f"), "x").unwrap();
        st.created(id).unwrap();
        st.intent(RunResource::Named {
            dir: work.path().to_path_buf(),
            pid: 999_999_999,
        })
        .unwrap();
        fs::write(work.path().join("iolab-999999999-1.dat"), "x").unwrap();
        fs::write(work.path().join("theirs.dat"), "x").unwrap();
        let path = st.path();
        // Alive (it is us): left alone.
        let r = cleanup_runs(state.path());
        assert_eq!(r.live.len(), 1, "{r:?}");
        assert!(tree.exists());
        // Pretend the owner died: a pid that cannot exist, and the lock released.
        let text = fs::read_to_string(&path).unwrap().replacen(
            &format!("\"pid\":{}", std::process::id()),
            "\"pid\":999999999",
            1,
        );
        std::mem::forget(st);
        let dead = state.path().join("run-999999999-0.jsonl");
        fs::write(&dead, text).unwrap();
        fs::set_permissions(&dead, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        fs::remove_file(&path).unwrap();
        // A rerun elsewhere does not touch it; one under the tree does.
        let other = tempfile::tempdir().unwrap();
        assert!(clear_leftovers_under(state.path(), other.path())
            .examined
            .is_empty());
        let r = clear_leftovers_under(state.path(), &tree.join("client0"));
        assert!(r.failures.is_empty(), "{r:?}");
        assert_eq!(r.cleaned, vec![dead.clone()]);
        assert!(!tree.exists());
        assert!(!work.path().join("iolab-999999999-1.dat").exists());
        assert!(work.path().join("theirs.dat").exists());
        assert!(!dead.exists());
    }

    #[test]
    fn a_state_file_others_can_write_is_not_acted_on() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let victim = work.path().join("precious");
        fs::write(&victim, "x").unwrap();
        let text = format!(
            "{{\"event\":\"header\",\"version\":1,\"pid\":999999999,\"created_unix\":0}}\n\
             {{\"event\":\"intent\",\"id\":1,\"at_unix\":0,\"resource\":{{\"type\":\"file\",\"path\":{:?}}}}}\n",
            victim
        );
        let f = state.path().join("run-999999999-0.jsonl");
        fs::write(&f, text).unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o666)).unwrap();
        let r = cleanup_runs(state.path());
        assert_eq!(r.skipped.len(), 1, "{r:?}");
        assert!(r.skipped[0].1.contains("writable by others"), "{r:?}");
        assert!(victim.exists());
        // Private again: acted on.
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        let r = cleanup_runs(state.path());
        assert_eq!(r.cleaned.len(), 1, "{r:?}");
        assert!(!victim.exists());
    }

    #[test]
    fn a_replaced_tree_is_left_alone() {
        let state = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let st = RunState::create(state.path()).unwrap();
        let tree = work.path().join("clients");
        let id = st.intent(RunResource::Tree { path: tree.clone() }).unwrap();
        fs::create_dir(&tree).unwrap();
        st.created(id).unwrap();
        // Someone else's directory now stands where iolab's was (iolab's still exists
        // elsewhere, so the new one cannot have its inode).
        fs::rename(&tree, work.path().join("moved")).unwrap();
        fs::create_dir(&tree).unwrap();
        let (removed, failed) = st.remove_all();
        assert!(removed.is_empty());
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert!(tree.exists());
    }
}
