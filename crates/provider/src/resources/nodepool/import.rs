//! Import by the clouds' own IDs.

use crate::cloud::Location;
use crate::provider::Settings;

/// Parses the clouds' own IDs (see the import diagnostic for the three forms).
pub fn parse_import_id(id: &str, settings: &Settings) -> Option<(Location, String)> {
    let parts: Vec<&str> = id.trim_matches('/').split('/').collect();
    let eq = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
    if parts.len() == 10
        && eq(parts[0], "subscriptions")
        && eq(parts[2], "resourceGroups")
        && eq(parts[4], "providers")
        && eq(parts[5], "Microsoft.ContainerService")
        && eq(parts[6], "managedClusters")
        && eq(parts[8], "agentPools")
    {
        let loc = Location::Aks {
            subscription_id: parts[1].into(),
            resource_group: parts[3].into(),
            cluster: parts[7].into(),
        };
        return Some((loc, parts[9].into()));
    }
    if parts.len() == 8
        && parts[0] == "projects"
        && parts[2] == "locations"
        && parts[4] == "clusters"
        && parts[6] == "nodePools"
    {
        let loc = Location::Gke {
            project: parts[1].into(),
            location: parts[3].into(),
            cluster: parts[5].into(),
        };
        return Some((loc, parts[7].into()));
    }
    if let Some((cluster, group)) = id.split_once(':')
        && !cluster.is_empty()
        && !group.is_empty()
        && !id.contains('/')
    {
        let region = settings.cloud.aws.region.clone()?;
        return Some((
            Location::Eks {
                region,
                cluster: cluster.into(),
            },
            group.into(),
        ));
    }
    None
}
