//! The built-in presets: CrystalDiskMark's profiles, ATTO's block-size sweep, and `custom`.

use std::time::Duration;

use crate::job::{JobSpec, Rw, TestSpec};
use crate::units::{format_size_short, SpecError};

/// Defaults a preset brings; every one can be overridden on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PresetDefaults {
    pub size: u64,
    pub duration: Duration,
    pub runs: u32,
    pub warmup_passes: u32,
    /// A pass also ends once it has moved this many bytes per test region (ATTO: once).
    pub cover_region_once: bool,
    /// Adaptive passes unless `--runs` is given: `runs` is then the minimum, and a test
    /// stops once stable (see the runner's block pass loop).
    pub adaptive: bool,
}

/// A preset as `iolab presets` lists it.
#[derive(Debug, Clone, Copy)]
pub struct PresetInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub defaults: PresetDefaults,
    /// Its test is shaped by the options given (`custom`): it has no fixed tests to list.
    pub shaped_by_options: bool,
}

const CDM_DEFAULTS: PresetDefaults = PresetDefaults {
    size: 1 << 30,
    duration: Duration::from_secs(1),
    runs: 3,
    warmup_passes: 1,
    cover_region_once: false,
    adaptive: true,
};

/// Every preset iolab knows, in the order `iolab presets` prints them.
pub const PRESETS: &[PresetInfo] = &[
    PresetInfo {
        name: "cdm",
        shaped_by_options: false,
        summary: "CrystalDiskMark default: SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1; \
                  read then write each; 1 GiB, 1 warm-up + passes of 1 s until the 95% CI is \
                  within ±3% (at least 3, within a budget)",
        defaults: CDM_DEFAULTS,
    },
    PresetInfo {
        name: "cdm-nvme",
        shaped_by_options: false,
        summary: "CrystalDiskMark NVMe SSD profile: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, \
                  RND4K Q1T1",
        defaults: CDM_DEFAULTS,
    },
    PresetInfo {
        name: "cdm-peak",
        shaped_by_options: false,
        summary: "CrystalDiskMark Peak Performance profile: SEQ1M Q8T1, RND4K Q32T16",
        defaults: CDM_DEFAULTS,
    },
    PresetInfo {
        name: "cdm-real",
        shaped_by_options: false,
        summary: "CrystalDiskMark Real World Performance profile: SEQ1M Q1T1, RND4K Q1T1",
        defaults: CDM_DEFAULTS,
    },
    PresetInfo {
        name: "atto",
        shaped_by_options: false,
        summary: "ATTO Disk Benchmark sweep: 512 B to 64 MiB in powers of two, QD4, \
                  sequential write then read over a 256 MiB region at each size",
        defaults: PresetDefaults {
            size: 256 << 20,
            duration: Duration::from_secs(5),
            runs: 1,
            warmup_passes: 0,
            cover_region_once: true,
            adaptive: false,
        },
    },
    PresetInfo {
        name: "iometer",
        shaped_by_options: false,
        summary: "Iometer access specification (--pattern file-server|database|workstation, or \
                  --spec FILE.toml): weighted transfer sizes, read % and random % per I/O; \
                  --numjobs workers x --iodepth outstanding I/Os, or --qd-ladder 1..64",
        defaults: PresetDefaults {
            size: 1 << 30,
            duration: Duration::from_secs(5),
            runs: 3,
            warmup_passes: 0,
            cover_region_once: false,
            adaptive: false,
        },
    },
    PresetInfo {
        name: "custom",
        shaped_by_options: true,
        summary: "one fio-style job from --rw --bs --iodepth --numjobs --rwmixread",
        defaults: PresetDefaults {
            size: 1 << 30,
            duration: Duration::from_secs(5),
            runs: 3,
            warmup_passes: 0,
            cover_region_once: false,
            adaptive: false,
        },
    },
];

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

pub fn preset_info(name: &str) -> Option<&'static PresetInfo> {
    PRESETS.iter().find(|p| p.name == name)
}

fn cdm_pair(tests: &mut Vec<TestSpec>, random: bool, bs: u64, qd: u32, threads: u32, mix: bool) {
    let (r, w, m) = if random {
        (Rw::RandRead, Rw::RandWrite, Rw::RandRw)
    } else {
        (Rw::Read, Rw::Write, Rw::Rw)
    };
    let group = JobSpec::new(r, bs, qd, threads).cdm_name();
    tests.push(TestSpec {
        name: format!("{group} Read"),
        group: group.clone(),
        job: JobSpec::new(r, bs, qd, threads),
    });
    tests.push(TestSpec {
        name: format!("{group} Write"),
        group: group.clone(),
        job: JobSpec::new(w, bs, qd, threads),
    });
    if mix {
        let mut job = JobSpec::new(m, bs, qd, threads);
        job.rwmixread = 70;
        tests.push(TestSpec {
            name: format!("{group} Mix"),
            group,
            job,
        });
    }
}

/// Expands a preset into its tests. `custom` is the caller's job, named after its shape.
/// `mix` adds CrystalDiskMark's 70/30 read/write mix test to each cdm row. `region` is the
/// test region size (ATTO covers it once per pass).
pub fn expand_preset(
    name: &str,
    custom: Option<&JobSpec>,
    mix: bool,
    region: u64,
) -> Result<Vec<TestSpec>, SpecError> {
    const K: u64 = 1024;
    const M: u64 = 1024 * 1024;
    let mut tests = Vec::new();
    match name {
        "cdm" => {
            cdm_pair(&mut tests, false, M, 8, 1, mix);
            cdm_pair(&mut tests, false, M, 1, 1, mix);
            cdm_pair(&mut tests, true, 4 * K, 32, 1, mix);
            cdm_pair(&mut tests, true, 4 * K, 1, 1, mix);
        }
        "cdm-nvme" => {
            cdm_pair(&mut tests, false, M, 8, 1, mix);
            cdm_pair(&mut tests, false, 128 * K, 32, 1, mix);
            cdm_pair(&mut tests, true, 4 * K, 32, 16, mix);
            cdm_pair(&mut tests, true, 4 * K, 1, 1, mix);
        }
        "cdm-peak" => {
            cdm_pair(&mut tests, false, M, 8, 1, mix);
            cdm_pair(&mut tests, true, 4 * K, 32, 16, mix);
        }
        "cdm-real" => {
            cdm_pair(&mut tests, false, M, 1, 1, mix);
            cdm_pair(&mut tests, true, 4 * K, 1, 1, mix);
        }
        "atto" => {
            let mut bs = 512u64;
            while bs <= 64 * M {
                let group = format_size_short(bs);
                for (rw, dir) in [(Rw::Write, "Write"), (Rw::Read, "Read")] {
                    let mut job = JobSpec::new(rw, bs, 4, 1);
                    job.io_limit = Some(region.max(bs));
                    tests.push(TestSpec {
                        name: format!("{group} {dir}"),
                        group: group.clone(),
                        job,
                    });
                }
                bs *= 2;
            }
        }
        "iometer" => {
            let lines = crate::iometer::pattern("file-server").expect("built in");
            tests = crate::iometer::tests("file-server", &lines, 1, 1, false);
        }
        "custom" => {
            let job = custom
                .ok_or_else(|| SpecError::new("preset", name, "custom needs --rw and --bs"))?
                .clone();
            job.validate()?;
            let mut group = job.cdm_name();
            if job.rw.is_mixed() {
                group = format!("{group} {}/{}", job.rwmixread, 100 - job.rwmixread);
            }
            tests.push(TestSpec {
                name: format!("{group} {}", job.rw),
                group,
                job,
            });
        }
        other => {
            return Err(SpecError::new(
                "preset",
                other,
                format!("unknown preset (known: {})", preset_names().join(", ")),
            ))
        }
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdm_expands_to_documented_tests() {
        let t = expand_preset("cdm", None, false, 1 << 30).unwrap();
        let names: Vec<_> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "SEQ1M Q8T1 Read",
                "SEQ1M Q8T1 Write",
                "SEQ1M Q1T1 Read",
                "SEQ1M Q1T1 Write",
                "RND4K Q32T1 Read",
                "RND4K Q32T1 Write",
                "RND4K Q1T1 Read",
                "RND4K Q1T1 Write"
            ]
        );
        assert_eq!(t[4].job.rw, Rw::RandRead);
        assert_eq!(t[4].job.bs, 4096);
        assert_eq!(t[4].job.iodepth, 32);
        assert_eq!(t[1].job.rw, Rw::Write);
        assert_eq!(t[1].job.bs, 1 << 20);
        assert_eq!(t[1].job.iodepth, 8);
    }

    #[test]
    fn cdm_nvme_and_mix() {
        let t = expand_preset("cdm-nvme", None, true, 1 << 30).unwrap();
        assert_eq!(t.len(), 12);
        assert_eq!(t[3].group, "SEQ128K Q32T1");
        assert_eq!(t[6].group, "RND4K Q32T16");
        assert_eq!(t[6].job.numjobs, 16);
        let mix = &t[8];
        assert_eq!(mix.name, "RND4K Q32T16 Mix");
        assert_eq!(mix.job.rw, Rw::RandRw);
        assert_eq!(mix.job.rwmixread, 70);
        assert_eq!(expand_preset("cdm-peak", None, false, 1).unwrap().len(), 4);
        assert_eq!(
            expand_preset("cdm-real", None, false, 1).unwrap()[0].group,
            "SEQ1M Q1T1"
        );
    }

    #[test]
    fn atto_sweeps_512_to_64m_write_then_read() {
        let t = expand_preset("atto", None, false, 256 << 20).unwrap();
        assert_eq!(t.len(), 36);
        assert_eq!(t[0].name, "512 Write");
        assert_eq!(t[1].name, "512 Read");
        assert_eq!(t[35].name, "64M Read");
        assert!(t
            .iter()
            .all(|t| t.job.iodepth == 4 && !t.job.rw.is_random()));
        assert!(t.iter().all(|t| t.job.io_limit == Some(256 << 20)));
    }

    #[test]
    fn custom_and_unknown() {
        let mut j = JobSpec::new(Rw::RandRw, 4096, 32, 1);
        j.rwmixread = 70;
        let t = expand_preset("custom", Some(&j), false, 1).unwrap();
        assert_eq!(t[0].name, "RND4K Q32T1 70/30 randrw");
        assert!(expand_preset("custom", None, false, 1).is_err());
        assert!(expand_preset("nope", None, false, 1).is_err());
        let bad = JobSpec::new(Rw::Read, 1000, 1, 1);
        assert!(expand_preset("custom", Some(&bad), false, 1).is_err());
    }
}
