//! A cloud answer's body, read whole under a size bound: the clients built on reqwest (ARM's and
//! EC2's) read their answers through this; the SDK clients bound theirs with `crate::bounded`.

use super::error::{CloudError, Detail, error_chain};

/// A reqwest answer's body read whole, refused past `max` bytes (the clients built on reqwest,
/// ARM's and EC2's, read their answers through this; the bodies are documents of a few KiB).
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
