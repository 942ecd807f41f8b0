//! NVIDIA's standalone `nvidia-device-plugin` chart as its daemonsets show it (chart v0.20.0
//! templates/daemonset-device-plugin.yml, daemonset-gfd.yml, daemonset-mps-control-daemon.yml):
//! each carries its config-manager's settings itself, `DEFAULT_CONFIG` and `FALLBACK_STRATEGIES`
//! in the sidecar's env, the ConfigMap as the volume mounted at its `CONFIG_FILE_SRCDIR`, and the
//! process it signals (`PROCESS_TO_SIGNAL`) saying which daemon the daemonset runs. Read alike by
//! the store and by the remote twin, which finds the objects over HTTP.

use std::collections::BTreeMap;

use serde_json::Value;

use super::config_manager::PluginInputs;

/// The label every config-manager of NVIDIA's reads a node's config name from.
const NODE_LABEL: &str = "nvidia.com/device-plugin.config";

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

/// Which daemon a chart's daemonset runs: the process its sidecar signals, or, given no configs
/// (the chart then renders no config-manager), its main container's command.
pub(crate) fn chart_role(ds: &Value) -> Option<&'static str> {
    let role = |process: &str| match process {
        "nvidia-device-plugin" => Some("plugin"),
        "gpu-feature-discovery" => Some("gfd"),
        p if p.ends_with("mps-control-daemon") => Some("mps"),
        _ => None,
    };
    if let Some((_, e)) = sidecar(ds) {
        return role(e.get("PROCESS_TO_SIGNAL")?);
    }
    ds.pointer("/spec/template/spec/containers")?
        .as_array()?
        .iter()
        .find_map(|c| role(c["command"][0].as_str()?))
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

/// The ConfigMap a chart daemonset's config-manager reads its configs from.
pub(crate) fn chart_configmap(ds: &Value) -> Option<String> {
    let (sc, e) = sidecar(ds)?;
    mounted_configmap(ds, sc, e.get("CONFIG_FILE_SRCDIR")?)
}

/// What the chart's device plugin reads when its pod starts, `configmap` being the one
/// [`chart_configmap`] names as the API holds it: no sidecar means no config (`config.map` and
/// `config.name` unset), the plugin's defaults. Its release is its image's tag.
pub(crate) fn chart_inputs(ds: &Value, configmap: Option<&Value>) -> PluginInputs {
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
    let Some((_, e)) = sidecar(ds) else {
        return PluginInputs {
            mig_strategy,
            plugin_version,
            ..PluginInputs::default()
        };
    };
    let configmap = configmap.map(|cm| {
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
        config_name: chart_configmap(ds).unwrap_or_default(),
        config_default: e.get("DEFAULT_CONFIG").cloned().unwrap_or_default(),
        mig_strategy,
        configmap,
        fallbacks,
        plugin_version,
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
        assert_eq!(chart_role(&ds), Some("plugin"));
        assert_eq!(
            chart_role(&chart_ds("gpu-feature-discovery", "")),
            Some("gfd")
        );
        assert_eq!(
            chart_role(&chart_ds("/usr/bin/mps-control-daemon", "")),
            Some("mps")
        );
        let (sc, e) = sidecar(&ds).unwrap();
        assert_eq!(e["DEFAULT_CONFIG"], "ts-4");
        assert_eq!(
            mounted_configmap(&ds, sc, "/available-configs").as_deref(),
            Some("x-configs")
        );
        // Given no configs the chart renders no config-manager: the main container says.
        let mut bare = ds.clone();
        bare["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .remove(0);
        assert_eq!(chart_role(&bare), Some("plugin"));
        assert_eq!(chart_inputs(&bare, None).config_name, "");
        let inputs = chart_inputs(&ds, None);
        assert_eq!(inputs.config_name, "x-configs");
        assert_eq!(inputs.config_default, "ts-4");
        assert_eq!(inputs.mig_strategy, "single");
        assert_eq!(inputs.fallbacks, vec!["named", "single"]);
        assert_eq!(inputs.configmap, None, "no ConfigMap made yet");
    }
}
