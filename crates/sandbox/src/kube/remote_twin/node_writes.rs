//! The writes that take a Node to what the GPU stack on it would make of it, as JSON merge patches:
//! one of its metadata (GFD's and the MIG manager's labels, the twin's annotations) and one of its
//! `status` subresource (the extended resources, in capacity and allocatable alike, since no kubelet
//! copies one into the other).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::hardware::{HARDWARE_ANNOTATION, hardware_note};
use super::objects::string_map;
use crate::kube::twin::{self, NodeTwin, Rendered};

/// The merge patches for one node; an empty one is not sent.
pub(super) struct NodeWrites {
    pub(super) meta: Map<String, Value>,
    pub(super) status: Map<String, Value>,
}

/// What to write to `node` (whose labels and annotations are given) for the twin `t` rendered as
/// `r`: where the plugin refused its config, the error is noted and the resources are left alone.
pub(super) fn node_writes(
    node: &Value,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    t: &NodeTwin,
    r: &Rendered,
) -> NodeWrites {
    let mut meta = Map::new();
    let label_patch = diff(labels, &r.labels);
    if !label_patch.is_empty() {
        meta.insert("labels".into(), Value::Object(label_patch));
    }
    let mut want_ann = annotations.clone();
    if !want_ann.contains_key(HARDWARE_ANNOTATION) {
        want_ann.insert(HARDWARE_ANNOTATION.into(), hardware_note(t));
    }
    match &r.resources {
        Ok(_) => {
            want_ann.remove(twin::ERROR_ANNOTATION);
        }
        Err(e) => {
            want_ann.insert(twin::ERROR_ANNOTATION.into(), e.clone());
        }
    }
    let ann_patch = diff(annotations, &want_ann);
    if !ann_patch.is_empty() {
        meta.insert("annotations".into(), Value::Object(ann_patch));
    }
    let mut status = Map::new();
    if let Ok(resources) = &r.resources {
        for f in ["capacity", "allocatable"] {
            let have: BTreeMap<String, String> = string_map(node.pointer(&format!("/status/{f}")))
                .into_iter()
                .filter(|(k, _)| k.starts_with("nvidia.com/"))
                .collect();
            let want: BTreeMap<String, String> = resources
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect();
            let d = diff(&have, &want);
            if !d.is_empty() {
                status.insert(f.into(), Value::Object(d));
            }
        }
    }
    NodeWrites { meta, status }
}

/// A JSON merge patch taking `have` to `want`: changed keys with their value, removed keys as null.
fn diff(have: &BTreeMap<String, String>, want: &BTreeMap<String, String>) -> Map<String, Value> {
    let mut m = Map::new();
    for (k, v) in want {
        if have.get(k) != Some(v) {
            m.insert(k.clone(), json!(v));
        }
    }
    for k in have.keys() {
        if !want.contains_key(k) {
            m.insert(k.clone(), Value::Null);
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_sets_changes_and_nulls_removals() {
        let have = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]);
        let want = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("c".to_string(), "3".to_string()),
        ]);
        assert_eq!(
            Value::Object(diff(&have, &want)),
            json!({"b": null, "c": "3"})
        );
    }
}
