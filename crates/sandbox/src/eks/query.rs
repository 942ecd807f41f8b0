//! The awsQuery protocol as Amazon EC2 Auto Scaling speaks it: a form-encoded POST body
//! (`Action=...&Version=2011-01-01&Tags.member.1.Key=...`), XML answers in the service's namespace
//! with a `ResponseMetadata`, and errors as `<ErrorResponse><Error><Type>Sender</Type><Code>..`.
//! Kept apart from the Auto Scaling actions (`autoscaling.rs`) so that they read parameters and
//! write documents without knowing the wire format.
//!
//! Sources: AWS Query protocol (Smithy `aws.protocols#awsQuery`: lists as `Name.member.N`,
//! structures as `Name.Field`, the error document) and the Auto Scaling API reference's
//! "Common Errors" and sample responses (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/).

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::util::{fnv1a, parse_pairs};

/// The XML namespace of every Auto Scaling answer (botocore's `xmlNamespace` for the service).
pub(super) const NAMESPACE: &str = "http://autoscaling.amazonaws.com/doc/2011-01-01/";
pub(super) const VERSION: &str = "2011-01-01";

/// An Auto Scaling error: HTTP status, code and message (the type is Sender for 4xx answers,
/// Receiver for 5xx, as the API reference's common errors have it).
#[derive(Debug)]
pub(crate) struct QueryError {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
}

pub(super) fn query_error(
    status: StatusCode,
    code: &'static str,
    message: impl Into<String>,
) -> QueryError {
    QueryError {
        status,
        code,
        message: message.into(),
    }
}

/// `ValidationError`, HTTP 400: what Auto Scaling answers for a parameter it refuses and for a
/// group that does not exist.
pub(super) fn validation(message: impl Into<String>) -> QueryError {
    query_error(StatusCode::BAD_REQUEST, "ValidationError", message)
}

impl IntoResponse for QueryError {
    fn into_response(self) -> Response {
        let kind = if self.status.is_server_error() {
            "Receiver"
        } else {
            "Sender"
        };
        let body = format!(
            "<ErrorResponse xmlns=\"{NAMESPACE}\"><Error><Type>{kind}</Type><Code>{}</Code>\
             <Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
            self.code,
            escape(&self.message),
            request_id(&self.message)
        );
        xml_response(self.status, body)
    }
}

/// A request's parameters, by their flattened names.
pub(super) struct Params(BTreeMap<String, String>);

impl Params {
    pub(super) fn parse(body: &[u8]) -> Params {
        let text = String::from_utf8_lossy(body);
        Params(parse_pairs(&text, true).into_iter().collect())
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// The members of a list parameter (`{name}.member.1`, `.2`, ...), each as the parameters
    /// under its prefix with the prefix removed; numbering stops at the first gap, as the services do.
    pub(super) fn members(&self, name: &str) -> Vec<Params> {
        self.numbered(&format!("{name}.member"))
    }

    /// The items of a list parameter in EC2's flavour of the protocol, which numbers them without
    /// `.member` (`{name}.1`, `{name}.2`, ...: botocore's `ec2` serializer, lists flattened under
    /// their `locationName`).
    pub(super) fn items(&self, name: &str) -> Vec<Params> {
        self.numbered(name)
    }

    /// The strings of an EC2 list parameter (`{name}.N`).
    pub(super) fn item_strings(&self, name: &str) -> Vec<String> {
        self.items(name)
            .into_iter()
            .filter_map(|p| p.get("").map(str::to_string))
            .collect()
    }

    /// The parameters under `{prefix}.1`, `{prefix}.2`, ... with the prefix removed.
    fn numbered(&self, prefix: &str) -> Vec<Params> {
        let mut out = Vec::new();
        for i in 1.. {
            let prefix = format!("{prefix}.{i}");
            let dotted = format!("{prefix}.");
            let m: BTreeMap<String, String> = self
                .0
                .iter()
                .filter_map(|(k, v)| {
                    if *k == prefix {
                        Some((String::new(), v.clone()))
                    } else {
                        k.strip_prefix(&dotted).map(|r| (r.to_string(), v.clone()))
                    }
                })
                .collect();
            if m.is_empty() {
                break;
            }
            out.push(Params(m));
        }
        out
    }

    /// The parameters under `{prefix}.` with the prefix removed (a structure member).
    pub(super) fn nested(&self, prefix: &str) -> Params {
        let dotted = format!("{prefix}.");
        Params(
            self.0
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(&dotted).map(|r| (r.to_string(), v.clone())))
                .collect(),
        )
    }

    /// Whether any parameter is under `{prefix}.`.
    pub(super) fn has(&self, prefix: &str) -> bool {
        let dotted = format!("{prefix}.");
        self.0.keys().any(|k| k.starts_with(&dotted))
    }

    /// A list of strings (`{name}.member.N`).
    pub(super) fn strings(&self, name: &str) -> Vec<String> {
        self.members(name)
            .into_iter()
            .filter_map(|p| p.get("").map(str::to_string))
            .collect()
    }
}

/// An answer: `<{Action}Response><{Action}Result>{result}</..><ResponseMetadata>..`; actions
/// without output (CreateOrUpdateTags, DeleteTags) have no Result element.
pub(super) fn answer(action: &str, result: Option<&str>) -> Response {
    let result = result
        .map(|r| format!("<{action}Result>{r}</{action}Result>"))
        .unwrap_or_default();
    let body = format!(
        "<{action}Response xmlns=\"{NAMESPACE}\">{result}<ResponseMetadata><RequestId>{}\
         </RequestId></ResponseMetadata></{action}Response>",
        request_id(&result)
    );
    xml_response(StatusCode::OK, body)
}

pub(super) fn xml_response(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    r
}

/// An element with escaped text.
pub(super) fn el(name: &str, text: &str) -> String {
    format!("<{name}>{}</{name}>", escape(text))
}

/// A list element of members.
pub(super) fn list(name: &str, members: &[String]) -> String {
    let inner: String = members
        .iter()
        .map(|m| format!("<member>{m}</member>"))
        .collect();
    format!("<{name}>{inner}</{name}>")
}

/// Text content escaped (quotes need escaping only inside attributes, and no answer here has any).
pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A request id in the UUID form AWS uses, varied by the answer and a random part.
pub(super) fn request_id(seed: &str) -> String {
    let h = fnv1a(seed) ^ fastrand::u64(..);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        h as u32,
        (h >> 32) as u16,
        (h >> 48) & 0xfff,
        (h >> 20) & 0xfff,
        fastrand::u64(..) & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_read_in_order_until_a_gap() {
        let p = Params::parse(
            b"Action=DescribeTags&Filters.member.1.Name=key&Filters.member.1.Values.member.1=a%2Fb\
              &Filters.member.1.Values.member.2=c&Filters.member.2.Name=auto-scaling-group\
              &Filters.member.4.Name=lost",
        );
        let f = p.members("Filters");
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].get("Name"), Some("key"));
        assert_eq!(f[0].strings("Values"), ["a/b", "c"]);
        assert_eq!(f[1].get("Name"), Some("auto-scaling-group"));
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(el("Value", "a<b&'c'"), "<Value>a&lt;b&amp;'c'</Value>");
    }
}
