//! Label and field selectors of lists and watches (`labelSelector`, `fieldSelector`), parsed and
//! matched as the API server does for the fields these kinds support.

use std::collections::BTreeMap;

use serde_json::Value;

use super::kinds::{self, Kind};
use super::status::ApiError;
use super::validate;

/// A parsed label selector: equality- and set-based requirements.
#[derive(Debug, Default, Clone)]
pub(crate) struct Selector(Vec<LabelReq>);

#[derive(Debug, Clone)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Selector {
    pub(crate) fn parse(s: &str) -> Result<Selector, ApiError> {
        let mut reqs = Vec::new();
        let mut depth = 0;
        let mut cur = String::new();
        let mut parts = Vec::new();
        for c in s.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            if c == ',' && depth == 0 {
                parts.push(std::mem::take(&mut cur));
            } else {
                cur.push(c);
            }
        }
        parts.push(cur);
        let bad = |p: &str| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{p}', expected: identifier"
            ))
        };
        let check_key = |k: &str| -> Result<String, ApiError> {
            let k = k.trim();
            if validate::qualified_key("key", k).is_empty() {
                Ok(k.to_string())
            } else {
                Err(bad(k))
            }
        };
        for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
            let set = |rest: &str| -> Result<Vec<String>, ApiError> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| bad(p))?;
                Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
            };
            if let Some(k) = p.strip_prefix('!') {
                reqs.push(LabelReq::NotExists(check_key(k)?));
            } else if let Some((k, v)) = p.split_once("!=") {
                reqs.push(LabelReq::NotEq(check_key(k)?, v.trim().to_string()));
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                reqs.push(LabelReq::Eq(check_key(k)?, v.trim().to_string()));
            } else if let Some((k, rest)) = p.split_once(" notin ") {
                reqs.push(LabelReq::NotIn(check_key(k)?, set(rest)?));
            } else if let Some((k, rest)) = p.split_once(" in ") {
                reqs.push(LabelReq::In(check_key(k)?, set(rest)?));
            } else {
                reqs.push(LabelReq::Exists(check_key(p)?));
            }
        }
        Ok(Selector(reqs))
    }

    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEq(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|x| vs.contains(x)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|x| !vs.contains(x)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// A field selector requirement on metadata.name / metadata.namespace (and Secret type).
#[derive(Debug, Clone)]
pub(crate) struct FieldReq {
    path: &'static str,
    value: String,
    negate: bool,
}

impl FieldReq {
    pub(crate) fn parse(kind: Kind, s: &str) -> Result<Vec<FieldReq>, ApiError> {
        let mut out = Vec::new();
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v, negate) = if let Some((k, v)) = p.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                (k, v, false)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{p}'"
                )));
            };
            let path = match k.trim() {
                "metadata.name" => "/metadata/name",
                "metadata.namespace" => "/metadata/namespace",
                "type" if kind == kinds::SECRETS => "/type",
                "spec.unschedulable" if kind == kinds::NODES => "/spec/unschedulable",
                "spec.nodeName" if kind == kinds::PODS => "/spec/nodeName",
                "status.phase" if kind == kinds::PODS => "/status/phase",
                "involvedObject.kind" if kind == kinds::EVENTS => "/involvedObject/kind",
                "involvedObject.name" if kind == kinds::EVENTS => "/involvedObject/name",
                "involvedObject.namespace" if kind == kinds::EVENTS => "/involvedObject/namespace",
                "involvedObject.uid" if kind == kinds::EVENTS => "/involvedObject/uid",
                other => {
                    return Err(ApiError::bad_request(format!(
                        "field label not supported: {other}"
                    )));
                }
            };
            out.push(FieldReq {
                path,
                value: v.trim().to_string(),
                negate,
            });
        }
        Ok(out)
    }

    pub(crate) fn matches(&self, o: &Value) -> bool {
        let have = match o.pointer(self.path) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            None if self.path == "/spec/unschedulable" => "false".into(),
            _ => String::new(),
        };
        (have == self.value) != self.negate
    }
}
