//! `list "fracgpu_nodepool"`: every pool of one cluster, those no terraform made included, each
//! with its identity and, when terraform asks (`include_resource`, or `-generate-config-out`),
//! the state an import would give it, so that the generated configuration plans as a clean import.

use std::sync::Arc;

use async_trait::async_trait;

use crate::resources::nodepool::discovery::{self, query_block, query_of};
use crate::resources::nodepool::{TYPE_NAME, identity};
use crate::state::ProviderState;
use tfplugin::api::{ListItem, ListResource, ListSink};
use tfplugin::schema::{Block, Schema};
use tfplugin::{AttrPath, Diagnostics, Value};

pub struct NodePoolList {
    state: Arc<ProviderState>,
}

impl NodePoolList {
    pub fn new(state: Arc<ProviderState>) -> NodePoolList {
        NodePoolList { state }
    }
}

pub fn schema() -> Schema {
    Schema::new(
        0,
        query_block(Block::new(
            "Finds the node pools of one cluster on AKS, GKE or EKS, including pools no terraform \
                made, for `terraform query`: each with its identity and, with `include_resource = \
                true` or `-generate-config-out`, the configuration an import of it would have. GPU \
                pools only, unless `gpu_only = false`.",
        )),
    )
}

#[async_trait]
impl ListResource for NodePoolList {
    fn type_name(&self) -> &'static str {
        TYPE_NAME
    }

    fn schema(&self) -> Schema {
        schema()
    }

    async fn list(&self, config: &Value, sink: &mut ListSink, diags: &mut Diagnostics) {
        let Some(query) = query_of(config, diags) else {
            return;
        };
        let Some(found) = discovery::find(&self.state, &query, &AttrPath::root(), diags).await
        else {
            return;
        };
        let mut without_state = Vec::new();
        for f in found {
            // A pool without GPUs (`gpu_only = false`) has no state `fracgpu_nodepool` could
            // hold; terraform would generate an empty resource block for it, so where the
            // resource is wanted it is left out, and said so.
            if sink.include_resource() && f.state.is_none() {
                without_state.push(f.pool.spec.name);
                continue;
            }
            let item = ListItem {
                identity: identity(&f.location, &f.pool.spec.name),
                display_name: f.display_name(),
                resource: f.state.filter(|_| sink.include_resource()),
            };
            if !sink.send(item).await {
                break;
            }
        }
        if !without_state.is_empty() {
            diags.push(tfplugin::Diagnostic::warning(
                "Pools without GPUs left out",
                format!(
                    "{} carry no GPU this provider knows, so fracgpu_nodepool cannot manage them \
                        and there is no configuration to generate. They are listed without \
                        `include_resource` or `-generate-config-out`.",
                    without_state.join(", ")
                ),
            ).at(AttrPath::attr("gpu_only")));
        }
    }
}
