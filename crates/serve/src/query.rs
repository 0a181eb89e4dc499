//! Query strings: `application/x-www-form-urlencoded` pairs decoded, each page's known
//! keys taken with their types, and anything else refused with a message (400): a key a
//! page does not take, a value that does not parse, bad percent-encoding.

/// A query the page cannot use (400, with this message).
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A truncated or non-hex `%XX` escape.
    #[error("bad percent-encoding in '{0}'")]
    Escape(String),
    /// Bytes that are not UTF-8 once decoded.
    #[error("'{text}' is not UTF-8 once decoded")]
    NotUtf8 {
        text: String,
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// A key the page does not take, and those it takes.
    #[error("unknown parameter '{key}' (this page takes: {takes})")]
    Unknown { key: String, takes: String },
    /// A key that may be given once, given more often.
    #[error("'{0}' is given more than once")]
    Repeated(String),
    /// A value that is not a whole number in the range.
    #[error("'{key}' must be a whole number from {lo} to {hi}, not '{value}'")]
    Number {
        key: String,
        lo: u64,
        hi: u64,
        value: String,
    },
    /// A value that is not a date `YYYY-MM-DD`.
    #[error("'{key}' must be a date YYYY-MM-DD, not '{value}'")]
    Date { key: String, value: String },
    /// A value that is not a run id.
    #[error("'{key}' must be a run id (a number), not '{value}'")]
    RunId { key: String, value: String },
    /// `from` after `to`.
    #[error("'from' ({from}) is after 'to' ({to})")]
    Dates { from: String, to: String },
}

/// Decodes `%XX` and `+` (a space); Err on a truncated or non-hex escape or bytes that
/// are not UTF-8.
pub fn decode(s: &str) -> Result<String, QueryError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| QueryError::Escape(s.to_string()))?;
                out.push(hex);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|source| QueryError::NotUtf8 {
        text: s.to_string(),
        source,
    })
}

/// Encodes a value for a URL's query.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'~') {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// The decoded values of `key` in `query`, ignoring pairs that do not decode (for the
/// token, read before the page's own parse).
pub fn raw_values(query: &str, key: &str) -> Vec<String> {
    query
        .split('&')
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k).ok()? == key).then(|| decode(v).ok()).flatten()
        })
        .collect()
}

/// A page's query: its pairs decoded, every key checked against what the page takes.
#[derive(Debug, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `query`, refusing keys outside `allowed` (`token` is always allowed: it is
    /// the server's, not the page's). Empty values count as absent (a form's blank field).
    pub fn parse(query: &str, allowed: &[&str]) -> Result<Query, QueryError> {
        let mut pairs = Vec::new();
        for p in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let (k, v) = (decode(k)?, decode(v)?);
            if k == "token" {
                continue;
            }
            if !allowed.contains(&k.as_str()) {
                return Err(QueryError::Unknown {
                    key: k,
                    takes: allowed.join(", "),
                });
            }
            let v = v.trim().to_string();
            if !v.is_empty() {
                pairs.push((k, v));
            }
        }
        Ok(Query { pairs })
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The one value of `key`; Err when it is given twice.
    pub fn one(&self, key: &str) -> Result<Option<String>, QueryError> {
        match self.all(key).as_slice() {
            [] => Ok(None),
            [v] => Ok(Some(v.clone())),
            _ => Err(QueryError::Repeated(key.to_string())),
        }
    }

    /// The one value of `key` as a whole number in `lo..=hi`.
    pub fn number(&self, key: &str, lo: u64, hi: u64) -> Result<Option<u64>, QueryError> {
        let Some(v) = self.one(key)? else {
            return Ok(None);
        };
        match v.parse::<u64>() {
            Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
            _ => Err(QueryError::Number {
                key: key.to_string(),
                lo,
                hi,
                value: v,
            }),
        }
    }

    /// The one value of `key` as a date `YYYY-MM-DD`.
    pub fn date(&self, key: &str) -> Result<Option<String>, QueryError> {
        let Some(v) = self.one(key)? else {
            return Ok(None);
        };
        let ok = v.len() == 10
            && v.bytes().enumerate().all(|(i, c)| {
                if i == 4 || i == 7 {
                    c == b'-'
                } else {
                    c.is_ascii_digit()
                }
            })
            && matches!(v[5..7].parse::<u8>(), Ok(1..=12))
            && matches!(v[8..10].parse::<u8>(), Ok(1..=31));
        if ok {
            Ok(Some(v))
        } else {
            Err(QueryError::Date {
                key: key.to_string(),
                value: v,
            })
        }
    }

    /// Every value of `key` as a run id.
    pub fn ids(&self, key: &str) -> Result<Vec<i64>, QueryError> {
        self.all(key)
            .iter()
            .map(|v| {
                v.parse::<i64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| QueryError::RunId {
                        key: key.to_string(),
                        value: v.clone(),
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_forms_and_refuses_bad_escapes() {
        assert_eq!(decode("a+b%3Cc%3E").unwrap(), "a b<c>");
        assert_eq!(decode("%E2%9C%93").unwrap(), "✓");
        assert!(decode("%4").is_err());
        assert!(decode("%zz").is_err());
        let e = decode("%FF").unwrap_err();
        assert!(matches!(e, QueryError::NotUtf8 { .. }), "{e}");
        assert!(
            std::error::Error::source(&e).is_some(),
            "the UTF-8 error is kept"
        );
        assert_eq!(decode(&encode("<b> & ✓")).unwrap(), "<b> & ✓");
    }

    #[test]
    fn typed_values_and_unknown_keys() {
        let q = Query::parse(
            "label=a&label=b&page=3&from=2026-01-31&host=&token=x",
            &["label", "page", "from", "host"],
        )
        .unwrap();
        assert_eq!(q.all("label"), ["a", "b"]);
        assert!(q.one("label").is_err());
        assert_eq!(q.number("page", 1, 100).unwrap(), Some(3));
        assert_eq!(q.date("from").unwrap().as_deref(), Some("2026-01-31"));
        assert_eq!(q.one("host").unwrap(), None, "a blank field is absent");
        let e = Query::parse("colour=red", &["label"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown parameter 'colour'"), "{e}");
        let q = Query::parse("page=0&from=2026-13-01&run=x", &["page", "from", "run"]).unwrap();
        assert!(q.number("page", 1, 100).is_err());
        assert!(q.date("from").is_err());
        assert!(q.ids("run").is_err());
    }

    #[test]
    fn raw_values_finds_the_token() {
        assert_eq!(raw_values("a=1&token=abc%2D", "token"), ["abc-"]);
        assert!(raw_values("a=1", "token").is_empty());
    }
}
