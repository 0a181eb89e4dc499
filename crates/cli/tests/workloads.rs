//! `iolab run copy|streams|metadata` end to end through the CLI: options reach the
//! workload, results are stored and printed like any run, and nothing is left behind.

use iolab_testkit::Sandbox;
use serde_json::Value;

fn names(doc: &Value) -> Vec<String> {
    doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn copy_of_a_tree_is_measured_verified_and_removed() {
    let sb = Sandbox::new();
    let src = sb.path("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(src.join("a.bin"), iolab_testkit::random_bytes(3 << 20, 1)).unwrap();
    std::fs::write(
        src.join("sub/b.bin"),
        iolab_testkit::random_bytes(100_000, 2),
    )
    .unwrap();
    let doc = sb
        .run(&[
            "copy",
            "--source",
            src.to_str().unwrap(),
            "--runs",
            "2",
            "--json",
            "-",
        ])
        .ok()
        .json();
    assert_eq!(doc["workload"], "copy");
    let t = &doc["tests"][0];
    assert_eq!(t["passes"].as_array().unwrap().len(), 2);
    assert_eq!(t["extra"]["verified"], true, "{t}");
    assert_eq!(
        t["passes"][0]["bytes"].as_u64().unwrap(),
        (3 << 20) + 100_000
    );
    // The source is untouched, the copies are gone.
    assert!(src.join("sub/b.bin").exists());
    assert!(sb.target_entries().is_empty());
    let stored = sb.iolab(&["show", "last", "--json"]).ok().json();
    assert_eq!(stored["tests"][0]["summary"], t["summary"]);
}

#[test]
fn report_004_streams_are_one_command_each() {
    let sb = Sandbox::new();
    // Three readers of one file, started apart.
    let doc = sb
        .run(&[
            "streams",
            "--streams",
            "3",
            "--same-file",
            "--stagger",
            "150ms",
            "--bs",
            "1M",
            "--size",
            "16MiB",
            "--json",
            "-",
        ])
        .ok()
        .json();
    assert_eq!(
        names(&doc),
        ["stream 1", "stream 2", "stream 3", "aggregate"]
    );
    let inodes: Vec<u64> = (0..3)
        .map(|i| doc["tests"][i]["extra"]["inode"].as_u64().unwrap())
        .collect();
    assert!(inodes.iter().all(|&i| i == inodes[0]), "{inodes:?}");
    // Three readers of three files at once, and 512-byte reads.
    let doc = sb
        .run(&[
            "streams",
            "--streams",
            "3",
            "--bs",
            "512",
            "--size",
            "4MiB",
            "--json",
            "-",
        ])
        .ok()
        .json();
    let inodes: Vec<u64> = (0..3)
        .map(|i| doc["tests"][i]["extra"]["inode"].as_u64().unwrap())
        .collect();
    assert!(
        inodes[0] != inodes[1] && inodes[1] != inodes[2],
        "{inodes:?}"
    );
    assert_eq!(doc["tests"][0]["bs"], 512);
    assert!(sb.target_entries().is_empty());
    // Stagger without one shared file is refused.
    sb.run(&["streams", "--streams", "2", "--stagger", "1s"])
        .code(2);
}

#[test]
fn metadata_counts_are_exact() {
    let sb = Sandbox::new();
    let doc = sb
        .run(&[
            "metadata",
            "--files",
            "300",
            "--dirs",
            "3",
            "--threads",
            "2",
            "--json",
            "-",
        ])
        .ok()
        .json();
    assert_eq!(names(&doc), ["create", "stat", "read", "rename", "delete"]);
    for t in doc["tests"].as_array().unwrap() {
        assert_eq!(
            t["passes"][0]["ios"].as_u64().unwrap(),
            300,
            "{}",
            t["name"]
        );
    }
    assert!(sb.target_entries().is_empty());
}
