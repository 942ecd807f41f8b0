//! The NVIDIA device plugin's config file (api/config/v1): what of it changes a node's
//! advertisement, parsed and refused as the plugin parses and refuses it, and the config a process
//! runs with once its config-manager linked one.

use serde_json::Value;

use super::config_manager::Reader;

/// A parsed device plugin config (only what changes the advertisement).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DpConfig {
    pub(crate) mig_strategy: Option<String>,
    /// `flags.plugin.sharedDevicesAllocationPolicy` as written (v0.20.0 and later read it).
    pub(crate) allocation_policy: Option<String>,
    pub(crate) sharing: Option<Sharing>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sharing {
    /// "time-slicing" or "mps", as GPU feature discovery labels it.
    pub(crate) strategy: &'static str,
    pub(crate) rename_by_default: bool,
    /// `failRequestsGreaterThanOne` as written; None when left out (what that means depends on
    /// the strategy and the plugin's release: the twin's `kubelet` module).
    pub(crate) fail_requests: Option<bool>,
    pub(crate) resources: Vec<(String, u64)>,
}

/// Parses one config of the ConfigMap, rejecting what the plugin rejects (the plugin then keeps running with
/// its previous config, so the node keeps its previous advertisement).
pub(crate) fn parse_config(yaml: &str) -> Result<DpConfig, String> {
    let v: Value = if yaml.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_saphyr::from_str(yaml).map_err(|e| format!("unable to parse config file: {e}"))?
    };
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v
    };
    let m = v
        .as_object()
        .ok_or("unable to parse config file: not a map")?;
    match m.get("version") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "v1" => {}
        Some(other) => return Err(format!("unknown version: {other}")),
    }
    let mig_strategy = match m.get("flags").and_then(|f| f.get("migStrategy")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if ["none", "single", "mixed"].contains(&s.as_str()) => {
            Some(s.clone())
        }
        Some(other) => return Err(format!("invalid migStrategy: {other}")),
    };
    // Read at start and checked there (NVIDIA/k8s-device-plugin v0.20.0 api/config/v1/flags.go,
    // cmd/nvidia-device-plugin/main.go `validateFlags`): another value stops the plugin. It then
    // only orders which replicas GetPreferredAllocation offers, which the twin, with no kubelet
    // allocating devices to pods, does not model.
    let mut allocation_policy = None;
    match m
        .get("flags")
        .and_then(|f| f.get("plugin"))
        .and_then(|p| p.get("sharedDevicesAllocationPolicy"))
    {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if ["", "distributed", "packed"].contains(&s.as_str()) => {
            allocation_policy = Some(s.clone()).filter(|s| !s.is_empty());
        }
        Some(other) => {
            return Err(format!(
                "unable to validate flags: invalid --shared-devices-allocation-policy option: {}",
                other
                    .as_str()
                    .map_or_else(|| other.to_string(), str::to_string)
            ));
        }
    }
    let sharing = match m.get("sharing") {
        None | Some(Value::Null) => None,
        Some(s) => {
            // Each section present must parse; with both, the plugin's active strategy is MPS.
            let ts = match s.get("timeSlicing") {
                None | Some(Value::Null) => None,
                Some(t) => Some(parse_sharing("time-slicing", t)?),
            };
            let mps = match s.get("mps") {
                None | Some(Value::Null) => None,
                Some(m) => Some(parse_sharing("mps", m)?),
            };
            mps.or(ts)
        }
    };
    Ok(DpConfig {
        mig_strategy,
        allocation_policy,
        sharing,
    })
}

fn parse_sharing(strategy: &'static str, v: &Value) -> Result<Sharing, String> {
    let rename_by_default = match v.get("renameByDefault") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(format!("renameByDefault must be a boolean, got {other}")),
    };
    let fail_requests = match v.get("failRequestsGreaterThanOne") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            return Err(format!(
                "failRequestsGreaterThanOne must be a boolean, got {other}"
            ));
        }
    };
    let list = v
        .get("resources")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or("no resources specified")?;
    let mut resources = Vec::new();
    for r in list {
        let raw = r
            .get("name")
            .and_then(Value::as_str)
            .ok_or("resource without a name")?;
        let name = if raw.starts_with("nvidia.com/") {
            raw.to_string()
        } else {
            format!("nvidia.com/{raw}")
        };
        let local = &name["nvidia.com/".len()..];
        let ok_chars = !local.is_empty()
            && local
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
            && local.as_bytes()[0].is_ascii_alphanumeric()
            && local.as_bytes()[local.len() - 1].is_ascii_alphanumeric();
        if name.len() > 63 || !ok_chars {
            return Err(format!("invalid resource name: {raw:?}"));
        }
        if local != "gpu" && !local.starts_with("mig-") {
            return Err(format!("unsupported resource: {raw:?}"));
        }
        if strategy == "mps" && local != "gpu" {
            return Err(format!(
                "MPS sharing is only supported for nvidia.com/gpu, not {raw:?}"
            ));
        }
        match r.get("devices") {
            None | Some(Value::Null) => {}
            Some(Value::String(d)) if d == "all" => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => {}
            Some(Value::Array(_)) => {}
            Some(other) => return Err(format!("unrecognized type for devices spec: {other}")),
        }
        let replicas = r
            .get("replicas")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("invalid replicas for {raw:?}"))?;
        if replicas < 2 {
            return Err(format!(
                "number of replicas must be >= 2 (got {replicas} for {raw:?})"
            ));
        }
        if resources.iter().any(|(n, _)| *n == name) {
            return Err(format!("duplicate resource {name:?}"));
        }
        resources.push((name, replicas));
    }
    Ok(Sharing {
        strategy,
        rename_by_default,
        fail_requests,
        resources,
    })
}

/// The config a process runs with, or why it runs none.
pub(super) fn running_config(r: &Reader) -> Result<DpConfig, String> {
    match (&r.error, &r.loaded) {
        (Some(e), _) => Err(e.clone()),
        (None, None) => Err("not started".into()),
        (None, Some(yaml)) => {
            let key = r.linked.as_deref().unwrap_or_default();
            parse_config(yaml).map_err(|e| format!("unable to load config {key:?}: {e}"))
        }
    }
}
