//! Where a cluster's device plugin, GPU feature discovery and MPS control daemon come from, and so
//! what their config-managers read when a pod starts: the GPU operator's operands (the
//! ClusterPolicy names the ConfigMap, of the operator's namespace, and the default), or NVIDIA's
//! standalone `nvidia-device-plugin` chart, whose DaemonSets carry their config-manager's settings
//! themselves (how they say it is the twin's `chart_stack`, which the remote twin reads too). A
//! ClusterPolicy wins: where the operator runs, it owns the nodes' plugin.
//!
//! The chart's pod templates carry a `checksum/config` annotation of the ConfigMap it renders
//! (templates/_helpers.tpl `nvidia-device-plugin.podAnnotations`), so a changed `config.map`
//! rolls their pods: the restart markers see it as any other template change.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CLUSTER_POLICY, Cluster, DEVICE_PLUGIN_DS, GFD_DS, MPS_DS, OPERATOR_NS, key};
use crate::kube::kinds;
use crate::kube::twin::{self, PluginInputs};

/// One daemonset that reads the config: namespace and name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Operand {
    pub(crate) ns: String,
    pub(crate) name: String,
}

impl Operand {
    fn new(ns: &str, name: &str) -> Operand {
        Operand {
            ns: ns.to_string(),
            name: name.to_string(),
        }
    }

    pub(crate) fn key(&self) -> String {
        key(&self.ns, &self.name)
    }
}

/// The daemonsets that read the device plugin config on this cluster, by role.
#[derive(Debug, Default)]
pub(crate) struct Stack {
    pub(crate) plugin: Option<Operand>,
    pub(crate) gfd: Option<Operand>,
    pub(crate) mps: Option<Operand>,
    /// The standalone chart's (no ClusterPolicy).
    pub(crate) chart: bool,
}

impl Cluster {
    /// The daemonsets that read the config now.
    pub(crate) fn stack(&self) -> Stack {
        if self
            .get_ref(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY)
            .is_some()
        {
            let at = |n: &str| Operand::new(OPERATOR_NS, n);
            return Stack {
                plugin: Some(at(DEVICE_PLUGIN_DS)),
                gfd: Some(at(GFD_DS)),
                mps: Some(at(MPS_DS)),
                chart: false,
            };
        }
        let mut stack = Stack {
            chart: true,
            ..Stack::default()
        };
        let all = self.objects.get(&kinds::DAEMONSETS.qualified());
        for ds in all.into_iter().flat_map(BTreeMap::values) {
            let meta = &ds["metadata"];
            let operand = || {
                Some(Operand::new(
                    meta["namespace"].as_str()?,
                    meta["name"].as_str()?,
                ))
            };
            let slot = match twin::chart_role(ds) {
                Some("plugin") => &mut stack.plugin,
                Some("gfd") => &mut stack.gfd,
                Some("mps") => &mut stack.mps,
                _ => continue,
            };
            // The first by namespace and name, should a cluster run two.
            if slot.is_none() {
                *slot = operand();
            }
        }
        stack
    }

    /// What a device plugin pod that starts now reads.
    pub(crate) fn current_inputs(&self) -> PluginInputs {
        let stack = self.stack();
        if !stack.chart {
            let cp = self.get_ref(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY);
            let name = twin::config_name(cp);
            let cm = (!name.is_empty())
                .then(|| self.get_ref(kinds::CONFIGMAPS, OPERATOR_NS, name))
                .flatten();
            return twin::plugin_inputs(cp, cm);
        }
        let Some(op) = stack.plugin else {
            return PluginInputs::default();
        };
        let Some(ds) = self.get_ref(kinds::DAEMONSETS, &op.ns, &op.name) else {
            return PluginInputs::default();
        };
        self.chart_inputs(&op.ns, ds)
    }

    /// The standalone chart's plugin, with the ConfigMap it mounts as the store holds it.
    fn chart_inputs(&self, ns: &str, ds: &Value) -> PluginInputs {
        let cm = twin::chart_configmap(ds).and_then(|n| self.get_ref(kinds::CONFIGMAPS, ns, &n));
        twin::chart_inputs(ds, cm)
    }

    /// The device plugin daemonset's pod template, whichever runs it.
    pub(super) fn daemonset_marker(&self) -> Option<String> {
        let op = self.stack().plugin?;
        self.get_ref(kinds::DAEMONSETS, &op.ns, &op.name)
            .map(twin::restart_marker)
    }

    /// GFD's and the MPS daemon's pod templates, by namespace/name.
    pub(super) fn operand_marker_map(&self) -> BTreeMap<String, String> {
        let stack = self.stack();
        [stack.gfd, stack.mps]
            .into_iter()
            .flatten()
            .filter_map(|op| {
                self.get_ref(kinds::DAEMONSETS, &op.ns, &op.name)
                    .map(|ds| (op.key(), twin::restart_marker(ds)))
            })
            .collect()
    }
}
