//! An emulated disk for a test: the built binary's `iolab emudisk serve` over a sparse
//! backing file in a scratch directory, and a `--direct-io=on` loop device on its image
//! (queue/write_cache "write back", so flushes reach the model; queue/rotational 1 for the
//! hdd model). On drop: the loop device is detached, the daemon stopped (it unmounts), the
//! directory removed.

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use crate::dev::{Loop, Mount};
use crate::iolab::iolab_bin;
use crate::scratch::scratch_dir;

/// A running emulated disk with a loop device on it.
pub struct EmuDisk {
    lo: Option<Loop>,
    /// queue/write_cache before this disk set it (restored before detaching).
    prev_write_cache: String,
    child: Child,
    dir: TempDir,
}

impl EmuDisk {
    /// A disk of `size` bytes with the model `spec` (the JSON of `[testbed.emulated]`).
    pub fn new(size: u64, spec: &str) -> EmuDisk {
        let dir = scratch_dir();
        let backing = dir.path().join("backing.img");
        File::create(&backing).unwrap().set_len(size).unwrap();
        fs::create_dir(dir.path().join("mnt")).unwrap();
        let log = File::create(dir.path().join("log")).unwrap();
        let child = Command::new(iolab_bin())
            .args(["emudisk", "serve", "--dir"])
            .arg(dir.path())
            .arg("--backing")
            .arg(&backing)
            .args(["--spec", spec])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let mut d = EmuDisk {
            lo: None,
            prev_write_cache: String::new(),
            child,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !d.dir.path().join("ready").exists() {
            if let Ok(Some(st)) = d.child.try_wait() {
                panic!("emudisk serve exited ({st}): {}", d.log());
            }
            assert!(Instant::now() < deadline, "emudisk not ready: {}", d.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        let lo = Loop::attach(&d.image(), &["--direct-io=on"]);
        let q = |attr: &str| PathBuf::from(format!("/sys/block/{}/queue/{attr}", lo.name()));
        d.prev_write_cache = fs::read_to_string(q("write_cache"))
            .unwrap()
            .trim()
            .to_string();
        fs::write(q("write_cache"), "write back").unwrap();
        if spec.contains("\"hdd\"") {
            fs::write(q("rotational"), "1").unwrap();
        }
        d.lo = Some(lo);
        d
    }

    /// The loop device on the disk.
    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn dev(&self) -> &Path {
        &self.lo.as_ref().expect("attached").dev
    }

    /// The loop device as a string.
    pub fn s(&self) -> &str {
        self.lo.as_ref().expect("attached").s()
    }

    /// The FUSE image file the loop device sits on.
    pub fn image(&self) -> PathBuf {
        self.dir.path().join("mnt").join("disk.img")
    }

    /// The daemon's directory (ctl.sock, stats.json, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The daemon's output so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// Sends a control request; panics on an `err` answer. Returns what follows `ok`.
    pub fn ctl(&self, request: &str) -> String {
        let mut s = UnixStream::connect(self.dir.path().join("ctl.sock")).unwrap();
        writeln!(s, "{request}").unwrap();
        let mut answer = String::new();
        BufReader::new(s).read_line(&mut answer).unwrap();
        let answer = answer.trim_end();
        match answer.strip_prefix("ok") {
            Some(rest) => rest.trim_start().to_string(),
            None => panic!("emudisk {request:?}: {answer}"),
        }
    }

    /// The stats JSON (parameters and counts).
    pub fn stats(&self) -> Value {
        serde_json::from_str(&self.ctl("stats")).unwrap()
    }

    /// Cuts the power; the answer lists the dropped `(offset, len)` ranges under "dropped".
    pub fn power_loss(&self, tear: bool) -> Value {
        let r = if tear {
            "power-loss tear"
        } else {
            "power-loss"
        };
        serde_json::from_str(&self.ctl(r)).unwrap()
    }

    /// Power back on; the loop device's page cache is dropped so reads reach the disk.
    pub fn power_on(&self) {
        self.ctl("power-on");
        let _ = Command::new("blockdev")
            .args(["--flushbufs", self.s()])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for EmuDisk {
    fn drop(&mut self) {
        if let Some(lo) = &self.lo {
            let _ = fs::write(
                format!("/sys/block/{}/queue/write_cache", lo.name()),
                &self.prev_write_cache,
            );
        }
        drop(self.lo.take());
        // SIGTERM: the daemon unmounts and exits.
        // SAFETY: kill(2) has no memory preconditions; a child gone since is ESRCH.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mnt = self.dir.path().join("mnt");
        if Mount::is_mounted(&mnt) {
            let _ = Command::new("umount").arg("-l").arg(&mnt).status();
        }
    }
}
