//! Amazon EC2's flavour of the Query protocol: a form-encoded POST body like Auto Scaling's
//! (`query.rs` reads it), but lists numbered without `.member` (`LaunchTemplateVersion.1`,
//! `TagSpecification.1.Tag.1.Key`), answers in EC2's namespace with a lower-case `requestId`
//! and lists of `<item>`s, and errors as `<Response><Errors><Error><Code>..` with a `RequestID`.
//! Kept apart from the EC2 actions (`ec2.rs`) so that they read parameters and write documents
//! without knowing the wire format.
//!
//! Sources: botocore's `ec2` protocol serializer and data/ec2/2016-11-15/service-2.json (member
//! `locationName`s, `item` list members); Amazon EC2 API reference, "Query requests" and "Error
//! codes for the Amazon EC2 API" (the error document, HTTP 400 for client errors, and the common
//! codes MissingAction, InvalidAction, MissingParameter, InvalidParameterValue, AuthFailure).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::query::{escape, request_id, xml_response};

/// The XML namespace of every EC2 answer of API version 2016-11-15 (as the service writes it,
/// with the trailing slash botocore's `xmlNamespace` leaves off).
pub(super) const EC2_NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";
pub(super) const EC2_VERSION: &str = "2016-11-15";

/// An EC2 error: HTTP status, code and message.
#[derive(Debug)]
pub(crate) struct Ec2Error {
    pub(super) status: StatusCode,
    pub(super) code: &'static str,
    pub(super) message: String,
}

/// A client error (HTTP 400), which is what EC2 answers for every refused request.
pub(super) fn ec2_error(code: &'static str, message: impl Into<String>) -> Ec2Error {
    Ec2Error {
        status: StatusCode::BAD_REQUEST,
        code,
        message: message.into(),
    }
}

impl IntoResponse for Ec2Error {
    fn into_response(self) -> Response {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code>\
             <Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
            self.code,
            escape(&self.message),
            request_id(&self.message)
        );
        xml_response(self.status, body)
    }
}

/// An answer: `<{Action}Response xmlns=..><requestId>..</requestId>{result}</{Action}Response>`.
pub(super) fn ec2_answer(action: &str, result: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{EC2_NAMESPACE}\">\
         <requestId>{}</requestId>{result}</{action}Response>",
        request_id(result)
    );
    xml_response(StatusCode::OK, body)
}

/// A list element of `<item>`s.
pub(super) fn items(name: &str, items: &[String]) -> String {
    let inner: String = items.iter().map(|i| format!("<item>{i}</item>")).collect();
    format!("<{name}>{inner}</{name}>")
}
