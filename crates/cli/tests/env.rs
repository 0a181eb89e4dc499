//! `iolab env`, and the environment stored with every run and shown again by `show`.

use iolab_testkit::Sandbox;

#[test]
fn env_describes_the_target_and_runs_keep_it() {
    let sb = Sandbox::new();
    let target = sb.target.to_str().unwrap().to_string();
    let text = sb.iolab(&["env", "--target", &target]).ok();
    for needle in ["kernel", "memory", "filesystem", "Devices under the target"] {
        assert!(
            text.stdout.contains(needle),
            "missing {needle}:\n{}",
            text.stdout
        );
    }
    assert!(text.stdout.lines().all(|l| l.chars().count() <= 100));
    let json = sb
        .iolab(&["env", "--target", &target, "--json"])
        .ok()
        .json();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(json["kernel_release"], release.trim());
    assert!(json["target"]["fs_type"].is_string(), "{json}");

    sb.run(&[
        "custom",
        "--rw",
        "randread",
        "--size",
        "4MiB",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--runs",
        "1",
    ])
    .ok();
    let shown = sb.iolab(&["show", "last"]).ok();
    assert!(
        shown.stdout.contains("Environment captured"),
        "{}",
        shown.stdout
    );
    let doc = sb.iolab(&["show", "last", "--json"]).ok().json();
    let env = &doc["env"];
    assert_eq!(env["kernel_release"], release.trim());
    assert_eq!(env["target"]["fs_type"], json["target"]["fs_type"]);
    assert!(
        !env["target"]["devices"].as_array().unwrap().is_empty(),
        "{env}"
    );
    // A missing target is bad input.
    sb.iolab(&["env", "--target", "/nonexistent/x"]).code(2);
}
