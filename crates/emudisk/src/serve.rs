//! The daemon: mounts the FUSE filesystem on `DIR/mnt`, answers the control socket, keeps
//! `DIR/stats.json` fresh, and unmounts on `stop`, SIGTERM, SIGINT or SIGHUP. After a
//! SIGKILL the mount stays behind, disconnected; `iolab cleanup` (testbed state) detaches
//! the loop device and unmounts it.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use fuser::{Config, MountOption, Session};

use crate::ctl::{handle, After};
use crate::device::Device;
use crate::error::EmudiskError;
use crate::fs::ImageFs;
use crate::spec::{validate, EmuSpec};
use crate::{FS_SUBTYPE, IMAGE_NAME};
use iolab_sys::files;

/// `iolab emudisk serve --dir DIR --backing FILE --spec JSON`.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// The disk's directory: `mnt/` must exist (the mount point).
    pub dir: PathBuf,
    /// The backing file (its length is the disk's capacity).
    pub backing: PathBuf,
    /// The [`EmuSpec`] as JSON.
    pub spec: String,
}

fn write_stats(dir: &Path, dev: &Device) {
    if let Ok(s) = serde_json::to_string_pretty(&dev.stats()) {
        let _ = files::replace_file(dir, "stats.json", s.as_bytes());
    }
}

/// The daemon's directory must be private: its control socket takes `power-loss`, and its
/// files are written as the daemon's user. Refused when it is a link, not owned by this
/// user, or writable by anyone else.
fn check_dir(dir: &Path) -> Result<(), EmudiskError> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::symlink_metadata(dir)
        .map_err(|e| EmudiskError::file(format!("--dir {}", dir.display()), e))?;
    let me = rustix::process::geteuid().as_raw();
    if !m.is_dir() || m.uid() != me || files::writable_by_others(m.mode()) {
        return Err(EmudiskError::Refused(format!(
            "--dir {}: must be a directory of this user that no one else can write to \
             (mode {:o}, owner {}); the control socket and stats are kept there",
            dir.display(),
            m.mode() & 0o7777,
            m.uid()
        )));
    }
    Ok(())
}

/// Binds the control socket with mode 0600 whatever the umask: the umask is narrowed around
/// bind(2) (the socket file takes its mode from it), and the mode is checked after.
fn bind_private(path: &Path) -> Result<UnixListener, EmudiskError> {
    use rustix::fs::Mode;
    use std::os::unix::fs::PermissionsExt;
    let at = |e| EmudiskError::file(path.display().to_string(), e);
    // The old mask is restored right after bind.
    let old = rustix::process::umask(Mode::from_raw_mode(0o177));
    let bound = UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(at)?;
    let m = fs::symlink_metadata(path).map_err(at)?;
    if m.permissions().mode() & 0o777 != files::FILE_MODE {
        fs::set_permissions(path, fs::Permissions::from_mode(files::FILE_MODE)).map_err(at)?;
    }
    Ok(listener)
}

/// Asks for round-robin real-time scheduling (lowest priority) for this process and the
/// threads it starts: the model sleeps most of the time, and its answers must not wait for a
/// busy machine's compilers. Without the privilege it stays a normal process (the stats
/// file's `realtime` says which).
fn realtime() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: sched_setscheduler(2) on this process (pid 0) reads only `param`, a valid
    // sched_param that outlives the call; rustix has no safe wrapper for it.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_RR, &param) == 0 }
}

/// Runs the daemon until it is told to stop. Errors before the mount answers are returned
/// (the caller prints them and exits non-zero).
pub fn serve(args: &ServeArgs) -> Result<(), EmudiskError> {
    // The process's name in /proc/PID/stat: a run on this disk counts the daemon's CPU as
    // the device's work, not as another process busy beside it (BUSY_CPU); the threads it
    // starts take the name too. A name that does not take only leaves the daemon "iolab".
    let _ = rustix::thread::set_name(iolab_measure::EMUDISK_DAEMON);
    let spec: EmuSpec = serde_json::from_str(&args.spec).map_err(EmudiskError::SpecJson)?;
    let params = validate(&spec).map_err(EmudiskError::Spec)?;
    let backing = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&args.backing)
        .map_err(|e| EmudiskError::file(format!("--backing {}", args.backing.display()), e))?;
    let threads = params.parallelism as usize + 2;
    realtime();
    let dev =
        Arc::new(Device::new(backing, params).map_err(|e| EmudiskError::file("--backing", e))?);
    let mnt = args.dir.join("mnt");
    let sock_path = args.dir.join("ctl.sock");
    check_dir(&args.dir)?;
    let listener = bind_private(&sock_path)?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let fs = ImageFs {
        dev: Arc::clone(&dev),
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
        started: SystemTime::now(),
        parallel: threads > 3,
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(format!("iolab-emudisk:{}", args.backing.display())),
        MountOption::Subtype(FS_SUBTYPE.into()),
        MountOption::NoAtime,
    ];
    config.n_threads = Some(threads);
    let session = Session::new(fs, &mnt, &config)
        .map_err(|e| EmudiskError::file(format!("mounting FUSE on {}", mnt.display()), e))?;
    let bg = session.spawn()?;
    let image = mnt.join(IMAGE_NAME);
    fs::metadata(&image).map_err(|e| EmudiskError::file(image.display().to_string(), e))?;
    write_stats(&args.dir, &dev);
    files::replace_file(
        &args.dir,
        "ready",
        format!("{}\n", std::process::id()).as_bytes(),
    )
    .map_err(|e| EmudiskError::file(args.dir.join("ready").display().to_string(), e))?;
    let mut last = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).ok();
                s.set_read_timeout(Some(Duration::from_secs(5))).ok();
                let mut line = String::new();
                let mut r = BufReader::new(&s);
                if r.read_line(&mut line).is_ok() {
                    let (answer, after) = handle(&dev, line.trim());
                    let _ = writeln!(&s, "{answer}");
                    if line.trim() == "stats" {
                        write_stats(&args.dir, &dev);
                    }
                    if let After::Stop = after {
                        break;
                    }
                }
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
        if last.elapsed() >= Duration::from_secs(1) {
            write_stats(&args.dir, &dev);
            last = Instant::now();
        }
    }
    write_stats(&args.dir, &dev);
    let _ = fs::remove_file(&sock_path);
    let _ = fs::remove_file(args.dir.join("ready"));
    // Unmount (lazily, if a loop device still holds the image) and end the session; a
    // session kept alive by a holder is cut when this process exits.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(bg.umount_and_join());
    });
    let _ = rx.recv_timeout(Duration::from_secs(3));
    Ok(())
}
