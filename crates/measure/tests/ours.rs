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
    // The busy process not named is seen (it spins the whole sample: well above the 1%
    // listing threshold however loaded the machine); the one named never is.
    let mut seen_other = false;
    for _ in 0..3 {
        seen_other |= sampled(other.id()).is_some();
        assert_eq!(sampled(rank.id()), None);
    }
    for c in [&mut other, &mut rank] {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(
        seen_other,
        "the busy process that is not ours was never seen"
    );
}
