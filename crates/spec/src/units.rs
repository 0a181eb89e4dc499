//! Parsing and printing of sizes (`4k`, `1MiB`, `512`) and durations (`5s`, `500ms`, `2m`).

use std::fmt;
use std::time::Duration;

/// A user-input error: which option, what was given, and why it was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl SpecError {
    pub fn new(field: &str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        SpecError {
            field: field.to_string(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = '{}': {}", self.field, self.value, self.reason)
    }
}

impl std::error::Error for SpecError {}

/// Parses a byte size (docs/cli.md, "Sizes"). One rule, fio's for the bare letters:
/// - `k`, `m`, `g`, `t` (either case) are powers of two: 2^10, 2^20, 2^30, 2^40 bytes;
/// - `KiB`, `MiB`, `GiB`, `TiB` are the same powers of two;
/// - `kB`, `MB`, `GB`, `TB` are powers of ten: 10^3, 10^6, 10^9, 10^12 bytes, as in MB/s;
/// - a bare number, or one with `B`, is bytes.
///
/// The unit is matched without regard to case except that the `i` of the binary units
/// is what makes them binary (`mib` = MiB, `mb` = MB). A fraction is allowed when the
/// result is a whole number of bytes (`1.5g`).
pub fn parse_size(field: &str, text: &str) -> Result<u64, SpecError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(SpecError::new(field, text, "empty size"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(SpecError::new(
            field,
            text,
            "a size starts with a number, e.g. 4k or 1GiB",
        ));
    }
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(SpecError::new(
                field,
                text,
                format!(
                    "unknown unit '{other}' (use k, m, g, t or KiB, MiB, GiB, TiB for powers \
                     of 2; kB, MB, GB, TB for powers of 10)"
                ),
            ))
        }
    };
    // Exact arithmetic (no float: 2^53 and up would round): whole part and fraction apart.
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if frac.contains('.') || (whole.is_empty() && frac.is_empty()) {
        return Err(SpecError::new(field, text, "not a number"));
    }
    let too_big = || {
        SpecError::new(
            field,
            text,
            format!(
                "more than {}, the largest size iolab takes",
                format_bytes(MAX_SIZE)
            ),
        )
    };
    // Leading zeros are harmless; more digits than that cannot be a size iolab takes.
    let whole = whole.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    if whole.len() > 20 {
        return Err(too_big());
    }
    // 26 digits times the largest unit still fit the arithmetic below.
    if frac.len() > 26 {
        return Err(SpecError::new(field, text, "too many decimals"));
    }
    let digits = |d: &str| -> u128 { d.bytes().fold(0, |n, b| n * 10 + u128::from(b - b'0')) };
    let scale = 10u128.pow(frac.len() as u32);
    let frac_bytes = digits(frac) * u128::from(mult);
    if frac_bytes % scale != 0 {
        return Err(SpecError::new(field, text, "not a whole number of bytes"));
    }
    let bytes = digits(whole) * u128::from(mult) + frac_bytes / scale;
    if bytes > u128::from(MAX_SIZE) {
        return Err(too_big());
    }
    Ok(bytes as u64)
}

/// The largest size any option takes: 1 PiB. Larger ones are refused at parse time, so a
/// size times a count (jobs, ranks, streams, files) or rounded up to a block never
/// overflows into a small number.
pub const MAX_SIZE: u64 = 1 << 50;

/// The longest duration any option takes: 7 days. Longer ones are refused at parse time,
/// so no loop, deadline or sample buffer ever sees an absurd number.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses a duration: `5s`, `500ms`, `2m`, `1h`, `1.5s`; a bare number is seconds. At most
/// [`MAX_DURATION`].
pub fn parse_duration(field: &str, text: &str) -> Result<Duration, SpecError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| SpecError::new(field, text, "expected a duration such as 5s, 500ms or 2m"))?;
    let secs = match suffix.trim() {
        "" | "s" | "sec" => value,
        "ms" => value / 1e3,
        "us" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(SpecError::new(
                field,
                text,
                format!("unknown unit '{other}' (use us, ms, s, m or h)"),
            ))
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(SpecError::new(field, text, "out of range"));
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(SpecError::new(
            field,
            text,
            "longer than 7 days, the longest duration iolab takes",
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration in the units people type: `5s`, `1.5s`, `250ms`, `2m`, `90s`.
pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s == 0.0 {
        "0s".to_string()
    } else if s < 1.0 {
        let ms = s * 1000.0;
        if ms.fract() == 0.0 {
            format!("{ms:.0}ms")
        } else {
            format!("{}ms", trim_decimals(ms, 3))
        }
    } else if s >= 120.0 && s % 60.0 == 0.0 {
        format!("{}m", s / 60.0)
    } else {
        format!("{}s", trim_decimals(s, 3))
    }
}

fn trim_decimals(x: f64, decimals: usize) -> String {
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Prints a byte count with a binary unit and up to two decimals: `1 GiB`, `1.5 MiB`, `512 B`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if v.fract() == 0.0 {
        format!("{} {}", v as u64, UNITS[i])
    } else {
        let s = format!("{v:.2}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("{s} {}", UNITS[i])
    }
}

/// [`format_bytes`], and the exact number of bytes when that rounds: `1 GiB`,
/// `61.04 MiB (64000000 bytes)`. For headers, which say what a size option was read as.
pub fn format_bytes_exact(bytes: u64) -> String {
    let short = format_bytes(bytes);
    let exact = {
        let (num, unit) = short.split_once(' ').unwrap_or((&short, "B"));
        let mult: u64 = match unit {
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "TiB" => 1 << 40,
            _ => 1,
        };
        // The printed number has at most two decimals; it is exact when it times the unit
        // gives the bytes back (f64 holds these products exactly).
        num.parse::<f64>()
            .is_ok_and(|n| n * mult as f64 == bytes as f64)
    };
    if exact {
        short
    } else {
        format!("{short} ({bytes} bytes)")
    }
}

/// Short size as used in test names: `512`, `4K`, `128K`, `1M`, `64M` (CrystalDiskMark style).
pub fn format_size_short(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{}G", bytes >> 30)
    } else if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}M", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{}K", bytes >> 10)
    } else {
        format!("{bytes}")
    }
}

/// The longest age [`parse_age`] takes: more is a typo (about 100 years).
const MAX_AGE_SECS: u64 = 100 * 366 * 86_400;

/// An age such as `90d`, `2w`, `12h`, `30m`, `45s`: a whole number above 0 and one unit
/// (`iolab prune --older-than`).
pub fn parse_age(field: &str, text: &str) -> Result<Duration, SpecError> {
    let bad = |why: &str| SpecError::new(field, text, why);
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| bad("expected a whole number and a unit, e.g. 90d, 2w, 12h"))?;
    let secs_per = match unit {
        "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        "" => return Err(bad("give a unit: s, m, h, d or w")),
        other => {
            return Err(bad(&format!(
                "unknown unit '{other}' (use s, m, h, d or w)"
            )))
        }
    };
    if n == 0 {
        return Err(bad("an age of 0 would select runs still being written"));
    }
    n.checked_mul(secs_per)
        .filter(|s| *s <= MAX_AGE_SECS)
        .map(Duration::from_secs)
        .ok_or_else(|| bad("longer than 100 years"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        let day = 86_400;
        assert_eq!(
            parse_age("a", "90d").unwrap(),
            Duration::from_secs(90 * day)
        );
        assert_eq!(parse_age("a", "2w").unwrap(), Duration::from_secs(14 * day));
        assert_eq!(parse_age("a", "30m").unwrap(), Duration::from_secs(1800));
        for bad in [
            "",
            "d",
            "90",
            "0d",
            "1.5d",
            "-3d",
            "9y",
            "99999999999999999999d",
            "500000w",
        ] {
            assert!(parse_age("a", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("bs", "512").unwrap(), 512);
        assert_eq!(parse_size("bs", "4k").unwrap(), 4096);
        assert_eq!(parse_size("bs", "4K").unwrap(), 4096);
        assert_eq!(parse_size("bs", "1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("size", "1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("size", "1.5g").unwrap(), 3 << 29);
        assert!(parse_size("bs", "4q").is_err());
        assert!(parse_size("bs", "").is_err());
        assert!(parse_size("bs", "k").is_err());
        assert!(parse_size("bs", "0.3k").is_err());
        assert!(parse_size("bs", "1.").is_ok());
        assert!(parse_size("bs", ".").is_err());
        assert!(parse_size("bs", "1.2.3").is_err());
        assert_eq!(parse_size("size", "0.5k").unwrap(), 512);
        // 2^40 x 5^19 / 10^19 = 2^21: whole, with 19 decimals.
        assert_eq!(
            parse_size("size", "0.0000019073486328125t").unwrap(),
            2 << 20
        );
        assert_eq!(parse_size("size", "1024t").unwrap(), MAX_SIZE);
    }

    #[test]
    fn sizes_beyond_the_largest_are_refused_not_wrapped() {
        // u64::MAX went through f64 as 2^64 and came back as u64::MAX: a byte limit that
        // rounded up to the block size wrapped to 0 and the run did no I/O.
        for text in [
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999999",
            "1125899906842625",
            "1025t",
            "16777216g",
        ] {
            let e = parse_size("io-size", text).unwrap_err();
            assert_eq!(e.field, "io-size");
            assert!(e.reason.contains("1024 TiB"), "{e}");
        }
        // Exact to the byte up to the largest.
        assert_eq!(
            parse_size("size", "1125899906842623").unwrap(),
            MAX_SIZE - 1
        );
    }

    #[test]
    fn binary_and_decimal_units_mean_what_they_say() {
        for (text, bytes) in [
            ("1k", 1 << 10),
            ("1K", 1 << 10),
            ("1KiB", 1 << 10),
            ("1kib", 1 << 10),
            ("1kB", 1000),
            ("1KB", 1000),
            ("64m", 64 << 20),
            ("64MiB", 64 << 20),
            ("64MB", 64_000_000),
            ("1g", 1 << 30),
            ("1G", 1 << 30),
            ("1GiB", 1 << 30),
            ("1GB", 1_000_000_000),
            ("2t", 2 << 40),
            ("2TB", 2_000_000_000_000),
            ("512B", 512),
            ("1.5GB", 1_500_000_000),
        ] {
            assert_eq!(parse_size("size", text).unwrap(), bytes, "{text}");
        }
        let e = parse_size("size", "1Gb/s").unwrap_err();
        assert!(e.reason.contains("powers of 10"), "{e}");
    }

    #[test]
    fn exact_sizes_show_their_bytes_when_rounded() {
        assert_eq!(format_bytes_exact(1 << 30), "1 GiB");
        assert_eq!(format_bytes_exact(3 << 29), "1.5 GiB");
        assert_eq!(
            format_bytes_exact((1 << 30) + 1),
            "1 GiB (1073741825 bytes)"
        );
        assert_eq!(format_bytes_exact(64_000_000), "61.04 MiB (64000000 bytes)");
        assert_eq!(format_bytes_exact(512), "512 B");
        assert_eq!(format_bytes_exact(1000), "1000 B");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("d", "5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("d", "5").unwrap(), Duration::from_secs(5));
        assert_eq!(
            parse_duration("d", "250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(parse_duration("d", "2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("d", "fast").is_err());
        assert!(parse_duration("d", "7d")
            .unwrap_err()
            .reason
            .contains("unit"));
        assert_eq!(parse_duration("d", "168h").unwrap(), MAX_DURATION);
        for huge in ["168.001h", "1000000h", "99999999999999h", "1e400", "inf"] {
            let e = parse_duration("duration", huge).unwrap_err();
            assert_eq!(e.field, "duration", "{huge}");
        }
    }

    #[test]
    fn printing() {
        assert_eq!(format_bytes(1 << 30), "1 GiB");
        assert_eq!(format_bytes(3 << 19), "1.5 MiB");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_size_short(512), "512");
        assert_eq!(format_size_short(4096), "4K");
        assert_eq!(format_size_short(64 << 20), "64M");
    }
}
