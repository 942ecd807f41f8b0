//! The one error type of the Kubernetes layer, in a module of its own so that the layer's
//! modules (deliveries, Helm, GitOps) and its root all use it and it uses none of them. The API
//! server's own answer is kept whole, for the diagnostic to quote.

/// One error type for the layer; the API server's own answer is kept whole.
#[derive(Debug)]
pub enum KubeError {
    /// The settings do not make a client (unreadable kubeconfig, unknown context, bad CA).
    Config(String),
    /// No answer from the API server (connection refused, TLS, timeout).
    Unreachable { target: String, cause: String },
    /// An answer that does not decode, is too large or never finishes.
    BadResponse { target: String, cause: String },
    /// The API server answered with a Status.
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    /// The ClusterPolicy resource (nvidia.com/v1) is not served: the GPU operator is missing.
    MissingCrd,
    /// The CRD exists but the ClusterPolicy object does not.
    MissingClusterPolicy(String),
    /// A Helm release could not be read or upgraded.
    Helm(String),
}

impl std::error::Error for KubeError {}

impl std::fmt::Display for KubeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KubeError::Config(m) => write!(f, "{m}"),
            KubeError::Unreachable { target, cause } => {
                write!(f, "cannot reach {target}: {cause}")
            }
            KubeError::BadResponse { target, cause } => {
                write!(
                    f,
                    "the API server of {target} sent an answer the provider cannot read: {cause}"
                )
            }
            KubeError::Api {
                code,
                reason,
                message,
            } => write!(f, "{code} {reason}: {message}"),
            KubeError::MissingCrd => write!(
                f,
                "the API server does not serve clusterpolicies.nvidia.com/v1: the NVIDIA GPU \
                    operator (its ClusterPolicy CRD) is not installed"
            ),
            KubeError::MissingClusterPolicy(n) => write!(
                f,
                "the ClusterPolicy {n:?} does not exist (the GPU operator chart creates it as \
                    `cluster-policy`)"
            ),
            KubeError::Helm(m) => write!(f, "{m}"),
        }
    }
}

impl KubeError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, KubeError::Api { code: 404, .. })
    }

    pub(crate) fn from_kube(target: &str, e: kube::Error) -> KubeError {
        match e {
            kube::Error::Api(s) => KubeError::Api {
                code: s.code,
                reason: s.reason.clone(),
                message: s.message.clone(),
            },
            other => {
                // The chain holds the useful part ("Connection refused", "UnknownIssuer").
                let mut cause = other.to_string();
                let mut src = std::error::Error::source(&other);
                while let Some(s) = src {
                    // Layers often repeat their source's text; keep each part once.
                    let text = s.to_string();
                    if !cause.contains(&text) {
                        cause.push_str(": ");
                        cause.push_str(&text);
                    }
                    src = s.source();
                }
                let unreadable = matches!(other, kube::Error::SerdeError(_))
                    || crate::bounded::is_bounded_error(&cause);
                if unreadable {
                    return KubeError::BadResponse {
                        target: target.to_string(),
                        cause,
                    };
                }
                KubeError::Unreachable {
                    target: target.to_string(),
                    cause,
                }
            }
        }
    }
}
