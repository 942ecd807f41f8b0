//! Resources, one folder each.

use std::sync::Arc;

use crate::state::ProviderState;
use tfplugin::api::Resource;

pub mod device_plugin_config;
pub mod karpenter_nodepool;
pub mod nodepool;

pub fn all(state: &Arc<ProviderState>) -> Vec<Arc<dyn Resource>> {
    vec![
        Arc::new(nodepool::NodePool::new(state.clone())),
        Arc::new(device_plugin_config::DevicePluginConfigResource::new(
            state.clone(),
        )),
        Arc::new(karpenter_nodepool::KarpenterNodePool::new(state.clone())),
    ]
}
