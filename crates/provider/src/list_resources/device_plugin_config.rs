//! `list "fracgpu_device_plugin_config"`: the device plugin configs the plugins of the cluster
//! the provider's `kubernetes` block reaches read, each with its identity and the delivery that
//! writes it, and with the state an import gives it when terraform asks for it
//! (`include_resource`, or `-generate-config-out`), so the generated configuration imports it
//! through the delivery that really writes it.

use std::sync::Arc;

use async_trait::async_trait;

use crate::resources::device_plugin_config::{DevicePluginConfigResource, TYPE_NAME, deliveries};
use crate::state::ProviderState;
use tfplugin::api::{ListItem, ListResource, ListSink};
use tfplugin::object::{Decoded, FromValue};
use tfplugin::schema::{Attribute, Block, Schema};
use tfplugin::validators::OneOf;
use tfplugin::{Diagnostics, Value};

tfplugin::object! {
    /// The `config` block.
    struct Filters {
        delivery: Option<String>,
    }
}

pub struct DevicePluginConfigList {
    resource: DevicePluginConfigResource,
}

impl DevicePluginConfigList {
    pub fn new(state: Arc<ProviderState>) -> DevicePluginConfigList {
        DevicePluginConfigList {
            resource: DevicePluginConfigResource::new(state),
        }
    }
}

pub fn schema() -> Schema {
    Schema::new(
        0,
        Block::new(
            "Finds the NVIDIA device plugin configs of the cluster the provider's `kubernetes` \
            block reaches, for `terraform query`: the ConfigMap the GPU operator's ClusterPolicy \
            points the plugin at (written by this provider's `cluster_policy` delivery, by hand, \
            or by the Helm release that installed the operator), the one each Argo CD \
            Application or Flux HelmRelease has the operator's chart create (values at \
            `devicePlugin`), and the one each release of NVIDIA's standalone device plugin chart \
            mounts by `config.name`. Each comes with its identity and the delivery that writes \
            it; with `include_resource = true` or `-generate-config-out`, with the \
            configuration an import through that delivery gives it. Reading them takes `get` of \
            the ClusterPolicy and `list` of Applications, HelmReleases and daemonsets in every \
            namespace; a kind the provider may not list is left out with a warning.",
        )
        .attr(
            Attribute::string("delivery")
                .optional()
                .describe("Only the configs this delivery writes. Default: every one.")
                .validate(OneOf(deliveries())),
        ),
    )
}

#[async_trait]
impl ListResource for DevicePluginConfigList {
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
            .resource
            .listed(filters.delivery.as_deref(), with_state, diags)
            .await
        else {
            return;
        };
        for f in found {
            // An import that did not read has said why; no state means no configuration.
            if with_state && f.state.is_none() {
                continue;
            }
            let item = ListItem {
                identity: f.identity,
                display_name: f.display_name,
                resource: f.state,
            };
            if !sink.send(item).await {
                break;
            }
        }
    }
}
