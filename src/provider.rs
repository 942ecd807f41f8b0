//! The fracgpu provider: its configuration schema and the registry of its resources, data
//! sources and functions.

use std::sync::Arc;

use async_trait::async_trait;

use crate::tf::api::{DataSource, Function, Provider, Resource};
use crate::tf::schema::{Attribute, Block, Schema};
use crate::tf::{Diagnostics, Value};

#[derive(Default)]
pub struct FracGpu;

impl FracGpu {
    pub fn new() -> Arc<FracGpu> {
        Arc::new(FracGpu)
    }
}

pub fn provider_schema() -> Schema {
    Schema::new(
        0,
        Block::new("Declares fractional NVIDIA GPUs (MIG, time-slicing, MPS) on AKS, GKE and EKS.").attr(
            Attribute::string("sandbox")
                .optional()
                .describe("Base URL of a running `fracgpu-sandbox`; every cloud and Kubernetes API is then served by it. Also read from `FRACGPU_SANDBOX`."),
        ),
    )
}

#[async_trait]
impl Provider for FracGpu {
    fn type_name(&self) -> &'static str {
        "fracgpu"
    }

    fn schema(&self) -> Schema {
        provider_schema()
    }

    async fn configure(&self, _terraform_version: &str, _config: &Value, _diags: &mut Diagnostics) {
    }

    fn data_sources(&self) -> Vec<Arc<dyn DataSource>> {
        crate::data_sources::all()
    }

    fn resources(&self) -> Vec<Arc<dyn Resource>> {
        Vec::new()
    }

    fn functions(&self) -> Vec<Arc<dyn Function>> {
        crate::functions::all()
    }
}
