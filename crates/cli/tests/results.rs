//! `iolab results --json/--csv`, `iolab delete` and `iolab prune` on a real database.

use std::process::{Command, Stdio};

use iolab_testkit::{have, Sandbox};

/// A small stored run with `label`. Its pass ends after the region's 1 MiB (the minute is
/// a bound that is never reached): a pass of 100 ms beside a disk hog once completed not
/// one 64 KiB read, and the run rightly failed. Every run of these tests is so.
fn small_run(sb: &Sandbox, label: &str) {
    let line =
        "custom --rw read --bs 64k --size 1MiB --runs 1 --io-size 1MiB --duration 60s --warmup 0";
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

/// `iolab ARGS --db DB`, run in the sandbox (its own database not given).
fn with_db(sb: &Sandbox, db: &std::path::Path, args: &[&str]) -> iolab_testkit::Out {
    let start = std::time::Instant::now();
    let out = Command::new(iolab_testkit::iolab::iolab_bin())
        .args(args)
        .arg("--db")
        .arg(db)
        .env("XDG_DATA_HOME", sb.dir.path())
        .env("HOME", sb.dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    iolab_testkit::Out::new(args, out, start.elapsed())
}

/// Every command that opens the result database, as `with_db` arguments.
fn db_commands(sb: &Sandbox) -> Vec<Vec<String>> {
    let target = sb.target.to_str().unwrap().to_string();
    let study = sb.path("db-study.toml");
    std::fs::write(
        &study,
        format!(
            "name = \"db\"\n[[config]]\nlabel = \"a\"\ntestbed = {{ kind = \"dir\", path = \
             \"{target}\" }}\n[[workload]]\nkind = \"custom\"\nrw = \"read\"\nsize = \"1MiB\"\n\
             duration = \"100ms\"\nruns = 1\nwarmup = 0\n"
        ),
    )
    .unwrap();
    let run = "run custom --rw read --bs 64k --size 1MiB --runs 1 --io-size 1MiB --duration 60s --warmup 0 \
               --quiet --target";
    let mut all: Vec<Vec<String>> = [
        "delete 1 --yes",
        "prune --older-than 1d --yes",
        "results",
        "show 1",
        "report 1",
        "compare 1 2",
        "history",
    ]
    .iter()
    .map(|c| c.split_whitespace().map(String::from).collect())
    .collect();
    let mut r: Vec<String> = run.split_whitespace().map(String::from).collect();
    r.push(target);
    all.push(r);
    all.push(vec!["study".into(), study.to_str().unwrap().into()]);
    all
}

/// Every command refuses `db` with exit 2 and a message saying what it is.
fn all_refuse(sb: &Sandbox, db: &std::path::Path, says: &str) {
    for args in db_commands(sb) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = with_db(sb, db, &args).code(2);
        out.stderr_has(&["refused", says]);
    }
}

#[test]
fn a_database_that_is_not_a_regular_file_is_refused_by_every_command() {
    let sb = Sandbox::new();
    let fifo = sb.path("fifo");
    iolab_testkit::sh("mkfifo", &[fifo.to_str().unwrap()]);
    all_refuse(&sb, &fifo, "it is a FIFO");
    all_refuse(&sb, std::path::Path::new("/dev/null"), "a character device");
    let to_null = sb.path("to-null");
    std::os::unix::fs::symlink("/dev/null", &to_null).unwrap();
    all_refuse(
        &sb,
        &to_null,
        "a symlink to /dev/null, which is a character device",
    );
    let dangling = sb.path("dangling");
    std::os::unix::fs::symlink(sb.path("nowhere"), &dangling).unwrap();
    let out = with_db(
        &sb,
        &dangling,
        &[
            "run",
            "custom",
            "--size",
            "1MiB",
            "--target",
            sb.target.to_str().unwrap(),
        ],
    )
    .code(2);
    out.stderr_has(&["which does not exist"]);
    assert!(
        !sb.path("nowhere").exists(),
        "nothing created through the symlink"
    );
    let dir = sb.path("a-dir");
    std::fs::create_dir(&dir).unwrap();
    all_refuse(&sb, &dir, "it is a directory");
}

#[test]
fn a_block_device_as_the_database_is_refused_and_left_as_it_was() {
    let Some(_lock) = iolab_testkit::require_devices(&["mkfs.ext4"]) else {
        return;
    };
    let sb = Sandbox::new();
    let lo = iolab_testkit::Loop::new(32 << 20);
    iolab_testkit::sh("mkfs.ext4", &["-q", lo.s()]);
    let before = lo.contents();
    all_refuse(&sb, &lo.dev, "it is a block device");
    let link = sb.path("to-loop");
    std::os::unix::fs::symlink(&lo.dev, &link).unwrap();
    all_refuse(&sb, &link, "which is a block device");
    assert!(lo.contents() == before, "the device was written");
    // Mounted, too (mounting changes the superblock itself: SQLite's header would go in the
    // first 1024 bytes, which ext4 leaves alone).
    let m = iolab_testkit::Mount::new(&lo.dev, &[]);
    for args in [
        &["delete", "1", "--yes"][..],
        &[
            "run",
            "custom",
            "--size",
            "1MiB",
            "--target",
            m.path().to_str().unwrap(),
        ],
    ] {
        with_db(&sb, &lo.dev, args).code(2);
    }
    drop(m);
    assert!(
        lo.contents()[..1024] == before[..1024],
        "the device was written"
    );
    let blkid = iolab_testkit::sh("blkid", &["-o", "value", "-s", "TYPE", lo.s()]);
    assert_eq!(blkid.trim(), "ext4");
}

#[test]
fn a_database_on_a_read_only_filesystem_is_refused_with_exit_2() {
    if !iolab_testkit::require_root("mounting a tmpfs") {
        return;
    }
    let sb = Sandbox::new();
    small_run(&sb, "a");
    let m = iolab_testkit::Mount::new("tmpfs", &["-t", "tmpfs"]);
    let db = m.path().join("r.db");
    std::fs::copy(&sb.db, &db).unwrap();
    m.remount("ro");
    let target = sb.target.to_str().unwrap();
    let run = [
        "run",
        "custom",
        "--rw",
        "read",
        "--size",
        "1MiB",
        "--runs",
        "1",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--warmup",
        "0",
        "--quiet",
        "--target",
        target,
    ];
    for args in [
        &run[..],
        &["delete", "1", "--yes"],
        &["prune", "--older-than", "1s", "--yes"],
    ] {
        with_db(&sb, &db, args)
            .code(2)
            .stderr_has(&["read-only filesystem"]);
        // A database it would create there.
        with_db(&sb, &m.path().join("new/r.db"), args).code(2);
    }
    // Readers still read it.
    assert!(with_db(&sb, &db, &["results"])
        .ok()
        .stdout
        .contains("1 run"));
}

/// Waits until the run `child` writes is stored in `sb`'s database (an incomplete run,
/// read directly, as often as needed) and returns its id; fails with the run's output if it
/// ends first.
fn wait_for_run(sb: &Sandbox, child: &mut std::process::Child) -> i64 {
    loop {
        let seen = rusqlite::Connection::open_with_flags(
            &sb.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .and_then(|c| {
            c.query_row("SELECT max(id) FROM runs WHERE complete = 0", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
        })
        .unwrap_or(None);
        if let Some(id) = seen {
            return id;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the run ended ({status}) before it was stored: {err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Stops `pid` (SIGSTOP) at a moment it holds no write transaction on `sb`'s database, so
/// that other commands can write while it stays alive.
fn stop_outside_a_write(sb: &Sandbox, pid: u32) {
    loop {
        iolab_testkit::sh("kill", &["-STOP", &pid.to_string()]);
        let conn = rusqlite::Connection::open(&sb.db).unwrap();
        if conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;").is_ok() {
            return;
        }
        drop(conn);
        iolab_testkit::sh("kill", &["-CONT", &pid.to_string()]);
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_run_still_being_written_is_not_deleted_or_pruned_and_is_stored_whole() {
    let sb = Sandbox::new();
    small_run(&sb, "finished");
    // Ready before the run starts: the run is stopped at its first pass, and a pass
    // stopped past its end measures nothing.
    let shared = iolab_testkit::require_postgres().map(|server| server.database());
    let mut child = sb.spawn_run(&[
        "custom",
        "--rw",
        "read",
        "--bs",
        "64k",
        "--size",
        "1MiB",
        "--runs",
        "1",
        "--duration",
        "6s",
        "--warmup",
        "0",
    ]);
    let pid = child.id();
    assert_eq!(wait_for_run(&sb, &mut child), 2);
    stop_outside_a_write(&sb, pid);
    if let Some(url) = shared {
        // Not pushed while it is written: named, nothing goes; found by --all, left.
        let out = sb.iolab(&["push", "2", "1", "--to", &url]).code(2);
        out.stderr_has(&["run 2", "still being written", "nothing pushed"]);
        let out = sb.iolab(&["push", "--all", "--to", &url]).ok();
        assert!(
            out.stdout.contains("Pushed 1 run to")
                && out
                    .stdout
                    .contains(&format!("Run 2 is still being written by process {pid}")),
            "{out}"
        );
        let pushed = with_db(&sb, std::path::Path::new(&url), &["results", "--json"]).ok();
        assert_eq!(pushed.json().as_array().unwrap().len(), 1);
    }
    backdate(&sb, 1, "2000-01-01T00:00:00.000Z");
    backdate(&sb, 2, "2000-01-01T00:00:00.000Z");

    let out = sb.iolab(&["delete", "2", "--yes"]).code(2);
    out.stderr_has(&["run 2", &format!("still being written by process {pid}")]);
    let out = sb.iolab(&["delete", "1", "2", "--yes"]).code(2);
    out.stderr_has(&["run 2", "still being written"]);
    assert_eq!(ids(&sb), [1, 2], "nothing deleted");
    let out = sb.iolab(&["prune", "--older-than", "1d", "--yes"]).ok();
    assert!(
        out.stdout.contains(&format!(
            "Run 2 is still being written by process {pid}: left alone."
        )) && out.stdout.contains("Deleted 1 run (1)"),
        "{out}"
    );
    assert_eq!(ids(&sb), [2]);

    iolab_testkit::sh("kill", &["-CONT", &pid.to_string()]);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = sb.iolab(&["results", "--json"]).ok().json();
    assert_eq!(v[0]["id"], 2);
    assert_eq!(v[0]["complete"], true);
    assert_eq!(v[0]["tests"], 1);
    sb.iolab(&["delete", "2", "--yes"]).ok();

    // A writer killed with -9: its run stays incomplete and can be deleted.
    let mut child = sb.spawn_run(&[
        "custom",
        "--rw",
        "read",
        "--bs",
        "64k",
        "--size",
        "1MiB",
        "--runs",
        "1",
        "--duration",
        "60s",
        "--warmup",
        "0",
    ]);
    let id = wait_for_run(&sb, &mut child).to_string();
    child.kill().unwrap();
    child.wait().unwrap();
    sb.iolab(&["delete", &id, "--yes"]).ok();
    assert!(ids(&sb).is_empty());
}

#[test]
fn a_file_planted_next_to_the_database_is_refused_not_written_through() {
    let sb = Sandbox::new();
    let victim = sb.path("victim");
    std::fs::write(&victim, "precious").unwrap();
    let target = sb.target.to_str().unwrap();
    let run = [
        "run",
        "custom",
        "--rw",
        "read",
        "--size",
        "1MiB",
        "--runs",
        "1",
        "--io-size",
        "1MiB",
        "--duration",
        "60s",
        "--warmup",
        "0",
        "--quiet",
        "--target",
        target,
    ];
    for fresh in [true, false] {
        if !fresh {
            small_run(&sb, "there");
        }
        for suffix in ["-wal", "-journal", "-shm"] {
            let side = sb.path(&format!("r.db{suffix}"));
            std::os::unix::fs::symlink(&victim, &side).unwrap();
            for args in [&run[..], &["delete", "1", "--yes"], &["results"]] {
                if fresh && args[0] != "run" {
                    continue; // no database: nothing to delete, an empty listing
                }
                let out = with_db(&sb, &sb.db, args).code(2);
                out.stderr_has(&[&format!("r.db{suffix} is a symlink")]);
            }
            std::fs::remove_file(&side).unwrap();
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        }
        assert_eq!(sb.db.exists(), !fresh, "nothing created");
    }
    // Someone else's file where SQLite's write-ahead log goes.
    let side = sb.path("r.db-wal");
    std::fs::write(&side, "").unwrap();
    std::os::unix::fs::chown(&side, Some(65534), None).unwrap();
    with_db(&sb, &sb.db, &run)
        .code(2)
        .stderr_has(&["belongs to uid 65534"]);
}

#[test]
fn another_users_database_is_refused_with_exit_2_when_it_cannot_be_read_or_written() {
    if !iolab_testkit::require_root("running as a second user")
        || !iolab_testkit::require_tools(&["setpriv"])
    {
        return;
    }
    let sb = Sandbox::new();
    small_run(&sb, "root's");
    use std::os::unix::fs::PermissionsExt;
    // The second user must reach the database's directory whatever the checkout's path (a
    // clone under /root is not searchable by nobody): a copy in a directory of its own
    // under the system's temporary directory, searchable by all.
    let dir = tempfile::Builder::new()
        .prefix("results-other-user")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = dir.path().join("r.db");
    std::fs::copy(&sb.db, &db).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    let as_nobody = |args: &[&str]| {
        let out = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(iolab_testkit::iolab::iolab_bin())
            .args(args)
            .arg("--db")
            .arg(&db)
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        iolab_testkit::Out::new(args, out, std::time::Duration::ZERO)
    };
    // Created 0600 (the copy keeps it): another user can neither read nor write it.
    let mode = std::fs::metadata(&sb.db).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    as_nobody(&["results"])
        .code(2)
        .stderr_has(&["cannot be read (permission denied)"]);
    as_nobody(&["delete", "1", "--yes"])
        .code(2)
        .stderr_has(&["cannot be read"]);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(as_nobody(&["results"]).ok().stdout.contains("1 run"));
    as_nobody(&["delete", "1", "--yes"])
        .code(2)
        .stderr_has(&["cannot be written (permission denied)"]);
    let left = Command::new(iolab_testkit::iolab::iolab_bin())
        .args(["results", "--db"])
        .arg(&db)
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let left = iolab_testkit::Out::new(&["results"], left, std::time::Duration::ZERO).ok();
    assert!(left.stdout.contains("1 run"), "{left}");
}

/// `iolab ARGS` in `dir` with `IOLAB_DB=db` and no --db.
fn with_iolab_db(dir: &std::path::Path, db: &str, args: &[&str]) -> iolab_testkit::Out {
    let start = std::time::Instant::now();
    let out = Command::new(iolab_testkit::iolab::iolab_bin())
        .args(args)
        .current_dir(dir)
        .env("IOLAB_DB", db)
        .env("XDG_DATA_HOME", dir)
        .env("HOME", dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    iolab_testkit::Out::new(args, out, start.elapsed())
}

#[test]
fn every_command_works_on_a_postgresql_store_given_by_db_or_iolab_db() {
    let Some(server) = iolab_testkit::require_postgres() else {
        return;
    };
    let sb = Sandbox::new();
    let url = server.database();
    let db = std::path::Path::new(&url);
    let target = sb.target.to_str().unwrap().to_string();
    let run = |label: &str| -> Vec<String> {
        format!(
            "run custom --rw read --bs 64k --size 1MiB --runs 1 --io-size 1MiB --duration 60s --warmup 0 \
             --quiet --target {target} --label {label}"
        )
        .split_whitespace()
        .map(String::from)
        .collect()
    };
    // A password in the URL (the server trusts this socket, whatever it is) is never
    // shown or stored.
    let with_password = url.replacen("iolab@", "iolab:s3cret@", 1);
    let args = run("a");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    with_db(&sb, std::path::Path::new(&with_password), &args).ok();
    // IOLAB_DB for every command, from a directory where a URL taken as a path would have
    // made a directory `postgresql:`.
    let args = run("b");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    with_iolab_db(sb.dir.path(), &url, &args).ok();
    assert!(!sb.dir.path().join("postgresql:").exists());

    let listed = with_iolab_db(sb.dir.path(), &url, &["results", "--json"])
        .ok()
        .json();
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let host = listed[0]["host"]
        .as_str()
        .expect("the host is recorded")
        .to_string();
    let shown = with_db(&sb, db, &["show", "1", "--json"]).ok().json();
    assert!(!shown.to_string().contains("s3cret"), "{shown}");
    assert!(
        shown["command_line"].to_string().contains("iolab:***@"),
        "{shown}"
    );
    let machine = shown["env"]["machine_id"].as_str().map(String::from);
    for by in [Some(host.clone()), machine].into_iter().flatten() {
        let out = with_db(&sb, db, &["results", "--host", &by, "--json"]).ok();
        assert_eq!(out.json().as_array().unwrap().len(), 2, "--host {by}");
    }
    // No such database on the server: the caller's to fix (exit 2); no directory made.
    let missing = url.replace("/t", "/no_such_db_");
    let out = with_db(&sb, std::path::Path::new(&missing), &["results"]).code(2);
    out.stderr_has(&["no_such_db_", "does not exist"]);
    let out = with_db(&sb, db, &["results", "--host", "no-such-host"]).ok();
    assert!(
        out.stdout
            .contains("No runs match (2 runs stored in postgresql://"),
        "{out}"
    );
    for args in [
        vec!["report", "1"],
        vec!["compare", "1", "2"],
        vec!["compare", "--label", "a", "--label", "b", "--host", &host],
        vec!["history", "--host", &host],
    ] {
        with_db(&sb, db, &args).ok();
    }
    let out = with_db(
        &sb,
        db,
        &["compare", "--host", &host, "--host", "elsewhere"],
    )
    .code(2);
    out.stderr_has(&["host elsewhere", "not found"]);
    // A study stores into it too.
    let study = db_commands(&sb).pop().unwrap();
    let study: Vec<&str> = study.iter().map(String::as_str).collect();
    let out = with_db(&sb, std::path::Path::new(&with_password), &study).ok();
    assert!(
        !out.stdout.contains("s3cret") && !out.stderr.contains("s3cret"),
        "{out}"
    );
    with_db(&sb, db, &["delete", "1", "--yes"]).ok();
    let out = with_db(&sb, db, &["results", "--json"]).ok().json();
    assert_eq!(out.as_array().unwrap().len(), 2);
    assert!(!sb.dir.path().join("postgresql:").exists());
}

/// The schema of the PostgreSQL database at `url` as `psql` sees it, in one query: its
/// version (none without `iolab_schema`), its tables' columns and its indexes.
fn pg_schema(server: &iolab_testkit::PgServer, url: &str) -> String {
    server.psql(
        url,
        "SELECT concat_ws(' | ',
             CASE WHEN to_regclass('iolab_schema') IS NOT NULL
                  THEN query_to_xml('SELECT version FROM iolab_schema', false, false, '')
             END,
             (SELECT string_agg(table_name || '.' || column_name, ' '
                                ORDER BY table_name, column_name)
                FROM information_schema.columns WHERE table_schema = 'public'),
             (SELECT string_agg(indexname, ' ' ORDER BY indexname)
                FROM pg_indexes WHERE schemaname = 'public'))",
    )
}

/// Every command that only reads, given a PostgreSQL store that it cannot read as it is (an
/// empty database, a store of an older schema): each is refused (exit 2) saying `says`,
/// and the database is left as it was, neither created nor upgraded.
fn readers_refuse_and_change_nothing(
    server: &iolab_testkit::PgServer,
    sb: &Sandbox,
    url: &str,
    says: &[&str],
) {
    let before = pg_schema(server, url);
    let db = std::path::Path::new(url);
    let local = sb.dir.path().join("pushed.db");
    let local = local.to_str().unwrap();
    for args in [
        vec!["results"],
        vec!["show", "1"],
        vec!["report", "1"],
        vec!["compare", "1", "2"],
        vec!["history", "--host", "h"],
        vec!["push", "--all", "--to", local],
    ] {
        with_db(sb, db, &args).code(2).stderr_has(says);
        assert_eq!(pg_schema(server, url), before, "iolab {args:?} changed it");
    }
    // serve checks the store before it listens: refused, it ends without a line on stdout.
    let mut child = Command::new(iolab_testkit::iolab::iolab_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--db", url])
        .env("HOME", sb.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    if !first.is_empty() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let out = iolab_testkit::Out::new(&["serve"], out, std::time::Duration::ZERO);
    assert!(first.is_empty(), "serve served: {first}");
    out.code(2).stderr_has(says);
    assert_eq!(pg_schema(server, url), before, "iolab serve changed it");
    assert!(!std::path::Path::new(local).exists(), "push wrote {local}");
}

/// The commands that only read never create or upgrade a PostgreSQL store (its role may
/// lack the right to): an empty database stays empty and a store of schema 5 stays at
/// version 5, each command refused saying which commands would create or upgrade it; a
/// writing command then upgrades it and the readers read it.
#[test]
fn reading_commands_neither_create_nor_upgrade_a_postgresql_store() {
    let Some(server) = iolab_testkit::require_postgres() else {
        return;
    };
    let sb = Sandbox::new();
    let url = server.database();
    assert_eq!(pg_schema(server, &url), "");
    readers_refuse_and_change_nothing(
        server,
        &sb,
        &url,
        &[
            "holds no iolab result store yet",
            "a reader creates nothing",
            &format!("iolab push --to {url} RUN..."),
        ],
    );
    assert_eq!(pg_schema(server, &url), "");

    // A store as iolab's schema 5 left it (before the host columns), holding one run.
    small_run(&sb, "v5");
    sb.iolab(&["push", "--all", "--to", &url]).ok();
    let current = pg_schema(server, &url);
    server.psql(
        &url,
        "DROP INDEX runs_host; DROP INDEX runs_machine_id;
         ALTER TABLE runs DROP COLUMN host, DROP COLUMN machine_id;
         ALTER TABLE passes DROP COLUMN trim_json;
         UPDATE iolab_schema SET version = 5",
    );
    let v5 = pg_schema(server, &url);
    assert!(
        v5.contains("<version>5</version>") && !v5.contains("machine_id"),
        "{v5}"
    );
    readers_refuse_and_change_nothing(
        server,
        &sb,
        &url,
        &[
            "its schema is version 5, older than this iolab's",
            "a reader does not upgrade it",
            "a command that writes upgrades it",
        ],
    );
    assert_eq!(pg_schema(server, &url), v5);

    // A command that writes (here a prune that deletes nothing) upgrades it; then it reads.
    with_db(
        &sb,
        std::path::Path::new(&url),
        &["prune", "--older-than", "10000d", "--yes"],
    )
    .ok();
    assert_eq!(pg_schema(server, &url), current);
    let listed = with_db(&sb, std::path::Path::new(&url), &["results", "--json"])
        .ok()
        .json();
    assert_eq!(listed[0]["label"], "v5", "{listed}");
}

#[test]
fn push_copies_each_run_once_and_concurrent_runs_all_land() {
    let Some(server) = iolab_testkit::require_postgres() else {
        return;
    };
    let sb = Sandbox::new();
    let url = server.database();
    let db = std::path::Path::new(&url);
    // Four processes storing two runs each into one database at once (bench/pg-store.sh:
    // eight storing fifty each).
    let children: Vec<_> = (0..4)
        .map(|i| {
            let label = format!("w{i}");
            let mut c = Command::new(iolab_testkit::iolab::iolab_bin());
            c.args(
                "run custom --rw read --bs 64k --size 1MiB --runs 1 --io-size 1MiB --duration 60s --warmup 0 \
                 --repeat 2 --quiet --label"
                    .split_whitespace(),
            )
            .arg(&label)
            .arg("--target")
            .arg(&sb.target)
            .arg("--db")
            .arg(&url)
            .env("HOME", sb.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null());
            c.spawn().unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let stored = with_db(&sb, db, &["results", "--json"]).ok().json();
    let mut ids: Vec<i64> = stored
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 8, "none lost or duplicated");

    // Local runs pushed: by label, then all; twice stores once.
    small_run(&sb, "x");
    small_run(&sb, "x");
    small_run(&sb, "y");
    let out = sb.iolab(&["push", "--label", "x", "--to", &url]).ok();
    assert!(
        out.stdout.contains("Pushed 2 runs to postgresql://"),
        "{out}"
    );
    let out = sb.iolab(&["push", "--all", "--to", &url]).ok();
    assert!(
        out.stdout.contains("Pushed 1 run to") && out.stdout.contains("2 runs already there"),
        "{out}"
    );
    let out = sb.iolab(&["push", "--all", "--to", &url]).ok();
    assert!(
        out.stdout.contains("Pushed 0 runs to") && out.stdout.contains("3 runs already there"),
        "{out}"
    );
    let out = with_db(&sb, db, &["results", "--label", "x", "--json"]).ok();
    assert_eq!(out.json().as_array().unwrap().len(), 2);
    // What was pushed is the run itself.
    let local = sb.iolab(&["show", "3", "--json"]).ok().json();
    let remote_id = with_db(&sb, db, &["results", "--label", "y", "--json"])
        .ok()
        .json()[0]["id"]
        .as_i64()
        .unwrap()
        .to_string();
    let remote = with_db(&sb, db, &["show", &remote_id, "--json"])
        .ok()
        .json();
    assert_eq!(local["uuid"], remote["uuid"]);
    assert_eq!(local["tests"], remote["tests"]);
    let out = sb.iolab(&["push", "9", "--to", &url]).code(2);
    out.stderr_has(&["run 9 is not stored"]);
}

/// `show N --series`: the stored 100 ms series per interval, as CSV (summing to each
/// pass's bytes), JSON (per test, with its cliff and stalls) and a table; an interval that
/// is not a multiple of 100 ms is refused with exit 2 (issue 27).
#[test]
fn show_series_as_csv_json_and_table_at_a_chosen_interval() {
    let sb = Sandbox::new();
    let line = "custom --rw write --bs 64k --size 4MiB --runs 2 --duration 300ms --ramp 0 \
                --warmup 0";
    sb.run(&line.split_whitespace().collect::<Vec<_>>()).ok();
    let doc = sb.iolab(&["show", "last", "--json"]).ok().json();
    let passes = doc["tests"][0]["passes"].as_array().unwrap();

    let out = sb
        .iolab(&["show", "last", "--series", "--interval", "200ms", "--csv"])
        .ok();
    let mut reader = csv::Reader::from_reader(out.stdout.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(
        header.join(","),
        "test,pass,start_s,seconds,bytes,mb_s,ios,iops,lat_mean_us,lat_max_us"
    );
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    for p in passes {
        let index = p["index"].to_string();
        let mine: Vec<&csv::StringRecord> = rows.iter().filter(|r| r[1] == index).collect();
        assert!(!mine.is_empty() && mine.len() <= 2, "{}", out.stdout);
        let bytes: u64 = mine.iter().map(|r| r[4].parse::<u64>().unwrap()).sum();
        assert_eq!(bytes, p["bytes"].as_u64().unwrap(), "{}", out.stdout);
        assert_eq!(&mine[0][2], "0");
        // I/Os per interval add up to the pass's; each interval's mean is within its max.
        let ios: u64 = mine.iter().map(|r| r[6].parse::<u64>().unwrap()).sum();
        assert_eq!(ios, p["write"]["ios"].as_u64().unwrap(), "{}", out.stdout);
        for r in &mine {
            // An interval in which no I/O completed (a busy machine held the writer off
            // the CPU) has no latency, and its fields are empty.
            if &r[6] == "0" {
                assert_eq!((&r[8], &r[9]), ("", ""), "{}", out.stdout);
                continue;
            }
            let (mean, max): (f64, f64) = (r[8].parse().unwrap(), r[9].parse().unwrap());
            assert!(mean > 0.0 && mean <= max, "{}", out.stdout);
        }
    }

    let v = sb
        .iolab(&["show", "last", "--series", "--json"])
        .ok()
        .json();
    assert_eq!(v["interval_ms"], 1000);
    let t = &v["tests"][0];
    assert_eq!(t["passes"].as_array().unwrap().len(), passes.len());
    assert!(t["cliff"].is_null(), "{t:#}");
    assert!(t["stalls"]["intervals"].is_u64(), "{t:#}");
    let p0 = &t["passes"][0];
    assert_eq!(
        p0["iops"].as_array().unwrap().len(),
        p0["mb_s"].as_array().unwrap().len()
    );
    assert!(p0["lat_mean_us"][0].as_f64().unwrap() > 0.0, "{p0:#}");

    let table = sb.iolab(&["show", "last", "--series"]).ok();
    assert!(table.stdout.contains("MB/s"), "{}", table.stdout);
    assert!(table.stdout.contains("IOPS"), "{}", table.stdout);
    let bad = sb
        .iolab(&["show", "last", "--series", "--interval", "150ms"])
        .code(2);
    assert!(bad.stderr.contains("multiple of 100ms"), "{}", bad.stderr);
    sb.iolab(&["show", "last", "--interval", "1s"]).code(2);
}

#[test]
fn a_postgresql_store_demanding_client_certificates_takes_sslcert_and_sslkey() {
    if !iolab_testkit::require_tools(&["openssl"]) {
        return;
    }
    let server = match iolab_testkit::PgServer::start_tcp_client_certs() {
        Ok(s) => s,
        Err(e) => {
            iolab_testkit::skip(format!("no PostgreSQL server for the test: {e}"));
            return;
        }
    };
    let sb = Sandbox::new();
    let name = server.database().rsplit('/').next().unwrap().to_string();
    let root = server.cert().unwrap().to_str().unwrap().to_string();
    let (cert, key) = server
        .client_cert(sb.dir.path(), "client", "iolab")
        .unwrap();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let url = |params: &str| {
        std::path::PathBuf::from(server.tcp_url(
            "localhost",
            &name,
            &format!("sslmode=verify-full&sslrootcert={root}{params}"),
        ))
    };
    let with_cert = url(&format!("&sslcert={cert}&sslkey={key}"));
    let target = sb.target.to_str().unwrap();
    let run: Vec<&str> =
        "run custom --rw read --bs 64k --size 1MiB --runs 1 --io-size 1MiB --duration 60s \
                          --warmup 0 --quiet --label clientcert --target"
            .split_whitespace()
            .chain([target])
            .collect();
    with_db(&sb, &with_cert, &run).ok();
    let listed = with_db(&sb, &with_cert, &["results", "--json"]).ok().json();
    assert_eq!(listed[0]["label"], "clientcert", "{listed}");
    // Without a certificate the server refuses the role: the caller's to fix (exit 2).
    with_db(&sb, &url(""), &["results"])
        .code(2)
        .stderr_has(&["certificate"]);
    // A key others may read is refused before connecting, as libpq refuses it.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o644)).unwrap();
    with_db(&sb, &with_cert, &["results"]).code(2).stderr_has(&[
        &format!("sslkey={key}"),
        "mode 0644",
        "chmod 600",
    ]);
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A certificate without its key.
    with_db(&sb, &url(&format!("&sslcert={cert}")), &["results"])
        .code(2)
        .stderr_has(&["sslcert without sslkey"]);
}

/// A server of its own over TCP (`ssl` on or off), or a skip with the reason.
fn tcp_server(ssl: bool) -> Option<iolab_testkit::PgServer> {
    if ssl && !iolab_testkit::require_tools(&["openssl"]) {
        return None;
    }
    match iolab_testkit::PgServer::start_tcp(ssl) {
        Ok(s) => Some(s),
        Err(e) => {
            iolab_testkit::skip(format!("no PostgreSQL server for the test: {e}"));
            None
        }
    }
}

#[test]
fn a_postgresql_store_over_tls_follows_sslmode_and_sslrootcert() {
    let Some(server) = tcp_server(true) else {
        return;
    };
    let sb = Sandbox::new();
    let name = server.database().rsplit('/').next().unwrap().to_string();
    let cert = server.cert().unwrap().to_str().unwrap().to_string();
    let url = |host: &str, params: &str| server.tcp_url(host, &name, params);
    let db = |u: &str| std::path::PathBuf::from(u);
    let target = sb.target.to_str().unwrap();
    // sslmode=require: TLS, the self-signed certificate not checked (as libpq).
    let require = url("127.0.0.1", "sslmode=require");
    let run: Vec<&str> =
        "run custom --rw read --bs 64k --size 1MiB --runs 1 --io-size 1MiB --duration 60s \
                          --warmup 0 --quiet --label tls --target"
            .split_whitespace()
            .chain([target])
            .collect();
    with_db(&sb, &db(&require), &run).ok();
    let shown = with_db(&sb, &db(&require), &["show", "1", "--json"])
        .ok()
        .json();
    assert_eq!(shown["label"], "tls", "{shown}");
    let log = server.log();
    assert!(
        log.contains("SSL enabled") && !log.contains("SSL disabled"),
        "every connection used TLS:\n{log}"
    );
    // verify-full against the certificate, by either of its names; verify-ca checks the
    // chain only, so a host name the certificate lacks passes there and not in verify-full.
    for host in ["localhost", "127.0.0.1"] {
        let u = url(host, &format!("sslmode=verify-full&sslrootcert={cert}"));
        let out = with_db(&sb, &db(&u), &["results", "--json"]).ok();
        assert_eq!(out.json().as_array().unwrap().len(), 1, "{u}");
    }
    let other = |mode: &str| {
        url(
            "db.invalid",
            &format!("hostaddr=127.0.0.1&sslmode={mode}&sslrootcert={cert}"),
        )
    };
    with_db(&sb, &db(&other("verify-ca")), &["results"]).ok();
    with_db(&sb, &db(&other("verify-full")), &["results"])
        .code(1)
        .stderr_has(&["(hostname mismatch)", "does not name the URL's host"]);
    // verify-full without the root certificate: the system's roots do not know it. The
    // password stays masked in the error.
    let u = url("localhost", "sslmode=verify-full").replacen("iolab@", "iolab:s3cret@", 1);
    let out = with_db(&sb, &db(&u), &["results"]).code(1);
    out.stderr_has(&[
        "iolab:***@localhost",
        "certificate verify failed",
        "with sslrootcert=FILE",
    ]);
    assert!(!out.stderr.contains("s3cret"), "{out}");
    // Parameters iolab cannot follow: exit 2, named.
    let bad = url("localhost", "sslmode=verify&password=s3cret");
    let out = with_db(&sb, &db(&bad), &["results"]).code(2);
    out.stderr_has(&["sslmode=verify: not an sslmode", "password=***"]);
    assert!(!out.stderr.contains("s3cret"), "{out}");
    // A URL without a host is the caller's to fix, before any connection.
    let out = with_db(&sb, std::path::Path::new("postgresql://"), &["results"]).code(2);
    out.stderr_has(&["the URL names no host"]);
    let missing = sb.dir.path().join("no-such-root.crt");
    let u = url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={}", missing.display()),
    );
    with_db(&sb, &db(&u), &["results"])
        .code(2)
        .stderr_has(&["sslrootcert=", "no-such-root.crt"]);
}

#[test]
fn sslmode_require_never_falls_back_to_a_plain_connection() {
    let Some(server) = tcp_server(false) else {
        return;
    };
    let sb = Sandbox::new();
    let name = server.database().rsplit('/').next().unwrap().to_string();
    let u = server.tcp_url("127.0.0.1", &name, "sslmode=require");
    with_db(&sb, std::path::Path::new(&u), &["results"])
        .code(1)
        .stderr_has(&["server does not support TLS", "never connects in the clear"]);
    // Refused before any startup message: the server never saw iolab log in.
    let log = server.log();
    assert!(!log.contains("application_name=iolab"), "{log}");
    // prefer (the default) falls back to plain; disable never tries TLS. Both connect (a
    // reader then finds the database empty, and creates nothing in it).
    for params in ["", "sslmode=disable"] {
        let u = server.tcp_url("127.0.0.1", &name, params);
        with_db(&sb, std::path::Path::new(&u), &["results"])
            .code(2)
            .stderr_has(&["holds no iolab result store yet"]);
    }
    // A unix socket has no TLS at all: asking for it there is the caller's to fix.
    let u = format!("{}?sslmode=require", server.url(&name));
    with_db(&sb, std::path::Path::new(&u), &["results"])
        .code(2)
        .stderr_has(&["sslmode=require", "no TLS on a unix socket"]);
}
