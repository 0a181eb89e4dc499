//! The block pass loop on the null engine: exact numbers of passes, whatever the machine's
//! speed (the null engine completes every I/O at once, so nothing here depends on time).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use iolab_engine::engines::{null::Null, Engine};
use iolab_runner::block::{self, BlockPlan, UntilStable};
use iolab_runner::{CommonArgs, ExitStatus, RunContext};
use iolab_spec::{DataPattern, JobSpec, RunSettings, Rw, TestSpec};

fn plan(runs: u32, warmups: u32, until_stable: Option<UntilStable>) -> BlockPlan {
    let test = |name: &str, rw| TestSpec {
        name: name.into(),
        group: "t".into(),
        job: JobSpec::new(rw, 4096, 4, 1),
    };
    let settings = RunSettings {
        size: 1 << 20,
        duration: Duration::from_millis(100),
        runs,
        warmup_passes: warmups,
        warmup_duration: Duration::from_millis(100),
        ramp: Duration::ZERO,
        engine: Some(Null::DESC.kind),
        direct: false,
        data: DataPattern::Random,
        engine_opts: iolab_spec::engopt::EngineOpts::of([
            ("fixedbufs", iolab_spec::engopt::Val::Flag(false)),
            ("registerfiles", iolab_spec::engopt::Val::Flag(false)),
        ]),
    };
    let tests = vec![test("A", Rw::RandRead), test("B", Rw::Read)];
    let mut p = BlockPlan::new("custom", settings, tests);
    p.until_stable = until_stable;
    p
}

fn run(p: BlockPlan, stop: bool) -> iolab_runner::Finished {
    let dir = tempfile::tempdir().unwrap();
    let common = CommonArgs {
        target: dir.path().to_path_buf(),
        no_store: true,
        quiet: true,
        ..CommonArgs::default()
    };
    let mut ctx = RunContext::detached(common, Arc::new(AtomicBool::new(stop)));
    let outcome = block::run(p, &mut ctx);
    let f = ctx.finish(outcome);
    // The test file the run made is gone.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    f
}

#[test]
fn warm_ups_are_not_stored_and_every_test_gets_exactly_its_passes() {
    let f = run(plan(3, 2, None), false);
    assert_eq!(f.status, ExitStatus::Ok);
    let r = f.run.expect("started");
    assert!(r.complete);
    assert_eq!(r.tests.len(), 2);
    for t in &r.tests {
        let idx: Vec<u32> = t.passes.iter().map(|p| p.index).collect();
        assert_eq!(idx, [1, 2, 3], "{}", t.name);
        assert_eq!(t.summary.passes, 3);
        assert!(t
            .passes
            .iter()
            .all(|p| p.ios > 0 && p.bytes == p.ios * 4096));
        assert_eq!(t.summary.converged, None);
    }
}

#[test]
fn until_stable_stops_at_max_runs_when_the_rule_cannot_be_met() {
    // A CI half-width of 1e-9 % of the median is never reached: exactly max_runs passes.
    let u = UntilStable {
        pct: 1e-9,
        max_runs: 5,
        max_time: Duration::from_secs(3600),
        budget: None,
    };
    let r = run(plan(3, 0, Some(u)), false).run.unwrap();
    for t in &r.tests {
        assert_eq!(t.passes.len(), 5, "{}", t.name);
        assert_eq!(t.summary.converged, Some(false));
    }
}

#[test]
fn a_raised_stop_flag_ends_the_run_interrupted_before_it_starts() {
    // The target's preparation sees the flag: no run is started, nothing is left behind.
    let f = run(plan(3, 1, None), true);
    assert_eq!(f.status, ExitStatus::Interrupted);
    assert!(f.run.is_none());
    assert!(matches!(f.error, Some(iolab_runner::RunError::Interrupted)));
}
