//! The one way a request reaches a cloud emulator. Each cloud implements [`CloudApi`]: its
//! `dispatch` matches the path of its real API and answers with a response or with that cloud's own
//! error type, which renders in the cloud's error shape; [`handle`] is the axum handler for all of
//! them. Keeping the extraction, the fault-injection flag and the error rendering in one place is
//! what lets the three clouds differ only where their public APIs differ.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use super::Sandbox;
use super::faults::FailOperation;
use super::util::base_url;

/// A request as the emulators read it.
pub(crate) struct ApiRequest {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Fault injection asked that the operation this request starts ends Failed.
    pub fail: bool,
}

impl ApiRequest {
    /// `http://host:port` of the request, for the absolute URLs clouds put in headers and documents.
    pub fn base(&self) -> String {
        base_url(&self.headers)
    }
}

impl<S: Send + Sync> FromRequest<S> for ApiRequest {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let method = req.method().clone();
        let uri = req.uri().clone();
        let headers = req.headers().clone();
        let fail = req.extensions().get::<FailOperation>().is_some();
        let body = Bytes::from_request(req, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(ApiRequest {
            method,
            uri,
            headers,
            body,
            fail,
        })
    }
}

/// One emulated cloud API.
pub(crate) trait CloudApi {
    /// The cloud's error, rendered in its documented shape.
    type Error: IntoResponse;

    /// Routes a request to the operation its method and path name.
    fn dispatch(sb: &Sandbox, req: &ApiRequest) -> Result<Response, Self::Error>;

    /// An error of this API with the given status, for failures injected before the request is
    /// routed (fault injection): a client must see the shape the real cloud would send.
    fn injected(status: StatusCode, message: String) -> Self::Error;
}

/// The axum handler of every cloud API.
pub(crate) async fn handle<A: CloudApi>(State(sb): State<Sandbox>, req: ApiRequest) -> Response {
    A::dispatch(&sb, &req).into_response()
}
