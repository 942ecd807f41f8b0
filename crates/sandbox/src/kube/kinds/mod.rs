//! The resource types this API server serves: the built-in ones ([`builtin`]) and those its
//! CustomResourceDefinitions add, each described once as a [`Kind`] that discovery, OpenAPI,
//! routing, authorization and the store read.

#[rustfmt::skip]
mod builtin;
mod kind;

pub(crate) use builtin::*;
pub(crate) use kind::*;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

/// A name that lives as long as the process: a CRD's names become a [`Kind`] like the built-in
/// ones. Each distinct name is kept once, so memory grows only with the names ever served.
pub(crate) fn intern(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(n) = names.get(s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_string().into_boxed_str());
    names.insert(n);
    n
}

fn intern_list(v: Option<&Value>) -> &'static [&'static str] {
    let list: Vec<&'static str> = v
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(intern)
        .collect();
    if list.is_empty() {
        return &[];
    }
    static LISTS: OnceLock<Mutex<BTreeSet<&'static [&'static str]>>> = OnceLock::new();
    let mut lists = LISTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(l) = lists.get(list.as_slice()) {
        return l;
    }
    let l: &'static [&'static str] = Box::leak(list.into_boxed_slice());
    lists.insert(l);
    l
}

/// The kinds an established CRD serves, one per served version (apiextensions-apiserver
/// pkg/apiserver/customresource_handler.go serves a CRD once its Established condition is true).
pub(crate) fn of_crd(crd: &Value) -> Vec<Kind> {
    let established = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    if !established {
        return Vec::new();
    }
    let spec = &crd["spec"];
    let names = &spec["names"];
    let s = |v: &Value| intern(v.as_str().unwrap_or_default());
    let group = s(&spec["group"]);
    let plural = s(&names["plural"]);
    let singular = match names["singular"].as_str() {
        Some(x) if !x.is_empty() => intern(x),
        _ => intern(&names["kind"].as_str().unwrap_or_default().to_lowercase()),
    };
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == json!(true))
        .map(|v| {
            let mut subs = Vec::new();
            if v.pointer("/subresources/scale").is_some() {
                subs.push("scale");
            }
            if v.pointer("/subresources/status").is_some() {
                subs.push("status");
            }
            Kind {
                group,
                version: s(&v["name"]),
                plural,
                singular,
                kind: s(&names["kind"]),
                namespaced: spec["scope"] == "Namespaced",
                short_names: intern_list(names.get("shortNames")),
                categories: intern_list(names.get("categories")),
                subresources: match subs.as_slice() {
                    [] => &[],
                    ["scale"] => &["scale"],
                    ["status"] => &["status"],
                    _ => &["scale", "status"],
                },
                verbs: CUSTOM_VERBS,
                generation: true,
                custom: true,
                unconditional_update: false,
            }
        })
        .collect()
}

/// NVIDIA's ClusterPolicy (`nvidia.com/v1`), which the twin's GPU operator reads: served while a
/// CRD of that name is established (the seeded one, or NVIDIA's own installed by its chart).
pub(crate) const CLUSTERPOLICIES: Kind = Kind {
    group: "nvidia.com",
    version: "v1",
    plural: "clusterpolicies",
    singular: "clusterpolicy",
    kind: "ClusterPolicy",
    namespaced: false,
    short_names: &[],
    categories: &[],
    subresources: &["status"],
    verbs: CUSTOM_VERBS,
    generation: true,
    custom: true,
    unconditional_update: false,
};

/// The name of the ClusterPolicy CRD.
pub(crate) const CLUSTERPOLICY_CRD: &str = "clusterpolicies.nvidia.com";

/// The order of two versions by Kubernetes' version priority (GA before beta before alpha,
/// higher numbers first, then other names alphabetically: k8s.io/apimachinery
/// pkg/version/helpers.go CompareKubeAwareVersionStrings), as discovery orders a group's versions
/// and picks its preferred one.
pub(crate) fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (level, n) = if tail.is_empty() {
            (2, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().ok()?)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n.parse().ok()?)
        } else {
            return None;
        };
        Some((major, level, n))
    }
    match (parse(a), parse(b)) {
        // Higher first: GA over beta over alpha, then the larger major and minor number.
        (Some((ma, la, na)), Some((mb, lb, nb))) => (lb, mb, nb).cmp(&(la, ma, na)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}
