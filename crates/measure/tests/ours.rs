//! `count_as_ours`: processes named as the run's own (the other ranks of an MPI run on this
//! machine) are not other processes' CPU. Its own test binary: the setting is once per
//! process.

use std::process::Command;
use std::time::Duration;

use iolab_measure::{count_as_ours, ActivitySample};

fn busy_child() -> std::process::Child {
    Command::new("sh")
        .arg("-c")
        .arg("i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done")
        .spawn()
        .unwrap()
}

/// The child's share of a CPU in a 300 ms sample, or None when the sample leaves it out.
fn sampled(pid: u32) -> Option<f64> {
    let a = ActivitySample::now();
    std::thread::sleep(Duration::from_millis(300));
    let b = ActivitySample::now();
    let act = a.until(&b, &[]);
    act.top_processes
        .iter()
        .find(|p| p.pid == pid)
        .map(|p| p.cpu_pct)
}

#[test]
fn a_process_counted_as_ours_is_not_another_process() {
    let mut other = busy_child();
    let mut rank = busy_child();
    assert!(count_as_ours(vec![rank.id()]));
    assert!(!count_as_ours(vec![other.id()]), "set once");
    // Every sample reads the process not named and leaves out the one named. (Whether the
    // one not named is also among the three busiest depends on what else runs: under a
    // build of 14 runnable tasks it was not, in three samples.)
    for _ in 0..3 {
        let s = ActivitySample::now();
        assert!(
            s.counts_as_other(other.id()),
            "the other process is not read"
        );
        assert!(!s.counts_as_other(rank.id()), "the named process is read");
        assert_eq!(sampled(rank.id()), None);
    }
    for c in [&mut other, &mut rank] {
        let _ = c.kill();
        let _ = c.wait();
    }
}
