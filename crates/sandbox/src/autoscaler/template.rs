//! What each cloud's autoscaler believes a new node of a pool will be (its "template node"):
//! labels, taints and extended resources, built from what the real autoscaler reads. This is where
//! the three clouds differ, so the rules stand apart from the packing (`estimate.rs`) and from
//! changing the pools (`run.rs`).
//!
//! - AKS and EKS run upstream cluster-autoscaler, which sizes a pool with no nodes from a template
//!   made from the scale set's or the Auto Scaling group's tags (kubernetes/autoscaler
//!   cluster-autoscaler/cloudprovider/azure/azure_template.go, cloudprovider/aws/aws_manager.go;
//!   read at 55c37cd5eb550756c5ccc5a89e9068d77797e575). A pool that has nodes is sized from one of
//!   them instead, as upstream's node-info processor does; the twin models that by counting the
//!   registered nodes' free room first (`estimate.rs`).
//! - GKE runs its own autoscaler, which knows the pool's GPU sharing: time-sharing and MPS nodes
//!   offer GPUs x max shared clients of `nvidia.com/gpu`, partitioned GPUs one per partition
//!   (cloud.google.com/kubernetes-engine/docs/concepts/timesharing-gpus: "The GPU driver presents
//!   the physical GPU to the kubelet on your nodes as multiple" GPUs, with the pool's sharing as node
//!   labels). Partitions count one GPU each, as the sandbox's GKE nodes advertise them; no GKE page
//!   on partitions and autoscaling was read. That GKE's autoscaler sizes from these numbers is
//!   inferred, not quoted.

use std::collections::BTreeMap;

use crate::catalog;
use crate::nodes::k8s_effect;

/// A pool the twin's cluster-autoscaler may grow, and the node it expects a new one to be.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Template {
    pub(crate) cloud: &'static str,
    /// The cluster's name (its Kubernetes API's).
    pub(crate) cluster: String,
    /// The cloud world's key of the cluster.
    pub(crate) cluster_key: String,
    pub(crate) pool: String,
    /// Nodes the pool runs or is asked to run now.
    pub(crate) target: u32,
    pub(crate) max: u32,
    pub(crate) labels: BTreeMap<String, String>,
    /// (key, value, Kubernetes effect)
    pub(crate) taints: Vec<(String, String, String)>,
    pub(crate) capacity: BTreeMap<String, u64>,
    /// Where the template came from, for the decision log.
    pub(crate) source: String,
}

/// A template node's labels, taints (key, value, Kubernetes effect) and extended resources.
pub(crate) type NodeShape = (
    BTreeMap<String, String>,
    Vec<(String, String, String)>,
    BTreeMap<String, u64>,
);

/// A quantity as a tag writes it: a plain non-negative integer (upstream parses any Kubernetes
/// quantity and skips what does not parse; extended resources are integers, so the twin reads
/// those and skips the rest).
fn quantity(v: &str) -> Option<u64> {
    v.trim().parse().ok()
}

/// A taint tag's value, `<value>:<Effect>` (extractTaintsFromAsg / extractTaintsFromTags: the
/// value must match `(.*):(?:NoSchedule|NoExecute|PreferNoSchedule)`, and splits at the first `:`).
fn taint_value(v: &str) -> Option<(String, String)> {
    let effects = ["NoSchedule", "NoExecute", "PreferNoSchedule"];
    if !effects.iter().any(|e| v.contains(&format!(":{e}"))) {
        return None;
    }
    let (value, effect) = v.split_once(':')?;
    Some((value.to_string(), effect.to_string()))
}

/// EKS: the node group's Auto Scaling group tags, read as aws_manager.go's buildNodeFromTemplate
/// does: `nvidia.com/gpu` = the instance type's GPUs, overridden by
/// `k8s.io/cluster-autoscaler/node-template/resources/<name>` tags (extractAllocatableResourcesFromAsg);
/// labels from `.../node-template/label/<key>` and, for `eks:<key>` tags, `<key>`
/// (extractLabelsFromAsg: `eks:nodegroup-name` becomes the label `nodegroup-name`); taints from
/// `.../node-template/taint/<key>` = `<value>:<Effect>` (extractTaintsFromAsg). The generic labels
/// (buildGenericLabels) are the instance type, OS and architecture.
///
/// A template whose labels carry `nodegroup-name` and `cluster-name` is a managed node group's, and
/// upstream then adds the node group's own labels and taints from EKS DescribeNodegroup (its labels
/// winning over the tags', joinNodeLabelsChoosingUserValuesOverAPIValues) and resources from its
/// tags. Upstream's README says it does so "only ... when a managed nodegroup is created with 0
/// nodes and has never had any nodes added to it" (cloudprovider/aws/README.md); the twin
/// simplifies that to "whenever the template is used", since it sizes a pool that has nodes from
/// those nodes anyway.
pub(crate) fn eks_node(
    instance_type: &str,
    asg_tags: &BTreeMap<String, String>,
    ng_labels: &BTreeMap<String, String>,
    ng_taints: &[(String, String, String)],
    ng_tags: &BTreeMap<String, String>,
) -> NodeShape {
    const RES: &str = "k8s.io/cluster-autoscaler/node-template/resources/";
    const LABEL: &str = "k8s.io/cluster-autoscaler/node-template/label/";
    const TAINT: &str = "k8s.io/cluster-autoscaler/node-template/taint/";
    let gpus = catalog::aws_instance_type(instance_type)
        .and_then(|m| m.gpu)
        .map_or(0, |(_, n)| n);
    let mut capacity = BTreeMap::from([("nvidia.com/gpu".to_string(), gpus as u64)]);
    let mut labels = BTreeMap::from([
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        (
            "node.kubernetes.io/instance-type".to_string(),
            instance_type.to_string(),
        ),
    ]);
    let mut taints = Vec::new();
    for (k, v) in asg_tags {
        if let Some(r) = k.strip_prefix(RES).filter(|r| !r.is_empty())
            && let Some(q) = quantity(v)
        {
            capacity.insert(r.to_string(), q);
        }
        let label = k
            .strip_prefix(LABEL)
            .or_else(|| k.strip_prefix("eks:"))
            .filter(|l| !l.is_empty());
        if let Some(l) = label {
            labels.insert(l.to_string(), v.clone());
        }
        if let Some(t) = k.strip_prefix(TAINT).filter(|t| !t.is_empty())
            && let Some((value, effect)) = taint_value(v)
        {
            taints.push((t.to_string(), value, effect));
        }
    }
    if labels.contains_key("nodegroup-name") && labels.contains_key("cluster-name") {
        labels.extend(ng_labels.clone());
        taints.extend(
            ng_taints
                .iter()
                .map(|(k, v, e)| (k.clone(), v.clone(), k8s_effect(e).to_string())),
        );
        for (k, v) in ng_tags {
            if let Some(r) = k.strip_prefix(RES).filter(|r| !r.is_empty())
                && let Some(q) = quantity(v)
            {
                capacity.insert(r.to_string(), q);
            }
        }
    }
    (labels, taints, capacity)
}

/// A name in an Azure tag: `_` stands for `/`, and `~2` for `_` in labels and taints
/// (azure_template.go extractLabelsFromTags, extractTaintsFromTags) but for `/` in resources
/// (extractAllocatableResourcesFromScaleSet), so a resource name cannot hold `_`.
fn azure_name(tag: &str, tilde2: &str) -> String {
    tag.replace('_', "/").replace("~2", tilde2)
}

/// AKS: the agent pool's scale set, read as azure_template.go's buildNodeFromTemplate and
/// processVMSSTemplate do. AKS copies an agent pool's `tags` to its scale set and adds its own
/// `aks-managed-poolName` (the tag azure_cache.go and the template read the pool's name from).
/// Every tag becomes a node label as it is; `nvidia.com/gpu` is the VM size's GPUs, overridden by
/// `k8s.io_cluster-autoscaler_node-template_resources_<name>`; labels from
/// `..._node-template_label_<key>` and taints from `..._node-template_taint_<key>` =
/// `<value>:<Effect>`. The scale set template's own labels and taints are empty (TemplateNodeInfo in
/// azure_scale_set.go passes none), so the pool's `nodeLabels` and `nodeTaints` are not seen. With
/// label prediction (on by default: azure_config.go) the template also gets `agentpool` and
/// `kubernetes.azure.com/agentpool` = the pool, and `accelerator` and
/// `kubernetes.azure.com/accelerator` = `nvidia` on GPU sizes.
pub(crate) fn aks_node(
    pool: &str,
    vm_size: &str,
    pool_tags: &BTreeMap<String, String>,
) -> NodeShape {
    const RES: &str = "k8s.io_cluster-autoscaler_node-template_resources_";
    const LABEL: &str = "k8s.io_cluster-autoscaler_node-template_label_";
    const TAINT: &str = "k8s.io_cluster-autoscaler_node-template_taint_";
    let mut tags = pool_tags.clone();
    tags.insert("aks-managed-poolName".into(), pool.to_string());
    let gpus = catalog::azure_vm_size(vm_size)
        .and_then(|m| m.gpu)
        .map_or(0, |(_, n)| n);
    let mut capacity = BTreeMap::from([("nvidia.com/gpu".to_string(), gpus as u64)]);
    let mut labels = tags.clone();
    labels.extend([
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        (
            "node.kubernetes.io/instance-type".to_string(),
            vm_size.to_string(),
        ),
        ("agentpool".to_string(), pool.to_string()),
        (
            "kubernetes.azure.com/agentpool".to_string(),
            pool.to_string(),
        ),
    ]);
    if gpus > 0 {
        labels.insert("accelerator".into(), "nvidia".into());
        labels.insert("kubernetes.azure.com/accelerator".into(), "nvidia".into());
    }
    let mut taints = Vec::new();
    for (k, v) in &tags {
        if let Some(r) = k.strip_prefix(RES).filter(|r| !r.is_empty())
            && let Some(q) = quantity(v)
        {
            capacity.insert(azure_name(r, "/"), q);
        }
        if let Some(l) = k.strip_prefix(LABEL).filter(|l| !l.is_empty()) {
            labels.insert(azure_name(l, "_"), v.clone());
        }
        if let Some(t) = k.strip_prefix(TAINT).filter(|t| !t.is_empty())
            && let Some((value, effect)) = taint_value(v)
        {
            taints.push((azure_name(t, "_"), value, effect));
        }
    }
    (labels, taints, capacity)
}

/// GKE: the pool's own configuration, as GKE's autoscaler knows it: the node labels GKE sets
/// (the pool, the accelerator, sharing and partition labels) and the pool's labels; the pool's
/// taints plus GKE's `nvidia.com/gpu=present:NoSchedule` on GPU nodes; `nvidia.com/gpu` = GPUs x
/// partitions per GPU x max shared clients per GPU.
pub(crate) fn gke_node(
    labels: &BTreeMap<String, String>,
    taints: &[(String, String, String)],
    gpus: u32,
    partitions: u32,
    sharing: Option<u32>,
) -> NodeShape {
    let units = gpus as u64 * partitions.max(1) as u64 * sharing.unwrap_or(1).max(1) as u64;
    let capacity = BTreeMap::from([("nvidia.com/gpu".to_string(), units)]);
    (labels.clone(), taints.to_vec(), capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(t: &[(&str, &str)]) -> BTreeMap<String, String> {
        t.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn eks_reads_resources_labels_taints_and_the_node_group() {
        let asg = tags(&[
            (
                "k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu",
                "10",
            ),
            (
                "k8s.io/cluster-autoscaler/node-template/resources/bad",
                "many",
            ),
            ("k8s.io/cluster-autoscaler/node-template/label/team", "ml"),
            (
                "k8s.io/cluster-autoscaler/node-template/taint/dedicated",
                "gpu:NoSchedule",
            ),
            (
                "k8s.io/cluster-autoscaler/node-template/taint/ignored",
                "no-effect",
            ),
            ("eks:cluster-name", "c"),
            ("eks:nodegroup-name", "ng"),
        ]);
        let ng_labels = tags(&[
            ("team", "from-eks"),
            ("nvidia.com/device-plugin.config", "ts"),
        ]);
        let ng_taints = vec![("nvidia.com/gpu".into(), "true".into(), "NO_SCHEDULE".into())];
        let (l, t, c) = eks_node("g5.xlarge", &asg, &ng_labels, &ng_taints, &BTreeMap::new());
        assert_eq!(c["nvidia.com/gpu"], 10);
        assert!(!c.contains_key("bad"));
        assert_eq!(l["team"], "from-eks");
        assert_eq!(l["nodegroup-name"], "ng");
        assert_eq!(l["nvidia.com/device-plugin.config"], "ts");
        assert_eq!(
            t,
            [
                ("dedicated".into(), "gpu".into(), "NoSchedule".into()),
                ("nvidia.com/gpu".into(), "true".into(), "NoSchedule".into())
            ]
        );
        // Without EKS's tags, the node group's labels and taints are not read.
        let (l, t, c) = eks_node(
            "g5.xlarge",
            &BTreeMap::new(),
            &ng_labels,
            &ng_taints,
            &BTreeMap::new(),
        );
        assert_eq!(c["nvidia.com/gpu"], 1);
        assert!(!l.contains_key("team") && t.is_empty());
    }

    #[test]
    fn aks_tag_names_spell_slashes_and_underscores() {
        let t = tags(&[
            (
                "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com_gpu.shared",
                "10",
            ),
            (
                "k8s.io_cluster-autoscaler_node-template_resources_nvidia.com~2mig-1g.5gb",
                "7",
            ),
            (
                "k8s.io_cluster-autoscaler_node-template_label_nvidia.com_device-plugin.config",
                "ts",
            ),
            (
                "k8s.io_cluster-autoscaler_node-template_label_my~2label",
                "x",
            ),
            (
                "k8s.io_cluster-autoscaler_node-template_taint_sku",
                "gpu:NoSchedule",
            ),
        ]);
        let (l, taints, c) = aks_node("gpu", "Standard_NC24ads_A100_v4", &t);
        assert_eq!(c["nvidia.com/gpu"], 1);
        assert_eq!(c["nvidia.com/gpu.shared"], 10);
        assert_eq!(c["nvidia.com/mig-1g.5gb"], 7);
        assert_eq!(l["nvidia.com/device-plugin.config"], "ts");
        assert_eq!(l["my_label"], "x");
        assert_eq!(l["kubernetes.azure.com/agentpool"], "gpu");
        assert_eq!(l["kubernetes.azure.com/accelerator"], "nvidia");
        assert_eq!(taints, [("sku".into(), "gpu".into(), "NoSchedule".into())]);
    }
}
