//! `list "fracgpu_karpenter_nodepool"`: the Karpenter NodePools of the cluster the provider's
//! `kubernetes` block reaches (the one an import reads), each with its identity; those this
//! provider made also with the state an import gives them when terraform asks for it
//! (`include_resource`, or `-generate-config-out`), so the generated configuration plans empty.

use std::sync::Arc;

use async_trait::async_trait;

use crate::resources::karpenter_nodepool::{DECLARATION, KarpenterNodePool, TYPE_NAME};
use crate::state::ProviderState;
use tfplugin::api::{ListItem, ListResource, ListSink, Resource};
use tfplugin::object::{Decoded, FromValue};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::validators::OneOf;
use tfplugin::{Diagnostic, Diagnostics, Value};

tfplugin::object! {
    /// The `config` block.
    struct Filters {
        sharing: Option<String>,
    }
}

pub struct KarpenterNodePoolList {
    pool: KarpenterNodePool,
}

impl KarpenterNodePoolList {
    pub fn new(state: Arc<ProviderState>) -> KarpenterNodePoolList {
        KarpenterNodePoolList {
            pool: KarpenterNodePool::new(state),
        }
    }
}

pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "Finds the Karpenter NodePools (EKS Karpenter, AKS node auto-provisioning) of the \
            cluster the provider's `kubernetes` block reaches, for `terraform query`: each with \
            its identity and, for those this provider made, with `include_resource = true` or \
            `-generate-config-out`, the configuration an import gives them (read from the \
            declaration the NodePool carries). NodePools made otherwise are listed by name; they \
            cannot be imported.",
        )
        .attr(
            Attribute::string("sharing")
                .optional()
                .describe(
                    "Only pools this provider made that share their GPUs this way: `mig`, \
                    `time_slicing`, `mps`, or `none` (whole GPUs). Default: every NodePool.",
                )
                .validate(OneOf(gpu::SharingMode::NAMES)),
        ),
    )
}

#[async_trait]
impl ListResource for KarpenterNodePoolList {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn list(&self, config: &Value, sink: &mut ListSink, diags: &mut Diagnostics) {
        let Some(filters) = Filters::from_value(config).or_report(diags) else {
            return;
        };
        let with_state = sink.include_resource();
        let Some(found) = self
            .pool
            .listed(filters.sharing.as_deref(), with_state, diags)
            .await
        else {
            return;
        };
        let mut not_ours = Vec::new();
        for f in found {
            // Terraform would generate an empty resource block for a NodePool without state.
            if with_state && f.state.is_none() {
                not_ours.push(f.name);
                continue;
            }
            let Some(identity) = self
                .pool
                .identity(&Value::object([("name", Value::string(&f.name))]))
            else {
                continue;
            };
            let item = ListItem {
                identity,
                display_name: f.display_name,
                resource: f.state,
            };
            if !sink.send(item).await {
                break;
            }
        }
        if !not_ours.is_empty() {
            diags.push(Diagnostic::warning(
                "NodePools not made by this provider left out",
                format!(
                    "{} carry no {DECLARATION} annotation, so there is nothing to import \
                        them from and no configuration to generate. They are listed without \
                        `include_resource` or `-generate-config-out`; to manage one, declare it \
                        in fracgpu_karpenter_nodepool under another name and delete the old one \
                        once the new pool serves.",
                    not_ours.join(", ")
                ),
            ));
        }
    }
}
