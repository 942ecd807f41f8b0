//! Reading one field of a GKE request body. The official Rust client sends
//! `$alt=json;enum-encoding=int` (enums as integers, int64 as strings) and gcloud sends string
//! enums, so every enum here accepts both forms and every integer a number or a decimal string; a
//! value of the wrong type is INVALID_ARGUMENT with the JSON mapping's message.

use serde_json::{Map, Value, json};

use super::error::{GError, invalid};

pub(super) fn parse_body(body: &[u8]) -> Result<Map<String, Value>, GError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(invalid(
            "Invalid JSON payload received. Expected an object.",
        )),
        Err(e) => Err(invalid(format!("Invalid JSON payload received. {e}"))),
    }
}

/// An int64 field sent as a number or as a decimal string.
pub(super) fn int(o: &Map<String, Value>, field: &str) -> Result<Option<i64>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| {
            invalid(format!(
                "Invalid value at '{field}': {n} is not an integer."
            ))
        }),
        Some(Value::String(s)) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(format!("Invalid value at '{field}' (TYPE_INT64), \"{s}\""))),
        Some(v) => Err(invalid(format!(
            "Invalid value at '{field}' (TYPE_INT64), {v}"
        ))),
    }
}

pub(super) fn boolean(o: &Map<String, Value>, field: &str) -> Result<Option<bool>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(invalid(format!(
            "Invalid value at '{field}' (TYPE_BOOL), {v}"
        ))),
    }
}

pub(super) fn string<'a>(
    o: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(invalid(format!(
            "Invalid value at '{field}' (TYPE_STRING), {v}"
        ))),
    }
}

pub(super) fn object<'a>(
    o: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, GError> {
    match o.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(v) => Err(invalid(format!(
            "Invalid JSON payload received. '{field}' must be an object, got {v}."
        ))),
    }
}

/// An enum sent as its name or as its number (`enum-encoding=int`); `values[i]` is the name of number i.
/// The UNSPECIFIED value (0) reads as absent, as proto3 does.
pub(super) fn enumv(
    o: &Map<String, Value>,
    field: &str,
    values: &[&'static str],
) -> Result<Option<&'static str>, GError> {
    let bad = |v: &Value| {
        invalid(format!(
            "Invalid value at '{field}' (type.googleapis.com/{field}), {v}"
        ))
    };
    let i = match o.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(|i| i as usize)
            .ok_or_else(|| bad(&Value::Number(n.clone())))?,
        Some(Value::String(s)) => values
            .iter()
            .position(|v| v == s)
            .ok_or_else(|| bad(&Value::String(s.clone())))?,
        Some(v) => return Err(bad(v)),
    };
    match values.get(i) {
        Some(_) if i == 0 => Ok(None),
        Some(v) => Ok(Some(v)),
        None => Err(bad(&json!(i))),
    }
}
