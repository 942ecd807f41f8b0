//! What the clouds' clients built on reqwest (ARM's and EC2's) share: how the HTTP client is
//! made, and an answer's body read whole under a size bound (the SDK clients bound theirs with
//! `crate::bounded`).

use std::time::Duration;

use super::error::{CloudError, Detail, error_chain};

/// An HTTP client that follows no redirect (one could carry the credentials elsewhere) and gives
/// up on a connection after 10 s (a black-holed endpoint must not eat a whole attempt).
pub(crate) fn http_client() -> Result<reqwest::Client, CloudError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| {
            let message = format!("cannot build the HTTP client: {}", error_chain(&e));
            CloudError::Transport(Detail::caused_by(message, e))
        })
}

/// A reqwest answer's body read whole, refused past `max` bytes (the bodies are documents of a
/// few KiB).
pub(crate) async fn read_body(
    mut resp: reqwest::Response,
    what: &str,
    max: usize,
) -> Result<Vec<u8>, CloudError> {
    let too_large =
        || CloudError::BadResponse(format!("{what}: the answer is larger than {max} bytes").into());
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        let message = format!("{what}: {}", error_chain(&e));
        CloudError::Transport(Detail::caused_by(message, e))
    })? {
        if buf.len() + chunk.len() > max {
            return Err(too_large());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}
