//! metav1 `Status` errors: the one error shape every Kubernetes API answers with.

use serde_json::{Value, json};

/// A failed request, rendered as the API server renders it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<Value>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// `configmaps "x" not found`, the message kubectl users know.
    pub(crate) fn not_found(qualified_resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{qualified_resource} \"{name}\" not found"),
        )
        .with_details(details(name, qualified_resource))
    }

    /// A group or version the server does not serve: the real server's mux answers these with a
    /// plain-text `404 page not found` (Go's net/http NotFound), not a Status.
    pub(crate) fn no_such_group() -> Self {
        Self::new(404, "", "404 page not found")
    }

    /// A path that names no resource the server knows.
    pub(crate) fn no_such_path() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
            .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}))
    }

    pub(crate) fn already_exists(qualified_resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{qualified_resource} \"{name}\" already exists"),
        )
        .with_details(details(name, qualified_resource))
    }

    pub(crate) fn conflict(qualified_resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified_resource} \"{name}\": {why}"),
        )
        .with_details(details(name, qualified_resource))
    }

    pub(crate) fn modified(qualified_resource: &str, name: &str) -> Self {
        Self::conflict(
            qualified_resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try \
                again",
        )
    }

    /// 422 with one cause per invalid field, message formatted like the API server's aggregate.
    /// `kind` is qualified with its group (`ClusterPolicy.nvidia.com`, `PatchOptions.meta.k8s.io`)
    /// as the message names it; the details carry kind and group apart, and no empty name
    /// (errors.NewInvalid in k8s.io/apimachinery pkg/api/errors/errors.go).
    pub(crate) fn invalid(kind: &str, name: &str, causes: &[FieldError]) -> Self {
        let list: Vec<String> = causes.iter().map(|c| c.to_string()).collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let causes_json: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message_part(), "field": c.field}))
            .collect();
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {joined}"),
        )
        .with_details({
            let mut d = details(name, kind);
            d["causes"] = json!(causes_json);
            d
        })
    }

    pub(crate) fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    pub(crate) fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: \
                    application/json-patch+json, application/merge-patch+json, \
                    application/apply-patch+yaml, application/strategic-merge-patch+json (got \
                    {ct:?})"
            ),
        )
    }

    /// A failure injected by the sandbox's fault layer, with the reason the API server gives that code.
    pub(crate) fn injected(code: u16, message: String) -> Self {
        let reason = match code {
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            _ => "InternalError",
        };
        Self::new(code, reason, message)
    }

    pub(crate) fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// Server-side apply's failure to make a typed value of the applied configuration
    /// (fieldmanager's `failed to create typed patch object`): a 500 without reason or details.
    pub(crate) fn typed_patch(
        ns: &str,
        name: &str,
        api_version: &str,
        kind: &str,
        why: &str,
    ) -> Self {
        let gv = if api_version.contains('/') {
            api_version.to_string()
        } else {
            format!("/{api_version}")
        };
        Self::new(
            500,
            "",
            format!("failed to create typed patch object ({ns}/{name}; {gv}, Kind={kind}): {why}"),
        )
    }

    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if !self.reason.is_empty() {
            v["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

/// Status details of `name` of `qualified` (`configmaps`, `clusterpolicies.nvidia.com`): the kind
/// and the group apart, each left out when empty (StatusDetails' omitempty).
fn details(name: &str, qualified: &str) -> Value {
    let (kind, group) = qualified.split_once('.').unwrap_or((qualified, ""));
    let mut d = json!({});
    if !kind.is_empty() {
        d["kind"] = json!(kind);
    }
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

/// One field problem, as field.Error renders it: `metadata.name: Invalid value: "x": why`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    pub(crate) field: String,
    pub(crate) reason: &'static str,
    pub(crate) value: Option<String>,
    pub(crate) detail: String,
}

impl FieldError {
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: &str,
        detail: impl Into<String>,
    ) -> Self {
        Self::invalid_rendered(field, format!("{value:?}"), detail)
    }

    /// `value` already printed as Go prints it (`0` for an integer, `"x"` for a string).
    pub(crate) fn invalid_rendered(
        field: impl Into<String>,
        value: String,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            value: Some(value),
            detail: detail.into(),
        }
    }

    /// A value of the wrong JSON type, as the OpenAPI schema validator reports it
    /// (`Invalid value: "integer": spec.x in body must be of type string: "integer"`).
    pub(crate) fn type_invalid(field: &str, got: &str, want: &str) -> Self {
        FieldError {
            field: field.to_string(),
            reason: "FieldValueTypeInvalid",
            value: Some(format!("{got:?}")),
            detail: format!("{field} in body must be of type {want}: {got:?}"),
        }
    }

    pub(crate) fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueRequired",
            value: None,
            detail: detail.into(),
        }
    }

    pub(crate) fn too_long(field: impl Into<String>, max: usize) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueTooLong",
            value: None,
            detail: format!("must have at most {max} bytes"),
        }
    }

    pub(crate) fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueForbidden",
            value: None,
            detail: detail.into(),
        }
    }

    /// `value` is already printed as the API server prints it (Go's `%#v` for a struct).
    pub(crate) fn duplicate(
        field: impl Into<String>,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueDuplicate",
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    pub(crate) fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            field: field.into(),
            reason: "FieldValueNotSupported",
            value: None,
            detail: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }

    fn message_part(&self) -> String {
        match (self.reason, &self.value) {
            ("FieldValueInvalid" | "FieldValueTypeInvalid", Some(v)) => {
                format!("Invalid value: {v}: {}", self.detail)
            }
            ("FieldValueDuplicate", Some(v)) => format!("Duplicate value: {v}: {}", self.detail),
            ("FieldValueRequired", _) if self.detail.is_empty() => "Required value".into(),
            ("FieldValueRequired", _) => format!("Required value: {}", self.detail),
            ("FieldValueTooLong", _) => format!("Too long: {}", self.detail),
            ("FieldValueForbidden", _) => format!("Forbidden: {}", self.detail),
            _ => self.detail.clone(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message_part())
    }
}
