//! Multi-host runs on MPI (docs/mpi.md). Without the `mpi` feature: a binary started by an
//! MPI launcher refuses to run alone. With it (`cargo test -p iolab --features mpi --test
//! mpi`): real mpirun, real ranks on one machine: the aggregate is the ranks' sum, every
//! rank's file goes, the stored run has every rank; a blkio throttle gives the aggregate's
//! ground truth; network namespaces make three hosts; a failing or killed rank ends the run
//! on every rank.

#[cfg(not(feature = "mpi"))]
#[test]
fn a_build_without_mpi_started_by_mpirun_says_how_to_rebuild() {
    let sb = iolab_testkit::Sandbox::new();
    for var in ["OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMIX_RANK"] {
        let out = sb
            .cmd(&["run", "custom", "--size", "1m", "--duration", "100ms"])
            .env(var, "2")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{var}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(var) && err.contains("--features mpi"), "{err}");
        assert!(sb.target_entries().is_empty());
        assert!(!sb.db.exists(), "nothing is stored");
    }
}

#[test]
fn shared_file_and_stonewall_outside_mpirun_are_refused() {
    let sb = iolab_testkit::Sandbox::new();
    for opt in ["--shared-file", "--stonewall"] {
        let t = sb.target.to_str().unwrap();
        let args = [
            "run",
            "custom",
            "--size",
            "1m",
            "--duration",
            "100ms",
            "--target",
            t,
        ];
        let out = sb.cmd(&args).arg(opt).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{opt}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(opt) && err.contains("MPI run"), "{err}");
        assert!(sb.target_entries().is_empty());
    }
}

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Output, Stdio};
    use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
    use std::time::Duration;

    use iolab_testkit::{require_devices, require_root, require_tools, sh, skip, Cgroup, Loop};
    use iolab_testkit::{throttle_bound, CpuWait};
    use iolab_testkit::{Mount, Sandbox, MIB};
    use serde_json::Value;

    /// `mpirun -np N [mpi_args] iolab <args> --db r.db`: as root, allowed to run as root;
    /// more ranks than cores allowed.
    fn mpirun(sb: &Sandbox, np: u32, mpi_args: &[&str], args: &[&str]) -> Command {
        mpirun_cmd(np, mpi_args, &sb.cmd(args))
    }

    /// `mpirun -np N [mpi_args] CMD`, with CMD's environment. Each mpirun gets a session
    /// directory base of its own: two that start at once as the same user race to create
    /// /tmp/ompi.HOST.UID, and the loser stops ("A call to mkdir was unable to create the
    /// desired directory ... File exists", seen with five suites side by side). Open MPI
    /// empties it at exit; the base stays in cargo's directory for tests' files.
    fn mpirun_cmd(np: u32, mpi_args: &[&str], cmd: &Command) -> Command {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("ompi-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let mut c = Command::new("mpirun");
        c.env("OMPI_MCA_orte_tmpdir_base", &base);
        c.args(["--oversubscribe", "-np", &np.to_string()])
            .args(mpi_args)
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .stdin(Stdio::null());
        c
    }

    /// Every test here starts four or more ranks on two cores, and Open MPI's ranks spin
    /// while they wait. A test whose truth is a throttle's exact cap runs alone: a rank
    /// starved of the CPU for longer than its queue lasts (8 x 128 KiB = 200 ms at 5 MiB/s)
    /// leaves its throttle idle, and blk-throttle does not give idle time back (CI: one
    /// rank read 76 of 80 I/Os in its 2 s window while the other mpirun tests ran beside).
    static CPU: RwLock<()> = RwLock::new(());

    /// A test that shares the CPU with the other mpirun tests (none of which runs alone).
    fn shared() -> RwLockReadGuard<'static, ()> {
        CPU.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A ground-truth test: no other mpirun test runs beside it.
    fn alone() -> RwLockWriteGuard<'static, ()> {
        CPU.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// mpirun is here, and the CPU is shared with the other tests that are not alone.
    fn have_mpirun() -> Option<RwLockReadGuard<'static, ()>> {
        require_tools(&["mpirun"]).then(shared)
    }

    fn text(o: &Output) -> String {
        format!(
            "status {:?}\nstdout:\n{}\nstderr:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    }

    /// The JSON document of stored run `id`.
    fn stored(sb: &Sandbox, id: &str) -> Value {
        let out = sb.iolab(&["show", id, "--json"]).ok();
        serde_json::from_str(&out.stdout).expect("show --json")
    }

    fn num(v: &Value) -> f64 {
        v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
    }

    /// A block run's passes: as [`check_phase_sums`], and every rank moved bytes in each.
    fn check_sums(doc: &Value, ranks: usize) {
        for row in doc["env"]["mpi"]["passes"].as_array().unwrap() {
            let per = row["ranks"].as_array().unwrap();
            assert!(
                per.iter().all(|p| p["bytes"].as_u64().unwrap() > 0),
                "{row}"
            );
        }
        check_phase_sums(doc, ranks);
    }

    /// The run's passes (a metadata or dbench run's phases): each one's operations (`ios`)
    /// and bytes are the sums of its ranks', its ops/s and MB/s those sums over (last end −
    /// first start), and the test's pass is the same aggregate. Returns each pass's (test,
    /// operations of every rank).
    fn check_phase_sums(doc: &Value, ranks: usize) -> Vec<(String, Vec<u64>)> {
        let mpi = &doc["env"]["mpi"];
        assert_eq!(mpi["ranks"].as_array().unwrap().len(), ranks, "{mpi}");
        let tests = doc["tests"].as_array().unwrap();
        let rows = mpi["passes"].as_array().unwrap();
        let n_passes: usize = tests
            .iter()
            .map(|t| t["passes"].as_array().unwrap().len())
            .sum();
        assert_eq!(rows.len(), n_passes, "{mpi}");
        let mut out = Vec::new();
        for row in rows {
            let per: Vec<&Value> = row["ranks"].as_array().unwrap().iter().collect();
            assert_eq!(per.len(), ranks);
            let ios: Vec<u64> = per.iter().map(|p| p["ios"].as_u64().unwrap()).collect();
            let bytes: u64 = per.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
            assert_eq!(
                row["ios"].as_u64().unwrap(),
                ios.iter().sum::<u64>(),
                "{row}"
            );
            assert_eq!(row["bytes"].as_u64().unwrap(), bytes, "{row}");
            let first = per
                .iter()
                .map(|p| num(&p["start_s"]))
                .fold(f64::MAX, f64::min);
            let last = per
                .iter()
                .map(|p| num(&p["end_s"]))
                .fold(f64::MIN, f64::max);
            let span = (last - first).max(1e-9);
            let iops = ios.iter().sum::<u64>() as f64 / span;
            assert!((num(&row["iops"]) - iops).abs() <= iops * 1e-9, "{row}");
            let mb_s = bytes as f64 / 1e6 / span;
            assert!((num(&row["mb_s"]) - mb_s).abs() <= mb_s * 1e-9, "{row}");
            let test = tests.iter().find(|t| t["name"] == row["test"]).unwrap();
            let pass = test["passes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["index"] == row["index"])
                .unwrap();
            assert_eq!(pass["ios"], row["ios"]);
            assert_eq!(pass["bytes"], row["bytes"]);
            assert!((num(&pass["mb_s"]) - mb_s).abs() <= mb_s * 1e-9, "{pass}");
            out.push((row["test"].as_str().unwrap().to_string(), ios));
        }
        out
    }

    /// The workload of most tests here: 2 passes of 300 ms writing 128 KiB blocks to a
    /// 4 MiB file per rank.
    const WRITE: [&str; 12] = [
        "run",
        "custom",
        "--rw",
        "write",
        "--bs",
        "128k",
        "--size",
        "4m",
        "--duration",
        "300ms",
        "--runs",
        "2",
    ];

    /// [`WRITE`] with each pass ending after 1 MiB of each rank's 4 (a minute is a bound
    /// never reached), for a test that checks every rank moved bytes in every pass
    /// ([`check_sums`]): beside a disk hog a rank's 300 ms pass once completed no 128 KiB
    /// write.
    fn sized_write() -> Vec<&'static str> {
        let mut args = WRITE.to_vec();
        args[9] = "60s";
        args.extend(["--io-size", "1m"]);
        args
    }

    /// `np` ranks write 2 passes of 1 MiB each ([`sized_write`]), each its own 4 MiB file in
    /// the sandbox's target; rank 0's JSON document (its stdout carries nothing else).
    fn short_run(sb: &Sandbox, np: u32, mpi_args: &[&str]) -> Value {
        let t = sb.target.to_str().unwrap();
        let mut args = sized_write();
        args.extend(["--target", t, "--quiet", "--json", "-"]);
        let out = mpirun(sb, np, mpi_args, &args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).expect("rank 0's JSON only")
    }

    /// `cmd` run by `sh -c SCRIPT`, the script ending in `exec "$0" "$@"`.
    fn through_sh(script: &str, cmd: &Command) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(script)
            .arg(cmd.get_program())
            .args(cmd.get_args())
            .envs(cmd.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .stdin(Stdio::null());
        c
    }

    #[test]
    fn ranks_add_up_to_the_aggregate_and_leave_nothing() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let sb = Sandbox::new();
        let doc = short_run(&sb, 3, &[]);
        check_sums(&doc, 3);
        assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
        // Stored once, by rank 0, with every rank.
        assert_eq!(sb.result_rows().len(), 1);
        let st = stored(&sb, "last");
        check_sums(&st, 3);
        let notes = st["notes"].to_string();
        assert!(notes.contains("mpi: 3 ranks on 1 host(s)"), "{notes}");
    }

    /// 3 ranks run `args`, rank `rank` with a target that does not exist (a host without
    /// the share mounted): the run ends on every rank, nothing is left in the target, and
    /// rank 0 stores it as failed naming the rank and its host; the failure.
    fn without_target(rank: u32, args: &[&str]) -> String {
        let sb = Sandbox::new();
        let missing = sb.path("nowhere").join("dir");
        let script = format!(
            "t={}; [ \"$OMPI_COMM_WORLD_RANK\" = {rank} ] && t={}; exec \"$0\" \"$@\" --target \"$t\"",
            sb.target.display(),
            missing.display()
        );
        let out = mpirun_cmd(3, &[], &through_sh(&script, &sb.cmd(args)))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
        let st = stored(&sb, "last");
        assert_eq!(st["complete"], false);
        let host = st["env"]["mpi"]["ranks"][rank as usize]["host"]
            .as_str()
            .unwrap();
        let failure = failure_note(&st);
        assert!(
            failure.contains(&format!("rank {rank} on {host}")),
            "{failure}"
        );
        failure
    }

    /// Rank 0's stored failure note.
    fn failure_note(st: &Value) -> String {
        st["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str()?.strip_prefix("failed: "))
            .next()
            .unwrap_or_else(|| panic!("no failure note: {}", st["notes"]))
            .to_string()
    }

    #[test]
    fn an_mpi_run_stores_into_a_postgresql_store() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let Some(server) = iolab_testkit::require_postgres() else {
            return;
        };
        let sb = Sandbox::new();
        let url = server.database();
        let mut cmd = Command::new(iolab_testkit::iolab::iolab_bin());
        cmd.args(sized_write())
            .args([
                "--target",
                sb.target.to_str().unwrap(),
                "--quiet",
                "--db",
                &url,
            ])
            .env("HOME", sb.path(""));
        let out = mpirun_cmd(2, &[], &cmd).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        // Rank 0 stored the one run, with every rank's figures.
        let mut show = Command::new(iolab_testkit::iolab::iolab_bin());
        let listed = show
            .args(["results", "--json", "--db", &url])
            .output()
            .unwrap();
        let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
        let id = listed[0]["id"].to_string();
        let doc = Command::new(iolab_testkit::iolab::iolab_bin())
            .args(["show", &id, "--json", "--db", &url])
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&doc.stdout).unwrap();
        assert!(doc["complete"].as_bool().unwrap(), "{doc}");
        check_sums(&doc, 2);
    }

    #[test]
    fn a_rank_that_fails_ends_the_run_on_every_rank() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let mut args = WRITE.to_vec();
        args.push("--quiet");
        let failure = without_target(2, &args);
        assert!(failure.contains("does not exist"), "{failure}");
    }

    /// The pid in a rank's file or directory name (`iolab-mpi-rankR-HOST-PID.dat`, dbench's
    /// `iolab-mpi-rankR-HOST-PID`).
    fn rank_file(dir: &Path, rank: u32) -> Option<(PathBuf, i32)> {
        std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix(&format!("iolab-mpi-rank{rank}-"))?;
            let pid = rest
                .strip_suffix(".dat")
                .unwrap_or(rest)
                .rsplit('-')
                .next()?
                .parse()
                .ok()?;
            Some((e.path(), pid))
        })
    }

    fn wait_for<T>(what: &str, child: &mut Child, mut f: impl FnMut() -> Option<T>) -> T {
        loop {
            if let Some(v) = f() {
                return v;
            }
            if let Some(s) = child.try_wait().unwrap() {
                panic!("mpirun ended ({s}) before {what}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// 3 ranks run `args` (a run that lasts 30 s); once rank 0 stored the start of the run
    /// and every rank made its file or directory in the target, rank 2 is killed with
    /// SIGKILL. Every rank ends, nothing is left in the target, and the run is stored as
    /// failed naming rank 2, its host and its pid.
    fn kill_rank_2(sb: &Sandbox, args: &[&str]) {
        let mut child = mpirun(
            sb,
            3,
            // mpirun stops the survivors 2 s after a rank is gone and kills them 2 s later
            // (1 s by default): time to stop, remove their files and store the run.
            &[
                "--bind-to",
                "none",
                "--mca",
                "odls_base_sigkill_timeout",
                "2",
            ],
            args,
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        wait_for("the run is stored", &mut child, || {
            (!sb.result_rows().is_empty()).then_some(())
        });
        let files: Vec<(PathBuf, i32)> = (0..3)
            .map(|r| wait_for("every rank's file", &mut child, || rank_file(&sb.target, r)))
            .collect();
        let victim = files[2].1;
        sh("kill", &["-9", &victim.to_string()]);
        let out = child.wait_with_output().unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        for (_, pid) in &files {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit_once(')')
                .map(|(_, s)| s.trim_start().chars().next());
            assert!(
                matches!(state, None | Some(Some('Z' | 'X'))),
                "rank pid {pid} still runs: {stat} (victim {victim})"
            );
        }
        // The survivors removed theirs, and rank 0 what the killed rank left.
        assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
        let st = stored(sb, "last");
        assert_eq!(st["complete"], false);
        let host = st["env"]["mpi"]["ranks"][2]["host"].as_str().unwrap();
        let failure = failure_note(&st);
        assert!(
            failure.contains(&format!("rank 2 on {host} (pid {victim}) ended")),
            "{failure}\n{}",
            text(&out)
        );
    }

    #[test]
    fn a_rank_killed_mid_pass_ends_the_run_on_every_rank() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        if !require_root("killing a rank of mpirun") {
            return;
        }
        let sb = Sandbox::new();
        let t = sb.target.to_str().unwrap();
        // The first pass is 30 s long: the kill lands in it.
        let mut args = WRITE.to_vec();
        args[9] = "30s";
        args.extend(["--target", t, "--quiet"]);
        kill_rank_2(&sb, &args);
    }

    /// Passes of 100 ms, hundreds of them: the ranks spend much of the run at the barrier
    /// around each pass, so the kill mostly lands while rank 0 waits there for rank 2. Rank
    /// 0 then gave up waiting at mpirun's SIGTERM and stored the run as interrupted, with
    /// no note naming the rank that died.
    #[test]
    fn a_rank_killed_between_short_passes_is_named() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        if !require_root("killing a rank of mpirun") {
            return;
        }
        let sb = Sandbox::new();
        let t = sb.target.to_str().unwrap();
        let mut args = WRITE.to_vec();
        args[9] = "100ms";
        args[11] = "500";
        args.extend(["--warmup", "0", "--target", t, "--quiet"]);
        kill_rank_2(&sb, &args);
    }

    /// ext4 on a direct-I/O loop device of `mib` MiB, a directory `t` in it, and a blkio
    /// cgroup (`iolab-mpi-PID{suffix}`) capping the device's reads at `bps`.
    struct ThrottledFs {
        // Dropped in this order: unmounted before the loop device is detached.
        _mnt: Mount,
        _dev: Loop,
        dir: PathBuf,
        cg: Cgroup,
    }

    impl ThrottledFs {
        fn new(mib: u64, bps: u64, suffix: &str) -> ThrottledFs {
            // In memory: a disk writer beside the test must not slow the backing file
            // below the cap.
            let dev = Loop::in_memory(mib * MIB, &["--direct-io=on"]);
            sh("mkfs.ext4", &["-q", "-F", dev.s()]);
            let mnt = Mount::new(dev.s(), &[]);
            let dir = mnt.path().join("t");
            std::fs::create_dir(&dir).unwrap();
            let cg = Cgroup::blkio(&format!("iolab-mpi-{}{suffix}", std::process::id()));
            cg.set(
                "blkio.throttle.read_bps_device",
                &format!("{} {bps}", dev.majmin()),
            );
            ThrottledFs {
                _mnt: mnt,
                _dev: dev,
                dir,
                cg,
            }
        }
    }

    #[test]
    fn four_ranks_under_one_throttle_add_up_to_the_cap() {
        let Some(_lock) = require_devices(&["mkfs.ext4", "mpirun"]) else {
            return;
        };
        let _alone = alone();
        if !Cgroup::blkio_available() {
            skip!("no cgroup-v1 blkio hierarchy at {}", Cgroup::BLKIO);
        }
        const BPS: u64 = 20 * MIB; // 20 MiB/s = 20.97 MB/s
        let fs = ThrottledFs::new(160, BPS, "");
        let (dir, cg) = (&fs.dir, &fs.cg);
        let sb = Sandbox::new();
        let cmd = mpirun(
            &sb,
            4,
            &[],
            &[
                "run",
                "custom",
                "--rw",
                "read",
                "--bs",
                "128k",
                "--iodepth",
                "4",
                "--size",
                "16m",
                "--duration",
                "3s",
                "--ramp",
                "300ms",
                "--runs",
                "2",
                "--target",
                dir.to_str().unwrap(),
                "--quiet",
                "--json",
                "-",
            ],
        );
        // mpirun, its daemon and every rank in the throttled cgroup.
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"",
            cg.dir.display()
        );
        let wait = CpuWait::start();
        let out = through_sh(&script, &cmd).output().unwrap();
        let wait_s = wait.us() / 1e6;
        assert!(out.status.success(), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        check_sums(&doc, 4);
        let truth = BPS as f64 / 1e6;
        let got = num(&doc["tests"][0]["summary"]["mb_s"]);
        let rows = doc["env"]["mpi"]["passes"].as_array().unwrap();
        for row in rows {
            let per: f64 = ranks(row).iter().map(|p| num(&p["mb_s"])).sum();
            println!(
                "pass {}: aggregate {:.3} MB/s, ranks' rates sum to {per:.3}, start skew {:.1} ms",
                row["index"],
                num(&row["mb_s"]),
                num(&row["start_skew_s"]) * 1e3
            );
            near_cap(
                "a pass's ranks together",
                per,
                truth,
                wait_s,
                std::slice::from_ref(row),
            );
        }
        // Every rank's work over its time, summed: the throttle's share of each.
        let pooled: f64 = (0..ranks(&rows[0]).len())
            .map(|r| pooled_rank(rows, r))
            .sum();
        near_cap("the ranks over both passes", pooled, truth, wait_s, rows);
        println!("aggregate median {got:.3} MB/s vs cap {truth:.3} MB/s");
        near_cap("the aggregate median", got, truth, wait_s, &rows[..1]);
        assert!(std::fs::read_dir(dir).unwrap().next().is_none());
    }

    #[test]
    fn four_ranks_each_throttled_on_its_own_device_add_up_to_four_caps() {
        let Some(_lock) = require_devices(&["mkfs.ext4", "mpirun"]) else {
            return;
        };
        let _alone = alone();
        if !Cgroup::blkio_available() {
            skip!("no cgroup-v1 blkio hierarchy at {}", Cgroup::BLKIO);
        }
        const BPS: u64 = 5 * MIB; // 5 MiB/s = 5.24 MB/s a rank
        let mut devices = Vec::new();
        let mut case = String::new();
        for r in 0..4 {
            let fs = ThrottledFs::new(64, BPS, &format!("-{r}"));
            case.push_str(&format!(
                "{r}) echo $$ > {}/cgroup.procs && t={} ;; ",
                fs.cg.dir.display(),
                fs.dir.display()
            ));
            devices.push(fs);
        }
        let sb = Sandbox::new();
        let iolab = sb.cmd(&[
            "run",
            "custom",
            "--rw",
            "read",
            "--bs",
            "128k",
            "--iodepth",
            "8",
            "--size",
            "8m",
            "--duration",
            "2s",
            "--ramp",
            "300ms",
            "--runs",
            "2",
            "--quiet",
            "--json",
            "-",
        ]);
        // Each rank joins its own cgroup and runs on its own device.
        let script = format!(
            "case $OMPI_COMM_WORLD_RANK in {case} *) exit 9 ;; esac; \
             exec \"$0\" \"$@\" --target \"$t\""
        );
        let wrapped = through_sh(&script, &iolab);
        let wait = CpuWait::start();
        let out = mpirun_cmd(4, &["--bind-to", "none"], &wrapped)
            .output()
            .unwrap();
        let wait_s = wait.us() / 1e6;
        assert!(out.status.success(), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        check_sums(&doc, 4);
        let cap = BPS as f64 / 1e6;
        let rows = doc["env"]["mpi"]["passes"].as_array().unwrap();
        for row in rows {
            let per: Vec<f64> = ranks(row).iter().map(|p| num(&p["mb_s"])).collect();
            println!("pass {}: ranks {per:.3?} MB/s", row["index"]);
        }
        // Each rank's work over its time in both passes against its own device's cap.
        for r in 0..ranks(&rows[0]).len() {
            let label = format!("rank {r} over both passes");
            near_cap(&label, pooled_rank(rows, r), cap, wait_s, rows);
        }
        let got = num(&doc["tests"][0]["summary"]["mb_s"]);
        println!("aggregate median {got:.3} MB/s vs 4 x {cap:.3}");
        near_cap("the aggregate median", got, 4.0 * cap, wait_s, &rows[..1]);
        for fs in &devices {
            assert!(std::fs::read_dir(&fs.dir).unwrap().next().is_none());
        }
    }

    /// The ranks' entries of one row of `env.mpi.passes`.
    fn ranks(row: &Value) -> &Vec<Value> {
        row["ranks"].as_array().expect("a pass row's ranks")
    }

    /// Rank `r`'s bytes over its seconds in every pass of `rows`, in MB/s.
    fn pooled_rank(rows: &[Value], r: usize) -> f64 {
        let (bytes, seconds) = rows.iter().fold((0.0, 0.0), |(b, s), row| {
            let p = &ranks(row)[r];
            (b + num(&p["bytes"]), s + num(&p["seconds"]))
        });
        bytes / 1e6 / seconds
    }

    /// Asserts that `got` MB/s lies within the throttle's bound of `cap` for the passes of
    /// `rows` (their seconds, and the CPU wait `wait_s` measured around mpirun), never
    /// tighter than 3% (the ranks start a few ms apart).
    fn near_cap(what: &str, got: f64, cap: f64, wait_s: f64, rows: &[Value]) {
        let seconds: f64 = rows.iter().map(|row| num(&row["seconds"])).sum();
        let (below, above) = throttle_bound(wait_s, seconds, rows.len());
        let (below, above) = (below.max(0.03), above.max(0.03));
        let err = (got - cap) / cap;
        println!(
            "{what}: {got:.3} MB/s vs {cap:.3} ({:+.2}%; allowed -{:.1}% to +{:.1}% after a \
             CPU wait of {wait_s:.3} s)",
            err * 100.0,
            below * 100.0,
            above * 100.0
        );
        assert!(
            err <= above && -err <= below,
            "{what}: {got} MB/s is not within -{:.1}%/+{:.1}% of {cap}",
            below * 100.0,
            above * 100.0
        );
    }

    /// ext4 on a direct-I/O loop device of 96 MiB, initialised now (ext4lazyinit once
    /// wrote 15.5 MiB the ranks did not move during a pass, beside five suites and
    /// stress-ng, and BUSY_DEVICE said so), with an empty directory `t` in it.
    struct DirectExt4 {
        // Dropped in this order: unmounted before the loop device is detached.
        _mnt: Mount,
        dev: Loop,
        dir: PathBuf,
    }

    impl DirectExt4 {
        fn new() -> DirectExt4 {
            let dev = Loop::with_options(96 * MIB, &["--direct-io=on"]);
            iolab_testkit::mkfs_ext4_initialised(dev.s());
            let mnt = Mount::new(dev.s(), &[]);
            let dir = mnt.path().join("t");
            std::fs::create_dir(&dir).unwrap();
            DirectExt4 {
                _mnt: mnt,
                dev,
                dir,
            }
        }
    }

    /// The BUSY_DEVICE / BUSY_CPU warnings of a 2-rank direct read on `dir`.
    fn busy_warnings(sb: &Sandbox, dir: &Path) -> Vec<(String, String)> {
        busy_warnings_through(sb, dir, None)
    }

    /// [`busy_warnings`], each rank started through the shell `script` (see
    /// [`through_sh`]) when there is one.
    fn busy_warnings_through(
        sb: &Sandbox,
        dir: &Path,
        script: Option<&str>,
    ) -> Vec<(String, String)> {
        let iolab = sb.cmd(&[
            "run",
            "custom",
            "--rw",
            "randread",
            "--bs",
            "128k",
            "--iodepth",
            "4",
            "--size",
            "16m",
            "--duration",
            "1s",
            "--runs",
            "2",
            "--target",
            dir.to_str().unwrap(),
            "--quiet",
            "--json",
            "-",
        ]);
        let cmd = match script {
            Some(script) => through_sh(script, &iolab),
            None => iolab,
        };
        let out = cmd_output(mpirun_cmd(2, &["--bind-to", "none"], &cmd));
        let doc: Value = serde_json::from_slice(&out).unwrap();
        assert!(
            doc["notes"].to_string().contains("judged per machine"),
            "{}",
            doc["notes"]
        );
        doc["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w["code"].as_str().unwrap().to_string(),
                    w["message"].as_str().unwrap().to_string(),
                )
            })
            .filter(|(c, _)| c.starts_with("BUSY_"))
            .collect()
    }

    fn cmd_output(mut cmd: Command) -> Vec<u8> {
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        out.stdout
    }

    #[test]
    fn busy_device_is_judged_per_machine_and_the_ranks_are_not_each_others_load() {
        let Some(_lock) = require_devices(&["mkfs.ext4", "mpirun", "dd"]) else {
            return;
        };
        let _cpu = shared();
        let fs = DirectExt4::new();
        let (dev, dir) = (&fs.dev, &fs.dir);
        let sb = Sandbox::new();
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        // Alone on the device: two ranks' reads are the run's own, not a shared device.
        // (BUSY_CPU may fire on a busy machine: other tests' processes are other processes;
        // that the ranks are not each other's load is measure's tests/ours.rs.)
        let quiet = busy_warnings(&sb, dir);
        println!("alone: {quiet:?}");
        assert!(quiet.iter().all(|(c, _)| c != "BUSY_DEVICE"), "{quiet:?}");
        // With someone else reading the same device, the warning names this host.
        let mut reader = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while :; do dd if={} of=/dev/null bs=1M count=64 iflag=direct status=none; done",
                dev.s()
            ))
            .spawn()
            .unwrap();
        let shared = busy_warnings(&sb, dir);
        let _ = Command::new("pkill")
            .args(["-P", &reader.id().to_string()])
            .status();
        let _ = reader.kill();
        let _ = reader.wait();
        println!("with dd: {shared:?}");
        let name = dev.dev.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            shared
                .iter()
                .any(|(c, m)| c == "BUSY_DEVICE"
                    && m.starts_with(&format!("on {host}: {name} moved"))),
            "{shared:?}"
        );
        assert!(std::fs::read_dir(dir).unwrap().next().is_none());
    }

    #[test]
    fn a_rank_still_laying_out_is_not_someone_else_on_the_device() {
        let Some(_lock) = require_devices(&["mkfs.ext4", "mpirun"]) else {
            return;
        };
        let _cpu = shared();
        if !Cgroup::blkio_available() {
            skip!("no cgroup-v1 blkio hierarchy at {}", Cgroup::BLKIO);
        }
        let fs = DirectExt4::new();
        let (dev, dir) = (&fs.dev, &fs.dir);
        // Both ranks read at 4 MiB/s, so a pass moves a known few MiB; rank 1 also writes
        // at 4 MiB/s, so its 16 MiB layout lasts 4 s after rank 0's is done. Rank 0 waits
        // for it at the first pass's barrier: those 16 MiB are the run's own, in no pass.
        let pid = std::process::id();
        let cgs = [
            Cgroup::blkio(&format!("iolab-mpi-layout-{pid}-0")),
            Cgroup::blkio(&format!("iolab-mpi-layout-{pid}-1")),
        ];
        let rate = format!("{} {}", dev.majmin(), 4 * MIB);
        for cg in &cgs {
            cg.set("blkio.throttle.read_bps_device", &rate);
        }
        cgs[1].set("blkio.throttle.write_bps_device", &rate);
        let script = format!(
            "case $OMPI_COMM_WORLD_RANK in 0) echo $$ > {}/cgroup.procs ;; \
             1) echo $$ > {}/cgroup.procs ;; *) exit 9 ;; esac; exec \"$0\" \"$@\"",
            cgs[0].dir.display(),
            cgs[1].dir.display()
        );
        let sb = Sandbox::new();
        let warnings = busy_warnings_through(&sb, dir, Some(&script));
        println!("rank 1 laying out slowly: {warnings:?}");
        assert!(
            warnings.iter().all(|(c, _)| c != "BUSY_DEVICE"),
            "{warnings:?}"
        );
        assert!(std::fs::read_dir(dir).unwrap().next().is_none());
    }

    #[test]
    fn a_mismatch_another_rank_finds_is_in_the_stored_run() {
        use std::os::unix::fs::FileExt;
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let sb = Sandbox::new();
        let dir = sb.target.clone();
        // Another writer keeps zeroing blocks 16..24 of rank 1's file while the ranks run.
        let (from, to) = (16 * 4096u64, 24 * 4096u64);
        let done = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicU64::new(0));
        let corrupter = {
            let (done, hits, dir) = (Arc::clone(&done), Arc::clone(&hits), dir.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if let Some((path, _)) = rank_file(&dir, 1) {
                        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(path) {
                            let long = f.metadata().is_ok_and(|m| m.len() >= to);
                            if long && f.write_all_at(&vec![0; (to - from) as usize], from).is_ok()
                            {
                                hits.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        };
        let out = mpirun(
            &sb,
            2,
            &["--bind-to", "none"],
            &[
                "run",
                "custom",
                "--rw",
                "randwrite",
                "--bs",
                "4k",
                "--size",
                "4MiB",
                "--iodepth",
                "8",
                "--io-size",
                "64MiB",
                "--duration",
                "120s",
                "--warmup",
                "0",
                "--runs",
                "1",
                "--verify",
                "--target",
                dir.to_str().unwrap(),
                "--quiet",
                "--json",
                "-",
            ],
        )
        .output()
        .unwrap();
        done.store(true, Ordering::Relaxed);
        corrupter.join().unwrap();
        assert!(
            hits.load(Ordering::Relaxed) > 0,
            "the corrupter never wrote"
        );
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let v = &doc["tests"][0]["extra"]["verify"];
        let failures = v["failures"].as_u64().unwrap();
        assert!(failures > 0, "{v}");
        // Rank 0's file was left alone: every failure is rank 1's, and the run says so.
        let note = format!("--verify found {failures} of ");
        assert!(
            doc["notes"].as_array().unwrap().iter().any(|n| n
                .as_str()
                .unwrap()
                .starts_with("mpi: rank 1 on ")
                && n.as_str().unwrap().contains(&note)),
            "{}",
            doc["notes"]
        );
        assert!(
            doc["warnings"].to_string().contains("DATA_MISMATCH"),
            "{}",
            doc["warnings"]
        );
        for s in v["failure_samples"].as_array().unwrap() {
            let off = s["offset"].as_u64().unwrap();
            assert!((from..to).contains(&off), "{s}");
        }
        // Stored as rank 0 printed it.
        let stored = stored(&sb, "last");
        assert_eq!(stored["tests"][0]["extra"]["verify"]["failures"], failures);
        assert!(sb.target_entries().is_empty());
    }

    /// Three network namespaces on a bridge, each a "host" with its own name; removed on
    /// drop.
    struct Hosts {
        bridge: String,
        names: Vec<String>,
        agent: PathBuf,
        hostfile: PathBuf,
        _dir: tempfile::TempDir,
    }

    /// The subnet of the bridge and the namespaces (the bridge is .254).
    const NET: &str = "10.251.0";

    impl Hosts {
        fn new() -> Hosts {
            let id = std::process::id() % 100_000;
            let dir = iolab_testkit::scratch_dir();
            let h = Hosts {
                bridge: format!("iolabbr{id}"),
                names: (1..=3).map(|i| format!("iolab{id}h{i}")).collect(),
                agent: dir.path().join("agent.sh"),
                hostfile: dir.path().join("hosts"),
                _dir: dir,
            };
            let ip = |args: &[&str]| sh("ip", args);
            ip(&["link", "add", &h.bridge, "type", "bridge"]);
            ip(&["addr", "add", &format!("{NET}.254/24"), "dev", &h.bridge]);
            ip(&["link", "set", &h.bridge, "up"]);
            for (i, ns) in h.names.iter().enumerate() {
                ip(&["netns", "add", ns]);
                let veth = format!("iolabv{id}x{i}");
                ip(&[
                    "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
                ]);
                ip(&["link", "set", &veth, "master", &h.bridge, "up"]);
                let addr = format!("{NET}.{}/24", i + 1);
                ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"]);
                ip(&["-n", ns, "link", "set", "eth0", "up"]);
                ip(&["-n", ns, "link", "set", "lo", "up"]);
            }
            // mpirun's launcher: `agent HOST COMMAND...` runs COMMAND in the namespace HOST,
            // under its own host name.
            std::fs::write(
                &h.agent,
                "#!/bin/sh\nns=\"$1\"; shift\nexec ip netns exec \"$ns\" unshare --uts sh -c \
                 'hostname \"$0\" && eval \"$1\"' \"$ns\" \"$*\"\n",
            )
            .unwrap();
            sh("chmod", &["+x", h.agent.to_str().unwrap()]);
            let lines: Vec<String> = h.names.iter().map(|n| format!("{n} slots=2\n")).collect();
            std::fs::write(&h.hostfile, lines.concat()).unwrap();
            h
        }

        /// mpirun's options to start ranks on these hosts, TCP on the bridge only.
        fn mpi_args(&self) -> Vec<String> {
            let net = format!("{NET}.0/24");
            [
                "--hostfile",
                self.hostfile.to_str().unwrap(),
                "--mca",
                "plm_rsh_agent",
                self.agent.to_str().unwrap(),
                "--mca",
                "oob_tcp_if_include",
                &net,
                "--mca",
                "btl",
                "tcp,self",
                "--mca",
                "btl_tcp_if_include",
                &net,
                // The daemons start from the launcher, without mpirun's environment.
                "-x",
                "XDG_DATA_HOME",
                "-x",
                "HOME",
                "-x",
                "OMPI_ALLOW_RUN_AS_ROOT",
                "-x",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        }
    }

    impl Drop for Hosts {
        fn drop(&mut self) {
            for ns in &self.names {
                let _ = iolab_testkit::try_sh("ip", &["netns", "del", ns]);
            }
            let _ = iolab_testkit::try_sh("ip", &["link", "del", &self.bridge]);
        }
    }

    #[test]
    fn three_hosts_show_in_the_per_host_results() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        if !require_root("network namespaces") || !require_tools(&["ip", "unshare"]) {
            return;
        }
        let hosts = Hosts::new();
        let sb = Sandbox::new();
        let mpi_args = hosts.mpi_args();
        let mpi_args: Vec<&str> = mpi_args.iter().map(String::as_str).collect();
        let doc = short_run(&sb, 6, &mpi_args);
        check_sums(&doc, 6);
        let mpi = &doc["env"]["mpi"];
        let got: Vec<&str> = mpi["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["host"].as_str().unwrap())
            .collect();
        assert_eq!(got, hosts.names, "{mpi}");
        for h in mpi["hosts"].as_array().unwrap() {
            assert_eq!(h["ranks"].as_array().unwrap().len(), 2, "{h}");
        }
        // The per-host note of the stored run names every host with its rate (whole
        // under --verbose: a report longer than a screen cuts its notes to one line).
        let shown = sb.iolab(&["show", "last", "--verbose"]).ok().stdout;
        let line: String = shown
            .split("mpi per host")
            .nth(1)
            .unwrap_or_else(|| panic!("no per-host line:\n{shown}"))
            .split("\n  -")
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for h in &hosts.names {
            assert!(line.contains(&format!("{h} ")), "{h} missing: {line}");
        }
        // And the per-host table: a row per host, then all hosts.
        let table = shown
            .split("Per host (MPI):")
            .nth(1)
            .unwrap_or_else(|| panic!("no per-host table:\n{shown}"));
        for h in hosts.names.iter().map(String::as_str).chain(["all hosts"]) {
            assert!(
                table.lines().any(|l| l.contains(h)),
                "{h} missing:\n{table}"
            );
        }
        assert!(sb.target_entries().is_empty());
    }

    #[test]
    fn a_shared_file_gives_each_rank_its_own_region() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let sb = Sandbox::new();
        let t = sb.target.to_str().unwrap();
        let mut args = sized_write();
        // --verify: every rank stamps its writes and reads its region back after every
        // pass; a rank writing outside its region spoils another's read-back (and any
        // rank's failed check fails the run).
        args.extend(["--target", t, "--quiet", "--json", "-", "--verify"]);
        args.push("--shared-file");
        let out = mpirun(&sb, 3, &["--bind-to", "none"], &args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        check_sums(&doc, 3);
        let shared = doc["env"]["mpi"]["shared_file"].as_str().unwrap();
        assert!(
            Path::new(shared).parent() == Some(sb.target.as_path()),
            "{shared}"
        );
        let notes = doc["notes"].to_string();
        assert!(
            notes.contains(&format!("one shared file {shared} of 12 MiB (3 ranks)")),
            "{notes}"
        );
        let v = &doc["tests"][0]["extra"]["verify"];
        assert_eq!(v["failures"], 0, "{v}");
        assert!(v["checked"].as_u64().unwrap() > 0, "{v}");
        // Rank 0 removed the file.
        assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
    }

    /// 3 ranks read 4 MiB per pass (--io-size): rank 1 on a device throttled to 64 MiB/s,
    /// ranks 0 and 2 on one throttled to 4 MiB/s between them; rank 0's JSON document.
    fn uneven_reads(stonewall: bool) -> Option<Value> {
        let lock = require_devices(&["mkfs.ext4", "mpirun"])?;
        let cpu = shared();
        if !Cgroup::blkio_available() {
            skip!(=> None, "no cgroup-v1 blkio hierarchy at {}", Cgroup::BLKIO);
        }
        let (fast, slow) = (
            Loop::in_memory(64 * MIB, &["--direct-io=on"]),
            Loop::in_memory(64 * MIB, &["--direct-io=on"]),
        );
        let cg = Cgroup::blkio(&format!("iolab-mpi-wall-{}", std::process::id()));
        let mut mounts = Vec::new();
        for (dev, bps) in [(&fast, 64 * MIB), (&slow, 4 * MIB)] {
            sh("mkfs.ext4", &["-q", "-F", dev.s()]);
            let m = Mount::new(dev.s(), &[]);
            cg.set(
                "blkio.throttle.read_bps_device",
                &format!("{} {bps}", dev.majmin()),
            );
            mounts.push(m);
        }
        let sb = Sandbox::new();
        let (f, s) = (mounts[0].path(), mounts[1].path());
        // mpirun, its daemon and every rank in the throttled cgroup; rank 1 on the fast
        // device.
        let cgroup = format!(
            "echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"",
            cg.dir.display()
        );
        let target = format!(
            "t={}; [ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && t={}; exec \"$0\" \"$@\" --target \"$t\"",
            s.display(),
            f.display()
        );
        let mut args: Vec<&str> = "run custom --rw read --bs 128k --size 8m --io-size 4m \
                                    --duration 20s --runs 2 --quiet --json -"
            .split_whitespace()
            .collect();
        if stonewall {
            args.push("--stonewall");
        }
        let rank = through_sh(&target, &sb.cmd(&args));
        let cmd = mpirun_cmd(3, &["--bind-to", "none"], &rank);
        let script = cgroup;
        let out = through_sh(&script, &cmd).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        for m in [f, s] {
            assert!(std::fs::read_dir(m)
                .unwrap()
                .all(|e| { e.unwrap().file_name() == "lost+found" }));
        }
        drop(mounts);
        drop(cpu);
        drop(lock);
        Some(serde_json::from_slice(&out.stdout).unwrap())
    }

    /// Each measured pass's rows: (bytes, end_s, stonewalled) of ranks 0, 1, 2.
    fn rank_rows(doc: &Value) -> Vec<Vec<(u64, f64, bool)>> {
        doc["env"]["mpi"]["passes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row["ranks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        let wall = p["stonewalled"].as_bool().unwrap();
                        (p["bytes"].as_u64().unwrap(), num(&p["end_s"]), wall)
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn stonewall_ends_every_pass_when_the_first_rank_is_done() {
        let Some(walled) = uneven_reads(true) else {
            return;
        };
        let Some(plain) = uneven_reads(false) else {
            return;
        };
        const IO: u64 = 4 * MIB;
        assert_eq!(walled["env"]["mpi"]["stonewall"], true);
        assert_eq!(plain["env"]["mpi"]["stonewall"], false);
        check_sums(&walled, 3);
        check_sums(&plain, 3);
        let w = rank_rows(&walled);
        assert_eq!(w.len(), 2, "{}", walled["env"]["mpi"]);
        for p in &w {
            println!("stonewalled pass: (bytes, end s, stonewalled) by rank: {p:?}");
            // The fast rank did its 4 MiB by itself; the slow ones were stopped short.
            assert_eq!((p[1].0, p[1].2), (IO, false), "{p:?}");
            for r in [0, 2] {
                assert!(p[r].2 && p[r].0 < IO, "{p:?}");
            }
        }
        for p in &rank_rows(&plain) {
            println!("plain pass: (bytes, end s, stonewalled) by rank: {p:?}");
            // Every rank does its 4 MiB; the slow ranks end after the fast one.
            assert!(p.iter().all(|r| r.0 == IO && !r.2), "{p:?}");
            assert!(p[0].1 > p[1].1 && p[2].1 > p[1].1, "{p:?}");
        }
        // The aggregate rests on the stonewalled bytes.
        let bytes = |d: &Value| d["env"]["mpi"]["passes"][0]["bytes"].as_u64().unwrap();
        assert!(bytes(&walled) < 3 * IO && bytes(&plain) == 3 * IO);
    }

    const FILES: u64 = 40;

    #[test]
    fn metadata_ranks_add_up_to_each_phase_and_leave_nothing() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let sb = Sandbox::new();
        let t = sb.target.to_str().unwrap();
        let files = FILES.to_string();
        let args = [
            "run", "metadata", "--files", &files, "--dirs", "3", "--target", t, "--quiet",
            "--json", "-",
        ];
        let out = mpirun(&sb, 3, &["--bind-to", "none"], &args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("rank 0's JSON only");
        let phases = check_phase_sums(&doc, 3);
        let names: Vec<&str> = phases.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["create", "stat", "read", "rename", "delete"]);
        for (test, ios) in &phases {
            println!("metadata {test}: operations by rank {ios:?}");
            // Every rank did every one of its files; the aggregate is their sum.
            assert_eq!(ios, &vec![FILES; 3], "{test}");
            let t = doc["tests"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == *test)
                .unwrap();
            assert_eq!(t["extra"]["ops"].as_u64(), Some(3 * FILES), "{test}");
        }
        assert_eq!(doc["env"]["mpi"]["host_unit"], "ops/s");
        // Each rank's tree is gone.
        assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
        assert_eq!(sb.result_rows().len(), 1);
        let st = stored(&sb, "last");
        check_phase_sums(&st, 3);
        let shown = sb.iolab(&["show", "last"]).ok().stdout;
        let table = shown
            .split("Per host (MPI):")
            .nth(1)
            .unwrap_or_else(|| panic!("no per-host table:\n{shown}"));
        assert!(
            table.contains("ops/s") && table.contains("all hosts"),
            "{table}"
        );
    }

    /// `run dbench` with 2 clients on the testkit's tiny loadfile (written next to the
    /// target), for
    /// `duration` after a 200 ms warm-up, `runs` replays.
    fn dbench_args(sb: &Sandbox, duration: &str, runs: &str) -> Vec<String> {
        let lf = sb.path("client.txt");
        std::fs::write(&lf, iolab_testkit::DBENCH_TINY_LOADFILE).unwrap();
        let lf = lf.to_str().unwrap();
        format!(
            "run dbench --loadfile {lf} --clients 2 --duration {duration} --warmup 200ms \
             --runs {runs} --quiet"
        )
        .split_whitespace()
        .map(String::from)
        .collect()
    }

    #[test]
    fn dbench_ranks_add_up_to_each_replay_and_leave_nothing() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let sb = Sandbox::new();
        let mut args = dbench_args(&sb, "500ms", "2");
        args.extend(["--target", sb.target.to_str().unwrap(), "--json", "-"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = mpirun(&sb, 2, &["--bind-to", "none"], &args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).expect("rank 0's JSON only");
        let replays = check_phase_sums(&doc, 2);
        assert_eq!(replays.len(), 2);
        for (test, ios) in &replays {
            println!("{test}: ReadX + WriteX by rank {ios:?}");
        }
        assert_eq!(doc["env"]["mpi"]["host_unit"], "MB/s");
        let extra = &doc["tests"][0]["extra"];
        let last = doc["tests"][0]["passes"][1]["mb_s"].as_f64().unwrap();
        assert_eq!(extra["throughput_mb_s"].as_f64(), Some(last));
        // The operation table is every rank's last replay: its ReadX and WriteX counts are
        // that pass's operations, summed over the ranks.
        let count = |op: &str| {
            extra["ops"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["op"] == op)
                .map_or(0, |o| o["count"].as_u64().unwrap())
        };
        let last_ios = doc["tests"][0]["passes"][1]["ios"].as_u64().unwrap();
        assert_eq!(count("ReadX") + count("WriteX"), last_ios, "{extra}");
        assert_eq!(replays[1].1.iter().sum::<u64>(), last_ios);
        assert!(doc["notes"].to_string().contains("are every rank's"));
        // Each rank's directory (and its clients' in it) is gone.
        assert!(sb.target_entries().is_empty(), "{:?}", sb.target_entries());
        assert_eq!(sb.result_rows().len(), 1);
        check_phase_sums(&stored(&sb, "last"), 2);
    }

    #[test]
    fn a_metadata_rank_without_its_target_ends_the_run_on_every_rank() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        let failure = without_target(1, &["run", "metadata", "--files", "40", "--quiet"]);
        assert!(failure.contains("needs an existing directory"), "{failure}");
    }

    #[test]
    fn a_dbench_rank_killed_mid_replay_ends_the_run_on_every_rank() {
        let Some(_cpu) = have_mpirun() else {
            return;
        };
        if !require_root("killing a rank of mpirun") {
            return;
        }
        let sb = Sandbox::new();
        // 30 s measured: the kill lands in the replay.
        let mut args = dbench_args(&sb, "30s", "1");
        args.extend(["--target", sb.target.to_str().unwrap()].map(String::from));
        kill_rank_2(&sb, &args.iter().map(String::as_str).collect::<Vec<_>>());
    }
}
