//! Warnings end to end: the real binary, real targets (a cached file, tmpfs, a sparse file,
//! a busy CPU and, as root, loop devices with ext4 and btrfs under them), and the warnings
//! the JSON document carries. Each case also runs on the other side of its condition and
//! checks the warning is absent. Every mount, loop device, process and sysfs setting a test
//! changes is undone by a guard, also when it panics.

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use iolab_testkit::*;
use serde_json::Value;

/// Short passes: two of 200 ms, no warm-up, nothing stored.
const SHORT: [&str; 9] = [
    "--duration",
    "200ms",
    "--runs",
    "2",
    "--warmup",
    "0",
    "--no-store",
    "--json",
    "-",
];

/// `iolab run custom <args> <SHORT> --target <target> --quiet`.
fn run_custom(sb: &Sandbox, target: &Path, args: &[&str]) -> Out {
    let mut v = vec!["run", "custom"];
    v.extend_from_slice(args);
    v.extend_from_slice(&SHORT);
    v.extend_from_slice(&["--target", target.to_str().unwrap(), "--quiet"]);
    sb.iolab(&v)
}

/// The JSON document of a successful run.
#[track_caller]
fn doc_of(sb: &Sandbox, target: &Path, args: &[&str]) -> Value {
    run_custom(sb, target, args).ok().json()
}

/// The warning with `code`, which must be there exactly once.
#[track_caller]
fn warning<'a>(doc: &'a Value, code: &str) -> &'a Value {
    let hits: Vec<&Value> = arr(doc, "warnings")
        .iter()
        .filter(|w| w["code"] == code)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "expected one {code}: {:#}",
        get(doc, "warnings")
    );
    assert!(!string(hits[0], "fix").is_empty(), "{code} without a fix");
    hits[0]
}

#[track_caller]
fn message_of<'a>(doc: &'a Value, code: &str) -> &'a str {
    string(warning(doc, code), "message")
}

#[track_caller]
fn absent(doc: &Value, code: &str) {
    assert!(
        !warning_codes(doc).iter().any(|c| c == code),
        "unexpected {code}: {:#}",
        get(doc, "warnings")
    );
}

/// The name of the only test of a run.
fn test_name(doc: &Value) -> &str {
    string(&arr(doc, "tests")[0], "name")
}

/// Every pass of every test of a run.
fn passes(doc: &Value) -> Vec<&Value> {
    arr(doc, "tests")
        .iter()
        .flat_map(|t| arr(t, "passes").iter())
        .collect()
}

/// The first number followed by `%` in a message.
fn percent_in(message: &str) -> f64 {
    let at = message
        .find('%')
        .unwrap_or_else(|| panic!("no % in {message:?}"));
    let start = message[..at]
        .rfind(|c: char| !c.is_ascii_digit() && c != '.')
        .map_or(0, |i| i + 1);
    message[start..at]
        .parse()
        .unwrap_or_else(|e| panic!("no number before % in {message:?}: {e}"))
}

// --- page cache and direct I/O ------------------------------------------------------------

#[test]
fn buffered_reads_of_a_small_file_come_from_the_page_cache() {
    let sb = Sandbox::new();
    let job = ["--rw", "randread", "--size", "8MiB"];
    let mut buffered = job.to_vec();
    buffered.push("--buffered");
    // The kernel may reclaim the file's clean pages at any moment (these VMs run a DAMON
    // "pageout" scheme), so a run that found them gone is tried again, twice at most.
    let mut doc = doc_of(&sb, &sb.target, &buffered);
    for _ in 0..2 {
        if warning_codes(&doc).iter().any(|c| c == "PAGE_CACHE") {
            break;
        }
        println!(
            "pages reclaimed during the run, trying again: {:?}",
            warning_codes(&doc)
        );
        doc = doc_of(&sb, &sb.target, &buffered);
    }
    let w = warning(&doc, "PAGE_CACHE");
    assert_eq!(w["test"], test_name(&doc), "{w}");
    // The message gives the highest residency measured around the passes.
    let most = passes(&doc)
        .iter()
        .flat_map(|p| {
            let c = get(p, "context");
            [
                c["cache_resident_before"].as_f64(),
                c["cache_resident_after"].as_f64(),
            ]
        })
        .flatten()
        .fold(0.0f64, f64::max);
    assert!(most >= 0.5, "residency {most}: {doc:#}");
    let said = percent_in(string(w, "message"));
    assert_eq!(said, (most * 100.0).round(), "{w}");
    absent(&doc, "PAGE_CACHE_POSSIBLE");
    // Where the kernel pages out idle memory (the environment says so), buffered reads
    // carry IDLE_RECLAIM; elsewhere they do not.
    let pageout = doc["env"]["page_cache_reclaim"]
        .as_array()
        .expect("page_cache_reclaim recorded")
        .iter()
        .any(|r| r["action"] == "pageout" && r["operations"] != "vaddr");
    if pageout {
        let w = warning(&doc, "IDLE_RECLAIM");
        assert!(string(w, "message").contains("pageout"), "{w}");
    } else {
        absent(&doc, "IDLE_RECLAIM");
    }

    // The same reads with O_DIRECT on the same (ext4 or xfs, not tmpfs) filesystem.
    let doc = doc_of(&sb, &sb.target, &job);
    for code in [
        "PAGE_CACHE",
        "PAGE_CACHE_POSSIBLE",
        "DIRECT_IO_IGNORED",
        "IDLE_RECLAIM",
    ] {
        absent(&doc, code);
    }
    assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
}

fn is_tmpfs(dir: &str) -> bool {
    fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 2 && f[1] == dir && f[2] == "tmpfs"
        })
}

#[test]
fn direct_io_on_tmpfs_is_flagged() {
    if !is_tmpfs("/dev/shm") {
        skip_allowed!("/dev/shm is not a tmpfs mount here");
    }
    let sb = Sandbox::new();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let job = ["--rw", "randread", "--size", "4MiB"];
    let out = run_custom(&sb, dir.path(), &job);
    if out.code == Some(0) {
        println!("tmpfs accepted O_DIRECT: expecting DIRECT_IO_IGNORED");
        let doc = out.json();
        assert_eq!(doc["fs_type"], "tmpfs");
        let w = warning(&doc, "DIRECT_IO_IGNORED");
        assert!(string(w, "message").contains("tmpfs"), "{w}");
        assert_eq!(w["test"], Value::Null);
    } else {
        println!("tmpfs refused O_DIRECT: expecting a clear error");
        assert_eq!(out.code, Some(1), "{out}");
        out.stderr_has(&["O_DIRECT", "--buffered"]);
    }
    // Buffered I/O asks for no O_DIRECT: nothing to ignore.
    let mut buffered = job.to_vec();
    buffered.push("--buffered");
    let doc = doc_of(&sb, dir.path(), &buffered);
    absent(&doc, "DIRECT_IO_IGNORED");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn flushes_on_tmpfs_have_no_effect() {
    if !is_tmpfs("/dev/shm") {
        skip_allowed!("/dev/shm is not a tmpfs mount here");
    }
    let sb = Sandbox::new();
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let probe = |target: &Path| {
        let args = [
            "run",
            "fsync",
            "--sizes",
            "4k",
            "--methods",
            "none,fdatasync",
            "--duration",
            "200ms",
            "--no-store",
            "--quiet",
            "--json",
            "-",
            "--target",
            target.to_str().unwrap(),
        ];
        sb.iolab(&args).ok().json()
    };
    // tmpfs has nothing to flush: write+fdatasync runs as fast as a plain write. Both rates
    // are CPU-bound, so another process taking the CPU in one of the two 200 ms passes can
    // hide it: up to three tries, each shown if all fail.
    let mut tries = Vec::new();
    let found = (0..3).any(|_| {
        let doc = probe(dir.path());
        let codes = doc["warnings"].to_string();
        let ok = doc["warnings"].as_array().is_some_and(|ws| {
            ws.iter().any(|w| {
                w["code"] == "FLUSH_NO_EFFECT"
                    && w["test"] == Value::Null
                    && percent_in(string(w, "message")) >= 50.0
            })
        });
        tries.push(codes);
        ok
    });
    assert!(found, "no FLUSH_NO_EFFECT on tmpfs in 3 tries: {tries:#?}");
    // On the build directory's disk a flush costs a real write.
    let doc = probe(&sb.target);
    absent(&doc, "FLUSH_NO_EFFECT");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn reads_of_a_sparse_file_are_flagged_until_it_is_written() {
    let sb = Sandbox::new();
    let file = sb.path("data.bin");
    let size = 8 * MIB;
    File::create(&file).unwrap().set_len(size).unwrap();
    let job = ["--rw", "randread"];
    let doc = doc_of(&sb, &file, &job);
    assert_eq!(doc["target_kind"], "file");
    let m = message_of(&doc, "SPARSE_READ");
    assert!(m.contains("only 0 B of the 8 MiB"), "{m}");
    assert_eq!(warning(&doc, "SPARSE_READ")["test"], Value::Null);
    // A hole answers a misaligned O_DIRECT read too, but ext4 does honour O_DIRECT.
    absent(&doc, "DIRECT_IO_IGNORED");

    // Half written: still sparse, and the message says how much is there.
    let data = random_bytes(size as usize, 7);
    let mut f = fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all(&data[..(size / 2) as usize]).unwrap();
    f.sync_all().unwrap();
    let doc = doc_of(&sb, &file, &job);
    let m = message_of(&doc, "SPARSE_READ");
    assert!(m.contains("only 4 MiB of the 8 MiB"), "{m}");

    // Fully written: nothing to warn about.
    f.write_all(&data[(size / 2) as usize..]).unwrap();
    f.sync_all().unwrap();
    let doc = doc_of(&sb, &file, &job);
    absent(&doc, "SPARSE_READ");
    absent(&doc, "DIRECT_IO_IGNORED");
    // iolab never removes a file it did not create, nor changes it by reading.
    assert_eq!(fs::read(&file).unwrap(), data);
}

// --- a busy machine -----------------------------------------------------------------------

/// A background process (and its process group), killed on drop.
struct Background(Child);

impl Background {
    /// `sh -c script` in a process group of its own.
    fn sh(script: &str) -> Background {
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        Background(child)
    }
}

impl Background {
    /// A shell loop renamed `iolab-burner` through /proc, so a warning can be told to name
    /// it; as root it wins its CPU against whatever else runs, so it is among the three
    /// busiest processes BUSY_CPU names (it is a measurement of others, after all).
    fn burner() -> Background {
        let b = Background::sh("printf iolab-burner > /proc/$$/comm; while :; do :; done");
        // SAFETY: setpriority has no memory-safety preconditions.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, b.0.id(), -10) };
        b
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        // SAFETY: kill has no memory-safety preconditions; the group is the child's own.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// The burner (a whole CPU's worth when it gets one) is among the three busiest processes a
/// BUSY_CPU message names, as root (which sees every process's CPU), unless other processes
/// crowd the machine: where tasks waited for a CPU a quarter of the run (`busy`) or more
/// (five suites side by side), others' shares passed its own.
fn burner_is_named(m: &str, busy: f64) {
    if is_root() && busy < BUSY {
        assert!(
            m.contains("iolab-burner"),
            "CPU wait {:.0}% of the run: {m}",
            busy * 100.0
        );
    } else if !m.contains("iolab-burner") {
        println!(
            "note: the burner was not among the three busiest (CPU wait {:.0}% of the run): {m}",
            busy * 100.0
        );
    }
}

#[test]
fn a_busy_process_is_named() {
    let sb = Sandbox::new();
    let burner = Background::burner();
    let (wait, started) = (CpuWait::start(), std::time::Instant::now());
    let doc = doc_of(&sb, &sb.target, &["--rw", "randread", "--size", "8MiB"]);
    let busy = wait.busy_since(started);
    drop(burner);
    let w = warning(&doc, "BUSY_CPU");
    assert_eq!(w["test"], test_name(&doc), "{w}");
    let m = string(w, "message");
    // The busiest pass's share of a CPU is the number given, with its busiest processes.
    let busiest = passes(&doc)
        .into_iter()
        .max_by(|a, b| {
            let cpu = |p: &Value| num(&p["context"]["activity"], "other_cpu_pct");
            cpu(a).total_cmp(&cpu(b))
        })
        .unwrap();
    let activity = &busiest["context"]["activity"];
    assert!(num(activity, "other_cpu_pct") > 25.0, "{activity}");
    assert_eq!(percent_in(m), num(activity, "other_cpu_pct").round(), "{m}");
    assert!(
        m.contains(&format!("during pass {}", uint(busiest, "index"))),
        "{m}"
    );
    let top = arr(activity, "top_processes");
    for p in top {
        assert!(m.contains(string(p, "name")), "{m} lacks {p}");
    }
    burner_is_named(m, busy);
}

/// The fsync probe's passes record other processes' CPU as the block presets' do: a flush
/// timed beside a busy process says so, since its time then holds waits for a CPU.
#[test]
fn a_busy_process_is_named_on_an_fsync_probe() {
    let sb = Sandbox::new();
    let burner = Background::burner();
    let (wait, started) = (CpuWait::start(), std::time::Instant::now());
    let doc = sb
        .iolab(&[
            "run",
            "fsync",
            "--sizes",
            "4k",
            "--methods",
            "fdatasync",
            "--duration",
            "500ms",
            "--target",
            sb.target.to_str().unwrap(),
            "--no-store",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let busy = wait.busy_since(started);
    drop(burner);
    let w = warning(&doc, "BUSY_CPU");
    assert_eq!(w["test"], "write+fdatasync 4K", "{w}");
    let busiest = passes(&doc)
        .into_iter()
        .map(|p| num(&p["context"]["activity"], "other_cpu_pct"))
        .fold(0.0, f64::max);
    assert!(busiest > 25.0, "{doc:#}");
    let m = string(w, "message");
    assert_eq!(percent_in(m), busiest.round(), "{m}");
    burner_is_named(m, busy);
}

/// Passes of one I/O (`--io-size` one block) while several processes keep the CPUs busy:
/// a pass of a millisecond or so is far shorter than a clock tick, and every busy process
/// charged a tick in it used to read as several CPUs' worth ("other processes used 461%
/// of a CPU" on 2 CPUs). Each pass now says how coarse its CPU figure was, gives none when
/// a tick is above 5% of a CPU, and never more than the machine's CPUs.
#[test]
fn other_processes_cpu_is_never_more_than_the_machine_has() {
    let sb = Sandbox::new();
    // SAFETY: sysconf has no preconditions.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as f64;
    let burners: Vec<Background> = (0..4)
        .map(|_| Background::sh("while :; do :; done"))
        .collect();
    let doc = doc_of(
        &sb,
        &sb.target,
        &[
            "--rw",
            "read",
            "--bs",
            "4k",
            "--io-size",
            "4k",
            "--size",
            "1MiB",
        ],
    );
    drop(burners);
    for p in passes(&doc) {
        let a = &p["context"]["activity"];
        let pct = num(a, "other_cpu_pct");
        let resolution = num(a, "cpu_resolution_pct");
        assert!(resolution > 0.0, "{a}");
        assert!(pct <= 100.0 * ncpu, "{a}");
        for t in arr(a, "top_processes") {
            assert!(num(t, "cpu_pct") <= 100.0 * ncpu, "{a}");
        }
        if resolution > 5.0 {
            assert_eq!(pct, 0.0, "{a}");
            assert!(arr(a, "top_processes").is_empty(), "{a}");
        }
    }
    for w in arr(&doc, "warnings") {
        if w["code"] == "BUSY_CPU" {
            let m = string(w, "message");
            assert!(percent_in(m) <= 100.0 * ncpu, "{m}");
        }
    }
}

// --- loop devices (root) ------------------------------------------------------------------

fn loop_dio(dev: &Loop) -> String {
    fs::read_to_string(format!("/sys/block/{}/loop/dio", dev.name()))
        .unwrap()
        .trim()
        .to_string()
}

/// Whether anything is left of a loop device and its mount.
#[track_caller]
fn assert_released(name: &str, image: &str, mount_point: &Path) {
    assert!(
        !Mount::is_mounted(mount_point),
        "{} still mounted",
        mount_point.display()
    );
    // By its image, not its name: once detached, another test binary (the suite runs two
    // side by side) may attach the same loop device to an image of its own.
    let now = fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"));
    assert!(
        now.ok().as_deref().map(str::trim) != Some(image),
        "{name} still attached to {image}"
    );
}

/// The image a loop device reads and writes.
fn backing_file(name: &str) -> String {
    fs::read_to_string(format!("/sys/block/{name}/loop/backing_file"))
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn loop_device_settings_under_ext4() {
    let Some(_lock) = require_devices(&["mkfs.ext4", "mount", "umount"]) else {
        return;
    };
    let sb = Sandbox::new();
    // Attached without --direct-io: the loop device reads and writes its image through the
    // host's page cache.
    let lo = Loop::new(64 * MIB);
    let name = lo.name();
    let image = backing_file(&name);
    let cache = QueueSetting::of(&lo.name(), "write_cache");
    let rotational = QueueSetting::of(&lo.name(), "rotational");
    cache.set("write back");
    rotational.set("1");
    assert_eq!(loop_dio(&lo), "0");
    // Initialise everything now, so no background writes run into the passes.
    iolab_testkit::mkfs_ext4_initialised(lo.s());
    let mnt = Mount::new(&lo.dev, &[]);
    let dir = mnt.path();
    // fdatasync of overwritten, allocated blocks is the device flush alone.
    let write = ["--rw", "randwrite", "--size", "8MiB", "--fdatasync", "16"];
    let read = ["--rw", "randread", "--size", "8MiB"];

    let doc = doc_of(&sb, &dir, &write);
    assert_eq!(doc["fs_type"], "ext4");
    let w = warning(&doc, "LOOP_WITHOUT_DIO");
    assert!(string(w, "message").contains(&name), "{w}");
    assert_eq!(w["test"], Value::Null);
    for code in [
        "NO_BARRIER",
        "WRITE_THROUGH_DROPS_FLUSH",
        "DIRECT_IO_IGNORED",
    ] {
        absent(&doc, code);
    }

    // "write through" on a loop device: flushes are dropped, though its medium is the
    // volatile host page cache. Only a run that writes is concerned.
    cache.set("write through");
    let doc = doc_of(&sb, &dir, &write);
    let m = message_of(&doc, "WRITE_THROUGH_DROPS_FLUSH");
    assert!(m.contains(&name) && m.contains("write through"), "{m}");
    // With its flushes dropped, a device that calls itself rotational answers fsync far
    // faster than a disk could.
    let w = warning(&doc, "FSYNC_TOO_FAST");
    assert_eq!(w["test"], test_name(&doc), "{w}");
    // The figure is the median over passes of each pass's median flush.
    let sync_p50: Vec<f64> = passes(&doc)
        .iter()
        .map(|p| num(&p["sync"]["lat_us"], "p50"))
        .collect();
    let m = string(w, "message");
    assert!(
        m.contains(&format!("{:.0} µs", median(&sync_p50))),
        "{m} vs {sync_p50:?}"
    );
    // The same on a device that says it is not rotational: fast flushes are plausible.
    rotational.set("0");
    let doc = doc_of(&sb, &dir, &write);
    warning(&doc, "WRITE_THROUGH_DROPS_FLUSH");
    absent(&doc, "FSYNC_TOO_FAST");
    let doc = doc_of(&sb, &dir, &read);
    absent(&doc, "WRITE_THROUGH_DROPS_FLUSH");
    cache.set("write back");

    // No barriers.
    mnt.remount("barrier=0");
    let doc = doc_of(&sb, &dir, &write);
    warning(&doc, "NO_BARRIER");
    absent(&doc, "WRITE_THROUGH_DROPS_FLUSH");
    mnt.remount("barrier=1");

    // Direct I/O switched on for the device: O_DIRECT now reaches the image file.
    sh("losetup", &["--direct-io=on", lo.s()]);
    if loop_dio(&lo) != "1" {
        println!("note: the loop driver kept direct I/O off for {name}; last case skipped");
    } else {
        let doc = doc_of(&sb, &dir, &write);
        for code in [
            "LOOP_WITHOUT_DIO",
            "NO_BARRIER",
            "WRITE_THROUGH_DROPS_FLUSH",
            "DIRECT_IO_IGNORED",
        ] {
            absent(&doc, code);
        }
    }
    assert!(sb.target_entries().is_empty());
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1, "only lost+found");
    drop(rotational);
    drop(cache);
    drop(mnt);
    drop(lo);
    assert_released(&name, &image, &dir);
}

#[test]
fn zeros_on_a_compressing_btrfs_are_flagged() {
    let Some(_lock) = require_devices(&["mkfs.btrfs", "mount", "umount"]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = Loop::with_options(256 * MIB, &["--direct-io=on"]);
    let name = lo.name();
    let image = backing_file(&name);
    sh("mkfs.btrfs", &["-q", "-f", lo.s()]);
    let mnt = Mount::new(&lo.dev, &["-o", "compress=zstd"]);
    let dir = mnt.path();
    let job = ["--rw", "write", "--bs", "64k", "--size", "8MiB"];

    let mut zeros = job.to_vec();
    zeros.extend_from_slice(&["--data", "zeros"]);
    let doc = doc_of(&sb, &dir, &zeros);
    assert_eq!(doc["fs_type"], "btrfs");
    let w = warning(&doc, "COMPRESSIBLE_DATA");
    assert!(string(w, "message").contains("zstd"), "{w}");
    assert_eq!(w["test"], Value::Null);

    let doc = doc_of(&sb, &dir, &job);
    absent(&doc, "COMPRESSIBLE_DATA");
    // btrfs serves a misaligned O_DIRECT read through the page cache, but aligned direct
    // I/O bypasses it: not "ignored".
    absent(&doc, "DIRECT_IO_IGNORED");
    absent(&doc, "LOOP_WITHOUT_DIO");
    // ... except for I/O smaller than its 4 KiB sector, which it buffers: flagged per test.
    let doc = doc_of(
        &sb,
        &dir,
        &["--rw", "randread", "--bs", "512", "--size", "8MiB"],
    );
    let w = warning(&doc, "DIRECT_IO_IGNORED");
    assert!(string(w, "message").contains("4096-byte sector"), "{w}");
    assert_eq!(w["test"], test_name(&doc), "{w}");
    drop(mnt);
    drop(lo);
    assert_released(&name, &image, &dir);
}

#[test]
fn another_reader_on_the_device_is_flagged() {
    let Some(_lock) = require_devices(&["dd"]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = Loop::with_options(64 * MIB, &["--direct-io=on"]);
    let name = lo.name();
    let job = ["--rw", "randread", "--size", "16MiB"];

    // Alone on the device: it moved exactly iolab's bytes.
    let doc = doc_of(&sb, &lo.dev, &job);
    assert_eq!(doc["target_kind"], "device");
    absent(&doc, "BUSY_DEVICE");
    for p in passes(&doc) {
        let dev = arr(&p["context"]["activity"], "devices")
            .iter()
            .find(|d| d["device"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} not watched: {p}"));
        let moved = uint(dev, "read_bytes") + uint(dev, "write_bytes");
        assert!(moved >= uint(p, "bytes"), "{dev} vs {p}");
    }

    // Someone else reads the whole device over and over.
    let reader = Background::sh(&format!(
        "while :; do dd if={} of=/dev/null bs=1M iflag=direct status=none; done",
        lo.s()
    ));
    let doc = doc_of(&sb, &lo.dev, &job);
    drop(reader);
    let w = warning(&doc, "BUSY_DEVICE");
    assert_eq!(w["test"], test_name(&doc), "{w}");
    let m = string(w, "message");
    assert!(m.contains(&name) && m.contains("more than iolab"), "{m}");
    drop(lo);
    assert!(
        !Path::new(&format!("/sys/block/{name}/loop/backing_file")).exists(),
        "{name} still attached"
    );
}
