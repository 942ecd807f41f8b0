//! NVIDIA's config-manager, as it runs beside the device plugin, GPU feature discovery and the MPS
//! control daemon that the GPU operator deploys (each pod has its `config-manager-init` container
//! and its `config-manager` sidecar; the operator mounts the ConfigMap its ClusterPolicy names at
//! `/available-configs` and an emptyDir at `/config`: NVIDIA/gpu-operator
//! controllers/object_controls.go `handleDevicePluginConfig`, v25.10.1 and v26.7.0 alike). What
//! each one does, from NVIDIA/k8s-device-plugin cmd/config-manager/main.go at v0.18.1 (the version
//! gpu-operator v25.10.1 pins; v0.20.0 behaves the same in what is modelled here):
//!
//! - **At pod start** the init container (`ONESHOT=true`) picks the key: the node's
//!   `nvidia.com/device-plugin.config` label, else `DEFAULT_CONFIG` (the ClusterPolicy's
//!   `devicePlugin.config.default`), else the operator's `FALLBACK_STRATEGIES=empty`, which links
//!   `/dev/null` (the empty config). A label or default naming no key of the ConfigMap fails it
//!   (`specified config <key> does not exist`, exit 1; with the default the key printed is the
//!   empty label, a known quirk): the pod never starts, so the node advertises no GPU at all.
//!   Otherwise `/config/config.yaml` becomes a symlink to the key and the process loads it.
//! - **The sidecar** watches the label only, and acts on a change of its value: it replaces the
//!   symlink and sends SIGHUP (device plugin and GFD; under the operator the MPS daemon is never
//!   found to signal, so it keeps what it loaded). A link to a key that is gone fails the check
//!   (`os.Stat` follows the link): the old link is not removed and the new one fails with `file
//!   exists`, on every retry, since the emptyDir outlives the container; the process keeps what it
//!   runs. A new link to a key that does not exist is made, and the reload then fails.
//! - **A process that fails to load its config** stops: the device plugin's `start` returns `unable
//!   to load config` (cmd/nvidia-device-plugin/main.go `startPlugins`), so the node stops
//!   advertising; GFD's labels stay as it last wrote them.
//! - **The ConfigMap's content** under the same key reaches a process only when it loads again
//!   (restart, or a SIGHUP after a label change): nothing watches the file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the device plugin read when its pod started: the ClusterPolicy pointer and strategy, and the data of
/// the ConfigMap it points at (None when that ConfigMap did not exist).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PluginInputs {
    pub(crate) config_name: String,
    pub(crate) config_default: String,
    pub(crate) mig_strategy: String,
    pub(crate) configmap: Option<BTreeMap<String, String>>,
    /// `FALLBACK_STRATEGIES`, in order: the operator's `empty`, the standalone chart's
    /// `config.fallbackStrategies` (`named`, `single` by default).
    #[serde(default = "operator_fallbacks")]
    pub(crate) fallbacks: Vec<String>,
    /// The plugin's release, as its image tag says it (ClusterPolicy `spec.devicePlugin.version`,
    /// or the tag of the chart daemonset's image); None when nothing says.
    #[serde(default)]
    pub(crate) plugin_version: Option<String>,
}

/// No config named, the operator's fallback.
impl Default for PluginInputs {
    fn default() -> Self {
        PluginInputs {
            config_name: String::new(),
            config_default: String::new(),
            mig_strategy: String::new(),
            configmap: None,
            fallbacks: operator_fallbacks(),
            plugin_version: None,
        }
    }
}

/// The GPU operator sets `FALLBACK_STRATEGIES=empty` on every config-manager it renders
/// (NVIDIA/gpu-operator controllers/object_controls.go, v25.10.1 and v26.7.0).
pub(crate) fn operator_fallbacks() -> Vec<String> {
    vec!["empty".to_string()]
}

/// One config-manager and the process it feeds, on one node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Reader {
    /// The key `/config/config.yaml` links to (`""`: `/dev/null`); None before a pod ran.
    #[serde(default)]
    pub(crate) linked: Option<String>,
    /// The config the process runs with (YAML; `""` the empty config); None when it runs none.
    #[serde(default)]
    pub(crate) loaded: Option<String>,
    /// Why the pod or its process does not run (the init container's or the process's error).
    #[serde(default)]
    pub(crate) error: Option<String>,
    /// Why the sidecar fails (the process keeps what it loaded).
    #[serde(default)]
    pub(crate) sidecar_error: Option<String>,
}

/// The key the label, the default and the fallback name: Ok("") for `/dev/null`
/// (cmd/config-manager/main.go `updateConfigName`, v0.20.0: the label first, then
/// `DEFAULT_CONFIG`, then each fallback strategy in order).
fn wanted(label: Option<&str>, inputs: &PluginInputs) -> Result<String, String> {
    let data = inputs.configmap.as_ref();
    if data.is_none_or(BTreeMap::is_empty) {
        return Err("no configuration files available".into());
    }
    let exists = |k: &str| data.is_some_and(|d| d.contains_key(k));
    match label.filter(|l| !l.is_empty()) {
        Some(l) if exists(l) => return Ok(l.to_string()),
        Some(l) => return Err(format!("specified config {l} does not exist")),
        None if inputs.config_default.is_empty() => {}
        None if exists(&inputs.config_default) => return Ok(inputs.config_default.clone()),
        // main.go formats the (empty) label here, not the default.
        None => return Err("specified config  does not exist".into()),
    }
    for fallback in &inputs.fallbacks {
        match fallback.as_str() {
            "named" if exists("default") => return Ok("default".into()),
            "single" => {
                if let Some([only]) = data.map(|d| d.keys().collect::<Vec<_>>()).as_deref() {
                    return Ok(only.to_string());
                }
            }
            "empty" => return Ok(String::new()),
            "named" => {}
            other => return Err(format!("unknown fallback strategy: {other}")),
        }
    }
    Err("no config was set, no default was provided, and all fallbacks failed".into())
}

/// The content a link to `key` reads now; None when the key is gone (a dangling link).
fn content(key: &str, inputs: &PluginInputs) -> Option<String> {
    if key.is_empty() {
        return Some(String::new());
    }
    inputs.configmap.as_ref()?.get(key).cloned()
}

impl Reader {
    /// Whether the process runs with a config.
    #[cfg(test)]
    pub(crate) fn running(&self) -> bool {
        self.error.is_none() && self.loaded.is_some()
    }

    /// The pod starts afresh (a new emptyDir): the init container links, the process loads.
    pub(crate) fn start(&mut self, label: Option<&str>, inputs: &PluginInputs) {
        self.sidecar_error = None;
        if inputs.config_name.is_empty() {
            // No config named: the operator runs the process without config-manager or file.
            *self = Reader {
                linked: None,
                loaded: Some(String::new()),
                ..Reader::default()
            };
            return;
        }
        if inputs.configmap.is_none() {
            *self = Reader {
                error: Some(format!(
                    "MountVolume.SetUp failed: configmap \"{}\" not found",
                    inputs.config_name
                )),
                ..Reader::default()
            };
            return;
        }
        match wanted(label, inputs) {
            Ok(key) => {
                self.loaded = content(&key, inputs);
                self.linked = Some(key);
                self.error = None;
            }
            Err(e) => {
                *self = Reader {
                    error: Some(format!("config-manager-init: {e}")),
                    ..Reader::default()
                };
            }
        }
    }

    /// The sidecar sees the node's label now; `signals`: it can reach its process (not the MPS
    /// daemon's under the operator). Acts only when the key it would link differs from the link.
    pub(crate) fn label_seen(&mut self, label: Option<&str>, inputs: &PluginInputs, signals: bool) {
        let Some(linked) = self.linked.clone() else {
            // No sidecar runs (no config named, or the pod never started).
            return;
        };
        if inputs.config_name.is_empty() || inputs.configmap.is_none() {
            return;
        }
        let key = match label.filter(|l| !l.is_empty()) {
            Some(l) => l.to_string(),
            None => match wanted(None, inputs) {
                Ok(k) => k,
                Err(e) => {
                    self.sidecar_error = Some(e);
                    return;
                }
            },
        };
        if key == linked {
            return;
        }
        if !linked.is_empty() && content(&linked, inputs).is_none() {
            self.sidecar_error = Some(format!(
                "error creating symlink: symlink /available-configs/{key} /config/config.yaml: file \
                 exists"
            ));
            return;
        }
        self.sidecar_error = None;
        self.linked = Some(key.clone());
        if !signals {
            return;
        }
        match content(&key, inputs) {
            Some(yaml) => {
                self.loaded = Some(yaml);
                self.error = None;
            }
            None => {
                self.loaded = None;
                self.error = Some(format!(
                    "unable to load config: open /config/config.yaml: no such file or directory \
                     (linked to the missing config {key})"
                ));
            }
        }
    }
}

/// The config-manager readers of one node: the device plugin's, GPU feature discovery's and the
/// MPS control daemon's (the last runs on nodes labelled `nvidia.com/mps.capable=true` only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Readers {
    #[serde(default)]
    pub(crate) plugin: Reader,
    #[serde(default)]
    pub(crate) gfd: Reader,
    #[serde(default)]
    pub(crate) mps: Option<Reader>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(keys: &[(&str, &str)]) -> PluginInputs {
        PluginInputs {
            config_name: "cfg".into(),
            fallbacks: operator_fallbacks(),
            config_default: String::new(),
            mig_strategy: String::new(),
            configmap: Some(
                keys.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            plugin_version: None,
        }
    }

    #[test]
    fn a_label_naming_a_missing_config_stops_the_pod_at_init() {
        let mut r = Reader::default();
        r.start(Some("time-sliced-10"), &inputs(&[("all", "")]));
        assert!(!r.running());
        assert_eq!(
            r.error.as_deref(),
            Some("config-manager-init: specified config time-sliced-10 does not exist")
        );
        // No label, no default: the fallback links /dev/null.
        r.start(None, &inputs(&[("all", "")]));
        assert_eq!(
            (r.linked.as_deref(), r.loaded.as_deref()),
            (Some(""), Some(""))
        );
        // A default that does not exist: the quirk of the empty name.
        let mut i = inputs(&[("all", "")]);
        i.config_default = "gone".into();
        r.start(None, &i);
        assert_eq!(
            r.error.as_deref(),
            Some("config-manager-init: specified config  does not exist")
        );
    }

    #[test]
    fn the_standalone_charts_fallbacks_pick_a_config_when_no_label_or_default_does() {
        let chart = |keys: &[(&str, &str)], fallbacks: &[&str]| PluginInputs {
            fallbacks: fallbacks.iter().map(|f| f.to_string()).collect(),
            ..inputs(keys)
        };
        let both = [("default", "d"), ("ts", "t")];
        let named_single = ["named", "single"];
        assert_eq!(
            wanted(None, &chart(&both, &named_single)),
            Ok("default".into())
        );
        assert_eq!(
            wanted(None, &chart(&[("ts", "t")], &named_single)),
            Ok("ts".into())
        );
        assert_eq!(
            wanted(None, &chart(&[("a", ""), ("b", "")], &named_single)),
            Err("no config was set, no default was provided, and all fallbacks failed".into())
        );
        assert_eq!(
            wanted(None, &chart(&[("a", "")], &["odd"])),
            Err("unknown fallback strategy: odd".into())
        );
        // A label is taken as it is, whatever the fallbacks.
        assert_eq!(
            wanted(Some("gone"), &chart(&both, &named_single)),
            Err("specified config gone does not exist".into())
        );
        assert_eq!(
            wanted(None, &chart(&[], &["empty"])),
            Err("no configuration files available".into())
        );
    }

    #[test]
    fn the_sidecar_relinks_on_a_label_change_and_fails_on_a_dangling_link() {
        let both = inputs(&[("ten", "10"), ("eight", "8")]);
        let mut r = Reader::default();
        r.start(Some("ten"), &both);
        assert_eq!(r.loaded.as_deref(), Some("10"));
        // Content changed under the same key: nothing reloads.
        r.label_seen(Some("ten"), &inputs(&[("ten", "9")]), true);
        assert_eq!(r.loaded.as_deref(), Some("10"));
        r.label_seen(Some("eight"), &both, true);
        assert_eq!(
            (r.linked.as_deref(), r.loaded.as_deref()),
            (Some("eight"), Some("8"))
        );
        // A label naming a missing key: linked, then the reload fails.
        r.label_seen(Some("six"), &both, true);
        assert!(!r.running());
        // Its key gone, the link dangles: the next change fails with `file exists`.
        r.label_seen(Some("ten"), &both, true);
        assert!(
            r.sidecar_error
                .as_deref()
                .is_some_and(|e| e.ends_with("file exists")),
            "{r:?}"
        );
        assert_eq!(r.linked.as_deref(), Some("six"));
        // A fresh pod works.
        r.start(Some("ten"), &both);
        assert!(r.running() && r.sidecar_error.is_none());
        // A process the sidecar cannot signal keeps what it loaded.
        r.label_seen(Some("eight"), &both, false);
        assert_eq!(
            (r.linked.as_deref(), r.loaded.as_deref()),
            (Some("eight"), Some("10"))
        );
    }
}
