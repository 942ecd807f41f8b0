//! Reading one property of an ARM PUT body: a typed reader per JSON type, each answering a value of
//! the wrong type as ARM does (`InvalidRequestContent`, "could not be deserialized"), so that
//! `validate.rs` only says which properties a pool has and what rules bind them.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Map, Value};

use super::error::{ArmError, invalid};

/// Enum values compare case-insensitively in ARM; the canonical spelling is stored.
pub(super) fn enum_field(
    o: &Map<String, Value>,
    name: &str,
    allowed: &[&'static str],
) -> Result<Option<&'static str>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => allowed
            .iter()
            .find(|a| a.eq_ignore_ascii_case(s))
            .map(|a| Some(*a))
            .ok_or_else(|| {
                invalid(
                    &format!("properties.{name}"),
                    format!(
                        "The value '{s}' of properties.{name} is invalid. Allowed values are: {}.",
                        allowed.join(", ")
                    ),
                )
            }),
        Some(v) => Err(bad_content(name, v)),
    }
}

pub(super) fn bad_content(name: &str, v: &Value) -> ArmError {
    ArmError {
        status: StatusCode::BAD_REQUEST,
        code: "InvalidRequestContent",
        message: format!(
            "The request content was invalid and could not be deserialized: 'Error converting \
                value {v} for property 'properties.{name}''."
        ),
        target: None,
    }
}

pub(super) fn str_field<'a>(
    o: &'a Map<String, Value>,
    name: &str,
) -> Result<Option<&'a str>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(bad_content(name, v)),
    }
}

pub(super) fn int_field(o: &Map<String, Value>, name: &str) -> Result<Option<i64>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| bad_content(name, &Value::Number(n.clone()))),
        Some(v) => Err(bad_content(name, v)),
    }
}

pub(super) fn bool_field(o: &Map<String, Value>, name: &str) -> Result<Option<bool>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(bad_content(name, v)),
    }
}

pub(super) fn string_map(
    o: &Map<String, Value>,
    name: &str,
) -> Result<BTreeMap<String, String>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(bad_content(name, v)),
            })
            .collect(),
        Some(v) => Err(bad_content(name, v)),
    }
}

pub(super) fn string_list(o: &Map<String, Value>, name: &str) -> Result<Vec<String>, ArmError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad_content(name, v))
            })
            .collect(),
        Some(v) => Err(bad_content(name, v)),
    }
}
