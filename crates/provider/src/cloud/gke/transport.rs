//! The HTTP transport under the GKE client: the official `ClusterManager` with our own stub for
//! the calls the provider makes, so that every answer is read with a size cap and a time limit.
//! The client library's own transport collects a body whole, however large or endless, and waits
//! as long as its caller does.
//!
//! The REST mapping is GKE v1's (`GET /v1/{name}`, `GET /v1/{parent}/clusters`,
//! `POST /v1/{parent}/nodePools`, `PUT /v1/{name}`,
//! `POST /v1/{name}:setAutoscaling`, `POST /v1/{name}:setSize`, `DELETE /v1/{name}`); requests and
//! answers are the library's own model types, and errors the library's error type with the HTTP
//! status, headers and google.rpc status, so `calls` classifies them.

use std::time::Duration;

use bytes::Bytes;
use google_cloud_container_v1 as gcc;
use google_cloud_container_v1::model as m;
use google_cloud_gax::error::rpc::Status;
use google_cloud_gax::response::{Parts, Response};
use reqwest::Method;

use crate::cloud::error::error_chain;

/// GKE's documents are a few KiB; anything near this is not GKE.
pub(super) const MAX_BODY: usize = 4 * 1024 * 1024;
/// A project's clusters, each with its node pools, in one answer (`clusters.list` has no page
/// token): a few hundred KiB for tens of clusters. Past this the refresh lists each cluster's
/// pools instead.
const MAX_CLUSTER_LIST: usize = 32 * 1024 * 1024;
/// One request, headers to last byte.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Debug)]
pub(super) struct BoundedTransport {
    pub(super) http: reqwest::Client,
    /// e.g. `https://container.googleapis.com`, without a trailing slash.
    pub(super) endpoint: String,
    pub(super) creds: google_cloud_auth::credentials::Credentials,
}

/// A reqwest client for GKE calls: no redirects (a redirect could carry the token elsewhere).
pub(super) fn http_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(ATTEMPT_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
}

/// Reads a body up to `max` bytes; more is an error naming the cap.
pub(super) async fn read_capped(
    mut r: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, BodyError> {
    if r.content_length().is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooLarge(max));
    }
    let mut buf = Vec::new();
    while let Some(chunk) = r.chunk().await.map_err(BodyError::Read)? {
        if buf.len() + chunk.len() > max {
            return Err(BodyError::TooLarge(max));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

#[derive(Debug)]
pub(super) enum BodyError {
    TooLarge(usize),
    Read(reqwest::Error),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::TooLarge(n) => write!(f, "the answer is larger than {n} bytes"),
            BodyError::Read(e) if e.is_timeout() => write!(
                f,
                "the answer did not finish within {}s: {}",
                ATTEMPT_TIMEOUT.as_secs(),
                error_chain(e)
            ),
            BodyError::Read(e) => write!(f, "reading the answer failed: {}", error_chain(e)),
        }
    }
}

impl std::error::Error for BodyError {}

impl BoundedTransport {
    async fn send<T: serde::de::DeserializeOwned + Default>(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> gcc::Result<Response<T>> {
        self.send_capped(method, path, body, MAX_BODY).await
    }

    async fn send_capped<T: serde::de::DeserializeOwned + Default>(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
        cap: usize,
    ) -> gcc::Result<Response<T>> {
        use google_cloud_auth::credentials::CacheableResource;
        let headers = match self.creds.headers(http::Extensions::new()).await {
            Ok(CacheableResource::New { data, .. }) => data,
            Ok(CacheableResource::NotModified) => http::HeaderMap::new(),
            Err(e) => return Err(gcc::Error::authentication(e)),
        };
        let url = format!("{}/v1/{}", self.endpoint, path.trim_start_matches('/'));
        let mut req = self
            .http
            .request(method, url)
            .headers(headers)
            .query(&[("$alt", "json;enum-encoding=int")]);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_connect() {
                gcc::Error::connect(e)
            } else if e.is_timeout() {
                gcc::Error::timeout(e)
            } else {
                gcc::Error::io(e)
            }
        })?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = match read_capped(resp, cap).await {
            Ok(b) => Bytes::from(b),
            // A timeout while reading is retried like a dropped connection; a body over the cap
            // is not something another attempt would fix.
            Err(e @ BodyError::Read(_)) => return Err(gcc::Error::io(e)),
            Err(e @ BodyError::TooLarge(_)) => return Err(gcc::Error::deser(e)),
        };
        if !(200..300).contains(&status) {
            return Err(match Status::try_from(&bytes) {
                Ok(s) => gcc::Error::service_with_http_metadata(s, Some(status), Some(headers)),
                Err(_) => gcc::Error::http(status, headers, bytes),
            });
        }
        let body = if bytes.is_empty() && status == 204 {
            T::default()
        } else {
            serde_json::from_slice(&bytes).map_err(gcc::Error::deser)?
        };
        Ok(Response::from_parts(
            Parts::new().set_headers(headers),
            body,
        ))
    }
}

fn json<T: serde::Serialize>(v: &T) -> gcc::Result<serde_json::Value> {
    serde_json::to_value(v).map_err(gcc::Error::ser)
}

impl gcc::stub::ClusterManager for BoundedTransport {
    async fn get_cluster(
        &self,
        req: m::GetClusterRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Cluster>> {
        self.send(Method::GET, &req.name, None).await
    }

    async fn get_node_pool(
        &self,
        req: m::GetNodePoolRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::NodePool>> {
        self.send(Method::GET, &req.name, None).await
    }

    async fn list_clusters(
        &self,
        req: m::ListClustersRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::ListClustersResponse>> {
        let path = format!("{}/clusters", req.parent);
        self.send_capped(Method::GET, &path, None, MAX_CLUSTER_LIST)
            .await
    }

    async fn list_node_pools(
        &self,
        req: m::ListNodePoolsRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::ListNodePoolsResponse>> {
        self.send(Method::GET, &format!("{}/nodePools", req.parent), None)
            .await
    }

    async fn get_operation(
        &self,
        req: m::GetOperationRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Operation>> {
        self.send(Method::GET, &req.name, None).await
    }

    async fn create_node_pool(
        &self,
        req: m::CreateNodePoolRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Operation>> {
        let path = format!("{}/nodePools", req.parent);
        self.send(Method::POST, &path, Some(json(&req)?)).await
    }

    async fn update_node_pool(
        &self,
        req: m::UpdateNodePoolRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Operation>> {
        let path = req.name.clone();
        self.send(Method::PUT, &path, Some(json(&req)?)).await
    }

    async fn set_node_pool_autoscaling(
        &self,
        req: m::SetNodePoolAutoscalingRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Operation>> {
        let path = format!("{}:setAutoscaling", req.name);
        self.send(Method::POST, &path, Some(json(&req)?)).await
    }

    async fn set_node_pool_size(
        &self,
        req: m::SetNodePoolSizeRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Operation>> {
        let path = format!("{}:setSize", req.name);
        self.send(Method::POST, &path, Some(json(&req)?)).await
    }

    async fn delete_node_pool(
        &self,
        req: m::DeleteNodePoolRequest,
        _options: google_cloud_gax::options::RequestOptions,
    ) -> gcc::Result<Response<m::Operation>> {
        self.send(Method::DELETE, &req.name, None).await
    }
}
