//! EKS as a provisioning target: the provider's `aws` block, the `eks` blocks of
//! `fracgpu_nodepool` and of the pool queries, how an EKS cluster is named (region, cluster) in
//! identities and in the `cluster:nodegroup` import ID, and how the client is built.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use gpu::{Cloud, SharingMode};
use tfplugin::object::{FromValue, Known, ToValue};
use tfplugin::schema::{Attribute, Block};
use tfplugin::validators::OneOf;
use tfplugin::{DecodeError, Diagnostic, Type, Value};

use super::config::EksConfig;
use crate::cloud::error::CloudError;
use crate::cloud::pool::{
    EksPoolFields, Location, NodePools, NodeTemplate, Pool, PoolSpec, Scaling, TargetFields,
};
use crate::cloud::target::{Coordinate, Scope, Target, TargetSettings, block_path, env};

/// The region of the sandbox's EKS clusters, the default scope when the provider runs against a
/// sandbox and names none.
pub const SANDBOX_REGION: &str = "us-east-1";

pub const DEFAULT_EKS_AMI: &str = "AL2023_x86_64_NVIDIA";
/// Still accepted (clusters of Kubernetes 1.32 and earlier have its AMIs), with a warning.
pub const RETIRED_EKS_AMI: &str = "AL2_x86_64_GPU";
const EKS_GPU_AMIS: &[&str] = &[
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    RETIRED_EKS_AMI,
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
];

/// Whether an AMI type is one of Bottlerocket's, whose device plugin reads its own settings.
pub(super) fn is_bottlerocket(ami_type: &str) -> bool {
    ami_type.starts_with("BOTTLEROCKET")
}

/// The EKS descriptor.
pub struct Eks;

tfplugin::object! {
    /// The `eks` block of `fracgpu_nodepool`.
    struct PoolArgs {
        region: Option<String>,
        cluster_name: String,
        node_role_arn: String,
        subnet_ids: Vec<String>,
        ami_type: Option<String>,
    }
}

impl PoolArgs {
    fn ami_type(&self) -> String {
        self.ami_type
            .clone()
            .unwrap_or_else(|| DEFAULT_EKS_AMI.to_string())
    }
}

tfplugin::object! {
    /// The `aws` block.
    struct AwsArgs {
        region: Known<String>,
        profile: Known<String>,
        access_key: Known<String>,
        secret_key: Known<String>,
        endpoint: Known<String>,
    }
}

#[async_trait]
impl TargetSettings for EksConfig {
    fn default_scope(&self) -> Option<String> {
        self.region.clone()
    }

    async fn connect(&self, sandbox: Option<String>) -> Result<Arc<dyn NodePools>, CloudError> {
        let cfg = EksConfig {
            sandbox,
            ..self.clone()
        };
        Ok(Arc::new(super::client::EksClient::new(cfg).await?))
    }
}

static SCOPE: Scope = Scope {
    attr: "region",
    what: "AWS region",
    noun: "the cluster's region",
    provider_attr: "aws.region",
    env: "AWS_REGION",
    identity_description: "EKS: the cluster's region. Default: the provider's.",
};

impl Target for Eks {
    fn cloud(&self) -> Cloud {
        Cloud::Eks
    }

    fn title(&self) -> &'static str {
        "EKS"
    }

    fn provider_block_name(&self) -> &'static str {
        "aws"
    }

    fn provider_block(&self) -> Block {
        Block::new(
            "AWS (EKS). Credentials default to the AWS default chain (environment, shared \
            config and credentials files, web identity, ECS, IMDSv2).",
        )
        .attr(
            Attribute::string("region")
                .optional()
                .describe("Default region of `eks` blocks (`AWS_REGION`, `AWS_DEFAULT_REGION`)."),
        )
        .attr(
            Attribute::string("profile")
                .optional()
                .describe("A profile of the shared config files (`AWS_PROFILE`)."),
        )
        .attr(
            Attribute::string("access_key")
                .optional()
                .sensitive()
                .describe("Static access key ID."),
        )
        .attr(
            Attribute::string("secret_key")
                .optional()
                .sensitive()
                .describe("Static secret access key."),
        )
        .attr(
            Attribute::string("endpoint")
                .optional()
                .describe("EKS API endpoint override."),
        )
    }

    fn settings(&self, block: &Value, sandbox: Option<&str>) -> Arc<dyn TargetSettings> {
        let a = AwsArgs::from_value(block).unwrap_or_default();
        Arc::new(EksConfig {
            region: a
                .region
                .0
                .or_else(|| env("AWS_REGION"))
                .or_else(|| env("AWS_DEFAULT_REGION"))
                .or_else(|| sandbox.map(|_| SANDBOX_REGION.to_string())),
            profile: a.profile.0,
            access_key: a.access_key.0,
            secret_key: a.secret_key.0,
            endpoint: a.endpoint.0,
            ..EksConfig::default()
        })
    }

    fn settings_with_scope(&self, scope: &str) -> Arc<dyn TargetSettings> {
        Arc::new(EksConfig {
            region: Some(scope.to_string()),
            ..EksConfig::default()
        })
    }

    fn scope(&self) -> &'static Scope {
        &SCOPE
    }

    fn coordinates(&self) -> &'static [Coordinate] {
        &[]
    }

    fn cluster_attr(&self) -> &'static str {
        "cluster_name"
    }

    fn locate(&self, scope: String, _coordinates: Vec<String>, cluster: String) -> Location {
        Location::Eks {
            region: scope,
            cluster,
        }
    }

    fn parts(&self, location: &Location) -> Option<(String, Vec<String>, String)> {
        match location {
            Location::Eks { region, cluster } => Some((region.clone(), vec![], cluster.clone())),
            _ => None,
        }
    }

    fn pool_id(&self, location: &Location, name: &str) -> String {
        let cluster = self.parts(location).map(|p| p.2).unwrap_or_default();
        super::mapping::pool_id(&cluster, name)
    }

    fn describe(&self, location: &Location) -> String {
        let Some((region, _, cluster)) = self.parts(location) else {
            return String::new();
        };
        format!("EKS cluster {cluster} in {region}")
    }

    /// `cluster:nodegroup`, in the provider's region: EKS IDs name no region.
    fn parse_import_id(
        &self,
        id: &str,
        default_scope: Option<String>,
    ) -> Option<(Location, String)> {
        let (cluster, group) = id.split_once(':')?;
        if cluster.is_empty() || group.is_empty() || id.contains('/') {
            return None;
        }
        let loc = Location::Eks {
            region: default_scope?,
            cluster: cluster.into(),
        };
        Some((loc, group.into()))
    }

    fn import_id_form(&self) -> &'static str {
        "EKS `cluster:nodegroup` (region from the provider)"
    }

    fn pool_block(&self) -> Block {
        Block::new(
            "Amazon EKS: the cluster the managed node group joins. Changing any argument \
            replaces the node group.",
        )
        .attr(
            Attribute::string("region")
                .optional()
                .computed()
                .requires_replace()
                .describe(
                    "Region of the cluster. Default: the provider's `aws.region`, `AWS_REGION` or \
                `AWS_DEFAULT_REGION`.",
                ),
        )
        .attr(
            Attribute::string("cluster_name")
                .required()
                .requires_replace()
                .describe("Name of the EKS cluster."),
        )
        .attr(
            Attribute::string("node_role_arn")
                .required()
                .requires_replace()
                .describe("IAM role of the nodes."),
        )
        .attr(
            Attribute::new("subnet_ids", Type::list(Type::String))
                .required()
                .requires_replace()
                .describe("Subnets of the nodes."),
        )
        .attr(
            Attribute::string("ami_type")
                .optional()
                .computed()
                .requires_replace()
                .describe(&format!(
                    "GPU AMI type. Default `{DEFAULT_EKS_AMI}`. The \
                        Bottlerocket NVIDIA AMIs run the NVIDIA device plugin as a host service \
                        set up by Bottlerocket's own settings, not by the GPU operator: a \
                        Bottlerocket pool that shares its GPUs gets a launch template \
                        (`fracgpu/<cluster>/<node group>`) whose user data carries them \
                        (`settings.kubelet-device-plugins.nvidia`; MIG with the `single` strategy \
                        only), and needs no `fracgpu_device_plugin_config`. Starting or ending \
                        sharing on Bottlerocket replaces the node group (EKS cannot add or remove \
                        a launch template); other sharing changes roll its nodes to a new \
                        template version. `{RETIRED_EKS_AMI}` is retired: EKS has no AL2 AMIs \
                        for Kubernetes 1.33 and later, and a plan warns."
                ))
                .validate(OneOf(EKS_GPU_AMIS))
                .default_value(Value::string(DEFAULT_EKS_AMI)),
        )
    }

    fn query_block(&self) -> Block {
        Block::new("An EKS cluster.")
            .attr(Attribute::string("region").optional().describe(
                "Region of the cluster. Default: the provider's `aws.region`, `AWS_REGION` or \
                `AWS_DEFAULT_REGION`.",
            ))
            .attr(
                Attribute::string("cluster_name")
                    .required()
                    .describe("Name of the EKS cluster."),
            )
    }

    fn decode_block(&self, block: &Value) -> Result<(), DecodeError> {
        PoolArgs::from_value(block).map(|_| ())
    }

    fn block_shape(&self) -> tfplugin::shape::Shape {
        <PoolArgs as tfplugin::shape::Shaped>::shape()
    }

    fn check_sharing(&self, block: &Value, sharing: &SharingMode) -> Vec<Diagnostic> {
        let Ok(b) = PoolArgs::from_value(block) else {
            return Vec::new();
        };
        // What Bottlerocket's settings cannot say, on the sharing attribute that says it.
        gpu::check_eks_ami_type(sharing, &b.ami_type())
            .err()
            .map(|e| crate::model::domain_diagnostic(&e, &[]))
            .into_iter()
            .collect()
    }

    /// A Bottlerocket pool that shares its GPUs carries Bottlerocket's device plugin settings,
    /// which its launch template delivers (`ec2.rs`).
    fn fields(&self, block: &Value, derived: &gpu::Derived) -> TargetFields {
        let b = PoolArgs::from_value(block).unwrap_or_default();
        let ami_type = b.ami_type();
        TargetFields::Eks(EksPoolFields {
            bottlerocket_settings: is_bottlerocket(&ami_type)
                .then(|| gpu::bottlerocket::settings(&derived.sharing, derived.gpu))
                .flatten(),
            ami_type,
            node_role_arn: b.node_role_arn,
            subnet_ids: b.subnet_ids,
        })
    }

    /// On a Bottlerocket node group with a launch template, the template's settings say how the
    /// host's device plugin shares the GPUs, whatever the labels say.
    fn observed<'a>(&self, spec: &'a PoolSpec, gpu: &'static gpu::GpuModel) -> gpu::Observed<'a> {
        gpu::Observed {
            cloud: Cloud::Eks,
            gpu,
            labels: &spec.labels,
            aks_gpu_instance_profile: None,
            gke_partition_size: None,
            gke_sharing: None,
            bottlerocket_settings: spec.eks().bottlerocket_settings.as_deref(),
        }
    }

    fn block_of(&self, pool: &Pool) -> Value {
        let spec = &pool.spec;
        let (region, _, cluster) = self.parts(&spec.location).unwrap_or_default();
        let f = spec.eks().clone();
        PoolArgs {
            region: Some(region),
            cluster_name: cluster,
            node_role_arn: f.node_role_arn,
            subnet_ids: f.subnet_ids,
            ami_type: Some(f.ami_type),
        }
        .to_value()
    }

    /// EKS has no autoscaling switch: autoscaling {n, n}, and {0, 1} while at zero, are stored
    /// as a fixed count is. Such a pool keeps the form it was written in.
    fn node_template(
        &self,
        template: &NodeTemplate<'_>,
    ) -> Result<BTreeMap<String, String>, Diagnostic> {
        super::template::checked_tags(template)
    }

    fn recorded_scaling(&self, written: Scaling, read: Scaling) -> Scaling {
        if super::mapping::canonical_scaling(written) == read {
            written
        } else {
            read
        }
    }

    /// EKS expresses sharing with node labels, and on Bottlerocket with the settings of the node
    /// group's launch template: all of it changes in place (a new template version), except
    /// sharing that starts or ends on Bottlerocket. A node group made without a launch template
    /// can never take one (EKS user guide, "Customize managed nodes with launch templates"), and
    /// one made with a template keeps it.
    fn gpu_change_replaces(&self, old: &PoolSpec, new: &PoolSpec) -> bool {
        old.eks().bottlerocket_settings.is_some() != new.eks().bottlerocket_settings.is_some()
    }

    /// A warning on an AMI type EKS no longer publishes for current Kubernetes versions: Amazon
    /// Linux 2 reached end of support on 2025-11-26, and EKS has no AL2 AMIs for Kubernetes 1.33
    /// and later (awslabs/amazon-eks-ami), so a create on such a cluster fails. Older clusters
    /// still take it.
    fn warnings(&self, block: &Value) -> Vec<Diagnostic> {
        if block.get("ami_type").as_str() != Some(RETIRED_EKS_AMI) {
            return Vec::new();
        }
        vec![
            Diagnostic::warning(
                "Amazon Linux 2 GPU AMI is retired",
                format!(
                    "{RETIRED_EKS_AMI} reached end of support on 2025-11-26 and EKS publishes no \
                        AL2 AMIs for Kubernetes 1.33 and later: creating this node group on such a \
                        cluster fails. Use ami_type = \"{DEFAULT_EKS_AMI}\" (the default), whose \
                        AMIs carry the NVIDIA driver; changing the AMI type replaces the node \
                        group."
                ),
            )
            .at(block_path(self, "ami_type")),
        ]
    }
}
