//! Sizes, reproducible bytes, medians.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

/// `len` bytes from xorshift64* seeded with `seed`: content nobody writes by accident.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(len);
    v
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// A dbench loadfile of one client's few operations (a file written, read, flushed, queried
/// and removed), for short replays.
pub const DBENCH_TINY_LOADFILE: &str = r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients\client1" NT_STATUS_OK
NTCreateX "\clients\client1\a.dat" 0x40 0x2 3 NT_STATUS_OK
WriteX 3 0 65536 65536 NT_STATUS_OK
ReadX 3 0 4096 4096 NT_STATUS_OK
Flush 3 NT_STATUS_OK
Close 3 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\a.dat" 1004 NT_STATUS_OK
Unlink "\clients\client1\a.dat" 0x6 NT_STATUS_OK
Deltree "\clients\client1" NT_STATUS_OK
"#;
