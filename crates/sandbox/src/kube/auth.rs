//! Who is asking, and what a request asks to do: bearer tokens (the cluster's admin, and
//! ServiceAccount tokens from the TokenRequest API), impersonation, and the request's
//! attributes as the authorizer reads them (k8s.io/apiserver pkg/endpoints/filters
//! authentication.go and impersonation.go, pkg/endpoints/request/requestinfo.go). What the
//! attributes are allowed is [`super::rbac`]'s.
//!
//! Documented simplifications: ServiceAccount tokens are opaque strings the cluster remembers,
//! not signed JWTs (clients never read them); a token stays valid while its ServiceAccount exists
//! with the same uid and until it expires.

use serde_json::{Value, json};

use super::identity::{AUTHENTICATED, Attrs, SaToken, User};
use super::kinds::{self, Kind};
use super::meta::meta_str;
use super::status::ApiError;
use super::store::Cluster;

fn now() -> u64 {
    crate::dates::now_ms() / 1000
}

impl Cluster {
    /// The user a bearer token names: the admin's token, or a live ServiceAccount token.
    pub(crate) fn authenticate(&self, token: &str) -> Option<User> {
        if token == self.token {
            return Some(User::admin());
        }
        let t = self.sa_tokens.get(token).filter(|t| t.expires > now())?;
        let sa = self.get_ref(kinds::SERVICEACCOUNTS, &t.namespace, &t.name)?;
        (meta_str(sa, "uid") == Some(t.uid.as_str()))
            .then(|| User::service_account(&t.namespace, &t.name, &t.uid))
    }

    /// `POST .../serviceaccounts/{name}/token`: a token for the ServiceAccount, for
    /// `spec.expirationSeconds` (at least 600, 3600 when unset, as the API server's defaults).
    pub(crate) fn token_request(
        &mut self,
        ns: &str,
        name: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let sa = self.get(kinds::SERVICEACCOUNTS, ns, name)?;
        let uid = meta_str(&sa, "uid").unwrap_or_default().to_string();
        let seconds = body
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(3600);
        if seconds < 600 {
            return Err(ApiError::invalid(
                "TokenRequest.authentication.k8s.io",
                name,
                &[super::status::FieldError::invalid_rendered(
                    "spec.expirationSeconds",
                    seconds.to_string(),
                    "may not specify a duration less than 10 minutes",
                )],
            ));
        }
        let token = format!(
            "sandbox-sa.{}",
            (0..48)
                .map(|_| fastrand::alphanumeric())
                .collect::<String>()
        );
        let expires = now() + seconds;
        // Expired tokens are forgotten as new ones are issued.
        let t = now();
        self.sa_tokens.retain(|_, v| v.expires > t);
        self.sa_tokens.insert(
            token.clone(),
            SaToken {
                namespace: ns.into(),
                name: name.into(),
                uid: uid.clone(),
                expires,
            },
        );
        let audiences = body
            .pointer("/spec/audiences")
            .cloned()
            .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
            .unwrap_or_else(|| json!(["https://kubernetes.default.svc"]));
        Ok(
            json!({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "uid": uid,
                "creationTimestamp": crate::dates::now_rfc3339_secs()},
            "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": body.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null)},
            "status": {"token": token, "expirationTimestamp": crate::dates::rfc3339_secs(expires)}}),
        )
    }
}

/// A request header's values.
fn header_values<'a>(headers: &'a axum::http::HeaderMap, name: &str) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect()
}

/// The user a request acts as: its token's, or the one it impersonates (`Impersonate-User`,
/// `Impersonate-Group`, `Impersonate-Uid`) when its token's user may impersonate them
/// (impersonation.go: the verb `impersonate` on `users`, `groups`, `uids` or the ServiceAccount).
pub(crate) fn requester(c: &Cluster, headers: &axum::http::HeaderMap) -> Result<User, ApiError> {
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    let user = c.authenticate(token).ok_or_else(ApiError::unauthorized)?;
    let as_user = header_values(headers, "impersonate-user");
    let as_groups = header_values(headers, "impersonate-group");
    let as_uid = header_values(headers, "impersonate-uid");
    let Some(name) = as_user.first().copied() else {
        if as_groups.is_empty() && as_uid.is_empty() {
            return Ok(user);
        }
        return Err(ApiError::new(
            500,
            "InternalError",
            "Internal error occurred: requested [{Kind:Group}] without impersonating a user",
        ));
    };
    let mut asked: Vec<Attrs> = Vec::new();
    match User::as_service_account(name) {
        Some((ns, sa)) => asked.push(Attrs {
            verb: "impersonate".into(),
            resource: "serviceaccounts".into(),
            namespace: ns.into(),
            name: sa.into(),
            ..Attrs::default()
        }),
        None => asked.push(Attrs {
            verb: "impersonate".into(),
            resource: "users".into(),
            name: name.into(),
            ..Attrs::default()
        }),
    }
    for g in &as_groups {
        asked.push(Attrs {
            verb: "impersonate".into(),
            resource: "groups".into(),
            name: g.to_string(),
            ..Attrs::default()
        });
    }
    for u in &as_uid {
        asked.push(Attrs {
            verb: "impersonate".into(),
            resource: "uids".into(),
            name: u.to_string(),
            ..Attrs::default()
        });
    }
    for a in &asked {
        if !c.allowed(&user, a) {
            return Err(a.forbidden(&user.name));
        }
    }
    let mut groups: Vec<String> = as_groups.iter().map(|g| g.to_string()).collect();
    if let Some((ns, _)) = User::as_service_account(name).filter(|_| groups.is_empty()) {
        groups.push("system:serviceaccounts".into());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    Ok(User {
        name: name.into(),
        uid: as_uid.first().map(|u| u.to_string()).unwrap_or_default(),
        groups,
    })
}

/// The reviews: `POST` of a SelfSubjectAccessReview, SubjectAccessReview,
/// LocalSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview or TokenReview answers
/// with the object and its `status` filled in (nothing is stored).
pub(crate) fn review(
    c: &Cluster,
    user: &User,
    kind: Kind,
    ns: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let mut out = body.clone();
    if !out.is_object() {
        return Err(ApiError::bad_request(format!(
            "a {} must be an object",
            kind.kind
        )));
    }
    out["kind"] = json!(kind.kind);
    out["apiVersion"] = json!(kind.api_version());
    if out.get("metadata").is_none_or(|m| !m.is_object()) {
        out["metadata"] = json!({});
    }
    out["metadata"]["creationTimestamp"] = Value::Null;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match kind.kind {
        "SelfSubjectAccessReview" => access_status(c, user, &Attrs::of_review(&spec)),
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let mut attrs = Attrs::of_review(&spec);
            if kind.kind == "LocalSubjectAccessReview" {
                if !attrs.namespace.is_empty() && attrs.namespace != ns {
                    return Err(ApiError::bad_request(format!(
                        "spec.resourceAttributes.namespace must match metadata.namespace: {ns:?}"
                    )));
                }
                attrs.namespace = ns.into();
            }
            let subject = User {
                name: spec["user"].as_str().unwrap_or_default().into(),
                uid: spec["uid"].as_str().unwrap_or_default().into(),
                groups: spec["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            };
            access_status(c, &subject, &attrs)
        }
        "SelfSubjectRulesReview" => {
            let ns = spec["namespace"].as_str().unwrap_or_default();
            c.rules_review(user, ns)
        }
        "SelfSubjectReview" => json!({"userInfo": user.info()}),
        "TokenReview" => {
            let token = spec["token"].as_str().unwrap_or_default();
            match c.authenticate(token) {
                Some(u) => json!({"authenticated": true, "user": u.info(),
                    "audiences": ["https://kubernetes.default.svc"]}),
                None => json!({"user": {}, "error": "invalid bearer token"}),
            }
        }
        _ => return Err(ApiError::method_not_allowed("POST")),
    };
    out["status"] = status;
    Ok(out)
}

fn access_status(c: &Cluster, user: &User, attrs: &Attrs) -> Value {
    match c.decide(user, attrs) {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    }
}
