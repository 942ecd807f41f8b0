//! Actions (terraform 1.14 and later): operations a user runs with `terraform apply
//! -invoke=action.<type>.<name>` or ties to a resource's lifecycle with `action_trigger`. They
//! keep no state, and nothing else depends on them (OpenTofu has no actions), so every resource
//! works without them.

mod access;
pub mod device_plugin_rollout;
pub mod mig_reconfigure;
mod request;

use std::sync::Arc;

use crate::state::ProviderState;
use tfplugin::api::Action;

pub fn all(state: &Arc<ProviderState>) -> Vec<Arc<dyn Action>> {
    vec![
        Arc::new(device_plugin_rollout::DevicePluginRollout::new(
            state.clone(),
        )),
        Arc::new(mig_reconfigure::MigReconfigure::new(state.clone())),
    ]
}
