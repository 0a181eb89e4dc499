//! `iolab run fsync`: the sync-method probe end to end.

use iolab_testkit::Sandbox;

#[test]
fn probe_measures_each_method_and_size_and_judges_each_one() {
    let sb = Sandbox::new();
    let out = sb
        .run(&[
            "fsync",
            "--sizes",
            "4k,16k",
            "--methods",
            "none,fdatasync,fsync,O_DSYNC,O_SYNC,O_DIRECT+O_DSYNC",
            "--duration",
            "200ms",
            "--json",
            "-",
        ])
        .ok();
    let doc = out.json();
    assert_eq!(doc["workload"], "fsync");
    let names: Vec<&str> = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for m in [
        "none",
        "write+fdatasync",
        "write+fsync",
        "O_DSYNC",
        "O_SYNC",
    ] {
        for s in ["4K", "16K"] {
            assert!(names.contains(&format!("{m} {s}").as_str()), "{names:?}");
        }
    }
    for t in doc["tests"].as_array().unwrap() {
        let p = &t["passes"][0];
        assert!(p["ios"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(
            p["bytes"].as_u64().unwrap(),
            p["ios"].as_u64().unwrap() * t["bs"].as_u64().unwrap()
        );
        let flushing = t["name"].as_str().unwrap().starts_with("write+f");
        assert_eq!(p["sync"].is_object(), flushing, "{t}");
    }
    // A plain write is cheaper than a flushed one.
    let iops = |name: &str| {
        doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["summary"]["iops"]
            .as_f64()
            .unwrap()
    };
    assert!(iops("none 4K") > iops("write+fsync 4K"));
    // Every test has a durability verdict with its evidence.
    for t in doc["tests"].as_array().unwrap() {
        let d = &t["extra"]["durability"];
        let v = d["verdict"].as_str().unwrap_or_else(|| panic!("{t}"));
        assert!(
            ["not_durable", "cache_answered", "as_far_as_timing_shows"].contains(&v),
            "{d}"
        );
        assert!(d["evidence"].as_str().unwrap().contains("ops/s"), "{d}");
        let plain = t["name"].as_str().unwrap().starts_with("none ");
        assert_eq!(d["flush_us"].is_null(), plain, "{d}");
    }
    // The probe file is gone.
    assert!(sb.target_entries().is_empty());
    // A bad method is bad input.
    sb.run(&["fsync", "--methods", "fsnyc"]).code(2);
}
