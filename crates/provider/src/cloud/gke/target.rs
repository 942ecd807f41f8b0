//! GKE as a provisioning target: the provider's `google` block, the `gke` blocks of
//! `fracgpu_nodepool` and of the pool queries, how a GKE cluster is named (project, location,
//! cluster) in identities and resource names, and how the client is built.

use std::sync::Arc;

use async_trait::async_trait;
use gpu::{Cloud, GpuModel, Observed};
use tfplugin::object::{FromValue, Known, ToValue};
use tfplugin::schema::{Attribute, Block};
use tfplugin::{AttrPath, DecodeError, Diagnostic, Type, Value};

use super::config::GkeConfig;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{
    GkePoolFields, GkeSharing, Location, NodePools, Pool, PoolSpec, TargetFields,
};
use crate::cloud::target::{Coordinate, Scope, Target, TargetSettings, block_path, env};

/// The project of the sandbox's GKE clusters, the default scope when the provider runs against a
/// sandbox and names none.
pub const SANDBOX_PROJECT: &str = "sandbox-project";

/// The GKE descriptor.
pub struct Gke;

tfplugin::object! {
    /// The `gke` block of `fracgpu_nodepool`.
    struct PoolArgs {
        project: Option<String>,
        location: String,
        cluster: String,
        /// The cluster's zones by default, known once the plan has read them.
        node_locations: Known<Vec<String>>,
    }
}

tfplugin::object! {
    /// The `google` block.
    struct GoogleArgs {
        project: Known<String>,
        credentials: Known<String>,
        access_token: Known<String>,
        endpoint: Known<String>,
    }
}

#[async_trait]
impl TargetSettings for GkeConfig {
    fn default_scope(&self) -> Option<String> {
        self.project.clone()
    }

    async fn connect(&self, sandbox: Option<String>) -> Result<Arc<dyn NodePools>, CloudError> {
        let cfg = GkeConfig {
            sandbox,
            ..self.clone()
        };
        Ok(Arc::new(super::client::GkeClient::new(cfg).await?))
    }
}

static SCOPE: Scope = Scope {
    attr: "project",
    what: "Google Cloud project",
    noun: "the cluster's project",
    provider_attr: "google.project",
    env: "GOOGLE_PROJECT",
    identity_description: "GKE: the cluster's project. Default: the provider's.",
};

static COORDINATES: [Coordinate; 1] = [Coordinate {
    attr: "location",
    noun: "the cluster's region or zone",
    identity_description: "GKE: the cluster's region or zone (required on GKE).",
}];

impl Target for Gke {
    fn cloud(&self) -> Cloud {
        Cloud::Gke
    }

    fn title(&self) -> &'static str {
        "GKE"
    }

    fn provider_block_name(&self) -> &'static str {
        "google"
    }

    fn provider_block(&self) -> Block {
        Block::new(
            "Google Cloud (GKE). Credentials default to Application Default Credentials \
            (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's ADC file, the metadata server).",
        )
        .attr(Attribute::string("project").optional().describe(
            "Default project of `gke` blocks (`GOOGLE_PROJECT`, `GOOGLE_CLOUD_PROJECT`).",
        ))
        .attr(
            Attribute::string("credentials")
                .optional()
                .sensitive()
                .describe("A service account key: the JSON itself or a path to it."),
        )
        .attr(
            Attribute::string("access_token")
                .optional()
                .sensitive()
                .describe("An OAuth2 access token to use instead."),
        )
        .attr(
            Attribute::string("endpoint")
                .optional()
                .describe("GKE API endpoint. Default `https://container.googleapis.com`."),
        )
    }

    fn settings(&self, block: &Value, sandbox: Option<&str>) -> Arc<dyn TargetSettings> {
        let g = GoogleArgs::from_value(block).unwrap_or_default();
        Arc::new(GkeConfig {
            project: g
                .project
                .0
                .or_else(|| env("GOOGLE_PROJECT"))
                .or_else(|| env("GOOGLE_CLOUD_PROJECT"))
                .or_else(|| sandbox.map(|_| SANDBOX_PROJECT.to_string())),
            credentials: g.credentials.0,
            access_token: g.access_token.0,
            endpoint: g.endpoint.0,
            sandbox: None,
        })
    }

    fn settings_with_scope(&self, scope: &str) -> Arc<dyn TargetSettings> {
        Arc::new(GkeConfig {
            project: Some(scope.to_string()),
            ..GkeConfig::default()
        })
    }

    fn scope(&self) -> &'static Scope {
        &SCOPE
    }

    fn coordinates(&self) -> &'static [Coordinate] {
        &COORDINATES
    }

    fn cluster_attr(&self) -> &'static str {
        "cluster"
    }

    fn locate(&self, scope: String, coordinates: Vec<String>, cluster: String) -> Location {
        Location::Gke {
            project: scope,
            location: coordinates.into_iter().next().unwrap_or_default(),
            cluster,
        }
    }

    fn parts(&self, location: &Location) -> Option<(String, Vec<String>, String)> {
        match location {
            Location::Gke {
                project,
                location,
                cluster,
            } => Some((project.clone(), vec![location.clone()], cluster.clone())),
            _ => None,
        }
    }

    fn pool_id(&self, location: &Location, name: &str) -> String {
        super::mapping::pool_id(location, name).unwrap_or_default()
    }

    fn describe(&self, location: &Location) -> String {
        let Some((project, coordinates, cluster)) = self.parts(location) else {
            return String::new();
        };
        format!(
            "GKE cluster projects/{project}/locations/{}/clusters/{cluster}",
            coordinates[0]
        )
    }

    fn parse_import_id(
        &self,
        id: &str,
        _default_scope: Option<String>,
    ) -> Option<(Location, String)> {
        let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
        let name = parts.len() == 8
            && parts[0] == "projects"
            && parts[2] == "locations"
            && parts[4] == "clusters"
            && parts[6] == "nodePools";
        name.then(|| {
            let loc = Location::Gke {
                project: parts[1].into(),
                location: parts[3].into(),
                cluster: parts[5].into(),
            };
            (loc, parts[7].into())
        })
    }

    fn import_id_form(&self) -> &'static str {
        "GKE `projects/P/locations/L/clusters/C/nodePools/N`"
    }

    fn pool_block(&self) -> Block {
        Block::new("Google Kubernetes Engine: the cluster the pool joins, and the pool's zones. \
            Changing the project, location or cluster replaces the pool.")
            .attr(Attribute::string("project").optional().computed().requires_replace().describe(
                "Project of the cluster. Default: the provider's `google.project`, \
                `GOOGLE_PROJECT` or `GOOGLE_CLOUD_PROJECT`."))
            .attr(Attribute::string("location").required().requires_replace().describe(
                "Region or zone of the cluster, e.g. `us-central1`."))
            .attr(Attribute::string("cluster").required().requires_replace().describe("Name of the GKE cluster."))
            .attr(Attribute::new("node_locations", Type::list(Type::String)).optional().computed().describe(
                "Zones of the pool's nodes (GKE's `locations`, gcloud's `--node-locations`), e.g. \
                `[\"us-central1-a\", \"us-central1-b\"]`: zones of the cluster's region. Default: \
                the cluster's zones (three for a regional cluster), which the plan reads from GKE \
                once per cluster. GKE runs the same number of nodes in each zone, so `node_count` \
                must be a multiple of their number; every zone must offer the pool's GPU. Changes \
                in place (nodes are added and removed)."))
    }

    fn query_block(&self) -> Block {
        Block::new("A GKE cluster.")
            .attr(Attribute::string("project").optional().describe(
                "Project of the cluster. Default: the provider's `google.project`, \
                `GOOGLE_PROJECT` or `GOOGLE_CLOUD_PROJECT`.",
            ))
            .attr(
                Attribute::string("location")
                    .required()
                    .describe("Region or zone of the cluster, e.g. `us-central1`."),
            )
            .attr(
                Attribute::string("cluster")
                    .required()
                    .describe("Name of the GKE cluster."),
            )
    }

    fn decode_block(&self, block: &Value) -> Result<(), DecodeError> {
        PoolArgs::from_value(block).map(|_| ())
    }

    fn block_shape(&self) -> tfplugin::shape::Shape {
        <PoolArgs as tfplugin::shape::Shaped>::shape()
    }

    fn check_block(&self, block: &Value) -> Vec<Diagnostic> {
        let Ok(b) = PoolArgs::from_value(block) else {
            return Vec::new();
        };
        match &b.node_locations.0 {
            Some(zones) => check_node_locations(&b.location, zones)
                .into_iter()
                .collect(),
            None => Vec::new(),
        }
    }

    fn zones_attr(&self) -> Option<&'static str> {
        Some("node_locations")
    }

    fn uneven_split(&self, nodes: u32, zones: &[String]) -> Diagnostic {
        uneven_split(nodes, zones)
    }

    fn fields(&self, block: &Value, derived: &gpu::Derived) -> TargetFields {
        let b = PoolArgs::from_value(block).unwrap_or_default();
        let accelerator = derived.gke_accelerator.as_ref();
        TargetFields::Gke(GkePoolFields {
            accelerator_type: accelerator.map(|a| a.accelerator_type.to_string()),
            partition_size: accelerator
                .and_then(|a| a.gpu_partition_size)
                .map(str::to_string),
            sharing: accelerator
                .and_then(|a| a.sharing)
                .map(|s| match s.strategy {
                    gpu::GkeSharingStrategy::TimeSharing => GkeSharing::TimeSharing {
                        max_clients: s.max_clients,
                    },
                    gpu::GkeSharingStrategy::Mps => GkeSharing::Mps {
                        max_clients: s.max_clients,
                    },
                }),
            node_locations: b.node_locations.0.unwrap_or_default(),
        })
    }

    fn block_of(&self, pool: &Pool) -> Value {
        let spec = &pool.spec;
        let (project, coordinates, cluster) = self.parts(&spec.location).unwrap_or_default();
        PoolArgs {
            project: Some(project),
            location: coordinates.into_iter().next().unwrap_or_default(),
            cluster,
            node_locations: Known(Some(spec.gke().node_locations.clone())),
        }
        .to_value()
    }

    fn observed<'a>(&self, spec: &'a PoolSpec, gpu: &'static GpuModel) -> Observed<'a> {
        Observed {
            cloud: Cloud::Gke,
            gpu,
            labels: &spec.labels,
            aks_gpu_instance_profile: None,
            gke_partition_size: spec.gke().partition_size.as_deref(),
            gke_sharing: spec.gke().sharing.map(|s| match s {
                GkeSharing::TimeSharing { max_clients } => gpu::GkeSharing {
                    strategy: gpu::GkeSharingStrategy::TimeSharing,
                    max_clients,
                },
                GkeSharing::Mps { max_clients } => gpu::GkeSharing {
                    strategy: gpu::GkeSharingStrategy::Mps,
                    max_clients,
                },
            }),
            bottlerocket_settings: None,
        }
    }

    /// GKE machine types whose GPUs are attached separately (N1 with T4s, V100s, P4s) name no
    /// GPU of their own: such a pool reads through the accelerator GKE reports.
    fn reported_gpu_model(&self, spec: &PoolSpec) -> Option<String> {
        spec.gke().accelerator_type.clone()
    }

    fn own_gpu_taint(&self) -> Option<gpu::Taint> {
        Some(gpu::GKE_GPU_TAINT)
    }

    /// GKE changes no GPU setting of a pool in place: accelerator, partitions and sharing are
    /// all fixed at creation.
    fn gpu_change_replaces(&self, old: &PoolSpec, new: &PoolSpec) -> bool {
        super::mapping::gpu_settings(old) != super::mapping::gpu_settings(new)
    }
}

/// GKE runs the same number of nodes in every zone of a pool (its counts are per zone), so a fixed
/// total the pool's zones cannot split is refused, with the counts and zone lists that would do.
pub(super) fn uneven_split(nodes: u32, zones: &[String]) -> Diagnostic {
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
            "node_count = {nodes} is the pool's total, and GKE runs the same number of nodes in \
                each of its zones; it cannot split {nodes} over the pool's {z} zones ({}). Use a \
                multiple of {z} ({counts}){lists}.",
            zones.join(", ")
        ),
    )
    .at(AttrPath::attr("node_count"))
}

/// A pool's `node_locations` must be zones of the cluster's region (GKE: "Nodes must be in the
/// region of their regional cluster or in the same region as their cluster's zone for zonal
/// clusters", the google provider's node_locations), and at least one.
pub(super) fn check_node_locations(location: &str, zones: &[String]) -> Option<Diagnostic> {
    let path = block_path(&Gke, "node_locations");
    let region = region_of(location);
    let bad: Vec<&String> = zones
        .iter()
        .filter(|z| !is_zone(z) || region_of(z) != region)
        .collect();
    if zones.is_empty() {
        return Some(
            Diagnostic::error(
                "Invalid node locations",
                "gke.node_locations is empty; name at least one zone, or leave it unset for the \
                    cluster's zones.",
            )
            .at(path),
        );
    }
    if !bad.is_empty() {
        return Some(
            Diagnostic::error(
                "Invalid node locations",
                format!(
                    "{} {} not a zone of the cluster's region {region}. A pool's nodes must be in \
                        zones of its cluster's region, e.g. \"{region}-a\".",
                    bad.iter()
                        .map(|z| format!("{z:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if bad.len() == 1 { "is" } else { "are" }
                ),
            )
            .at(path),
        );
    }
    None
}

/// Whether a GCP location is a zone (`us-central1-a`): its region's name and a one-letter suffix.
pub(super) fn is_zone(location: &str) -> bool {
    location.rsplit_once('-').is_some_and(|(region, z)| {
        region.contains('-') && z.len() == 1 && z.bytes().all(|b| b.is_ascii_lowercase())
    })
}

/// The region of a GCP zone or region.
pub(super) fn region_of(location: &str) -> &str {
    if is_zone(location) {
        location.rsplit_once('-').map_or(location, |(r, _)| r)
    } else {
        location
    }
}

#[cfg(test)]
mod tests {
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
        let refused = check_node_locations(
            "us-central1",
            &["us-central1-a".into(), "europe-west4-b".into()],
        )
        .expect("refused");
        assert!(
            refused
                .detail
                .contains("\"europe-west4-b\" is not a zone of the cluster's region us-central1"),
            "{refused:?}"
        );
        assert!(
            check_node_locations(
                "us-central1-a",
                &["us-central1-a".into(), "us-central1-f".into()]
            )
            .is_none()
        );
    }
}
