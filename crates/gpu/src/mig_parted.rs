//! The MIG manager's config file (NVIDIA/mig-parted's `version: v1` document: `mig-configs`, each
//! name a list of `devices` / `mig-enabled` / `mig-devices` entries), read only as far as the
//! provider needs it: which config names a file offers.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde::de::IgnoredAny;

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mig-configs", default)]
    mig_configs: BTreeMap<String, IgnoredAny>,
}

/// The config names a MIG manager config file offers; None when the text is not such a file.
pub fn config_names(text: &str) -> Option<BTreeSet<String>> {
    let file: File = serde_saphyr::from_str(text).ok()?;
    Some(file.mig_configs.into_keys().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_of_a_file_and_nothing_of_other_text() {
        let text = "version: v1\nmig-configs:\n  all-disabled:\n  - devices: all\n    \
            mig-enabled: false\n  \"two-halves\":\n  - devices: [0, 1]\n    mig-enabled: true\n    \
            mig-devices: {3g.20gb: 2}\n";
        assert_eq!(
            config_names(text),
            Some(BTreeSet::from(["all-disabled".into(), "two-halves".into()]))
        );
        assert_eq!(config_names("version: v1\n"), Some(BTreeSet::new()));
        assert_eq!(config_names("- a list"), None);
    }
}
