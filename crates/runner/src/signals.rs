//! Ctrl-C, SIGTERM and SIGHUP (a closed terminal). The first one sets the stop flag every
//! loop checks: the run stores what it finished, removes what it created and exits 130. A
//! second one gives up storing but still removes what the run recorded in its run state
//! (test file, verify data and sidecar, the metadata tree, dbench's `clients/`), then exits
//! 130 at once. A third one, while that removal hangs (a dead NFS server), exits without it;
//! what is left is then in the run state for `iolab cleanup`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use iolab_testbed::runstate::RunState;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;
use signal_hook::iterator::Signals;

/// The run state the second signal tears down.
static TEARDOWN: Mutex<Option<RunState>> = Mutex::new(None);

/// What a second signal removes: everything `state` records.
pub fn set_teardown(state: RunState) {
    *TEARDOWN.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
}

/// Installs the handlers and returns the shared stop flag.
pub fn install() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let tearing_down = Arc::new(AtomicBool::new(false));
    // Counted in the handler itself: the thread below may be woken once for two signals
    // that came close together, and the second must still count as a second.
    let received = Arc::new(AtomicUsize::new(0));
    const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
    for sig in SIGNALS {
        // A signal that arrives while the teardown runs ends the process at once.
        flag::register_conditional_shutdown(sig, 130, Arc::clone(&tearing_down))?;
        let count = Arc::clone(&received);
        // SAFETY: the action only increments an atomic, which is async-signal-safe.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                count.fetch_add(1, Ordering::SeqCst);
            })?;
        }
    }
    let mut signals = Signals::new(SIGNALS)?;
    let first = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("iolab-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                let n = received.load(Ordering::SeqCst);
                if n >= 1 {
                    first.store(true, Ordering::SeqCst);
                }
                if n >= 2 {
                    tearing_down.store(true, Ordering::SeqCst);
                    teardown_and_exit();
                }
            }
        })?;
    Ok(stop)
}

/// The second signal: removes what the run recorded, says what, exits 130.
fn teardown_and_exit() -> ! {
    // No thread makes a recorded file again behind the removal (a verify run's sidecar).
    iolab_sys::files::stop_making();
    let state = TEARDOWN.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\niolab: second signal: stopping at once, without storing the end of the run"
    );
    if let Some(st) = state {
        let (removed, failed) = st.remove_all();
        for r in removed {
            let _ = writeln!(err, "iolab: removed {r}");
        }
        for f in &failed {
            let _ = writeln!(err, "iolab: warning: left behind: {f}");
        }
        if !failed.is_empty() {
            let _ = writeln!(
                err,
                "iolab: what is left stays recorded in {}; `iolab cleanup` removes it",
                st.path().display()
            );
        }
    }
    let _ = err.flush();
    // SAFETY: _exit ends the process at once; other threads may be mid-I/O, which is fine
    // (their files are gone or recorded), and no destructor must run after this.
    unsafe { libc::_exit(130) }
}
