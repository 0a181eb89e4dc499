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
use signal_hook::iterator::Signals;

/// The run state the second signal tears down.
static TEARDOWN: Mutex<Option<RunState>> = Mutex::new(None);

/// What a second signal removes: everything `state` records.
pub fn set_teardown(state: RunState) {
    *TEARDOWN.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
}

/// Installs the handlers and returns the shared stop flag.
///
/// No signal is lost while they are installed (a study killed as its run starts sends the
/// run SIGTERM at once): the three are blocked in the calling thread until the handlers,
/// their actions and the thread below are all in place, so one that comes meanwhile waits
/// and is taken once they are (the thread, made meanwhile, keeps them blocked: it needs
/// none). Each handler itself counts its signal and sets the stop flag (or, while the
/// teardown runs, ends the process); the thread only does the teardown of a second one.
pub fn install() -> std::io::Result<Arc<AtomicBool>> {
    let _held = Blocked::new(&[SIGINT, SIGTERM, SIGHUP])?;
    let stop = Arc::new(AtomicBool::new(false));
    let tearing_down = Arc::new(AtomicBool::new(false));
    // Counted in the handler itself: the thread below may be woken once for two signals
    // that came close together, and the second must still count as a second.
    let received = Arc::new(AtomicUsize::new(0));
    const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
    for sig in SIGNALS {
        let (count, first, tearing) = (
            Arc::clone(&received),
            Arc::clone(&stop),
            Arc::clone(&tearing_down),
        );
        // SAFETY: the action only reads and writes atomics and may call _exit, all
        // async-signal-safe.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                // A signal that arrives while the teardown runs ends the process at once.
                if tearing.load(Ordering::SeqCst) {
                    signal_hook::low_level::exit(130);
                }
                count.fetch_add(1, Ordering::SeqCst);
                first.store(true, Ordering::SeqCst);
            })?;
        }
    }
    let mut signals = Signals::new(SIGNALS)?;
    std::thread::Builder::new()
        .name("iolab-signals".into())
        .spawn(move || {
            let second = || {
                if received.load(Ordering::SeqCst) >= 2 {
                    tearing_down.store(true, Ordering::SeqCst);
                    teardown_and_exit();
                }
            };
            // Two signals before `signals` listened: acted on at once; any later one
            // wakes the loop.
            second();
            for _ in signals.forever() {
                second();
            }
        })?;
    Ok(stop)
}

/// Signals blocked in the calling thread until dropped, which restores its mask (a signal
/// that came meanwhile is then delivered).
struct Blocked(libc::sigset_t);

impl Blocked {
    fn new(signals: &[i32]) -> std::io::Result<Blocked> {
        // SAFETY: sigemptyset/sigaddset fill a local set; pthread_sigmask changes this
        // thread's mask only and stores the old one in `old`.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
            match libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) {
                0 => Ok(Blocked(old)),
                e => Err(std::io::Error::from_raw_os_error(e)),
            }
        }
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask `new` saved, in the same thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
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
