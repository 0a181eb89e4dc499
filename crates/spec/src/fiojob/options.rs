//! fio's option names: their aliases, which ones iolab maps, which change only fio's own
//! report, the rest of fio's options (refused by name) and the I/O engines iolab cannot
//! emulate. An unknown name gets a "did you mean" from all of them.

/// fio's aliases and the name iolab files them under.
const ALIASES: &[(&str, &str)] = &[
    ("readwrite", "rw"),
    ("blocksize", "bs"),
    ("blocksize_range", "bsrange"),
    ("blockalign", "ba"),
    ("blocksize_unaligned", "bs_unaligned"),
    ("nr_files", "nrfiles"),
    ("timeout", "runtime"),
    ("wait_for_previous", "stonewall"),
    ("io_limit", "io_size"),
    ("fill_fs", "fill_device"),
    ("iodepth_batch_submit", "iodepth_batch"),
    ("iodepth_batch_complete", "iodepth_batch_complete_min"),
    ("iomem", "mem"),
    ("fileoffset", "offset"),
    ("ratecycle", "rate_cycle"),
    ("ratemin", "rate_min"),
    ("ss", "steadystate"),
    ("ss_dur", "steadystate_duration"),
    ("ss_ramp", "steadystate_ramp_time"),
    ("disable_bw", "disable_bw_measurement"),
    ("threads", "thread"),
];

/// The options iolab maps onto its engine (docs/fio.md says how).
pub const MAPPED: &[&str] = &[
    "rw",
    "bs",
    "bsrange",
    "bssplit",
    "ba",
    "size",
    "filesize",
    "io_size",
    "offset",
    "filename",
    "directory",
    "nrfiles",
    "iodepth",
    "numjobs",
    "direct",
    "buffered",
    "ioengine",
    "runtime",
    "time_based",
    "ramp_time",
    "loops",
    "rwmixread",
    "rwmixwrite",
    "percentage_random",
    "random_distribution",
    "norandommap",
    "randrepeat",
    "fsync",
    "fdatasync",
    "end_fsync",
    "sync",
    "startdelay",
    "stonewall",
    "wait_for",
    "new_group",
    "group_reporting",
    "rate",
    "rate_iops",
    "zero_buffers",
    "refill_buffers",
    "scramble_buffers",
    "buffer_compress_percentage",
    "verify",
    "do_verify",
    // accepted with a note on what differs (docs/fio.md)
    "continue_on_error",
    "exit_what",
    "exitall",
    "exitall_on_error",
    "flow",
    "flow_id",
    "flow_sleep",
    "ignore_error",
    "io_submit_mode",
    "number_ios",
    "random_generator",
    "rate_iops_min",
    "rate_min",
    "verify_backlog",
    "verify_backlog_batch",
    "thinktime",
    "thinktime_blocks",
    "thinktime_spin",
    "kb_base",
    "invalidate",
    "fixedbufs",
    "registerfiles",
];

/// Options that change only what fio reports or how fio itself is run, never the I/O a
/// job does: accepted, and listed in a run note as not applied.
pub const REPORT_ONLY: &[&str] = &[
    "name",
    "description",
    "thread",
    "clat_percentiles",
    "lat_percentiles",
    "slat_percentiles",
    "percentile_list",
    "disable_lat",
    "disable_clat",
    "disable_slat",
    "disable_bw_measurement",
    "gtod_reduce",
    "unified_rw_reporting",
    "significant_figures",
    "stats",
    "bwavgtime",
    "iopsavgtime",
    "clocksource",
    "error_dump",
];

/// The rest of fio's options (fio 3.33, `fio --cmdhelp=all`, and common engine options):
/// known, and refused by name.
pub const OTHER_FIO: &[&str] = &[
    "allow_file_create",
    "allow_mounted_write",
    "allrandrepeat",
    "atomic",
    "block_error_percentiles",
    "bs_unaligned",
    "buffer_compress_chunk",
    "buffer_pattern",
    "cgroup",
    "cgroup_nodelete",
    "cgroup_weight",
    "cpumask",
    "cpus_allowed",
    "cpus_allowed_policy",
    "create_fsync",
    "create_on_open",
    "create_only",
    "create_serialize",
    "dedupe_global",
    "dedupe_mode",
    "dedupe_percentage",
    "dedupe_working_set_percentage",
    "disk_util",
    "exec_postrun",
    "exec_prerun",
    "experimental_verify",
    "fadvise_hint",
    "fallocate",
    "file_append",
    "file_service_type",
    "filename_format",
    "fill_device",
    "fsync_on_close",
    "gid",
    "gtod_cpu",
    "ignore_zone_limits",
    "iodepth_batch",
    "iodepth_batch_complete_max",
    "iodepth_batch_complete_min",
    "iodepth_low",
    "ioscheduler",
    "job_max_open_zones",
    "latency_percentile",
    "latency_run",
    "latency_target",
    "latency_window",
    "lockfile",
    "lockmem",
    "log_compression",
    "log_entries",
    "log_hist_msec",
    "log_max_value",
    "log_offset",
    "log_prio",
    "log_unix_epoch",
    "max_latency",
    "max_open_zones",
    "mem",
    "nice",
    "numa_cpu_nodes",
    "numa_mem_policy",
    "offset_align",
    "offset_increment",
    "opendir",
    "openfiles",
    "overwrite",
    "pre_read",
    "prio",
    "prioclass",
    "profile",
    "randseed",
    "rate_cycle",
    "rate_ignore_thinktime",
    "rate_process",
    "read_beyond_wp",
    "read_iolog",
    "replay_no_stall",
    "replay_redirect",
    "rw_sequencer",
    "serialize_overlap",
    "steadystate",
    "steadystate_duration",
    "steadystate_ramp_time",
    "sync_file_range",
    "thinktime_blocks_type",
    "thinktime_iotime",
    "trim_backlog",
    "trim_percentage",
    "uid",
    "unique_filename",
    "unit_base",
    "unlink",
    "unlink_each_loop",
    "verify_async",
    "verify_dump",
    "verify_fatal",
    "verify_interval",
    "verify_offset",
    "verify_only",
    "verify_pattern",
    "verify_state_load",
    "verify_state_save",
    "write_barrier",
    "write_hint",
    "write_hist_log",
    "write_iolog",
    "zonecapacity",
    "zonemode",
    "zonerange",
    "zonesize",
    "zoneskip",
    // common engine options
    "hipri",
    "sqthread_poll",
    "sqthread_poll_cpu",
    "nonvectored",
    "uncached",
    "nowait",
    "force_async",
    "cmdprio",
    "cmdprio_class",
    "cmdprio_percentage",
    "cmdprio_bssplit",
    "userspace_reap",
    "cmd_type",
    "hostname",
    "port",
    "protocol",
    "listen",
    "pingpong",
    "busy_poll",
    "cpuload",
    "cpumode",
    "cpuchunks",
    "exit_on_io_done",
];

/// Why some of fio's options are refused, when there is more to say than that iolab
/// does not take them.
pub const WHY: &[(&str, &str)] = &[
    (
        "verify_pattern",
        "iolab verifies with its own self-describing blocks (offset, generation, checksum), \
         so it cannot write or check a fixed pattern",
    ),
    (
        "verify_interval",
        "iolab checks whole blocks of the job's block size; a smaller verify unit is not \
         supported",
    ),
    (
        "cmdprio_percentage",
        "per-I/O priority classes (ioprio on each request) are not issued by iolab's engines",
    ),
    (
        "cmdprio_bssplit",
        "per-I/O priority classes (ioprio on each request) are not issued by iolab's engines",
    ),
    (
        "cmdprio_class",
        "per-I/O priority classes (ioprio on each request) are not issued by iolab's engines",
    ),
    (
        "cmdprio",
        "per-I/O priority classes (ioprio on each request) are not issued by iolab's engines",
    ),
    (
        "prioclass",
        "iolab does not set the I/O priority class of its job threads",
    ),
    (
        "prio",
        "iolab does not set the I/O priority of its job threads",
    ),
    (
        "numa_cpu_nodes",
        "iolab does not bind job threads to NUMA nodes",
    ),
    (
        "numa_mem_policy",
        "iolab does not set a NUMA memory policy for its buffers",
    ),
    (
        "latency_target",
        "fio searches for the queue depth that meets a latency target; iolab runs the \
         queue depth given (a --qd-ladder or an iodepth sweep shows the same curve)",
    ),
    (
        "rate_process",
        "iolab spaces paced I/Os evenly; fio's Poisson arrivals are not reproduced",
    ),
    (
        "offset_increment",
        "iolab's clones share one region from offset 0; per-clone offsets are not supported",
    ),
    (
        "fill_device",
        "iolab writes its region (--size), not until the device is full",
    ),
    (
        "zonemode",
        "fio's zone modes (strided I/O over zonesize/zoneskip, or a zoned block device's \
         zones) are not run by iolab's engine, which writes a zoned device's zones out of \
         order",
    ),
    (
        "dedupe_mode",
        "iolab writes unique data; dedupable buffers are not generated",
    ),
    (
        "dedupe_percentage",
        "iolab writes unique data; dedupable buffers are not generated",
    ),
];

/// fio's I/O engines iolab cannot emulate (network, object stores, accelerators,
/// special devices): refused by name.
pub const UNEMULABLE_ENGINES: &[&str] = &[
    "rdma",
    "http",
    "libcufile",
    "gpudirect",
    "librpma_apm_client",
    "librpma_apm_server",
    "librpma_gpspm_client",
    "librpma_gpspm_server",
    "rados",
    "rbd",
    "gfapi",
    "gfapi_async",
    "libhdfs",
    "libiscsi",
    "nbd",
    "nfs",
    "dfs",
    "ime_psync",
    "ime_psyncv",
    "ime_aio",
    "net",
    "netsplice",
    "sg",
    "mtd",
    "dev-dax",
    "libpmem",
    "pmemblk",
    "libzbc",
    "xnvme",
    "io_uring_cmd",
    "cpuio",
    "exec",
    "filecreate",
    "filedelete",
    "filestat",
    "dircreate",
    "dirdelete",
    "dirstat",
    "e4defrag",
    "falloc",
    "ftruncate",
    "splice",
    "mmap",
    "posixaio",
    "solarisaio",
    "windowsaio",
    "guasi",
    "binject",
    "external",
];

/// The name `key` is filed under (an alias resolved).
pub fn canonical(key: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| *a == key)
        .map_or(key, |(_, c)| c)
}

/// What iolab does with option `key` (canonical).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Mapped,
    ReportOnly,
    /// One of fio's options iolab does not support.
    Unsupported,
    /// Not an fio option iolab knows of.
    Unknown,
}

pub fn kind(key: &str) -> Kind {
    if MAPPED.contains(&key) || super::logs::KEYS.contains(&key) {
        Kind::Mapped
    } else if REPORT_ONLY.contains(&key) {
        Kind::ReportOnly
    } else if OTHER_FIO.contains(&key) {
        Kind::Unsupported
    } else {
        Kind::Unknown
    }
}

/// The known option nearest to `key` when it is a near miss (edit distance at most 2, or
/// at most a third of its length).
pub fn suggest(key: &str) -> Option<&'static str> {
    let all = MAPPED
        .iter()
        .chain(super::logs::KEYS)
        .chain(REPORT_ONLY)
        .chain(OTHER_FIO)
        .chain(ALIASES.iter().map(|(a, _)| a));
    let limit = (key.chars().count() / 3).clamp(1, 2);
    all.map(|c| (distance(key, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance (keys are short; inputs longer than 64 characters never match).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    if a.len() > 64 || b.len() > 64 {
        return usize::MAX;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_misses() {
        assert_eq!(suggest("rwmixrea"), Some("rwmixread"));
        assert_eq!(suggest("iodpeth"), Some("iodepth"));
        assert_eq!(suggest("blocksze"), Some("blocksize"));
        assert_eq!(suggest("zzzzzzzz"), None);
        assert_eq!(canonical("readwrite"), "rw");
        assert_eq!(kind("verify_pattern"), Kind::Unsupported);
        assert_eq!(kind("bs"), Kind::Mapped);
    }
}
