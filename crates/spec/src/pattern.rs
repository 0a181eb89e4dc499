//! fio's `verify_pattern`: a fixed byte pattern every write carries, repeated over the I/O,
//! with the I/O's offset pasted where the pattern says `%o`; reads of a verifying job are
//! checked against it byte by byte.

use serde::{Deserialize, Serialize};

/// The longest pattern fio takes (its `MAX_PATTERN_SIZE`), in bytes.
pub const MAX_PATTERN: usize = 512;
/// Bytes `%o` stands for: the I/O's offset, little-endian.
const OFFSET_LEN: usize = 8;

/// A parsed `verify_pattern`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    /// The pattern as the job file gives it.
    pub text: String,
    /// Its bytes, with zeros where an offset goes.
    pub bytes: Vec<u8>,
    /// Where each `%o` starts in `bytes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<usize>,
    /// Reads are checked against it (a job that verifies and reads).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check_reads: bool,
}

/// A byte that differs from the pattern: where in the buffer, what was there, what should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    pub at: usize,
    pub found: u8,
    pub expected: u8,
}

impl Pattern {
    /// Reads fio's pattern syntax: hex numbers (`0xaa555aa5`: the bytes as written),
    /// decimal numbers (-2^31..2^31-1: their little-endian bytes up to the highest that is
    /// not zero, four for a negative one, one zero byte for 0), strings in double quotes
    /// and `%o`, one after another, at most [`MAX_PATTERN`] bytes.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let mut bytes = Vec::new();
        let mut offsets = Vec::new();
        let mut rest = text.trim();
        if rest.is_empty() {
            return Err("an empty pattern".into());
        }
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix('"') {
                let end = r
                    .find('"')
                    .ok_or_else(|| format!("'{text}': a string without its closing quote"))?;
                if end == 0 {
                    return Err(format!("'{text}': an empty string in the pattern"));
                }
                bytes.extend_from_slice(&r.as_bytes()[..end]);
                rest = &r[end + 1..];
            } else if rest.starts_with('\'') {
                return Err(format!(
                    "'{text}': a pattern read from a file is not supported (give the bytes)"
                ));
            } else if let Some(r) = rest.strip_prefix("%o") {
                offsets.push(bytes.len());
                bytes.extend_from_slice(&[0; OFFSET_LEN]);
                rest = r;
            } else if rest.starts_with('%') {
                return Err(format!(
                    "'{text}': the only format is %o (the block's offset)"
                ));
            } else if let Some(r) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
                let mut n = r.bytes().take_while(u8::is_ascii_hexdigit).count();
                // "0xff0x14" is two numbers: the digits stop before the next 0x.
                if n < r.len() && n > 0 && matches!(r.as_bytes()[n], b'x' | b'X') {
                    n -= 1;
                }
                if n == 0 {
                    return Err(format!("'{text}': 0x without hex digits"));
                }
                let digits = &r[..n];
                // An odd count: the first digit alone is the first byte, as fio reads it.
                let (first, pairs) = digits.split_at(n % 2);
                if !first.is_empty() {
                    bytes.push(u8::from_str_radix(first, 16).expect("a hex digit"));
                }
                for i in (0..pairs.len()).step_by(2) {
                    bytes.push(u8::from_str_radix(&pairs[i..i + 2], 16).expect("hex digits"));
                }
                rest = &r[n..];
            } else {
                let sign = usize::from(rest.starts_with('-') || rest.starts_with('+'));
                let digits = rest[sign..].bytes().take_while(u8::is_ascii_digit).count();
                // A decimal stops where a hex number starts ("100xab": 10, then 0xab).
                let mut n = sign + digits;
                if n < rest.len() && digits > 0 && matches!(rest.as_bytes()[n], b'x' | b'X') {
                    n -= 1;
                }
                if n == sign {
                    return Err(format!(
                        "'{text}': expected a number, a \"string\" or %o at '{}'",
                        rest.chars().take(16).collect::<String>()
                    ));
                }
                let v: i64 = rest[..n]
                    .parse()
                    .ok()
                    .filter(|v| (i32::MIN as i64..=i32::MAX as i64).contains(v))
                    .ok_or_else(|| {
                        format!("'{}': a decimal is -2147483648..2147483647", &rest[..n])
                    })?;
                let mut u = v as i32 as u32;
                if u == 0 {
                    bytes.push(0);
                }
                while u != 0 {
                    bytes.push(u as u8);
                    u >>= 8;
                }
                rest = &rest[n..];
            }
            if bytes.len() > MAX_PATTERN {
                return Err(format!(
                    "'{}...': longer than fio's {MAX_PATTERN} bytes",
                    text.chars().take(24).collect::<String>()
                ));
            }
        }
        Ok(Pattern {
            text: text.trim().to_string(),
            bytes,
            offsets,
            check_reads: false,
        })
    }

    /// The pattern once, with `offset` pasted at each `%o`, in `unit`; its length.
    fn unit(&self, offset: u64, unit: &mut [u8; MAX_PATTERN]) -> usize {
        let n = self.bytes.len();
        unit[..n].copy_from_slice(&self.bytes);
        for &at in &self.offsets {
            unit[at..at + OFFSET_LEN].copy_from_slice(&offset.to_le_bytes());
        }
        n
    }

    /// Fills `buf`, the data of an I/O at `offset`, with the pattern from its start.
    pub fn fill(&self, buf: &mut [u8], offset: u64) {
        let mut unit = [0u8; MAX_PATTERN];
        let n = self.unit(offset, &mut unit).min(buf.len());
        buf[..n].copy_from_slice(&unit[..n]);
        // Double what is filled until the buffer is full.
        let mut filled = n;
        while filled < buf.len() {
            let k = filled.min(buf.len() - filled);
            buf.copy_within(..k, filled);
            filled += k;
        }
    }

    /// The first byte of `buf` (the data of an I/O at `offset`) that is not the pattern's.
    pub fn mismatch(&self, buf: &[u8], offset: u64) -> Option<Mismatch> {
        let mut unit = [0u8; MAX_PATTERN];
        let n = self.unit(offset, &mut unit);
        // The first period is the pattern and the buffer repeats with its period: two
        // compares (as fio's cmp_pattern); the byte is looked for only when one fails.
        let head = n.min(buf.len());
        if buf[..head] == unit[..head] && (buf.len() <= n || buf[n..] == buf[..buf.len() - n]) {
            return None;
        }
        for (c, chunk) in buf.chunks(n).enumerate() {
            if chunk != &unit[..chunk.len()] {
                let i = chunk
                    .iter()
                    .zip(&unit[..chunk.len()])
                    .position(|(a, b)| a != b)
                    .expect("a chunk that differs has a byte that does");
                return Some(Mismatch {
                    at: c * n + i,
                    found: chunk[i],
                    expected: unit[i],
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(t: &str) -> Vec<u8> {
        Pattern::parse(t).unwrap().bytes
    }

    #[test]
    fn fios_examples_of_its_syntax() {
        assert_eq!(bytes("0xaa555aa5"), [0xaa, 0x55, 0x5a, 0xa5]);
        assert_eq!(bytes("\"abcd\""), *b"abcd");
        assert_eq!(bytes("-1024"), [0x00, 0xfc, 0xff, 0xff]);
        assert_eq!(bytes("66"), [0x42]);
        assert_eq!(bytes("0"), [0]);
        assert_eq!(bytes("0xFF0X1"), [0xff, 0x01]);
        assert_eq!(
            bytes("\"123\"0xFFeeCC"),
            [b'1', b'2', b'3', 0xff, 0xee, 0xcc]
        );
        let p = Pattern::parse("-100xab\"1\"%o\"2\"").unwrap();
        assert_eq!(
            p.bytes,
            [0xf6, 0xff, 0xff, 0xff, 0xab, b'1', 0, 0, 0, 0, 0, 0, 0, 0, b'2']
        );
        assert_eq!(p.offsets, [6]);
        assert_eq!(bytes("0xabc"), [0x0a, 0xbc]);
        for bad in [
            "",
            "0x",
            "\"abc",
            "\"\"",
            "%d",
            "'/etc/passwd'",
            "zz",
            "4294967296",
            "0xg1",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
        assert!(Pattern::parse(&format!("0x{}", "ab".repeat(513))).is_err());
        assert!(Pattern::parse(&format!("0x{}", "ab".repeat(512))).is_ok());
    }

    #[test]
    fn fills_and_finds_the_first_wrong_byte() {
        let p = Pattern::parse("0xaa555aa5").unwrap();
        let mut buf = vec![0u8; 4099];
        p.fill(&mut buf, 0);
        assert_eq!(&buf[..8], [0xaa, 0x55, 0x5a, 0xa5, 0xaa, 0x55, 0x5a, 0xa5]);
        assert_eq!(buf[4098], 0x5a);
        assert_eq!(p.mismatch(&buf, 0), None);
        buf[1000] ^= 1;
        assert_eq!(
            p.mismatch(&buf, 0),
            Some(Mismatch {
                at: 1000,
                found: 0xab,
                expected: 0xaa
            })
        );
        let o = Pattern::parse("%o\"x\"").unwrap();
        let mut buf = vec![0u8; 18];
        o.fill(&mut buf, 0x1234);
        assert_eq!(&buf[..9], [0x34, 0x12, 0, 0, 0, 0, 0, 0, b'x']);
        assert_eq!(&buf[9..11], [0x34, 0x12]);
        assert_eq!(o.mismatch(&buf, 0x1234), None);
        assert_eq!(o.mismatch(&buf, 0x1235).map(|m| m.at), Some(0));
    }
}
