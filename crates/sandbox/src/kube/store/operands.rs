//! The GPU operator's operands that read the device plugin config: the device plugin, GPU feature
//! discovery and the MPS control daemon daemonsets. As the operator renders them
//! (NVIDIA/gpu-operator controllers/object_controls.go `handleDevicePluginConfig`, called for
//! all three), a pod template mounts the ConfigMap the ClusterPolicy's `devicePlugin.config.name`
//! names as a volume of that name (at `/available-configs`, beside an emptyDir `config` at
//! `/config`), and none while no config is named; the operator keeps the templates so, and a
//! changed template rolls the pods, as any daemonset's does. The device plugin's containers run
//! the image `devicePlugin` names (`<repository>/<image>:<version>`, or `@<version>` for a
//! `sha256:` digest: api/nvidia/v1 `ImagePath`), so a new version rolls its pods too. Their status
//! is the daemonset controller's, rolled out at once.

use serde_json::{Value, json};

use super::{CLUSTER_POLICY, Cluster, DEVICE_PLUGIN_DS, GFD_DS, MPS_DS, OPERATOR_NS};
use crate::kube::kinds;
use crate::kube::twin::{self, Restarts};

/// The volumes a template has for the config named `config` (none for no config).
fn config_volumes(config: &str) -> Vec<Value> {
    if config.is_empty() {
        return Vec::new();
    }
    vec![
        json!({"name": "config", "emptyDir": {}}),
        json!({"name": config, "configMap": {"name": config}}),
    ]
}

/// The image a ClusterPolicy component names; None when it names no full path.
fn image_path(component: Option<&Value>) -> Option<String> {
    let s = |k: &str| component?.get(k)?.as_str().filter(|s| !s.is_empty());
    let (repo, image, version) = (s("repository")?, s("image")?, s("version")?);
    let sep = if version.starts_with("sha256:") {
        "@"
    } else {
        ":"
    };
    Some(format!("{repo}/{image}{sep}{version}"))
}

impl Cluster {
    /// The operator's part: every operand's pod template mounts the ConfigMap the ClusterPolicy
    /// names now (the ConfigMap volumes of other names, and the emptyDir, replaced).
    pub(super) fn sync_operand_volumes(&mut self) {
        let Some(cp) = self.get_ref(kinds::CLUSTERPOLICIES, "", CLUSTER_POLICY) else {
            return;
        };
        let config = twin::config_name(Some(cp)).to_string();
        let plugin_image = image_path(cp.pointer("/spec/devicePlugin"));
        for name in [DEVICE_PLUGIN_DS, GFD_DS, MPS_DS] {
            let Some(mut ds) = self.get_ref(kinds::DAEMONSETS, OPERATOR_NS, name).cloned() else {
                continue;
            };
            let mut volumes: Vec<Value> = ds
                .pointer("/spec/template/spec/volumes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|v| v.get("configMap").is_none() && v["name"] != "config")
                .collect();
            volumes.extend(config_volumes(&config));
            let before = ds.clone();
            let want = (!volumes.is_empty()).then(|| json!(volumes));
            let spec = &mut ds["spec"]["template"]["spec"];
            match want {
                Some(v) => spec["volumes"] = v,
                None => {
                    if let Some(m) = spec.as_object_mut() {
                        m.remove("volumes");
                    }
                }
            }
            if let Some(image) = plugin_image.as_ref().filter(|_| name == DEVICE_PLUGIN_DS) {
                for c in spec["containers"].as_array_mut().into_iter().flatten() {
                    c["image"] = json!(image);
                }
            }
            if ds != before {
                self.put_internal(kinds::DAEMONSETS, OPERATOR_NS, name, ds);
            }
        }
    }

    /// Which operands' templates changed since last seen (their pods restart), remembering them.
    pub(super) fn operand_restarts(&mut self) -> Restarts {
        let marker = self.daemonset_marker();
        let plugin = marker.is_some() && marker != self.restart_marker;
        if marker.is_some() {
            self.restart_marker = marker;
        }
        let now = self.operand_marker_map();
        let stack = self.stack();
        let changed = |op: Option<super::plugin_stack::Operand>| {
            op.is_some_and(|op| {
                let k = op.key();
                now.get(&k)
                    .is_some_and(|m| self.operand_markers.get(&k) != Some(m))
            })
        };
        let r = Restarts {
            plugin,
            gfd: changed(stack.gfd),
            mps: changed(stack.mps),
        };
        self.operand_markers = now;
        r
    }

    /// The daemonset controller's status of each operand: rolled out at once on every node it
    /// runs on (the MPS daemon where the device plugin runs an MPS config).
    pub(super) fn operand_status(&mut self) {
        let gpu = |t: &&twin::NodeTwin| t.gpus > 0 && t.cloud != "gke";
        let plugin_nodes = self.twins.values().filter(gpu).count();
        let mps_nodes = self
            .twins
            .values()
            .filter(gpu)
            .filter(|t| t.readers.mps.is_some())
            .count();
        for (name, n) in [
            (DEVICE_PLUGIN_DS, plugin_nodes),
            (GFD_DS, plugin_nodes),
            (MPS_DS, mps_nodes),
        ] {
            let Some(mut ds) = self.get_ref(kinds::DAEMONSETS, OPERATOR_NS, name).cloned() else {
                continue;
            };
            let generation = ds
                .pointer("/metadata/generation")
                .cloned()
                .unwrap_or(json!(1));
            let status = json!({"currentNumberScheduled": n, "desiredNumberScheduled": n, "numberReady": n,
                "numberAvailable": n, "updatedNumberScheduled": n, "numberMisscheduled": 0, "observedGeneration": generation});
            if ds.get("status") != Some(&status) {
                ds["status"] = status;
                self.put_internal(kinds::DAEMONSETS, OPERATOR_NS, name, ds);
            }
        }
    }
}
