//! List resources, which `terraform query` reads (terraform 1.14 and later): one per managed
//! resource whose existing objects are worth finding.

pub mod device_plugin_config;
pub mod karpenter_nodepool;
pub mod nodepool;

use std::sync::Arc;

use crate::state::ProviderState;
use tfplugin::api::ListResource;

pub fn all(state: &Arc<ProviderState>) -> Vec<Arc<dyn ListResource>> {
    vec![
        Arc::new(nodepool::NodePoolList::new(state.clone())),
        Arc::new(karpenter_nodepool::KarpenterNodePoolList::new(
            state.clone(),
        )),
        Arc::new(device_plugin_config::DevicePluginConfigList::new(
            state.clone(),
        )),
    ]
}
