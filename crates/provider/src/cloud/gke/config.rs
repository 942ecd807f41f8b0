//! How the provider reaches GKE: the `google {}` settings, and credentials from a JSON document,
//! a path, a bare access token or Application Default Credentials. No secret is ever echoed.

use std::fmt;

use crate::cloud::error::{CloudError, Detail};

/// How to reach GKE. With nothing set: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
/// the gcloud ADC file, the metadata server) against container.googleapis.com.
#[derive(Clone, Default)]
pub struct GkeConfig {
    /// The project of `gke` blocks that name none (GOOGLE_PROJECT, GOOGLE_CLOUD_PROJECT); the
    /// client takes the project from each pool's location.
    pub project: Option<String>,
    /// A credentials JSON document (service account key, authorized user, external account) or the
    /// path of one.
    pub credentials: Option<String>,
    /// An OAuth2 access token used as is (e.g. from `gcloud auth print-access-token`).
    pub access_token: Option<String>,
    /// Another API endpoint, e.g. a private service connect address.
    pub endpoint: Option<String>,
    /// Base URL of a fracgpu sandbox: used as the endpoint, with anonymous credentials.
    pub sandbox: Option<String>,
}

impl fmt::Debug for GkeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |o: &Option<String>| o.as_ref().map(|_| "<redacted>");
        f.debug_struct("GkeConfig")
            .field("credentials", &redact(&self.credentials))
            .field("access_token", &redact(&self.access_token))
            .field("endpoint", &self.endpoint)
            .field("sandbox", &self.sandbox)
            .finish()
    }
}

/// Credentials from a JSON document or the path of one, by its `type`.
pub(super) fn credentials_from(
    content_or_path: &str,
) -> Result<google_cloud_auth::credentials::Credentials, CloudError> {
    use google_cloud_auth::credentials as c;
    let text = if content_or_path.trim_start().starts_with('{') {
        content_or_path.to_string()
    } else {
        std::fs::read_to_string(content_or_path).map_err(|e| {
            CloudError::Auth(Detail::caused_by(
                format!("cannot read the credentials file {content_or_path}: {e}"),
                e,
            ))
        })?
    };
    // Never echo the document: it holds a private key. Hence only the position of a syntax
    // error, and not the parser's error as a source, whose text could quote the document.
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        CloudError::Auth(
            format!(
                "the credentials are not a JSON document (line {}, column {})",
                e.line(),
                e.column()
            )
            .into(),
        )
    })?;
    let kind = json
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or("")
        .to_string();
    let built = match kind.as_str() {
        "service_account" => c::service_account::Builder::new(json).build(),
        "authorized_user" => c::user_account::Builder::new(json).build(),
        "external_account" => c::external_account::Builder::new(json).build(),
        "impersonated_service_account" => c::impersonated::Builder::new(json).build(),
        other => {
            return Err(CloudError::Auth(format!(
                "unsupported credentials type {other:?}: use a service_account, authorized_user, \
                    external_account or impersonated_service_account document"
            ).into()));
        }
    };
    built.map_err(|e| {
        CloudError::Auth(Detail::caused_by(
            format!("invalid {kind} credentials: {e}"),
            e,
        ))
    })
}

/// A bearer token given by the user. Debug never shows it.
pub(super) struct StaticToken {
    header: http::HeaderValue,
    tag: google_cloud_auth::credentials::EntityTag,
}

impl StaticToken {
    pub(super) fn new(token: &str) -> Result<StaticToken, CloudError> {
        let mut header =
            http::HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|e| {
                CloudError::Auth(Detail::caused_by(
                    "the access token contains characters not allowed in an HTTP header",
                    e,
                ))
            })?;
        header.set_sensitive(true);
        Ok(StaticToken {
            header,
            tag: google_cloud_auth::credentials::EntityTag::new(),
        })
    }
}

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

impl google_cloud_auth::credentials::CredentialsProvider for StaticToken {
    async fn headers(
        &self,
        extensions: http::Extensions,
    ) -> Result<
        google_cloud_auth::credentials::CacheableResource<http::HeaderMap>,
        google_cloud_auth::errors::CredentialsError,
    > {
        use google_cloud_auth::credentials::{CacheableResource, EntityTag};
        if extensions.get::<EntityTag>() == Some(&self.tag) {
            return Ok(CacheableResource::NotModified);
        }
        let mut data = http::HeaderMap::new();
        data.insert(http::header::AUTHORIZATION, self.header.clone());
        Ok(CacheableResource::New {
            entity_tag: self.tag.clone(),
            data,
        })
    }

    async fn universe_domain(&self) -> Option<String> {
        Some("googleapis.com".to_string())
    }
}
