//! `iolab results --json/--csv`, `iolab delete` and `iolab prune` on a real database.

use std::process::{Command, Stdio};

use iolab_testkit::{have, Sandbox};

/// A small stored run with `label`.
fn small_run(sb: &Sandbox, label: &str) {
    let line = "custom --rw read --bs 64k --size 1MiB --runs 1 --duration 100ms --warmup 0";
    let mut args: Vec<&str> = line.split_whitespace().collect();
    args.extend(["--label", label]);
    sb.run(&args).ok();
}

/// The ids `results --json` lists.
fn ids(sb: &Sandbox) -> Vec<i64> {
    let v = sb.iolab(&["results", "--json"]).ok().json();
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect()
}

/// Sets a run's start time, as if it had run then.
fn backdate(sb: &Sandbox, id: i64, when: &str) {
    let conn = rusqlite::Connection::open(&sb.db).unwrap();
    let n = conn
        .execute("UPDATE runs SET started_at = ?1 WHERE id = ?2", (when, id))
        .unwrap();
    assert_eq!(n, 1);
}

#[test]
fn results_as_json_and_csv_and_what_an_empty_listing_says() {
    let sb = Sandbox::new();
    let out = sb.iolab(&["results"]).ok();
    assert!(out.stdout.starts_with("No runs stored"), "{}", out.stdout);
    small_run(&sb, "a,b \"quoted\"");
    small_run(&sb, "plain");

    let v = sb.iolab(&["results", "--json"]).ok().json();
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["label"], "a,b \"quoted\"");
    assert_eq!(runs[1]["preset"], "custom");
    assert_eq!(runs[1]["complete"], true);

    let out = sb
        .iolab(&["results", "--csv", "--label", "a,b \"quoted\""])
        .ok();
    let mut reader = csv::Reader::from_reader(out.stdout.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[..3], ["id", "started_at", "preset"]);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(&rows[0][6], "a,b \"quoted\"");
    assert_eq!(&rows[0][0], &runs[0]["id"].to_string());

    for args in [
        &["results", "--limit", "0"][..],
        &["results", "--label", "nothing-has-this"],
    ] {
        let out = sb.iolab(args).ok();
        assert!(
            out.stdout.starts_with("No runs match (2 runs stored"),
            "{args:?}: {}",
            out.stdout
        );
    }
    let empty = sb
        .iolab(&["results", "--json", "--label", "none"])
        .ok()
        .json();
    assert_eq!(empty, serde_json::json!([]));
    sb.iolab(&["results", "--json", "--csv"]).code(2);
}

#[test]
fn delete_asks_refuses_without_a_terminal_and_removes_only_what_it_names() {
    let sb = Sandbox::new();
    for l in ["one", "two", "three"] {
        small_run(&sb, l);
    }
    let all = ids(&sb);
    assert_eq!(all.len(), 3);
    let kept = sb
        .iolab(&["show", &all[2].to_string(), "--json"])
        .ok()
        .stdout;

    // Standard input is not a terminal: refused, nothing deleted.
    sb.iolab(&["delete", &all[0].to_string()])
        .code(2)
        .stderr_has(&["--yes", "not a terminal"]);
    // An unknown run among known ones: refused, nothing deleted.
    sb.iolab(&["delete", &all[0].to_string(), "999", "--yes"])
        .code(2)
        .stderr_has(&["run 999 is not stored"]);
    sb.iolab(&["delete", "x1", "--yes"]).code(2);
    assert_eq!(ids(&sb), all);

    let out = sb
        .iolab(&["delete", &all[0].to_string(), &all[1].to_string(), "--yes"])
        .ok();
    assert!(out.stdout.contains("Deleted 2 runs"), "{}", out.stdout);
    assert_eq!(ids(&sb), vec![all[2]]);
    // The other run is exactly as it was.
    assert_eq!(
        sb.iolab(&["show", &all[2].to_string(), "--json"])
            .ok()
            .stdout,
        kept
    );
    let conn = rusqlite::Connection::open(&sb.db).unwrap();
    let orphans: i64 = conn
        .query_row(
            "SELECT count(*) FROM tests WHERE run_id NOT IN (SELECT id FROM runs)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0);

    // On a terminal it asks: "n" keeps the run, "y" deletes it.
    if !have("script") {
        iolab_testkit::skip::skip("script (util-linux) is not installed: no terminal to ask on");
        return;
    }
    let on_terminal = |answer: &str| {
        let cmd = format!(
            "{} delete {} --db {}",
            iolab_testkit::iolab::iolab_bin().display(),
            all[2],
            sb.db.display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{answer}\n").as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let said = on_terminal("n");
    assert!(
        said.contains("[y/N]") && said.contains("Nothing deleted"),
        "{said}"
    );
    assert_eq!(ids(&sb), vec![all[2]]);
    let said = on_terminal("y");
    assert!(said.contains("Deleted 1 run"), "{said}");
    assert!(ids(&sb).is_empty());
}

#[test]
fn prune_removes_old_runs_matching_the_filters_only() {
    let sb = Sandbox::new();
    for l in ["old-a", "old-b", "new-a"] {
        small_run(&sb, l);
    }
    let all = ids(&sb);
    backdate(&sb, all[0], "2020-01-01T00:00:00.000Z");
    backdate(&sb, all[1], "2020-01-02T00:00:00.000Z");

    // Nothing is old enough.
    let out = sb.iolab(&["prune", "--older-than", "10000d", "--yes"]).ok();
    assert!(out.stdout.starts_with("No runs match"), "{}", out.stdout);
    sb.iolab(&["prune", "--older-than", "90d"])
        .code(2)
        .stderr_has(&["--yes"]);
    for bad in ["0d", "90", "ninety", "3y"] {
        sb.iolab(&["prune", "--older-than", bad, "--yes"])
            .code(2)
            .stderr_has(&["--older-than"]);
    }
    assert_eq!(ids(&sb).len(), 3);

    // Only the old run carrying the label.
    sb.iolab(&["prune", "--older-than", "90d", "--label", "old-b", "--yes"])
        .ok();
    assert_eq!(ids(&sb), vec![all[0], all[2]]);
    // Every old run; the new one stays.
    let out = sb.iolab(&["prune", "--older-than", "90d", "--yes"]).ok();
    assert!(out.stdout.contains("Deleted 1 run"), "{}", out.stdout);
    assert_eq!(ids(&sb), vec![all[2]]);
}

#[test]
fn delete_and_prune_never_create_a_database() {
    let sb = Sandbox::new();
    sb.iolab(&["delete", "1", "--yes"])
        .code(2)
        .stderr_has(&["no result database"]);
    sb.iolab(&["prune", "--older-than", "1d", "--yes"]).code(2);
    assert!(!sb.db.exists());
}
