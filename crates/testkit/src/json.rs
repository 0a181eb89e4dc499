//! Field access on JSON documents that names what is missing.

use std::path::Path;

use serde_json::Value;

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[track_caller]
pub fn get<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key)
        .unwrap_or_else(|| panic!("key {key:?} missing in {v}"))
}

#[track_caller]
pub fn num(v: &Value, key: &str) -> f64 {
    get(v, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

#[track_caller]
pub fn uint(v: &Value, key: &str) -> u64 {
    get(v, key)
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer: {v}"))
}

#[track_caller]
pub fn arr<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    get(v, key)
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array: {v}"))
}

#[track_caller]
pub fn string<'a>(v: &'a Value, key: &str) -> &'a str {
    get(v, key)
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string: {v}"))
}

/// The codes of a run document's `warnings`, in order.
#[track_caller]
pub fn warning_codes(doc: &Value) -> Vec<String> {
    arr(doc, "warnings")
        .iter()
        .map(|w| string(w, "code").to_string())
        .collect()
}
