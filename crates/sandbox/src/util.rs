//! Small HTTP helpers shared by the emulators: query and form parsing, JSON responses.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

pub async fn not_found(uri: axum::http::Uri) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({"error": {"code": "NotFound", "message": format!("no sandbox API at {}", uri.path())}}),
    )
}

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// Decode `%XX` and, for forms, `+`. Invalid escapes are kept as they are.
pub fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a=1&b=2` into pairs (query strings and form bodies).
pub fn parse_pairs(s: &str, plus_is_space: bool) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(k, plus_is_space),
                percent_decode(v, plus_is_space),
            )
        })
        .collect()
}

pub fn query_get(query: Option<&str>, key: &str) -> Option<String> {
    parse_pairs(query.unwrap_or(""), true)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// `http://host:port` of the request, for absolute URLs in headers and documents.
pub fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    format!("http://{host}")
}

/// Split a path into decoded segments.
pub fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode(s, false))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_pairs() {
        assert_eq!(percent_decode("a%2Fb+c%zz%", true), "a/b c%zz%");
        assert_eq!(percent_decode("a+b", false), "a+b");
        assert_eq!(
            query_get(Some("api-version=2025-10-01&x=%24y"), "x").as_deref(),
            Some("$y")
        );
        assert_eq!(query_get(Some("x"), "x").as_deref(), Some(""));
    }
}
