//! Where a cluster's device plugin, GPU feature discovery and MPS control daemon come from, and so
//! what their config-managers read when a pod starts: the GPU operator's operands (the
//! ClusterPolicy names the ConfigMap, of the operator's namespace, and the default), or NVIDIA's
//! standalone `nvidia-device-plugin` chart, whose DaemonSets carry their config-manager's settings
//! themselves (chart v0.20.0 templates/daemonset-device-plugin.yml, daemonset-gfd.yml,
//! daemonset-mps-control-daemon.yml): `DEFAULT_CONFIG` and `FALLBACK_STRATEGIES` in the sidecar's
//! env, the ConfigMap as the volume mounted at its `CONFIG_FILE_SRCDIR`, and the process it signals
//! (`PROCESS_TO_SIGNAL`) saying which daemon the DaemonSet runs. A ClusterPolicy wins: where the
//! operator runs, it owns the nodes' plugin.
//!
//! The chart's pod templates carry a `checksum/config` annotation of the ConfigMap it renders
//! (templates/_helpers.tpl `nvidia-device-plugin.podAnnotations`), so a changed `config.map`
//! rolls their pods: the restart markers see it as any other template change.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{CLUSTER_POLICY, Cluster, DEVICE_PLUGIN_DS, GFD_DS, MPS_DS, OPERATOR_NS, key};
use crate::kube::kinds;
use crate::kube::twin::{self, PluginInputs};

/// The label every config-manager of NVIDIA's reads a node's config name from.
const NODE_LABEL: &str = "nvidia.com/device-plugin.config";

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

/// A container's env as name -> value (values from elsewhere read as empty).
fn env(container: &Value) -> BTreeMap<String, String> {
    container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let name = e["name"].as_str()?;
            Some((
                name.to_string(),
                e["value"].as_str().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

/// The config-manager sidecar of a pod template (not its init container) that reads the node
/// label, and its env.
fn sidecar(ds: &Value) -> Option<(&Value, BTreeMap<String, String>)> {
    ds.pointer("/spec/template/spec/containers")?
        .as_array()?
        .iter()
        .filter(|c| c["command"][0] == "config-manager")
        .map(|c| (c, env(c)))
        .find(|(_, e)| e.get("NODE_LABEL").map(String::as_str) == Some(NODE_LABEL))
}

/// Which daemon a chart's daemonset runs, from the process its sidecar signals.
fn role(ds: &Value) -> Option<&'static str> {
    let (_, e) = sidecar(ds)?;
    match e.get("PROCESS_TO_SIGNAL")?.as_str() {
        "nvidia-device-plugin" => Some("plugin"),
        "gpu-feature-discovery" => Some("gfd"),
        p if p.ends_with("mps-control-daemon") => Some("mps"),
        _ => None,
    }
}

/// The ConfigMap a pod template mounts where the sidecar reads its configs.
fn mounted_configmap(ds: &Value, sidecar: &Value, srcdir: &str) -> Option<String> {
    let volume = sidecar["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["mountPath"] == srcdir)?["name"]
        .as_str()?;
    ds.pointer("/spec/template/spec/volumes")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == volume)?
        .pointer("/configMap/name")?
        .as_str()
        .map(str::to_string)
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
            let slot = match role(ds) {
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

    /// The standalone chart's plugin: no sidecar means no config (`config.map` and
    /// `config.name` unset), the plugin's defaults.
    fn chart_inputs(&self, ns: &str, ds: &Value) -> PluginInputs {
        let main = ds
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c["command"][0] == "nvidia-device-plugin")
            });
        let mig_strategy = main
            .map(env)
            .and_then(|e| e.get("MIG_STRATEGY").cloned())
            .unwrap_or_default();
        let plugin_version = main
            .and_then(|c| c["image"].as_str())
            .map(|i| i.rsplit('/').next().unwrap_or(i))
            .and_then(|i| i.split_once(':'))
            .map(|(_, tag)| tag.to_string());
        let Some((sc, e)) = sidecar(ds) else {
            return PluginInputs {
                mig_strategy,
                plugin_version,
                ..PluginInputs::default()
            };
        };
        let srcdir = e.get("CONFIG_FILE_SRCDIR").cloned().unwrap_or_default();
        let config_name = mounted_configmap(ds, sc, &srcdir).unwrap_or_default();
        let configmap = self.get_ref(kinds::CONFIGMAPS, ns, &config_name).map(|cm| {
            cm["data"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        });
        let fallbacks = e
            .get("FALLBACK_STRATEGIES")
            .map(|f| {
                f.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        PluginInputs {
            config_name,
            config_default: e.get("DEFAULT_CONFIG").cloned().unwrap_or_default(),
            mig_strategy,
            configmap,
            fallbacks,
            plugin_version,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A daemonset as the chart renders its config parts (trimmed to what is read).
    fn chart_ds(process: &str, default: &str) -> Value {
        json!({"metadata": {"namespace": "nvdp", "name": format!("x-{process}")},
            "spec": {"template": {"spec": {
                "containers": [
                    {"name": "sidecar", "command": ["config-manager"], "env": [
                        {"name": "NODE_LABEL", "value": NODE_LABEL},
                        {"name": "CONFIG_FILE_SRCDIR", "value": "/available-configs"},
                        {"name": "DEFAULT_CONFIG", "value": default},
                        {"name": "FALLBACK_STRATEGIES", "value": "named,single"},
                        {"name": "PROCESS_TO_SIGNAL", "value": process}],
                     "volumeMounts": [{"name": "available-configs", "mountPath": "/available-configs"}]},
                    {"name": "ctr", "command": ["nvidia-device-plugin"], "env": [
                        {"name": "MIG_STRATEGY", "value": "single"}]}],
                "volumes": [{"name": "available-configs", "configMap": {"name": "x-configs"}},
                    {"name": "config", "emptyDir": {}}]}}}})
    }

    #[test]
    fn the_chart_daemonsets_say_their_role_and_what_they_read() {
        let ds = chart_ds("nvidia-device-plugin", "ts-4");
        assert_eq!(role(&ds), Some("plugin"));
        assert_eq!(role(&chart_ds("gpu-feature-discovery", "")), Some("gfd"));
        assert_eq!(
            role(&chart_ds("/usr/bin/mps-control-daemon", "")),
            Some("mps")
        );
        let (sc, e) = sidecar(&ds).unwrap();
        assert_eq!(e["DEFAULT_CONFIG"], "ts-4");
        assert_eq!(
            mounted_configmap(&ds, sc, "/available-configs").as_deref(),
            Some("x-configs")
        );
        let c = Cluster::without_operator("aks", "c");
        let inputs = c.chart_inputs("nvdp", &ds);
        assert_eq!(inputs.config_name, "x-configs");
        assert_eq!(inputs.config_default, "ts-4");
        assert_eq!(inputs.mig_strategy, "single");
        assert_eq!(inputs.fallbacks, vec!["named", "single"]);
        assert_eq!(inputs.configmap, None, "no ConfigMap made yet");
    }
}
