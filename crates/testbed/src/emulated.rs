//! Emulated disks under loop devices: for each image, `NAME/emuI/` holds the daemon's files
//! and `NAME/emuI/mnt` its FUSE mount with the one file the loop device is attached to. The
//! daemon is `iolab emudisk serve` (this binary, or `IOLAB_BIN`), in its own process group
//! so a Ctrl-C meant for iolab reaches it only through the orderly teardown.
//!
//! Recorded, in order: the directories, the daemon's files (log, stats, socket), the FUSE
//! mount, the daemon; teardown (newest first) detaches the loop device, stops the daemon
//! (SIGTERM: it unmounts; SIGKILL after 10 s), unmounts what is left, removes the files.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::build::check;
use crate::commands::Names;
use crate::error::TestbedError;
use crate::remove::{unmount, Removal};
use crate::spec::TestbedSpec;
use crate::state::Resource;
use crate::sys;
use crate::testbed::Testbed;

/// Files the daemon writes in its directory (recorded so teardown removes them), besides
/// its log, which the testbed creates. The daemon writes `stats.json` and `ready` through
/// temporary files of unpredictable names (renamed over them), so there is no fixed
/// temporary name to record or to plant a link at.
const DAEMON_FILES: [&str; 3] = ["stats.json", "ready", "ctl.sock"];

const READY_TIMEOUT: Duration = Duration::from_secs(15);

/// The binary that serves emulated disks.
fn iolab_bin() -> Result<PathBuf, TestbedError> {
    if let Some(p) = std::env::var_os("IOLAB_BIN") {
        return Ok(PathBuf::from(p));
    }
    std::env::current_exe().map_err(|e| TestbedError::io("finding the iolab binary", e))
}

/// Whether a command line is an emulated disk's daemon.
pub(crate) fn is_daemon(cmd: &[String]) -> bool {
    cmd.windows(2).any(|w| w[0] == "emudisk" && w[1] == "serve")
}

/// The daemon's command line.
pub(crate) fn serve_argv(bin: &Path, dir: &Path, backing: &Path, spec: &str) -> Vec<String> {
    vec![
        sys::text(bin),
        "emudisk".into(),
        "serve".into(),
        "--dir".into(),
        sys::text(dir),
        "--backing".into(),
        sys::text(backing),
        "--spec".into(),
        spec.into(),
    ]
}

fn find_daemon(dir: &Path, pid: Option<i32>, start_time: Option<u64>) -> Option<i32> {
    let ours = |p: i32| {
        let cmd = sys::proc_cmdline(p);
        is_daemon(&cmd)
            && cmd
                .windows(2)
                .any(|w| w[0] == "--dir" && Path::new(&w[1]) == dir)
    };
    if let Some(p) = pid {
        if sys::proc_is(p, start_time) && ours(p) {
            return Some(p);
        }
    }
    sys::all_pids()
        .into_iter()
        .find(|p| sys::proc_alive(*p) && ours(*p))
}

/// Stops the daemon serving `dir`, then makes sure its mount is gone.
pub(crate) fn stop(dir: &Path, pid: Option<i32>, start_time: Option<u64>) -> Removal {
    let mut note = None;
    if let Some(p) = find_daemon(dir, pid, start_time) {
        sys::signal(p, Signal::TERM);
        let step = Duration::from_millis(50);
        if !sys::wait_until(Duration::from_secs(10), step, || !sys::proc_alive(p)) {
            sys::signal(p, Signal::KILL);
            note = Some(format!(
                "emulated disk daemon (pid {p}) ignored SIGTERM and was killed"
            ));
            if !sys::wait_until(Duration::from_secs(3), step, || !sys::proc_alive(p)) {
                return Removal::Failed(format!("emulated disk daemon (pid {p}) does not exit"));
            }
        }
    }
    match unmount(&dir.join("mnt")) {
        Removal::Gone { note: n } => Removal::Gone { note: note.or(n) },
        other => other,
    }
}

impl Testbed {
    /// Starts the emulated disk over `backing` (image `i`); returns the file to attach.
    pub(crate) fn start_emudisk(
        &mut self,
        spec: &TestbedSpec,
        names: &Names,
        i: usize,
        backing: &Path,
        stop: &AtomicBool,
    ) -> Result<PathBuf, TestbedError> {
        let emu = spec.emulated.as_ref().expect("an emulated testbed");
        let dir = names.base.join(format!("emu{i}"));
        let mnt = dir.join("mnt");
        self.make_dir(&dir)?;
        self.make_dir(&mnt)?;
        let log = dir.join("log");
        let out = self.make_file(&log, 0)?;
        for f in DAEMON_FILES {
            let res = Resource::File { path: dir.join(f) };
            let id = self.state.intent(&res)?;
            self.state.done(id, &res)?;
        }
        let json = serde_json::to_string(emu).map_err(|e| TestbedError::State {
            message: format!("emulated: {e}"),
        })?;
        let argv = serve_argv(&iolab_bin()?, &dir, backing, &json);
        let mount = Resource::Mount {
            target: mnt.clone(),
            source: format!("{}:{}", iolab_emudisk::FS_SUBTYPE, sys::text(backing)),
        };
        let mount_id = self.state.intent(&mount)?;
        let mut res = Resource::EmuDaemon {
            dir: dir.clone(),
            pid: None,
            start_time: None,
        };
        let id = self.state.intent(&res)?;
        self.commands.push(sys::display_cmd(&argv));
        let err = out
            .try_clone()
            .map_err(|e| TestbedError::io(format!("opening {}", log.display()), e))?;
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| TestbedError::io(format!("starting {}", argv[0]), e))?;
        let pid = child.id() as i32;
        res = Resource::EmuDaemon {
            dir: dir.clone(),
            pid: Some(pid),
            start_time: sys::proc_start_time(pid),
        };
        self.state.done(id, &res)?;
        let started = Instant::now();
        let ready = dir.join("ready");
        loop {
            if let Err(e) = check(stop) {
                std::thread::spawn(move || child.wait());
                return Err(e);
            }
            if let Ok(Some(status)) = child.try_wait() {
                let text = fs::read_to_string(&log).unwrap_or_default();
                return Err(TestbedError::Unsupported {
                    key: "emulated".into(),
                    message: format!(
                        "the emulated disk daemon exited at start ({status}): {}",
                        sys::tail(&text, 6)
                    ),
                });
            }
            if ready.exists() {
                break;
            }
            if started.elapsed() > READY_TIMEOUT {
                std::thread::spawn(move || child.wait());
                return Err(TestbedError::Unsupported {
                    key: "emulated".into(),
                    message: format!(
                        "the emulated disk daemon is not ready after {} s ({})",
                        READY_TIMEOUT.as_secs(),
                        sys::tail(&fs::read_to_string(&log).unwrap_or_default(), 4)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Reaped when it exits (teardown signals it; it may outlive a killed iolab).
        std::thread::spawn(move || child.wait());
        self.state.done(mount_id, &mount)?;
        self.emulated.push(dir);
        Ok(mnt.join(iolab_emudisk::IMAGE_NAME))
    }
}

/// The stats files of the emulated disks in `dirs`, as JSON values (for the description).
pub(crate) fn stats(dirs: &[PathBuf]) -> Vec<serde_json::Value> {
    dirs.iter()
        .filter_map(|d| {
            let sock = d.join("ctl.sock");
            let text = iolab_emudisk::ctl::request(&sock, "stats")
                .ok()
                .or_else(|| fs::read_to_string(d.join("stats.json")).ok())?;
            serde_json::from_str(&text).ok()
        })
        .collect()
}
