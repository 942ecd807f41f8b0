//! When the operands that read the device plugin config restart, and what they load then: the
//! pod-template markers that tell a daemonset rolled its pods, the inputs a starting pod reads
//! from the ClusterPolicy and its ConfigMap, each node's restart step, and what each
//! config-manager linked and loaded as a node shows it.

use serde_json::Value;
use std::collections::BTreeMap;

use super::config_manager::{PluginInputs, Reader, operator_fallbacks};
use super::device_config::running_config;
use super::labels::{CONFIG_LABEL, MIG_CONFIG_LABEL};
use super::mig_manager::{MigManager, operator_mig_label};
use super::node::NodeTwin;

/// Which of the operands that read the device plugin config had their pods restarted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Restarts {
    pub(crate) plugin: bool,
    pub(crate) gfd: bool,
    pub(crate) mps: bool,
}

impl Restarts {
    pub(crate) const ALL: Restarts = Restarts {
        plugin: true,
        gfd: true,
        mps: true,
    };
}

/// The operator's and the operands' reaction on one node: the operator's MIG label; the pods
/// restarted (their daemonset was, or the MIG manager repartitioned and restarted the device
/// plugin and GFD because the node's `nvidia.com/mig.config` changed) start afresh from the
/// config as it is now; the others' config-manager sidecars see the node's label. The MPS control
/// daemon runs where the device plugin runs an MPS config.
pub(crate) fn restart_step(
    t: &mut NodeTwin,
    labels: &mut BTreeMap<String, String>,
    mm: &MigManager,
    current: &PluginInputs,
    restarted: Restarts,
) {
    if let Some(l) = operator_mig_label(t, labels, mm) {
        labels.insert(MIG_CONFIG_LABEL.into(), l.into());
    }
    let mig_label = labels.get(MIG_CONFIG_LABEL).cloned();
    let repartitioned = mm.enabled && mig_label != t.seen_mig_label;
    let label = labels.get(CONFIG_LABEL).map(String::as_str);
    let r = &mut t.readers;
    if restarted.plugin || repartitioned {
        t.loaded = current.clone();
        t.seen_mig_label = mig_label;
        r.plugin.start(label, current);
    } else {
        r.plugin.label_seen(label, current, true);
    }
    if restarted.gfd || repartitioned {
        r.gfd.start(label, current);
    } else {
        r.gfd.label_seen(label, current, true);
    }
    let mps_config = running_config(&r.plugin)
        .ok()
        .and_then(|c| c.sharing)
        .is_some_and(|s| s.strategy == "mps");
    match (&mut r.mps, mps_config) {
        (None, true) => {
            let mut m = Reader::default();
            m.start(label, current);
            r.mps = Some(m);
        }
        (Some(m), true) if restarted.mps => m.start(label, current),
        // Under the operator its sidecar finds no process to signal (PROCESS_TO_SIGNAL is
        // `/usr/bin/mps-control-daemon`, its argv[0] `mps-control-daemon`).
        (Some(m), true) => m.label_seen(label, current, false),
        (_, false) => r.mps = None,
    }
}

/// What each config-manager linked and each process loaded, for `labels::READERS_ANNOTATION`.
pub(crate) fn readers_summary(t: &NodeTwin) -> Value {
    let one = |r: &Reader| {
        let replicas = running_config(r).ok().map(|c| {
            c.sharing
                .map(|s| s.resources.iter().map(|(_, n)| *n).max().unwrap_or(1))
                .unwrap_or(1)
        });
        serde_json::json!({"config": r.linked, "replicas": replicas, "error": r.error,
            "sidecarError": r.sidecar_error})
    };
    let mut out = serde_json::json!({
        "nvidia-device-plugin": one(&t.readers.plugin),
        "gpu-feature-discovery": one(&t.readers.gfd),
    });
    if let Some(m) = &t.readers.mps {
        out["mps-control-daemon"] = one(m);
    }
    out
}

/// The device plugin's inputs from the ClusterPolicy and the ConfigMap it names (as read from the API).
/// The operator mounts the config into the device plugin's pods as a ConfigMap volume, and a volume
/// names a ConfigMap of the pod's own namespace, the operator's (NVIDIA/gpu-operator
/// controllers/object_controls.go, createConfigMapVolume for DevicePlugin.Config.Name): the caller reads
/// the ConfigMap `config_name(cp)` of that namespace.
pub(crate) fn plugin_inputs(cp: Option<&Value>, configmap: Option<&Value>) -> PluginInputs {
    let s = |p: &str| {
        cp.and_then(|c| c.pointer(p))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let config_name = s("/spec/devicePlugin/config/name");
    let configmap = configmap.filter(|_| !config_name.is_empty()).map(|cm| {
        cm.get("data")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    });
    PluginInputs {
        config_name,
        config_default: s("/spec/devicePlugin/config/default"),
        mig_strategy: s("/spec/mig/strategy"),
        configmap,
        fallbacks: operator_fallbacks(),
        plugin_version: Some(s("/spec/devicePlugin/version")).filter(|v| !v.is_empty()),
    }
}

/// The name of the ConfigMap the ClusterPolicy points the device plugin at (empty: none).
pub(crate) fn config_name(cp: Option<&Value>) -> &str {
    cp.and_then(|c| c.pointer("/spec/devicePlugin/config/name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A pod template as a restart marker: any change of it rolls the pods (a restart bumps an annotation of
/// it, `kubectl.kubernetes.io/restartedAt`).
pub(crate) fn restart_marker(daemonset: &Value) -> String {
    daemonset
        .pointer("/spec/template")
        .cloned()
        .unwrap_or(Value::Null)
        .to_string()
}
