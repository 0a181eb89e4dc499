//! [`key_at`]: the key a TOML deserialisation error is about, for `FILE:LINE: KEY` errors
//! (serde's messages name a key only when it is unknown or missing).

/// The dotted key (`config[2].testbed.fs`, `repeats`) a TOML error at 1-based `line` is
/// about: the key the message quotes (unknown or missing field) or the key set on that line
/// (or on the nearest line above, as a value may continue over lines), under the table
/// header it sits in (`[[x]]` tables numbered from 1). None when no key can be told.
pub fn key_at(message: &str, text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.split('\n').take(line.max(1)).collect();
    let quoted = if message.starts_with("unknown field") || message.starts_with("missing field") {
        message.split('`').nth(1).map(|q| {
            if q.is_empty() {
                "\"\"".to_string()
            } else {
                q.to_string()
            }
        })
    } else {
        None
    };
    // Walk up to the key line (unless the message names the key) and the header above.
    let mut key = quoted;
    let mut header: Option<(usize, String, bool)> = None;
    for (i, l) in lines.iter().enumerate().rev() {
        match parse_line(l) {
            Some(Line::Header(name, array)) => {
                header = Some((i, name, array));
                break;
            }
            Some(Line::Key(k)) if key.is_none() => key = Some(k),
            _ => {}
        }
    }
    let prefix = header.map(|(at, name, array)| {
        if array {
            let n = lines[..at]
                .iter()
                .filter(|l| matches!(parse_line(l), Some(Line::Header(h, true)) if h == name))
                .count();
            format!("{name}[{}]", n + 1)
        } else {
            name
        }
    });
    match (prefix, key) {
        (Some(p), Some(k)) => Some(format!("{p}.{k}")),
        (Some(p), None) => Some(p),
        (None, k) => k,
    }
}

enum Line {
    Header(String, bool),
    Key(String),
}

fn parse_line(l: &str) -> Option<Line> {
    let word = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    };
    let t = l.trim();
    if let Some(h) = t.strip_prefix("[[") {
        let name = h.split("]]").next()?.trim();
        return word(name).then(|| Line::Header(name.to_string(), true));
    }
    if let Some(h) = t.strip_prefix('[') {
        let name = h.split(']').next()?.trim();
        return word(name).then(|| Line::Header(name.to_string(), false));
    }
    let (k, _) = t.split_once('=')?;
    let k = k.trim().trim_matches('"');
    word(k).then(|| Line::Key(k.to_string()))
}

#[cfg(test)]
mod tests {
    use super::key_at;

    #[test]
    fn keys_under_their_tables() {
        let text = "repeats = \"x\"\n[[config]]\nlabel = 1\n[[config]]\nlabel = 2\nlist = [\n3]\n";
        assert_eq!(key_at("invalid type", text, 1).as_deref(), Some("repeats"));
        assert_eq!(
            key_at("invalid type", text, 5).as_deref(),
            Some("config[2].label")
        );
        assert_eq!(
            key_at("invalid type", text, 7).as_deref(),
            Some("config[2].list")
        );
        assert_eq!(
            key_at("unknown field `x`, expected", text, 3).as_deref(),
            Some("config[1].x")
        );
        assert_eq!(key_at("invalid", "# nothing", 1), None);
    }
}
