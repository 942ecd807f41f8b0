//! Who a request is and what it asks to do, as authentication and the authorizer describe them
//! (k8s.io/apiserver pkg/authentication/user, pkg/endpoints/request/requestinfo.go,
//! pkg/endpoints/handlers/responsewriters/errors.go), and the bootstrap roles every fresh API
//! server holds: the vocabulary `auth.rs` and `rbac.rs` share.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::status::ApiError;

/// The admin's name in the sandbox's clusters (kubeadm names its admin so).
pub(crate) const ADMIN: &str = "kubernetes-admin";
pub(crate) const MASTERS: &str = "system:masters";
pub(crate) const AUTHENTICATED: &str = "system:authenticated";

/// An authenticated user.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) groups: Vec<String>,
}

impl User {
    pub(crate) fn admin() -> User {
        User {
            name: ADMIN.into(),
            uid: String::new(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
        }
    }

    /// A ServiceAccount's user with the groups the API server gives it.
    pub(crate) fn service_account(ns: &str, name: &str, uid: &str) -> User {
        User {
            name: format!("system:serviceaccount:{ns}:{name}"),
            uid: uid.to_string(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                AUTHENTICATED.into(),
            ],
        }
    }

    /// The namespace and name of the ServiceAccount this user is, if it is one.
    pub(crate) fn as_service_account(name: &str) -> Option<(&str, &str)> {
        let rest = name.strip_prefix("system:serviceaccount:")?;
        rest.split_once(':')
            .filter(|(ns, n)| !ns.is_empty() && !n.is_empty())
    }

    /// `userInfo` as the reviews write it.
    pub(crate) fn info(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        v
    }
}

/// A token the TokenRequest API issued: its ServiceAccount and when it expires (Unix seconds).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SaToken {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) expires: u64,
}

/// What a request asks to do, as the authorizer sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Attrs {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// A request for a path, not a resource (`/api`, `/openapi/v3`, `/metrics`).
    pub(crate) path: Option<String>,
}

/// The RBAC verb of a request to a resource.
pub(crate) fn verb_of(method: &str, named: bool, watch: bool) -> &'static str {
    match (method, named) {
        ("GET" | "HEAD", _) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "",
    }
}

impl Attrs {
    /// The attributes of a request for the path `segs` (after the cluster's root), as
    /// requestinfo.go reads them: after `namespaces/{ns}` comes the resource, except for the
    /// namespace's own `status` and `finalize`; then the name and the subresource.
    pub(crate) fn of(method: &str, segs: &[&str], watch: bool) -> Attrs {
        let (group, rest) = match segs {
            ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
            ["apis", g, _, rest @ ..] if !rest.is_empty() => (*g, rest),
            _ => {
                return Attrs {
                    verb: method.to_ascii_lowercase(),
                    path: Some(format!("/{}", segs.join("/"))),
                    ..Attrs::default()
                };
            }
        };
        let mut parts = rest;
        let mut namespace = String::new();
        if parts[0] == "namespaces" && parts.len() > 1 {
            namespace = parts[1].to_string();
            if parts.len() > 2 && !["status", "finalize"].contains(&parts[2]) {
                parts = &parts[2..];
            }
        }
        let name = parts.get(1).copied().unwrap_or_default();
        Attrs {
            verb: verb_of(method, !name.is_empty(), watch).into(),
            group: group.into(),
            resource: parts[0].into(),
            subresource: parts.get(2).copied().unwrap_or_default().into(),
            namespace,
            name: name.into(),
            path: None,
        }
    }

    /// The attributes a review's `resourceAttributes` or `nonResourceAttributes` describe.
    pub(crate) fn of_review(spec: &Value) -> Attrs {
        let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
        if let Some(r) = spec.get("resourceAttributes").filter(|r| r.is_object()) {
            return Attrs {
                verb: s(r, "verb"),
                group: s(r, "group"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                namespace: s(r, "namespace"),
                name: s(r, "name"),
                path: None,
            };
        }
        let n = &spec["nonResourceAttributes"];
        Attrs {
            verb: s(n, "verb"),
            path: Some(s(n, "path")),
            ..Attrs::default()
        }
    }

    /// The API server's refusal of these attributes to `user`
    /// (pkg/endpoints/handlers/responsewriters/errors.go forbiddenMessage, as a Forbidden
    /// Status of the resource and name).
    pub(crate) fn forbidden(&self, user: &str) -> ApiError {
        let Some(path) = &self.path else {
            let resource = if self.subresource.is_empty() {
                self.resource.clone()
            } else {
                format!("{}/{}", self.resource, self.subresource)
            };
            let scope = if self.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {:?}", self.namespace)
            };
            let why = format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
                self.verb, self.group
            );
            let qualified = if self.group.is_empty() {
                self.resource.clone()
            } else {
                format!("{}.{}", self.resource, self.group)
            };
            let message = if self.name.is_empty() {
                format!("{qualified} is forbidden: {why}")
            } else {
                format!("{qualified} {:?} is forbidden: {why}", self.name)
            };
            let mut details = serde_json::Map::new();
            if !self.name.is_empty() {
                details.insert("name".into(), json!(self.name));
            }
            if !self.group.is_empty() {
                details.insert("group".into(), json!(self.group));
            }
            details.insert("kind".into(), json!(self.resource));
            return ApiError::new(403, "Forbidden", message).with_details(Value::Object(details));
        };
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: User {user:?} cannot {} path {path:?}",
                self.verb
            ),
        )
        .with_details(json!({}))
    }
}

/// The bootstrap roles and bindings a fresh cluster holds: (ClusterRole, the groups bound to it).
pub(crate) fn bootstrap() -> Vec<(Value, Vec<&'static str>)> {
    let labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let annotations = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let role = |name: &str, rules: Value| json!({"metadata": {"name": name, "labels": labels, "annotations": annotations}, "rules": rules});
    vec![
        (
            role(
                "cluster-admin",
                json!([
                    {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]},
                ]),
            ),
            vec![MASTERS],
        ),
        (
            role(
                "system:basic-user",
                json!([
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                ]),
            ),
            vec![AUTHENTICATED],
        ),
        (
            role(
                "system:discovery",
                json!([
                    {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]},
                ]),
            ),
            vec![AUTHENTICATED],
        ),
        (
            role(
                "system:public-info-viewer",
                json!([
                    {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]},
                ]),
            ),
            vec![AUTHENTICATED, "system:unauthenticated"],
        ),
    ]
}
