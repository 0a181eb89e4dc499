//! Merging testbed tables and expanding a `[matrix]` into its cartesian product.

use toml::{Table, Value};

/// Merges `over` into `base`: tables are merged key by key (recursively), anything else in
/// `over` replaces what `base` had.
pub fn merge_tables(base: &mut Table, over: &Table) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Value::Table(b)), Value::Table(o)) => merge_tables(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// A dotted key whose intermediate part holds something other than a table.
#[derive(Debug, thiserror::Error)]
#[error("'{path}' is not a table, so '{key}' cannot be set")]
pub struct NotATable {
    /// The intermediate key (`throttle`).
    pub path: String,
    /// The whole key (`throttle.read_iops`).
    pub key: String,
}

/// Sets `key` (dotted: `throttle.read_iops`) in `table`, creating intermediate tables.
/// Fails when an intermediate key holds something other than a table.
pub fn set_dotted(table: &mut Table, key: &str, value: Value) -> Result<(), NotATable> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut t = table;
    let mut path = String::new();
    for p in parts {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(p);
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        t = match entry {
            Value::Table(inner) => inner,
            _ => {
                return Err(NotATable {
                    path,
                    key: key.to_string(),
                })
            }
        };
    }
    t.insert(last.to_string(), value);
    Ok(())
}

/// A value as it appears in a configuration label: strings bare, arrays joined by spaces,
/// tables as inline TOML.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(value_text).collect::<Vec<_>>().join(" "),
        Value::Table(t) => {
            let inner: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k}={}", value_text(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        other => other.to_string(),
    }
}

/// The cartesian product of the matrix axes, the first axis varying slowest (as nested
/// loops written in file order). Each element assigns one value to every axis. No axes give
/// one empty assignment.
pub fn expand(axes: &[(String, Vec<Value>)]) -> Vec<Vec<(String, Value)>> {
    let mut out: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (key, values) in axes {
        let mut next = Vec::with_capacity(out.len() * values.len());
        for prefix in &out {
            for v in values {
                let mut a = prefix.clone();
                a.push((key.clone(), v.clone()));
                next.push(a);
            }
        }
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i64) -> Value {
        Value::Integer(i)
    }

    #[test]
    fn product_in_nested_loop_order() {
        let axes = vec![
            ("a".to_string(), vec![int(1), int(2)]),
            (
                "b".to_string(),
                vec![Value::String("x".into()), Value::String("y".into()), int(3)],
            ),
        ];
        let p = expand(&axes);
        assert_eq!(p.len(), 6);
        let flat: Vec<String> = p
            .iter()
            .map(|a| {
                a.iter()
                    .map(|(k, v)| format!("{k}={}", value_text(v)))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        assert_eq!(
            flat,
            ["a=1,b=x", "a=1,b=y", "a=1,b=3", "a=2,b=x", "a=2,b=y", "a=2,b=3"]
        );
        assert_eq!(expand(&[]), vec![Vec::new()]);
    }

    #[test]
    fn merge_is_deep_and_dotted_keys_nest() {
        let mut base: Table = toml::from_str("kind='loop'\n[throttle]\nread_iops=5").unwrap();
        let over: Table = toml::from_str("fs='ext4'\n[throttle]\nwrite_iops=7").unwrap();
        merge_tables(&mut base, &over);
        set_dotted(&mut base, "throttle.read_iops", int(9)).unwrap();
        set_dotted(&mut base, "dataset_properties.recordsize", "16K".into()).unwrap();
        let t = base["throttle"].as_table().unwrap();
        assert_eq!(t["read_iops"], int(9));
        assert_eq!(t["write_iops"], int(7));
        assert_eq!(base["fs"].as_str(), Some("ext4"));
        assert_eq!(
            base["dataset_properties"]["recordsize"].as_str(),
            Some("16K")
        );
        assert!(set_dotted(&mut base, "fs.x", int(1)).is_err());
    }

    #[test]
    fn label_text() {
        let v: Value =
            toml::from_str::<Table>("a = ['-O', 'bigalloc', '-C', 65536]").unwrap()["a"].clone();
        assert_eq!(value_text(&v), "-O bigalloc -C 65536");
        assert_eq!(value_text(&Value::Boolean(true)), "true");
    }
}
