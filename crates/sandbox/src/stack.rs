//! The whole sandbox as users and tests run it: the cloud APIs over plain HTTP on one port, and
//! every cluster's Kubernetes API over HTTPS on a second (kubectl sends bearer tokens only over
//! TLS), with the clouds' node pools appearing as Nodes of their cluster.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::kube::KubeApi;
use super::{ClusterSpec, Config, Sandbox, SandboxError};

pub struct Stack {
    pub sandbox: Sandbox,
    pub kube: Arc<KubeApi>,
    pub cloud_addr: SocketAddr,
    pub(crate) kube_addr: SocketAddr,
}

impl Stack {
    /// Binds both listeners on 127.0.0.1 (`port` for the clouds, 0 for any; the Kubernetes API
    /// takes any free port) and serves until the runtime ends.
    pub async fn start(mut config: Config, port: u16) -> Result<Stack, SandboxError> {
        let kube = KubeApi::new();
        // The clusters' objects persist beside the cloud world's state file.
        let kube_state = config
            .state_file
            .as_ref()
            .map(|p| p.with_extension("kube.json"));
        if let Some(path) = kube_state.as_ref().filter(|p| p.exists()) {
            let text = std::fs::read(path).map_err(|e| SandboxError::Io(path.clone(), e))?;
            let snapshot: serde_json::Value = serde_json::from_slice(&text)
                .map_err(|e| SandboxError::Corrupt(path.clone(), e))?;
            kube.restore(&snapshot)
                .map_err(|e| SandboxError::Io(path.clone(), std::io::Error::other(e)))?;
        }
        for c in &config.clusters {
            let (cloud, name) = match c {
                ClusterSpec::Aks { name, .. } => ("aks", name),
                ClusterSpec::Gke { name, .. } => ("gke", name),
                ClusterSpec::Eks { name, .. } => ("eks", name),
            };
            if kube.has_cluster(cloud, name) {
                continue;
            }
            if config.gpu_operator {
                kube.add_cluster(cloud, name);
            } else {
                kube.add_cluster_without_operator(cloud, name);
            }
        }
        config.node_sink = Some(kube.clone());
        let sandbox = Sandbox::open(config)?;
        connect_autoscaler(&sandbox, &kube);
        // Pools restored from a state file get their nodes back.
        sandbox.replay_nodes();
        let bind = |p: u16| async move {
            tokio::net::TcpListener::bind(("127.0.0.1", p))
                .await
                .map_err(|e| SandboxError::Io(PathBuf::from(format!("127.0.0.1:{p}")), e))
        };
        let cloud = bind(port).await?;
        let kube_listener = bind(0).await?;
        let (cloud_addr, kube_addr) = (
            cloud
                .local_addr()
                .map_err(|e| SandboxError::Io(PathBuf::from("listener"), e))?,
            kube_listener
                .local_addr()
                .map_err(|e| SandboxError::Io(PathBuf::from("listener"), e))?,
        );
        let router = sandbox.router();
        tokio::spawn(async move {
            let _ = axum::serve(cloud, router).await;
        });
        // Faults armed on the cloud port apply to the clusters' APIs too (paths `/k8s/...`).
        let kube_router = super::routes::behind_faults(&sandbox, kube.router());
        let tls = super::kube::TlsListener::new(kube_listener, &kube.tls_identity())
            .map_err(|e| SandboxError::Io(PathBuf::from("kube TLS"), std::io::Error::other(e)))?;
        tokio::spawn(async move {
            let _ = axum::serve(tls, kube_router).await;
        });
        if let Some(path) = kube_state {
            persist(kube.clone(), path);
        }
        Ok(Stack {
            sandbox,
            kube,
            cloud_addr,
            kube_addr,
        })
    }

    pub fn cloud_url(&self) -> String {
        format!("http://{}", self.cloud_addr)
    }

    pub fn kube_url(&self) -> String {
        format!("https://{}", self.kube_addr)
    }

    /// Writes one kubeconfig per cluster into `dir`; returns (cloud, cluster, path) for each.
    pub fn write_kubeconfigs(&self, dir: &Path) -> std::io::Result<Vec<(String, String, PathBuf)>> {
        self.kube.write_kubeconfigs(dir, &self.kube_url())
    }
}

/// Lets the twin's cluster-autoscalers react to every write to a cluster's Kubernetes API (a
/// pending pod grows a pool before the write's answer returns). `kube` must be the sandbox's node
/// sink, which is where the autoscalers read the pending pods.
pub fn connect_autoscaler(sandbox: &Sandbox, kube: &Arc<KubeApi>) {
    let weak = sandbox.downgrade();
    kube.on_write(Arc::new(move || {
        if let Some(sb) = weak.upgrade() {
            sb.autoscale();
        }
    }));
}

/// Writes the clusters' objects after every change (atomically: a crash leaves the last
/// complete snapshot). Changes that arrive while a write runs are folded into the next one.
fn persist(kube: Arc<KubeApi>, path: PathBuf) {
    let mut changes = kube.subscribe();
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let bytes = serde_json::to_vec(&kube.snapshot()).unwrap_or_default();
            let path = path.clone();
            let _ = tokio::task::spawn_blocking(move || super::write_atomic(&path, &bytes)).await;
        }
    });
}
