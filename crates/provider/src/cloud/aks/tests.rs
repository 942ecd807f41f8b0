//! Unit tests of the AKS mapping and configuration; the client itself is tested against the
//! sandbox in tests/clients/cloud_aks.rs.

use std::collections::BTreeMap;

use super::mapping::{DEFAULTS_TAG, SPOT_KEY, to_pool, update_body};
use super::*;
use crate::cloud::pool::PoolTaint;

fn loc() -> Location {
    Location::Aks {
        subscription_id: "s".into(),
        resource_group: "rg".into(),
        cluster: "c".into(),
    }
}

#[test]
fn cloud_defaults_read_back_as_unset_only_when_left_to_aks() {
    let mut doc = serde_json::json!({"properties": {"vmSize": "Standard_D2s_v3", "count": 1,
        "osDiskSizeGB": 128, "osSKU": "Ubuntu", "provisioningState": "Succeeded",
        "tags": {DEFAULTS_TAG: "osDiskSizeGB,osSKU"}}});
    let p = to_pool(&loc(), "np", &doc).unwrap();
    assert_eq!(p.spec.disk_size_gb, None);
    assert_eq!(p.spec.aks().os_sku, None);
    // Created with explicit values that happen to equal AKS's defaults.
    doc["properties"]["tags"][DEFAULTS_TAG] = "".into();
    let p = to_pool(&loc(), "np", &doc).unwrap();
    assert_eq!(p.spec.disk_size_gb, Some(128));
    assert_eq!(p.spec.aks().os_sku.as_deref(), Some("Ubuntu"));
    // No tag (made elsewhere): AKS's defaults count as not set, anything else as set.
    doc["properties"].as_object_mut().unwrap().remove("tags");
    doc["properties"]["osSKU"] = "AzureLinux".into();
    let p = to_pool(&loc(), "np", &doc).unwrap();
    assert_eq!(p.spec.disk_size_gb, None);
    assert_eq!(p.spec.aks().os_sku.as_deref(), Some("AzureLinux"));
    assert!(p.id.ends_with("/managedClusters/c/agentPools/np"));
}

#[test]
fn spot_label_and_taint_added_by_aks_are_not_the_users() {
    let doc = serde_json::json!({"properties": {"vmSize": "Standard_D2s_v3", "count": 1,
        "scaleSetPriority": "Spot",
        "nodeLabels": {SPOT_KEY: "spot", "team": "ml"},
        "nodeTaints": ["kubernetes.azure.com/scalesetpriority=spot:NoSchedule", "a=b:NoExecute", "k:NoSchedule"]}});
    let p = to_pool(&loc(), "np", &doc).unwrap();
    assert!(p.spec.spot);
    assert_eq!(
        p.spec.labels,
        BTreeMap::from([("team".to_string(), "ml".to_string())])
    );
    assert_eq!(
        p.spec.taints,
        vec![
            PoolTaint {
                key: "a".into(),
                value: "b".into(),
                effect: "NoExecute".into()
            },
            PoolTaint {
                key: "k".into(),
                value: "".into(),
                effect: "NoSchedule".into()
            },
        ]
    );
    // An update keeps what AKS added.
    let mut spec = p.spec.clone();
    spec.labels.insert("x".into(), "y".into());
    let body = update_body(&doc, &spec);
    assert_eq!(body["properties"]["nodeLabels"][SPOT_KEY], "spot");
    assert_eq!(body["properties"]["nodeLabels"]["x"], "y");
    let taints = body["properties"]["nodeTaints"].as_array().unwrap();
    assert_eq!(taints.len(), 3);
}

#[test]
fn os_sku_moves_in_place_between_ubuntu_and_azure_linux_only() {
    for (old, new) in [
        (None, Some("AzureLinux")),
        (Some("Ubuntu"), Some("AzureLinux3")),
        (Some("AzureLinux"), Some("Ubuntu2404")),
        (Some("Ubuntu2204"), Some("Ubuntu2404")),
        (Some("AzureLinux3"), None),
    ] {
        assert!(os_sku_changes_in_place(old, new), "{old:?} -> {new:?}");
    }
    for (old, new) in [
        (Some("CBLMariner"), Some("AzureLinux")),
        (Some("Ubuntu"), Some("Windows2022")),
    ] {
        assert!(!os_sku_changes_in_place(old, new), "{old:?} -> {new:?}");
    }
}

#[test]
fn an_os_sku_update_sends_the_sku_and_stops_calling_it_aks_s_default() {
    let doc = serde_json::json!({"properties": {"vmSize": "Standard_D2s_v3", "count": 1,
        "osDiskSizeGB": 128, "osSKU": "Ubuntu", "provisioningState": "Succeeded",
        "tags": {DEFAULTS_TAG: "osDiskSizeGB,osSKU"}}});
    let mut spec = to_pool(&loc(), "np", &doc).unwrap().spec;
    spec.aks_mut().os_sku = Some("AzureLinux".into());
    let body = update_body(&doc, &spec);
    assert_eq!(body["properties"]["osSKU"], "AzureLinux");
    assert_eq!(body["properties"]["tags"][DEFAULTS_TAG], "osDiskSizeGB");
    // Read back after the update, the SKU is the user's.
    let mut after = doc.clone();
    after["properties"] = body["properties"].clone();
    after["properties"]["osDiskSizeGB"] = 128.into();
    let p = to_pool(&loc(), "np", &after).unwrap();
    assert_eq!(p.spec.aks().os_sku.as_deref(), Some("AzureLinux"));
    assert_eq!(p.spec.disk_size_gb, None);
}

#[test]
fn config_debug_hides_secrets() {
    let cfg = AksConfig {
        client_secret: Some("hunter2-secret".into()),
        oidc_token: Some("eyJ-token".into()),
        ..Default::default()
    };
    let s = format!("{cfg:?}");
    assert!(!s.contains("hunter2") && !s.contains("eyJ"), "{s}");
}
