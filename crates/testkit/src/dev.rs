//! Loop devices, mounts and cgroups made for a test and removed on drop, also when the
//! test panics.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::scratch::scratch_dir;
use crate::sys::{sh, tool};

/// Device tests of one test binary run one at a time: they attach, format and mount real
/// devices. Other binaries may do so at the same time, so tests look only at their own.
pub fn device_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `mkfs.ext4` on `dev` with its inode tables and journal written now: with lazy init the
/// kernel's ext4lazyinit thread writes them after the mount, and on a busy machine during
/// a test's passes, as I/O on the device that is not the test's.
pub fn mkfs_ext4_initialised(dev: &str) {
    sh(
        "mkfs.ext4",
        &[
            "-q",
            "-F",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0",
            dev,
        ],
    );
}

/// zfs-fuse allows one daemon per machine, and test suites may run side by side (two
/// clones' `.ci/run`, as bench/flaky.sh runs them): a test that starts a zfs-fuse daemon
/// holds this machine-wide lock (an exclusive `flock` on a file in /run/lock, released
/// when the returned file is dropped or the process dies) from before it looks for another
/// daemon until its own is gone. Take it after [`device_lock`].
pub fn zfs_machine_lock() -> std::fs::File {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = if Path::new("/run/lock").is_dir() {
        "/run/lock"
    } else {
        "/tmp"
    };
    let path = format!("{dir}/iolab-tests-zfs-fuse.lock");
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    loop {
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return f;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EINTR), "flock {path}: {e}");
    }
}

/// A loop device, detached on drop (retrying while it is busy, then waiting until the
/// kernel has let go of its backing file).
pub struct Loop {
    pub dev: PathBuf,
    /// The temporary directory of the image, when the loop device made it.
    _dir: Option<TempDir>,
}

impl Loop {
    /// A blank (all-zero, sparse) device of `size` bytes.
    pub fn new(size: u64) -> Loop {
        Loop::with_options(size, &[])
    }

    /// A blank device with extra `losetup` options (`--direct-io=on`, `--sector-size 4096`).
    pub fn with_options(size: u64, options: &[&str]) -> Loop {
        Loop::with_image(size, |_| {}, options)
    }

    /// A device over a sparse image of `size` bytes that `prepare` may write to before it
    /// is attached (a partition table, say; attach with `-P` to scan it).
    pub fn with_image(size: u64, prepare: impl FnOnce(&Path), options: &[&str]) -> Loop {
        let dir = scratch_dir();
        let img = dir.path().join("disk.img");
        File::create(&img).unwrap().set_len(size).unwrap();
        prepare(&img);
        let mut lo = Loop::attach(&img, options);
        lo._dir = Some(dir);
        lo
    }

    /// A device over an image of `size` bytes in memory (a file on the /dev/shm tmpfs,
    /// written out in full), for ground truths whose only limit must be a throttle: no disk
    /// writer beside the test can slow its backing file. On the scratch filesystem where
    /// /dev/shm is not a tmpfs.
    pub fn in_memory(size: u64, options: &[&str]) -> Loop {
        let dir = if crate::sys::shm_is_tmpfs() {
            tempfile::tempdir_in("/dev/shm").unwrap()
        } else {
            scratch_dir()
        };
        let img = dir.path().join("disk.img");
        let mut f = File::create(&img).unwrap();
        let chunk = vec![0u8; 1 << 20];
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            std::io::Write::write_all(&mut f, &chunk[..n]).unwrap();
            left -= n as u64;
        }
        f.sync_all().unwrap();
        drop(f);
        let mut lo = Loop::attach(&img, options);
        lo._dir = Some(dir);
        lo
    }

    /// Attaches an existing file (which the caller keeps).
    pub fn attach(file: &Path, options: &[&str]) -> Loop {
        let mut args = vec!["-f", "--show"];
        args.extend_from_slice(options);
        args.push(file.to_str().unwrap());
        let dev = PathBuf::from(sh("losetup", &args));
        // The queue's write_cache outlives a detach: start every test from the loop default,
        // whatever an earlier user of this device number left.
        let wc = format!(
            "/sys/block/{}/queue/write_cache",
            dev.file_name().unwrap().to_string_lossy()
        );
        if fs::read_to_string(&wc).is_ok_and(|v| v.trim() != "write back") {
            fs::write(&wc, "write back").unwrap();
        }
        Loop { dev, _dir: None }
    }

    /// The device path as a string.
    pub fn s(&self) -> &str {
        self.dev.to_str().unwrap()
    }

    /// The kernel's name, `loopN`.
    pub fn name(&self) -> String {
        self.dev.file_name().unwrap().to_str().unwrap().to_string()
    }

    /// "major:minor" of the device.
    pub fn majmin(&self) -> String {
        fs::read_to_string(format!("/sys/block/{}/dev", self.name()))
            .unwrap()
            .trim()
            .to_string()
    }

    /// The whole device, read through the page cache.
    pub fn contents(&self) -> Vec<u8> {
        let mut v = Vec::new();
        File::open(&self.dev).unwrap().read_to_end(&mut v).unwrap();
        v
    }

    fn backing_file(&self) -> PathBuf {
        PathBuf::from(format!("/sys/block/{}/loop/backing_file", self.name()))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let Some(losetup) = tool("losetup") else {
            return;
        };
        for _ in 0..50 {
            let ok = Command::new(&losetup)
                .arg("-d")
                .arg(&self.dev)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok || !self.backing_file().exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Detaching completes asynchronously once the last opener is gone; wait for it so
        // the image (removed with the temporary directory next) is not still in use.
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.backing_file().exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.backing_file().exists() {
            eprintln!("warning: could not detach {}", self.dev.display());
        }
    }
}

/// A mounted filesystem, unmounted on drop (retrying while busy, lazily in the end).
pub struct Mount {
    dir: PathBuf,
    _tmp: Option<TempDir>,
}

impl Mount {
    /// Mounts `source` on a fresh scratch directory; `args` go before it (`["-o", "ro"]`,
    /// `["-t", "tmpfs"]`).
    pub fn new(source: impl AsRef<Path>, args: &[&str]) -> Mount {
        let tmp = scratch_dir();
        let mut m = Mount::at(source, tmp.path(), args);
        m._tmp = Some(tmp);
        m
    }

    /// Mounts `source` on `dir` (created when missing, kept afterwards).
    pub fn at(source: impl AsRef<Path>, dir: &Path, args: &[&str]) -> Mount {
        fs::create_dir_all(dir).unwrap();
        let mut all = args.to_vec();
        all.push(source.as_ref().to_str().unwrap());
        all.push(dir.to_str().unwrap());
        sh("mount", &all);
        Mount {
            dir: dir.to_path_buf(),
            _tmp: None,
        }
    }

    /// The mount point, canonical.
    pub fn path(&self) -> PathBuf {
        fs::canonicalize(&self.dir).unwrap()
    }

    /// Changes the mount's options (`mount -o remount,OPTIONS`).
    pub fn remount(&self, options: &str) {
        sh(
            "mount",
            &[
                "-o",
                &format!("remount,{options}"),
                self.dir.to_str().unwrap(),
            ],
        );
    }

    /// Whether something is mounted on `path` (as /proc/mounts spells it).
    pub fn is_mounted(path: &Path) -> bool {
        let p = path.to_str().unwrap();
        fs::read_to_string("/proc/mounts")
            .unwrap_or_default()
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some(p))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let Some(umount) = tool("umount") else { return };
        // Just after a process exits, the kernel may still hold its files for a while (on a
        // busy machine, seconds): retry while it is busy. The limit only guards against a
        // real hang; a lazy unmount leaves the device held, which breaks what follows.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let ok = Command::new(&umount)
                .arg(&self.dir)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok || !Mount::is_mounted(&self.dir) {
                return;
            }
            if Instant::now() > deadline {
                let _ = Command::new(&umount).arg("-l").arg(&self.dir).status();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A cgroup directory (of a cgroup-v1 hierarchy such as blkio), removed on drop once the
/// processes that were in it are gone.
pub struct Cgroup {
    pub dir: PathBuf,
}

impl Cgroup {
    /// The blkio hierarchy, when cgroup v1 has it mounted here.
    pub const BLKIO: &'static str = "/sys/fs/cgroup/blkio";

    /// Whether a cgroup-v1 blkio hierarchy is mounted.
    pub fn blkio_available() -> bool {
        Path::new(Cgroup::BLKIO).join("cgroup.procs").exists()
    }

    /// Creates the cgroup `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Cgroup {
        let dir = dir.into();
        fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        Cgroup { dir }
    }

    /// Creates `name` under the blkio hierarchy.
    pub fn blkio(name: &str) -> Cgroup {
        Cgroup::new(Path::new(Cgroup::BLKIO).join(name))
    }

    /// Writes `value` to the cgroup's `file`.
    pub fn set(&self, file: &str, value: &str) {
        fs::write(self.dir.join(file), value)
            .unwrap_or_else(|e| panic!("{}/{file} = {value}: {e}", self.dir.display()));
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("warning: could not remove {}", self.dir.display());
    }
}

/// One `queue/<attr>` setting of a block device in sysfs, put back on drop: settings such
/// as a loop device's `write_cache` outlive its attachment, so its next user would inherit
/// them.
pub struct QueueSetting {
    file: PathBuf,
    original: String,
}

impl QueueSetting {
    /// Saves `/sys/block/<device>/queue/<attr>` (`device` as in `loop3`).
    pub fn of(device: &str, attr: &str) -> QueueSetting {
        let file = Path::new("/sys/block")
            .join(device)
            .join("queue")
            .join(attr);
        let original = fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            .trim()
            .to_string();
        QueueSetting { file, original }
    }

    pub fn get(&self) -> String {
        fs::read_to_string(&self.file).unwrap().trim().to_string()
    }

    /// Writes `value` and checks that the kernel took it.
    #[track_caller]
    pub fn set(&self, value: &str) {
        fs::write(&self.file, value).unwrap();
        assert_eq!(self.get(), value, "{}", self.file.display());
    }
}

impl Drop for QueueSetting {
    fn drop(&mut self) {
        if let Err(e) = fs::write(&self.file, &self.original) {
            eprintln!("warning: could not restore {}: {e}", self.file.display());
        }
    }
}

/// A directory on a filesystem nothing else writes to, so that a statvfs space figure is
/// the run's alone: as root a tmpfs of its own; else a directory in /dev/shm (or the
/// scratch directory), which other processes may write to (another suite's in-memory loop
/// images did): there a run may rightly withhold the figure, which [`QuietDir::shared`]
/// says.
pub struct QuietDir {
    dir: PathBuf,
    shared: bool,
    // Dropped after the directory's users: the mount (or the temporary directory) last.
    _mount: Option<Mount>,
    _tmp: Option<TempDir>,
}

impl QuietDir {
    pub fn new() -> QuietDir {
        if crate::sys::is_root() {
            let m = Mount::new("tmpfs", &["-t", "tmpfs", "-o", "size=256m"]);
            return QuietDir {
                dir: m.path(),
                shared: false,
                _mount: Some(m),
                _tmp: None,
            };
        }
        let t = if crate::sys::shm_is_tmpfs() {
            tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| scratch_dir())
        } else {
            scratch_dir()
        };
        QuietDir {
            dir: t.path().to_path_buf(),
            shared: true,
            _mount: None,
            _tmp: Some(t),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Other processes may write to its filesystem (not root: no mount of its own).
    pub fn shared(&self) -> bool {
        self.shared
    }
}

impl Default for QuietDir {
    fn default() -> Self {
        QuietDir::new()
    }
}
