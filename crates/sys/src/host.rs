//! Which machine this is, as every stored run records it: the host name, and a stable id
//! derived from `/etc/machine-id` that tells two machines of one host name apart.
//!
//! systemd asks that the machine id itself not be published; what iolab records is a
//! one-way hash of it under iolab's own key (`sha256("iolab machine id\n" + id)`, the first
//! 16 hex digits), the way `sd_id128_get_machine_app_specific` derives an application's id:
//! stable for the machine, and it gives the machine id nothing away.

use std::path::Path;

use sha2::{Digest, Sha256};

/// Where the machine id is (`/etc/machine-id`, else D-Bus's copy).
const MACHINE_ID_FILES: &[&str] = &["/etc/machine-id", "/var/lib/dbus/machine-id"];

/// The id of this machine as runs record it, or `None` where no machine id can be read.
pub fn machine_id() -> Option<String> {
    MACHINE_ID_FILES
        .iter()
        .find_map(|f| machine_id_from(Path::new(f)))
}

/// The recorded id of the machine whose id file is `file` (32 hex digits; anything else,
/// or a file over 4 KiB, reads as none).
pub fn machine_id_from(file: &Path) -> Option<String> {
    let bytes = crate::input::read_input(file, 4096).ok()?;
    let id = std::str::from_utf8(&bytes).ok()?.trim();
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(of_machine_id(&id.to_ascii_lowercase()))
}

fn of_machine_id(id: &str) -> String {
    let digest = Sha256::digest(format!("iolab machine id\n{id}").as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_a_stable_hash_not_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("machine-id");
        std::fs::write(&f, "0123456789ABCDEF0123456789abcdef\n").unwrap();
        let id = machine_id_from(&f).unwrap();
        assert_eq!(id.len(), 16);
        assert!(!"0123456789abcdef0123456789abcdef".contains(&id));
        assert_eq!(machine_id_from(&f), Some(id));
        std::fs::write(&f, "uninitialized\n").unwrap();
        assert_eq!(machine_id_from(&f), None);
        assert_eq!(machine_id_from(&dir.path().join("none")), None);
    }
}
