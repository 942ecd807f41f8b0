//! What went wrong talking to a cloud. API errors keep the cloud's own code and message so that a
//! diagnostic can quote them; the errors of credentials and transports keep the error they came
//! from as their `source()`, so that [`error_chain`] and a debugger see more than a sentence.

use crate::operation::Interrupted;
use std::error::Error;
use std::fmt;
use std::ops::Deref;
use std::time::Duration;

type BoxError = Box<dyn Error + Send + Sync>;

#[derive(Debug)]
pub enum CloudError {
    /// The API answered with an error.
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// The long-running operation ended in failure.
    OperationFailed { code: String, message: String },
    /// Credentials could not be obtained or were refused.
    Auth(Detail),
    /// The request never got an answer (connection refused or dropped, TLS, bad URL).
    Transport(Detail),
    /// An answer that does not parse, or is too large.
    BadResponse(Detail),
    /// The `timeouts` limit ran out while waiting.
    Timeout {
        waited: Duration,
        waiting_for: String,
    },
    /// Terraform asked the provider to stop (Ctrl-C).
    Stopped,
}

/// The message of an [`CloudError::Auth`], [`CloudError::Transport`] or
/// [`CloudError::BadResponse`], and the error it came from when there is one. It reads as its
/// message (`Display`, and `Deref` to `str`), as the plain string these variants held before.
#[derive(Debug)]
pub struct Detail {
    message: String,
    source: Option<BoxError>,
}

impl Detail {
    /// A message that already says what `source` says (it is not repeated in the text), with
    /// `source` kept for [`Error::source`].
    pub(crate) fn caused_by(message: impl Into<String>, source: impl Into<BoxError>) -> Detail {
        Detail {
            message: message.into(),
            source: Some(source.into()),
        }
    }
}

impl From<String> for Detail {
    fn from(message: String) -> Detail {
        Detail {
            message,
            source: None,
        }
    }
}

impl From<&str> for Detail {
    fn from(message: &str) -> Detail {
        Detail::from(message.to_string())
    }
}

impl Deref for Detail {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloudError::Api {
                status,
                code,
                message,
            } => write!(f, "the API answered {status} {code}: {message}"),
            CloudError::OperationFailed { code, message } => {
                write!(f, "the operation failed with {code}: {message}")
            }
            CloudError::Auth(m) => write!(f, "authentication failed: {m}"),
            CloudError::Transport(m) => write!(f, "the API could not be reached: {m}"),
            CloudError::BadResponse(m) => {
                write!(f, "the API sent an answer the provider cannot read: {m}")
            }
            CloudError::Timeout {
                waited,
                waiting_for,
            } => {
                write!(
                    f,
                    "gave up after {}s waiting for {waiting_for}",
                    waited.as_secs()
                )
            }
            CloudError::Stopped => write!(
                f,
                "stopped by terraform (interrupt) before the operation finished"
            ),
        }
    }
}

/// A wait that the deadline or a stop cut short, as every cloud client reports it.
impl From<Interrupted> for CloudError {
    fn from(i: Interrupted) -> CloudError {
        match i {
            Interrupted::Timeout {
                waited,
                waiting_for,
            } => CloudError::Timeout {
                waited,
                waiting_for,
            },
            Interrupted::Stopped => CloudError::Stopped,
        }
    }
}

impl Error for CloudError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CloudError::Auth(d) | CloudError::Transport(d) | CloudError::BadResponse(d) => {
                d.source.as_deref().map(|e| e as &(dyn Error + 'static))
            }
            _ => None,
        }
    }
}

impl CloudError {
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, CloudError::Api { status: 404, .. })
    }
}

/// An error with its sources: an HTTP client's own message alone rarely says what happened.
/// Wrappers often repeat their source's text, so each part is said once.
pub(crate) fn error_chain(e: &dyn Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detail_keeps_its_source_without_changing_the_text() {
        let io = std::io::Error::other("connection reset by peer");
        let e = CloudError::Transport(Detail::caused_by(
            format!("GET /pools: {}", error_chain(&io)),
            io,
        ));
        assert_eq!(
            e.to_string(),
            "the API could not be reached: GET /pools: connection reset by peer"
        );
        assert_eq!(
            e.source().map(|s| s.to_string()).as_deref(),
            Some("connection reset by peer")
        );
        // The chain does not repeat what the message already says.
        assert_eq!(error_chain(&e), e.to_string());

        let plain = CloudError::Auth("no credentials".into());
        assert!(plain.source().is_none());
        let CloudError::Auth(m) = &plain else {
            unreachable!()
        };
        assert!(m.contains("credentials") && m.starts_with("no"), "{m}");
    }
}
