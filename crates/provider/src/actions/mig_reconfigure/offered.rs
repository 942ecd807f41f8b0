//! Which configs a node's MIG manager can apply, read where it reads them, so that a config it
//! does not have is refused before any node is cordoned (the manager would answer `failed`
//! after the drain). As the GPU operator wires it (NVIDIA/gpu-operator v26.7.0
//! controllers/object_controls.go, `TransformMIGManager`; NVIDIA/mig-parted v0.15.0
//! cmd/nvidia-mig-manager/main.go):
//! - ClusterPolicy `spec.migManager.config.name` set (always, under v25.10's CRD, which defaults
//!   it to `default-mig-parted-config`): the manager reads that ConfigMap's `config.yaml`.
//! - Not set (v26.3 and later): each node's manager generates its configs from the node's GPUs
//!   when it starts and writes them to `<node>-mig-config` in the operator's namespace.
//!
//! What cannot be read (no operator, no right to read ConfigMaps, a node whose manager has not
//! written its configs yet) leaves the node to the catalog's check and the manager's verdict.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::Cluster;
use crate::cluster::drain::NodeView;

/// The operator's namespace where the ClusterPolicy does not say.
const OPERATOR_NS: &str = "gpu-operator";
/// The operator's static MIG manager ConfigMap, which it creates itself.
const STATIC_CONFIGMAP: &str = "default-mig-parted-config";

/// The configs one node's MIG manager has, and where they were read.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Offered {
    /// `ConfigMap gpu-operator/mig-a-mig-config`.
    pub at: String,
    pub names: BTreeSet<String>,
    /// Whether the manager generated them from the node's GPUs.
    pub generated: bool,
    /// Whether the ConfigMap exists (one the ClusterPolicy names may not).
    pub exists: bool,
}

/// Per node name, the configs its MIG manager has, where the cluster says.
pub(super) async fn offered(c: &Cluster, nodes: &[NodeView]) -> BTreeMap<String, Offered> {
    let Ok(policy) = c.cluster_policy().await else {
        return BTreeMap::new();
    };
    let ns = policy
        .operand_namespace
        .unwrap_or_else(|| OPERATOR_NS.to_string());
    // Ok(None): no such ConfigMap; Err: it could not be read or is not a MIG manager config.
    let read = |name: &str| {
        let (ns, name) = (ns.clone(), name.to_string());
        async move {
            let at = format!("ConfigMap {ns}/{name}");
            match c.configmap(&ns, &name).await {
                Ok(None) => Ok(None),
                Ok(Some(data)) => data
                    .get("config.yaml")
                    .and_then(|t| gpu::mig_parted::config_names(t))
                    .map(|names| Some((at, names)))
                    .ok_or(()),
                Err(_) => Err(()),
            }
        }
    };
    let for_all = |o: Offered| nodes.iter().map(|n| (n.name.clone(), o.clone())).collect();
    match policy.mig_configs {
        Some(name) => match read(&name).await {
            Ok(Some((at, names))) => for_all(Offered {
                at,
                names,
                generated: false,
                exists: true,
            }),
            // The operator makes its static ConfigMap itself; one of the user's that is not
            // there leaves the manager without a config file: nothing applies.
            Ok(None) if name != STATIC_CONFIGMAP => for_all(Offered {
                at: format!("ConfigMap {ns}/{name}"),
                names: BTreeSet::new(),
                generated: false,
                exists: false,
            }),
            _ => BTreeMap::new(),
        },
        None => {
            let mut out = BTreeMap::new();
            for n in nodes {
                if let Ok(Some((at, names))) = read(&format!("{}-mig-config", n.name)).await {
                    let generated = true;
                    out.insert(
                        n.name.clone(),
                        Offered {
                            at,
                            names,
                            generated,
                            exists: true,
                        },
                    );
                }
            }
            out
        }
    }
}

/// Why the node's MIG manager cannot apply the config: it does not have it.
pub(super) fn missing(node: &NodeView, config: &str, offered: &Offered) -> Option<String> {
    if offered.names.contains(config) {
        return None;
    }
    if !offered.exists {
        return Some(format!(
            "node {}'s MIG manager is to read its configs from the {} (the ClusterPolicy's \
            spec.migManager.config.name), which does not exist: the manager cannot start, and no \
            config applies. Create it with the MIG manager's configs, or clear the name so that \
            the manager generates them from the node's GPUs (GPU operator v26.3 and later).",
            node.name, offered.at
        ));
    }
    let have: Vec<&str> = offered.names.iter().map(String::as_str).collect();
    let how = if offered.generated {
        "The GPU operator (v26.3 and later, with no ClusterPolicy spec.migManager.config.name) has \
        each node's MIG manager generate its configs from the node's GPUs. For a layout of your \
        own, put it in a ConfigMap and name that in spec.migManager.config.name."
    } else {
        "Add the config to that ConfigMap, or choose one it has."
    };
    Some(format!(
        "node {}'s MIG manager reads its configs from the {}, which has no {config:?} (it has: \
        {}). The manager would answer failed after the node was drained. {how}",
        node.name,
        offered.at,
        have.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_the_manager_lacks_names_where_it_looked() {
        let node = NodeView {
            name: "n1".into(),
            labels: BTreeMap::new(),
            unschedulable: false,
        };
        let o = Offered {
            at: "ConfigMap gpu-operator/n1-mig-config".into(),
            names: BTreeSet::from(["all-disabled".into(), "all-1g.10gb".into()]),
            generated: true,
            exists: true,
        };
        assert_eq!(missing(&node, "all-1g.10gb", &o), None);
        let e = missing(&node, "my-layout", &o).unwrap();
        assert!(
            e.contains("n1-mig-config")
                && e.contains("all-1g.10gb, all-disabled")
                && e.contains("spec.migManager.config.name"),
            "{e}"
        );
        let gone = Offered {
            at: "ConfigMap gpu-operator/custom".into(),
            names: BTreeSet::new(),
            generated: false,
            exists: false,
        };
        let e = missing(&node, "all-1g.10gb", &gone).unwrap();
        assert!(
            e.contains("gpu-operator/custom") && e.contains("does not exist"),
            "{e}"
        );
    }
}
