//! fio's numbers as a job file writes them. Sizes: a decimal or `0x` number with an
//! optional unit, read by `kb_base` as fio does: with 1024 (fio's default) `k`, `kb`, `m`,
//! `mb`... are powers of 2 and `kib`, `mib`... powers of 10 (fio's compatibility mode);
//! with 1000 it is the other way round. Times: a number with `us`, `ms`, `s`, `m`, `h` or
//! `d`, a bare number in the option's own unit (seconds, or microseconds for `thinktime`).
//! Each function returns a message; the caller adds `FILE:LINE: OPTION`.

use std::time::Duration;

use crate::units::MAX_DURATION;

/// Splits `text` into its number and its unit.
fn split_number(text: &str) -> Result<(f64, &str), String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("no value".into());
    }
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let end = hex
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(hex.len());
        let v = u64::from_str_radix(&hex[..end], 16)
            .map_err(|_| format!("'{t}': not a hexadecimal number"))?;
        return Ok((v as f64, hex[end..].trim()));
    }
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let num = &t[..end];
    if num.is_empty() {
        return Err(format!("'{t}': expected a number"));
    }
    let v: f64 = num.parse().map_err(|_| format!("'{t}': not a number"))?;
    Ok((v, t[end..].trim()))
}

/// A byte size in fio's units under `kb_base` (1024 or 1000).
pub fn size(text: &str, kb_base: u64) -> Result<u64, String> {
    let (v, unit) = split_number(text)?;
    let u = unit.to_ascii_lowercase();
    let (power, iec) = match u.as_str() {
        "" | "b" => (0, false),
        "k" | "kb" => (1, false),
        "m" | "mb" => (2, false),
        "g" | "gb" => (3, false),
        "t" | "tb" => (4, false),
        "p" | "pb" => (5, false),
        "kib" => (1, true),
        "mib" => (2, true),
        "gib" => (3, true),
        "tib" => (4, true),
        "pib" => (5, true),
        _ => {
            return Err(format!(
                "'{}': unknown unit '{unit}' (k, m, g, t, p, with b or ib)",
                text.trim()
            ))
        }
    };
    // kb_base=1024: SI-looking units are binary and IEC ones decimal (fio's compatibility
    // mode); kb_base=1000: as the names say.
    let binary = (kb_base == 1024) != iec;
    let base: f64 = if binary { 1024.0 } else { 1000.0 };
    let bytes = v * base.powi(power);
    if !bytes.is_finite() || bytes > (1u64 << 62) as f64 {
        return Err(format!("'{}': too large", text.trim()));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("'{}': not a whole number of bytes", text.trim()));
    }
    Ok(bytes as u64)
}

/// A time; a bare number is in `default_unit_us` microseconds.
pub fn time(text: &str, default_unit_us: u64) -> Result<Duration, String> {
    let (v, unit) = split_number(text)?;
    let us_per: f64 = match unit.to_ascii_lowercase().as_str() {
        "" => default_unit_us as f64,
        "us" | "usec" => 1.0,
        "ms" | "msec" => 1e3,
        "s" | "sec" => 1e6,
        "m" | "min" => 60e6,
        "h" => 3600e6,
        "d" => 86400e6,
        _ => {
            return Err(format!(
                "'{}': unknown time unit '{unit}' (us, ms, s, m, h, d)",
                text.trim()
            ))
        }
    };
    let secs = v * us_per / 1e6;
    if !secs.is_finite() || secs > MAX_DURATION.as_secs_f64() {
        return Err(format!(
            "'{}': longer than 7 days, the longest time iolab takes",
            text.trim()
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A whole number between `lo` and `hi`.
pub fn int(text: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let t = text.trim();
    let v: u64 = t
        .parse()
        .map_err(|_| format!("'{t}': expected a whole number"))?;
    if v < lo || v > hi {
        return Err(format!("'{t}': must be between {lo} and {hi}"));
    }
    Ok(v)
}

/// A boolean: a bare option is true; else 0 or 1.
pub fn boolean(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("1") => Ok(true),
        Some("0") => Ok(false),
        Some(other) => Err(format!("'{other}': expected 0 or 1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_kb_base() {
        assert_eq!(size("4k", 1024), Ok(4096));
        assert_eq!(size("4K", 1024), Ok(4096));
        assert_eq!(size("1m", 1024), Ok(1 << 20));
        assert_eq!(size("10G", 1024), Ok(10 << 30));
        assert_eq!(size("1KiB", 1024), Ok(1000));
        assert_eq!(size("1k", 1000), Ok(1000));
        assert_eq!(size("1KiB", 1000), Ok(1024));
        assert_eq!(size("0x1000", 1024), Ok(4096));
        assert_eq!(size("512", 1024), Ok(512));
        assert_eq!(size("1.5m", 1024), Ok(3 << 19));
        assert!(size("4q", 1024).is_err());
        assert!(size("", 1024).is_err());
        assert!(size("99999999p", 1024).is_err());
        assert!(size("0.1k", 1024).is_err());
    }

    #[test]
    fn times_have_a_default_unit() {
        assert_eq!(time("60", 1_000_000), Ok(Duration::from_secs(60)));
        assert_eq!(time("250", 1), Ok(Duration::from_micros(250)));
        assert_eq!(time("2m", 1), Ok(Duration::from_secs(120)));
        assert_eq!(time("500ms", 1_000_000), Ok(Duration::from_millis(500)));
        assert!(time("8d", 1).is_err());
        assert!(time("5x", 1).is_err());
    }
}
