//! What NVIDIA's standalone device plugin chart (`nvidia-device-plugin`, v0.20.0) does with the
//! values this provider hands it, learnt from the chart's templates:
//! - `config.map` (config name -> YAML) is rendered into the ConfigMap
//!   `<fullname>-configs` of the release's namespace (templates/configmap.yml; the name from
//!   `_helpers.tpl` `nvidia-device-plugin.configMapName`).
//! - `config.name` names a ConfigMap of one's own instead; the chart refuses both at once
//!   (templates/validation.yml), so writing `map` means clearing `name`.
//! - `config.default` becomes `DEFAULT_CONFIG` of the config-manager containers of the device
//!   plugin, GPU feature discovery and MPS daemonsets, written without quotes
//!   (`value: {{ .Values.config.default }}`), as the config names are as the ConfigMap's keys: a
//!   name YAML reads as another type breaks the render ([`super::chart::unquoted_kind`]).
//! - The pod templates carry `checksum/config` of the rendered ConfigMap
//!   (`nvidia-device-plugin.podAnnotations`), and `DEFAULT_CONFIG` is in them: a change of either
//!   rolls the pods by itself.
//! - `<fullname>`: `fullnameOverride`, else the release name when it contains the chart's name
//!   (or `nameOverride`), else `<release>-<name>`, cut to 63 characters without a trailing `-`
//!   (`nvidia-device-plugin.fullname`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::api::Api;
use serde_json::{Value, json};

use super::delivery::Cluster;
use super::error::KubeError;

/// The chart's name, as a release's metadata says it.
pub const CHART_NAME: &str = "nvidia-device-plugin";

/// The process the device plugin's config-manager sidecar signals, which tells its daemonset.
const PLUGIN_PROCESS: &str = "nvidia-device-plugin";

/// Helm's `trunc 63 | trimSuffix "-"`.
fn dns_cut(s: &str) -> String {
    let cut: String = s.chars().take(63).collect();
    cut.strip_suffix('-').map(str::to_string).unwrap_or(cut)
}

fn text<'a>(values: &'a Value, key: &str) -> Option<&'a str> {
    values
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// The chart's `fullname` for a release with these (merged) values.
pub fn fullname(release: &str, values: &Value) -> String {
    if let Some(f) = text(values, "fullnameOverride") {
        return dns_cut(f);
    }
    let name = text(values, "nameOverride").unwrap_or(CHART_NAME);
    if release.contains(name) {
        dns_cut(release)
    } else {
        dns_cut(&format!("{release}-{name}"))
    }
}

/// The device plugin's daemonset.
pub fn plugin_daemonset(release: &str, values: &Value) -> String {
    fullname(release, values)
}

/// The chart's `config` values that deliver `configs` with `default` through the chart's own
/// map (what a `helm_release` of one's own of the chart is given).
pub fn config_values(configs: &BTreeMap<String, String>, default: &str) -> Value {
    json!({"config": {"map": configs, "default": default}})
}

/// The device plugin's config-manager sidecar and its env.
fn plugin_sidecar(daemonset: &Value) -> Option<(&Value, BTreeMap<&str, &str>)> {
    let containers = daemonset
        .pointer("/spec/template/spec/containers")?
        .as_array()?;
    containers.iter().find_map(|c| {
        let env: BTreeMap<&str, &str> = c["env"]
            .as_array()?
            .iter()
            .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str().unwrap_or(""))))
            .collect();
        (c["command"][0] == "config-manager"
            && env.get("PROCESS_TO_SIGNAL") == Some(&PLUGIN_PROCESS))
        .then_some((c, env))
    })
}

/// The ConfigMap the device plugin's daemonset mounts where its config-manager reads the
/// configs (`CONFIG_FILE_SRCDIR`); None without a config-manager.
pub fn mounted_configmap(daemonset: &Value) -> Option<String> {
    let (sidecar, env) = plugin_sidecar(daemonset)?;
    let srcdir = *env.get("CONFIG_FILE_SRCDIR")?;
    let volume = sidecar["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["mountPath"] == srcdir)?["name"]
        .as_str()?;
    daemonset
        .pointer("/spec/template/spec/volumes")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == volume)?
        .pointer("/configMap/name")?
        .as_str()
        .map(str::to_string)
}

/// `DEFAULT_CONFIG` of the device plugin's config-manager sidecar, as the daemonset runs it; None
/// when the daemonset runs no config-manager (the chart given no configs).
pub fn plugin_default(daemonset: &Value) -> Option<String> {
    let (_, env) = plugin_sidecar(daemonset)?;
    Some(env.get("DEFAULT_CONFIG").unwrap_or(&"").to_string())
}

/// The image of the device plugin's config-manager sidecar: the plugin's own image, which
/// carries both programs.
pub fn plugin_image(daemonset: &Value) -> Option<String> {
    let (sidecar, _) = plugin_sidecar(daemonset)?;
    sidecar["image"].as_str().map(str::to_string)
}

/// The standalone chart's release a device plugin daemonset belongs to, `(namespace, release)`:
/// helm's annotations on what it made (meta.helm.sh/release-name and -namespace), on a daemonset
/// with the plugin's config-manager that no ClusterPolicy owns (the GPU operator's runs one too).
pub fn standalone_release(daemonset: &Value) -> Option<(String, String)> {
    plugin_sidecar(daemonset)?;
    let meta = &daemonset["metadata"];
    let by_operator = meta["ownerReferences"]
        .as_array()
        .is_some_and(|o| o.iter().any(|r| r["kind"] == "ClusterPolicy"));
    let a = |k: &str| meta["annotations"][k].as_str().map(str::to_string);
    let release = a("meta.helm.sh/release-name")?;
    let namespace = a("meta.helm.sh/release-namespace")?;
    (!by_operator).then_some((namespace, release))
}

impl Cluster {
    /// Every daemonset of the cluster, as JSON.
    pub async fn daemonsets(&self) -> Result<Vec<Value>, KubeError> {
        let api: Api<DaemonSet> = Api::all(self.client());
        let list = api
            .list(&Default::default())
            .await
            .map_err(|e| KubeError::from_kube(&self.target, e))?;
        Ok(list
            .items
            .into_iter()
            .map(|d| serde_json::to_value(d).unwrap_or_default())
            .collect())
    }

    /// A daemonset as JSON; None when it does not exist.
    pub async fn daemonset(&self, ns: &str, name: &str) -> Result<Option<Value>, KubeError> {
        let api: Api<DaemonSet> = Api::namespaced(self.client(), ns);
        match api.get_opt(name).await {
            Ok(ds) => Ok(ds.map(|d| serde_json::to_value(d).unwrap_or_default())),
            Err(e) => Err(KubeError::from_kube(&self.target, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fullname_follows_the_charts_helper() {
        let none = json!({});
        assert_eq!(fullname("nvdp", &none), "nvdp-nvidia-device-plugin");
        assert_eq!(
            fullname("nvidia-device-plugin", &none),
            "nvidia-device-plugin"
        );
        assert_eq!(
            fullname("my-nvidia-device-plugin-1", &none),
            "my-nvidia-device-plugin-1"
        );
        assert_eq!(fullname("x", &json!({"nameOverride": "dp"})), "x-dp");
        assert_eq!(
            fullname("x", &json!({"fullnameOverride": "plugin"})),
            "plugin"
        );
        // Cut to 63, then without a trailing dash.
        let a = "a".repeat(43);
        assert_eq!(fullname(&a, &none), format!("{a}-nvidia-device-plugi"));
        let r = "r".repeat(62);
        assert_eq!(fullname(&r, &none), r);
    }

    #[test]
    fn the_default_is_read_from_the_plugins_sidecar_only() {
        let ds = json!({"spec": {"template": {"spec": {"containers": [
            {"command": ["config-manager"], "env": [
                {"name": "DEFAULT_CONFIG", "value": "ts-4"},
                {"name": "PROCESS_TO_SIGNAL", "value": "nvidia-device-plugin"}]},
            {"command": ["nvidia-device-plugin"]}]}}}});
        assert_eq!(plugin_default(&ds).as_deref(), Some("ts-4"));
        let gfd = json!({"spec": {"template": {"spec": {"containers": [
            {"command": ["config-manager"], "env": [
                {"name": "DEFAULT_CONFIG", "value": "x"},
                {"name": "PROCESS_TO_SIGNAL", "value": "gpu-feature-discovery"}]}]}}}});
        assert_eq!(plugin_default(&gfd), None);
    }
}
