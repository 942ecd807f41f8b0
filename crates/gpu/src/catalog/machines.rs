//! Each cloud's machine types that carry GPUs, and how many of which. This table is what lets a user name
//! only a VM size and get the right GPU, count and `nvidia.com/gpu.product` label. Sizes follow each
//! cloud's list of GPU machine types:
//! Azure <https://learn.microsoft.com/azure/virtual-machines/sizes/overview>,
//! Google Cloud <https://cloud.google.com/compute/docs/gpus>,
//! AWS <https://aws.amazon.com/ec2/instance-types/>.

use super::models::{A10G, A100_40GB, A100_80GB, B200, H100_80GB, H100_NVL, H200, L4, L40S, T4};
use super::{Cloud, GpuModel};

/// A VM size / instance type / machine type with GPUs attached.
#[derive(Debug, PartialEq, Eq)]
pub struct MachineType {
    pub cloud: Cloud,
    pub name: &'static str,
    pub gpu: &'static GpuModel,
    pub gpu_count: u32,
    /// Set when the machine's GPU form factor carries another `nvidia.com/gpu.product` than the model's.
    pub gpu_product_override: Option<&'static str>,
}

impl MachineType {
    pub fn gpu_product(&self) -> &'static str {
        self.gpu_product_override.unwrap_or(self.gpu.gpu_product)
    }
}

const fn m(
    cloud: Cloud,
    name: &'static str,
    gpu: &'static GpuModel,
    gpu_count: u32,
) -> MachineType {
    MachineType {
        cloud,
        name,
        gpu,
        gpu_count,
        gpu_product_override: None,
    }
}

// NC A100 v4 carries the PCIe card, whose GFD product label differs from the SXM4 module's.
const fn m_pcie_a100(name: &'static str, gpu_count: u32) -> MachineType {
    MachineType {
        cloud: Cloud::Aks,
        name,
        gpu: &A100_80GB,
        gpu_count,
        gpu_product_override: Some("NVIDIA-A100-80GB-PCIe"),
    }
}

use Cloud::{Aks, Eks, Gke};

pub(super) static MACHINE_TYPES: &[MachineType] = &[
    // Azure
    m_pcie_a100("Standard_NC24ads_A100_v4", 1),
    m_pcie_a100("Standard_NC48ads_A100_v4", 2),
    m_pcie_a100("Standard_NC96ads_A100_v4", 4),
    m(Aks, "Standard_NC40ads_H100_v5", &H100_NVL, 1),
    m(Aks, "Standard_NC80adis_H100_v5", &H100_NVL, 2),
    m(Aks, "Standard_ND96asr_v4", &A100_40GB, 8),
    m(Aks, "Standard_ND96amsr_A100_v4", &A100_80GB, 8),
    m(Aks, "Standard_ND96isr_H100_v5", &H100_80GB, 8),
    m(Aks, "Standard_ND96isr_H200_v5", &H200, 8),
    m(Aks, "Standard_NC4as_T4_v3", &T4, 1),
    m(Aks, "Standard_NC8as_T4_v3", &T4, 1),
    m(Aks, "Standard_NC16as_T4_v3", &T4, 1),
    m(Aks, "Standard_NC64as_T4_v3", &T4, 4),
    // Google Cloud
    m(Gke, "a2-highgpu-1g", &A100_40GB, 1),
    m(Gke, "a2-highgpu-2g", &A100_40GB, 2),
    m(Gke, "a2-highgpu-4g", &A100_40GB, 4),
    m(Gke, "a2-highgpu-8g", &A100_40GB, 8),
    m(Gke, "a2-ultragpu-1g", &A100_80GB, 1),
    m(Gke, "a2-ultragpu-2g", &A100_80GB, 2),
    m(Gke, "a2-ultragpu-4g", &A100_80GB, 4),
    m(Gke, "a2-ultragpu-8g", &A100_80GB, 8),
    m(Gke, "a3-highgpu-8g", &H100_80GB, 8),
    m(Gke, "a3-ultragpu-8g", &H200, 8),
    m(Gke, "a4-highgpu-8g", &B200, 8),
    m(Gke, "g2-standard-4", &L4, 1),
    m(Gke, "g2-standard-8", &L4, 1),
    m(Gke, "g2-standard-12", &L4, 1),
    m(Gke, "g2-standard-16", &L4, 1),
    m(Gke, "g2-standard-24", &L4, 2),
    m(Gke, "g2-standard-32", &L4, 1),
    m(Gke, "g2-standard-48", &L4, 4),
    m(Gke, "g2-standard-96", &L4, 8),
    // AWS
    m(Eks, "p4d.24xlarge", &A100_40GB, 8),
    m(Eks, "p4de.24xlarge", &A100_80GB, 8),
    m(Eks, "p5.48xlarge", &H100_80GB, 8),
    m(Eks, "p5e.48xlarge", &H200, 8),
    m(Eks, "p5en.48xlarge", &H200, 8),
    m(Eks, "g5.xlarge", &A10G, 1),
    m(Eks, "g5.2xlarge", &A10G, 1),
    m(Eks, "g5.4xlarge", &A10G, 1),
    m(Eks, "g5.8xlarge", &A10G, 1),
    m(Eks, "g5.16xlarge", &A10G, 1),
    m(Eks, "g5.12xlarge", &A10G, 4),
    m(Eks, "g5.24xlarge", &A10G, 4),
    m(Eks, "g5.48xlarge", &A10G, 8),
    m(Eks, "g6.xlarge", &L4, 1),
    m(Eks, "g6.2xlarge", &L4, 1),
    m(Eks, "g6.4xlarge", &L4, 1),
    m(Eks, "g6.8xlarge", &L4, 1),
    m(Eks, "g6.16xlarge", &L4, 1),
    m(Eks, "g6.12xlarge", &L4, 4),
    m(Eks, "g6.24xlarge", &L4, 4),
    m(Eks, "g6.48xlarge", &L4, 8),
    m(Eks, "g6e.xlarge", &L40S, 1),
    m(Eks, "g6e.2xlarge", &L40S, 1),
    m(Eks, "g6e.4xlarge", &L40S, 1),
    m(Eks, "g6e.8xlarge", &L40S, 1),
    m(Eks, "g6e.16xlarge", &L40S, 1),
    m(Eks, "g6e.12xlarge", &L40S, 4),
    m(Eks, "g6e.24xlarge", &L40S, 4),
    m(Eks, "g6e.48xlarge", &L40S, 8),
    m(Eks, "g4dn.xlarge", &T4, 1),
    m(Eks, "g4dn.2xlarge", &T4, 1),
    m(Eks, "g4dn.4xlarge", &T4, 1),
    m(Eks, "g4dn.8xlarge", &T4, 1),
    m(Eks, "g4dn.16xlarge", &T4, 1),
    m(Eks, "g4dn.12xlarge", &T4, 4),
    m(Eks, "g4dn.metal", &T4, 8),
];
