//! The EC2 Auto Scaling group behind each managed node group: its name, its size (the node
//! group's scaling config, which is what EKS sets on it) and its tags, with the tags EKS puts on it
//! itself. The Auto Scaling API (`autoscaling.rs`) reads and writes these, the node group documents
//! name the group, and the twin's cluster-autoscaler reads the tags as node templates; so the model
//! stands apart from all three.
//!
//! Sources:
//! - One Auto Scaling group per managed node group, managed by EKS, named in DescribeNodegroup's
//!   `resources.autoScalingGroups` (EKS API reference, `NodegroupResources`; EKS user guide,
//!   "Simplify node lifecycle with managed node groups":
//!   https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html).
//! - EKS tags the group itself: "Nodes launched as part of a managed node group are automatically
//!   tagged for auto-discovery by the Kubernetes Cluster Autoscaler" (same page), i.e. the
//!   auto-discovery tags `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>`
//!   (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, "Auto-Discovery Setup");
//!   and `eks:cluster-name` / `eks:nodegroup-name`, "we automatically add them to every managed
//!   nodegroup" (kubernetes/autoscaler cluster-autoscaler/proposals/circumvent-tag-limit-aws.md,
//!   written by the EKS team). The two auto-discovery tags' values (`true`, `owned`) are the usual
//!   ones but were not confirmed in an EKS document; cluster-autoscaler's discovery
//!   (`asg:tag=<key>,<key>`) only checks that the keys exist.
//! - EKS does not copy the node group's own `tags` to the group (aws/containers-roadmap#608).
//! - Limits: 50 tags per group; keys 1..=128 characters, values 0..=256 (Amazon EC2 Auto Scaling
//!   API reference, `Tag`; botocore data/autoscaling/2011-01-01/service-2.json shapes TagKey, TagValue).

use std::collections::BTreeMap;

use super::world::{AsgTag, EksCluster, Nodegroup};

/// Tags per Auto Scaling group (Amazon EC2 Auto Scaling quotas: "Tags per Auto Scaling group": 50).
pub(crate) const MAX_TAGS: usize = 50;
pub(crate) const MAX_KEY: usize = 128;
pub(crate) const MAX_VALUE: usize = 256;

/// The group's name, as DescribeNodegroup reports it: `eks-<nodegroup>-<uid>`.
pub(crate) fn asg_name(ng: &Nodegroup) -> String {
    format!("eks-{}-{}", ng.name, ng.uid)
}

/// The tags EKS puts on a node group's Auto Scaling group when it makes it.
pub(crate) fn eks_tags(cluster: &str, nodegroup: &str) -> BTreeMap<String, AsgTag> {
    let tag = |v: &str| AsgTag {
        value: v.to_string(),
        propagate_at_launch: true,
    };
    BTreeMap::from([
        ("eks:cluster-name".to_string(), tag(cluster)),
        ("eks:nodegroup-name".to_string(), tag(nodegroup)),
        ("k8s.io/cluster-autoscaler/enabled".to_string(), tag("true")),
        (format!("k8s.io/cluster-autoscaler/{cluster}"), tag("owned")),
    ])
}

impl Nodegroup {
    /// The group's tags now. A node group from a state file written before groups had tags has the
    /// ones EKS gave it.
    pub(crate) fn asg_tags(&self, cluster: &str) -> BTreeMap<String, AsgTag> {
        self.asg_tags
            .clone()
            .unwrap_or_else(|| eks_tags(cluster, &self.name))
    }

    /// The group's tags, to change them.
    pub(crate) fn asg_tags_mut(&mut self, cluster: &str) -> &mut BTreeMap<String, AsgTag> {
        let name = self.name.clone();
        self.asg_tags
            .get_or_insert_with(|| eks_tags(cluster, &name))
    }
}

/// The node group whose Auto Scaling group has this name, among a region's clusters: (cluster key,
/// node group name).
pub(crate) fn find_group<'a>(
    clusters: impl Iterator<Item = (&'a String, &'a EksCluster)>,
    region: &str,
    name: &str,
) -> Option<(String, String)> {
    for (key, c) in clusters.filter(|(_, c)| c.region == region) {
        if let Some(ng) = c.nodegroups.values().find(|ng| asg_name(ng) == name) {
            return Some((key.clone(), ng.name.clone()));
        }
    }
    None
}
