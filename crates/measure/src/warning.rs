//! Warnings and their codes: every condition that can make a number misleading has one
//! [`WarningCode`], which carries its stable string, the caveat it puts on a comparison of
//! configurations, and the text docs/warnings.md shows for it (that file's codes section is
//! rendered from here by [`WarningCode::docs_markdown`] and checked by a test).

use serde::{Deserialize, Serialize};

/// What a warning says about the number it qualifies, for a comparison of configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Caveat {
    /// The configuration is faster because data may not reach stable storage when the
    /// application asks for it (flushes dropped or never sent): unsafe, not a clean win.
    Unsafe,
    /// The number may come from a cache or from compression rather than the device.
    Cache,
}

impl Caveat {
    /// The word a score table prints before the codes: "unsafe" or "cache".
    pub fn as_str(self) -> &'static str {
        match self {
            Caveat::Unsafe => "unsafe",
            Caveat::Cache => "cache",
        }
    }
}

/// The documentation of one warning code: what docs/warnings.md shows for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeDoc {
    /// One line naming the condition.
    pub title: &'static str,
    /// When the warning is raised (Markdown).
    pub when: &'static str,
    /// What to do about it (Markdown).
    pub fix: &'static str,
}

/// Declares the known codes: the enum's variants, their strings, caveats and docs.
macro_rules! warning_codes {
    ($(
        $(#[$attr:meta])*
        $variant:ident = $code:literal {
            caveat: $caveat:expr,
            title: $title:literal,
            when: $when:literal,
            fix: $fix:literal $(,)?
        }
    )*) => {
        /// The stable code of a warning. Serialised as its SCREAMING_CASE string (the JSON
        /// run document and the store keep that string); a string this build does not know
        /// (written by another version of iolab) loads as [`WarningCode::Other`] and is
        /// printed as it was.
        #[derive(Debug, Clone)]
        pub enum WarningCode {
            $($(#[$attr])* $variant,)*
            /// A code this build does not know, kept as it was read.
            Other(String),
        }

        impl WarningCode {
            /// Every known code, in the order docs/warnings.md lists them.
            pub const ALL: &'static [WarningCode] = &[$(WarningCode::$variant),*];

            /// The stable string: what the JSON document, the store and the reports show.
            pub fn as_str(&self) -> &str {
                match self {
                    $(WarningCode::$variant => $code,)*
                    WarningCode::Other(s) => s,
                }
            }

            /// The code a string names: a known variant, or [`WarningCode::Other`].
            pub fn parse(s: &str) -> WarningCode {
                match s {
                    $($code => WarningCode::$variant,)*
                    other => WarningCode::Other(other.to_string()),
                }
            }

            /// The caveat this code puts on a comparison of configurations, if it changes
            /// what the number means (none for codes this build does not know).
            pub fn caveat(&self) -> Option<Caveat> {
                match self {
                    $(WarningCode::$variant => $caveat,)*
                    WarningCode::Other(_) => None,
                }
            }

            /// Title, when it is raised and the fix (none for codes this build does not
            /// know).
            pub fn doc(&self) -> Option<CodeDoc> {
                match self {
                    $(WarningCode::$variant => Some(CodeDoc {
                        title: $title,
                        when: $when,
                        fix: $fix,
                    }),)*
                    WarningCode::Other(_) => None,
                }
            }
        }
    };
}

warning_codes! {
    PageCache = "PAGE_CACHE" {
        caveat: Some(Caveat::Cache),
        title: "Buffered reads served from the page cache",
        when: "a buffered read test's file was ≥ 50% resident in the page cache before a pass, \
               or (random reads, which revisit blocks) after it (mincore(2) on a read-only \
               mapping of the test region); a sequential reader whose file is resident only \
               after its pass filled the cache itself and is not flagged",
        fix: "block presets: O_DIRECT (drop `--buffered`) or a file larger than RAM; `streams` \
              and `copy`: `--drop-caches`; a later reader of a shared `streams --same-file` \
              file reads what the first one cached, so drop `--same-file` to measure the \
              device",
    }
    PageCachePossible = "PAGE_CACHE_POSSIBLE" {
        caveat: Some(Caveat::Cache),
        title: "A buffered test file small enough to stay cached",
        when: "a buffered read test whose file is smaller than available memory (the lower of \
               `MemAvailable` and the room left under iolab's memory-cgroup limit), when no \
               pass was found resident",
        fix: "use O_DIRECT (drop `--buffered`) or a file larger than RAM",
    }
    IdleReclaim = "IDLE_RECLAIM" {
        caveat: None,
        title: "The kernel pages out idle memory",
        when: "buffered reads on a machine whose kernel pages out memory it finds idle without \
               being short of it: a running DAMON scheme with the `pageout` action on physical \
               memory, or the damon_reclaim module (see \
               [environment.md](environment.md#page-cache-policy)). Cached pages then vanish \
               after a fixed idle time, so a buffered result depends on how long ago its data \
               was touched. These VMs run one (pageout after 30 s idle): a file written and \
               read a minute later is read from the device. Raised for runs that read data \
               which can have sat idle that long: buffered block presets and `run verify \
               --buffered` (the test file is written before the passes read it), and \
               `streams --same-file` whose last reader starts at least the idle time after the \
               first. Not for `copy` (a write test whose source is read cold or as it is), \
               other `streams` (their files are evicted before the streams start), nor \
               `metadata`, `dbench` and `fsync`, which read only what they wrote moments \
               before",
        fix: "block presets: O_DIRECT (drop `--buffered`), or drop the page cache before every \
              run (`sync; echo 3 > /proc/sys/vm/drop_caches`, `drop_caches = true` in a \
              study) so that every run starts cold; `streams --same-file`: a shorter \
              `--stagger`",
    }
    DirectIoIgnored = "DIRECT_IO_IGNORED" {
        caveat: Some(Caveat::Cache),
        title: "O_DIRECT does not bypass the cache",
        when: "O_DIRECT was asked for but a deliberately misaligned direct read succeeded and \
               an aligned one left its page in the page cache (the filesystem ignores \
               O_DIRECT; btrfs, which only sends misaligned direct I/O through the cache, is \
               not flagged for the run), or the target is on tmpfs/ramfs. Per test on btrfs: \
               the test's block size (or an access-spec line's size) is not a multiple of the \
               filesystem's sector size (statvfs `f_bsize`), so btrfs buffered it",
        fix: "test a filesystem on a real device; on btrfs, block sizes from the sector size up",
    }
    LoopWithoutDio = "LOOP_WITHOUT_DIO" {
        caveat: Some(Caveat::Cache),
        title: "A loop device without direct I/O",
        when: "O_DIRECT on a filesystem whose loop device has direct I/O off: writes stop in \
               the host page cache",
        fix: "`losetup --direct-io=on`",
    }
    WritesFasterThanReads = "WRITES_FASTER_THAN_READS" {
        caveat: Some(Caveat::Cache),
        title: "Direct writes far faster than direct reads",
        when: "O_DIRECT runs: a write test ran at 2× or more the MB/s of a read test of the \
               same block size, queue depth, thread count and pattern (sequential or random) \
               in the same run (one warning per run, each pair with both rates and their \
               ratio). No medium writes twice as fast as it reads (flash programs slower than \
               it reads, a disk seeks alike both ways), so a write cache below the OS — the \
               device's own, or the host's under a VM — acknowledged the writes before they \
               reached the medium. Not raised when a blkio throttle holds reads lower than \
               writes (the throttle explains the gap). When other processes used more than a \
               quarter of a CPU during the read test (BUSY_CPU's rule), the message names \
               that as the other explanation (a reader held off the CPU is slow without any \
               cache) and the fix asks for a rerun on a quiet machine first",
        fix: "`--fsync 1` (every write then waits for a flush to the medium), or turn the \
              volatile cache off (`hdparm -W 0` on a disk; on a VM a host disk cache mode that \
              honours flushes, such as `cache=none`); a cache with power-loss protection makes \
              the numbers safe but still the cache's",
    }
    RateCliff = "RATE_CLIFF" {
        caveat: Some(Caveat::Cache),
        title: "The rate dropped during a test and stayed down",
        when: "the per-100 ms series of a test's measured passes, one after another, splits \
               into a faster part and a slower one after it that lasts to the test's end: \
               the median rate after is at most half the median before, at most 20% of the \
               intervals on each side and one more lie on the other side of the midway rate \
               (the series' first interval, the start-up, aside), at least 10 intervals \
               (1 s) come before the drop and 10 after it, and the drop is at least 2 \
               robust standard deviations (1.4826 × MAD) of the noisier side, and it lies \
               inside a pass, two intervals or more after its start (a drop between two \
               passes is a slower pass: HIGH_VARIATION). Not raised for a drop that does \
               not stay (3 intervals in a row after it at 75% of the rate before or more, \
               a later pass's first half second aside: a device idle between passes may \
               regain some cache), \
               nor for one the machine's CPU explains (block passes recorded since \
               per-interval CPU figures were kept, docs/json.md's `timeseries`): iolab's \
               threads waiting for a CPU or the hypervisor's steal 15% more of each \
               interval after the drop than before, or the machine's other work taking a \
               fifth of a CPU more after it, and more than was left idle (its I/O, or a \
               loop device's kernel threads, got less CPU: a busy machine, not a cache). \
               The message \
               gives the bytes and seconds of the series before the drop (where the lines of \
               the cumulative bytes before and after it meet; what preparation, warm-ups and \
               ramps wrote before is not counted), the rates before and after (bytes over \
               seconds of each side, without the series' first interval and the transition: \
               the interval before the drop and the first quarter after it), and the pass it \
               happened in. A cache (an SSD's SLC cache, a controller's or a host's \
               write-back cache) filled, or ran out for reads: the test's headline mixes its \
               burst with the device's sustained rate. On a shared device another program's \
               I/O starting mid-test looks the same (BUSY_DEVICE then says so); false \
               positives measured by `bench/cliffs.sh` are in \
               [benchmarks.md](benchmarks.md#cliffs-and-sustained-writes)",
        fix: "measure the sustained rate on its own: `iolab run sustained` (burst rate, burst \
              bytes, sustained rate and the recovery after a pause), or passes long enough \
              that the burst is a small part of them",
    }
    RateDecline = "RATE_DECLINE" {
        caveat: None,
        title: "The rate fell steadily during a test",
        when: "no RATE_CLIFF, and the per-100 ms series of a test's measured passes, one \
               after another (each pass's first interval, the start-up, aside; at least 30 \
               intervals, 3 s), has a least-squares line through its MB/s that falls by 30% \
               or more of its starting value and explains at least 60% of the rate's \
               variance (R²), and fits better than any step between two levels: a decline, not a \
               step; not raised where the machine's CPU explains the fall between the \
               series' first half and its second, by RATE_CLIFF's rule. The message gives \
               the line's rates at \
               the start and the end and the seconds judged. A device slowing as it fills \
               (garbage collection, an SMR disk's zones, a cache draining more slowly than it \
               fills), a file getting fragmented, or a machine getting busier: the headline \
               depends on how long the test ran; false positives measured by \
               `bench/cliffs.sh` are in [benchmarks.md](benchmarks.md#cliffs-and-sustained-writes)",
        fix: "measure until the rate is steady (`--steady-state`, or `iolab run sustained`), \
              and say how long the test ran with its number",
    }
    CompressibleData = "COMPRESSIBLE_DATA" {
        caveat: Some(Caveat::Cache),
        title: "Zeros written to a compressing filesystem",
        when: "`--data zeros` written to a filesystem that compresses (btrfs \
               `compress`/`compress-force`, zfs `compression`)",
        fix: "`--data random` (default)",
    }
    SparseRead = "SPARSE_READ" {
        caveat: Some(Caveat::Cache),
        title: "Reads of holes in a sparse file",
        when: "read tests on a pre-existing file with less than 90% of its region allocated: \
               holes read as zeros without touching the medium",
        fix: "fill the file, or let iolab create its own",
    }
    NoBarrier = "NO_BARRIER" {
        caveat: Some(Caveat::Unsafe),
        title: "A filesystem mounted without write barriers",
        when: "write tests on a filesystem mounted `nobarrier`/`barrier=0`",
        fix: "remount with barriers",
    }
    ZfsSyncDisabled = "ZFS_SYNC_DISABLED" {
        caveat: Some(Caveat::Unsafe),
        title: "A zfs dataset with sync=disabled",
        when: "write tests on a zfs dataset with `sync=disabled`",
        fix: "`zfs set sync=standard`",
    }
    WriteThroughDropsFlush = "WRITE_THROUGH_DROPS_FLUSH" {
        caveat: Some(Caveat::Unsafe),
        title: "A \"write through\" setting that drops flushes",
        when: "write tests over a loop device whose `queue/write_cache` reads \"write \
               through\": the block layer then drops flushes although the medium (the host \
               page cache) is volatile",
        fix: "set \"write back\"",
    }
    FsyncTooFast = "FSYNC_TOO_FAST" {
        caveat: None,
        title: "Flushes faster than a rotating disk",
        when: "a flush took under 1 ms on a device that reports itself rotational: the \
               median flush call (the median, so that a busy machine's scheduling delays, which \
               stretch a few calls, neither hide a cache nor make one), or for `run fsync` the \
               figure its durability verdict judges (the same median, or an O_DSYNC write's time \
               beyond a plain write's), so that the verdicts and the warning agree; one warning \
               per run, naming the tests; virtio disks report rotational, so it fires on VMs \
               whose host cache answers flushes. On a machine busy most of the time \
               even the median call waits for a CPU, and a flush a cache answered can take \
               milliseconds: `BUSY_CPU` on the same test says so, and timing then cannot tell \
               a cache from a platter (beside five test suites, flushes the disk ignored took \
               7.6 ms)",
        fix: "turn the volatile write cache off (`hdparm -W 0`; on a VM a host disk cache \
              mode that honours flushes, such as `cache=none`) and check the mount's \
              barriers",
    }
    FlushNoEffect = "FLUSH_NO_EFFECT" {
        caveat: Some(Caveat::Unsafe),
        title: "A flush that costs nothing",
        when: "`run fsync`: a sync method (write+fdatasync, write+fsync, O_DSYNC, O_SYNC, \
               O_DIRECT+O_DSYNC) ran at half or more of the rate of a plain write of the same \
               size, so its flush did nothing measurable (one warning per run, naming the \
               methods, with their rates)",
        fix: "check barriers and the write cache mode",
    }
    BlkioThrottle = "BLKIO_THROTTLE" {
        caveat: None,
        title: "A blkio throttle applies",
        when: "a cgroup-v1 blkio throttle (read/write bps/iops) applies to iolab's cgroup or an \
               ancestor, for a device under the target. Not for a study's run inside the \
               throttle its own testbed set up (the run's `study_meta.built.cgroup`): that \
               throttle is the configuration measured, shown in the run's facts instead",
        fix: "expected on an emulated device; remove otherwise",
    }
    ThrottleSplit = "THROTTLE_SPLIT" {
        caveat: None,
        title: "A throttled device got each I/O in parts",
        when: "direct I/O tests under a blkio throttle: the throttled device completed at least \
               1.5 requests per I/O of the test's block size during its passes \
               (/proc/diskstats), so the block layer split the I/Os (the device's \
               max_sectors_kb or max_segments). Linux 6.18 charges a split I/O against a \
               throttle twice: a 20 MiB/s cap reads as 10.5 MB/s (docs/benchmarks.md). Raised \
               when the test's median rate in the throttled direction was also below 90% of the \
               cap (bytes or I/Os per second, as the throttle counts); the message gives both",
        fix: "measure a throttled device with I/Os no larger than the requests it takes \
              (128 KiB is whole on loop devices); for larger ones keep transparent huge pages \
              on (madvise or always), which lays iolab's buffers out contiguously so that a \
              1 MiB I/O stays whole",
    }
    BusyDevice = "BUSY_DEVICE" {
        caveat: None,
        title: "Other I/O on the device",
        when: "direct I/O tests: the top device under the target moved more than 1 MiB and \
               more than 10% beyond iolab's own bytes during a pass (/proc/diskstats); the \
               message gives the other traffic as a percentage of iolab's up to ten times it, \
               then as a multiple",
        fix: "stop the other I/O",
    }
    StragglerHost = "STRAGGLER_HOST" {
        caveat: None,
        title: "One host of a multi-host run is far slower than the others",
        when: "an MPI run (see [mpi.md](mpi.md)) on two or more hosts: a host's MB/s per rank \
               (ops/s for metadata; the median over a test's passes) is below half the \
               median of the other hosts'; the aggregate then rests on the slowest host",
        fix: "look at that host: its network link, its mount options, other load on it",
    }
    BusyCpu = "BUSY_CPU" {
        caveat: None,
        title: "Other processes busy on the CPU",
        when: "other user-space processes used more than 25% of a CPU during a pass \
               (/proc/PID/stat; kernel threads, the zfs-fuse daemon, which does the run's \
               own I/O, and iolab's emulated disk (`iolab-emudisk`), which runs the device's \
               model, excluded); the busiest are named. The figure counts clock ticks \
               over the pass and the sampling around it, is at most the machine's CPUs times \
               100%, and is not taken (0 in the record, `cpu_resolution_pct` above 5) when \
               the pass was too short for one tick to be within 5% of a CPU",
        fix: "close them, or accept the number as \"under load\"",
    }
    StalledIntervals = "STALLED_INTERVALS" {
        caveat: None,
        title: "Intervals in which no I/O completed",
        when: "a pass that completed at least 10 I/Os per 100 ms on average had 100 ms \
               intervals with none (empty intervals at a pass's start, its first I/Os still in \
               flight, or at its end do not count): the \
               device, or the machine, stopped answering for that long; the message counts \
               them and gives the longest stall",
        fix: "look for what paused: the device (garbage collection, a cache write-out, a \
              throttle), other programs on a busy machine (BUSY_CPU), memory pressure; rerun",
    }
    HighVariation = "HIGH_VARIATION" {
        caveat: None,
        title: "Passes that vary widely",
        when: "coefficient of variation of MB/s across passes above 10%",
        fix: "more or longer passes (`--runs`, `--duration`, `--until-stable` where the \
              workload takes them), a quiet machine; for `copy` also `--drop-caches`, so every \
              pass starts alike",
    }
    OutlierPass = "OUTLIER_PASS" {
        caveat: None,
        title: "An outlier pass",
        when: "a pass's modified z-score above 3.5 and more than 5% from the median",
        fix: "look for other activity; rerun",
    }
    SlowFirstPass = "SLOW_FIRST_PASS" {
        caveat: None,
        title: "A slow first pass",
        when: "the first of ≥ 3 passes is the slowest of them all and below 80% of the \
               others' median (a first pass that a later one undercuts is spread, not a \
               warm-up)",
        fix: "block presets: `--warmup 1`, or with warm-up passes already one more \
              (`--warmup N+1`) or a longer `--warmup-time`; `dbench`: a longer `--warmup`; \
              `copy`: `--drop-caches` (every pass then reads its source cold, as the first \
              did); `fsync`: longer passes (`--duration`); otherwise more `--runs`",
    }
    NotConverged = "NOT_CONVERGED" {
        caveat: None,
        title: "Adaptive passes did not reach their target",
        when: "adaptive passes (`--until-stable`, the cdm profiles' default) stopped a test \
               at `--max-runs`, `--max-time` or the run's `--budget` before the 95% CI \
               half-width of its MB/s came within the target; the message gives the \
               interval reached, the spread of the passes and what stopped them",
        fix: "more passes (`--budget`, `--max-runs`, `--max-time`), or stop what disturbs the \
              device (BUSY_DEVICE, BUSY_CPU on the same test)",
    }
    DataMismatch = "DATA_MISMATCH" {
        caveat: None,
        title: "Data read back is not what was written",
        when: "`run verify`, or `--verify` on a block preset, `streams`, `fsync`, `metadata` or \
               `dbench`: a verified block read back (inline or after a pass) was not what was \
               written: bit corruption, a stale, misdirected, zeroed, torn or foreign block \
               (metadata: a file short, long, zeroed, misdirected, foreign or corrupt; dbench: \
               a read or a file that is not what the replay wrote, see \
               [dbench.md](dbench.md)); the run also exits 3 and lists the offsets (see \
               [integrity.md](integrity.md))",
        fix: "distrust the target: check the device (SMART, dmesg), cables, RAM and the write \
              cache",
    }
    ScrubNotRepaired = "SCRUB_NOT_REPAIRED" {
        caveat: None,
        title: "The scrub left data unrepaired",
        when: "`run scrub-test`: after the scrub a corrupted copy was not restored on its \
               member, a block read back wrong, an EIO was missing or unexpected, or the scrub \
               itself failed (exit status 3; see [scrub.md](scrub.md))",
        fix: "do not count on this configuration's scrub; check known issues of the RAID \
              profile (btrfs raid5/6) and the devices",
    }
    ScrubMiscounted = "SCRUB_MISCOUNTED" {
        caveat: None,
        title: "The scrub repaired but miscounted",
        when: "`run scrub-test`: every copy was restored and reads back right, but the scrub's \
               counts (detected, repaired, uncorrectable, per-device) differ from what was \
               injected (exit status 4)",
        fix: "do not monitor this configuration by the scrub's error counts alone",
    }
    StatusMismatch = "STATUS_MISMATCH" {
        caveat: None,
        title: "Replayed operations ended with other statuses",
        when: "a dbench replay had operations whose result differed from the status the \
               loadfile expects",
        fix: "check the loadfile; use an empty directory",
    }
    FewIos = "FEW_IOS" {
        caveat: None,
        title: "Too few I/Os for a p99",
        when: "a pass completed fewer than 100 I/Os, so its p99 is just the slowest I/O or two \
               (one warning per run, naming the tests; passes timed as a whole, with no \
               per-I/O latencies, such as the scrub of `run scrub-test`, do not count)",
        fix: "more I/Os per pass, by what ends the pass: a longer `--duration` for passes that \
              run for a time; a larger `--size` for `atto` (every pass moves the region once: \
              100 I/Os of 64 MiB need 6.25 GiB) and `verify`; a larger `--io-size` for \
              `custom --io-size`; a smaller `--bs` or a larger source (`copy`) or file \
              (`streams --size`); `--files` of 100 or more for `metadata`",
    }
}

/// First line of the generated codes section of docs/warnings.md.
pub const DOCS_BEGIN: &str = "<!-- codes: generated from WarningCode \
     (crates/measure/src/warning.rs); do not edit here, run \
     `IOLAB_UPDATE_DOCS=1 cargo test -p iolab-measure --test warning_docs` -->";
/// Last line of the generated codes section of docs/warnings.md.
pub const DOCS_END: &str = "<!-- end of codes -->";

impl WarningCode {
    /// The codes section of docs/warnings.md, from [`DOCS_BEGIN`] to [`DOCS_END`]: one
    /// heading per known code with when it is raised, the fix and its caveat.
    pub fn docs_markdown() -> String {
        let mut out = format!("{DOCS_BEGIN}\n");
        for code in WarningCode::ALL {
            let doc = code.doc().expect("known codes are documented");
            out.push_str(&format!("\n### `{}`: {}\n\n", code.as_str(), doc.title));
            out.push_str(&wrap(&format!("Raised when: {}.", doc.when)));
            out.push('\n');
            out.push_str(&wrap(&format!("Fix: {}.", doc.fix)));
            if let Some(c) = code.caveat() {
                out.push('\n');
                out.push_str(&wrap(&format!(
                    "In a comparison of configurations: the `{}` caveat ({}).",
                    c.as_str(),
                    match c {
                        Caveat::Unsafe => "faster because data may not reach stable storage",
                        Caveat::Cache => "the number may come from a cache, not the device",
                    }
                )));
            }
        }
        out.push_str(&format!("\n{DOCS_END}\n"));
        out
    }
}

/// A paragraph broken at spaces into lines of at most 92 characters (as the other docs are
/// written), each ending in a newline.
fn wrap(text: &str) -> String {
    const WIDTH: usize = 92;
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// How much a warning changes what the numbers mean, most first: the order a summary of
/// warnings lists codes in (the terminal report, one line a code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Weight {
    /// Data came back wrong or a check failed: the run's outcome, not a number's.
    Integrity,
    /// The number is faster because data may not reach stable storage ([`Caveat::Unsafe`]).
    Unsafe,
    /// The number may be a cache's or a compressor's ([`Caveat::Cache`]).
    Cache,
    /// A condition of the setup that qualifies the number (a throttle, few I/Os, a flush
    /// floor, a straggling host).
    Setup,
    /// Noise: the number is the device's, measured less precisely (passes that varied or did
    /// not converge, a busy machine or device, a slow first pass, an outlier).
    Noise,
}

impl WarningCode {
    /// Where this code stands in [`Weight`]'s order: the caveat class first, then the
    /// integrity codes and the noise codes named here; codes this build does not know count
    /// as setup.
    pub fn weight(&self) -> Weight {
        use WarningCode::*;
        if let Some(c) = self.caveat() {
            return match c {
                Caveat::Unsafe => Weight::Unsafe,
                Caveat::Cache => Weight::Cache,
            };
        }
        match self {
            DataMismatch | ScrubNotRepaired | ScrubMiscounted | StatusMismatch => Weight::Integrity,
            BusyDevice | BusyCpu | HighVariation | OutlierPass | SlowFirstPass | NotConverged
            | StalledIntervals => Weight::Noise,
            _ => Weight::Setup,
        }
    }
}

// Equal when the strings are (an `Other` holding a known code's string equals that code);
// prints and (de)serialises as the string.
string_enum_impls!(WarningCode);

/// A condition that makes a number suspect, with a stable code and the fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub code: WarningCode,
    pub message: String,
    pub fix: String,
    /// The test it concerns, or None for the whole run.
    pub test: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caveats_come_before_noise() {
        let w = |s: &str| WarningCode::parse(s).weight();
        assert!(w("NO_BARRIER") < w("PAGE_CACHE"));
        assert!(w("PAGE_CACHE") < w("FEW_IOS"));
        assert!(w("WRITES_FASTER_THAN_READS") < w("NOT_CONVERGED"));
        for noise in ["NOT_CONVERGED", "HIGH_VARIATION", "BUSY_CPU", "BUSY_DEVICE"] {
            assert_eq!(w(noise), Weight::Noise, "{noise}");
        }
        assert_eq!(w("DATA_MISMATCH"), Weight::Integrity);
        assert_eq!(w("SOMETHING_NEW"), Weight::Setup);
    }

    #[test]
    fn codes_round_trip_through_their_strings() {
        for code in WarningCode::ALL {
            assert_eq!(&WarningCode::parse(code.as_str()), code);
            assert!(!matches!(
                WarningCode::parse(code.as_str()),
                WarningCode::Other(_)
            ));
            let json = serde_json::to_string(code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(&serde_json::from_str::<WarningCode>(&json).unwrap(), code);
        }
        let mut seen: Vec<&str> = WarningCode::ALL.iter().map(|c| c.as_str()).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(
            seen.len(),
            WarningCode::ALL.len(),
            "a code string is used twice"
        );
    }

    #[test]
    fn an_unknown_code_loads_and_prints_as_it_was() {
        let w: Warning = serde_json::from_str(
            r#"{"code":"FROM_A_NEWER_IOLAB","message":"m","fix":"f","test":null}"#,
        )
        .unwrap();
        assert_eq!(w.code, WarningCode::Other("FROM_A_NEWER_IOLAB".into()));
        assert_eq!(w.code.to_string(), "FROM_A_NEWER_IOLAB");
        assert_eq!(w.code.caveat(), None);
        assert_eq!(w.code.doc(), None);
        let back = serde_json::to_value(&w).unwrap();
        assert_eq!(back["code"], "FROM_A_NEWER_IOLAB");
        // Equality follows the string, however the code was built.
        assert_eq!(
            WarningCode::Other("PAGE_CACHE".into()),
            WarningCode::PageCache
        );
    }

    #[test]
    fn caveats_are_the_comparisons_classes() {
        let of = |c: Caveat| -> Vec<&str> {
            WarningCode::ALL
                .iter()
                .filter(|w| w.caveat() == Some(c))
                .map(|w| w.as_str())
                .collect()
        };
        assert_eq!(
            of(Caveat::Unsafe),
            [
                "NO_BARRIER",
                "ZFS_SYNC_DISABLED",
                "WRITE_THROUGH_DROPS_FLUSH",
                "FLUSH_NO_EFFECT"
            ]
        );
        assert_eq!(
            of(Caveat::Cache),
            [
                "PAGE_CACHE",
                "PAGE_CACHE_POSSIBLE",
                "DIRECT_IO_IGNORED",
                "LOOP_WITHOUT_DIO",
                "WRITES_FASTER_THAN_READS",
                "RATE_CLIFF",
                "COMPRESSIBLE_DATA",
                "SPARSE_READ"
            ]
        );
    }
}
