//! The resource's handle and type name, in a module of their own: its methods live beside what
//! they do (`delivery`, `ops`, `observe`) and its handlers in the folder's root, all of which use
//! these and none of which these use.

use std::sync::Arc;

use crate::state::ProviderState;

pub const TYPE_NAME: &str = "fracgpu_device_plugin_config";

pub struct DevicePluginConfigResource {
    pub(super) state: Arc<ProviderState>,
}

impl DevicePluginConfigResource {
    pub fn new(state: Arc<ProviderState>) -> Self {
        DevicePluginConfigResource { state }
    }
}
