//! What the GPU operator reads on the cluster: the ClusterPolicy's pointer and the data of the
//! ConfigMap it names in the operator's namespace. A delivery through the operator's chart
//! checks it after a write (the values may not reach the ClusterPolicy) and reads drift from it.

use std::collections::BTreeMap;

use tfplugin::{Diagnostic, Diagnostics};

use super::super::desired::Desired;
use super::super::diagnostics::quoted;
use crate::cluster::{self as k, Cluster, KubeError};

/// Before a delivery through the operator writes anything: a cluster whose GPU operator runs the
/// DRA-based stack (a GPUCluster, `nvidia.com/v1alpha1`, and no ClusterPolicy; gpu-operator
/// v26.7's chart deploys one or the other, templates/validations.yaml) has no device plugin to read
/// the configs. None after the error diagnostic that names the GPUCluster.
pub(crate) async fn refuse_dra_stack(c: &Cluster, diags: &mut Diagnostics) -> Option<()> {
    match c.cluster_policy().await {
        Err(KubeError::MissingCrd | KubeError::MissingClusterPolicy(_)) => {}
        // A ClusterPolicy, or an error the delivery's own first read reports.
        _ => return Some(()),
    }
    let found = c.gpu_clusters().await.unwrap_or_default();
    if found.is_empty() {
        return Some(());
    }
    diags.push(Diagnostic::error(
        "GPU operator runs the DRA-based stack",
        format!(
            "The cluster holds the GPUCluster {} (nvidia.com/v1alpha1) and no ClusterPolicy             `{}`: its GPU operator runs NVIDIA's DRA driver, which allocates GPUs through             ResourceClaims and does not read device plugin configs, so nothing was written. Share             GPUs there with DRA, or deploy the operator with a ClusterPolicy             (clusterPolicy.deployCR=true, gpuCluster.deployCR=false) to use this resource.",
            quoted(&found.iter().collect::<Vec<_>>()),
            k::CLUSTER_POLICY
        ),
    ));
    None
}

/// What the GPU operator reads on the cluster: the ClusterPolicy's pointer and the data of the
/// ConfigMap it names in the operator's namespace.
#[derive(Debug, Default)]
pub(super) struct OperatorReads {
    pub namespace: String,
    /// None: there is no ClusterPolicy `cluster-policy`.
    pub pointer: Option<k::PolicyPointer>,
    /// The named ConfigMap's data; None when it does not exist.
    pub data: Option<BTreeMap<String, String>>,
}

impl OperatorReads {
    /// What keeps these configs from the nodes, None when the operator reads them all.
    pub(super) fn mismatch(&self, d: &Desired) -> Option<String> {
        let ns = &self.namespace;
        let Some(k::PolicyPointer { name, default, .. }) = &self.pointer else {
            return Some(format!(
                "there is no ClusterPolicy `{}` on the cluster",
                k::CLUSTER_POLICY
            ));
        };
        if name.as_deref() != Some(d.name.as_str()) {
            return Some(match name {
                Some(n) => format!(
                    "the ClusterPolicy points the device plugin at the ConfigMap {n:?}, not {:?}",
                    d.name
                ),
                None => "the ClusterPolicy names no device plugin ConfigMap".to_string(),
            });
        }
        if d.default.is_some() && *default != d.default {
            return Some(format!(
                "the ClusterPolicy's default config is {}, not {:?}",
                default
                    .as_deref()
                    .map_or("unset".into(), |s| format!("{s:?}")),
                d.default.as_deref().unwrap_or_default()
            ));
        }
        let Some(data) = &self.data else {
            return Some(format!("there is no ConfigMap {ns}/{}", d.name));
        };
        let missing: Vec<&String> = d
            .configs
            .iter()
            .filter(|(k, cfg)| {
                data.get(*k)
                    .is_none_or(|text| gpu::device_plugin::parse(text).ok().as_ref() != Some(*cfg))
            })
            .map(|(k, _)| k)
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "the ConfigMap {ns}/{} lacks or holds other versions of {}",
                d.name,
                quoted(&missing)
            )
        })
    }
}

/// Reads what the operator reads; the ConfigMap is looked for in `ns`.
pub(super) async fn operator_reads(c: &Cluster, ns: &str) -> Result<OperatorReads, KubeError> {
    let pointer = match c.cluster_policy().await {
        Ok(p) => Some(p),
        Err(KubeError::MissingCrd | KubeError::MissingClusterPolicy(_)) => None,
        Err(e) => return Err(e),
    };
    let data = match pointer.as_ref().and_then(|p| p.name.as_deref()) {
        Some(name) => c.configmap(ns, name).await?,
        None => None,
    };
    Ok(OperatorReads {
        namespace: ns.to_string(),
        pointer,
        data,
    })
}
