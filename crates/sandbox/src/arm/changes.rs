//! Which properties of an existing pool AKS refuses to change in place (PropertyChangeNotAllowed),
//! compared between the pool as it is and as a PUT body reads (`validate.rs`).

use super::validate::effective_disk;
use super::world::PoolProps;

/// Whether AKS changes a pool's OS SKU in place. It migrates between the Ubuntu and Azure Linux
/// families by reimaging the nodes (`az aks nodepool update --os-sku`); any other change (to or from
/// CBLMariner or Windows) needs a new pool, which is where terraform-provider-azurerm's node pool
/// resource draws the line too (ForceNewIfChange on os_sku unless old and new both start with
/// Ubuntu or AzureLinux).
fn os_sku_migrates(old: &str, new: &str) -> bool {
    let family = |s: &str| s.starts_with("Ubuntu") || s.starts_with("AzureLinux");
    old == new || (family(old) && family(new))
}

/// Fields AKS refuses to change on an existing pool ("PropertyChangeNotAllowed"); azurerm replaces
/// the pool when one of them changes.
pub(super) fn immutable_changes(
    old: &PoolProps,
    new: &PoolProps,
) -> Option<(&'static str, String, String)> {
    if !os_sku_migrates(&old.os_sku, &new.os_sku) {
        return Some(("osSKU", old.os_sku.clone(), new.os_sku.clone()));
    }
    let checks: [(&'static str, String, String); 10] = [
        (
            "gpuProfile.driver",
            format!("{:?}", old.gpu_driver),
            format!("{:?}", new.gpu_driver),
        ),
        ("vmSize", old.vm_size.clone(), new.vm_size.clone()),
        ("osType", old.os_type.clone(), new.os_type.clone()),
        // 0 asks for the VM default, which GET reports as its size: sending that size back
        // (as `az aks nodepool update` does) is no change.
        (
            "osDiskSizeGB",
            effective_disk(old.os_disk_size_gb).to_string(),
            effective_disk(new.os_disk_size_gb).to_string(),
        ),
        (
            "scaleSetPriority",
            old.scale_set_priority.clone(),
            new.scale_set_priority.clone(),
        ),
        (
            "scaleSetEvictionPolicy",
            format!("{:?}", old.scale_set_eviction_policy),
            format!("{:?}", new.scale_set_eviction_policy),
        ),
        (
            "spotMaxPrice",
            format!("{:?}", old.spot_max_price),
            format!("{:?}", new.spot_max_price),
        ),
        (
            "gpuInstanceProfile",
            format!("{:?}", old.gpu_instance_profile),
            format!("{:?}", new.gpu_instance_profile),
        ),
        (
            "maxPods",
            old.max_pods.to_string(),
            new.max_pods.to_string(),
        ),
        (
            "availabilityZones",
            old.availability_zones.join(","),
            new.availability_zones.join(","),
        ),
    ];
    checks.into_iter().find(|(_, a, b)| a != b)
}
