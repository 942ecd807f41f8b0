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
        .with_details(json!({"name": name, "kind": plural_of(qualified_resource)}))
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
        .with_details(json!({"name": name, "kind": plural_of(qualified_resource)}))
    }

    pub(crate) fn conflict(qualified_resource: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified_resource} \"{name}\": {why}"),
        )
        .with_details(json!({"name": name, "kind": plural_of(qualified_resource)}))
    }

    pub(crate) fn modified(qualified_resource: &str, name: &str) -> Self {
        Self::conflict(
            qualified_resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per invalid field, message formatted like the API server's aggregate.
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
        .with_details(json!({"name": name, "kind": kind, "causes": causes_json}))
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
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
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

    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

fn plural_of(qualified: &str) -> &str {
    qualified.split('.').next().unwrap_or(qualified)
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
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            value: Some(value.to_string()),
            detail: detail.into(),
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
            ("FieldValueInvalid", Some(v)) => format!("Invalid value: {v:?}: {}", self.detail),
            ("FieldValueDuplicate", Some(v)) => format!("Duplicate value: {v}: {}", self.detail),
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
