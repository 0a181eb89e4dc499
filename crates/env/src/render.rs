//! The text of `iolab env`: every fact on a line no wider than 100 columns, "unknown" where a
//! fact could not be read.

use crate::{BlockDevice, Environment, Relation, RelationKind, TargetEnv, Throttle};

/// Widest line [`render`] produces.
pub const WIDTH: usize = 100;
const UNKNOWN: &str = "unknown";

/// Readable text for `iolab env`.
pub fn render(env: &Environment) -> String {
    let mut r = Out::default();
    match &env.captured_at {
        Some(at) => r.line(0, &format!("Environment captured {at}")),
        None => r.line(0, "Environment (capture time unknown)"),
    }
    r.line(0, "Host");
    r.field("hostname", opt(&env.hostname));
    r.field("machine id", opt(&env.machine_id));
    let kernel = match (&env.kernel_release, &env.kernel_version) {
        (Some(rel), Some(ver)) => format!("{rel} {ver}"),
        (Some(rel), None) => rel.clone(),
        (None, Some(ver)) => format!("{UNKNOWN} release, {ver}"),
        (None, None) => UNKNOWN.into(),
    };
    let kernel = match &env.arch {
        Some(a) => format!("{kernel} ({a})"),
        None => kernel,
    };
    r.field("kernel", kernel);
    r.field("cpu", opt(&env.cpu_model));
    r.field(
        "cores",
        format!(
            "{} online logical, {} usable by iolab",
            opt(&env.cpu_cores),
            opt(&env.cpus_usable)
        ),
    );
    r.field(
        "memory",
        format!(
            "{} total, {} available",
            size(env.memory_total_bytes),
            size(env.memory_available_bytes)
        ),
    );
    match &env.memory_limit {
        Some(l) => r.field(
            "memory cgroup",
            match (&l.limit_bytes, &l.limited_by) {
                (Some(b), Some(by)) => format!(
                    "{}: limit {} (set on {by}), {} charged",
                    l.cgroup,
                    size(Some(*b)),
                    size(l.usage_bytes)
                ),
                _ => format!("{}: no limit", l.cgroup),
            },
        ),
        None => r.field("memory cgroup", UNKNOWN.to_string()),
    }
    match &env.page_cache_reclaim {
        Some(v) if v.is_empty() => r.field(
            "idle reclaim",
            "none (the page cache shrinks only under memory pressure)".into(),
        ),
        Some(v) => {
            for rc in v {
                r.field("idle reclaim", rc.describe());
            }
        }
        None => r.field("idle reclaim", UNKNOWN.to_string()),
    }
    if let Some(t) = &env.target {
        target(&mut r, t);
    }
    throttles(&mut r, env);
    if !env.notes.is_empty() {
        r.line(0, "Notes");
        for n in &env.notes {
            r.line(2, &format!("- {n}"));
        }
    }
    r.text
}

fn target(r: &mut Out, t: &TargetEnv) {
    let kind = t.kind.as_deref().unwrap_or("does not exist");
    r.line(0, &format!("Target {} ({kind})", t.path));
    if t.resolved_path.as_deref() != Some(t.path.as_str()) {
        r.field("examined", opt(&t.resolved_path));
    }
    if t.kind.as_deref() != Some("device") {
        r.field(
            "filesystem",
            format!(
                "{}, mounted at {} from {} ({})",
                opt(&t.fs_type),
                opt(&t.mount_point),
                opt(&t.mount_source),
                opt(&t.mount_dev)
            ),
        );
        r.field("mount options", opt(&t.mount_options));
        r.field("super options", opt(&t.super_options));
        if !t.fs_extra.is_empty() {
            let extra: Vec<String> = t.fs_extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
            r.field("fs specifics", extra.join(", "));
        }
    }
    if matches!(t.kind.as_deref(), Some("file") | Some("device")) {
        r.field(
            "direct I/O",
            format!(
                "offset alignment {}, memory alignment {}",
                opt(&t.dio_offset_align),
                opt(&t.dio_mem_align)
            ),
        );
    }
    let complete = if t.chain_complete { "" } else { ", incomplete" };
    r.line(
        0,
        &format!("Devices under the target (top first{complete})"),
    );
    if t.devices.is_empty() {
        r.line(2, "none");
    }
    for (i, d) in t.devices.iter().enumerate() {
        device(r, i + 1, d);
    }
    for n in &t.notes {
        r.line(2, &format!("note: {n}"));
    }
}

fn device(r: &mut Out, number: usize, d: &BlockDevice) {
    let mut head = format!("{number}. {} ({})", d.name, opt(&d.dev));
    head.push_str(&format!(
        ", {}",
        d.kind.as_deref().unwrap_or("kind unknown")
    ));
    if let Some(bus) = &d.bus {
        head.push_str(&format!(" on {bus}"));
    }
    head.push_str(&format!(", {}", size(d.size_bytes)));
    if let Some(rel) = &d.relation {
        head.push_str(&format!(": {}", relation(rel)));
    }
    r.line(2, &head);
    if d.kind.as_deref() == Some("partition") {
        r.line(
            5,
            &format!("starts at byte {}", opt(&d.partition_start_bytes)),
        );
        return;
    }
    if d.kind.as_deref() != Some("loop") {
        r.line(
            5,
            &format!(
                "model {}, vendor {}, serial {}, firmware {}",
                opt(&d.model),
                opt(&d.vendor),
                opt(&d.serial),
                opt(&d.firmware_rev)
            ),
        );
    }
    if let Some(name) = &d.dm_name {
        r.line(5, &format!("device-mapper name {name}"));
    }
    r.line(
        5,
        &format!(
            "rotational {}, block size {} logical / {} physical",
            yes_no(d.rotational),
            opt(&d.logical_block_size),
            opt(&d.physical_block_size)
        ),
    );
    r.line(
        5,
        &format!(
            "scheduler {}, nr_requests {}, read-ahead {} KiB, write cache {}",
            opt(&d.scheduler),
            opt(&d.nr_requests),
            opt(&d.read_ahead_kb),
            opt(&d.write_cache)
        ),
    );
    if d.kind.as_deref() == Some("loop") {
        let dio = match d.loop_dio {
            Some(true) => "on",
            Some(false) => "off",
            None => UNKNOWN,
        };
        r.line(
            5,
            &format!(
                "backing file {} (direct I/O {dio}, offset {}, size limit {})",
                opt(&d.loop_backing_file),
                opt(&d.loop_offset),
                opt(&d.loop_sizelimit)
            ),
        );
        if let Some(e) = &d.emulated_disk {
            let summary = e["summary"].as_str().unwrap_or("(no summary)");
            r.line(5, &format!("on an {summary}"));
        }
    }
    if matches!(d.bus.as_deref(), Some("ata") | Some("scsi")) {
        r.line(
            5,
            &format!("link power management policy {}", opt(&d.link_power_policy)),
        );
    }
    if d.bus.as_deref() == Some("nvme") {
        let power = match &d.nvme_power {
            Some(p) if !p.is_empty() => p
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
            _ => UNKNOWN.into(),
        };
        r.line(5, &format!("NVMe power: {power}"));
    }
}

fn relation(rel: &Relation) -> String {
    let detail = rel.detail.as_deref();
    match (rel.kind, detail) {
        (RelationKind::Target, _) => "the target itself".into(),
        (RelationKind::Mounted, _) => format!("the filesystem at {} is mounted from it", rel.of),
        (RelationKind::BtrfsMember, Some(d)) => format!("member of the btrfs at {} ({d})", rel.of),
        (RelationKind::BtrfsMember, None) => format!("member of the btrfs at {}", rel.of),
        (RelationKind::ZfsMember, Some(d)) => format!("vdev of zfs pool {} ({d})", rel.of),
        (RelationKind::ZfsMember, None) => format!("vdev of zfs pool {}", rel.of),
        (RelationKind::ParentDisk, _) => format!("the disk holding partition {}", rel.of),
        (RelationKind::BackingFileOn, Some(d)) => {
            format!("holds {d}, the backing file of {}", rel.of)
        }
        (RelationKind::BackingFileOn, None) => format!("holds the backing file of {}", rel.of),
        (RelationKind::Underlying, _) => format!("a component of {}", rel.of),
    }
}

fn throttles(r: &mut Out, env: &Environment) {
    r.line(0, "Block-I/O throttles (iolab's cgroup and its ancestors)");
    let Some(all) = &env.blkio_throttles else {
        r.line(2, UNKNOWN);
        return;
    };
    if all.is_empty() {
        r.line(2, "none set");
    }
    let on_target = env.target_throttles();
    for t in all {
        let mark = if on_target.iter().any(|o| std::ptr::eq(*o, t)) {
            " (on the target's chain)"
        } else {
            ""
        };
        r.line(2, &format!("{}{mark}", throttle(t)));
    }
}

fn throttle(t: &Throttle) -> String {
    let unit = match t.kind {
        crate::ThrottleKind::ReadBps | crate::ThrottleKind::WriteBps => "bytes/s",
        _ => "IOPS",
    };
    let dev = match &t.device_name {
        Some(n) => format!("{} ({n})", t.device),
        None => t.device.clone(),
    };
    format!(
        "{} {} {unit} on {dev} in {}",
        t.kind.as_str(),
        t.limit,
        t.cgroup
    )
}

fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| UNKNOWN.to_string(), |v| v.to_string())
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => UNKNOWN,
    }
}

pub(crate) fn size(bytes: Option<u64>) -> String {
    let Some(b) = bytes else {
        return format!("size {UNKNOWN}");
    };
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64;
    let mut unit = "B";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// Lines of text, each wrapped to [`WIDTH`].
#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    /// A "label   value" line under a section heading.
    fn field(&mut self, label: &str, value: String) {
        self.line(2, &format!("{label:<14}{value}"));
    }

    /// `text` indented by `indent`, wrapped at spaces (or commas, or anywhere, for long
    /// words); continuation lines are indented four more.
    fn line(&mut self, indent: usize, text: &str) {
        let mut pieces: Vec<String> = Vec::new();
        for word in text.split(' ') {
            pieces.extend(split_long(word, WIDTH - indent - 4));
        }
        let mut current = " ".repeat(indent);
        let mut has_word = false;
        for piece in pieces {
            let sep = usize::from(has_word);
            if has_word && current.chars().count() + sep + piece.chars().count() > WIDTH {
                self.text.push_str(current.trim_end());
                self.text.push('\n');
                current = " ".repeat(indent + 4);
                has_word = false;
            }
            if has_word {
                current.push(' ');
            }
            current.push_str(&piece);
            has_word = true;
        }
        self.text.push_str(current.trim_end());
        self.text.push('\n');
    }
}

/// Splits a word longer than `max` characters after commas, else into `max`-character runs.
fn split_long(word: &str, max: usize) -> Vec<String> {
    if word.chars().count() <= max {
        return vec![word.to_string()];
    }
    let mut out = Vec::new();
    let mut current = String::new();
    for part in word.split_inclusive(',') {
        if !current.is_empty() && current.chars().count() + part.chars().count() > max {
            out.push(std::mem::take(&mut current));
        }
        current.push_str(part);
    }
    out.push(current);
    out.into_iter()
        .flat_map(|p| {
            let chars: Vec<char> = p.chars().collect();
            chars
                .chunks(max.max(1))
                .map(|c| c.iter().collect::<String>())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_long_values() {
        let mut env = Environment {
            hostname: Some("h".repeat(150)),
            ..Environment::default()
        };
        env.notes
            .push(format!("{} {}", "x,".repeat(80), "word ".repeat(40)));
        env.target = Some(TargetEnv {
            path: format!("/{}", "deep/".repeat(40)),
            mount_options: Some("rw,".repeat(60)),
            devices: vec![BlockDevice {
                name: "loop0".into(),
                kind: Some("loop".into()),
                loop_backing_file: Some(format!("/{}", "a".repeat(230))),
                ..BlockDevice::default()
            }],
            ..TargetEnv::default()
        });
        let text = render(&env);
        for l in text.lines() {
            assert!(l.chars().count() <= WIDTH, "too wide: {l}");
        }
        assert!(text.contains("kernel        unknown"));
        assert!(text.contains("Block-I/O throttles"));
        let joined: String = text.split_whitespace().collect();
        assert!(
            joined.contains(&"a".repeat(230)),
            "nothing lost in wrapping"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(size(Some(512)), "512 B");
        assert_eq!(size(Some(274877906944)), "256.0 GiB");
        assert_eq!(size(None), "size unknown");
    }
}
