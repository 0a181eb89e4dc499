//! fio's options as one table, a row each ([`OPTIONS`]: the name, how its value is read,
//! what iolab does with it: maps it onto a field, accepts it with a note, ignores it as
//! report-only, or refuses it with a reason), their aliases, and the I/O engines iolab
//! cannot emulate; an engine's own options come from its declaration (`crate::engopt`),
//! the general job options from theirs (`crate::JOB_OPTIONS`).
//! An unknown name gets a "did you mean" from all of them.

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
    ("ss_interval", "steadystate_check_interval"),
    ("disable_bw", "disable_bw_measurement"),
    ("threads", "thread"),
];

/// How a row's value is read: the parser `map` applies to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// `key`, `key=1`, `key=0` (fio's booleans).
    Flag,
    /// A whole number.
    Int,
    /// A size with fio's suffixes under `kb_base`.
    Size,
    /// A time (`runtime`'s seconds or `thinktime`'s microseconds when bare).
    Time,
    /// Text the option's own code reads (a pattern, a list, a name).
    Text,
}

/// What iolab does with one of fio's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Does {
    /// Mapped onto iolab: the field it sets (or what it checks).
    Maps(&'static str),
    /// Accepted; a run note says how iolab differs (docs/fio.md).
    Notes(&'static str),
    /// Changes only fio's own report: accepted, listed in a note as not applied.
    ReportOnly,
    /// Refused at its line, with this reason.
    Refused(&'static str),
}

/// One of fio's options (its canonical name; [`ALIASES`] lead to it), how its value is
/// read, and what iolab does with it. `sample` is a value the mapping takes (the table's
/// test sets every mapped row to it and checks that the mapping reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub name: &'static str,
    pub value: Value,
    pub does: Does,
    pub sample: &'static str,
}

const fn maps(name: &'static str, value: Value, field: &'static str, sample: &'static str) -> Row {
    Row {
        name,
        value,
        does: Does::Maps(field),
        sample,
    }
}

const fn notes(name: &'static str, value: Value, what: &'static str, sample: &'static str) -> Row {
    Row {
        name,
        value,
        does: Does::Notes(what),
        sample,
    }
}

const fn report_only(name: &'static str) -> Row {
    Row {
        name,
        value: Value::Text,
        does: Does::ReportOnly,
        sample: "",
    }
}

const fn refused(name: &'static str, why: &'static str) -> Row {
    Row {
        name,
        value: Value::Text,
        does: Does::Refused(why),
        sample: "",
    }
}

/// The reason of a refusal with nothing more to say.
const NOT_TAKEN: &str = "an fio option iolab does not support (docs/fio.md lists what it maps)";
/// The per-interval log options iolab does not write (the ones it does are mapped rows).
const LOGS: &str = "per-interval logs: iolab writes fio's bw, iops and lat logs from its \
                    100 ms series (write_bw_log, write_iops_log, write_lat_log, \
                    log_avg_msec, per_job_logs: docs/fio.md), not this variant of them";

/// Why fio's zoned block device mode and its options are refused.
pub const ZBD: &str = "zonemode=zbd drives a zoned block device's zones (write pointers, zone \
                       resets, open-zone limits), which iolab's engine does not issue; \
                       zonemode=strided runs";

use Value::{Flag, Int, Size, Text, Time};

/// Every fio option iolab knows (fio 3.33, `fio --cmdhelp=all`, and common engine
/// options), one row each.
pub const OPTIONS: &[Row] = &[
    // mapped onto iolab's engine (docs/fio.md says how); the general job options
    // (iodepth, numjobs, rwmixread...) are their declaration's: `crate::JOB_OPTIONS`
    maps("rw", Text, "JobSpec.rw, seq_skip", "randread"),
    maps("bs", Size, "JobSpec.bs", "8k"),
    maps("bsrange", Text, "JobSpec.access (equal shares)", "4k-16k"),
    maps("bssplit", Text, "JobSpec.access", "4k/50:64k/50"),
    maps("ba", Size, "AccessLine.align", "8k"),
    maps("size", Size, "RunSettings.size, JobSpec.io_limit", "1m"),
    maps("filesize", Size, "RunSettings.size (equal to size)", "1m"),
    maps("io_size", Size, "JobSpec.io_limit", "1m"),
    maps("offset", Size, "JobSpec.clones (where clone 0 starts)", "0"),
    maps("filename", Text, "replaced by --target", "f"),
    maps("directory", Text, "replaced by --target", "d"),
    maps("nrfiles", Int, "1 only", "1"),
    maps("direct", Flag, "RunSettings.direct", "1"),
    maps("buffered", Flag, "RunSettings.direct", "0"),
    maps("ioengine", Text, "RunSettings.engine", "psync"),
    maps("runtime", Time, "RunSettings.duration", "1s"),
    maps("time_based", Flag, "a timed pass", "1"),
    maps("ramp_time", Time, "RunSettings.ramp", "1s"),
    maps("loops", Int, "JobSpec.io_limit", "2"),
    maps("rwmixwrite", Int, "JobSpec.rwmixread", "30"),
    maps("percentage_random", Int, "AccessLine.random_pct", "50"),
    maps(
        "random_distribution",
        Text,
        "JobSpec.zipf, JobSpec.zones",
        "zipf:1.2",
    ),
    maps("fsync", Int, "JobSpec.fsync_every", "4"),
    maps(
        "fdatasync",
        Int,
        "JobSpec.fsync_every, SyncMode::Fdatasync",
        "4",
    ),
    maps("end_fsync", Flag, "JobSpec.end_fsync", "1"),
    maps("sync", Text, "0 only", "0"),
    maps("stonewall", Flag, "jobs run one after another", "1"),
    maps("new_group", Flag, "jobs run one after another", "1"),
    maps("wait_for", Text, "jobs run one after another", "a"),
    maps("rate", Size, "Pace.rate_bytes", "1m"),
    maps("rate_iops", Int, "Pace.rate_iops", "100"),
    maps("zero_buffers", Flag, "RunSettings.data", "1"),
    maps("refill_buffers", Flag, "RunSettings.data", "1"),
    maps(
        "buffer_compress_percentage",
        Int,
        "JobSpec.content, or RunSettings.data (100 with zeros)",
        "50",
    ),
    maps("buffer_compress_chunk", Size, "Content.chunk", "512"),
    maps("dedupe_percentage", Int, "Content.dedupe_pct", "50"),
    maps("dedupe_mode", Text, "Content.working_set", "working_set"),
    maps(
        "dedupe_working_set_percentage",
        Int,
        "Content.working_set",
        "50",
    ),
    maps("dedupe_global", Flag, "Content.global", "0"),
    maps("verify", Text, "BlockPlan.verify", "md5"),
    maps("do_verify", Flag, "BlockPlan.verify", "1"),
    maps("number_ios", Int, "JobSpec.io_limit", "10"),
    maps(
        "steadystate",
        Text,
        "BlockPlan.steady (the rule)",
        "iops:10%",
    ),
    maps(
        "steadystate_duration",
        Time,
        "BlockPlan.steady (the window)",
        "2s",
    ),
    maps(
        "steadystate_ramp_time",
        Time,
        "RunSettings.warmup_duration (one pass)",
        "0",
    ),
    maps(
        "steadystate_check_interval",
        Time,
        "RunSettings.duration (a round)",
        "1s",
    ),
    maps("rate_process", Text, "Pace.poisson", "poisson"),
    maps("thinktime", Time, "Pace.think_us", "100"),
    maps("thinktime_blocks", Int, "Pace.think_blocks", "2"),
    maps("thinktime_spin", Time, "0 only", "0"),
    maps("kb_base", Int, "how sizes are read", "1000"),
    maps("invalidate", Flag, "JobSpec.invalidate", "1"),
    // an engine's own options (io_uring's fixedbufs...) are its file's: `crate::engopt`
    maps("mem", Text, "JobSpec.page_buffers", "malloc"),
    maps("numa_cpu_nodes", Text, "Numa.cpu_nodes", "0"),
    maps("numa_mem_policy", Text, "Numa.mem_policy", "local"),
    maps("prio", Int, "Prio.thread (ioprio_set)", "4"),
    maps("prioclass", Int, "Prio.thread (ioprio_set)", "2"),
    maps("cmdprio_percentage", Text, "Prio.per_io", "20"),
    maps("cmdprio_bssplit", Text, "Prio.per_io", "64k/50:1m/0"),
    maps("cmdprio_class", Text, "Prio.per_io (the class)", "1"),
    maps("cmdprio", Text, "Prio.per_io (the level)", "0"),
    notes("log_prio", Flag, "the logs' priority column is 0", "1"),
    // accepted with a note on what differs (docs/fio.md)
    notes(
        "norandommap",
        Flag,
        "offsets are always drawn independently",
        "1",
    ),
    notes("randrepeat", Flag, "offsets differ from run to run", "0"),
    notes(
        "startdelay",
        Time,
        "jobs never idle before they start",
        "1s",
    ),
    notes(
        "group_reporting",
        Flag,
        "clones are always reported together",
        "1",
    ),
    notes(
        "scramble_buffers",
        Flag,
        "every write's data is unique",
        "0",
    ),
    notes(
        "continue_on_error",
        Text,
        "a job ends at its first error",
        "all",
    ),
    notes("ignore_error", Text, "a job ends at its first error", "EIO"),
    notes("exit_what", Text, "jobs run one after another", "all"),
    notes("exitall", Flag, "jobs run one after another", "1"),
    notes("exitall_on_error", Flag, "jobs run one after another", "1"),
    notes("flow", Int, "jobs run one after another", "2"),
    notes("flow_id", Int, "jobs run one after another", "1"),
    notes("flow_sleep", Int, "jobs run one after another", "100"),
    notes(
        "io_submit_mode",
        Text,
        "submitted from the job's thread",
        "offload",
    ),
    notes(
        "random_generator",
        Text,
        "offsets are drawn independently",
        "lfsr",
    ),
    notes("rate_iops_min", Int, "a job runs to its end", "10"),
    notes("rate_min", Size, "a job runs to its end", "1k"),
    notes("verify_backlog", Int, "read back after the pass", "16"),
    maps("verify_pattern", Text, "JobSpec.pattern", "0xaa"),
    notes(
        "fallocate",
        Text,
        "the test file is written before",
        "posix",
    ),
    notes("create_on_open", Flag, "the test file is open before", "1"),
    notes("verify_fatal", Flag, "failures are all counted", "1"),
    notes("verify_async", Int, "checked after the pass", "4"),
    maps(
        "offset_increment",
        Size,
        "JobSpec.clones (each clone's step)",
        "64k",
    ),
    maps(
        "zonemode",
        Text,
        "JobSpec.strided (strided only)",
        "strided",
    ),
    maps("zonesize", Size, "Strided.size", "64k"),
    maps("zonerange", Size, "Strided.range", "128k"),
    maps("zoneskip", Size, "Strided.skip", "64k"),
    maps(
        "verify_interval",
        Size,
        "with verify_pattern only (every byte checked)",
        "512",
    ),
    notes("fill_device", Flag, "the region is written to its end", "1"),
    notes("create_serialize", Flag, "one file, laid out before", "0"),
    notes("verify_dump", Flag, "failures are recorded in the run", "1"),
    notes(
        "verify_backlog_batch",
        Int,
        "read back after the pass",
        "16",
    ),
    // report only
    report_only("name"),
    report_only("description"),
    report_only("thread"),
    report_only("clat_percentiles"),
    report_only("lat_percentiles"),
    report_only("slat_percentiles"),
    report_only("percentile_list"),
    report_only("disable_lat"),
    report_only("disable_clat"),
    report_only("disable_slat"),
    report_only("disable_bw_measurement"),
    report_only("gtod_reduce"),
    report_only("unified_rw_reporting"),
    report_only("significant_figures"),
    report_only("stats"),
    report_only("bwavgtime"),
    report_only("iopsavgtime"),
    report_only("clocksource"),
    report_only("error_dump"),
    refused("allow_file_create", NOT_TAKEN),
    refused("allow_mounted_write", NOT_TAKEN),
    refused("allrandrepeat", NOT_TAKEN),
    refused("atomic", NOT_TAKEN),
    refused("block_error_percentiles", NOT_TAKEN),
    refused("bs_unaligned", NOT_TAKEN),
    refused("buffer_pattern", NOT_TAKEN),
    refused("cgroup", NOT_TAKEN),
    refused("cgroup_nodelete", NOT_TAKEN),
    refused("cgroup_weight", NOT_TAKEN),
    refused("cpumask", NOT_TAKEN),
    refused("cpus_allowed", NOT_TAKEN),
    refused("cpus_allowed_policy", NOT_TAKEN),
    refused("create_fsync", NOT_TAKEN),
    refused("create_only", NOT_TAKEN),
    refused("disk_util", NOT_TAKEN),
    refused("exec_postrun", NOT_TAKEN),
    refused("exec_prerun", NOT_TAKEN),
    refused("experimental_verify", NOT_TAKEN),
    refused("fadvise_hint", NOT_TAKEN),
    refused("file_append", NOT_TAKEN),
    refused("file_service_type", NOT_TAKEN),
    refused("filename_format", NOT_TAKEN),
    refused("fsync_on_close", NOT_TAKEN),
    refused("gid", NOT_TAKEN),
    refused("gtod_cpu", NOT_TAKEN),
    refused("ignore_zone_limits", ZBD),
    refused("iodepth_batch", NOT_TAKEN),
    refused("iodepth_batch_complete_max", NOT_TAKEN),
    refused("iodepth_batch_complete_min", NOT_TAKEN),
    refused("iodepth_low", NOT_TAKEN),
    refused("ioscheduler", NOT_TAKEN),
    refused("job_max_open_zones", ZBD),
    maps("latency_percentile", Text, "LatTarget.pct", "99.9"),
    maps("latency_run", Flag, "LatTarget.run", "1"),
    maps("latency_target", Time, "LatTarget.target_us", "500000"),
    maps("latency_window", Time, "LatTarget.window_us", "5000000"),
    refused("lockfile", NOT_TAKEN),
    refused("lockmem", NOT_TAKEN),
    maps("log_avg_msec", Int, "LogPlan.window (fiojob::logs)", "1000"),
    refused("log_compression", LOGS),
    refused("log_entries", LOGS),
    refused("log_hist_msec", LOGS),
    refused("log_max_value", LOGS),
    refused("log_unix_epoch", LOGS),
    refused("max_latency", NOT_TAKEN),
    refused("max_open_zones", ZBD),
    refused("nice", NOT_TAKEN),
    refused("offset_align", NOT_TAKEN),
    refused("opendir", NOT_TAKEN),
    maps(
        "openfiles",
        Int,
        "1, or any with a file engine (fiojob::filejobs)",
        "1",
    ),
    refused("overwrite", NOT_TAKEN),
    maps(
        "per_job_logs",
        Flag,
        "LogPlan: the jobs' sum (fiojob::logs)",
        "0",
    ),
    refused("pre_read", NOT_TAKEN),
    refused("profile", NOT_TAKEN),
    refused("randseed", NOT_TAKEN),
    refused("rate_cycle", NOT_TAKEN),
    refused("rate_ignore_thinktime", NOT_TAKEN),
    refused("read_beyond_wp", ZBD),
    refused("read_iolog", NOT_TAKEN),
    refused("replay_no_stall", NOT_TAKEN),
    refused("replay_redirect", NOT_TAKEN),
    refused("rw_sequencer", NOT_TAKEN),
    refused("serialize_overlap", NOT_TAKEN),
    refused("sync_file_range", NOT_TAKEN),
    refused("thinktime_blocks_type", NOT_TAKEN),
    refused("thinktime_iotime", NOT_TAKEN),
    refused("trim_backlog", NOT_TAKEN),
    refused("trim_percentage", NOT_TAKEN),
    refused("uid", NOT_TAKEN),
    refused("unique_filename", NOT_TAKEN),
    refused("unit_base", NOT_TAKEN),
    maps("unlink", Flag, "noted (fiojob::filejobs)", "0"),
    maps(
        "stat_type",
        Text,
        "filestat: stat (fiojob::filejobs)",
        "stat",
    ),
    maps(
        "donorname",
        Text,
        "e4defrag: noted, iolab's own donor (fiojob::filejobs)",
        "file.def",
    ),
    refused("unlink_each_loop", NOT_TAKEN),
    refused("verify_offset", NOT_TAKEN),
    refused("verify_only", NOT_TAKEN),
    refused("verify_state_load", NOT_TAKEN),
    refused("verify_state_save", NOT_TAKEN),
    refused("write_barrier", NOT_TAKEN),
    maps("write_bw_log", Text, "LogPlan.bw (fiojob::logs)", "bw"),
    refused("write_hint", NOT_TAKEN),
    refused("write_hist_log", LOGS),
    refused("write_iolog", NOT_TAKEN),
    maps(
        "write_iops_log",
        Text,
        "LogPlan.iops (fiojob::logs)",
        "iops",
    ),
    maps("write_lat_log", Text, "LogPlan.lat (fiojob::logs)", "lat"),
    maps("log_offset", Flag, "JobLogs.offset (fiojob::logs)", "1"),
    refused("zonecapacity", ZBD),
    refused("hipri", NOT_TAKEN),
    refused("sqthread_poll", NOT_TAKEN),
    refused("sqthread_poll_cpu", NOT_TAKEN),
    refused("nonvectored", NOT_TAKEN),
    refused("uncached", NOT_TAKEN),
    refused("nowait", NOT_TAKEN),
    refused("force_async", NOT_TAKEN),
    refused("userspace_reap", NOT_TAKEN),
    refused("cmd_type", NOT_TAKEN),
    refused("hostname", NOT_TAKEN),
    refused("port", NOT_TAKEN),
    refused("protocol", NOT_TAKEN),
    refused("listen", NOT_TAKEN),
    refused("pingpong", NOT_TAKEN),
    refused("busy_poll", NOT_TAKEN),
    refused("cpuload", NOT_TAKEN),
    refused("cpumode", NOT_TAKEN),
    refused("cpuchunks", NOT_TAKEN),
    refused("exit_on_io_done", NOT_TAKEN),
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
    "dircreate",
    "dirdelete",
    "dirstat",
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

/// The row of option `key` (canonical), if iolab knows it.
pub fn row(key: &str) -> Option<&'static Row> {
    OPTIONS.iter().find(|r| r.name == key)
}

/// What iolab does with option `key` (canonical).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Mapped, or accepted with a note: the mapping must read it.
    Mapped,
    ReportOnly,
    /// One of fio's options iolab does not support, and why.
    Unsupported(&'static str),
    /// Not an fio option iolab knows of.
    Unknown,
}

pub fn kind(key: &str) -> Kind {
    match row(key).map(|r| r.does) {
        Some(Does::Maps(_) | Does::Notes(_)) => Kind::Mapped,
        Some(Does::ReportOnly) => Kind::ReportOnly,
        Some(Does::Refused(why)) => Kind::Unsupported(why),
        None if crate::engopt::by_fio_name(key).is_some() => Kind::Mapped,
        None if crate::JobOption::named(key).is_some() => Kind::Mapped,
        None => Kind::Unknown,
    }
}

/// The known option nearest to `key` when it is a near miss (edit distance at most 2, or
/// at most a third of its length).
pub fn suggest(key: &str) -> Option<&'static str> {
    let all = OPTIONS
        .iter()
        .map(|r| r.name)
        .chain(ALIASES.iter().map(|(a, _)| *a))
        .chain(crate::engopt::catalogue().filter_map(|(_, o)| o.fio.map(|(n, _)| n)))
        .chain(crate::JOB_OPTIONS.iter().map(|o| o.name));
    let limit = (key.chars().count() / 3).clamp(1, 2);
    all.map(|c| (distance(key, c), c))
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
        assert_eq!(kind("verify_pattern"), Kind::Mapped);
        assert_eq!(kind("bs"), Kind::Mapped);
    }
}
