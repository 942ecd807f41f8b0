//! AKS as a provisioning target: the provider's `azure` block, the `aks` blocks of
//! `fracgpu_nodepool` and of the pool queries, how an AKS cluster is named (subscription,
//! resource group, cluster) in identities and ARM IDs, and how the client is built.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use gpu::{Cloud, GpuModel, Observed, SharingMode};
use tfplugin::object::{FromValue, Known, ToValue};
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::OneOf;
use tfplugin::{AttrPath, DecodeError, Diagnostic, Value};

use super::config::{AksConfig, AzureSettings};
use super::mapping::{AKS_DEFAULT_OS_SKU, os_sku_changes_in_place};
use crate::cloud::error::CloudError;
use crate::cloud::pool::{
    AksPoolFields, Location, NodePools, NodeTemplate, Pool, PoolSpec, TargetFields,
};
use crate::cloud::target::{Coordinate, Scope, Target, TargetSettings, block_path, env};

/// The subscription of the sandbox's AKS clusters, the default scope when the provider runs
/// against a sandbox and names none.
pub const SANDBOX_SUBSCRIPTION: &str = "00000000-0000-0000-0000-000000000000";

const AKS_GPU_DRIVERS: &[&str] = &["Install", "None"];
const AKS_OS_SKUS: &[&str] = &[
    "Ubuntu",
    "Ubuntu2204",
    "Ubuntu2404",
    "AzureLinux",
    "AzureLinux3",
];

/// The AKS descriptor.
pub struct Aks;

tfplugin::object! {
    /// The `aks` block of `fracgpu_nodepool`.
    struct PoolArgs {
        subscription_id: Option<String>,
        resource_group: String,
        cluster_name: String,
        /// Computed by AKS when not set, so unknown in a create plan.
        os_sku: Known<String>,
        /// Computed like os_sku.
        gpu_driver: Known<String>,
    }
}

tfplugin::object! {
    /// The `azure` block. Values not known yet (computed elsewhere in the configuration) read as
    /// unset.
    struct AzureArgs {
        subscription_id: Known<String>,
        tenant_id: Known<String>,
        client_id: Known<String>,
        client_secret: Known<String>,
        use_cli: Known<bool>,
        use_msi: Known<bool>,
        use_oidc: Known<bool>,
        oidc_token: Known<String>,
        oidc_token_file_path: Known<String>,
        use_aks_workload_identity: Known<bool>,
        endpoint: Known<String>,
    }
}

#[async_trait]
impl TargetSettings for AzureSettings {
    fn default_scope(&self) -> Option<String> {
        self.subscription_id.clone()
    }

    async fn connect(&self, sandbox: Option<String>) -> Result<Arc<dyn NodePools>, CloudError> {
        let cfg = AksConfig::from_env_and(AzureSettings {
            sandbox,
            ..self.clone()
        })?;
        Ok(Arc::new(super::client::AksClient::new(cfg)?))
    }

    /// Building the client reads the environment and chooses a credential, sending nothing.
    fn warms_up(&self) -> bool {
        true
    }
}

static SCOPE: Scope = Scope {
    attr: "subscription_id",
    what: "Azure subscription",
    noun: "the cluster's subscription",
    provider_attr: "azure.subscription_id",
    env: "ARM_SUBSCRIPTION_ID",
    identity_description: "AKS: the cluster's subscription. Default: the provider's.",
};

static COORDINATES: [Coordinate; 1] = [Coordinate {
    attr: "resource_group",
    noun: "the cluster's resource group",
    identity_description: "AKS: the cluster's resource group (required on AKS).",
}];

impl Target for Aks {
    fn cloud(&self) -> Cloud {
        Cloud::Aks
    }

    fn title(&self) -> &'static str {
        "AKS"
    }

    fn provider_block_name(&self) -> &'static str {
        "azure"
    }

    fn provider_block(&self) -> Block {
        Block::new(
            "Azure (AKS). Unset arguments fall back to the `ARM_*` environment variables, \
            as the azurerm provider reads them. With credentials other than the Azure CLI's, \
            the provider asks for its access token as soon as terraform configures it, so \
            that AKS pools refreshed late in a plan do not wait for it.",
        )
        .attr(
            Attribute::string("subscription_id")
                .optional()
                .describe("Default subscription of `aks` blocks (`ARM_SUBSCRIPTION_ID`)."),
        )
        .attr(
            Attribute::string("tenant_id")
                .optional()
                .describe("Tenant of the service principal (`ARM_TENANT_ID`)."),
        )
        .attr(
            Attribute::string("client_id")
                .optional()
                .describe("Client ID of the service principal (`ARM_CLIENT_ID`)."),
        )
        .attr(
            Attribute::string("client_secret")
                .optional()
                .sensitive()
                .describe("Client secret (`ARM_CLIENT_SECRET`)."),
        )
        .attr(
            Attribute::bool("use_cli")
                .optional()
                .describe("Use the Azure CLI's login (`ARM_USE_CLI`)."),
        )
        .attr(
            Attribute::bool("use_msi")
                .optional()
                .describe("Use a managed identity (`ARM_USE_MSI`)."),
        )
        .attr(
            Attribute::bool("use_oidc")
                .optional()
                .describe("Use an OIDC token as client assertion (`ARM_USE_OIDC`)."),
        )
        .attr(
            Attribute::string("oidc_token")
                .optional()
                .sensitive()
                .describe("The OIDC token (`ARM_OIDC_TOKEN`)."),
        )
        .attr(
            Attribute::string("oidc_token_file_path")
                .optional()
                .describe("A file holding the OIDC token (`ARM_OIDC_TOKEN_FILE_PATH`)."),
        )
        .attr(
            Attribute::bool("use_aks_workload_identity")
                .optional()
                .describe("Use AKS workload identity (`ARM_USE_AKS_WORKLOAD_IDENTITY`)."),
        )
        .attr(
            Attribute::string("endpoint").optional().describe(
                "Azure Resource Manager endpoint. Default `https://management.azure.com`.",
            ),
        )
    }

    fn settings(&self, block: &Value, sandbox: Option<&str>) -> Arc<dyn TargetSettings> {
        let az = AzureArgs::from_value(block).unwrap_or_default();
        Arc::new(AzureSettings {
            subscription_id: az
                .subscription_id
                .0
                .or_else(|| env("ARM_SUBSCRIPTION_ID"))
                .or_else(|| sandbox.map(|_| SANDBOX_SUBSCRIPTION.to_string())),
            tenant_id: az.tenant_id.0,
            client_id: az.client_id.0,
            client_secret: az.client_secret.0,
            use_cli: az.use_cli.0,
            use_msi: az.use_msi.0,
            use_oidc: az.use_oidc.0,
            oidc_token: az.oidc_token.0,
            oidc_token_file_path: az.oidc_token_file_path.0,
            use_aks_workload_identity: az.use_aks_workload_identity.0,
            arm_endpoint: az.endpoint.0,
            ..AzureSettings::default()
        })
    }

    fn settings_with_scope(&self, scope: &str) -> Arc<dyn TargetSettings> {
        Arc::new(AzureSettings {
            subscription_id: Some(scope.to_string()),
            ..AzureSettings::default()
        })
    }

    fn scope(&self) -> &'static Scope {
        &SCOPE
    }

    fn coordinates(&self) -> &'static [Coordinate] {
        &COORDINATES
    }

    fn cluster_attr(&self) -> &'static str {
        "cluster_name"
    }

    fn locate(&self, scope: String, coordinates: Vec<String>, cluster: String) -> Location {
        Location::Aks {
            subscription_id: scope,
            resource_group: coordinates.into_iter().next().unwrap_or_default(),
            cluster,
        }
    }

    fn parts(&self, location: &Location) -> Option<(String, Vec<String>, String)> {
        match location {
            Location::Aks {
                subscription_id,
                resource_group,
                cluster,
            } => Some((
                subscription_id.clone(),
                vec![resource_group.clone()],
                cluster.clone(),
            )),
            _ => None,
        }
    }

    fn pool_id(&self, location: &Location, name: &str) -> String {
        super::client::AksClient::pool_id(location, name).unwrap_or_default()
    }

    fn describe(&self, location: &Location) -> String {
        let Some((subscription_id, coordinates, cluster)) = self.parts(location) else {
            return String::new();
        };
        format!(
            "AKS cluster {cluster} (resource group {}, subscription {subscription_id})",
            coordinates[0]
        )
    }

    fn parse_import_id(
        &self,
        id: &str,
        _default_scope: Option<String>,
    ) -> Option<(Location, String)> {
        let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
        let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        let arm = parts.len() == 10
            && eq(parts[0], "subscriptions")
            && eq(parts[2], "resourceGroups")
            && eq(parts[4], "providers")
            && eq(parts[5], "Microsoft.ContainerService")
            && eq(parts[6], "managedClusters")
            && eq(parts[8], "agentPools");
        arm.then(|| {
            let loc = Location::Aks {
                subscription_id: parts[1].into(),
                resource_group: parts[3].into(),
                cluster: parts[7].into(),
            };
            (loc, parts[9].into())
        })
    }

    fn import_id_form(&self) -> &'static str {
        "AKS `/subscriptions/S/resourceGroups/RG/providers/Microsoft.ContainerService/managedClusters/C/agentPools/N`"
    }

    fn pool_block(&self) -> Block {
        Block::new("Azure Kubernetes Service: the cluster the pool joins. Changing any argument \
            replaces the pool.")
            .attr(Attribute::string("subscription_id").optional().computed().requires_replace().describe(
                "Subscription of the cluster. Default: the provider's `azure.subscription_id` or \
                `ARM_SUBSCRIPTION_ID`."))
            .attr(Attribute::string("resource_group").required().requires_replace().describe("Resource group of the cluster."))
            .attr(Attribute::string("cluster_name").required().requires_replace().describe("Name of the AKS cluster."))
            .attr(Attribute::string("os_sku").optional().computed().use_state_for_unknown().describe(&format!(
                "Node OS image (`osSKU`). Default: AKS's ({AKS_DEFAULT_OS_SKU}). A change between \
                the Ubuntu and Azure Linux families applies in place (AKS reimages the nodes); any \
                other change replaces the pool. MIG is not available on Azure Linux.")).validate(OneOf(AKS_OS_SKUS)))
            .attr(Attribute::string("gpu_driver").optional().computed().use_state_for_unknown().requires_replace().describe(
                "Whether AKS installs the NVIDIA driver on the nodes (`gpuProfile.driver`): \
                `Install`, or `None` when the GPU operator installs it (its chart's \
                `driver.enabled=true`, the default); with `Install`, run the operator with \
                `driver.enabled=false`. Default: AKS's (`Install`). AKS sets it up when it creates \
                the nodes, so a change replaces the pool.").validate(OneOf(AKS_GPU_DRIVERS)))
    }

    fn query_block(&self) -> Block {
        Block::new("An AKS cluster.")
            .attr(Attribute::string("subscription_id").optional().describe(
                "Subscription of the cluster. Default: the provider's `azure.subscription_id` or \
                `ARM_SUBSCRIPTION_ID`.",
            ))
            .attr(
                Attribute::string("resource_group")
                    .required()
                    .describe("Resource group of the cluster."),
            )
            .attr(
                Attribute::string("cluster_name")
                    .required()
                    .describe("Name of the AKS cluster."),
            )
    }

    fn decode_block(&self, block: &Value) -> Result<(), DecodeError> {
        PoolArgs::from_value(block).map(|_| ())
    }

    fn block_shape(&self) -> tfplugin::shape::Shape {
        <PoolArgs as tfplugin::shape::Shaped>::shape()
    }

    fn check_sharing(&self, block: &Value, sharing: &SharingMode) -> Vec<Diagnostic> {
        let sku = PoolArgs::from_value(block).ok().and_then(|b| b.os_sku.0);
        sku.and_then(|sku| gpu::check_aks_os_sku(sharing, &sku).err())
            .map(|e| Diagnostic::error(e.summary, e.detail).at(block_path(self, "os_sku")))
            .into_iter()
            .collect()
    }

    fn fields(&self, block: &Value, derived: &gpu::Derived) -> TargetFields {
        let b = PoolArgs::from_value(block).unwrap_or_default();
        TargetFields::Aks(AksPoolFields {
            gpu_instance_profile: derived
                .aks_gpu_instance_profile
                .map(|p| p.as_str().to_string()),
            gpu_driver: b.gpu_driver.0,
            os_sku: b.os_sku.0,
        })
    }

    fn block_of(&self, pool: &Pool) -> Value {
        let spec = &pool.spec;
        let (subscription_id, coordinates, cluster) =
            self.parts(&spec.location).unwrap_or_default();
        PoolArgs {
            subscription_id: Some(subscription_id),
            resource_group: coordinates.into_iter().next().unwrap_or_default(),
            cluster_name: cluster,
            os_sku: Known(spec.aks().os_sku.clone()),
            gpu_driver: Known(spec.aks().gpu_driver.clone()),
        }
        .to_value()
    }

    fn observed<'a>(&self, spec: &'a PoolSpec, gpu: &'static GpuModel) -> Observed<'a> {
        Observed {
            cloud: Cloud::Aks,
            gpu,
            labels: &spec.labels,
            aks_gpu_instance_profile: spec.aks().gpu_instance_profile.as_deref(),
            gke_partition_size: None,
            gke_sharing: None,
            bottlerocket_settings: None,
        }
    }

    fn node_template(
        &self,
        template: &NodeTemplate<'_>,
    ) -> Result<BTreeMap<String, String>, Diagnostic> {
        super::template::checked_tags(template)
    }

    fn gpu_change_replaces(&self, old: &PoolSpec, new: &PoolSpec) -> bool {
        old.aks().gpu_instance_profile != new.aks().gpu_instance_profile
    }

    fn replacements(&self, old: &PoolSpec, new: &PoolSpec) -> Vec<AttrPath> {
        if os_sku_changes_in_place(old.aks().os_sku.as_deref(), new.aks().os_sku.as_deref()) {
            Vec::new()
        } else {
            vec![block_path(self, "os_sku")]
        }
    }
}
