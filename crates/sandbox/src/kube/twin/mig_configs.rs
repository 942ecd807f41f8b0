//! Where the GPU operator's MIG manager finds the configs a node's `nvidia.com/mig.config` may
//! name, and the configs it generates from a node's GPUs. As the real ones do:
//! - NVIDIA/gpu-operator v26.7.0 controllers/object_controls.go (`TransformMIGManager`): a
//!   ClusterPolicy `spec.migManager.config.name` that is not empty is mounted as the manager's
//!   config file (`CONFIG_FILE`), and only that ConfigMap's `mig-configs` exist; with no name the
//!   manager is given the static ConfigMap only as a fallback (`DEFAULT_CONFIG_FILE`). The v25.10.1
//!   CRD defaulted the name to the static `default-mig-parted-config`; the v26 CRD has no default
//!   ("If not specified, MIG configuration will be dynamically generated from hardware").
//! - NVIDIA/mig-parted v0.15.0 cmd/nvidia-mig-manager/main.go and pkg/mig/builder: with no config
//!   file, the manager generates at its start `all-disabled`, `all-enabled`, `all-balanced` (where
//!   the GPU's base profiles include 1g, 2g and 3g, or 1g and 2g on a 4-slice GPU) and one
//!   `all-<profile>` per profile of the node's GPUs at its most instances (`+` written `.`),
//!   applies from that, and writes it to the ConfigMap `<node>-mig-config` (key `config.yaml`) of
//!   its namespace. A label naming a config that is not there fails
//!   (`nvidia.com/mig.config.state=failed`), the GPUs left as they were.

use std::collections::BTreeMap;

use serde_json::Value;

use super::mig_geometry::mig_profiles;

/// The operator's static ConfigMap, the name the v25.10 CRD defaults to.
pub(crate) const STATIC_CONFIGMAP: &str = "default-mig-parted-config";

/// A config's layout of every GPU, as far as the twin's one-profile node can hold it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Layout {
    /// MIG off.
    Disabled,
    /// Every GPU cut into `n` instances of one profile (written with `.` for `+`).
    Uniform(String, u32),
    /// MIG on with several profiles, or none: more than the twin's node models, so the twin
    /// reports it failed rather than advertise a geometry it made up.
    Other,
}

/// Where the manager reads its configs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum MigConfigs {
    /// The operator's static ConfigMap, which the sandbox does not hold: the twin's table of each
    /// GPU's profiles stands for its entries (one `all-<profile>` per profile of the GPUs it
    /// lists).
    #[default]
    Static,
    /// A ConfigMap the ClusterPolicy names: only its configs exist.
    Named(BTreeMap<String, Layout>),
    /// No name: generated per node from its GPUs.
    Generated,
}

impl MigConfigs {
    /// From the ClusterPolicy's `spec.migManager.config.name` and the ConfigMap of that name
    /// (None when the store has none).
    pub(crate) fn of(name: Option<&str>, configmap: Option<&Value>) -> MigConfigs {
        match (name.filter(|n| !n.is_empty()), configmap) {
            (None, _) => MigConfigs::Generated,
            (Some(_), Some(cm)) => MigConfigs::Named(layouts(cm)),
            (Some(STATIC_CONFIGMAP), None) => MigConfigs::Static,
            // The manager cannot start without its file: nothing applies.
            (Some(_), None) => MigConfigs::Named(BTreeMap::new()),
        }
    }
}

/// The configs of a mig-parted ConfigMap (`config.yaml`: `mig-configs`, name -> entries of
/// `devices`, `mig-enabled`, `mig-devices`), each as a [`Layout`].
fn layouts(cm: &Value) -> BTreeMap<String, Layout> {
    let text = cm
        .pointer("/data/config.yaml")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let doc: Value = serde_saphyr::from_str(text).unwrap_or(Value::Null);
    let Some(configs) = doc.get("mig-configs").and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    configs
        .iter()
        .map(|(name, entries)| (name.clone(), layout(entries)))
        .collect()
}

fn layout(entries: &Value) -> Layout {
    let entries = entries.as_array().map(Vec::as_slice).unwrap_or_default();
    let on: Vec<&Value> = entries
        .iter()
        .filter(|e| e.get("mig-enabled").and_then(Value::as_bool) == Some(true))
        .collect();
    if on.is_empty() {
        return Layout::Disabled;
    }
    let mut profiles = BTreeMap::new();
    for e in on {
        for (p, n) in e
            .get("mig-devices")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            profiles.insert(p.replace('+', "."), n.as_u64().unwrap_or(0) as u32);
        }
    }
    match profiles.into_iter().collect::<Vec<_>>().as_slice() {
        [(p, n)] if *n > 0 => Layout::Uniform(p.clone(), *n),
        _ => Layout::Other,
    }
}

/// The config file the manager generates for a node with these GPUs, as mig-parted v0.15.0's
/// builder lays it out; None for GPUs without MIG.
pub(crate) fn generated(product: &str, memory_mib: u64) -> Option<String> {
    let profiles = mig_profiles(product, memory_mib)?;
    let mut out = String::from(
        "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    mig-enabled: false\n  \
        all-enabled:\n  - devices: all\n    mig-enabled: true\n    mig-devices: {}\n",
    );
    let entry = |name: &str, devices: &[(&str, u32)]| {
        let mut e =
            format!("  {name}:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n");
        for (p, n) in devices {
            e.push_str(&format!("      \"{p}\": {n}\n"));
        }
        e
    };
    if let Some(b) = balanced(profiles) {
        out.push_str(&entry("all-balanced", &b));
    }
    for (p, n) in profiles {
        out.push_str(&entry(&format!("all-{}", p.replace('+', ".")), &[(p, *n)]));
    }
    Some(out)
}

/// `all-balanced`: on a 7-slice GPU two 1g, one 2g and one 3g instance; on a 4-slice GPU two
/// 1g and one 2g; for each size the base profile (no `+`) with the most instances.
fn balanced(profiles: &[(&'static str, u32)]) -> Option<Vec<(&'static str, u32)>> {
    let slices = |p: &str| p.split('g').next()?.parse::<u32>().ok();
    let largest = profiles.iter().filter_map(|(p, _)| slices(p)).max()?;
    let wanted: &[(u32, u32)] = match largest {
        7 => &[(1, 2), (2, 1), (3, 1)],
        4 => &[(1, 2), (2, 1)],
        _ => return None,
    };
    wanted
        .iter()
        .map(|(g, count)| {
            profiles
                .iter()
                .filter(|(p, _)| !p.contains('+') && slices(p) == Some(*g))
                .max_by_key(|(_, n)| *n)
                .map(|(p, _)| (*p, *count))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_generated_config_holds_the_gpus_own_profiles() {
        let text = generated("NVIDIA-A100-SXM4-40GB", 40960).unwrap();
        let configs = layouts(&json!({"data": {"config.yaml": text}}));
        let names: Vec<&str> = configs.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "all-1g.10gb",
                "all-1g.5gb",
                "all-1g.5gb.me",
                "all-2g.10gb",
                "all-3g.20gb",
                "all-4g.20gb",
                "all-7g.40gb",
                "all-balanced",
                "all-disabled",
                "all-enabled",
            ]
        );
        assert_eq!(configs["all-1g.5gb"], Layout::Uniform("1g.5gb".into(), 7));
        assert_eq!(configs["all-disabled"], Layout::Disabled);
        assert_eq!(configs["all-balanced"], Layout::Other);
        assert!(
            text.contains("\"1g.5gb\": 2\n      \"2g.10gb\": 1\n      \"3g.20gb\": 1"),
            "{text}"
        );
        // An 80 GB GPU has no 1g.5gb, and a T4 no MIG.
        let h100 = generated("NVIDIA-H100-80GB-HBM3", 81920).unwrap();
        assert!(
            h100.contains("all-1g.10gb:") && !h100.contains("all-1g.5gb:"),
            "{h100}"
        );
        assert_eq!(generated("Tesla-T4", 15360), None);
    }

    #[test]
    fn the_policys_name_picks_where_configs_come_from() {
        assert_eq!(MigConfigs::of(None, None), MigConfigs::Generated);
        assert_eq!(MigConfigs::of(Some(""), None), MigConfigs::Generated);
        assert_eq!(
            MigConfigs::of(Some(STATIC_CONFIGMAP), None),
            MigConfigs::Static
        );
        assert_eq!(
            MigConfigs::of(Some("custom"), None),
            MigConfigs::Named(BTreeMap::new())
        );
        let cm = json!({"data": {"config.yaml": "version: v1\nmig-configs:\n  two-halves:\n  - devices: all\n    mig-enabled: true\n    mig-devices:\n      3g.20gb: 2\n  mixed:\n  - devices: [0]\n    mig-enabled: true\n    mig-devices: {1g.5gb: 2, 2g.10gb: 1}\n"}});
        let MigConfigs::Named(c) = MigConfigs::of(Some("custom"), Some(&cm)) else {
            panic!("named");
        };
        assert_eq!(c["two-halves"], Layout::Uniform("3g.20gb".into(), 2));
        assert_eq!(c["mixed"], Layout::Other);
    }
}
