//! How a sharing mode is named where a user picks or reads one among many: the name of its block
//! (`mig`, `time_slicing`, `mps`, or `none` for whole GPUs), which the `sharing` filters of the
//! node pool and Karpenter queries take, and the short label `terraform query` shows beside a
//! pool. Both pool resources list their pools with these, so they stand with the modes.

use super::modes::SharingMode;

impl SharingMode {
    /// Every mode's name, in the order the filters list them.
    pub const NAMES: &'static [&'static str] = &["none", "mig", "time_slicing", "mps"];

    /// The mode's name: its block's, or `none`.
    pub fn name(&self) -> &'static str {
        match self {
            SharingMode::None => "none",
            SharingMode::Mig { .. } => "mig",
            SharingMode::TimeSlicing { .. } => "time_slicing",
            SharingMode::Mps { .. } => "mps",
        }
    }

    /// The mode as a query shows it: `MIG 1g.5gb`, `time-slicing x10`, `MPS x4`, `whole GPUs`.
    pub fn label(&self) -> String {
        match self {
            SharingMode::None => "whole GPUs".to_string(),
            SharingMode::Mig { profile, .. } => format!("MIG {profile}"),
            SharingMode::TimeSlicing { replicas, .. } => format!("time-slicing x{replicas}"),
            SharingMode::Mps { replicas, .. } => format!("MPS x{replicas}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_one_of_the_names() {
        let modes = [
            SharingMode::None,
            SharingMode::Mig {
                profile: "1g.5gb".into(),
                strategy: Default::default(),
                gke_sharing: None,
            },
            SharingMode::TimeSlicing {
                replicas: 10,
                rename_by_default: false,
                fail_requests_greater_than_one: false,
            },
            SharingMode::mps(4),
        ];
        let names: Vec<&str> = modes.iter().map(SharingMode::name).collect();
        assert_eq!(names, SharingMode::NAMES);
        let labels: Vec<String> = modes.iter().map(SharingMode::label).collect();
        assert_eq!(
            labels,
            ["whole GPUs", "MIG 1g.5gb", "time-slicing x10", "MPS x4"]
        );
    }
}
