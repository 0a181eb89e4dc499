//! `iolab serve`: opens the store read-only (once to check it, then once per worker of
//! `iolab_serve`), listens, prints where, and serves until stopped.

use std::io::Write as _;
use std::net::TcpListener;
use std::sync::Arc;

use iolab_runner::RunError;
use iolab_serve::auth;
use iolab_store::Store;

use crate::args::ServeArgs;
use crate::error::open_store;

pub fn serve(a: ServeArgs) -> Result<(), RunError> {
    let (token, generated) = match a.token {
        Some(t) => {
            auth::check_token(&t).map_err(|e| RunError::usage(e.to_string()))?;
            (Some(t), false)
        }
        None if !iolab_serve::is_loopback(&a.listen) => (Some(auth::generate()), true),
        None => (None, false),
    };
    // A store that cannot be read is an error now, not on the first page.
    let store = open_store(&a.db)?;
    let (path, runs) = (store.path().display().to_string(), store.count_runs()?);
    drop(store);
    let listener = TcpListener::bind(a.listen)
        .map_err(|e| RunError::caused(format!("cannot listen on {}", a.listen), e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| RunError::caused(format!("cannot listen on {}", a.listen), e))?;
    println!(
        "iolab serve: {runs} run{} in {path} (read-only)",
        if runs == 1 { "" } else { "s" }
    );
    match &token {
        Some(t) => {
            if generated {
                println!(
                    "token (generated: {} is not loopback; choose one with --token): {t}",
                    a.listen
                );
            }
            println!("open http://{addr}/runs?token={t}");
        }
        None => println!("open http://{addr}/runs (loopback only)"),
    }
    let _ = std::io::stdout().flush();
    let db = a.db.db.clone().unwrap_or_else(iolab_store::default_db_path);
    let open: Arc<iolab_serve::Opener> = Arc::new(move || Store::open_read_only(&db));
    let e = iolab_serve::serve(listener, token, open);
    Err(RunError::caused("iolab serve stopped", e))
}
