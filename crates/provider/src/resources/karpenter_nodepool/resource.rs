//! The resource's handle and type name, in a module of their own: the cluster work (`ops`) and
//! the handlers (the folder's root) use these, and these use neither.

use std::sync::Arc;

use crate::state::ProviderState;

pub const TYPE_NAME: &str = "fracgpu_karpenter_nodepool";

pub struct KarpenterNodePool {
    pub(super) state: Arc<ProviderState>,
}

impl KarpenterNodePool {
    pub fn new(state: Arc<ProviderState>) -> Self {
        KarpenterNodePool { state }
    }
}
