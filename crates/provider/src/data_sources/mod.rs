//! Data sources, one file each.

use std::sync::Arc;

use tfplugin::api::DataSource;

pub mod machine_type;
pub mod nodepools;
pub mod workload;

use crate::state::ProviderState;

pub fn all(state: &Arc<ProviderState>) -> Vec<Arc<dyn DataSource>> {
    vec![
        Arc::new(machine_type::MachineTypeDataSource),
        Arc::new(nodepools::NodePoolsDataSource::new(state.clone())),
        Arc::new(workload::WorkloadDataSource),
    ]
}
