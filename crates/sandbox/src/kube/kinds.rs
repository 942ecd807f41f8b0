//! The resource types this API server serves, as its discovery documents describe them.

use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kind {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) short_names: &'static [&'static str],
    /// Writes through the main resource leave status alone (the status subresource owns it).
    pub(crate) status_subresource: bool,
    /// A PUT without metadata.resourceVersion is accepted (false for custom resources).
    pub(crate) unconditional_update: bool,
    /// Served for reading only, always empty (events: `kubectl describe node` lists them). Pods can be
    /// written: nothing runs them, but pending ones drive the twin's cluster-autoscaler.
    pub(crate) read_only: bool,
    /// metadata.generation is kept (kinds with a spec that controllers observe: apps, CRDs and
    /// custom resources; ConfigMaps, Secrets, Nodes and Namespaces have none).
    pub(crate) generation: bool,
    /// A custom resource (served from a CRD): unstructured, so list items keep kind and apiVersion,
    /// and its CRD's structural schema applies.
    pub(crate) custom: bool,
}

impl Kind {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `clusterpolicies.nvidia.com`: the store key and the name in error messages.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn api_resource(&self) -> Value {
        if self.custom {
            // As the apiextensions-apiserver's discovery lists a CRD's resource
            // (pkg/apiserver/customresource_discovery_controller.go): no empty shortNames or
            // categories, the verbs in its order (less deletecollection, which the sandbox does not
            // serve), and the storage version hash: the first 8 bytes of
            // sha256("nvidia.com/v1/ClusterPolicy") in base64 (apiserver's discovery.StorageVersionHash).
            return json!({
                "name": self.plural,
                "singularName": self.singular,
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["delete", "get", "list", "patch", "create", "update", "watch"],
                "storageVersionHash": STORAGE_VERSION_HASH_CLUSTERPOLICY,
            });
        }
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

pub(crate) const NAMESPACES: Kind = Kind {
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
    generation: false,
    custom: false,
};
pub(crate) const CONFIGMAPS: Kind = Kind {
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
    generation: false,
    custom: false,
};
pub(crate) const SECRETS: Kind = Kind {
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
    generation: false,
    custom: false,
};
pub(crate) const NODES: Kind = Kind {
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
    generation: false,
    custom: false,
};
pub(crate) const DAEMONSETS: Kind = Kind {
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
    generation: true,
    custom: false,
};
pub(crate) const CLUSTERPOLICIES: Kind = Kind {
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
    generation: true,
    custom: true,
};
pub(crate) const CRDS: Kind = Kind {
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
    generation: true,
    custom: false,
};

pub(crate) const PODS: Kind = Kind {
    group: "",
    version: "v1",
    plural: "pods",
    singular: "pod",
    kind: "Pod",
    namespaced: true,
    short_names: &["po"],
    status_subresource: true,
    unconditional_update: true,
    read_only: false,
    generation: false,
    custom: false,
};
pub(crate) const EVENTS: Kind = Kind {
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
    generation: false,
    custom: false,
};

pub(crate) const ALL: [Kind; 9] = [
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

/// See [`Kind::api_resource`]; the sandbox serves one custom resource, so the hash is a constant.
const STORAGE_VERSION_HASH_CLUSTERPOLICY: &str = "41E1ly4+BU0=";

/// The CRD whose presence makes nvidia.com/v1 clusterpolicies served.
pub(crate) const CLUSTERPOLICY_CRD: &str = "clusterpolicies.nvidia.com";

pub(crate) fn by_plural(group: &str, version: &str, plural: &str) -> Option<Kind> {
    ALL.iter()
        .copied()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

/// Groups other than core, with their one version.
pub(crate) const GROUPS: [(&str, &str); 3] = [
    ("apps", "v1"),
    ("apiextensions.k8s.io", "v1"),
    ("nvidia.com", "v1"),
];
