//! A node's GPU hardware as the remote twin learns it: from GPU feature discovery's labels the first
//! time, then from the note it keeps in an annotation, since GFD rewrites some of those labels itself
//! (`-SHARED`, `-MIG-<profile>`, the count of MIG instances).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::kube::twin::{self, NodeTwin};

/// The annotation keeping the hardware GPU feature discovery's labels first named.
pub const HARDWARE_ANNOTATION: &str = "sandbox.fracgpu.dev/gpu-hardware";

/// The node's hardware: from the annotation the twin wrote when it first saw the node, else from GPU
/// feature discovery's labels. The cloud is told by the labels each cloud puts on its nodes.
pub(super) fn learn(
    node: &Value,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<NodeTwin> {
    let mut hw = labels.clone();
    if let Some(note) = annotations
        .get(HARDWARE_ANNOTATION)
        .and_then(|a| serde_json::from_str::<BTreeMap<String, String>>(a).ok())
    {
        hw.extend(note);
    }
    let cloud = if labels.contains_key("cloud.google.com/gke-nodepool") {
        "gke"
    } else if labels.contains_key("kubernetes.azure.com/agentpool") {
        "aks"
    } else {
        "eks"
    };
    twin::twin_from_labels(
        cloud,
        &hw,
        node.pointer("/status/nodeInfo/osImage")
            .and_then(Value::as_str),
    )
}

/// The hardware as first learnt, kept as JSON of GPU feature discovery's label names.
pub(super) fn hardware_note(t: &NodeTwin) -> String {
    let mut hw = BTreeMap::from([
        (twin::GFD_PRODUCT, t.gpu_product.clone().unwrap_or_default()),
        (twin::GFD_COUNT, t.gpus.to_string()),
        (twin::GFD_MEMORY, t.gpu_memory_mib.to_string()),
    ]);
    if let Some(c) = t.mig_capable {
        hw.insert(twin::GFD_MIG_CAPABLE, c.to_string());
    }
    serde_json::to_string(&hw).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hardware_comes_from_the_note_once_written() {
        // GFD has rewritten the product (sharing) and count (MIG single); the note keeps the hardware.
        let node = json!({"metadata": {"name": "n"}});
        let labels = BTreeMap::from([
            (
                "nvidia.com/gpu.product".to_string(),
                "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb".to_string(),
            ),
            ("nvidia.com/gpu.count".to_string(), "56".to_string()),
        ]);
        let first = BTreeMap::from([
            (
                "nvidia.com/gpu.product".to_string(),
                "NVIDIA-A100-SXM4-80GB".to_string(),
            ),
            ("nvidia.com/gpu.count".to_string(), "8".to_string()),
            ("nvidia.com/gpu.memory".to_string(), "81920".to_string()),
        ]);
        let seen = learn(&node, &first, &BTreeMap::new()).expect("a GPU node");
        let ann = BTreeMap::from([(HARDWARE_ANNOTATION.to_string(), hardware_note(&seen))]);
        let t = learn(&node, &labels, &ann).expect("a GPU node");
        assert_eq!(t.gpu_product.as_deref(), Some("NVIDIA-A100-SXM4-80GB"));
        assert_eq!((t.gpus, t.gpu_memory_mib), (8, 81920));
        assert_eq!(t.cloud, "eks");
        assert!(learn(&node, &BTreeMap::new(), &BTreeMap::new()).is_none());
    }
}
