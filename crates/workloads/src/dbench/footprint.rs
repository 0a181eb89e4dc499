//! What a replay needs before it starts: the most bytes and files one client holds on the
//! filesystem at once (for the free-space check), and the memory its buffers take (for the
//! bound on `--clients`).

use std::collections::HashMap;
use std::path::Path;

use iolab_runner::space::{self, Need};
use iolab_runner::UsageError;
use iolab_spec::format_bytes;

use super::loadfile::{Action, Base, LPath, Loadfile};

/// Refuses a replay of `lf` by `clients` clients in `dir` whose buffers would exceed
/// [`MAX_CLIENT_BUFFERS`] or whose files do not fit on the filesystem (what iolab's own
/// `clients/` already holds there counted as room).
pub fn check(lf: &Loadfile, dir: &Path, clients: u32, verify: bool) -> Result<(), UsageError> {
    let buffers = client_buffer_bytes(lf, verify).saturating_mul(clients as u64);
    if buffers > MAX_CLIENT_BUFFERS {
        return Err(UsageError::option(
            "clients",
            format!(
                "--clients {clients}: every client holds buffers of {} for {}, {} in all, \
                 more than the {} iolab allows; give fewer --clients",
                format_bytes(buffers / clients as u64),
                lf.source().display(),
                format_bytes(buffers),
                format_bytes(MAX_CLIENT_BUFFERS)
            ),
        ));
    }
    let (bytes, files) = peak(lf);
    let need = Need {
        already: space::allocated_under(&dir.join("clients")),
        ..Need::new(
            "clients",
            bytes.saturating_mul(clients as u64),
            files.saturating_add(1).saturating_mul(clients as u64),
        )
    };
    space::check(dir, need)
}

/// The most memory the clients' I/O buffers may take together (each client holds a read
/// buffer of the largest ReadX and, with `--verify`, a write buffer of the largest WriteX).
pub const MAX_CLIENT_BUFFERS: u64 = 4 << 30;

/// The peak of one client's data on the filesystem while it replays `lf` twice over (a
/// loop that leaves files behind shows in the second): every path's size is the end of
/// its furthest WriteX (holes counted as data), Unlink and Deltree free what they remove,
/// Rename moves it. Returns (bytes, files and directories).
pub fn peak(lf: &Loadfile) -> (u64, u64) {
    let key = |p: &LPath| -> Option<String> {
        // Only the client's own directory holds data; `\clients` is shared and only made.
        (p.base == Base::Client).then(|| p.rel.to_string())
    };
    let mut open: HashMap<u32, String> = HashMap::new();
    let mut sizes: HashMap<String, u64> = HashMap::new();
    let (mut total, mut peak_bytes, mut peak_files) = (0u64, 0u64, 0u64);
    let under =
        |k: &str, dir: &str| dir.is_empty() || k == dir || k.starts_with(&format!("{dir}/"));
    for _ in 0..2 {
        for e in &lf.entries {
            match e.action {
                Action::Create { path, fnum, .. } => {
                    if let Some(k) = key(&lf.paths[path as usize]) {
                        sizes.entry(k.clone()).or_insert(0);
                        open.insert(fnum, k);
                    }
                }
                Action::Mkdir { path } => {
                    if let Some(k) = key(&lf.paths[path as usize]) {
                        sizes.entry(k).or_insert(0);
                    }
                }
                Action::Write {
                    fnum, offset, size, ..
                } => {
                    if let Some(s) = open.get(&fnum).and_then(|k| sizes.get_mut(k)) {
                        let end = offset.saturating_add(size as u64);
                        if end > *s {
                            total = total.saturating_add(end - *s);
                            *s = end;
                        }
                    }
                }
                Action::Unlink { path } | Action::Rmdir { path } => {
                    if let Some(k) = key(&lf.paths[path as usize]) {
                        total = total.saturating_sub(sizes.remove(&k).unwrap_or(0));
                    }
                }
                Action::Deltree { path } => {
                    if let Some(dir) = key(&lf.paths[path as usize]) {
                        sizes.retain(|k, s| {
                            let gone = under(k, &dir);
                            if gone {
                                total = total.saturating_sub(*s);
                            }
                            !gone
                        });
                    }
                }
                Action::Rename { from, to } => {
                    let (Some(f), Some(t)) =
                        (key(&lf.paths[from as usize]), key(&lf.paths[to as usize]))
                    else {
                        continue;
                    };
                    let moved: Vec<(String, u64)> = sizes
                        .iter()
                        .filter(|(k, _)| under(k, &f))
                        .map(|(k, s)| (format!("{t}{}", &k[f.len()..]), *s))
                        .collect();
                    sizes.retain(|k, _| !under(k, &f));
                    total = sizes.values().sum::<u64>();
                    for (k, s) in moved {
                        total = total.saturating_add(s);
                        if let Some(old) = sizes.insert(k, s) {
                            total = total.saturating_sub(old);
                        }
                    }
                }
                _ => {}
            }
            peak_bytes = peak_bytes.max(total);
            peak_files = peak_files.max(sizes.len() as u64);
        }
    }
    (peak_bytes, peak_files)
}

/// The memory of one client's buffers: the largest ReadX, and with `verify` the largest
/// WriteX too.
pub fn client_buffer_bytes(lf: &Loadfile, verify: bool) -> u64 {
    let (mut read, mut write) = (0u64, 0u64);
    for e in &lf.entries {
        match e.action {
            Action::Read { size, .. } => read = read.max(size as u64),
            Action::Write { size, .. } => write = write.max(size as u64),
            _ => {}
        }
    }
    read + if verify { write } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lf(text: &str) -> Loadfile {
        Loadfile::parse_str("t.txt", text).unwrap()
    }

    #[test]
    fn writes_grow_files_and_removals_free_them() {
        let l = lf(r#"NTCreateX "\clients\client1\a" 0x0 0x2 1 NT_STATUS_OK
WriteX 1 0 65536 65536 NT_STATUS_OK
WriteX 1 0 4096 4096 NT_STATUS_OK
NTCreateX "\clients\client1\d\b" 0x0 0x2 2 NT_STATUS_OK
WriteX 2 1048576 65536 65536 NT_STATUS_OK
Close 1 NT_STATUS_OK
Close 2 NT_STATUS_OK
Unlink "\clients\client1\a" NT_STATUS_OK
Deltree "\clients\client1\d" NT_STATUS_OK
"#);
        let (bytes, files) = peak(&l);
        assert_eq!(bytes, 65536 + 1048576 + 65536);
        assert_eq!(files, 2);
    }

    #[test]
    fn a_loop_that_leaves_files_shows_in_the_second_pass() {
        let l = lf(r#"NTCreateX "\clients\client1\a" 0x0 0x2 1 NT_STATUS_OK
WriteX 1 0 4096 4096 NT_STATUS_OK
Close 1 NT_STATUS_OK
Rename "\clients\client1\a" "\clients\client1\b" NT_STATUS_OK
"#);
        // The second pass makes `a` again next to the renamed `b`.
        assert_eq!(peak(&l), (8192, 2));
    }

    #[test]
    fn buffers_follow_the_largest_transfers() {
        let l = lf(r#"NTCreateX "\clients\client1\a" 0x0 0x2 1 NT_STATUS_OK
WriteX 1 0 8192 8192 NT_STATUS_OK
ReadX 1 0 4096 4096 NT_STATUS_OK
"#);
        assert_eq!(client_buffer_bytes(&l, false), 4096);
        assert_eq!(client_buffer_bytes(&l, true), 4096 + 8192);
    }
}
