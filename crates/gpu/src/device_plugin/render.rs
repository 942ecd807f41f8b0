//! The model as the text we write. This is the strict half of the pair: `parse` accepts any spelling the
//! plugin would, `render` writes exactly one, so a config we deploy can be compared with a cluster's by text.

use super::{CONFIG_VERSION, DevicePluginConfig};
use crate::error::DomainError;
use std::fmt;

impl DevicePluginConfig {
    /// Renders the document the plugin reads, in a fixed layout. The empty config renders as `""`, the
    /// chart's spelling of the "all" config. Fails for a model the plugin would refuse.
    pub fn render(&self) -> Result<String, DomainError> {
        self.validate()?;
        if self.is_empty() {
            return Ok(String::new());
        }
        let mut out = format!("version: {CONFIG_VERSION}\n");
        if self.mig_strategy.is_some() || self.allocation_policy.is_some() {
            out.push_str("flags:\n");
        }
        if let Some(strategy) = self.mig_strategy {
            out.push_str(&format!("  migStrategy: {}\n", strategy.as_str()));
        }
        if let Some(policy) = self.allocation_policy {
            out.push_str("  plugin:\n");
            out.push_str(&format!(
                "    sharedDevicesAllocationPolicy: {}\n",
                policy.as_str()
            ));
        }
        if let Some(s) = &self.sharing {
            out.push_str("sharing:\n");
            out.push_str(&format!("  {}:\n", s.kind.key()));
            out.push_str(&format!("    renameByDefault: {}\n", s.rename_by_default));
            out.push_str(&format!(
                "    failRequestsGreaterThanOne: {}\n",
                s.fail_requests_greater_than_one
            ));
            out.push_str("    resources:\n");
            for r in &s.resources {
                // Names passed validate(): DNS characters only, so a plain scalar is always safe.
                out.push_str(&format!("    - name: {}\n", r.name));
                out.push_str(&format!("      replicas: {}\n", r.replicas));
            }
        }
        Ok(out)
    }
}

impl fmt::Display for DevicePluginConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.render() {
            Ok(text) => f.write_str(&text),
            Err(e) => write!(f, "# invalid config: {}", e.detail),
        }
    }
}
