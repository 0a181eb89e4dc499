//! What a run takes from the captured environment: the devices whose traffic is watched
//! during passes and the facts the warnings are computed from.

use iolab_engine::Target;
use iolab_env::{Environment, RelationKind};
use iolab_spec::format_bytes;
use iolab_stats::warnings::{TargetFacts, ThrottleFact};

/// The block devices at the top of the target's chain: the device the filesystem is
/// mounted from (every member for btrfs/zfs), or the device itself.
pub fn top_devices(env: &Environment) -> Vec<String> {
    let Some(t) = &env.target else {
        return Vec::new();
    };
    let top: Vec<String> = t
        .devices
        .iter()
        .filter(|d| {
            matches!(
                d.relation.as_ref().map(|r| r.kind),
                None | Some(RelationKind::Target)
                    | Some(RelationKind::Mounted)
                    | Some(RelationKind::BtrfsMember)
                    | Some(RelationKind::ZfsMember)
            )
        })
        .map(|d| d.name.clone())
        .collect();
    if top.is_empty() {
        t.devices
            .first()
            .map(|d| vec![d.name.clone()])
            .unwrap_or_default()
    } else {
        top
    }
}

/// Facts for the warnings, from the environment and probes of the prepared target.
pub fn facts(env: &Environment, target: Option<&Target>, direct: bool) -> TargetFacts {
    let headroom = env.memory_limit.as_ref().and_then(|l| l.headroom());
    let mut f = TargetFacts {
        mem_available: match (env.memory_available_bytes, headroom) {
            (Some(a), Some(h)) => Some(a.min(h)),
            (a, h) => a.or(h),
        },
        idle_reclaim: env
            .page_cache_reclaim
            .iter()
            .flatten()
            .filter(|r| r.evicts_idle_cache())
            .map(|r| r.describe())
            .collect(),
        idle_reclaim_after: env
            .page_cache_reclaim
            .iter()
            .flatten()
            .filter(|r| r.evicts_idle_cache())
            .filter_map(|r| r.min_idle_us)
            .min()
            .map(std::time::Duration::from_micros),
        ..TargetFacts::default()
    };
    if let Some(t) = &env.target {
        f.mount_options = match (&t.mount_options, &t.super_options) {
            (Some(a), Some(b)) => Some(format!("{a},{b}")),
            (Some(a), None) => Some(a.clone()),
            (None, b) => b.clone(),
        };
        let compression = t
            .fs_extra
            .get("compress")
            .or_else(|| t.fs_extra.get("compression"))
            .filter(|v| !matches!(v.as_str(), "off" | "no" | "none" | "(not set)"));
        f.compression = compression.cloned();
        f.zfs_sync_disabled = t.fs_extra.get("sync").map(String::as_str) == Some("disabled");
        for d in &t.devices {
            if d.write_cache.as_deref() == Some("write through")
                && d.kind.as_deref() == Some("loop")
            {
                // A loop device's medium is the host's page cache: volatile.
                f.write_through.push(d.name.clone());
            }
            if d.loop_dio == Some(false) && d.kind.as_deref() == Some("loop") {
                f.loop_without_dio.push(d.name.clone());
            }
        }
        let top = top_devices(env);
        f.rotational = t
            .devices
            .iter()
            .filter(|d| top.contains(&d.name))
            .find_map(|d| d.rotational);
        f.top_device = top.first().cloned();
        if let Some(throttles) = &env.blkio_throttles {
            let chain: Vec<&str> = t.devices.iter().filter_map(|d| d.dev.as_deref()).collect();
            for th in throttles {
                if chain.contains(&th.device.as_str()) {
                    let value = match th.kind {
                        iolab_env::ThrottleKind::ReadBps | iolab_env::ThrottleKind::WriteBps => {
                            format!("{}/s", format_bytes(th.limit))
                        }
                        _ => format!("{} IOPS", th.limit),
                    };
                    f.throttles.push(ThrottleFact {
                        text: format!(
                            "{} {} = {value} on {} (cgroup {})",
                            th.device_name.as_deref().unwrap_or(&th.device),
                            th.kind.as_str(),
                            th.device,
                            th.cgroup
                        ),
                        cgroup: th.cgroup.clone(),
                        kind: th.kind.as_str().to_string(),
                        limit: th.limit,
                        device: th.device_name.clone().unwrap_or_else(|| th.device.clone()),
                    });
                }
            }
        }
    }
    let Some(target) = target else {
        return f;
    };
    if direct {
        f.direct_honoured = target.direct_io_honoured();
        // btrfs falls back to buffered I/O for direct I/O not aligned to its sector size.
        if env.target.as_ref().and_then(|t| t.fs_type.as_deref()) == Some("btrfs") {
            let dir = if target.info.kind == iolab_measure::TargetKind::Dir {
                std::path::PathBuf::from(&target.info.path)
            } else {
                std::path::Path::new(&target.io_path)
                    .parent()
                    .map(|p| p.to_path_buf())
                    .unwrap_or_default()
            };
            f.direct_io_sector = iolab_sys::statvfs(&dir).ok().map(|s| s.block_size);
        }
    }
    if target.info.kind == iolab_measure::TargetKind::File && !target.created() {
        use std::os::unix::fs::MetadataExt;
        f.allocated_bytes = std::fs::metadata(&target.io_path)
            .ok()
            .map(|m| m.blocks() * 512);
    }
    f
}
