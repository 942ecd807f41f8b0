//! GKE as a provisioning target: the provider's `google` block, the `gke` blocks of
//! `fracgpu_nodepool` and of the pool queries, how a GKE cluster is named (project, location,
//! cluster) in identities and resource names, and how the client is built.

use std::sync::Arc;

use async_trait::async_trait;
use gpu::Cloud;
use tfplugin::object::{FromValue, Known};
use tfplugin::schema::{Attribute, Block};
use tfplugin::{Type, Value};

use super::config::GkeConfig;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{Location, NodePools};
use crate::cloud::target::{Coordinate, Scope, Target, TargetSettings, env};

/// The project of the sandbox's GKE clusters, the default scope when the provider runs against a
/// sandbox and names none.
pub const SANDBOX_PROJECT: &str = "sandbox-project";

/// The GKE descriptor.
pub struct Gke;

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
        Ok(Arc::new(super::GkeClient::new(cfg).await?))
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
        Block::new("Google Cloud (GKE). Credentials default to Application Default Credentials (`GOOGLE_APPLICATION_CREDENTIALS`, gcloud's ADC file, the metadata server).")
            .attr(Attribute::string("project").optional().describe("Default project of `gke` blocks (`GOOGLE_PROJECT`, `GOOGLE_CLOUD_PROJECT`)."))
            .attr(Attribute::string("credentials").optional().sensitive().describe("A service account key: the JSON itself or a path to it."))
            .attr(Attribute::string("access_token").optional().sensitive().describe("An OAuth2 access token to use instead."))
            .attr(Attribute::string("endpoint").optional().describe("GKE API endpoint. Default `https://container.googleapis.com`."))
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
        super::pool_id(location, name).unwrap_or_default()
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
        Block::new("Google Kubernetes Engine: the cluster the pool joins, and the pool's zones. Changing the project, location or cluster replaces the pool.")
            .attr(Attribute::string("project").optional().computed().requires_replace().describe("Project of the cluster. Default: the provider's `google.project`, `GOOGLE_PROJECT` or `GOOGLE_CLOUD_PROJECT`."))
            .attr(Attribute::string("location").required().requires_replace().describe("Region or zone of the cluster, e.g. `us-central1`."))
            .attr(Attribute::string("cluster").required().requires_replace().describe("Name of the GKE cluster."))
            .attr(Attribute::new("node_locations", Type::list(Type::String)).optional().computed().describe("Zones of the pool's nodes (GKE's `locations`, gcloud's `--node-locations`), e.g. `[\"us-central1-a\", \"us-central1-b\"]`: zones of the cluster's region. Default: the cluster's zones (three for a regional cluster), which the plan reads from GKE once per cluster. GKE runs the same number of nodes in each zone, so `node_count` must be a multiple of their number; every zone must offer the pool's GPU. Changes in place (nodes are added and removed)."))
    }

    fn query_block(&self) -> Block {
        Block::new("A GKE cluster.")
            .attr(Attribute::string("project").optional().describe("Project of the cluster. Default: the provider's `google.project`, `GOOGLE_PROJECT` or `GOOGLE_CLOUD_PROJECT`."))
            .attr(Attribute::string("location").required().describe("Region or zone of the cluster, e.g. `us-central1`."))
            .attr(Attribute::string("cluster").required().describe("Name of the GKE cluster."))
    }
}
