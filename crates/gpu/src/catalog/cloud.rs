//! The cloud a pool lives on. Nearly every rule of the domain branches on it (who advertises the GPUs,
//! which MIG profiles a pool can ask for, how a pool is named and selected), so it stands on its own rather
//! than inside the tables it keys.

use crate::error::{DomainError, Field, summary};
use std::fmt;

/// The three clouds whose node pools we manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cloud {
    Aks,
    Gke,
    Eks,
}

impl Cloud {
    pub const ALL: [Cloud; 3] = [Cloud::Aks, Cloud::Gke, Cloud::Eks];

    /// Parses the provider's spelling: `aks`, `gke` or `eks` (case-insensitive).
    pub fn parse(s: &str) -> Result<Cloud, DomainError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "aks" => Ok(Cloud::Aks),
            "gke" => Ok(Cloud::Gke),
            "eks" => Ok(Cloud::Eks),
            _ => Err(DomainError::new(
                Field::Cloud,
                summary::UNKNOWN_CLOUD,
                format!("\"{s}\" is not a cloud this provider knows. Valid values: aks, gke, eks."),
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Cloud::Aks => "aks",
            Cloud::Gke => "gke",
            Cloud::Eks => "eks",
        }
    }

    /// The name prose uses (`AKS`), for error details; `as_str` is the spelling users write.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Cloud::Aks => "AKS",
            Cloud::Gke => "GKE",
            Cloud::Eks => "EKS",
        }
    }
}

impl fmt::Display for Cloud {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
