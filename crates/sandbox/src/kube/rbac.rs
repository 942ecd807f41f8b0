//! RBAC: whether a user may do what a request's attributes say, from the cluster's Roles,
//! ClusterRoles and their bindings, evaluated as kube-apiserver's RBAC authorizer does
//! (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go and pkg/apis/rbac/v1
//! evaluation_helpers.go). Members of `system:masters` may do anything, as the API server's
//! privileged group. A fresh cluster holds the bootstrap roles every authenticated user is bound
//! to (discovery, its own access reviews), as kube-apiserver writes them at start
//! (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, cluster-admin and the three roles
//! bound to `system:authenticated`).
//!
//! Not modelled: the escalation check on writing Roles and bindings, and the aggregation of
//! ClusterRoles (a controller's, and none runs).

use serde_json::{Value, json};

use super::identity::{Attrs, MASTERS, User};
use super::kinds;
use super::meta::meta_str;
use super::store::Cluster;
use super::util::{any_of, strings};

/// Whether one PolicyRule allows the attributes (evaluation_helpers.go RuleAllows).
fn rule_allows(rule: &Value, a: &Attrs) -> bool {
    if !any_of(&strings(&rule["verbs"]), &a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return strings(&rule["nonResourceURLs"]).iter().any(|u| {
            *u == "*" || u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
        });
    }
    if !any_of(&strings(&rule["apiGroups"]), &a.group) {
        return false;
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resources = strings(&rule["resources"]);
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
    });
    let names = strings(&rule["resourceNames"]);
    resource_ok && (names.is_empty() || names.contains(&a.name.as_str()))
}

/// Whether a binding's subject is the user (rbac.go appliesToUser).
fn subject_is(s: &Value, user: &User, binding_ns: &str) -> bool {
    let name = s["name"].as_str().unwrap_or_default();
    match s["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let ns = s["namespace"]
                .as_str()
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn subject_label(user: &User, s: &Value) -> String {
    let name = s["name"].as_str().unwrap_or_default();
    match s["kind"].as_str() {
        Some("ServiceAccount") => format!(
            "ServiceAccount \"{name}/{}\"",
            s["namespace"].as_str().unwrap_or_default()
        ),
        Some(k) => format!("{k} {name:?}"),
        None => format!("User {:?}", user.name),
    }
}

impl Cluster {
    /// The rules a binding's roleRef grants (a Role of the binding's namespace, or a
    /// ClusterRole); none when the role is missing.
    fn role_rules(&self, role_ref: &Value, binding_ns: &str) -> Vec<Value> {
        let name = role_ref["name"].as_str().unwrap_or_default();
        let role = match role_ref["kind"].as_str() {
            Some("Role") => self.get_ref(kinds::ROLES, binding_ns, name),
            Some("ClusterRole") => self.get_ref(kinds::CLUSTERROLES, "", name),
            _ => None,
        };
        role.and_then(|r| r["rules"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The bindings that apply where the attributes point: every ClusterRoleBinding, and the
    /// RoleBindings of the namespace.
    fn bindings_for(&self, namespace: &str) -> Vec<(&'static str, &Value)> {
        let all = |k: kinds::Kind| {
            self.objects
                .get(&k.qualified())
                .into_iter()
                .flat_map(|m| m.values())
        };
        let mut out: Vec<(&'static str, &Value)> = all(kinds::CLUSTERROLEBINDINGS)
            .map(|b| ("ClusterRoleBinding", b))
            .collect();
        if !namespace.is_empty() {
            out.extend(
                all(kinds::ROLEBINDINGS)
                    .filter(|b| meta_str(b, "namespace") == Some(namespace))
                    .map(|b| ("RoleBinding", b)),
            );
        }
        out
    }

    /// Why `user` may do what `attrs` say (the reason the reviews give), or None when RBAC
    /// allows it nowhere.
    pub(crate) fn decide(&self, user: &User, attrs: &Attrs) -> Option<String> {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Some(String::new());
        }
        let ns = if attrs.path.is_some() {
            ""
        } else {
            attrs.namespace.as_str()
        };
        for (kind, b) in self.bindings_for(ns) {
            let bns = meta_str(b, "namespace").unwrap_or_default();
            let Some(subject) = b["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|s| subject_is(s, user, bns))
            else {
                continue;
            };
            if self
                .role_rules(&b["roleRef"], bns)
                .iter()
                .any(|r| rule_allows(r, attrs))
            {
                let bname = meta_str(b, "name").unwrap_or_default();
                let binding = if bns.is_empty() {
                    bname.to_string()
                } else {
                    format!("{bname}/{bns}")
                };
                return Some(format!(
                    "RBAC: allowed by {kind} {binding:?} of {} {:?} to {}",
                    b["roleRef"]["kind"].as_str().unwrap_or_default(),
                    b["roleRef"]["name"].as_str().unwrap_or_default(),
                    subject_label(user, subject)
                ));
            }
        }
        None
    }

    pub(crate) fn allowed(&self, user: &User, attrs: &Attrs) -> bool {
        self.decide(user, attrs).is_some()
    }

    /// A SelfSubjectRulesReview's status: the rules that apply to `user` in `ns`.
    pub(crate) fn rules_review(&self, user: &User, ns: &str) -> Value {
        let (mut resource_rules, mut non_resource) = (Vec::new(), Vec::new());
        if user.groups.iter().any(|g| g == MASTERS) {
            resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
            non_resource.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
        }
        for (_, b) in self.bindings_for(ns) {
            let bns = meta_str(b, "namespace").unwrap_or_default();
            let applies = b["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| subject_is(s, user, bns));
            if !applies {
                continue;
            }
            for r in self.role_rules(&b["roleRef"], bns) {
                if r.get("nonResourceURLs").is_some() {
                    non_resource.push(
                        json!({"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]}),
                    );
                } else {
                    let mut rule = json!({"verbs": r["verbs"], "apiGroups": r["apiGroups"], "resources": r["resources"]});
                    if r.get("resourceNames").is_some() {
                        rule["resourceNames"] = r["resourceNames"].clone();
                    }
                    resource_rules.push(rule);
                }
            }
        }
        json!({"resourceRules": resource_rules, "nonResourceRules": non_resource, "incomplete": false})
    }
}
