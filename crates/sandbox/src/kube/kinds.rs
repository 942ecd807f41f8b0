//! The resource types this API server serves, as its discovery documents describe them.

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    /// Writes through the main resource leave status alone (the status subresource owns it).
    pub status_subresource: bool,
    /// A PUT without metadata.resourceVersion is accepted (false for custom resources).
    pub unconditional_update: bool,
    /// Served for reading only, always empty: the sandbox runs no workloads, but `kubectl describe node`
    /// lists a node's pods and events.
    pub read_only: bool,
}

impl Kind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `clusterpolicies.nvidia.com`: the store key and the name in error messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn api_resource(&self) -> Value {
        json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": if self.read_only { json!(["get", "list", "watch"]) } else { json!(["create", "delete", "get", "list", "patch", "update", "watch"]) },
            "shortNames": self.short_names,
            "categories": if self.kind == "DaemonSet" || self.kind == "Pod" { json!(["all"]) } else { json!([]) },
        })
    }
}

pub const NAMESPACES: Kind = Kind {
    group: "",
    version: "v1",
    plural: "namespaces",
    singular: "namespace",
    kind: "Namespace",
    namespaced: false,
    short_names: &["ns"],
    status_subresource: true,
    unconditional_update: true,
    read_only: false,
};
pub const CONFIGMAPS: Kind = Kind {
    group: "",
    version: "v1",
    plural: "configmaps",
    singular: "configmap",
    kind: "ConfigMap",
    namespaced: true,
    short_names: &["cm"],
    status_subresource: false,
    unconditional_update: true,
    read_only: false,
};
pub const SECRETS: Kind = Kind {
    group: "",
    version: "v1",
    plural: "secrets",
    singular: "secret",
    kind: "Secret",
    namespaced: true,
    short_names: &[],
    status_subresource: false,
    unconditional_update: true,
    read_only: false,
};
pub const NODES: Kind = Kind {
    group: "",
    version: "v1",
    plural: "nodes",
    singular: "node",
    kind: "Node",
    namespaced: false,
    short_names: &["no"],
    status_subresource: true,
    unconditional_update: true,
    read_only: false,
};
pub const DAEMONSETS: Kind = Kind {
    group: "apps",
    version: "v1",
    plural: "daemonsets",
    singular: "daemonset",
    kind: "DaemonSet",
    namespaced: true,
    short_names: &["ds"],
    status_subresource: true,
    unconditional_update: true,
    read_only: false,
};
pub const CLUSTERPOLICIES: Kind = Kind {
    group: "nvidia.com",
    version: "v1",
    plural: "clusterpolicies",
    singular: "clusterpolicy",
    kind: "ClusterPolicy",
    namespaced: false,
    short_names: &[],
    status_subresource: true,
    unconditional_update: false,
    read_only: false,
};
pub const CRDS: Kind = Kind {
    group: "apiextensions.k8s.io",
    version: "v1",
    plural: "customresourcedefinitions",
    singular: "customresourcedefinition",
    kind: "CustomResourceDefinition",
    namespaced: false,
    short_names: &["crd", "crds"],
    status_subresource: true,
    unconditional_update: true,
    read_only: false,
};

pub const PODS: Kind = Kind {
    group: "",
    version: "v1",
    plural: "pods",
    singular: "pod",
    kind: "Pod",
    namespaced: true,
    short_names: &["po"],
    status_subresource: true,
    unconditional_update: true,
    read_only: true,
};
pub const EVENTS: Kind = Kind {
    group: "",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    namespaced: true,
    short_names: &["ev"],
    status_subresource: false,
    unconditional_update: true,
    read_only: true,
};

pub const ALL: [Kind; 9] = [
    NAMESPACES,
    CONFIGMAPS,
    SECRETS,
    NODES,
    PODS,
    EVENTS,
    DAEMONSETS,
    CLUSTERPOLICIES,
    CRDS,
];

/// The CRD whose presence makes nvidia.com/v1 clusterpolicies served.
pub const CLUSTERPOLICY_CRD: &str = "clusterpolicies.nvidia.com";

pub fn by_plural(group: &str, version: &str, plural: &str) -> Option<Kind> {
    ALL.iter()
        .copied()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

/// Groups other than core, with their one version.
pub const GROUPS: [(&str, &str); 3] = [
    ("apps", "v1"),
    ("apiextensions.k8s.io", "v1"),
    ("nvidia.com", "v1"),
];
