//! The description of one served resource ([`Kind`]) and the verb lists the tables share.

pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
pub(crate) const NO_COLLECTION_DELETE: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
/// A CRD's verbs, in the order apiextensions-apiserver lists them
/// (pkg/apiserver/customresource_discovery_controller.go).
pub(crate) const CUSTOM_VERBS: &[&str] = &[
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];
pub(crate) const CREATE_ONLY: &[&str] = &["create"];
pub(crate) const GET_LIST: &[&str] = &["get", "list"];

/// One resource of one group version. Two kinds are the same resource when group, version and
/// plural agree (a CRD's kind compares equal to the constant that names it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) short_names: &'static [&'static str],
    pub(crate) categories: &'static [&'static str],
    /// The subresources served (`status`, `scale`, `token`, `eviction`, ...).
    pub(crate) subresources: &'static [&'static str],
    pub(crate) verbs: &'static [&'static str],
    /// metadata.generation is kept (kinds with a spec that controllers observe).
    pub(crate) generation: bool,
    /// A custom resource (served from a CRD): unstructured, so list items keep kind and
    /// apiVersion, and its CRD's structural schema applies.
    pub(crate) custom: bool,
    /// A PUT without metadata.resourceVersion is accepted (false for custom resources).
    pub(crate) unconditional_update: bool,
}

impl PartialEq for Kind {
    fn eq(&self, o: &Kind) -> bool {
        (self.group, self.version, self.plural) == (o.group, o.version, o.plural)
    }
}

impl Eq for Kind {}

impl Kind {
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `clusterpolicies.nvidia.com`: the store key (one per group resource,
    /// whatever the version) and the name in error messages.
    pub(crate) fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub(crate) fn has_sub(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    pub(crate) fn status_subresource(&self) -> bool {
        self.has_sub("status")
    }

    /// A kind only read and written through its collection's POST (reviews, token requests):
    /// nothing is stored.
    pub(crate) fn virtual_kind(&self) -> bool {
        self.verbs == CREATE_ONLY
    }

    pub(crate) fn can(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// The storage version hash discovery lists: the first 8 bytes of
    /// sha256("<group>/<version>/<Kind>") in base64 (k8s.io/apiserver pkg/endpoints/discovery
    /// storageversionhash.go), for a kind stored in this version.
    pub(crate) fn storage_version_hash(&self) -> String {
        use base64::Engine as _;
        let id = format!("{}/{}/{}", self.group, self.version, self.kind);
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, id.as_bytes());
        base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
    }
}
