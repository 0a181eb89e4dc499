//! Ctrl-C, SIGTERM and SIGHUP (a closed terminal): the first sets the stop flag every loop checks (so the run stores
//! what it finished and removes its test file); a second one exits at once.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::flag;

/// Installs the handlers and returns the shared stop flag.
pub fn install() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM, SIGHUP] {
        // Order matters: the shutdown check runs first, so the first signal only sets the
        // flag and the second one (flag already set) terminates.
        flag::register_conditional_shutdown(sig, 130, Arc::clone(&stop))?;
        flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}
