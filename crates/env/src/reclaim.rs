//! What can take pages out of the page cache besides ordinary memory pressure: DAMON schemes
//! that page out memory they find idle, and the memory limit of iolab's cgroup (page cache
//! is charged to it).
//!
//! Both decide whether a buffered read finds its data in memory, so both are recorded: a
//! cached result measured on a machine whose kernel pages out everything idle for 30 s is a
//! different fact from one measured where the cache is only shrunk under pressure.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cgroup::own_cgroup;
use crate::error::EnvError;
use crate::mounts::MountEntry;
use crate::render::size;
use crate::util::read_trim;

/// The sysfs directory of DAMON's admin interface.
pub const DAMON_ADMIN: &str = "/sys/kernel/mm/damon/admin";
/// The parameters of the DAMON_RECLAIM module.
pub const DAMON_RECLAIM_PARAMS: &str = "/sys/module/damon_reclaim/parameters";

/// One active mechanism that pages out memory it judges idle, page cache included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Reclaimer {
    /// Where it was found: "DAMON kdamond 0, context 0, scheme 0" or "damon_reclaim module".
    pub source: String,
    /// The DAMOS action: "pageout" (reclaims at once) or "lru_deprio" (first to go under
    /// pressure).
    pub action: String,
    /// The DAMON operations set: "paddr" (all physical memory) or "vaddr"/"fvaddr" (some
    /// processes' address spaces only).
    pub operations: Option<String>,
    /// How long a region must have gone unaccessed before the action applies, in
    /// microseconds (minimum age x aggregation interval).
    pub min_idle_us: Option<u64>,
    /// Most bytes the action may apply to per `quota_interval_ms` (`None`: no size quota).
    pub quota_bytes: Option<u64>,
    pub quota_interval_ms: Option<u64>,
}

impl Reclaimer {
    /// One line for people: "pageout of memory idle >= 30 s (DAMON kdamond 0, ..., paddr,
    /// at most 2.0 GiB per 1000 ms)".
    pub fn describe(&self) -> String {
        let idle = match self.min_idle_us {
            Some(us) if us > 0 => format!(" of memory idle for {}", seconds(us)),
            _ => String::new(),
        };
        let mut how = vec![self.source.clone()];
        if let Some(o) = &self.operations {
            how.push(o.clone());
        }
        if let (Some(b), Some(ms)) = (self.quota_bytes, self.quota_interval_ms) {
            how.push(format!("at most {} per {ms} ms", size(Some(b))));
        }
        format!("{}{idle} ({})", self.action, how.join(", "))
    }

    /// True when it drops clean page-cache pages without memory pressure.
    pub fn evicts_idle_cache(&self) -> bool {
        self.action == "pageout" && self.operations.as_deref() != Some("vaddr")
    }
}

/// "30 s", "1.5 s", "200 ms".
fn seconds(us: u64) -> String {
    if us >= 1_000_000 {
        let s = us as f64 / 1e6;
        if s.fract() == 0.0 {
            format!("{s:.0} s")
        } else {
            format!("{s:.1} s")
        }
    } else {
        format!("{} ms", us / 1000)
    }
}

/// The running DAMON schemes whose action removes or demotes memory ("pageout",
/// "lru_deprio"), read from DAMON's sysfs admin directory `admin`, plus DAMON_RECLAIM when
/// its module parameters at `reclaim_params` say it is enabled. `Ok(vec![])` when neither
/// exists or nothing is running; `Err` when the admin directory exists but cannot be read.
pub fn damon_reclaimers(admin: &Path, reclaim_params: &Path) -> Result<Vec<Reclaimer>, EnvError> {
    let mut out = Vec::new();
    let kdamonds = admin.join("kdamonds");
    if kdamonds.exists() {
        for k in numbered(&kdamonds)? {
            if read_trim(kdamonds.join(&k).join("state")).as_deref() != Some("on") {
                continue;
            }
            let contexts = kdamonds.join(&k).join("contexts");
            for c in numbered(&contexts)? {
                let ctx = contexts.join(&c);
                let operations = read_trim(ctx.join("operations"));
                let aggr_us = read_trim(ctx.join("monitoring_attrs/intervals/aggr_us"))
                    .and_then(|s| s.parse::<u64>().ok());
                let schemes = ctx.join("schemes");
                for s in numbered(&schemes)? {
                    let sch = schemes.join(&s);
                    let Some(action) = read_trim(sch.join("action")) else {
                        continue;
                    };
                    if !matches!(action.as_str(), "pageout" | "lru_deprio") {
                        continue;
                    }
                    let min_age = read_trim(sch.join("access_pattern/age/min"))
                        .and_then(|s| s.parse::<u64>().ok());
                    let quota_bytes = read_trim(sch.join("quotas/bytes"))
                        .and_then(|s| s.parse::<u64>().ok())
                        .filter(|&b| b > 0);
                    out.push(Reclaimer {
                        source: format!("DAMON kdamond {k}, context {c}, scheme {s}"),
                        action,
                        operations: operations.clone(),
                        min_idle_us: min_age.zip(aggr_us).map(|(a, i)| a.saturating_mul(i)),
                        quota_bytes,
                        quota_interval_ms: quota_bytes.and_then(|_| {
                            read_trim(sch.join("quotas/reset_interval_ms"))
                                .and_then(|s| s.parse().ok())
                        }),
                    });
                }
            }
        }
    }
    if read_trim(reclaim_params.join("enabled")).as_deref() == Some("Y") {
        let param = |n: &str| read_trim(reclaim_params.join(n)).and_then(|s| s.parse().ok());
        let quota_bytes = param("quota_sz").filter(|&b: &u64| b > 0);
        out.push(Reclaimer {
            source: "damon_reclaim module".into(),
            action: "pageout".into(),
            operations: Some("paddr".into()),
            min_idle_us: param("min_age"),
            quota_bytes,
            quota_interval_ms: quota_bytes.and_then(|_| param("quota_reset_interval_ms")),
        });
    }
    Ok(out)
}

/// The entries of `dir` named by numbers ("0", "1", ...), in numeric order; none when the
/// directory does not exist.
fn numbered(dir: &Path) -> Result<Vec<String>, EnvError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(EnvError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut n: Vec<u64> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    n.sort_unstable();
    Ok(n.into_iter().map(|i| i.to_string()).collect())
}

/// The tightest memory limit over iolab's memory cgroup and its ancestors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemoryLimit {
    /// iolab's memory cgroup, as `/proc/self/cgroup` names it.
    pub cgroup: String,
    /// The cgroup (iolab's or an ancestor) whose limit is the lowest.
    pub limited_by: Option<String>,
    /// That limit in bytes; `None` when no cgroup on the path sets one.
    pub limit_bytes: Option<u64>,
    /// Memory charged to `limited_by` (page cache included) at capture time.
    pub usage_bytes: Option<u64>,
}

impl MemoryLimit {
    /// Room left under the limit, if there is one.
    pub fn headroom(&self) -> Option<u64> {
        Some(
            self.limit_bytes?
                .saturating_sub(self.usage_bytes.unwrap_or(0)),
        )
    }
}

/// cgroup v1 writes this (or a page-rounded value near it) for "no limit".
const V1_UNLIMITED: u64 = 1 << 62;

/// The memory limit along `path` below the hierarchy mounted at `root`: v1 files
/// (`memory.limit_in_bytes`, `memory.usage_in_bytes`) when `v1`, else v2 (`memory.max`,
/// `memory.current`).
pub fn memory_limit_along(root: &Path, path: &str, v1: bool) -> MemoryLimit {
    let (limit_file, usage_file) = if v1 {
        ("memory.limit_in_bytes", "memory.usage_in_bytes")
    } else {
        ("memory.max", "memory.current")
    };
    let mut dir = PathBuf::from(root);
    let mut dirs = vec![(dir.clone(), "/".to_string())];
    let mut rel = String::new();
    for part in path
        .split('/')
        .filter(|p| !p.is_empty() && *p != "." && *p != "..")
    {
        dir.push(part);
        rel.push('/');
        rel.push_str(part);
        dirs.push((dir.clone(), rel.clone()));
    }
    let mut best: Option<(u64, &PathBuf, &String)> = None;
    for (d, name) in &dirs {
        let limit = read_trim(d.join(limit_file)).and_then(|s| match s.as_str() {
            "max" => None,
            s => s.parse::<u64>().ok().filter(|&b| b < V1_UNLIMITED),
        });
        if let Some(l) = limit {
            if best.is_none_or(|(b, _, _)| l < b) {
                best = Some((l, d, name));
            }
        }
    }
    MemoryLimit {
        cgroup: path.to_string(),
        limited_by: best.map(|(_, _, n)| n.clone()),
        limit_bytes: best.map(|(l, _, _)| l),
        usage_bytes: best
            .and_then(|(_, d, _)| read_trim(d.join(usage_file)).and_then(|s| s.parse().ok())),
    }
}

/// iolab's memory limit from `/proc/self/cgroup` and the mounted hierarchies.
pub(crate) fn capture_memory_limit(mounts: &[MountEntry]) -> Result<MemoryLimit, EnvError> {
    let own = own_cgroup(mounts, "memory")?;
    let mut lim = memory_limit_along(&own.mount_point, &own.rel, own.v1);
    lim.cgroup = own.path;
    Ok(lim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    #[test]
    fn a_running_pageout_scheme_is_found_with_its_idle_age() {
        let t = tempfile::tempdir().unwrap();
        let admin = t.path().join("admin");
        let k = "admin/kdamonds/0";
        put(t.path(), &format!("{k}/state"), "on");
        put(t.path(), &format!("{k}/contexts/0/operations"), "paddr");
        put(
            t.path(),
            &format!("{k}/contexts/0/monitoring_attrs/intervals/aggr_us"),
            "5000000",
        );
        let s = format!("{k}/contexts/0/schemes");
        put(t.path(), &format!("{s}/0/action"), "pageout");
        put(t.path(), &format!("{s}/0/access_pattern/age/min"), "6");
        put(t.path(), &format!("{s}/0/quotas/bytes"), "2147483648");
        put(t.path(), &format!("{s}/0/quotas/reset_interval_ms"), "1000");
        put(t.path(), &format!("{s}/1/action"), "stat");
        // A second kdamond that is off does not count.
        put(t.path(), "admin/kdamonds/1/state", "off");
        put(
            t.path(),
            "admin/kdamonds/1/contexts/0/schemes/0/action",
            "pageout",
        );
        let none = t.path().join("no-module");
        let r = damon_reclaimers(&admin, &none).unwrap();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].action, "pageout");
        assert_eq!(r[0].min_idle_us, Some(30_000_000));
        assert_eq!(r[0].quota_bytes, Some(2 << 30));
        assert!(r[0].evicts_idle_cache());
        assert_eq!(
            r[0].describe(),
            "pageout of memory idle for 30 s (DAMON kdamond 0, context 0, scheme 0, paddr, \
             at most 2.0 GiB per 1000 ms)"
        );

        // Turned off: nothing.
        put(t.path(), &format!("{k}/state"), "off");
        assert!(damon_reclaimers(&admin, &none).unwrap().is_empty());
        // No DAMON at all: nothing, and no error.
        assert!(damon_reclaimers(&none, &none).unwrap().is_empty());
    }

    /// An admin directory that cannot be read is an error that says which and keeps the
    /// I/O error it came from (`EnvError::Read`), displayed as the note a run records.
    #[test]
    fn an_unreadable_admin_directory_is_an_error_with_its_source() {
        let t = tempfile::tempdir().unwrap();
        let admin = t.path().join("admin");
        // `kdamonds` exists but is a file: reading it as a directory fails (ENOTDIR).
        put(&admin, "kdamonds", "0");
        let e = damon_reclaimers(&admin, &t.path().join("none")).unwrap_err();
        let kdamonds = admin.join("kdamonds");
        let EnvError::Read { path, source } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(path, &kdamonds);
        assert_eq!(source.raw_os_error(), Some(libc_enotdir()));
        let inner = std::error::Error::source(&e).expect("the I/O error is kept");
        assert_eq!(
            e.to_string(),
            format!("{}: {inner}", kdamonds.display()),
            "the note's text is the path and the I/O error"
        );
    }

    /// ENOTDIR without a libc dependency for one constant.
    fn libc_enotdir() -> i32 {
        rustix::io::Errno::NOTDIR.raw_os_error()
    }

    #[test]
    fn the_damon_reclaim_module_counts_when_enabled() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("params");
        put(&p, "enabled", "N");
        put(&p, "min_age", "120000000");
        let admin = t.path().join("admin");
        assert!(damon_reclaimers(&admin, &p).unwrap().is_empty());
        put(&p, "enabled", "Y");
        let r = damon_reclaimers(&admin, &p).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].min_idle_us, Some(120_000_000));
        assert_eq!(r[0].quota_bytes, None);
        assert_eq!(
            r[0].describe(),
            "pageout of memory idle for 120 s (damon_reclaim module, paddr)"
        );
    }

    #[test]
    fn the_lowest_limit_on_the_path_wins() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        // v1: the root's "unlimited", a parent at 4 GiB, the leaf at 8 GiB.
        put(r, "memory.limit_in_bytes", "9223372036854771712");
        put(r, "a/memory.limit_in_bytes", "4294967296");
        put(r, "a/memory.usage_in_bytes", "1073741824");
        put(r, "a/b/memory.limit_in_bytes", "8589934592");
        let l = memory_limit_along(r, "/a/b", true);
        assert_eq!(l.limit_bytes, Some(4 << 30));
        assert_eq!(l.limited_by.as_deref(), Some("/a"));
        assert_eq!(l.headroom(), Some(3 << 30));
        // v2: "max" everywhere is no limit.
        put(r, "x/memory.max", "max");
        put(r, "x/memory.current", "123");
        let l = memory_limit_along(r, "/x", false);
        assert_eq!((l.limit_bytes, l.headroom()), (None, None));
        assert_eq!(l.limited_by, None);
        put(r, "x/y/memory.max", "1048576");
        put(r, "x/y/memory.current", "4096");
        let l = memory_limit_along(r, "/x/y", false);
        assert_eq!(l.limit_bytes, Some(1 << 20));
        assert_eq!(l.usage_bytes, Some(4096));
    }
}
