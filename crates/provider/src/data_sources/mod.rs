//! Data sources, one file each.

use std::sync::Arc;

use tfplugin::api::DataSource;

pub mod machine_type;
pub mod workload;

pub fn all() -> Vec<Arc<dyn DataSource>> {
    vec![
        Arc::new(machine_type::MachineTypeDataSource),
        Arc::new(workload::WorkloadDataSource),
    ]
}
