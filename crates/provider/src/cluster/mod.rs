//! Kubernetes delivery of the NVIDIA device plugin config: connecting to a cluster the way
//! kubectl and the official providers do (kubeconfig path and context, host + token + CA, exec
//! credential plugins, in-cluster), server-side apply of the ConfigMap and the GPU operator's
//! ClusterPolicy pointer, the device plugin restart, daemonset rollouts (`rollout`), Helm
//! releases (read from their Secrets, upgraded with the helm CLI), what the operator's chart makes
//! of the values it is given, and the Karpenter NodePool, NodeOverlays and node class of a shared
//! GPU pool.
//!
//! No Terraform types here: the resource hands in plain settings and gets back plain data or a
//! [`KubeError`] that keeps the API server's status (code, reason, message) for the diagnostic.

pub mod chart;
pub mod delivery;
pub mod device_plugin_chart;
pub mod drain;
mod error;
pub mod gitops;
pub mod helm;
pub mod karpenter_api;
pub mod rollout;
pub mod values;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use delivery::{CLUSTER_POLICY, Cluster, PolicyField, PolicyPointer, TakenField};
pub use error::KubeError;

/// How to reach a cluster. Empty means "the default": `KUBECONFIG`, `~/.kube/config`, or the
/// in-cluster service account, as kubectl finds them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KubernetesSettings {
    pub config_path: Option<String>,
    pub config_context: Option<String>,
    pub host: Option<String>,
    pub token: Option<String>,
    /// PEM, as the official kubernetes provider takes it.
    pub cluster_ca_certificate: Option<String>,
    pub insecure: Option<bool>,
    pub exec: Option<ExecSettings>,
}

/// A client-go credential plugin (`aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecSettings {
    pub api_version: String,
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

impl KubernetesSettings {
    pub fn is_empty(&self) -> bool {
        *self == KubernetesSettings::default()
    }

    /// These settings when any is set, else `fallback` (the provider's block).
    pub fn or(&self, fallback: &KubernetesSettings) -> KubernetesSettings {
        if self.is_empty() {
            fallback.clone()
        } else {
            self.clone()
        }
    }

    /// Where the settings point, for diagnostics (never the token).
    pub fn describe(&self) -> String {
        if let Some(h) = &self.host {
            return format!("the API server {h}");
        }
        let path = self
            .config_path
            .clone()
            .or_else(|| std::env::var("KUBECONFIG").ok().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| "~/.kube/config".to_string());
        match &self.config_context {
            Some(c) => format!("the kubeconfig {path} (context {c})"),
            None => format!("the kubeconfig {path}"),
        }
    }
}

pub(crate) fn expand_home(p: &str) -> String {
    match (p.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => format!("{home}/{rest}"),
        _ => p.to_string(),
    }
}

/// Builds an in-memory kubeconfig for host/token/CA/exec settings, so every way in goes
/// through the same kubeconfig code path kubectl's users know.
pub(crate) fn synthetic_kubeconfig(
    s: &KubernetesSettings,
    host: &str,
) -> Result<Kubeconfig, KubeError> {
    let mut cluster = serde_json::json!({ "server": host });
    if let Some(ca) = &s.cluster_ca_certificate {
        cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD
            .encode(ca.as_bytes())
            .into();
    }
    if s.insecure == Some(true) {
        cluster["insecure-skip-tls-verify"] = true.into();
    }
    let mut user = serde_json::json!({});
    if let Some(t) = &s.token {
        user["token"] = t.clone().into();
    }
    if let Some(e) = &s.exec {
        let env: Vec<_> = e
            .env
            .iter()
            .map(|(k, v)| serde_json::json!({"name": k, "value": v}))
            .collect();
        user["exec"] = serde_json::json!({
            "apiVersion": e.api_version, "command": e.command, "args": e.args, "env": env,
            "interactiveMode": "Never",
        });
    }
    let kc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    });
    serde_json::from_value(kc).map_err(|e| KubeError::Config(format!("kubernetes settings: {e}")))
}

/// Connects with the settings; nothing goes over the wire until the first request.
pub async fn connect(s: &KubernetesSettings) -> Result<Cluster, KubeError> {
    let target = s.describe();
    let mut cfg = if let Some(host) = &s.host {
        let kc = synthetic_kubeconfig(s, host)?;
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| KubeError::Config(format!("{target}: {e}")))?
    } else if s.config_path.is_some() || s.config_context.is_some() {
        let kc = match &s.config_path {
            Some(p) => Kubeconfig::read_from(expand_home(p))
                .map_err(|e| KubeError::Config(format!("{target}: {e}")))?,
            None => Kubeconfig::read().map_err(|e| KubeError::Config(format!("{target}: {e}")))?,
        };
        let opts = KubeConfigOptions {
            context: s.config_context.clone(),
            ..KubeConfigOptions::default()
        };
        kube::Config::from_custom_kubeconfig(kc, &opts)
            .await
            .map_err(|e| KubeError::Config(format!("{target}: {e}")))?
    } else {
        kube::Config::infer()
            .await
            .map_err(|e| KubeError::Config(format!("{target}: {e}")))?
    };
    // An unreachable cluster should fail a plan in seconds, not hang it.
    cfg.connect_timeout = Some(Duration::from_secs(10));
    cfg.read_timeout = Some(Duration::from_secs(60));
    let url = cfg.cluster_url.to_string();
    let build = |cfg: kube::Config| {
        kube::client::ClientBuilder::try_from(cfg)
            .map_err(|e| KubeError::from_kube(&target, e))
            .map(|b| {
                b.with_layer(&tower::util::MapResponseLayer::new(bound))
                    .build()
            })
    };
    let mut plain = cfg.clone();
    plain.default_retry = false;
    let unretried = build(plain)?;
    let client = build(cfg)?;
    Ok(Cluster::new(client, unretried, format!("{target} ({url})")))
}

/// Larger than any object the provider reads (a Helm release Secret is at most ~1 MiB, etcd's
/// limit) and any list of them it asks for.
pub const MAX_BODY: usize = 32 * 1024 * 1024;
/// From an answer's headers to its last byte (a watch is never asked for).
pub const BODY_DEADLINE: Duration = Duration::from_secs(60);

/// Wraps a response's body in the size and time bound (a layer of the client's stack).
fn bound<B>(r: http::Response<B>) -> http::Response<crate::bounded::BoundedBody<B>> {
    r.map(|b| crate::bounded::BoundedBody::new(b, MAX_BODY, BODY_DEADLINE))
}

/// Now as RFC 3339 UTC with milliseconds, for the restart annotation: a restart asked within the
/// same second as the last one must still change the pod template (with whole seconds, as
/// `kubectl rollout restart` writes it, a config written right after another restarted nothing).
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, millis) = (now.as_secs(), now.subsec_millis());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert_eq!(&t[19..20], ".", "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }

    #[test]
    fn settings_fall_back_only_when_empty() {
        let provider = KubernetesSettings {
            config_path: Some("/p".into()),
            ..Default::default()
        };
        let own = KubernetesSettings {
            host: Some("https://h".into()),
            ..Default::default()
        };
        assert_eq!(KubernetesSettings::default().or(&provider), provider);
        assert_eq!(own.or(&provider), own);
        assert!(!own.describe().contains("token"));
    }

    #[test]
    fn host_token_and_exec_make_a_kubeconfig() {
        let s = KubernetesSettings {
            host: Some("https://h:6443".into()),
            token: Some("t".into()),
            cluster_ca_certificate: Some("-----BEGIN CERTIFICATE-----\n".into()),
            exec: Some(ExecSettings {
                api_version: "client.authentication.k8s.io/v1beta1".into(),
                command: "aws".into(),
                args: vec!["eks".into(), "get-token".into()],
                env: BTreeMap::from([("AWS_PROFILE".into(), "p".into())]),
            }),
            ..Default::default()
        };
        let kc = synthetic_kubeconfig(&s, "https://h:6443").unwrap();
        assert_eq!(kc.clusters.len(), 1);
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        assert_eq!(user.exec.as_ref().unwrap().command.as_deref(), Some("aws"));
    }
}
