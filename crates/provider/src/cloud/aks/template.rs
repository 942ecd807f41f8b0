//! The node template cluster-autoscaler reads for an AKS pool that has no node to copy (scale from
//! zero): tags on the pool's scale set. AKS copies an agent pool's `tags` onto its VMSS
//! (learn.microsoft.com/azure/aks/use-tags), and AKS's managed autoscaler is the upstream
//! cluster-autoscaler's Azure provider, whose `ScaleSet.TemplateNodeInfo` builds the template node
//! from the scale set alone (kubernetes/autoscaler `cluster-autoscaler/cloudprovider/azure`,
//! azure_scale_set.go: empty input labels and taints) and `buildNodeFromTemplate` (azure_template.go)
//! takes from its tags:
//! - `k8s.io_cluster-autoscaler_node-template_resources_<resource>` = a quantity, which overrides
//!   the VM size's own `nvidia.com/gpu` (extractAllocatableResourcesFromScaleSet);
//! - `..._label_<key>` = the label's value (extractLabelsFromTags);
//! - `..._taint_<key>` = `<value>:<effect>` (extractTaintsFromTags).
//!
//! Azure refuses `/` in a tag name (`InvalidTagNameCharacters`), so names are written with `_` for
//! `/`; a `_` of a label or taint key is written `~2`, which the parser turns back into `_` after
//! turning every `_` into `/` (resource names never contain `_`). The prefixes are the provider's on
//! a pool it manages: tags under them that the pool's labels, taints and sharing do not imply are
//! drift, removed by the next apply.

use std::collections::BTreeMap;

use tfplugin::{AttrPath, Diagnostic};

use crate::cloud::pool::NodeTemplate;

const RESOURCES: &str = "k8s.io_cluster-autoscaler_node-template_resources_";
const LABEL: &str = "k8s.io_cluster-autoscaler_node-template_label_";
const TAINT: &str = "k8s.io_cluster-autoscaler_node-template_taint_";
/// Azure's limit of tags on one resource (tag-resources, "Limitations").
pub(super) const MAX_TAGS: usize = 50;

/// A label or taint key in a tag name: `_` as `~2`, then `/` as `_`.
fn encode_key(key: &str) -> String {
    key.replace('_', "~2").replace('/', "_")
}

/// The template's tags.
pub(super) fn tags(t: &NodeTemplate<'_>) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    for (resource, n) in t.resources {
        tags.insert(
            format!("{RESOURCES}{}", resource.replace('/', "_")),
            n.to_string(),
        );
    }
    for (k, v) in t.labels {
        tags.insert(format!("{LABEL}{}", encode_key(k)), v.clone());
    }
    for taint in t.taints {
        tags.insert(
            format!("{TAINT}{}", encode_key(&taint.key)),
            format!("{}:{}", taint.value, taint.effect),
        );
    }
    tags
}

/// Whether a tag is one of the template's (the provider's own on the pools it manages).
pub(super) fn is_template_tag(name: &str) -> bool {
    [RESOURCES, LABEL, TAINT]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The template tags among a pool's tags.
pub(super) fn of_tags(tags: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    tags.iter()
        .filter(|(k, _)| is_template_tag(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The template's tags, or why the pool cannot carry them: with the provider's own tag beside
/// them, they must stay within Azure's 50.
pub(super) fn checked_tags(t: &NodeTemplate<'_>) -> Result<BTreeMap<String, String>, Diagnostic> {
    let tags = tags(t);
    if tags.len() < MAX_TAGS {
        return Ok(tags);
    }
    Err(Diagnostic::error(
        "Too many labels and taints for an autoscaled AKS pool",
        format!(
            "An autoscaled AKS pool tells cluster-autoscaler what a node offers, and which labels \
             and taints it carries, in tags on its scale set: {} for this pool, and Azure allows \
             {MAX_TAGS} tags on a resource, one of them the provider's own. Use fewer labels or \
             taints, or a fixed node_count.",
            tags.len()
        ),
    )
    .at(AttrPath::attr("labels")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::pool::PoolTaint;

    /// Decodes a tag name as cluster-autoscaler's Azure provider does (azure_template.go): every
    /// `_` to `/`, then `~2` to `_` (labels and taints).
    fn decode_key(name: &str, prefix: &str) -> String {
        name[prefix.len()..].replace('_', "/").replace("~2", "_")
    }

    #[test]
    fn names_decode_back_to_the_keys_and_values_the_nodes_carry() {
        let resources = BTreeMap::from([
            ("nvidia.com/gpu".to_string(), 0),
            ("nvidia.com/mig-1g.10gb".to_string(), 7),
        ]);
        let labels = BTreeMap::from([
            (
                "nvidia.com/device-plugin.config".to_string(),
                "mig-mixed".to_string(),
            ),
            ("team_a".to_string(), "ml".to_string()),
        ]);
        let taints = [PoolTaint {
            key: "nvidia.com/gpu".into(),
            value: String::new(),
            effect: "NoSchedule".into(),
        }];
        let t = NodeTemplate {
            resources: &resources,
            labels: &labels,
            taints: &taints,
        };
        let tags = checked_tags(&t).unwrap();
        assert!(tags.keys().all(|k| !k.contains('/')), "{tags:?}");
        let res: BTreeMap<String, String> = tags
            .iter()
            .filter(|(k, _)| k.starts_with(RESOURCES))
            .map(|(k, v)| (k[RESOURCES.len()..].replace('_', "/"), v.clone()))
            .collect();
        assert_eq!(res["nvidia.com/mig-1g.10gb"], "7");
        assert_eq!(res["nvidia.com/gpu"], "0");
        let labels_back: BTreeMap<String, String> = tags
            .iter()
            .filter(|(k, _)| k.starts_with(LABEL))
            .map(|(k, v)| (decode_key(k, LABEL), v.clone()))
            .collect();
        assert_eq!(labels_back, labels);
        let (name, value) = tags.iter().find(|(k, _)| k.starts_with(TAINT)).unwrap();
        assert_eq!(decode_key(name, TAINT), "nvidia.com/gpu");
        assert_eq!(value, ":NoSchedule");
        assert_eq!(of_tags(&tags), tags);
    }

    #[test]
    fn a_template_over_azures_tag_limit_is_refused_naming_labels() {
        let resources = BTreeMap::from([("nvidia.com/gpu".to_string(), 4)]);
        let labels: BTreeMap<String, String> = (0..49)
            .map(|i| (format!("l{i}"), "v".to_string()))
            .collect();
        let t = NodeTemplate {
            resources: &resources,
            labels: &labels,
            taints: &[],
        };
        let d = checked_tags(&t).unwrap_err();
        assert!(d.detail.contains("50 tags"), "{}", d.detail);
    }
}
