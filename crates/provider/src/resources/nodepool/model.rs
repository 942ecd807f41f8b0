//! The typed model of `fracgpu_nodepool` and the way from a configuration, plan or state to the
//! cloud-neutral pool spec the clients take ([`resolve`]); the way back, from a pool as the cloud
//! reports it to state, is in `state`. What the domain derives (resource name, slices, selector,
//! tolerations) is one model, [`Derived`], written alike into plans and states.

use std::collections::BTreeMap;

use crate::cloud::registry::{self, Located};
use crate::cloud::{self, EksPoolFields, GkePoolFields, Location, PoolGpu, PoolTaint, Scaling};
use crate::model::{Sharing, TaintArgs, TolerationOut, domain_diagnostic};
use crate::provider::Settings;
use gpu::{self, Cloud, Field};
use tfplugin::object::{Known, SingleBlock, ToValue};
use tfplugin::{AttrPath, Diagnostic, Diagnostics, Value};

use crate::cloud::eks::DEFAULT_EKS_AMI;

/// Domain fields whose attribute has another name here.
pub(super) const RENAME: &[(Field, &str)] = &[(Field::EksAmiType, "eks.0.ami_type")];

tfplugin::object! {
    /// The `aks` block.
    pub struct AksArgs {
        pub subscription_id: Option<String>,
        pub resource_group: String,
        pub cluster_name: String,
        /// Computed by AKS when not set, so unknown in a create plan.
        pub os_sku: Known<String>,
        /// Computed like os_sku.
        pub gpu_driver: Known<String>,
    }
}

tfplugin::object! {
    /// The `gke` block.
    pub struct GkeArgs {
        pub project: Option<String>,
        pub location: String,
        pub cluster: String,
        /// The cluster's zones by default, known once the plan has read them.
        pub node_locations: Known<Vec<String>>,
    }
}

tfplugin::object! {
    /// The `eks` block.
    pub struct EksArgs {
        pub region: Option<String>,
        pub cluster_name: String,
        pub node_role_arn: String,
        pub subnet_ids: Vec<String>,
        pub ami_type: Option<String>,
    }
}

tfplugin::object! {
    /// The `autoscaling` block.
    pub struct AutoscalingArgs {
        pub min_nodes: u32,
        pub max_nodes: u32,
    }
}

tfplugin::object! {
    /// The arguments: what a user writes, as a configuration, plan or state holds it. It reads
    /// only while everything the pool depends on is known; what the cloud fills in (`os_sku`,
    /// `disk_size_gb`) and what the plan defaults (`node_count`, `spot`) may still be unknown.
    pub struct Args {
        pub name: String,
        pub machine_type: String,
        pub gpu_model: Option<String>,
        pub gpu_count: Option<u32>,
        pub node_count: Known<u32>,
        pub spot: Known<bool>,
        pub disk_size_gb: Known<u32>,
        pub labels: Option<BTreeMap<String, String>>,
        pub taints: Option<Vec<TaintArgs>>,
        pub aks: SingleBlock<AksArgs>,
        pub gke: SingleBlock<GkeArgs>,
        pub eks: SingleBlock<EksArgs>,
        pub autoscaling: SingleBlock<AutoscalingArgs>,
    }
    flatten {
        pub sharing: Sharing,
    }
}

tfplugin::object! {
    /// The `gpu` attribute.
    pub struct GpuOut {
        pub model: String,
        pub count: u32,
        pub memory_mb: u32,
    }
}

tfplugin::object! {
    /// What the domain derives from the arguments: known at plan time, and again from what the
    /// cloud reports.
    pub struct Derived {
        pub gpu: GpuOut,
        pub device_plugin_config_name: Option<String>,
        pub device_plugin_config: Option<String>,
        pub resource_name: String,
        pub slices_per_node: u32,
        pub memory_per_slice_mb: u32,
        pub node_selector: BTreeMap<String, String>,
        pub tolerations: Vec<TolerationOut>,
    }
}

impl Derived {
    pub fn of(d: &gpu::Derived) -> Derived {
        let config = d.device_plugin_config.as_ref();
        Derived {
            gpu: GpuOut {
                model: d.gpu.id.to_string(),
                count: d.gpus_per_node,
                memory_mb: d.gpu.memory_mib,
            },
            device_plugin_config_name: config.map(|c| c.name.clone()),
            device_plugin_config: config.and_then(|c| c.config.render().ok()),
            resource_name: d.resource_name.clone(),
            slices_per_node: d.slices_per_node,
            memory_per_slice_mb: d.memory_per_slice_mib,
            node_selector: d.node_selector.clone(),
            tolerations: TolerationOut::all(&d.tolerations),
        }
    }
}

tfplugin::object! {
    /// Every label the nodes carry: the user's and the ones sharing needs.
    pub struct NodeLabels {
        pub node_labels: BTreeMap<String, String>,
    }
}

tfplugin::object! {
    /// The pool the cloud answers for.
    pub struct Identity {
        pub id: String,
        pub status: String,
    }
}

tfplugin::object! {
    /// A pool as the cloud reports it, with what only the configuration knows (the spelling
    /// the user chose, GPU overrides, timeouts) carried over.
    pub struct Reported {
        pub timeouts: Value,
    }
    flatten {
        pub identity: Identity,
        pub labels: NodeLabels,
        pub args: Args,
    }
}

/// Everything a pool value means: where it lives, what the domain derives from it, and the spec
/// to hand to the cloud.
pub struct Resolved {
    pub cloud: Cloud,
    pub derived: gpu::Derived,
    pub spec: cloud::PoolSpec,
}

pub(super) fn cloud_of(loc: &Location) -> Cloud {
    loc.cloud()
}

impl Args {
    /// The cloud and location named by the target block (`aks`, `gke`, `eks`), with provider
    /// defaults applied; a missing subscription, project or region is a diagnostic on the
    /// attribute.
    pub fn location(&self, settings: &Settings, diags: &mut Diagnostics) -> Option<Location> {
        match registry::locate(&self.to_value(), &settings.cloud) {
            Located::At(loc) => Some(loc),
            Located::MissingScope(t) => {
                let (block, scope) = (t.cloud().as_str(), t.scope());
                diags.push(
                    Diagnostic::error(
                        format!("Missing {}", scope.what),
                        format!(
                            "Set {block}.{}, the provider's {}, or {}.",
                            scope.attr, scope.provider_attr, scope.env
                        ),
                    )
                    .at(AttrPath::attr(block).with_index(0).with_attr(scope.attr)),
                );
                None
            }
            Located::Unknown => None,
        }
    }

    /// The GKE pool's zones, when known.
    pub fn gke_zones(&self) -> Option<&[String]> {
        self.gke.as_ref()?.node_locations.as_deref()
    }

    /// The pool's size, a total on every cloud. Without `node_count`, one node, or on GKE one in
    /// each of the pool's zones. A fixed GKE total must split evenly over the zones.
    fn scaling(&self, diags: &mut Diagnostics) -> Option<Scaling> {
        let Some(a) = &*self.autoscaling else {
            let zones = self.gke_zones().filter(|z| !z.is_empty());
            let nodes = self
                .node_count
                .or(zones.map(|z| z.len() as u32))
                .unwrap_or(1);
            if let Some(zones) = zones
                && !nodes.is_multiple_of(zones.len() as u32)
            {
                diags.push(uneven_split(nodes, zones));
                return None;
            }
            return Some(Scaling::Fixed { nodes });
        };
        if a.min_nodes > a.max_nodes {
            diags.push(
                Diagnostic::error(
                    "Invalid autoscaling bounds",
                    format!("autoscaling.min_nodes ({}) is above max_nodes ({}); make min_nodes at most max_nodes.", a.min_nodes, a.max_nodes),
                )
                .at(AttrPath::attr("autoscaling").with_index(0).with_attr("min_nodes")),
            );
            return None;
        }
        Some(Scaling::Auto {
            min: a.min_nodes,
            max: a.max_nodes,
        })
    }
}

/// GKE runs the same number of nodes in every zone of a pool (its counts are per zone), so a fixed
/// total the pool's zones cannot split is refused, with the counts and zone lists that would do.
fn uneven_split(nodes: u32, zones: &[String]) -> Diagnostic {
    let z = zones.len() as u32;
    let below = nodes / z * z;
    let counts = if below == 0 {
        format!("{}", z)
    } else {
        format!("{below} or {}", below + z)
    };
    let fits: Vec<u32> = (1..z).filter(|d| nodes.is_multiple_of(*d)).collect();
    let lists = if fits.is_empty() {
        String::new()
    } else {
        let example = zones[..fits[fits.len() - 1] as usize]
            .iter()
            .map(|z| format!("{z:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sizes = fits
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" or ");
        format!(", or set gke.node_locations to {sizes} of them (e.g. [{example}])")
    };
    Diagnostic::error(
        "Node count does not split over the zones",
        format!(
            "node_count = {nodes} is the pool's total, and GKE runs the same number of nodes in each of its zones; it cannot split {nodes} over the pool's {z} zones ({}). Use a multiple of {z} ({counts}){lists}.",
            zones.join(", ")
        ),
    )
    .at(AttrPath::attr("node_count"))
}

/// A pool's `node_locations` must be zones of the cluster's region (GKE: "Nodes must be in the
/// region of their regional cluster or in the same region as their cluster's zone for zonal
/// clusters", the google provider's node_locations), and at least one.
fn check_node_locations(location: &str, zones: &[String], diags: &mut Diagnostics) -> bool {
    let path = AttrPath::attr("gke")
        .with_index(0)
        .with_attr("node_locations");
    let region = region_of(location);
    let bad: Vec<&String> = zones
        .iter()
        .filter(|z| !is_zone(z) || region_of(z) != region)
        .collect();
    if zones.is_empty() {
        diags.push(
            Diagnostic::error(
                "Invalid node locations",
                "gke.node_locations is empty; name at least one zone, or leave it unset for the cluster's zones.",
            )
            .at(path),
        );
        return false;
    }
    if !bad.is_empty() {
        diags.push(
            Diagnostic::error(
                "Invalid node locations",
                format!(
                    "{} {} not a zone of the cluster's region {region}. A pool's nodes must be in zones of its cluster's region, e.g. \"{region}-a\".",
                    bad.iter().map(|z| format!("{z:?}")).collect::<Vec<_>>().join(", "),
                    if bad.len() == 1 { "is" } else { "are" }
                ),
            )
            .at(path),
        );
        return false;
    }
    true
}

/// Whether a GCP location is a zone (`us-central1-a`): its region's name and a one-letter suffix.
fn is_zone(location: &str) -> bool {
    location.rsplit_once('-').is_some_and(|(region, z)| {
        region.contains('-') && z.len() == 1 && z.bytes().all(|b| b.is_ascii_lowercase())
    })
}

/// The region of a GCP zone or region.
fn region_of(location: &str) -> &str {
    if is_zone(location) {
        location.rsplit_once('-').map_or(location, |(r, _)| r)
    } else {
        location
    }
}

/// Resolves the arguments against the catalog and the sharing rules. Problems become
/// diagnostics on the attribute the user wrote; `None` means the pool cannot be resolved.
pub fn resolve(args: &Args, settings: &Settings, diags: &mut Diagnostics) -> Option<Resolved> {
    let loc = args.location(settings, diags)?;
    let cloud = cloud_of(&loc);
    let hardware = match gpu::resolve_hardware(
        cloud,
        &args.machine_type,
        args.gpu_model.as_deref(),
        args.gpu_count,
    ) {
        Ok(h) => h,
        Err(errors) => {
            for e in &errors {
                diags.push(domain_diagnostic(e, RENAME));
            }
            return None;
        }
    };
    let sharing = args.sharing.mode();
    let labels = args.labels.clone().unwrap_or_default();
    let os_sku = args.aks.as_ref().and_then(|b| b.os_sku.0.clone());
    let os_sku_path = AttrPath::attr("aks").with_index(0).with_attr("os_sku");
    let sku_error = os_sku
        .as_ref()
        .and_then(|sku| gpu::check_aks_os_sku(&sharing, sku).err());
    let ami_type = args.eks.as_ref().map(|b| {
        b.ami_type
            .clone()
            .unwrap_or_else(|| DEFAULT_EKS_AMI.to_string())
    });
    let ami_error = ami_type
        .as_ref()
        .and_then(|ami| gpu::check_eks_ami_type(&sharing, ami).err());
    let machine_type = hardware.machine_type.clone();
    let derived = match gpu::validate(&gpu::PoolSpec {
        cloud,
        pool_name: args.name.clone(),
        hardware,
        sharing,
        taints: crate::model::taints(&args.taints),
        labels: labels.clone(),
    }) {
        Ok(d) => d,
        Err(errors) => {
            for e in sku_error.iter().chain(&ami_error).chain(&errors) {
                let mut d = domain_diagnostic(e, RENAME);
                if e.field == Field::OsSku {
                    d.path = Some(os_sku_path.clone());
                }
                diags.push(d);
            }
            return None;
        }
    };
    if let Some(e) = sku_error {
        diags.push(domain_diagnostic(&e, RENAME).at(os_sku_path));
        return None;
    }
    if let Some(e) = ami_error {
        diags.push(domain_diagnostic(&e, RENAME));
        return None;
    }
    if let (Some(b), Some(zones)) = (&*args.gke, args.gke_zones())
        && !check_node_locations(&b.location, zones, diags)
    {
        return None;
    }
    let scaling = args.scaling(diags)?;
    let mut node_labels = labels;
    node_labels.extend(derived.node_labels.clone());
    let spec = cloud::PoolSpec {
        location: loc,
        name: args.name.clone(),
        machine_type,
        scaling,
        spot: args.spot.unwrap_or(false),
        disk_size_gb: args.disk_size_gb.0,
        labels: node_labels,
        taints: derived
            .taints
            .iter()
            .map(|t| PoolTaint {
                key: t.key.to_string(),
                value: t.value.to_string(),
                effect: t.effect.as_str().to_string(),
            })
            .collect(),
        gpu: PoolGpu {
            aks_gpu_driver: args.aks.as_ref().and_then(|b| b.gpu_driver.0.clone()),
            ..pool_gpu(&derived)
        },
        os_sku,
        gke: args.gke.as_ref().map(|b| GkePoolFields {
            node_locations: b.node_locations.0.clone().unwrap_or_default(),
        }),
        eks: args.eks.as_ref().map(|b| EksPoolFields {
            node_role_arn: b.node_role_arn.clone(),
            subnet_ids: b.subnet_ids.clone(),
            ami_type: ami_type.clone().unwrap_or_default(),
        }),
    };
    Some(Resolved {
        cloud,
        derived,
        spec,
    })
}

/// The GPU part of the spec, in each cloud API's own terms.
fn pool_gpu(derived: &gpu::Derived) -> PoolGpu {
    let gke = derived.gke_accelerator.as_ref();
    PoolGpu {
        count: derived.gpus_per_node,
        gke_accelerator_type: gke.map(|a| a.accelerator_type.to_string()),
        gke_partition_size: gke.and_then(|a| a.gpu_partition_size).map(str::to_string),
        gke_sharing: gke.and_then(|a| a.sharing).map(|s| match s.strategy {
            gpu::GkeSharingStrategy::TimeSharing => cloud::GkeSharing::TimeSharing {
                max_clients: s.max_clients,
            },
            gpu::GkeSharingStrategy::Mps => cloud::GkeSharing::Mps {
                max_clients: s.max_clients,
            },
        }),
        aks_gpu_instance_profile: derived
            .aks_gpu_instance_profile
            .map(|p| p.as_str().to_string()),
        aks_gpu_driver: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::schema;
    use super::*;

    #[test]
    fn an_uneven_total_says_which_counts_and_zones_would_do() {
        let zones = ["us-central1-a", "us-central1-b", "us-central1-c"].map(String::from);
        let d = uneven_split(4, &zones);
        assert_eq!(d.path, Some(AttrPath::attr("node_count")));
        assert_eq!(
            d.detail,
            "node_count = 4 is the pool's total, and GKE runs the same number of nodes in each of its zones; it cannot split 4 over the pool's 3 zones (us-central1-a, us-central1-b, us-central1-c). Use a multiple of 3 (3 or 6), or set gke.node_locations to 1 or 2 of them (e.g. [\"us-central1-a\", \"us-central1-b\"])."
        );
        let d = uneven_split(1, &zones);
        assert!(
            d.detail.contains("Use a multiple of 3 (3), or set gke.node_locations to 1 of them (e.g. [\"us-central1-a\"])."),
            "{}",
            d.detail
        );
        assert!(
            is_zone("europe-west4-c") && !is_zone("europe-west4") && !is_zone("us-central1-ab")
        );
        assert_eq!(region_of("europe-west4-c"), "europe-west4");
        let mut diags = Diagnostics::new();
        assert!(!check_node_locations(
            "us-central1",
            &["us-central1-a".into(), "europe-west4-b".into()],
            &mut diags
        ));
        assert!(
            diags.0[0]
                .detail
                .contains("\"europe-west4-b\" is not a zone of the cluster's region us-central1"),
            "{:?}",
            diags.0
        );
        assert!(check_node_locations(
            "us-central1-a",
            &["us-central1-a".into(), "us-central1-f".into()],
            &mut Diagnostics::new()
        ));
    }

    #[test]
    fn the_models_name_what_the_schema_declares() {
        let mut names: Vec<&str> = Reported::attribute_names();
        names.extend(Derived::attribute_names());
        names.sort_unstable();
        assert_eq!(names, schema().block.names());
    }
}
