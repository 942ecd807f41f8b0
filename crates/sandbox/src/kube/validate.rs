//! The API server's name, label and key rules (k8s.io/apimachinery/pkg/util/validation), reimplemented.

use super::status::FieldError;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.')
            .all(|p| !p.is_empty() && is_dns1123_label_chars(p))
}

fn is_dns1123_label_chars(p: &str) -> bool {
    p.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !p.starts_with('-')
        && !p.ends_with('-')
}

/// Object names: namespaces are RFC 1123 labels, everything else here is a subdomain.
pub fn object_name(name: &str, label_only: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if label_only {
        if !is_dns1123_label(name) {
            let msg = if name.len() > 63 {
                "must be no more than 63 characters".to_string()
            } else {
                DNS1123_LABEL_MSG.to_string()
            };
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    } else if name.len() > 253 {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be no more than 253 characters",
        ));
    } else if !is_dns1123_subdomain(name) {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            DNS1123_SUBDOMAIN_MSG,
        ));
    }
    errs
}

pub fn config_key(field: &str, key: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push(FieldError::invalid(
            field,
            key,
            "must be no more than 253 characters",
        ));
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        errs.push(FieldError::invalid(field, key, CONFIG_KEY_MSG));
    }
    if key == "." || key == ".." {
        errs.push(FieldError::invalid(
            field,
            key,
            format!("must not be '{key}'"),
        ));
    } else if key.starts_with("..") {
        errs.push(FieldError::invalid(field, key, "must not start with '..'"));
    }
    errs
}

fn is_qualified_name_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// Label and annotation keys: `[prefix/]name`, prefix a DNS subdomain, name a qualified name part.
pub fn qualified_key(field: &str, key: &str) -> Vec<FieldError> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix
        && !is_dns1123_subdomain(p)
    {
        errs.push(FieldError::invalid(
            field,
            key,
            format!("prefix part {DNS1123_SUBDOMAIN_MSG}"),
        ));
    }
    if name.contains('/') || !is_qualified_name_part(name) {
        let msg = if name.len() > 63 {
            "name part must be no more than 63 characters".to_string()
        } else {
            QUALIFIED_NAME_MSG.to_string()
        };
        errs.push(FieldError::invalid(field, key, msg));
    }
    errs
}

pub fn label_value(field: &str, v: &str) -> Vec<FieldError> {
    if v.is_empty() || is_qualified_name_part(v) {
        Vec::new()
    } else if v.len() > 63 {
        vec![FieldError::invalid(
            field,
            v,
            "must be no more than 63 characters",
        )]
    } else {
        vec![FieldError::invalid(field, v, LABEL_VALUE_MSG)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys() {
        assert!(is_dns1123_subdomain("cluster-policy"));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("Bad"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(is_dns1123_label("gpu-operator"));
        assert!(!is_dns1123_label("a.b"));
        assert!(config_key("data", "time-sliced-10").is_empty());
        assert!(config_key("data", "A_b.c").is_empty());
        assert!(!config_key("data", "a/b").is_empty());
        assert!(!config_key("data", "..x").is_empty());
        assert!(!config_key("data", &"k".repeat(254)).is_empty());
        assert!(qualified_key("l", "nvidia.com/device-plugin.config").is_empty());
        assert!(!qualified_key("l", "Nvidia.com/x").is_empty());
        assert!(!qualified_key("l", "a/b/c").is_empty());
        assert!(label_value("v", "").is_empty());
        assert!(!label_value("v", "-x").is_empty());
    }
}
